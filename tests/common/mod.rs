#![allow(dead_code)]
//! Helpers shared by the store's integration tests.

use std::path::Path;
use std::sync::Arc;

use bloomkv::entry::Entry;
use bloomkv::fs::{OsFileSystem, SharedFs};
use bloomkv::metrics::ReadCounters;
use bloomkv::sstable::{Table, TableBuilder, TableOptions};
use bloomkv::{FilterPolicy, Options};

/// The operating system's file system, as the store's layers take it.
pub fn os_fs() -> SharedFs {
    Arc::new(OsFileSystem)
}

/// Writes `entries` (in entry order) as a table at `path`.
pub fn build_table(path: &Path, options: TableOptions, entries: &[Entry]) {
    let mut b = TableBuilder::new(os_fs(), path, options, entries.len() as u64).unwrap();
    for e in entries {
        b.add(e).unwrap();
    }
    b.finish().unwrap();
}

/// Opens the table at `path` on its own.
pub fn open_table(path: &Path) -> Table {
    Table::open(os_fs(), path, Arc::new(ReadCounters::new())).unwrap()
}

/// Options that make a small store flush and compact often, so a few thousand writes build a
/// tree with several levels.
pub fn small_tree_options() -> Options {
    let mut options = Options::default()
        .memtable_size(16 * 1024)
        .table_size(8 * 1024)
        .level1_size(32 * 1024)
        .level_size_ratio(4)
        .l0_compaction_trigger(2);
    options.block_size = 1024;
    options
}

/// Same as [`small_tree_options`] with the given filter policy.
pub fn small_tree_with(policy: FilterPolicy) -> Options {
    small_tree_options().filter_policy(policy)
}

/// A deterministic key for index `i`.
pub fn key(i: u64) -> Vec<u8> {
    format!("key{:010}", i).into_bytes()
}

/// A deterministic value for index `i` and version `v`.
pub fn value(i: u64, v: u64) -> Vec<u8> {
    format!("value-{i}-{v}-{}", "x".repeat((i % 40) as usize)).into_bytes()
}

/// Reads a double-ended iterator from both ends in turn, one step at each, until they meet;
/// returns the pairs in key order, and checks that neither end gives more once they met.
pub fn read_from_both_ends<T: std::fmt::Debug>(
    mut both: impl DoubleEndedIterator<Item = bloomkv::Result<T>>,
) -> Vec<T> {
    let (mut front, mut back) = (Vec::new(), Vec::new());
    while let Some(item) = both.next() {
        front.push(item.unwrap());
        match both.next_back() {
            Some(item) => back.push(item.unwrap()),
            None => break,
        }
    }
    assert!(both.next().is_none(), "the ends met");
    assert!(both.next_back().is_none(), "the ends met");
    front.extend(back.into_iter().rev());
    front
}

/// Writes the even keys `2 * from .. 2 * to` (`key(2 * i)` with `value(i, 0)`), so that
/// every odd key lies between two stored ones: a lookup of it is an absent key in range.
pub fn put_even(db: &bloomkv::Db, from: u64, to: u64) {
    for i in from..to {
        db.put(key(2 * i), value(i, 0)).unwrap();
    }
}

/// Reads back the even keys of `0..keys` that `present` says are stored, with the values
/// [`put_even`] wrote, and finds none of the odd keys between them.
pub fn assert_even_keys_read_back(db: &bloomkv::Db, keys: u64, present: impl Fn(u64) -> bool) {
    for i in 0..keys {
        let expected = present(i).then(|| value(i, 0));
        assert_eq!(db.get(key(2 * i)).unwrap(), expected, "key {i}");
        assert_eq!(db.get(key(2 * i + 1)).unwrap(), None, "absent {i}");
    }
}

/// The filter counts of each level add up to the store's.
pub fn assert_level_filter_counts_add_up(stats: &bloomkv::Stats) {
    let sum = |f: fn(&bloomkv::LevelStats) -> u64| stats.levels.iter().map(f).sum::<u64>();
    assert_eq!(sum(|l| l.filter_probes), stats.filter_probes);
    assert_eq!(sum(|l| l.filter_positives), stats.filter_positives);
    assert_eq!(
        sum(|l| l.filter_true_positives),
        stats.filter_true_positives
    );
    assert_eq!(sum(|l| l.filter_negatives()), stats.filter_negatives);
}

/// The names of the entries of `dir`, sorted.
pub fn names_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// One of `FaultFs`'s five crash modes, picked by `seed`: every mode over five seeds.
pub fn crash_mode(seed: u64) -> bloomkv::fs::CrashMode {
    use bloomkv::fs::CrashMode;
    match seed % 5 {
        0 => CrashMode::DropUnsynced,
        1 => CrashMode::KeepPrefix { seed },
        2 => CrashMode::ZeroTail { seed },
        3 => CrashMode::GarbageTail { seed },
        _ => CrashMode::LosePages { seed },
    }
}

/// A thread that puts keys 0, 1, 2, ... into `db` without a pause until `stop` is set;
/// `acknowledged` counts the puts that returned.
pub struct SteadyWriter {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub acknowledged: std::sync::Arc<std::sync::atomic::AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl SteadyWriter {
    pub fn start(db: std::sync::Arc<bloomkv::Db>) -> SteadyWriter {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let acknowledged = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let thread = {
            let (stop, acknowledged) = (stop.clone(), acknowledged.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    db.put(key(i), value(i, 0)).unwrap();
                    i += 1;
                    acknowledged.store(i, Ordering::SeqCst);
                }
            })
        };
        SteadyWriter {
            stop,
            acknowledged,
            thread,
        }
    }

    /// Puts acknowledged so far.
    pub fn acknowledged(&self) -> u64 {
        self.acknowledged.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stops the thread; returns the puts acknowledged.
    pub fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let acknowledged = self.acknowledged.clone();
        self.thread.join().unwrap();
        acknowledged.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The name the test harness knows the test `name` of module `module` (`module_path!()` at
/// the test) by: the module's path within the test binary, without the binary's own name.
pub fn test_name(module: &str, name: &str) -> String {
    match module.split_once("::") {
        Some((_, within)) => format!("{within}::{name}"),
        None => name.to_string(),
    }
}

/// Runs the test `child_test` (its whole name: `test_name`) of the running test binary in a process of its own, with the
/// environment variable `env` naming `dir` (a child test does its work only when it is set),
/// kills it with SIGKILL after `after`, and returns the last number it printed on a line of
/// its own: the last write it had acknowledged, if any.
pub fn run_child_and_kill(
    child_test: &str,
    env: &str,
    dir: &Path,
    after: std::time::Duration,
) -> Option<u64> {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .env(env, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let lines = BufReader::new(stdout).lines().map_while(|l| l.ok());
        lines.filter_map(|l| l.trim().parse::<u64>().ok()).last()
    });
    std::thread::sleep(after);
    child.kill().expect("SIGKILL the child");
    child.wait().unwrap();
    reader.join().unwrap()
}
