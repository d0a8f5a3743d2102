//! The write path at scale: group commit under crashes, trivial moves, flushes that go on
//! while a compaction is held open, and the write counters adding up.

use crate::common;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bloomkv::filename::{self, FileKind};
use bloomkv::fs::{CrashMode, FaultFs, OsFileSystem};
use bloomkv::{Db, Options, Stats, WriteBatch, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const DIR: &str = "/store";
const PARTS: u64 = 3;

/// One acknowledged write of the group-commit model: thread `thread`'s `index`-th batch.
/// `started_after` and `acked_at` are readings of one clock that ticks at every
/// acknowledgement, so `w1.acked_at <= w2.started_after` means w1 returned before w2 began,
/// and w1's sequence numbers must come first.
#[derive(Debug, Clone, Copy)]
struct Acked {
    thread: u64,
    index: u64,
    synced: bool,
    started_after: u64,
    acked_at: u64,
}

fn part_key(thread: u64, index: u64, part: u64) -> Vec<u8> {
    format!("t{thread}/{index:08}/{part}").into_bytes()
}

fn part_value(thread: u64, index: u64, part: u64) -> Vec<u8> {
    format!(
        "{thread}-{index}-{part}-{}",
        "v".repeat((index % 50) as usize)
    )
    .into_bytes()
}

/// Writes `PARTS`-key batches from one thread until a write fails (the crash) or `stop`.
fn model_writer(
    db: &Db,
    thread: u64,
    seed: u64,
    clock: &AtomicU64,
    stop: &AtomicBool,
) -> Vec<Acked> {
    let mut rng = SmallRng::seed_from_u64(seed * 100 + thread);
    let mut acked = Vec::new();
    for index in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let mut batch = WriteBatch::new();
        for part in 0..PARTS {
            batch.put(
                part_key(thread, index, part),
                part_value(thread, index, part),
            );
        }
        let synced = rng.gen_bool(0.3);
        let started_after = clock.load(Ordering::SeqCst);
        if db
            .write_opt(batch, &WriteOptions::default().sync(synced))
            .is_err()
        {
            break;
        }
        let acked_at = clock.fetch_add(1, Ordering::SeqCst) + 1;
        acked.push(Acked {
            thread,
            index,
            synced,
            started_after,
            acked_at,
        });
    }
    acked
}

/// The batches of `thread` found in the store: index -> parts present.
fn recovered_batches(db: &Db, thread: u64) -> BTreeMap<u64, u64> {
    let mut found = BTreeMap::new();
    for item in db.prefix(format!("t{thread}/")) {
        let (key, value) = item.unwrap();
        let text = String::from_utf8(key).unwrap();
        let mut fields = text.split('/').skip(1);
        let index: u64 = fields.next().unwrap().parse().unwrap();
        let part: u64 = fields.next().unwrap().parse().unwrap();
        assert_eq!(value, part_value(thread, index, part), "value of {text}");
        *found.entry(index).or_insert(0) += 1;
    }
    found
}

fn group_options(fs: &FaultFs) -> Options {
    Options::default()
        .memtable_size(32 * 1024)
        .table_size(16 * 1024)
        .level1_size(64 * 1024)
        .l0_compaction_trigger(2)
        .file_system(Arc::new(fs.clone()))
}

