//! Concurrency stress: writers, readers, flushes and compactions at once, checked against
//! what was written. Each writer owns a key range and writes increasing versions of its keys;
//! readers (point reads and scans) check that a key's version never goes backwards and never
//! exceeds what its writer has started writing, and that every value is one that was written.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bloomkv::fs::FaultFs;
use bloomkv::{Db, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const WRITERS: u64 = 3;
const READERS: u64 = 3;
const KEYS_PER_WRITER: u64 = 200;

fn key(writer: u64, k: u64) -> Vec<u8> {
    format!("w{writer}-k{k:05}").into_bytes()
}

fn value(writer: u64, k: u64, version: u64) -> Vec<u8> {
    format!(
        "w{writer}-k{k:05}-v{version:08}-{}",
        "p".repeat((k % 30) as usize)
    )
    .into_bytes()
}

/// The version in a value, after checking the value is exactly one that was written.
fn version_of(writer: u64, k: u64, v: &[u8]) -> u64 {
    let text = std::str::from_utf8(v).expect("value is text");
    let version: u64 = text[text.find("-v").expect("version") + 2..][..8]
        .parse()
        .expect("version digits");
    assert_eq!(v, value(writer, k, version), "value not as written");
    version
}

fn run(writes_per_writer: u64) {
    let fs = FaultFs::new();
    let mut options = common::small_tree_options().file_system(Arc::new(fs));
    options.memtable_size = 8 * 1024;
    let db = Arc::new(Db::open("/stress", options).unwrap());
    // Per writer: versions started (the version being written is at most this).
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for w in 0..WRITERS {
        let (db, started) = (Arc::clone(&db), Arc::clone(&started));
        handles.push(std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(w);
            for n in 0..writes_per_writer {
                // Version n+1 goes to key n % KEYS: each key's versions increase.
                let version = n + 1;
                let k = n % KEYS_PER_WRITER;
                started[w as usize].store(version, Ordering::SeqCst);
                let sync = WriteOptions::default().sync(rng.gen_bool(0.05));
                let mut batch = bloomkv::WriteBatch::new();
                batch.put(key(w, k), value(w, k, version));
                db.write_opt(batch, &sync).unwrap();
            }
        }));
    }
    for r in 0..READERS {
        let (db, started, done, reads) = (
            Arc::clone(&db),
            Arc::clone(&started),
            Arc::clone(&done),
            Arc::clone(&reads),
        );
        handles.push(std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(100 + r);
            let mut seen = vec![vec![0u64; KEYS_PER_WRITER as usize]; WRITERS as usize];
            while !done.load(Ordering::SeqCst) {
                let w = rng.gen_range(0..WRITERS);
                if rng.gen_bool(0.9) {
                    let k = rng.gen_range(0..KEYS_PER_WRITER);
                    let limit = started[w as usize].load(Ordering::SeqCst);
                    if let Some(v) = db.get(key(w, k)).unwrap() {
                        let version = version_of(w, k, &v);
                        let last = &mut seen[w as usize][k as usize];
                        assert!(
                            version >= *last,
                            "key {w}/{k} went back from {last} to {version}"
                        );
                        let now = started[w as usize].load(Ordering::SeqCst);
                        assert!(
                            version <= now.max(limit),
                            "key {w}/{k}: version {version} never written"
                        );
                        assert_eq!(version % KEYS_PER_WRITER, (k + 1) % KEYS_PER_WRITER);
                        *last = version;
                    } else {
                        assert_eq!(seen[w as usize][k as usize], 0, "key {w}/{k} vanished");
                    }
                } else {
                    let prefix = format!("w{w}-");
                    let mut prev: Option<Vec<u8>> = None;
                    for item in db.prefix(prefix.as_bytes()) {
                        let (kb, v) = item.unwrap();
                        assert!(prev.as_ref().is_none_or(|p| p < &kb), "scan out of order");
                        let k: u64 = std::str::from_utf8(&kb).unwrap()[prefix.len() + 1..]
                            .parse()
                            .unwrap();
                        let version = version_of(w, k, &v);
                        let last = &mut seen[w as usize][k as usize];
                        assert!(version >= *last, "scan: key {w}/{k} went back");
                        *last = version;
                        prev = Some(kb);
                    }
                }
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    {
        let (db, done) = (Arc::clone(&db), Arc::clone(&done));
        handles.push(std::thread::spawn(move || {
            let mut i = 0u64;
            while !done.load(Ordering::SeqCst) {
                if i % 4 == 3 {
                    db.compact().unwrap();
                } else {
                    db.flush().unwrap();
                }
                i += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }));
    }
    let writers: Vec<_> = handles.drain(..WRITERS as usize).collect();
    for h in writers {
        h.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    for h in handles {
        h.join().unwrap();
    }
    // Final state: every key holds its last version.
    db.wait_for_background_work().unwrap();
    for w in 0..WRITERS {
        for k in 0..KEYS_PER_WRITER.min(writes_per_writer) {
            let last = (writes_per_writer - 1 - k) / KEYS_PER_WRITER * KEYS_PER_WRITER + k + 1;
            assert_eq!(db.get(key(w, k)).unwrap(), Some(value(w, k, last)));
        }
    }
    let stats = db.stats();
    eprintln!(
        "stress: {} writes, {} reads, {} flushes, {} compactions",
        WRITERS * writes_per_writer,
        reads.load(Ordering::Relaxed),
        stats.flushes,
        stats.compactions
    );
    assert!(stats.flushes > 0 && stats.compactions > 0);
}

#[test]
fn readers_writers_flushes_and_compactions_at_once() {
    run(4000);
}

#[test]
#[ignore = "long: more operations; run with --ignored"]
fn readers_writers_flushes_and_compactions_at_once_long() {
    run(100_000);
}
