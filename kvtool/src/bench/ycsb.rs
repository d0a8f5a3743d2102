//! `kvtool bench --ycsb A,B,C,D,E,F --stores bloomkv,rocksdb,fjall`: YCSB's core workloads,
//! store against store, each store in a process of its own (optionally held with its page
//! cache to a memory limit by a memory cgroup), as `--stores` runs lookups (`children.rs`).
//!
//! Each child opens its store with its default options and runs, on that one store:
//!
//! 1. **Load.** `--records` records inserted by `--threads` threads (each a share of the record
//!    numbers), one put per write, not synced. Keys as YCSB builds them with
//!    `insertorder=hashed`: `"user"` and the decimal of the FNV-1a 64-bit hash of the record
//!    number (`ycsb_generators.rs`); values `--value-size` random bytes (1,000 by default,
//!    YCSB's ten fields of 100 bytes, stored here as one value). Timed over the puts alone;
//!    then the memtable is flushed and the store left to settle its compactions (bloomkv
//!    `wait_for_background_work`, RocksDB `wait_for_compact`; fjall cannot wait, so its
//!    workloads meet whatever compactions the load left), so that every store starts the
//!    workloads from a settled tree.
//! 2. **The workloads asked for, in YCSB's order** (A, B, C, F, D, E: D and E insert records,
//!    so they go last), back to back on the same store, nothing settled between them, as
//!    YCSB runs them. Each is `--operations` operations shared among `--threads` threads,
//!    each operation drawn by the workload's shares (`ycsb_workloads.rs`):
//!    - read: a get of the whole record (its value's bytes counted, so nothing is left
//!      unread);
//!    - update: a put of a whole new value (YCSB's `writeallfields=false` rewrites one field
//!      of ten; a record here is one value, so an update writes all of it);
//!    - insert: a put of the next record number past the ones there are (an atomic counter
//!      shared by the threads);
//!    - scan: from a record's key, the next 1 to 100 records in key order (uniform length);
//!    - read-modify-write: a read of the record, then a put of a new value in its place.
//!
//!    Requests pick their records by the workload's distribution (or
//!    `--request-distribution`): YCSB's scrambled Zipfian (`--zipf-constant`, 0.99), uniform,
//!    or its skewed latest for D. Reads pick only records whose insert has returned, and
//!    every record before them too (YCSB's acknowledged counter), so a read that finds
//!    nothing is a lost record, not a race.
//!
//! Every operation's latency goes into a histogram (`latency_histogram.rs`), per operation
//! kind. Reported per store and workload: operations per second over the wall time of all
//! threads, p50, p99 and p99.9 latency (and per operation kind), and the reads that found
//! nothing. The parent prints a table per workload, writes every figure with `--json`, and
//! with `--chart` draws operations per second per workload, a bar per store.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use indicatif::ProgressBar;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use serde_json::{json, Map, Value};

use super::args::BenchArgs;
use super::children::{
    bloomkv_options, check_stores, child_args, open_bloomkv, resident, run_children,
};
use super::files::{scratch_dir, write_result};
use super::keys::splitmix;
use super::latency_histogram::LatencyHistogram;
use super::ycsb_generators::{ycsb_key, ScrambledZipfian, SkewedLatest};
use super::ycsb_report::{chart_svg, print_report};
use super::ycsb_store::{Bloomkv, YcsbStore};
use super::ycsb_workloads::{CoreWorkload, Operation, RequestDistribution, MAX_SCAN_LENGTH};
use crate::{progress, Failure};

/// The stores `--ycsb` can run.
const YCSB_STORES: [&str; 3] = ["bloomkv", "rocksdb", "fjall"];

/// How the keys are made, for the report.
const KEY_FORMAT: &str =
    "\"user\" + the decimal FNV-1a 64-bit hash of the record number (YCSB insertorder=hashed)";

/// Opens `store` in `dir`.
fn open(store: &str, dir: &Path, args: &BenchArgs) -> Result<Box<dyn YcsbStore>, Failure> {
    if store == "bloomkv" {
        let options = bloomkv_options(args)?;
        let (db, described) = open_bloomkv(dir, options)?;
        // Leaked once per run: the report needs the text until the process ends.
        return Ok(Box::new(Bloomkv(db, Box::leak(described.into_boxed_str()))));
    }
    open_peer(store, dir)
}

