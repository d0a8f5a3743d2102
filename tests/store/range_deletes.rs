//! Range deletions: `delete_range` against a model under random writes, flushes, compactions,
//! snapshots and reopens; a deleted range read through every read call; the space it held
//! given back by a full compaction; gets of deleted keys that read no old table; and
//! transactions, batches and keyspaces that delete ranges.

use crate::common;

use std::collections::BTreeMap;
use std::ops::Bound;

use bloomkv::{Db, KeyspaceOptions, Options, Snapshot, WriteBatch};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn random_key(rng: &mut SmallRng) -> Vec<u8> {
    format!("k{:04}", rng.gen_range(0..1500)).into_bytes()
}

fn random_value(rng: &mut SmallRng) -> Vec<u8> {
    let len = rng.gen_range(1..80);
    (0..len).map(|_| rng.gen()).collect()
}

/// A random range, at times empty or reversed (which deletes nothing).
fn random_range(rng: &mut SmallRng) -> (Vec<u8>, Vec<u8>) {
    let start = random_key(rng);
    let end = match rng.gen_range(0..10) {
        0 => start.clone(),
        1 => random_key(rng),
        _ => {
            let width = rng.gen_range(1..200);
            let n: u32 = std::str::from_utf8(&start[1..]).unwrap().parse().unwrap();
            format!("k{:04}", n + width).into_bytes()
        }
    };
    (start, end)
}

fn delete_from_model(model: &mut Model, start: &[u8], end: &[u8]) {
    if start < end {
        let doomed: Vec<Vec<u8>> = (model
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end))))
        .map(|(k, _)| k.clone())
        .collect();
        for k in doomed {
            model.remove(&k);
        }
    }
}

