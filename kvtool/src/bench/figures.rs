//! What the filter-settings bench measures: the figures of one kind of lookup, overall and
//! level by level, and of one setting. The runs fill them in; the report, the plot and the
//! comparison with the peers read them, so they sit below all of these.

use std::time::Duration;

use bloomkv::filter::FilterParams;
use serde_json::json;

/// The figures for one kind of lookup (present or absent keys) in one phase.
#[derive(Debug, Clone, Default)]
pub struct LookupFigures {
    pub lookups: u64,
    pub data_block_reads: u64,
    pub bytes_read: u64,
    pub filter_probes: u64,
    pub filter_negatives: u64,
    pub false_positives: u64,
    /// Tables whose key range covered the key, over all lookups: the data-block reads the
    /// lookups would have cost without filters in the same tree.
    pub tables_consulted: u64,
    /// Sum over lookups of the predicted rates of the tables each lookup consulted (absent
    /// keys: the predicted data-block reads).
    pub predicted_reads: f64,
    pub gets_per_second: f64,
    pub p50: Duration,
    pub p99: Duration,
    /// The same lookups level by level, level 0 first.
    pub levels: Vec<LevelLookups>,
}

/// What one kind of lookup cost at one level, and the level's filters then.
#[derive(Debug, Clone, Default)]
pub struct LevelLookups {
    pub tables: usize,
    pub keys: u64,
    pub filter_bytes: u64,
    /// Filter probes of keys the level's tables did not hold, and the false positives among
    /// them.
    pub absent_probes: u64,
    pub false_positives: u64,
    pub predicted_rate: Option<f64>,
}

impl LevelLookups {
    pub fn measured_rate(&self) -> Option<f64> {
        (self.absent_probes > 0).then(|| self.false_positives as f64 / self.absent_probes as f64)
    }

    pub fn bits_per_key(&self) -> f64 {
        self.filter_bytes as f64 * 8.0 / self.keys.max(1) as f64
    }

    pub fn to_json(&self, lookups: u64) -> serde_json::Value {
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

impl LookupFigures {
    pub fn reads_per_get(&self) -> f64 {
        self.data_block_reads as f64 / self.lookups.max(1) as f64
    }

    pub fn tables_per_get(&self) -> f64 {
        self.tables_consulted as f64 / self.lookups.max(1) as f64
    }

    /// Share of the reads the lookups would have cost without filters that they did not
    /// cost (for absent keys).
    pub fn io_avoided(&self) -> f64 {
        1.0 - self.data_block_reads as f64 / self.tables_consulted.max(1) as f64
    }

    pub fn measured_rate(&self) -> Option<f64> {
        let absent_probes = self.false_positives + self.filter_negatives;
        (absent_probes > 0).then(|| self.false_positives as f64 / absent_probes as f64)
    }

    pub fn to_json(&self) -> serde_json::Value {
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

/// What one filter setting measured.
pub struct SettingResult {
    pub label: String,
    pub params: Option<FilterParams>,
    /// Writes, then the memtable flushed to a table.
    pub load_seconds: f64,
    /// Then, until compactions stopped.
    pub settle_seconds: f64,
    /// Bytes the store wrote (WAL, flushes, compactions) per byte of keys and values loaded,
    /// once compactions stopped.
    pub write_amplification: Option<f64>,
    /// Time the load's writes were delayed or stalled because compaction fell behind.
    pub stall_seconds: f64,
    pub shape: Vec<usize>,
    pub filter_memory_bytes: u64,
    pub cold_present: LookupFigures,
    pub cold_absent: LookupFigures,
    pub warm_present: LookupFigures,
    pub warm_absent: LookupFigures,
}

/// Adds every field of `extra` (an object) to `figures`.
pub fn merge(figures: &mut serde_json::Value, extra: &serde_json::Value) {
    if let (Some(into), Some(from)) = (figures.as_object_mut(), extra.as_object()) {
        for (name, value) in from {
            into.insert(name.clone(), value.clone());
        }
    }
}
