//! Findings of a review of the store, each reproduced through the public API: a store that
//! lost its `CURRENT`, background failures that heal, orphan tables, the manifest's growth,
//! read-only opens.

mod common;

use std::path::Path;
use std::sync::Arc;

use bloomkv::fs::FaultFs;
use bloomkv::{Db, Error, Options};

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn a_store_without_current_is_refused_and_nothing_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    for i in 0..2_000 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    std::fs::remove_file(dir.path().join("CURRENT")).unwrap();
    // Files the store never made must be left alone too.
    std::fs::write(dir.path().join("notes.tmp"), b"mine").unwrap();
    std::fs::write(dir.path().join("000001.sst.bak"), b"mine").unwrap();
    let before = names_in(dir.path());

    match Db::open(dir.path(), common::small_tree_options()) {
        Err(Error::MissingCurrent { files, .. }) => {
            assert!(files.iter().any(|f| f.ends_with(".sst")), "{files:?}");
            assert!(
                files.iter().any(|f| f.starts_with("MANIFEST-")),
                "{files:?}"
            );
        }
        Err(e) => panic!("expected MissingCurrent, got {e}"),
        Ok(_) => panic!("a store without CURRENT was opened (and emptied)"),
    }
    let refused_without_create = Db::open(
        dir.path(),
        common::small_tree_options().create_if_missing(false),
    );
    assert!(matches!(
        refused_without_create,
        Err(Error::MissingCurrent { .. })
    ));
    assert_eq!(
        names_in(dir.path()),
        before,
        "refusing must not touch a file"
    );
}

#[test]
fn files_the_store_did_not_name_survive_an_open() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(dir.path(), Options::default())
        .unwrap()
        .close()
        .unwrap();
    for foreign in ["notes.tmp", "backup.sst", "1.log", "000001.sst.bak"] {
        std::fs::write(dir.path().join(foreign), b"not the store's").unwrap();
    }
    // A table builder cut short leaves `NNNNNN.sst.tmp`: that one is the store's garbage.
    std::fs::write(dir.path().join("000777.sst.tmp"), b"half a table").unwrap();
    Db::open(dir.path(), Options::default())
        .unwrap()
        .close()
        .unwrap();
    let names = names_in(dir.path());
    for foreign in ["notes.tmp", "backup.sst", "1.log", "000001.sst.bak"] {
        assert!(names.contains(&foreign.to_string()), "{foreign} deleted");
    }
    assert!(!names.contains(&"000777.sst.tmp".to_string()));
}

#[test]
fn a_creation_cut_short_does_not_block_the_next_open() {
    let fs = FaultFs::new();
    let options = || Options::default().file_system(Arc::new(fs.clone()));
    for cut_after in 0..12 {
        let dir = format!("/store{cut_after}");
        fs.cut_power_after(cut_after);
        let first = Db::open(&dir, options());
        let cut = fs.power_is_cut();
        drop(first);
        fs.crash();
        let db = Db::open(&dir, options())
            .unwrap_or_else(|e| panic!("cut after {cut_after} (cut: {cut}): reopen failed: {e}"));
        db.put(b"k", b"v").unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    }
}
