//! `Options::filter_memory_limit`: the store's filters stay within it as the store grows,
//! shrinks and is reopened, and shrinking them never loses a key.

use crate::common;

use std::path::Path;

use bloomkv::{Db, FilterKind, FilterResidency, MemoryRole, Options, Stats};

const KEYS: u64 = 20_000;

/// Small trees, with no filter limit but the one a test gives, held to it (no memory moves
/// from the block cache, `Options::memory_follows_reads`, but where a test says so). Their
/// tables stay where the writes and the triggers put them: a test that looks up for tens of
/// seconds would otherwise see level 0 compacted at rest midway
/// (`Options::compact_level0_at_rest`).
fn options() -> Options {
    // Memtables of 12.5 KiB hold about the entries (128) these trees are shaped around.
    (common::small_tree_options().no_filter_memory_limit())
        .memtable_size(12_800)
        .memory_follows_reads(false)
        .compact_level0_at_rest(None)
        // These tests follow Bloom filters as the plan folds them; a Ribbon filter does not
        // fold (`ribbon_filters_are_held_whole_or_dropped_within_the_limit`).
        .ribbon_filters_from_level(u32::MAX)
}

/// Looks up every absent (odd) key, scattered over the keys as [`all_absent_lookups`] does:
/// the data blocks read, and the reads the tables' rates predict (each covering table's rate
/// of the filter lookups probe, summed). Scattered, as uniform lookups are: in key order, the
/// lookups counted by the time of a refit (`Options::filter_memory_follows_lookups`) all lie
/// in the key range already walked, and the plan would spend the filters there, folding or
/// dropping those of the tables the walk is about to reach.
fn absent_reads(db: &Db) -> (u64, f64) {
    let before = db.stats();
    let mut predicted = 0.0;
    for i in 0..KEYS {
        let key = common::key(2 * scattered(i) + 1);
        predicted += (before.tables.iter())
            .filter(|t| t.smallest_key <= key && key <= t.largest_key)
            .map(|t| t.resident_false_positive_rate.unwrap_or(1.0))
            .sum::<f64>();
        assert_eq!(db.get(&key).unwrap(), None);
    }
    (
        db.stats().data_block_reads - before.data_block_reads,
        predicted,
    )
}

fn shrunk(stats: &Stats) -> usize {
    stats.levels.iter().map(|l| l.tables_filter_shrunk).sum()
}

/// A store of `KEYS` even keys, written with `options` and no limit, and settled; returns
/// its stats.
fn build_unlimited_with(dir: &Path, options: Options) -> Stats {
    let db = Db::open(dir, options).unwrap();
    common::put_even(&db, 0, KEYS);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    db.close().unwrap();
    stats
}

/// [`build_unlimited_with`] the small tree's options; returns the filter bytes.
fn build_unlimited(dir: &Path) -> u64 {
    build_unlimited_with(dir, options()).filter_memory_bytes
}

/// Each shrunk table of `stats` holds exactly its whole filter's bytes (in `whole`, by table
/// number) over its fold factor, or none when dropped.
fn assert_shrunk_sizes(stats: &Stats, whole: &Stats) {
    for t in &stats.tables {
        let written = (whole.tables.iter())
            .find(|w| w.number == t.number)
            .expect("the same tables")
            .filter_bytes;
        let expected = match t.filter_residency {
            FilterResidency::Whole | FilterResidency::NoFilter => written,
            FilterResidency::Folded(f) => {
                assert!([2, 4, 8].contains(&f), "{t:?}");
                assert_eq!(written % u64::from(f), 0, "{t:?}");
                written / u64::from(f)
            }
            FilterResidency::Dropped => 0,
            other => panic!("a residency this test does not know: {other:?}"),
        };
        assert_eq!(t.filter_bytes, expected, "{t:?}");
    }
}

