//! Prefix filters: tables carry a filter over their keys' prefixes, scans over one prefix pass
//! by the tables it rules out, and a store opened with another extractor ignores them.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bloomkv::filter::FilterParams;
use bloomkv::{Db, Error, ExtractPrefix, Options, PrefixExtractor, Stats};

/// Tenants `t000:` to `t039:` in a store cutting prefixes at the colon.
fn tenant_key(tenant: u64, id: u64) -> Vec<u8> {
    format!("t{tenant:03}:{id:06}").into_bytes()
}

fn options(extractor: Option<PrefixExtractor>) -> Options {
    let mut options = common::small_tree_options();
    options.prefix_extractor = extractor;
    options
}

fn delimited() -> Option<PrefixExtractor> {
    Some(PrefixExtractor::Delimited(b':'))
}

/// Writes, overwrites and deletes keys of every fourth tenant among 0..40 with flushes
/// between rounds, so the keys spread over level 0 and deeper levels; returns the model.
fn fill(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    let mut state = 7u64;
    for round in 0..6u64 {
        for _ in 0..1500 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let tenant = (state >> 40) % 10 * 4;
            let id = (state >> 20) % 1000;
            let key = tenant_key(tenant, id);
            if (state >> 8).is_multiple_of(7) {
                db.delete(&key).unwrap();
                model.remove(&key);
            } else {
                let value = format!("v{round}-{id}").into_bytes();
                db.put(&key, &value).unwrap();
                model.insert(key, value);
            }
        }
        db.flush().unwrap();
    }
    db.wait_for_background_work().unwrap();
    model
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn scan(db: &Db, prefix: &[u8]) -> Pairs {
    db.prefix(prefix).map(|r| r.unwrap()).collect()
}

fn scan_back(db: &Db, prefix: &[u8]) -> Pairs {
    let mut pairs: Pairs = db.prefix(prefix).rev().map(|r| r.unwrap()).collect();
    pairs.reverse();
    pairs
}

