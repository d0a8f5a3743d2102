//! `kvtool bench`: how much disk I/O the filters avoid, and how fast lookups are.
//!
//! For each filter setting the same keys are loaded (in random order, through the public API)
//! into a store of their own that ends with several levels. Then present and absent keys are
//! looked up twice: first cold (every table file dropped from the page cache with
//! `posix_fadvise(DONTNEED)`), then warm. The counters in `Stats` give the reads per get and
//! the measured false-positive rate; the clock gives gets per second and latency percentiles.
//!
//! `--stores` compares whole stores instead, each in a process of its own: their lookups
//! (`compare.rs`) or, with `--writes`, their sustained writes (`sustained.rs`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bloomkv::filter::FilterParams;
use bloomkv::{Db, FilterPolicy, Options, Stats, WriteBatch};
use clap::{Args, ValueEnum};
use indicatif::ProgressBar;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde_json::json;

use crate::lookup_keys::{Distribution, LookupKeys};
use crate::{progress, Failure};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The directory in which to make the throwaway stores (default: the temp directory).
    #[arg(long, value_name = "DIR", help_heading = crate::cli::COMMON)]
    pub db: Option<PathBuf>,
    /// Keys loaded into each store.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Warm lookups of present keys, and as many of absent keys, per setting.
    #[arg(long, default_value_t = 200_000)]
    pub lookups: u64,
    /// Cold lookups of each kind per setting (each may read from disk, so fewer).
    #[arg(long, default_value_t = 10_000)]
    cold_lookups: u64,
    /// Bytes per value (keys are 16 bytes).
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// What values hold: `compressible` (half random bytes, half one repeated byte: LZ4 halves
    /// it, about as it does real records), `random` (nothing to compress) or `repeated` (one
    /// byte repeated: what this bench loaded before it had this option).
    #[arg(long, value_enum, default_value_t = Values::Compressible)]
    pub values: Values,
    /// Compare whole stores instead of filter settings: each of these (`bloomkv`, `rocksdb`,
    /// `rocksdb-partitioned` (RocksDB with its filters and index partitioned in a 32 MiB
    /// block cache), `fjall`, and with `--writes` also `rocksdb-shape`; the peers need
    /// `--features peers`)
    /// is loaded and queried (or, with `--writes`, written) with its default options in a
    /// process of its own, one after another.
    #[arg(long, value_delimiter = ',', value_name = "STORES")]
    pub stores: Vec<String>,
    /// With `--stores`: hold each store's process, and the page cache it causes, to this much
    /// memory (`1GiB`, `512MiB`, ...) with a memory cgroup, so the data need not fit in
    /// memory. Needs root and a memory cgroup controller (v1 or v2).
    #[arg(long, value_name = "SIZE", value_parser = crate::memlimit::parse_size)]
    pub memory_limit: Option<u64>,
    /// Write an SVG chart of gets per second against keys for each store, from this
    /// `--stores` run and the earlier runs' JSON files given with `--chart-from` (or, without
    /// `--stores`, from those files alone). With `--writes`: puts per second over the load,
    /// one line per store.
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<PathBuf>,
    /// With `--stores`: bloomkv's `Options::max_open_files` (default: the store's default).
    #[arg(long, value_name = "N")]
    pub max_open_files: Option<usize>,
    /// JSON files of earlier `--stores` runs (written with `--json`) to put on the `--chart`.
    #[arg(long, value_delimiter = ',', value_name = "FILES")]
    pub chart_from: Vec<PathBuf>,
    /// With `--stores`: measure sustained writes instead of lookups (stores `bloomkv`,
    /// `rocksdb`, `rocksdb-shape`: RocksDB with bloomkv's memtable, table and level sizes,
    /// and `fjall`). Each store, in a process of its own, is loaded with `--keys` keys by one
    /// thread, one unsynced put per write, flushed, and left to settle its compactions; then,
    /// in a fresh store per count of `--writer-threads`, that many threads write
    /// `--synced-keys` keys between them, one synced put per write. Reports puts per second,
    /// stall time, write amplification (the store's own count and the kernel's) and bytes on
    /// disk; `--chart` draws puts per second over the load.
    #[arg(long)]
    pub writes: bool,
    /// With `--writes`: keys written, one synced put per write, for each count of
    /// `--writer-threads`, shared out among the threads (0 skips the synced phase).
    #[arg(long, value_name = "N", default_value_t = 120_000, requires = "writes")]
    pub synced_keys: u64,
    /// With `--writes`: comma-separated counts of threads that write the synced puts at once.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "THREADS",
        // Shown as typed (`1,8`), not as clap joins a list of defaults ("1 8").
        default_value = "1,8",
        value_parser = clap::value_parser!(u32).range(1..=1024),
        requires = "writes"
    )]
    pub writer_threads: Vec<u32>,
    /// Internal: run one store of a `--stores` comparison in this process and write its
    /// figures as JSON to `--child-out`.
    #[arg(long, hide = true, requires = "child_out")]
    pub child_store: Option<String>,
    /// Internal: where a `--child-store` run writes its figures.
    #[arg(long, hide = true)]
    pub child_out: Option<PathBuf>,
    /// Comma-separated filter settings: `none`, a false-positive rate, `budget:B`, a
    /// store-wide budget of B bits per key spread over the levels, or `reads:R`, the least
    /// such budget whose absent-key gets waste R data-block reads each on average.
    #[arg(long, default_value = "none,0.1,0.01,0.001")]
    settings: String,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an SVG chart of reads per get, of measured against predicted rate, and of reads
    /// per absent get against filter memory for uniform rates and budgets.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Also run the same load and warm lookups on RocksDB and fjall (needs a build with
    /// `--features peers`).
    #[arg(long)]
    peers: bool,
    /// Read table files through memory maps instead of with pread and the block cache (the
    /// default); see `Options::mmap_reads` for what maps cost.
    #[arg(long)]
    mmap_reads: bool,
    /// bloomkv's memtable size (default: the store's), e.g. `1MiB`: smaller memtables and
    /// level sizes build a deeper tree from fewer keys; with `--stores` too.
    #[arg(long, value_name = "SIZE", value_parser = crate::memlimit::parse_size)]
    pub memtable_size: Option<u64>,
    /// bloomkv's `level1_size`, the smallest level target (default: the store's), e.g. `2MiB`;
    /// with `--stores` too.
    #[arg(long, value_name = "SIZE", value_parser = crate::memlimit::parse_size)]
    pub level1_size: Option<u64>,
    /// With `--stores`: bloomkv's `Options::filter_memory_limit`, the memory all its filters
    /// may take together (`64MiB`, ...; default: the store's, a quarter of the memory the
    /// process may use, which `--memory-limit` sets).
    #[arg(long, value_name = "SIZE", value_parser = crate::memlimit::parse_size)]
    pub filter_memory_limit: Option<u64>,
    /// With `--stores`: spend bloomkv's filter memory limit where keys are, not where the
    /// lookups counted go (`Options::filter_memory_follows_lookups(false)`).
    #[arg(long)]
    pub filter_memory_by_keys: bool,
    /// With `--stores`: bloomkv's `Options::index_cache_size`, the memory its index partitions
    /// may take (`4MiB`, ...; default: the store's, an eighth of the memory the process may
    /// use).
    #[arg(long, value_name = "SIZE", value_parser = crate::memlimit::parse_size)]
    pub index_cache_size: Option<u64>,
    /// bloomkv's table size (default: the store's), e.g. `64KiB`; with `--stores` too.
    #[arg(long, value_name = "SIZE", value_parser = crate::memlimit::parse_size)]
    pub table_size: Option<u64>,
    /// With `--stores`: bloomkv's filter, one setting as `--settings` takes (default: the
    /// store's default policy).
    #[arg(long, value_name = "SETTING", requires = "stores")]
    pub filter: Option<String>,
    /// Leave this many level-0 tables for the lookups, as a store under writes holds between
    /// compactions: the last keys of the load are written after compactions settle, half a
    /// memtable's worth per table, each flushed. Below the level-0 compaction trigger. Not
    /// with `--stores`.
    #[arg(long, value_name = "N", default_value_t = 0, conflicts_with = "stores")]
    level0_tables: u64,
    /// Puts per write while loading: 1 writes each key with a `put` of its own, as most
    /// applications write; more groups that many into one atomic batch. The same for every
    /// store of a `--stores` run.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub load_batch: u64,
    /// Seed for the lookups.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// How lookups pick their keys: `uniform`, or `zipf:S`, a Zipf law of exponent S over
    /// the keys in key order (`zipf:0.99`: a few key ranges take most lookups).
    #[arg(long, value_name = "LAW", default_value = "uniform", value_parser = Distribution::parse)]
    pub distribution: Distribution,
}

