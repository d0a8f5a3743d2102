//! `get` of present and absent keys on a store with several levels, with and without filters,
//! and absent keys in batches of 64 (`multi_get`) on the same stores.
//!
//! Run: `cargo bench --bench get`.

use std::time::Duration;

use bloomkv::{Db, FilterPolicy, Options, WriteBatch};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const KEYS: u64 = 200_000;
const LOOKUPS: usize = 10_000;

fn key(i: u64, present: bool) -> [u8; 16] {
    let tagged = i * 2 + u64::from(!present);
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&tagged.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes());
    k[8..].copy_from_slice(&tagged.to_be_bytes());
    k
}

/// A store whose 200k keys end in several levels (small memtable and level sizes); with
/// `level0_tables`, that many more flushes of other keys then leave level-0 tables that cover
/// the whole key range (fewer than the compaction trigger, so they stay).
fn build_store(dir: &std::path::Path, policy: FilterPolicy, level0_tables: u64) -> Db {
    let options = Options::default()
        .filter_policy(policy)
        .memtable_size(512 * 1024)
        .table_size(512 * 1024)
        .level1_size(2 << 20)
        .level_size_ratio(4);
    let db = Db::open(dir, options).expect("open");
    let value = [b'v'; 100];
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(1000) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(key(i, true), value);
        }
        db.write(batch).expect("write");
    }
    db.flush().expect("flush");
    db.wait_for_background_work().expect("settle");
    for round in 0..level0_tables {
        let mut batch = WriteBatch::new();
        for i in (0..KEYS).step_by(50) {
            batch.put(key(KEYS + round * KEYS + i, true), value);
        }
        db.write(batch).expect("write");
        db.flush().expect("flush");
    }
    db
}

fn bench_get(c: &mut Criterion) {
    let mut group = c.benchmark_group("get");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(LOOKUPS as u64));
    let probes: Vec<u64> = (0..LOOKUPS as u64).map(|i| (i * 7919) % KEYS).collect();
    for (label, policy, level0_tables) in [
        ("filter-0.01", FilterPolicy::FalsePositiveRate(0.01), 0),
        (
            "filter-0.01-3-level0",
            FilterPolicy::FalsePositiveRate(0.01),
            3,
        ),
        ("no-filter", FilterPolicy::Disabled, 0),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = build_store(dir.path(), policy, level0_tables);
        let levels: Vec<usize> = db.stats().levels.iter().map(|l| l.tables).collect();
        eprintln!("{label}: tables per level {levels:?}");
        for (kind, present) in [("present", true), ("absent", false)] {
            group.bench_with_input(BenchmarkId::new(kind, label), &present, |b, &present| {
                b.iter(|| {
                    for &i in &probes {
                        let found = db.get(key(i, present)).expect("get");
                        assert_eq!(found.is_some(), present);
                    }
                })
            });
        }
        let absent: Vec<[u8; 16]> = probes.iter().map(|&i| key(i, false)).collect();
        group.bench_function(BenchmarkId::new("absent-multi_get-64", label), |b| {
            b.iter(|| {
                for batch in absent.chunks(64) {
                    let found = db.multi_get(batch).expect("multi_get");
                    assert!(found.iter().all(Option::is_none));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_get);
criterion_main!(benches);
