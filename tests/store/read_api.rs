//! Snapshots, `multi_get`, `contains_key` and `may_contain` against models of the store.

use crate::common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bloomkv::Db;

/// A small deterministic generator.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Every read of `snap` agrees with `model`: gets of every key (present, deleted, never
/// written), `multi_get`, `contains_key`, and a full scan.
fn check_snapshot(snap: &bloomkv::Snapshot, model: &Model, keys: u64) {
    let all: Vec<Vec<u8>> = (0..keys).map(common::key).collect();
    let scanned: Model = snap.iter().map(|r| r.unwrap()).collect();
    assert_eq!(scanned.len(), model.len(), "scan");
    for key in &all {
        assert_eq!(snap.get(key).unwrap().as_ref(), model.get(key), "{key:?}");
        assert_eq!(snap.contains_key(key).unwrap(), model.contains_key(key));
    }
    let batch = snap.multi_get(&all).unwrap();
    for (key, value) in all.iter().zip(&batch) {
        assert_eq!(value.as_ref(), model.get(key), "multi_get {key:?}");
    }
    let scanned: Model = snap.iter().map(|r| r.unwrap()).collect();
    assert_eq!(&scanned, model);
}

/// Random puts and deletes over a small-tree store, with snapshots taken along the way and
/// flushes and compactions in between: each live snapshot keeps reading what the model held
/// when it was taken; once all are dropped, a full compaction keeps one version per key.
#[test]
fn snapshots_see_their_moment_across_flushes_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    const KEYS: u64 = 600;
    let mut rng = Lcg(3);
    let mut model = Model::new();
    let mut taken: Vec<(bloomkv::Snapshot, Model)> = Vec::new();
    for step in 0..8_000u64 {
        let i = rng.below(KEYS);
        if rng.below(5) == 0 {
            db.delete(common::key(i)).unwrap();
            model.remove(&common::key(i));
        } else {
            let value = common::value(i, step);
            db.put(common::key(i), &value).unwrap();
            model.insert(common::key(i), value);
        }
        if step % 1_000 == 999 {
            taken.push((db.snapshot(), model.clone()));
        }
        if step % 2_500 == 2_499 {
            db.compact().unwrap();
        }
    }
    assert_eq!(db.stats().live_snapshots, taken.len());
    assert_eq!(
        db.stats().oldest_snapshot,
        Some(taken[0].0.sequence_number())
    );
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    for (snap, then) in &taken {
        check_snapshot(snap, then, KEYS);
    }
    db.compact().unwrap();
    let kept_with_snapshots = table_entries(&db);
    for (snap, then) in &taken {
        check_snapshot(snap, then, KEYS);
    }
    drop(taken);
    assert_eq!(db.stats().live_snapshots, 0);
    db.compact().unwrap();
    let live_keys = model.len() as u64;
    assert_eq!(
        table_entries(&db),
        live_keys,
        "one version of each live key"
    );
    assert!(kept_with_snapshots > live_keys, "{kept_with_snapshots}");
    let now = db.snapshot();
    check_snapshot(&now, &model, KEYS);
}

fn table_entries(db: &Db) -> u64 {
    db.stats().tables.iter().map(|t| t.entries).sum()
}