#[cfg(feature = "peers")]
fn open_peer(store: &str, dir: &Path) -> Result<Box<dyn YcsbStore>, Failure> {
    super::peer_ycsb::open_for_ycsb(store, dir)
}

#[cfg(not(feature = "peers"))]
fn open_peer(store: &str, _: &Path) -> Result<Box<dyn YcsbStore>, Failure> {
    Err(Failure::from(format!(
        "--stores {store} needs kvtool built with `--features peers`"
    )))
}

/// The stores of a `--ycsb` run: `--stores`, or bloomkv alone.
fn stores(args: &BenchArgs) -> Vec<String> {
    match args.stores.is_empty() {
        true => vec!["bloomkv".to_string()],
        false => args.stores.clone(),
    }
}

/// Runs every store in a child process and reports them side by side.
pub fn run(args: &BenchArgs, dir: Option<&Path>) -> Result<(), Failure> {
    let stores = stores(args);
    check_stores(&stores, &YCSB_STORES, " with --ycsb")?;
    if !args.chart_from.is_empty() {
        return Err(Failure::from(
            "--chart-from puts earlier lookup runs on the lookup chart; it does not apply to --ycsb",
        ));
    }
    let workloads = CoreWorkload::in_standard_order(&args.ycsb);
    let letters: Vec<&str> = workloads.iter().map(|w| w.letter()).collect();
    let commit = source_commit();
    let temp = scratch_dir(dir, "bloomkv-ycsb")?;
    let runs = run_children(&stores, temp.path(), |store, out| {
        let mut v = child_args(args, store, out);
        v.extend([
            "--ycsb".to_string(),
            letters.join(","),
            "--records".to_string(),
            args.records.to_string(),
            "--operations".to_string(),
            args.operations.to_string(),
            "--threads".to_string(),
            args.threads.to_string(),
            "--zipf-constant".to_string(),
            args.zipf_constant.to_string(),
        ]);
        if let Some(law) = args.request_distribution {
            v.extend(["--request-distribution".to_string(), law.name().to_string()]);
        }
        v
    })?;
    let doc = json!({
        "benchmark": "ycsb",
        "workloads": letters,
        "records": args.records, "operations": args.operations, "threads": args.threads,
        "key_format": KEY_FORMAT,
        "value_size": args.value_size, "values": "random",
        "request_distribution": args.request_distribution.map(RequestDistribution::name),
        "zipf_constant": args.zipf_constant, "max_scan_length": MAX_SCAN_LENGTH,
        "seed": args.seed, "memory_limit_bytes": args.memory_limit,
        "commit": commit, "variant": args.variant,
        "stores": runs,
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

/// The commit checked out in the source tree kvtool was built from (`git rev-parse --short
/// HEAD` there, when the run starts), or `None` where there is no such tree or no git.
fn source_commit() -> Option<String> {
    let out = Command::new("git")
        .args([
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short",
            "HEAD",
        ])
        .output()
        .ok()?;
    let commit = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !commit.is_empty()).then_some(commit)
}

/// In the child: enters the cgroup, loads the store in `dir` and runs the workloads on it,
/// writes the figures.
pub fn run_child(args: &BenchArgs, dir: Option<&Path>, store: &str) -> Result<(), Failure> {
    super::children::run_in_child(args, dir, |dir| measure_child(args, dir, store))
}

/// The figures of `store`'s load and workloads in `dir`.
fn measure_child(args: &BenchArgs, dir: &Path, store: &str) -> Result<Value, Failure> {
    let db = open(store, dir, args)?;
    let records = Records::new(args.records);
    let load = load_phase(&*db, args, store)?;
    let mut workloads = Vec::new();
    for (i, workload) in CoreWorkload::in_standard_order(&args.ycsb)
        .into_iter()
        .enumerate()
    {
        let phase = Phase {
            workload,
            seed: splitmix(args.seed ^ ((i as u64 + 1) << 40)),
        };
        workloads.push(run_workload(&*db, args, store, phase, &records)?);
    }
    let configuration = db.configuration();
    db.close().map_err(Failure::from)?;
    let (resident_bytes, peak_resident_bytes) = resident()?;
    Ok(json!({
        "store": store, "configuration": configuration,
        "load": load, "workloads": workloads,
        "resident_bytes": resident_bytes, "peak_resident_bytes": peak_resident_bytes,
    }))
}

/// Inserted records past the acknowledged ones that [`Records`] can hold (YCSB's
/// `AcknowledgedCounterGenerator.WINDOW_SIZE`).
const WINDOW: u64 = 1 << 20;

/// The records there are: the next record number an insert takes, and how many records
/// from 0 on have been inserted with none missing, which reads pick from. As YCSB's
/// acknowledged counter: an insert that returns marks its record in a window, and whichever
/// thread finds no other doing so moves the count over the records marked in a row. No
/// thread waits for another's insert (so a thread descheduled in the middle of one holds
/// up no other), and no read picks a record whose insert has not returned.
struct Records {
    next: AtomicU64,
    acknowledged: AtomicU64,
    /// Records inserted past `acknowledged`, at their number modulo [`WINDOW`].
    window: Vec<AtomicBool>,
    /// Whether a thread is moving `acknowledged` on.
    sweeping: AtomicBool,
}

impl Records {
    /// After a load of `loaded` records.
    fn new(loaded: u64) -> Records {
        Records {
            next: AtomicU64::new(loaded),
            acknowledged: AtomicU64::new(loaded),
            window: (0..WINDOW).map(|_| AtomicBool::new(false)).collect(),
            sweeping: AtomicBool::new(false),
        }
    }

    /// Records that reads may pick: `0..count()`, each inserted.
    fn count(&self) -> u64 {
        self.acknowledged.load(Ordering::SeqCst)
    }

    /// A record number for an insert. Never a window or more past the records acknowledged:
    /// then (an insert stuck behind a million others) it waits, unless the run has `failed`.
    fn claim(&self, failed: &AtomicBool) -> u64 {
        let keynum = self.next.fetch_add(1, Ordering::Relaxed);
        while keynum >= self.count() + WINDOW && !failed.load(Ordering::Relaxed) {
            std::thread::yield_now();
        }
        keynum
    }

    fn slot(&self, keynum: u64) -> &AtomicBool {
        &self.window[(keynum % WINDOW) as usize]
    }

    /// Says record `keynum`'s insert has returned.
    fn acknowledge(&self, keynum: u64) {
        self.slot(keynum).store(true, Ordering::SeqCst);
        // One thread at a time moves the count; one that finds another at it leaves its
        // record to that one, which looks again once done (every step sequentially
        // consistent, so one of the two sees the other's mark).
        while self
            .sweeping
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            let mut count = self.acknowledged.load(Ordering::SeqCst);
            // The slot of `count` is `count`'s own: no record a window past it is claimed.
            while self.slot(count).swap(false, Ordering::SeqCst) {
                count += 1;
            }
            self.acknowledged.store(count, Ordering::SeqCst);
            self.sweeping.store(false, Ordering::SeqCst);
            if !self.slot(count).load(Ordering::SeqCst) {
                break;
            }
        }
    }
}

/// What one thread counted over a phase.
#[derive(Default)]
struct Tally {
    /// Latencies by operation, in [`Operation::ALL`]'s order.
    latencies: [LatencyHistogram; 5],
    /// Reads (and the reads of read-modify-writes) that found no record.
    not_found: u64,
    /// Bytes of the values read, scans' included.
    bytes_read: u64,
    /// Records the scans read.
    scanned_records: u64,
}

impl Tally {
    fn merge(&mut self, other: &Tally) {
        for (mine, theirs) in self.latencies.iter_mut().zip(&other.latencies) {
            mine.merge(theirs);
        }
        self.not_found += other.not_found;
        self.bytes_read += other.bytes_read;
        self.scanned_records += other.scanned_records;
    }

    fn record(&mut self, operation: Operation, started: Instant) {
        let nanos = started.elapsed().as_nanos() as u64;
        self.latencies[operation.index()].record(nanos);
    }

    /// A read's answer counted.
    fn found(&mut self, answer: Option<usize>) {
        match answer {
            Some(bytes) => self.bytes_read += bytes as u64,
            None => self.not_found += 1,
        }
    }

    /// The figures of `operations` operations in `seconds`: throughput and latency over
    /// them all, and latency by operation kind.
    fn to_json(&self, operations: u64, seconds: f64) -> Value {
        let mut all = LatencyHistogram::default();
        let mut by_operation = Map::new();
        for (operation, histogram) in Operation::ALL.iter().zip(&self.latencies) {
            all.merge(histogram);
            if histogram.count() > 0 {
                by_operation.insert(
                    operation.name().to_string(),
                    json!({
                        "count": histogram.count(),
                        "ops_per_sec": histogram.count() as f64 / seconds.max(1e-9),
                        "p50_us": histogram.quantile_us(0.5),
                        "p99_us": histogram.quantile_us(0.99),
                        "p999_us": histogram.quantile_us(0.999),
                        "mean_us": histogram.mean_us(),
                        "max_us": histogram.max_us(),
                    }),
                );
            }
        }
        json!({
            "operations": operations,
            "seconds": seconds,
            "ops_per_sec": operations as f64 / seconds.max(1e-9),
            "p50_us": all.quantile_us(0.5),
            "p99_us": all.quantile_us(0.99),
            "p999_us": all.quantile_us(0.999),
            "mean_us": all.mean_us(),
            "max_us": all.max_us(),
            "not_found": self.not_found,
            "bytes_read": self.bytes_read,
            "scanned_records": self.scanned_records,
            "by_operation": by_operation,
        })
    }
}

/// The first item and the count of items of thread `t` of `threads` sharing `items`.
fn share(items: u64, threads: u32, t: u32) -> (u64, u64) {
    let (threads, t) = (u64::from(threads), u64::from(t));
    let (each, rest) = (items / threads, items % threads);
    (t * each + t.min(rest), each + u64::from(t < rest))
}

/// Runs `body(t, first, count, tally, failed)` on `threads` threads at once, thread `t`
/// taking items `first..first + count` of `items`; returns the wall time from their common
/// start to the last one's end, and their tallies merged. A thread that fails sets `failed`,
/// which the others watch, and its error is returned.
fn on_threads(
    threads: u32,
    items: u64,
    body: impl Fn(u32, u64, u64, &mut Tally, &AtomicBool) -> Result<(), String> + Sync,
) -> Result<(f64, Tally), Failure> {
    let start = Barrier::new(threads as usize + 1);
    let failed = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (start, failed, body) = (&start, &failed, &body);
                scope.spawn(move || {
                    let (first, count) = share(items, threads, t);
                    let mut tally = Tally::default();
                    start.wait();
                    let result = body(t, first, count, &mut tally, failed);
                    if result.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    result.map(|()| tally)
                })
            })
            .collect();
        start.wait();
        let started = Instant::now();
        let mut total = Tally::default();
        let mut error = None;
        for worker in workers {
            match worker.join().expect("a worker does not panic") {
                Ok(tally) => total.merge(&tally),
                Err(e) => error = Some(e),
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        error.map_or(Ok((seconds, total)), |e| Err(Failure::from(e)))
    })
}

