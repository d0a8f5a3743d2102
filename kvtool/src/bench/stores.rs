//! `kvtool bench --stores bloomkv,rocksdb,fjall`: whole stores side by side, each with its
//! default options, each loaded and queried in a process of its own (so one store's memory
//! never counts against another's), optionally held with its page cache to a memory limit
//! by a memory cgroup, so that the data does not fit in memory.
//!
//! The parent runs `kvtool --db DIR bench --child-store NAME ...` once per store, one after
//! another; the child enters the cgroup before it opens the store, loads the keys, waits for
//! compactions where the store can, times the present-key and then the absent-key gets, reads
//! its own resident memory and the store's size on disk, and writes its figures as JSON.

use std::path::Path;

use bloomkv::{Db, Options, Stats};
use serde_json::{json, Value};

use super::args::BenchArgs;
use super::batched;
use super::children::{
    bloomkv_options, check_stores, child_args, open_bloomkv, resident, run_children, run_in_child,
    warm_lookups_only,
};
use super::files::{scratch_dir, write_result};
use super::stores_report::{chart_svg, is_writes_run, print_report, read_run};
use super::timing::{time_lookups, Timing};
use super::workload::{load, settle, Workload};
use crate::Failure;

const KNOWN_STORES: [&str; 4] = ["bloomkv", "rocksdb", "rocksdb-partitioned", "fjall"];

/// Runs every store of `args.stores` in a child process and reports them side by side.
pub fn run(args: &BenchArgs, dir: Option<&Path>) -> Result<(), Failure> {
    check_stores(&args.stores, &KNOWN_STORES, "")?;
    if args.keys == 0 || args.lookups == 0 {
        return Err(Failure::from("bench needs at least one key and one lookup"));
    }
    let temp = scratch_dir(dir, "bloomkv-compare")?;
    let runs = run_children(&args.stores, temp.path(), |store, out| {
        let mut v = child_args(args, store, out);
        v.extend(warm_lookups_only(args));
        v
    })?;
    let doc = json!({
        "keys": args.keys, "key_size": 16, "value_size": args.value_size,
        "values": args.values.name(), "lookups": args.lookups, "seed": args.seed,
        "distribution": args.distribution.name(), "load_batch": args.load_batch,
        "memory_limit_bytes": args.memory_limit, "stores": runs,
        "variant": args.variant,
    });
    print_report(&doc);
    if let Some(path) = &args.json {
        write_result(path, &serde_json::to_string_pretty(&doc)?)?;
    }
    if let Some(path) = &args.chart {
        let mut docs = vec![doc];
        for earlier in &args.chart_from {
            let run = read_run(earlier)?;
            if is_writes_run(&run) {
                return Err(Failure::from(format!(
                    "{} is a --writes run: a chart of lookups cannot take it",
                    earlier.display()
                )));
            }
            docs.push(run);
        }
        write_result(path, &chart_svg(&docs))?;
    }
    Ok(())
}

/// In the child: enters the cgroup, runs one store in `dir`, writes its figures.
pub fn run_child(args: &BenchArgs, dir: Option<&Path>, store: &str) -> Result<(), Failure> {
    run_in_child(args, dir, |dir| {
        let workload = Workload::new(args);
        match store {
            "bloomkv" => {
                let options = bloomkv_options(args)?;
                let mut figures = run_bloomkv(&workload, dir, options.clone())?;
                if args.spending_on_one_tree {
                    let limit = figures["filter_memory_limit_bytes"].as_u64();
                    let limit = limit.ok_or("the store ran without a filter memory limit")?;
                    figures["one_tree"] = spendings_on_one_tree(&workload, dir, options, limit)?;
                }
                Ok(figures)
            }
            other => run_peer(other, &workload, dir),
        }
    })
}

