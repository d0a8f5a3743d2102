//! Sync marks, holes in the unsynced part of a log, and the four recovery modes.

use std::path::Path;

use super::tests::{
    fresh, log_path, parse, payload, small_records, write_log, write_synced_log, ALL_MODES,
    MARK_SIZE,
};
use super::{
    fragment_checksum, read_log, LogWriter, RecoveryMode, SkippedRange, TornTail, BLOCK_SIZE,
    HEADER_SIZE, SYNC_MARK_LEN, TYPE_SYNC_MARK,
};
use crate::error::Error;
use crate::fs::{CrashMode, FileSystem};

/// The bytes of a sync mark claiming `synced`.
fn mark(synced: u64) -> Vec<u8> {
    let payload = synced.to_le_bytes();
    let mut out = fragment_checksum(SYNC_MARK_LEN as u16, TYPE_SYNC_MARK, &payload)
        .to_le_bytes()
        .to_vec();
    out.extend_from_slice(&(SYNC_MARK_LEN as u16).to_le_bytes());
    out.push(TYPE_SYNC_MARK);
    out.extend_from_slice(&payload);
    out
}

#[test]
fn the_first_record_after_a_sync_follows_a_mark_claiming_the_synced_length() {
    let fs = fresh();
    let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
    w.add_record(b"first").unwrap();
    let synced = w.len();
    w.sync().unwrap();
    w.sync().unwrap();
    // A sync appends nothing: a log synced for the last time ends with its last record.
    assert_eq!(fs.contents(&log_path()).unwrap().len() as u64, synced);
    w.add_record(b"second").unwrap();
    // No sync since: no mark.
    w.add_record(b"third").unwrap();
    w.flush().unwrap();
    let data = fs.contents(&log_path()).unwrap();
    let s = synced as usize;
    assert_eq!(&data[s..s + MARK_SIZE], &mark(synced)[..]);
    assert_eq!(data.len(), s + MARK_SIZE + 2 * HEADER_SIZE + 6 + 5);
    let got = read_log(&fs, &log_path(), RecoveryMode::Strict).unwrap();
    assert_eq!(
        got.records,
        vec![b"first".to_vec(), b"second".to_vec(), b"third".to_vec()]
    );
    assert_eq!(
        got.offsets,
        vec![
            0,
            (s + MARK_SIZE) as u64,
            (s + MARK_SIZE + HEADER_SIZE + 6) as u64
        ]
    );
}

#[test]
fn a_mark_that_does_not_fit_in_the_block_waits_for_the_next_record() {
    for leave in [3, HEADER_SIZE, MARK_SIZE - 1, MARK_SIZE] {
        let fs = fresh();
        let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
        let first = payload(0, BLOCK_SIZE - HEADER_SIZE - leave);
        w.add_record(&first).unwrap();
        let synced = w.len();
        w.sync().unwrap();
        w.add_record(b"next").unwrap();
        w.add_record(b"again").unwrap();
        w.flush().unwrap();
        let data = fs.contents(&log_path()).unwrap();
        let got = read_log(&fs, &log_path(), RecoveryMode::Strict).unwrap();
        assert_eq!(
            got.records,
            vec![first.clone(), b"next".to_vec(), b"again".to_vec()],
            "leave {leave}"
        );
        // With fewer than 7 bytes left the block is padded and the mark opens the next one;
        // with room for a header but not for a mark, the mark comes before the next record.
        let mark_at = data
            .windows(MARK_SIZE)
            .position(|w| w == mark(synced))
            .expect("the mark is written") as u64;
        let followed_by = if (HEADER_SIZE..MARK_SIZE).contains(&leave) {
            2
        } else {
            1
        };
        assert_eq!(
            got.offsets[followed_by],
            mark_at + MARK_SIZE as u64,
            "leave {leave}"
        );
    }
}