/// A writer rewrites every key in one batch, again and again, while flushes and compactions
/// run: a snapshot taken meanwhile sees one batch's values on every key, through `get`,
/// `multi_get` and a scan, however long it is read.
#[test]
fn a_snapshot_holds_still_under_concurrent_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), common::small_tree_options()).unwrap());
    const KEYS: u64 = 200;
    let keys: Vec<Vec<u8>> = (0..KEYS).map(common::key).collect();
    let write_round = |db: &Db, round: u64| {
        let mut batch = bloomkv::WriteBatch::new();
        for (i, key) in keys.iter().enumerate() {
            batch.put(key, common::value(i as u64, round));
        }
        db.write(batch).unwrap();
    };
    write_round(&db, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop, keys) = (Arc::clone(&db), Arc::clone(&stop), keys.clone());
        std::thread::spawn(move || {
            let mut round = 1;
            while !stop.load(Ordering::Relaxed) {
                let mut batch = bloomkv::WriteBatch::new();
                for (i, key) in keys.iter().enumerate() {
                    batch.put(key, common::value(i as u64, round));
                }
                db.write(batch).unwrap();
                round += 1;
            }
            round
        })
    };
    for _ in 0..5 {
        let snap = db.snapshot();
        let first = snap.get(&keys[0]).unwrap().unwrap();
        let round: u64 = String::from_utf8(first)
            .unwrap()
            .split('-')
            .nth(2)
            .unwrap()
            .parse()
            .unwrap();
        let expected: Vec<Option<Vec<u8>>> =
            (0..KEYS).map(|i| Some(common::value(i, round))).collect();
        for _ in 0..20 {
            assert_eq!(snap.multi_get(&keys).unwrap(), expected);
            for (key, value) in keys.iter().zip(&expected).step_by(17) {
                assert_eq!(&snap.get(key).unwrap(), value);
            }
            let scanned: Vec<Option<Vec<u8>>> = snap.iter().map(|r| Some(r.unwrap().1)).collect();
            assert_eq!(scanned, expected);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().unwrap();
    write_round(&db, rounds);
    assert!(db.stats().flushes > 0, "the writes flushed meanwhile");
}

/// `multi_get` answers as a `get` per key does, for batches with repeats, in any order, of
/// present, deleted and never-written keys, with part of the data still in memtables; and
/// its filter counters add up level by level.
#[test]
fn multi_get_equals_a_get_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let mut rng = Lcg(9);
    for i in 0..3_000u64 {
        db.put(common::key(2 * i), common::value(i, 0)).unwrap();
    }
    for i in (0..3_000u64).step_by(7) {
        db.delete(common::key(2 * i)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    for i in (0..3_000u64).step_by(11) {
        db.put(common::key(2 * i), common::value(i, 1)).unwrap(); // in the memtable
    }
    for _ in 0..40 {
        let len = 1 + rng.below(300) as usize;
        let batch: Vec<Vec<u8>> = (0..len).map(|_| common::key(rng.below(6_200))).collect();
        let one_by_one: Vec<Option<Vec<u8>>> = batch.iter().map(|k| db.get(k).unwrap()).collect();
        assert_eq!(db.multi_get(&batch).unwrap(), one_by_one);
    }
    assert_eq!(
        db.multi_get::<Vec<u8>>(&[]).unwrap(),
        Vec::<Option<Vec<u8>>>::new()
    );
    // The filters count a batch as they count a get per key (the block reads differ), on a
    // tree no flush or compaction changes in between.
    db.wait_for_background_work().unwrap();
    let batch: Vec<Vec<u8>> = (0..500).map(|_| common::key(rng.below(6_200))).collect();
    // The store's totals, then each level's probes, positives and true positives.
    let filter_counts = |s: &bloomkv::Stats| {
        let mut counts = vec![
            s.filter_probes,
            s.filter_positives,
            s.filter_negatives,
            s.filter_true_positives,
        ];
        for level in &s.levels {
            counts.extend([
                level.filter_probes,
                level.filter_positives,
                level.filter_true_positives,
            ]);
        }
        counts
    };
    let before = filter_counts(&db.stats());
    for key in &batch {
        db.get(key).unwrap();
    }
    let middle = filter_counts(&db.stats());
    db.multi_get(&batch).unwrap();
    let after = filter_counts(&db.stats());
    assert!(middle[0] > before[0], "the gets probed filters");
    for i in 0..after.len() {
        assert_eq!(after[i] - middle[i], middle[i] - before[i], "counter {i}");
    }
    common::assert_level_filter_counts_add_up(&db.stats());
}

/// A batch reads each block it needs once: present keys sharing blocks cost fewer block reads
/// than the same keys got one by one.
#[test]
fn multi_get_reads_a_shared_block_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    for i in 0..4_000u64 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let keys: Vec<Vec<u8>> = (1_000..1_400).map(common::key).collect();
    let reads = |db: &Db| db.stats().data_block_reads;
    let before = reads(&db);
    for key in &keys {
        assert!(db.get(key).unwrap().is_some());
    }
    let single = reads(&db) - before;
    let before = reads(&db);
    assert!(db.multi_get(&keys).unwrap().iter().all(Option::is_some));
    let batched = reads(&db) - before;
    assert!(
        batched * 4 < single,
        "{batched} block reads batched, {single} one by one"
    );
}

/// `contains_key` is `get().is_some()`; `may_contain` is never false for a present key, is
/// false for a key the memtable holds deleted, and false for most absent keys once they are
/// in tables (filters);
/// an oversized key is an error for `contains_key` and surely absent for `may_contain`.
#[test]
fn existence_checks_agree_with_get() {
    let dir = tempfile::tempdir().unwrap();
    // A memtable large enough for every write, until the flush.
    let db = Db::open(dir.path(), bloomkv::Options::default()).unwrap();
    for i in 0..2_000u64 {
        db.put(common::key(2 * i), common::value(i, 0)).unwrap();
    }
    for i in (0..2_000u64).step_by(5) {
        db.delete(common::key(2 * i)).unwrap();
    }
    let check = |db: &Db| {
        let mut absent_maybe = 0;
        for i in 0..4_000u64 {
            let key = common::key(i);
            let present = db.get(&key).unwrap().is_some();
            assert_eq!(db.contains_key(&key).unwrap(), present, "{i}");
            if present {
                assert!(db.may_contain(&key), "{i}");
            } else if i % 2 == 1 {
                absent_maybe += u64::from(db.may_contain(&key));
            }
        }
        absent_maybe
    };
    check(&db); // in the memtable, which knows the deleted keys
    for i in (0..2_000u64).step_by(5) {
        assert!(!db.may_contain(common::key(2 * i)), "deleted {i}");
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let false_positives = check(&db);
    assert!(
        false_positives < 100,
        "{false_positives} of 2,000 absent keys"
    );
    let huge = vec![b'k'; 70_000];
    assert!(db.contains_key(&huge).is_err());
    assert!(!db.may_contain(&huge));
}

/// Keys no table may hold: in an empty store, and first in a batch whose later keys are in
/// tables.
#[test]
fn multi_get_of_keys_no_table_covers() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let keys = [common::key(1), common::key(2)];
    assert_eq!(db.multi_get(&keys).unwrap(), vec![None, None]);
    for i in 100..2_000u64 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let keys = [common::key(1), common::key(500), common::key(9_999_999)];
    let expected = vec![None, Some(common::value(500, 0)), None];
    assert_eq!(db.multi_get(&keys).unwrap(), expected);
    common::assert_level_filter_counts_add_up(&db.stats());
}

/// A key whose first eight bytes differ from key to key, in an order unrelated to `i`: table
/// boundaries then fall between distinct prefixes, and a long level is searched by halves
/// before its last tables are counted one by one.
fn spread_key(i: u64) -> Vec<u8> {
    let mut key = i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes().to_vec();
    key.extend_from_slice(b"-tail");
    key
}

/// In levels of many tables, every stored key is found in its table and every key between
/// them is absent, by `get`, `multi_get`, `contains_key` and `may_contain`.
#[test]
fn lookups_find_their_table_in_a_long_level() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let stored = |i: u64| 2 * i;
    for i in 0..12_000u64 {
        db.put(spread_key(stored(i)), common::value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let longest = db.stats().levels.iter().map(|l| l.tables).max().unwrap();
    // Past 16 tables a level is first searched by halves.
    assert!(longest > 20, "the longest level holds {longest} tables");
    for i in 0..12_000u64 {
        let (present, absent) = (spread_key(stored(i)), spread_key(stored(i) + 1));
        assert_eq!(
            db.get(&present).unwrap(),
            Some(common::value(i, 0)),
            "key {i}"
        );
        assert!(db.contains_key(&present).unwrap());
        assert!(db.may_contain(&present));
        assert_eq!(db.get(&absent).unwrap(), None);
        assert!(!db.contains_key(&absent).unwrap());
    }
    let batch: Vec<Vec<u8>> = (0..24_000u64).map(spread_key).collect();
    let found = db.multi_get(&batch).unwrap();
    for (i, value) in found.iter().enumerate() {
        let i = i as u64;
        let expected = i.is_multiple_of(2).then(|| common::value(i / 2, 0));
        assert_eq!(value, &expected, "key {i}");
    }
}

/// `range` takes what `BTreeMap::range` takes: ranges of `&str`, of `Vec<u8>`, open and
/// inclusive ones, and a pair of bounds; on the store and on a snapshot.
#[test]
fn range_takes_rust_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default()).unwrap();
    for k in ["a", "b", "c", "d"] {
        db.put(k, k).unwrap();
    }
    let keys = |it: bloomkv::DbIterator| -> Vec<String> {
        it.map(|r| String::from_utf8(r.unwrap().0).unwrap())
            .collect()
    };
    assert_eq!(keys(db.range("a".."c")), ["a", "b"]);
    assert_eq!(keys(db.range("b"..)), ["b", "c", "d"]);
    assert_eq!(keys(db.range(..="c")), ["a", "b", "c"]);
    assert_eq!(keys(db.range(b"b".to_vec()..b"d".to_vec())), ["b", "c"]);
    assert_eq!(keys(db.range::<&[u8], _>(..)), ["a", "b", "c", "d"]);
    let bounds = (
        std::ops::Bound::Excluded(&b"a"[..]),
        std::ops::Bound::Included(&b"c"[..]),
    );
    assert_eq!(keys(db.range::<&[u8], _>(bounds)), ["b", "c"]);
    let snapshot = db.snapshot();
    db.put("bb", "later").unwrap();
    assert_eq!(keys(snapshot.range("a"..="c")), ["a", "b", "c"]);
    assert_eq!(keys(db.range("a"..="c")), ["a", "b", "bb", "c"]);
}

