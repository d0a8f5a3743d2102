//! `kvtool bench --stores bloomkv,rocksdb,rocksdb-shape,fjall --writes`: sustained writes,
//! store against store, each store in a process of its own (optionally held with its page
//! cache to a memory limit by a memory cgroup), the way `--stores` runs lookups
//! (`compare.rs`).
//!
//! Each child runs two phases.
//!
//! 1. **Load.** One thread writes `--keys` keys (16 bytes, spread over the key space in
//!    random order; the values of the lookup bench), one put per write, not synced: bloomkv
//!    `Db::put`, RocksDB `put`, fjall `insert`. Then the memtable is flushed (the load time
//!    ends there), and the store is left to settle its compactions (bloomkv
//!    `wait_for_background_work`; RocksDB `wait_for_compact` with flush; fjall offers no way
//!    to wait, so its settle time is reported as not waited, `null`, and its figures are taken
//!    while its compactions may still run). A sampler thread reads the count of puts done
//!    every second, for the chart. At the end the child records:
//!    - puts per second counting load and settle, and counting the load alone;
//!    - time writes were stalled, as the store counts it (bloomkv `Stats::stall_micros`,
//!      RocksDB's `STALL_MICROS` ticker; fjall counts none);
//!    - write amplification two ways, both over the user bytes `keys * (16 + value size)`:
//!      the store's own count of the bytes it wrote (bloomkv `Stats::write_amplification`:
//!      WAL, flushes and compactions; RocksDB `WAL_FILE_BYTES + FLUSH_WRITE_BYTES +
//!      COMPACT_WRITE_BYTES`; fjall counts none) and the kernel's (`write_bytes` of
//!      `/proc/self/io` from before the store is opened to the end of the settle). The
//!      kernel charges a page when the process dirties it, so a page rewritten before it
//!      reaches the disk counts once, and a page of a file deleted before writeback counts
//!      too (`cancelled_write_bytes`, recorded beside it, counts those);
//!    - bytes on disk: the lengths of every file of the store's directory, and the blocks
//!      the file system allocated to them (fjall makes its journal long in advance, so its
//!      files' lengths overstate what it stores).
//! 2. **Synced.** For each count T of `--writer-threads`, T threads write `--synced-keys`
//!    keys between them (disjoint ranges of key indexes, after the load's), each key a write
//!    of its own that is on stable storage when it returns: bloomkv `write_opt` with
//!    `WriteOptions::synced()`, RocksDB `put_opt` with `set_sync(true)`, fjall a batch of one
//!    committed with `PersistMode::SyncData` (all three then fdatasync their log). Recorded:
//!    puts per second, latency percentiles, the kernel's bytes written per put, and the
//!    writes each log append carried (bloomkv `Stats::batches_per_write_group`, RocksDB's
//!    `WRITE_DONE_BY_SELF` and `WRITE_DONE_BY_OTHER` tickers).
//!
//!    Each thread count gets a fresh, empty store, and the loaded store is deleted first.
//!    Synced writes measure the commit path: what a sync costs and how many writers one sync
//!    serves. In the loaded store they would also measure whatever compaction debt the load
//!    left (none for bloomkv and RocksDB, which settled; some for fjall, which cannot), and
//!    the second thread count would meet a tree the first one had changed; fresh stores give
//!    every store and every thread count the same start, so the ratio of T threads to one
//!    is the commit path's alone.
//!
//! The parent prints a table per phase, writes every figure with `--json`, and with
//! `--chart` draws puts per second over the load, one line per store. A child that fails is
//! recorded as failed and the others still run.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use bloomkv::{Db, WriteBatch, WriteOptions};
use indicatif::ProgressBar;
use serde_json::{json, Value};

use crate::bench::{bench_key, scratch_dir, write_result, BenchArgs, Workload};
use crate::compare::{
    add_cgroup_figures, check_stores, child_args, enter_cgroup, mib, number, resident,
    run_children, svg_grid_x, svg_grid_y, svg_series, svg_start, svg_text, workload_title,
};
use crate::{memlimit, progress, Failure};

/// The stores `--writes` can run.
const WRITE_STORES: [&str; 4] = ["bloomkv", "rocksdb", "rocksdb-shape", "fjall"];

/// Bytes of a key.
const KEY_SIZE: u64 = 16;

