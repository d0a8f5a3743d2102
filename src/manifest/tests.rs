use std::path::{Path, PathBuf};

use super::current::current_contents;
use super::{
    read_current, read_manifest, recover_manifest, set_current, KeyspaceRecord, LevelTotals,
    ManifestWriter, RecordedPolicy, RecoveredManifest, TableMeta, VersionEdit, WriteTotals,
};
use crate::error::Error;
use crate::filename::{manifest_file_name, CURRENT};
use crate::fs::{CrashMode, FaultFs, FileSystem};
use crate::sstable::FilterPolicy;

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

fn fresh() -> FaultFs {
    let fs = FaultFs::new();
    fs.create_dir_all(&dir()).unwrap();
    fs.sync_dir(Path::new("/")).unwrap();
    fs
}

fn table(number: u64, level: u32) -> TableMeta {
    TableMeta {
        keyspace: 0,
        number,
        level,
        file_size: 1000 + number * 17,
        smallest_key: format!("key{number:04}a").into_bytes(),
        largest_key: format!("key{number:04}z").into_bytes(),
        smallest_seq: number * 10,
        largest_seq: number * 10 + 9,
        entries: number * 3 + 1,
    }
}

fn snapshot() -> VersionEdit {
    VersionEdit {
        log_number: Some(4),
        next_file_number: Some(10),
        last_seq: Some(500),
        added: vec![table(5, 0), table(6, 1), table(7, 1)],
        removed: Vec::new(),
        write_totals: None,
        filter_policy: None,
        next_keyspace: None,
        keyspaces: Vec::new(),
        dropped_keyspaces: Vec::new(),
        added_ranges: Vec::new(),
        removed_ranges: Vec::new(),
        seq_times: Vec::new(),
    }
}

/// Edits after the snapshot: a flush, a compaction, a trivial move.
fn later_edits() -> Vec<VersionEdit> {
    vec![
        VersionEdit {
            log_number: Some(11),
            next_file_number: Some(13),
            last_seq: Some(900),
            added: vec![table(12, 0)],
            removed: Vec::new(),
            write_totals: None,
            filter_policy: None,
            next_keyspace: None,
            keyspaces: Vec::new(),
            dropped_keyspaces: Vec::new(),
            added_ranges: Vec::new(),
            removed_ranges: Vec::new(),
            seq_times: Vec::new(),
        },
        VersionEdit {
            log_number: None,
            next_file_number: Some(15),
            last_seq: None,
            added: vec![table(14, 1)],
            removed: vec![(0, 5), (1, 6)],
            write_totals: None,
            filter_policy: None,
            next_keyspace: None,
            keyspaces: Vec::new(),
            dropped_keyspaces: Vec::new(),
            added_ranges: Vec::new(),
            removed_ranges: Vec::new(),
            seq_times: Vec::new(),
        },
        VersionEdit {
            log_number: None,
            next_file_number: None,
            last_seq: Some(950),
            added: vec![table(12, 2)],
            removed: vec![(0, 12)],
            write_totals: None,
            filter_policy: None,
            next_keyspace: None,
            keyspaces: Vec::new(),
            dropped_keyspaces: Vec::new(),
            added_ranges: Vec::new(),
            removed_ranges: Vec::new(),
            seq_times: Vec::new(),
        },
    ]
}

/// The state after the snapshot and the first `applied` later edits.
fn expected_state(number: u64, applied: usize) -> (u64, u64, u64, Vec<(u32, u64)>) {
    let states = [
        (4, 10, 500, vec![(0, 5), (1, 6), (1, 7)]),
        (11, 13, 900, vec![(0, 5), (0, 12), (1, 6), (1, 7)]),
        (11, 15, 900, vec![(0, 12), (1, 7), (1, 14)]),
        (11, 15, 950, vec![(1, 7), (1, 14), (2, 12)]),
    ];
    let (log, next, seq, tables) = states[applied].clone();
    (log, next.max(number + 1), seq, tables)
}

fn summary(r: &RecoveredManifest) -> (u64, u64, u64, Vec<(u32, u64)>) {
    (
        r.log_number,
        r.next_file_number,
        r.last_seq,
        r.tables.iter().map(|t| (t.level, t.number)).collect(),
    )
}

/// A store whose manifest 3 holds the snapshot and every later edit.
fn store_with_manifest() -> FaultFs {
    let fs = fresh();
    let mut w = ManifestWriter::create(&fs, &dir(), 3, &snapshot()).unwrap();
    for e in later_edits() {
        w.append(&e).unwrap();
    }
    fs
}

