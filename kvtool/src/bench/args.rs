//! The options of `kvtool bench`, for every kind of run, and the reading of its filter
//! settings (`--settings`, and `--filter` of `--stores`).

use std::path::PathBuf;

use bloomkv::filter::FilterParams;
use bloomkv::{Compression, FilterPolicy};
use clap::builder::ArgPredicate;
use clap::{Args, ValueEnum};

use super::lookup_keys::Distribution;
use super::ycsb_workloads::{CoreWorkload, RequestDistribution};
use crate::Failure;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// The directory in which to make the throwaway stores (default: the temp directory).
    #[arg(long, value_name = "DIR", help_heading = crate::headings::COMMON)]
    pub db: Option<PathBuf>,
    /// Keys loaded into each store.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Warm lookups of present keys, and as many of absent keys, per setting.
    #[arg(long, default_value_t = 200_000)]
    pub lookups: u64,
    /// Cold lookups of each kind per setting (each may read from disk, so fewer).
    #[arg(long, default_value_t = 10_000)]
    pub cold_lookups: u64,
    /// Bytes per value (keys are 16 bytes); with `--ycsb` the default is 1000, YCSB's ten
    /// fields of 100 bytes.
    #[arg(
        long,
        default_value_t = 100,
        default_value_if("ycsb", ArgPredicate::IsPresent, "1000")
    )]
    pub value_size: usize,
    /// What values hold: `compressible` (half random bytes, half one repeated byte: LZ4 halves
    /// it, about as it does real records), `records` (JSON-like text: field names, numbers and
    /// words of a 256-word vocabulary, the kind of data an entropy coder such as zstd's takes
    /// further than LZ4), `random` (nothing to compress) or `repeated` (one byte repeated: what
    /// this bench loaded before it had this option).
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
    #[arg(long, value_name = "SIZE", value_parser = super::memory::parse_size)]
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
    /// What this run tries, beside its workload (a build, an option: `arena memtables`):
    /// recorded in its JSON and named in its chart's title, so that charts of runs of one
    /// workload tell themselves apart. With `--chart-from` alone, what the runs charted tried.
    #[arg(long, value_name = "TEXT")]
    pub variant: Option<String>,
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
    pub settings: String,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an SVG chart of reads per get, of measured against predicted rate, and of reads
    /// per absent get against filter memory for uniform rates and budgets.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Also run the same load and warm lookups on RocksDB and fjall (needs a build with
    /// `--features peers`).
    #[arg(long)]
    pub peers: bool,
    /// Read table files through memory maps instead of with pread and the block cache (the
    /// default); see `Options::mmap_reads` for what maps cost.
    #[arg(long)]
    pub mmap_reads: bool,
    /// bloomkv's memtable size (default: the store's), e.g. `1MiB`: smaller memtables and
    /// level sizes build a deeper tree from fewer keys; with `--stores` too.
    #[arg(long, value_name = "SIZE", value_parser = super::memory::parse_size)]
    pub memtable_size: Option<u64>,
    /// bloomkv's `level1_size`, the smallest level target (default: the store's), e.g. `2MiB`;
    /// with `--stores` too.
    #[arg(long, value_name = "SIZE", value_parser = super::memory::parse_size)]
    pub level1_size: Option<u64>,
    /// With `--stores`: bloomkv's `Options::filter_memory_limit`, the memory all its filters
    /// may take together (`64MiB`, ...; default: the store's, a quarter of the memory the
    /// process may use, which `--memory-limit` sets).
    #[arg(long, value_name = "SIZE", value_parser = super::memory::parse_size)]
    pub filter_memory_limit: Option<u64>,
    /// With `--stores`: spend bloomkv's filter memory limit where keys are, not where the
    /// lookups counted go (`Options::filter_memory_follows_lookups(false)`).
    #[arg(long)]
    pub filter_memory_by_keys: bool,
    /// With `--stores`: keep bloomkv's memory where its options put it: no memory moves
    /// between the block cache and the filters, and the index cache lends nothing
    /// (`Options::memory_follows_reads(false)`), for a run beside one that moves it.
    #[arg(long)]
    pub memory_fixed: bool,
    /// With `--stores bloomkv`: after its run, reopen the store on the same tables, at the
    /// filter memory limit it ended with and with no memory moving, once spending that limit
    /// where the lookups counted go and once by keys, and once more by keys at the limit its
    /// options give; time a pass of gets each time after a pass that warms its caches. Two
    /// stores loaded apart split their levels at other keys, so that under a skew their gets
    /// ask other numbers of filters; on one tree only the spending differs.
    #[arg(long)]
    pub spending_on_one_tree: bool,
    /// With `--stores`: write bloomkv's filters in the cache-local layout
    /// (`Options::cache_local_filters(true)`), for a run beside one in the standard layout.
    #[arg(long)]
    pub cache_local_filters: bool,
    /// With `--stores`: bloomkv's `Options::ribbon_filters_from_level` (default: the store's,
    /// 1; `4294967295` writes Bloom filters everywhere), for runs beside each other.
    #[arg(long = "ribbon-from-level", value_name = "LEVEL")]
    pub ribbon_filters_from_level: Option<u32>,
    /// With `--stores`: bloomkv's `Options::compression` (`none`, `lz4` or `zstd`; default:
    /// the store's, LZ4).
    #[arg(long, value_name = "NAME", value_parser = parse_compression)]
    pub compression: Option<Compression>,
    /// With `--stores`: bloomkv's `Options::bottom_compression`, the compression of the
    /// tables at the bottom of the tree (`none`, `lz4` or `zstd`; default: as `--compression`).
    #[arg(long, value_name = "NAME", value_parser = parse_compression)]
    pub bottom_compression: Option<Compression>,
    /// With `--stores`: bloomkv's `Options::index_cache_size`, the memory its index partitions
    /// may take (`4MiB`, ...; default: the store's, an eighth of the memory the process may
    /// use).
    #[arg(long, value_name = "SIZE", value_parser = super::memory::parse_size)]
    pub index_cache_size: Option<u64>,
    /// bloomkv's table size (default: the store's), e.g. `64KiB`; with `--stores` too.
    #[arg(long, value_name = "SIZE", value_parser = super::memory::parse_size)]
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
    pub level0_tables: u64,
    /// Puts per write while loading: 1 writes each key with a `put` of its own, as most
    /// applications write; more groups that many into one atomic batch. The same for every
    /// store of a `--stores` run.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub load_batch: u64,
    /// Seed for the lookups.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// With `--stores`: time scans over one key prefix instead of gets, of prefixes the store
    /// holds and of prefixes it does not (`--lookups` of each). Keys come in groups of
    /// `--keys-per-prefix` sharing their first eight bytes; bloomkv runs with prefix filters
    /// over them (and, as `bloomkv-no-prefix-filters`, without), RocksDB with its prefix
    /// Bloom filters over the same eight bytes.
    #[arg(long, conflicts_with = "writes")]
    pub prefix_scans: bool,
    /// With `--prefix-scans`: keys per group sharing a prefix.
    #[arg(long, value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub keys_per_prefix: u64,
    /// How lookups pick their keys: `uniform`, or `zipf:S`, a Zipf law of exponent S over
    /// the keys in key order (`zipf:0.99`: a few key ranges take most lookups).
    #[arg(long, value_name = "LAW", default_value = "uniform", value_parser = Distribution::parse)]
    pub distribution: Distribution,
    /// Run YCSB's core workloads (comma-separated letters: `A,B,C,D,E,F`) on each store of
    /// `--stores` (`bloomkv`, `rocksdb`, `fjall`; default `bloomkv`), each in a process of
    /// its own: the load of `--records` records, then the workloads in YCSB's order (A, B, C,
    /// F, D, E: D and E insert) on the same store. A: 50% read, 50% update; B: 95/5 read,
    /// update; C: reads; D: 95% read, 5% insert, the latest records read most; E: 95% scan of
    /// 1 to 100 records, 5% insert; F: 50% read, 50% read-modify-write; requests by YCSB's
    /// scrambled Zipfian. Keys are "user" and the FNV hash of the record number, as YCSB's;
    /// a record is one value of `--value-size` random bytes (`--values` does not apply), so
    /// an update writes all of it.
    /// Reports operations per second and p50/p99/p99.9 latency per workload; `--json`,
    /// `--chart` (a bar per store and workload), `--memory-limit` as for `--stores`.
    #[arg(long, value_delimiter = ',', value_name = "WORKLOADS",
          value_parser = CoreWorkload::parse,
          conflicts_with_all = ["writes", "prefix_scans"])]
    pub ycsb: Vec<CoreWorkload>,
    /// With `--ycsb`: records loaded before the workloads (YCSB's `recordcount`).
    #[arg(long, value_name = "N", default_value_t = 1_000_000, requires = "ycsb",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub records: u64,
    /// With `--ycsb`: operations of each workload, shared among the threads (YCSB's
    /// `operationcount`).
    #[arg(long, value_name = "N", default_value_t = 1_000_000, requires = "ycsb",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub operations: u64,
    /// With `--ycsb`: threads that load the records and run each workload, all on one store.
    #[arg(long, value_name = "N", default_value_t = 4, requires = "ycsb",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
    /// With `--ycsb`: how every workload's requests pick their records, in place of each
    /// workload's own (`latest` for D, `zipfian` for the others).
    #[arg(long, value_enum, value_name = "LAW", requires = "ycsb")]
    pub request_distribution: Option<RequestDistribution>,
    /// With `--ycsb`: the exponent of the Zipfian request distributions (YCSB's
    /// `zipfianconstant`), between 0 and 1.
    #[arg(long, value_name = "THETA", default_value_t = 0.99, requires = "ycsb",
          value_parser = parse_zipf_constant)]
    pub zipf_constant: f64,
}