fn model_scan(model: &BTreeMap<Vec<u8>, Vec<u8>>, prefix: &[u8]) -> Pairs {
    (model.iter())
        .filter(|(k, _)| k.starts_with(prefix))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Scans over present and absent tenants, and over longer prefixes within them, forwards and
/// backwards, by prefix and by range and by cursor, all agree with the model.
fn assert_scans_agree(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for tenant in 0..40 {
        for prefix in [
            format!("t{tenant:03}:"),
            format!("t{tenant:03}:0001"),
            format!("t{tenant:03}"),
        ] {
            let prefix = prefix.as_bytes();
            let expected = model_scan(model, prefix);
            assert_eq!(scan(db, prefix), expected, "prefix {prefix:?}");
            assert_eq!(
                scan_back(db, prefix),
                expected,
                "prefix {prefix:?} backwards"
            );
        }
        let (from, to) = (tenant_key(tenant, 50), tenant_key(tenant, 150));
        let ranged: Pairs = db
            .range(from.clone()..to.clone())
            .map(|r| r.unwrap())
            .collect();
        let expected: Pairs = (model.range(from.clone()..to.clone()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(ranged, expected, "tenant {tenant} from 50 to 150");
        let mut cursor = db.cursor_over(from..to);
        cursor.seek_to_last().unwrap();
        assert_eq!(
            cursor.key().map(<[u8]>::to_vec),
            expected.last().map(|(k, _)| k.clone())
        );
    }
}

fn level_prefix_counts(stats: &Stats) -> (u64, u64, u64) {
    stats.levels.iter().fold((0, 0, 0), |(p, n, f), l| {
        (
            p + l.prefix_filter_probes,
            n + l.prefix_filter_negatives,
            f + l.prefix_filter_false_positives,
        )
    })
}

#[test]
fn prefix_scans_agree_with_a_model_and_pass_by_the_tables_filters_rule_out() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(delimited())).unwrap();
    let model = fill(&db);
    let stats = db.stats();
    assert!(stats.tables.len() >= 4, "{} tables", stats.tables.len());
    assert!(stats.tables.iter().all(|t| t.prefix_filter_bytes > 0));
    assert!(stats.prefix_filter_memory_bytes > 0);
    assert_eq!(stats.tables_prefix_filter_ignored, 0);
    assert_eq!(stats.prefix_extractor.as_deref(), Some("delimited:0x3a"));

    assert_scans_agree(&db, &model);

    // Absent tenants between present ones: every table whose range covers one is asked,
    // and nearly all rule it out; no block is read past a filter's "no".
    let before = db.stats();
    let mut covering = 0;
    for tenant in (0..40u64).filter(|t| t % 4 != 0) {
        let prefix = format!("t{tenant:03}:");
        let prefix = prefix.as_bytes();
        covering += (before.tables.iter())
            .filter(|t| t.smallest_key.as_slice() < prefix)
            .filter(|t| t.largest_key.as_slice() > prefix)
            .count() as u64;
        assert!(scan(&db, prefix).is_empty());
    }
    let after = db.stats();
    let (p0, n0, f0) = level_prefix_counts(&before);
    let (p1, n1, f1) = level_prefix_counts(&after);
    assert!(
        covering >= 30,
        "{covering} tables cover the 30 absent tenants"
    );
    assert_eq!(p1 - p0, covering);
    assert_eq!(
        (p1 - p0) - (n1 - n0),
        f1 - f0,
        "every admission found nothing"
    );
    assert!(
        (n1 - n0) * 10 >= covering * 9,
        "{} of {covering} ruled out",
        n1 - n0
    );
    assert!(after.scan_block_reads - before.scan_block_reads <= f1 - f0);

    // A present tenant: the tables holding it are read, and no filter rules them out.
    let before = db.stats();
    assert_eq!(scan(&db, b"t012:"), model_scan(&model, b"t012:"));
    let holding = (before.tables.iter())
        .filter(|t| t.smallest_key.as_slice() <= b"t012:~".as_slice())
        .filter(|t| t.largest_key.as_slice() >= b"t012:".as_slice())
        .count() as u64;
    let (p1, n1, _) = level_prefix_counts(&before);
    let (p2, n2, _) = level_prefix_counts(&db.stats());
    assert_eq!(p2 - p1, holding);
    assert!(n2 - n1 < holding, "some table holds t012:");
}

#[test]
fn may_contain_prefix_answers_from_memtables_and_filters() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(delimited())).unwrap();
    let model = fill(&db);
    for tenant in 0..40u64 {
        let prefix = format!("t{tenant:03}:");
        let present = model.keys().any(|k| k.starts_with(prefix.as_bytes()));
        if present {
            assert!(db.may_contain_prefix(&prefix), "{prefix}");
        }
    }
    let absent = (0..40u64)
        .filter(|t| t % 4 != 0)
        .filter(|t| !db.may_contain_prefix(format!("t{t:03}:")))
        .count();
    assert!(absent >= 28, "{absent} of 30 absent tenants ruled out");
    // In the memtable only: found without a filter.
    db.put("t013:000001", "new").unwrap();
    assert!(db.may_contain_prefix("t013:"));
    // Past every key: no table's range meets it.
    assert!(!db.may_contain_prefix("u"));
}

/// Puts and deletes keys of every fourth tenant into the memtable, unflushed, and updates the
/// model.
fn write_to_memtable(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for i in 0..400u64 {
        let key = tenant_key(i % 10 * 4, 2000 + i % 97);
        if i % 11 == 0 {
            db.delete(&key).unwrap();
            model.remove(&key);
        } else {
            let value = format!("m{i}").into_bytes();
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
    }
}

fn memtable_prefix_counts(stats: &Stats) -> (u64, u64) {
    (
        stats.memtable_prefix_filter_probes,
        stats.memtable_prefix_filter_negatives,
    )
}

#[test]
fn scans_pass_by_a_memtable_whose_prefix_filter_rules_the_prefix_out() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(delimited()).memtable_size(1 << 20)).unwrap();
    let mut model = fill(&db);
    write_to_memtable(&db, &mut model);
    let stats = db.stats();
    assert!(stats.memtable_bytes > 0);
    assert_eq!(stats.immutable_memtables, 0);

    // Every kind of scan reads the memtable's entries within its prefix.
    assert_scans_agree(&db, &model);

    // Absent tenants: the memtable's filter is asked once a scan and rules each out.
    let before = memtable_prefix_counts(&db.stats());
    for tenant in (0..40u64).filter(|t| t % 4 != 0) {
        assert!(scan(&db, format!("t{tenant:03}:").as_bytes()).is_empty());
        assert!(!db.may_contain_prefix(format!("t{tenant:03}:")), "{tenant}");
    }
    let after = memtable_prefix_counts(&db.stats());
    assert_eq!(after.0 - before.0, 30);
    assert!(after.1 - before.1 >= 29, "{:?} to {after:?}", before);

    // A tenant whose keys are in the memtable alone: the filter lets it through.
    db.put("t013:000001", "new").unwrap();
    model.insert(b"t013:000001".to_vec(), b"new".to_vec());
    let before = memtable_prefix_counts(&db.stats());
    assert_eq!(scan(&db, b"t013:"), model_scan(&model, b"t013:"));
    assert_eq!(scan_back(&db, b"t013:"), model_scan(&model, b"t013:"));
    assert!(db.may_contain_prefix("t013:"));
    let after = memtable_prefix_counts(&db.stats());
    assert_eq!(after, (before.0 + 2, before.1));
}

