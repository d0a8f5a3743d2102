//! The peer stores, RocksDB and fjall, loaded and queried the way bloomkv is, so the ratios
//! compare like with like: `kvtool bench --peers` runs them in the same process after the
//! filter settings, and `kvtool bench --stores` runs each in a process of its own. Also how
//! every bench opens them, which `--writes` shares (`peer_writes.rs`). Built only with
//! `--features peers`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::figures::{merge, LookupFigures};
use super::timing::{time_lookups, Timing};
use super::workload::Workload;
use crate::{progress, Failure};

/// One peer's figures.
pub struct PeerResult {
    pub name: &'static str,
    /// Writes, then the memtable flushed.
    pub load_seconds: f64,
    /// The longest single batch write of the load.
    pub longest_write_seconds: f64,
    /// Then, until compactions stopped, where the store can wait for that.
    pub settle_seconds: Option<f64>,
    /// Gets right after the load's flush, compactions still running, where the store can
    /// wait for its compactions and so has a second, settled pass; `None` for a store that
    /// cannot, whose one pass is `present` and `absent`.
    pub fresh: Option<(Timing, Timing)>,
    pub present: Timing,
    pub absent: Timing,
    /// RocksDB's `BLOOM_FILTER_USEFUL` over the absent lookups (reads its filters avoided).
    pub filter_useful: Option<u64>,
    /// Data-block reads that missed the block cache, per present-key get (RocksDB's
    /// `BLOCK_CACHE_DATA_MISS`).
    pub present_block_misses_per_get: Option<f64>,
    /// Data-block cache hits over lookups during the gets (RocksDB's data hit and miss tickers).
    pub block_cache_hit_rate: Option<f64>,
    /// Store-specific figures (RocksDB: its counters per get and its index and filter
    /// memory), added to the JSON as they are.
    pub extra: serde_json::Value,
    pub note: &'static str,
}

impl PeerResult {
    pub fn to_json(&self) -> serde_json::Value {
        let mut figures = json!({
            "store": self.name, "load_seconds": self.load_seconds,
            "longest_write_seconds": self.longest_write_seconds,
            "settle_seconds": self.settle_seconds,
            "present_gets_per_second": self.present.gets_per_second,
            "present_p50_us": self.present.p50.as_secs_f64() * 1e6,
            "present_p99_us": self.present.p99.as_secs_f64() * 1e6,
            "absent_gets_per_second": self.absent.gets_per_second,
            "absent_p50_us": self.absent.p50.as_secs_f64() * 1e6,
            "absent_p99_us": self.absent.p99.as_secs_f64() * 1e6,
            "bloom_filter_useful": self.filter_useful,
            "present_block_misses_per_get": self.present_block_misses_per_get,
            "block_cache_hit_rate": self.block_cache_hit_rate,
            "configuration": self.note,
        });
        merge(&mut figures, &self.extra);
        figures
    }
}

/// Runs both peers in subdirectories of `dir`.
pub fn run(workload: &Workload, dir: &Path) -> Result<Vec<PeerResult>, Failure> {
    let rocks = run_rocksdb(workload, &dir.join("rocksdb"), false)?;
    let fjall = run_fjall(workload, &dir.join("fjall"))?;
    Ok(vec![rocks, fjall])
}

/// RocksDB's default options with a full Bloom filter of 10 bits per key (its default has no
/// filter) and statistics on: how every bench opens it.
pub fn rocksdb_options() -> rocksdb::Options {
    let mut options = rocksdb::Options::default();
    options.create_if_missing(true);
    options.enable_statistics();
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    options.set_block_based_table_factory(&table);
    options
}

/// [`rocksdb_options`] with its metadata in bounded memory, as RocksDB's tuning guide gives it
/// for data whose filters and indexes do not fit: partitioned filters and a two-level index,
/// index and filter blocks kept in a 32 MiB block cache (bloomkv's default cache size) at
/// high priority, the top levels pinned, level 0's metadata pinned.
fn rocksdb_partitioned_options() -> rocksdb::Options {
    let mut options = rocksdb_options();
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    table.set_partition_filters(true);
    table.set_index_type(rocksdb::BlockBasedIndexType::TwoLevelIndexSearch);
    table.set_metadata_block_size(4096);
    table.set_block_cache(&rocksdb::Cache::new_lru_cache(32 << 20));
    table.set_cache_index_and_filter_blocks(true);
    table.set_cache_index_and_filter_blocks_with_high_priority(true);
    table.set_pin_top_level_index_and_filter(true);
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    options.set_block_based_table_factory(&table);
    options
}

