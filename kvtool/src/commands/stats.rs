//! `stats`: a store's levels, tables, filters and counters, as text or as JSON. The JSON of
//! the levels and of the filter partitions is in `src/store_json.rs`, since the bench harness
//! reports them too.

use bloomkv::{FilterKind, FilterPolicy, Stats};
use serde_json::json;

use super::open::{keyspace, open_read_only, store_dir};
use super::output::emit;
use crate::cli::{KeyFormat, KeyspaceArg, OpenFlags, StoreDir};
use crate::codec;
use crate::store_json::{filter_partitions_json, levels_json, partition_counts, prefix_counts};
use crate::Failure;

/// `stats`: prints the store's stats, as JSON with `--json`.
pub(super) fn stats(
    json: bool,
    store: &StoreDir,
    keys: &KeyFormat,
    keyspace_arg: &KeyspaceArg,
    opening: &OpenFlags,
) -> Result<(), Failure> {
    let db = open_read_only(store_dir(store)?, opening)?;
    let mut stats = db.stats();
    // With --keyspace, the levels and tables are that keyspace's (the counters stay the
    // store's).
    if keyspace_arg.keyspace.is_some() {
        let name = keyspace(&db, keyspace_arg, false)?.name().to_string();
        if let Some(ks) = stats.keyspaces.iter().find(|k| k.name == name).cloned() {
            stats.levels = ks.levels;
            stats.tables = ks.tables;
            stats.memtable_bytes = ks.memtable_bytes;
            stats.immutable_memtables = ks.immutable_memtables;
            stats.filter_policy = ks.filter_policy;
        }
    }
    let text = stats_text(&stats, keys.hex, json);
    emit(&text)
}