/// What the values of a bench load hold.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values {
    /// Half random bytes, half one byte repeated.
    Compressible,
    /// Random bytes.
    Random,
    /// One byte repeated.
    Repeated,
}

impl Values {
    pub fn name(self) -> &'static str {
        match self {
            Values::Compressible => "compressible",
            Values::Random => "random",
            Values::Repeated => "repeated",
        }
    }
}

/// The figures for one kind of lookup (present or absent keys) in one phase.
#[derive(Debug, Clone, Default)]
pub struct LookupFigures {
    lookups: u64,
    data_block_reads: u64,
    bytes_read: u64,
    filter_probes: u64,
    pub filter_negatives: u64,
    false_positives: u64,
    /// Tables whose key range covered the key, over all lookups: the data-block reads the
    /// lookups would have cost without filters in the same tree.
    tables_consulted: u64,
    /// Sum over lookups of the predicted rates of the tables each lookup consulted (absent
    /// keys: the predicted data-block reads).
    predicted_reads: f64,
    pub gets_per_second: f64,
    p50: Duration,
    pub p99: Duration,
    /// The same lookups level by level, level 0 first.
    levels: Vec<LevelLookups>,
}

/// What one kind of lookup cost at one level, and the level's filters then.
#[derive(Debug, Clone, Default)]
struct LevelLookups {
    tables: usize,
    keys: u64,
    filter_bytes: u64,
    /// Filter probes of keys the level's tables did not hold, and the false positives among
    /// them.
    absent_probes: u64,
    false_positives: u64,
    predicted_rate: Option<f64>,
}

impl LevelLookups {
    fn measured_rate(&self) -> Option<f64> {
        (self.absent_probes > 0).then(|| self.false_positives as f64 / self.absent_probes as f64)
    }

    fn bits_per_key(&self) -> f64 {
        self.filter_bytes as f64 * 8.0 / self.keys.max(1) as f64
    }

    fn to_json(&self, lookups: u64) -> serde_json::Value {
        json!({
            "tables": self.tables, "keys": self.keys, "filter_bytes": self.filter_bytes,
            "filter_bits_per_key": self.bits_per_key(),
            "absent_probes": self.absent_probes,
            "absent_probes_per_get": self.absent_probes as f64 / lookups.max(1) as f64,
            "false_positives": self.false_positives,
            "predicted_false_positive_rate": self.predicted_rate,
            "measured_false_positive_rate": self.measured_rate(),
        })
    }
}

/// Each level's lookups between two readings of `Stats`, and its filters at the second.
fn level_lookups(before: &Stats, after: &Stats) -> Vec<LevelLookups> {
    after
        .levels
        .iter()
        .enumerate()
        .map(|(l, now)| {
            let then = before.levels.get(l).copied().unwrap_or_default();
            let absent = |s: &bloomkv::LevelStats| s.filter_probes - s.filter_true_positives;
            let false_positives =
                |s: &bloomkv::LevelStats| s.filter_positives - s.filter_true_positives;
            LevelLookups {
                tables: now.tables,
                keys: now.entries,
                filter_bytes: after
                    .tables
                    .iter()
                    .filter(|t| t.level == l)
                    .map(|t| t.filter_bytes)
                    .sum(),
                absent_probes: absent(now) - absent(&then),
                false_positives: false_positives(now) - false_positives(&then),
                predicted_rate: now.predicted_false_positive_rate,
            }
        })
        .collect()
}

impl LookupFigures {
    fn reads_per_get(&self) -> f64 {
        self.data_block_reads as f64 / self.lookups.max(1) as f64
    }

    fn tables_per_get(&self) -> f64 {
        self.tables_consulted as f64 / self.lookups.max(1) as f64
    }

    /// Share of the reads the lookups would have cost without filters that they did not
    /// cost (for absent keys).
    fn io_avoided(&self) -> f64 {
        1.0 - self.data_block_reads as f64 / self.tables_consulted.max(1) as f64
    }

    fn measured_rate(&self) -> Option<f64> {
        let absent_probes = self.false_positives + self.filter_negatives;
        (absent_probes > 0).then(|| self.false_positives as f64 / absent_probes as f64)
    }

    fn to_json(&self) -> serde_json::Value {
        json!({
            "lookups": self.lookups, "data_block_reads": self.data_block_reads,
            "reads_per_get": self.reads_per_get(), "bytes_read": self.bytes_read,
            "bytes_read_per_get": self.bytes_read as f64 / self.lookups.max(1) as f64,
            "filter_probes": self.filter_probes, "filter_negatives": self.filter_negatives,
            "false_positives": self.false_positives, "measured_false_positive_rate": self.measured_rate(),
            "predicted_reads_per_get": self.predicted_reads / self.lookups.max(1) as f64,
            "tables_consulted_per_get": self.tables_per_get(),
            "io_avoided": self.io_avoided(),
            "gets_per_second": self.gets_per_second,
            "p50_us": self.p50.as_secs_f64() * 1e6, "p99_us": self.p99.as_secs_f64() * 1e6,
            "levels": self.levels.iter().map(|l| l.to_json(self.lookups)).collect::<Vec<_>>(),
        })
    }
}

