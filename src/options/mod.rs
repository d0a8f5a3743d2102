//! Store configuration, with documented defaults.

use std::sync::Arc;
use std::time::Duration;

use crate::fs::{OsFileSystem, SharedFs};
use crate::prefix::PrefixExtractor;
use crate::sstable::BlockCache;
use crate::sstable::{Compression, FilterPolicy};

mod builders;

/// What recovery does with a damaged WAL. Whatever is dropped or skipped is reported in
/// [`crate::RecoveryReport`]; `docs/format-log-manifest.md` has the rules byte by byte. Default
/// [`WalRecoveryMode::TolerateTornTail`]: a power loss may tear the unsynced end of the log,
/// while damage to synced data means something else went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalRecoveryMode {
    /// Damage in the unsynced part of the last log (a torn last record, or a page a power
    /// loss lost, with intact records after it) is dropped with everything after it: every
    /// synced write is kept and what remains is a prefix of the write order. Damage a sync
    /// mark shows to be synced, or a batch the store cannot have written, fails `open` with
    /// a corruption error naming the file and offset. The default.
    #[default]
    TolerateTornTail,
    /// Any damage, even a torn last record, fails `open` with a corruption error naming the
    /// file and offset. After a power loss a torn record is normal, so this suits stores
    /// closed cleanly, or checking that nothing at all was lost.
    Strict,
    /// Recover every record before the first damage or invalid batch and drop the rest, of
    /// that log and of every later one. Keeps a consistent prefix of the write order; use to
    /// open a store whose synced log data was damaged.
    PointInTime,
    /// Skip every damaged range and every invalid batch, and keep every other intact batch
    /// of every log, each skipped part reported (RocksDB's "skip any corrupted records").
    /// The store may then hold later writes without some earlier ones: use to rescue data.
    Salvage,
}

/// The lowest `Options::delayed_write_rate`, and the slowest a delayed writer is ever made to
/// go, so that a write always completes.
pub(crate) const MIN_DELAYED_WRITE_RATE: u64 = 16 * 1024;

