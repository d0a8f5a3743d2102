//! Counters of what reads cost, shared by every table a store opens.
//!
//! Each count is counted in exactly one place, so the figures add up:
//! `filter_probes == filter_negatives + filter_positives`, and `filter_true_positives` counts
//! the positives whose table really held the key. Filter counts are kept per level of the
//! probed table only; the store's totals are their sums, so a lookup touches one set of
//! atomics for its filters, not two.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters, updated by concurrent readers.
#[derive(Debug, Default)]
pub struct ReadCounters {
    /// Data blocks searched by point lookups, whether the block cache held them or they were
    /// read from the file (scans and compaction do not count).
    pub data_block_reads: AtomicU64,
    /// Bytes of those data blocks, trailers included.
    pub bytes_read: AtomicU64,
    /// Index partitions (of two-level indexes) that point lookups read from the file because
    /// the index cache did not hold them.
    pub index_block_reads: AtomicU64,
    /// Data blocks that scans (iterators and cursors over the store, or over a table) read,
    /// from the block cache or the file; compaction and verification do not count.
    pub scan_block_reads: AtomicU64,
    /// Point lookups of a store that reached its tables (the memtables did not answer them):
    /// what a table's count of lookups it was asked is a share of.
    pub table_lookups: AtomicU64,
    /// Filter units (whole filters, or partitions) read from table files into memory under a
    /// filter memory limit: at an open, after a flush or compaction wrote the table, and when
    /// a refit grows a filter back. No lookup reads one.
    pub filter_reads: AtomicU64,
    /// Bytes of those reads.
    pub filter_bytes_read: AtomicU64,
    /// Refits installed: new plans for the filter memory, made from the lookups counted.
    pub filter_refits: AtomicU64,
    /// Filter counts of a store's lookups, per level of the tree the probed table was in.
    pub levels: [LevelFilterCounters; MAX_LEVELS],
    /// Filter counts of lookups in a table on its own ([`ReadCounters::add`]), outside any
    /// store's levels.
    pub unleveled: LevelFilterCounters,
    /// Prefix filter counts of a store's scans, per level of the tree the probed table was in.
    pub prefix_levels: [PrefixFilterCounters; MAX_LEVELS],
    /// Memtables whose prefix filter a scan over one prefix asked, and of them those that
    /// ruled the prefix out (the scan passed them by).
    pub memtable_prefix_probes: AtomicU64,
    pub memtable_prefix_negatives: AtomicU64,
}

/// One level's prefix filter counts: the tables of the level a scan over one prefix asked,
/// those whose prefix filter ruled the prefix out (the scan passed them by), and those it let
/// through whose walk then found no key of the scan's prefix. The last are the filter's false
/// positives when scans ask for the prefixes the extractor cuts; a scan over a longer prefix
/// (`user:42:` where the extractor cuts `user:`) also counts tables that rightly held the
/// extractor's prefix but none of the scan's.
#[derive(Debug, Default)]
pub struct PrefixFilterCounters {
    /// Tables whose prefix filter a scan asked.
    pub probes: AtomicU64,
    /// Of those, the ones it ruled out.
    pub negatives: AtomicU64,
    /// Of those let through, the ones whose walk found no key of the scan's prefix.
    pub false_positives: AtomicU64,
}

impl PrefixFilterCounters {
    /// (probes, negatives, false positives) now.
    pub fn get(&self) -> (u64, u64, u64) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (
            get(&self.probes),
            get(&self.negatives),
            get(&self.false_positives),
        )
    }
}

/// Levels a store may have (`Options::num_levels` is at most this).
pub const MAX_LEVELS: usize = 32;

/// One level's filter counts. Negatives are probes less positives, so they are not counted
/// apart: a lookup adds one atomic per level it probes, up to three where a filter said yes.
#[derive(Debug, Default)]
pub struct LevelFilterCounters {
    pub probes: AtomicU64,
    pub positives: AtomicU64,
    pub true_positives: AtomicU64,
}

impl LevelFilterCounters {
    /// (probes, positives, true positives) now.
    pub fn get(&self) -> (u64, u64, u64) {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (
            get(&self.probes),
            get(&self.positives),
            get(&self.true_positives),
        )
    }

