use std::path::{Path, PathBuf};

use super::{
    parse_log, read_log, LogContents, LogWriter, RecoveryMode, TornTail, BLOCK_SIZE, HEADER_SIZE,
};
use crate::error::Error;
use crate::fs::{CrashMode, FaultFs, FileSystem};

pub(super) fn log_path() -> PathBuf {
    PathBuf::from("/db/000001.log")
}

/// A file system holding the directory `/db`, durably.
pub(super) fn fresh() -> FaultFs {
    let fs = FaultFs::new();
    fs.create_dir_all(Path::new("/db")).unwrap();
    fs.sync_dir(Path::new("/")).unwrap();
    fs
}

/// Deterministic bytes for record `i` of length `len`.
pub(super) fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| (j.wrapping_mul(31) ^ i.wrapping_mul(7919)) as u8)
        .collect()
}

/// Writes `records` to a fresh log and never syncs it, so it holds no sync mark (as logs
/// written before sync marks existed); returns the file bytes and each record's end offset.
pub(super) fn write_log(records: &[Vec<u8>]) -> (Vec<u8>, Vec<u64>) {
    let fs = fresh();
    let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
    let mut ends = Vec::new();
    for r in records {
        w.add_record(r).unwrap();
        ends.push(w.len());
    }
    w.flush().unwrap();
    (fs.contents(&log_path()).unwrap(), ends)
}

pub(super) fn parse(data: &[u8], mode: RecoveryMode) -> crate::Result<LogContents> {
    parse_log(&log_path(), data, mode)
}

pub(super) fn small_records() -> Vec<Vec<u8>> {
    vec![
        payload(0, 10),
        Vec::new(),
        payload(2, 100),
        payload(3, 1),
        payload(4, 250),
        payload(5, 40),
    ]
}