/// A store as `bench --writes` drives it.
pub trait WriteStore: Sync {
    /// How the store is configured, for the report.
    fn configuration(&self) -> &'static str;
    /// Writes `key` = `value` as a write of its own, not synced.
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Writes `key` = `value` as a write of its own, on stable storage when it returns.
    fn put_synced(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    /// Writes the memtable to a table and waits for it.
    fn flush(&self) -> Result<(), String>;
    /// Waits until compactions settle and says how; `None` when the store offers no way to
    /// wait.
    fn settle(&self) -> Result<Option<&'static str>, String>;
    /// What the store counts about its own writes since it was opened; `user_bytes` are the
    /// key and value bytes written, for stores that do not count them.
    fn counters(&self, user_bytes: u64) -> OwnCounters;
    /// Closes the store.
    fn close(self: Box<Self>) -> Result<(), String>;
}

/// A store's own counts of its writes; `None` where it counts nothing of the kind.
#[derive(Debug, Default)]
pub struct OwnCounters {
    pub stall_micros: Option<u64>,
    /// Bytes the store wrote for its data per byte of keys and values.
    pub write_amplification: Option<f64>,
    /// Writes per log append.
    pub batches_per_write_group: Option<f64>,
    /// The counters behind these, and more, by the store's own names.
    pub details: Value,
}

/// bloomkv as `bench --writes` drives it, with the options it was opened with, described.
struct Bloomkv(Db, &'static str);

impl WriteStore for Bloomkv {
    fn configuration(&self) -> &'static str {
        self.1
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.0.put(key, value).map_err(|e| e.to_string())
    }

    fn put_synced(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.0
            .write_opt(batch, &WriteOptions::synced())
            .map_err(|e| e.to_string())
    }

    fn flush(&self) -> Result<(), String> {
        self.0.flush().map_err(|e| e.to_string())
    }

    fn settle(&self) -> Result<Option<&'static str>, String> {
        self.0
            .wait_for_background_work()
            .map_err(|e| e.to_string())?;
        Ok(Some("wait_for_background_work"))
    }

    fn counters(&self, _user_bytes: u64) -> OwnCounters {
        let s = self.0.stats();
        OwnCounters {
            stall_micros: Some(s.stall_micros),
            write_amplification: s.write_amplification(),
            batches_per_write_group: s.batches_per_write_group(),
            details: json!({
                "user_bytes_written": s.user_bytes_written,
                "wal_bytes_written": s.wal_bytes_written,
                "flush_bytes_written": s.flush_bytes_written(),
                "compaction_bytes_written": s.compaction_bytes_written(),
                "compaction_bytes_read": s.compaction_bytes_read(),
                "disk_bytes_written": s.disk_bytes_written(),
                "write_stalls": s.write_stalls,
                "stall_micros": s.stall_micros,
                "write_groups": s.write_groups,
                "grouped_batches": s.grouped_batches,
                "flushes": s.flushes,
                "compactions": s.compactions,
                "trivial_moves": s.trivial_moves,
                "split_compactions": s.split_compactions,
                "tables_per_level": s.levels.iter().map(|l| l.tables).collect::<Vec<_>>(),
                "levels": crate::commands::levels_json(&s),
            }),
        }
    }

    fn close(self: Box<Self>) -> Result<(), String> {
        self.0.close().map_err(|e| e.to_string())
    }
}

/// Opens `store` in `dir`.
fn open(store: &str, dir: &Path, args: &BenchArgs) -> Result<Box<dyn WriteStore>, Failure> {
    if store == "bloomkv" {
        let options = crate::compare::bloomkv_options(args)?;
        // Leaked once per run: the report needs the text until the process ends.
        let described: &'static str = Box::leak(format!("{options:?}").into_boxed_str());
        return Ok(Box::new(Bloomkv(Db::open(dir, options)?, described)));
    }
    open_peer(store, dir)
}

#[cfg(feature = "peers")]
fn open_peer(store: &str, dir: &Path) -> Result<Box<dyn WriteStore>, Failure> {
    crate::peers::open_for_writes(store, dir)
}

#[cfg(not(feature = "peers"))]
fn open_peer(store: &str, _: &Path) -> Result<Box<dyn WriteStore>, Failure> {
    Err(Failure::from(format!(
        "--stores {store} needs kvtool built with `--features peers`"
    )))
}

