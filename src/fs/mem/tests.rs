use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::{CrashMode, FaultFs, PAGE_SIZE};
use crate::error::Error;
use crate::fs::FileSystem;

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

/// A file system holding the directory `/db`, durably.
fn fresh() -> FaultFs {
    let fs = FaultFs::new();
    fs.create_dir_all(&dir()).unwrap();
    fs.sync_dir(Path::new("/")).unwrap();
    fs
}

fn path(name: &str) -> PathBuf {
    dir().join(name)
}

fn io_kind(e: &Error) -> Option<ErrorKind> {
    match e {
        Error::Io { source, .. } => Some(source.kind()),
        _ => None,
    }
}

/// Writes `synced` and syncs, then `unsynced` without syncing; the directory is synced.
fn write_file(fs: &FaultFs, p: &Path, synced: &[u8], unsynced: &[u8]) {
    let mut f = fs.create(p).unwrap();
    f.append(synced).unwrap();
    f.sync().unwrap();
    f.append(unsynced).unwrap();
    f.flush().unwrap();
    fs.sync_dir(p.parent().unwrap()).unwrap();
}

#[test]
fn synced_bytes_survive_a_crash_and_unsynced_do_not() {
    let fs = fresh();
    let p = path("a");
    write_file(&fs, &p, b"durable", b" volatile");
    assert_eq!(fs.read_all(&p).unwrap(), b"durable volatile");
    fs.crash();
    assert_eq!(fs.read_all(&p).unwrap(), b"durable");
}

#[test]
fn a_file_whose_directory_was_never_synced_disappears() {
    let fs = fresh();
    let p = path("new");
    let mut f = fs.create(&p).unwrap();
    f.append(b"data").unwrap();
    f.sync().unwrap();
    assert!(fs.exists(&p));
    fs.crash();
    assert!(!fs.exists(&p));
    assert!(fs.read_all(&p).is_err());
    assert_eq!(fs.list(&dir()).unwrap(), Vec::<String>::new());
}

#[test]
fn an_unsynced_rename_is_undone_and_a_synced_one_is_kept() {
    let fs = fresh();
    let (a, b) = (path("a"), path("b"));
    write_file(&fs, &a, b"old-a", b"");
    write_file(&fs, &b, b"old-b", b"");
    let tmp = path("tmp");
    write_file(&fs, &tmp, b"new", b"");
    fs.rename(&tmp, &a).unwrap();
    assert_eq!(fs.read_all(&a).unwrap(), b"new");
    assert!(!fs.exists(&tmp));
    fs.crash();
    assert_eq!(fs.read_all(&a).unwrap(), b"old-a");
    assert_eq!(fs.read_all(&tmp).unwrap(), b"new");

    fs.rename(&tmp, &b).unwrap();
    fs.sync_dir(&dir()).unwrap();
    fs.crash();
    assert_eq!(fs.read_all(&b).unwrap(), b"new");
    assert!(!fs.exists(&tmp));
    assert_eq!(fs.list(&dir()).unwrap(), vec!["a", "b"]);
}

#[test]
fn an_unsynced_removal_comes_back() {
    let fs = fresh();
    let p = path("gone");
    write_file(&fs, &p, b"keep me", b"");
    fs.remove(&p).unwrap();
    assert!(!fs.exists(&p));
    fs.crash();
    assert_eq!(fs.read_all(&p).unwrap(), b"keep me");
    fs.remove(&p).unwrap();
    fs.sync_dir(&dir()).unwrap();
    fs.crash();
    assert!(!fs.exists(&p));
}

#[test]
fn sync_dir_covers_only_its_own_directory() {
    let fs = fresh();
    let other = PathBuf::from("/other");
    fs.create_dir_all(&other).unwrap();
    let (p, q) = (path("x"), other.join("y"));
    for f in [&p, &q] {
        let mut w = fs.create(f).unwrap();
        w.append(b"1").unwrap();
        w.sync().unwrap();
    }
    fs.sync_dir(&dir()).unwrap();
    fs.crash();
    assert!(fs.exists(&p));
    assert!(!fs.exists(&q));
}

#[test]
fn truncating_create_keeps_the_old_durable_content_until_sync() {
    let fs = fresh();
    let p = path("f");
    write_file(&fs, &p, b"first version", b"");
    let mut f = fs.create(&p).unwrap();
    f.append(b"second").unwrap();
    drop(f);
    fs.crash();
    assert_eq!(fs.read_all(&p).unwrap(), b"first version");
    let mut f = fs.create(&p).unwrap();
    f.append(b"second").unwrap();
    f.sync().unwrap();
    fs.crash();
    assert_eq!(fs.read_all(&p).unwrap(), b"second");
}