#[test]
fn ribbon_filters_are_held_whole_or_dropped_within_the_limit() {
    // Tables of a few hundred keys (fewer than 128 keep a Bloom filter), written in scattered
    // order: ascending keys would move down from level 0, never rewritten. The limit spent by
    // keys: spent by lookups, filters are written wide to be folded, and so are Bloom filters.
    let ribbon = || {
        (options().ribbon_filters_from_level(1))
            .memtable_size(64 << 10)
            .table_size(32 << 10)
            .filter_memory_follows_lookups(false)
    };
    let build = |dir: &Path, options: Options| {
        let db = Db::open(dir, options).unwrap();
        for i in 0..KEYS {
            let at = scattered(i);
            db.put(common::key(2 * at), common::value(at, 0)).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_background_work().unwrap();
        db
    };
    let unlimited = build(tempfile::tempdir().unwrap().path(), ribbon()).stats();
    let ribbons = (unlimited.tables.iter())
        .filter(|t| t.filter_kind == Some(FilterKind::Ribbon))
        .count();
    assert!(
        ribbons > unlimited.tables.len() / 2,
        "{ribbons} of {}",
        unlimited.tables.len()
    );
    let limit = unlimited.filter_memory_bytes / 2;
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), ribbon().filter_memory_limit(limit));
    let stats = db.stats();
    assert!(stats.filter_memory_bytes <= limit, "{stats:?}");
    let kept: Vec<_> = (stats.tables.iter())
        .filter(|t| t.filter_kind == Some(FilterKind::Ribbon))
        .map(|t| t.filter_residency)
        .collect();
    assert!(
        (kept.iter()).all(|r| matches!(r, FilterResidency::Whole | FilterResidency::Dropped)),
        "{kept:?}"
    );
    assert!(kept.contains(&FilterResidency::Whole), "{kept:?}");
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
    let (reads, predicted) = absent_reads(&db);
    assert!(
        reads as f64 <= predicted * 1.5 + 50.0,
        "{reads} against {predicted}"
    );

    // Spent where lookups go, the limit folds filters: tables written while it binds get
    // Bloom filters, which fold.
    let dir = tempfile::tempdir().unwrap();
    let following = (ribbon().filter_memory_follows_lookups(true)).filter_memory_limit(limit);
    let stats = build(dir.path(), following).stats();
    let ribbons_there = (stats.tables.iter())
        .filter(|t| t.filter_kind == Some(FilterKind::Ribbon))
        .count();
    assert!(
        ribbons_there < ribbons / 2,
        "{ribbons_there} against {ribbons}"
    );
    assert!(stats.filter_memory_bytes <= limit);
}

#[test]
fn the_filters_stay_within_the_limit_while_the_store_grows_and_shrinks() {
    let unlimited = build_unlimited(tempfile::tempdir().unwrap().path());
    let limit = unlimited / 3;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options().filter_memory_limit(limit)).unwrap();
    for step in 0..10 {
        common::put_even(&db, step * KEYS / 10, (step + 1) * KEYS / 10);
        db.flush().unwrap();
        // Compactions run meanwhile: every version they install is within the limit too.
        let stats = db.stats();
        assert_eq!(stats.filter_memory_limit, Some(limit));
        assert!(
            stats.filter_memory_bytes <= limit,
            "step {step}: {} bytes of filters, limit {limit}",
            stats.filter_memory_bytes
        );
    }
    db.wait_for_background_work().unwrap();
    let grown = db.stats();
    assert!(grown.filter_memory_bytes <= limit);
    // The limit took effect: the store holds filters, but far fewer bytes than unlimited.
    assert!(grown.filter_memory_bytes > limit / 2, "{grown:?}");
    assert!(grown.filter_memory_bytes < unlimited / 2);
    common::assert_even_keys_read_back(&db, KEYS, |_| true);

    // Half the keys deleted and compacted away: still within, and the rest reads back.
    for i in (0..KEYS).filter(|i| i % 2 == 0) {
        db.delete(common::key(2 * i)).unwrap();
    }
    db.compact().unwrap();
    let after = db.stats();
    assert!(after.filter_memory_bytes <= limit);
    assert!(after.filter_memory_bytes > 0);
    common::assert_even_keys_read_back(&db, KEYS, |i| i % 2 == 1);
}

#[test]
fn a_store_opened_with_a_smaller_limit_folds_its_filters_and_finds_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let whole = build_unlimited_with(dir.path(), options());
    let held = whole.filter_memory_bytes;

    let limit = held / 2;
    let db = Db::open(dir.path(), options().filter_memory_limit(limit)).unwrap();
    let stats = db.stats();
    assert!(stats.filter_memory_bytes <= limit, "{stats:?}");
    assert!(stats.filter_memory_bytes > limit / 2, "{stats:?}");
    let folded: Vec<_> = (stats.tables.iter())
        .filter(|t| matches!(t.filter_residency, FilterResidency::Folded(_)))
        .collect();
    assert!(!folded.is_empty());
    assert_shrunk_sizes(&stats, &whole);
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
    db.close().unwrap();

    // No memory at all for filters: every filter dropped, every key still found, and absent
    // keys now cost a block read in each table that covers them.
    let db = Db::open(dir.path(), options().filter_memory_limit(0)).unwrap();
    let stats = db.stats();
    assert_eq!(stats.filter_memory_bytes, 0);
    assert_eq!(shrunk(&stats), stats.tables.len());
    assert!(stats
        .tables
        .iter()
        .all(|t| t.filter_residency == FilterResidency::Dropped));
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
    let (reads, predicted) = absent_reads(&db);
    assert!(
        reads as f64 >= 0.9 * KEYS as f64,
        "{reads} block reads for {KEYS} absent keys"
    );
    assert_eq!(
        reads as f64, predicted,
        "without filters every covering table reads"
    );
    db.close().unwrap();

    // Without a limit the whole filters are back.
    let db = Db::open(dir.path(), options()).unwrap();
    let stats = db.stats();
    assert_eq!(stats.filter_memory_bytes, held);
    assert_eq!(shrunk(&stats), 0);
}

