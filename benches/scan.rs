//! Scans of 100k keys forwards and backwards, over a store whose keys lie in several levels
//! with a memtable and level-0 tables above them, and a cursor's steps both ways; and short
//! scans over one prefix, present or absent, of keys still in the memtable, with and
//! without a prefix extractor.
//!
//! Run: `cargo bench --bench scan`.

use std::time::Duration;

use bloomkv::{Db, Options, PrefixExtractor, WriteBatch};
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

const TENANTS: u64 = 2_000;
const KEYS_PER_TENANT: u64 = 100;

fn tenant_prefix(tenant: u64) -> String {
    format!("tenant{tenant:05}:")
}

/// The keys of every even tenant, 100 each with 100-byte values, written in batches and left
/// in the memtable (64 MiB, which holds them all).
fn memtable_store(dir: &std::path::Path, extractor: Option<PrefixExtractor>) -> Db {
    let mut options = Options::default().memtable_size(64 << 20);
    options.prefix_extractor = extractor;
    let db = Db::open(dir, options).expect("open");
    for id in 0..KEYS_PER_TENANT {
        let mut batch = WriteBatch::new();
        for tenant in (0..TENANTS).step_by(2) {
            batch.put(format!("{}{id:04}", tenant_prefix(tenant)), [b'v'; 100]);
        }
        db.write(batch).expect("write");
    }
    assert_eq!(db.stats().levels.iter().map(|l| l.tables).sum::<usize>(), 0);
    db
}

fn bench_prefix_scans_in_memtable(c: &mut Criterion) {
    let mut group = c.benchmark_group("prefix_scan_memtable");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    for (name, extractor) in [
        ("delimited", Some(PrefixExtractor::Delimited(b':'))),
        ("no_extractor", None),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = memtable_store(dir.path(), extractor);
        let mut tenant = 0;
        group.bench_function(BenchmarkId::new("present", name), |b| {
            b.iter(|| {
                tenant = (tenant + 2) % TENANTS;
                let n = db.prefix(tenant_prefix(tenant)).count() as u64;
                assert_eq!(n, KEYS_PER_TENANT);
            })
        });
        group.bench_function(BenchmarkId::new("absent", name), |b| {
            b.iter(|| {
                tenant = (tenant + 2) % TENANTS;
                assert_eq!(db.prefix(tenant_prefix(tenant + 1)).count(), 0);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_scan, bench_prefix_scans_in_memtable);
criterion_main!(benches);
