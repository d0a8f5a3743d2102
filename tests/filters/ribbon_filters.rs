//! Ribbon filters in tables and in a store: written where asked, read by every build that
//! reads Bloom filters beside them, damage refused by name.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomkv::entry::Entry;
use bloomkv::filter::{ribbon_rate_for_bits_per_key, KeyHash};
use bloomkv::metrics::ReadCounters;
use bloomkv::sstable::{FilterPolicy, Table, TableOptions};
use bloomkv::{Db, Error, FilterKind, Options};

fn ribbon_table_options() -> TableOptions {
    TableOptions {
        filter_policy: FilterPolicy::FalsePositiveRate(0.01),
        ribbon_filter: true,
        ..TableOptions::default()
    }
}

fn entries(n: u64) -> Vec<Entry> {
    (0..n)
        .map(|i| Entry::value(common::key(2 * i), 1, common::value(i, 0)))
        .collect()
}

/// The share of `probes` absent keys the table's filter lets through.
fn measured_rate(table: &Table, probes: u64) -> f64 {
    let passed = (0..probes)
        .map(|i| common::key(2 * i + 1))
        .filter(|k| table.may_contain(k, &KeyHash::of(k)))
        .count();
    passed as f64 / probes as f64
}

#[test]
fn a_table_asked_for_a_ribbon_filter_spends_a_bloom_filters_memory_at_a_lower_rate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let entries = entries(20_000);
    common::build_table(&path, ribbon_table_options(), &entries);
    let table = common::open_table(&path);
    let props = table.properties();
    assert_eq!(props.filter_kind, Some(FilterKind::Ribbon));
    assert_eq!(table.filter_kind(), Some(FilterKind::Ribbon));
    // The properties keep the Bloom parameters the policy gave; the filter spends their
    // memory (10 bits per key, a few bytes of header) at the rate they buy in Ribbon.
    let (bits, _, predicted) = props.filter.unwrap();
    assert_eq!(bits, 10);
    let written_bits = props.filter_size_bytes as f64 * 8.0 / entries.len() as f64;
    assert!((written_bits - 10.0).abs() < 0.2, "{written_bits}");
    let expected = ribbon_rate_for_bits_per_key(10.0).unwrap();
    assert!((predicted / expected - 1.0).abs() < 0.02, "{predicted}");
    for e in &entries {
        let found = table.get_at(&e.key, 1, &KeyHash::of(&e.key)).unwrap();
        assert_eq!(found.unwrap().value, e.value);
    }
    let measured = measured_rate(&table, 400_000);
    assert!(
        (measured / predicted - 1.0).abs() < 0.2,
        "measured {measured}, predicted {predicted}"
    );
}

#[test]
fn a_tiny_table_keeps_a_bloom_filter() {
    let dir = tempfile::tempdir().unwrap();
    for (n, kind) in [
        (0, FilterKind::Bloom),
        (100, FilterKind::Bloom),
        (128, FilterKind::Ribbon),
    ] {
        let path = dir.path().join(format!("{n}.sst"));
        let entries = entries(n);
        common::build_table(&path, ribbon_table_options(), &entries);
        let table = common::open_table(&path);
        assert_eq!(table.properties().filter_kind, Some(kind), "{n} keys");
        for e in &entries {
            assert!(table
                .get_at(&e.key, 1, &KeyHash::of(&e.key))
                .unwrap()
                .is_some());
        }
    }
}

/// Changes byte `at` of the file's block that starts at `block` (`len` bytes of contents),
/// and writes the block trailer's checksum again, so that only the filter's own checks can
/// find the change; with `resign`, the filter's own checksum (its last four bytes) too, so
/// that only its header's checks can.
fn damage_under_a_valid_trailer(path: &Path, block: u64, len: u64, at: u64, resign: bool) {
    let mut file = std::fs::read(path).unwrap();
    let (block, len) = (block as usize, len as usize);
    let type_byte = file[block + len];
    let stored = u32::from_le_bytes(file[block + len + 1..block + len + 5].try_into().unwrap());
    let crc = |f: &[u8]| {
        let mut h = crc32fast::Hasher::new();
        h.update(&f[block..block + len]);
        h.update(&[type_byte]);
        h.finalize()
    };
    assert_eq!(crc(&file), stored, "the trailer is as documented");
    file[block + at as usize] ^= 0x04;
    if resign {
        let own = crc32fast::hash(&file[block..block + len - 4]);
        file[block + len - 4..block + len].copy_from_slice(&own.to_le_bytes());
    }
    let again = crc(&file);
    file[block + len + 1..block + len + 5].copy_from_slice(&again.to_le_bytes());
    std::fs::write(path, file).unwrap();
}