#[test]
fn handles_opened_before_a_crash_are_invalidated() {
    let fs = fresh();
    let p = path("h");
    write_file(&fs, &p, b"abc", b"");
    let mut w = fs.open_append(&p).unwrap();
    assert_eq!(w.len(), 3);
    let r = fs.open_read(&p).unwrap();
    fs.crash();
    assert!(w.append(b"x").is_err());
    assert!(w.sync().is_err());
    assert!(r.read_at(0, 1).is_err());
    drop(w);
    drop(r);
    // New handles work.
    let mut w = fs.open_append(&p).unwrap();
    w.append(b"d").unwrap();
    assert_eq!(fs.open_read(&p).unwrap().read_at(0, 4).unwrap(), b"abcd");
}

#[test]
fn positioned_reads_check_bounds() {
    let fs = fresh();
    let p = path("r");
    write_file(&fs, &p, b"0123456789", b"");
    let r = fs.open_read(&p).unwrap();
    assert_eq!(r.size(), 10);
    assert_eq!(r.read_at(2, 3).unwrap(), b"234");
    assert_eq!(r.read_at(10, 0).unwrap(), b"");
    assert!(r.read_at(8, 3).unwrap_err().is_corruption());
    assert!(r.read_at(u64::MAX, 2).unwrap_err().is_corruption());
    assert!(r.read_at(1, usize::MAX).unwrap_err().is_corruption());
}

#[test]
fn the_nth_append_fails_once() {
    let fs = fresh();
    let p = path("w");
    let mut f = fs.create(&p).unwrap();
    fs.fail_nth_append(3);
    f.append(b"1").unwrap();
    f.append(b"2").unwrap();
    let err = f.append(b"3").unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    f.append(b"4").unwrap();
    f.append(b"5").unwrap();
    assert_eq!(fs.read_all(&p).unwrap(), b"1245");
    assert_eq!(f.len(), 4);
}

#[test]
fn a_failed_sync_makes_nothing_durable_and_fires_once() {
    let fs = fresh();
    let p = path("s");
    write_file(&fs, &p, b"", b"");
    let mut f = fs.open_append(&p).unwrap();
    f.append(b"abc").unwrap();
    fs.fail_next_sync();
    assert!(f.sync().is_err());
    fs.crash();
    assert_eq!(fs.read_all(&p).unwrap(), b"");

    let mut f = fs.open_append(&p).unwrap();
    f.append(b"abc").unwrap();
    fs.fail_next_sync();
    assert!(f.sync().is_err());
    f.sync().unwrap();
    fs.crash();
    assert_eq!(fs.read_all(&p).unwrap(), b"abc");
}

#[test]
fn a_failed_dir_sync_leaves_entries_volatile() {
    let fs = fresh();
    let p = path("d");
    let mut f = fs.create(&p).unwrap();
    f.sync().unwrap();
    fs.fail_next_dir_sync();
    assert!(fs.sync_dir(&dir()).is_err());
    fs.crash();
    assert!(!fs.exists(&p));
}

#[test]
fn the_disk_fills_up_after_the_allowed_bytes() {
    let fs = fresh();
    let p = path("full");
    let mut f = fs.create(&p).unwrap();
    fs.set_space_left(Some(5));
    f.append(b"abc").unwrap();
    let err = f.append(b"def").unwrap_err();
    assert_eq!(io_kind(&err), Some(ErrorKind::StorageFull), "{err}");
    f.append(b"de").unwrap();
    assert!(f.append(b"f").is_err());
    assert_eq!(fs.read_all(&p).unwrap(), b"abcde");
    fs.set_space_left(None);
    f.append(b"f").unwrap();
    assert_eq!(fs.read_all(&p).unwrap(), b"abcdef");
}

#[test]
fn read_faults_fire_as_configured() {
    let fs = fresh();
    let p = path("rf");
    write_file(&fs, &p, b"xyz", b"");
    let r = fs.open_read(&p).unwrap();
    fs.fail_nth_read(2);
    r.read_at(0, 1).unwrap();
    assert!(fs.read_all(&p).is_err());
    r.read_at(0, 1).unwrap();
    fs.read_all(&p).unwrap();
    fs.set_reads_fail(true);
    assert!(r.read_at(0, 1).is_err());
    assert!(fs.read_all(&p).is_err());
    fs.set_reads_fail(false);
    assert_eq!(r.read_at(0, 3).unwrap(), b"xyz");
}