/// Checks the arguments of a `--writes` run, before any store is made.
fn check_args(args: &BenchArgs) -> Result<(), Failure> {
    if args.stores.is_empty() {
        return Err(Failure::from(format!(
            "--writes compares stores: add --stores with some of {}",
            WRITE_STORES.join(",")
        )));
    }
    check_stores(&args.stores, &WRITE_STORES, " with --writes")?;
    if args.keys == 0 {
        return Err(Failure::from("--writes needs at least one key (--keys)"));
    }
    if !args.chart_from.is_empty() {
        return Err(Failure::from(
            "--chart-from puts earlier lookup runs on the lookup chart; it does not apply to --writes",
        ));
    }
    if args.synced_keys > 0 {
        let Some(&most) = args.writer_threads.iter().max() else {
            return Err(Failure::from(
                "--writer-threads needs at least one thread count",
            ));
        };
        if args.synced_keys < u64::from(most) {
            return Err(Failure::from(format!(
                "--synced-keys {} is fewer than the {most} threads of --writer-threads: each thread needs a key",
                args.synced_keys
            )));
        }
    }
    Ok(())
}

/// Runs every store of `args.stores` in a child process and reports them side by side.
pub fn run(args: &BenchArgs, dir: Option<&Path>) -> Result<(), Failure> {
    check_args(args)?;
    let temp = scratch_dir(dir, "bloomkv-writes")?;
    let threads: Vec<String> = args.writer_threads.iter().map(u32::to_string).collect();
    let runs = run_children(&args.stores, temp.path(), |store, out| {
        let mut v = child_args(args, store, out);
        v.extend([
            "--writes".to_string(),
            "--synced-keys".to_string(),
            args.synced_keys.to_string(),
            "--writer-threads".to_string(),
            threads.join(","),
        ]);
        v
    })?;
    let doc = json!({
        "benchmark": "writes",
        "keys": args.keys, "key_size": KEY_SIZE, "value_size": args.value_size,
        "values": args.values.name(), "seed": args.seed,
        "user_bytes": user_bytes(args.keys, args.value_size),
        "synced_keys": args.synced_keys, "writer_threads": args.writer_threads,
        "memory_limit_bytes": args.memory_limit, "stores": runs,
    });
    print_report(&doc);
    if let Some(path) = &args.json {
        write_result(path, &serde_json::to_string_pretty(&doc)?)?;
    }
    if let Some(path) = &args.chart {
        write_result(path, &chart_svg(&doc))?;
    }
    Ok(())
}

/// Bytes of keys and values in `keys` pairs.
fn user_bytes(keys: u64, value_size: usize) -> u64 {
    keys * (KEY_SIZE + value_size as u64)
}

/// In the child: enters the cgroup, runs both phases on `store` in subdirectories of `dir`,
/// writes the figures.
pub fn run_child(args: &BenchArgs, dir: Option<&Path>, store: &str) -> Result<(), Failure> {
    let (Some(dir), Some(out)) = (dir, args.child_out.as_ref()) else {
        return Err(Failure::from("--child-store needs --db and --child-out"));
    };
    let cgroup = enter_cgroup(args.memory_limit)?;
    let workload = Workload::writes_only(args);
    std::fs::create_dir_all(dir)?;
    let load_dir = dir.join("load");
    let (configuration, load) = load_phase(store, args, &workload, &load_dir)?;
    std::fs::remove_dir_all(&load_dir)?;
    let mut synced = Vec::new();
    if args.synced_keys > 0 {
        for &threads in &args.writer_threads {
            let synced_dir = dir.join(format!("synced-{threads}"));
            synced.push(synced_phase(store, args, &workload, &synced_dir, threads)?);
            std::fs::remove_dir_all(&synced_dir)?;
        }
    }
    let (resident_bytes, peak_resident_bytes) = resident()?;
    let mut figures = json!({
        "store": store, "configuration": configuration,
        "load": load, "synced": synced,
        "resident_bytes": resident_bytes, "peak_resident_bytes": peak_resident_bytes,
    });
    add_cgroup_figures(&mut figures, cgroup.as_ref());
    std::fs::write(out, serde_json::to_string_pretty(&figures)?)?;
    Ok(())
}