#[test]
fn a_damaged_ribbon_filter_is_corruption_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    common::build_table(&path, ribbon_table_options(), &entries(5_000));
    let props = common::open_table(&path).properties().clone();
    // The filter block follows the data blocks.
    let (filter_at, filter_len) = (props.data_size, props.filter_size_bytes - 5);
    // A header field (the result bits, its checksum made good: the header's own checks
    // find it), then a word of the solution (the filter's checksum finds it).
    for (at, resign) in [(8, true), (16, true), (100, false)] {
        let damaged = dir.path().join(format!("damaged-{at}.sst"));
        std::fs::copy(&path, &damaged).unwrap();
        damage_under_a_valid_trailer(&damaged, filter_at, filter_len, at, resign);
        match Table::open(common::os_fs(), &damaged, Arc::new(ReadCounters::new())) {
            Err(Error::Corruption {
                file,
                offset,
                reason,
            }) => {
                assert_eq!(file, damaged);
                assert_eq!(offset, Some(filter_at));
                assert_eq!(reason.contains("checksum"), !resign, "byte {at}: {reason}");
            }
            other => panic!("byte {at}: {other:?}"),
        }
    }
}

/// Writes keys `from..to` (even indexes), with values of round `round`, into the model too.
fn write(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, from: u64, to: u64, round: u64) {
    for i in from..to {
        let (key, value) = (common::key(2 * i), common::value(i, round));
        db.put(&key, &value).unwrap();
        model.insert(key, value);
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
}

fn assert_agrees(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, keys: u64) {
    for i in 0..2 * keys {
        let key = common::key(i);
        assert_eq!(db.get(&key).unwrap(), model.get(&key).cloned(), "key {i}");
    }
    let scanned: Vec<_> = db.iter().map(|e| e.unwrap()).collect();
    let expected: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(scanned, expected);
}

#[test]
fn a_store_mixing_filter_kinds_answers_as_a_model_across_reopens() {
    const KEYS: u64 = 6_000;
    let dir = tempfile::tempdir().unwrap();
    let base = || common::small_tree_options().compact_level0_at_rest(None);
    let stages: [Options; 3] = [
        base().ribbon_filters_from_level(u32::MAX),
        base()
            .ribbon_filters_from_level(u32::MAX)
            .cache_local_filters(true),
        base().ribbon_filters_from_level(2),
    ];
    let mut model = BTreeMap::new();
    for (round, options) in stages.into_iter().enumerate() {
        let round = round as u64;
        let db = Db::open(dir.path(), options).unwrap();
        assert_agrees(&db, &model, KEYS);
        // Each stage writes a third of the keys anew and overwrites a sixth of another's.
        write(
            &db,
            &mut model,
            round * KEYS / 3,
            (round + 1) * KEYS / 3,
            round,
        );
        write(
            &db,
            &mut model,
            (round * KEYS / 3 + KEYS / 2) % KEYS,
            (round * KEYS / 3 + KEYS / 2) % KEYS + KEYS / 6,
            round + 10,
        );
        assert_agrees(&db, &model, KEYS);
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), base()).unwrap();
    let kinds: std::collections::HashSet<_> = db
        .stats()
        .tables
        .iter()
        .filter_map(|t| t.filter_kind)
        .collect();
    assert!(kinds.len() >= 2, "{kinds:?}");
    assert!(kinds.contains(&FilterKind::Ribbon), "{kinds:?}");
    assert_agrees(&db, &model, KEYS);
    assert!(db.check().is_clean());
}