/// The keys loaded and looked up: the same for every setting and every peer store. Keys and
/// values are made on the fly from their index, so a load of 100M keys holds nothing in
/// memory but the lookup keys.
pub struct Workload {
    /// Keys loaded: indexes `0..keys`, whose keys are spread over the key space in random order.
    pub keys: u64,
    pub values: Values,
    pub value_size: usize,
    pub cold_present: Vec<[u8; 16]>,
    pub cold_absent: Vec<[u8; 16]>,
    pub warm_present: Vec<[u8; 16]>,
    pub warm_absent: Vec<[u8; 16]>,
    pub mmap_reads: bool,
    /// bloomkv's memtable size, smallest level target and table size, when not the defaults.
    pub memtable_size: Option<u64>,
    pub level1_size: Option<u64>,
    pub table_size: Option<u64>,
    /// Keys loaded last, after compactions settle, each share flushed into a level-0 table of
    /// its own (`--level0-tables`).
    pub level0_tables: u64,
    pub level0_keys_each: u64,
    /// Puts per write while loading (`--load-batch`).
    pub load_batch: u64,
}

impl Workload {
    pub fn new(args: &BenchArgs) -> Workload {
        let mut rng = SmallRng::seed_from_u64(args.seed ^ 0x5eed);
        let keys = LookupKeys::new(args.keys, args.distribution, &mut rng);
        let mut pick = |n: u64, present: bool| keys.pick(n, present, &mut rng);
        Workload {
            cold_present: pick(args.cold_lookups, true),
            cold_absent: pick(args.cold_lookups, false),
            warm_present: pick(args.lookups, true),
            warm_absent: pick(args.lookups, false),
            keys: args.keys,
            values: args.values,
            value_size: args.value_size,
            mmap_reads: args.mmap_reads,
            memtable_size: args.memtable_size,
            level1_size: args.level1_size,
            table_size: args.table_size,
            level0_tables: args.level0_tables,
            level0_keys_each: memtable_keys(args),
            load_batch: args.load_batch,
        }
    }

    /// The workload of `--writes`: the keys and values to load, and no lookups.
    pub fn writes_only(args: &BenchArgs) -> Workload {
        Workload {
            keys: args.keys,
            values: args.values,
            value_size: args.value_size,
            cold_present: Vec::new(),
            cold_absent: Vec::new(),
            warm_present: Vec::new(),
            warm_absent: Vec::new(),
            mmap_reads: false,
            memtable_size: None,
            level1_size: None,
            table_size: None,
            level0_tables: 0,
            level0_keys_each: 0,
            load_batch: 1,
        }
    }

    /// The value of the key loaded `i`-th: deterministic, so every store gets the same bytes.
    pub fn value(&self, i: u64) -> Vec<u8> {
        let random_len = match self.values {
            Values::Random => self.value_size,
            Values::Compressible => self.value_size / 2,
            Values::Repeated => 0,
        };
        let mut value = Vec::with_capacity(self.value_size);
        let mut state = splitmix(i ^ 0x7a1e_5eed);
        while value.len() < random_len {
            state = splitmix(state);
            let take = (random_len - value.len()).min(8);
            value.extend_from_slice(&state.to_le_bytes()[..take]);
        }
        value.resize(self.value_size, b'v');
        value
    }

    /// The load, in batches of `load_batch` (key, value) pairs, keys in random order.
    #[cfg(feature = "peers")]
    pub fn batches(&self) -> impl Iterator<Item = Vec<([u8; 16], Vec<u8>)>> + '_ {
        self.batches_of(0..self.keys)
    }

    /// The keys loaded `indexes`-th, in batches of `load_batch`.
    fn batches_of(
        &self,
        indexes: std::ops::Range<u64>,
    ) -> impl Iterator<Item = Vec<([u8; 16], Vec<u8>)>> + '_ {
        let size = self.load_batch.max(1);
        let batches = (indexes.end - indexes.start).div_ceil(size);
        (0..batches).map(move |b| {
            let from = indexes.start + b * size;
            (from..(from + size).min(indexes.end))
                .map(|i| (bench_key(i, true), self.value(i)))
                .collect()
        })
    }
}

/// Keys for one level-0 table of `--level0-tables`: about half a memtable's worth, so that
/// the memtable's own bookkeeping never makes it flush twice.
fn memtable_keys(args: &BenchArgs) -> u64 {
    let memtable = args
        .memtable_size
        .unwrap_or(Options::default().memtable_size as u64);
    (memtable / (16 + args.value_size as u64) / 2).max(1)
}

struct SettingResult {
    label: String,
    params: Option<FilterParams>,
    /// Writes, then the memtable flushed to a table.
    load_seconds: f64,
    /// Then, until compactions stopped.
    settle_seconds: f64,
    /// Bytes the store wrote (WAL, flushes, compactions) per byte of keys and values loaded,
    /// once compactions stopped.
    write_amplification: Option<f64>,
    /// Time the load's writes were delayed or stalled because compaction fell behind.
    stall_seconds: f64,
    shape: Vec<usize>,
    filter_memory_bytes: u64,
    cold_present: LookupFigures,
    cold_absent: LookupFigures,
    warm_present: LookupFigures,
    warm_absent: LookupFigures,
}

/// A deterministic 16-byte key: present keys use even indexes' mixes, absent keys odd ones,
/// spread over the whole key space so absent keys fall inside the tables' key ranges.
pub fn bench_key(index: u64, present: bool) -> [u8; 16] {
    let tagged = index * 2 + u64::from(!present);
    let hi = splitmix(tagged);
    let lo = splitmix(hi ^ tagged);
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&hi.to_be_bytes());
    key[8..].copy_from_slice(&lo.to_be_bytes());
    key
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub fn parse_settings(text: &str) -> Result<Vec<(String, FilterPolicy)>, Failure> {
    text.split(',')
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| {
            if s == "none" || s == "disabled" {
                return Ok(("none".to_string(), FilterPolicy::Disabled));
            }
            // `prefix` and a number, such as `budget:10`.
            let number_after = |prefix: &str, meaning: &str| -> Result<Option<f64>, Failure> {
                let Some(text) = s.strip_prefix(prefix) else {
                    return Ok(None);
                };
                let bad = || format!("bad --settings entry '{s}': '{prefix}' takes {meaning}");
                text.parse().map(Some).map_err(|_| Failure::from(bad()))
            };
            if let Some(bits) = number_after("budget:", "bits per key, such as budget:10")? {
                let policy = FilterPolicy::BitsPerKeyBudget(bits);
                policy.validate()?;
                return Ok((s.to_string(), policy));
            }
            let reads_meaning = "wasted reads per absent get, such as reads:0.01";
            if let Some(reads) = number_after("reads:", reads_meaning)? {
                let policy = FilterPolicy::WastedReadsTarget(reads);
                policy.validate()?;
                return Ok((s.to_string(), policy));
            }
            let p: f64 = s.parse().map_err(|_| {
                Failure::from(format!(
                    "bad --settings entry '{s}': use 'none', a rate such as 0.01, a budget such \
                     as budget:10, or a wasted-reads target such as reads:0.01"
                ))
            })?;
            FilterParams::for_false_positive_rate(p)?;
            Ok((s.to_string(), FilterPolicy::FalsePositiveRate(p)))
        })
        .collect()
}