#[test]
fn cutting_the_power_fails_everything_until_the_crash() {
    let fs = fresh();
    let p = path("p");
    fs.cut_power_after(2);
    let mut f = fs.create(&p).unwrap(); // 1
    f.append(b"a").unwrap(); // 2
    assert!(f.sync().is_err());
    assert!(fs.power_is_cut());
    assert!(fs.sync_dir(&dir()).is_err());
    assert!(fs.create(&path("q")).is_err());
    assert!(fs.read_all(&p).is_err());
    fs.crash();
    assert!(!fs.power_is_cut());
    assert!(!fs.exists(&p));
    fs.create(&path("q")).unwrap();
}

#[test]
fn locks_exclude_each_other_until_dropped() {
    let fs = fresh();
    let p = path("LOCK");
    let first = fs.lock(&p).unwrap();
    assert!(matches!(fs.lock(&p), Err(Error::Locked { .. })));
    let other = fs.lock(&path("LOCK2")).unwrap();
    drop(first);
    let again = fs.lock(&p).unwrap();
    drop(other);
    // A crash ends the holder; the stale guard's drop must not release the new holder's lock.
    fs.crash();
    let after = fs.lock(&p).unwrap();
    drop(again);
    assert!(matches!(fs.lock(&p), Err(Error::Locked { .. })));
    drop(after);
    fs.lock(&p).unwrap();
}

#[test]
fn missing_files_and_directories_are_io_errors() {
    let fs = fresh();
    let nowhere = Path::new("/nowhere/f");
    assert!(fs.create(nowhere).is_err());
    assert!(fs.open_append(&path("none")).is_err());
    assert!(fs.open_read(&path("none")).is_err());
    assert!(fs.read_all(&path("none")).is_err());
    assert!(fs.rename(&path("none"), &path("x")).is_err());
    assert!(fs.remove(&path("none")).is_err());
    assert!(fs.sync_dir(Path::new("/nowhere")).is_err());
    assert!(fs.list(Path::new("/nowhere")).is_err());
    fs.create_dir_all(Path::new("/nowhere/deep")).unwrap();
    assert_eq!(fs.list(Path::new("/nowhere")).unwrap(), vec!["deep"]);
    fs.create(nowhere).unwrap();
}

#[test]
fn removed_files_stay_readable_through_open_handles() {
    let fs = fresh();
    let p = path("open");
    write_file(&fs, &p, b"still here", b"");
    let r = fs.open_read(&p).unwrap();
    fs.remove(&p).unwrap();
    fs.sync_dir(&dir()).unwrap();
    assert_eq!(r.read_at(0, 10).unwrap(), b"still here");
}

fn crash_with(mode: CrashMode, unsynced: &[u8]) -> Vec<u8> {
    let fs = fresh();
    fs.set_crash_mode(mode);
    let p = path("t");
    write_file(&fs, &p, b"head", unsynced);
    fs.crash();
    fs.read_all(&p).unwrap()
}

#[test]
fn torn_crash_modes_keep_a_prefix_then_fill() {
    let unsynced: Vec<u8> = (1..=200u8).collect();
    let mut saw_partial = false;
    for seed in 0..50 {
        let kept = crash_with(CrashMode::KeepPrefix { seed }, &unsynced);
        assert!(kept.len() >= 4 && kept.len() <= 204);
        assert_eq!(&kept[..4], b"head");
        assert_eq!(&kept[4..], &unsynced[..kept.len() - 4]);
        saw_partial |= kept.len() > 4 && kept.len() < 204;

        let zeroed = crash_with(CrashMode::ZeroTail { seed }, &unsynced);
        assert!(zeroed.len() <= 204);
        let body = &zeroed[4..];
        let intact = body
            .iter()
            .zip(&unsynced)
            .take_while(|(a, b)| a == b)
            .count();
        assert!(body[intact..].iter().all(|&b| b == 0));

        let garbled = crash_with(CrashMode::GarbageTail { seed }, &unsynced);
        assert!(garbled.len() <= 204);
        assert_eq!(&garbled[..4], b"head");
    }
    assert!(saw_partial);
    // The same seed tears the same way.
    assert_eq!(
        crash_with(CrashMode::GarbageTail { seed: 7 }, &unsynced),
        crash_with(CrashMode::GarbageTail { seed: 7 }, &unsynced)
    );
    assert_eq!(crash_with(CrashMode::DropUnsynced, &unsynced), b"head");
}

