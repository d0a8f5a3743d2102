//! Damaged files of every kind (WAL, table, manifest, CURRENT): a small store is built, then
//! one file at a time gets a byte flipped at many offsets or is truncated at many lengths.
//! Opening, `get`, scanning and `check_store_with` must then give either correct data or a
//! corruption error naming the damaged file: never a panic, never a wrong value, never a
//! silently missing key (except the WAL's own rule for its unsynced part: damage that no sync
//! mark after it shows synced, or a cut, is dropped with everything after it as a torn or
//! unsynced write, and what remains is a prefix of the write order). A failed open must leave
//! every file as it was.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv::check::check_store_with;
use bloomkv::fs::{FaultFs, FileSystem};
use bloomkv::{Db, Error, Options, WriteBatch, WriteOptions};

const DIR: &str = "/store";
const FLUSHED: u64 = 400;
const IN_WAL: u64 = 40;
const TOTAL: u64 = FLUSHED + IN_WAL;

type Files = BTreeMap<String, Vec<u8>>;

fn options(fs: &FaultFs) -> Options {
    common::small_tree_options().file_system(Arc::new(fs.clone()))
}

fn listing(fs: &FaultFs) -> Files {
    fs.list(Path::new(DIR))
        .unwrap()
        .into_iter()
        .map(|n| {
            let bytes = fs.contents(&Path::new(DIR).join(&n)).unwrap();
            (n, bytes)
        })
        .collect()
}

/// A store with several tables, a manifest with several edits, and keys in the WAL.
fn build_store() -> Files {
    let fs = FaultFs::new();
    let db = Db::open(DIR, options(&fs)).unwrap();
    for i in 0..FLUSHED {
        db.put(common::key(i), common::value(i, 0)).unwrap();
        if i % 150 == 149 {
            db.flush().unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    // Every fourth of the WAL's writes is synced, so the WAL holds sync marks: damage before
    // the last of them is corruption, damage after it reads as an unsynced hole or torn tail.
    for i in FLUSHED..TOTAL {
        let mut batch = WriteBatch::new();
        batch.put(common::key(i), common::value(i, 0));
        let sync = i % 4 == 3;
        db.write_opt(batch, &WriteOptions::default().sync(sync))
            .unwrap();
    }
    db.close().unwrap();
    listing(&fs)
}

fn restore(files: &Files) -> FaultFs {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new(DIR)).unwrap();
    for (name, bytes) in files {
        fs.set_contents(&Path::new(DIR).join(name), bytes.clone());
    }
    fs
}

#[derive(Default, Debug)]
struct Outcome {
    cases: u64,
    open_refused: u64,
    opened: u64,
    read_errors: u64,
    keys_dropped_as_torn_tail: u64,
}

fn names_file(e: &Error, file: &Path) -> bool {
    matches!(e, Error::Corruption { file: f, .. } if f == file)
}

/// Runs one damaged store; `torn_ok` allows the WAL's torn-tail rule (keys may be missing, as
/// long as what is there is a prefix).
fn run_case(files: &Files, damaged: &str, what: &str, torn_ok: bool, out: &mut Outcome) {
    out.cases += 1;
    let path: PathBuf = Path::new(DIR).join(damaged);
    let fs = restore(files);
    // check_store: reports the damage against the damaged file, or finds nothing wrong.
    match check_store_with(Arc::new(fs.clone()), Path::new(DIR)) {
        Ok(report) => {
            for p in &report.problems {
                // A damaged manifest that lost edits also shows as tables it names missing.
                let lost_table = damaged.starts_with("MANIFEST-")
                    && matches!(p, Error::Corruption { reason, .. } if reason.contains("missing"));
                assert!(
                    names_file(p, &path) || lost_table,
                    "{what}: check reported {p}"
                );
            }
        }
        Err(e) => assert!(names_file(&e, &path), "{what}: check failed with {e}"),
    }
    let db = match Db::open(DIR, options(&fs)) {
        Ok(db) => db,
        Err(e) => {
            assert!(names_file(&e, &path), "{what}: open failed with {e}");
            out.open_refused += 1;
            // A failed open deletes nothing and changes nothing that was there.
            let after = listing(&fs);
            for (name, bytes) in files {
                assert_eq!(after.get(name), Some(bytes), "{what}: {name} changed");
            }
            return;
        }
    };
    out.opened += 1;
    let mut missing = Vec::new();
    for i in 0..TOTAL {
        match db.get(common::key(i)) {
            Ok(Some(v)) => assert_eq!(v, common::value(i, 0), "{what}: wrong value for {i}"),
            Ok(None) => missing.push(i),
            Err(e) => {
                assert!(names_file(&e, &path), "{what}: get {i}: {e}");
                out.read_errors += 1;
            }
        }
    }
    if !missing.is_empty() {
        assert!(torn_ok, "{what}: keys {missing:?} silently missing");
        // Only a tail of the write order may be dropped.
        let first = missing[0];
        assert!(
            missing.iter().copied().eq(first..TOTAL) && first >= FLUSHED,
            "{what}: missing keys {missing:?} are not a WAL tail"
        );
        out.keys_dropped_as_torn_tail += missing.len() as u64;
    }
    let mut expected = 0u64;
    for item in db.iter() {
        match item {
            Ok((k, v)) => {
                while missing.contains(&expected) {
                    expected += 1;
                }
                assert_eq!(k, common::key(expected), "{what}: scan out of order");
                assert_eq!(v, common::value(expected, 0), "{what}: scan wrong value");
                expected += 1;
            }
            Err(e) => {
                assert!(names_file(&e, &path), "{what}: scan: {e}");
                break;
            }
        }
    }
}

fn offsets(len: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..len).step_by((len / 160).max(1)).collect();
    v.extend(len.saturating_sub(24)..len);
    v.sort_unstable();
    v.dedup();
    v
}