const ROCKSDB_PARTITIONED_CONFIGURATION: &str = "as rocksdb, with metadata in bounded memory: partitioned filters (10 bits/key) and a two-level index (4 KiB metadata blocks), cached in a 32 MiB LRU block cache at high priority, top level and level 0 pinned";

/// [`rocksdb_options`] with bloomkv's default memtable, table and level sizes and level-0
/// triggers (`Options::default()` in src/options/mod.rs), so that write amplification compares
/// at the same shape of tree.
pub fn rocksdb_shape_options() -> rocksdb::Options {
    let ours = bloomkv::Options::default();
    let mut options = rocksdb_options();
    options.set_write_buffer_size(ours.memtable_size);
    options.set_max_write_buffer_number(ours.tuning.max_immutable_memtables as i32 + 1);
    options.set_max_bytes_for_level_base(ours.tuning.level1_size);
    options.set_max_bytes_for_level_multiplier(ours.tuning.level_size_ratio as f64);
    options.set_target_file_size_base(ours.table_size);
    options.set_level_zero_file_num_compaction_trigger(ours.tuning.l0_compaction_trigger as i32);
    options.set_level_zero_slowdown_writes_trigger(ours.tuning.l0_slowdown_trigger as i32);
    options.set_level_zero_stop_writes_trigger(ours.tuning.l0_stop_trigger as i32);
    options.set_num_levels(ours.tuning.num_levels as i32);
    options.set_level_compaction_dynamic_level_bytes(ours.tuning.dynamic_level_sizes);
    options
}

/// What `rocksdb-shape` is, from bloomkv's defaults.
pub fn rocksdb_shape_configuration() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(shape_configuration)
}

fn shape_configuration() -> String {
    let ours = bloomkv::Options::default();
    format!(
        "as rocksdb, with bloomkv's sizes: write_buffer_size {} MiB, max_write_buffer_number {}, \
         max_bytes_for_level_base \
         {} MiB, max_bytes_for_level_multiplier {}, target_file_size_base {} MiB, level-0 \
         triggers {} / {} / {}, num_levels {}, level_compaction_dynamic_level_bytes {}",
        ours.memtable_size >> 20,
        ours.tuning.max_immutable_memtables + 1,
        ours.tuning.level1_size >> 20,
        ours.tuning.level_size_ratio,
        ours.table_size >> 20,
        ours.tuning.l0_compaction_trigger,
        ours.tuning.l0_slowdown_trigger,
        ours.tuning.l0_stop_trigger,
        ours.tuning.num_levels,
        ours.tuning.dynamic_level_sizes
    )
}

pub const ROCKSDB_CONFIGURATION: &str = "default options (Snappy compression, its default block cache, 64 MiB memtables, 256 MiB level 1, 64 MiB tables) and a full Bloom filter of 10 bits/key; statistics on";

pub const FJALL_CONFIGURATION: &str =
    "default options (its default filters, LZ4 compression, 32 MiB block cache)";

/// A run of present-key and then absent-key gets, with RocksDB's own counts per get.
struct RocksRun {
    present: Timing,
    absent: Timing,
    /// Per get, for the present and the absent keys: data blocks read past the block cache,
    /// filters asked, table files opened.
    counts: serde_json::Value,
}

fn rocksdb_lookups(
    db: &rocksdb::DB,
    options: &rocksdb::Options,
    workload: &Workload,
) -> Result<RocksRun, Failure> {
    use rocksdb::statistics::Ticker;
    let get = |k: &[u8]| {
        db.get_pinned(k)
            .map(|v| v.is_some())
            .map_err(|e| e.to_string())
    };
    let tickers = || {
        [
            Ticker::BlockCacheDataMiss,
            Ticker::BloomFilterUseful,
            Ticker::BloomFilterFullPositive,
            Ticker::NoFileOpens,
        ]
        .map(|t| options.get_ticker_count(t))
    };
    let per_get = |later: [u64; 4], earlier: [u64; 4], gets: u64| {
        let d = |i: usize| (later[i] - earlier[i]) as f64 / gets.max(1) as f64;
        json!({
            "blocks_read_per_get": d(0),
            "filters_per_get": d(1) + d(2),
            "file_opens_per_get": d(3),
        })
    };
    let before = tickers();
    let present = time_lookups(&workload.warm_present, true, get)?;
    let middle = tickers();
    let absent = time_lookups(&workload.warm_absent, false, get)?;
    let after = tickers();
    Ok(RocksRun {
        present,
        absent,
        counts: json!({
            "present": per_get(middle, before, present.lookups),
            "absent": per_get(after, middle, absent.lookups),
        }),
    })
}