#[test]
fn a_directory_is_durable_only_after_its_parent_is_synced() {
    let fs = FaultFs::new();
    let store = PathBuf::from("/store");
    fs.create_dir_all(&store).unwrap();
    let p = store.join("f");
    write_file(&fs, &p, b"synced", b"");
    fs.crash();
    // The file and its directory entry were synced, but the directory's own entry was not.
    assert!(!fs.exists(&store));
    assert!(!fs.exists(&p));
    assert!(fs.list(Path::new("/")).unwrap().is_empty());

    fs.create_dir_all(&store).unwrap();
    write_file(&fs, &p, b"synced", b"");
    fs.sync_dir(Path::new("/")).unwrap();
    fs.crash();
    assert_eq!(fs.read_all(&p).unwrap(), b"synced");
}

#[test]
fn a_nested_directory_needs_every_parent_synced() {
    let fs = FaultFs::new();
    let (outer, inner) = (PathBuf::from("/a"), PathBuf::from("/a/b"));
    fs.create_dir_all(&inner).unwrap();
    fs.sync_dir(&outer).unwrap();
    let p = inner.join("f");
    write_file(&fs, &p, b"x", b"");
    fs.crash();
    assert!(!fs.exists(&outer) && !fs.exists(&inner) && !fs.exists(&p));

    fs.create_dir_all(&inner).unwrap();
    fs.sync_dir(&outer).unwrap();
    fs.sync_dir(Path::new("/")).unwrap();
    write_file(&fs, &p, b"x", b"");
    fs.crash();
    assert_eq!(fs.read_all(&p).unwrap(), b"x");
}

#[test]
fn set_contents_makes_the_directories_durable_too() {
    let fs = FaultFs::new();
    let p = PathBuf::from("/damaged/store/f");
    fs.set_contents(&p, b"bytes".to_vec());
    fs.crash();
    assert_eq!(fs.read_all(&p).unwrap(), b"bytes");
}

#[test]
fn creating_a_directory_counts_as_a_mutating_operation() {
    let fs = FaultFs::new();
    fs.cut_power_after(0);
    assert!(fs.create_dir_all(Path::new("/d")).is_err());
    assert!(fs.power_is_cut());
    fs.crash();
    assert!(!fs.exists(Path::new("/d")));
}

/// The unsynced part of a file after a crash in `LosePages` mode: `synced` bytes were synced,
/// then `unsynced` appended.
fn lose_pages(seed: u64, synced: &[u8], unsynced: &[u8]) -> Vec<u8> {
    let fs = fresh();
    fs.set_crash_mode(CrashMode::LosePages { seed });
    let p = path("paged");
    write_file(&fs, &p, synced, unsynced);
    fs.crash();
    fs.read_all(&p).unwrap()
}

#[test]
fn losing_pages_zeros_a_random_subset_of_unsynced_pages() {
    // Synced bytes end in the middle of page 1; 20 pages follow, none synced.
    let synced = vec![0xAAu8; PAGE_SIZE + 1000];
    let unsynced: Vec<u8> = (0..20 * PAGE_SIZE).map(|i| (i % 251) as u8 + 1).collect();
    let whole = [synced.clone(), unsynced.clone()].concat();
    let (mut saw_hole, mut saw_cut, mut saw_full_length) = (false, false, false);
    for seed in 0..60 {
        let got = lose_pages(seed, &synced, &unsynced);
        assert!(got.len() >= synced.len() && got.len() <= whole.len());
        assert_eq!(
            &got[..synced.len()],
            &synced[..],
            "seed {seed}: synced bytes changed"
        );
        saw_cut |= got.len() < whole.len();
        saw_full_length |= got.len() == whole.len();
        // Page by page, each unsynced part is either intact or all zeros.
        let mut lost = Vec::new();
        for start in (0..got.len()).step_by(PAGE_SIZE) {
            let from = start.max(synced.len());
            let end = (start + PAGE_SIZE).min(got.len());
            if from >= end {
                continue;
            }
            let (now, was) = (&got[from..end], &whole[from..end]);
            let zeros = now.iter().all(|&b| b == 0);
            assert!(now == was || zeros, "seed {seed}: page at {start} torn");
            lost.push(zeros);
        }
        // A hole: a lost page with a kept one after it.
        saw_hole |= lost
            .iter()
            .enumerate()
            .any(|(i, &l)| l && lost[i + 1..].iter().any(|&later| !later));
    }
    assert!(saw_hole && saw_cut && saw_full_length);
    assert_eq!(
        lose_pages(3, &synced, &unsynced),
        lose_pages(3, &synced, &unsynced),
        "the same seed loses the same pages"
    );
}

#[test]
fn losing_pages_never_touches_a_synced_file() {
    for seed in 0..20 {
        let synced: Vec<u8> = (0..3 * PAGE_SIZE + 17).map(|i| i as u8).collect();
        assert_eq!(lose_pages(seed, &synced, b""), synced);
    }
}
