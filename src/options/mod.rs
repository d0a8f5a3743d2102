//! Store configuration, with documented defaults.

use std::sync::Arc;
use std::time::Duration;

use crate::fs::{OsFileSystem, SharedFs};
use crate::prefix::PrefixExtractor;
use crate::sstable::BlockCache;
use crate::sstable::{Compression, FilterPolicy};

mod builders;
mod tuning;

pub use tuning::Tuning;

/// What recovery does with a damaged WAL. Whatever is dropped or skipped is reported in
/// [`crate::RecoveryReport`]; `docs/format-log-manifest.md` has the rules byte by byte. Default
/// [`WalRecoveryMode::TolerateTornTail`]: a power loss may tear the unsynced end of the log,
/// while damage to synced data means something else went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
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

/// How a store is opened. Every field has a default, with the reason for it; change them with
/// the builder methods (setting a field means the same). Opening a store refuses options
/// outside the bounds a field gives with `Error::InvalidArgument`.
///
/// - The store: `create_if_missing`, `file_system`, `wal_recovery_mode`, `max_open_files`,
///   `compaction_threads`, `tune_allocator`; its memory: `memory_limit` (a total),
///   `memory_follows_reads` (the policy that moves it between caches and filters) and
///   `block_cache_size` or a shared `block_cache`.
/// - Its trees, which a keyspace may override in part ([`crate::KeyspaceOptions`]):
///   `filter_policy`, `compression`, `block_size`, `memtable_size`, `table_size`,
///   `prefix_extractor`, `whole_key_filtering`.
/// - [`Tuning`]: the knobs those defaults were measured for, which benchmarks and tests turn.
#[derive(Clone)]
#[non_exhaustive]
pub struct Options {
    /// The filter built for every table written. Default `None`: the policy the store recorded,
    /// else `BitsPerKeyBudget(10.0)`. That is the memory of RocksDB's and LevelDB's usual 10 bits
    /// per key, spread over the levels by Monkey's rule: level 0's tables and the small upper
    /// levels, which every lookup of an absent key probes, get more bits per key; the last level,
    /// which holds most keys, gets fewer. For the memory of uniform filters it wastes far fewer
    /// reads on absent keys (the repository's benchmark notes, "The filter budget by default";
    /// the repository's filter notes, "Measured").
    ///
    /// A store records the policy it writes with. `None` (the default) keeps writing with the
    /// policy the store recorded, or the default policy in a store that recorded none: a
    /// store compacted with a 0.1% rate stays at 0.1% for the writers that follow, however
    /// they open it. A policy given here, as a field or with [`Options::filter_policy`], is
    /// used instead, and recorded. Once a store is open, its options hold the policy it
    /// writes with.
    pub filter_policy: Option<FilterPolicy>,
    /// The memory policy: one governor moves memory between the block cache (a cache of the
    /// store's own), the index cache and the filters, toward whichever saves more reads per
    /// byte over the recent lookups. Default `true`: which saves more depends on the lookups,
    /// so it is measured rather than fixed. Under uniform lookups over a store far larger than
    /// the cache, the cache gives the filters up to seven eighths of itself; under a skew the
    /// cache serves, it keeps its memory or takes it back; the index cache lends what its
    /// partitions leave spare. The filters never drop below their limit; the memtables' room
    /// is never lent. Needs a filter memory limit and `Tuning::filter_memory_follows_lookups`.
    /// `Stats::memory` shows each role's target (the repository's design notes, "Memory").
    pub memory_follows_reads: bool,
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
    /// A memtable is frozen and flushed once it holds about this many bytes. At least 1 KiB.
    /// Default 32 MiB: it writes far fewer bytes per byte loaded than small memtables, and larger
    /// ones saved little load time for their memory (the repository's benchmark notes, "Sustained writes: how
    /// the memtable and level sizes were chosen").
    pub memtable_size: usize,
    /// Target size of one table file. At least 1 KiB. Default 64 MiB, as RocksDB's: a large store
    /// then has few enough tables to keep them all open within `max_open_files`, so no lookup pays
    /// for opening a file (the repository's benchmark notes, "64 MiB tables").
    pub table_size: u64,
    /// Target size of a data block. From 64 bytes to 64 MiB. Default 4 KiB, a page of memory and
    /// of most devices: a lookup that misses the caches reads one small block.
    pub block_size: usize,
    /// Threads that run compactions, besides the one thread that flushes memtables.
    /// Compactions whose input tables differ run side by side, and a merge out of level 0 is
    /// split into up to this many key ranges, one a thread. From 1 to 64. Default 2, so that a
    /// long compaction does not hold every other back.
    pub compaction_threads: usize,
    /// Keep glibc's allocator from holding memory the store freed: at open, hold its mmap
    /// threshold at its 128 KiB default, which glibc otherwise raises up to 32 MiB as large
    /// blocks are freed (and its trim threshold to twice that), and trim its arenas after each
    /// flush and compaction. Both settings are the process's, not the store's; a process that
    /// tunes glibc through `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_` or
    /// `GLIBC_TUNABLES` keeps its own. Linux with glibc only; elsewhere ignored. Default
    /// false, since a library should not change its host's allocator unasked; without it,
    /// memory the store frees may stay resident in the process (the repository's benchmark notes,
    /// "Resident memory and the allocator's thresholds"). `kvtool` turns it on.
    pub tune_allocator: bool,
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
    /// page-cache space (the repository's design notes, "Caches").
    pub compression: Compression,
    /// How the blocks of tables written at the bottom of the tree (a level with no data below
    /// it, where most bytes live and fewest reads go) are compressed. Default `None`: as
    /// `compression` says. `Some(Compression::Zstd)` stores cold data in fewer bytes while
    /// the levels above, which most reads and every compaction's inputs come from, keep LZ4.
    pub bottom_compression: Option<Compression>,
    /// How long an entry of the default keyspace lives (`KeyspaceOptions::ttl` sets another
    /// keyspace's): a value written this long ago reads as absent, and compactions drop it.
    /// Default `None`: entries live until deleted. Expiry follows the clock, not snapshots:
    /// a snapshot does not keep an expired value. The time an entry was written is bounded
    /// from samples of the sequence numbers the store takes, so an entry expires at most a
    /// second or so late, never early (the repository's design notes, "Expiry").
    pub ttl: Option<Duration>,
    /// A rule of the user's applied to entries as compactions rewrite them: keep, remove or
    /// change each (see [`CompactionFilter`](crate::CompactionFilter)). It is told each
    /// entry's keyspace. Default `None`.
    pub compaction_filter: Option<Arc<dyn crate::CompactionFilter>>,
    /// The file system the store uses. Default: the operating system's, read with `pread`
    /// ([`OsFileSystem`]), which leaves what stays in memory to the block cache and turns a
    /// truncated file into an error; `mmap_reads(true)` reads through memory maps instead.
    pub file_system: SharedFs,
    /// Bytes the store plans its memory for. Default `None`: the memory the process may use
    /// ([`crate::memory::available`]: its memory cgroup's limit, as in a container, else the
    /// machine's). The filters may take a quarter of it and the index partitions an eighth
    /// (`Tuning::filter_memory_share`, `Tuning::index_memory_share`), so that both follow the
    /// machine or container the store runs in; a process that opens several stores gives each
    /// its own.
    pub memory_limit: Option<u64>,
    /// The knobs the defaults above were measured for, which benchmarks and tests turn: the
    /// filters' and index partitions' memory, the shape of the tree, level 0's triggers, the
    /// write rate, the threads' priority. Each has its default and why in [`Tuning`].
    pub tuning: Tuning,
}