fn damage_each(files: &Files, name: &str, torn_ok: bool, out: &mut Outcome) {
    let original = &files[name];
    for (n, at) in offsets(original.len()).into_iter().enumerate() {
        let mut damaged = files.clone();
        let bytes = damaged.get_mut(name).unwrap();
        bytes[at] ^= if n % 2 == 0 { 0x01 } else { 0xa5 };
        run_case(
            &damaged,
            name,
            &format!("{name} byte {at} flipped"),
            torn_ok,
            out,
        );
    }
    for len in offsets(original.len()) {
        let mut damaged = files.clone();
        damaged.get_mut(name).unwrap().truncate(len);
        run_case(
            &damaged,
            name,
            &format!("{name} cut at {len}"),
            torn_ok,
            out,
        );
    }
}

fn pick(files: &Files, suffix: &str) -> String {
    files
        .iter()
        .filter(|(n, _)| n.ends_with(suffix) || n.starts_with(suffix))
        .max_by_key(|(_, b)| b.len())
        .map(|(n, _)| n.clone())
        .unwrap_or_else(|| panic!("no {suffix} file in {:?}", files.keys()))
}

#[test]
fn damaged_table_is_reported_never_misread() {
    let files = build_store();
    let mut out = Outcome::default();
    damage_each(&files, &pick(&files, ".sst"), false, &mut out);
    eprintln!("corruption table: {out:?}");
    assert!(out.open_refused + out.read_errors > 0);
}

#[test]
fn damaged_wal_is_reported_or_dropped_as_a_torn_tail() {
    let files = build_store();
    let mut out = Outcome::default();
    damage_each(&files, &pick(&files, ".log"), true, &mut out);
    eprintln!("corruption wal: {out:?}");
    assert!(out.open_refused > 0);
}

#[test]
fn damaged_manifest_is_reported_never_misread() {
    let files = build_store();
    let mut out = Outcome::default();
    damage_each(&files, &pick(&files, "MANIFEST-"), false, &mut out);
    eprintln!("corruption manifest: {out:?}");
    assert!(out.open_refused > 0);
}

#[test]
fn damaged_current_is_reported_never_misread() {
    let files = build_store();
    let mut out = Outcome::default();
    damage_each(&files, "CURRENT", false, &mut out);
    eprintln!("corruption CURRENT: {out:?}");
    assert!(out.open_refused > 0);
}