/// Folded filters answer at the rate their smaller size predicts, and the stats give that
/// rate: absent keys read about as many blocks as the tables' resident rates add up to, more
/// than the whole filters' rates would. The limit is spent by keys, so that the filters the
/// lookups meet are those the rates were read from: spent by lookups, a refit every few
/// thousand of them could fold or drop filters midway.
#[test]
fn absent_keys_meet_the_rate_the_stats_give_for_folded_filters() {
    let dir = tempfile::tempdir().unwrap();
    let held = build_unlimited(dir.path());
    let by_keys = options()
        .filter_memory_limit(held * 3 / 5)
        .filter_memory_follows_lookups(false);
    let db = Db::open(dir.path(), by_keys).unwrap();
    let stats = db.stats();
    assert!(shrunk(&stats) > 0);
    let written: f64 = (0..KEYS)
        .map(|i| {
            let key = common::key(2 * i + 1);
            (stats.tables.iter())
                .filter(|t| t.smallest_key <= key && key <= t.largest_key)
                .map(|t| t.predicted_false_positive_rate.unwrap_or(1.0))
                .sum::<f64>()
        })
        .sum();
    let (reads, predicted) = absent_reads(&db);
    let residency = |s: &Stats| -> Vec<_> {
        (s.tables.iter())
            .map(|t| (t.number, t.filter_residency))
            .collect()
    };
    assert_eq!(db.stats().filter_refits, 0);
    assert_eq!(residency(&db.stats()), residency(&stats));
    assert!(
        predicted > 2.0 * written,
        "resident {predicted}, written {written}"
    );
    let (low, high) = (0.75 * predicted, 1.25 * predicted);
    assert!(
        (low..=high).contains(&(reads as f64)),
        "{reads} reads, {predicted:.0} predicted"
    );
}

/// Tables of a few thousand keys have filters sized to fold by 2, 4 and 8 (a multiple of 512
/// bits): under a limit they are folded to exactly their share of the bytes, and every key is
/// found through them.
#[test]
fn filters_of_large_tables_fold_to_exactly_their_share() {
    let large = || options().table_size(512 * 1024).memtable_size(768 << 10);
    let dir = tempfile::tempdir().unwrap();
    let whole = build_unlimited_with(dir.path(), large());
    assert!(
        whole.tables.iter().all(|t| t.filter_bytes * 8 >= 32_768),
        "{whole:?}"
    );
    let limit = whole.filter_memory_bytes * 3 / 8;
    let db = Db::open(dir.path(), large().filter_memory_limit(limit)).unwrap();
    let stats = db.stats();
    assert!(stats.filter_memory_bytes <= limit);
    assert_shrunk_sizes(&stats, &whole);
    // With 7 hashes (10 bits per key), a second fold costs about what dropping costs, per
    // byte: each table is folded once before anything is dropped, and the last step frees
    // what is left to free at the least cost, not the most bytes.
    assert!(stats.filter_memory_bytes > limit / 2, "{stats:?}");
    assert!(
        (stats.tables.iter()).all(|t| t.filter_residency != FilterResidency::Whole),
        "{stats:?}"
    );
    assert!(
        (stats.tables.iter()).any(|t| matches!(t.filter_residency, FilterResidency::Folded(_))),
        "{stats:?}"
    );
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
}

/// A store opened under a limit reads each table's filter only once it knows how much to
/// keep: damage to a filter block is then found, and reported with the file and offset, as an
/// open without a limit reports it.
#[test]
fn a_damaged_filter_fails_an_open_under_a_limit_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let held = build_unlimited(dir.path());
    let mut tables: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    // The largest table: a small one's filter may end before the byte flipped below, which
    // would then damage the block after it instead.
    tables.sort_by_key(|p| std::fs::metadata(p).unwrap().len());
    let damaged = tables.last().unwrap();
    let fs: bloomkv::fs::SharedFs = std::sync::Arc::new(bloomkv::fs::OsFileSystem);
    let counters = std::sync::Arc::new(bloomkv::metrics::ReadCounters::new());
    let filter_at = bloomkv::sstable::Table::open(fs, damaged, counters)
        .unwrap()
        .properties()
        .data_size;
    let mut bytes = std::fs::read(damaged).unwrap();
    bytes[filter_at as usize + 40] ^= 0x10;
    std::fs::write(damaged, bytes).unwrap();
    let opens = [
        ("half the filters", options().filter_memory_limit(held / 2)),
        ("twice the filters", options().filter_memory_limit(held * 2)),
        ("no limit", options()),
    ];
    for (limit, options) in opens {
        let err = Db::open(dir.path(), options).unwrap_err();
        match &err {
            bloomkv::Error::Corruption { file, offset, .. } => {
                assert_eq!(file, damaged, "{err}");
                assert_eq!(*offset, Some(filter_at), "{err}");
            }
            other => panic!("limit of {limit}: {other}"),
        }
    }
}