/// How a store is opened. Every field has a default; change them with the builder methods.
/// Opening a store refuses options outside the bounds a field gives with
/// `Error::InvalidArgument`.
#[derive(Clone)]
pub struct Options {
    /// The filter built for every table written. Default `None`: the policy the store recorded,
    /// else `BitsPerKeyBudget(10.0)`. That is the memory of RocksDB's and LevelDB's usual 10 bits
    /// per key, spread over the levels by Monkey's rule: level 0's tables and the small upper
    /// levels, which every lookup of an absent key probes, get more bits per key; the last level,
    /// which holds most keys, gets fewer. For the memory of uniform filters it wastes far fewer
    /// reads on absent keys (`docs/benchmarks.md`, "The filter budget by default";
    /// `docs/filter.md`, "Measured").
    ///
    /// A store records the policy it writes with. `None` (the default) keeps writing with the
    /// policy the store recorded, or the default policy in a store that recorded none: a
    /// store compacted with a 0.1% rate stays at 0.1% for the writers that follow, however
    /// they open it. A policy given here, as a field or with [`Options::filter_policy`], is
    /// used instead, and recorded. Once a store is open, its options hold the policy it
    /// writes with.
    pub filter_policy: Option<FilterPolicy>,
    /// Write the tables of the bottom of the tree (a level with no data below it) without a
    /// filter, as RocksDB's `optimize_filters_for_hits`. The bottom holds most keys, so this saves
    /// most of the filter memory, but lookups of absent keys then read a block at the bottom. It
    /// suits workloads whose lookups mostly find their key: those read a block there anyway.
    /// Default false, for workloads that look up absent keys too.
    pub no_filters_at_bottom: bool,
    /// Bytes all the store's filters may take in memory, together. Default `None`: the limit is
    /// `filter_memory_share` of the memory the process may use, so that it follows the machine or
    /// container the store runs in.
    ///
    /// With a limit, the policy's filters are spread over the tree within it: tables are written
    /// with no more bits per key than the limit leaves for every key stored, by Monkey's rule like
    /// a budget (and at most what the policy asks for). When the filters held still exceed it (the
    /// store grew since its tables were written, or was opened with a smaller limit), the filters
    /// whose loss costs lookups least are folded to a half, a quarter or an eighth of their bits
    /// in memory, or at last dropped, until they fit (`docs/design.md`, "Filter memory"). The
    /// files keep their whole filters. `Stats::filter_memory_bytes` is never above the limit once
    /// a flush, compaction or open returns, unless prefix filters alone exceed it (see
    /// `prefix_extractor`).
    pub filter_memory_limit: Option<u64>,
    /// Without a `filter_memory_limit`: the share of the memory this process may use that the
    /// store's filters may take, made a limit when the store opens (`Stats` shows it). The memory
    /// is [`crate::memory::available`]: the process's memory cgroup limit, as in a container, else
    /// the machine's memory. Default 0.25: a store whose filters fit is not touched, and a store
    /// whose filters would outgrow its memory still completes its load, where uncapped filters
    /// choke it (`docs/benchmarks.md`, "100M keys in 256 MiB: the filter cap"; `docs/design.md`,
    /// "Filter memory").
    ///
    /// The share is per store: a process that opens several stores should give each a limit.
    /// `None` with no limit leaves filters uncapped. A share must be above 0 and at most 1.
    pub filter_memory_share: Option<f64>,
    /// Under a filter memory limit: spend it where lookups go, as counted, rather than where keys
    /// are. Default `true`: under a lookup skew (a few key ranges taking most lookups), the busy
    /// tables keep their whole filters and the quiet ones pay (`docs/benchmarks.md`, "Zipf: two
    /// spendings of one filter limit on the same tables").
    ///
    /// Tables written while the limit binds get filters of up to four times the bits per key their
    /// level's share of the limit pays for (hashes as for that share, so a filter folded back to
    /// the share is what the share alone would have written). Which to keep whole and which to
    /// fold or drop then follows each table's count of the lookups that asked it for a key, and a
    /// background thread reads a filter back from its file when its table turns busy. A store
    /// opened later without a limit holds such filters whole, at up to four times the share.
    /// `false` spends the limit as if lookups were drawn like the stored keys (`docs/design.md`,
    /// "Filter memory").
    pub filter_memory_follows_lookups: bool,
    /// Moves memory between the block cache and the filters as the lookups show which saves more
    /// reads per byte. Default `true`: which use of memory saves more reads depends on the
    /// lookups, so it is measured rather than fixed.
    ///
    /// One governor then moves memory between the block cache (a cache of the store's own), the
    /// index cache and the filters, toward whichever saves more reads per byte over the recent
    /// lookups: under uniform lookups over a store far larger than the cache, the cache gives
    /// the filters up to seven eighths of itself; under a skew the cache serves, it keeps its
    /// memory or takes it back; the index cache lends what its partitions leave spare. The
    /// filters never drop below `filter_memory_limit`; the memtables' room is never lent.
    /// Needs a filter memory limit and `filter_memory_follows_lookups`. `Stats::memory` shows
    /// each role's target (`docs/design.md`, "Memory").
    pub memory_follows_reads: bool,
    /// Bytes of index partitions the store keeps in memory, in a cache of their own. Default
    /// `None`: `index_memory_share` of the memory the process may use, made a size when the store
    /// opens, so that it follows the machine or container the store runs in (`Stats::index_cache`
    /// shows it, less what it lends the filters: `Options::memory_follows_reads`).
    ///
    /// A table whose index outgrows `index_partition_size` is written with a two-level index: a
    /// small top level that stays in memory, over index partitions that lookups read when they
    /// need them and this cache keeps (format version 4). So the memory of indexes is bounded
    /// however large the store grows, where whole indexes would take about 0.19 bytes per key
    /// (190 MB for a billion 16-byte keys).
    pub index_cache_size: Option<u64>,
    /// Without an `index_cache_size`: the share of the memory this process may use
    /// ([`crate::memory::available`]) that index partitions may take. Default 0.125: 128 MiB in
    /// 1 GiB (32 MiB in 256 MiB), which holds every partition of a store of a few hundred million
    /// keys, so that a lookup reads only its data block. It must be above 0 and at most 1.
    pub index_memory_share: f64,
    /// Bytes of index an index partition holds before the next one starts; a table whose whole
    /// index is smaller is written with one index block, kept in memory for its life. 0 writes
    /// every index as one block. Default 4 KiB, RocksDB's `metadata_block_size`: a partition is a
    /// read the size of a data block, and covers about 600 data blocks (2.4 MB of data).
    pub index_partition_size: usize,
    /// Bytes of filter a filter partition holds, as written; 0 writes every filter whole. Default
    /// 0: under a lookup skew, partitions spared absent gets no more reads than whole filters kept
    /// table by table, and they slowed present gets (`docs/benchmarks.md`, "Partitioned filters").
    ///
    /// Given a size (16 KiB is about 4 KiB once folded to a limit's share, the size of an index
    /// partition), while a filter memory limit binds and follows lookups (the tables' filters are
    /// then written wider than their share), a table's filter of at least two partitions is
    /// written as partitions of about this size under a small top level (`docs/format.md`,
    /// "Partitioned filter"). The limit is then spent partition by partition: a busy key range
    /// keeps its partitions whole, where a whole filter would cost its table's every key. Every
    /// partition stays in memory (folded or not), so no lookup reads a filter from the disk.
    pub filter_partition_size: usize,
    /// Cuts each key's prefix (a user, a tenant, a time bucket: [`PrefixExtractor`]) for prefix
    /// filters: each table written carries a Bloom filter over its keys' distinct prefixes, and
    /// scans over one prefix pass by every table whose prefix filter rules the prefix out. `None`
    /// (the default) writes no prefix filter: only the caller knows what a prefix of its keys is.
    ///
    /// A prefix filter is in the standard layout, with the filter policy's share for the table's
    /// level. The scans it serves are [`Db::prefix`](crate::Db::prefix) and ranges whose bounds
    /// share one prefix; [`Db::may_contain_prefix`](crate::Db::may_contain_prefix) answers from
    /// memory. Prefix filters are held whole for their tables' lives and count against
    /// `filter_memory_limit`: the filters over whole keys get what they leave (a limit smaller
    /// than the prefix filters alone is exceeded by them). Tables written under an extractor of
    /// another name keep their prefix filters on disk, unread
    /// (`Stats::tables_prefix_filter_ignored`), until compaction rewrites them. Each memtable
    /// keeps a prefix filter too (about 1.5% of `memtable_size`, counted in it), so that those
    /// scans pass memtables by as well.
    pub prefix_extractor: Option<PrefixExtractor>,
    /// With a prefix extractor, whether tables keep their filter over whole keys too, as RocksDB's
    /// `whole_key_filtering`. Without it, a table's only filter is its prefix filter, which point
    /// lookups of keys with a prefix ask instead: less memory, more data blocks read by absent
    /// gets that share a prefix with a present key. Default true, so that point lookups of absent
    /// keys cost no more than without a prefix extractor.
    pub whole_key_filtering: bool,
    /// Writes each table's filter (a whole one; partitions stay standard) in the cache-local
    /// layout: all of a key's probes in one 64-byte block, one cache miss a probe where the
    /// standard layout takes up to one per hash. Default `false`: in the store it gained absent
    /// gets nothing clear, and its filters let more keys through to a block (`docs/benchmarks.md`,
    /// "Filter layouts in the store: 100M keys in 1 GiB").
    ///
    /// It keeps the bits per key the filter policy gives, with the hashes that give the lowest
    /// rate at them, which the blocked layout's own rule predicts (`docs/filter.md`, "Cache-local
    /// layout"). Its rate at the same memory is a little higher (0.97% against 0.82% at 10 bits
    /// per key). Tables of both layouts mix in a store; compaction writes the store's.
    pub cache_local_filters: bool,
    /// A memtable is frozen and flushed once it holds about this many bytes. At least 1 KiB.
    /// Default 32 MiB: it writes far fewer bytes per byte loaded than small memtables, and larger
    /// ones saved little load time for their memory (`docs/benchmarks.md`, "Sustained writes: how
    /// the memtable and level sizes were chosen").
    pub memtable_size: usize,
    /// Frozen memtables waiting for flush before writers stall. At least 1. Default 2: a burst of
    /// writes goes on through a slow flush, and memory stays planned at three memtables (the
    /// active one and two frozen).
    pub max_immutable_memtables: usize,
    /// Target size of one table file. At least 1 KiB. Default 64 MiB, as RocksDB's: a large store
    /// then has few enough tables to keep them all open within `max_open_files`, so no lookup pays
    /// for opening a file (`docs/benchmarks.md`, "64 MiB tables").
    pub table_size: u64,
    /// Target size of a data block. From 64 bytes to 64 MiB. Default 4 KiB, a page of memory and
    /// of most devices: a lookup that misses the caches reads one small block.
    pub block_size: usize,
    /// Target size of the level that level 0 is compacted into. With `dynamic_level_sizes`, the
    /// smallest target any level gets; otherwise level 1's, each deeper level being
    /// `level_size_ratio` times larger. At least 1 KiB. Default 128 MiB: four 32 MiB memtables,
    /// level 0 at its trigger, so that a compaction into it merges inputs of like sizes
    /// (`docs/benchmarks.md`, "Sustained writes: how the memtable and level sizes were chosen").
    pub level1_size: u64,
    /// Size ratio between adjacent levels. At least 2. Default 10, as LevelDB's and RocksDB's: the
    /// usual balance between the bytes each level rewrites and the levels a lookup asks.
    pub level_size_ratio: u64,
    /// Number of levels, level 0 included. From 2 to 32. Default 7, as RocksDB's: at the default
    /// sizes, room for terabytes.
    pub num_levels: usize,
    /// Derive level targets from the largest level up, each level `level_size_ratio` times
    /// smaller than the one below (at least `level1_size`), and compact level 0 into the
    /// shallowest level so sized, as RocksDB's `level_compaction_dynamic_level_bytes`. About
    /// 90% of the data then sits in the last level at any size, and a small store has few
    /// levels. False: level 1 is `level1_size`, each deeper level `level_size_ratio` times larger,
    /// and level 0 is compacted into level 1. Default true: a load writes fewer bytes per byte
    /// loaded, in fewer levels (`docs/benchmarks.md`, "Sustained writes: how the memtable and
    /// level sizes were chosen").
    pub dynamic_level_sizes: bool,
    /// Level-0 table count that starts a compaction into the base level (or fewer tables, once
    /// writes rest: `compact_level0_at_rest`). Default 4, as RocksDB's: few tables for each lookup
    /// to ask, and each compaction merges several memtables at once. It must be at least 1 and may
    /// not exceed `l0_slowdown_trigger` (20 by default): raise both together
    /// (`l0_write_triggers`) to let level 0 grow further.
    pub l0_compaction_trigger: usize,
    /// How long after the last memtable was frozen level 0 is compacted into the base level below
    /// `l0_compaction_trigger`. Default 10 seconds: every lookup asks the filter of nearly every
    /// level-0 table, and once writes stop, the tables below the trigger would stay until writes
    /// came back (`docs/benchmarks.md`, "1 GiB on the same tables, and level 0 compacted once
    /// writes rest"; `docs/design.md`, "Compaction"). `None` waits for the trigger alone.
    ///
    /// It runs once no other compaction is due and ten thousand lookups have reached the
    /// keyspace's tables while its level 0 held some since (gets, `multi_get` and `contains_key`
    /// count; `may_contain` does not). A keyspace nobody reads is left as it is, and a read-only
    /// store compacts nothing. A memtable frozen less than eight times the rest waited for after
    /// such a compaction doubles the next rest (up to 30 minutes, or this rest if longer), so that
    /// writes pausing often do not have each flush compacted on its own; one frozen later brings
    /// it back to this (a rest of zero never grows: each flush read ten thousand times is
    /// compacted). A store that raises `l0_compaction_trigger` to keep tables in level 0 sets
    /// this to `None`.
    pub compact_level0_at_rest: Option<Duration>,
    /// Level-0 table count from which writes are slowed to `delayed_write_rate` (lower still
    /// while level 0 keeps growing), so that it rarely reaches the stop trigger. At least
    /// `l0_compaction_trigger`. Default 20, as RocksDB's. Every level-0 table is one more filter
    /// each lookup asks (their key ranges all overlap) while compaction is behind, but a lower
    /// trigger delays every write-heavy workload: a cost all writes pay, for lookups made while
    /// compaction is behind (`docs/benchmarks.md`, "Level 0's slowdown trigger").
    pub l0_slowdown_trigger: usize,
    /// Level-0 table count at which writes wait for compaction. At least `l0_slowdown_trigger`.
    /// Default 36, as RocksDB's: far enough above the slowdown trigger that a delayed load rarely
    /// gets there.
    pub l0_stop_trigger: usize,
    /// Bytes per second writes may go once level 0 reaches `l0_slowdown_trigger`. The rate
    /// falls by a fifth each time a write finds level 0 grown since the last, and rises by a
    /// quarter (back up to this) each time it finds it shrunk (`src/db/write_rate.rs`), so a
    /// writer that outruns compaction settles near the rate compaction sustains. At least
    /// 16 KiB/s, the slowest a delayed writer is ever made to go, so that a write always
    /// completes. Default 16 MiB/s, as RocksDB's `delayed_write_rate`: only a start, since the
    /// rate follows compaction from there.
    pub delayed_write_rate: u64,
    /// Threads that run compactions, besides the one thread that flushes memtables.
    /// Compactions whose input tables differ run side by side, and a merge out of level 0 is
    /// split into up to this many key ranges, one a thread. From 1 to 64. Default 2, so that a
    /// long compaction does not hold every other back.
    pub compaction_threads: usize,
    /// How much lower than the store's other threads, and the caller's, compaction threads
    /// run: a `nice` increment, 0 to 19 (Linux; elsewhere ignored); 0 runs them at the caller's
    /// priority. Default 10: compaction is throughput work with slack (level 0 may grow to
    /// `l0_slowdown_trigger` before writers notice), while a lookup waits on every microsecond.
    /// With as many compaction threads as cores, a lookup that arrives while they run would
    /// otherwise wait for a time slice after each of its reads (`docs/benchmarks.md`,
    /// "Compaction below lookups").
    pub compaction_nice: u8,
    /// Keep glibc's allocator from holding memory the store freed: at open, hold its mmap
    /// threshold at its 128 KiB default, which glibc otherwise raises up to 32 MiB as large
    /// blocks are freed (and its trim threshold to twice that), and trim its arenas after each
    /// flush and compaction. Both settings are the process's, not the store's; a process that
    /// tunes glibc through `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_` or
    /// `GLIBC_TUNABLES` keeps its own. Linux with glibc only; elsewhere ignored. Default true:
    /// otherwise memory the store frees stays resident in the process (`docs/benchmarks.md`,
    /// "Resident memory and the allocator's thresholds").
    pub tune_allocator: bool,
    /// How long the writer leading a group that will be synced waits, at most, for the
    /// writers of the previous group to queue again, so that writers who write back to back
    /// share one fsync rather than take turns in two groups (`src/db/write_group.rs`). A lone
    /// writer never waits. For its first 100 µs the waiting writer yields the processor
    /// rather than sleeping, which keeps a processor busy when nothing else runs. Zero turns it
    /// off; at most 1 s. Default 100 µs: short next to an fsync, and all of it spent yielding,
    /// which gathers writers sooner than sleeping (`docs/benchmarks.md`, "Synced writes:
    /// gathering without sleeping").
    pub group_commit_wait: Duration,
    /// Create the directory and an empty store when none exists. Default true, so that the first
    /// open makes the store; when false, opening where no store is fails with
    /// `Error::InvalidArgument`.
    pub create_if_missing: bool,
    /// What recovery does with a damaged WAL. Default: drop damage in the unsynced part of
    /// the log, refuse damage to synced data ([`WalRecoveryMode::TolerateTornTail`]), since a
    /// power loss may tear the unsynced part, while damage to synced data means something else
    /// went wrong.
    pub wal_recovery_mode: WalRecoveryMode,
    /// Bytes of decoded data blocks the store keeps in its block cache; 0 turns the cache off.
    /// Ignored when `block_cache` is set. Memory the cache does not take is left to the page
    /// cache, which holds blocks compressed. Default 32 MiB, as RocksDB's and fjall's: hot blocks
    /// are served decoded, and the rest of memory holds more blocks per byte in the page cache.
    pub block_cache_size: u64,
    /// A block cache shared with other stores (each store's blocks are kept apart inside it).
    /// Default `None`: the store makes a cache of its own of `block_cache_size` bytes, which
    /// `memory_follows_reads` needs to move memory to the filters.
    pub block_cache: Option<Arc<BlockCache>>,
    /// Table files kept open at once; more are opened on demand and the least used closed.
    /// Filters and indexes (their top levels) stay in memory regardless. At least 16. Default
    /// 512: within the usual limit of 1,024 open files per process, with room for logs and the
    /// caller's own files. Under a lower limit (`RLIMIT_NOFILE`; macOS starts processes at 256)
    /// the store keeps fewer: what the limit leaves after 12 descriptors and an eighth of the
    /// limit for its other files and the caller's (`Stats::table_cache` gives the number).
    /// Should the process run out of descriptors anyway, the table cache closes files and the
    /// open is tried again.
    pub max_open_files: usize,
    /// How table blocks are compressed; a block that does not shrink by 1/8 is stored raw.
    /// Default LZ4: a block decodes in a few microseconds, and the store saves disk bytes and
    /// page-cache space (`docs/design.md`, "Caches").
    pub compression: Compression,
    /// Bytes the manifest's log of edits may reach before it is rewritten as one snapshot of
    /// the tree (and at least twice the last snapshot's size, so a big tree is not rewritten
    /// at every edit). Default 4 MiB: an open reads little, and rewrites stay rare.
    pub max_manifest_size: u64,
    /// The file system the store uses. Default: the operating system's, read with `pread`
    /// ([`OsFileSystem`]), which leaves what stays in memory to the block cache and turns a
    /// truncated file into an error; `mmap_reads(true)` reads through memory maps instead.
    pub file_system: SharedFs,
}

