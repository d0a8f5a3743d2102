//! What a store reports about itself: the filter and I/O counters, the caches, and the shape
//! of the tree.

use crate::cache::{BlockCacheStats, TableCacheStats};
use crate::sstable::{FilterKind, FilterResidency};

/// One table as `Stats` reports it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TableStats {
    /// The level the table is in.
    pub level: usize,
    /// The table's file number.
    pub number: u64,
    /// The table file's size in bytes.
    pub file_size: u64,
    /// Entries the table holds.
    pub entries: u64,
    /// The table's first key.
    pub smallest_key: Vec<u8>,
    /// The table's last key.
    pub largest_key: Vec<u8>,
    /// Bits per key of the table's filter as written; `None` for a table written with
    /// `FilterPolicy::Disabled`.
    pub bits_per_key: Option<u32>,
    /// Hashes of the table's Bloom filter; `None` without a filter.
    pub hashes: Option<u32>,
    /// The rate of the filter as written.
    pub predicted_false_positive_rate: Option<f64>,
    /// The rate of the filter lookups probe: as written, or of the folded filter at its
    /// smaller size (1 when dropped); `None` for a table written without a filter.
    pub resident_false_positive_rate: Option<f64>,
    /// Bytes of filter held in memory (less than written when folded, 0 when dropped; a
    /// partitioned filter also keeps its top level, `Table::filter_top_bytes`).
    pub filter_bytes: u64,
    /// Whether lookups probe the whole filter, a folded one, or none, kept so to stay
    /// within `Options::filter_memory_limit`. For a partitioned filter: `Whole` or `Dropped`
    /// when every partition is, else `Folded` by about what all of them are together.
    pub filter_residency: FilterResidency,
    /// For a partitioned filter, how each partition is kept, in key order; empty for a whole
    /// filter.
    pub filter_partitions: Vec<FilterResidency>,
    /// The kind of the table's filter (`Options::cache_local_filters`,
    /// `Options::ribbon_filters_from_level`); `None` without one.
    pub filter_kind: Option<FilterKind>,
    /// Bytes of the table's prefix filter (0 without one), held whole.
    pub prefix_filter_bytes: u64,
    /// The prefix filter's predicted false-positive rate, when the store trusts it.
    pub prefix_filter_predicted_rate: Option<f64>,
    /// Point lookups that asked the table's filter for a key the table does not hold (one
    /// that found its key here is not counted: the filter could only let it through), over
    /// `lookup_span` of the store's lookups: the table's share of the lookups, as the filter
    /// memory plan counts it (since the table was opened, with what it took over from a
    /// compaction's inputs or from the counts saved at the last close, all halved at each
    /// plan). Both 0 where the store does not count lookups
    /// (`Options::filter_memory_follows_lookups`, under a limit).
    pub lookups_counted: u64,
    /// The store's lookups over which `lookups_counted` were counted.
    pub lookup_span: u64,
}

