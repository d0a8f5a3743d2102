//! Readers on several threads during writes, flushes and compactions.

use crate::common;

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

/// Iterators made while writers write, memtables are frozen and flushed and tables are
/// compacted walk exactly the pairs a model held at their making: each reader steps from
/// both ends at random, from random starting keys, and compares every pair.
#[test]
fn iterators_agree_with_a_model_during_writes_flushes_and_compactions() {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    const KEYS: u64 = 3000;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), common::small_tree_options()).unwrap());
    // The model, and the moment of every iterator's making: under one lock, with each write.
    let model: Arc<Mutex<BTreeMap<Vec<u8>, Vec<u8>>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    // Writes so far: readers start once the tree has levels, and walk until many memtables
    // have been flushed and compacted under them.
    let writes = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let (db, model, done) = (Arc::clone(&db), Arc::clone(&model), Arc::clone(&done));
            let writes = Arc::clone(&writes);
            std::thread::spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t;
                let mut version = 0;
                while !done.load(Ordering::Acquire) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = x % KEYS;
                    let key = common::key(i);
                    let mut model = model.lock().unwrap();
                    if x.is_multiple_of(5) {
                        db.delete(&key).unwrap();
                        model.remove(&key);
                    } else {
                        version += 1;
                        let value = common::value(i, version);
                        db.put(&key, &value).unwrap();
                        model.insert(key, value);
                    }
                    writes.fetch_add(1, Ordering::Release);
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..3u64)
        .map(|t| {
            let (db, model, writes) = (Arc::clone(&db), Arc::clone(&model), Arc::clone(&writes));
            std::thread::spawn(move || {
                let mut x = 0xD1B5_4A32_D192_ED03u64 ^ (t + 1);
                // Bounded, should a writer fail: the test then fails on its joins.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                let before_deadline = || std::time::Instant::now() < deadline;
                while writes.load(Ordering::Acquire) < 5_000 && before_deadline() {
                    std::thread::yield_now();
                }
                let mut walks = 0;
                while walks < 300 || (writes.load(Ordering::Acquire) < 30_000 && before_deadline())
                {
                    walks += 1;
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let start = common::key(x % KEYS);
                    let end = common::key(x % KEYS + (x >> 20) % 400);
                    let (mut iter, expected) = {
                        let model = model.lock().unwrap();
                        let expected: Vec<(Vec<u8>, Vec<u8>)> = model
                            .range(start.clone()..end.clone())
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect();
                        (db.range(start..end), expected)
                    };
                    // Steps from either end at random until they meet.
                    let (mut front, mut back) = (0, expected.len());
                    loop {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let step = match x.is_multiple_of(3) {
                            true => iter.next_back().map(|p| (p, &mut back, true)),
                            false => iter.next().map(|p| (p, &mut front, false)),
                        };
                        let Some((pair, at, from_back)) = step else {
                            assert_eq!(front, back, "the walk ended early");
                            break;
                        };
                        let pair = pair.unwrap();
                        let want = match from_back {
                            true => {
                                *at -= 1;
                                &expected[*at]
                            }
                            false => {
                                *at += 1;
                                &expected[*at - 1]
                            }
                        };
                        assert_eq!(&pair, want);
                        assert!(front <= back, "the ends crossed");
                    }
                }
            })
        })
        .collect();
    for reader in readers {
        reader.join().unwrap();
    }
    done.store(true, Ordering::Release);
    for writer in writers {
        writer.join().unwrap();
    }
    let stats = db.stats();
    assert!(stats.flushes > 0 && stats.compactions > 0, "{stats:?}");
}
