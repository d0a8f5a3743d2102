//! The builder methods of [`Options`]: each sets one field (or a pair that must change
//! together) and returns the options, so that `Options::default().memtable_size(..)...` reads
//! as the store it opens. Setting a field and calling its builder mean the same thing.

use std::sync::Arc;
use std::time::Duration;

use super::{Options, WalRecoveryMode};
use crate::fs::{FileSystem, MmapFileSystem, OsFileSystem, SharedFs};
use crate::prefix::PrefixExtractor;
use crate::sstable::{BlockCache, Compression, FilterPolicy};

impl Options {
    /// Plans the store's memory for `bytes` (default: the memory the process may use; see the
    /// field).
    pub fn memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = Some(bytes);
        self
    }

    /// Caps the memory of all the store's filters together (default: a share of
    /// `memory_limit`; see `Tuning::filter_memory_limit`).
    pub fn filter_memory_limit(mut self, bytes: u64) -> Self {
        self.tuning.filter_memory_limit = Some(bytes);
        self
    }

    /// Caps the store's filters at this share of the memory the process may use, when no
    /// `filter_memory_limit` is given (default 0.25; see the field).
    pub fn filter_memory_share(mut self, share: f64) -> Self {
        self.tuning.filter_memory_share = Some(share);
        self
    }

    /// Leaves the store's filters uncapped: every table keeps the filter the policy gives it.
    pub fn no_filter_memory_limit(mut self) -> Self {
        self.tuning.filter_memory_limit = None;
        self.tuning.filter_memory_share = None;
        self
    }

    /// Moves memory between the block cache, the index cache and the filters as the lookups show
    /// (default `true`).
    pub fn memory_follows_reads(mut self, follows: bool) -> Self {
        self.memory_follows_reads = follows;
        self
    }

    /// Spends a filter memory limit where lookups go (`true`, the default) or where keys are
    /// (see the field).
    pub fn filter_memory_follows_lookups(mut self, follows: bool) -> Self {
        self.tuning.filter_memory_follows_lookups = follows;
        self
    }

    /// Keeps at most `bytes` of index partitions in memory (default: a share; see the field).
    pub fn index_cache_size(mut self, bytes: u64) -> Self {
        self.tuning.index_cache_size = Some(bytes);
        self
    }

    /// Keeps index partitions within this share of the memory the process may use, when no
    /// `index_cache_size` is given (default 0.125; see the field).
    pub fn index_memory_share(mut self, share: f64) -> Self {
        self.tuning.index_memory_share = share;
        self
    }

    /// Sets the bytes of index per index partition (default 4 KiB; 0: one index block).
    pub fn index_partition_size(mut self, bytes: usize) -> Self {
        self.tuning.index_partition_size = bytes;
        self
    }

    /// Sets the bytes of filter per filter partition, for tables written while a filter
    /// memory limit binds; 0 (the default) writes every filter whole.
    pub fn filter_partition_size(mut self, bytes: usize) -> Self {
        self.tuning.filter_partition_size = bytes;
        self
    }

    /// Sets the prefix extractor for prefix filters (default none; see the field).
    pub fn prefix_extractor(mut self, extractor: PrefixExtractor) -> Self {
        self.prefix_extractor = Some(extractor);
        self
    }

    /// Sets whether filters are written in the cache-local layout (default `false`).
    pub fn cache_local_filters(mut self, on: bool) -> Self {
        self.tuning.cache_local_filters = on;
        self
    }

    /// Sets the first level whose tables get Ribbon filters (default 1; `u32::MAX`: never;
    /// level 0 never does).
    pub fn ribbon_filters_from_level(mut self, level: u32) -> Self {
        self.tuning.ribbon_filters_from_level = level;
        self
    }

    /// Sets whether prefix-filtered tables keep a filter over whole keys too (default `true`).
    pub fn whole_key_filtering(mut self, on: bool) -> Self {
        self.whole_key_filtering = on;
        self
    }

    /// Sets the filter policy for tables written from now on, over the one the store
    /// recorded (see [`Options::filter_policy`](struct.Options.html#structfield.filter_policy)).
    pub fn filter_policy(mut self, policy: FilterPolicy) -> Self {
        self.filter_policy = Some(policy);
        self
    }

    /// Sets whether tables at the bottom of the tree are written without a filter (default false).
    pub fn no_filters_at_bottom(mut self, skip: bool) -> Self {
        self.tuning.no_filters_at_bottom = skip;
        self
    }

    /// Sets the memtable size in bytes (default 32 MiB).
    pub fn memtable_size(mut self, bytes: usize) -> Self {
        self.memtable_size = bytes;
        self
    }

    /// Sets the target table file size in bytes (default 64 MiB).
    pub fn table_size(mut self, bytes: u64) -> Self {
        self.table_size = bytes;
        self
    }

    /// Sets the target size of level 1 in bytes (default 128 MiB).
    pub fn level1_size(mut self, bytes: u64) -> Self {
        self.tuning.level1_size = bytes;
        self
    }

    /// Sets how many frozen memtables may wait for their flush before writers stall (default 2).
    pub fn max_immutable_memtables(mut self, count: usize) -> Self {
        self.tuning.max_immutable_memtables = count;
        self
    }

    /// Sets the target size of a data block's contents in bytes (at most 64 MiB; default 4 KiB).
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = bytes;
        self
    }

    /// Sets the number of levels (2 to 32; default 7).
    pub fn num_levels(mut self, levels: usize) -> Self {
        self.tuning.num_levels = levels;
        self
    }

    /// Sets the size ratio between adjacent levels (default 10).
    pub fn level_size_ratio(mut self, ratio: u64) -> Self {
        self.tuning.level_size_ratio = ratio;
        self
    }

    /// Sets whether level targets are derived from the largest level up (default true).
    pub fn dynamic_level_sizes(mut self, dynamic: bool) -> Self {
        self.tuning.dynamic_level_sizes = dynamic;
        self
    }

    /// Sets the level-0 table count that triggers compaction (default 4).
    pub fn l0_compaction_trigger(mut self, tables: usize) -> Self {
        self.tuning.l0_compaction_trigger = tables;
        self
    }

    /// Compacts level 0 below its trigger once writes rested this long and lookups ask its
    /// tables (`None`: never; default 10 seconds; see the field).
    pub fn compact_level0_at_rest(mut self, rest: Option<Duration>) -> Self {
        self.tuning.compact_level0_at_rest = rest;
        self
    }

    /// Sets the level-0 table counts at which writes slow down and stop (defaults 20 and 36).
    pub fn l0_write_triggers(mut self, slowdown: usize, stop: usize) -> Self {
        self.tuning.l0_slowdown_trigger = slowdown;
        self.tuning.l0_stop_trigger = stop;
        self
    }

    /// Sets the bytes per second writes may go while level 0 is behind (default 16 MiB/s).
    pub fn delayed_write_rate(mut self, bytes_per_second: u64) -> Self {
        self.tuning.delayed_write_rate = bytes_per_second;
        self
    }

    /// Sets the WAL recovery mode (default [`WalRecoveryMode::TolerateTornTail`]).
    pub fn wal_recovery_mode(mut self, mode: WalRecoveryMode) -> Self {
        self.wal_recovery_mode = mode;
        self
    }

    /// Sets how long a synced group's leader waits for the last group's writers (default 100 µs).
    pub fn group_commit_wait(mut self, wait: Duration) -> Self {
        self.tuning.group_commit_wait = wait;
        self
    }

    /// Sets whether a missing store is created (default true).
    pub fn create_if_missing(mut self, create: bool) -> Self {
        self.create_if_missing = create;
        self
    }

    /// Sets the block cache's size in bytes (0 turns it off; default 32 MiB).
    pub fn block_cache_size(mut self, bytes: u64) -> Self {
        self.block_cache_size = bytes;
        self
    }

    /// Uses a block cache shared with other stores.
    pub fn block_cache(mut self, cache: Arc<BlockCache>) -> Self {
        self.block_cache = Some(cache);
        self
    }

    /// Sets how many table files may be open at once (default 512).
    pub fn max_open_files(mut self, files: usize) -> Self {
        self.max_open_files = files;
        self
    }

    /// Sets the compression of table blocks written from now on (tables already written keep
    /// theirs; every table records its own in each block). Default LZ4.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Sets the compression of tables written at the bottom of the tree (default: as
    /// `compression`); see [`Options::bottom_compression`].
    pub fn bottom_compression(mut self, compression: Compression) -> Self {
        self.bottom_compression = Some(compression);
        self
    }

    /// Sets how long an entry of the default keyspace lives (see [`Options::ttl`]); counted
    /// in whole seconds.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets the rule compactions apply to the entries they rewrite (see
    /// [`Options::compaction_filter`]).
    pub fn compaction_filter(mut self, filter: Arc<dyn crate::CompactionFilter>) -> Self {
        self.compaction_filter = Some(filter);
        self
    }

    /// Sets the number of threads that run compactions (default 2).
    pub fn compaction_threads(mut self, threads: usize) -> Self {
        self.compaction_threads = threads;
        self
    }

    /// Sets how much lower compaction threads run than the others (a `nice` increment, 0-19;
    /// default 10).
    pub fn compaction_nice(mut self, nice: u8) -> Self {
        self.tuning.compaction_nice = nice;
        self
    }

    /// Sets whether the store keeps glibc's allocator from holding freed memory
    /// ([`Options::tune_allocator`]; default false).
    pub fn tune_allocator(mut self, tune: bool) -> Self {
        self.tune_allocator = tune;
        self
    }

    /// Sets the size at which the manifest is rewritten as one snapshot (default 4 MiB).
    pub fn max_manifest_size(mut self, bytes: u64) -> Self {
        self.tuning.max_manifest_size = bytes;
        self
    }

    /// Whether table files are read through memory maps ([`MmapFileSystem`]) or with `pread`
    /// ([`OsFileSystem`], the default). Replaces the file system with the operating system's.
    ///
    /// Maps make a block read that hits the page cache a copy with no system call, but they
    /// hand the choice of what stays in memory to the kernel: once the data outgrows memory,
    /// each fault reads around the block wanted and the kernel evicts at will, and lookups run
    /// several times slower than with `pread` and the block cache. A table file truncated or
    /// unreadable under a running store raises SIGBUS, which kills the process, where `pread`
    /// returns an error. Every open table holds a map, counted against the kernel's limit of
    /// maps per process (`vm.max_map_count`, 65,530 by default). Use maps only for data that
    /// fits in memory, on files nothing else touches.
    pub fn mmap_reads(self, on: bool) -> Self {
        let fs: SharedFs = if on {
            Arc::new(MmapFileSystem)
        } else {
            Arc::new(OsFileSystem)
        };
        self.file_system(fs)
    }

    /// Uses another file system (tests inject faults this way).
    pub fn file_system(mut self, fs: Arc<dyn FileSystem>) -> Self {
        self.file_system = fs;
        self
    }
}
