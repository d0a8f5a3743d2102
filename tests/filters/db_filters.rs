//! The filters at work in the store: absent keys cost the reads the filters predict.

use crate::common;

use bloomkv::{Db, FilterPolicy, Stats};

/// Builds a store with several levels from keys 0, 2, 4, ... (odd keys are absent but inside
/// the tables' key ranges).
fn build(dir: &std::path::Path, policy: FilterPolicy, keys: u64) -> Db {
    let db = Db::open(dir, common::small_tree_with(policy)).unwrap();
    for i in 0..keys {
        db.put(common::key(2 * i), common::value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    db
}

/// For each key, the tables a lookup consults (those whose key range covers it, at most one
/// per deeper level) and the sum of their predicted rates.
fn consulted(stats: &Stats, key: &[u8]) -> (u64, f64) {
    let covering = stats
        .tables
        .iter()
        .filter(|t| t.smallest_key.as_slice() <= key && key <= t.largest_key.as_slice());
    covering.fold((0, 0.0), |(n, sum), t| {
        (n + 1, sum + t.predicted_false_positive_rate.unwrap_or(1.0))
    })
}

fn absent_lookups(db: &Db, keys: u64) -> (u64, f64, Stats, Stats) {
    let before = db.stats();
    let (mut tables, mut predicted) = (0, 0.0);
    for i in 0..keys {
        let k = common::key(2 * i + 1);
        let (n, p) = consulted(&before, &k);
        tables += n;
        predicted += p;
        assert_eq!(db.get(&k).unwrap(), None);
    }
    (tables, predicted, before, db.stats())
}

/// Puts `count` keys of indexes drawn from 0..1,000,000 in random order (from `seed`), then
/// flushes and waits for compactions; returns the indexes written.
fn load_random_keys(db: &Db, seed: u64, count: usize) -> std::collections::BTreeSet<u64> {
    let mut present = std::collections::BTreeSet::new();
    let mut state = seed;
    for _ in 0..count {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let i = (state >> 33) % 1_000_000;
        db.put(common::key(i), common::value(i, 0)).unwrap();
        present.insert(i);
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    present
}

#[test]
fn absent_keys_cost_about_the_predicted_reads() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), FilterPolicy::FalsePositiveRate(0.01), 20_000);
    let shape = db.stats();
    assert!(
        shape.levels.iter().skip(1).filter(|l| l.tables > 0).count() >= 2,
        "{:?}",
        shape.levels
    );
    let (tables, predicted, before, after) = absent_lookups(&db, 20_000);
    let reads = after.data_block_reads - before.data_block_reads;
    let probes = after.filter_probes - before.filter_probes;
    assert_eq!(
        probes, tables,
        "one filter probe per table covering the key"
    );
    assert_eq!(after.filter_true_positives, before.filter_true_positives);
    // Poisson noise around a mean of `predicted`: allow 3 standard deviations plus 20%.
    let slack = 3.0 * predicted.sqrt();
    assert!(
        (reads as f64) <= predicted * 1.2 + slack && (reads as f64) >= predicted * 0.5 - slack,
        "absent-key reads {reads} against predicted {predicted:.1} over {tables} tables"
    );
}

#[test]
fn without_filters_each_covering_table_costs_one_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), FilterPolicy::Disabled, 20_000);
    let (tables, _, before, after) = absent_lookups(&db, 5_000);
    assert_eq!(after.data_block_reads - before.data_block_reads, tables);
    assert_eq!(after.filter_probes, 0);
}

#[test]
fn present_keys_are_true_positives() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), FilterPolicy::FalsePositiveRate(0.01), 5_000);
    let before = db.stats();
    for i in 0..5_000 {
        assert_eq!(
            db.get(common::key(2 * i)).unwrap(),
            Some(common::value(i, 0))
        );
    }
    let after = db.stats();
    assert_eq!(
        after.filter_true_positives - before.filter_true_positives,
        5_000
    );
}

