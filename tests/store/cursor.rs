//! Cursors and double-ended iterators against a model: every step agrees with a `BTreeMap`
//! frozen when the cursor was made, while writes, flushes and compactions go on beneath it.

use crate::common;

use std::collections::BTreeMap;
use std::ops::Bound;

use bloomkv::{Cursor, Db, Error, Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys from a small space, so that writes overwrite and delete keys the cursor walks over.
fn key(i: u32) -> Vec<u8> {
    format!("k{:05}", i).into_bytes()
}

const KEY_SPACE: u32 = 3_000;

/// One random write to the store, and to `model` when given.
fn random_write(db: &Db, model: Option<&mut Model>, rng: &mut SmallRng, round: u32) {
    let k = key(rng.gen_range(0..KEY_SPACE));
    if rng.gen_bool(0.2) {
        db.delete(&k).unwrap();
        if let Some(model) = model {
            model.remove(&k);
        }
    } else {
        let v = format!("v{round}-{}", "x".repeat(rng.gen_range(0..60))).into_bytes();
        db.put(&k, &v).unwrap();
        if let Some(model) = model {
            model.insert(k, v);
        }
    }
}

/// Where a cursor over `model` within `(lower, upper)` should be.
struct ModelCursor<'m> {
    model: &'m Model,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    at: Option<Vec<u8>>,
}

impl ModelCursor<'_> {
    fn first_from(&self, start: Bound<Vec<u8>>) -> Option<Vec<u8>> {
        (self.model.range((start, Bound::Unbounded)))
            .next()
            .map(|(k, _)| k.clone())
            .filter(|k| within(k, &self.lower, &self.upper))
    }

    fn last_to(&self, end: Bound<Vec<u8>>) -> Option<Vec<u8>> {
        (self.model.range((Bound::Unbounded, end)))
            .next_back()
            .map(|(k, _)| k.clone())
            .filter(|k| within(k, &self.lower, &self.upper))
    }

    fn seek(&mut self, k: &[u8]) {
        let start = match within_lower(k, &self.lower) {
            true => Bound::Included(k.to_vec()),
            false => self.lower.clone(),
        };
        self.at = self.first_from(start);
    }

    fn seek_for_prev(&mut self, k: &[u8]) {
        let end = match within_upper(k, &self.upper) {
            true => Bound::Included(k.to_vec()),
            false => self.upper.clone(),
        };
        self.at = self.last_to(end);
    }

    fn next(&mut self) {
        self.at = (self.at.take()).and_then(|k| self.first_from(Bound::Excluded(k)));
    }

    fn prev(&mut self) {
        self.at = (self.at.take()).and_then(|k| self.last_to(Bound::Excluded(k)));
    }
}

fn within_lower(k: &[u8], lower: &Bound<Vec<u8>>) -> bool {
    match lower {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    }
}

fn within_upper(k: &[u8], upper: &Bound<Vec<u8>>) -> bool {
    match upper {
        Bound::Included(u) => k <= u.as_slice(),
        Bound::Excluded(u) => k < u.as_slice(),
        Bound::Unbounded => true,
    }
}

fn within(k: &[u8], lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>) -> bool {
    within_lower(k, lower) && within_upper(k, upper)
}

fn random_bound(rng: &mut SmallRng) -> Bound<Vec<u8>> {
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(rng.gen_range(0..KEY_SPACE))),
        _ => Bound::Excluded(key(rng.gen_range(0..KEY_SPACE))),
    }
}

fn assert_same_place(cursor: &Cursor, expected: &ModelCursor, model: &Model, step: &str) {
    assert_eq!(cursor.key(), expected.at.as_deref(), "{step}");
    let value = expected.at.as_ref().map(|k| model[k].as_slice());
    assert_eq!(cursor.value(), value, "{step}");
    assert_eq!(cursor.valid(), expected.at.is_some(), "{step}");
}