/// The kernel's count of this process's I/O (`/proc/self/io`), threads included.
#[derive(Debug, Clone, Copy)]
struct ProcessIo {
    read_bytes: u64,
    write_bytes: u64,
    cancelled_write_bytes: u64,
}

/// `None` where the kernel does not count (no `/proc/self/io`).
fn process_io() -> Option<ProcessIo> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(ProcessIo {
        read_bytes: field("read_bytes")?,
        write_bytes: field("write_bytes")?,
        cancelled_write_bytes: field("cancelled_write_bytes")?,
    })
}

/// The kernel's I/O between `before` and `after`.
fn io_between(before: Option<ProcessIo>, after: Option<ProcessIo>) -> Option<ProcessIo> {
    let (b, a) = (before?, after?);
    Some(ProcessIo {
        read_bytes: a.read_bytes.saturating_sub(b.read_bytes),
        write_bytes: a.write_bytes.saturating_sub(b.write_bytes),
        cancelled_write_bytes: a
            .cancelled_write_bytes
            .saturating_sub(b.cancelled_write_bytes),
    })
}

/// Puts done, sampled about every second until `stop` is dropped: (seconds since `started`,
/// puts done by then), from (0, 0) to the moment the writer stopped. Moves `bar` along.
fn sample_puts(
    done: &AtomicU64,
    started: Instant,
    stop: mpsc::Receiver<()>,
    bar: &ProgressBar,
) -> Vec<(f64, u64)> {
    let mut samples = vec![(0.0, 0)];
    let second = Duration::from_secs(1);
    let mut next = second;
    loop {
        let stopped = !matches!(
            stop.recv_timeout(Duration::from_millis(100)),
            Err(RecvTimeoutError::Timeout)
        );
        let elapsed = started.elapsed();
        let puts = done.load(Ordering::Relaxed);
        bar.set_position(puts);
        if stopped {
            samples.push((elapsed.as_secs_f64(), puts));
            return samples;
        }
        if elapsed >= next {
            samples.push((elapsed.as_secs_f64(), puts));
            while next <= elapsed {
                next += second;
            }
        }
    }
}

/// The load phase in a fresh store in `dir`: its configuration and figures.
fn load_phase(
    store: &str,
    args: &BenchArgs,
    workload: &Workload,
    dir: &Path,
) -> Result<(&'static str, Value), Failure> {
    let io_before = process_io();
    let db = open(store, dir, args)?;
    let user_bytes = user_bytes(workload.keys, workload.value_size);
    let done = AtomicU64::new(0);
    let bar = progress::bar(workload.keys, &format!("load, one put per write ({store})"));
    let started = Instant::now();
    let (written, timeline) = std::thread::scope(|scope| {
        let (stop, stopped) = mpsc::channel::<()>();
        let (done, bar) = (&done, &bar);
        let sampler = scope.spawn(move || sample_puts(done, started, stopped, bar));
        let written = (0..workload.keys).try_for_each(|i| {
            db.put(&bench_key(i, true), &workload.value(i))?;
            done.fetch_add(1, Ordering::Relaxed);
            Ok::<(), String>(())
        });
        drop(stop);
        (written, sampler.join().expect("the sampler does not panic"))
    });
    written.map_err(Failure::from)?;
    db.flush().map_err(Failure::from)?;
    let load_seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let waiting = progress::waiting(&format!("compactions ({store})"));
    let settling = Instant::now();
    let settle_method = db.settle().map_err(Failure::from)?;
    let settle_seconds = settle_method.map(|_| settling.elapsed().as_secs_f64());
    waiting.finish_and_clear();
    let counters = db.counters(user_bytes);
    let io = io_between(io_before, process_io());
    let bytes_on_disk = memlimit::dir_bytes(dir)?;
    let bytes_allocated = memlimit::dir_allocated_bytes(dir).ok();
    let configuration = db.configuration();
    db.close().map_err(Failure::from)?;
    let keys = workload.keys as f64;
    Ok((
        configuration,
        json!({
            "keys": workload.keys,
            "user_bytes": user_bytes,
            "load_seconds": load_seconds,
            "settle_seconds": settle_seconds,
            "settle": settle_method.unwrap_or("not waited: the store offers no way to wait for its compactions"),
            "puts_per_second": keys / (load_seconds + settle_seconds.unwrap_or(0.0)),
            "load_puts_per_second": keys / load_seconds,
            "stall_seconds": counters.stall_micros.map(|m| m as f64 / 1e6),
            "write_amplification": counters.write_amplification,
            "kernel_write_amplification": io.map(|io| io.write_bytes as f64 / user_bytes as f64),
            "kernel_write_bytes": io.map(|io| io.write_bytes),
            "kernel_cancelled_write_bytes": io.map(|io| io.cancelled_write_bytes),
            "kernel_read_bytes": io.map(|io| io.read_bytes),
            "bytes_on_disk": bytes_on_disk,
            "bytes_allocated_on_disk": bytes_allocated,
            "counters": counters.details,
            "timeline": timeline.iter().map(|&(s, puts)| json!([s, puts])).collect::<Vec<_>>(),
        }),
    ))
}