/// One level as `Stats` reports it: its shape now, and the I/O of flushes and compactions at
/// it over the store's life (see [`Stats`] on what the manifest keeps).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[non_exhaustive]
pub struct LevelStats {
    /// Live tables in the level.
    pub tables: usize,
    /// Bytes of the level's tables.
    pub bytes: u64,
    /// Entries in the level's tables.
    pub entries: u64,
    /// Bytes of tables written into this level: by flushes at level 0, by compactions below.
    pub bytes_written: u64,
    /// Bytes of this level's tables that compactions read (and replaced).
    pub bytes_read: u64,
    /// Compactions whose output went into this level.
    pub compactions: u64,
    /// Tables moved into this level by a manifest edit alone (trivial moves), and their bytes:
    /// neither read nor written.
    pub tables_moved: u64,
    /// The bytes of the tables moved.
    pub bytes_moved: u64,
    /// Bits per key of the filters of tables written to this level now: the level's share
    /// under a budget (`FilterPolicy::BitsPerKeyBudget` or `WastedReadsTarget`) for the tree
    /// as it stands, the policy's rate otherwise; `None` for no filter, and for an empty
    /// level. A budget spent to the bit may give a share of a level's tables the next whole
    /// row up, so this is an average (9.5: half the tables at 9 bits, half at 10).
    pub target_bits_per_key: Option<f64>,
    /// Live tables of the level whose filter is neither of the target's rows: written when
    /// the tree had another shape, or under another policy. Compactions bring them to it as
    /// they rewrite them.
    pub tables_off_target: usize,
    /// Point lookups that asked the filter of a table of this level, since open; of them,
    /// those the filter let through, and those whose table held the key.
    pub filter_probes: u64,
    /// Of `filter_probes`, those the filter let through.
    pub filter_positives: u64,
    /// Of `filter_positives`, those whose table held the key.
    pub filter_true_positives: u64,
    /// Tables of the level whose filter is folded or dropped in memory, to keep the store's
    /// filters within `Options::filter_memory_limit`.
    pub tables_filter_shrunk: usize,
    /// The level's tables' predicted false-positive rate, of the filters lookups probe
    /// (folded ones at their smaller size, dropped ones at 1), weighted by the lookups that
    /// reach each table; `None` when none of them was written with a filter.
    pub predicted_false_positive_rate: Option<f64>,
    /// The kind of most of the filter memory the level's tables hold (`None` when none has a
    /// filter): Bloom filters at level 0, Ribbon filters from
    /// `Tuning::ribbon_filters_from_level` down, but for tables moved down unrewritten.
    pub filter_kind: Option<FilterKind>,
    /// Bits of filter held in memory per entry of the level's tables that have a filter:
    /// what the level's filters cost as they are held (folded or dropped ones at their
    /// smaller size).
    pub filter_bits_per_key: Option<f64>,
    /// Scans over one prefix (`Options::prefix_extractor`), since open: the tables of this
    /// level whose prefix filter they asked; of them, those the filter ruled out (the scan
    /// passed them by), and those it let through that held no key of the scan's prefix (see
    /// [`crate::metrics::PrefixFilterCounters`]).
    pub prefix_filter_probes: u64,
    /// Of `prefix_filter_probes`, those that ruled the prefix out.
    pub prefix_filter_negatives: u64,
    /// Of `prefix_filter_probes`, those that let a table through whose walk found no key of
    /// the scan's prefix.
    pub prefix_filter_false_positives: u64,
    /// Tables of the level whose prefix filter the store ignores: written with an extractor
    /// of another name than the store's, or read by a store without one.
    pub tables_prefix_filter_ignored: usize,
}

impl LevelStats {
    /// Probes the filters answered "absent".
    pub fn filter_negatives(&self) -> u64 {
        // Read while lookups run, the counts may be a probe apart.
        self.filter_probes.saturating_sub(self.filter_positives)
    }

    /// False positives per probe of a key the table did not hold; `None` before any.
    pub fn measured_false_positive_rate(&self) -> Option<f64> {
        let absent = self
            .filter_probes
            .saturating_sub(self.filter_true_positives);
        let false_positives = self
            .filter_positives
            .saturating_sub(self.filter_true_positives);
        (absent > 0).then(|| false_positives as f64 / absent as f64)
    }
}

