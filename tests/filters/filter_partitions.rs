//! Partitioned filters: a table's filter cut into partitions under a top level, each answering
//! for its run of keys, kept apart by a store's filter memory limit.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use bloomkv::entry::Entry;
use bloomkv::filter::KeyHash;
use bloomkv::sstable::{verify_table, FilterPolicy, Table, TableOptions};
use bloomkv::{Db, Error, FilterResidency, Options, Stats};

/// Filter partitions of 64 bytes: 64 keys each at up to 8 bits per key.
const PARTITION: usize = 64;
const PER_PARTITION: u64 = 64;

fn table_options() -> TableOptions {
    TableOptions {
        filter_policy: FilterPolicy::FalsePositiveRate(0.01),
        filter_partition_size: PARTITION,
        block_size: 256,
        ..TableOptions::default()
    }
}

/// A table at `path` of the even keys `0..2n`, three versions of every tenth key.
fn build(path: &Path, n: u64, options: TableOptions) -> Table {
    let mut entries = Vec::new();
    for i in 0..n {
        let versions = if i % 10 == 0 { 3 } else { 1 };
        for v in (0..versions).rev() {
            entries.push(Entry::value(
                common::key(2 * i),
                10 + v,
                common::value(i, v),
            ));
        }
    }
    common::build_table(path, options, &entries);
    common::open_table(path)
}

/// The partitions a table of `n` keys is cut into: runs of `PER_PARTITION`, a last run of
/// fewer than half that joining the one before; one unit when that makes one.
fn expected_units(n: u64) -> usize {
    let (full, rest) = (n / PER_PARTITION, n % PER_PARTITION);
    let parts = match rest {
        0 => full,
        r if r < PER_PARTITION / 2 && full > 0 => full,
        _ => full + 1,
    };
    parts.max(1) as usize
}

#[test]
fn every_key_is_found_across_partition_boundaries_in_tables_of_every_size() {
    let dir = tempfile::tempdir().unwrap();
    for n in [1, 2, 63, 64, 65, 95, 96, 97, 127, 128, 129, 160, 1000, 3001] {
        let path = dir.path().join(format!("{n}.sst"));
        let table = build(&path, n, table_options());
        let units = expected_units(n);
        assert_eq!(table.filter_units(), units, "{n} keys");
        assert_eq!(table.is_partitioned(), units > 1, "{n} keys");
        for i in 0..n {
            let key = common::key(2 * i);
            let hash = KeyHash::of(&key);
            assert!(table.may_contain(&key, &hash), "{n} keys: key {i}");
            let found = table.get(&key, &hash).unwrap().expect("present");
            let newest = if i % 10 == 0 { 2 } else { 0 };
            assert_eq!(found.value, common::value(i, newest), "{n} keys: key {i}");
            // An older version, at a snapshot below the newest.
            if i % 10 == 0 {
                let old = table.get_at(&key, 10, &hash).unwrap().expect("old version");
                assert_eq!(old.value, common::value(i, 0));
            }
        }
        // Absent keys: before the first, between every two, and past the last.
        let mut passed = 0;
        for i in 0..n {
            let key = common::key(2 * i + 1);
            let hash = KeyHash::of(&key);
            passed += u64::from(table.may_contain(&key, &hash));
            assert_eq!(table.get(&key, &hash).unwrap(), None);
        }
        assert!(
            passed <= 10 + n / 20,
            "{n} keys: {passed} absent keys passed"
        );
        let past = common::key(2 * n + 1);
        if table.is_partitioned() {
            assert!(!table.may_contain(&past, &KeyHash::of(&past)), "{n}");
        }
        assert_eq!(table.get(&past, &KeyHash::of(&past)).unwrap(), None);
        verify_table(common::os_fs(), &path).unwrap();
    }
}

#[test]
fn a_key_equal_to_a_partitions_last_key_is_in_that_partition() {
    let dir = tempfile::tempdir().unwrap();
    let n = 10 * PER_PARTITION;
    let table = build(&dir.path().join("t.sst"), n, table_options());
    assert_eq!(table.filter_units(), 10);
    for p in 0..10 {
        for i in [p * PER_PARTITION, (p + 1) * PER_PARTITION - 1] {
            let key = common::key(2 * i);
            let held = table.filter_unit(p as usize).unwrap();
            assert!(held.contains(&key), "key {i} in partition {p}");
            // A partition's filter holds its own keys only: the next partition's first key
            // is almost never in it.
            assert_eq!(held.len(), PER_PARTITION);
        }
    }
}

/// Little-endian fields and LEB128 varints, read as `docs/format.md` describes them.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take(2).try_into().unwrap())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
    fn varint(&mut self) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = self.take(1)[0];
            v |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b < 0x80 {
                return v;
            }
        }
    }
}

