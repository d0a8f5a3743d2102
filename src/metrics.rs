//! Counters of what reads cost, shared by every table a store opens.
//!
//! Each counter is counted in exactly one place, the table reader's point lookup, so the
//! figures add up:
//! `filter_probes == filter_negatives + filter_positives`, and `filter_true_positives` counts
//! the positives whose table really held the key.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters, updated by concurrent readers.
#[derive(Debug, Default)]
pub struct ReadCounters {
    /// Lookups that asked a table's Bloom filter.
    pub filter_probes: AtomicU64,
    /// Filter answers of "certainly absent": the table was skipped without any read.
    pub filter_negatives: AtomicU64,
    /// Filter answers of "maybe present": a data block read followed.
    pub filter_positives: AtomicU64,
    /// Positives where the data block did hold the key (the rest are false positives).
    pub filter_true_positives: AtomicU64,
    /// Data blocks searched by point lookups, whether the block cache held them or they were
    /// read from the file (scans and compaction do not count).
    pub data_block_reads: AtomicU64,
    /// Bytes of those data blocks, trailers included.
    pub bytes_read: AtomicU64,
    /// The filter counts again, per level of the tree the probed table was in.
    pub levels: [LevelFilterCounters; MAX_LEVELS],
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
}

impl ReadCounters {
    /// All counters at zero.
    pub fn new() -> ReadCounters {
        ReadCounters::default()
    }

    /// Reads every counter (each one atomically; the set is not one atomic snapshot).
    pub fn snapshot(&self) -> ReadCountersSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ReadCountersSnapshot {
            filter_probes: get(&self.filter_probes),
            filter_negatives: get(&self.filter_negatives),
            filter_positives: get(&self.filter_positives),
            filter_true_positives: get(&self.filter_true_positives),
            data_block_reads: get(&self.data_block_reads),
            bytes_read: get(&self.bytes_read),
        }
    }

    /// Adds one lookup's tally. Shared atomics are touched once per lookup rather than once
    /// per table visited, and only for the counts that moved.
    pub fn add(&self, tally: &ReadCountersSnapshot) {
        let pairs = [
            (&self.filter_probes, tally.filter_probes),
            (&self.filter_negatives, tally.filter_negatives),
            (&self.filter_positives, tally.filter_positives),
            (&self.filter_true_positives, tally.filter_true_positives),
            (&self.data_block_reads, tally.data_block_reads),
            (&self.bytes_read, tally.bytes_read),
        ];
        for (counter, by) in pairs {
            if by != 0 {
                counter.fetch_add(by, Ordering::Relaxed);
            }
        }
    }
}

impl ReadCounters {
    /// Adds to `level`'s filter counts what one table's probe added to a lookup's tally,
    /// from `before` to `after`.
    pub fn add_level(
        &self,
        level: usize,
        before: &ReadCountersSnapshot,
        after: &ReadCountersSnapshot,
    ) {
        let Some(counters) = self.levels.get(level) else {
            return;
        };
        let pairs = [
            (&counters.probes, after.filter_probes - before.filter_probes),
            (
                &counters.positives,
                after.filter_positives - before.filter_positives,
            ),
            (
                &counters.true_positives,
                after.filter_true_positives - before.filter_true_positives,
            ),
        ];
        for (counter, by) in pairs {
            if by != 0 {
                counter.fetch_add(by, Ordering::Relaxed);
            }
        }
    }
}

impl ReadCountersSnapshot {
    /// Both tallies together.
    pub fn plus(&self, other: &ReadCountersSnapshot) -> ReadCountersSnapshot {
        ReadCountersSnapshot {
            filter_probes: self.filter_probes + other.filter_probes,
            filter_negatives: self.filter_negatives + other.filter_negatives,
            filter_positives: self.filter_positives + other.filter_positives,
            filter_true_positives: self.filter_true_positives + other.filter_true_positives,
            data_block_reads: self.data_block_reads + other.data_block_reads,
            bytes_read: self.bytes_read + other.bytes_read,
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
        }
    }

    /// Filter positives whose table did not hold the key.
    pub fn filter_false_positives(&self) -> u64 {
        self.filter_positives
            .saturating_sub(self.filter_true_positives)
    }
}