/// A log with `synced` records synced one by one, then `unsynced` records never synced.
fn synced_then_unsynced(synced: usize, unsynced: usize) -> (Vec<u8>, Vec<Vec<u8>>, u64) {
    let fs = fresh();
    let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
    let records: Vec<Vec<u8>> = (0..synced + unsynced)
        .map(|i| payload(i, 20 + i % 90))
        .collect();
    for r in &records[..synced] {
        w.add_record(r).unwrap();
        w.sync().unwrap();
    }
    let synced_len = w.len();
    for r in &records[synced..] {
        w.add_record(r).unwrap();
    }
    w.flush().unwrap();
    (fs.contents(&log_path()).unwrap(), records, synced_len)
}

#[test]
fn a_lost_page_in_the_unsynced_part_is_a_hole_and_the_synced_records_are_kept() {
    let (data, records, synced_len) = synced_then_unsynced(1, 2000);
    // A page of the unsynced part, read back as zeros, with intact records after it.
    let page = 40_960;
    assert!(page > synced_len as usize && page + 4096 < data.len());
    let mut bad = data.clone();
    bad[page..page + 4096].fill(0);
    let mut survivors = None;
    for mode in [RecoveryMode::TolerateTornTail, RecoveryMode::PointInTime] {
        let got = parse(&bad, mode).unwrap();
        let kept = got.records.len();
        assert!(kept >= 1 && kept < records.len());
        assert_eq!(got.records, records[..kept]);
        let tail = got
            .torn_tail
            .expect("the hole and what follows are dropped");
        assert!(tail.offset <= page as u64 && tail.offset > synced_len);
        assert_eq!(tail.dropped_bytes, data.len() as u64 - tail.offset);
        assert!(tail.intact_records_dropped > 1000, "{tail:?}");
        survivors = Some(kept as u64 + tail.intact_records_dropped);
    }
    let err = parse(&bad, RecoveryMode::Strict).unwrap_err();
    assert!(matches!(err, Error::Corruption { offset: Some(o), .. } if o <= page as u64));
    // Salvage keeps every record the page did not touch: those before the hole and those
    // counted as dropped after it.
    let salvaged = parse(&bad, RecoveryMode::Salvage).unwrap();
    assert_eq!(salvaged.skipped.len(), 1);
    let SkippedRange { offset, bytes } = salvaged.skipped[0];
    assert!(offset <= page as u64 && offset + bytes >= (page + 4096) as u64);
    assert_eq!(Some(salvaged.records.len() as u64), survivors);
    assert!(salvaged.records.iter().all(|r| records.contains(r)));
}