#[test]
fn round_trip_many_records() {
    let records: Vec<Vec<u8>> = (0..2000).map(|i| payload(i, (i * 37) % 700)).collect();
    let fs = fresh();
    let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
    assert!(w.is_empty());
    for r in &records {
        w.add_record(r).unwrap();
    }
    w.flush().unwrap();
    w.sync().unwrap();
    let got = read_log(&fs, &log_path(), RecoveryMode::default()).unwrap();
    assert_eq!(got.records, records);
    assert_eq!(got.torn_tail, None);
    assert_eq!(got.offsets.len(), records.len());
    assert_eq!(got.offsets[0], 0);
    assert!(got.offsets.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn round_trip_empty_log_and_empty_records() {
    let got = parse(&[], RecoveryMode::default()).unwrap();
    assert_eq!(got, LogContents::default());
    let records = vec![Vec::new(); 5];
    let (data, _) = write_log(&records);
    assert_eq!(data.len(), 5 * HEADER_SIZE);
    assert_eq!(
        parse(&data, RecoveryMode::default()).unwrap().records,
        records
    );
}

#[test]
fn round_trip_big_records_across_blocks() {
    let records = vec![
        payload(1, 3 * 1024 * 1024 + 17),
        payload(2, 5),
        payload(3, BLOCK_SIZE - HEADER_SIZE),
        payload(4, 2 * BLOCK_SIZE),
        payload(5, 6 * 1024 * 1024),
    ];
    let (data, _) = write_log(&records);
    let got = parse(&data, RecoveryMode::default()).unwrap();
    assert_eq!(got.torn_tail, None);
    assert_eq!(got.records.len(), records.len());
    for (a, b) in got.records.iter().zip(&records) {
        assert!(a == b);
    }
}

#[test]
fn records_fill_block_ends_exactly_and_with_padding() {
    // Leave 0..=8 bytes at the end of the first block before the next record.
    for leave in 0..=8 {
        let first = BLOCK_SIZE - HEADER_SIZE - leave;
        let records = vec![payload(0, first), payload(1, 20), payload(2, 0)];
        let (data, _) = write_log(&records);
        let got = parse(&data, RecoveryMode::default()).unwrap();
        assert_eq!(got.records, records, "leave {leave}");
        assert_eq!(got.torn_tail, None);
    }
}

#[test]
fn a_writer_continues_an_existing_log() {
    let fs = fresh();
    let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
    w.add_record(&payload(0, BLOCK_SIZE - 3)).unwrap();
    w.sync().unwrap();
    drop(w);
    let mut w = LogWriter::new(fs.open_append(&log_path()).unwrap());
    w.add_record(&payload(1, 100)).unwrap();
    w.sync().unwrap();
    let got = read_log(&fs, &log_path(), RecoveryMode::default()).unwrap();
    assert_eq!(
        got.records,
        vec![payload(0, BLOCK_SIZE - 3), payload(1, 100)]
    );
}

/// What recovery must return when the log is cut at `cut`: the records that end at or before
/// it, and a torn tail unless the cut falls on a record end or in the padding after one.
fn expected_at_cut(records: &[Vec<u8>], ends: &[u64], cut: u64) -> (usize, Option<TornTail>) {
    let complete = ends.iter().take_while(|&&e| e <= cut).count();
    let last_end = if complete == 0 { 0 } else { ends[complete - 1] };
    let start_of_next = if complete < records.len() {
        // The next record starts after the padding, if its block had too little room.
        let left = BLOCK_SIZE as u64 - last_end % BLOCK_SIZE as u64;
        if left < HEADER_SIZE as u64 {
            last_end + left
        } else {
            last_end
        }
    } else {
        last_end
    };
    if cut <= start_of_next {
        (complete, None)
    } else {
        (
            complete,
            Some(TornTail {
                offset: start_of_next,
                dropped_bytes: cut - start_of_next,
                intact_records_dropped: 0,
            }),
        )
    }
}

#[test]
fn a_torn_tail_at_every_truncation_point_keeps_the_complete_records() {
    let records = small_records();
    let (data, ends) = write_log(&records);
    for cut in 0..=data.len() {
        let (complete, torn) = expected_at_cut(&records, &ends, cut as u64);
        for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::PointInTime] {
            let got = parse(&data[..cut], mode).unwrap();
            assert_eq!(got.records, records[..complete], "cut {cut}");
            assert_eq!(got.torn_tail, torn, "cut {cut}");
        }
        let salvaged = parse(&data[..cut], RecoveryMode::Salvage).unwrap();
        assert_eq!(salvaged.records, records[..complete], "cut {cut}");
        assert_eq!(
            salvaged.skipped.len(),
            usize::from(torn.is_some()),
            "cut {cut}"
        );
        match parse(&data[..cut], RecoveryMode::Strict) {
            Ok(got) => assert!(torn.is_none() && got.records == records[..complete]),
            Err(e) => assert!(e.is_corruption() && torn.is_some(), "cut {cut}: {e}"),
        }
    }
}

#[test]
fn a_torn_tail_in_a_multi_block_record_is_tolerated() {
    let records = vec![
        payload(0, 1000),
        payload(1, BLOCK_SIZE - 1000 - 3 * HEADER_SIZE + 2),
        payload(2, 3 * BLOCK_SIZE + 123),
    ];
    let (data, ends) = write_log(&records);
    let mut cuts: Vec<usize> = (0..data.len()).step_by(997).collect();
    for b in 1..=4 {
        for d in 0..=9 {
            cuts.push((b * BLOCK_SIZE + d).saturating_sub(4).min(data.len()));
        }
    }
    cuts.push(data.len());
    for cut in cuts {
        let (complete, torn) = expected_at_cut(&records, &ends, cut as u64);
        let got = parse(&data[..cut], RecoveryMode::default()).unwrap();
        assert_eq!(got.records.len(), complete, "cut {cut}");
        assert!(got.records.iter().zip(&records).all(|(a, b)| a == b));
        assert_eq!(got.torn_tail, torn, "cut {cut}");
    }
}

#[test]
fn zeros_or_garbage_after_a_cut_are_a_torn_tail() {
    let records = small_records();
    let (data, ends) = write_log(&records);
    let cut = (ends[3] + 5) as usize;
    for fill in [0u8, 0xFF, 0x5A] {
        let mut torn = data[..cut].to_vec();
        torn.extend(std::iter::repeat_n(fill, 300));
        let got = parse(&torn, RecoveryMode::default()).unwrap();
        assert_eq!(got.records, records[..4]);
        assert_eq!(
            got.torn_tail,
            Some(TornTail {
                offset: ends[3],
                dropped_bytes: (torn.len() as u64) - ends[3],
                intact_records_dropped: 0,
            })
        );
    }
    // A fully written log followed by zeros (preallocated space) loses nothing.
    let mut padded = data.clone();
    padded.extend(std::iter::repeat_n(0u8, 100));
    let got = parse(&padded, RecoveryMode::default()).unwrap();
    assert_eq!(got.records, records);
    assert_eq!(got.torn_tail.map(|t| t.offset), Some(data.len() as u64));
}

/// Bytes of a sync mark fragment.
pub(super) const MARK_SIZE: usize = HEADER_SIZE + super::SYNC_MARK_LEN;

/// A log synced after every record, as a store whose writes are all synced writes it: each
/// record but the first follows a sync mark. Returns the bytes and, per record, the offset
/// where its append began (at the mark before it, if any) and where it ended.
pub(super) fn write_synced_log(records: &[Vec<u8>]) -> (Vec<u8>, Vec<(u64, u64)>) {
    let fs = fresh();
    let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
    let mut spans = Vec::new();
    for r in records {
        let start = w.len();
        w.add_record(r).unwrap();
        spans.push((start, w.len()));
        w.sync().unwrap();
    }
    (fs.contents(&log_path()).unwrap(), spans)
}

#[test]
fn a_flipped_byte_in_a_synced_middle_record_is_corruption_by_default() {
    let records = small_records();
    let (data, spans) = write_synced_log(&records);
    // Record 2's append: the sync mark before it, then the record.
    let (mark_start, end) = spans[2];
    let record_start = mark_start + MARK_SIZE as u64;
    for at in mark_start..end {
        let mut bad = data.clone();
        bad[at as usize] ^= 0x10;
        let (damaged_from, intact_after) = if at < record_start {
            // A damaged mark before intact record 2: the record is dropped with it.
            (mark_start, 4)
        } else {
            (record_start, 3)
        };
        match parse(&bad, RecoveryMode::TolerateTornTail) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, log_path());
                assert_eq!(offset, Some(damaged_from), "flip at {at}");
            }
            other => panic!("flip at {at}: expected corruption, got {other:?}"),
        }
        let got = parse(&bad, RecoveryMode::PointInTime).unwrap();
        assert_eq!(got.records, records[..2], "flip at {at}");
        assert_eq!(
            got.torn_tail,
            Some(TornTail {
                offset: damaged_from,
                dropped_bytes: data.len() as u64 - damaged_from,
                intact_records_dropped: intact_after,
            })
        );
    }
}