/// The filter policy of `Options::default()`.
const DEFAULT_FILTER_POLICY: FilterPolicy = FilterPolicy::BitsPerKeyBudget(10.0);

impl Default for Options {
    fn default() -> Options {
        Options {
            filter_policy: None,
            memory_follows_reads: true,
            prefix_extractor: None,
            whole_key_filtering: true,
            memtable_size: 32 << 20,
            table_size: 64 << 20,
            block_size: 4096,
            compaction_threads: 2,
            tune_allocator: false,
            create_if_missing: true,
            wal_recovery_mode: WalRecoveryMode::default(),
            block_cache_size: 32 << 20,
            block_cache: None,
            max_open_files: 512,
            compression: Compression::default(),
            bottom_compression: None,
            ttl: None,
            compaction_filter: None,
            file_system: Arc::new(OsFileSystem),
            memory_limit: None,
            tuning: Tuning::default(),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("filter_policy", &self.filter_policy)
            .field("memory_follows_reads", &self.memory_follows_reads)
            .field("prefix_extractor", &self.prefix_extractor)
            .field("whole_key_filtering", &self.whole_key_filtering)
            .field("memtable_size", &self.memtable_size)
            .field("table_size", &self.table_size)
            .field("compaction_threads", &self.compaction_threads)
            .field("tune_allocator", &self.tune_allocator)
            .field("block_cache_size", &self.block_cache_size)
            .field("shared_block_cache", &self.block_cache.is_some())
            .field("max_open_files", &self.max_open_files)
            .field("compression", &self.compression)
            .field("bottom_compression", &self.bottom_compression)
            .field("ttl", &self.ttl)
            .field("compaction_filter", &self.compaction_filter.is_some())
            .field("memory_limit", &self.memory_limit)
            .field("tuning", &self.tuning)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// The compression of tables written at `level`, at the bottom of the tree or not.
    pub(crate) fn compression_at(&self, at_bottom: bool) -> Compression {
        match (at_bottom, self.bottom_compression) {
            (true, Some(bottom)) => bottom,
            _ => self.compression,
        }
    }

    /// The options with `filter_memory_limit` made from `filter_memory_share`, and
    /// `index_cache_size` from `index_memory_share`, and the memory the process may use now,
    /// where they were not given.
    pub(crate) fn with_memory_shares_resolved(mut self) -> Self {
        let available = self.memory_limit.or_else(crate::memory::available);
        if self.tuning.filter_memory_limit.is_none() {
            self.tuning.filter_memory_limit = self
                .tuning
                .filter_memory_share
                .zip(available)
                .map(|(share, bytes)| (bytes as f64 * share) as u64);
        }
        if self.tuning.index_cache_size.is_none() {
            // Without a figure for memory (not Linux), the size of the block cache's default.
            let bytes = available.map_or(32 << 20, |b| {
                (b as f64 * self.tuning.index_memory_share) as u64
            });
            self.tuning.index_cache_size = Some(bytes);
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
        if self.table_size < 1024 || self.tuning.level1_size < 1024 {
            return bad("table_size and level1_size must be at least 1 KiB");
        }
        let compressions = std::iter::once(self.compression).chain(self.bottom_compression);
        if let Some(missing) = compressions.into_iter().find(|c| !c.is_available()) {
            return Err(crate::Error::InvalidArgument(format!(
                "{} compression is not in this build (its cargo feature is off)",
                missing.name()
            )));
        }
        if self.ttl.is_some_and(|t| t.as_secs() == 0) {
            return bad("ttl must be a second or more");
        }
        if self.block_size < 64 {
            return bad("block_size must be at least 64 bytes");
        }
        // Larger blocks were taken at open, and then every flush failed: offsets inside a
        // block are 32-bit and the table writer refuses a block past this size.
        if self.block_size > crate::sstable::MAX_BLOCK_SIZE {
            return bad("block_size must be at most 64 MiB");
        }
        if self.tuning.group_commit_wait > Duration::from_secs(1) {
            return bad("group_commit_wait must be at most 1 s");
        }
        if self.tuning.level_size_ratio < 2 {
            return bad("level_size_ratio must be at least 2");
        }
        if !(2..=32).contains(&self.tuning.num_levels) {
            return bad("num_levels must be 2..=32");
        }
        if self.tuning.l0_compaction_trigger == 0
            || self.tuning.l0_slowdown_trigger < self.tuning.l0_compaction_trigger
            || self.tuning.l0_stop_trigger < self.tuning.l0_slowdown_trigger
        {
            return bad("level-0 triggers must satisfy 0 < compaction <= slowdown <= stop");
        }
        if self.tuning.max_immutable_memtables == 0 {
            return bad("max_immutable_memtables must be at least 1");
        }
        if !(1..=64).contains(&self.compaction_threads) {
            return bad("compaction_threads must be 1..=64");
        }
        if self
            .tuning
            .filter_memory_share
            .is_some_and(|s| !(s > 0.0 && s <= 1.0))
        {
            return bad("filter_memory_share must be above 0 and at most 1");
        }
        if !(self.tuning.index_memory_share > 0.0 && self.tuning.index_memory_share <= 1.0) {
            return bad("index_memory_share must be above 0 and at most 1");
        }
        if self.tuning.compaction_nice > 19 {
            return bad("compaction_nice must be 0..=19");
        }
        if self.tuning.delayed_write_rate < MIN_DELAYED_WRITE_RATE {
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
#[non_exhaustive]
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

    /// Sets whether the write is synced ([`WriteOptions::sync`]).
    pub fn sync(mut self, sync: bool) -> WriteOptions {
        self.sync = sync;
        self
    }
}
