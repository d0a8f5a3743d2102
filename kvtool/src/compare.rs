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
use std::process::Command;

use bloomkv::{Db, Options, Stats};
use serde_json::{json, Value};

use crate::bench::{load, scratch_dir, settle, write_result, BenchArgs, Workload};
use crate::memlimit::{self, MemoryCgroup};
use crate::timing::{time_lookups, watch_device_of, Timing};
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
        v.extend(
            [
                "--lookups",
                &args.lookups.to_string(),
                "--cold-lookups",
                "0",
            ]
            .map(String::from),
        );
        v
    })?;
    let doc = json!({
        "keys": args.keys, "key_size": 16, "value_size": args.value_size,
        "values": args.values.name(), "lookups": args.lookups, "seed": args.seed,
        "distribution": args.distribution.name(), "load_batch": args.load_batch,
        "memory_limit_bytes": args.memory_limit, "stores": runs,
    });
    print_report(&doc);
    if let Some(path) = &args.json {
        write_result(path, &serde_json::to_string_pretty(&doc)?)?;
    }
    if let Some(path) = &args.chart {
        let mut docs = vec![doc];
        for earlier in &args.chart_from {
            docs.push(read_run(earlier)?);
        }
        write_result(path, &chart_svg(&docs))?;
    }
    Ok(())
}

/// Draws the chart of earlier runs' JSON files (`--chart` without `--stores`).
pub fn chart_from_files(chart: &Path, files: &[std::path::PathBuf]) -> Result<(), Failure> {
    let docs = files
        .iter()
        .map(|file| read_run(file))
        .collect::<Result<Vec<_>, _>>()?;
    write_result(chart, &chart_svg(&docs))
}

/// An earlier run's figures, from the JSON file `--json` wrote.
fn read_run(file: &Path) -> Result<Value, Failure> {
    let bytes = std::fs::read(file)
        .map_err(|e| Failure::from(format!("cannot read {}: {e}", file.display())))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Failure::from(format!(
            "{} is not the JSON of a --stores run: {e}",
            file.display()
        ))
    })
}

/// Fails unless every store of `stores` is one of `known` and this build can run it. `mode`
/// names the kind of comparison in the message (" with --writes", or nothing).
pub fn check_stores(stores: &[String], known: &[&str], mode: &str) -> Result<(), Failure> {
    for store in stores {
        if !known.contains(&store.as_str()) {
            return Err(Failure::from(format!(
                "unknown store '{store}' in --stores{mode}: use {}",
                known.join(", ")
            )));
        }
        if store != "bloomkv" && !cfg!(feature = "peers") {
            return Err(Failure::from(format!(
                "--stores {store} needs kvtool built with `--features peers`"
            )));
        }
    }
    Ok(())
}

/// Runs `kvtool --db TEMP/store-NAME bench ARGS` for each store, one after another, where
/// `args(store, out)` are the arguments that make the child run `store` and write its
/// figures to `out`; returns each child's figures. A child that fails is recorded as
/// `{"store": NAME, "failed": STATUS}` and the others still run. Each store's directory is
/// removed once its child is done.
pub fn run_children(
    stores: &[String],
    temp: &Path,
    args: impl Fn(&str, &Path) -> Vec<String>,
) -> Result<Vec<Value>, Failure> {
    let exe = std::env::current_exe()?;
    let mut runs = Vec::new();
    for store in stores {
        let store_dir = temp.join(format!("store-{store}"));
        let out = temp.join(format!("{store}.json"));
        let mut child = Command::new(&exe);
        child.arg("--db").arg(&store_dir).arg("bench");
        child.args(args(store, &out));
        eprintln!("{store}: running in a process of its own");
        let status = child.status()?;
        let figures = std::fs::read(&out)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
        if let (true, Some(figures)) = (status.success(), figures) {
            runs.push(figures);
        } else {
            // One store failing (out of memory, out of file descriptors) is a result too: record
            // it and go on with the others.
            eprintln!("{store}: failed ({status}); its error is printed above");
            runs.push(json!({"store": store, "failed": status.to_string()}));
        }
        if store_dir.exists() {
            std::fs::remove_dir_all(&store_dir)?;
        }
    }
    Ok(runs)
}

