//! The long crash test: a child process writes (synced and unsynced batches, flushes,
//! compactions) and is killed with SIGKILL at a random moment, 200 times on one store. After
//! each restart the store opens, holds a prefix of the write order with the right values, and
//! holds every write the child acknowledged, synced or not: an unsynced write is handed to
//! the operating system before the call returns, so it survives the death of the process.
//!
//! Run it with `cargo test --test durability crash_long:: -- --ignored --nocapture` (about 70 s).

use crate::common;

use std::time::{Duration, Instant};

use bloomkv::check::check_store;
use bloomkv::{Db, WriteBatch, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const CHILD_ENV: &str = "BLOOMKV_CRASH_LONG_DIR";
const CYCLES: u64 = 200;

/// Runs only as the child: continues the key sequence where the store ends, printing each
/// index once its write is acknowledged, until killed.
#[test]
fn crash_long_child_writer() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = Db::open(&dir, common::small_tree_options()).expect("child open");
    let mut i = db.iter().count() as u64;
    let mut rng = SmallRng::seed_from_u64(i);
    loop {
        match rng.gen_range(0..1000) {
            0..=4 => db.flush().expect("child flush"),
            5 => db.compact().expect("child compact"),
            _ => {
                let n = rng.gen_range(1..5);
                let mut batch = WriteBatch::new();
                for j in i..i + n {
                    batch.put(common::key(j), common::value(j, 0));
                }
                let sync = rng.gen_bool(0.1);
                db.write_opt(batch, &WriteOptions::default().sync(sync))
                    .expect("child write");
                i += n;
                println!("{}", i - 1);
            }
        }
    }
}

#[test]
#[ignore = "long: 200 kill cycles; run with --ignored"]
fn crash_long_every_acknowledged_write_survives_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(2024);
    let mut acked: Option<u64> = None;
    let start = Instant::now();
    for cycle in 0..CYCLES {
        let after = Duration::from_millis(rng.gen_range(20..250));
        let last = common::run_child_and_kill(
            &common::test_name(module_path!(), "crash_long_child_writer"),
            CHILD_ENV,
            dir.path(),
            after,
        );
        if let Some(last) = last {
            acked = Some(acked.map_or(last, |a| a.max(last)));
        }
        let db = Db::open(dir.path(), common::small_tree_options())
            .unwrap_or_else(|e| panic!("cycle {cycle}: reopen: {e}"));
        let mut n = 0u64;
        for item in db.iter() {
            let (k, v) = item.unwrap();
            assert_eq!(k, common::key(n), "cycle {cycle}: hole before key {n}");
            assert_eq!(v, common::value(n, 0), "cycle {cycle}: wrong value");
            n += 1;
        }
        if let Some(last) = acked {
            assert!(
                n > last,
                "cycle {cycle}: acknowledged write {last} lost ({n} present)"
            );
        }
        db.wait_for_background_work().unwrap();
        drop(db);
        let report = check_store(dir.path()).unwrap();
        assert!(report.is_clean(), "cycle {cycle}: {:?}", report.problems);
    }
    // A child that never ran its writes (a wrong test name runs nothing) acknowledges none.
    assert!(acked.is_some(), "the child never acknowledged a write");
    eprintln!(
        "crash_long: {CYCLES} kills, {} writes acknowledged, {:.1} s",
        acked.map_or(0, |a| a + 1),
        start.elapsed().as_secs_f64()
    );
}
