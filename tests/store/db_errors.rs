//! Errors a user of the store meets: a second open, oversized keys and values, bad options.

use crate::common;

use bloomkv::entry::{MAX_KEY_LEN, MAX_VALUE_LEN};
use bloomkv::{Compression, Db, Error, FilterPolicy, Options};

#[test]
fn second_open_of_the_same_directory_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    drop(db);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn a_store_prints_its_directory_and_how_it_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let shown = format!("{db:?}");
    assert!(shown.contains(&format!("{:?}", dir.path())), "{shown}");
    assert!(shown.contains("read_only: false"), "{shown}");
    // Printable, so a failed open can be unwrapped into its error directly.
    let second = Db::open(dir.path(), Options::default()).unwrap_err();
    assert!(matches!(second, Error::Locked { .. }), "{second}");
    drop(db);
    let reader = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert!(format!("{reader:?}").contains("read_only: true"));
}

#[test]
fn oversized_keys_and_values_are_refused_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"kept", b"value").unwrap();
    let big_key = vec![1u8; MAX_KEY_LEN + 1];
    assert!(matches!(
        db.put(&big_key, b"v"),
        Err(Error::KeyTooLarge { .. })
    ));
    assert!(matches!(db.get(&big_key), Err(Error::KeyTooLarge { .. })));
    let max_key = vec![2u8; MAX_KEY_LEN];
    db.put(&max_key, b"ok").unwrap();
    assert_eq!(db.get(&max_key).unwrap(), Some(b"ok".to_vec()));
    // A value one byte over the limit is refused without allocating it in the store.
    let big_value = vec![0u8; MAX_VALUE_LEN + 1];
    assert!(matches!(
        db.put(b"k", &big_value),
        Err(Error::ValueTooLarge { .. })
    ));
    drop(big_value);
    assert_eq!(db.get(b"kept").unwrap(), Some(b"value".to_vec()));
}

#[test]
fn bad_options_are_invalid_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let bad = Options::default().filter_policy(FilterPolicy::FalsePositiveRate(1.5));
    assert!(Db::open(dir.path(), bad).is_err());
    let bad = Options::default().memtable_size(10);
    assert!(matches!(
        Db::open(dir.path(), bad),
        Err(Error::InvalidArgument(_))
    ));
    let bad = Options::default().group_commit_wait(std::time::Duration::MAX);
    assert!(matches!(
        Db::open(dir.path(), bad),
        Err(Error::InvalidArgument(_))
    ));
    let missing = dir.path().join("nope");
    let opts = Options::default().create_if_missing(false);
    assert!(matches!(
        Db::open(&missing, opts),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn disabled_filters_still_find_everything() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_with(FilterPolicy::Disabled)).unwrap();
    for i in 0..3000 {
        db.put(common::key(i), common::value(i, 1)).unwrap();
    }
    db.compact().unwrap();
    for i in 0..3000 {
        assert_eq!(db.get(common::key(i)).unwrap(), Some(common::value(i, 1)));
    }
    assert!(db.stats().tables.iter().all(|t| t.bits_per_key.is_none()));
}

#[test]
fn deletes_and_compaction_drop_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    for i in 0..2000 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    for i in (0..2000).step_by(2) {
        db.delete(common::key(i)).unwrap();
    }
    db.compact().unwrap();
    let stats = db.stats();
    let entries: u64 = stats.levels.iter().map(|l| l.entries).sum();
    assert_eq!(
        entries, 1000,
        "tombstones and shadowed values are gone after a full compaction"
    );
    assert_eq!(db.get(common::key(0)).unwrap(), None);
    assert_eq!(db.get(common::key(1)).unwrap(), Some(common::value(1, 0)));
}

#[test]
fn compaction_keeps_a_tombstone_whose_key_a_deeper_level_still_holds() {
    // A level-1 table holding a tombstone for "a" is pulled into a level-0 compaction whose own
    // key range ("k".."z") does not reach "a". The tombstone must survive, because level 2
    // still holds an older value of "a".
    let dir = tempfile::tempdir().unwrap();
    // Uncompressed, so that the 2,000-byte value below overfills level 1 as intended.
    let options = Options::default()
        .l0_compaction_trigger(1)
        .level1_size(1024)
        .table_size(1 << 20)
        .compression(Compression::None);
    let db = Db::open(dir.path(), options).unwrap();
    db.put(b"a", b"v1").unwrap();
    db.put(b"b", vec![b'x'; 2000]).unwrap();
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    db.delete(b"a").unwrap();
    db.put(b"m", b"m").unwrap();
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    db.put(b"k", b"k").unwrap();
    db.put(b"z", b"z").unwrap();
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let deep = db.stats().tables.iter().filter(|t| t.level >= 2).count();
    assert!(
        deep >= 1,
        "the old value of a should still sit in a deeper level"
    );
    assert_eq!(db.get(b"a").unwrap(), None, "a deleted key came back");
    let keys: Vec<Vec<u8>> = db.iter().map(|r| r.unwrap().0).collect();
    assert_eq!(
        keys,
        vec![b"b".to_vec(), b"k".to_vec(), b"m".to_vec(), b"z".to_vec()]
    );
}

/// A block size the table writer cannot write is refused at open, not taken and then failed
/// on every flush; the store opens again with sound options and keeps what it held.
#[test]
fn a_block_size_past_the_format_limit_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("k", "v").unwrap();
    db.close().unwrap();
    let bad = Options::default().block_size(128 << 20);
    match Db::open(dir.path(), bad) {
        Err(Error::InvalidArgument(msg)) => assert!(msg.contains("block_size"), "{msg}"),
        other => panic!("expected InvalidArgument, got {:?}", other.map(|_| ())),
    }
    let largest = Options::default().block_size(bloomkv::sstable::MAX_BLOCK_SIZE);
    let db = Db::open(dir.path(), largest).unwrap();
    assert_eq!(db.get("k").unwrap(), Some(b"v".to_vec()));
    db.put("k2", "v2").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get("k2").unwrap(), Some(b"v2".to_vec()));
}