/// The arguments every child takes, whatever it measures: the workload, the store, where
/// its figures go, and the limits.
pub fn child_args(args: &BenchArgs, store: &str, out: &Path) -> Vec<String> {
    let mut v: Vec<String> = [
        "--keys",
        &args.keys.to_string(),
        "--value-size",
        &args.value_size.to_string(),
        "--values",
        args.values.name(),
        "--seed",
        &args.seed.to_string(),
        "--distribution",
        &args.distribution.name(),
        "--load-batch",
        &args.load_batch.to_string(),
        "--child-store",
        store,
        "--child-out",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(out.display().to_string());
    if let Some(limit) = args.memory_limit {
        v.push("--memory-limit".into());
        v.push(limit.to_string());
    }
    if let Some(files) = args.max_open_files {
        v.push("--max-open-files".into());
        v.push(files.to_string());
    }
    if store == "bloomkv" {
        for (flag, size) in [
            ("--table-size", args.table_size),
            ("--memtable-size", args.memtable_size),
            ("--level1-size", args.level1_size),
            ("--filter-memory-limit", args.filter_memory_limit),
            ("--index-cache-size", args.index_cache_size),
        ] {
            if let Some(bytes) = size {
                v.extend([flag.into(), bytes.to_string()]);
            }
        }
        if args.filter_memory_by_keys {
            v.push("--filter-memory-by-keys".into());
        }
        if let Some(filter) = &args.filter {
            v.extend([
                "--stores".into(),
                "bloomkv".into(),
                "--filter".into(),
                filter.clone(),
            ]);
        }
    }
    v
}

/// In a child: moves this process into a memory cgroup of `limit` bytes, when there is one.
pub fn enter_cgroup(limit: Option<u64>) -> Result<Option<MemoryCgroup>, Failure> {
    limit
        .map(|limit| {
            MemoryCgroup::enter(limit).map_err(|e| {
                Failure::from(format!(
                    "cannot hold the run to {limit} bytes of memory: {e}"
                ))
            })
        })
        .transpose()
}

/// Adds what the cgroup saw (its limit, version, peak charge and limit hits) to a child's
/// figures.
pub fn add_cgroup_figures(figures: &mut Value, cgroup: Option<&MemoryCgroup>) {
    if let Some(cgroup) = cgroup {
        figures["memory_limit_bytes"] = json!(cgroup.limit_bytes());
        figures["cgroup_version"] = json!(match cgroup.version() {
            memlimit::CgroupVersion::V1 => "v1",
            memlimit::CgroupVersion::V2 => "v2",
        });
        figures["cgroup_peak_bytes"] = json!(cgroup.peak_bytes());
        figures["cgroup_limit_hits"] = json!(cgroup.limit_hits());
    }
}

/// In the child: enters the cgroup, runs one store in `dir`, writes its figures.
pub fn run_child(args: &BenchArgs, dir: Option<&Path>, store: &str) -> Result<(), Failure> {
    let (Some(dir), Some(out)) = (dir, args.child_out.as_ref()) else {
        return Err(Failure::from("--child-store needs --db and --child-out"));
    };
    let cgroup = enter_cgroup(args.memory_limit)?;
    std::fs::create_dir_all(dir)?;
    watch_device_of(dir);
    let workload = Workload::new(args);
    let mut figures = match store {
        "bloomkv" => run_bloomkv(&workload, dir, bloomkv_options(args)?)?,
        other => run_peer(other, &workload, dir)?,
    };
    figures["bytes_on_disk"] = json!(memlimit::dir_bytes(dir)?);
    add_cgroup_figures(&mut figures, cgroup.as_ref());
    std::fs::write(out, serde_json::to_string_pretty(&figures)?)?;
    Ok(())
}

/// bloomkv's options in a child: the defaults, with what the command line changed.
pub fn bloomkv_options(args: &BenchArgs) -> Result<Options, Failure> {
    let mut options = Options::default();
    if let Some(files) = args.max_open_files {
        options = options.max_open_files(files);
    }
    if let Some(bytes) = args.table_size {
        options = options.table_size(bytes);
    }
    if let Some(bytes) = args.memtable_size {
        options = options.memtable_size(bytes as usize);
    }
    if let Some(bytes) = args.level1_size {
        options = options.level1_size(bytes);
    }
    if let Some(bytes) = args.filter_memory_limit {
        options = options.filter_memory_limit(bytes);
    }
    if let Some(bytes) = args.index_cache_size {
        options = options.index_cache_size(bytes);
    }
    if args.filter_memory_by_keys {
        options = options.filter_memory_follows_lookups(false);
    }
    if let Some(setting) = &args.filter {
        match crate::bench::parse_settings(setting)?.as_slice() {
            [(_, policy)] => options = options.filter_policy(*policy),
            _ => {
                return Err(Failure::from(
                    "--filter takes one setting, such as budget:10",
                ))
            }
        }
    }
    Ok(options)
}

/// This process's resident memory, now and at its peak.
pub fn resident() -> Result<(u64, u64), Failure> {
    memlimit::resident_bytes().map_err(Failure::from)
}

fn run_bloomkv(workload: &Workload, dir: &Path, options: Options) -> Result<Value, Failure> {
    let max_open_files = options.max_open_files;
    let described = format!("{options:?}");
    let db = Db::open(dir, options)?;
    let load = load(&db, workload, 0..workload.keys, "bloomkv")?;
    let at_load_end = db.stats();
    // Right after the load's flush, with compactions still running: what a user's reads meet.
    let fresh = lookup_run(&db, workload)?;
    let settle_seconds = settle(&db, "bloomkv")?;
    let settled = lookup_run(&db, workload)?;
    let after = db.stats();
    let (resident_bytes, peak_resident_bytes) = resident()?;
    let batched = json!({
        "present": crate::batched::measure(&db, &workload.warm_present, true)?,
        "absent": crate::batched::measure(&db, &workload.warm_absent, false)?,
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
        "tables_filter_shrunk": after.levels.iter().map(|l| l.tables_filter_shrunk).sum::<usize>(),
        "filter_partitions": crate::commands::filter_partitions_json(&after),
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
    let get = |k: &[u8]| db.get(k).map(|v| v.is_some()).map_err(|e| e.to_string());
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
    figures
}

#[cfg(feature = "peers")]
fn run_peer(store: &str, workload: &Workload, dir: &Path) -> Result<Value, Failure> {
    let result = match store {
        "rocksdb" => crate::peers::run_rocksdb(workload, dir, false)?,
        "rocksdb-partitioned" => crate::peers::run_rocksdb(workload, dir, true)?,
        _ => crate::peers::run_fjall(workload, dir)?,
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
    crate::peers::merge(&mut figures, &result.extra);
    Ok(figures)
}

#[cfg(not(feature = "peers"))]
fn run_peer(store: &str, _: &Workload, _: &Path) -> Result<Value, Failure> {
    Err(Failure::from(format!(
        "--stores {store} needs kvtool built with `--features peers`"
    )))
}

pub fn mib(v: &Value) -> String {
    v.as_f64()
        .map_or("-".into(), |b| format!("{:.0}", b / (1 << 20) as f64))
}

pub fn number(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.digits$}"))
}

fn print_report(doc: &Value) {
    println!(
        "store comparison: {} keys of 16 bytes, {}-byte {} values, loaded {}; {} present and {} absent gets each; memory {}",
        doc["keys"],
        doc["value_size"],
        doc["values"].as_str().unwrap_or("?"),
        load_text(doc),
        doc["lookups"],
        doc["lookups"],
        memory_limit_text(doc),
    );
    let empty = Vec::new();
    let stores = doc["stores"].as_array().unwrap_or(&empty);
    for s in stores {
        if let Some(failure) = s["failed"].as_str() {
            println!("  {} failed: {failure}", s["store"].as_str().unwrap_or("?"));
        }
    }
    let ran: Vec<&Value> = stores.iter().filter(|s| s["failed"].is_null()).collect();
    print_overview(&ran);
    for (title, present, absent) in [
        (
            "right after the load's flush (compactions running)",
            "fresh_present",
            "fresh_absent",
        ),
        (
            "after compactions settled (fjall: no way to wait; its one pass)",
            "present",
            "absent",
        ),
    ] {
        println!();
        println!("gets {title}; per get: higher gets/s is better, lower everything else");
        print_gets(&ran, present, absent);
    }
    let Some(ours) = ran.iter().find(|s| s["store"] == "bloomkv") else {
        return;
    };
    crate::batched::print(ours);
    print_ratios(ours, &ran);
}

/// Load, memory and disk, one row per store.
fn print_overview(stores: &[&Value]) {
    let rows = stores
        .iter()
        .map(|s| {
            vec![
                s["store"].as_str().unwrap_or("?").to_string(),
                number(&s["load_seconds"], 1),
                number(&s["settle_seconds"], 1),
                number(&s["longest_write_seconds"], 2),
                mib(&s["bytes_on_disk"]),
                mib(&s["resident_bytes"]),
                mib(&s["peak_resident_bytes"]),
                mib(&s["cgroup_peak_bytes"]),
                mib(&metadata_bytes(s, "filter")),
                mib(&metadata_bytes(s, "index")),
                table_files(s),
            ]
        })
        .collect();
    println!();
    print_table(
        &[
            "store",
            "load s",
            "settle s",
            "longest write s",
            "disk MiB",
            "resident MiB",
            "peak MiB",
            "cgroup peak MiB",
            "filter MiB",
            "index MiB",
            "tables",
        ],
        rows,
    );
}

/// A store's filter or index bytes: bloomkv's in memory (an index's resident part and the
/// partitions its index cache holds), RocksDB's blocks summed over its tables (held in memory
/// whole by its default options).
fn metadata_bytes(s: &Value, what: &str) -> Value {
    let ours = &s[format!("{what}_memory_bytes")];
    if ours.is_null() {
        return s[format!("{what}_bytes")].clone();
    }
    let cached = s[format!("{what}_cache_bytes")].as_u64().unwrap_or(0);
    json!(ours.as_u64().map(|bytes| bytes + cached))
}

fn table_files(s: &Value) -> String {
    match s["tables_per_level"].as_array() {
        Some(levels) => levels
            .iter()
            .filter_map(Value::as_u64)
            .sum::<u64>()
            .to_string(),
        None => s["table_files"]
            .as_u64()
            .map_or("-".into(), |n| n.to_string()),
    }
}

/// One pass of gets: rate, latency and per-get work, one row per store and kind of key.
fn print_gets(stores: &[&Value], present: &str, absent: &str) {
    let mut rows = Vec::new();
    for s in stores {
        for (kind, field) in [("present", present), ("absent", absent)] {
            let g = &s[field];
            if g.is_null() {
                continue;
            }
            let blocks = match g["blocks_per_get"].is_null() {
                true => &g["blocks_read_per_get"],
                false => &g["block_cache_misses_per_get"],
            };
            rows.push(vec![
                s["store"].as_str().unwrap_or("?").to_string(),
                kind.to_string(),
                number(&g["gets_per_second"], 0),
                number(&g["p50_us"], 1),
                number(&g["p99_us"], 1),
                number(&g["filters_per_get"], 2),
                number(blocks, 3),
                number(&g["read_calls_per_get"], 3),
                number(&g["device_reads_per_get"], 3),
                number(&kib(&g["device_read_bytes_per_get"]), 2),
                number(&g["file_opens_per_get"], 3),
            ]);
        }
    }
    print_table(
        &[
            "store",
            "keys",
            "gets/s",
            "p50 us",
            "p99 us",
            "filters",
            "blocks read",
            "read calls",
            "device reads",
            "device KiB",
            "file opens",
        ],
        rows,
    );
}

fn kib(v: &Value) -> Value {
    json!(v.as_f64().map(|b| b / 1024.0))
}

/// bloomkv against each other store, for both passes.
fn print_ratios(ours: &Value, stores: &[&Value]) {
    let ratio = |a: &Value, b: &Value| match (a.as_f64(), b.as_f64()) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    };
    let rate = |s: &Value, field: &str| s[field]["gets_per_second"].clone();
    let rows = stores
        .iter()
        .filter(|s| s["store"] != "bloomkv")
        .map(|peer| {
            vec![
                format!("bloomkv / {}", peer["store"].as_str().unwrap_or("?")),
                ratio(&rate(ours, "fresh_present"), &rate(peer, "fresh_present")),
                ratio(&rate(ours, "fresh_absent"), &rate(peer, "fresh_absent")),
                ratio(&rate(ours, "present"), &rate(peer, "present")),
                ratio(&rate(ours, "absent"), &rate(peer, "absent")),
                ratio(&ours["resident_bytes"], &peer["resident_bytes"]),
                ratio(&ours["bytes_on_disk"], &peer["bytes_on_disk"]),
                ratio(&load_and_settle(ours), &load_and_settle(peer)),
            ]
        })
        .collect();
    println!();
    println!(
        "ratios: above 1 means bloomkv is faster for gets/s, larger for memory, disk and time"
    );
    print_table(
        &[
            "",
            "present (fresh)",
            "absent (fresh)",
            "present (settled)",
            "absent (settled)",
            "resident memory",
            "bytes on disk",
            "load + settle time",
        ],
        rows,
    );
}

fn load_and_settle(s: &Value) -> Value {
    let load = s["load_seconds"].as_f64();
    json!(load.map(|l| l + s["settle_seconds"].as_f64().unwrap_or(0.0)))
}

/// Prints `rows` under `headers`, each column as wide as its widest cell, the first column
/// left-aligned and the rest right-aligned.
pub fn print_table(headers: &[&str], rows: Vec<Vec<String>>) {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let text: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, &w))| match i {
                0 => format!("{cell:<w$}"),
                _ => format!("{cell:>w$}"),
            })
            .collect();
        println!("  {}", text.join("  "));
    };
    line(headers.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row);
    }
}