pub fn run(args: &BenchArgs) -> Result<(), Failure> {
    let dir = args.db.as_deref();
    if let Some(store) = &args.child_store {
        if args.writes {
            return crate::sustained::run_child(args, dir, store);
        }
        return crate::compare::run_child(args, dir, store);
    }
    check_result_paths(args)?;
    if args.writes {
        return crate::sustained::run(args, dir);
    }
    if !args.stores.is_empty() {
        return crate::compare::run(args, dir);
    }
    if let (Some(chart), false) = (&args.chart, args.chart_from.is_empty()) {
        return crate::compare::chart_from_files(chart, &args.chart_from);
    }
    if args.memory_limit.is_some() || args.chart.is_some() {
        return Err(Failure::from(
            "--memory-limit and --chart apply to store comparisons: add --stores bloomkv,...",
        ));
    }
    let settings = parse_settings(&args.settings)?;
    let trigger = Options::default().l0_compaction_trigger as u64;
    if args.level0_tables >= trigger {
        return Err(Failure::from(format!(
            "--level0-tables {} would start a compaction: at most {}",
            args.level0_tables,
            trigger - 1
        )));
    }
    if args.peers && !cfg!(feature = "peers") {
        return Err(Failure::from(
            "--peers needs kvtool built with `--features peers`",
        ));
    }
    if settings.is_empty() || args.keys == 0 || args.lookups == 0 {
        return Err(Failure::from(
            "bench needs at least one setting, one key and one lookup",
        ));
    }
    let temp = scratch_dir(dir, "bloomkv-bench")?;
    print_header(args);
    let workload = Workload::new(args);
    let mut results = Vec::new();
    for (label, policy) in &settings {
        let store_dir = temp.path().join(format!("store-{label}"));
        results.push(run_setting(label, *policy, &store_dir, &workload)?);
        std::fs::remove_dir_all(&store_dir)?;
    }
    print_report(args, &results);
    let peers = if args.peers {
        let ours = results
            .iter()
            .find(|r| r.params.is_some_and(|p| p.bits_per_key() == 10))
            .ok_or_else(|| {
                Failure::from("--peers compares at 10 bits per key: include the 0.01 setting")
            })?;
        compare_with_peers(ours, &workload, temp.path())?
    } else {
        Vec::new()
    };
    if let Some(path) = &args.json {
        let mut doc = results_json(args, &results);
        doc["peers"] = serde_json::Value::Array(peers);
        write_result(path, &serde_json::to_string_pretty(&doc).expect("json"))?;
    }
    if let Some(path) = &args.plot {
        write_result(path, &plot_svg(&results))?;
    }
    Ok(())
}

/// A directory for throwaway stores inside `parent` (`--db`; the temp directory without it),
/// removed when dropped.
pub fn scratch_dir(parent: Option<&Path>, prefix: &str) -> Result<tempfile::TempDir, Failure> {
    let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
    let cannot = |why: String| {
        Failure::from(format!(
            "cannot make the bench's stores in {}: {why}",
            parent.display()
        ))
    };
    if !parent.exists() {
        return Err(cannot("no such directory".into()));
    }
    if !parent.is_dir() {
        return Err(cannot("not a directory".into()));
    }
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&parent)
        .map_err(|e| cannot(e.to_string()))
}