#[test]
fn a_flipped_byte_in_an_unsynced_middle_record_is_a_hole() {
    // Nothing after the damage shows it synced: as far as the log can tell, a page of its
    // unsynced part was lost. The records after it are dropped and counted.
    let records = small_records();
    let (data, ends) = write_log(&records);
    for at in ends[1]..ends[2] {
        let mut bad = data.clone();
        bad[at as usize] ^= 0x10;
        let got = parse(&bad, RecoveryMode::TolerateTornTail).unwrap();
        assert_eq!(got.records, records[..2], "flip at {at}");
        assert_eq!(
            got.torn_tail,
            Some(TornTail {
                offset: ends[1],
                dropped_bytes: data.len() as u64 - ends[1],
                intact_records_dropped: 3,
            }),
            "flip at {at}"
        );
    }
}

#[test]
fn a_flipped_byte_in_the_last_unsynced_record_is_a_torn_tail() {
    let records = small_records();
    let (data, ends) = write_log(&records);
    let n = records.len();
    for at in ends[n - 2]..ends[n - 1] {
        let mut bad = data.clone();
        bad[at as usize] ^= 0x01;
        let got = parse(&bad, RecoveryMode::default()).unwrap();
        assert_eq!(got.records, records[..n - 1], "flip at {at}");
        assert_eq!(got.torn_tail.map(|t| t.offset), Some(ends[n - 2]));
        assert_eq!(got.torn_tail.map(|t| t.intact_records_dropped), Some(0));
    }
}

