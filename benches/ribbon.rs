//! The Ribbon filter beside the Bloom filter, at the same false-positive targets: build time
//! per key (from hashes, as a table writer holds them) and probe time of a present and an
//! absent key, for 1M keys of 16 bytes, and probes of filters of 64M keys that miss the
//! CPU's caches. The bits per key and the measured rates each takes are printed before the
//! timings, as they are not times.
//!
//! Run: `cargo bench --bench ribbon`

use std::hint::black_box;
use std::time::Duration;

use bloomkv::filter::{BloomFilter, KeyHash, RibbonFilter};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

const KEYS: usize = 1 << 20;

fn hashes(seed: u64) -> Vec<u64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..KEYS)
        .map(|_| {
            let mut k = [0u8; 16];
            rng.fill_bytes(&mut k);
            KeyHash::of(&k).as_u64()
        })
        .collect()
}

fn bloom(hashes: &[u64], target: f64) -> BloomFilter {
    let mut filter = BloomFilter::with_capacity(hashes.len() as u64, target).expect("a rate");
    for &h in hashes {
        filter.insert_hash(&KeyHash::from_u64(h));
    }
    filter
}

fn rate(contains: impl Fn(&KeyHash) -> bool, absent: &[u64]) -> f64 {
    let found = absent
        .iter()
        .filter(|&&h| contains(&KeyHash::from_u64(h)))
        .count();
    found as f64 / absent.len() as f64
}

fn benches(c: &mut Criterion) {
    let present = hashes(1);
    let absent = hashes(2);
    for target in [0.01, 0.001, 0.0001] {
        let b = bloom(&present, target);
        let r = RibbonFilter::from_hashes(&present, target).expect("a rate");
        println!(
            "target {target}: bloom {:.2} bits/key, measured {:.5}; ribbon {:.2} bits/key, \
             measured {:.5}",
            b.memory_bytes() as f64 * 8.0 / KEYS as f64,
            rate(|h| b.contains_hash(h), &absent),
            r.bits_per_key(),
            rate(|h| r.contains_hash(h), &absent),
        );
    }
    let target = 0.01;
    let mut group = c.benchmark_group("build 1% (per key)");
    group.throughput(Throughput::Elements(KEYS as u64));
    group.sample_size(10);
    group.bench_function(BenchmarkId::new("bloom", "1M"), |bench| {
        bench.iter(|| bloom(black_box(&present), target))
    });
    group.bench_function(BenchmarkId::new("ribbon", "1M"), |bench| {
        bench.iter(|| RibbonFilter::from_hashes(black_box(&present), target))
    });
    group.finish();
    let b = bloom(&present, target);
    let r = RibbonFilter::from_hashes(&present, target).expect("a rate");
    probes(c, "probe 1%", "1M", [&present, &absent], &b, &r);
}

/// Times probes of `b` and of `r` by the present keys, then the absent ones, cycling through
/// each set (whose length is a power of two).
fn probes(
    c: &mut Criterion,
    name: &str,
    size: &str,
    [present, absent]: [&[u64]; 2],
    b: &BloomFilter,
    r: &RibbonFilter,
) {
    for (keys, which) in [(present, "present"), (absent, "absent")] {
        let mut group = c.benchmark_group(format!("{name} {which}"));
        let mut i = 0usize;
        let mut next = move || {
            i = (i + 1) & (keys.len() - 1);
            KeyHash::from_u64(black_box(keys[i]))
        };
        group.bench_function(BenchmarkId::new("bloom", size), |bench| {
            bench.iter(|| b.contains_hash(&next()))
        });
        group.bench_function(BenchmarkId::new("ribbon", size), |bench| {
            bench.iter(|| r.contains_hash(&next()))
        });
        group.finish();
    }
}

/// Probes of filters of 2^26 keys (80 MB of Bloom filter, 62 MB of Ribbon), past the CPU's
/// caches: each probe of a random key meets memory cold.
fn cold(c: &mut Criterion) {
    // Only under `cargo bench` (which passes `--bench`): `cargo test --all-targets` runs each
    // benchmark once, and these filters take a gigabyte and seconds to build.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    const COLD_KEYS: usize = 1 << 26;
    let mut rng = SmallRng::seed_from_u64(3);
    let present: Vec<u64> = (0..COLD_KEYS).map(|_| rng.next_u64()).collect();
    let absent: Vec<u64> = (0..COLD_KEYS).map(|_| rng.next_u64()).collect();
    let b = bloom(&present, 0.01);
    let r = RibbonFilter::from_hashes(&present, 0.01).expect("a rate");
    probes(c, "cold probe 1%", "64M", [&present, &absent], &b, &r);
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = ribbon;
    config = config();
    targets = benches, cold
}
criterion_main!(ribbon);