/// Without a limit, the store takes `filter_memory_share` of the memory the process may use
/// as its limit; a share small enough binds as a limit of that size would.
#[test]
fn the_default_limit_is_a_share_of_the_memory_available() {
    let dir = tempfile::tempdir().unwrap();
    let held = build_unlimited_with(dir.path(), options()).filter_memory_bytes;
    let Some(available) = bloomkv::memory::available() else {
        return; // No figure for the memory here: the store is uncapped, as the share says.
    };

    // The default options: a quarter.
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let stats = db.stats();
    assert_eq!(stats.filter_memory_limit, Some(available / 4));
    assert_eq!(shrunk(&stats), 0, "{held} bytes of filters fit a quarter");
    db.close().unwrap();

    // A share that leaves room for half of the filters.
    let share = (held / 2) as f64 / available as f64;
    let db = Db::open(dir.path(), options().filter_memory_share(share)).unwrap();
    let stats = db.stats();
    let limit = stats.filter_memory_limit.unwrap();
    assert!(
        limit.abs_diff(held / 2) <= 1,
        "{limit} against {}",
        held / 2
    );
    assert!(stats.filter_memory_bytes <= limit);
    assert!(shrunk(&stats) > 0);
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
    db.close().unwrap();

    // An explicit limit wins over the share; no limit at all leaves every filter whole.
    let db = Db::open(
        dir.path(),
        options()
            .filter_memory_share(share)
            .filter_memory_limit(held),
    )
    .unwrap();
    assert_eq!(db.stats().filter_memory_limit, Some(held));
    assert_eq!(shrunk(&db.stats()), 0);
    db.close().unwrap();
    let db = Db::open(dir.path(), options().no_filter_memory_limit()).unwrap();
    assert_eq!(db.stats().filter_memory_limit, None);
    assert_eq!(db.stats().filter_memory_bytes, held);
    db.close().unwrap();
}

#[test]
fn a_share_outside_zero_to_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for share in [0.0, -0.5, 1.5, f64::NAN, f64::INFINITY] {
        let err = Db::open(dir.path(), options().filter_memory_share(share)).unwrap_err();
        assert!(
            matches!(&err, bloomkv::Error::InvalidArgument(m) if m.contains("filter_memory_share")),
            "{share}: {err}"
        );
    }
    let db = Db::open(dir.path(), options().filter_memory_share(1.0)).unwrap();
    db.close().unwrap();
}

/// A store of `KEYS` even keys written with `options`, settled; and a table of the last
/// level whose filter is not held whole (the first in key order), with the absent keys in
/// its range.
fn build_limited(dir: &Path, options: Options) -> (Db, u64, Vec<Vec<u8>>) {
    let db = Db::open(dir, options).unwrap();
    common::put_even(&db, 0, KEYS);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    let bottom = stats.tables.iter().map(|t| t.level).max().unwrap();
    let table = (stats.tables.iter())
        .filter(|t| t.level == bottom && t.filter_residency != FilterResidency::Whole)
        .min_by(|a, b| a.smallest_key.cmp(&b.smallest_key))
        .expect("a filter shrunk to fit");
    let absent = (0..KEYS)
        .map(|i| common::key(2 * i + 1))
        .filter(|k| table.smallest_key <= *k && *k <= table.largest_key)
        .collect();
    (db, table.number, absent)
}

fn residency_of(db: &Db, table: u64) -> FilterResidency {
    (db.stats().tables.iter())
        .find(|t| t.number == table)
        .expect("the table is live")
        .filter_residency
}

/// Looks up `rounds` times each of `keys` (absent); returns the data blocks read.
fn absent_lookups(db: &Db, keys: &[Vec<u8>], rounds: u64) -> u64 {
    let before = db.stats().data_block_reads;
    for _ in 0..rounds {
        for key in keys {
            assert_eq!(db.get(key).unwrap(), None);
        }
    }
    db.stats().data_block_reads - before
}