#[test]
fn damage_in_the_first_block_of_a_big_last_record_is_a_torn_tail() {
    let records = vec![payload(0, 100), payload(1, 3 * BLOCK_SIZE)];
    let (mut data, ends) = write_log(&records);
    data[ends[0] as usize + HEADER_SIZE + 50] ^= 0x80;
    let got = parse(&data, RecoveryMode::default()).unwrap();
    assert_eq!(got.records, records[..1]);
    assert_eq!(got.torn_tail.map(|t| t.offset), Some(ends[0]));
    assert_eq!(got.torn_tail.map(|t| t.intact_records_dropped), Some(0));
}

fn records_across_blocks() -> Vec<Vec<u8>> {
    vec![
        payload(0, 100),
        payload(1, 2 * BLOCK_SIZE),
        payload(2, 10),
        payload(3, 10),
    ]
}

#[test]
fn synced_damage_followed_by_a_record_in_a_later_block_is_corruption() {
    let records = records_across_blocks();
    let (data, spans) = write_synced_log(&records);
    // Damage the FIRST fragment's length; the record's MIDDLE and LAST fragments and then
    // records 2 and 3 follow in later blocks, each after a sync mark.
    let mut bad = data.clone();
    bad[spans[1].0 as usize + MARK_SIZE + 4] ^= 0xFF;
    let err = parse(&bad, RecoveryMode::default()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    // Zeroing a whole middle block is caught too.
    let mut bad = data.clone();
    bad[BLOCK_SIZE..2 * BLOCK_SIZE].fill(0);
    assert!(parse(&bad, RecoveryMode::default())
        .unwrap_err()
        .is_corruption());
    let got = parse(&bad, RecoveryMode::PointInTime).unwrap();
    assert_eq!(got.records, records[..1]);
    assert_eq!(got.torn_tail.map(|t| t.intact_records_dropped), Some(2));
}

#[test]
fn unsynced_damage_followed_by_a_record_in_a_later_block_is_a_hole() {
    let records = records_across_blocks();
    let (data, ends) = write_log(&records);
    let mut bad = data.clone();
    bad[BLOCK_SIZE..2 * BLOCK_SIZE].fill(0);
    let got = parse(&bad, RecoveryMode::default()).unwrap();
    assert_eq!(got.records, records[..1]);
    assert_eq!(
        got.torn_tail,
        Some(TornTail {
            offset: ends[0],
            dropped_bytes: data.len() as u64 - ends[0],
            intact_records_dropped: 2,
        })
    );
}

/// Every mode, on every single-byte change and every truncation of a log synced after each
/// record: no panic, and what each mode returns is consistent with where the damage is.
#[test]
fn no_single_byte_change_or_truncation_panics() {
    let records = vec![
        payload(0, 20),
        Vec::new(),
        payload(2, 60),
        payload(3, 300),
        payload(4, 7),
    ];
    let (data, spans) = write_synced_log(&records);
    // The last record and the mark before it: no later mark proves them synced.
    let last_mark = spans[spans.len() - 1].0 as usize;
    for cut in 0..=data.len() {
        for mode in ALL_MODES {
            let _ = parse(&data[..cut], mode);
        }
    }
    for at in 0..data.len() {
        for mask in [0x01u8, 0x80, 0xFF] {
            let mut bad = data.clone();
            bad[at] ^= mask;
            match parse(&bad, RecoveryMode::TolerateTornTail) {
                Ok(got) => {
                    // Only damage to the last record or the mark before it may be tolerated,
                    // and then the others come back intact.
                    assert!(at >= last_mark, "flip at {at} accepted");
                    assert_eq!(got.records, records[..records.len() - 1]);
                }
                Err(e) => assert!(e.is_corruption() && at < last_mark, "{e}"),
            }
            assert!(parse(&bad, RecoveryMode::Strict)
                .unwrap_err()
                .is_corruption());
            let got = parse(&bad, RecoveryMode::PointInTime).unwrap();
            assert!(got.torn_tail.is_some());
            assert!(got.records.iter().zip(&records).all(|(a, b)| a == b));
            let salvaged = parse(&bad, RecoveryMode::Salvage).unwrap();
            assert_eq!(salvaged.skipped.len(), 1, "flip at {at}");
            assert!(salvaged.records.len() >= records.len() - 1, "flip at {at}");
            assert!(salvaged.records.iter().all(|r| records.contains(r)));
        }
    }
}

pub(super) const ALL_MODES: [RecoveryMode; 4] = [
    RecoveryMode::TolerateTornTail,
    RecoveryMode::Strict,
    RecoveryMode::PointInTime,
    RecoveryMode::Salvage,
];

#[test]
fn power_loss_while_appending_loses_only_unsynced_records() {
    for seed in 0..40 {
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepPrefix { seed },
            CrashMode::ZeroTail { seed },
            CrashMode::GarbageTail { seed },
            CrashMode::LosePages { seed },
        ] {
            let fs = fresh();
            fs.set_crash_mode(mode);
            let file = fs.create(&log_path()).unwrap();
            fs.sync_dir(Path::new("/db")).unwrap();
            let mut w = LogWriter::new(file);
            let mut acked = Vec::new();
            for i in 0..6 {
                let r = payload(i, 50 + 400 * i);
                w.add_record(&r).unwrap();
                if i % 2 == 1 {
                    w.sync().unwrap();
                    acked.push(i);
                }
            }
            // Two more records that are never synced: any prefix of them may survive, and
            // a lost page may leave a hole in them.
            w.add_record(&payload(6, 2000)).unwrap();
            w.add_record(&payload(7, 40_000)).unwrap();
            fs.crash();
            let got = read_log(&fs, &log_path(), RecoveryMode::default())
                .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
            assert!(got.records.len() >= 6, "{mode:?}");
            for (i, r) in got.records.iter().enumerate() {
                let len = if i < 6 {
                    50 + 400 * i
                } else if i == 6 {
                    2000
                } else {
                    40_000
                };
                assert_eq!(r, &payload(i, len), "{mode:?} record {i}");
            }
        }
    }
}

