//! WAL recovery through the public API: a store on `FaultFs` is written, one of its WAL files
//! is damaged the way a power loss or a bad disk damages it, and the store is reopened. What
//! opens, what is kept, what is refused and what `Db::recovery_report` says are checked
//! against the rules in docs/format-log-manifest.md.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv::entry::MAX_SEQ;
use bloomkv::filename::{log_file_name, parse_file_name};
use bloomkv::fs::{FaultFs, FileSystem};
use bloomkv::wal::LogWriter;
use bloomkv::{Db, DropCause, Error, Options, WalRecoveryMode, WriteBatch, WriteOptions};

const DIR: &str = "/store";
const PAGE: usize = 4096;

fn options(fs: &FaultFs) -> Options {
    Options::default().file_system(Arc::new(fs.clone()))
}

fn key(i: u64) -> String {
    format!("key{i:06}")
}

fn value(i: u64) -> String {
    format!("value-{i}-{}", "v".repeat((i % 30) as usize))
}

fn put(db: &Db, i: u64, sync: bool) {
    let mut batch = WriteBatch::new();
    batch.put(key(i), value(i));
    db.write_opt(batch, &WriteOptions::default().sync(sync))
        .unwrap();
}

/// The store's WAL holding the most bytes.
fn biggest_log(fs: &FaultFs) -> PathBuf {
    fs.list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .map(|n| Path::new(DIR).join(n))
        .max_by_key(|p| fs.contents(p).map_or(0, |c| c.len()))
        .expect("a WAL file")
}

/// Writes keys `0..n` (`synced(i)` says which writes are synced), leaves the store without a
/// clean close (its WAL holds every write, flushed to the file system), and zeroes the 4 KiB
/// page at `page` of the WAL, as a power loss does to a page that never reached the disk.
fn store_with_lost_page(n: u64, synced: impl Fn(u64) -> bool, page: usize) -> (FaultFs, PathBuf) {
    let fs = FaultFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..n {
        put(&db, i, synced(i));
    }
    drop(db);
    let log = biggest_log(&fs);
    let mut bytes = fs.contents(&log).unwrap();
    assert!(
        bytes.len() > page + 2 * PAGE,
        "log of {} bytes",
        bytes.len()
    );
    bytes[page..page + PAGE].fill(0);
    fs.set_contents(&log, bytes);
    (fs, log)
}

/// The keys present, which must be `0..k` with their values; returns `k`.
fn prefix_present(db: &Db) -> u64 {
    let mut n = 0;
    for item in db.iter() {
        let (k, v) = item.unwrap();
        assert_eq!(k, key(n).into_bytes(), "hole before key {n}");
        assert_eq!(v, value(n).into_bytes());
        n += 1;
    }
    n
}

#[test]
fn a_lost_page_after_the_last_sync_opens_keeping_every_synced_write() {
    // One synced write, then 2,000 unsynced ones; a page in the middle of those is lost.
    let (fs, log) = store_with_lost_page(2001, |i| i == 0, 8 * PAGE);
    let log_len = fs.contents(&log).unwrap().len() as u64;
    let db = Db::open(DIR, options(&fs)).unwrap_or_else(|e| panic!("open refused: {e}"));
    let kept = prefix_present(&db);
    assert!(kept >= 1, "the synced write is kept");
    assert!(kept < 2001);
    let report = db.recovery_report().clone();
    assert_eq!(report.batches_replayed, kept);
    assert_eq!(report.dropped.len(), 1, "{report:?}");
    let hole = &report.dropped[0];
    assert_eq!(hole.log, log);
    assert_eq!(hole.cause, DropCause::UnsyncedHole);
    assert!(hole.offset <= (8 * PAGE) as u64);
    assert_eq!(hole.offset + hole.bytes, log_len);
    // Every write is kept, lost in the page, or counted as dropped after it.
    assert!(hole.intact_batches > 1000, "{hole:?}");
    assert!(kept + hole.intact_batches < 2001);
    assert_eq!(report.intact_batches_dropped(), hole.intact_batches);
    // The store goes on: the next write and a reopen keep the prefix.
    put(&db, kept, true);
    drop(db);
    let db = Db::open(DIR, options(&fs)).unwrap();
    assert_eq!(prefix_present(&db), kept + 1);
    assert!(db.recovery_report().dropped.is_empty());
}

