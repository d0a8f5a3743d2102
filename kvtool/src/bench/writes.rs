//! `kvtool bench --stores bloomkv,rocksdb,rocksdb-shape,fjall --writes`: sustained writes,
//! store against store, each store in a process of its own (optionally held with its page
//! cache to a memory limit by a memory cgroup), the way `--stores` runs lookups
//! (`stores.rs`).
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

use indicatif::ProgressBar;
use serde_json::{json, Value};

use super::args::BenchArgs;
use super::children::{
    add_cgroup_figures, bloomkv_options, check_stores, child_args, enter_cgroup, open_bloomkv,
    resident, run_children,
};
use super::files::{scratch_dir, write_result};
use super::keys::bench_key;
use super::memory;
use super::workload::Workload;
use super::write_store::{Bloomkv, WriteStore};
use super::writes_report::{chart_svg, print_report};
use crate::{progress, Failure};

/// The stores `--writes` can run.
const WRITE_STORES: [&str; 4] = ["bloomkv", "rocksdb", "rocksdb-shape", "fjall"];

/// Bytes of a key.
const KEY_SIZE: u64 = 16;

/// Opens `store` in `dir`.
fn open(store: &str, dir: &Path, args: &BenchArgs) -> Result<Box<dyn WriteStore>, Failure> {
    if store == "bloomkv" {
        let options = bloomkv_options(args)?;
        let (db, described) = open_bloomkv(dir, options)?;
        // Leaked once per run: the report needs the text until the process ends.
        return Ok(Box::new(Bloomkv(db, Box::leak(described.into_boxed_str()))));
    }
    open_peer(store, dir)
}

#[cfg(feature = "peers")]
fn open_peer(store: &str, dir: &Path) -> Result<Box<dyn WriteStore>, Failure> {
    super::peer_writes::open_for_writes(store, dir)
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
        "variant": args.variant,
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
    let bytes_on_disk = memory::dir_bytes(dir)?;
    let bytes_allocated = memory::dir_allocated_bytes(dir).ok();
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
}