fn stats_text(stats: &Stats, hex: bool, as_json: bool) -> String {
    use std::fmt::Write as _;
    if as_json {
        let doc = stats_json(stats, hex);
        return serde_json::to_string_pretty(&doc).expect("a JSON value serializes") + "\n";
    }
    let mut out = String::new();
    let total_entries: u64 = stats.levels.iter().map(|l| l.entries).sum();
    // The filters as the level's tables hold them: their kind, bits per key held, and the
    // rates predicted and measured since open. The policy's bits per key are per table below.
    let _ = writeln!(
        out,
        "level  tables  entries     bytes     written        read  moved in  filter  \
         bits/key  predicted fpr  measured fpr"
    );
    let rate = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.6}"));
    for (i, l) in stats.levels.iter().enumerate() {
        if l.tables > 0 || l.bytes_written > 0 || l.bytes_moved > 0 {
            let _ = writeln!(
                out,
                "L{:<5} {:>6}  {:>7}  {:>8}  {:>10}  {:>10}  {:>8}  {:>6}  {:>8}  {:>13}  {:>12}",
                i,
                l.tables,
                l.entries,
                l.bytes,
                l.bytes_written,
                l.bytes_read,
                l.bytes_moved,
                l.filter_kind.map_or("none", FilterKind::name),
                l.filter_bits_per_key
                    .map_or("-".to_string(), |b| format!("{b:.2}")),
                rate(l.predicted_false_positive_rate),
                rate(l.measured_false_positive_rate()),
            );
        }
    }
    let _ = writeln!(
        out,
        "total  {:>6}  {:>7}  {:>8}",
        stats.tables.len(),
        total_entries,
        stats.table_bytes()
    );
    let range_deletions = stats.keyspaces.first().map_or(0, |k| k.range_deletions);
    if range_deletions > 0 {
        let _ = writeln!(
            out,
            "range deletions  {range_deletions} (live, kept until compaction)"
        );
    }
    if stats.keyspaces.len() > 1 {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "keyspace              tables  entries     bytes  compression  bottom  block size"
        );
        for k in &stats.keyspaces {
            let _ = writeln!(
                out,
                "{:<20} {:>7}  {:>7}  {:>8}  {:>11}  {:>6}  {:>10}",
                k.name,
                k.tables.len(),
                k.entries,
                k.bytes,
                k.compression.name(),
                k.bottom_compression.name(),
                k.block_size
            );
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "table       level  entries     bytes  bits/key  hashes  predicted fpr  filter bytes"
    );
    for t in &stats.tables {
        let fmt_opt = |v: Option<u32>| v.map_or("none".to_string(), |v| v.to_string());
        let _ = writeln!(
            out,
            "{:06}.sst  L{:<4} {:>7}  {:>8}  {:>8}  {:>6}  {:>13}  {:>12}",
            t.number,
            t.level,
            t.entries,
            t.file_size,
            fmt_opt(t.bits_per_key),
            fmt_opt(t.hashes),
            t.predicted_false_positive_rate
                .map_or("none".to_string(), |p| format!("{p:.6}")),
            t.filter_bytes
        );
    }
    let _ = writeln!(out);
    let measured = stats
        .measured_false_positive_rate()
        .map_or("-".to_string(), |p| format!("{p:.6}"));
    let cache = &stats.block_cache;
    let amplification = stats
        .write_amplification()
        .map_or("-".to_string(), |w| format!("{w:.2}"));
    // Three headings, for what each count covers: the store's life (kept in its manifest),
    // this open, and now.
    let life: [(&str, String); 9] = [
        ("flushes", stats.flushes.to_string()),
        ("compactions", stats.compactions.to_string()),
        ("trivial moves", stats.trivial_moves.to_string()),
        ("write stalls", stats.write_stalls.to_string()),
        (
            "stall seconds",
            format!("{:.3}", stats.stall_micros as f64 / 1e6),
        ),
        ("user bytes written", stats.user_bytes_written.to_string()),
        ("WAL bytes written", stats.wal_bytes_written.to_string()),
        (
            "table bytes written",
            format!(
                "{} (flushes {}, compactions {})",
                stats.flush_bytes_written() + stats.compaction_bytes_written(),
                stats.flush_bytes_written(),
                stats.compaction_bytes_written()
            ),
        ),
        ("write amplification", amplification),
    ];
    let (prefix_probes, prefix_negatives, prefix_false_positives) = prefix_counts(stats);
    let this_open: [(&str, String); 22] = [
        ("filter probes", stats.filter_probes.to_string()),
        ("filter negatives", stats.filter_negatives.to_string()),
        ("filter positives", stats.filter_positives.to_string()),
        (
            "filter true positives",
            stats.filter_true_positives.to_string(),
        ),
        ("measured fpr", measured),
        ("data block reads", stats.data_block_reads.to_string()),
        ("bytes read", stats.bytes_read.to_string()),
        ("split compactions", stats.split_compactions.to_string()),
        (
            "level 0 compactions at rest",
            stats.level0_compactions_at_rest.to_string(),
        ),
        (
            "write stops for flush",
            stats.write_stops_for_flush.to_string(),
        ),
        (
            "write stops for level 0",
            stats.write_stops_for_level0.to_string(),
        ),
        (
            "longest stall seconds",
            format!("{:.3}", stats.longest_stall_micros as f64 / 1e6),
        ),
        ("block cache hits", cache.hits.to_string()),
        ("block cache misses", cache.misses.to_string()),
        ("block cache inserts", cache.inserts.to_string()),
        ("block cache evictions", cache.evictions.to_string()),
        ("index partition reads", stats.index_block_reads.to_string()),
        ("scan block reads", stats.scan_block_reads.to_string()),
        (
            "prefix filter probes",
            format!(
                "{prefix_probes} ({prefix_negatives} ruled out, {prefix_false_positives} false \
                 positives)"
            ),
        ),
        (
            "filter reads from files",
            format!(
                "{} ({} bytes; {} refits)",
                stats.filter_reads, stats.filter_bytes_read, stats.filter_refits
            ),
        ),
        ("index cache hits", stats.index_cache.hits.to_string()),
        ("table file opens", stats.table_cache.opens.to_string()),
    ];
    let now: [(&str, String); 10] = [
        ("filter policy", policy_text(&stats.filter_policy)),
        ("prefix filters", prefix_filters_text(stats)),
        ("memtable bytes", stats.memtable_bytes.to_string()),
        ("filter memory bytes", filter_memory_text(stats)),
        ("index memory bytes", stats.index_memory_bytes.to_string()),
        (
            "index cache bytes",
            format!(
                "{} of {}",
                stats.index_cache.bytes, stats.index_cache.capacity
            ),
        ),
        (
            "block cache bytes",
            format!("{} of {}", cache.bytes, cache.capacity),
        ),
        (
            "open table files",
            format!(
                "{} of {}",
                stats.table_cache.open_files, stats.table_cache.capacity
            ),
        ),
        ("last sequence", stats.last_sequence.to_string()),
        (
            "background error",
            stats
                .background_error
                .clone()
                .unwrap_or_else(|| "none".into()),
        ),
    ];
    let memory: Vec<(&str, String)> = (stats.memory.iter())
        .map(|r| {
            let text = format!(
                "{} of a target of {} (given {}, floor {})",
                r.used, r.target, r.given, r.floor
            );
            (r.role.name(), text)
        })
        .collect();
    for (heading, counters) in [
        ("over the store's life:", &life[..]),
        ("since this open:", &this_open[..]),
        ("now:", &now[..]),
        ("memory by role, bytes:", &memory[..]),
    ] {
        let _ = writeln!(out, "{heading}");
        for (name, value) in counters {
            let _ = writeln!(out, "  {name:<22} {value}");
        }
    }
    out
}