#[test]
fn without_an_extractor_memtables_are_walked_and_no_filter_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(None).memtable_size(1 << 20)).unwrap();
    let mut model = fill(&db);
    write_to_memtable(&db, &mut model);
    assert_scans_agree(&db, &model);
    db.put("t013:000001", "new").unwrap();
    assert!(db.may_contain_prefix("t013:"));
    assert_eq!(memtable_prefix_counts(&db.stats()), (0, 0));
}

#[test]
fn a_store_reopened_with_another_extractor_ignores_the_old_prefix_filters() {
    let dir = tempfile::tempdir().unwrap();
    let model = {
        let db = Db::open(dir.path(), options(delimited())).unwrap();
        fill(&db)
    };
    // Same results under another fixed length, under none, and under a custom function of
    // the same cut but another name; the old filters are named and ignored.
    struct UpToColon;
    impl ExtractPrefix for UpToColon {
        fn name(&self) -> &str {
            "up-to-colon.v1"
        }
        fn prefix_len(&self, key: &[u8]) -> Option<usize> {
            key.iter().position(|&b| b == b':').map(|at| at + 1)
        }
    }
    let others = [
        Some(PrefixExtractor::Fixed(5)),
        None,
        Some(PrefixExtractor::Custom(Arc::new(UpToColon))),
    ];
    for extractor in others {
        let db = Db::open(dir.path(), options(extractor.clone())).unwrap();
        let stats = db.stats();
        assert_eq!(stats.tables_prefix_filter_ignored, stats.tables.len());
        assert!(stats
            .tables
            .iter()
            .all(|t| t.prefix_filter_predicted_rate.is_none()));
        assert_scans_agree(&db, &model);
        assert_eq!(level_prefix_counts(&db.stats()), (0, 0, 0), "{extractor:?}");
        drop(db);
    }
    let db = Db::open(dir.path(), options(delimited())).unwrap();
    assert_eq!(db.stats().tables_prefix_filter_ignored, 0);
    assert_scans_agree(&db, &model);
}

#[test]
fn compaction_rewrites_tables_under_the_stores_extractor() {
    let dir = tempfile::tempdir().unwrap();
    let model = {
        let db = Db::open(dir.path(), options(delimited())).unwrap();
        fill(&db)
    };
    let db = Db::open(dir.path(), options(Some(PrefixExtractor::Fixed(4)))).unwrap();
    assert!(db.stats().tables_prefix_filter_ignored > 0);
    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    assert_eq!(stats.tables_prefix_filter_ignored, 0);
    assert!(stats.tables.iter().all(|t| t.prefix_filter_bytes > 0));
    assert_scans_agree(&db, &model);
    let before = level_prefix_counts(&db.stats());
    assert!(scan(&db, b"t013").is_empty());
    let after = level_prefix_counts(&db.stats());
    assert!(after.0 > before.0, "the fixed-length filters were asked");
}

#[test]
fn without_whole_key_filters_gets_ask_the_prefix_filter() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(delimited()).whole_key_filtering(false)).unwrap();
    let model = fill(&db);
    let stats = db.stats();
    assert!(stats.tables.iter().all(|t| t.bits_per_key.is_none()));
    assert!(stats.tables.iter().all(|t| t.prefix_filter_bytes > 0));
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    // Absent tenants are ruled out by the prefix filter: almost no data block read, where
    // each get would read one block a table holding the tenant's range.
    let before = db.stats().data_block_reads;
    let mut gets = 0;
    for tenant in (0..40u64).filter(|t| t % 4 != 0) {
        for id in 0..10 {
            assert_eq!(db.get(tenant_key(tenant, id)).unwrap(), None);
            gets += 1;
        }
    }
    let read = db.stats().data_block_reads - before;
    assert!(read * 20 <= gets, "{read} blocks for {gets} gets");
    // Absent keys of present tenants pass the prefix filter and read their blocks.
    let before = db.stats().data_block_reads;
    assert_eq!(db.get(tenant_key(0, 999_999)).unwrap(), None);
    assert!(db.stats().data_block_reads > before);
    assert_scans_agree(&db, &model);
}

