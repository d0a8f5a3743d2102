//! Tables written with the cache-local filter layout: their filters answer as the blocked
//! layout's rule predicts, fold under a memory limit, and mix with standard tables in one
//! store.

use crate::common;

use bloomkv::filter::{blocked_rate, BlockedParams};
use bloomkv::{Db, FilterKind, FilterPolicy, FilterResidency, Options, Stats};

/// Tables of a few thousand keys: filters large enough to fold (at least 32,768 bits).
fn options(cache_local: bool) -> Options {
    (common::small_tree_with(FilterPolicy::FalsePositiveRate(0.01)))
        .memtable_size(384 << 10)
        .table_size(512 << 10)
        .level1_size(1 << 20)
        .cache_local_filters(cache_local)
        // These tests weigh the two Bloom layouts against each other.
        .ribbon_filters_from_level(u32::MAX)
}

fn put_even(db: &Db, from: u64, to: u64) {
    for i in from..to {
        db.put(common::key(2 * i), common::value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
}

/// Absent keys (odd indexes) inside the tables' ranges: (gets, data blocks they read, the
/// sum of the rates the tables they asked have by the blocked layout's rule at the bits per
/// key their filters hold, rounded up to whole blocks).
fn absent_gets(db: &Db, from: u64, to: u64) -> (u64, u64, f64) {
    let stats = db.stats();
    let before = stats.data_block_reads;
    let mut predicted = 0.0;
    for i in from..to {
        let key = common::key(2 * i + 1);
        predicted += (stats.tables.iter())
            .filter(|t| t.smallest_key <= key && key <= t.largest_key)
            .map(|t| blocked_rate(t.filter_bytes as f64 * 8.0 / t.entries as f64, 6))
            .sum::<f64>();
        assert_eq!(db.get(&key).unwrap(), None);
    }
    (to - from, db.stats().data_block_reads - before, predicted)
}

fn blocked_tables(stats: &Stats) -> usize {
    (stats.tables.iter())
        .filter(|t| t.filter_kind == Some(FilterKind::CacheLocalBloom))
        .count()
}

#[test]
fn cache_local_filters_answer_at_the_blocked_layouts_predicted_rate() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(true)).unwrap();
    put_even(&db, 0, 40_000);
    let stats = db.stats();
    assert!(stats.tables.len() >= 3, "{} tables", stats.tables.len());
    assert_eq!(blocked_tables(&stats), stats.tables.len());
    for t in &stats.tables {
        // A 1% policy is 10 bits per key; the blocked layout's best at 10 bits is 6 hashes.
        assert_eq!((t.bits_per_key, t.hashes), (Some(10), Some(6)));
        let rate = t.predicted_false_positive_rate.unwrap();
        assert!((rate - blocked_rate(10.0, 6)).abs() < 1e-12, "{rate}");
    }
    common::assert_even_keys_read_back(&db, 40_000, |_| true);
    let (gets, read, predicted) = absent_gets(&db, 0, 40_000);
    // The reads absent keys cost are the false positives; their count is binomial around
    // the prediction (about 400 here): within four standard deviations.
    let sd = predicted.sqrt();
    assert!(
        (read as f64 - predicted).abs() <= 4.0 * sd + 2.0,
        "{read} reads for {gets} absent gets, {predicted:.1} predicted"
    );
}

#[test]
fn standard_and_cache_local_tables_mix_and_compaction_writes_the_stores_layout() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), options(false)).unwrap();
        put_even(&db, 0, 10_000);
        assert_eq!(blocked_tables(&db.stats()), 0);
    }
    let db = Db::open(dir.path(), options(true)).unwrap();
    put_even(&db, 10_000, 12_000);
    let stats = db.stats();
    let blocked = blocked_tables(&stats);
    assert!(
        blocked > 0 && blocked < stats.tables.len(),
        "{blocked} of {}",
        stats.tables.len()
    );
    common::assert_even_keys_read_back(&db, 12_000, |_| true);
    absent_gets(&db, 0, 12_000);
    db.compact().unwrap();
    let stats = db.stats();
    assert_eq!(blocked_tables(&stats), stats.tables.len());
    common::assert_even_keys_read_back(&db, 12_000, |_| true);
    drop(db);
    // And back: a standard store reads them, and rewrites them standard.
    let db = Db::open(dir.path(), options(false)).unwrap();
    common::assert_even_keys_read_back(&db, 12_000, |_| true);
    db.compact().unwrap();
    assert_eq!(blocked_tables(&db.stats()), 0);
}