/// The store's memory by role, as the governor holds it: one object per role.
pub(crate) fn memory_json(stats: &Stats) -> serde_json::Value {
    (stats.memory.iter())
        .map(|r| {
            json!({
                "role": r.role.name(), "given_bytes": r.given, "floor_bytes": r.floor,
                "target_bytes": r.target, "used_bytes": r.used,
            })
        })
        .collect()
}

fn stats_json(stats: &Stats, hex: bool) -> serde_json::Value {
    let tables: Vec<_> = stats
        .tables
        .iter()
        .map(|t| {
            json!({
                "level": t.level, "number": t.number, "file_size": t.file_size,
                "entries": t.entries,
                "smallest_key": codec::format(&t.smallest_key, hex),
                "largest_key": codec::format(&t.largest_key, hex),
                "bits_per_key": t.bits_per_key, "hashes": t.hashes,
                "predicted_false_positive_rate": t.predicted_false_positive_rate,
                "filter_bytes": t.filter_bytes, "filter_kind": t.filter_kind.map(FilterKind::name),
                "prefix_filter_bytes": t.prefix_filter_bytes,
            })
        })
        .collect();
    let keyspaces: Vec<_> = (stats.keyspaces.iter())
        .map(|k| {
            json!({
                "name": k.name, "tables": k.tables.len(), "entries": k.entries,
                "bytes": k.bytes, "memtable_bytes": k.memtable_bytes,
                "filter_memory_bytes": k.filter_memory_bytes,
                "range_deletions": k.range_deletions,
                "filter_policy": policy_text(&k.filter_policy),
                "compression": k.compression.name(),
                "bottom_compression": k.bottom_compression.name(), "block_size": k.block_size,
                "memtable_size": k.memtable_size,
            })
        })
        .collect();
    json!({
        "keyspaces": keyspaces,
        "levels": levels_json(stats),
        "tables": tables,
        "totals": {
            "tables": stats.tables.len(),
            "entries": stats.levels.iter().map(|l| l.entries).sum::<u64>(),
            "bytes": stats.table_bytes(),
        },
        "counters": {
            "filter_probes": stats.filter_probes,
            "filter_negatives": stats.filter_negatives,
            "filter_positives": stats.filter_positives,
            "filter_true_positives": stats.filter_true_positives,
            "filter_false_positives": stats.filter_false_positives(),
            "measured_false_positive_rate": stats.measured_false_positive_rate(),
            "data_block_reads": stats.data_block_reads,
            "bytes_read": stats.bytes_read,
            "flushes": stats.flushes,
            "compactions": stats.compactions,
            "trivial_moves": stats.trivial_moves,
            "split_compactions": stats.split_compactions,
            "level0_compactions_at_rest": stats.level0_compactions_at_rest,
            "write_stalls": stats.write_stalls,
            "write_stops_for_flush": stats.write_stops_for_flush,
            "write_stops_for_level0": stats.write_stops_for_level0,
            "longest_stall_seconds": stats.longest_stall_micros as f64 / 1e6,
        },
        "writes": {
            "user_bytes": stats.user_bytes_written,
            "wal_bytes": stats.wal_bytes_written,
            "flush_bytes": stats.flush_bytes_written(),
            "compaction_bytes_written": stats.compaction_bytes_written(),
            "compaction_bytes_read": stats.compaction_bytes_read(),
            "write_amplification": stats.write_amplification(),
            "stall_seconds": stats.stall_micros as f64 / 1e6,
        },
        "memtable_bytes": stats.memtable_bytes,
        "immutable_memtables": stats.immutable_memtables,
        "filter_policy": policy_text(&stats.filter_policy),
        "filter_memory_bytes": stats.filter_memory_bytes,
        "filter_memory_limit_bytes": stats.filter_memory_limit,
        "memory": memory_json(stats),
        "tables_filter_shrunk": tables_filter_shrunk(stats),
        "scan_block_reads": stats.scan_block_reads,
        "prefix_extractor": stats.prefix_extractor,
        "prefix_filter_memory_bytes": stats.prefix_filter_memory_bytes,
        "tables_prefix_filter_ignored": stats.tables_prefix_filter_ignored,
        "memtable_prefix_filter_probes": stats.memtable_prefix_filter_probes,
        "memtable_prefix_filter_negatives": stats.memtable_prefix_filter_negatives,
        "filter_partitions": filter_partitions_json(stats),
        "index_memory_bytes": stats.index_memory_bytes,
        "index_cache": {
            "capacity_bytes": stats.index_cache.capacity,
            "bytes": stats.index_cache.bytes,
            "hits": stats.index_cache.hits,
            "misses": stats.index_cache.misses,
            "evictions": stats.index_cache.evictions,
        },
        "index_partition_reads": stats.index_block_reads,
        "filter_reads": stats.filter_reads,
        "filter_bytes_read": stats.filter_bytes_read,
        "filter_refits": stats.filter_refits,
        "block_cache": {
            "capacity_bytes": stats.block_cache.capacity,
            "bytes": stats.block_cache.bytes,
            "blocks": stats.block_cache.blocks,
            "hits": stats.block_cache.hits,
            "misses": stats.block_cache.misses,
            "inserts": stats.block_cache.inserts,
            "evictions": stats.block_cache.evictions,
            "hit_rate": stats.block_cache.hit_rate(),
        },
        "table_cache": {
            "max_open_files": stats.table_cache.capacity,
            "open_files": stats.table_cache.open_files,
            "opens": stats.table_cache.opens,
            "closes": stats.table_cache.closes,
        },
        "last_sequence": stats.last_sequence,
    })
}