#[test]
fn a_lost_page_before_the_last_sync_is_corruption_naming_the_log() {
    // Every write synced: the page lost lies before the last synced point.
    let (fs, log) = store_with_lost_page(2001, |_| true, 8 * PAGE);
    match Db::open(DIR, options(&fs)) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, log);
            assert!(offset.is_some_and(|o| o <= (8 * PAGE) as u64), "{offset:?}");
        }
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("opened a store whose synced WAL bytes are damaged"),
    }
}

#[test]
fn a_lost_page_between_synced_writes_is_corruption_but_after_them_a_hole() {
    // Writes 0..1000 synced one by one, 1000.. unsynced.
    let synced = |i: u64| i < 1000;
    let (fs, _) = store_with_lost_page(3000, synced, 4 * PAGE);
    assert!(Db::open(DIR, options(&fs)).is_err_and(|e| e.is_corruption()));
    let (fs, _) = store_with_lost_page(3000, synced, 20 * PAGE);
    let db = Db::open(DIR, options(&fs)).unwrap();
    let kept = prefix_present(&db);
    assert!((1000..3000).contains(&kept), "{kept}");
    assert_eq!(
        db.recovery_report().dropped[0].cause,
        DropCause::UnsyncedHole
    );
}

#[test]
fn point_in_time_recovery_stops_at_synced_damage_and_reports_it() {
    let (fs, log) = store_with_lost_page(2001, |_| true, 8 * PAGE);
    let db = Db::open(
        DIR,
        options(&fs).wal_recovery_mode(WalRecoveryMode::PointInTime),
    )
    .unwrap();
    let kept = prefix_present(&db);
    let report = db.recovery_report();
    assert_eq!(report.dropped.len(), 1);
    assert_eq!(report.dropped[0].log, log);
    assert_eq!(report.dropped[0].cause, DropCause::Damaged);
    assert!(kept > 100 && kept + report.dropped[0].intact_batches < 2001);
}

/// A WAL record holding one put of `key` = `value` numbered `seq`, in the write batch
/// encoding (`first_seq` u64 LE, `count` u32 LE, then per op: kind 1, key length, key, value
/// length, value; lengths are varints, one byte below 128).
fn put_record(seq: u64, key: &str, value: &str) -> Vec<u8> {
    assert!(key.len() < 128 && value.len() < 128);
    let mut out = seq.to_le_bytes().to_vec();
    out.extend_from_slice(&1u32.to_le_bytes());
    out.push(1);
    out.push(key.len() as u8);
    out.extend_from_slice(key.as_bytes());
    out.push(value.len() as u8);
    out.extend_from_slice(value.as_bytes());
    out
}

/// A closed store holding `keys` puts, flushed to a table when `flushed`.
fn closed_store(keys: u64, flushed: bool) -> FaultFs {
    let fs = FaultFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..keys {
        put(&db, i, false);
    }
    if flushed {
        db.flush().unwrap();
    }
    db.close().unwrap();
    fs
}

/// Adds a WAL numbered above every file of the store, holding `records`, synced.
fn add_log(fs: &FaultFs, records: &[Vec<u8>]) -> PathBuf {
    let highest = fs
        .list(Path::new(DIR))
        .unwrap()
        .iter()
        .filter_map(|n| parse_file_name(n).and_then(|k| k.number()))
        .max()
        .unwrap_or(0);
    let path = Path::new(DIR).join(log_file_name(highest + 10));
    let mut log = LogWriter::new(fs.create(&path).unwrap());
    for record in records {
        log.add_record(record).unwrap();
    }
    log.sync().unwrap();
    path
}