fn pairs(model: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    model.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Every read of a snapshot against the model of its moment: gets, a full scan both ways, a
/// range, a cursor.
fn check_snapshot(snapshot: &Snapshot, model: &Model, rng: &mut SmallRng, what: &str) {
    for _ in 0..20 {
        let k = random_key(rng);
        assert_eq!(
            snapshot.get(&k).unwrap(),
            model.get(&k).cloned(),
            "{what}: {k:?}"
        );
    }
    let all: Vec<_> = snapshot.iter().map(|r| r.unwrap()).collect();
    assert_eq!(all, pairs(model), "{what}: scan");
    let mut back: Vec<_> = snapshot.iter().rev().map(|r| r.unwrap()).collect();
    back.reverse();
    assert_eq!(back, pairs(model), "{what}: scan backwards");
    let mut cursor = snapshot.cursor();
    let from = random_key(rng);
    cursor.seek(&from).unwrap();
    let expected = model.range(from.clone()..).next().map(|(k, _)| k.clone());
    assert_eq!(
        cursor.key().map(<[u8]>::to_vec),
        expected,
        "{what}: cursor at {from:?}"
    );
}

fn run_case(seed: u64, ops: usize) {
    let dir = tempfile::tempdir().unwrap();
    let options = || common::small_tree_options();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut db = Db::open(dir.path(), options()).unwrap();
    // Snapshots held across the writes, with the model of their moment.
    let mut held: Vec<(Snapshot, Model)> = Vec::new();
    let mut range_deletes = 0;
    for step in 0..ops {
        let what = format!("seed {seed} step {step}");
        match rng.gen_range(0..100) {
            0..=39 => {
                let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            40..=44 => {
                let k = random_key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            45..=49 => {
                let (start, end) = random_range(&mut rng);
                db.delete_range(&start, &end).unwrap();
                delete_from_model(&mut model, &start, &end);
                range_deletes += 1;
            }
            50..=52 => {
                // A batch: what it writes after its range deletion stays.
                let mut batch = WriteBatch::new();
                let (start, end) = random_range(&mut rng);
                let before = random_key(&mut rng);
                batch.put(&before, b"before");
                model.insert(before, b"before".to_vec());
                batch.delete_range(&start, &end);
                delete_from_model(&mut model, &start, &end);
                let after = random_key(&mut rng);
                batch.put(&after, b"after");
                model.insert(after, b"after".to_vec());
                db.write(batch).unwrap();
            }
            53..=74 => {
                let k = random_key(&mut rng);
                assert_eq!(
                    db.get(&k).unwrap(),
                    model.get(&k).cloned(),
                    "{what}: get {k:?}"
                );
                assert_eq!(
                    db.contains_key(&k).unwrap(),
                    model.contains_key(&k),
                    "{what}"
                );
                if !db.may_contain(&k) {
                    assert!(!model.contains_key(&k), "{what}: may_contain {k:?}");
                }
            }
            75..=77 => {
                let keys: Vec<Vec<u8>> = (0..8).map(|_| random_key(&mut rng)).collect();
                let want: Vec<Option<Vec<u8>>> =
                    keys.iter().map(|k| model.get(k).cloned()).collect();
                assert_eq!(db.multi_get(&keys).unwrap(), want, "{what}: multi_get");
            }
            78..=81 => {
                let (a, b) = (random_key(&mut rng), random_key(&mut rng));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let got: Vec<_> = db
                    .range(lo.clone()..hi.clone())
                    .map(|r| r.unwrap())
                    .collect();
                let want: Vec<_> = model
                    .range(lo..hi)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "{what}: range");
            }
            82..=84 => {
                if held.len() < 3 {
                    held.push((db.snapshot(), model.clone()));
                } else {
                    let (snapshot, at) = held.remove(rng.gen_range(0..held.len()));
                    check_snapshot(&snapshot, &at, &mut rng, &what);
                }
            }
            85..=91 => db.flush().unwrap(),
            92..=94 => db.wait_for_background_work().unwrap(),
            95..=97 => db.compact().unwrap(),
            _ => {
                for (snapshot, at) in held.drain(..) {
                    check_snapshot(&snapshot, &at, &mut rng, &what);
                }
                drop(db);
                db = Db::open(dir.path(), options()).unwrap();
            }
        }
    }
    for (snapshot, at) in held.drain(..) {
        check_snapshot(&snapshot, &at, &mut rng, &format!("seed {seed} at the end"));
    }
    assert!(range_deletes > 0);
    let all: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
    assert_eq!(all, pairs(&model), "seed {seed}: final scan");
    // Reopened, then compacted whole: still the model.
    drop(db);
    let db = Db::open(dir.path(), options()).unwrap();
    db.compact().unwrap();
    let all: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
    assert_eq!(all, pairs(&model), "seed {seed}: after a full compaction");
    // Every deletion had every older entry it covered in the compaction: none is left.
    assert_eq!(db.stats().keyspaces[0].range_deletions, 0, "seed {seed}");
}

#[test]
fn random_range_deletions_match_a_model() {
    for seed in [11, 12, 13] {
        run_case(seed, 6_000);
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn fill(db: &Db, keys: std::ops::Range<u64>) {
    for chunk in keys.collect::<Vec<_>>().chunks(1000) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(key(i), common::value(i, 0));
        }
        db.write(batch).unwrap();
    }
}

/// A range of 200,000 keys deleted by one write: reads through it and around it see the
/// deletion at once, and a full compaction gives the store's size on disk back to that of a
/// store that never held the range.
#[test]
fn deleting_a_large_range_is_one_write_and_a_full_compaction_gives_its_space_back() {
    const KEYS: u64 = 220_000;
    let options = || {
        Options::default()
            .memtable_size(1 << 20)
            .table_size(1 << 20)
    };
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    fill(&db, 0..KEYS);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let before = db.stats().last_sequence;
    db.delete_range(key(10_000), key(210_000)).unwrap();
    assert_eq!(db.stats().last_sequence, before + 1, "one write");
    assert_eq!(db.stats().keyspaces[0].range_deletions, 1);
    assert_eq!(db.get(key(9_999)).unwrap(), Some(common::value(9_999, 0)));
    assert_eq!(db.get(key(10_000)).unwrap(), None);
    assert_eq!(db.get(key(209_999)).unwrap(), None);
    assert_eq!(
        db.get(key(210_000)).unwrap(),
        Some(common::value(210_000, 0))
    );
    // Keys inside and outside the range in one batch: those outside are read batched.
    let keys = [key(9_999), key(10_000), key(150_000), key(210_000)];
    let expected = vec![
        Some(common::value(9_999, 0)),
        None,
        None,
        Some(common::value(210_000, 0)),
    ];
    assert_eq!(db.multi_get(&keys).unwrap(), expected);
    assert_eq!(db.iter().count(), 20_000);
    assert_eq!(db.range(key(5_000)..key(215_000)).count(), 10_000);
    assert_eq!(db.iter().rev().nth(9_999).unwrap().unwrap().0, key(210_000));
    // Written again inside the range after the deletion: there.
    db.put(key(100_000), "back").unwrap();
    assert_eq!(db.get(key(100_000)).unwrap(), Some(b"back".to_vec()));

    db.compact().unwrap();
    let deleted_store: u64 = db.stats().table_bytes();
    assert_eq!(db.stats().keyspaces[0].range_deletions, 0);
    drop(db);
    // The store that never held the range.
    let untouched_dir = tempfile::tempdir().unwrap();
    let untouched = Db::open(untouched_dir.path(), options()).unwrap();
    fill(&untouched, 0..10_000);
    fill(&untouched, 210_000..KEYS);
    untouched.put(key(100_000), "back").unwrap();
    untouched.compact().unwrap();
    let untouched_bytes = untouched.stats().table_bytes();
    let ratio = deleted_store as f64 / untouched_bytes as f64;
    assert!(
        (0.9..1.1).contains(&ratio),
        "{deleted_store} bytes against {untouched_bytes}"
    );
    // The deletion itself went with the entries it deleted: reopened, the store reads the same.
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.iter().count(), 20_001);
    assert_eq!(db.get(key(50_000)).unwrap(), None);
}

/// A get of a key a range deletion covers reads none of the tables written before the
/// deletion: they hold nothing newer than it.
#[test]
fn a_get_inside_a_deleted_range_reads_no_older_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    fill(&db, 0..5_000);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    db.delete_range(key(0), key(5_000)).unwrap();
    db.flush().unwrap(); // the deletion now lives in the manifest
    let reads = db.stats().data_block_reads;
    for i in 0..5_000 {
        assert_eq!(db.get(key(i)).unwrap(), None);
    }
    assert_eq!(db.stats().data_block_reads, reads);
}

