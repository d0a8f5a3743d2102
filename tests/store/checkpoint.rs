//! Checkpoints: a store's tables linked into a directory of their own, opened as a store.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use bloomkv::{Db, Error, Options};

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter().map(|r| r.unwrap()).collect()
}

#[test]
fn a_checkpoint_opens_as_the_store_it_was_taken_from() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), common::small_tree_options()).unwrap();
    for i in 0..3000 {
        db.put(common::key(i), common::value(i, 1)).unwrap();
    }
    db.wait_for_background_work().unwrap();
    for i in (0..3000).step_by(7) {
        db.delete(common::key(i)).unwrap();
    }
    // Part of the store is still in the memtable: the checkpoint flushes it.
    db.put(b"last", b"in the memtable").unwrap();
    let expected = contents(&db);
    assert!(db.stats().tables.len() > 1);

    let cp = db.checkpoint(dir.path().join("cp")).unwrap();
    let mut files = cp.files.clone();
    files.sort();
    assert_eq!(files, common::names_in(&cp.dir));
    assert_eq!(
        cp.tables,
        files.iter().filter(|f| f.ends_with(".sst")).count()
    );
    assert!(cp.table_bytes > 0);

    // Later writes and compactions of the source do not reach the checkpoint; the source's
    // compaction deletes tables the checkpoint links.
    for i in 0..3000 {
        db.put(common::key(i), common::value(i, 2)).unwrap();
    }
    db.compact().unwrap();
    db.close().unwrap();

    // Read-only first: no background compaction changes the tables under the check.
    let copy = Db::open_read_only(&cp.dir, common::small_tree_options()).unwrap();
    let stats = copy.stats();
    assert_eq!(stats.tables.len(), cp.tables);
    // Filters came with the tables.
    assert!(stats.tables.iter().all(|t| t.filter_bytes > 0));
    assert_eq!(contents(&copy), expected);
    drop(copy);

    let copy = Db::open(&cp.dir, common::small_tree_options()).unwrap();
    assert_eq!(contents(&copy), expected);
    assert_eq!(
        copy.get(b"last").unwrap().as_deref(),
        Some(&b"in the memtable"[..])
    );
    assert_eq!(copy.get(common::key(7)).unwrap(), None);
    assert!(copy.check().is_clean());
    // The copy is a store like any other: it takes writes and reopens.
    copy.put(b"after", b"1").unwrap();
    copy.close().unwrap();
    let copy = Db::open(&cp.dir, Options::default()).unwrap();
    assert_eq!(copy.get(b"after").unwrap().as_deref(), Some(&b"1"[..]));
    assert!(copy.stats().last_sequence > cp.last_seq);
}

#[test]
fn a_checkpoint_after_a_full_compaction_still_numbers_every_write() {
    // Compaction zeroes sequence numbers at the bottom level: the checkpoint's number must
    // still cover every write, so that the copy numbers new writes above them.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), common::small_tree_options()).unwrap();
    for i in 0..500 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    db.compact().unwrap();
    let written = db.stats().last_sequence;
    let cp = db.checkpoint(dir.path().join("cp")).unwrap();
    assert!(cp.last_seq >= written, "{} < {written}", cp.last_seq);
    let copy = Db::open(&cp.dir, Options::default()).unwrap();
    assert!(copy.stats().last_sequence >= written);
    let snapshot = copy.snapshot();
    copy.put(common::key(1), b"newer").unwrap();
    // A snapshot taken before the write does not see it: the write was numbered above.
    assert_eq!(
        snapshot.get(common::key(1)).unwrap(),
        Some(common::value(1, 0))
    );
    assert_eq!(
        copy.get(common::key(1)).unwrap().as_deref(),
        Some(&b"newer"[..])
    );
}

#[test]
fn a_checkpoint_never_truncates_a_table_already_linked() {
    // Two checkpoints racing into one directory: the second finds the first's links. It must
    // fail rather than copy over them, which would empty the live tables they share.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    let table = db.stats().tables[0].number;
    let name = bloomkv::filename::table_file_name(table);
    let live = dir.path().join("db").join(&name);
    let size = std::fs::metadata(&live).unwrap().len();
    let target = dir.path().join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    std::fs::hard_link(&live, target.join(&name)).unwrap();
    let fs = bloomkv::fs::OsFileSystem;
    use bloomkv::fs::FileSystem;
    assert!(fs.link_or_copy(&live, &target.join(&name)).is_err());
    assert_eq!(std::fs::metadata(&live).unwrap().len(), size);
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_checkpoint_of_an_empty_store_is_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    let cp = db.checkpoint(dir.path().join("cp")).unwrap();
    assert_eq!((cp.tables, cp.last_seq), (0, 0));
    let copy = Db::open(&cp.dir, Options::default()).unwrap();
    assert_eq!(copy.iter().count(), 0);
}

#[test]
fn a_checkpoint_refuses_a_directory_that_holds_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let target = dir.path().join("cp");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("notes.txt"), b"mine").unwrap();
    assert!(matches!(
        db.checkpoint(&target),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(std::fs::read(target.join("notes.txt")).unwrap(), b"mine");
    // Nor over a store, its own directory included.
    assert!(matches!(
        db.checkpoint(dir.path().join("db")),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_read_only_store_cannot_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    Db::open(&path, Options::default())
        .unwrap()
        .close()
        .unwrap();
    let db = Db::open_read_only(&path, Options::default()).unwrap();
    assert!(matches!(
        db.checkpoint(dir.path().join("cp")),
        Err(Error::ReadOnly)
    ));
}

#[test]
fn a_checkpoint_taken_under_writes_holds_a_prefix_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path().join("db"), common::small_tree_options()).unwrap());
    let writer = common::SteadyWriter::start(db.clone());
    for round in 0..4 {
        while writer.acknowledged() < 2000 * (round + 1) {
            std::thread::yield_now();
        }
        let before = writer.acknowledged();
        let cp = db
            .checkpoint(dir.path().join(format!("cp{round}")))
            .unwrap();
        let copy = Db::open(&cp.dir, Options::default()).unwrap();
        let keys: Vec<Vec<u8>> = copy.iter().map(|r| r.unwrap().0).collect();
        // Every write acknowledged before the call, and no gap: writes 0..n for some n.
        assert!(keys.len() as u64 >= before, "{} < {before}", keys.len());
        let mut expected: Vec<Vec<u8>> = (0..keys.len() as u64).map(common::key).collect();
        expected.sort();
        assert_eq!(keys, expected);
    }
    writer.stop();
}
