//! Two-level indexes (format version 4): a table whose index outgrows one partition is
//! written as index partitions under a top-level index, and read back through the index
//! cache. Partition boundaries (keys equal to a partition's last separator, versions of one
//! key running across partitions, the first and last partitions, a table of one key), a model
//! test whose index cache holds one partition, damage to partitions and to the top level, and
//! a store mixing tables with whole indexes and partitioned ones.
//!
//! The footer is read here with a small decoder of our own, so that the tests check the bytes
//! on disk: version 4 names a top-level block of kind 5 after the index partitions (kind 4).

use crate::common;

use common::{build_table, open_table, os_fs};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv::entry::Entry;
use bloomkv::filter::KeyHash;
use bloomkv::metrics::ReadCounters;
use bloomkv::sstable::{
    verify_table, Table, TableOptions, FOOTER_LEN, FORMAT_VERSION, TRAILER_LEN,
};
use bloomkv::{Db, Error, Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// The footer's (index offset, index size, properties end, version).
fn footer(file: &[u8]) -> (u64, u64, u64, u32) {
    let f = &file[file.len() - FOOTER_LEN..];
    let props_end = u64_at(f, 32) + u64_at(f, 40) + TRAILER_LEN as u64;
    let version = u32::from_le_bytes(f[48..52].try_into().unwrap());
    (u64_at(f, 0), u64_at(f, 8), props_end, version)
}

fn version_of(path: &Path) -> u32 {
    footer(&std::fs::read(path).unwrap()).3
}

/// Small blocks and small partitions: a few hundred entries make a dozen partitions.
fn small_partitions() -> TableOptions {
    TableOptions {
        block_size: 128,
        index_partition_size: 48,
        ..TableOptions::default()
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// 400 keys, of which key 200 has 60 versions of 50 bytes: they span several data blocks,
/// and so several partitions.
fn entries() -> Vec<Entry> {
    let mut out = Vec::new();
    for i in 0..400 {
        if i == 200 {
            for seq in (1..=60u64).rev() {
                out.push(Entry::value(key(i), seq, vec![b'a' + (seq % 26) as u8; 50]));
            }
        } else {
            out.push(Entry::value(key(i), 100, format!("value-{i}")));
        }
    }
    out
}

#[test]
fn every_key_and_version_is_found_across_partition_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let entries = entries();
    build_table(&path, small_partitions(), &entries);
    // Version 4: a two-level index, and no prefix filter (which would make it 5).
    assert_eq!(version_of(&path), 4);
    assert_eq!(FORMAT_VERSION, 5);
    let props = verify_table(os_fs(), &path).unwrap();
    assert_eq!(props.format_version, 4);
    assert_eq!(props.entries, entries.len() as u64);

    let table = open_table(&path);
    assert!(table.data_blocks() > 40, "{} blocks", table.data_blocks());
    // The resident top level is far smaller than the whole index.
    let whole = dir.path().join("whole.sst");
    let one_block = TableOptions {
        index_partition_size: 0,
        ..small_partitions()
    };
    build_table(&whole, one_block, &entries);
    assert_eq!(version_of(&whole), 3);
    assert_eq!(open_table(&whole).data_blocks(), table.data_blocks());

    // Every key, at every version: each partition's first and last blocks, and each key that
    // is a partition's last separator (short keys make most separators whole keys).
    for e in &entries {
        let hash = KeyHash::of(&e.key);
        let got = table.get_at(&e.key, e.seq, &hash).unwrap().unwrap();
        assert_eq!((got.seq, &got.value), (e.seq, &e.value), "{:?}", e.key);
        let block = table.block_for(&e.key, e.seq).unwrap().unwrap();
        assert!(block < table.data_blocks());
    }
    // The newest version, and an older snapshot between versions.
    let hot = key(200);
    let hash = KeyHash::of(&hot);
    assert_eq!(table.get(&hot, &hash).unwrap().unwrap().seq, 60);
    assert!(table.get_at(&hot, 0, &hash).unwrap().is_none());
    // Absent keys between, before and after.
    for absent in [&b"key00010a"[..], b"a", b"", b"key00399\x00", b"zzz"] {
        assert!(table.get(absent, &KeyHash::of(absent)).unwrap().is_none());
    }
    assert_eq!(table.block_for(b"zzz", u64::MAX).unwrap(), None);

    // A seek at an older snapshot of the key whose versions run across partitions starts at
    // that version.
    for seq in 1..=60 {
        let mut it = table.iter();
        it.seek_entry(&hot, seq);
        let first = it.next().unwrap().unwrap();
        assert_eq!((first.key.as_slice(), first.seq), (hot.as_slice(), seq));
    }
    // A scan reads every entry in order, and a seek to each key starts there.
    let scanned: Vec<Entry> = table.iter().map(|e| e.unwrap()).collect();
    assert!(scanned == entries);
    for (i, e) in entries.iter().enumerate().step_by(7) {
        let mut it = table.iter_from(&e.key);
        let first = it.next().unwrap().unwrap();
        let want = entries.iter().position(|x| x.key == e.key).unwrap();
        assert_eq!(first, entries[want], "seek to entry {i}");
    }
    assert!(table.iter_from(b"zzz").next().is_none());
}

/// Tables of 1 to 40 data blocks with partitions of about three blocks: one index block while
/// the writer closes at most one partition, with the last block; partitions after that. Every
/// key is found and every table passes a full check.
#[test]
fn every_table_size_around_the_first_partitions_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let options = TableOptions {
        block_size: 64,
        index_partition_size: 24,
        ..TableOptions::default()
    };
    let mut versions = Vec::new();
    for n in 1..=40 {
        // Entries of about 70 bytes: one per data block.
        let entries: Vec<Entry> = (0..n)
            .map(|i| Entry::value(key(i), 1, vec![b'v'; 56]))
            .collect();
        let path = dir.path().join(format!("t{n}.sst"));
        build_table(&path, options, &entries);
        let table = open_table(&path);
        assert_eq!(table.data_blocks(), n, "{n} entries");
        for e in &entries {
            let got = table.get(&e.key, &KeyHash::of(&e.key)).unwrap();
            assert_eq!(got.as_ref(), Some(e), "{n} blocks");
        }
        let scanned: Vec<Entry> = table.iter().map(|e| e.unwrap()).collect();
        assert!(scanned == entries, "{n} blocks");
        verify_table(os_fs(), &path).unwrap();
        versions.push(version_of(&path));
    }
    // Small tables keep one index block, larger ones are partitioned, and once partitioned
    // a table stays so as it grows.
    assert_eq!(versions[0], 3);
    let first_partitioned = versions.iter().position(|&v| v == 4).unwrap();
    assert!(first_partitioned > 1);
    assert!(versions[first_partitioned..].iter().all(|&v| v == 4));
}

/// With the default partitions of 4 KiB, a table of 200,000 random keys keeps a top level of
/// under a twentieth of its whole index in memory (a fiftieth when measured).
#[test]
fn the_top_level_is_a_small_part_of_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(9);
    let mut keys: Vec<Vec<u8>> = (0..200_000)
        .map(|_| rng.gen::<u128>().to_be_bytes().to_vec())
        .collect();
    keys.sort();
    keys.dedup();
    let entries: Vec<Entry> = keys
        .into_iter()
        .map(|k| Entry::value(k, 1, vec![7u8; 100]))
        .collect();
    let (parted, whole) = (dir.path().join("p.sst"), dir.path().join("w.sst"));
    build_table(&parted, TableOptions::default(), &entries);
    let one_block = TableOptions {
        index_partition_size: 0,
        ..TableOptions::default()
    };
    build_table(&whole, one_block, &entries);
    assert_eq!(version_of(&parted), 4);
    let (parted, whole) = (open_table(&parted), open_table(&whole));
    assert!(
        parted.index_memory_bytes() * 20 < whole.index_memory_bytes(),
        "top level {} bytes, whole index {}",
        parted.index_memory_bytes(),
        whole.index_memory_bytes()
    );
}