#[test]
fn cursors_agree_with_a_model_while_the_store_flushes_and_compacts_beneath_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let mut rng = SmallRng::seed_from_u64(11);
    let mut model = Model::new();
    let mut round = 0;
    for _ in 0..12 {
        for _ in 0..1_500 {
            round += 1;
            random_write(&db, Some(&mut model), &mut rng, round);
        }
        // Each cursor sees the store as it was when made, with a frozen copy of the model.
        let frozen = model.clone();
        let (lower, upper) = (random_bound(&mut rng), random_bound(&mut rng));
        let mut cursor = db.cursor_over((lower.clone(), upper.clone()));
        let mut expected = ModelCursor {
            model: &frozen,
            lower,
            upper,
            at: None,
        };
        for step in 0..400 {
            let k = key(rng.gen_range(0..KEY_SPACE));
            let what = match rng.gen_range(0..10) {
                0 => {
                    cursor.seek(&k).unwrap();
                    expected.seek(&k);
                    "seek"
                }
                1 => {
                    cursor.seek_for_prev(&k).unwrap();
                    expected.seek_for_prev(&k);
                    "seek_for_prev"
                }
                2 => {
                    cursor.seek_to_first().unwrap();
                    expected.seek(b"");
                    "seek_to_first"
                }
                3 => {
                    cursor.seek_to_last().unwrap();
                    expected.seek_for_prev(&[0xff; 8]);
                    "seek_to_last"
                }
                4..=6 => {
                    cursor.next().unwrap();
                    expected.next();
                    "next"
                }
                _ => {
                    cursor.prev().unwrap();
                    expected.prev();
                    "prev"
                }
            };
            assert_same_place(&cursor, &expected, &frozen, &format!("step {step}: {what}"));
            // Writes the cursor must not see, and the flushes and compactions they cause.
            for _ in 0..rng.gen_range(0..20) {
                round += 1;
                random_write(&db, None, &mut rng, round);
            }
            if step % 100 == 99 {
                db.flush().unwrap();
            }
        }
        // The writes beneath the cursor go into the model for the next round.
        model = BTreeMap::new();
        for pair in db.iter() {
            let (k, v) = pair.unwrap();
            model.insert(k, v);
        }
    }
    assert!(
        db.stats().compactions > 0,
        "the test ran without compactions"
    );
}

/// Every way of reading a range: forwards, backwards, and from both ends at once.
fn assert_every_way_matches(
    iter: impl Fn() -> bloomkv::DbIterator,
    expected: &[(Vec<u8>, Vec<u8>)],
    what: &str,
) {
    let forward: Vec<_> = iter().map(|p| p.unwrap()).collect();
    assert_eq!(forward, expected, "{what} forwards");
    let backward: Vec<_> = iter().rev().map(|p| p.unwrap()).collect();
    let reversed: Vec<_> = expected.iter().rev().cloned().collect();
    assert_eq!(backward, reversed, "{what} backwards");
    let both = common::read_from_both_ends(iter());
    assert_eq!(both, expected, "{what} from both ends");
}

fn model_range(
    model: &Model,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let valid = match (&lower, &upper) {
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) => {
            l <= u
        }
        _ => true,
    };
    if !valid || matches!((&lower, &upper), (Bound::Excluded(l), Bound::Excluded(u)) if l == u) {
        return Vec::new();
    }
    (model.range((lower, upper)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn ranges_prefixes_and_snapshots_read_the_same_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let mut rng = SmallRng::seed_from_u64(5);
    let mut model = Model::new();
    for round in 0..6_000 {
        random_write(&db, Some(&mut model), &mut rng, round);
    }
    db.flush().unwrap();
    let before = model.clone();
    let snapshot = db.snapshot();
    for round in 6_000..8_000 {
        random_write(&db, Some(&mut model), &mut rng, round);
    }
    db.wait_for_background_work().unwrap();
    assert!(db.stats().levels.iter().filter(|l| l.tables > 0).count() > 1);

    let all: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_every_way_matches(|| db.iter(), &all, "iter");
    for _ in 0..50 {
        let (lower, upper) = (random_bound(&mut rng), random_bound(&mut rng));
        let expected = model_range(&model, lower.clone(), upper.clone());
        assert_every_way_matches(
            || db.range((lower.clone(), upper.clone())),
            &expected,
            "range",
        );
        let expected = model_range(&before, lower.clone(), upper.clone());
        let at_snapshot = || snapshot.range((lower.clone(), upper.clone()));
        assert_every_way_matches(at_snapshot, &expected, "snapshot range");
    }
    for prefix in ["k00", "k01", "k012", "k0299", "k02999", "k3", "j", ""] {
        let expected: Vec<_> = (all.iter())
            .filter(|(k, _)| k.starts_with(prefix.as_bytes()))
            .cloned()
            .collect();
        assert_every_way_matches(|| db.prefix(prefix), &expected, prefix);
    }
    assert_every_way_matches(
        || db.range("k00100".."k00200"),
        &model_range(&model, Bound::Included(key(100)), Bound::Excluded(key(200))),
        "str range",
    );
}

#[test]
fn a_backward_walk_reads_only_the_blocks_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let options = || common::small_tree_options();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        for i in 0..20_000 {
            db.put(key(i), vec![b'v'; 100]).unwrap();
        }
        db.compact().unwrap();
    }
    // A fresh open: no block in the cache.
    let db = Db::open(dir.path(), options()).unwrap();
    let blocks = |db: &Db| db.stats().block_cache.misses;
    let before = blocks(&db);
    let last: Vec<_> = db.iter().rev().take(5).map(|p| p.unwrap().0).collect();
    assert_eq!(last, (19_995..20_000).rev().map(key).collect::<Vec<_>>());
    // Five keys of about 110 bytes lie in one or two blocks of 1 KiB (of some 2,500).
    assert!(
        blocks(&db) - before <= 3,
        "{} blocks read",
        blocks(&db) - before
    );

    let before = blocks(&db);
    let mut cursor = db.cursor();
    cursor.seek_for_prev(key(10_000)).unwrap();
    for i in (9_990..=10_000).rev() {
        assert_eq!(cursor.key(), Some(&key(i)[..]));
        cursor.prev().unwrap();
    }
    assert!(
        blocks(&db) - before <= 4,
        "{} blocks read",
        blocks(&db) - before
    );
}

