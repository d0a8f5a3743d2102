//! Scans of 100k keys forwards and backwards, over a store whose keys lie in several levels
//! with a memtable and level-0 tables above them, and a cursor's steps both ways.
//!
//! Run: `cargo bench --bench scan`.

use std::time::Duration;

use bloomkv::{Db, Options, WriteBatch};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const KEYS: u64 = 400_000;
const SCANNED: u64 = 100_000;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(b"scankey:");
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// 400k keys of 100-byte values written in random order, so every level holds keys of the
/// whole range, then a tenth of them overwritten in the memtable and two level-0 tables.
fn build_store(dir: &std::path::Path) -> Db {
    let options = Options::default()
        .memtable_size(1 << 20)
        .table_size(1 << 20)
        .level1_size(4 << 20)
        .level_size_ratio(4);
    let db = Db::open(dir, options).expect("open");
    let value = [b'v'; 100];
    // A permutation of the keys: 7,919 is prime to 400,000.
    let order: Vec<u64> = (0..KEYS).map(|i| i * 7_919 % KEYS).collect();
    for chunk in order.chunks(1000) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(key(i), value);
        }
        db.write(batch).expect("write");
    }
    db.flush().expect("flush");
    db.wait_for_background_work().expect("settle");
    for round in 0..3 {
        let mut batch = WriteBatch::new();
        for i in (round..KEYS).step_by(30) {
            batch.put(key(i), value);
        }
        db.write(batch).expect("write");
        if round < 2 {
            db.flush().expect("flush");
        }
    }
    db
}

fn bench_scan(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = build_store(dir.path());
    let levels: Vec<usize> = db.stats().levels.iter().map(|l| l.tables).collect();
    eprintln!("tables per level {levels:?}");
    let (from, to) = (key(KEYS / 4), key(KEYS / 4 + SCANNED));
    let mut group = c.benchmark_group("scan");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(5))
        .throughput(Throughput::Elements(SCANNED));
    group.bench_function(BenchmarkId::new("range", "forward"), |b| {
        b.iter(|| assert_eq!(db.range(from..to).count() as u64, SCANNED))
    });
    group.bench_function(BenchmarkId::new("range", "backward"), |b| {
        b.iter(|| assert_eq!(db.range(from..to).rev().count() as u64, SCANNED))
    });
    group.bench_function(BenchmarkId::new("cursor", "next"), |b| {
        b.iter(|| {
            let mut cursor = db.cursor_over(from..to);
            cursor.seek_to_first().expect("seek");
            let mut n = 0;
            while cursor.valid() {
                n += 1;
                cursor.next().expect("next");
            }
            assert_eq!(n, SCANNED);
        })
    });
    group.bench_function(BenchmarkId::new("cursor", "prev"), |b| {
        b.iter(|| {
            let mut cursor = db.cursor_over(from..to);
            cursor.seek_to_last().expect("seek");
            let mut n = 0;
            while cursor.valid() {
                n += 1;
                cursor.prev().expect("prev");
            }
            assert_eq!(n, SCANNED);
        })
    });
    group.finish();
}

criterion_group!(benches, bench_scan);
criterion_main!(benches);