/// A store-wide budget of 10 bits per key, spread over the levels: tables written to the last
/// level get fewer bits per key than the tables above them, the filters of the whole store stay near the
/// budget, every key reads back and absent keys are found absent.
#[test]
fn a_bits_per_key_budget_gives_the_upper_levels_more_bits() {
    let dir = tempfile::tempdir().unwrap();
    let options = common::small_tree_with(FilterPolicy::BitsPerKeyBudget(10.0));
    let db = Db::open(dir.path(), options).unwrap();
    let present = load_random_keys(&db, 7, 40_000);
    // The shape the budget was spent on once compactions settle, not one caught mid-way.
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    let last = stats.levels.len() - 1;
    let bits = |upper: bool| -> Vec<u32> {
        stats
            .tables
            .iter()
            .filter(|t| (t.level < last) == upper)
            .map(|t| t.bits_per_key.expect("every table has a filter"))
            .collect()
    };
    let (upper, bottom) = (bits(true), bits(false));
    assert!(
        !upper.is_empty() && !bottom.is_empty(),
        "{:?}",
        stats.levels
    );
    // Each level's tables take one of two rows around the level's share (the budget is spent
    // to the bit), so the rows of two levels may meet: it is the averages that differ. By how
    // much depends on how large the upper levels are beside the last when the load ends,
    // which compactions under other tests' load change (0.19 bits in one run, 0.3 alone).
    let mean = |bits: &[u32]| bits.iter().sum::<u32>() as f64 / bits.len() as f64;
    assert!(
        mean(&bottom) < mean(&upper),
        "upper {upper:?}, last level {bottom:?}"
    );
    // A table that overlaps nothing below moves down unchanged, with the filter it was
    // written with: a few of the last level's tables may carry more bits than its upper row.
    let share = stats.levels[last].target_bits_per_key.expect("a share");
    let moved_down = bottom
        .iter()
        .filter(|&&b| f64::from(b) > share.ceil())
        .count();
    assert!(
        moved_down * 10 <= bottom.len(),
        "upper {upper:?}, last level {bottom:?} (share {share})"
    );
    let filter_bits: u64 = stats
        .tables
        .iter()
        .map(|t| t.entries * t.bits_per_key.unwrap() as u64)
        .sum();
    let entries: u64 = stats.tables.iter().map(|t| t.entries).sum();
    let average = filter_bits as f64 / entries as f64;
    assert!((8.0..=11.0).contains(&average), "{average} bits per key");
    for &i in present.iter().step_by(37) {
        assert_eq!(db.get(common::key(i)).unwrap(), Some(common::value(i, 0)));
    }
    for i in 1_000_000..1_002_000 {
        assert_eq!(db.get(common::key(i)).unwrap(), None);
    }
}

/// A budget given as wasted reads per absent-key get: the store takes the least filter memory
/// that meets it, so a tighter target costs more bits per key, and the reads absent keys
/// waste stay near the target.
#[test]
fn a_wasted_reads_target_buys_the_memory_it_needs() {
    let load = |target: f64| {
        let dir = tempfile::tempdir().unwrap();
        let options = common::small_tree_with(FilterPolicy::WastedReadsTarget(target));
        let db = Db::open(dir.path(), options).unwrap();
        let present = load_random_keys(&db, 11, 30_000);
        for &i in present.iter().step_by(41) {
            assert_eq!(db.get(common::key(i)).unwrap(), Some(common::value(i, 0)));
        }
        let before = db.stats();
        // Absent keys inside the tables' key ranges, so that filters are asked.
        let absent: Vec<u64> = (0..1_000_000u64)
            .step_by(13)
            .filter(|i| !present.contains(i))
            .take(40_000)
            .collect();
        let gets = absent.len() as u64;
        for &i in &absent {
            assert_eq!(db.get(common::key(i)).unwrap(), None);
        }
        let after = db.stats();
        let wasted = (after.filter_probes - after.filter_negatives - after.filter_true_positives)
            - (before.filter_probes - before.filter_negatives - before.filter_true_positives);
        let stats = db.stats();
        assert!(stats.tables.iter().all(|t| t.bits_per_key.is_some()));
        (wasted as f64 / gets as f64, stats.filter_memory_bytes)
    };
    let (loose_reads, loose_memory) = load(0.05);
    let (tight_reads, tight_memory) = load(0.005);
    assert!(
        tight_memory > loose_memory,
        "{tight_memory} <= {loose_memory}"
    );
    assert!(tight_reads < loose_reads, "{tight_reads} >= {loose_reads}");
    // Tables keep the bits of the tree's shape when they were written: allow some drift.
    assert!(
        loose_reads < 0.05 * 1.5,
        "{loose_reads} wasted reads per get"
    );
    assert!(
        tight_reads < 0.005 * 1.5,
        "{tight_reads} wasted reads per get"
    );
}