/// Eight threads write three-key batches, a third of them synced, until the power is cut at
/// a random moment; the store is reopened and checked against what was acknowledged:
/// - every batch is there whole or not at all;
/// - each thread's batches are a prefix of what it wrote;
/// - every synced acknowledged write is there, and so is every write acknowledged before a
///   synced one began (its sync made them durable too);
/// - a write that is there brings every write acknowledged before it began.
#[test]
fn group_commit_under_power_loss_keeps_acknowledged_writes_whole_and_in_order() {
    const THREADS: u64 = 8;
    let mut groups_seen = 0;
    for seed in 0..8u64 {
        let fs = FaultFs::new();
        let mode = match seed % 4 {
            0 => CrashMode::DropUnsynced,
            1 => CrashMode::KeepPrefix { seed },
            2 => CrashMode::GarbageTail { seed },
            _ => CrashMode::LosePages { seed },
        };
        fs.set_crash_mode(mode);
        let db = Arc::new(Db::open(DIR, group_options(&fs)).unwrap());
        let clock = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..THREADS)
            .map(|thread| {
                let (db, clock, stop) = (Arc::clone(&db), Arc::clone(&clock), Arc::clone(&stop));
                std::thread::spawn(move || model_writer(&db, thread, seed, &clock, &stop))
            })
            .collect();
        // Cut the power once the writers are well under way.
        let target = 300 + seed * 150;
        while clock.load(Ordering::SeqCst) < target {
            std::thread::sleep(Duration::from_millis(1));
        }
        let stats = db.stats();
        groups_seen += stats.grouped_batches - stats.write_groups;
        // The machine goes down: from the next write on, nothing reaches the disk, and the
        // store is dropped before the crash's image is taken. (A crash taken while the store
        // ran on let it go on writing new files, a new log or manifest among them, through
        // new handles after the power was gone, and acknowledge writes no disk kept.)
        fs.cut_power_after(0);
        stop.store(true, Ordering::Relaxed);
        let acked: Vec<Acked> = writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        drop(db);
        fs.power_loss();

        let db = Db::open(DIR, group_options(&fs)).unwrap();
        let present: HashSet<(u64, u64)> = (0..THREADS)
            .flat_map(|thread| {
                let batches = recovered_batches(&db, thread);
                for (&index, &parts) in &batches {
                    assert_eq!(parts, PARTS, "seed {seed}: batch {thread}/{index} in part");
                }
                let indexes: Vec<u64> = batches.keys().copied().collect();
                let prefix: Vec<u64> = (0..indexes.len() as u64).collect();
                assert_eq!(indexes, prefix, "seed {seed}: thread {thread} has a hole");
                batches.into_keys().map(move |index| (thread, index))
            })
            .collect();
        let is_present = |w: &Acked| present.contains(&(w.thread, w.index));
        let last_synced_start = acked
            .iter()
            .filter(|w| w.synced)
            .map(|w| w.started_after)
            .max();
        for w in &acked {
            if w.synced || last_synced_start.is_some_and(|s| w.acked_at <= s) {
                assert!(is_present(w), "seed {seed}: durable write {w:?} lost");
            }
        }
        for later in acked.iter().filter(|w| is_present(w)) {
            for earlier in acked.iter().filter(|w| w.acked_at <= later.started_after) {
                assert!(
                    is_present(earlier),
                    "seed {seed}: {later:?} recovered without the earlier {earlier:?}"
                );
            }
        }
    }
    // Not asserted (scheduling decides), but reported: writers did share groups.
    eprintln!("batches that rode in another writer's group: {groups_seen}");
}

/// Eight threads each write `per_thread` synced single-key batches, back to back.
fn write_synced_from_eight_threads(db: &Arc<Db>, per_thread: u64) {
    let writers: Vec<_> = (0..8u64)
        .map(|thread| {
            let db = Arc::clone(db);
            std::thread::spawn(move || {
                for index in 0..per_thread {
                    let mut batch = WriteBatch::new();
                    batch.put(part_key(thread, index, 0), part_value(thread, index, 0));
                    db.write_opt(batch, &WriteOptions::synced()).unwrap();
                }
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
}

/// On a real disk, where a sync takes a while, synced writers from eight threads share
/// groups: fewer WAL appends than batches, and every batch is there.
#[test]
fn concurrent_synced_writers_share_wal_appends() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    write_synced_from_eight_threads(&db, 150);
    let stats = db.stats();
    assert_eq!(stats.grouped_batches, 8 * 150);
    assert!(
        stats.write_groups < stats.grouped_batches,
        "{} groups for {} batches",
        stats.write_groups,
        stats.grouped_batches
    );
    for thread in 0..8 {
        assert_eq!(recovered_batches(&db, thread).len(), 150);
    }
}

/// Writers that write back to back ride in one group each time: the leader of a synced group
/// waits for the last group's writers to queue again, so eight threads do not split into two
/// cohorts of four taking turns at the fsync. The wait is long here so that scheduling on a
/// busy machine cannot cut it short.
#[test]
fn back_to_back_synced_writers_share_one_group() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options::default().group_commit_wait(Duration::from_millis(50));
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    write_synced_from_eight_threads(&db, 100);
    let stats = db.stats();
    assert_eq!(stats.grouped_batches, 800);
    assert!(
        stats.batches_per_write_group() >= Some(6.0),
        "{} groups for {} batches",
        stats.write_groups,
        stats.grouped_batches
    );
}

/// A lone writer never waits for others, and a writer that stops writing costs the next
/// synced group one wait, not one per write.
#[test]
fn a_writer_that_stops_costs_one_wait_and_a_lone_writer_none() {
    const WAIT: Duration = Duration::from_millis(300);
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default().group_commit_wait(WAIT)).unwrap());
    let write = |db: &Db, i: u64| {
        let mut batch = WriteBatch::new();
        batch.put(common::key(i), common::value(i, 0));
        db.write_opt(batch, &WriteOptions::synced()).unwrap();
    };
    let started = std::time::Instant::now();
    (0..20).for_each(|i| write(&db, i));
    assert!(started.elapsed() < WAIT * 5, "{:?}", started.elapsed());

    let other = Arc::clone(&db);
    std::thread::spawn(move || write(&other, 1_000))
        .join()
        .unwrap();
    let started = std::time::Instant::now();
    (20..40).for_each(|i| write(&db, i));
    let elapsed = started.elapsed();
    assert!(elapsed >= WAIT && elapsed < WAIT * 5, "{elapsed:?}");
    assert_eq!(db.iter().count(), 41);
}