#[test]
fn the_partitioned_filter_block_is_laid_out_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let n = 5 * PER_PARTITION + 40;
    let table = build(&path, n, table_options());
    let props = table.properties();
    let file = std::fs::read(&path).unwrap();
    // The filter block follows the data blocks; its contents end 5 bytes (the trailer)
    // before the properties block.
    let start = props.data_size as usize;
    let end = start + props.filter_size_bytes as usize - 5;
    let block = &file[start..end];
    let mut b = Bytes(block);
    assert_eq!(b.take(4), b"BKFP");
    assert_eq!(b.u16(), 1);
    assert_eq!(b.u16(), 0);
    let count = b.u32() as usize;
    assert_eq!(count, 6);
    let top_len = b.u32() as usize;
    assert_eq!(top_len, 16 + 6 * (1 + 13 + 1 + 1) + 4);
    let mut partitions = Vec::new();
    for _ in 0..count {
        let len = b.varint() as usize;
        let last_key = b.take(len).to_vec();
        let (words, keys) = (b.varint(), b.varint());
        partitions.push((last_key, words, keys));
    }
    assert_eq!(block.len() - b.0.len(), top_len - 4);
    let crc = b.u32();
    assert_eq!(crc, crc32fast::hash(&block[..top_len - 4]));

    let (mut first, mut offset) = (0, top_len);
    for (p, (last_key, words, keys)) in partitions.iter().enumerate() {
        // Runs of 64 keys, then the last 40 (half a run or more stands alone).
        let expected_keys = if p == count - 1 { 40 } else { 64 };
        assert_eq!(*keys, expected_keys, "partition {p}");
        assert_eq!(
            *last_key,
            common::key(2 * (first + keys - 1)),
            "partition {p}"
        );
        let mut f = Bytes(&block[offset..]);
        assert_eq!(f.take(4), b"BKBF");
        assert_eq!((f.u16(), f.u16()), (1, 2));
        let (k, bits) = (f.u32(), f.u32());
        assert_eq!(bits, table.filter_params().unwrap().bits_per_key());
        // The worked example of docs/format.md: 10 bits per key, 640 bits rounded up to
        // 1,024 for runs of 64 keys, 400 to 512 for the last run of 40.
        assert_eq!(bits, 10);
        assert_eq!(*words, if p == count - 1 { 8 } else { 16 });
        assert_eq!(k, table.filter_params().unwrap().hashes());
        assert_eq!(f.u64(), words * 64);
        assert_eq!(f.u64(), *keys);
        let len = 32 + *words as usize * 8;
        let stored = u32::from_le_bytes(block[offset + len..offset + len + 4].try_into().unwrap());
        assert_eq!(stored, crc32fast::hash(&block[offset..offset + len]));
        first += keys;
        offset += len + 4;
    }
    assert_eq!(first, n);
    assert_eq!(offset, block.len(), "the partitions fill the block");
}

/// Writes a copy of `path` with the byte at `at` flipped.
fn damage(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

fn assert_corruption_at(err: Error, path: &Path, offset: u64) {
    match &err {
        Error::Corruption {
            file, offset: at, ..
        } => {
            assert_eq!(file, path, "{err}");
            assert_eq!(*at, Some(offset), "{err}");
        }
        other => panic!("expected corruption, got {other}"),
    }
}

#[test]
fn damaged_partitions_and_top_levels_are_corruption_naming_the_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let table = build(&path, 8 * PER_PARTITION, table_options());
    let filter_at = table.properties().data_size;
    drop(table);
    let pristine = std::fs::read(&path).unwrap();
    // A bit of the top level's last key, then one in the bits of the third partition.
    for at in [24, 400] {
        std::fs::write(&path, &pristine).unwrap();
        damage(&path, filter_at as usize + at);
        let fs = common::os_fs();
        let counters = std::sync::Arc::new(bloomkv::metrics::ReadCounters::new());
        let err = Table::open(fs.clone(), &path, counters).unwrap_err();
        assert_corruption_at(err, &path, filter_at);
        assert!(verify_table(fs, &path).is_err());
    }
}

/// Small trees whose filters are partitioned while a limit binds; no limit but the one a test
/// gives, and held to it (no memory moves from the block cache).
fn store_options() -> Options {
    common::small_tree_options()
        .memtable_size(128 * 1024)
        .table_size(128 * 1024)
        .no_filter_memory_limit()
        .memory_follows_reads(false)
        .filter_partition_size(1024)
}

const KEYS: u64 = 20_000;

/// The filter memory of the store of `KEYS` even keys with no limit.
fn unlimited_filter_bytes() -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), store_options()).unwrap();
    common::put_even(&db, 0, KEYS);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    db.stats().filter_memory_bytes
}

fn settle(db: &Db) -> Stats {
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    db.stats()
}

