//! Crash test: a child process writes with `sync` and is killed with SIGKILL at a random
//! moment; after reopening, every acknowledged write is there and there are no holes.

use crate::common;

use std::time::Duration;

use bloomkv::{Db, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const CHILD_ENV: &str = "BLOOMKV_CRASH_CHILD_DIR";

/// Runs only as the child: writes keys 0, 1, 2, ... with `sync = true`, printing each index
/// once the write is acknowledged, until killed.
#[test]
fn crash_child_writer() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = Db::open(&dir, common::small_tree_options()).expect("child open");
    let start = next_index(&db);
    let mut i = start;
    loop {
        let sync = WriteOptions::synced();
        let mut batch = bloomkv::WriteBatch::new();
        batch.put(common::key(i), common::value(i, 0));
        db.write_opt(batch, &sync).expect("child write");
        println!("{i}");
        if i % 500 == 499 {
            db.flush().expect("child flush");
        }
        i += 1;
    }
}

/// The first index not yet in the store (the store holds a prefix 0..n).
fn next_index(db: &Db) -> u64 {
    db.iter().count() as u64
}

#[test]
fn killed_writer_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    let mut acknowledged_total = None;
    for round in 0..12 {
        let after = Duration::from_millis(rng.gen_range(50..400));
        if let Some(last) = common::run_child_and_kill(
            &common::test_name(module_path!(), "crash_child_writer"),
            CHILD_ENV,
            dir.path(),
            after,
        ) {
            acknowledged_total = Some(acknowledged_total.map_or(last, |t: u64| t.max(last)));
        }
        let db = Db::open(dir.path(), common::small_tree_options()).expect("reopen after kill");
        let present: Vec<Vec<u8>> = db.iter().map(|r| r.unwrap().0).collect();
        // No holes: the keys present are exactly 0..n, in order, with their values.
        for (i, k) in present.iter().enumerate() {
            assert_eq!(
                k,
                &common::key(i as u64),
                "round {round}: hole before key {i}"
            );
        }
        if let Some(last) = acknowledged_total {
            assert!(
                present.len() as u64 > last,
                "round {round}: acknowledged write {last} lost ({} present)",
                present.len()
            );
            assert_eq!(
                db.get(common::key(last)).unwrap(),
                Some(common::value(last, 0))
            );
        }
    }
    assert!(
        acknowledged_total.unwrap_or(0) > 0,
        "the child never acknowledged a write"
    );
}
