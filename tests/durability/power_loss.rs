//! Simulated power loss through `FaultFs`: a workload of synced and unsynced writes, flushes
//! and compactions runs until the power is cut after a random number of file-system
//! operations; everything not yet synced (file bytes, directory entries, directories whose
//! parent was not synced) is then lost, torn or riddled with lost pages according to a
//! `CrashMode`, and the store is reopened. After every reboot:
//! - the store opens and `Db::check` finds no damage (torn WAL tails and unsynced
//!   holes are allowed);
//! - the keys present are exactly `key(0) .. key(n)` (a prefix of the write order) with their
//!   values;
//! - every write acknowledged as durable (a synced write, or any write before a successful
//!   `flush`) is among them.
//!
//! Each seed runs several power cycles on the same store, and some cuts land inside
//! `Db::open` itself, so recovery is cut too.
//!
//! `cargo test --test durability power_loss::` runs a bounded number of seeds;
//! `cargo test --test durability power_loss:: -- --ignored` runs many more.

use crate::common;

use std::sync::Arc;

use bloomkv::fs::{CrashMode, FaultFs};
use bloomkv::{Db, DropCause, Options, WriteBatch, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const DIR: &str = "/store";

/// How a seed's workload writes.
#[derive(Clone, Copy)]
struct Profile {
    memtable_size: usize,
    /// The chance that a write is synced.
    sync_chance: f64,
    /// Out of 1,000 operations, how many are flushes and how many full compactions (each
    /// starts a new WAL).
    flushes_per_mille: u32,
    compactions_per_mille: u32,
}

/// Small memtables, frequent flushes and compactions and a fifth of the writes synced, so
/// that the tree changes shape often; but under `LosePages` a larger memtable and few syncs,
/// flushes and compactions, so that the unsynced part of a WAL spans several pages and a lost
/// page can leave a hole with intact records after it.
fn profile(mode: CrashMode) -> Profile {
    match mode {
        CrashMode::LosePages { .. } => Profile {
            memtable_size: 48 * 1024,
            sync_chance: 0.005,
            flushes_per_mille: 2,
            compactions_per_mille: 1,
        },
        _ => Profile {
            memtable_size: 4 * 1024,
            sync_chance: 0.2,
            flushes_per_mille: 20,
            compactions_per_mille: 10,
        },
    }
}

fn options(fs: &FaultFs, profile: Profile) -> Options {
    let mut options = common::small_tree_options().file_system(Arc::new(fs.clone()));
    options.memtable_size = profile.memtable_size;
    options
}

/// Counts what the runs did, for the report.
#[derive(Default, Debug)]
struct Tally {
    cycles: u64,
    writes_acknowledged: u64,
    cuts_during_open: u64,
    flushes: u64,
    compactions: u64,
    wal_drops_seen: u64,
    unsynced_holes_seen: u64,
}

/// Opens the store after a reboot, retrying when a power cut lands inside the open itself.
fn reopen(
    fs: &FaultFs,
    profile: Profile,
    rng: &mut SmallRng,
    tally: &mut Tally,
    seed: u64,
    cycle: u32,
) -> Db {
    loop {
        let cut_open = rng.gen_bool(0.25);
        if cut_open {
            fs.cut_power_after(rng.gen_range(0..12));
        }
        match Db::open(DIR, options(fs, profile)) {
            Ok(db) => {
                fs.clear_faults();
                return db;
            }
            Err(e) if cut_open && fs.power_is_cut() => {
                tally.cuts_during_open += 1;
                fs.crash();
                let _ = e;
            }
            Err(e) => panic!("seed {seed} cycle {cycle}: reopen failed: {e}"),
        }
    }
}

/// Checks the store's state after a reboot; returns the number of keys present.
fn check_prefix(db: &Db, durable: u64, seed: u64, cycle: u32) -> u64 {
    let mut n = 0u64;
    for item in db.iter() {
        let (k, v) = item.unwrap_or_else(|e| panic!("seed {seed} cycle {cycle}: scan: {e}"));
        assert_eq!(
            k,
            common::key(n),
            "seed {seed} cycle {cycle}: hole: key {n} missing but a later key is present"
        );
        assert_eq!(
            v,
            common::value(n, 0),
            "seed {seed} cycle {cycle}: wrong value"
        );
        n += 1;
    }
    assert!(
        n >= durable,
        "seed {seed} cycle {cycle}: {durable} writes were durable, only {n} survived"
    );
    if n > 0 {
        assert_eq!(
            db.get(common::key(n - 1)).unwrap(),
            Some(common::value(n - 1, 0))
        );
    }
    assert_eq!(db.get(common::key(n)).unwrap(), None);
    // Let background work settle so no compaction deletes files while the check reads them.
    db.wait_for_background_work().unwrap();
    let report = db.check();
    assert!(
        report.is_clean(),
        "seed {seed} cycle {cycle}: check found {:?}",
        report.problems
    );
    n
}

/// Runs the workload from key `next` until the power is cut or it has done its operations.
/// Returns how many keys (from key 0) are guaranteed durable.
fn workload(
    db: &Db,
    profile: Profile,
    rng: &mut SmallRng,
    next: u64,
    durable: u64,
    tally: &mut Tally,
) -> u64 {
    let mut durable = durable;
    let mut i = next;
    let writes = rng.gen_range(50..2500);
    for _ in 0..writes {
        let action = rng.gen_range(0..1000);
        let result = if action < profile.flushes_per_mille {
            db.flush().map(|()| {
                // Everything written before a successful flush is in a synced table.
                durable = i;
            })
        } else if action < profile.flushes_per_mille + profile.compactions_per_mille {
            db.compact().map(|()| durable = i)
        } else {
            let sync = rng.gen_bool(profile.sync_chance);
            let batch_len = rng.gen_range(1..4);
            let mut batch = WriteBatch::new();
            for j in 0..batch_len {
                batch.put(common::key(i + j), common::value(i + j, 0));
            }
            db.write_opt(batch, &WriteOptions::default().sync(sync))
                .map(|()| {
                    i += batch_len;
                    tally.writes_acknowledged += batch_len;
                    if sync {
                        durable = i;
                    }
                })
        };
        if result.is_err() {
            break;
        }
    }
    durable
}

fn run_seed(seed: u64, cycles: u32, tally: &mut Tally) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let fs = FaultFs::new();
    let mode = common::crash_mode(seed);
    let profile = profile(mode);
    fs.set_crash_mode(mode);
    let mut db = Db::open(DIR, options(&fs, profile)).unwrap();
    let mut present = 0u64;
    let mut durable = 0u64;
    for cycle in 0..cycles {
        fs.cut_power_after(rng.gen_range(0..3000));
        durable = workload(&db, profile, &mut rng, present, durable, tally);
        let stats = db.stats();
        tally.flushes += stats.flushes;
        tally.compactions += stats.compactions;
        drop(db);
        fs.power_loss();
        tally.cycles += 1;
        db = reopen(&fs, profile, &mut rng, tally, seed, cycle);
        let report = db.recovery_report();
        tally.wal_drops_seen += report.dropped.len() as u64;
        tally.unsynced_holes_seen += report
            .dropped
            .iter()
            .filter(|d| d.cause == DropCause::UnsyncedHole)
            .count() as u64;
        present = check_prefix(&db, durable, seed, cycle);
        // What survived is durable now: recovery wrote it to a synced table.
        durable = present;
    }
}

