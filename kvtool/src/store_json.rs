//! Parts of a store's stats as JSON that both `kvtool stats --json` and the bench harness's
//! results carry: each level's shape and I/O, and how the filter partitions are held (the
//! text of `stats` counts the partitions too). A leaf module, so that the commands and the
//! harness each import it and not each other.

use bloomkv::{FilterResidency, Stats};
use serde_json::json;

/// Each level's shape and I/O, as `stats --json` and `bench --writes` report them.
pub fn levels_json(stats: &Stats) -> Vec<serde_json::Value> {
    stats
        .levels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            json!({
                "level": i, "tables": l.tables, "bytes": l.bytes, "entries": l.entries,
                "bytes_written": l.bytes_written, "bytes_read": l.bytes_read,
                "compactions": l.compactions, "tables_moved": l.tables_moved,
                "bytes_moved": l.bytes_moved, "target_bits_per_key": l.target_bits_per_key,
                "tables_off_target": l.tables_off_target,
                "filter_probes": l.filter_probes, "filter_negatives": l.filter_negatives(),
                "filter_positives": l.filter_positives,
                "filter_true_positives": l.filter_true_positives,
                "measured_false_positive_rate": l.measured_false_positive_rate(),
                "predicted_false_positive_rate": l.predicted_false_positive_rate,
                "filter_kind": l.filter_kind.map(bloomkv::FilterKind::name),
                "filter_bits_per_key": l.filter_bits_per_key,
                "prefix_filter_probes": l.prefix_filter_probes,
                "prefix_filter_negatives": l.prefix_filter_negatives,
                "prefix_filter_false_positives": l.prefix_filter_false_positives,
                "tables_prefix_filter_ignored": l.tables_prefix_filter_ignored,
            })
        })
        .collect()
}

/// Partitioned filters: how many tables have one, and how their partitions are held.
pub struct PartitionCounts {
    pub tables: usize,
    pub partitions: usize,
    pub whole: usize,
    pub folded: usize,
    pub dropped: usize,
}

pub fn partition_counts(stats: &Stats) -> PartitionCounts {
    let mut c = PartitionCounts {
        tables: 0,
        partitions: 0,
        whole: 0,
        folded: 0,
        dropped: 0,
    };
    for t in stats
        .tables
        .iter()
        .filter(|t| !t.filter_partitions.is_empty())
    {
        c.tables += 1;
        for p in &t.filter_partitions {
            c.partitions += 1;
            match p {
                FilterResidency::Whole => c.whole += 1,
                FilterResidency::Folded(_) => c.folded += 1,
                _ => c.dropped += 1,
            }
        }
    }
    c
}

pub fn filter_partitions_json(stats: &Stats) -> serde_json::Value {
    let c = partition_counts(stats);
    json!({
        "tables": c.tables,
        "partitions": c.partitions,
        "whole": c.whole,
        "folded": c.folded,
        "dropped": c.dropped,
    })
}

/// The store's prefix filter counts over its levels: probes, negatives, false positives.
pub fn prefix_counts(stats: &Stats) -> (u64, u64, u64) {
    stats.levels.iter().fold((0, 0, 0), |(p, n, f), l| {
        (
            p + l.prefix_filter_probes,
            n + l.prefix_filter_negatives,
            f + l.prefix_filter_false_positives,
        )
    })
}