/// Waits (up to ten seconds) for the background thread to read `table`'s filter back whole.
fn wait_until_whole(db: &Db, table: u64) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if residency_of(db, table) == FilterResidency::Whole {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// Rounds of lookups of one table's keys that outweigh the prediction many times over.
fn rounds_to_outweigh(keys: &[Vec<u8>]) -> u64 {
    40_000 / keys.len().max(1) as u64 + 1
}

#[test]
fn filter_memory_follows_skewed_lookups_to_the_busy_tables() {
    let unlimited = build_unlimited(tempfile::tempdir().unwrap().path());
    let limit = unlimited / 3;
    let dir = tempfile::tempdir().unwrap();
    let (db, busy, keys) = build_limited(dir.path(), options().filter_memory_limit(limit));
    let shrunk_reads = absent_lookups(&db, &keys, 5);
    let before = db.stats();
    assert_eq!(before.filter_refits, 0, "no lookups yet to refit by");

    // Lookups of one table's keys only: its filter is read back whole, others pay for it,
    // and the limit holds.
    absent_lookups(&db, &keys, rounds_to_outweigh(&keys));
    assert!(wait_until_whole(&db, busy), "{:?}", db.stats().tables);
    let stats = db.stats();
    assert!(stats.filter_memory_bytes <= limit, "{stats:?}");
    // The refit that grew it back is counted, with the filter it read from the file.
    let busy_filter = (stats.tables.iter().find(|t| t.number == busy))
        .unwrap()
        .filter_bytes;
    assert!(stats.filter_refits >= 1, "{stats:?}");
    assert!(stats.filter_reads > before.filter_reads, "{stats:?}");
    let read_back = stats.filter_bytes_read - before.filter_bytes_read;
    assert!(
        read_back >= busy_filter,
        "{read_back} bytes read back, {busy_filter} held"
    );
    let whole_reads = absent_lookups(&db, &keys, 5);
    assert!(
        whole_reads * 4 < shrunk_reads.max(4),
        "{whole_reads} blocks read with the whole filter, {shrunk_reads} shrunk"
    );
    common::assert_even_keys_read_back(&db, KEYS, |_| true);

    // Reopened, the store takes the counts it saved when it closed: the busy table's filter
    // is whole from the start, within the limit, and every key reads back.
    db.close().unwrap();
    // What the store saved for the table (read from the file: a refit may have halved the
    // counts between a look at the stats and the close).
    let saved = std::fs::read(dir.path().join("LOOKUPS")).unwrap();
    let saved = bloomkv::lookup_counts::decode(&saved).unwrap();
    let counted: u64 = saved[&busy].counts.iter().sum();
    assert!(counted > 0);
    let db = Db::open(dir.path(), options().filter_memory_limit(limit)).unwrap();
    assert!(db.recovery_report().tables_lookup_counts_restored > 0);
    assert_eq!(db.recovery_report().lookup_counts_refused, None);
    let stats = db.stats();
    let reopened = stats.tables.iter().find(|t| t.number == busy).unwrap();
    assert_eq!(reopened.lookups_counted, counted);
    assert_eq!(reopened.filter_residency, FilterResidency::Whole);
    assert!(stats.filter_memory_bytes <= limit);
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
    // `kvtool check` knows the file: it is no stray.
    drop(db);
    let report = bloomkv::check::check_store(dir.path()).unwrap();
    assert!(report.unreferenced.is_empty(), "{report:?}");
}

#[test]
fn gets_that_find_their_key_in_a_table_do_not_count_for_its_filter() {
    let unlimited = build_unlimited(tempfile::tempdir().unwrap().path());
    let dir = tempfile::tempdir().unwrap();
    let (db, table, absent) =
        build_limited(dir.path(), options().filter_memory_limit(unlimited / 3));
    let bottom = db.stats().tables.iter().map(|t| t.level).max().unwrap();
    let counted = |db: &Db, number: u64| {
        let stats = db.stats();
        let t = stats.tables.iter().find(|t| t.number == number).unwrap();
        t.lookups_counted
    };
    let bottom_counts = |db: &Db| -> Vec<(u64, FilterResidency, u64)> {
        (db.stats().tables.iter())
            .filter(|t| t.level == bottom)
            .map(|t| (t.number, t.filter_residency, t.lookups_counted))
            .collect()
    };
    assert!(
        bottom_counts(&db).iter().all(|&(_, _, n)| n == 0),
        "no lookup yet"
    );

    // Gets of every key: a key the bottom level holds was asked of the levels above it, which
    // turned it away, and found in its bottom table, whose filter, whole, folded or dropped,
    // could only let it through. No bottom table counts any.
    for _ in 0..3 {
        for i in 0..KEYS {
            assert!(db.get(common::key(2 * i)).unwrap().is_some());
        }
    }
    let counts = bottom_counts(&db);
    assert!(counts.iter().all(|&(_, _, n)| n == 0), "{counts:?}");
    assert!(counts.iter().any(|&(_, r, _)| r != FilterResidency::Whole));

    // Batched gets ask every table that covers a key, also those below the one that answers:
    // of the keys in one bottom table's range, those it holds are taken back.
    let stats = db.stats();
    let range = stats.tables.iter().find(|t| t.number == table).unwrap();
    let in_range: Vec<Vec<u8>> = (0..KEYS)
        .map(|i| common::key(2 * i))
        .filter(|k| range.smallest_key <= *k && *k <= range.largest_key)
        .collect();
    let values = db.multi_get(&in_range).unwrap();
    assert!(values.iter().all(Option::is_some));
    assert!(counted(&db, table) < in_range.len() as u64);

    // Gets of absent keys in its range are what its filter turns away: they count.
    let before = counted(&db, table);
    for key in &absent {
        assert_eq!(db.get(key).unwrap(), None);
    }
    assert!(counted(&db, table) > before, "{:?}", db.stats().tables);
}

/// A store limited to a third of its filters (the limit), in `dir`, whose lookups went to one
/// table's keys (absent ones) until its filter was read back whole: the store, the limit,
/// the table, the keys.
fn with_a_busy_table(dir: &Path) -> (Db, u64, u64, Vec<Vec<u8>>) {
    let unlimited = build_unlimited(tempfile::tempdir().unwrap().path());
    let limit = unlimited / 3;
    let (db, busy, keys) = build_limited(dir, options().filter_memory_limit(limit));
    absent_lookups(&db, &keys, rounds_to_outweigh(&keys));
    assert!(wait_until_whole(&db, busy), "{:?}", db.stats().tables);
    (db, limit, busy, keys)
}

#[test]
fn damaged_or_unwanted_lookup_counts_leave_the_store_to_the_prediction() {
    let dir = tempfile::tempdir().unwrap();
    let (db, limit, busy, _) = with_a_busy_table(dir.path());
    db.close().unwrap();
    let saved = dir.path().join("LOOKUPS");
    let bytes = std::fs::read(&saved).unwrap();
    let counted = |db: &Db| {
        db.stats()
            .tables
            .iter()
            .map(|t| t.lookups_counted)
            .sum::<u64>()
    };

    // Spent by keys, the store reads no counts (and saves none over the file).
    let by_keys = options()
        .filter_memory_limit(limit)
        .filter_memory_follows_lookups(false);
    let db = Db::open(dir.path(), by_keys).unwrap();
    assert_eq!(db.recovery_report().tables_lookup_counts_restored, 0);
    assert_eq!(counted(&db), 0);
    drop(db);
    assert_eq!(std::fs::read(&saved).unwrap(), bytes);

    // A damaged file is refused, named, and the store opens from the prediction.
    std::fs::write(&saved, &bytes[..bytes.len() - 3]).unwrap();
    let db = Db::open(dir.path(), options().filter_memory_limit(limit)).unwrap();
    let refused = db.recovery_report().lookup_counts_refused.clone();
    assert!(
        refused.as_deref().is_some_and(|r| r.contains("LOOKUPS")),
        "{refused:?}"
    );
    assert_eq!(db.recovery_report().tables_lookup_counts_restored, 0);
    assert_eq!(counted(&db), 0);
    assert_ne!(residency_of(&db, busy), FilterResidency::Whole);
    assert!(db.stats().filter_memory_bytes <= limit);
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
}

#[test]
fn a_compaction_hands_its_inputs_lookup_counts_to_the_tables_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (db, limit, busy, keys) = with_a_busy_table(dir.path());

    // Every table merged into new ones, with no lookup since: the tables that now hold the
    // busy keys took over the lookups their inputs counted, so the plan keeps their filters
    // (whole, or folded once where the busy range was split between two tables: the first
    // fold of a widened filter is the cheapest memory there is), and the quiet tables pay
    // for them.
    db.compact().unwrap();
    let stats = db.stats();
    assert!(!stats.tables.iter().any(|t| t.number == busy), "rewritten");
    let (first, last) = (keys.first().unwrap(), keys.last().unwrap());
    let (holding, quiet): (Vec<_>, Vec<_>) =
        (stats.tables.iter()).partition(|t| t.smallest_key <= *last && *first <= t.largest_key);
    assert!(!holding.is_empty() && !quiet.is_empty());
    let share = |t: &&bloomkv::TableStats| t.lookups_counted as f64 / t.lookup_span.max(1) as f64;
    let holding_share: f64 = holding.iter().map(share).sum();
    assert!(holding_share > 0.5, "{holding_share}: {:?}", stats.tables);
    let quiet_share: f64 = quiet.iter().map(share).sum();
    assert!(quiet_share < 0.1, "{quiet_share}: {:?}", stats.tables);
    let rate = |t: &&bloomkv::TableStats| t.resident_false_positive_rate.unwrap_or(1.0);
    let mean = |tables: &[&bloomkv::TableStats]| {
        tables.iter().map(rate).sum::<f64>() / tables.len() as f64
    };
    assert!(
        mean(&holding) * 10.0 < mean(&quiet),
        "busy {} against quiet {}: {:?}",
        mean(&holding),
        mean(&quiet),
        stats.tables
    );
    assert!(shrunk(&stats) > 0, "{:?}", stats.tables);
    assert!(stats.filter_memory_bytes <= limit, "{stats:?}");
    assert!(absent_lookups(&db, &keys, 1) * 20 < keys.len() as u64);
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
}

