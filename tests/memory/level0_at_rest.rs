//! Level 0 compacted below its trigger once writes rest and lookups ask it
//! (`Options::compact_level0_at_rest`).

use std::time::{Duration, Instant};

use bloomkv::{Db, KeyspaceOptions, Options, DEFAULT_KEYSPACE};

const KEYS: u32 = 2000;
const REST: Duration = Duration::from_millis(300);

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i}-{round}").into_bytes()
}

/// A store with two level-0 tables (the trigger is four), each holding every key.
fn store_with_two_level0_tables(dir: &std::path::Path, rest: Option<Duration>) -> Db {
    let options = Options::default().compact_level0_at_rest(rest);
    let db = Db::open(dir, options).unwrap();
    for round in 0..2 {
        for i in 0..KEYS {
            db.put(key(i), value(i, round)).unwrap();
        }
        db.flush().unwrap();
    }
    db.wait_for_background_work().unwrap();
    assert_eq!(level0_tables(&db), 2);
    db
}

fn level0_tables(db: &Db) -> usize {
    db.stats().levels[0].tables
}

/// Gets that reach the tables while level 0 holds two: more than the ten thousand lookups that
/// make a compaction of level 0 worth its writes.
const LOOKUPS: u32 = 12_000;

/// Absent-key gets within level 0's range, each asking both level-0 tables' filters, of the
/// `range`-th keys.
fn read_absent_keys_in(db: &Db, range: std::ops::Range<u32>) {
    for i in range {
        let absent = format!("key{:06}x", i % KEYS).into_bytes();
        assert_eq!(db.get(&absent).unwrap(), None);
    }
}

fn read_absent_keys(db: &Db) {
    read_absent_keys_in(db, 0..LOOKUPS);
}

/// Filter probes a get over `gets` absent-key gets.
fn probes_a_get(db: &Db, gets: std::ops::Range<u32>) -> f64 {
    let before = db.stats().filter_probes;
    let n = gets.len() as f64;
    read_absent_keys_in(db, gets);
    (db.stats().filter_probes - before) as f64 / n
}

/// Waits until level 0 is empty and the compaction that emptied it is counted (the version
/// without the tables is published before the count).
fn wait_for_level0_to_empty(db: &Db, compactions_before: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let stats = db.stats();
        if stats.levels[0].tables == 0 && stats.compactions > compactions_before {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn assert_latest_values(db: &Db) {
    for i in 0..KEYS {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 1)), "key {i}");
    }
}

#[test]
fn level0_below_its_trigger_is_compacted_once_writes_rest_and_lookups_ask_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_two_level0_tables(dir.path(), Some(REST));
    let compactions_before = db.stats().compactions;
    // Below the ten thousand lookups, each absent get asks both level-0 tables (but for
    // the keys past the last one).
    let before = probes_a_get(&db, 0..5000);
    assert!(before > 1.99, "{before} probes a get");
    read_absent_keys_in(&db, 5000..LOOKUPS);
    assert!(
        wait_for_level0_to_empty(&db, compactions_before),
        "level 0 still holds {} tables",
        level0_tables(&db)
    );
    let stats = db.stats();
    assert_eq!(stats.level0_compactions_at_rest, 1);
    let deeper: usize = stats.levels[1..].iter().map(|l| l.tables).sum();
    assert_eq!(deeper, 1, "the keys went into one table below level 0");
    assert_latest_values(&db);
    // Now they ask the one table below.
    let after = probes_a_get(&db, 0..LOOKUPS);
    assert!(after <= 1.0, "{after} probes a get");
    drop(db);
    // The compacted shape is what the store reopens with.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(level0_tables(&db), 0);
    assert_latest_values(&db);
}

#[test]
fn a_store_nobody_reads_keeps_level0_until_lookups_ask_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_two_level0_tables(dir.path(), Some(REST));
    // Writes rest three times as long as the rest asks, but nothing reads level 0.
    std::thread::sleep(REST * 3);
    assert_eq!(level0_tables(&db), 2);
    let compactions_before = db.stats().compactions;
    read_absent_keys(&db);
    assert!(wait_for_level0_to_empty(&db, compactions_before));
    assert_latest_values(&db);
}

#[test]
fn a_store_given_no_rest_waits_for_the_trigger() {
    let dir = tempfile::tempdir().unwrap();
    let db = store_with_two_level0_tables(dir.path(), None);
    read_absent_keys(&db);
    std::thread::sleep(REST * 3);
    assert_eq!(level0_tables(&db), 2);
    assert_eq!(db.stats().level0_compactions_at_rest, 0);
    assert_latest_values(&db);
}

#[test]
fn a_keyspace_nobody_reads_keeps_its_level0_while_another_is_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options::default().compact_level0_at_rest(Some(REST)),
    )
    .unwrap();
    let logs = db.keyspace("logs", KeyspaceOptions::new()).unwrap();
    for round in 0..2 {
        for i in 0..KEYS {
            db.put(key(i), value(i, round)).unwrap();
            logs.put(key(i), value(i, round)).unwrap();
        }
        db.flush().unwrap();
    }
    db.wait_for_background_work().unwrap();
    let level0_of = |name: &str| {
        let stats = db.stats();
        let keyspace = stats.keyspaces.iter().find(|k| k.name == name).unwrap();
        keyspace.levels[0].tables
    };
    assert_eq!((level0_of(DEFAULT_KEYSPACE), level0_of("logs")), (2, 2));
    let compactions_before = db.stats().compactions;
    read_absent_keys(&db);
    assert!(wait_for_level0_to_empty(&db, compactions_before));
    // Reads of the default keyspace do not compact the other's level 0, however long the
    // writes rest.
    std::thread::sleep(REST * 3);
    assert_eq!(level0_of("logs"), 2);
    for i in 0..KEYS {
        assert_eq!(logs.get(key(i)).unwrap(), Some(value(i, 1)), "key {i}");
    }
    assert_latest_values(&db);
}