    /// Adds a tally's filter counts.
    fn add(&self, tally: &ReadCountersSnapshot) {
        let pairs = [
            (&self.probes, tally.filter_probes),
            (&self.positives, tally.filter_positives),
            (&self.true_positives, tally.filter_true_positives),
        ];
        for (counter, by) in pairs {
            if by != 0 {
                counter.fetch_add(by, Ordering::Relaxed);
            }
        }
    }
}

/// A point-in-time copy of [`ReadCounters`]; also the tally one lookup keeps while it visits
/// tables, added to the shared counters once at its end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadCountersSnapshot {
    pub filter_probes: u64,
    pub filter_negatives: u64,
    pub filter_positives: u64,
    pub filter_true_positives: u64,
    pub data_block_reads: u64,
    pub bytes_read: u64,
    pub index_block_reads: u64,
}

impl ReadCounters {
    /// All counters at zero.
    pub fn new() -> ReadCounters {
        ReadCounters::default()
    }

    /// Reads every counter (each one atomically; the set is not one atomic snapshot), the
    /// filter counts summed over the levels.
    pub fn snapshot(&self) -> ReadCountersSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let (mut probes, mut positives, mut true_positives) = self.unleveled.get();
        for level in &self.levels {
            let (p, pos, tp) = level.get();
            (probes, positives, true_positives) =
                (probes + p, positives + pos, true_positives + tp);
        }
        ReadCountersSnapshot {
            filter_probes: probes,
            // Read while lookups run, the counts may be a probe apart.
            filter_negatives: probes.saturating_sub(positives),
            filter_positives: positives,
            filter_true_positives: true_positives,
            data_block_reads: get(&self.data_block_reads),
            bytes_read: get(&self.bytes_read),
            index_block_reads: get(&self.index_block_reads),
        }
    }

    /// Adds the tally of a lookup in a table on its own (no level). Shared atomics are touched
    /// once per lookup rather than once per step, and only for the counts that moved.
    pub fn add(&self, tally: &ReadCountersSnapshot) {
        self.add_reads(tally);
        self.unleveled.add(tally);
    }

    /// Adds a lookup's data-block reads; its filter counts go to the levels (`add_level`).
    pub fn add_reads(&self, tally: &ReadCountersSnapshot) {
        let pairs = [
            (&self.data_block_reads, tally.data_block_reads),
            (&self.bytes_read, tally.bytes_read),
            (&self.index_block_reads, tally.index_block_reads),
        ];
        for (counter, by) in pairs {
            if by != 0 {
                counter.fetch_add(by, Ordering::Relaxed);
            }
        }
    }

    /// Adds to `level`'s filter counts what one table's probe added to a lookup's tally,
    /// from `before` to `after`.
    pub fn add_level(
        &self,
        level: usize,
        before: &ReadCountersSnapshot,
        after: &ReadCountersSnapshot,
    ) {
        if let Some(counters) = self.levels.get(level) {
            counters.add(&after.since(before));
        }
    }
}

impl ReadCountersSnapshot {
    /// Counts one filter probe and its answer, which it returns.
    #[inline]
    pub(crate) fn count_probe(&mut self, passed: bool) -> bool {
        self.filter_probes += 1;
        match passed {
            true => self.filter_positives += 1,
            false => self.filter_negatives += 1,
        }
        passed
    }

    /// Takes back a probe counted by [`count_probe`](Self::count_probe) with answer `passed`.
    pub(crate) fn take_back_probe(&mut self, passed: bool) {
        self.filter_probes -= 1;
        match passed {
            true => self.filter_positives -= 1,
            false => self.filter_negatives -= 1,
        }
    }

    /// What happened between `earlier` and `self` (saturating at zero).
    pub fn since(&self, earlier: &ReadCountersSnapshot) -> ReadCountersSnapshot {
        ReadCountersSnapshot {
            filter_probes: self.filter_probes.saturating_sub(earlier.filter_probes),
            filter_negatives: self
                .filter_negatives
                .saturating_sub(earlier.filter_negatives),
            filter_positives: self
                .filter_positives
                .saturating_sub(earlier.filter_positives),
            filter_true_positives: self
                .filter_true_positives
                .saturating_sub(earlier.filter_true_positives),
            data_block_reads: self
                .data_block_reads
                .saturating_sub(earlier.data_block_reads),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            index_block_reads: (self.index_block_reads).saturating_sub(earlier.index_block_reads),
        }
    }

    /// Filter positives whose table did not hold the key.
    pub fn filter_false_positives(&self) -> u64 {
        self.filter_positives
            .saturating_sub(self.filter_true_positives)
    }
}