fn table_files(dir: &Path) -> Vec<u64> {
    let mut numbers: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().ok()?;
            match filename::parse_file_name(&name) {
                Some(FileKind::Table(n)) => Some(n),
                _ => None,
            }
        })
        .collect();
    numbers.sort_unstable();
    numbers
}

fn tombstones_in(dir: &Path, number: u64) -> u64 {
    let path = dir.join(filename::table_file_name(number));
    bloomkv::sstable::verify_table(Arc::new(OsFileSystem), &path)
        .unwrap()
        .tombstones
}

/// Keys written in ascending order make tables that overlap nothing below them: every one
/// moves down by a manifest edit, none is rewritten, and the files on disk are the ones the
/// flushes wrote, whatever level they are in now; every key reads back, after a reopen too.
#[test]
fn ascending_keys_move_down_without_being_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    for i in 0..6_000 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    assert!(stats.trivial_moves > 0);
    assert_eq!(stats.compactions, 0, "an ascending load needs no merge");
    assert!(
        stats.levels.iter().skip(2).any(|l| l.tables > 0),
        "{:?}",
        stats.levels
    );
    assert_eq!(stats.compaction_bytes_written(), 0);
    assert_eq!(stats.table_bytes(), stats.flush_bytes_written());
    let live: Vec<u64> = {
        let mut n: Vec<u64> = stats.tables.iter().map(|t| t.number).collect();
        n.sort_unstable();
        n
    };
    assert_eq!(live, table_files(dir.path()));
    drop(db);
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|p| p.unwrap()).collect();
    assert_eq!(pairs.len(), 6_000);
    for (i, (key, value)) in pairs.iter().enumerate() {
        assert_eq!(
            (key, value),
            (&common::key(i as u64), &common::value(i as u64, 0))
        );
    }
}

fn two_flushed_ranges(dir: &Path, delete_some: bool) -> Stats {
    // Memtables large enough that each range is one table.
    let options = common::small_tree_options().memtable_size(1 << 20);
    let db = Db::open(dir, options).unwrap();
    for i in 0..100 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    if delete_some {
        for i in 0..50 {
            db.delete(common::key(i)).unwrap();
        }
    }
    db.flush().unwrap();
    for i in 1_000..1_100 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let expected: Vec<u64> = (if delete_some { 50 } else { 0 }..100)
        .chain(1_000..1_100)
        .collect();
    let keys: Vec<Vec<u8>> = db.iter().map(|p| p.unwrap().0).collect();
    assert_eq!(
        keys,
        expected.iter().map(|&i| common::key(i)).collect::<Vec<_>>()
    );
    db.stats()
}

/// Two level-0 tables over disjoint ranges, nothing below: they move to the base level, which
/// for a store this small is the last one (levels are sized from the largest up). But when one
/// holds tombstones, a move would keep them at the bottom of the tree where nothing is left to
/// hide, so the tables are merged instead and the tombstones dropped.
#[test]
fn a_table_whose_tombstones_would_reach_the_bottom_is_rewritten_not_moved() {
    let plain = tempfile::tempdir().unwrap();
    let stats = two_flushed_ranges(plain.path(), false);
    let last = stats.levels.len() - 1;
    assert_eq!((stats.trivial_moves, stats.compactions), (1, 0));
    assert_eq!(stats.levels[last].tables_moved, 2);

    let with_deletes = tempfile::tempdir().unwrap();
    let stats = two_flushed_ranges(with_deletes.path(), true);
    assert_eq!((stats.trivial_moves, stats.compactions), (0, 1));
    for table in &stats.tables {
        assert_eq!(table.level, last);
        assert_eq!(tombstones_in(with_deletes.path(), table.number), 0);
    }
}