/// The first key index and the count of keys of thread `t` of `threads` sharing `keys`.
fn share(keys: u64, threads: u32, t: u32) -> (u64, u64) {
    let (threads, t) = (u64::from(threads), u64::from(t));
    let (each, rest) = (keys / threads, keys % threads);
    (t * each + t.min(rest), each + u64::from(t < rest))
}

/// The synced phase for one thread count, in a fresh store in `dir`.
fn synced_phase(
    store: &str,
    args: &BenchArgs,
    workload: &Workload,
    dir: &Path,
    threads: u32,
) -> Result<Value, Failure> {
    let keys = args.synced_keys;
    let io_before = process_io();
    let opened = open(store, dir, args)?;
    let db: &dyn WriteStore = &*opened;
    let plural = if threads == 1 { "" } else { "s" };
    let bar = progress::bar(
        keys,
        &format!("synced writes, {threads} thread{plural} ({store})"),
    );
    let start = Barrier::new(threads as usize + 1);
    let (seconds, mut latencies) = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..threads)
            .map(|t| {
                let (first, count) = share(keys, threads, t);
                let (start, bar) = (&start, &bar);
                scope.spawn(move || -> Result<Vec<u64>, String> {
                    let mut latencies = Vec::with_capacity(count as usize);
                    start.wait();
                    for n in 0..count {
                        // After the load's indexes, so the keys are never the load's.
                        let index = workload.keys + first + n;
                        let (key, value) = (bench_key(index, true), workload.value(index));
                        let put = Instant::now();
                        db.put_synced(&key, &value)?;
                        latencies.push(put.elapsed().as_nanos() as u64);
                        if n % 64 == 63 {
                            bar.inc(64);
                        }
                    }
                    Ok(latencies)
                })
            })
            .collect();
        start.wait();
        let started = Instant::now();
        let mut all = Vec::with_capacity(keys as usize);
        let mut failed = None;
        for writer in writers {
            match writer.join().expect("a writer does not panic") {
                Ok(latencies) => all.extend(latencies),
                Err(e) => failed = Some(e),
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        failed.map_or(Ok((seconds, all)), Err)
    })
    .map_err(Failure::from)?;
    bar.finish_and_clear();
    let user_bytes = user_bytes(keys, workload.value_size);
    let counters = db.counters(user_bytes);
    let io = io_between(io_before, process_io());
    opened.close().map_err(Failure::from)?;
    latencies.sort_unstable();
    let percentile = |q: f64| {
        let at = ((latencies.len().max(1) - 1) as f64 * q) as usize;
        latencies.get(at).map(|&ns| ns as f64 / 1e3)
    };
    Ok(json!({
        "threads": threads,
        "keys": keys,
        "seconds": seconds,
        "puts_per_second": keys as f64 / seconds.max(1e-9),
        "p50_us": percentile(0.5),
        "p99_us": percentile(0.99),
        "max_us": percentile(1.0),
        "batches_per_write_group": counters.batches_per_write_group,
        "stall_seconds": counters.stall_micros.map(|m| m as f64 / 1e6),
        "write_amplification": counters.write_amplification,
        "kernel_write_bytes": io.map(|io| io.write_bytes),
        "kernel_write_bytes_per_put": io.map(|io| io.write_bytes as f64 / keys as f64),
        "counters": counters.details,
    }))
}

