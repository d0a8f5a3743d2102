//! The knobs the store's defaults were measured for.

use std::time::Duration;

/// Knobs the defaults of [`Options`](crate::Options) were measured for, which benchmarks and
/// tests turn, and an application rarely needs to: the filters' and index partitions' memory,
/// the shape of the tree, level 0's triggers, the write rate, the threads' priority. The
/// builder methods of `Options` of the same names set them; setting a field here means the
/// same thing.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Tuning {
    /// Write the tables of the bottom of the tree (a level with no data below it) without a
    /// filter, as RocksDB's `optimize_filters_for_hits`. The bottom holds most keys, so this saves
    /// most of the filter memory, but lookups of absent keys then read a block at the bottom. It
    /// suits workloads whose lookups mostly find their key: those read a block there anyway.
    /// Default false, for workloads that look up absent keys too.
    pub no_filters_at_bottom: bool,
    /// Bytes all the store's filters may take in memory, together. Default `None`: the limit is
    /// `filter_memory_share` of `Options::memory_limit`, so that it follows the machine or
    /// container the store runs in.
    ///
    /// With a limit, the policy's filters are spread over the tree within it: tables are written
    /// with no more bits per key than the limit leaves for every key stored, by Monkey's rule like
    /// a budget (and at most what the policy asks for). When the filters held still exceed it (the
    /// store grew since its tables were written, or was opened with a smaller limit), the filters
    /// whose loss costs lookups least are folded to a half, a quarter or an eighth of their bits
    /// in memory, or at last dropped, until they fit (the repository's design notes, "Filter memory"). The
    /// files keep their whole filters. `Stats::filter_memory_bytes` is never above the limit once
    /// a flush, compaction or open returns, unless prefix filters alone exceed it (see
    /// `prefix_extractor`).
    pub filter_memory_limit: Option<u64>,
    /// Without a `filter_memory_limit`: the share of `Options::memory_limit` the store's filters
    /// may take, made a limit when the store opens (`Stats` shows it). Default 0.25: a store whose filters fit is not touched, and a store
    /// whose filters would outgrow its memory still completes its load, where uncapped filters
    /// choke it (the repository's benchmark notes, "100M keys in 256 MiB: the filter cap"; the repository's design notes,
    /// "Filter memory").
    ///
    /// `None` with no limit leaves filters uncapped. A share must be above 0 and at most 1.
    pub filter_memory_share: Option<f64>,
    /// Under a filter memory limit: spend it where lookups go, as counted, rather than where keys
    /// are. Default `true`: under a lookup skew (a few key ranges taking most lookups), the busy
    /// tables keep their whole filters and the quiet ones pay (the repository's benchmark notes, "Zipf: two
    /// spendings of one filter limit on the same tables").
    ///
    /// Tables written while the limit binds get filters of up to four times the bits per key their
    /// level's share of the limit pays for (hashes as for that share, so a filter folded back to
    /// the share is what the share alone would have written). Which to keep whole and which to
    /// fold or drop then follows each table's count of the lookups that asked it for a key, and a
    /// background thread reads a filter back from its file when its table turns busy. A store
    /// opened later without a limit holds such filters whole, at up to four times the share.
    /// `false` spends the limit as if lookups were drawn like the stored keys (the repository's design notes,
    /// "Filter memory").
    pub filter_memory_follows_lookups: bool,
    /// Bytes of index partitions the store keeps in memory, in a cache of their own. Default
    /// `None`: `index_memory_share` of `Options::memory_limit`, made a size when the store opens
    /// (`Stats::index_cache` shows it, less what it lends the filters:
    /// `Options::memory_follows_reads`).
    ///
    /// A table whose index outgrows `index_partition_size` is written with a two-level index: a
    /// small top level that stays in memory, over index partitions that lookups read when they
    /// need them and this cache keeps (format version 4). So the memory of indexes is bounded
    /// however large the store grows, where whole indexes would take about 0.19 bytes per key
    /// (190 MB for a billion 16-byte keys).
    pub index_cache_size: Option<u64>,
    /// Without an `index_cache_size`: the share of `Options::memory_limit` that index partitions
    /// may take. Default 0.125: 128 MiB in
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
    /// table by table, and they slowed present gets (the repository's benchmark notes, "Partitioned filters").
    ///
    /// Given a size (16 KiB is about 4 KiB once folded to a limit's share, the size of an index
    /// partition), while a filter memory limit binds and follows lookups (the tables' filters are
    /// then written wider than their share), a table's filter of at least two partitions is
    /// written as partitions of about this size under a small top level (the repository's format notes,
    /// "Partitioned filter"). The limit is then spent partition by partition: a busy key range
    /// keeps its partitions whole, where a whole filter would cost its table's every key. Every
    /// partition stays in memory (folded or not), so no lookup reads a filter from the disk.
    pub filter_partition_size: usize,
    /// Writes each table's filter (a whole one; partitions stay standard) in the cache-local
    /// layout: all of a key's probes in one 64-byte block, one cache miss a probe where the
    /// standard layout takes up to one per hash. Default `false`: in the store it gained absent
    /// gets nothing clear, and its filters let more keys through to a block (the repository's benchmark notes,
    /// "Filter layouts in the store: 100M keys in 1 GiB").
    ///
    /// It keeps the bits per key the filter policy gives, with the hashes that give the lowest
    /// rate at them, which the blocked layout's own rule predicts (the repository's filter notes, "Cache-local
    /// layout"). Its rate at the same memory is a little higher (0.97% against 0.82% at 10 bits
    /// per key). Tables of both layouts mix in a store; compaction writes the store's.
    pub cache_local_filters: bool,
    /// Tables written to this level or below get a Ribbon filter (the repository's filter notes, "Ribbon
    /// filters"), in the memory the filter policy gives a Bloom filter at the lower rate it
    /// buys there: 0.19% where a Bloom filter's 10 bits per key give 1%. Above it, and always
    /// at level 0, where flushes write and tables live shortest, filters stay Bloom filters,
    /// whose build takes less than half a Ribbon filter's time. So do tables written while the
    /// filter memory limit binds and is spent where lookups go: those are written wide to be
    /// folded, and a Ribbon filter does not fold (it is held whole or not at all). Default 1: every level
    /// a compaction writes. `u32::MAX`: never. Tables of every kind mix in a store.
    pub ribbon_filters_from_level: u32,
    /// Frozen memtables waiting for flush before writers stall. At least 1. Default 2: a burst of
    /// writes goes on through a slow flush, and memory stays planned at three memtables (the
    /// active one and two frozen).
    pub max_immutable_memtables: usize,
    /// Target size of the level that level 0 is compacted into. With `dynamic_level_sizes`, the
    /// smallest target any level gets; otherwise level 1's, each deeper level being
    /// `level_size_ratio` times larger. At least 1 KiB. Default 128 MiB: four 32 MiB memtables,
    /// level 0 at its trigger, so that a compaction into it merges inputs of like sizes
    /// (the repository's benchmark notes, "Sustained writes: how the memtable and level sizes were chosen").
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
    /// loaded, in fewer levels (the repository's benchmark notes, "Sustained writes: how the memtable and
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
    /// came back (the repository's benchmark notes, "1 GiB on the same tables, and level 0 compacted once
    /// writes rest"; the repository's design notes, "Compaction"). `None` waits for the trigger alone.
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
    /// compaction is behind (the repository's benchmark notes, "Level 0's slowdown trigger").
    pub l0_slowdown_trigger: usize,
    /// Level-0 table count at which writes wait for compaction. At least `l0_slowdown_trigger`.
    /// Default 36, as RocksDB's: far enough above the slowdown trigger that a delayed load rarely
    /// gets there.
    pub l0_stop_trigger: usize,
    /// Bytes per second writes may go once level 0 reaches `l0_slowdown_trigger`. The rate
    /// falls by a fifth each time a write finds level 0 grown since the last, and rises by a
    /// quarter (back up to this) each time it finds it shrunk, so a
    /// writer that outruns compaction settles near the rate compaction sustains. At least
    /// 16 KiB/s, the slowest a delayed writer is ever made to go, so that a write always
    /// completes. Default 16 MiB/s, as RocksDB's `delayed_write_rate`: only a start, since the
    /// rate follows compaction from there.
    pub delayed_write_rate: u64,
    /// How much lower than the store's other threads, and the caller's, compaction threads
    /// run: a `nice` increment, 0 to 19 (Linux; elsewhere ignored); 0 runs them at the caller's
    /// priority. Default 10: compaction is throughput work with slack (level 0 may grow to
    /// `l0_slowdown_trigger` before writers notice), while a lookup waits on every microsecond.
    /// With as many compaction threads as cores, a lookup that arrives while they run would
    /// otherwise wait for a time slice after each of its reads (the repository's benchmark notes,
    /// "Compaction below lookups").
    pub compaction_nice: u8,
    /// How long the writer leading a group that will be synced waits, at most, for the
    /// writers of the previous group to queue again, so that writers who write back to back
    /// share one fsync rather than take turns in two groups. A lone
    /// writer never waits. For its first 100 µs the waiting writer yields the processor
    /// rather than sleeping, which keeps a processor busy when nothing else runs. Zero turns it
    /// off; at most 1 s. Default 100 µs: short next to an fsync, and all of it spent yielding,
    /// which gathers writers sooner than sleeping (the repository's benchmark notes, "Synced writes:
    /// gathering without sleeping").
    pub group_commit_wait: Duration,
    /// Bytes the manifest's log of edits may reach before it is rewritten as one snapshot of
    /// the tree (and at least twice the last snapshot's size, so a big tree is not rewritten
    /// at every edit). Default 4 MiB: an open reads little, and rewrites stay rare.
    pub max_manifest_size: u64,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            filter_memory_limit: None,
            filter_memory_share: Some(0.25),
            index_cache_size: None,
            index_memory_share: 0.125,
            no_filters_at_bottom: false,
            filter_memory_follows_lookups: true,
            index_partition_size: 4096,
            filter_partition_size: 0,
            cache_local_filters: false,
            ribbon_filters_from_level: 1,
            max_immutable_memtables: 2,
            level1_size: 128 << 20,
            level_size_ratio: 10,
            num_levels: 7,
            dynamic_level_sizes: true,
            l0_compaction_trigger: 4,
            compact_level0_at_rest: Some(Duration::from_secs(10)),
            l0_slowdown_trigger: 20,
            l0_stop_trigger: 36,
            delayed_write_rate: 16 << 20,
            compaction_nice: 10,
            group_commit_wait: Duration::from_micros(100),
            max_manifest_size: 4 << 20,
        }
    }
}