#[test]
fn filter_memory_spent_by_key_counts_ignores_the_lookups() {
    let unlimited = build_unlimited(tempfile::tempdir().unwrap().path());
    let limit = unlimited / 3;
    let dir = tempfile::tempdir().unwrap();
    let options = options()
        .filter_memory_limit(limit)
        .filter_memory_follows_lookups(false);
    let (db, busy, keys) = build_limited(dir.path(), options);
    let held = residency_of(&db, busy);
    absent_lookups(&db, &keys, rounds_to_outweigh(&keys));
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(residency_of(&db, busy), held);
    assert!(db.stats().filter_memory_bytes <= limit);
}

/// [`absent_reads`]' data blocks read, and of them, those the block cache held.
fn absent_reads_and_hits(db: &Db) -> (u64, u64) {
    let hits = db.stats().block_cache.hits;
    let (reads, _) = absent_reads(db);
    (reads, db.stats().block_cache.hits - hits)
}

/// The `i`th of `0..KEYS` scattered over them (a stride prime to their count), as uniform
/// lookups are: no two in a row fall in one block, and every stretch of them is spread over
/// the whole key range.
fn scattered(i: u64) -> u64 {
    i * 7919 % KEYS
}

/// Looks up every absent (odd) key `rounds` times, [`scattered`] over the keys.
fn all_absent_lookups(db: &Db, rounds: u64) {
    for _ in 0..rounds {
        for i in 0..KEYS {
            assert_eq!(db.get(common::key(2 * scattered(i) + 1)).unwrap(), None);
        }
    }
}

