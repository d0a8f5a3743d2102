//! The two filter layouts' probe times, hot and cold: the standard layout (a key's probes over
//! the whole bit array, ClickHouse's parameters) beside the cache-local one (all of a key's
//! probes in one 64-byte block, its own rule's parameters), both for a 1% target: 10 bits per
//! key, 5 hashes standard, 6 blocked.
//!
//! - **hot**: a filter of 64Ki keys (80 KiB), which stays in the CPU's caches;
//! - **cold**: a filter of `BLOOMKV_COLD_FILTER_BYTES` bytes (default 1 GiB, 859M keys), far
//!   larger than any CPU cache, so that every probe meets the memory.
//!
//! Batched (`*_batched`), as `multi_get` probes: 64 keys at a time, each key's words asked of
//! the memory first (`prefetch`: the standard filter's first two probes, the cache-local
//! filter's block), then each key probed, so that the memory serves many keys' loads at once.
//!
//! Each measured call probes the next of 1Mi prehashed keys, each inserted or not by a coin
//! of a fixed pseudo-random walk: the time per probe is the filter's, without the key's
//! hash. The walk goes on across criterion's samples (it starts over only after all 1Mi
//! keys), so a sample never replays lines an earlier one left in the cache. The cold run
//! holds both filters, 2 GiB at the default. Under `cargo test` (no `--bench` argument) the
//! cold filter is 8 MiB, so the run stays short.
//!
//! Run: `cargo bench --bench filter_layout`

use std::hint::black_box;
use std::time::Duration;

use bloomkv::filter::{BlockedBloomFilter, BloomFilter, KeyHash};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const TARGET_RATE: f64 = 0.01;
const HOT_KEYS: u64 = 1 << 16;
const PROBES: usize = 1 << 20;
const BITS_PER_KEY: u64 = 10;

/// The key hash of key number `i`: distinct keys, hashed as a store hashes them.
fn hash(i: u64) -> KeyHash {
    KeyHash::of(&i.to_le_bytes())
}

/// Keys a filter of `bytes` holds at 10 bits per key.
fn keys_for(bytes: u64) -> u64 {
    bytes * 8 / BITS_PER_KEY
}

fn cold_bytes() -> u64 {
    let benching = std::env::args().any(|a| a == "--bench");
    let default = if benching { 1 << 30 } else { 8 << 20 };
    std::env::var("BLOOMKV_COLD_FILTER_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `PROBES` hashes of keys of `0..keys` (inserted) and of `keys..2 * keys` (not), drawn by a
/// fixed pseudo-random walk whose top bit picks which.
fn probes(keys: u64) -> Vec<KeyHash> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..PROBES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let present = x >> 63 == 0;
            hash(x % keys + if present { 0 } else { keys })
        })
        .collect()
}

/// The next of `hashes` after `at`, which it moves on: one walk across all of a benchmark's
/// samples.
fn next<'a>(hashes: &'a [KeyHash], at: &mut usize) -> &'a KeyHash {
    let h = &hashes[*at];
    *at = (*at + 1) & (PROBES - 1);
    black_box(h)
}

/// Keys probed together in a batched call, as `multi_get` prefetches them.
const BATCH: usize = 64;

/// The next `BATCH` of `hashes` after `at`, which it moves on.
fn next_batch<'a>(hashes: &'a [KeyHash], at: &mut usize) -> &'a [KeyHash] {
    let batch = &hashes[*at..*at + BATCH];
    *at = (*at + BATCH) & (PROBES - 1);
    black_box(batch)
}

fn benches(c: &mut Criterion) {
    for (name, keys) in [("hot", HOT_KEYS), ("cold", keys_for(cold_bytes()))] {
        let mut standard = BloomFilter::with_capacity(keys, TARGET_RATE).expect("1% is reachable");
        let mut blocked =
            BlockedBloomFilter::with_capacity(keys, TARGET_RATE).expect("1% is reachable");
        for i in 0..keys {
            let h = hash(i);
            standard.insert_hash(&h);
            blocked.insert_hash(&h);
        }
        let hashes = probes(keys);
        let label = format!("{keys} keys, {} KiB", standard.memory_bytes() >> 10);
        let mut group = c.benchmark_group(format!("layout_{name}"));
        group.throughput(Throughput::Elements(1));
        let mut at = 0;
        group.bench_function(BenchmarkId::new("standard", &label), |b| {
            b.iter(|| standard.contains_hash(next(&hashes, &mut at)))
        });
        let mut at = 0;
        group.bench_function(BenchmarkId::new("blocked", &label), |b| {
            b.iter(|| blocked.contains_hash(next(&hashes, &mut at)))
        });
        group.finish();

        let mut group = c.benchmark_group(format!("layout_{name}_batched"));
        group.throughput(Throughput::Elements(BATCH as u64));
        let mut at = 0;
        group.bench_function(BenchmarkId::new("standard", &label), |b| {
            b.iter(|| {
                let batch = next_batch(&hashes, &mut at);
                batch.iter().for_each(|h| standard.prefetch(h));
                batch.iter().filter(|h| standard.contains_hash(h)).count()
            })
        });
        let mut at = 0;
        group.bench_function(BenchmarkId::new("blocked", &label), |b| {
            b.iter(|| {
                let batch = next_batch(&hashes, &mut at);
                batch.iter().for_each(|h| blocked.prefetch(h));
                batch.iter().filter(|h| blocked.contains_hash(h)).count()
            })
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
    name = filter_layout;
    config = config();
    targets = benches
}
criterion_main!(filter_layout);