fn manifest_path(n: u64) -> PathBuf {
    dir().join(manifest_file_name(n))
}

#[test]
fn version_edits_round_trip() {
    let mut edits = vec![VersionEdit::default(), snapshot()];
    edits.extend(later_edits());
    edits.push(VersionEdit {
        log_number: Some(u64::MAX),
        next_file_number: Some(0),
        last_seq: Some(1 << 63),
        added: vec![TableMeta {
            keyspace: 0,
            number: u64::MAX,
            level: u32::MAX,
            file_size: 0,
            smallest_key: Vec::new(),
            largest_key: vec![0xFF; 300],
            smallest_seq: 0,
            largest_seq: u64::MAX,
            entries: 127,
        }],
        removed: vec![(u32::MAX, u64::MAX), (0, 0)],
        write_totals: Some(WriteTotals {
            user_bytes: u64::MAX,
            stall_micros: 7,
            levels: vec![
                LevelTotals {
                    bytes_written: 1 << 40,
                    ..LevelTotals::default()
                };
                3
            ],
            ..WriteTotals::default()
        }),
        filter_policy: Some(RecordedPolicy::of(&FilterPolicy::FalsePositiveRate(0.001))),
        next_keyspace: None,
        keyspaces: Vec::new(),
        dropped_keyspaces: Vec::new(),
        added_ranges: Vec::new(),
        removed_ranges: Vec::new(),
        seq_times: Vec::new(),
    });
    edits.push(keyspace_edit());
    // Every kind of policy round-trips.
    for policy in [
        FilterPolicy::Disabled,
        FilterPolicy::FalsePositiveRate(0.01),
        FilterPolicy::BitsPerKeyBudget(7.5),
        FilterPolicy::WastedReadsTarget(0.05),
        FilterPolicy::Params(crate::filter::FilterParams::new(12, 4).unwrap()),
    ] {
        let record = RecordedPolicy::of(&policy);
        assert_eq!(record.policy(), Some(policy));
        edits.push(VersionEdit {
            filter_policy: Some(record),
            ..VersionEdit::default()
        });
    }
    for e in edits {
        let bytes = e.encode();
        assert_eq!(VersionEdit::decode(&bytes).unwrap(), e);
    }
    assert!(VersionEdit::default().encode().is_empty());
}

/// An edit with every keyspace field: a keyspace made with each option set, one with none,
/// one dropped, and tables of the default keyspace and of another.
fn keyspace_edit() -> VersionEdit {
    let options = crate::keyspace::KeyspaceOptions::new();
    VersionEdit {
        next_keyspace: Some(7),
        keyspaces: vec![
            KeyspaceRecord {
                id: 5,
                name: "users".into(),
                options: options
                    .filter_policy(FilterPolicy::FalsePositiveRate(0.001))
                    .compression(crate::sstable::Compression::None)
                    .bottom_compression(crate::sstable::Compression::Zstd)
                    .ttl(std::time::Duration::from_secs(3600))
                    .block_size(16 << 10)
                    .memtable_size(1 << 20),
            },
            KeyspaceRecord {
                id: 6,
                name: "ünïcode".into(),
                options,
            },
        ],
        dropped_keyspaces: vec![3],
        added: vec![
            table(40, 0),
            TableMeta {
                keyspace: 5,
                ..table(41, 2)
            },
        ],
        ..snapshot()
    }
}

#[test]
fn keyspace_fields_leave_an_edit_without_them_as_it_was() {
    // Tables of the default keyspace keep their tag, and no keyspace field is written for a
    // store without keyspaces: its manifest reads in an older bloomkv.
    let small = VersionEdit {
        log_number: Some(4),
        added: vec![TableMeta {
            keyspace: 0,
            number: 2,
            level: 0,
            file_size: 3,
            smallest_key: b"a".to_vec(),
            largest_key: b"b".to_vec(),
            smallest_seq: 1,
            largest_seq: 2,
            entries: 1,
        }],
        ..VersionEdit::default()
    };
    let before_keyspaces = [1, 4, 5, 0, 2, 3, 1, b'a', 1, b'b', 1, 2, 1];
    assert_eq!(small.encode(), before_keyspaces);
    let edit = keyspace_edit();
    let bytes = edit.encode();
    let decoded = VersionEdit::decode(&bytes).unwrap();
    // Tables are kept in their order within each keyspace: the default's first.
    assert_eq!(decoded.added[0].keyspace, 0);
    assert_eq!(decoded.added[1].keyspace, 5);
    assert_eq!(decoded, edit);
    // A table added to keyspace 0 by the keyspace tag is not the shortest form: refused.
    let mut bad = VersionEdit::default().encode();
    bad.extend([11, 0]);
    assert!(VersionEdit::decode(&bad).unwrap_err().is_corruption());
}