/// Counters, and the shape of the tree now.
///
/// The write counters (flushes, compactions, moves, stalls, and the bytes of users, the WAL,
/// flushes and compactions, per level too) cover the store's whole life: each manifest edit
/// records them, and so does closing the store, so a reopen, and a read-only open, go on from
/// there (after a crash, from the last edit: the writes and the job since then are not in
/// it). The rest, write groups among them, count since this open.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Table filters asked during point lookups (one per table whose key range covers the key).
    pub filter_probes: u64,
    /// Filters that answered "absent": each is a data-block read avoided.
    pub filter_negatives: u64,
    /// Filters that answered "maybe".
    pub filter_positives: u64,
    /// "Maybe" answers where the table really held the key.
    pub filter_true_positives: u64,
    /// Data blocks point lookups searched, because no filter ruled their table out, whether
    /// the block cache held them or they were read from the file. (`block_cache` counts the
    /// cache's own hits and misses, scans included, for every store sharing it.)
    pub data_block_reads: u64,
    /// Stored bytes (trailers included) of those blocks.
    pub bytes_read: u64,
    /// Level by level, level 0 first.
    pub levels: Vec<LevelStats>,
    /// Every live table, level 0 first.
    pub tables: Vec<TableStats>,
    /// Bytes in the active memtable.
    pub memtable_bytes: u64,
    /// Frozen memtables waiting to be flushed.
    pub immutable_memtables: usize,
    /// Sequence number of the last write.
    pub last_sequence: u64,
    /// Memtables flushed to tables (recovery writing replayed logs counts as one).
    pub flushes: u64,
    /// Compactions that merged tables (trivial moves are counted apart).
    pub compactions: u64,
    /// Trivial moves: compactions that moved tables a level down without rewriting them.
    pub trivial_moves: u64,
    /// Merges (out of level 0, or full ones) split into key ranges merged side by side, since
    /// the store was opened.
    pub split_compactions: u64,
    /// Tables dropped whole, without a rewrite, because every entry in them expired
    /// (`Options::ttl`), since the store was opened.
    pub tables_expired: u64,
    /// Compactions of level 0 below its trigger, started because writes rested and lookups
    /// asked level 0 (`Options::compact_level0_at_rest`), since the store was opened.
    pub level0_compactions_at_rest: u64,
    /// Write groups delayed or stalled because flushes or compactions fell behind (one per
    /// group: its leader waits, and the members with it).
    pub write_stalls: u64,
    /// Time writes spent delayed or stalled, in microseconds.
    pub stall_micros: u64,
    /// Write groups stopped (not only delayed) since the store was opened, by what they
    /// waited for: a flush, because `max_immutable_memtables` memtables waited for theirs,
    /// or compactions, because level 0 held `l0_stop_trigger` tables. A group that waited
    /// for both is counted in both.
    pub write_stops_for_flush: u64,
    /// Write groups stopped for compactions of level 0 (see `write_stops_for_flush`).
    pub write_stops_for_level0: u64,
    /// The longest one write group waited since the store was opened, delay and stop
    /// together, in microseconds: while it waited, no write completed.
    pub longest_stall_micros: u64,
    /// The bytes per second writes are held to while level 0 is past its slowdown trigger
    /// (`Options::delayed_write_rate`), as the last write found it; `None` when it found
    /// writes need no slowing.
    pub delayed_write_rate: Option<u64>,
    /// Snapshots alive now, and the sequence number of the oldest: flushes and compactions
    /// keep the versions it sees.
    pub live_snapshots: usize,
    /// The sequence number of the oldest live snapshot.
    pub oldest_snapshot: Option<u64>,
    /// Bytes of keys and values the user wrote (the measure of write amplification).
    pub user_bytes_written: u64,
    /// Bytes appended to WAL files: records with their headers.
    pub wal_bytes_written: u64,
    /// Write groups: WAL appends, each of one or more concurrent writers' batches.
    pub write_groups: u64,
    /// Batches written in those groups.
    pub grouped_batches: u64,
    /// Flushes, compactions and WAL writes that failed since open.
    pub background_errors: u64,
    /// Background attempts made after a failure (each retry of a failed step counts).
    pub background_retries: u64,
    /// Why the last background step failed, while it has not yet succeeded again.
    pub background_error: Option<String>,
    /// Why writes are refused, while they are (the WAL could not be written).
    pub writes_refused: Option<String>,
    /// Times the manifest was rewritten as a snapshot.
    pub manifest_rotations: u64,
    /// The filter policy the store writes its tables with: the options', or the one the store
    /// recorded when the options left it at its default (see `Options::filter_policy`).
    pub filter_policy: crate::FilterPolicy,
    /// Bytes of all filters held in memory, prefix filters included.
    pub filter_memory_bytes: u64,
    /// Bytes of those that are prefix filters (held whole, for the tables' lives).
    pub prefix_filter_memory_bytes: u64,
    /// Live tables whose prefix filter the store ignores, over every level and keyspace.
    pub tables_prefix_filter_ignored: usize,
    /// The name of the store's prefix extractor (`Options::prefix_extractor`), when it has one.
    pub prefix_extractor: Option<String>,
    /// Scans over one prefix since open: the memtables whose prefix filter they asked (with
    /// an extractor, each memtable keeps one), and of them those it ruled the prefix out of,
    /// which the scan passed by without a seek.
    pub memtable_prefix_filter_probes: u64,
    /// Of `memtable_prefix_filter_probes`, those that ruled the prefix out.
    pub memtable_prefix_filter_negatives: u64,
    /// Filter units (whole filters, or partitions) read from table files into memory since
    /// the store opened, under a filter memory limit: at the open, after flushes and
    /// compactions, and by refits growing filters back (no lookup reads one); and the bytes
    /// read. What the filters cost the disk, beside the data blocks.
    pub filter_reads: u64,
    /// The bytes of the filter units read (see `filter_reads`).
    pub filter_bytes_read: u64,
    /// Refits installed since the store opened: new plans for the filter memory made from the
    /// lookups counted (`Options::filter_memory_follows_lookups`).
    pub filter_refits: u64,
    /// The store's memory by role (memtables, block cache, index partitions, filters), as the
    /// governor holds it: what the options gave each, the floor it never gives below, its
    /// target now after the moves the lookups called for (`Options::memory_follows_reads`),
    /// and what it holds (the repository's design notes, "Memory").
    pub memory: Vec<crate::memory::RoleMemory>,
    /// The limit `filter_memory_bytes` stays within (unless prefix filters alone exceed it):
    /// `Options::filter_memory_limit`, or the
    /// one the store made from `Options::filter_memory_share` when it opened, as the governor
    /// moved memory to and from it (the filters' `target` in `memory`); `None` when the
    /// filters are uncapped.
    pub filter_memory_limit: Option<u64>,
    /// Bytes of table indexes held in memory for the tables' lives: whole index blocks, and
    /// the top levels of two-level indexes (whose partitions are in `index_cache`).
    pub index_memory_bytes: u64,
    /// The cache of index partitions (`Options::index_cache_size`; zeros when it is off): its
    /// bytes are the partitions held, its misses the partitions read from files, scans and
    /// lookups together.
    pub index_cache: BlockCacheStats,
    /// Index partitions point lookups read from table files because the index cache did not
    /// hold them: besides `data_block_reads`, what a lookup's index cost in reads.
    pub index_block_reads: u64,
    /// Data blocks scans read (iterators and cursors), from the block cache or the files.
    pub scan_block_reads: u64,
    /// The block cache (zeros when it is off; all its users' figures when it is shared).
    pub block_cache: BlockCacheStats,
    /// The table cache: open table files.
    pub table_cache: TableCacheStats,
    /// Each keyspace, the default first. `levels`, `tables`, `memtable_bytes` and
    /// `immutable_memtables` above are the default keyspace's; the counters and memory
    /// figures above are the whole store's.
    pub keyspaces: Vec<KeyspaceStats>,
}