fn run_seeds(seeds: std::ops::Range<u64>, cycles: u32) {
    let mut tally = Tally::default();
    let start = std::time::Instant::now();
    for seed in seeds.clone() {
        run_seed(seed, cycles, &mut tally);
    }
    eprintln!(
        "power_loss: seeds {seeds:?}, {tally:?}, {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn a_new_store_survives_a_power_loss_right_after_its_first_synced_write() {
    // The store's directory and the one above it are created by `Db::open`: both entries
    // must be durable before a synced write can be.
    let fs = FaultFs::new();
    let dir = "/new/store";
    let profile = profile(CrashMode::DropUnsynced);
    let db = Db::open(dir, options(&fs, profile)).unwrap();
    db.write_opt(
        {
            let mut batch = WriteBatch::new();
            batch.put("k", "v");
            batch
        },
        &WriteOptions::synced(),
    )
    .unwrap();
    drop(db);
    fs.power_loss();
    let db = Db::open(dir, options(&fs, profile).create_if_missing(false))
        .unwrap_or_else(|e| panic!("the store vanished with its directory: {e}"));
    assert_eq!(db.get("k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn acknowledged_synced_writes_survive_power_loss() {
    run_seeds(0..100, 4);
}

#[test]
#[ignore = "long: many more seeds; run with --ignored"]
fn acknowledged_synced_writes_survive_power_loss_long() {
    run_seeds(1000..6000, 6);
}

/// Dropping a store does what `close` does: its unsynced writes are synced, so a power loss
/// after the drop keeps them.
#[test]
fn writes_before_a_drop_survive_a_power_loss() {
    for mode in [CrashMode::DropUnsynced, CrashMode::GarbageTail { seed: 7 }] {
        let fs = FaultFs::new();
        let dir = "/dropped";
        let profile = profile(mode);
        let db = Db::open(dir, options(&fs, profile)).unwrap();
        for i in 0..100u32 {
            db.put(format!("k{i}"), format!("v{i}")).unwrap();
        }
        drop(db);
        fs.power_loss();
        let db = Db::open(dir, options(&fs, profile).create_if_missing(false)).unwrap();
        for i in 0..100u32 {
            assert_eq!(
                db.get(format!("k{i}")).unwrap(),
                Some(format!("v{i}").into_bytes()),
                "{mode:?}: key k{i} lost"
            );
        }
    }
}

/// A checkpoint into a path whose directories it creates survives a power loss: each new
/// directory is synced into its parent, not only the last one.
#[test]
fn a_checkpoint_into_new_nested_directories_survives_a_power_loss() {
    let fs = FaultFs::new();
    let profile = profile(CrashMode::DropUnsynced);
    let db = Db::open("/s", options(&fs, profile)).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i}"), format!("v{i}")).unwrap();
    }
    let cp = db.checkpoint("/b/2026/ck1").unwrap();
    assert_eq!(cp.dir, std::path::PathBuf::from("/b/2026/ck1"));
    fs.power_loss();
    let copy = Db::open(
        "/b/2026/ck1",
        options(&fs, profile).create_if_missing(false),
    )
    .unwrap_or_else(|e| panic!("the checkpoint vanished: {e}"));
    for i in 0..100u32 {
        assert_eq!(
            copy.get(format!("k{i}")).unwrap(),
            Some(format!("v{i}").into_bytes())
        );
    }
}

/// `sync_wal` makes every write acknowledged before it durable; writes after it are not.
#[test]
fn sync_wal_makes_earlier_unsynced_writes_survive_a_power_loss() {
    let fs = FaultFs::new();
    let profile = profile(CrashMode::DropUnsynced);
    let db = Db::open("/synced", options(&fs, profile)).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i}"), format!("v{i}")).unwrap();
    }
    db.sync_wal().unwrap();
    db.put("after", "the sync").unwrap();
    // The power goes while the store is open: nothing after the sync is made durable.
    fs.power_loss();
    drop(db);
    let db = Db::open("/synced", options(&fs, profile).create_if_missing(false)).unwrap();
    for i in 0..100u32 {
        assert_eq!(
            db.get(format!("k{i}")).unwrap(),
            Some(format!("v{i}").into_bytes()),
            "k{i} was acknowledged before sync_wal"
        );
    }
    assert_eq!(db.get("after").unwrap(), None);
}

