//! Range deletions, expiry's samples and compactions under SIGKILL: a child applies a fixed
//! sequence of puts and range deletions, each synced, flushing and compacting as it goes, and
//! is killed at a random moment; the reopened store holds exactly the state after a prefix of
//! the sequence that includes every operation acknowledged.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use bloomkv::{Db, WriteBatch, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const CHILD_ENV: &str = "BLOOMKV_RANGE_CRASH_CHILD_DIR";

/// Operation `j` of the sequence: most put key `j % 400` (keys are written again and again),
/// every seventh deletes a range of 30 keys below it.
fn apply(j: u64, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, batch: &mut WriteBatch) {
    if j % 7 == 6 {
        let start = common::key(j % 400 / 2);
        let end = common::key(j % 400 / 2 + 30);
        batch.delete_range(&start, &end);
        let doomed: Vec<Vec<u8>> = model.range(start..end).map(|(k, _)| k.clone()).collect();
        for k in doomed {
            model.remove(&k);
        }
    } else {
        let (k, v) = (common::key(j % 400), common::value(j, 0));
        batch.put(&k, &v);
        model.insert(k, v);
    }
}

/// Runs only as the child: applies operations 0, 1, 2, ... each synced, printing each index
/// once acknowledged, until killed.
#[test]
fn range_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let options = common::small_tree_options().ttl(Duration::from_secs(3600));
    let db = Db::open(&dir, options).expect("child open");
    let mut model = BTreeMap::new();
    for j in 0.. {
        let mut batch = WriteBatch::new();
        apply(j, &mut model, &mut batch);
        db.write_opt(batch, &WriteOptions::synced())
            .expect("child write");
        println!("{j}");
        if j % 300 == 299 {
            db.flush().expect("child flush");
        }
        if j % 1000 == 999 {
            db.compact().expect("child compact");
        }
    }
}

#[test]
fn a_killed_writer_of_range_deletions_loses_no_acknowledged_one() {
    let mut rng = SmallRng::seed_from_u64(17);
    for round in 0..6 {
        let dir = tempfile::tempdir().unwrap();
        let after = Duration::from_millis(rng.gen_range(100..600));
        let acknowledged = common::run_child_and_kill(
            &common::test_name(module_path!(), "range_crash_child"),
            CHILD_ENV,
            dir.path(),
            after,
        );
        let options = common::small_tree_options().ttl(Duration::from_secs(3600));
        let db = Db::open(dir.path(), options).expect("reopen after kill");
        let present: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|r| r.unwrap()).collect();
        // The state after operations 0..n, for n from those acknowledged to one more.
        let first = acknowledged.map_or(0, |a| a + 1);
        let mut model = BTreeMap::new();
        let mut states = Vec::new();
        for j in 0..first + 1 {
            if j == first {
                states.push(model.clone());
            }
            apply(j, &mut model, &mut WriteBatch::new());
        }
        states.push(model);
        let matches = states.iter().any(|state| {
            let expected: Vec<(Vec<u8>, Vec<u8>)> =
                state.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            present == expected
        });
        assert!(
            matches,
            "round {round}: {acknowledged:?} acknowledged, store differs"
        );
        // Compacted whole after the reopen, it still reads the same.
        db.compact().unwrap();
        let again: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|r| r.unwrap()).collect();
        assert_eq!(again, present, "round {round}");
    }
}