/// The builders cover the options a store checks at open.
#[test]
fn every_sized_option_has_a_builder() {
    let options = bloomkv::Options::default()
        .block_size(8 * 1024)
        .num_levels(5)
        .max_immutable_memtables(3)
        .l0_compaction_trigger(2)
        .l0_write_triggers(6, 9);
    assert_eq!(
        (
            options.block_size,
            options.tuning.num_levels,
            options.tuning.max_immutable_memtables
        ),
        (8 * 1024, 5, 3)
    );
    let dir = tempfile::tempdir().unwrap();
    let db = bloomkv::Db::open(dir.path(), options).unwrap();
    db.put("k", "v").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get("k").unwrap(), Some(b"v".to_vec()));
    let bad = bloomkv::Options::default().num_levels(1);
    assert!(bloomkv::Db::open(dir.path().join("other"), bad).is_err());
}

/// Counts the allocations each thread makes, so a test can count those of its own reads
/// while other tests run beside it.
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    pub struct Counting;

    thread_local! {
        static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    }

    // SAFETY: every call is passed to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
            System.alloc(layout)
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            System.dealloc(ptr, layout)
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
            System.realloc(ptr, layout, new_size)
        }
    }

    /// Allocations this thread has made so far.
    pub fn allocations() -> u64 {
        ALLOCATIONS.with(Cell::get)
    }
}