/// Bytes a role's target is below what it was given: what it gave the filters.
fn given_away(stats: &Stats, role: MemoryRole) -> u64 {
    let row = stats
        .memory
        .iter()
        .find(|r| r.role == role)
        .expect("a row per role");
    row.given - row.target
}

fn moved_from_cache(stats: &Stats) -> u64 {
    given_away(stats, MemoryRole::BlockCache)
}

fn lent_by_index_cache(stats: &Stats) -> u64 {
    given_away(stats, MemoryRole::IndexPartitions)
}

#[test]
fn uniform_absent_lookups_move_a_cache_that_serves_little_to_the_filters() {
    let unlimited = build_unlimited(tempfile::tempdir().unwrap().path());
    let limit = unlimited / 3;
    let cache = 8 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let options = |moves: bool| {
        let mut options = (options().filter_memory_limit(limit)).memory_follows_reads(moves);
        options.block_cache_size = cache;
        options
    };
    // What absent gets read with the filters held to the limit: measured with nothing moving,
    // as the first refit of a store that moves memory would move some while they are counted.
    let (db, _, _) = build_limited(dir.path(), options(false));
    let (reads_before, hits_before) = absent_reads_and_hits(&db);
    assert_eq!(moved_from_cache(&db.stats()), 0);
    db.close().unwrap();
    let db = Db::open(dir.path(), options(true)).unwrap();
    assert_eq!(db.stats().block_cache.capacity, cache);
    // The store's blocks are fifty times the cache: the false positives of folded filters
    // read blocks it seldom holds (under 5% of its reads are hits), and filter bits save more
    // per byte.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.stats().filter_memory_bytes <= limit && std::time::Instant::now() < deadline {
        all_absent_lookups(&db, 1);
    }
    let stats = db.stats();
    assert!(moved_from_cache(&stats) > 0, "{stats:?}");
    let moved = moved_from_cache(&stats);
    // What the cache gave, the filters got: together they hold what they were given.
    assert_eq!(stats.block_cache.capacity, cache - moved);
    assert_eq!(stats.filter_memory_limit, Some(limit + moved));
    assert!(stats.block_cache.capacity >= cache / 8);
    assert!(stats.filter_memory_bytes > limit, "{stats:?}");
    assert!(stats.filter_memory_bytes <= limit + moved, "{stats:?}");
    // Absent gets read fewer blocks with the memory where it saves more: the bits the filters
    // got turn away more reads than the cache's lost bytes had served, so fewer blocks come
    // from the files. (By how much depends on the tree's shape: filters of an odd number of
    // words, as small tables have, cannot fold, and a plan can only keep them or drop them.)
    let (reads_after, hits_after) = absent_reads_and_hits(&db);
    assert!(
        reads_after < reads_before,
        "{reads_after} blocks read after, {reads_before} before"
    );
    assert!(
        reads_after - hits_after < reads_before - hits_before,
        "{reads_after} blocks read after ({hits_after} cache hits), \
         {reads_before} before ({hits_before} cache hits)"
    );
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
}

