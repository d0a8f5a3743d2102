//! `repair` salvages damaged tables: the intact blocks of a table with a damaged data block
//! are kept in a new table, a table that cannot be opened is dropped, the damaged originals
//! move to `lost/`, and the store opens and checks clean afterwards, with every key outside
//! the damage.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv::check::check_store_with;
use bloomkv::fs::{FaultFs, FileSystem};
use bloomkv::{repair, Db, Options};

const DIR: &str = "/store";
const KEYS: u64 = 3000;

fn options(fs: &FaultFs) -> Options {
    common::small_tree_options().file_system(Arc::new(fs.clone()))
}

/// A store whose keys (each written once) sit in many tables.
fn build_store(fs: &FaultFs) {
    let db = Db::open(DIR, options(fs)).unwrap();
    for i in 0..KEYS {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    db.close().unwrap();
}

/// The largest table file of the store: it has many data blocks.
fn largest_table(fs: &FaultFs) -> PathBuf {
    let dir = Path::new(DIR);
    fs.list(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".sst"))
        .map(|n| dir.join(n))
        .max_by_key(|p| fs.contents(p).unwrap().len())
        .unwrap()
}

/// Keys that read back with their value after the repair; fails on a wrong value.
fn keys_found(fs: &FaultFs) -> u64 {
    let db = Db::open(DIR, options(fs)).unwrap();
    let mut found = 0;
    for i in 0..KEYS {
        if let Some(v) = db.get(common::key(i)).unwrap() {
            assert_eq!(v, common::value(i, 0), "key {i}");
            found += 1;
        }
    }
    assert_eq!(db.iter().count() as u64, found);
    found
}

#[test]
fn a_flipped_byte_in_a_data_block_loses_that_block_only() {
    let fs = FaultFs::new();
    build_store(&fs);
    let table = largest_table(&fs);
    let mut bytes = fs.contents(&table).unwrap();
    let original = bytes.clone();
    // The first data block starts at offset 0.
    bytes[20] ^= 0x40;
    fs.set_contents(&table, bytes);
    assert!(!check_store_with(Arc::new(fs.clone()), Path::new(DIR))
        .unwrap()
        .is_clean());

    let report = repair(DIR, options(&fs)).unwrap();
    assert_eq!(report.salvaged.len(), 1, "{:?}", report.salvaged);
    let salvaged = &report.salvaged[0];
    assert_eq!(salvaged.file, table.file_name().unwrap().to_str().unwrap());
    assert_eq!(salvaged.blocks_dropped, 1);
    assert!(salvaged.blocks_kept > 1);
    assert!(salvaged.entries_lost > 0 && salvaged.entries_kept > 0);
    assert!(salvaged.replaced_by.is_some());
    assert!(report.dropped_anything());
    // The damaged file is kept, byte for byte, in lost/.
    let mut damaged = original;
    damaged[20] ^= 0x40;
    assert_eq!(fs.contents(&salvaged.moved_to).unwrap(), damaged);
    // What was kept took the damaged table's name.
    assert_eq!(
        salvaged.replaced_by.as_deref(),
        salvaged.file.as_str().into()
    );
    assert_ne!(fs.contents(&table).unwrap(), damaged);

    assert_eq!(keys_found(&fs), KEYS - salvaged.entries_lost);
    let check = check_store_with(Arc::new(fs.clone()), Path::new(DIR)).unwrap();
    assert!(check.is_clean(), "{:?}", check.problems);
}

#[test]
fn a_truncated_table_is_dropped_and_the_rest_kept() {
    let fs = FaultFs::new();
    build_store(&fs);
    let table = largest_table(&fs);
    let bytes = fs.contents(&table).unwrap();
    fs.set_contents(&table, bytes[..bytes.len() / 2].to_vec());

    let report = repair(DIR, options(&fs)).unwrap();
    assert_eq!(report.salvaged.len(), 1);
    let salvaged = &report.salvaged[0];
    assert_eq!(salvaged.entries_kept, 0);
    assert!(salvaged.entries_lost > 0);
    assert_eq!(salvaged.replaced_by, None);
    assert_eq!(keys_found(&fs), KEYS - salvaged.entries_lost);
    let check = check_store_with(Arc::new(fs.clone()), Path::new(DIR)).unwrap();
    assert!(check.is_clean(), "{:?}", check.problems);
}

#[test]
fn a_store_without_damage_is_left_as_it_was() {
    let fs = FaultFs::new();
    build_store(&fs);
    let report = repair(DIR, options(&fs)).unwrap();
    assert!(report.salvaged.is_empty());
    assert!(!report.dropped_anything());
    assert!(!fs.exists(&Path::new(DIR).join("lost")));
    assert_eq!(keys_found(&fs), KEYS);
}