#[test]
fn cursors_start_unpositioned_and_stop_at_their_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..10 {
        db.put(key(i), b"v").unwrap();
    }
    let mut cursor = db.cursor_over(key(3)..key(6));
    assert_eq!(cursor.key(), None);
    cursor.next().unwrap();
    cursor.prev().unwrap();
    assert_eq!(cursor.key(), None, "steps leave an unpositioned cursor so");
    cursor.seek(key(0)).unwrap();
    assert_eq!(
        cursor.key(),
        Some(&key(3)[..]),
        "a seek below the range lands on its start"
    );
    cursor.seek_for_prev(key(9)).unwrap();
    assert_eq!(
        cursor.key(),
        Some(&key(5)[..]),
        "a seek above the range lands on its end"
    );
    cursor.next().unwrap();
    assert_eq!(cursor.key(), None, "off the end");
    cursor.seek_to_first().unwrap();
    cursor.prev().unwrap();
    assert_eq!(cursor.key(), None, "off the front");
    // Turning back and forth over one key.
    cursor.seek(key(4)).unwrap();
    cursor.prev().unwrap();
    cursor.next().unwrap();
    cursor.next().unwrap();
    cursor.prev().unwrap();
    assert_eq!(cursor.key(), Some(&key(4)[..]));
    // A snapshot's cursor sees neither later writes nor deletes.
    let snapshot = db.snapshot();
    db.delete(key(4)).unwrap();
    // Between key(4) and key(5).
    db.put(b"k000045", b"later").unwrap();
    let mut at_snapshot = snapshot.cursor();
    at_snapshot.seek(key(4)).unwrap();
    assert_eq!(at_snapshot.key(), Some(&key(4)[..]));
    at_snapshot.next().unwrap();
    assert_eq!(at_snapshot.key(), Some(&key(5)[..]));
    at_snapshot.prev().unwrap();
    assert_eq!(at_snapshot.key(), Some(&key(4)[..]));
    let mut now = db.cursor();
    now.seek_for_prev(key(4)).unwrap();
    assert_eq!(now.key(), Some(&key(3)[..]));
    now.seek(key(4)).unwrap();
    assert_eq!(now.key(), Some(&b"k000045"[..]));
}

#[test]
fn a_damaged_block_met_walking_backwards_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let options = || common::small_tree_options().block_cache_size(0);
    // The table holding the store's first keys: its first data block is the last a backward
    // walk meets.
    let table = {
        let db = Db::open(dir.path(), options()).unwrap();
        for i in 0..2_000 {
            db.put(key(i), vec![b'v'; 100]).unwrap();
        }
        db.compact().unwrap();
        let stats = db.stats();
        let first = stats
            .tables
            .iter()
            .find(|t| t.smallest_key == key(0))
            .unwrap();
        dir.path().join(format!("{:06}.sst", first.number))
    };
    // A byte in the first data block: a backward walk meets it last.
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[100] ^= 0x55;
    std::fs::write(&table, bytes).unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let walked: Vec<_> = db.iter().rev().collect();
    let (last, good) = walked.split_last().unwrap();
    assert!(good.iter().all(Result::is_ok));
    assert!(!good.is_empty());
    match last {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, &table),
        other => panic!("expected corruption, got {other:?}"),
    }
    // The walk returned keys 1999 down to the first one past the damaged block.
    let damaged = 1_999 - good.len() as u32;
    let mut cursor = db.cursor();
    cursor.seek_for_prev(key(damaged + 1)).unwrap();
    assert_eq!(cursor.key(), Some(&key(damaged + 1)[..]));
    cursor.prev().unwrap_err();
    assert_eq!(
        cursor.key(),
        None,
        "an error leaves the cursor unpositioned"
    );
    cursor.seek_for_prev(key(damaged)).unwrap_err();
    assert_eq!(
        cursor.key(),
        None,
        "an error leaves the cursor unpositioned"
    );
}
