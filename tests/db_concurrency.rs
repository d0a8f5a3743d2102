//! Readers on several threads during writes, flushes and compactions.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bloomkv::Db;

#[test]
fn readers_see_written_values_during_writes_flushes_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), common::small_tree_options()).unwrap());
    // Keys below `written` have been written at least once; every version of key i is
    // common::value(i, v) for some v.
    let written = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|t| {
            let (db, written, done) = (Arc::clone(&db), Arc::clone(&written), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut checks = 0u64;
                let mut i = t;
                while !done.load(Ordering::Acquire) {
                    let upto = written.load(Ordering::Acquire);
                    if upto == 0 {
                        continue;
                    }
                    let k = i % upto;
                    let v = db
                        .get(common::key(k))
                        .expect("get never fails")
                        .expect("written key is there");
                    let text = String::from_utf8(v).unwrap();
                    assert!(
                        text.starts_with(&format!("value-{k}-")),
                        "key {k} read {text}"
                    );
                    i += 7;
                    checks += 1;
                    if checks.is_multiple_of(500) {
                        let n = db.range::<&[u8], _>(..).take(50).count();
                        assert!(n > 0);
                    }
                }
                checks
            })
        })
        .collect();
    for round in 0..4u64 {
        for i in 0..3000u64 {
            db.put(common::key(i), common::value(i, round)).unwrap();
            written.fetch_max(i + 1, Ordering::AcqRel);
        }
        db.flush().unwrap();
        if round == 2 {
            db.compact().unwrap();
        }
    }
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().expect("reader panicked") > 0);
    }
    for i in 0..3000 {
        assert_eq!(db.get(common::key(i)).unwrap(), Some(common::value(i, 3)));
    }
    assert!(db.stats().compactions > 0);
}

/// `flush` waits for the memtables that held writes acknowledged before it, not for a moment
/// when no memtable is frozen: a writer that never pauses keeps freezing new ones, and a flush
/// that waited for an empty list did not return.
#[test]
fn flush_returns_while_another_thread_writes_without_pause() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), common::small_tree_options()).unwrap());
    let writer = common::SteadyWriter::start(db.clone());
    let (finished_tx, finished_rx) = std::sync::mpsc::channel();
    let flusher = {
        let (db, acknowledged) = (db.clone(), writer.acknowledged.clone());
        std::thread::spawn(move || {
            for _ in 0..5 {
                while acknowledged.load(Ordering::SeqCst) < 3000 {
                    std::thread::yield_now();
                }
                let before = acknowledged.load(Ordering::SeqCst);
                db.flush().unwrap();
                let flushed = db.stats().flushes;
                finished_tx.send((before, flushed)).unwrap();
            }
        })
    };
    for _ in 0..5 {
        let (before, flushed) = finished_rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("a flush under a steady stream of writes returned within a minute");
        assert!(before >= 3000);
        assert!(flushed >= 1, "a returned flush wrote a table");
    }
    flusher.join().unwrap();
    let written = writer.stop();
    db.flush().unwrap();
    for i in (0..written).step_by(97) {
        assert_eq!(db.get(common::key(i)).unwrap(), Some(common::value(i, 0)));
    }
}