#[test]
fn a_small_table_keeps_one_index_block() {
    let dir = tempfile::tempdir().unwrap();
    for n in [0usize, 1, 2] {
        let path = dir.path().join(format!("t{n}.sst"));
        let entries: Vec<Entry> = (0..n).map(|i| Entry::value(key(i), 1, "v")).collect();
        build_table(&path, small_partitions(), &entries);
        assert_eq!(version_of(&path), 3, "{n} keys");
        let table = open_table(&path);
        for e in &entries {
            assert!(table.get(&e.key, &KeyHash::of(&e.key)).unwrap().is_some());
        }
        verify_table(os_fs(), &path).unwrap();
    }
}

/// The partitions' handles, read from the top level as `docs/format.md` describes it.
fn partitions(file: &[u8]) -> Vec<(u64, u64)> {
    let (top_offset, top_size, props_end, version) = footer(file);
    assert_eq!(version, 4);
    let top = &file[top_offset as usize..(top_offset + top_size) as usize];
    assert_eq!(
        file[(top_offset + top_size) as usize],
        5,
        "top-level kind 5"
    );
    let mut at = 0;
    fn varint(bytes: &[u8], at: &mut usize) -> u64 {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = bytes[*at];
            *at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                break;
            }
        }
        v
    }
    let count = varint(top, &mut at);
    let mut out = Vec::new();
    let mut offset = props_end;
    let mut key_len = 0;
    for _ in 0..count {
        let [shared, unshared, _seq, size, _blocks, _data_bytes] =
            [(); 6].map(|_| varint(top, &mut at));
        assert!(shared <= key_len);
        key_len = shared + unshared;
        out.push((offset, size));
        offset += size + TRAILER_LEN as u64;
        at += unshared as usize;
    }
    assert_eq!(at, top.len(), "nothing follows the last entry");
    assert_eq!(
        offset, top_offset,
        "the partitions end where the top level starts"
    );
    out
}