/// Moves `bar` on by the operations done since the last call, every 256 operations and at
/// the end.
fn progress_every(bar: &ProgressBar, done: u64, count: u64) {
    if done.is_multiple_of(256) {
        bar.inc(256);
    } else if done == count {
        bar.inc(done % 256);
    }
}

/// A random number generator of thread `t` in a phase of seed `seed`.
fn thread_rng(seed: u64, t: u32) -> SmallRng {
    SmallRng::seed_from_u64(splitmix(seed ^ u64::from(t)))
}

/// The load: `--records` records inserted by `--threads` threads, then the store settled.
fn load_phase(db: &dyn YcsbStore, args: &BenchArgs, store: &str) -> Result<Value, Failure> {
    let bar = progress::bar(args.records, &format!("YCSB load ({store})"));
    let (seconds, tally) = on_threads(
        args.threads,
        args.records,
        |t, first, count, tally, failed| {
            let mut rng = thread_rng(splitmix(args.seed), t);
            let mut value = vec![0u8; args.value_size];
            for n in 0..count {
                if failed.load(Ordering::Relaxed) {
                    break;
                }
                let key = ycsb_key(first + n);
                rng.fill_bytes(&mut value);
                let started = Instant::now();
                db.put(&key, &value)?;
                tally.record(Operation::Insert, started);
                progress_every(&bar, n + 1, count);
            }
            Ok(())
        },
    )?;
    bar.finish_and_clear();
    let waiting = progress::waiting(&format!("flush and compactions ({store})"));
    let settling = Instant::now();
    let settle = db.settle().map_err(Failure::from)?;
    let settle_seconds = settling.elapsed().as_secs_f64();
    waiting.finish_and_clear();
    let mut figures = tally.to_json(args.records, seconds);
    figures["records"] = json!(args.records);
    figures["threads"] = json!(args.threads);
    figures["value_size"] = json!(args.value_size);
    figures["settle_seconds"] = json!(settle_seconds);
    figures["settle"] = json!(settle.unwrap_or(
        "memtable flushed; not waited for compactions: the store offers no way to wait"
    ));
    Ok(figures)
}