fn expect_corruption(fs: &FaultFs, mode: WalRecoveryMode) -> (PathBuf, Option<u64>, String) {
    match Db::open(DIR, options(fs).wal_recovery_mode(mode)) {
        Err(Error::Corruption {
            file,
            offset,
            reason,
        }) => (file, offset, reason),
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(db) => panic!("opened, replaying {:?}", db.recovery_report()),
    }
}

#[test]
fn a_write_batch_numbered_near_the_end_of_the_sequence_space_is_corruption() {
    // Accepted, this batch would make the next write wrap the sequence number to 0, and
    // writes numbered below older ones vanish or revert when compaction keeps the newest.
    for seq in [u64::MAX - 1, MAX_SEQ + 1] {
        let fs = closed_store(10, false);
        let log = add_log(&fs, &[put_record(seq, "k", "crafted")]);
        let (file, offset, reason) = expect_corruption(&fs, WalRecoveryMode::default());
        assert_eq!((file, offset), (log, Some(0)), "{reason}");
    }
}

#[test]
fn writes_stop_with_a_typed_error_at_the_largest_sequence_number() {
    let fs = closed_store(10, false);
    add_log(&fs, &[put_record(MAX_SEQ - 1, "k", "last but one")]);
    let db = Db::open(DIR, options(&fs)).unwrap();
    assert_eq!(db.get("k").unwrap(), Some(b"last but one".to_vec()));
    let mut two = WriteBatch::new();
    two.put("a", "1").put("b", "2");
    assert!(matches!(
        db.write(two),
        Err(Error::SequenceExhausted { last, count: 2, max: MAX_SEQ }) if last == MAX_SEQ - 1
    ));
    db.put("k", "last").unwrap();
    assert!(matches!(
        db.put("k", "one too many"),
        Err(Error::SequenceExhausted { .. })
    ));
    assert_eq!(db.get("k").unwrap(), Some(b"last".to_vec()));
    assert_eq!(db.get("a").unwrap(), None);
    db.close().unwrap();
    let db = Db::open(DIR, options(&fs)).unwrap();
    assert_eq!(db.get("k").unwrap(), Some(b"last".to_vec()));
    assert_eq!(prefix_present_among(&db, 10), 10);
}

/// How many of keys `0..n` are present with their values.
fn prefix_present_among(db: &Db, n: u64) -> u64 {
    (0..n)
        .filter(|&i| db.get(key(i)).unwrap() == Some(value(i).into_bytes()))
        .count() as u64
}

#[test]
fn a_write_batch_numbered_below_an_earlier_one_is_corruption() {
    let fs = closed_store(10, false);
    let log = add_log(
        &fs,
        &[
            put_record(1000, "x", "first"),
            put_record(500, "y", "second"),
        ],
    );
    let (file, offset, _) = expect_corruption(&fs, WalRecoveryMode::default());
    assert_eq!(file, log);
    let second_record = offset.expect("the offset of the second record");
    assert!(second_record > 0);
    // PointInTime keeps what comes before it and reports the rest.
    let db = Db::open(
        DIR,
        options(&fs).wal_recovery_mode(WalRecoveryMode::PointInTime),
    )
    .unwrap();
    assert_eq!(db.get("x").unwrap(), Some(b"first".to_vec()));
    assert_eq!(db.get("y").unwrap(), None);
    assert_eq!(prefix_present_among(&db, 10), 10);
    let dropped = &db.recovery_report().dropped;
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].log, log);
    assert_eq!(dropped[0].offset, second_record);
    assert_eq!(dropped[0].cause, DropCause::InvalidBatch);
}

#[test]
fn a_write_batch_numbered_below_the_tables_is_corruption() {
    // Ten writes, numbered 1 to 10, flushed to a table; a log then claims number 5.
    let fs = closed_store(10, true);
    let log = add_log(&fs, &[put_record(5, "k", "old number")]);
    let (file, offset, reason) = expect_corruption(&fs, WalRecoveryMode::default());
    assert_eq!((file, offset), (log, Some(0)));
    assert!(reason.contains("not above 10"), "{reason}");
}

