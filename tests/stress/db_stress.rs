//! A stress test in the manner of RocksDB's `db_stress` and `db_crashtest.py`: eight threads
//! run mixed operations (puts, deletes, batches, gets, `multi_get`, range scans, snapshots,
//! flushes, a full compaction, checkpoints) on a store with small memtables and tables, and
//! the store is stopped at a random moment, again and again:
//! - **kill**: the workload runs in a child process, killed with SIGKILL;
//! - **power loss**: the workload runs on `FaultFs`, whose power is cut after a random number
//!   of operations, then every unsynced byte is lost or damaged as one of its crash modes says.
//!
//! The expected state lives in a file beside the store, as `db_stress` keeps it: per key, the
//! version last acknowledged and the version of a write in flight, each written before and
//! after the write, so it survives the kill. Each thread owns every eighth key, so a key's
//! versions are written in order by one thread. After every restart each key must hold a
//! version between the lowest the store may have kept (kill: the acknowledged one; power loss:
//! the last one made durable by a synced write or a flush) and the newest written, and a scan
//! must agree with the gets.
//!
//! `cargo test --test stress db_stress::` runs a few cycles of each kind; `cargo test --release
//! --test stress db_stress:: -- --ignored` runs 600 of each (`docs/reliability.md`).

use crate::common;