/// A random workload of puts and deletes over a small key space, checked against a map after
/// every round and after a reopen. Moves happen, and no table of the last level holds a
/// tombstone: a merge into it drops them, and a table holding some is never moved there.
#[test]
fn moves_keep_every_key_and_tombstones_only_where_they_hide_something() {
    moves_against_a_model(true);
}

/// The same with level targets fixed from level 1 down.
#[test]
fn moves_keep_every_key_with_fixed_level_sizes() {
    moves_against_a_model(false);
}

fn moves_against_a_model(dynamic_level_sizes: bool) {
    let dir = tempfile::tempdir().unwrap();
    const LEVELS: usize = 4;
    let options = || {
        let mut options = common::small_tree_options()
            .level_size_ratio(2)
            .dynamic_level_sizes(dynamic_level_sizes);
        options.tuning.num_levels = LEVELS;
        options
    };
    let db = Db::open(dir.path(), options()).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = SmallRng::seed_from_u64(7);
    for round in 0..12u64 {
        // Each round writes mostly within one stretch of the key space, so that some tables
        // overlap nothing below them.
        let base = rng.gen_range(0..20) * 1_000;
        for _ in 0..1_500 {
            let i = base + rng.gen_range(0..1_000);
            if rng.gen_bool(0.2) {
                db.delete(common::key(i)).unwrap();
                model.remove(&i);
            } else {
                db.put(common::key(i), common::value(i, round)).unwrap();
                model.insert(i, round);
            }
        }
        db.wait_for_background_work().unwrap();
        assert_matches_model(&db, &model);
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    assert!(stats.trivial_moves > 0, "{:?}", stats.levels);
    let last_level: Vec<u64> = stats
        .tables
        .iter()
        .filter(|t| t.level == LEVELS - 1)
        .map(|t| t.number)
        .collect();
    assert!(!last_level.is_empty(), "{:?}", stats.levels);
    for number in last_level {
        assert_eq!(tombstones_in(dir.path(), number), 0, "table {number}");
    }
    drop(db);
    let db = Db::open(dir.path(), options()).unwrap();
    assert_matches_model(&db, &model);
}

/// Random keys into a tree sized from its largest level up: the levels holding data are one
/// unbroken run ending at the last level, which holds most of the bytes. With fixed sizes the
/// same load fills the tree from level 1 down and leaves the last level empty.
#[test]
fn dynamic_level_sizes_keep_most_data_in_the_last_level() {
    let load = |dynamic: bool| {
        let dir = tempfile::tempdir().unwrap();
        let options = common::small_tree_options().dynamic_level_sizes(dynamic);
        let db = Db::open(dir.path(), options.clone()).unwrap();
        let mut model = BTreeMap::new();
        let mut rng = SmallRng::seed_from_u64(11);
        for _ in 0..40_000 {
            let i = rng.gen_range(0..1_000_000);
            db.put(common::key(i), common::value(i, 0)).unwrap();
            model.insert(i, 0);
        }
        db.flush().unwrap();
        db.wait_for_background_work().unwrap();
        let levels: Vec<u64> = db.stats().levels.iter().map(|l| l.bytes).collect();
        drop(db);
        let db = Db::open(dir.path(), options).unwrap();
        assert_matches_model(&db, &model);
        levels
    };

    let levels = load(true);
    let last = levels.len() - 1;
    let first = (1..=last).find(|&l| levels[l] > 0).unwrap();
    assert!(levels[first..].iter().all(|&b| b > 0), "{levels:?}");
    assert!(first > 1, "a small tree does not reach level 1: {levels:?}");
    let total: u64 = levels.iter().sum();
    assert!(levels[last] * 10 >= total * 6, "{levels:?}");

    let fixed = load(false);
    assert!(fixed[1] > 0 && fixed[last] == 0, "{fixed:?}");
}

/// Level-0 merges take the whole base level, so they are split into key ranges merged side by
/// side: the tables of every level stay sorted and disjoint (the check verifies it), and every
/// key reads back, before and after a reopen.
#[test]
fn level_0_merges_split_into_parts_keep_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let options = common::small_tree_options();
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = SmallRng::seed_from_u64(5);
    for round in 0..30_000u64 {
        let i = rng.gen_range(0..200_000);
        db.put(common::key(i), common::value(i, round)).unwrap();
        model.insert(i, round);
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    assert!(stats.split_compactions > 0, "{stats:?}");
    assert_levels_sorted_and_disjoint(&stats);
    let report = db.check();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_matches_model(&db, &model);
    let tables = stats.tables.len();
    drop(db);
    let db = Db::open(dir.path(), options).unwrap();
    assert_matches_model(&db, &model);
    assert_eq!(db.stats().tables.len(), tables);
}

/// Every level below 0 holds tables of disjoint key ranges.
fn assert_levels_sorted_and_disjoint(stats: &Stats) {
    for level in 1..stats.levels.len() {
        let mut tables: Vec<_> = stats.tables.iter().filter(|t| t.level == level).collect();
        tables.sort_by(|a, b| a.smallest_key.cmp(&b.smallest_key));
        for pair in tables.windows(2) {
            assert!(
                pair[0].largest_key < pair[1].smallest_key,
                "level {level}: tables {} and {} overlap",
                pair[0].number,
                pair[1].number
            );
        }
    }
}

fn assert_matches_model(db: &Db, model: &BTreeMap<u64, u64>) {
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .map(|(&i, &v)| (common::key(i), common::value(i, v)))
        .collect();
    let actual: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|p| p.unwrap()).collect();
    assert_eq!(actual.len(), expected.len());
    assert!(actual == expected, "the store differs from the model");
}