#[test]
fn decoding_is_strict_for_every_cut_and_byte_change() {
    let mut edit = snapshot();
    edit.removed = vec![(1, 2), (3, 4)];
    for edit in [edit, keyspace_edit()] {
        strict_for_every_cut_and_byte_change(&edit);
    }
}

fn strict_for_every_cut_and_byte_change(edit: &VersionEdit) {
    let bytes = edit.encode();
    // Each cut or change either fails or is itself a valid encoding of what it decodes to.
    for cut in 0..bytes.len() {
        match VersionEdit::decode(&bytes[..cut]) {
            Ok(e) => assert_eq!(e.encode(), &bytes[..cut], "cut {cut}"),
            Err(e) => assert!(e.is_corruption()),
        }
    }
    let mut rejected = 0;
    for at in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xFF, 0x7F] {
            let mut bad = bytes.clone();
            bad[at] ^= mask;
            match VersionEdit::decode(&bad) {
                Ok(e) => assert_eq!(e.encode(), bad, "byte {at} ^ {mask:#x}"),
                Err(e) => {
                    assert!(e.is_corruption());
                    rejected += 1;
                }
            }
        }
    }
    assert!(rejected > 0);
}

#[test]
fn malformed_edits_are_corruption() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("unknown tag", vec![12, 1]),
        ("zero tag", vec![0]),
        ("tags out of order", vec![2, 1, 1, 1]),
        ("repeated counter", vec![1, 1, 1, 2]),
        ("added before removed", {
            let mut v = VersionEdit {
                added: vec![table(1, 0)],
                ..VersionEdit::default()
            }
            .encode();
            v.extend([4, 0, 1]);
            v
        }),
        ("varint cut short", vec![1, 0x80]),
        ("varint not shortest", vec![1, 0x81, 0x00]),
        ("varint overflow", {
            let mut v = vec![1];
            v.extend([0xFF; 9]);
            v.push(0x02);
            v
        }),
        ("varint too long", {
            let mut v = vec![1];
            v.extend([0x80; 10]);
            v.push(0x01);
            v
        }),
        ("level above u32", vec![4, 0x80, 0x80, 0x80, 0x80, 0x10, 1]),
        ("key longer than the edit", vec![5, 0, 1, 1, 50, b'a']),
        ("key length overflow", {
            let mut v = vec![5, 0, 1, 1];
            v.extend([0xFF; 9]);
            v.push(0x01);
            v
        }),
    ];
    for (what, bytes) in cases {
        match VersionEdit::decode(&bytes) {
            Err(Error::Corruption { .. }) => {}
            other => panic!("{what}: expected corruption, got {other:?}"),
        }
    }
}

#[test]
fn a_manifest_round_trips_through_recovery() {
    let fs = store_with_manifest();
    assert_eq!(read_current(&fs, &dir()).unwrap(), Some(3));
    let r = recover_manifest(&fs, &dir()).unwrap();
    assert_eq!(r.manifest_number, 3);
    assert_eq!(r.torn_tail, None);
    assert_eq!(summary(&r), expected_state(3, 3));
    // Full metadata survives, including a table moved between levels.
    let moved = r.tables.iter().find(|t| t.number == 12).unwrap();
    assert_eq!(moved, &table(12, 2));
    // And it survives a power loss: every edit was synced.
    fs.crash();
    assert_eq!(recover_manifest(&fs, &dir()).unwrap(), r);
}

#[test]
fn next_file_number_never_falls_below_a_used_number() {
    let fs = fresh();
    let snap = VersionEdit {
        log_number: Some(40),
        next_file_number: Some(2),
        last_seq: Some(0),
        added: vec![table(30, 0)],
        removed: Vec::new(),
        write_totals: None,
        filter_policy: None,
        next_keyspace: None,
        keyspaces: Vec::new(),
        dropped_keyspaces: Vec::new(),
        added_ranges: Vec::new(),
        removed_ranges: Vec::new(),
        seq_times: Vec::new(),
    };
    ManifestWriter::create(&fs, &dir(), 20, &snap).unwrap();
    assert_eq!(recover_manifest(&fs, &dir()).unwrap().next_file_number, 41);
}