#[test]
fn cache_local_filters_fold_under_a_memory_limit_and_lose_no_key() {
    let dir = tempfile::tempdir().unwrap();
    let whole = {
        let db = Db::open(dir.path(), options(true)).unwrap();
        put_even(&db, 0, 40_000);
        db.stats().filter_memory_bytes
    };
    let limited = options(true).filter_memory_limit(whole / 3);
    let db = Db::open(dir.path(), limited).unwrap();
    let stats = db.stats();
    assert!(
        stats.filter_memory_bytes <= whole / 3,
        "{} of {}",
        stats.filter_memory_bytes,
        whole / 3
    );
    let folded = (stats.tables.iter())
        .filter(|t| t.filter_kind == Some(FilterKind::CacheLocalBloom))
        .filter(|t| matches!(t.filter_residency, FilterResidency::Folded(_)))
        .count();
    assert!(folded > 0, "some cache-local filter folded");
    for t in stats
        .tables
        .iter()
        .filter(|t| t.filter_kind == Some(FilterKind::CacheLocalBloom))
    {
        if let FilterResidency::Folded(f) = t.filter_residency {
            let rate = t.resident_false_positive_rate.unwrap();
            let expected = blocked_rate(10.0 / f64::from(f), 6);
            assert!(
                (rate - expected).abs() < expected * 0.05,
                "{rate} against {expected}"
            );
        }
    }
    common::assert_even_keys_read_back(&db, 40_000, |_| true);
}

#[test]
fn a_cache_local_filter_block_names_its_layout_in_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(true)).unwrap();
    put_even(&db, 0, 500);
    drop(db);
    let table = (std::fs::read_dir(dir.path()).unwrap())
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let props = bloomkv::sstable::verify_table(common::os_fs(), &table).unwrap();
    let handle_offset = props.data_size as usize;
    let bytes = std::fs::read(&table).unwrap();
    let header = &bytes[handle_offset..handle_offset + 32];
    assert_eq!(&header[..4], b"BKBF");
    assert_eq!(
        u16::from_le_bytes([header[6], header[7]]),
        3,
        "hash algorithm 3"
    );
    assert_eq!(
        u32::from_le_bytes(header[8..12].try_into().unwrap()),
        6,
        "6 hashes"
    );
    assert_eq!(
        u64::from_le_bytes(header[16..24].try_into().unwrap()) % 512,
        0
    );
}

#[test]
fn filters_written_wide_for_a_binding_limit_take_the_hashes_of_their_share() {
    let dir = tempfile::tempdir().unwrap();
    let whole = {
        let db = Db::open(dir.path(), options(true)).unwrap();
        put_even(&db, 0, 20_000);
        db.stats().filter_memory_bytes
    };
    let dir = tempfile::tempdir().unwrap();
    let budget = common::small_tree_options()
        .memtable_size(384 << 10)
        .table_size(512 << 10)
        .level1_size(1 << 20)
        .cache_local_filters(true)
        .ribbon_filters_from_level(u32::MAX)
        .filter_memory_limit(whole / 3);
    let db = Db::open(dir.path(), budget).unwrap();
    put_even(&db, 0, 20_000);
    let stats = db.stats();
    let widened: Vec<_> = (stats.tables.iter())
        .filter(|t| t.bits_per_key.is_some_and(|b| b >= 16))
        .collect();
    assert!(!widened.is_empty(), "{:?}", stats.tables);
    for t in widened {
        let bits = t.bits_per_key.unwrap();
        let share = BlockedParams::for_bits_per_key(bits / 4).unwrap();
        assert_eq!(
            t.hashes,
            Some(share.hashes()),
            "{bits} bits per key, written 4x wide"
        );
        assert_eq!(t.filter_kind, Some(FilterKind::CacheLocalBloom));
    }
    common::assert_even_keys_read_back(&db, 20_000, |_| true);
}