/// A timing's JSON with a store's own counts per get added.
fn timing_with(timing: Timing, counts: &serde_json::Value) -> serde_json::Value {
    let mut figures = timing.to_json();
    merge(&mut figures, counts);
    figures
}

/// RocksDB's table readers' memory (indexes and filters held outside the block cache), and
/// the index and filter blocks' bytes summed over its tables.
fn rocksdb_metadata_memory(db: &rocksdb::DB) -> serde_json::Value {
    let number = |name: &str| db.property_int_value(name).ok().flatten();
    let aggregated = db
        .property_value("rocksdb.aggregated-table-properties")
        .ok()
        .flatten()
        .unwrap_or_default();
    json!({
        "table_readers_memory_bytes": number("rocksdb.estimate-table-readers-mem"),
        // Where index and filter blocks live in the block cache (rocksdb-partitioned), the
        // table readers' figure leaves them out: the cache's use, and what is pinned in it.
        "block_cache_usage_bytes": number("rocksdb.block-cache-usage"),
        "block_cache_pinned_bytes": number("rocksdb.block-cache-pinned-usage"),
        "index_bytes": table_property(&aggregated, "index block size"),
        "filter_bytes": table_property(&aggregated, "filter block size"),
        "table_files": db.live_files().ok().map(|f| f.len()),
    })
}