/// With `no_filters_at_bottom`, tables written to the last level carry no filter (one moved
/// there unchanged keeps its own) and the others do: the filters take a fraction of the memory,
/// and every key still reads back, absent keys as absent.
#[test]
fn no_filters_at_the_bottom_saves_most_filter_memory() {
    let load = |skip: bool| {
        let dir = tempfile::tempdir().unwrap();
        let options = common::small_tree_options().no_filters_at_bottom(skip);
        let db = Db::open(dir.path(), options).unwrap();
        for i in 0..30_000u64 {
            let k = i.wrapping_mul(2_654_435_761) % 1_000_000;
            db.put(common::key(k), common::value(k, 0)).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_background_work().unwrap();
        for i in (0..30_000u64).step_by(53) {
            let k = i.wrapping_mul(2_654_435_761) % 1_000_000;
            assert_eq!(db.get(common::key(k)).unwrap(), Some(common::value(k, 0)));
        }
        for k in 1_000_000..1_001_000 {
            assert_eq!(db.get(common::key(k)).unwrap(), None);
        }
        (db.stats(), dir)
    };
    let (skipped, _dir) = load(true);
    let last = skipped.levels.len() - 1;
    assert!(skipped.levels[last].tables > 0, "{:?}", skipped.levels);
    // Tables keep the filter they were written with: only one moved down to the bottom
    // without a rewrite may hold a filter there.
    let filtered_at_bottom = skipped
        .tables
        .iter()
        .filter(|t| t.level == last && t.bits_per_key.is_some())
        .count() as u64;
    assert!(
        filtered_at_bottom <= skipped.levels[last].tables_moved,
        "{:?}",
        skipped.levels
    );
    for table in skipped.tables.iter().filter(|t| t.level < last) {
        assert!(table.bits_per_key.is_some(), "{table:?}");
    }
    let (filtered, _dir) = load(false);
    assert!(
        skipped.filter_memory_bytes * 2 < filtered.filter_memory_bytes,
        "{} against {} bytes",
        skipped.filter_memory_bytes,
        filtered.filter_memory_bytes
    );
}

/// `Stats` reports each level's target filter and the live tables that differ from it: after a
/// reopen under a finer rate every table is off target, and a full compaction, which rewrites
/// them all, brings them to it. Under a budget, the last level's target is the coarsest.
#[test]
fn stats_report_how_far_live_tables_are_from_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), FilterPolicy::FalsePositiveRate(0.01), 5_000);
    let stats = db.stats();
    assert!(stats.levels.iter().all(|l| l.tables_off_target == 0));
    for level in &stats.levels {
        let expected = (level.tables > 0).then_some(10.0);
        assert_eq!(level.target_bits_per_key, expected, "{level:?}");
    }
    drop(db);

    let finer = common::small_tree_with(FilterPolicy::FalsePositiveRate(0.001));
    let db = Db::open(dir.path(), finer).unwrap();
    let stats = db.stats();
    let off: usize = stats.levels.iter().map(|l| l.tables_off_target).sum();
    assert_eq!(off, stats.tables.len());
    db.compact().unwrap();
    let stats = db.stats();
    assert!(
        stats.levels.iter().all(|l| l.tables_off_target == 0),
        "{:?}",
        stats.levels
    );
    drop(db);

    let budget = common::small_tree_with(FilterPolicy::BitsPerKeyBudget(10.0));
    let db = Db::open(dir.path(), budget).unwrap();
    // New data above the compacted level, so that the tree has more than one level again:
    // spread over the whole key range, so that every lookup probes it (a budget gives a level
    // that few lookups reach few bits).
    for i in (0..5_000).step_by(5) {
        db.put(common::key(2 * i + 1), common::value(i, 1)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let targets: Vec<f64> = db
        .stats()
        .levels
        .iter()
        .filter_map(|l| l.target_bits_per_key)
        .collect();
    let last = *targets.last().unwrap();
    assert!(targets.iter().all(|&t| t >= last), "{targets:?}");
    assert!(
        targets.len() > 1 && targets.iter().any(|&t| t > last),
        "{targets:?}"
    );
}

/// Per-level filter counts add up to the store's, each level's probes come from its own
/// tables only, and a level probed by many absent keys measures a rate near its prediction.
#[test]
fn per_level_filter_counters_add_up_to_the_stores() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), FilterPolicy::FalsePositiveRate(0.01), 20_000);
    for i in 0..20_000 {
        db.get(common::key(2 * i + 1)).unwrap(); // absent, inside the tables' ranges
        db.get(common::key(2 * i)).unwrap(); // present
    }
    let stats = db.stats();
    common::assert_level_filter_counts_add_up(&stats);
    for level in &stats.levels {
        if level.tables == 0 {
            assert_eq!(level.filter_probes, 0);
        }
        if level.filter_negatives() >= 10_000 {
            let measured = level.measured_false_positive_rate().unwrap();
            let predicted = level.predicted_false_positive_rate.unwrap();
            assert!(
                (measured - predicted).abs() < 0.5 * predicted,
                "measured {measured}, predicted {predicted}"
            );
        }
    }
    assert!(
        stats.levels.iter().any(|l| l.filter_negatives() >= 10_000),
        "{:?}",
        stats.levels
    );
}