use std::fs::File;
use std::ops::Bound;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bloomkv::fs::FaultFs;
use bloomkv::{Db, Options, WriteBatch, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const THREADS: u64 = 8;
const KEYS_PER_THREAD: u64 = 48;
const KEYS: u64 = THREADS * KEYS_PER_THREAD;
const CHILD_STORE: &str = "BLOOMKV_STRESS_STORE";
const CHILD_EXPECTED: &str = "BLOOMKV_STRESS_EXPECTED";
const CHILD_SEED: &str = "BLOOMKV_STRESS_SEED";

fn key(k: u64) -> Vec<u8> {
    format!("stress{k:05}").into_bytes()
}

/// Version 0 is "never written"; every fifth version is a delete.
fn is_delete(version: u32) -> bool {
    version.is_multiple_of(5)
}

fn value(k: u64, version: u32) -> Vec<u8> {
    let mut v = format!("{k}:{version}:").into_bytes();
    v.resize(40 + (version as usize * 7 % 60), b'x');
    v
}

/// The version a value read for key `k` holds; panics on a value no write of `k` made.
fn version_of(k: u64, bytes: &[u8]) -> u32 {
    let text = std::str::from_utf8(bytes).expect("values are text");
    let mut parts = text.split(':');
    let (owner, version) = (parts.next(), parts.next());
    assert_eq!(owner, Some(k.to_string().as_str()), "key {k} holds {text}");
    let version: u32 = version.and_then(|v| v.parse().ok()).expect("a version");
    assert_eq!(bytes, value(k, version), "key {k}: a damaged value");
    version
}

/// What a read of key `k` should give at `version`.
fn expected_read(k: u64, version: u32) -> Option<Vec<u8>> {
    (version != 0 && !is_delete(version)).then(|| value(k, version))
}

/// The expected state: per key the acknowledged version and the version of a write in flight,
/// mirrored in a file (8 bytes a key) so that it outlives a killed process; and, for power
/// loss, the version a synced write or a flush made durable (kept in memory only: the test
/// process survives a simulated power loss).
struct Expected {
    file: File,
    acked: Vec<AtomicU32>,
    pending: Vec<AtomicU32>,
    durable: Vec<AtomicU32>,
}

impl Expected {
    fn open(path: &Path) -> Expected {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap();
        let mut bytes = vec![0u8; KEYS as usize * 8];
        let len = file.metadata().unwrap().len();
        if len == bytes.len() as u64 {
            file.read_exact_at(&mut bytes, 0).unwrap();
        } else {
            file.write_all_at(&bytes, 0).unwrap();
        }
        let word = |k: usize, half: usize| {
            let at = k * 8 + half * 4;
            u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
        };
        let acked: Vec<AtomicU32> = (0..KEYS as usize)
            .map(|k| AtomicU32::new(word(k, 0)))
            .collect();
        Expected {
            file,
            durable: acked
                .iter()
                .map(|a| AtomicU32::new(a.load(Ordering::SeqCst)))
                .collect(),
            acked,
            pending: (0..KEYS as usize)
                .map(|k| AtomicU32::new(word(k, 1)))
                .collect(),
        }
    }

    fn store(&self, k: u64, half: u64, version: u32) {
        self.file
            .write_all_at(&version.to_le_bytes(), k * 8 + half * 4)
            .unwrap();
    }

    fn acked(&self, k: u64) -> u32 {
        self.acked[k as usize].load(Ordering::SeqCst)
    }

    /// The next version of `k`: above every version ever written, so none is reused.
    fn next_version(&self, k: u64) -> u32 {
        self.acked(k)
            .max(self.pending[k as usize].load(Ordering::SeqCst))
            + 1
    }

    fn set_pending(&self, k: u64, version: u32) {
        self.pending[k as usize].store(version, Ordering::SeqCst);
        self.store(k, 1, version);
    }

    fn set_acked(&self, k: u64, version: u32) {
        self.acked[k as usize].store(version, Ordering::SeqCst);
        self.store(k, 0, version);
    }

    /// Each key of `versions` is durable at (at least) its version.
    fn make_durable(&self, versions: impl Iterator<Item = (u64, u32)>) {
        for (k, version) in versions {
            self.durable[k as usize].fetch_max(version, Ordering::SeqCst);
        }
    }

    /// After a restart, with the key holding `version`: nothing is in flight any more.
    fn settle(&self, k: u64, version: u32) {
        self.set_acked(k, version);
        self.set_pending(k, version);
        self.durable[k as usize].store(version, Ordering::SeqCst);
    }
}

/// The keys thread `t` owns.
fn owned(t: u64) -> impl Iterator<Item = u64> {
    (0..KEYS_PER_THREAD).map(move |i| i * THREADS + t)
}

/// Tells one thread's workload to stop, and counts what all did.
struct Run {
    stop: AtomicBool,
    /// Set in power-loss mode: an error is expected once the power is cut.
    fs: Option<FaultFs>,
    writes: AtomicU64,
    checkpoints: AtomicU64,
    dir: PathBuf,
}

impl Run {
    /// Whether an error now is the stop (the power is cut): if not, it is a failure.
    fn expected_error(&self, e: &bloomkv::Error, what: &str) {
        let cut = self.fs.as_ref().is_some_and(FaultFs::power_is_cut);
        assert!(cut, "{what} failed with the power on: {e}");
    }
}

/// One thread's mixed operations until told to stop, or until an error after a power cut.
fn workload(db: &Db, expected: &Expected, run: &Run, t: u64, seed: u64) {
    let mut rng = SmallRng::seed_from_u64(seed ^ (t << 32));
    let keys: Vec<u64> = owned(t).collect();
    let mut ops = 0u64;
    while !run.stop.load(Ordering::Relaxed) {
        ops += 1;
        let outcome = match rng.gen_range(0..100) {
            0..=49 => write(
                db,
                expected,
                run,
                &[keys[rng.gen_range(0..keys.len())]],
                &mut rng,
            ),
            50..=64 => {
                let n = rng.gen_range(2..6);
                let start = rng.gen_range(0..keys.len() - n);
                write(db, expected, run, &keys[start..start + n], &mut rng)
            }
            65..=76 => {
                let k = keys[rng.gen_range(0..keys.len())];
                db.get(key(k)).map(|got| {
                    assert_eq!(got, expected_read(k, expected.acked(k)), "get of key {k}");
                })
            }
            77..=82 => {
                let some: Vec<u64> = (0..8).map(|_| keys[rng.gen_range(0..keys.len())]).collect();
                let names: Vec<Vec<u8>> = some.iter().map(|&k| key(k)).collect();
                db.multi_get(&names).map(|got| {
                    for (k, v) in some.iter().zip(got) {
                        assert_eq!(v, expected_read(*k, expected.acked(*k)), "multi_get {k}");
                    }
                })
            }
            83..=88 => scan(db, expected, &keys, &mut rng),
            89..=94 => snapshot_reads(db, expected, run, &keys, &mut rng),
            95..=97 => {
                let before: Vec<(u64, u32)> = (0..KEYS).map(|k| (k, expected.acked(k))).collect();
                db.flush()
                    .map(|()| expected.make_durable(before.into_iter()))
            }
            98 if t == 0 && ops.is_multiple_of(4) => db.compact(),
            98 | 99 if t == 1 => checkpoint(db, run),
            _ => Ok(()),
        };
        if let Err(e) = outcome {
            run.expected_error(&e, "an operation");
            return;
        }
    }
}

/// Writes the next version of each of `keys` (owned by this thread), as one batch.
fn write(
    db: &Db,
    expected: &Expected,
    run: &Run,
    keys: &[u64],
    rng: &mut SmallRng,
) -> bloomkv::Result<()> {
    let mut batch = WriteBatch::new();
    let versions: Vec<u32> = keys.iter().map(|&k| expected.next_version(k)).collect();
    for (&k, &v) in keys.iter().zip(&versions) {
        expected.set_pending(k, v);
        if is_delete(v) {
            batch.delete(key(k));
        } else {
            batch.put(key(k), value(k, v));
        }
    }
    let sync = rng.gen_bool(0.15);
    // A synced write makes the WAL durable up to it: every write acknowledged before it was
    // issued, by any thread, is in the log before it.
    let acked_before: Vec<u32> = match sync {
        true => (0..KEYS).map(|k| expected.acked(k)).collect(),
        false => Vec::new(),
    };
    db.write_opt(batch, &WriteOptions::default().sync(sync))?;
    for (&k, &v) in keys.iter().zip(&versions) {
        expected.set_acked(k, v);
    }
    run.writes.fetch_add(keys.len() as u64, Ordering::Relaxed);
    if sync {
        expected.make_durable(
            acked_before
                .into_iter()
                .enumerate()
                .map(|(k, v)| (k as u64, v)),
        );
        expected.make_durable(keys.iter().copied().zip(versions));
    }
    Ok(())
}

/// A range scan from a random key: in order, every value one its key was written with, and
/// this thread's keys at their acknowledged versions.
fn scan(db: &Db, expected: &Expected, keys: &[u64], rng: &mut SmallRng) -> bloomkv::Result<()> {
    let from = key(rng.gen_range(0..KEYS));
    let mut last: Option<Vec<u8>> = None;
    for item in db
        .range::<&[u8], _>((Bound::Included(&from[..]), Bound::Unbounded))
        .take(40)
    {
        let (name, v) = item?;
        assert!(last.as_ref().is_none_or(|l| *l < name), "scan out of order");
        let k: u64 = std::str::from_utf8(&name[6..]).unwrap().parse().unwrap();
        let version = version_of(k, &v);
        if keys.contains(&k) {
            assert_eq!(version, expected.acked(k), "scan of key {k}");
        }
        last = Some(name);
    }
    Ok(())
}

/// A snapshot keeps showing what it saw while this thread writes over its keys.
fn snapshot_reads(
    db: &Db,
    expected: &Expected,
    run: &Run,
    keys: &[u64],
    rng: &mut SmallRng,
) -> bloomkv::Result<()> {
    let some: Vec<u64> = (0..4).map(|_| keys[rng.gen_range(0..keys.len())]).collect();
    let snapshot = db.snapshot();
    let seen: Vec<u32> = some.iter().map(|&k| expected.acked(k)).collect();
    write(db, expected, run, &some[..1], rng)?;
    for (&k, &version) in some.iter().zip(&seen) {
        assert_eq!(
            snapshot.get(key(k))?,
            expected_read(k, version),
            "snapshot of key {k}"
        );
    }
    Ok(())
}

/// A checkpoint that opens as a store holding one value per key.
fn checkpoint(db: &Db, run: &Run) -> bloomkv::Result<()> {
    let n = run.checkpoints.fetch_add(1, Ordering::Relaxed);
    // Named by process too: a killed child may have left its checkpoints half made.
    let dir = run
        .dir
        .join(format!("checkpoint-{}-{n}", std::process::id()));
    let cp = db.checkpoint(&dir)?;
    let options = match &run.fs {
        Some(fs) => stress_options().file_system(Arc::new(fs.clone())),
        None => stress_options(),
    };
    let copy = Db::open(&cp.dir, options)?;
    for item in copy.iter() {
        let (name, v) = item?;
        let k: u64 = std::str::from_utf8(&name[6..]).unwrap().parse().unwrap();
        version_of(k, &v);
    }
    drop(copy);
    if run.fs.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

fn stress_options() -> Options {
    common::small_tree_options()
}

/// Checks every key after a restart against what may have survived, then settles the
/// expected state on what did. `lowest(k)` is the lowest version the store may hold.
fn verify(db: &Db, expected: &Expected, lowest: impl Fn(u64) -> u32, what: &str) {
    let mut present = std::collections::BTreeMap::new();
    for k in 0..KEYS {
        let (low, high) = (lowest(k), expected.next_version(k) - 1);
        let found = match db.get(key(k)).unwrap() {
            Some(v) => {
                let version = version_of(k, &v);
                assert!(
                    (low..=high).contains(&version),
                    "{what}: key {k} holds version {version}, outside {low}..={high}"
                );
                present.insert(key(k), v);
                version
            }
            None => (low..=high)
                .rev()
                .find(|&v| v == 0 || is_delete(v))
                .unwrap_or_else(|| {
                    panic!(
                        "{what}: key {k} is missing, but versions {low}..={high} all hold values"
                    )
                }),
        };
        expected.settle(k, found);
    }
    let scanned: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
        db.iter().map(|item| item.unwrap()).collect();
    assert_eq!(scanned, present, "{what}: a scan disagrees with the gets");
}

/// Runs only as the child of the kill mode: the workload on eight threads until killed.
#[test]
fn stress_child() {
    let (Ok(store), Ok(expected)) = (std::env::var(CHILD_STORE), std::env::var(CHILD_EXPECTED))
    else {
        return;
    };
    let seed: u64 = std::env::var(CHILD_SEED).unwrap().parse().unwrap();
    let expected = Expected::open(Path::new(&expected));
    let db = Db::open(&store, stress_options()).expect("child open");
    let run = Run {
        stop: AtomicBool::new(false),
        fs: None,
        writes: AtomicU64::new(0),
        checkpoints: AtomicU64::new(0),
        dir: PathBuf::from(&store).with_extension("checkpoints"),
    };
    std::fs::create_dir_all(&run.dir).unwrap();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (db, expected, run) = (&db, &expected, &run);
            scope.spawn(move || workload(db, expected, run, t, seed));
        }
    });
}