/// The number after `name ... =` in RocksDB's `key=value; ...` table-properties text.
fn table_property(text: &str, name: &str) -> Option<u64> {
    let after = &text[text.find(name)? + name.len()..];
    let value = after[after.find('=')? + 1..].trim_start();
    let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Loads RocksDB with its default options but a full Bloom filter of 10 bits per key (its
/// default has no filter), times gets right after the load's flush, waits for its
/// compactions, and times them again.
///
/// With `bounded_metadata`, RocksDB's options for metadata in bounded memory instead
/// ([`rocksdb_partitioned_options`]).
pub fn run_rocksdb(
    workload: &Workload,
    dir: &Path,
    bounded_metadata: bool,
) -> Result<PeerResult, Failure> {
    use rocksdb::statistics::Ticker;
    use rocksdb::{WaitForCompactOptions, DB};
    let (options, name, note) = match bounded_metadata {
        false => (rocksdb_options(), "RocksDB", ROCKSDB_CONFIGURATION),
        true => (
            rocksdb_partitioned_options(),
            "rocksdb-partitioned",
            ROCKSDB_PARTITIONED_CONFIGURATION,
        ),
    };
    let db = DB::open(&options, dir).map_err(|e| e.to_string())?;
    let (load_seconds, longest_write) = load_rocksdb(&db, workload, name)?;
    let files_after_load = db.live_files().map(|f| f.len()).unwrap_or(0);
    let fresh = rocksdb_lookups(&db, &options, workload)?;
    let waiting = progress::waiting(&format!("compactions ({name})"));
    let settling = Instant::now();
    let mut wait = WaitForCompactOptions::default();
    wait.set_flush(true);
    db.wait_for_compact(&wait).map_err(|e| e.to_string())?;
    let settle_seconds = Some(settling.elapsed().as_secs_f64());
    waiting.finish_and_clear();
    let ticker = |t: Ticker| options.get_ticker_count(t);
    let (hits_before, misses_before) = (
        ticker(Ticker::BlockCacheDataHit),
        ticker(Ticker::BlockCacheDataMiss),
    );
    let useful_before = ticker(Ticker::BloomFilterUseful);
    let settled = rocksdb_lookups(&db, &options, workload)?;
    let useful = ticker(Ticker::BloomFilterUseful) - useful_before;
    let hits = ticker(Ticker::BlockCacheDataHit) - hits_before;
    let misses = ticker(Ticker::BlockCacheDataMiss) - misses_before;
    let present_misses = settled.counts["present"]["blocks_read_per_get"].as_f64();
    let mut extra = json!({
        "fresh_present": timing_with(fresh.present, &fresh.counts["present"]),
        "fresh_absent": timing_with(fresh.absent, &fresh.counts["absent"]),
        "present": timing_with(settled.present, &settled.counts["present"]),
        "absent": timing_with(settled.absent, &settled.counts["absent"]),
        "table_files_after_load": files_after_load,
    });
    merge(&mut extra, &rocksdb_metadata_memory(&db));
    Ok(PeerResult {
        name,
        load_seconds,
        longest_write_seconds: longest_write.as_secs_f64(),
        settle_seconds,
        fresh: Some((fresh.present, fresh.absent)),
        present: settled.present,
        absent: settled.absent,
        filter_useful: Some(useful),
        present_block_misses_per_get: present_misses,
        block_cache_hit_rate: (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64),
        extra,
        note,
    })
}

/// Writes the workload into `db` in its batches, then flushes the memtable; returns the
/// seconds that took and the longest single write.
fn load_rocksdb(
    db: &rocksdb::DB,
    workload: &Workload,
    name: &str,
) -> Result<(f64, Duration), Failure> {
    let bar = progress::bar(workload.keys, &format!("load ({name})"));
    let started = Instant::now();
    let mut longest_write = Duration::ZERO;
    for pairs in workload.batches() {
        let write_started = Instant::now();
        if let [(key, value)] = pairs.as_slice() {
            db.put(key, value).map_err(|e| e.to_string())?;
        } else {
            let mut batch = rocksdb::WriteBatch::default();
            for (key, value) in &pairs {
                batch.put(key, value);
            }
            db.write(batch).map_err(|e| e.to_string())?;
        }
        longest_write = longest_write.max(write_started.elapsed());
        bar.inc(pairs.len() as u64);
    }
    db.flush().map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    Ok((started.elapsed().as_secs_f64(), longest_write))
}

/// Loads fjall with its default options, then times the warm lookups (fjall offers no way to
/// wait for its compactions, so there is one pass, right after the load).
pub fn run_fjall(workload: &Workload, dir: &Path) -> Result<PeerResult, Failure> {
    use fjall::{Database, KeyspaceCreateOptions};
    let db = Database::builder(dir).open().map_err(|e| e.to_string())?;
    let items = db
        .keyspace("bench", KeyspaceCreateOptions::default)
        .map_err(|e| e.to_string())?;
    let bar = progress::bar(workload.keys, "load (fjall)");
    let started = Instant::now();
    let mut longest_write = Duration::ZERO;
    for pairs in workload.batches() {
        let write_started = Instant::now();
        if let [(key, value)] = pairs.as_slice() {
            items
                .insert(key.to_vec(), value.clone())
                .map_err(|e| e.to_string())?;
        } else {
            let mut batch = db.batch();
            for (key, value) in pairs.iter() {
                batch.insert(&items, key.to_vec(), value.clone());
            }
            batch.commit().map_err(|e| e.to_string())?;
        }
        longest_write = longest_write.max(write_started.elapsed());
        bar.inc(pairs.len() as u64);
    }
    items
        .rotate_memtable_and_wait()
        .map_err(|e| e.to_string())?;
    let load_seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let get = |k: &[u8]| items.get(k).map(|v| v.is_some()).map_err(|e| e.to_string());
    let present = time_lookups(&workload.warm_present, true, get)?;
    let absent = time_lookups(&workload.warm_absent, false, get)?;
    Ok(PeerResult {
        name: "fjall",
        load_seconds,
        longest_write_seconds: longest_write.as_secs_f64(),
        settle_seconds: None,
        fresh: None,
        present,
        absent,
        filter_useful: None,
        present_block_misses_per_get: None,
        block_cache_hit_rate: None,
        extra: json!({}),
        note: FJALL_CONFIGURATION,
    })
}

/// Prints each store's load time and warm gets per second, with bloomkv's ratio to it.
pub fn print_comparison(
    our_load: f64,
    our_settle: f64,
    present: &LookupFigures,
    absent: &LookupFigures,
    peers: &[PeerResult],
) {
    println!();
    println!("peers, same keys and lookups (bloomkv at 0.01 = 10 bits/key; warm):");
    println!("  load s = writes + memtable flush; settle s = then until compactions stopped");
    println!("  store     load s  settle s  present gets/s  absent gets/s  present p99 us  absent p99 us  reads avoided by filters");
    println!(
        "  bloomkv  {:>6.1}  {:>8.1}  {:>14.0}  {:>13.0}  {:>14.2}  {:>13.2}  {}",
        our_load,
        our_settle,
        present.gets_per_second,
        absent.gets_per_second,
        present.p99.as_secs_f64() * 1e6,
        absent.p99.as_secs_f64() * 1e6,
        absent.filter_negatives
    );
    for p in peers {
        println!(
            "  {:<7}  {:>6.1}  {:>8}  {:>14.0}  {:>13.0}  {:>14.2}  {:>13.2}  {}",
            p.name,
            p.load_seconds,
            p.settle_seconds
                .map_or("n/a".to_string(), |s| format!("{s:.1}")),
            p.present.gets_per_second,
            p.absent.gets_per_second,
            p.present.p99.as_secs_f64() * 1e6,
            p.absent.p99.as_secs_f64() * 1e6,
            p.filter_useful
                .map_or("(not reported)".to_string(), |u| u.to_string())
        );
    }
    println!();
    println!("  bloomkv / peer     load speed  present gets/s  absent gets/s");
    for p in peers {
        println!(
            "  bloomkv / {:<7}  {:>9.2}x  {:>13.2}x  {:>12.2}x",
            p.name,
            p.load_seconds / our_load,
            present.gets_per_second / p.present.gets_per_second,
            absent.gets_per_second / p.absent.gets_per_second
        );
    }
}

/// What `rocksdb` is in a prefix-scan run.
const ROCKSDB_PREFIX_CONFIGURATION: &str = "as rocksdb, with a fixed 8-byte prefix extractor (its full filters hold the prefixes beside the whole keys), scanned with prefix_same_as_start and an upper bound at the prefix's end";

/// Loads RocksDB with [`rocksdb_options`] and a fixed prefix extractor over the keys' first
/// `PREFIX_LEN` bytes, waits for its compactions, then times the present-prefix and the
/// absent-prefix scans (`scans.rs`), counting the data blocks each read through its block
/// cache.
pub fn run_rocksdb_scans(
    workload: &Workload,
    (present, absent): &(
        Vec<[u8; super::scans::PREFIX_LEN]>,
        Vec<[u8; super::scans::PREFIX_LEN]>,
    ),
    dir: &Path,
) -> Result<serde_json::Value, Failure> {
    use rocksdb::statistics::Ticker;
    use rocksdb::{
        Direction, IteratorMode, ReadOptions, SliceTransform, WaitForCompactOptions, DB,
    };
    let mut options = rocksdb_options();
    options.set_prefix_extractor(SliceTransform::create_fixed_prefix(
        super::scans::PREFIX_LEN,
    ));
    let db = DB::open(&options, dir).map_err(|e| e.to_string())?;
    let (load_seconds, _) = load_rocksdb(&db, workload, "rocksdb")?;
    let settling = Instant::now();
    let mut wait = WaitForCompactOptions::default();
    wait.set_flush(true);
    db.wait_for_compact(&wait).map_err(|e| e.to_string())?;
    let settle_seconds = settling.elapsed().as_secs_f64();
    let scan = |p: &[u8]| -> Result<u64, String> {
        let mut read = ReadOptions::default();
        read.set_prefix_same_as_start(true);
        if let Some(end) = crate::codec::prefix_end(p) {
            read.set_iterate_upper_bound(end);
        }
        let mut n = 0;
        for pair in db.iterator_opt(IteratorMode::From(p, Direction::Forward), read) {
            let (key, _) = pair.map_err(|e| e.to_string())?;
            if !key.starts_with(p) {
                break;
            }
            n += 1;
        }
        Ok(n)
    };
    let ticker = |t: Ticker| options.get_ticker_count(t);
    let blocks = || ticker(Ticker::BlockCacheDataHit) + ticker(Ticker::BlockCacheDataMiss);
    // RocksDB's prefix filter tickers (`BLOOM_FILTER_PREFIX_CHECKED`, `..._USEFUL`) stayed
    // at zero over these scans when they were recorded: the blocks a scan reads tell.
    let phase = |prefixes: &[[u8; super::scans::PREFIX_LEN]], present: bool| {
        super::scans::time_scans(prefixes, present, scan, blocks)
    };
    let present = phase(present, true)?;
    let absent = phase(absent, false)?;
    let mut figures = json!({
        "store": "rocksdb", "configuration": ROCKSDB_PREFIX_CONFIGURATION,
        "load_seconds": load_seconds, "settle_seconds": settle_seconds,
        "present": present, "absent": absent,
    });
    merge(&mut figures, &rocksdb_metadata_memory(&db));
    Ok(figures)
}