/// Under a budget, tables of one level carry different filters (written when the tree had
/// other shapes): each level's predicted rate, weighted by how many lookups reach each of its
/// tables, is what absent lookups measure there.
#[test]
fn under_a_budget_each_level_measures_its_predicted_rate() {
    let dir = tempfile::tempdir().unwrap();
    let options = common::small_tree_with(FilterPolicy::BitsPerKeyBudget(8.0));
    let db = Db::open(dir.path(), options).unwrap();
    let present = load_random_keys(&db, 11, 60_000);
    for i in (0..1_000_000).filter(|i| !present.contains(i)).step_by(3) {
        assert_eq!(db.get(common::key(i)).unwrap(), None);
    }
    let stats = db.stats();
    let mut checked = 0;
    for (l, level) in stats.levels.iter().enumerate() {
        let absent_probes = level.filter_probes - level.filter_true_positives;
        let Some(predicted) = level.predicted_false_positive_rate else {
            continue;
        };
        // Enough expected false positives for the count to mean something (about 6%; the
        // filters of a few small tables add their own spread to that).
        if predicted * absent_probes as f64 >= 300.0 {
            let measured = level.measured_false_positive_rate().unwrap();
            assert!(
                (measured - predicted).abs() < 0.25 * predicted,
                "level {l}: measured {measured}, predicted {predicted}, {absent_probes} probes"
            );
            checked += 1;
        }
    }
    assert!(checked >= 1, "{:?}", stats.levels);
}

/// The bits per key of the table numbered highest: the one written last.
fn newest_table_bits(db: &Db) -> Option<u32> {
    let stats = db.stats();
    let newest = stats.tables.iter().max_by_key(|t| t.number).unwrap();
    newest.bits_per_key
}

/// A store records the filter policy it writes with: opened again with the options' policy
/// left at its default, it keeps writing with the one recorded; a policy given by the builder
/// (the default's value included) overrides it and is recorded in turn, and a checkpoint and a
/// read-only open carry it.
#[test]
fn a_store_keeps_the_filter_policy_it_recorded_unless_one_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let rate = FilterPolicy::FalsePositiveRate(0.001);
    let rate_bits = bloomkv::filter::FilterParams::for_false_positive_rate(0.001)
        .unwrap()
        .bits_per_key();
    let put_and_flush = |db: &Db, round: u64| {
        for i in 0..300 {
            db.put(common::key(round * 1_000 + i), b"v").unwrap();
        }
        db.flush().unwrap();
    };
    {
        let db = Db::open(dir.path(), common::small_tree_options().filter_policy(rate)).unwrap();
        put_and_flush(&db, 0);
        assert_eq!(db.stats().filter_policy, rate);
        assert_eq!(newest_table_bits(&db), Some(rate_bits));
    }
    {
        // Default options: the recorded rate, for the tables written from now on too.
        let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
        assert_eq!(db.stats().filter_policy, rate);
        put_and_flush(&db, 1);
        assert_eq!(newest_table_bits(&db), Some(rate_bits));
    }
    let read_only = Db::open_read_only(dir.path(), common::small_tree_options()).unwrap();
    assert_eq!(read_only.stats().filter_policy, rate);
    drop(read_only);
    // The policy a store without a recorded one writes with.
    let default_policy = FilterPolicy::BitsPerKeyBudget(10.0);
    {
        // The builder's policy wins even when it is the default's.
        let options = common::small_tree_options().filter_policy(default_policy);
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(db.stats().filter_policy, default_policy);
        let copy = tempfile::tempdir().unwrap();
        let copy = copy.path().join("copy");
        db.checkpoint(&copy).unwrap();
        let copied = Db::open(&copy, common::small_tree_options()).unwrap();
        assert_eq!(copied.stats().filter_policy, default_policy);
    }
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    assert_eq!(db.stats().filter_policy, default_policy, "recorded in turn");
    drop(db);
    // A policy set on the field is given as the builder gives it: the default's too.
    for policy in [FilterPolicy::FalsePositiveRate(0.02), default_policy] {
        let mut options = common::small_tree_options();
        options.filter_policy = Some(policy);
        let db = Db::open(dir.path(), options).unwrap();
        assert_eq!(db.stats().filter_policy, policy);
    }
    let mut options = common::small_tree_options();
    options.filter_policy = Some(FilterPolicy::Disabled);
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.stats().filter_policy, FilterPolicy::Disabled);
    put_and_flush(&db, 2);
    assert_eq!(newest_table_bits(&db), None);
}