/// (store, keys loaded, present gets/s, absent gets/s).
type ChartPoint = (String, f64, f64, f64);

/// Gets per second against keys loaded, one line per store, present keys on the left and
/// absent keys on the right; both axes logarithmic.
fn chart_svg(docs: &[Value]) -> String {
    let mut points: Vec<ChartPoint> = Vec::new();
    for doc in docs {
        let keys = doc["keys"].as_f64().unwrap_or(0.0);
        for s in doc["stores"].as_array().into_iter().flatten() {
            // Settled gets under the store's name; those right after the load, where the
            // run has them, as a series of their own.
            for (suffix, present, absent) in [
                ("", "present", "absent"),
                (
                    " right after load (dashed)",
                    "fresh_present",
                    "fresh_absent",
                ),
            ] {
                if let (Some(name), Some(p), Some(a)) = (
                    s["store"].as_str(),
                    s[present]["gets_per_second"].as_f64(),
                    s[absent]["gets_per_second"].as_f64(),
                ) {
                    points.push((format!("{name}{suffix}"), keys, p, a));
                }
            }
        }
    }
    points.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let (w, h, pad) = (420.0, 320.0, 60.0);
    let span = |f: &dyn Fn(&ChartPoint) -> f64| {
        let lo = points
            .iter()
            .map(f)
            .fold(f64::MAX, f64::min)
            .max(1.0)
            .log10()
            .floor();
        let hi = points.iter().map(f).fold(1.0, f64::max).log10().ceil();
        (lo, hi.max(lo + 1.0))
    };
    let (kx0, kx1) = span(&|p| p.1);
    let (gy0, gy1) = span(&|p| p.2.min(p.3));
    let (_, gy1b) = span(&|p| p.2.max(p.3));
    let gy1 = gy1.max(gy1b);
    let mut svg = svg_start(2.0 * w, h + 20.0);
    svg.push_str(&svg_text(pad, 14.0, &memory_limits_title(docs)));
    svg.push_str("<g transform=\"translate(0,20)\">\n");
    for (panel, title) in [(0usize, "present-key gets/s"), (1, "absent-key gets/s")] {
        let x0 = panel as f64 * w;
        let sx = |k: f64| x0 + pad + (w - 2.0 * pad) * (k.log10() - kx0) / (kx1 - kx0);
        let sy = |g: f64| h - pad - (h - 2.0 * pad) * (g.max(1.0).log10() - gy0) / (gy1 - gy0);
        svg.push_str(&svg_text(
            x0 + pad,
            20.0,
            &format!("{title} against keys loaded (log scales)"),
        ));
        for decade in (kx0 as i32)..=(kx1 as i32) {
            let x = sx(10f64.powi(decade));
            svg.push_str(&svg_grid_x(x, pad, h - pad, &format!("1e{decade}")));
        }
        for decade in (gy0 as i32)..=(gy1 as i32) {
            let y = sy(10f64.powi(decade));
            svg.push_str(&svg_grid_y(
                y,
                x0 + pad,
                x0 + w - pad,
                &format!("1e{decade}"),
            ));
        }
        let mut names: Vec<&str> = points.iter().map(|p| p.0.as_str()).collect();
        names.dedup();
        for (i, name) in names.iter().enumerate() {
            let line: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.0 == *name)
                .map(|p| (sx(p.1), sy(if panel == 0 { p.2 } else { p.3 })))
                .collect();
            let legend = (x0 + pad + 6.0, 40.0 + 14.0 * i as f64);
            let series = svg_series(&line, name, legend, true);
            // Gets right after the load dashed, settled ones solid.
            svg.push_str(&match name.ends_with(" right after load (dashed)") {
                true => series.replace(
                    "stroke-width=\"2\"",
                    "stroke-width=\"2\" stroke-dasharray=\"6,3\"",
                ),
                false => series,
            });
        }
        svg.push_str(&svg_text(
            x0 + w / 2.0 - 30.0,
            h - pad + 32.0,
            "keys loaded",
        ));
    }
    svg.push_str("</g>\n</svg>\n");
    svg
}