/// Fails unless each file the bench will write its results to (`--json`, `--plot`,
/// `--chart`) is in a directory that exists: better now than after the run.
fn check_result_paths(args: &BenchArgs) -> Result<(), Failure> {
    let files = [&args.json, &args.plot, &args.chart];
    for path in files.into_iter().flatten() {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir.filter(|d| !d.is_dir()) {
            return Err(Failure::from(format!(
                "cannot write {}: no such directory {}",
                path.display(),
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Writes one of the bench's result files and says so on stderr.
pub fn write_result(path: &Path, contents: &str) -> Result<(), Failure> {
    std::fs::write(path, contents)
        .map_err(|e| Failure::from(format!("cannot write {}: {e}", path.display())))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

#[cfg(feature = "peers")]
fn compare_with_peers(
    ours: &SettingResult,
    workload: &Workload,
    dir: &Path,
) -> Result<Vec<serde_json::Value>, Failure> {
    let peers = crate::peers::run(workload, dir)?;
    crate::peers::print_comparison(
        ours.load_seconds,
        ours.settle_seconds,
        &ours.warm_present,
        &ours.warm_absent,
        &peers,
    );
    Ok(peers.iter().map(|p| p.to_json()).collect())
}

#[cfg(not(feature = "peers"))]
fn compare_with_peers(
    _: &SettingResult,
    _: &Workload,
    _: &Path,
) -> Result<Vec<serde_json::Value>, Failure> {
    Err(Failure::from(
        "--peers needs kvtool built with `--features peers`",
    ))
}

fn run_setting(
    label: &str,
    policy: FilterPolicy,
    dir: &Path,
    workload: &Workload,
) -> Result<SettingResult, Failure> {
    // Each setting's filters whole, as the setting gives them: the report compares settings.
    let mut options = Options::default()
        .no_filter_memory_limit()
        .filter_policy(policy)
        .mmap_reads(workload.mmap_reads);
    if let Some(bytes) = workload.memtable_size {
        options = options.memtable_size(bytes as usize);
    }
    if let Some(bytes) = workload.level1_size {
        options = options.level1_size(bytes);
    }
    if let Some(bytes) = workload.table_size {
        options = options.table_size(bytes);
    }
    let db = Db::open(dir, options)?;
    let (load_seconds, settle_seconds) = load_and_settle(&db, workload, label)?;
    let stats = db.stats();
    let shape = stats.levels.iter().map(|l| l.tables).collect();
    let write_amplification = stats.write_amplification();
    let stall_seconds = stats.stall_micros as f64 / 1e6;
    let (cold_p, cold_a) = (&workload.cold_present, &workload.cold_absent);
    let (warm_p, warm_a) = (&workload.warm_present, &workload.warm_absent);
    db.drop_table_caches()?;
    let cold_present = lookups(&db, cold_p, true, &format!("cold present ({label})"))?;
    db.drop_table_caches()?;
    let cold_absent = lookups(&db, cold_a, false, &format!("cold absent ({label})"))?;
    // The cold phases dropped the table files from the page cache, and lookups read with a
    // "random" hint, which the kernel answers without read-ahead: put the files back in memory,
    // as the peers' files are after their load, so that "warm" means the same for every store.
    read_files_into_page_cache(dir, label)?;
    let warm_present = lookups(&db, warm_p, true, &format!("warm present ({label})"))?;
    let warm_absent = lookups(&db, warm_a, false, &format!("warm absent ({label})"))?;
    // A budget gives each level its own parameters; the tables report theirs.
    let params = match policy.is_budget() {
        true => None,
        false => policy.params()?,
    };
    let filter_memory_bytes = db.stats().filter_memory_bytes;
    db.close()?;
    Ok(SettingResult {
        label: label.to_string(),
        params,
        load_seconds,
        settle_seconds,
        write_amplification,
        stall_seconds,
        shape,
        filter_memory_bytes,
        cold_present,
        cold_absent,
        warm_present,
        warm_absent,
    })
}

/// Reads every file of `dir` once, so the page cache holds them.
fn read_files_into_page_cache(dir: &Path, label: &str) -> Result<(), Failure> {
    use std::io::Read;
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            files.push((entry.path(), entry.metadata()?.len()));
        }
    }
    let total = files.iter().map(|(_, len)| len).sum();
    let bar = progress::bytes(total, &format!("into the page cache ({label})"));
    let mut buf = vec![0u8; 1 << 20];
    for (path, _) in files {
        let mut file = std::fs::File::open(&path)?;
        loop {
            let read = file.read(&mut buf)?;
            if read == 0 {
                break;
            }
            bar.inc(read as u64);
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// Loads the workload into `db` (writes, then the memtable flushed) and waits for its
/// compactions; returns the seconds each took.
pub fn load_and_settle(db: &Db, workload: &Workload, label: &str) -> Result<(f64, f64), Failure> {
    let level0_keys = (workload.level0_tables * workload.level0_keys_each).min(workload.keys);
    let tree_keys = workload.keys - level0_keys;
    let load = load(db, workload, 0..tree_keys, label)?;
    let settle_seconds = settle(db, label)?;
    // Fewer tables than the trigger: no compaction takes them.
    let each = workload.level0_keys_each.max(1);
    let mut from = tree_keys;
    while from < workload.keys {
        let to = (from + each).min(workload.keys);
        load_bloomkv(db, workload, from..to, &ProgressBar::hidden())?;
        from = to;
    }
    Ok((load.seconds, settle_seconds))
}

/// How a load went.
pub struct LoadFigures {
    /// From the first write until the flush after the last returned.
    pub seconds: f64,
    /// The longest single batch write: while it waited, no write completed.
    pub longest_write: Duration,
    /// Where the store stood each second of the load.
    pub timeline: Vec<LoadSample>,
}

/// The store once during a load: how far the load had come and how far level 0 lagged.
pub struct LoadSample {
    pub seconds: f64,
    pub keys_written: u64,
    pub level0_tables: usize,
    /// Bytes in each level.
    pub level_bytes: Vec<u64>,
    /// The rate delayed writes were held to, when they were.
    pub delayed_write_rate: Option<u64>,
}

impl LoadSample {
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "seconds": self.seconds, "keys_written": self.keys_written,
            "level0_tables": self.level0_tables, "level_bytes": self.level_bytes,
            "delayed_write_rate": self.delayed_write_rate,
        })
    }
}

/// How often a load's timeline is sampled.
const LOAD_SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// Writes the workload's keys `indexes` into `db` with a progress bar, then flushes.
pub fn load(
    db: &Db,
    workload: &Workload,
    indexes: std::ops::Range<u64>,
    label: &str,
) -> Result<LoadFigures, Failure> {
    let bar = progress::bar(indexes.end - indexes.start, &format!("load ({label})"));
    let started = Instant::now();
    let (longest_write, timeline) = std::thread::scope(|scope| {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let bar = &bar;
        let sampler = scope.spawn(move || sample_load(db, bar, started, stopped));
        let longest_write = load_bloomkv(db, workload, indexes, bar);
        drop(stop);
        let timeline = sampler.join().expect("the sampler does not panic");
        (longest_write, timeline)
    });
    let longest_write = longest_write?;
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    Ok(LoadFigures {
        seconds,
        longest_write,
        timeline,
    })
}

/// Samples `db` every [`LOAD_SAMPLE_EVERY`] until `stopped` closes.
fn sample_load(
    db: &Db,
    bar: &ProgressBar,
    started: Instant,
    stopped: std::sync::mpsc::Receiver<()>,
) -> Vec<LoadSample> {
    let mut samples = Vec::new();
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
        stopped.recv_timeout(LOAD_SAMPLE_EVERY)
    {
        let stats = db.stats();
        samples.push(LoadSample {
            seconds: started.elapsed().as_secs_f64(),
            keys_written: bar.position(),
            level0_tables: stats.levels.first().map_or(0, |l| l.tables),
            level_bytes: stats.levels.iter().map(|l| l.bytes).collect(),
            delayed_write_rate: stats.delayed_write_rate,
        });
    }
    samples
}

/// Waits for `db`'s compactions to end; the seconds it took.
pub fn settle(db: &Db, label: &str) -> Result<f64, Failure> {
    let waiting = progress::waiting(&format!("compactions ({label})"));
    let settling = Instant::now();
    db.wait_for_background_work()?;
    let settle_seconds = settling.elapsed().as_secs_f64();
    waiting.finish_and_clear();
    Ok(settle_seconds)
}

/// Writes the workload's keys `indexes` into `db` in batches, then flushes the memtable.
/// Returns the longest time one batch's write took.
fn load_bloomkv(
    db: &Db,
    workload: &Workload,
    indexes: std::ops::Range<u64>,
    bar: &ProgressBar,
) -> Result<Duration, Failure> {
    let mut longest = Duration::ZERO;
    for pairs in workload.batches_of(indexes) {
        let started = Instant::now();
        if let [(key, value)] = pairs.as_slice() {
            db.put(key, value)?;
        } else {
            let mut batch = WriteBatch::new();
            for (key, value) in &pairs {
                batch.put(key, value);
            }
            db.write(batch)?;
        }
        longest = longest.max(started.elapsed());
        bar.inc(pairs.len() as u64);
    }
    db.flush()?;
    Ok(longest)
}

/// The tables of a `Stats`, arranged to find those whose key range covers a key: level 0's
/// all (they overlap), one by binary search in each deeper level (sorted, disjoint).
struct CoveringTables<'s> {
    levels: Vec<Vec<&'s bloomkv::TableStats>>,
}

impl<'s> CoveringTables<'s> {
    fn new(stats: &'s Stats) -> CoveringTables<'s> {
        let mut levels: Vec<Vec<&bloomkv::TableStats>> = vec![Vec::new(); stats.levels.len()];
        for table in &stats.tables {
            levels[table.level].push(table);
        }
        for level in levels.iter_mut().skip(1) {
            level.sort_by(|a, b| a.smallest_key.cmp(&b.smallest_key));
        }
        CoveringTables { levels }
    }

    /// The number of tables a lookup of `key` consults (those whose key range covers it:
    /// what the lookup would read without filters), and the sum of their predicted rates (a
    /// table without a filter counts 1: it always costs a read).
    fn consulted(&self, key: &[u8]) -> (u64, f64) {
        let covers = |t: &&&bloomkv::TableStats| {
            t.smallest_key.as_slice() <= key && key <= t.largest_key.as_slice()
        };
        let level0 = self.levels.first().into_iter().flatten().filter(covers);
        let deeper = self.levels.iter().skip(1).filter_map(|level| {
            let at = level.partition_point(|t| t.largest_key.as_slice() < key);
            level.get(at).filter(covers)
        });
        level0.chain(deeper).fold((0, 0.0), |(n, p), t| {
            (n + 1, p + t.predicted_false_positive_rate.unwrap_or(1.0))
        })
    }
}

fn lookups(
    db: &Db,
    keys: &[[u8; 16]],
    present: bool,
    what: &str,
) -> Result<LookupFigures, Failure> {
    let bar = progress::bar(keys.len() as u64, what);
    let before = db.stats();
    let covering = CoveringTables::new(&before);
    let (consulted, predicted) = keys
        .iter()
        .map(|k| covering.consulted(k))
        .fold((0, 0.0), |(n, p), (kn, kp)| (n + kn, p + kp));
    let mut latencies = Vec::with_capacity(keys.len());
    let started = Instant::now();
    for (i, key) in keys.iter().enumerate() {
        let t = Instant::now();
        let found = db.get(key)?;
        latencies.push(t.elapsed());
        if found.is_some() != present {
            return Err(Failure::from(format!(
                "bench key {i} was {}found",
                if present { "not " } else { "" }
            )));
        }
        if i % 4096 == 0 {
            bar.set_position(i as u64);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let after = db.stats();
    latencies.sort_unstable();
    let percentile = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    Ok(LookupFigures {
        lookups: keys.len() as u64,
        data_block_reads: after.data_block_reads - before.data_block_reads,
        bytes_read: after.bytes_read - before.bytes_read,
        filter_probes: after.filter_probes - before.filter_probes,
        filter_negatives: after.filter_negatives - before.filter_negatives,
        false_positives: after.filter_false_positives() - before.filter_false_positives(),
        tables_consulted: consulted,
        predicted_reads: predicted,
        gets_per_second: keys.len() as f64 / elapsed,
        p50: percentile(0.50),
        p99: percentile(0.99),
        levels: level_lookups(&before, &after),
    })
}

/// What the bench is about to do, printed before it starts (the rest comes at the end).
fn print_header(args: &BenchArgs) {
    println!(
        "bloomkv bench: {} keys of 16 bytes, {}-byte {} values, random order; {} warm and {} cold lookups of each kind",
        args.keys, args.value_size, args.values.name(), args.lookups, args.cold_lookups
    );
    if args.level0_tables > 0 {
        println!(
            "the last {} keys go into {} level-0 tables after compactions settle",
            args.level0_tables * memtable_keys(args),
            args.level0_tables
        );
    }
}

fn print_report(args: &BenchArgs, results: &[SettingResult]) {
    // The settings column is as wide as the longest name (`budget:10`, `reads:0.01`, ...).
    let w = results
        .iter()
        .map(|r| r.label.len())
        .chain(["setting".len()])
        .max()
        .unwrap_or(7);
    let setting = "setting";
    println!();
    println!("shape (tables per level, L0 first):");
    for r in results {
        println!(
            "  {:<w$} {:?}   load {:.1} s ({:.0} puts/s), compactions settled {:.1} s later; write amplification {}, writes stalled {:.1} s",
            r.label,
            r.shape,
            r.load_seconds,
            args.keys as f64 / r.load_seconds,
            r.settle_seconds,
            r.write_amplification.map_or("-".into(), |w| format!("{w:.2}")),
            r.stall_seconds,
        );
    }
    println!();
    println!("absent keys (warm); I/O avoided = 1 - reads / tables consulted (what the same tree would read without filters):");
    println!("  {setting:<w$}  bits/key  hashes  filter MiB  predicted fpr  measured fpr  tables/get  reads/get  predicted reads/get  I/O avoided  gets/s    p50 us  p99 us");
    for r in results {
        let a = &r.warm_absent;
        println!(
            "  {:<w$}  {:>8}  {:>6}  {:>10.2}  {:>13}  {:>12}  {:>10.3}  {:>9.4}  {:>19.4}  {:>10.2}%  {:>8.0}  {:>6.2}  {:>6.2}",
            r.label,
            bits_per_key_column(r),
            r.params.map_or("-".into(), |p| p.hashes().to_string()),
            r.filter_memory_bytes as f64 / (1 << 20) as f64,
            predicted_rate(r).map_or("-".into(), |p| format!("{p:.5}")),
            a.measured_rate().map_or("-".into(), |m| format!("{m:.5}")),
            a.tables_per_get(),
            a.reads_per_get(),
            a.predicted_reads / a.lookups as f64,
            100.0 * a.io_avoided(),
            a.gets_per_second,
            a.p50.as_secs_f64() * 1e6,
            a.p99.as_secs_f64() * 1e6,
        );
    }
    println!();
    println!("absent keys (warm), level by level (levels with tables):");
    println!("  {setting:<w$}  level  tables      keys  filter bits/key  probes/get  predicted fpr  measured fpr  false positives");
    for r in results {
        let a = &r.warm_absent;
        for (l, level) in a.levels.iter().enumerate().filter(|(_, l)| l.tables > 0) {
            println!(
                "  {:<w$}  {:>5}  {:>6}  {:>8}  {:>15.2}  {:>10.3}  {:>13}  {:>12}  {:>15}",
                r.label,
                l,
                level.tables,
                level.keys,
                level.bits_per_key(),
                level.absent_probes as f64 / a.lookups.max(1) as f64,
                level
                    .predicted_rate
                    .map_or("-".into(), |p| format!("{p:.5}")),
                level
                    .measured_rate()
                    .map_or("-".into(), |m| format!("{m:.5}")),
                level.false_positives,
            );
        }
    }
    println!();
    println!("present keys (warm):");
    println!("  {setting:<w$}  reads/get  bytes/get  gets/s    p50 us  p99 us");
    for r in results {
        let p = &r.warm_present;
        println!(
            "  {:<w$}  {:>9.4}  {:>9.0}  {:>8.0}  {:>6.2}  {:>6.2}",
            r.label,
            p.reads_per_get(),
            p.bytes_read as f64 / p.lookups as f64,
            p.gets_per_second,
            p.p50.as_secs_f64() * 1e6,
            p.p99.as_secs_f64() * 1e6
        );
    }
    println!();
    println!("cold (table files dropped from the page cache first):");
    println!("  {setting:<w$}  absent reads/get  absent gets/s  absent p99 us  present reads/get  present gets/s  present p99 us");
    for r in results {
        let (a, p) = (&r.cold_absent, &r.cold_present);
        println!(
            "  {:<w$}  {:>16.4}  {:>13.0}  {:>13.1}  {:>17.4}  {:>14.0}  {:>14.1}",
            r.label,
            a.reads_per_get(),
            a.gets_per_second,
            a.p99.as_secs_f64() * 1e6,
            p.reads_per_get(),
            p.gets_per_second,
            p.p99.as_secs_f64() * 1e6
        );
    }
    println!();
    print_legend();
    println!();
    println!("verdict (absent keys, warm):");
    let unfiltered = results.iter().find(|r| r.filter_memory_bytes == 0);
    for r in results {
        println!("  {:<w$}  {}", r.label, verdict(r, unfiltered));
    }
}

/// What the columns mean, and which way is better.
fn print_legend() {
    for line in [
        "legend (lower is better for reads, bytes, latency and memory; higher for gets/s and I/O avoided):",
        "  tables/get     tables whose key range holds the key: the block reads a get costs without filters",
        "  reads/get      data blocks a get read; for absent keys every one is wasted",
        "  I/O avoided    share of the reads without filters that the filters saved",
        "  predicted fpr  false-positive rate the filters' parameters promise; measured fpr: as counted",
        "  bits/key       filter memory per key (a budget's row: the store's average; its levels below)",
        "  p50/p99 us     median and 99th-percentile latency of one get, in microseconds",
        "  shape          tables per level after compactions settled: a deeper tree consults more tables",
    ] {
        println!("{line}");
    }
}

/// One line on what a setting bought, against the setting without filters when the run has one.
fn verdict(r: &SettingResult, unfiltered: Option<&SettingResult>) -> String {
    let a = &r.warm_absent;
    if r.filter_memory_bytes == 0 {
        return format!(
            "no filters: {:.3} block reads per absent get, one per table consulted",
            a.reads_per_get()
        );
    }
    let mut line = format!("{:.1}% of the block reads avoided", 100.0 * a.io_avoided());
    if let (Some(predicted), Some(measured)) = (predicted_rate(r), a.measured_rate()) {
        let off = 100.0 * (measured - predicted) / predicted;
        line +=
            &format!("; measured rate {measured:.5} against {predicted:.5} predicted ({off:+.0}%)");
    }
    if let Some(none) = unfiltered.filter(|n| n.warm_absent.gets_per_second > 0.0) {
        line += &format!(
            "; {:.1}x the gets/s of {}",
            a.gets_per_second / none.warm_absent.gets_per_second,
            none.label
        );
    }
    line += &format!(
        "; {:.2} MiB of filters",
        r.filter_memory_bytes as f64 / (1 << 20) as f64
    );
    line
}

/// A setting's bits per key: its parameters' for one rate, the store's average for a budget.
fn bits_per_key_column(r: &SettingResult) -> String {
    if let Some(p) = r.params {
        return p.bits_per_key().to_string();
    }
    let keys: u64 = r.warm_absent.levels.iter().map(|l| l.keys).sum();
    match r.filter_memory_bytes {
        0 => "-".into(),
        bytes => format!("{:.1}", bytes as f64 * 8.0 / keys.max(1) as f64),
    }
}

/// A setting's predicted false-positive rate: its parameters' for one rate; for a budget, the
/// average over the tables absent keys consulted.
fn predicted_rate(r: &SettingResult) -> Option<f64> {
    if let Some(p) = r.params {
        return Some(p.predicted_false_positive_rate());
    }
    let a = &r.warm_absent;
    (r.filter_memory_bytes > 0 && a.tables_consulted > 0)
        .then(|| a.predicted_reads / a.tables_consulted as f64)
}

fn results_json(args: &BenchArgs, results: &[SettingResult]) -> serde_json::Value {
    let settings: Vec<_> = results
        .iter()
        .map(|r| {
            json!({
                "setting": r.label,
                "bits_per_key": r.params.map(|p| p.bits_per_key()),
                "hashes": r.params.map(|p| p.hashes()),
                "predicted_false_positive_rate": r.params.map(|p| p.predicted_false_positive_rate()),
                "filter_memory_bytes": r.filter_memory_bytes,
                "load_seconds": r.load_seconds,
                "settle_seconds": r.settle_seconds,
                "write_amplification": r.write_amplification,
                "stall_seconds": r.stall_seconds,
                "tables_per_level": r.shape,
                "warm": {"present": r.warm_present.to_json(), "absent": r.warm_absent.to_json()},
                "cold": {"present": r.cold_present.to_json(), "absent": r.cold_absent.to_json()},
            })
        })
        .collect();
    json!({
        "keys": args.keys, "key_size": 16, "value_size": args.value_size, "values": args.values.name(),
        "lookups": args.lookups, "cold_lookups": args.cold_lookups, "seed": args.seed,
        "distribution": args.distribution.name(),
        "memtable_size": args.memtable_size, "level1_size": args.level1_size,
        "table_size": args.table_size, "level0_tables": args.level0_tables,
        "settings": settings,
    })
}

/// Two charts side by side: absent-key data-block reads per get for each setting, and the
/// measured false-positive rate against the predicted one by bits per key (log scale).
fn plot_svg(results: &[SettingResult]) -> String {
    let (w, h, pad) = (420.0, 300.0, 50.0);
    // Below the panels, room for the slanted setting names.
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"11\">\n",
        3.0 * w,
        h + 30.0
    );
    svg.push_str("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    // Left: bars of reads per absent get.
    let max_reads = results
        .iter()
        .map(|r| r.warm_absent.reads_per_get())
        .fold(0.0, f64::max)
        .max(1e-9);
    let bar_w = (w - 2.0 * pad) / results.len() as f64;
    svg.push_str(&format!(
        "<text x=\"{pad}\" y=\"20\">data-block reads per absent-key get</text>\n"
    ));
    for (i, r) in results.iter().enumerate() {
        let v = r.warm_absent.reads_per_get();
        let bh = (h - 2.0 * pad) * v / max_reads;
        let x = pad + i as f64 * bar_w + 4.0;
        let y = h - pad - bh;
        // Setting names and values are written slanted, ending under (or above) their bar's
        // middle, so that names longer than a bar is wide ("budget:10") do not run into the
        // next one.
        let middle = x + (bar_w - 8.0) / 2.0;
        let (name_y, value_y) = (h - pad + 12.0, y - 4.0);
        svg.push_str(&format!(
            "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"#4a7ab7\"/>\n\
             <text x=\"{middle:.1}\" y=\"{name_y:.1}\" text-anchor=\"end\" \
             transform=\"rotate(-35 {middle:.1} {name_y:.1})\">{}</text>\n\
             <text x=\"{middle:.1}\" y=\"{value_y:.1}\" font-size=\"9\" \
             transform=\"rotate(-35 {middle:.1} {value_y:.1})\">{v:.4}</text>\n",
            bar_w - 8.0,
            r.label,
        ));
    }
    // Right: measured vs predicted rate, log10 scale, by bits per key.
    let points: Vec<(f64, f64, f64)> = results
        .iter()
        .filter_map(|r| {
            let p = r.params?;
            Some((
                p.bits_per_key() as f64,
                p.predicted_false_positive_rate(),
                r.warm_absent.measured_rate()?,
            ))
        })
        .collect();
    let x0 = w + pad;
    svg.push_str(&format!(
        "<text x=\"{x0}\" y=\"20\">false-positive rate (log scale) by bits per key</text>\n<text x=\"{x0}\" y=\"36\"><tspan fill=\"#4a7ab7\">o predicted</tspan>  <tspan fill=\"#c0392b\">x measured</tspan></text>\n<text x=\"{:.1}\" y=\"{:.1}\">bits per key</text>\n",
        x0 + (w - 2.0 * pad) / 2.0 - 30.0,
        h - pad + 30.0
    ));
    if !points.is_empty() {
        let max_bits = points.iter().map(|p| p.0).fold(0.0, f64::max) + 2.0;
        let lo = points
            .iter()
            .map(|p| p.1.min(p.2.max(1e-7)))
            .fold(1.0, f64::min)
            .log10()
            .floor();
        let sx = |b: f64| x0 + (w - 2.0 * pad) * b / max_bits;
        let sy = |r: f64| pad + (h - 2.0 * pad) * (r.max(1e-7).log10() / lo).clamp(0.0, 1.0);
        // Ticks along the bits-per-key axis, every 2 bits (every 4 past 24).
        let step = if max_bits > 24.0 { 4 } else { 2 };
        for bits in (0..=max_bits as u32).step_by(step) {
            let x = sx(f64::from(bits));
            svg.push_str(&format!(
                "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>\n\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{bits}</text>\n",
                h - pad,
                h - pad + 4.0,
                h - pad + 15.0
            ));
        }
        for (bits, predicted, measured) in &points {
            svg.push_str(&format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"none\" stroke=\"#4a7ab7\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#c0392b\" text-anchor=\"middle\">x</text>\n<text x=\"{:.1}\" y=\"{:.1}\">{bits} bits</text>\n",
                sx(*bits), sy(*predicted), sx(*bits), sy(*measured) + 4.0, sx(*bits) + 8.0, sy(*predicted)
            ));
        }
        for decade in (lo as i32)..=0 {
            let y = sy(10f64.powi(decade));
            svg.push_str(&format!(
                "<text x=\"{:.1}\" y=\"{y:.1}\">1e{decade}</text>\n",
                x0 - 40.0
            ));
        }
    }
    plot_reads_against_memory(&mut svg, results, 2.0 * w, w, h, pad);
    svg.push_str("</svg>\n");
    svg
}

/// Places point labels of an 11-pixel font so that none overlaps one placed before, where a
/// place around the point allows.
struct LabelPlacer {
    /// (left, top, right, bottom) of each label placed.
    boxes: Vec<(f64, f64, f64, f64)>,
    /// No label's right end goes past this, where a place on the left allows.
    right: f64,
}

impl LabelPlacer {
    /// Where to write `text` (its baseline's left end) for the point at (`x`, `y`): right
    /// of it above, right below, left above, left below, or further above and below; the
    /// first of these that meets no label placed before (the first, if all do).
    fn place(&mut self, x: f64, y: f64, text: &str) -> (f64, f64) {
        let width = 6.5 * text.chars().count() as f64;
        let candidates = [
            (x + 5.0, y - 6.0),
            (x + 5.0, y + 14.0),
            (x - 5.0 - width, y - 6.0),
            (x - 5.0 - width, y + 14.0),
            (x + 5.0, y - 18.0),
            (x + 5.0, y + 26.0),
        ];
        let box_of = |(lx, ly): (f64, f64)| (lx, ly - 10.0, lx + width, ly + 2.0);
        let meets = |a: (f64, f64, f64, f64), b: &(f64, f64, f64, f64)| {
            a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
        };
        let fits = |c: (f64, f64)| c.0 + width <= self.right;
        let free = |c: (f64, f64)| !self.boxes.iter().any(|b| meets(box_of(c), b));
        let chosen = (candidates.iter().copied())
            .find(|&c| fits(c) && free(c))
            .or_else(|| candidates.iter().copied().find(|&c| free(c)))
            .unwrap_or(candidates[0]);
        self.boxes.push(box_of(chosen));
        chosen
    }
}

/// A chart at `x0`: reads per absent-key get (log scale) against filter memory, one line for
/// uniform rates and one for budgets, each point labelled with its setting.
fn plot_reads_against_memory(
    svg: &mut String,
    results: &[SettingResult],
    x0: f64,
    w: f64,
    h: f64,
    pad: f64,
) {
    let point = |r: &SettingResult| {
        let reads = r.warm_absent.reads_per_get();
        (r.filter_memory_bytes > 0 && reads > 0.0)
            .then(|| (r.filter_memory_bytes as f64 / (1 << 20) as f64, reads))
    };
    // (memory MiB, reads per get, setting) of one series.
    type Points<'r> = Vec<(f64, f64, &'r str)>;
    let series: Vec<(&str, &str, Points)> = [
        ("uniform rate", "#4a7ab7", false),
        ("budget", "#c0392b", true),
    ]
    .into_iter()
    .map(|(name, colour, budget)| {
        let mut points: Vec<(f64, f64, &str)> = results
            .iter()
            .filter(|r| (r.label.starts_with("budget:") || r.label.starts_with("reads:")) == budget)
            .filter_map(|r| point(r).map(|(x, y)| (x, y, r.label.as_str())))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        (name, colour, points)
    })
    .collect();
    let all = || series.iter().flat_map(|(_, _, p)| p.iter());
    svg.push_str(&format!(
        "<text x=\"{:.1}\" y=\"20\">reads per absent get (log scale) against filter MiB</text>\n",
        x0 + pad
    ));
    if all().next().is_none() {
        return;
    }
    let max_x = all().map(|p| p.0).fold(0.0, f64::max) * 1.1;
    let (lo, hi) = all().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
        (lo.min(p.1.log10()), hi.max(p.1.log10()))
    });
    let (lo, hi) = (lo.floor(), hi.ceil().max(lo.floor() + 1.0));
    let sx = |x: f64| x0 + pad + (w - 2.0 * pad) * x / max_x;
    let sy = |y: f64| h - pad - (h - 2.0 * pad) * (y.log10() - lo) / (hi - lo);
    for decade in (lo as i32)..=(hi as i32) {
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\">1e{decade}</text>\n",
            x0 + 5.0,
            sy(10f64.powi(decade))
        ));
    }
    svg.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\">filter MiB (0 to {max_x:.2})</text>\n",
        x0 + w / 2.0 - 40.0,
        h - pad + 30.0
    ));
    let mut placed = LabelPlacer {
        boxes: Vec::new(),
        right: x0 + w,
    };
    for (i, (name, colour, points)) in series.iter().enumerate() {
        let path: Vec<String> = points
            .iter()
            .map(|p| format!("{:.1},{:.1}", sx(p.0), sy(p.1)))
            .collect();
        svg.push_str(&format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\">{name}</text>\n",
            path.join(" "),
            x0 + w - pad - 80.0,
            36.0 + 14.0 * i as f64
        ));
        // Points of the two series may lie close together: each label takes the first place
        // around its point that no label placed before overlaps.
        for (x, y, label) in points {
            let (px, py) = (sx(*x), sy(*y));
            let (lx, ly) = placed.place(px, py, label);
            svg.push_str(&format!(
                "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3\" fill=\"{colour}\"/>\n<text x=\"{lx:.1}\" y=\"{ly:.1}\" fill=\"{colour}\">{label}</text>\n"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LabelPlacer;

    /// Labels of points that lie together take places that do not overlap, and keep within
    /// the chart's right edge where a place on the left allows.
    #[test]
    fn labels_of_close_points_do_not_overlap() {
        let mut placer = LabelPlacer {
            boxes: Vec::new(),
            right: 200.0,
        };
        let first = placer.place(100.0, 100.0, "budget:6");
        let second = placer.place(101.0, 101.0, "budget:7");
        let third = placer.place(102.0, 99.0, "0.01");
        assert_ne!(first, second);
        let boxes = &placer.boxes;
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                let overlap = a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3;
                assert!(!overlap, "{a:?} and {b:?} ({first:?} {second:?} {third:?})");
            }
        }
        let near_edge = placer.place(190.0, 20.0, "reads:0.0001");
        assert!(near_edge.0 + 6.5 * 12.0 <= 200.0, "{near_edge:?}");
    }
}
