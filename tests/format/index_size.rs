//! What a table's index costs, on disk and in memory, for random 16-byte keys, and how fast it
//! finds a key's data block.
//!
//! The ignored tests measure a table of a million keys with 100-byte values (the figures in
//! docs/format.md, "Index block"), and gets from a store of the same keys whose blocks are
//! all in the block cache, where the index search is a larger share of a lookup. Run them
//! optimised, one at a time:
//!
//!     cargo test --release --test format index_size:: -- --ignored --nocapture --test-threads 1

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use bloomkv::entry::Entry;
use bloomkv::filter::KeyHash;
use bloomkv::fs::{OsFileSystem, SharedFs};
use bloomkv::metrics::ReadCounters;
use bloomkv::sstable::{Table, TableBuilder, TableOptions};
use bloomkv::{Db, Options, WriteBatch};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn os_fs() -> SharedFs {
    Arc::new(OsFileSystem)
}

/// `n` distinct random 16-byte keys, sorted.
fn random_keys(seed: u64, n: usize) -> Vec<[u8; 16]> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut keys: Vec<[u8; 16]> = (0..n).map(|_| rng.gen()).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// A table of `keys`, each with a random 100-byte value (LZ4 cannot shrink them, as with
/// most real values).
fn build_table(path: &Path, keys: &[[u8; 16]]) -> Table {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut b = TableBuilder::new(os_fs(), path, TableOptions::default(), keys.len() as u64)
        .expect("builder");
    let mut value = [0u8; 100];
    for key in keys {
        rng.fill(&mut value[..]);
        b.add(&Entry::value(key.to_vec(), 1, value.to_vec()))
            .expect("add");
    }
    b.finish().expect("finish");
    Table::open(os_fs(), path, Arc::new(ReadCounters::new())).expect("open")
}

/// Nanoseconds per call of `f` over `items`.
fn nanos_per<T>(items: &[T], mut f: impl FnMut(&T)) -> f64 {
    let start = Instant::now();
    for item in items {
        f(item);
    }
    start.elapsed().as_nanos() as f64 / items.len() as f64
}

/// What a table of 100,000 random 16-byte keys measures (2,858 data blocks): 6.2 bytes of
/// index per block in memory and 5.1 on disk (LZ4 shrinks this one), where the index of
/// format version 2 held 44 in memory and 22 on disk. The bound leaves room for small
/// changes only.
const MAX_INDEX_BYTES_PER_BLOCK: f64 = 8.0;

#[test]
fn index_of_random_keys_stays_under_eight_bytes_per_block() {
    let dir = tempfile::tempdir().unwrap();
    let keys = random_keys(2, 100_000);
    let table = build_table(&dir.path().join("t.sst"), &keys);
    let blocks = table.data_blocks() as f64;
    assert!(blocks > 2_500.0, "{blocks} data blocks");
    let in_memory = table.index_memory_bytes() as f64 / blocks;
    let on_disk = table.properties().index_size as f64 / blocks;
    println!("{blocks} blocks: {in_memory:.2} bytes per block in memory, {on_disk:.2} on disk");
    assert!(
        in_memory <= MAX_INDEX_BYTES_PER_BLOCK,
        "{in_memory:.2} bytes per block in memory"
    );
    assert!(
        on_disk <= MAX_INDEX_BYTES_PER_BLOCK,
        "{on_disk:.2} bytes per block on disk"
    );
    // Every key is still found, through the index, in one block read.
    for key in keys.iter().step_by(97) {
        assert!(table.get(key, &KeyHash::of(key)).unwrap().is_some());
    }
}

#[test]
#[ignore = "a measurement: builds a 120 MB table"]
fn measure_index_of_a_million_random_keys() {
    let dir = tempfile::tempdir().unwrap();
    let keys = random_keys(1, 1_000_000);
    let table = build_table(&dir.path().join("t.sst"), &keys);
    let blocks = table.data_blocks() as f64;
    let props = table.properties();
    println!(
        "format {}: {} keys, {} data blocks; index on disk {} bytes ({:.2} per block), \
         in memory {} bytes ({:.2} per block)",
        props.format_version,
        keys.len(),
        table.data_blocks(),
        props.index_size,
        props.index_size as f64 / blocks,
        table.index_memory_bytes(),
        table.index_memory_bytes() as f64 / blocks,
    );

    let mut rng = SmallRng::seed_from_u64(3);
    let probes: Vec<[u8; 16]> = (0..1_000_000)
        .map(|_| keys[rng.gen_range(0..keys.len())])
        .collect();
    let absent: Vec<[u8; 16]> = (0..1_000_000).map(|_| rng.gen()).collect();
    for round in 0..3 {
        let mut sum = 0usize;
        let present_ns = nanos_per(&probes, |k| {
            sum += table.block_for(k, u64::MAX).unwrap().unwrap()
        });
        let absent_ns = nanos_per(&absent, |k| {
            sum += table.block_for(k, u64::MAX).unwrap().unwrap_or(0)
        });
        let get_ns = nanos_per(&probes[..200_000], |k| {
            assert!(table.get(k, &KeyHash::of(k)).unwrap().is_some());
        });
        println!(
            "round {round}: block_for {present_ns:.0} ns (present keys), {absent_ns:.0} ns \
             (random keys); get of a present key {get_ns:.0} ns [{sum}]"
        );
    }
}

#[test]
#[ignore = "a measurement: loads a million keys into a store"]
fn measure_store_gets_from_the_block_cache() {
    let dir = tempfile::tempdir().unwrap();
    let keys = random_keys(1, 1_000_000);
    let db = Db::open(dir.path(), Options::default().block_cache_size(512 << 20)).unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    for chunk in keys.chunks(1000) {
        let mut batch = WriteBatch::new();
        for key in chunk {
            batch.put(key, &rng.gen::<[u8; 32]>().repeat(4)[..100]);
        }
        db.write(batch).unwrap();
    }
    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    let levels: Vec<usize> = stats.levels.iter().map(|l| l.tables).collect();
    println!(
        "tables per level {levels:?}; index memory {} bytes, filter memory {} bytes",
        stats.index_memory_bytes, stats.filter_memory_bytes
    );
    let probes: Vec<[u8; 16]> = (0..200_000)
        .map(|_| keys[rng.gen_range(0..keys.len())])
        .collect();
    for key in &probes {
        assert!(db.get(key).unwrap().is_some());
    }
    for round in 0..3 {
        let ns = nanos_per(&probes, |k| assert!(db.get(k).unwrap().is_some()));
        println!("round {round}: get of a present key, its block cached: {ns:.0} ns");
    }
}