/// A salvaged level-0 table keeps its number, so it stays older than the level-0 tables
/// written after it: a key it holds an old version of still reads as the newer table has it.
#[test]
fn a_salvaged_level_0_table_stays_older_than_later_ones() {
    let fs = FaultFs::new();
    let options = || {
        Options::default()
            .block_size(1024)
            .file_system(Arc::new(fs.clone()))
    };
    let db = Db::open(DIR, options()).unwrap();
    for i in 0..300 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    db.put("zzz", "old").unwrap();
    db.flush().unwrap();
    db.put("zzz", "new").unwrap();
    db.flush().unwrap();
    assert_eq!(
        db.stats().levels[0].tables,
        2,
        "both tables stay in level 0"
    );
    db.close().unwrap();
    let older = {
        let mut tables: Vec<_> = fs
            .list(Path::new(DIR))
            .unwrap()
            .into_iter()
            .filter(|n| n.ends_with(".sst"))
            .collect();
        tables.sort();
        Path::new(DIR).join(&tables[0])
    };
    let mut bytes = fs.contents(&older).unwrap();
    bytes[20] ^= 0x40;
    fs.set_contents(&older, bytes);

    let report = repair(DIR, options()).unwrap();
    assert_eq!(report.salvaged.len(), 1);
    let salvaged = &report.salvaged[0];
    assert_eq!(salvaged.level, 0);
    assert_eq!(
        salvaged.replaced_by.as_deref(),
        older.file_name().unwrap().to_str()
    );
    let db = Db::open(DIR, options()).unwrap();
    assert_eq!(db.get("zzz").unwrap(), Some(b"new".to_vec()));
    assert_eq!(
        db.get(common::key(299)).unwrap(),
        Some(common::value(299, 0))
    );
}

/// A table damaged again after a repair is salvaged again, and the first damaged original
/// stays in `lost/` beside the second.
#[test]
fn a_second_repair_keeps_the_first_damaged_original() {
    let fs = FaultFs::new();
    build_store(&fs);
    let table = largest_table(&fs);
    for round in 0..2 {
        let mut bytes = fs.contents(&table).unwrap();
        bytes[20] ^= 0x40;
        fs.set_contents(&table, bytes);
        let report = repair(DIR, options(&fs)).unwrap();
        assert_eq!(report.salvaged.len(), 1, "round {round}");
    }
    let name = table.file_name().unwrap().to_str().unwrap().to_string();
    let lost = Path::new(DIR).join("lost");
    assert!(fs.exists(&lost.join(&name)));
    assert!(fs.exists(&lost.join(format!("{name}.1"))));
    let check = check_store_with(Arc::new(fs.clone()), Path::new(DIR)).unwrap();
    assert!(check.is_clean(), "{:?}", check.problems);
}

/// A keyspace's damaged table is rewritten with the keyspace's block size and compression,
/// not the store's: its kept blocks are as many as before less the damaged one, each as
/// large as the keyspace asked.
#[test]
fn a_salvaged_table_keeps_its_keyspaces_block_size_and_compression() {
    use bloomkv::metrics::ReadCounters;
    use bloomkv::sstable::Table;
    use bloomkv::{Compression, KeyspaceOptions};

    let fs = FaultFs::new();
    let keyspace_options = KeyspaceOptions::default()
        .block_size(8 * 1024)
        .compression(Compression::None);
    {
        let roomy = options(&fs).memtable_size(1 << 20).table_size(1 << 20);
        let db = Db::open(DIR, roomy).unwrap();
        let wide = db.keyspace("wide", keyspace_options).unwrap();
        for i in 0..KEYS {
            wide.put(common::key(i), common::value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_background_work().unwrap();
        db.close().unwrap();
    }
    let shared: bloomkv::fs::SharedFs = Arc::new(fs.clone());
    let properties = |path: &Path| {
        let table = Table::open(Arc::clone(&shared), path, Arc::new(ReadCounters::new())).unwrap();
        table.properties().clone()
    };
    let table = largest_table(&fs);
    let before = properties(&table);
    assert!(before.data_blocks > 2, "{before:?}");
    let mut bytes = fs.contents(&table).unwrap();
    bytes[20] ^= 0x40;
    fs.set_contents(&table, bytes);

    let report = repair(DIR, options(&fs)).unwrap();
    assert_eq!(report.salvaged.len(), 1, "{:?}", report.salvaged);
    assert_eq!(report.salvaged[0].blocks_dropped, 1);
    let after = properties(&table);
    // The store's 1 KiB blocks would have made several times as many.
    assert_eq!(after.data_blocks, before.data_blocks - 1, "{after:?}");
    // Uncompressed, as the keyspace asked: as many bytes an entry as before (LZ4, the
    // store's compression, takes the repeated bytes of these values to far fewer).
    let per_entry = |p: &bloomkv::sstable::TableProperties| p.data_size as f64 / p.entries as f64;
    let ratio = per_entry(&after) / per_entry(&before);
    assert!((0.9..1.1).contains(&ratio), "{ratio}: {before:?} {after:?}");
    let db = Db::open(DIR, options(&fs)).unwrap();
    let wide = db.keyspace("wide", KeyspaceOptions::default()).unwrap();
    assert_eq!(
        wide.iter().count() as u64,
        KEYS - report.salvaged[0].entries_lost
    );
}