#[test]
fn strict_recovery_refuses_a_torn_tail_that_the_default_drops() {
    let fs = FaultFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..50 {
        put(&db, i, false);
    }
    drop(db);
    let log = biggest_log(&fs);
    let mut bytes = fs.contents(&log).unwrap();
    bytes.truncate(bytes.len() - 3);
    fs.set_contents(&log, bytes.clone());
    let (file, offset, reason) = expect_corruption(&fs, WalRecoveryMode::Strict);
    assert_eq!(file, log);
    let offset = offset.expect("an offset");
    assert!(offset > 0 && offset < bytes.len() as u64, "{reason}");
    // The refused open changed nothing; the default drops the torn write and reports it.
    assert_eq!(fs.contents(&log).unwrap(), bytes);
    let db = Db::open(DIR, options(&fs)).unwrap();
    assert_eq!(prefix_present(&db), 49);
    let dropped = &db.recovery_report().dropped;
    assert_eq!(dropped.len(), 1);
    assert_eq!(
        (dropped[0].offset, dropped[0].cause),
        (offset, DropCause::TornTail)
    );
}

#[test]
fn strict_recovery_opens_a_clean_store() {
    let fs = closed_store(100, false);
    let db = Db::open(DIR, options(&fs).wal_recovery_mode(WalRecoveryMode::Strict)).unwrap();
    assert_eq!(prefix_present(&db), 100);
    assert!(db.recovery_report().dropped.is_empty());
}

#[test]
fn salvage_recovery_keeps_every_intact_batch_around_synced_damage() {
    // Every write synced, a page lost in the middle: the default refuses to open.
    let (fs, log) = store_with_lost_page(2001, |_| true, 8 * PAGE);
    assert!(Db::open(DIR, options(&fs)).is_err_and(|e| e.is_corruption()));
    let db = Db::open(
        DIR,
        options(&fs).wal_recovery_mode(WalRecoveryMode::Salvage),
    )
    .unwrap();
    let present: Vec<u64> = (0..2001)
        .filter(|&i| match db.get(key(i)).unwrap() {
            Some(v) => {
                assert_eq!(v, value(i).into_bytes());
                true
            }
            None => false,
        })
        .collect();
    // What is missing is one run of keys, those whose records the page held.
    let missing: Vec<u64> = (0..2001).filter(|i| !present.contains(i)).collect();
    assert!(
        !missing.is_empty() && missing.len() < 100,
        "{} missing",
        missing.len()
    );
    assert!(missing.windows(2).all(|w| w[1] == w[0] + 1));
    assert!(present.contains(&2000), "writes after the damage are kept");
    let report = db.recovery_report();
    assert_eq!(report.batches_replayed, present.len() as u64);
    assert_eq!(report.dropped.len(), 1, "{report:?}");
    let skipped = &report.dropped[0];
    assert_eq!(
        (skipped.log.clone(), skipped.cause),
        (log, DropCause::Skipped)
    );
    assert!(skipped.offset <= (8 * PAGE) as u64);
    assert!(skipped.offset + skipped.bytes >= (9 * PAGE) as u64);
}

#[test]
fn salvage_recovery_skips_an_invalid_batch_and_keeps_the_rest() {
    let fs = closed_store(10, false);
    let log = add_log(
        &fs,
        &[
            put_record(1000, "x", "first"),
            put_record(500, "y", "out of order"),
            put_record(1001, "z", "third"),
        ],
    );
    let db = Db::open(
        DIR,
        options(&fs).wal_recovery_mode(WalRecoveryMode::Salvage),
    )
    .unwrap();
    assert_eq!(db.get("x").unwrap(), Some(b"first".to_vec()));
    assert_eq!(db.get("y").unwrap(), None);
    assert_eq!(db.get("z").unwrap(), Some(b"third".to_vec()));
    assert_eq!(prefix_present_among(&db, 10), 10);
    let dropped = &db.recovery_report().dropped;
    assert_eq!(dropped.len(), 1);
    assert_eq!(
        (dropped[0].log.clone(), dropped[0].cause),
        (log, DropCause::InvalidBatch)
    );
    assert_eq!(dropped[0].intact_batches, 1);
}
