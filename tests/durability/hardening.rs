//! Findings of a review of the store, each reproduced through the public API: a store that
//! lost its `CURRENT`, background failures that heal, orphan tables, the manifest's growth,
//! read-only opens.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use bloomkv::fs::{FaultFs, FileSystem};
use bloomkv::{Db, Error, Options};

use common::names_in;

#[test]
fn a_store_without_current_is_refused_and_nothing_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    for i in 0..2_000 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    std::fs::remove_file(dir.path().join("CURRENT")).unwrap();
    // Files the store never made must be left alone too.
    std::fs::write(dir.path().join("notes.tmp"), b"mine").unwrap();
    std::fs::write(dir.path().join("000001.sst.bak"), b"mine").unwrap();
    let before = names_in(dir.path());

    match Db::open(dir.path(), common::small_tree_options()) {
        Err(Error::MissingCurrent { files, .. }) => {
            assert!(files.iter().any(|f| f.ends_with(".sst")), "{files:?}");
            assert!(
                files.iter().any(|f| f.starts_with("MANIFEST-")),
                "{files:?}"
            );
        }
        Err(e) => panic!("expected MissingCurrent, got {e}"),
        Ok(_) => panic!("a store without CURRENT was opened (and emptied)"),
    }
    let refused_without_create = Db::open(
        dir.path(),
        common::small_tree_options().create_if_missing(false),
    );
    assert!(matches!(
        refused_without_create,
        Err(Error::MissingCurrent { .. })
    ));
    assert_eq!(
        names_in(dir.path()),
        before,
        "refusing must not touch a file"
    );
}

#[test]
fn files_the_store_did_not_name_survive_an_open() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(dir.path(), Options::default())
        .unwrap()
        .close()
        .unwrap();
    for foreign in ["notes.tmp", "backup.sst", "1.log", "000001.sst.bak"] {
        std::fs::write(dir.path().join(foreign), b"not the store's").unwrap();
    }
    // A table builder cut short leaves `NNNNNN.sst.tmp`: that one is the store's garbage.
    std::fs::write(dir.path().join("000777.sst.tmp"), b"half a table").unwrap();
    Db::open(dir.path(), Options::default())
        .unwrap()
        .close()
        .unwrap();
    let names = names_in(dir.path());
    for foreign in ["notes.tmp", "backup.sst", "1.log", "000001.sst.bak"] {
        assert!(names.contains(&foreign.to_string()), "{foreign} deleted");
    }
    assert!(!names.contains(&"000777.sst.tmp".to_string()));
}

#[test]
fn a_creation_cut_short_does_not_block_the_next_open() {
    let fs = FaultFs::new();
    let options = || Options::default().file_system(Arc::new(fs.clone()));
    for cut_after in 0..12 {
        let dir = format!("/store{cut_after}");
        fs.cut_power_after(cut_after);
        let first = Db::open(&dir, options());
        let cut = fs.power_is_cut();
        drop(first);
        fs.crash();
        let db = Db::open(&dir, options())
            .unwrap_or_else(|e| panic!("cut after {cut_after} (cut: {cut}): reopen failed: {e}"));
        db.put(b"k", b"v").unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    }
}

fn fault_options(fs: &FaultFs) -> Options {
    let mut options = common::small_tree_options().file_system(Arc::new(fs.clone()));
    options.memtable_size = 4 * 1024;
    options
}

fn fill(db: &Db, from: u64, to: u64) {
    for i in from..to {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
}

fn assert_readable(db: &Db, to: u64) {
    for i in 0..to {
        assert_eq!(
            db.get(common::key(i)).unwrap(),
            Some(common::value(i, 0)),
            "key {i}"
        );
    }
}

/// Table files in the store's directory, by number.
fn table_files(fs: &FaultFs) -> Vec<String> {
    use bloomkv::fs::FileSystem;
    fs.list(Path::new("/store"))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".sst") || n.ends_with(".sst.tmp"))
        .collect()
}

fn live_table_files(db: &Db) -> Vec<String> {
    let mut names: Vec<String> = db
        .stats()
        .tables
        .iter()
        .map(|t| format!("{:06}.sst", t.number))
        .collect();
    names.sort();
    names
}