#[test]
fn partitions_tile_the_file_and_are_index_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    build_table(&path, small_partitions(), &entries());
    let file = std::fs::read(&path).unwrap();
    let parts = partitions(&file);
    assert!(parts.len() >= 5, "{} partitions", parts.len());
    for (offset, size) in parts {
        let kind = file[(offset + size) as usize] & 0x0f;
        assert_eq!(kind, 4, "partition at {offset}: an index block");
    }
}

fn corrupt_byte(path: &Path, at: u64) {
    let mut file = std::fs::read(path).unwrap();
    file[at as usize] ^= 0x40;
    std::fs::write(path, file).unwrap();
}

#[test]
fn a_damaged_partition_is_corruption_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let entries = entries();
    build_table(&path, small_partitions(), &entries);
    let parts = partitions(&std::fs::read(&path).unwrap());
    let (offset, size) = parts[2];
    corrupt_byte(&path, offset + size / 2);

    // The open reads the top level only; the damage shows when a lookup needs the partition.
    let table = open_table(&path);
    let mut errors = 0;
    for e in &entries {
        match table.get_at(&e.key, e.seq, &KeyHash::of(&e.key)) {
            Ok(found) => assert_eq!(found.unwrap().value, e.value),
            Err(Error::Corruption {
                file: p,
                offset: at,
                ..
            }) => {
                assert_eq!(p, path);
                assert_eq!(at, Some(offset));
                errors += 1;
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert!(errors > 0, "no lookup met the damaged partition");
    // A scan stops at it with the same error, and a full check reports it.
    let scan_error = table.iter().find_map(|e| e.err()).unwrap();
    assert!(matches!(scan_error, Error::Corruption { offset: Some(o), .. } if o == offset));
    let check = verify_table(os_fs(), &path).unwrap_err();
    assert!(matches!(check, Error::Corruption { offset: Some(o), .. } if o == offset));
}

#[test]
fn a_damaged_top_level_fails_the_open_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    build_table(&path, small_partitions(), &entries());
    let (top_offset, top_size, _, _) = footer(&std::fs::read(&path).unwrap());
    for at in [top_offset, top_offset + top_size / 2, top_offset + top_size] {
        let copy = dir.path().join(format!("bad-{at}.sst"));
        std::fs::copy(&path, &copy).unwrap();
        corrupt_byte(&copy, at);
        match Table::open(os_fs(), &copy, Arc::new(ReadCounters::new())) {
            Err(Error::Corruption {
                file: p, offset, ..
            }) => {
                assert_eq!(p, copy);
                assert_eq!(offset, Some(top_offset), "byte {at}");
            }
            other => panic!("byte {at}: {other:?}"),
        }
    }
}

/// A partition that decodes but disagrees with the top level: its bytes swapped with
/// another partition's of the same size, checksums intact.
#[test]
fn a_partition_from_elsewhere_is_caught_by_the_top_level() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    build_table(&path, small_partitions(), &entries());
    let mut file = std::fs::read(&path).unwrap();
    let parts = partitions(&file);
    let same_size = (1..parts.len()).find(|&i| parts[i].1 == parts[0].1);
    let other = same_size.expect("this layout has two partitions of one size");
    let len = (parts[0].1 + TRAILER_LEN as u64) as usize;
    let (a, b) = (parts[0].0 as usize, parts[other].0 as usize);
    let first: Vec<u8> = file[a..a + len].to_vec();
    file.copy_within(b..b + len, a);
    file[b..b + len].copy_from_slice(&first);
    std::fs::write(&path, &file).unwrap();
    let table = open_table(&path);
    let e = table.get(&key(0), &KeyHash::of(&key(0))).unwrap_err();
    assert!(
        matches!(e, Error::Corruption { offset: Some(o), .. } if o == parts[0].0),
        "{e}"
    );
}

