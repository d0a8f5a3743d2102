//! The Ribbon filter beside the Bloom filter, the cache-local Bloom filter and binary fuse
//! filters (`xorf`, which reach fixed rates only: 8-bit fingerprints give 1/256, 16-bit
//! 1/65,536). First printed, as they are not times: bits per key, predicted and measured
//! rates at 1%, 0.1% and 0.01%, and the peak memory a build takes beyond the filter it
//! returns (counted by a global allocator that tracks its high-water mark). Then timed: the
//! build per key (from hashes, as a table writer holds them) and probes of a present and an
//! absent key, for 1M keys of 16 bytes, and probes of filters of 64M keys that miss the CPU's
//! caches (under `cargo bench` only).
//!
//! Run: `cargo bench --bench ribbon`

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bloomkv::filter::{BlockedBloomFilter, BloomFilter, KeyHash, RibbonFilter};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};
use xorf::{BinaryFuse16, BinaryFuse8, Filter};

/// The system allocator, keeping the bytes allocated now and their high-water mark.
struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call goes to the system allocator unchanged; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = NOW.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        NOW.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const KEYS: usize = 1 << 20;

fn hashes(seed: u64, count: usize) -> Vec<u64> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let mut k = [0u8; 16];
            rng.fill_bytes(&mut k);
            KeyHash::of(&k).as_u64()
        })
        .collect()
}

/// One filter of any of the kinds compared.
enum Kind {
    Bloom(BloomFilter),
    CacheLocal(BlockedBloomFilter),
    Ribbon(RibbonFilter),
    Fuse8(BinaryFuse8),
    Fuse16(BinaryFuse16),
}

/// The kinds, by name; the binary fuse filters ignore the target.
const NAMES: [&str; 5] = ["bloom", "cache-local", "ribbon", "fuse8", "fuse16"];

impl Kind {
    fn build(name: &str, hashes: &[u64], target: f64) -> Kind {
        let keys = hashes.len() as u64;
        match name {
            "bloom" => {
                let mut f = BloomFilter::with_capacity(keys, target).expect("a rate");
                hashes
                    .iter()
                    .for_each(|&h| f.insert_hash(&KeyHash::from_u64(h)));
                Kind::Bloom(f)
            }
            "cache-local" => {
                let mut f = BlockedBloomFilter::with_capacity(keys, target).expect("a rate");
                hashes
                    .iter()
                    .for_each(|&h| f.insert_hash(&KeyHash::from_u64(h)));
                Kind::CacheLocal(f)
            }
            "ribbon" => Kind::Ribbon(RibbonFilter::from_hashes(hashes, target).expect("a rate")),
            "fuse8" => Kind::Fuse8(BinaryFuse8::try_from(hashes).expect("distinct keys")),
            _ => Kind::Fuse16(BinaryFuse16::try_from(hashes).expect("distinct keys")),
        }
    }

    #[inline]
    fn contains(&self, hash: u64) -> bool {
        match self {
            Kind::Bloom(f) => f.contains_hash(&KeyHash::from_u64(hash)),
            Kind::CacheLocal(f) => f.contains_hash(&KeyHash::from_u64(hash)),
            Kind::Ribbon(f) => f.contains_hash(&KeyHash::from_u64(hash)),
            Kind::Fuse8(f) => f.contains(&hash),
            Kind::Fuse16(f) => f.contains(&hash),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Kind::Bloom(f) => f.memory_bytes(),
            Kind::CacheLocal(f) => f.memory_bytes(),
            Kind::Ribbon(f) => f.memory_bytes(),
            Kind::Fuse8(f) => f.fingerprints.len(),
            Kind::Fuse16(f) => f.fingerprints.len() * 2,
        }
    }

    fn predicted(&self) -> f64 {
        match self {
            Kind::Bloom(f) => f.params().predicted_false_positive_rate(),
            Kind::CacheLocal(f) => f.params().predicted_false_positive_rate(),
            Kind::Ribbon(f) => f.predicted_false_positive_rate(),
            Kind::Fuse8(_) => 1.0 / 256.0,
            Kind::Fuse16(_) => 1.0 / 65_536.0,
        }
    }
}

/// Builds `name` over `hashes`; returns it and the bytes the build held beyond what it
/// returned, at its peak.
fn build_measured(name: &str, hashes: &[u64], target: f64) -> (Kind, usize) {
    let before = NOW.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let filter = Kind::build(name, hashes, target);
    let kept = NOW.load(Ordering::Relaxed).saturating_sub(before);
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(before);
    (filter, peak.saturating_sub(kept))
}

fn rate(filter: &Kind, absent: &[u64]) -> f64 {
    absent.iter().filter(|&&h| filter.contains(h)).count() as f64 / absent.len() as f64
}

/// Bits per key, rates and temporary memory of every kind at three targets: a line each.
fn report(present: &[u64], absent: &[u64]) {
    println!("kind         target   bits/key  predicted   measured  measured/predicted  temporary bytes/key");
    for target in [0.01, 0.001, 0.0001] {
        for name in NAMES {
            if name.starts_with("fuse") && target != 0.01 {
                continue;
            }
            let (filter, temporary) = build_measured(name, present, target);
            let predicted = filter.predicted();
            let measured = rate(&filter, absent);
            println!(
                "{name:<12} {:>6}  {:>9.2}  {predicted:>9.6}  {measured:>9.6}  {:>18.3}  {:>19.1}",
                if name.starts_with("fuse") {
                    "-".to_string()
                } else {
                    target.to_string()
                },
                filter.bytes() as f64 * 8.0 / present.len() as f64,
                measured / predicted,
                temporary as f64 / present.len() as f64,
            );
        }
    }
}

fn benches(c: &mut Criterion) {
    let present = hashes(1, KEYS);
    let absent = hashes(2, KEYS);
    report(&present, &absent);
    let target = 0.01;
    let mut group = c.benchmark_group("build 1% (per key)");
    group.throughput(Throughput::Elements(KEYS as u64));
    group.sample_size(10);
    for name in NAMES {
        group.bench_function(BenchmarkId::new(name, "1M"), |bench| {
            bench.iter(|| Kind::build(name, black_box(&present), target))
        });
    }
    group.finish();
    let filters: Vec<(&str, Kind)> = (NAMES.iter())
        .map(|&name| (name, Kind::build(name, &present, target)))
        .collect();
    probes(c, "probe 1%", "1M", [&present, &absent], &filters);
}

/// Times probes of each of `filters` by the present keys, then the absent ones, cycling
/// through each set (whose length is a power of two).
fn probes(
    c: &mut Criterion,
    name: &str,
    size: &str,
    [present, absent]: [&[u64]; 2],
    filters: &[(&str, Kind)],
) {
    for (keys, which) in [(present, "present"), (absent, "absent")] {
        let mut group = c.benchmark_group(format!("{name} {which}"));
        for (kind, filter) in filters {
            let mut i = 0usize;
            group.bench_function(BenchmarkId::new(*kind, size), |bench| {
                bench.iter(|| {
                    i = (i + 1) & (keys.len() - 1);
                    filter.contains(black_box(keys[i]))
                })
            });
        }
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
    let filters: Vec<(&str, Kind)> = (NAMES.iter())
        .filter(|&&name| name != "fuse16")
        .map(|&name| (name, Kind::build(name, &present, 0.01)))
        .collect();
    probes(c, "cold probe 1%", "64M", [&present, &absent], &filters);
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
