//! Compression by where a table lives: the bottom of the tree may take zstd while the levels
//! above keep LZ4. Every key reads back; the bottom takes fewer bytes; a keyspace keeps its
//! own choice across a reopen.

use crate::common;

use bloomkv::{Compression, Db, KeyspaceOptions, Options};

const KEYS: u64 = 6000;

/// Values like many a store's records: field names and small numbers, repeated across keys.
fn record(i: u64) -> Vec<u8> {
    format!(
        "{{\"user\":\"user-{i:08}\",\"region\":\"region-{}\",\"plan\":\"plan-{}\",\"visits\":{},\"note\":\"{}\"}}",
        i % 17,
        i % 5,
        i % 1009,
        "lorem ipsum dolor sit amet ".repeat((i % 4) as usize)
    )
    .into_bytes()
}

fn options() -> Options {
    common::small_tree_options()
        .table_size(64 * 1024)
        .level1_size(128 * 1024)
}

/// Loads the records, compacts the store into its bottom level, and returns the bytes of
/// that level's tables.
fn bottom_bytes(options: Options) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options.clone()).unwrap();
    for i in 0..KEYS {
        db.put(common::key(i), record(i)).unwrap();
    }
    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    for i in (0..KEYS).step_by(7) {
        assert_eq!(db.get(common::key(i)).unwrap(), Some(record(i)), "key {i}");
    }
    assert_eq!(db.iter().count() as u64, KEYS);
    db.close().unwrap();
    // Read again by a store opened without the option: each block names its compression.
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(
        db.get(common::key(KEYS - 1)).unwrap(),
        Some(record(KEYS - 1))
    );
    let stats = db.stats();
    let bottom = stats.levels.iter().rposition(|l| l.tables > 0).unwrap();
    assert!(bottom > 0);
    assert_eq!(
        stats.levels.iter().map(|l| l.tables).sum::<usize>(),
        stats.levels[bottom].tables
    );
    stats.levels[bottom].bytes
}

#[test]
fn zstd_at_the_bottom_takes_fewer_bytes_and_reads_back() {
    let lz4 = bottom_bytes(options());
    let zstd = bottom_bytes(options().bottom_compression(Compression::Zstd));
    assert!(zstd * 4 < lz4 * 3, "zstd {zstd} bytes, lz4 {lz4}");
}

#[test]
fn a_keyspace_keeps_its_bottom_compression_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let given = KeyspaceOptions::new()
        .compression(Compression::None)
        .bottom_compression(Compression::Zstd);
    {
        let db = Db::open(dir.path(), options()).unwrap();
        let cold = db.keyspace("cold", given).unwrap();
        let o = cold.options();
        assert_eq!(
            (o.compression, o.bottom_compression),
            (Some(Compression::None), Some(Compression::Zstd))
        );
        // A keyspace that sets only its compression sets its bottom's too.
        let plain = db
            .keyspace(
                "plain",
                KeyspaceOptions::new().compression(Compression::None),
            )
            .unwrap();
        assert_eq!(plain.options().bottom_compression, Some(Compression::None));
        for i in 0..KEYS {
            cold.put(common::key(i), record(i)).unwrap();
        }
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    let cold = db.keyspace("cold", KeyspaceOptions::new()).unwrap();
    assert_eq!(cold.options().bottom_compression, Some(Compression::Zstd));
    let stats = db.stats();
    let cold_stats = stats.keyspaces.iter().find(|k| k.name == "cold").unwrap();
    assert_eq!(cold_stats.bottom_compression, Compression::Zstd);
    assert_eq!(cold_stats.compression, Compression::None);
    db.compact().unwrap();
    for i in 0..KEYS {
        assert_eq!(
            cold.get(common::key(i)).unwrap(),
            Some(record(i)),
            "key {i}"
        );
    }
}