/// A frozen memtable's log is synced by the first synced write, `sync_wal`, `close` or drop
/// after it, not when it is frozen: while no flush can finish (table appends fail), writes
/// spanning several memtables survive a power loss after one synced write, and every way of
/// making writes durable syncs the earlier logs too. Without any of them, a freeze alone
/// makes nothing durable, and the recovered store holds a prefix of the writes.
#[test]
fn a_durable_write_makes_the_logs_of_frozen_memtables_durable_too() {
    for how in ["synced put", "sync_wal", "close", "drop", "nothing"] {
        let fs = FaultFs::new();
        let dir = "/frozen";
        let mut options = options(&fs, profile(CrashMode::DropUnsynced));
        options.memtable_size = 16 * 1024;
        options.tuning.max_immutable_memtables = 8;
        let db = Db::open(dir, options.clone()).unwrap();
        fs.set_table_appends_fail(true);
        let value = vec![b'v'; 100];
        // About 40 KiB: three memtables, two of them frozen and waiting for a flush.
        let writes = 350u32;
        for i in 0..writes {
            db.put(format!("k{i:05}"), &value).unwrap();
        }
        let frozen = db.stats().immutable_memtables;
        assert!(frozen >= 2, "{how}: {frozen} frozen memtables");
        // Whether the writes were made durable, and the store when it is still open.
        let (durable, open) = match how {
            "synced put" => {
                let mut batch = WriteBatch::new();
                batch.put("last", &value);
                db.write_opt(batch, &WriteOptions::synced()).unwrap();
                (true, Some(db))
            }
            "sync_wal" => {
                db.sync_wal().unwrap();
                (true, Some(db))
            }
            "close" => {
                db.close().unwrap();
                (true, None)
            }
            "drop" => {
                drop(db);
                (true, None)
            }
            _ => (false, Some(db)),
        };
        fs.power_loss();
        // The process goes with the power: the store still open is dropped before the
        // reopen (nothing it does now is durable), so that its flush thread, retrying the
        // flushes that failed, does not write the files the reopen writes.
        drop(open);
        let db = Db::open(dir, options.create_if_missing(false)).unwrap();
        let survived = (0..writes)
            .take_while(|i| db.get(format!("k{i:05}")).unwrap().is_some())
            .count() as u32;
        let after_gap = (survived..writes).any(|i| db.get(format!("k{i:05}")).unwrap().is_some());
        assert!(
            !after_gap,
            "{how}: a write survived an earlier one that did not"
        );
        match durable {
            true => assert_eq!(survived, writes, "{how}: writes lost"),
            false => assert!(survived < writes, "a freeze synced its log"),
        }
    }
}