/// What the values of a bench load hold.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Values {
    /// Half random bytes, half one byte repeated.
    Compressible,
    /// JSON-like records of words from a small vocabulary.
    Records,
    /// Random bytes.
    Random,
    /// One byte repeated.
    Repeated,
}

impl Values {
    pub fn name(self) -> &'static str {
        match self {
            Values::Compressible => "compressible",
            Values::Records => "records",
            Values::Random => "random",
            Values::Repeated => "repeated",
        }
    }
}

/// A Zipfian exponent for `--zipf-constant`: YCSB's generator needs one strictly between 0
/// and 1.
fn parse_zipf_constant(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(theta) if theta > 0.0 && theta < 1.0 => Ok(theta),
        _ => Err(format!(
            "'{text}' is not a Zipfian constant between 0 and 1 (exclusive), such as 0.99"
        )),
    }
}

/// The filter settings of `text` (`--settings`, or the one of `--filter`): each entry's label
/// and its policy.
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

/// A compression by the name `Compression::name` gives it.
pub fn parse_compression(name: &str) -> Result<Compression, String> {
    [Compression::None, Compression::Lz4, Compression::Zstd]
        .into_iter()
        .find(|c| c.name() == name)
        .ok_or_else(|| format!("unknown compression {name:?}: none, lz4 or zstd"))
}