#[test]
fn a_snapshot_must_set_every_counter() {
    let fs = fresh();
    for strip in 0..3 {
        let mut s = snapshot();
        match strip {
            0 => s.log_number = None,
            1 => s.next_file_number = None,
            _ => s.last_seq = None,
        }
        assert!(matches!(
            ManifestWriter::create(&fs, &dir(), 3, &s),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert_eq!(read_current(&fs, &dir()).unwrap(), None);
}

#[test]
fn a_new_store_has_no_current() {
    let fs = fresh();
    assert_eq!(read_current(&fs, &dir()).unwrap(), None);
    let err = recover_manifest(&fs, &dir()).unwrap_err();
    assert!(err.is_corruption());
}

#[test]
fn current_naming_a_missing_manifest_is_corruption() {
    let fs = fresh();
    set_current(&fs, &dir(), 8).unwrap();
    assert_eq!(read_current(&fs, &dir()).unwrap(), Some(8));
    match recover_manifest(&fs, &dir()) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, manifest_path(8)),
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn current_has_the_documented_form() {
    assert_eq!(
        current_contents(123),
        format!(
            "MANIFEST-000123 {:08x}\n",
            crc32fast::hash(b"MANIFEST-000123")
        )
    );
}

#[test]
fn every_cut_or_changed_byte_of_current_is_corruption() {
    let fs = store_with_manifest();
    let path = dir().join(CURRENT);
    let good = fs.contents(&path).unwrap();
    for cut in 0..good.len() {
        fs.set_contents(&path, good[..cut].to_vec());
        match recover_manifest(&fs, &dir()) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, path, "cut {cut}"),
            other => panic!("cut {cut}: expected corruption, got {other:?}"),
        }
    }
    for at in 0..good.len() {
        for mask in [0x01u8, 0x20, 0x80, 0xFF] {
            let mut bad = good.clone();
            bad[at] ^= mask;
            fs.set_contents(&path, bad);
            match read_current(&fs, &dir()) {
                Err(Error::Corruption { file, .. }) => assert_eq!(file, path),
                other => panic!("byte {at} ^ {mask:#x}: expected corruption, got {other:?}"),
            }
        }
    }
    fs.set_contents(&path, [good.clone(), b"extra".to_vec()].concat());
    assert!(read_current(&fs, &dir()).unwrap_err().is_corruption());
    fs.set_contents(&path, good);
    assert_eq!(read_current(&fs, &dir()).unwrap(), Some(3));
}

/// Offsets where each edit of manifest 3 ends, in the file written by `store_with_manifest`.
fn edit_ends() -> Vec<u64> {
    let fs = fresh();
    let mut ends = Vec::new();
    let mut w = ManifestWriter::create(&fs, &dir(), 3, &snapshot()).unwrap();
    ends.push(w.len());
    for e in later_edits() {
        w.append(&e).unwrap();
        ends.push(w.len());
    }
    ends
}

/// Bytes of the sync mark the writer puts before each edit after the first.
const MARK_SIZE: u64 = (crate::wal::HEADER_SIZE + crate::wal::SYNC_MARK_LEN) as u64;

#[test]
fn every_truncation_of_the_manifest_is_a_torn_tail_or_corruption() {
    let fs = store_with_manifest();
    let path = manifest_path(3);
    let good = fs.contents(&path).unwrap();
    let ends = edit_ends();
    assert_eq!(*ends.last().unwrap(), good.len() as u64);
    // Each edit after the first follows a sync mark; a cut right after one is clean too.
    let mark_ends: Vec<u64> = ends.iter().map(|e| e + MARK_SIZE).collect();
    for cut in 0..=good.len() {
        fs.set_contents(&path, good[..cut].to_vec());
        let cut = cut as u64;
        let complete = ends.iter().take_while(|&&e| e <= cut).count();
        match recover_manifest(&fs, &dir()) {
            Ok(r) => {
                assert!(complete >= 1, "cut {cut}");
                assert_eq!(summary(&r), expected_state(3, complete - 1), "cut {cut}");
                let clean = ends.contains(&cut) || mark_ends.contains(&cut);
                assert_eq!(r.torn_tail.is_some(), !clean, "cut {cut}");
            }
            Err(Error::Corruption { file, .. }) => {
                assert_eq!(complete, 0, "cut {cut}");
                assert_eq!(file, path);
            }
            Err(e) => panic!("cut {cut}: {e}"),
        }
    }
}

#[test]
fn a_changed_byte_in_the_manifest_is_corruption_unless_in_the_last_edit() {
    let fs = store_with_manifest();
    let path = manifest_path(3);
    let good = fs.contents(&path).unwrap();
    let ends = edit_ends();
    // The last edit and the sync mark before it: nothing after them proves them synced.
    let last_start = ends[ends.len() - 2] as usize;
    for at in 0..good.len() {
        let mut bad = good.clone();
        bad[at] ^= 0x04;
        fs.set_contents(&path, bad);
        match recover_manifest(&fs, &dir()) {
            Ok(r) => {
                assert!(
                    at >= last_start + MARK_SIZE as usize,
                    "change at {at} accepted"
                );
                assert_eq!(summary(&r), expected_state(3, 2));
                assert!(r.torn_tail.is_some());
            }
            Err(Error::Corruption { file, .. }) => {
                // A damaged mark before the intact last edit is corruption too: every edit is
                // synced before the next is written.
                assert!(
                    at < last_start + MARK_SIZE as usize,
                    "change at {at} in the last edit"
                );
                assert_eq!(file, path);
            }
            Err(e) => panic!("change at {at}: {e}"),
        }
    }
}

#[test]
fn a_damaged_edit_before_intact_ones_is_corruption_even_without_sync_marks() {
    // A manifest as written before sync marks existed: the same edits, no marks.
    let fs = fresh();
    let path = manifest_path(3);
    let mut log = crate::wal::LogWriter::new(fs.create(&path).unwrap());
    let mut ends = Vec::new();
    for edit in std::iter::once(snapshot()).chain(later_edits()) {
        log.add_record(&edit.encode()).unwrap();
        ends.push(log.len());
    }
    log.flush().unwrap();
    let good = fs.contents(&path).unwrap();
    assert_eq!(
        read_manifest(&fs, &path, 3).map(|r| summary(&r)).unwrap(),
        expected_state(3, 3)
    );
    let mut bad = good.clone();
    bad[ends[1] as usize + 9] ^= 0x01;
    fs.set_contents(&path, bad);
    match read_manifest(&fs, &path, 3) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, path);
            assert_eq!(offset, Some(ends[1]));
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn keyspace_records_with_sizes_the_options_refuse_are_corruption() {
    let options = crate::keyspace::KeyspaceOptions::new();
    for bad in [
        options.block_size(63),
        options.block_size(crate::sstable::MAX_BLOCK_SIZE + 1),
        options.memtable_size(1023),
    ] {
        let edit = VersionEdit {
            keyspaces: vec![KeyspaceRecord {
                id: 1,
                name: "k".into(),
                options: bad,
            }],
            ..VersionEdit::default()
        };
        assert!(VersionEdit::decode(&edit.encode())
            .unwrap_err()
            .is_corruption());
    }
}

#[test]
fn keyspaces_are_made_changed_and_dropped_through_edits() {
    let fs = fresh();
    let record = |id, name: &str| KeyspaceRecord {
        id,
        name: name.into(),
        options: crate::keyspace::KeyspaceOptions::new(),
    };
    let mut w = ManifestWriter::create(&fs, &dir(), 3, &snapshot()).unwrap();
    for edit in [
        VersionEdit {
            next_keyspace: Some(2),
            keyspaces: vec![record(1, "a")],
            ..VersionEdit::default()
        },
        VersionEdit {
            added: vec![TableMeta {
                keyspace: 1,
                ..table(20, 0)
            }],
            ..VersionEdit::default()
        },
        VersionEdit {
            next_keyspace: Some(3),
            keyspaces: vec![record(2, "b")],
            ..VersionEdit::default()
        },
        VersionEdit {
            removed: vec![(0, 20)],
            dropped_keyspaces: vec![1],
            ..VersionEdit::default()
        },
    ] {
        w.append(&edit).unwrap();
    }
    let r = recover_manifest(&fs, &dir()).unwrap();
    assert_eq!(r.keyspaces, vec![record(2, "b")]);
    assert_eq!(r.next_keyspace, 3);
    assert!(r.tables.iter().all(|t| t.keyspace == 0));
}

#[test]
fn keyspace_edits_that_contradict_the_manifest_are_corruption() {
    let record = |id, name: &str| KeyspaceRecord {
        id,
        name: name.into(),
        options: crate::keyspace::KeyspaceOptions::new(),
    };
    let in_keyspace = |keyspace| TableMeta {
        keyspace,
        ..table(20, 0)
    };
    for (what, bad_edit) in [
        (
            "a table of a keyspace never made",
            VersionEdit {
                added: vec![in_keyspace(10)],
                ..VersionEdit::default()
            },
        ),
        (
            "a drop of a keyspace never made",
            VersionEdit {
                dropped_keyspaces: vec![10],
                ..VersionEdit::default()
            },
        ),
        (
            "a drop that leaves the keyspace's tables",
            VersionEdit {
                keyspaces: vec![record(10, "x")],
                added: vec![in_keyspace(10)],
                dropped_keyspaces: vec![10],
                ..VersionEdit::default()
            },
        ),
        (
            "two keyspaces of one name",
            VersionEdit {
                keyspaces: vec![record(10, "x"), record(11, "x")],
                ..VersionEdit::default()
            },
        ),
        (
            "a keyspace number used before",
            VersionEdit {
                keyspaces: vec![record(8, "late")],
                ..VersionEdit::default()
            },
        ),
        (
            "a keyspace named as the default",
            VersionEdit {
                keyspaces: vec![record(10, "default")],
                ..VersionEdit::default()
            },
        ),
    ] {
        let fs = fresh();
        let numbered = VersionEdit {
            next_keyspace: Some(9),
            ..snapshot()
        };
        let mut w = ManifestWriter::create(&fs, &dir(), 3, &numbered).unwrap();
        w.append(&bad_edit).unwrap();
        let err = recover_manifest(&fs, &dir()).unwrap_err();
        assert!(err.is_corruption(), "{what}: {err}");
    }
}

fn deletion(start: &[u8], end: &[u8], seq: u64) -> crate::range_tombstone::RangeTombstone {
    crate::range_tombstone::RangeTombstone {
        start: start.to_vec(),
        end: end.to_vec(),
        seq,
    }
}

/// Range deletions come and go through edits (a flush adds them, a compaction removes or
/// trims them); a dropped keyspace's go with it; what is live is recovered.
#[test]
fn range_deletions_are_added_trimmed_and_dropped_through_edits() {
    let fs = fresh();
    let record = KeyspaceRecord {
        id: 1,
        name: "a".into(),
        options: crate::keyspace::KeyspaceOptions::new(),
    };
    let mut w = ManifestWriter::create(&fs, &dir(), 3, &snapshot()).unwrap();
    for edit in [
        VersionEdit {
            next_keyspace: Some(2),
            keyspaces: vec![record],
            added_ranges: vec![(0, deletion(b"a", b"m", 5)), (1, deletion(b"", b"z", 6))],
            ..VersionEdit::default()
        },
        VersionEdit {
            removed_ranges: vec![(0, deletion(b"a", b"m", 5))],
            seq_times: vec![(5, 1_700_000_000), (9, 1_700_000_001)],
            added_ranges: vec![(0, deletion(b"k", b"m", 5))],
            ..VersionEdit::default()
        },
        VersionEdit {
            dropped_keyspaces: vec![1],
            ..VersionEdit::default()
        },
    ] {
        let bytes = edit.encode();
        assert_eq!(VersionEdit::decode(&bytes).unwrap(), edit);
        strict_for_every_cut_and_byte_change(&edit);
        w.append(&edit).unwrap();
    }
    let r = recover_manifest(&fs, &dir()).unwrap();
    assert_eq!(r.range_tombstones, vec![(0, deletion(b"k", b"m", 5))]);
    assert_eq!(r.seq_times, vec![(5, 1_700_000_000), (9, 1_700_000_001)]);
}

#[test]
fn range_deletion_records_that_contradict_the_manifest_are_corruption() {
    for (what, bad_edit) in [
        (
            "a removal of a deletion not live",
            VersionEdit {
                removed_ranges: vec![(0, deletion(b"a", b"b", 1))],
                seq_times: Vec::new(),
                ..VersionEdit::default()
            },
        ),
        (
            "a deletion in a keyspace never made",
            VersionEdit {
                added_ranges: vec![(7, deletion(b"a", b"b", 1))],
                ..VersionEdit::default()
            },
        ),
        (
            "a deletion numbered past the last sequence number",
            VersionEdit {
                added_ranges: vec![(0, deletion(b"a", b"b", u64::MAX >> 9))],
                ..VersionEdit::default()
            },
        ),
        (
            "a sample of a sequence number no store may use",
            VersionEdit {
                seq_times: vec![(u64::MAX, 1)],
                ..VersionEdit::default()
            },
        ),
        (
            "a deletion whose end is not past its start",
            VersionEdit {
                added_ranges: vec![(0, deletion(b"b", b"a", 1))],
                ..VersionEdit::default()
            },
        ),
    ] {
        let fs = fresh();
        let mut w = ManifestWriter::create(&fs, &dir(), 3, &snapshot()).unwrap();
        w.append(&bad_edit).unwrap();
        let err = recover_manifest(&fs, &dir()).unwrap_err();
        assert!(err.is_corruption(), "{what}: {err}");
    }
}

#[test]
fn edits_that_contradict_the_live_set_are_corruption() {
    for bad_edit in [
        VersionEdit {
            removed: vec![(0, 99)],
            ..VersionEdit::default()
        },
        VersionEdit {
            removed: vec![(1, 5)], // table 5 lives at level 0
            ..VersionEdit::default()
        },
        VersionEdit {
            added: vec![table(6, 3)],
            ..VersionEdit::default()
        },
        VersionEdit {
            added: vec![TableMeta {
                keyspace: 0,
                smallest_key: b"z".to_vec(),
                largest_key: b"a".to_vec(),
                ..table(20, 0)
            }],
            ..VersionEdit::default()
        },
    ] {
        let fs = fresh();
        let mut w = ManifestWriter::create(&fs, &dir(), 3, &snapshot()).unwrap();
        w.append(&bad_edit).unwrap();
        w.append(&VersionEdit::default()).unwrap();
        let err = recover_manifest(&fs, &dir()).unwrap_err();
        assert!(err.is_corruption(), "{bad_edit:?}: {err}");
    }
}

#[test]
fn power_loss_anywhere_in_creating_a_manifest_leaves_old_or_new_current() {
    let new_snapshot = VersionEdit {
        log_number: Some(20),
        next_file_number: Some(22),
        last_seq: Some(2000),
        added: vec![table(21, 3)],
        removed: Vec::new(),
        write_totals: None,
        filter_policy: None,
        next_keyspace: None,
        keyspaces: Vec::new(),
        dropped_keyspaces: Vec::new(),
        added_ranges: Vec::new(),
        removed_ranges: Vec::new(),
        seq_times: Vec::new(),
    };
    let mut saw_old = false;
    let mut n = 0;
    loop {
        let fs = store_with_manifest();
        fs.cut_power_after(n);
        let created = ManifestWriter::create(&fs, &dir(), 16, &new_snapshot);
        let finished = created.is_ok();
        drop(created);
        fs.crash();
        let r = recover_manifest(&fs, &dir()).unwrap_or_else(|e| panic!("cut at {n}: {e}"));
        if r.manifest_number == 3 {
            assert_eq!(summary(&r), expected_state(3, 3), "cut at {n}");
            assert!(
                !finished,
                "cut at {n}: create returned but the old manifest is current"
            );
            saw_old = true;
        } else {
            assert_eq!(r.manifest_number, 16);
            assert_eq!(summary(&r), (20, 22, 2000, vec![(3, 21)]), "cut at {n}");
        }
        if finished {
            assert_eq!(r.manifest_number, 16);
            break;
        }
        n += 1;
        assert!(n < 100);
    }
    assert!(saw_old && n > 3);
}

#[test]
fn power_loss_anywhere_in_set_current_with_torn_writes() {
    for seed in 0..20 {
        let mut n = 0;
        loop {
            let fs = store_with_manifest();
            fs.set_crash_mode(CrashMode::GarbageTail { seed });
            // Manifest 16 exists and is durable; only the pointer switch is interrupted.
            let w = ManifestWriter::create(&fs, &dir(), 16, &snapshot()).unwrap();
            drop(w);
            set_current(&fs, &dir(), 3).unwrap();
            fs.cut_power_after(n);
            let done = set_current(&fs, &dir(), 16).is_ok();
            fs.crash();
            let current = read_current(&fs, &dir()).unwrap();
            assert!(current == Some(3) || current == Some(16), "{current:?}");
            if done {
                assert_eq!(current, Some(16));
                break;
            }
            n += 1;
            assert!(n < 50);
        }
    }
}

#[test]
fn an_unsynced_or_failed_append_is_lost_but_acknowledged_edits_are_not() {
    let fs = fresh();
    fs.set_crash_mode(CrashMode::KeepPrefix { seed: 9 });
    let mut w = ManifestWriter::create(&fs, &dir(), 3, &snapshot()).unwrap();
    let edits = later_edits();
    w.append(&edits[0]).unwrap();
    fs.fail_next_sync();
    assert!(w.append(&edits[1]).is_err());
    assert!(matches!(
        w.append(&edits[2]),
        Err(Error::WritesRefused { .. })
    ));
    fs.crash();
    let r = recover_manifest(&fs, &dir()).unwrap();
    // The edit whose sync failed may or may not have reached the disk; the acknowledged
    // ones did.
    let s = summary(&r);
    assert!(
        s == expected_state(3, 1) || s == expected_state(3, 2),
        "{s:?}"
    );
}

/// An edit whose record could not be written is never read back, whatever the crash keeps,
/// and the writer says so; one whose sync alone failed may be.
#[test]
fn a_failed_write_of_an_edit_is_known_never_to_be_read_back() {
    for seed in 0..8 {
        let fs = fresh();
        fs.set_crash_mode(CrashMode::GarbageTail { seed });
        let mut w = ManifestWriter::create(&fs, &dir(), 3, &snapshot()).unwrap();
        let edits = later_edits();
        w.append(&edits[0]).unwrap();
        fs.fail_nth_append(1);
        assert!(w.append(&edits[1]).is_err());
        assert!(!w.failed_edit_may_be_durable());
        fs.crash();
        let r = recover_manifest(&fs, &dir()).unwrap();
        assert_eq!(summary(&r), expected_state(3, 1), "seed {seed}");
    }
    let fs = fresh();
    let mut w = ManifestWriter::create(&fs, &dir(), 3, &snapshot()).unwrap();
    fs.fail_next_sync();
    assert!(w.append(&later_edits()[0]).is_err());
    assert!(w.failed_edit_may_be_durable());
}

#[test]
fn io_errors_while_recovering_are_not_reported_as_corruption() {
    let fs = store_with_manifest();
    fs.set_reads_fail(true);
    assert!(matches!(
        recover_manifest(&fs, &dir()),
        Err(Error::Io { .. })
    ));
    fs.set_reads_fail(false);
    fs.fail_nth_read(2);
    assert!(matches!(
        recover_manifest(&fs, &dir()),
        Err(Error::Io { .. })
    ));
    assert!(recover_manifest(&fs, &dir()).is_ok());
    assert!(read_manifest(&fs, &manifest_path(3), 3).is_ok());
}

#[test]
fn sequence_numbers_past_the_largest_a_store_may_use_are_corruption() {
    use crate::entry::MAX_SEQ;
    let mut too_high_last = snapshot();
    too_high_last.last_seq = Some(MAX_SEQ + 1);
    let mut too_high_table = snapshot();
    too_high_table.added[1].largest_seq = u64::MAX;
    for (what, edit) in [("last", too_high_last), ("table", too_high_table)] {
        let fs = fresh();
        let w = ManifestWriter::create(&fs, &dir(), 3, &edit).unwrap();
        drop(w);
        match recover_manifest(&fs, &dir()) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, manifest_path(3), "{what}");
                assert_eq!(offset, Some(0), "{what}");
            }
            other => panic!("{what}: expected corruption, got {other:?}"),
        }
    }
    let mut at_the_limit = snapshot();
    at_the_limit.last_seq = Some(MAX_SEQ);
    let fs = fresh();
    drop(ManifestWriter::create(&fs, &dir(), 3, &at_the_limit).unwrap());
    assert_eq!(recover_manifest(&fs, &dir()).unwrap().last_seq, MAX_SEQ);
}