fn sst_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    files.sort();
    files
}

fn store_options() -> Options {
    let mut options = common::small_tree_options()
        .table_size(64 * 1024)
        .index_partition_size(64);
    options.block_size = 256;
    options
}

/// A value that does not compress, so that tables hold many blocks.
fn random_value(rng: &mut SmallRng, tag: &str) -> Vec<u8> {
    let mut v = tag.as_bytes().to_vec();
    v.extend((0..40).map(|_| rng.gen_range(b'a'..=b'z')));
    v
}

/// Puts keys `keys` with values that do not compress, each `tag` then 40 random letters, into
/// the store and the model.
fn put_random(
    db: &Db,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut SmallRng,
    keys: impl Iterator<Item = usize>,
    tag: &str,
) {
    for i in keys {
        let v = random_value(rng, tag);
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
}

/// Checks every key of `model` and a full scan against the store.
fn assert_matches(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, keys: usize) {
    for i in 0..keys {
        let k = key(i);
        assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "{i}");
    }
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|r| r.unwrap()).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(scanned == want, "scan differs");
}

#[test]
fn a_store_with_an_index_cache_of_one_partition_matches_a_model() {
    let dir = tempfile::tempdir().unwrap();
    // Room for a few partitions of the many: most lookups read the one they need.
    let options = store_options().index_cache_size(800);
    let db = Db::open(dir.path(), options).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = SmallRng::seed_from_u64(7);
    let keys = 3000;
    for round in 0..6 {
        for _ in 0..2000 {
            let i = rng.gen_range(0..keys);
            if rng.gen_bool(0.1) {
                db.delete(key(i)).unwrap();
                model.remove(&key(i));
            } else {
                let v = random_value(&mut rng, &format!("v{round}-{i}-"));
                db.put(key(i), &v).unwrap();
                model.insert(key(i), v);
            }
        }
        db.flush().unwrap();
        if round % 2 == 1 {
            db.compact().unwrap();
        }
        db.wait_for_background_work().unwrap();
        assert_matches(&db, &model, keys);
        let batch: Vec<Vec<u8>> = (0..keys).step_by(3).map(key).collect();
        let got = db.multi_get(&batch).unwrap();
        for (k, v) in batch.iter().zip(got) {
            assert_eq!(v, model.get(k).cloned());
        }
    }
    let stats = db.stats();
    let partitioned = sst_files(dir.path())
        .iter()
        .filter(|p| version_of(p) == 4)
        .count();
    assert!(partitioned > 0, "no table has a two-level index");
    assert!(stats.index_block_reads > 0);
    assert!(stats.index_cache.misses > 0);
    assert!(stats.index_cache.bytes <= stats.index_cache.capacity);
    assert_eq!(stats.index_cache.capacity, 800);
    db.close().unwrap();
}

#[test]
fn whole_and_partitioned_indexes_mix_in_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = BTreeMap::new();
    let mut rng = SmallRng::seed_from_u64(11);
    // First written with whole indexes only (version 3)...
    let db = Db::open(dir.path(), store_options().index_partition_size(0)).unwrap();
    put_random(&db, &mut model, &mut rng, 0..2000, "first-");
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    db.close().unwrap();
    let old: Vec<PathBuf> = sst_files(dir.path());
    assert!(old.iter().all(|p| version_of(p) == 3));

    // ...then opened with partitions: new tables are version 4, old ones still read. Level 0
    // is not compacted until `compact` below, so no old table is rewritten (and no file
    // deleted) while the versions are read.
    let no_level0_compaction = store_options()
        .l0_compaction_trigger(64)
        .l0_write_triggers(64, 64);
    let db = Db::open(dir.path(), no_level0_compaction).unwrap();
    put_random(&db, &mut model, &mut rng, (0..3000).step_by(2), "second-");
    db.flush().unwrap();
    let versions: Vec<u32> = sst_files(dir.path())
        .iter()
        .map(|p| version_of(p))
        .collect();
    assert!(
        versions.contains(&3) && versions.contains(&4),
        "{versions:?}"
    );
    assert_matches(&db, &model, 3000);
    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    assert_matches(&db, &model, 3000);
    for path in sst_files(dir.path()) {
        assert!(!old.contains(&path), "{} survived", path.display());
    }
    let report = db.check();
    assert!(report.problems.is_empty(), "{report:?}");
    db.close().unwrap();
}