#[test]
fn one_failed_compaction_append_refuses_no_write_and_is_retried() {
    let fs = FaultFs::new();
    let db = Db::open("/store", fault_options(&fs)).unwrap();
    fill(&db, 0, 1_500);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let compactions_before = db.stats().compactions;
    fs.fail_nth_append(3);
    assert!(db.compact().is_err(), "the compaction hit the fault");
    // Nothing a reader sees changed, so writes go on, and the background work they cause
    // runs as before.
    fill(&db, 1_500, 3_000);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    db.compact().unwrap();
    assert_readable(&db, 3_000);
    let stats = db.stats();
    assert!(stats.compactions > compactions_before);
    assert_eq!(stats.writes_refused, None);
    assert_eq!(table_files(&fs), live_table_files(&db), "no orphan tables");
}

#[test]
fn a_full_disk_under_background_work_heals_by_itself() {
    let fs = FaultFs::new();
    // One compaction thread: with two, a compaction that started before another failed may
    // end well and clear the failure, and no retry is ever counted.
    let options = || fault_options(&fs).compaction_threads(1);
    let db = Db::open("/store", options()).unwrap();
    fill(&db, 0, 1_000);
    db.wait_for_background_work().unwrap();
    // Room for the WAL, not for the tables flushes and compactions write.
    fs.set_space_left(Some(64 * 1024));
    let mut written = 1_000;
    while db.stats().background_errors == 0 && written < 20_000 {
        match db.put(common::key(written), common::value(written, 0)) {
            Ok(()) => written += 1,
            Err(Error::Background { .. }) | Err(Error::Io { .. }) => break,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(db.stats().background_errors > 0, "the disk never filled");
    // Every failed step deleted what it wrote. `check` holds background work still while it
    // lists the files, so a table another job has written but not yet recorded is not taken
    // for an orphan.
    let report = db.check();
    for path in &report.unreferenced {
        let name = path.file_name().unwrap().to_string_lossy();
        assert!(!name.ends_with(".sst"), "orphan {name} after a failed step");
    }
    assert_readable(&db, written);

    // Room again: no call needed, the store retries and settles by itself.
    fs.set_space_left(None);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while db.stats().background_error.is_some() || db.stats().writes_refused.is_some() {
        assert!(std::time::Instant::now() < deadline, "never healed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    fill(&db, written, written + 500);
    db.wait_for_background_work().unwrap();
    assert_readable(&db, written + 500);
    let stats = db.stats();
    assert!(stats.background_retries > 0, "{stats:?}");
    assert_eq!(table_files(&fs), live_table_files(&db));
    drop(db);
    let db = Db::open("/store", options()).unwrap();
    assert_readable(&db, written + 500);
}

#[test]
fn resume_starts_a_new_log_after_a_failed_wal_write() {
    let fs = FaultFs::new();
    let db = Db::open("/store", fault_options(&fs)).unwrap();
    fill(&db, 0, 300);
    // The failed sync must be the WAL's, not that of a table a flush or compaction writes.
    db.wait_for_background_work().unwrap();
    fs.fail_next_sync();
    let synced = bloomkv::WriteOptions::synced();
    let mut batch = bloomkv::WriteBatch::new();
    batch.put(common::key(300), common::value(300, 0));
    assert!(db.write_opt(batch, &synced).is_err());
    db.resume().unwrap();
    assert_eq!(db.stats().writes_refused, None);
    fill(&db, 300, 600);
    assert_readable(&db, 600);
    drop(db);
    fs.crash();
    let db = Db::open("/store", fault_options(&fs)).unwrap();
    // Resuming flushed everything before the failed write: all of it is durable.
    assert_readable(&db, 300);
}

#[test]
fn the_manifest_is_rewritten_once_its_edits_grow() {
    let dir = tempfile::tempdir().unwrap();
    let options = || common::small_tree_options().max_manifest_size(1024);
    let db = Db::open(dir.path(), options()).unwrap();
    fill(&db, 0, 20_000);
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    assert!(stats.manifest_rotations > 0, "{}", stats.manifest_rotations);
    let manifests: Vec<String> = names_in(dir.path())
        .into_iter()
        .filter(|n| n.starts_with("MANIFEST-"))
        .collect();
    assert_eq!(manifests.len(), 1, "{manifests:?}");
    let size = std::fs::metadata(dir.path().join(&manifests[0]))
        .unwrap()
        .len();
    // At most the limit (or twice the snapshot) plus one edit past it.
    assert!(size < 32 * 1024, "manifest of {size} bytes");
    drop(db);
    let db = Db::open(dir.path(), options()).unwrap();
    assert_readable(&db, 20_000);
}

fn file_bytes(dir: &Path) -> Vec<(String, Vec<u8>)> {
    names_in(dir)
        .into_iter()
        .map(|n| {
            let bytes = std::fs::read(dir.join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

#[test]
fn a_read_only_open_reads_tables_and_wal_and_changes_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    fill(&db, 0, 3_000);
    db.wait_for_background_work().unwrap();
    db.delete(common::key(7)).unwrap();
    db.put(b"only-in-the-wal", b"yes").unwrap();
    drop(db);
    // A store copied to read-only media may come without its lock file.
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    let before = file_bytes(dir.path());

    let ro = Db::open_read_only(dir.path(), common::small_tree_options()).unwrap();
    assert!(ro.is_read_only());
    assert_eq!(ro.get(b"only-in-the-wal").unwrap(), Some(b"yes".to_vec()));
    assert_eq!(ro.get(common::key(7)).unwrap(), None);
    assert_eq!(ro.get(common::key(8)).unwrap(), Some(common::value(8, 0)));
    assert_eq!(ro.iter().count(), 3_000);
    assert!(matches!(ro.put(b"k", b"v"), Err(Error::ReadOnly)));
    assert!(matches!(ro.delete(b"k"), Err(Error::ReadOnly)));
    assert!(matches!(ro.flush(), Err(Error::ReadOnly)));
    assert!(matches!(ro.compact(), Err(Error::ReadOnly)));
    ro.wait_for_background_work().unwrap();
    let stats = ro.stats();
    assert!(stats.tables.len() > 1);
    ro.close().unwrap();
    assert_eq!(file_bytes(dir.path()), before, "a read-only open wrote");
}

#[test]
fn read_only_opens_and_a_writer_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Db::open(dir.path(), Options::default()).unwrap();
    writer.put(b"k", b"v").unwrap();
    assert!(matches!(
        Db::open_read_only(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    drop(writer);
    let first = Db::open_read_only(dir.path(), Options::default()).unwrap();
    let second = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert_eq!(second.get(b"k").unwrap(), Some(b"v".to_vec()));
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    drop(first);
    drop(second);
    let writer = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(writer.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn a_read_only_open_of_nothing_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none");
    assert!(Db::open_read_only(&missing, Options::default()).is_err());
    assert!(!missing.exists());
    assert!(matches!(
        Db::open_read_only(dir.path(), Options::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(names_in(dir.path()).is_empty());
}

#[test]
fn check_reads_what_the_store_relies_on_and_lists_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    fill(&db, 0, 3_000);
    db.wait_for_background_work().unwrap();
    // While a writer has the store, a check from outside cannot see one consistent view.
    assert!(matches!(
        bloomkv::check::check_store(dir.path()),
        Err(Error::Locked { .. })
    ));
    drop(db);
    let stray = dir.path().join("009999.sst");
    std::fs::write(&stray, vec![0x5a; 5_000]).unwrap();
    let report = bloomkv::check::check_store(dir.path()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert!(report.tables_ok > 1);
    assert_eq!(report.unreferenced, vec![stray]);
}

#[test]
fn a_check_beside_writes_and_compactions_finds_nothing_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), common::small_tree_options()).unwrap());
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || fill(&db, 0, 8_000))
    };
    let mut checks = 0;
    while !writer.is_finished() || checks == 0 {
        let report = db.check();
        assert!(report.is_clean(), "{:?}", report.problems);
        checks += 1;
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    writer.join().unwrap();
    let stats = db.stats();
    assert!(stats.compactions + stats.trivial_moves > 0);
}

/// Runs `f` on a thread of its own and fails the test if it does not return in a minute: a
/// hang must fail the test, not stop the run.
fn within_a_minute<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(f());
    });
    wait.recv_timeout(std::time::Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("{what} did not return within a minute"))
}

/// A panic inside a flush or a compaction (a bug, here injected by the file system) is caught
/// and recorded as a failure, and the job is retried: nothing that waits for background work
/// hangs, no write is lost, and the failure is counted.
#[test]
fn a_panic_inside_a_background_job_is_a_failure_that_is_retried() {
    for job in ["flush", "compaction"] {
        let fs = FaultFs::new();
        let options = common::small_tree_options().file_system(Arc::new(fs.clone()));
        let db = Arc::new(Db::open("/panics", options).unwrap());
        for i in 0..300 {
            db.put(common::key(i), common::value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_background_work().unwrap();
        if job == "flush" {
            fs.panic_next_table_append();
        }
        let writer = Arc::clone(&db);
        within_a_minute("writes", move || {
            for i in 300..600 {
                // A write that waits for room while the failed flush pauses before its retry
                // is refused with the failure: it is written again once the retry succeeded.
                let mut tries = 0;
                while let Err(e) = writer.put(common::key(i), common::value(i, 0)) {
                    assert!(
                        matches!(&e, Error::Background { reason } if reason.contains("panicked"))
                    );
                    tries += 1;
                    assert!(tries < 1000, "put {i} refused for ever: {e}");
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
            }
        });
        if job == "compaction" {
            // Level 0 flushed first: the next table written is the full compaction's.
            db.flush().unwrap();
            db.wait_for_background_work().unwrap();
            fs.panic_next_table_append();
        }
        let outcome = {
            let db = Arc::clone(&db);
            within_a_minute(job, move || match job {
                "flush" => db.flush(),
                _ => db.compact(),
            })
        };
        // A wait that sees a failure happen reports it (the job is retried meanwhile).
        let panicked_or_ok = |outcome: bloomkv::Result<()>, what: &str| match outcome {
            Ok(()) => {}
            Err(Error::Background { reason }) => assert!(reason.contains("panicked"), "{reason}"),
            Err(e) => panic!("{job}, {what}: {e:?}"),
        };
        if job == "compaction" {
            // The full compaction runs in the caller's thread: its panic is the call's error.
            assert!(
                matches!(&outcome, Err(Error::Background { reason }) if reason.contains("a compaction panicked")),
                "{outcome:?}"
            );
        }
        panicked_or_ok(outcome, job);
        let waited = {
            let db = Arc::clone(&db);
            within_a_minute("waiting for background work", move || {
                db.wait_for_background_work()
            })
        };
        panicked_or_ok(waited, "waiting");
        // Counted in the one record of failures, whichever thread ran the job.
        assert!(
            db.stats().background_errors >= 1,
            "{job}: the panic was not counted"
        );
        {
            let db = Arc::clone(&db);
            within_a_minute("resume", move || db.resume()).unwrap();
        }
        let db_waits = Arc::clone(&db);
        within_a_minute("waiting", move || db_waits.wait_for_background_work()).unwrap();
        assert_eq!(db.stats().background_error, None, "{job}");
        for i in 0..600 {
            assert_eq!(
                db.get(common::key(i)).unwrap(),
                Some(common::value(i, 0)),
                "{job}"
            );
        }
        let report = within_a_minute("check", move || db.check());
        assert!(report.is_clean(), "{job}: {:?}", report.problems);
    }
}

/// A group's leader that panics after its records reached the WAL leaves their sequence
/// numbers taken: a later write never shares a number with one of them, so it is never hidden
/// by them, now or after a reopen. Writes are refused until a new log is started.
#[test]
fn a_leader_that_panics_after_logging_leaves_no_number_to_reuse() {
    let fs = FaultFs::new();
    let options = || Options::default().file_system(Arc::new(fs.clone()));
    let db = Db::open("/leader", options()).unwrap();
    db.put("before", "1").unwrap();
    let log_at_panic = fs
        .list(Path::new("/leader"))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".log"))
        .max()
        .unwrap();
    fs.panic_next_wal_sync();
    let mut batch = bloomkv::WriteBatch::new();
    batch.put("a", "from the panicked group");
    batch.put("b", "from the panicked group");
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        db.write_opt(batch, &bloomkv::WriteOptions::synced())
    }));
    assert!(panicked.is_err(), "the injected panic reached the writer");
    // Until a new log is started the store takes no write; resume starts one.
    match db.put("b", "acknowledged later") {
        Err(Error::WritesRefused { reason }) => assert!(reason.contains("panicked"), "{reason}"),
        Ok(()) => {}
        Err(e) => panic!("{e:?}"),
    }
    db.resume().unwrap();
    // The log the panicked group wrote to may end in part of a record: a new one took over.
    let newest_log = || {
        fs.list(Path::new("/leader"))
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with(".log"))
            .max()
            .unwrap()
    };
    assert!(newest_log() > log_at_panic, "no new log after the panic");
    db.put("b", "acknowledged later").unwrap();
    assert_eq!(db.get("b").unwrap(), Some(b"acknowledged later".to_vec()));
    assert_eq!(db.get("before").unwrap(), Some(b"1".to_vec()));
    db.close().unwrap();
    let db = Db::open("/leader", options()).unwrap();
    assert_eq!(db.get("b").unwrap(), Some(b"acknowledged later".to_vec()));
    assert_eq!(db.get("before").unwrap(), Some(b"1".to_vec()));
}