#[test]
fn a_failed_append_refuses_further_writes() {
    let fs = fresh();
    let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
    w.add_record(b"one").unwrap();
    fs.fail_nth_append(1);
    assert!(matches!(w.add_record(b"two"), Err(Error::Io { .. })));
    assert!(matches!(
        w.add_record(b"three"),
        Err(Error::WritesRefused { .. })
    ));
    assert!(matches!(w.sync(), Err(Error::WritesRefused { .. })));
    let got = read_log(&fs, &log_path(), RecoveryMode::default()).unwrap();
    assert_eq!(got.records, vec![b"one".to_vec()]);

    let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
    w.add_record(b"one").unwrap();
    fs.fail_next_sync();
    assert!(w.sync().is_err());
    assert!(matches!(
        w.add_record(b"x"),
        Err(Error::WritesRefused { .. })
    ));
}

#[test]
fn a_full_disk_is_an_io_error_not_a_panic() {
    let fs = fresh();
    let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
    fs.set_space_left(Some(100));
    w.add_record(&payload(0, 50)).unwrap();
    assert!(matches!(
        w.add_record(&payload(1, 200)),
        Err(Error::Io { .. })
    ));
}

#[test]
fn reading_a_missing_log_or_with_failing_reads_is_an_io_error() {
    let fs = fresh();
    assert!(matches!(
        read_log(&fs, &log_path(), RecoveryMode::default()),
        Err(Error::Io { .. })
    ));
    let (data, _) = write_log(&small_records());
    fs.set_contents(&log_path(), data);
    fs.set_reads_fail(true);
    assert!(matches!(
        read_log(&fs, &log_path(), RecoveryMode::default()),
        Err(Error::Io { .. })
    ));
}