#[test]
fn levels_report_their_filters_kind_bits_and_rates() {
    let dir = tempfile::tempdir().unwrap();
    let options = (common::small_tree_options())
        .filter_policy(FilterPolicy::FalsePositiveRate(0.01))
        .table_size(64 << 10)
        .no_filter_memory_limit();
    let db = Db::open(dir.path(), options).unwrap();
    // Scattered keys: ascending ones would move down from level 0 unrewritten.
    for i in 0..20_000u64 {
        let at = i * 7919 % 20_000;
        db.put(common::key(2 * at), common::value(at, 0)).unwrap();
    }
    db.compact().unwrap();
    for i in 0..20_000u64 {
        assert_eq!(db.get(common::key(2 * i + 1)).unwrap(), None);
    }
    let stats = db.stats();
    let deepest = stats.levels.iter().rposition(|l| l.tables > 0).unwrap();
    assert!(deepest > 0);
    let level = &stats.levels[deepest];
    assert_eq!(level.filter_kind, Some(FilterKind::Ribbon), "{level:?}");
    let bits = level.filter_bits_per_key.unwrap();
    assert!((9.5..10.5).contains(&bits), "{bits}");
    let predicted = level.predicted_false_positive_rate.unwrap();
    let expected = ribbon_rate_for_bits_per_key(10.0).unwrap();
    assert!((predicted / expected - 1.0).abs() < 0.05, "{predicted}");
    // 20,000 absent keys against a rate of 0.2%: some tens of false positives.
    let measured = level.measured_false_positive_rate().unwrap();
    assert!(measured < 3.0 * predicted, "{measured} against {predicted}");
}

#[test]
fn partitions_of_a_ribbon_table_are_ribbon_filters_when_each_is_large_enough() {
    let dir = tempfile::tempdir().unwrap();
    // 10 bits per key in partitions of 512 bytes: runs of 409 keys.
    let options = TableOptions {
        filter_partition_size: 512,
        ..ribbon_table_options()
    };
    let path = dir.path().join("t.sst");
    let entries = entries(10_000);
    common::build_table(&path, options, &entries);
    let table = common::open_table(&path);
    assert!(table.is_partitioned());
    assert!(table.filter_units() > 20, "{}", table.filter_units());
    assert_eq!(table.filter_kind(), Some(FilterKind::Ribbon));
    for e in &entries {
        let found = table.get_at(&e.key, 1, &KeyHash::of(&e.key)).unwrap();
        assert_eq!(found.unwrap().value, e.value);
    }
    let predicted = table.predicted_filter_rate().unwrap();
    let expected = ribbon_rate_for_bits_per_key(10.0).unwrap();
    assert!((predicted / expected - 1.0).abs() < 0.1, "{predicted}");
    // Absent keys within the table's range (past its last key no partition is asked).
    let within: Vec<Vec<u8>> = (0..10_000u64)
        .flat_map(|i| {
            (0..40).map(move |j| [common::key(2 * i), format!("~{j}").into_bytes()].concat())
        })
        .collect();
    let passed = (within.iter())
        .filter(|k| table.may_contain(k, &KeyHash::of(k)))
        .count();
    let measured = passed as f64 / within.len() as f64;
    assert!(
        (measured / predicted - 1.0).abs() < 0.25,
        "measured {measured}, predicted {predicted}"
    );
    bloomkv::sstable::verify_table(common::os_fs(), &path).unwrap();

    // Runs of 51 keys (64-byte partitions) are too small for Ribbon filters: all Bloom.
    let small = TableOptions {
        filter_partition_size: 64,
        ..ribbon_table_options()
    };
    let path = dir.path().join("small.sst");
    common::build_table(&path, small, &entries);
    let table = common::open_table(&path);
    assert!(table.is_partitioned());
    assert_eq!(table.filter_kind(), Some(FilterKind::Bloom));
    for e in entries.iter().step_by(7) {
        assert!(table
            .get_at(&e.key, 1, &KeyHash::of(&e.key))
            .unwrap()
            .is_some());
    }
}
