//! Model-based test: random operations against the store and a BTreeMap, compared after each.

use crate::common;

use std::collections::BTreeMap;
use std::ops::Bound;

use bloomkv::{Db, FilterPolicy, Options, WriteBatch, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn random_key(rng: &mut SmallRng) -> Vec<u8> {
    // A small key space so overwrites and deletes hit existing keys; some binary keys.
    let n: u32 = rng.gen_range(0..2000);
    if n.is_multiple_of(17) {
        vec![0xff, (n >> 8) as u8, n as u8, 0]
    } else {
        format!("k{n:05}").into_bytes()
    }
}

fn random_value(rng: &mut SmallRng) -> Vec<u8> {
    let len = match rng.gen_range(0..20) {
        0 => 0,
        1 => rng.gen_range(1000..5000),
        _ => rng.gen_range(1..64),
    };
    (0..len).map(|_| rng.gen()).collect()
}

fn scan(db: &Db, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.range::<&[u8], _>((start, end))
        .map(|r| r.expect("scan"))
        .collect()
}

fn model_range(model: &Model, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let start = start.map(|k| k.to_vec());
    let end = end.map(|k| k.to_vec());
    model
        .range((start, end))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn run_case(seed: u64, ops: usize) {
    run_case_with(seed, ops, common::small_tree_options);
}

fn run_case_with(seed: u64, ops: usize, options: fn() -> Options) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut db = Db::open(dir.path(), options()).unwrap();
    for step in 0..ops {
        match rng.gen_range(0..100) {
            0..=39 => {
                let (k, v) = (random_key(&mut rng), random_value(&mut rng));
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            40..=49 => {
                let k = random_key(&mut rng);
                db.delete(&k).unwrap();
                model.remove(&k);
            }
            50..=54 => {
                let mut batch = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = random_key(&mut rng);
                    if rng.gen_bool(0.3) {
                        batch.delete(&k);
                        model.remove(&k);
                    } else {
                        let v = random_value(&mut rng);
                        batch.put(&k, &v);
                        model.insert(k, v);
                    }
                }
                let sync = rng.gen_bool(0.1);
                db.write_opt(batch, &WriteOptions::default().sync(sync))
                    .unwrap();
            }
            55..=84 => {
                let k = random_key(&mut rng);
                assert_eq!(
                    db.get(&k).unwrap(),
                    model.get(&k).cloned(),
                    "seed {seed} step {step} get {k:?}"
                );
            }
            85..=89 => {
                let (a, b) = (random_key(&mut rng), random_key(&mut rng));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let (start, end) = (Bound::Included(&lo[..]), Bound::Excluded(&hi[..]));
                assert_eq!(
                    scan(&db, start, end),
                    model_range(&model, start, end),
                    "seed {seed} step {step} range"
                );
            }
            90..=92 => {
                let prefix = &random_key(&mut rng)[..3];
                let got: Vec<_> = db.prefix(prefix).map(|r| r.unwrap()).collect();
                let want: Vec<_> = model
                    .iter()
                    .filter(|(k, _)| k.starts_with(prefix))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(got, want, "seed {seed} step {step} prefix {prefix:?}");
            }
            93..=95 => db.flush().unwrap(),
            96 => db.compact().unwrap(),
            _ => {
                drop(db);
                db = Db::open(dir.path(), options()).unwrap();
            }
        }
    }
    let all: Vec<_> = db.iter().map(|r| r.unwrap()).collect();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(all, want, "seed {seed}: final full scan");
    let stats = db.stats();
    assert!(
        !stats.tables.is_empty(),
        "seed {seed}: the case should have written tables"
    );
}

#[test]
fn random_operations_match_a_btreemap() {
    for seed in [1, 2, 3, 4] {
        run_case(seed, 10_000);
    }
}

/// The same under a store-wide filter budget spread over the levels, with the bottom of the
/// tree left without filters.
#[test]
fn random_operations_match_a_btreemap_under_a_filter_budget() {
    fn budgeted() -> Options {
        common::small_tree_with(FilterPolicy::BitsPerKeyBudget(8.0)).no_filters_at_bottom(true)
    }
    for seed in [5, 6] {
        run_case_with(seed, 10_000, budgeted);
    }
}

/// The same under a budget given as wasted reads per absent-key get.
#[test]
fn random_operations_match_a_btreemap_under_a_wasted_reads_target() {
    fn targeted() -> Options {
        common::small_tree_with(FilterPolicy::WastedReadsTarget(0.01))
    }
    run_case_with(7, 10_000, targeted);
}

/// The same at the default options' proportions, scaled down: tables twice the memtable's
/// size (64 and 32 MiB by default), a base level of two tables, the default filter budget, and
/// level-0 slowdown and stop triggers low enough (4 and 8) that writes meet the delayed write
/// rate whenever level 0 reaches its compaction trigger.
#[test]
fn random_operations_match_a_btreemap_at_the_default_proportions() {
    fn proportional() -> Options {
        let mut options = Options::default()
            .memtable_size(16 * 1024)
            .table_size(32 * 1024)
            .level1_size(64 * 1024)
            .l0_write_triggers(4, 8)
            .delayed_write_rate(1 << 20);
        options.block_size = 1024;
        options
    }
    run_case_with(8, 10_000, proportional);
}

#[test]
fn values_survive_reopen_and_tree_has_levels() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
        for i in 0..5000 {
            db.put(common::key(i), common::value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        let stats = db.stats();
        let deep_levels = stats.levels.iter().skip(1).filter(|l| l.tables > 0).count();
        assert!(
            deep_levels >= 2,
            "expected several levels, got {:?}",
            stats.levels
        );
    }
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    for i in 0..5000 {
        assert_eq!(db.get(common::key(i)).unwrap(), Some(common::value(i, 0)));
    }
}

#[test]
fn lookups_where_key_prefixes_tie() {
    // Keys that share their first eight bytes, short keys, and keys that differ only in
    // trailing zero bytes: the table fences' prefixes tie and the full keys must decide.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for i in 0..3000u32 {
        let mut shared = b"samepfx!".to_vec();
        shared.extend_from_slice(&i.to_be_bytes());
        keys.push(shared);
    }
    for stem in [&b"a"[..], b"ab", b"abcdefg", b""] {
        for zeros in 0..10 {
            let mut k = stem.to_vec();
            k.extend(std::iter::repeat_n(0u8, zeros));
            keys.push(k);
        }
    }
    keys.sort();
    keys.dedup();
    // Store every other key; the rest must read as absent.
    for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 2 == 0) {
        db.put(k, (i as u32).to_be_bytes()).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    assert!(
        db.stats()
            .levels
            .iter()
            .skip(1)
            .filter(|l| l.tables > 1)
            .count()
            >= 1
    );
    for (i, k) in keys.iter().enumerate() {
        let want = (i % 2 == 0).then(|| (i as u32).to_be_bytes().to_vec());
        assert_eq!(db.get(k).unwrap(), want, "key {k:?}");
    }
}
