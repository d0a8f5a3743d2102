//! Filter micro-benchmarks: insert, contains of a present key (hit) and contains of an absent
//! key (miss), in time per operation, for bloomkv's filter beside the `fastbloom` and
//! `bloomfilter` crates at the same bits per key.
//!
//! Every filter is sized for 1M keys of 16 bytes at 10 bits per key (what a 1% target gives
//! bloomkv: 10 bits/key, 5 hashes). fastbloom gets the same bit count and the same 5 hashes and
//! keeps its default hasher; bloomfilter gets the same bit count and picks its own hash count
//! (round(10 * ln 2) = 7), as its API does not take one.
//!
//! A `hash` group times the key hash alone (bloomkv's xxh3-64, fastbloom's SipHash-1-3).
//!
//! Each measured call does one operation on the next key of a fixed set of 1M prebuilt keys,
//! cycling, so criterion's "time" is directly the time per operation.
//!
//! Run: `cargo bench --bench filter`

use std::hint::black_box;
use std::time::Duration;

use bloomkv::filter::{BloomFilter, KeyHash};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

/// Keys per filter; a power of two so the cycling index is a mask.
const KEYS: usize = 1 << 20;
const KEY_LEN: usize = 16;
const BITS_PER_KEY: usize = 10;
const TARGET_RATE: f64 = 0.01;

type Key = [u8; KEY_LEN];

fn keys(seed: u64) -> Vec<Key> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..KEYS)
        .map(|_| {
            let mut k = [0u8; KEY_LEN];
            rng.fill_bytes(&mut k);
            k
        })
        .collect()
}

fn ours() -> BloomFilter {
    let f = BloomFilter::with_capacity(KEYS as u64, TARGET_RATE).expect("1% is reachable");
    assert_eq!((f.bits_per_key(), f.hashes()), (BITS_PER_KEY as u32, 5));
    f
}

fn fastbloom_filter(hashes: u32) -> fastbloom::BloomFilter {
    fastbloom::BloomFilter::with_num_bits(KEYS * BITS_PER_KEY).hashes(hashes)
}

fn bloomfilter_filter() -> bloomfilter::Bloom<[u8]> {
    bloomfilter::Bloom::new_with_seed(KEYS * BITS_PER_KEY / 8, KEYS, &[7u8; 32])
        .expect("valid size")
}

/// Runs `op` on one key per call, walking the key set cyclically.
fn per_key<'a, F: FnMut(&[u8]) -> bool + 'a>(
    keys: &'a [Key],
    mut op: F,
) -> impl FnMut() -> bool + 'a {
    let mut i = 0usize;
    move || {
        let key = &keys[i];
        i = (i + 1) & (KEYS - 1);
        op(black_box(&key[..]))
    }
}

fn benches(c: &mut Criterion) {
    let present = keys(1);
    let absent = keys(2);
    let hashes = ours().hashes();

    let mut ours_full = ours();
    let mut fast_full = fastbloom_filter(hashes);
    let mut bf_full = bloomfilter_filter();
    for k in &present {
        ours_full.insert(k);
        fast_full.insert(&k[..]);
        bf_full.set(&k[..]);
    }

    // The hash alone: bloomkv's xxh3-64 against fastbloom's default SipHash-1-3.
    let mut group = c.benchmark_group("hash");
    group.throughput(Throughput::Elements(1));
    group.bench_function(BenchmarkId::new("bloomkv", "1M x 16B"), |b| {
        b.iter(per_key(&present, |k| KeyHash::of(k).as_u64() & 1 == 0))
    });
    group.bench_function(BenchmarkId::new("fastbloom", "1M x 16B"), |b| {
        b.iter(per_key(&present, |k| fast_full.source_hash(k) & 1 == 0))
    });
    group.finish();

    let mut group = c.benchmark_group("insert");
    group.throughput(Throughput::Elements(1));
    {
        let mut f = ours();
        group.bench_function(BenchmarkId::new("bloomkv", "1M x 16B"), |b| {
            b.iter(per_key(&present, |k| {
                f.insert(k);
                true
            }))
        });
        let mut f = fastbloom_filter(hashes);
        group.bench_function(BenchmarkId::new("fastbloom", "1M x 16B"), |b| {
            b.iter(per_key(&present, |k| f.insert(k)))
        });
        let mut f = bloomfilter_filter();
        group.bench_function(BenchmarkId::new("bloomfilter", "1M x 16B"), |b| {
            b.iter(per_key(&present, |k| {
                f.set(k);
                true
            }))
        });
    }
    group.finish();

    for (name, probe) in [("contains_hit", &present), ("contains_miss", &absent)] {
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Elements(1));
        group.bench_function(BenchmarkId::new("bloomkv", "1M x 16B"), |b| {
            b.iter(per_key(probe, |k| ours_full.contains(k)))
        });
        group.bench_function(BenchmarkId::new("fastbloom", "1M x 16B"), |b| {
            b.iter(per_key(probe, |k| fast_full.contains(k)))
        });
        group.bench_function(BenchmarkId::new("bloomfilter", "1M x 16B"), |b| {
            b.iter(per_key(probe, |k| bf_full.check(k)))
        });
        group.finish();
    }
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = filter;
    config = config();
    targets = benches
}
criterion_main!(filter);