fn run_bloomkv(workload: &Workload, dir: &Path, options: Options) -> Result<Value, Failure> {
    let max_open_files = options.max_open_files;
    let (db, described) = open_bloomkv(dir, options)?;
    let load = load(&db, workload, 0..workload.keys, "bloomkv")?;
    let at_load_end = db.stats();
    // Right after the load's flush, with compactions still running: what a user's reads meet.
    let fresh = lookup_run(&db, workload)?;
    let settle_seconds = settle(&db, "bloomkv")?;
    let settled = lookup_run(&db, workload)?;
    let after = db.stats();
    let (resident_bytes, peak_resident_bytes) = resident()?;
    let batched = json!({
        "present": batched::measure(&db, &workload.warm_present, true)?,
        "absent": batched::measure(&db, &workload.warm_absent, false)?,
    });
    let mut figures = json!({
        "store": "bloomkv",
        "configuration": described,
        "max_open_files": max_open_files,
        "table_files_opened": after.table_cache.opens,
        "load_seconds": load.seconds, "settle_seconds": settle_seconds,
        "longest_write_seconds": load.longest_write.as_secs_f64(),
        "write_amplification": after.write_amplification(),
        "stall_seconds": at_load_end.stall_micros as f64 / 1e6,
        "longest_stall_seconds": at_load_end.longest_stall_micros as f64 / 1e6,
        "write_stops_for_flush": at_load_end.write_stops_for_flush,
        "write_stops_for_level0": at_load_end.write_stops_for_level0,
        "tables_per_level_after_load": tables_per_level(&at_load_end),
        "load_timeline": load.timeline.iter().map(|s| s.to_json()).collect::<Vec<_>>(),
        "fresh_present": fresh.present, "fresh_absent": fresh.absent,
        "present": settled.present, "absent": settled.absent,
        "resident_bytes": resident_bytes, "peak_resident_bytes": peak_resident_bytes,
        "filter_memory_bytes": after.filter_memory_bytes,
        "filter_memory_limit_bytes": after.filter_memory_limit,
        "memory": crate::commands::stats::memory_json(&after),
        "level0_compactions_at_rest": after.level0_compactions_at_rest,
        "block_cache_capacity_bytes": after.block_cache.capacity,
        "filter_reads": after.filter_reads,
        "filter_bytes_read": after.filter_bytes_read,
        "filter_refits": after.filter_refits,
        "tables_filter_shrunk": after.levels.iter().map(|l| l.tables_filter_shrunk).sum::<usize>(),
        "filter_partitions": crate::store_json::filter_partitions_json(&after),
        "predicted_false_positive_rate_per_level": after
            .levels
            .iter()
            .map(|l| l.predicted_false_positive_rate)
            .collect::<Vec<_>>(),
        "index_memory_bytes": after.index_memory_bytes,
        "index_cache_bytes": after.index_cache.bytes,
        "index_cache_capacity_bytes": after.index_cache.capacity,
        "block_cache_bytes": after.block_cache.bytes,
        "open_files": after.table_cache.open_files,
        "tables_per_level": tables_per_level(&after),
        "batched": batched,
    });
    // The flat names earlier runs' JSON used, for the report and the chart.
    for (name, field) in [
        ("present_blocks_per_get", "blocks_per_get"),
        ("present_block_misses_per_get", "block_cache_misses_per_get"),
    ] {
        figures[name] = figures["present"][field].clone();
    }
    figures["absent_blocks_per_get"] = figures["absent"]["blocks_per_get"].clone();
    figures["block_cache_hit_rate"] = settled.cache_hit_rate;
    Ok(figures)
}

/// The store in `dir`, reopened with `limit` bytes of filter memory (the limit it ended
/// with) and no memory moving, spent by the lookups counted and then by keys; and reopened
/// with its options' own limit spent by keys, the store a user who turns following lookups
/// off gets (which moves no memory either). Each reopened store's gets after a pass that
/// warms its caches, with what it holds.
fn spendings_on_one_tree(
    workload: &Workload,
    dir: &Path,
    options: Options,
    limit: u64,
) -> Result<Value, Failure> {
    // The three stores read the same tables: no compaction at rest between them, which
    // their lookups would otherwise bring on a level 0 the run left.
    let options = options.compact_level0_at_rest(None);
    let at_limit = |follows: bool| {
        (options.clone())
            .filter_memory_limit(limit)
            .filter_memory_follows_lookups(follows)
            .memory_follows_reads(false)
    };
    let spendings_compared = [
        ("follows_lookups", at_limit(true)),
        ("by_keys", at_limit(false)),
        (
            "by_keys_at_given_limit",
            options.clone().filter_memory_follows_lookups(false),
        ),
    ];
    let mut spendings = serde_json::Map::new();
    for (name, options) in spendings_compared {
        let db = Db::open(dir, options)?;
        lookup_run(&db, workload)?;
        let measured = lookup_run(&db, workload)?;
        let stats = db.stats();
        spendings.insert(
            name.into(),
            json!({
                "present": measured.present, "absent": measured.absent,
                "filter_memory_bytes": stats.filter_memory_bytes,
                "filter_memory_limit_bytes": stats.filter_memory_limit,
                "block_cache_capacity_bytes": stats.block_cache.capacity,
                "filter_refits": stats.filter_refits,
                "tables_per_level": tables_per_level(&stats),
            }),
        );
        db.close()?;
    }
    Ok(Value::Object(spendings))
}