/// A store in `dir` holding one table of 50 keys of five tenants; returns the table's path.
fn five_tenant_table(dir: &Path, options: Options) -> std::path::PathBuf {
    let db = Db::open(dir, options).unwrap();
    for i in 0..50 {
        db.put(tenant_key(i % 5, i), "v").unwrap();
    }
    db.flush().unwrap();
    drop(db);
    first_table(dir)
}

/// The table file a store wrote first.
fn first_table(dir: &Path) -> std::path::PathBuf {
    let mut tables: Vec<_> = (std::fs::read_dir(dir).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    tables.sort();
    tables.remove(0)
}

#[test]
fn tables_with_a_prefix_filter_are_format_version_5_and_name_their_extractor() {
    let dir = tempfile::tempdir().unwrap();
    let policy = bloomkv::FilterPolicy::FalsePositiveRate(0.01);
    let path = five_tenant_table(dir.path(), options(delimited()).filter_policy(policy));
    let table = common::open_table(&path);
    let props = table.properties();
    assert_eq!(props.format_version, 5);
    let prefix = props.prefix_filter.as_ref().expect("a prefix filter");
    assert_eq!(prefix.extractor, "delimited:0x3a");
    assert_eq!(prefix.prefixes, 5);
    assert!(!prefix.two_level_index);
    // docs/format.md's worked example: 5 prefixes at 10 bits fill the 64-bit minimum.
    assert_eq!(prefix.handle.size, 36 + 8);
    // The block sits between the filter and the properties, its trailer naming kind 6.
    let bytes = std::fs::read(&path).unwrap();
    let end = (prefix.handle.offset + prefix.handle.size) as usize;
    assert_eq!(bytes[end] & 0x0f, 6);
    assert_eq!(&bytes[prefix.handle.offset as usize..][..4], b"BKBF");
}

#[test]
fn a_damaged_prefix_filter_is_reported_with_its_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = five_tenant_table(dir.path(), options(delimited()));
    let offset = {
        let table = common::open_table(&path);
        table
            .properties()
            .prefix_filter
            .as_ref()
            .unwrap()
            .handle
            .offset
    };
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[offset as usize + 40] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let err = Db::open(dir.path(), options(delimited())).unwrap_err();
    match err {
        Error::Corruption {
            file,
            offset: Some(o),
            ..
        } => {
            assert_eq!(file, path);
            assert_eq!(o, offset);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn a_bad_extractor_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let err = Db::open(dir.path(), options(Some(PrefixExtractor::Fixed(0)))).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
}

#[test]
fn verification_finds_a_prefix_missing_from_the_prefix_filter() {
    let dir = tempfile::tempdir().unwrap();
    let path = five_tenant_table(dir.path(), options(delimited()));
    let props = bloomkv::sstable::verify_table(common::os_fs(), &path).unwrap();
    let handle = props.prefix_filter.unwrap().handle;
    // Clear the filter's bits and mend its checksums: a filter that reads back but lies.
    let mut bytes = std::fs::read(&path).unwrap();
    let (start, len) = (handle.offset as usize, handle.size as usize);
    let contents = &mut bytes[start..start + len];
    contents[32..len - 4].fill(0);
    let crc = crc32fast::hash(&contents[..len - 4]);
    contents[len - 4..].copy_from_slice(&crc.to_le_bytes());
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&bytes[start..start + len]);
    hasher.update(&[bytes[start + len]]);
    let block_crc = hasher.finalize();
    bytes[start + len + 1..start + len + 5].copy_from_slice(&block_crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    match bloomkv::sstable::verify_table(common::os_fs(), &path).unwrap_err() {
        Error::Corruption {
            file,
            offset,
            reason,
        } => {
            assert_eq!(file, path);
            assert_eq!(offset, Some(handle.offset));
            assert!(reason.contains("prefix filter"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

/// A user function that keeps the rule only for keys of eight bytes and more: shorter byte
/// strings have no prefix, whatever length it says.
struct FirstEight;

impl ExtractPrefix for FirstEight {
    fn name(&self) -> &str {
        "first-eight.v1"
    }
    fn prefix_len(&self, _: &[u8]) -> Option<usize> {
        Some(8)
    }
}

#[test]
fn a_scan_shorter_than_a_user_functions_prefix_asks_no_filter() {
    let dir = tempfile::tempdir().unwrap();
    let extractor = Some(PrefixExtractor::Custom(Arc::new(FirstEight)));
    let db = Db::open(dir.path(), options(extractor)).unwrap();
    let model = fill(&db);
    let all: Pairs = db.iter().map(|r| r.unwrap()).collect();
    assert_eq!(all.len(), model.len());
    assert_eq!(scan(&db, b"t0"), model_scan(&model, b"t0"));
    assert_eq!(scan(&db, b""), model_scan(&model, b""));
    let mut cursor = db.cursor();
    cursor.seek_to_first().unwrap();
    assert_eq!(cursor.key(), model.keys().next().map(Vec::as_slice));
    assert!(db.may_contain_prefix("t0"));
    assert_scans_agree(&db, &model);
}

#[test]
fn a_properties_handle_past_the_index_is_corruption_not_a_huge_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = five_tenant_table(dir.path(), options(delimited()));
    let mut bytes = std::fs::read(&path).unwrap();
    let footer = bytes.len() - 64;
    // The properties' size made enormous, the footer's checksum mended.
    bytes[footer + 40..footer + 48].copy_from_slice(&u64::MAX.to_le_bytes());
    let crc = crc32fast::hash(&bytes[footer..footer + 52]);
    bytes[footer + 52..footer + 56].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    match Db::open(dir.path(), options(delimited())).unwrap_err() {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(file, path);
            assert_eq!(offset, Some(footer as u64));
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn verification_checks_a_user_functions_prefix_filter_block_too() {
    let dir = tempfile::tempdir().unwrap();
    let extractor = PrefixExtractor::Custom(Arc::new(FirstEight));
    let path = five_tenant_table(dir.path(), options(Some(extractor)));
    let props = bloomkv::sstable::verify_table(common::os_fs(), &path).unwrap();
    let handle = props.prefix_filter.unwrap().handle;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[handle.offset as usize + 36] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    match bloomkv::sstable::verify_table(common::os_fs(), &path).unwrap_err() {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(file, path);
            assert_eq!(offset, Some(handle.offset));
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn under_a_binding_limit_a_prefix_filter_takes_its_levels_share_not_the_wide_filter() {
    let unlimited = {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(delimited())).unwrap();
        fill(&db);
        db.stats().filter_memory_bytes
    };
    let dir = tempfile::tempdir().unwrap();
    // The limit stays where it is set: no memory lent or moved to the filters by a refit,
    // which could lift it above what the filters need before the tables are written.
    let limited = options(delimited())
        .filter_memory_limit(unlimited / 3)
        .memory_follows_reads(false);
    let db = Db::open(dir.path(), limited).unwrap();
    let model = fill(&db);
    let stats = db.stats();
    // A table written before the limit bound has its filter's own width; every other was
    // written four times its share's width with the share's hashes, and its prefix filter
    // has the share's rate. How wide depends on how many keys the tree held when it was
    // written, which the interleaving of flushes and compactions moves: a share of 2 or 3
    // bits a key is written at 8 or 12.
    let rate = |bits: u32, hashes: u32| {
        FilterParams::new(bits, hashes).map(|p| p.predicted_false_positive_rate())
    };
    let mut took_the_share = 0;
    for t in stats.tables.iter().filter(|t| t.bits_per_key.is_some()) {
        let (bits, hashes) = (t.bits_per_key.unwrap(), t.hashes.unwrap());
        let prefix_rate = t.prefix_filter_predicted_rate.unwrap();
        let own = rate(bits, hashes).ok();
        let share = (bits % 4 == 0)
            .then(|| rate(bits / 4, hashes).ok())
            .flatten();
        assert!(
            Some(prefix_rate) == own || Some(prefix_rate) == share,
            "table {}: prefix rate {prefix_rate}, filter {bits} bits, {hashes} hashes",
            t.number
        );
        if Some(prefix_rate) == share && share != own {
            took_the_share += 1;
        }
    }
    assert!(
        took_the_share > 0,
        "some table written wide for the limit: {stats:?}"
    );
    assert_scans_agree(&db, &model);
}