/// A workload as one run of it: which, and the seed its threads draw from.
struct Phase {
    workload: CoreWorkload,
    seed: u64,
}

/// How a thread picks the records of its requests.
#[derive(Clone)]
enum KeyChooser {
    Zipfian(ScrambledZipfian),
    Uniform,
    Latest(SkewedLatest),
}

impl KeyChooser {
    /// The chooser of a run starting with `records` records, which inserts may grow by
    /// `expected_inserts`.
    fn new(
        law: RequestDistribution,
        records: u64,
        expected_inserts: u64,
        theta: f64,
    ) -> KeyChooser {
        match law {
            // YCSB spreads the scrambled Zipfian over the records and twice the inserts it
            // expects, and draws again when it lands past the records there are.
            RequestDistribution::Zipfian => {
                KeyChooser::Zipfian(ScrambledZipfian::new(records + 2 * expected_inserts, theta))
            }
            RequestDistribution::Uniform => KeyChooser::Uniform,
            RequestDistribution::Latest => KeyChooser::Latest(SkewedLatest::new(records, theta)),
        }
    }

    /// A record in `0..records`, the records there are now (at least one).
    fn next(&mut self, records: u64, rng: &mut SmallRng) -> u64 {
        match self {
            KeyChooser::Zipfian(zipfian) => loop {
                let record = zipfian.next(rng);
                if record < records {
                    return record;
                }
            },
            KeyChooser::Uniform => rng.gen_range(0..records),
            KeyChooser::Latest(latest) => latest.next(records, rng),
        }
    }
}