#[test]
fn an_index_cache_lends_the_filters_what_its_partitions_leave_spare() {
    let unlimited = build_unlimited(tempfile::tempdir().unwrap().path());
    let limit = unlimited / 3;
    let index_cache = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let mut options = (options().filter_memory_limit(limit))
        .memory_follows_reads(true)
        .index_cache_size(index_cache);
    // Two-level indexes, whose partitions take a sliver of the index cache; no block cache,
    // so that nothing moves but the loan.
    options.tuning.index_partition_size = 16;
    options.block_cache_size = 0;
    let (db, _, _) = build_limited(dir.path(), options);
    let stats = db.stats();
    assert_eq!(stats.index_cache.capacity, index_cache);
    assert!(stats.index_cache.blocks > 0, "{stats:?}");
    let (reads_before, _) = absent_reads(&db);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while lent_by_index_cache(&db.stats()) == 0 && std::time::Instant::now() < deadline {
        all_absent_lookups(&db, 1);
    }
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    let lent = lent_by_index_cache(&stats);
    assert!(lent > 0, "{stats:?}");
    // What the index cache lent, the filters got, and nothing moved from the block cache.
    assert_eq!(stats.index_cache.capacity, index_cache - lent);
    assert_eq!(stats.filter_memory_limit, Some(limit + lent));
    assert_eq!(moved_from_cache(&stats), 0);
    assert!(stats.filter_memory_bytes > limit, "{stats:?}");
    assert!(stats.filter_memory_bytes <= limit + lent, "{stats:?}");
    // The partitions still fit, with room to grow.
    assert!(
        stats.index_cache.bytes * 9 / 8 <= stats.index_cache.capacity,
        "{stats:?}"
    );
    let (reads_after, _) = absent_reads(&db);
    assert!(
        reads_after * 3 < reads_before * 2,
        "{reads_after} blocks read after, {reads_before} before"
    );
    // Present gets find every partition in the cache: no index read from the files.
    let index_reads = db.stats().index_block_reads;
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
    assert_eq!(db.stats().index_block_reads, index_reads);
}

#[test]
fn a_cache_that_serves_the_lookups_keeps_its_memory() {
    let unlimited = build_unlimited(tempfile::tempdir().unwrap().path());
    let limit = unlimited / 8;
    let dir = tempfile::tempdir().unwrap();
    // The default cache (32 MiB) holds the whole store: present gets of a few keys hit it.
    let options = (options().filter_memory_limit(limit)).memory_follows_reads(true);
    let (db, _, _) = build_limited(dir.path(), options);
    for _ in 0..400 {
        for i in 0..100 {
            assert!(db.get(common::key(2 * i)).unwrap().is_some());
        }
    }
    // Whatever the background made of those 40,000 lookups, no memory left the cache.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let stats = db.stats();
    assert_eq!(moved_from_cache(&stats), 0, "{stats:?}");
    assert_eq!(stats.block_cache.capacity, 32 << 20);
    assert_eq!(stats.filter_memory_limit, Some(limit));
}

#[test]
fn level_zero_tables_hand_on_the_lookups_they_saw_together_once() {
    // Level-0 tables that each cover the whole key range, kept there (no compaction until
    // asked), under a limit that counts lookups but does not bind.
    let options = options()
        .memtable_size(1 << 20)
        .table_size(16 << 10)
        .l0_compaction_trigger(1000)
        .l0_write_triggers(2000, 3000)
        .filter_memory_limit(1 << 30);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    const KEYS_HERE: u64 = 2_000;
    for _ in 0..4 {
        common::put_even(&db, 0, KEYS_HERE);
        db.flush().unwrap();
    }
    let stats = db.stats();
    assert!(
        stats.tables.iter().all(|t| t.level == 0),
        "{:?}",
        stats.tables
    );
    // Every absent key between the stored ones, five times: a lookup asks one table of each
    // flush, so each flush's tables together saw every lookup.
    for _ in 0..5 {
        for i in 0..KEYS_HERE {
            assert_eq!(db.get(common::key(2 * i + 1)).unwrap(), None);
        }
    }
    let share = |t: &bloomkv::TableStats| t.lookups_counted as f64 / t.lookup_span.max(1) as f64;
    let total = |stats: &Stats| stats.tables.iter().map(share).sum::<f64>();
    let before = total(&db.stats());
    assert!(
        before > 3.0,
        "four flushes, each asked by every lookup: {before}"
    );

    // Merged into one level, the keys are asked once per lookup: the new tables take about
    // the lookups' whole share once, not once per flush.
    db.compact().unwrap();
    let stats = db.stats();
    assert!(
        stats.tables.iter().all(|t| t.level > 0),
        "{:?}",
        stats.tables
    );
    let after = total(&stats);
    assert!((0.5..=1.5).contains(&after), "{after}: {:?}", stats.tables);
    common::assert_even_keys_read_back(&db, KEYS_HERE, |_| true);
}