/// The chart's title: each run's workload (keys, value size and kind) and the memory it was
/// held to, so that a chart read on its own says what was measured.
/// The memory a run's stores were held to, as its report's first line says it.
pub fn memory_limit_text(doc: &Value) -> String {
    doc["memory_limit_bytes"]
        .as_u64()
        .map_or("not limited".to_string(), |b| {
            format!("held to {} MiB (process and page cache)", b >> 20)
        })
}

fn memory_limits_title(docs: &[Value]) -> String {
    let runs: Vec<String> = docs.iter().map(workload_title).collect();
    format!(
        "{} (each store in its own process, with its page cache)",
        runs.join("; ")
    )
}

/// How a run's load wrote its keys: "one put per write" or "in batches of 1000 puts" (runs
/// recorded before `--load-batch` wrote batches of 1,000).
fn load_text(doc: &Value) -> String {
    match doc["load_batch"].as_u64().unwrap_or(1000) {
        1 => "one put per write".to_string(),
        n => format!("in batches of {n} puts"),
    }
}

/// A run's keys, values, lookups (when not uniform) and memory limit, as a chart's title
/// names them: "100000000 keys, 100-byte random values, held to 1024 MiB".
pub fn workload_title(doc: &Value) -> String {
    let limit = doc["memory_limit_bytes"]
        .as_u64()
        .map_or("no memory limit".to_string(), |b| {
            format!("held to {} MiB", b >> 20)
        });
    let values = match (doc["value_size"].as_u64(), doc["values"].as_str()) {
        (Some(size), Some(kind)) => format!(", {size}-byte {kind} values"),
        _ => String::new(),
    };
    let lookups = match doc["distribution"].as_str() {
        Some(law) if law != "uniform" => format!(", lookups by {law}"),
        _ => String::new(),
    };
    let load = match doc["load_batch"].as_u64() {
        Some(1) => ", one put per write",
        _ => "",
    };
    format!("{} keys{values}{load}{lookups}, {limit}", doc["keys"])
}