/// Kills a child running the workload `cycles` times, each after a random time, and checks
/// the store after each.
fn kill_cycles(cycles: u64, seed: u64) {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let expected_path = tmp.path().join("expected");
    let mut rng = SmallRng::seed_from_u64(seed);
    let exe = std::env::current_exe().unwrap();
    let child_test = common::test_name(module_path!(), "stress_child");
    for cycle in 0..cycles {
        let mut child = Command::new(&exe)
            .args(["--exact", &child_test, "--nocapture", "--test-threads=1"])
            .env(CHILD_STORE, &store)
            .env(CHILD_EXPECTED, &expected_path)
            .env(CHILD_SEED, (seed + cycle).to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(150..600)));
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            panic!(
                "cycle {cycle}: the child ended by itself ({status}): {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let expected = Expected::open(&expected_path);
        let db = Db::open(&store, stress_options())
            .unwrap_or_else(|e| panic!("cycle {cycle}: reopen after the kill failed: {e}"));
        // A killed process keeps every acknowledged write: its bytes were handed to the kernel.
        verify(
            &db,
            &expected,
            |k| expected.acked(k),
            &format!("kill cycle {cycle}"),
        );
        db.close().unwrap();
    }
}

/// Cuts the power under the workload `cycles` times, each after a random number of
/// operations, and checks the store after each reboot. Returns the writes acknowledged.
fn power_loss_cycles(cycles: u64, seed: u64) -> u64 {
    let tmp = tempfile::tempdir().unwrap();
    let expected = Expected::open(&tmp.path().join("expected"));
    let fs = FaultFs::new();
    let dir = PathBuf::from("/stress");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut writes = 0;
    for cycle in 0..cycles {
        fs.set_crash_mode(common::crash_mode(seed + cycle));
        let db = Db::open(&dir, stress_options().file_system(Arc::new(fs.clone())))
            .unwrap_or_else(|e| panic!("power cycle {cycle}: reopen failed: {e}"));
        verify(
            &db,
            &expected,
            |k| expected.durable[k as usize].load(Ordering::SeqCst),
            &format!("power cycle {cycle}"),
        );
        let run = Run {
            stop: AtomicBool::new(false),
            fs: Some(fs.clone()),
            writes: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            dir: PathBuf::from(format!("/checkpoints-{cycle}")),
        };
        fs.cut_power_after(rng.gen_range(20..2_000));
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let (db, expected, run) = (&db, &expected, &run);
                scope.spawn(move || workload(db, expected, run, t, seed + cycle));
            }
            // Every thread stops at its first error once the power is cut; should the cut not
            // come (a workload of reads), it comes now.
            while !fs.power_is_cut() {
                std::thread::sleep(Duration::from_millis(2));
            }
            // Threads between reads would go on: the power is out, they stop.
            run.stop.store(true, Ordering::Relaxed);
        });
        writes += run.writes.load(Ordering::Relaxed);
        drop(db);
        fs.crash();
    }
    writes
}

#[test]
fn killed_at_random_moments_under_mixed_operations() {
    kill_cycles(4, 1);
}

#[test]
fn power_cut_at_random_moments_under_mixed_operations() {
    let writes = power_loss_cycles(40, 7);
    assert!(writes > 1_000, "only {writes} writes were acknowledged");
}

#[test]
#[ignore = "long: 600 kill cycles; run with --release -- --ignored"]
fn killed_at_random_moments_under_mixed_operations_long() {
    kill_cycles(600, 1_000);
}

#[test]
#[ignore = "long: 600 power-loss cycles; run with --release -- --ignored"]
fn power_cut_at_random_moments_under_mixed_operations_long() {
    let writes = power_loss_cycles(600, 2_000);
    println!("power loss: 600 cycles, {writes} writes acknowledged");
}