#[test]
fn a_lost_page_before_the_last_sync_is_corruption() {
    let (data, _, synced_len) = synced_then_unsynced(2000, 10);
    let page = 40_960;
    assert!(page + 4096 < synced_len as usize);
    let mut bad = data.clone();
    bad[page..page + 4096].fill(0);
    match parse(&bad, RecoveryMode::TolerateTornTail) {
        Err(Error::Corruption {
            file,
            offset,
            reason,
        }) => {
            assert_eq!(file, log_path());
            assert!(offset.is_some_and(|o| o <= page as u64), "{offset:?}");
            assert!(reason.contains("sync mark"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn damage_after_the_last_sync_mark_only_is_a_hole_even_in_a_synced_log() {
    // Records synced one by one, then unsynced ones: damage to an unsynced record with intact
    // ones after it is a hole; the marks before it claim less than its offset.
    let (data, records, synced_len) = synced_then_unsynced(50, 50);
    let ends: Vec<u64> = parse(&data, RecoveryMode::Strict).unwrap().offsets;
    let victim = 70;
    let mut bad = data.clone();
    bad[ends[victim] as usize + HEADER_SIZE] ^= 0x40;
    let got = parse(&bad, RecoveryMode::default()).unwrap();
    assert_eq!(got.records, records[..victim]);
    assert_eq!(
        got.torn_tail,
        Some(TornTail {
            offset: ends[victim],
            dropped_bytes: data.len() as u64 - ends[victim],
            intact_records_dropped: (records.len() - victim - 1) as u64,
        })
    );
    assert!(ends[victim] > synced_len);
}

#[test]
fn the_stretch_synced_last_is_proved_only_by_the_next_records_mark() {
    let records = small_records();
    let n = records.len();
    let (data, spans) = write_synced_log(&records);
    let (_, last_end) = spans[n - 1];
    assert_eq!(data.len() as u64, last_end, "a sync appends nothing");
    // Damage to the last record, synced though it was: nothing after it proves it, so it
    // reads as a torn tail.
    let at = last_end as usize - 1;
    let mut bad = data.clone();
    bad[at] ^= 0x01;
    let got = parse(&bad, RecoveryMode::default()).unwrap();
    assert_eq!(got.records, records[..n - 1]);
    // One more record after it: its mark proves the damaged one synced.
    let more: Vec<Vec<u8>> = records.iter().cloned().chain([payload(9, 30)]).collect();
    let (data, _) = write_synced_log(&more);
    let mut bad = data.clone();
    bad[at] ^= 0x01;
    assert!(parse(&bad, RecoveryMode::default())
        .unwrap_err()
        .is_corruption());
}

#[test]
fn a_mark_claiming_more_than_precedes_it_is_damage() {
    let records = small_records();
    let (mut data, ends) = write_log(&records);
    let forged = mark(data.len() as u64 + 1);
    data.extend_from_slice(&forged);
    let got = parse(&data, RecoveryMode::default()).unwrap();
    assert_eq!(got.records, records);
    assert_eq!(
        got.torn_tail.map(|t| t.dropped_bytes),
        Some(MARK_SIZE as u64)
    );
    // A forged mark inside the log is damage followed by intact records: a hole, and the
    // bogus claim proves nothing.
    let (mut data, _) = write_log(&records);
    let at = ends[2] as usize;
    let forged = mark(ends[4] + 1);
    data.splice(at..at, forged);
    let got = parse(&data, RecoveryMode::default()).unwrap();
    assert_eq!(got.records, records[..3]);
    assert_eq!(got.torn_tail.map(|t| t.intact_records_dropped), Some(3));
}

#[test]
fn a_mark_inside_an_unfinished_record_is_damage() {
    let records = vec![payload(0, 10), payload(1, BLOCK_SIZE + 100), payload(2, 10)];
    let (data, ends) = write_log(&records);
    // Overwrite the start of the second block (the big record's LAST fragment) with a mark.
    let mut bad = data.clone();
    bad[BLOCK_SIZE..BLOCK_SIZE + MARK_SIZE].copy_from_slice(&mark(ends[0]));
    let got = parse(&bad, RecoveryMode::Salvage).unwrap();
    assert_eq!(got.records, vec![records[0].clone(), records[2].clone()]);
    assert_eq!(got.skipped[0].offset, ends[0]);
    let got = parse(&bad, RecoveryMode::default()).unwrap();
    assert_eq!(got.records, records[..1]);
}

#[test]
fn strict_mode_refuses_any_damage_and_names_the_offset() {
    let records = small_records();
    let (data, ends) = write_log(&records);
    assert_eq!(parse(&data, RecoveryMode::Strict).unwrap().records, records);
    let cut = ends[4] as usize + 3;
    match parse(&data[..cut], RecoveryMode::Strict) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, log_path());
            assert_eq!(offset, Some(ends[4]));
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    let mut padded = data.clone();
    padded.extend_from_slice(&[0; 40]);
    assert!(parse(&padded, RecoveryMode::Strict)
        .unwrap_err()
        .is_corruption());
}

#[test]
fn salvage_skips_each_damaged_record_and_keeps_the_rest() {
    let records = small_records();
    let (data, ends) = write_log(&records);
    let mut bad = data.clone();
    bad[ends[0] as usize + 2] ^= 0x20; // record 1 (empty)
    bad[ends[3] as usize + HEADER_SIZE + 7] ^= 0x20; // record 4
    let got = parse(&bad, RecoveryMode::Salvage).unwrap();
    let expected: Vec<Vec<u8>> = [0, 2, 3, 5].iter().map(|&i| records[i].clone()).collect();
    assert_eq!(got.records, expected);
    assert_eq!(got.offsets, vec![0, ends[1], ends[2], ends[4]]);
    assert_eq!(
        got.skipped,
        vec![
            SkippedRange {
                offset: ends[0],
                bytes: ends[1] - ends[0],
            },
            SkippedRange {
                offset: ends[3],
                bytes: ends[4] - ends[3],
            },
        ]
    );
    assert_eq!(got.torn_tail, None);
}

#[test]
fn salvage_finds_records_after_a_lost_page_inside_a_block() {
    // A lost page in the middle of a block: the chain of fragments breaks there, and the
    // next intact record is found by trying every offset after it.
    let (data, records, _) = synced_then_unsynced(0, 400);
    let offsets = parse(&data, RecoveryMode::Strict).unwrap().offsets;
    let page = 8192;
    let mut bad = data.clone();
    bad[page..page + 4096].fill(0);
    let got = parse(&bad, RecoveryMode::Salvage).unwrap();
    let untouched: Vec<Vec<u8>> = records
        .iter()
        .zip(
            offsets
                .iter()
                .zip(offsets.iter().skip(1).chain([&(data.len() as u64)])),
        )
        .filter(|(_, (&start, &end))| end <= page as u64 || start >= (page + 4096) as u64)
        .map(|(r, _)| r.clone())
        .collect();
    assert_eq!(got.records, untouched);
    assert_eq!(got.skipped.len(), 1);
}

#[test]
fn every_mode_reads_a_log_without_sync_marks() {
    // Logs written before sync marks existed: the same framing, no type-5 fragments.
    let records = small_records();
    let (data, _) = write_log(&records);
    for mode in ALL_MODES {
        let got = parse(&data, mode).unwrap();
        assert_eq!(got.records, records, "{mode:?}");
        assert_eq!(got.torn_tail, None);
        assert!(got.skipped.is_empty());
    }
}

#[test]
fn losing_unsynced_pages_never_loses_a_synced_record_or_keeps_one_out_of_order() {
    for seed in 0..200 {
        let fs = fresh();
        fs.set_crash_mode(CrashMode::LosePages { seed });
        let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
        fs.sync_dir(Path::new("/db")).unwrap();
        let records: Vec<Vec<u8>> = (0..300).map(|i| payload(i, (i * 53) % 900)).collect();
        let mut synced = 0;
        for (i, r) in records.iter().enumerate() {
            w.add_record(r).unwrap();
            if (i + seed as usize).is_multiple_of(37) && i < 200 {
                w.sync().unwrap();
                synced = i + 1;
            }
        }
        w.flush().unwrap();
        fs.crash();
        let got = read_log(&fs, &log_path(), RecoveryMode::default())
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(got.records.len() >= synced, "seed {seed}");
        assert_eq!(got.records, records[..got.records.len()], "seed {seed}");
    }
}

#[test]
fn a_failed_sync_mark_append_fails_the_record_and_refuses_further_writes() {
    let fs = fresh();
    let mut w = LogWriter::new(fs.create(&log_path()).unwrap());
    w.add_record(b"durable").unwrap();
    w.sync().unwrap();
    fs.fail_nth_append(1);
    assert!(matches!(w.add_record(b"more"), Err(Error::Io { .. })));
    assert!(matches!(
        w.add_record(b"more"),
        Err(Error::WritesRefused { .. })
    ));
    let got = read_log(&fs, &log_path(), RecoveryMode::Strict).unwrap();
    assert_eq!(got.records, vec![b"durable".to_vec()]);
}