/// The color of a store's line on every chart (`--stores` names and the names the stores
/// report for themselves alike).
pub fn store_color(name: &str) -> &'static str {
    // A series such as "bloomkv right after load" takes its store's color.
    let store = name.split_whitespace().next().unwrap_or_default();
    match store.to_ascii_lowercase().as_str() {
        "bloomkv" => "#4a7ab7",
        "rocksdb" => "#c0392b",
        "rocksdb-shape" => "#e67e22",
        "rocksdb-partitioned" => "#8e44ad",
        "fjall" => "#27ae60",
        _ => "#555555",
    }
}

/// The opening of a chart `width` by `height` on white; close it with `</svg>`.
pub fn svg_start(width: f64, height: f64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    )
}

/// `text` at (x, y).
pub fn svg_text(x: f64, y: f64, text: &str) -> String {
    format!("<text x=\"{x:.0}\" y=\"{y:.0}\">{text}</text>\n")
}

/// A vertical grid line at `x` from `top` to `bottom`, labelled `label` below it.
pub fn svg_grid_x(x: f64, top: f64, bottom: f64, label: &str) -> String {
    format!(
        "<line x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" stroke=\"#ddd\"/>\n<text x=\"{:.1}\" y=\"{:.1}\">{label}</text>\n",
        x - 10.0,
        bottom + 15.0
    )
}

/// A horizontal grid line at `y` from `left` to `right`, labelled `label` left of it.
pub fn svg_grid_y(y: f64, left: f64, right: f64, label: &str) -> String {
    format!(
        "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\n<text x=\"{:.1}\" y=\"{:.1}\">{label}</text>\n",
        left - 50.0,
        y + 4.0
    )
}

/// A store's line through `points` (in the chart's coordinates), in the store's color, with
/// its name in the legend at `legend` and, when `dots`, a dot at each point.
pub fn svg_series(points: &[(f64, f64)], name: &str, legend: (f64, f64), dots: bool) -> String {
    let color = store_color(name);
    let line: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    let mut svg = format!(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>\n<text x=\"{:.0}\" y=\"{:.0}\" fill=\"{color}\">{name}</text>\n",
        line.join(" "),
        legend.0,
        legend.1,
    );
    if dots {
        for (x, y) in points {
            svg.push_str(&format!(
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{color}\"/>\n"
            ));
        }
    }
    svg
}