/// One workload on the loaded store: `--operations` operations over `--threads` threads.
fn run_workload(
    db: &dyn YcsbStore,
    args: &BenchArgs,
    store: &str,
    phase: Phase,
    records: &Records,
) -> Result<Value, Failure> {
    let workload = phase.workload;
    let mix = workload.mix();
    let law = args
        .request_distribution
        .unwrap_or_else(|| workload.distribution());
    let at_start = records.count();
    let counters_at_start = db.counters();
    let expected_inserts = (args.operations as f64 * mix.insert) as u64;
    // Built once (a Zipfian's zeta constant takes a pass over its items); each thread
    // draws from a copy.
    let chooser = KeyChooser::new(law, at_start, expected_inserts, args.zipf_constant);
    let bar = progress::bar(
        args.operations,
        &format!("YCSB workload {} ({store})", workload.letter()),
    );
    let (seconds, tally) = on_threads(
        args.threads,
        args.operations,
        |t, _, count, tally, failed| {
            let mut rng = thread_rng(phase.seed, t);
            let mut chooser = chooser.clone();
            let mut value = vec![0u8; args.value_size];
            for n in 0..count {
                if failed.load(Ordering::Relaxed) {
                    break;
                }
                let operation = mix.pick(rng.gen());
                if operation == Operation::Insert {
                    let keynum = records.claim(failed);
                    let key = ycsb_key(keynum);
                    rng.fill_bytes(&mut value);
                    let started = Instant::now();
                    db.put(&key, &value)?;
                    tally.record(operation, started);
                    records.acknowledge(keynum);
                    progress_every(&bar, n + 1, count);
                    continue;
                }
                let key = ycsb_key(chooser.next(records.count(), &mut rng));
                match operation {
                    Operation::Read => {
                        let started = Instant::now();
                        let answer = db.read(&key)?;
                        tally.record(operation, started);
                        tally.found(answer);
                    }
                    Operation::Update => {
                        rng.fill_bytes(&mut value);
                        let started = Instant::now();
                        db.put(&key, &value)?;
                        tally.record(operation, started);
                    }
                    Operation::Scan => {
                        let length = rng.gen_range(1..=MAX_SCAN_LENGTH) as usize;
                        let started = Instant::now();
                        let (read, bytes) = db.scan(&key, length)?;
                        tally.record(operation, started);
                        tally.scanned_records += read;
                        tally.bytes_read += bytes;
                    }
                    Operation::ReadModifyWrite => {
                        rng.fill_bytes(&mut value);
                        let started = Instant::now();
                        let answer = db.read_modify_write(&key, &value)?;
                        tally.record(operation, started);
                        tally.found(answer);
                    }
                    Operation::Insert => unreachable!("inserts are done above"),
                }
                progress_every(&bar, n + 1, count);
            }
            Ok(())
        },
    )?;
    bar.finish_and_clear();
    let mut figures = json!({
        "workload": workload.letter(),
        "description": workload.description(),
        "request_distribution": law.name(),
    });
    super::figures::merge(&mut figures, &tally.to_json(args.operations, seconds));
    figures["threads"] = json!(args.threads);
    figures["records"] = json!(args.records);
    figures["records_at_start"] = json!(at_start);
    figures["records_at_end"] = json!(records.count());
    figures["value_size"] = json!(args.value_size);
    if let (Some(before), Some(after)) = (counters_at_start, db.counters()) {
        figures["store_counters"] = after.during(&before);
    }
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_item_once() {
        for (items, threads) in [(1_000_000, 4), (10, 3), (2, 4), (5, 1)] {
            let mut next = 0;
            for t in 0..threads {
                let (first, count) = share(items, threads, t);
                assert_eq!(first, next);
                next = first + count;
            }
            assert_eq!(next, items);
        }
    }

    #[test]
    fn reads_see_inserted_records_up_to_the_first_missing_one() {
        let records = Records::new(100);
        let failed = AtomicBool::new(false);
        let (first, second, third) = (
            records.claim(&failed),
            records.claim(&failed),
            records.claim(&failed),
        );
        assert_eq!((first, second, third), (100, 101, 102));
        // A later insert returning first makes nothing readable past a missing one.
        records.acknowledge(third);
        assert_eq!(records.count(), 100);
        records.acknowledge(first);
        assert_eq!(records.count(), 101);
        records.acknowledge(second);
        assert_eq!(records.count(), 103);
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..10_000 {
                        let keynum = records.claim(&failed);
                        assert!(records.count() <= keynum);
                        records.acknowledge(keynum);
                    }
                });
            }
        });
        assert_eq!(records.count(), 40_103);
        assert!(records
            .window
            .iter()
            .all(|slot| !slot.load(Ordering::SeqCst)));
    }

    #[test]
    fn choosers_stay_within_the_records_there_are() {
        let mut rng = SmallRng::seed_from_u64(9);
        for law in [
            RequestDistribution::Zipfian,
            RequestDistribution::Uniform,
            RequestDistribution::Latest,
        ] {
            let mut chooser = KeyChooser::new(law, 1000, 100, 0.99);
            for records in (1000..1100).chain([1100; 1000]) {
                assert!(chooser.next(records, &mut rng) < records, "{law:?}");
            }
        }
    }
}