#[test]
fn a_manifest_that_fails_before_becoming_current_is_removed() {
    for fault in ["append", "sync", "dir sync"] {
        let fs = fresh();
        ManifestWriter::create(&fs, &dir(), 1, &snapshot()).unwrap();
        match fault {
            "append" => fs.fail_nth_append(1),
            "sync" => fs.fail_next_sync(),
            _ => fs.fail_next_dir_sync(),
        }
        assert!(ManifestWriter::create(&fs, &dir(), 2, &snapshot()).is_err());
        let names = fs.list(&dir()).unwrap();
        assert!(
            !names.contains(&manifest_file_name(2)),
            "{fault}: the failed manifest was left in {names:?}"
        );
        assert_eq!(read_current(&fs, &dir()).unwrap(), Some(1), "{fault}");
    }
}

/// A recorded filter policy of an unknown kind, with a value no policy has, or cut short is
/// corruption at the policy's own byte.
#[test]
fn a_bad_filter_policy_record_is_corruption() {
    let good = VersionEdit {
        filter_policy: Some(RecordedPolicy::of(&FilterPolicy::FalsePositiveRate(0.01))),
        ..VersionEdit::default()
    }
    .encode();
    assert_eq!(good.len(), 1 + 1 + 8);
    let mut unknown = good.clone();
    unknown[1] = 9;
    let mut not_a_rate = good.clone();
    not_a_rate[2..].copy_from_slice(&1.5f64.to_bits().to_le_bytes());
    let cut = good[..good.len() - 1].to_vec();
    for (what, bytes) in [
        ("unknown kind", unknown),
        ("rate 1.5", not_a_rate),
        ("cut", cut),
    ] {
        match VersionEdit::decode(&bytes) {
            Err(Error::Corruption { offset, reason, .. }) => {
                assert!(
                    offset.is_some_and(|o| o >= 1),
                    "{what}: {offset:?} {reason}"
                );
                assert!(reason.contains("filter policy"), "{what}: {reason}");
            }
            other => panic!("{what}: expected corruption, got {other:?}"),
        }
    }
}