fn partitioned(stats: &Stats) -> usize {
    (stats.tables.iter())
        .filter(|t| !t.filter_partitions.is_empty())
        .count()
}

#[test]
fn a_store_under_a_binding_limit_partitions_its_filters_and_keeps_every_key() {
    let limit = unlimited_filter_bytes() / 3;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), store_options().filter_memory_limit(limit)).unwrap();
    common::put_even(&db, 0, KEYS);
    let stats = settle(&db);
    assert!(partitioned(&stats) > 0, "{:?}", stats.tables);
    assert!(stats.filter_memory_bytes <= limit, "{stats:?}");
    common::assert_even_keys_read_back(&db, KEYS, |_| true);

    // Deletes and compactions: the limit holds, the rest reads back.
    for i in (0..KEYS).filter(|i| i % 3 == 0) {
        db.delete(common::key(2 * i)).unwrap();
    }
    settle(&db);
    db.compact().unwrap();
    let stats = settle(&db);
    // Partitioned filters keep their top levels whatever becomes of the partitions: when the
    // compaction's tables came out with more partitions (the bits per key a table is written
    // with depend on its number), the top levels alone can outgrow a third of the filters,
    // and the plan can only drop every partition.
    let every_partition_dropped = (stats.tables.iter())
        .flat_map(|t| &t.filter_partitions)
        .all(|p| *p == FilterResidency::Dropped);
    assert!(
        stats.filter_memory_bytes <= limit || every_partition_dropped,
        "{stats:?}"
    );
    common::assert_even_keys_read_back(&db, KEYS, |i| i % 3 != 0);

    // Reopened with half the limit: the partitions are read one at a time, folded, and the
    // keys still read back.
    db.close().unwrap();
    let db = Db::open(dir.path(), store_options().filter_memory_limit(limit / 2)).unwrap();
    let stats = db.stats();
    assert!(stats.filter_memory_bytes <= limit / 2, "{stats:?}");
    assert!(partitioned(&stats) > 0);
    common::assert_even_keys_read_back(&db, KEYS, |i| i % 3 != 0);
}

#[test]
fn by_default_filters_are_written_whole_even_under_a_binding_limit() {
    let limit = unlimited_filter_bytes() / 3;
    let dir = tempfile::tempdir().unwrap();
    let options =
        store_options().filter_partition_size(Options::default().tuning.filter_partition_size);
    let db = Db::open(dir.path(), options.filter_memory_limit(limit)).unwrap();
    common::put_even(&db, 0, KEYS);
    let stats = settle(&db);
    assert_eq!(partitioned(&stats), 0, "{:?}", stats.tables);
    assert!(stats.filter_memory_bytes <= limit, "{stats:?}");
    assert!(stats
        .tables
        .iter()
        .any(|t| t.filter_residency != FilterResidency::Whole));
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
}

#[test]
fn a_damaged_partition_fails_an_open_under_a_limit_naming_its_offset() {
    let limit = unlimited_filter_bytes() / 2;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), store_options().filter_memory_limit(limit)).unwrap();
    common::put_even(&db, 0, KEYS);
    let stats = settle(&db);
    let victim = (stats.tables.iter())
        .find(|t| t.filter_partitions.len() > 2)
        .expect("a partitioned table")
        .number;
    db.close().unwrap();
    let path = dir.path().join(format!("{victim:06}.sst"));
    assert!(path.exists(), "{}", path.display());
    let table = common::open_table(&path);
    let filter_at = table.properties().data_size as usize;
    let file = std::fs::read(&path).unwrap();
    drop(table);
    // The second partition starts where the first (magic "BKBF") ends.
    let starts: Vec<usize> = (filter_at..file.len() - 4)
        .filter(|&i| &file[i..i + 4] == b"BKBF")
        .collect();
    let second = starts[1];
    damage(&path, second + 40);
    // With room for every filter whole, the store reads each partition on its own.
    let err = Db::open(dir.path(), store_options().filter_memory_limit(limit * 8)).unwrap_err();
    assert_corruption_at(err, &path, second as u64);
}