#[global_allocator]
static COUNTING: counting::Counting = counting::Counting;

/// A store of `n` keys of 100-byte values, half in tables (flushed and compacted), half in
/// the memtable.
fn store_half_in_tables(dir: &std::path::Path, n: u64) -> Db {
    let db = Db::open(dir, bloomkv::Options::default()).unwrap();
    for i in (0..n).filter(|i| i % 2 == 0) {
        db.put(common::key(i), [i as u8; 100]).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    for i in (0..n).filter(|i| i % 2 == 1) {
        db.put(common::key(i), [i as u8; 100]).unwrap();
    }
    db
}

#[test]
fn pinned_table_gets_and_cursor_steps_allocate_nothing_per_entry() {
    let dir = tempfile::tempdir().unwrap();
    let n = 4000;
    let db = store_half_in_tables(dir.path(), n);
    let keys: Vec<Vec<u8>> = (0..n).map(common::key).collect();
    // Keys in tables (even) and in the memtable (odd); once to warm the block cache, once
    // counted.
    for round in 0..2 {
        for in_memtable in [false, true] {
            let before = counting::allocations();
            let mut gets = 0;
            for (i, key) in keys.iter().enumerate() {
                if (i % 2 == 1) == in_memtable {
                    let value = db.get_pinned(key).unwrap().unwrap();
                    assert_eq!(value, [i as u8; 100]);
                    gets += 1;
                }
            }
            let made = counting::allocations() - before;
            if round == 1 {
                // A value read from a table shares its block: nothing allocated. One found
                // in a memtable is copied out, once.
                let expected = if in_memtable { gets } else { 0 };
                assert_eq!(
                    made, expected,
                    "allocations for {gets} gets, memtable {in_memtable}"
                );
            }
        }
    }
    let before = counting::allocations();
    let mut cursor = db.cursor();
    cursor.seek_to_first().unwrap();
    let mut seen = 0;
    while let Some(key) = cursor.key() {
        assert_eq!(key, keys[seen].as_slice());
        assert_eq!(cursor.value().unwrap(), &[seen as u8; 100][..]);
        seen += 1;
        cursor.next().unwrap();
    }
    assert_eq!(seen as u64, n);
    let per_step = (counting::allocations() - before) as f64 / n as f64;
    // Walks are made at the seek, nothing per entry nor per block.
    assert!(per_step < 0.01, "{per_step} allocations per cursor step");
}

#[test]
fn a_pinned_value_outlives_its_block_its_table_and_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let n = 2000;
    let db = store_half_in_tables(dir.path(), n);
    let in_table = db.get_pinned(common::key(10)).unwrap().unwrap();
    let in_memtable = db.get_pinned(common::key(11)).unwrap().unwrap();
    let tables_before: Vec<std::path::PathBuf> = (db.stats().tables.iter())
        .map(|t| dir.path().join(format!("{:06}.sst", t.number)))
        .collect();
    assert!(!tables_before.is_empty());
    assert!(tables_before.iter().all(|path| path.exists()));
    // Every key rewritten and compacted: the tables and the memtable read from are gone,
    // and the block cache holds none of their blocks.
    for i in 0..n {
        db.put(common::key(i), b"new").unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    db.drop_table_caches().unwrap();
    for path in &tables_before {
        assert!(!path.exists(), "{} still there", path.display());
    }
    assert_eq!(db.get(common::key(10)).unwrap().unwrap(), b"new");
    assert_eq!(in_table, [10u8; 100]);
    assert_eq!(in_memtable, [11u8; 100]);
    assert_eq!(Vec::from(in_table.clone()), vec![10u8; 100]);
    assert_eq!(db.get_pinned(common::key(n)).unwrap(), None);
    db.delete(common::key(10)).unwrap();
    assert_eq!(db.get_pinned(common::key(10)).unwrap(), None);
    drop(db);
    assert_eq!(&*in_table, &[10u8; 100][..]);
    assert_eq!(&*in_memtable, &[11u8; 100][..]);
}
