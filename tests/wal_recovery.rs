//! WAL recovery through the public API: a store on `FaultFs` is written, one of its WAL files
//! is damaged the way a power loss or a bad disk damages it, and the store is reopened. What
//! opens, what is kept, what is refused and what `Db::recovery_report` says are checked
//! against the rules in docs/format-log-manifest.md.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv::fs::{FaultFs, FileSystem};
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
    db.write_opt(batch, &WriteOptions { sync }).unwrap();
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