/// Waits (up to ten seconds) until `done` holds for the store's stats.
fn wait_for(db: &Db, done: impl Fn(&Stats) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if done(&db.stats()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn skewed_lookups_keep_the_busy_partitions_whole_and_fold_the_rest_of_their_table() {
    let limit = unlimited_filter_bytes() / 3;
    let dir = tempfile::tempdir().unwrap();
    let options = store_options().filter_memory_limit(limit);
    let db = Db::open(dir.path(), options).unwrap();
    common::put_even(&db, 0, KEYS);
    let stats = settle(&db);
    let bottom = stats.tables.iter().map(|t| t.level).max().unwrap();
    let table = (stats.tables.iter())
        .filter(|t| t.level == bottom && t.filter_partitions.len() >= 4)
        .find(|t| t.filter_partitions[0] != FilterResidency::Whole)
        .expect("a partitioned table with its first partition shrunk")
        .clone();
    // Absent keys at the start of the table's range: a few of its first partition's.
    let busy: Vec<Vec<u8>> = (0..KEYS)
        .map(|i| common::key(2 * i + 1))
        .filter(|k| table.smallest_key <= *k && *k <= table.largest_key)
        .take(8)
        .collect();
    let reads = |rounds: u64| {
        let before = db.stats().data_block_reads;
        for _ in 0..rounds {
            for key in &busy {
                assert_eq!(db.get(key).unwrap(), None);
            }
        }
        db.stats().data_block_reads - before
    };
    let shrunk_reads = reads(200);
    reads(40_000 / busy.len() as u64);
    // The busy partition is held with more of its bits (whole, or folded less), the rest of
    // its table stays shrunk.
    let before = table.filter_partitions[0].fold_factor();
    let held_more = |now: FilterResidency| match (now.fold_factor(), before) {
        (Some(now), Some(before)) => now < before,
        (now, before) => now.is_some() && before.is_none(),
    };
    let first_grown = |s: &Stats| {
        (s.tables.iter()).any(|t| {
            t.number == table.number
                && held_more(t.filter_partitions[0])
                && t.filter_partitions
                    .iter()
                    .any(|r| *r != FilterResidency::Whole)
        })
    };
    assert!(wait_for(&db, first_grown), "{:?}", db.stats().tables);
    assert!(db.stats().filter_memory_bytes <= limit);
    let whole_reads = reads(200);
    assert!(
        whole_reads * 4 < shrunk_reads.max(4),
        "{whole_reads} blocks read with the partition whole, {shrunk_reads} shrunk"
    );
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
}

#[test]
fn whole_filters_and_partitioned_ones_mix_in_one_store() {
    let dir = tempfile::tempdir().unwrap();
    // Written with no limit: every filter whole.
    let db = Db::open(dir.path(), store_options()).unwrap();
    common::put_even(&db, 0, KEYS / 2);
    let before = settle(&db);
    assert_eq!(partitioned(&before), 0);
    let whole_bytes = before.filter_memory_bytes;
    db.close().unwrap();

    // Reopened under a limit that binds once the rest is written: new tables are
    // partitioned, old ones whole (or shrunk whole), and both answer.
    let limit = whole_bytes * 2 / 3;
    let db = Db::open(dir.path(), store_options().filter_memory_limit(limit)).unwrap();
    common::put_even(&db, KEYS / 2, KEYS);
    let stats = settle(&db);
    let old = (stats.tables.iter())
        .filter(|t| t.filter_partitions.is_empty() && t.bits_per_key.is_some())
        .count();
    assert!(partitioned(&stats) > 0 && old > 0, "{:?}", stats.tables);
    assert!(stats.filter_memory_bytes <= limit, "{stats:?}");
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
    db.close().unwrap();
    let db = Db::open(dir.path(), store_options()).unwrap();
    common::assert_even_keys_read_back(&db, KEYS, |_| true);
    let report = db.check();
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn a_partition_in_the_cache_local_layout_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let table = build(&path, 4 * PER_PARTITION, table_options());
    let filter_at = table.properties().data_size as usize;
    let filter_size = table.properties().filter_size_bytes as usize - 5;
    drop(table);
    let mut bytes = std::fs::read(&path).unwrap();
    // The first partition starts after the top level, whose length is at byte 12 of the
    // block; its header's hash algorithm (bytes 6..8) becomes 3, its checksum and the
    // block's are mended: a well-formed cache-local filter where a standard one must be.
    let top = u32::from_le_bytes(bytes[filter_at + 12..filter_at + 16].try_into().unwrap());
    let part = filter_at + top as usize;
    let words = u64::from_le_bytes(bytes[part + 16..part + 24].try_into().unwrap()) / 64;
    let len = 32 + 8 * words as usize;
    bytes[part + 6..part + 8].copy_from_slice(&3u16.to_le_bytes());
    let crc = crc32fast::hash(&bytes[part..part + len]);
    bytes[part + len..part + len + 4].copy_from_slice(&crc.to_le_bytes());
    let mut block = crc32fast::Hasher::new();
    block.update(&bytes[filter_at..filter_at + filter_size]);
    block.update(&bytes[filter_at + filter_size..filter_at + filter_size + 1]);
    let trailer = filter_at + filter_size + 1;
    bytes[trailer..trailer + 4].copy_from_slice(&block.finalize().to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let counters = std::sync::Arc::new(bloomkv::metrics::ReadCounters::new());
    let err = Table::open(common::os_fs(), &path, counters).unwrap_err();
    assert_corruption_at(err, &path, part as u64);
}