/// Index partitions of the store's live tables, read from their files.
fn live_partitions(dir: &Path) -> u64 {
    let files = sst_files(dir).into_iter().filter(|p| version_of(p) == 4);
    files
        .map(|p| partitions(&std::fs::read(p).unwrap()).len() as u64)
        .sum()
}

#[test]
fn the_index_cache_holds_the_partitions_of_live_tables_only() {
    let dir = tempfile::tempdir().unwrap();
    let options = || store_options().index_cache_size(1 << 20);
    let db = Db::open(dir.path(), options()).unwrap();
    let mut rng = SmallRng::seed_from_u64(3);
    for i in 0..3000 {
        db.put(key(i), random_value(&mut rng, "v")).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    // With room for them, every table's partitions are read when the store writes the table,
    // so lookups read none.
    let live = live_partitions(dir.path());
    assert!(live > 0);
    assert_eq!(db.stats().index_cache.blocks, live);
    let before = db.stats().index_block_reads;
    for i in 0..3000 {
        assert!(db.get(key(i)).unwrap().is_some());
    }
    assert_eq!(db.stats().index_block_reads, before);
    // Rewriting every table drops the old readers, and with them their partitions.
    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(db.stats().index_cache.blocks, live_partitions(dir.path()));
    assert_eq!(db.get(key(5)).unwrap().map(|v| v.len()), Some(41));
    db.close().unwrap();
    // A store opened again reads them at open, as it read whole indexes.
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.stats().index_cache.blocks, live_partitions(dir.path()));
}

/// Damages one index partition of a store's table: (the table's path, the partition's
/// offset, the keys of the store).
fn store_with_a_damaged_partition(dir: &Path) -> (PathBuf, u64, BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = Db::open(dir, store_options()).unwrap();
    let mut rng = SmallRng::seed_from_u64(5);
    let mut model = BTreeMap::new();
    put_random(&db, &mut model, &mut rng, 0..3000, "v");
    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    db.close().unwrap();
    let table = (sst_files(dir).into_iter())
        .find(|p| version_of(p) == 4)
        .expect("a partitioned table");
    let parts = partitions(&std::fs::read(&table).unwrap());
    let (offset, size) = parts[1];
    corrupt_byte(&table, offset + size / 2);
    (table, offset, model)
}

#[test]
fn a_store_with_a_damaged_partition_opens_and_reports_it_where_a_get_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let (table, offset, model) = store_with_a_damaged_partition(dir.path());
    let db = Db::open(dir.path(), store_options()).unwrap();
    let (mut found, mut damaged) = (0, 0);
    for (k, v) in &model {
        match db.get(k) {
            Ok(got) => {
                assert_eq!(got.as_ref(), Some(v));
                found += 1;
            }
            Err(Error::Corruption {
                file, offset: at, ..
            }) => {
                assert_eq!((file, at), (table.clone(), Some(offset)));
                damaged += 1;
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert!(found > 0 && damaged > 0, "{found} found, {damaged} damaged");
}

#[test]
fn repair_keeps_the_blocks_of_every_intact_partition() {
    let dir = tempfile::tempdir().unwrap();
    let (table, _, model) = store_with_a_damaged_partition(dir.path());
    let name = table.file_name().unwrap().to_str().unwrap().to_string();
    let report = bloomkv::repair(dir.path(), store_options()).unwrap();
    let salvaged: Vec<_> = report.salvaged.iter().filter(|s| s.file == name).collect();
    assert_eq!(salvaged.len(), 1, "{report:?}");
    let s = salvaged[0];
    assert!(s.blocks_kept > 0 && s.blocks_dropped > 0, "{s:?}");
    assert!(s.entries_lost > 0 && s.entries_kept > 0, "{s:?}");
    let db = Db::open(dir.path(), store_options()).unwrap();
    let mut readable = 0u64;
    for (k, v) in &model {
        if let Some(got) = db.get(k).unwrap() {
            assert_eq!(&got, v);
            readable += 1;
        }
    }
    assert_eq!(readable, model.len() as u64 - s.entries_lost);
}