fn store_name(s: &Value) -> &str {
    s["store"].as_str().unwrap_or("?")
}

fn seconds(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        v => number(v, 1),
    }
}

fn print_report(doc: &Value) {
    println!(
        "sustained writes: {} keys of 16 bytes, {}-byte {} values, in random order; memory {}",
        doc["keys"],
        doc["value_size"],
        doc["values"].as_str().unwrap_or("?"),
        crate::compare::memory_limit_text(doc),
    );
    let empty = Vec::new();
    let stores = doc["stores"].as_array().unwrap_or(&empty);
    println!();
    println!("load: one thread, one unsynced put per write; then a flush (load s ends there), then until compactions settled (settle s; '-': the store cannot wait for them)");
    println!("  puts/s counts load and settle; write amp = bytes written / {} bytes of keys and values: the store's own count, and the kernel's (write_bytes)", doc["user_bytes"]);
    println!(
        "  {:<13} {:>8} {:>12} {:>8} {:>9} {:>8} {:>14} {:>7} {:>9} {:>13} {:>13} {:>16}",
        "store",
        "puts/s",
        "load puts/s",
        "load s",
        "settle s",
        "stall s",
        "write amp own",
        "kernel",
        "files MiB",
        "allocated MiB",
        "peak RSS MiB",
        "cgroup peak MiB"
    );
    for s in stores {
        if let Some(failure) = s["failed"].as_str() {
            println!("  {:<13} failed: {failure}", store_name(s));
            continue;
        }
        let l = &s["load"];
        println!(
            "  {:<13} {:>8} {:>12} {:>8} {:>9} {:>8} {:>14} {:>7} {:>9} {:>13} {:>13} {:>16}",
            store_name(s),
            number(&l["puts_per_second"], 0),
            number(&l["load_puts_per_second"], 0),
            number(&l["load_seconds"], 1),
            seconds(&l["settle_seconds"]),
            seconds(&l["stall_seconds"]),
            number(&l["write_amplification"], 2),
            number(&l["kernel_write_amplification"], 2),
            mib(&l["bytes_on_disk"]),
            mib(&l["bytes_allocated_on_disk"]),
            mib(&s["peak_resident_bytes"]),
            mib(&s["cgroup_peak_bytes"]),
        );
    }
    let threads: Vec<u64> = doc["writer_threads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_u64)
        .collect();
    if doc["synced_keys"].as_u64().unwrap_or(0) == 0 || threads.is_empty() {
        return;
    }
    let first = threads[0];
    println!();
    println!(
        "synced: {} keys per thread count, shared among the threads, one synced put per write, a fresh store each",
        doc["synced_keys"]
    );
    println!(
        "  {:<13} {:>8} {:>9} {:>9} {:>7} {:>8} {:>18} {:>15}",
        "store",
        "threads",
        "puts/s",
        format!("vs {first}"),
        "p50 us",
        "p99 us",
        "writes/log append",
        "kernel KiB/put"
    );
    for s in stores {
        if s["failed"].is_string() {
            continue;
        }
        let runs = s["synced"].as_array().unwrap_or(&empty);
        let base = runs
            .iter()
            .find(|r| r["threads"].as_u64() == Some(first))
            .and_then(|r| r["puts_per_second"].as_f64());
        for r in runs {
            let ratio = match (r["puts_per_second"].as_f64(), base) {
                (Some(p), Some(b)) if b > 0.0 => format!("{:.2}x", p / b),
                _ => "-".into(),
            };
            println!(
                "  {:<13} {:>8} {:>9} {:>9} {:>7} {:>8} {:>18} {:>15}",
                store_name(s),
                r["threads"].as_u64().unwrap_or(0),
                number(&r["puts_per_second"], 0),
                ratio,
                number(&r["p50_us"], 0),
                number(&r["p99_us"], 0),
                number(&r["batches_per_write_group"], 2),
                r["kernel_write_bytes_per_put"]
                    .as_f64()
                    .map_or("-".into(), |b| format!("{:.1}", b / 1024.0)),
            );
        }
    }
}

/// Puts per second over the load, one line per store: each point the puts of one sampling
/// interval (about a second) over its length, at the interval's middle.
fn chart_svg(doc: &Value) -> String {
    let mut lines: Vec<(&str, Vec<(f64, f64)>)> = Vec::new();
    for s in doc["stores"].as_array().into_iter().flatten() {
        let samples: Vec<(f64, f64)> = s["load"]["timeline"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p[0].as_f64()?, p[1].as_f64()?)))
            .collect();
        let rate = |w: &[(f64, f64)]| {
            let seconds = (w[1].0 - w[0].0).max(1e-9);
            ((w[0].0 + w[1].0) / 2.0, (w[1].1 - w[0].1) / seconds)
        };
        // The last interval may be a sliver of a second, too short to mean anything: left
        // out, unless it is the only one.
        let mut rates: Vec<(f64, f64)> = samples
            .windows(2)
            .filter(|w| w[1].0 - w[0].0 >= 0.2)
            .map(rate)
            .collect();
        if rates.is_empty() {
            rates = samples.windows(2).map(rate).collect();
        }
        if !rates.is_empty() {
            lines.push((store_name(s), rates));
        }
    }
    // The legend takes a column right of the plot.
    let (w, h, pad, legend_width) = (800.0, 380.0, 70.0, 120.0);
    let right = w - legend_width;
    let max_t = lines
        .iter()
        .flat_map(|(_, l)| l.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let max_rate = lines
        .iter()
        .flat_map(|(_, l)| l.iter().map(|p| p.1))
        .fold(1.0, f64::max);
    let (t_step, rate_step) = (nice_step(max_t), nice_step(max_rate));
    let (t_end, rate_end) = (
        (max_t / t_step).ceil() * t_step,
        (max_rate / rate_step).ceil() * rate_step,
    );
    let sx = |t: f64| pad + (right - pad) * t / t_end;
    let sy = |r: f64| h - pad - (h - 2.0 * pad) * r / rate_end;
    let mut svg = svg_start(w, h);
    svg.push_str(&svg_text(
        pad,
        20.0,
        &format!(
            "puts/s during the load: {}; one thread, one unsynced put per write",
            workload_title(doc)
        ),
    ));
    for i in 0..=(t_end / t_step).round() as u32 {
        let t = f64::from(i) * t_step;
        svg.push_str(&svg_grid_x(sx(t), pad, h - pad, &tick(t, t_step)));
    }
    for i in 0..=(rate_end / rate_step).round() as u32 {
        let r = f64::from(i) * rate_step;
        let label = if rate_step >= 1000.0 && i > 0 {
            format!("{}k", tick(r / 1000.0, rate_step / 1000.0))
        } else {
            tick(r, rate_step)
        };
        svg.push_str(&svg_grid_y(sy(r), pad, right, &label));
    }
    for (i, (name, rates)) in lines.iter().enumerate() {
        let points: Vec<(f64, f64)> = rates.iter().map(|&(t, r)| (sx(t), sy(r))).collect();
        let legend = (right + 15.0, pad + 14.0 * i as f64);
        // Dots only where there are few points: a short load has too few for a line.
        svg.push_str(&svg_series(&points, name, legend, points.len() <= 40));
    }
    svg.push_str(&svg_text(
        (pad + right) / 2.0 - 80.0,
        h - pad + 32.0,
        "seconds since the load began",
    ));
    svg.push_str("</svg>\n");
    svg
}

/// `value`, a multiple of `step`, with as many decimals as `step` needs.
fn tick(value: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{value:.decimals$}")
}

/// A round step (1, 2 or 5 times a power of ten) that cuts `0..max` into about five.
fn nice_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(1e-9);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|&step| step >= raw)
        .unwrap_or(10.0 * magnitude)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_key_once() {
        for (keys, threads) in [(120_000, 8), (10, 3), (7, 7), (5, 1)] {
            let mut next = 0;
            for t in 0..threads {
                let (first, count) = share(keys, threads, t);
                assert_eq!(first, next);
                assert!(count >= keys / u64::from(threads));
                next = first + count;
            }
            assert_eq!(next, keys);
        }
    }

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(100.0), 20.0);
        assert_eq!(nice_step(37.0), 10.0);
        assert_eq!(nice_step(180_000.0), 50_000.0);
        assert!((nice_step(0.06) - 0.02).abs() < 1e-12);
        assert_eq!(tick(0.6000000000000001, 0.2), "0.6");
        assert_eq!(tick(150.0, 50.0), "150");
    }
}