fn tables_per_level(stats: &Stats) -> Vec<usize> {
    stats.levels.iter().map(|l| l.tables).collect()
}

/// One pass of present-key and then absent-key gets, each with its timing, its I/O and the
/// store's own counts per get.
struct LookupRun {
    present: Value,
    absent: Value,
    cache_hit_rate: Value,
}

fn lookup_run(db: &Db, workload: &Workload) -> Result<LookupRun, Failure> {
    let get = |k: &[u8]| {
        db.get_pinned(k)
            .map(|v| v.is_some())
            .map_err(|e| e.to_string())
    };
    let before = db.stats();
    let present = time_lookups(&workload.warm_present, true, get)?;
    let middle = db.stats();
    let absent = time_lookups(&workload.warm_absent, false, get)?;
    let after = db.stats();
    let lookups = |s: &Stats| s.block_cache.hits + s.block_cache.misses;
    let cached = lookups(&after) - lookups(&before);
    Ok(LookupRun {
        present: with_store_counts(present, &before, &middle),
        absent: with_store_counts(absent, &middle, &after),
        cache_hit_rate: json!((cached > 0)
            .then(|| (after.block_cache.hits - before.block_cache.hits) as f64 / cached as f64)),
    })
}

/// A run's timing with what the store counted between `earlier` and `later`, per get: filters
/// asked, data blocks searched, block-cache misses and table files opened.
fn with_store_counts(timing: Timing, earlier: &Stats, later: &Stats) -> Value {
    let gets = timing.lookups.max(1) as f64;
    let per_get = |count: fn(&Stats) -> u64| (count(later) - count(earlier)) as f64 / gets;
    let mut figures = timing.to_json();
    figures["filters_per_get"] = json!(per_get(|s| s.filter_probes));
    figures["blocks_per_get"] = json!(per_get(|s| s.data_block_reads));
    figures["block_cache_misses_per_get"] = json!(per_get(|s| s.block_cache.misses));
    figures["index_partition_reads_per_get"] = json!(per_get(|s| s.index_block_reads));
    figures["file_opens_per_get"] = json!(per_get(|s| s.table_cache.opens));
    // What filters cost the disk during the run: units read back by refits, and the refits.
    figures["filter_bytes_read_per_get"] = json!(per_get(|s| s.filter_bytes_read));
    figures["filter_refits"] = json!(later.filter_refits - earlier.filter_refits);
    figures
}

#[cfg(feature = "peers")]
fn run_peer(store: &str, workload: &Workload, dir: &Path) -> Result<Value, Failure> {
    let result = match store {
        "rocksdb" => super::peers::run_rocksdb(workload, dir, false)?,
        "rocksdb-partitioned" => super::peers::run_rocksdb(workload, dir, true)?,
        _ => super::peers::run_fjall(workload, dir)?,
    };
    let (resident_bytes, peak_resident_bytes) = resident()?;
    let mut figures = json!({
        "store": result.name, "configuration": result.note,
        "load_seconds": result.load_seconds, "settle_seconds": result.settle_seconds,
        "longest_write_seconds": result.longest_write_seconds,
        "present": result.present.to_json(), "absent": result.absent.to_json(),
        "present_block_misses_per_get": result.present_block_misses_per_get,
        "block_cache_hit_rate": result.block_cache_hit_rate,
        "resident_bytes": resident_bytes, "peak_resident_bytes": peak_resident_bytes,
    });
    if let Some((present, absent)) = result.fresh {
        figures["fresh_present"] = present.to_json();
        figures["fresh_absent"] = absent.to_json();
    }
    super::figures::merge(&mut figures, &result.extra);
    Ok(figures)
}

#[cfg(not(feature = "peers"))]
fn run_peer(store: &str, _: &Workload, _: &Path) -> Result<Value, Failure> {
    Err(Failure::from(format!(
        "--stores {store} needs kvtool built with `--features peers`"
    )))
}