/// The deletion survives a power loss once synced: replayed from the log before a flush,
/// read from the manifest after one.
#[test]
fn range_deletions_survive_a_power_loss_from_the_log_and_from_the_manifest() {
    use bloomkv::fs::FaultFs;
    use bloomkv::WriteOptions;
    let fs = FaultFs::new();
    let options = || common::small_tree_options().file_system(std::sync::Arc::new(fs.clone()));
    {
        let db = Db::open("/store", options()).unwrap();
        fill(&db, 0..2_000);
        let mut batch = WriteBatch::new();
        batch.delete_range(key(100), key(200));
        db.write_opt(batch, &WriteOptions::synced()).unwrap();
        drop(db);
    }
    fs.power_loss();
    {
        let db = Db::open("/store", options()).unwrap();
        assert_eq!(db.get(key(150)).unwrap(), None);
        assert_eq!(db.get(key(99)).unwrap(), Some(common::value(99, 0)));
        db.delete_range(key(1_000), key(1_500)).unwrap();
        db.flush().unwrap();
        drop(db);
    }
    fs.power_loss();
    let db = Db::open("/store", options()).unwrap();
    assert_eq!(db.get(key(150)).unwrap(), None);
    assert_eq!(db.get(key(1_499)).unwrap(), None);
    assert_eq!(db.get(key(1_500)).unwrap(), Some(common::value(1_500, 0)));
    assert_eq!(db.iter().count(), 1_400);
}

/// A snapshot taken before a deletion keeps seeing the range, through flushes and
/// compactions, while later readers do not; once it goes, compaction drops the range.
#[test]
fn a_snapshot_keeps_what_a_later_range_deletion_hides() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    fill(&db, 0..3_000);
    let before = db.snapshot();
    db.delete_range(key(0), key(3_000)).unwrap();
    db.compact().unwrap();
    assert_eq!(db.iter().count(), 0);
    assert_eq!(before.iter().count(), 3_000);
    assert_eq!(before.get(key(7)).unwrap(), Some(common::value(7, 0)));
    assert_eq!(
        db.stats().keyspaces[0].range_deletions,
        1,
        "kept for the snapshot"
    );
    drop(before);
    db.compact().unwrap();
    assert_eq!(db.stats().table_bytes(), 0);
    assert_eq!(db.stats().keyspaces[0].range_deletions, 0);
}