/// One keyspace as [`Stats`] reports it.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct KeyspaceStats {
    /// The keyspace's name.
    pub name: String,
    /// Its levels, level 0 first (each level's write and probe counters are the store's).
    pub levels: Vec<LevelStats>,
    /// Its live tables, level by level.
    pub tables: Vec<TableStats>,
    /// Entries in its tables.
    pub entries: u64,
    /// Bytes of its tables.
    pub bytes: u64,
    /// Bytes in its active memtable.
    pub memtable_bytes: u64,
    /// Its frozen memtables waiting for a flush.
    pub immutable_memtables: usize,
    /// Bytes of its tables' filters held in memory.
    pub filter_memory_bytes: u64,
    /// Live range deletions (`delete_range`): in its memtables, and recorded in the manifest
    /// until compactions have dropped every older entry they cover.
    pub range_deletions: usize,
    /// The filter policy its tables are written with.
    pub filter_policy: crate::FilterPolicy,
    /// The compression of its tables' blocks.
    pub compression: crate::Compression,
    /// The compression of its tables at the bottom of its tree.
    pub bottom_compression: crate::Compression,
    /// The size its tables' data blocks are cut at.
    pub block_size: usize,
    /// The size at which its memtable is frozen and flushed.
    pub memtable_size: usize,
}

impl Stats {
    /// Filter false positives: "maybe" answers for keys the table did not hold.
    pub fn filter_false_positives(&self) -> u64 {
        self.filter_positives
            .saturating_sub(self.filter_true_positives)
    }

    /// Measured false-positive rate: false positives over all probes of absent keys
    /// (`None` before any such probe).
    pub fn measured_false_positive_rate(&self) -> Option<f64> {
        let false_positives = self.filter_false_positives();
        let absent_probes = false_positives + self.filter_negatives;
        (absent_probes > 0).then(|| false_positives as f64 / absent_probes as f64)
    }

    /// Total bytes in table files.
    pub fn table_bytes(&self) -> u64 {
        self.levels.iter().map(|l| l.bytes).sum()
    }

    /// Bytes of tables flushes wrote (all at level 0).
    pub fn flush_bytes_written(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.bytes_written)
    }

    /// Bytes of tables compactions wrote.
    pub fn compaction_bytes_written(&self) -> u64 {
        self.levels.iter().skip(1).map(|l| l.bytes_written).sum()
    }

    /// Bytes of tables compactions read.
    pub fn compaction_bytes_read(&self) -> u64 {
        self.levels.iter().map(|l| l.bytes_read).sum()
    }

    /// Bytes the store wrote to disk for its data: the WAL, flushes and compactions (the
    /// manifest's few bytes aside).
    pub fn disk_bytes_written(&self) -> u64 {
        self.wal_bytes_written + self.flush_bytes_written() + self.compaction_bytes_written()
    }

    /// Write amplification: bytes written to disk per byte of keys and values the user wrote
    /// (`None` before any write).
    pub fn write_amplification(&self) -> Option<f64> {
        (self.user_bytes_written > 0)
            .then(|| self.disk_bytes_written() as f64 / self.user_bytes_written as f64)
    }

    /// Batches per write group: how many writers one WAL append served on average.
    pub fn batches_per_write_group(&self) -> Option<f64> {
        (self.write_groups > 0).then(|| self.grouped_batches as f64 / self.write_groups as f64)
    }
}