/// The table files in the store's directory on `fs`.
fn fault_fs_tables(fs: &FaultFs) -> Vec<PathBuf> {
    use bloomkv::fs::FileSystem;
    fs.list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .filter(|name| matches!(filename::parse_file_name(name), Some(FileKind::Table(_))))
        .map(|name| Path::new(DIR).join(name))
        .collect()
}

/// One compaction thread, and level-0 limits high enough that the tables flushed while a
/// compaction is held never stall writes.
fn held_options(fs: &FaultFs) -> Options {
    let mut options = Options::default()
        .memtable_size(16 * 1024)
        .l0_compaction_trigger(2)
        .compaction_threads(1)
        .file_system(Arc::new(fs.clone()));
    options.tuning.l0_slowdown_trigger = 64;
    options.tuning.l0_stop_trigger = 64;
    options
}

fn fill_range(db: &Db, from: u64, to: u64) {
    for i in from..to {
        db.put(common::key(i), common::value(i, 1)).unwrap();
    }
}

/// Runs `work` in a thread and waits at most a minute for it: a write path that waits for a
/// held compaction would wait for ever.
fn within_a_minute<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    result
        .recv_timeout(Duration::from_secs(60))
        .expect("the work did not finish while the compaction was held")
}

/// Releases held reads when dropped, so that a failed assertion never leaves the store's
/// threads (which the store joins when dropped) waiting for ever.
struct ReleaseOnDrop(FaultFs);

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        self.0.release_reads();
    }
}