/// The extractor, the prefix filters' memory, and the tables whose prefix filters the store
/// left unread.
fn prefix_filters_text(stats: &Stats) -> String {
    let ignored = match stats.tables_prefix_filter_ignored {
        0 => String::new(),
        n => format!(
            "; {n} tables' prefix filters unread (written with an extractor this store was not \
             opened with: --prefix-extractor NAME)"
        ),
    };
    let memtables = match stats.memtable_prefix_filter_probes {
        0 => String::new(),
        probes => format!(
            "; memtables asked {probes} times, {} ruled out",
            stats.memtable_prefix_filter_negatives
        ),
    };
    match &stats.prefix_extractor {
        Some(name) => format!(
            "{name}, {} bytes{ignored}{memtables}",
            stats.prefix_filter_memory_bytes
        ),
        None => format!("none{ignored}"),
    }
}

fn tables_filter_shrunk(stats: &Stats) -> usize {
    stats.levels.iter().map(|l| l.tables_filter_shrunk).sum()
}

/// The filter policy the store writes with, in the words of kvtool's options and bench
/// settings: `none`, a rate, `budget:B`, `reads:R`, or exact parameters.
fn policy_text(policy: &FilterPolicy) -> String {
    match policy {
        FilterPolicy::Disabled => "none".to_string(),
        FilterPolicy::FalsePositiveRate(p) => format!("rate {p}"),
        FilterPolicy::BitsPerKeyBudget(b) => format!("budget:{b} (bits per key over the levels)"),
        FilterPolicy::WastedReadsTarget(r) => format!("reads:{r} (wasted reads per absent get)"),
        FilterPolicy::Params(p) => {
            format!("{} bits per key, {} hashes", p.bits_per_key(), p.hashes())
        }
        other => format!("{other:?}"),
    }
}

/// The filters' memory, with the limit they are held to and how many were shrunk to fit it.
fn filter_memory_text(stats: &Stats) -> String {
    match stats.filter_memory_limit {
        None => format!("{} (no limit)", stats.filter_memory_bytes),
        Some(limit) => format!(
            "{} of a limit of {limit} ({} tables' filters shrunk to fit){}",
            stats.filter_memory_bytes,
            tables_filter_shrunk(stats),
            match partition_counts(stats) {
                c if c.tables == 0 => String::new(),
                c => format!(
                    "; {} tables in {} filter partitions: {} whole, {} folded, {} dropped",
                    c.tables, c.partitions, c.whole, c.folded, c.dropped
                ),
            }
        ),
    }
}
