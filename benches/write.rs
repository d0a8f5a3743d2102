//! One writer, no contention: a plain `put` against the same write made by a single-key
//! transaction (a `get` of the key, then a `put` and a commit) and by `compare_and_swap`
//! (expecting the value the last swap wrote). Each writes to 10,000 keys in turn, unsynced,
//! in a store that flushes and compacts as it fills.
//!
//! Run: `cargo bench --bench write`.

use std::time::Duration;

use bloomkv::{Db, Options};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const KEYS: u64 = 10_000;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&(i % KEYS).wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
    k
}

fn value(i: u64) -> [u8; 100] {
    let mut v = [b'v'; 100];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    (dir, db)
}

fn writes(c: &mut Criterion) {
    let mut group = c.benchmark_group("write");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(5));

    let (_dir, db) = open();
    let mut i = 0u64;
    group.bench_function("put", |b| {
        b.iter(|| {
            db.put(key(i), value(i)).expect("put");
            i += 1;
        })
    });

    let (_dir, db) = open();
    let mut i = 0u64;
    group.bench_function("transaction", |b| {
        b.iter(|| {
            let mut tx = db.transaction();
            tx.get(key(i)).expect("get");
            tx.put(key(i), value(i)).expect("put");
            tx.commit().expect("no other writer");
            i += 1;
        })
    });

    let (_dir, db) = open();
    let mut last: Vec<Option<[u8; 100]>> = vec![None; KEYS as usize];
    let mut i = 0u64;
    group.bench_function("compare_and_swap", |b| {
        b.iter(|| {
            let slot = (i % KEYS) as usize;
            let new = value(i);
            db.compare_and_swap(key(i), last[slot].as_ref().map(|v| &v[..]), Some(&new))
                .expect("written")
                .expect("no other writer");
            last[slot] = Some(new);
            i += 1;
        })
    });
    group.finish();
}

criterion_group!(benches, writes);
criterion_main!(benches);