/// Waits until a read of a held file is waiting: the compaction is inside its merge.
fn wait_for_held_read(fs: &FaultFs) {
    for _ in 0..6_000 {
        if fs.held_reads_waiting() > 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the compaction never read its held input");
}

/// A store of 500 keys, settled, whose table files' reads are held from now on.
fn store_with_held_tables() -> (FaultFs, Arc<Db>, ReleaseOnDrop) {
    let fs = FaultFs::new();
    let db = Arc::new(Db::open(DIR, held_options(&fs)).unwrap());
    fill_range(&db, 0, 500);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    fs.hold_reads_of(fault_fs_tables(&fs));
    let release = ReleaseOnDrop(fs.clone());
    (fs, db, release)
}

/// A background compaction is held inside its merge (reads of its first input wait); writes
/// go on through many memtables, each flushed, and a `flush` returns, all while it is held.
#[test]
fn flushes_go_on_while_a_background_compaction_is_held() {
    let (fs, db, _release) = store_with_held_tables();
    // The same keys again: the next compaction takes held tables, and stops at the first
    // read of one.
    fill_range(&db, 0, 500);
    db.flush().unwrap();
    wait_for_held_read(&fs);
    let before = db.stats();
    let writer = Arc::clone(&db);
    within_a_minute(move || {
        // About 20 memtables' worth of writes, against a limit of 2 waiting for flush.
        fill_range(&writer, 1_000, 3_000);
        writer.flush().unwrap();
    });
    let stats = db.stats();
    assert!(
        stats.flushes >= before.flushes + 10,
        "{} flushes",
        stats.flushes
    );
    assert_eq!(
        stats.compactions + stats.trivial_moves,
        before.compactions + before.trivial_moves,
        "the only compaction thread is held"
    );
    assert!(fs.held_reads_waiting() > 0);
    fs.release_reads();
    db.wait_for_background_work().unwrap();
    assert!(db.stats().compactions > before.compactions);
    assert_eq!(db.iter().count(), 2_500);
}

/// While a held compaction lets level 0 grow past its slowdown trigger, writes are slowed to
/// the delayed rate, which falls as level 0 keeps growing; none is refused and none waits for
/// the compaction. Once the compaction goes on, the slowdown ends.
#[test]
fn writers_slow_down_while_level_0_is_behind_and_never_stop() {
    let fs = FaultFs::new();
    let rate = 128 * 1024;
    let options = held_options(&fs)
        .l0_write_triggers(4, 64)
        .delayed_write_rate(rate);
    let db = Arc::new(Db::open(DIR, options).unwrap());
    fill_range(&db, 0, 500);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    fs.hold_reads_of(fault_fs_tables(&fs));
    let _release = ReleaseOnDrop(fs.clone());
    fill_range(&db, 0, 500);
    db.flush().unwrap();
    wait_for_held_read(&fs);
    let before = db.stats();
    let writer = Arc::clone(&db);
    let written = within_a_minute(move || {
        let mut bytes = 0;
        for i in 1_000..3_000 {
            let (key, value) = (common::key(i), common::value(i, 1));
            bytes += (key.len() + value.len()) as u64;
            writer.put(key, value).unwrap();
        }
        bytes
    });
    let stats = db.stats();
    let level0 = stats.levels[0].tables;
    assert!(
        (5..64).contains(&level0),
        "level 0 grew past the slowdown trigger, not to the stop: {level0}"
    );
    let slowed = stats.delayed_write_rate.expect("writes are slowed");
    assert!(
        slowed < rate,
        "the rate fell while level 0 grew: {slowed} of {rate}"
    );
    // Sleeps are never shorter than asked: the writes past the trigger paid at least for a
    // fifth of the bytes at the full rate.
    let delayed = Duration::from_micros(stats.stall_micros - before.stall_micros);
    assert!(
        delayed >= Duration::from_secs_f64(written as f64 / 5.0 / rate as f64),
        "delayed {delayed:?} for {written} bytes"
    );
    assert!(stats.write_stalls > before.write_stalls);
    assert_eq!(
        (stats.write_stops_for_flush, stats.write_stops_for_level0),
        (before.write_stops_for_flush, before.write_stops_for_level0),
        "delayed, never stopped"
    );
    assert!(stats.longest_stall_micros > 0);
    assert!(stats.longest_stall_micros <= stats.stall_micros - before.stall_micros);
    fs.release_reads();
    db.wait_for_background_work().unwrap();
    db.put(b"after", b"compaction").unwrap();
    assert_eq!(db.stats().delayed_write_rate, None, "level 0 caught up");
    assert_eq!(db.iter().count(), 2_501);
}

/// By default writes are slowed from 20 level-0 tables (`Options::l0_slowdown_trigger`), as
/// RocksDB's. Level 0 grows one flushed table at a time behind a held compaction; a write is
/// delayed exactly once it finds twenty there.
#[test]
fn by_default_writes_slow_down_from_twenty_level_0_tables() {
    let fs = FaultFs::new();
    let slowdown = Options::default().tuning.l0_slowdown_trigger;
    assert_eq!(slowdown, 20);
    let options = held_options(&fs).l0_write_triggers(slowdown, 64);
    let db = Db::open(DIR, options).unwrap();
    fill_range(&db, 0, 500);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    fs.hold_reads_of(fault_fs_tables(&fs));
    let _release = ReleaseOnDrop(fs.clone());
    // Keys among those already in the tables, so that the compaction out of level 0 merges
    // with (and waits on) them rather than moving its tables down.
    let mut next = 0;
    let mut put_and_flush = |db: &Db| {
        db.put(common::key(next), common::value(next, 1)).unwrap();
        db.flush().unwrap();
        next += 1;
    };
    put_and_flush(&db);
    put_and_flush(&db);
    wait_for_held_read(&fs);
    loop {
        let level0 = db.stats().levels[0].tables;
        db.put(b"probe", b"write").unwrap();
        let delayed = db.stats().delayed_write_rate;
        if level0 < slowdown {
            assert_eq!(delayed, None, "delayed with {level0} level-0 tables");
        } else {
            assert!(
                delayed.is_some(),
                "not delayed with {level0} level-0 tables"
            );
            assert_eq!(level0, slowdown, "level 0 grows one table at a time");
            break;
        }
        put_and_flush(&db);
    }
}

/// With level 0 at its stop trigger behind a held compaction, a write waits, and is counted
/// as a stop for level 0, until the compaction goes on; then it completes, and the longest
/// stall covers its wait.
#[test]
fn a_write_at_the_level_0_stop_waits_for_compaction_and_is_counted() {
    let fs = FaultFs::new();
    let options = held_options(&fs).l0_write_triggers(3, 3);
    let db = Arc::new(Db::open(DIR, options).unwrap());
    fill_range(&db, 0, 500);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    fs.hold_reads_of(fault_fs_tables(&fs));
    let release = ReleaseOnDrop(fs.clone());
    let before = db.stats();
    // The next compaction takes held tables and waits; flushes go on, so level 0 reaches its
    // stop and the writer waits there. (Every write is in this thread: one made by the test
    // itself would wait there too.)
    let writer = Arc::clone(&db);
    let blocked = std::thread::spawn(move || {
        fill_range(&writer, 0, 500);
        fill_range(&writer, 1_000, 3_000);
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.stats().write_stops_for_level0 == before.write_stops_for_level0 {
        let s = db.stats();
        assert!(
            Instant::now() < deadline,
            "no write stopped at level 0: level 0 {}, stops for flush {}, held {}, done {}",
            s.levels[0].tables,
            s.write_stops_for_flush,
            fs.held_reads_waiting(),
            blocked.is_finished()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(db.stats().levels[0].tables >= 3);
    // The compaction may count as started before it reaches its first (held) read.
    while fs.held_reads_waiting() == 0 {
        assert!(
            Instant::now() < deadline,
            "the compaction never reached a held read"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        !blocked.is_finished(),
        "the writer waits for the compaction"
    );
    std::thread::sleep(Duration::from_millis(50));
    drop(release);
    blocked.join().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    assert!(
        stats.longest_stall_micros >= 50_000,
        "the stopped write waited at least 50 ms: {}",
        stats.longest_stall_micros
    );
    assert_eq!(db.iter().count(), 2_500);
}

/// The same with a manual `compact` held: flushes and writes go on, and the compaction ends
/// once released, with the writes made meanwhile still there.
#[test]
fn flushes_go_on_while_a_manual_compaction_is_held() {
    let (fs, db, _release) = store_with_held_tables();
    let compacting = Arc::clone(&db);
    let manual = std::thread::spawn(move || compacting.compact());
    wait_for_held_read(&fs);
    let writer = Arc::clone(&db);
    within_a_minute(move || {
        fill_range(&writer, 1_000, 3_000);
        writer.flush().unwrap();
    });
    assert!(db.stats().flushes >= 10);
    assert!(!manual.is_finished());
    fs.release_reads();
    manual.join().unwrap().unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(db.iter().count(), 2_500);
}

/// The counters against what was written: user bytes and batches exactly; each level's bytes
/// equal to what was written and moved into it less what compactions read and moved out; the
/// total written by WAL, flushes and compactions; and, in a store that never flushed, WAL
/// bytes equal to the log file's size.
#[test]
fn write_counters_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), common::small_tree_options()).unwrap());
    let written = Arc::new(Mutex::new((0u64, 0u64)));
    let writers: Vec<_> = (0..3u64)
        .map(|thread| {
            let (db, written) = (Arc::clone(&db), Arc::clone(&written));
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(thread);
                for n in 0..2_000u64 {
                    let i = rng.gen_range(0..5_000);
                    let mut batch = WriteBatch::new();
                    if n % 7 == 0 {
                        batch.delete(common::key(i));
                    } else {
                        batch.put(common::key(i), common::value(i, n));
                    }
                    let bytes = batch.payload_bytes() as u64;
                    db.write(batch).unwrap();
                    let mut total = written.lock().unwrap();
                    total.0 += bytes;
                    total.1 += 1;
                }
            })
        })
        .collect();
    writers.into_iter().for_each(|w| w.join().unwrap());
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    let (user_bytes, batches) = *written.lock().unwrap();
    assert_eq!(stats.user_bytes_written, user_bytes);
    assert_eq!(stats.grouped_batches, batches);
    assert!(stats.write_groups >= 1 && stats.write_groups <= batches);
    assert!(stats.compactions > 0 && stats.flushes > 0);
    let levels = &stats.levels;
    for (level, l) in levels.iter().enumerate() {
        let moved_out = levels.get(level + 1).map_or(0, |next| next.bytes_moved);
        assert_eq!(
            l.bytes + l.bytes_read + moved_out,
            l.bytes_written + l.bytes_moved,
            "level {level}: {l:?}"
        );
    }
    assert_eq!(
        stats.disk_bytes_written(),
        stats.wal_bytes_written + stats.flush_bytes_written() + stats.compaction_bytes_written()
    );
    let amplification = stats.write_amplification().unwrap();
    assert!(amplification > 1.0, "{amplification}");
    assert!(stats.compaction_bytes_read() > 0);

    let unflushed = tempfile::tempdir().unwrap();
    let db = Db::open(unflushed.path(), Options::default()).unwrap();
    for i in 0..3_000 {
        let options = WriteOptions::default().sync(i % 100 == 0);
        let mut batch = WriteBatch::new();
        batch.put(common::key(i), common::value(i, 0));
        db.write_opt(batch, &options).unwrap();
    }
    let wal_bytes = db.stats().wal_bytes_written;
    drop(db);
    let log_bytes: u64 = std::fs::read_dir(unflushed.path())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert_eq!(wal_bytes, log_bytes);
}