#[test]
fn keyspaces_and_transactions_delete_ranges_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let users = db.keyspace("users", KeyspaceOptions::new()).unwrap();
    for i in 0..100 {
        users.put(key(i), "u").unwrap();
        db.put(key(i), "d").unwrap();
    }
    users.delete_range(key(0), key(50)).unwrap();
    assert_eq!(users.iter().count(), 50);
    assert_eq!(
        db.iter().count(),
        100,
        "the default keyspace keeps its keys"
    );

    let mut batch = WriteBatch::new();
    batch
        .delete_range_in(&users, key(50), key(60))
        .put_in(&users, key(55), "again");
    db.write(batch).unwrap();
    assert_eq!(users.iter().count(), 41);
    assert_eq!(users.get(key(55)).unwrap(), Some(b"again".to_vec()));

    let mut tx = db.transaction();
    tx.put(key(10), "before").unwrap();
    tx.delete_range(key(0), key(20)).unwrap();
    tx.put(key(15), "after").unwrap();
    assert_eq!(
        tx.get(key(10)).unwrap(),
        None,
        "its own deletion covers its earlier write"
    );
    assert_eq!(tx.get(key(15)).unwrap(), Some(b"after".to_vec()));
    assert_eq!(tx.get(key(25)).unwrap(), Some(b"d".to_vec()));
    let seen: Vec<Vec<u8>> = tx.range(key(0)..key(30)).map(|r| r.unwrap().0).collect();
    let expected: Vec<Vec<u8>> = std::iter::once(key(15)).chain((20..30).map(key)).collect();
    assert_eq!(seen, expected);
    let back: Vec<Vec<u8>> = tx
        .range(key(0)..key(30))
        .rev()
        .map(|r| r.unwrap().0)
        .collect();
    assert_eq!(back, expected.iter().rev().cloned().collect::<Vec<_>>());
    tx.delete_range_in(&users, key(90), key(100)).unwrap();
    tx.commit().unwrap();
    assert_eq!(db.iter().count(), 81);
    assert_eq!(db.get(key(15)).unwrap(), Some(b"after".to_vec()));
    assert_eq!(users.iter().count(), 31);

    // A transaction that read a key a range deletion since took conflicts.
    let mut tx = db.transaction();
    assert!(tx.get(key(50)).unwrap().is_some());
    tx.put(key(51), "x").unwrap();
    db.delete_range(key(40), key(60)).unwrap();
    assert!(matches!(tx.commit(), Err(bloomkv::Error::Conflict { .. })));
}

#[test]
fn oversized_range_ends_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("a", "1").unwrap();
    let huge = vec![b'z'; bloomkv::entry::MAX_KEY_LEN + 1];
    assert!(matches!(
        db.delete_range("a", &huge),
        Err(bloomkv::Error::KeyTooLarge { .. })
    ));
    assert_eq!(db.get("a").unwrap(), Some(b"1".to_vec()));
    // An empty or reversed range deletes nothing.
    db.delete_range("a", "a").unwrap();
    db.delete_range("b", "a").unwrap();
    assert_eq!(db.get("a").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn a_range_deletion_survives_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for k in ["a", "b", "c", "d"] {
            db.put(k, "v").unwrap();
        }
        db.close().unwrap();
    }
    {
        // Its own log, the keys it deletes in tables.
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.delete_range("b", "d").unwrap();
        db.close().unwrap();
    }
    let expected = vec![b"a".to_vec(), b"d".to_vec()];
    // Read-only, the deletion still in the log; then written, and read-only again with the
    // deletion in the manifest.
    let keys_of = |db: &Db| db.iter().map(|r| r.unwrap().0).collect::<Vec<Vec<u8>>>();
    let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert_eq!(keys_of(&db), expected);
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(keys_of(&db), expected);
    db.flush().unwrap();
    db.close().unwrap();
    let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert_eq!(keys_of(&db), expected);
    assert_eq!(db.stats().keyspaces[0].range_deletions, 1);
}

/// A checkpoint carries the live range deletions: the copy reads the range as deleted.
#[test]
fn a_checkpoint_keeps_range_deletions() {
    let dir = tempfile::tempdir().unwrap();
    let copies = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    fill(&db, 0..1_000);
    db.flush().unwrap();
    db.delete_range(key(100), key(900)).unwrap();
    let copy_dir = copies.path().join("copy");
    db.checkpoint(&copy_dir).unwrap();
    let copy = Db::open(&copy_dir, common::small_tree_options()).unwrap();
    assert_eq!(copy.get(key(500)).unwrap(), None);
    assert_eq!(copy.iter().count(), 200);
}