/// The filter policy of `Options::default()`.
const DEFAULT_FILTER_POLICY: FilterPolicy = FilterPolicy::BitsPerKeyBudget(10.0);

impl Default for Options {
    fn default() -> Options {
        Options {
            filter_policy: None,
            no_filters_at_bottom: false,
            filter_memory_limit: None,
            filter_memory_share: Some(0.25),
            filter_memory_follows_lookups: true,
            memory_follows_reads: true,
            index_cache_size: None,
            index_memory_share: 0.125,
            index_partition_size: 4096,
            filter_partition_size: 0,
            prefix_extractor: None,
            whole_key_filtering: true,
            cache_local_filters: false,
            memtable_size: 32 << 20,
            max_immutable_memtables: 2,
            table_size: 64 << 20,
            block_size: 4096,
            level1_size: 128 << 20,
            level_size_ratio: 10,
            num_levels: 7,
            dynamic_level_sizes: true,
            l0_compaction_trigger: 4,
            compact_level0_at_rest: Some(Duration::from_secs(10)),
            l0_slowdown_trigger: 20,
            l0_stop_trigger: 36,
            delayed_write_rate: 16 << 20,
            compaction_threads: 2,
            compaction_nice: 10,
            tune_allocator: true,
            group_commit_wait: Duration::from_micros(100),
            create_if_missing: true,
            wal_recovery_mode: WalRecoveryMode::default(),
            block_cache_size: 32 << 20,
            block_cache: None,
            max_open_files: 512,
            compression: Compression::default(),
            max_manifest_size: 4 << 20,
            file_system: Arc::new(OsFileSystem),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("filter_policy", &self.filter_policy)
            .field("no_filters_at_bottom", &self.no_filters_at_bottom)
            .field("filter_memory_limit", &self.filter_memory_limit)
            .field("filter_memory_share", &self.filter_memory_share)
            .field(
                "filter_memory_follows_lookups",
                &self.filter_memory_follows_lookups,
            )
            .field("memory_follows_reads", &self.memory_follows_reads)
            .field("index_cache_size", &self.index_cache_size)
            .field("index_memory_share", &self.index_memory_share)
            .field("index_partition_size", &self.index_partition_size)
            .field("filter_partition_size", &self.filter_partition_size)
            .field("prefix_extractor", &self.prefix_extractor)
            .field("whole_key_filtering", &self.whole_key_filtering)
            .field("cache_local_filters", &self.cache_local_filters)
            .field("memtable_size", &self.memtable_size)
            .field("table_size", &self.table_size)
            .field("level1_size", &self.level1_size)
            .field("level_size_ratio", &self.level_size_ratio)
            .field("num_levels", &self.num_levels)
            .field("group_commit_wait", &self.group_commit_wait)
            .field("dynamic_level_sizes", &self.dynamic_level_sizes)
            .field("compact_level0_at_rest", &self.compact_level0_at_rest)
            .field("compaction_threads", &self.compaction_threads)
            .field("compaction_nice", &self.compaction_nice)
            .field("tune_allocator", &self.tune_allocator)
            .field("block_cache_size", &self.block_cache_size)
            .field("shared_block_cache", &self.block_cache.is_some())
            .field("max_open_files", &self.max_open_files)
            .field("compression", &self.compression)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// The options with `filter_memory_limit` made from `filter_memory_share`, and
    /// `index_cache_size` from `index_memory_share`, and the memory the process may use now,
    /// where they were not given.
    pub(crate) fn with_memory_shares_resolved(mut self) -> Self {
        let available = crate::memory::available();
        if self.filter_memory_limit.is_none() {
            self.filter_memory_limit = self
                .filter_memory_share
                .zip(available)
                .map(|(share, bytes)| (bytes as f64 * share) as u64);
        }
        if self.index_cache_size.is_none() {
            // Without a figure for memory (not Linux), the size of the block cache's default.
            let bytes = available.map_or(32 << 20, |b| (b as f64 * self.index_memory_share) as u64);
            self.index_cache_size = Some(bytes);
        }
        self
    }

    /// The policy a store writes with, given the one it recorded: the options' own when
    /// given, else the one recorded, else the default.
    pub(crate) fn filter_policy_over(&self, recorded: Option<FilterPolicy>) -> FilterPolicy {
        (self.filter_policy.or(recorded)).unwrap_or(DEFAULT_FILTER_POLICY)
    }

    /// The policy tables are written with: the one given, else the default (an open store's
    /// options hold the one it resolved).
    pub(crate) fn policy(&self) -> FilterPolicy {
        self.filter_policy.unwrap_or(DEFAULT_FILTER_POLICY)
    }

    /// Checks that the options make sense together.
    pub(crate) fn validate(&self) -> crate::Result<()> {
        let bad = |msg: &str| Err(crate::Error::InvalidArgument(msg.to_string()));
        self.policy().validate()?;
        if let Some(extractor) = &self.prefix_extractor {
            extractor.validate()?;
        }
        if self.memtable_size < 1024 {
            return bad("memtable_size must be at least 1 KiB");
        }
        if self.table_size < 1024 || self.level1_size < 1024 {
            return bad("table_size and level1_size must be at least 1 KiB");
        }
        if self.block_size < 64 {
            return bad("block_size must be at least 64 bytes");
        }
        // Larger blocks were taken at open, and then every flush failed: offsets inside a
        // block are 32-bit and the table writer refuses a block past this size.
        if self.block_size > crate::sstable::MAX_BLOCK_SIZE {
            return bad("block_size must be at most 64 MiB");
        }
        if self.group_commit_wait > Duration::from_secs(1) {
            return bad("group_commit_wait must be at most 1 s");
        }
        if self.level_size_ratio < 2 {
            return bad("level_size_ratio must be at least 2");
        }
        if !(2..=32).contains(&self.num_levels) {
            return bad("num_levels must be 2..=32");
        }
        if self.l0_compaction_trigger == 0
            || self.l0_slowdown_trigger < self.l0_compaction_trigger
            || self.l0_stop_trigger < self.l0_slowdown_trigger
        {
            return bad("level-0 triggers must satisfy 0 < compaction <= slowdown <= stop");
        }
        if self.max_immutable_memtables == 0 {
            return bad("max_immutable_memtables must be at least 1");
        }
        if !(1..=64).contains(&self.compaction_threads) {
            return bad("compaction_threads must be 1..=64");
        }
        if self
            .filter_memory_share
            .is_some_and(|s| !(s > 0.0 && s <= 1.0))
        {
            return bad("filter_memory_share must be above 0 and at most 1");
        }
        if !(self.index_memory_share > 0.0 && self.index_memory_share <= 1.0) {
            return bad("index_memory_share must be above 0 and at most 1");
        }
        if self.compaction_nice > 19 {
            return bad("compaction_nice must be 0..=19");
        }
        if self.delayed_write_rate < MIN_DELAYED_WRITE_RATE {
            return bad("delayed_write_rate must be at least 16 KiB/s");
        }
        if self.max_open_files < 16 {
            return bad("max_open_files must be at least 16");
        }
        Ok(())
    }
}

/// Per-write options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// When true the write is on stable storage (WAL fsynced) when the call returns. When false
    /// (the default) it survives a crash of the process but not of the machine. Default false: a
    /// sync makes each write wait for the device, which many writes need not pay.
    pub sync: bool,
}

impl WriteOptions {
    /// Options for a synced write.
    pub fn synced() -> WriteOptions {
        WriteOptions { sync: true }
    }
}