/// The write counters outlive the open: after a close, a read-only open reports the same
/// totals, and a writer opened again goes on from them.
#[test]
fn write_totals_outlive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    for i in 0..3_000 {
        db.put(common::key(i % 700), common::value(i, 0)).unwrap();
    }
    db.wait_for_background_work().unwrap();
    let before = db.stats();
    db.close().unwrap();
    let lifetime = |s: &Stats| {
        (
            s.user_bytes_written,
            s.wal_bytes_written,
            s.flushes,
            s.compactions,
            s.trivial_moves,
            s.stall_micros,
            s.levels
                .iter()
                .map(|l| (l.bytes_written, l.bytes_read, l.tables_moved))
                .collect::<Vec<_>>(),
        )
    };
    let reader = Db::open_read_only(dir.path(), common::small_tree_options()).unwrap();
    assert_eq!(lifetime(&reader.stats()), lifetime(&before));
    assert!(reader.stats().write_amplification().unwrap() > 1.0);
    drop(reader);
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    db.put(b"one more", b"value").unwrap();
    let after = db.stats();
    assert_eq!(after.user_bytes_written, before.user_bytes_written + 13);
    assert!(after.flushes >= before.flushes);
}

/// A manual compaction takes every table; flushes beside it add level-0 tables whose keys fall
/// in a gap of its range. Their compaction would write into its output level inside its range,
/// between tables it is about to replace: it must wait, or the level would end with
/// overlapping tables and lookups would miss keys.
#[test]
fn a_compaction_beside_a_manual_one_never_writes_into_its_range() {
    let fs = FaultFs::new();
    let db = Arc::new(Db::open(DIR, held_options(&fs)).unwrap());
    fill_range(&db, 0, 200);
    fill_range(&db, 800, 1_000);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    fs.hold_reads_of(fault_fs_tables(&fs));
    let _release = ReleaseOnDrop(fs.clone());
    let compacting = Arc::clone(&db);
    let manual = std::thread::spawn(move || compacting.compact());
    wait_for_held_read(&fs);
    for _ in 0..2 {
        fill_range(&db, 400, 450);
        db.flush().unwrap();
    }
    // Time for a background compaction of the two level-0 tables, were one allowed.
    std::thread::sleep(Duration::from_millis(300));
    fs.release_reads();
    manual.join().unwrap().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    assert_levels_sorted_and_disjoint(&stats);
    for i in (0..200).chain(400..450).chain(800..1_000) {
        assert_eq!(db.get(common::key(i)).unwrap(), Some(common::value(i, 1)));
    }
}

/// The `nice` value of each of this process's threads named `name`, from `/proc`.
#[cfg(linux_extras)]
fn nice_of_threads_named(name: &str) -> Vec<i64> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // After the name in parentheses: state is field 3, nice field 19.
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let nice = after_name.split(' ').nth(16).unwrap().parse().unwrap();
        found.push(nice);
    }
    found
}

#[cfg(linux_extras)]
#[test]
fn compaction_threads_run_at_the_nice_increment_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let own: i64 = {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        after_name.split(' ').nth(16).unwrap().parse().unwrap()
    };
    let wanted = (own + 7).min(19);
    let db = Db::open(dir.path(), Options::default().compaction_nice(7)).unwrap();
    // The threads lower themselves as they start; other tests' stores have threads of the
    // same name at other increments.
    let mut seen = Vec::new();
    for _ in 0..500 {
        seen = nice_of_threads_named("bloomkv-compact");
        if seen.contains(&wanted) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(seen.contains(&wanted), "{seen:?}, wanted {wanted}");
    db.close().unwrap();
    let err = Db::open(dir.path(), Options::default().compaction_nice(20)).unwrap_err();
    assert!(err.to_string().contains("compaction_nice"), "{err}");
}
