//! Replaying the WAL files a store left: the writes each holds, by keyspace, as far as the
//! recovery mode lets a damaged log be read, and what was dropped and why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{DropCause, DroppedWal, RecoveryReport};
use crate::entry::{SeqNo, MAX_SEQ};
use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::keyspace::KeyspaceId;
use crate::memtable::MemTable;
use crate::options::WalRecoveryMode;
use crate::wal::{self, RecoveryMode};
use crate::write_batch::{Write, WriteBatch};

/// The writes recovered from WAL files.
pub(super) struct Replayed {
    /// Each keyspace's replayed writes, by keyspace number (dropped keyspaces' too: the
    /// caller leaves them out).
    pub(super) mems: BTreeMap<KeyspaceId, Arc<MemTable>>,
    /// Highest sequence number replayed, if any write was.
    pub(super) max_seq: Option<SeqNo>,
    pub(super) report: RecoveryReport,
}

/// Replays WAL files `logs` (oldest first) into a memtable.
///
/// Within one log, [`wal::read_log`] decides what damage means, in the mode matching `mode`.
/// Across logs one more rule holds: the store syncs older logs in full before it syncs a
/// later one, but a frozen memtable's log is not synced when writes move to the next log. So
/// a log whose end was dropped (a torn tail or an unsynced hole), or lost whole (shorter than
/// the next log's previous-log note says), may be followed by later logs holding unsynced
/// writes; replay stops at the damage, and their writes, made after the lost ones, are
/// dropped and reported. When a later log holds a sync mark, it was synced, the damaged log
/// in full before it, and synced bytes were lost: a corruption error under
/// `TolerateTornTail`, a stop as before under `PointInTime`. (`Strict` fails at the first
/// damage anyway; `Salvage` keeps every log.)
///
/// Each batch's sequence numbers must lie above every one replayed before it and above
/// `after_seq` (the largest in any live table: tables hold only writes from older logs), and
/// at most [`MAX_SEQ`]. The manifest's last sequence number is no such bound: a flush
/// records the store's last sequence number at the time, which may include writes that are
/// only in the live log. A batch that breaks these rules, or does not decode, was not
/// written by the store: it is corruption under `TolerateTornTail` and `Strict`, damage where
/// replay stops under `PointInTime`, and skipped under `Salvage`.
pub(super) fn replay_logs(
    fs: &dyn FileSystem,
    dir: &Path,
    logs: &[u64],
    mode: WalRecoveryMode,
    after_seq: SeqNo,
) -> Result<Replayed> {
    let mut replay = Replay::new(mode, after_seq);
    let mut previous: Option<(u64, PathBuf, u64)> = None;
    for number in logs {
        let path = dir.join(filename::log_file_name(*number));
        let data = fs.read_all(&path)?;
        let contents = wal::parse_log(&path, &data, read_mode(mode))?;
        if let (Some(note), Some((older, older_path, older_len))) =
            (contents.previous_log, &previous)
        {
            if note.number == *older && note.len > *older_len && replay.stopped.is_none() {
                replay.lost_end(older_path, *older_len, note.len - *older_len);
            }
        }
        previous = Some((*number, path.clone(), data.len() as u64));
        if replay.stopped.is_some() {
            replay.after_stop(&path, &contents, data.len() as u64)?;
        } else {
            replay.log(&path, &contents, data.len() as u64)?;
        }
    }
    Ok(Replayed {
        mems: replay.mems,
        max_seq: replay.max_seq,
        report: replay.report,
    })
}

#[cfg(test)]
impl Replayed {
    /// The default keyspace's replayed writes (an empty memtable when there were none).
    fn default_mem(&self) -> Arc<MemTable> {
        let empty = || Arc::new(MemTable::new(0, usize::MAX));
        self.mems.get(&0).cloned().unwrap_or_else(empty)
    }
}

fn read_mode(mode: WalRecoveryMode) -> RecoveryMode {
    match mode {
        WalRecoveryMode::TolerateTornTail => RecoveryMode::TolerateTornTail,
        WalRecoveryMode::Strict => RecoveryMode::Strict,
        WalRecoveryMode::PointInTime => RecoveryMode::PointInTime,
        WalRecoveryMode::Salvage => RecoveryMode::Salvage,
    }
}

/// Replay in progress, log after log.
struct Replay {
    mode: WalRecoveryMode,
    mems: BTreeMap<KeyspaceId, Arc<MemTable>>,
    /// The highest sequence number replayed, if any.
    max_seq: Option<SeqNo>,
    /// Every batch from here on must be numbered above this.
    seq_floor: SeqNo,
    report: RecoveryReport,
    /// The log and offset where replay stopped: nothing after it may be replayed.
    stopped: Option<(PathBuf, u64)>,
}

impl Replay {
    fn new(mode: WalRecoveryMode, after_seq: SeqNo) -> Replay {
        Replay {
            mode,
            mems: BTreeMap::new(),
            max_seq: None,
            seq_floor: after_seq,
            report: RecoveryReport::default(),
            stopped: None,
        }
    }

    /// Replays every record `read_log` kept from the log at `path` (`size` bytes), then
    /// notes what it dropped or skipped.
    fn log(&mut self, path: &Path, contents: &wal::LogContents, size: u64) -> Result<()> {
        let reported_before = self.report.dropped.len();
        for (i, (record, &offset)) in contents.records.iter().zip(&contents.offsets).enumerate() {
            let invalid = match self.valid_batch(record, path, offset) {
                Ok(entries) => {
                    self.apply(entries);
                    continue;
                }
                Err(e) => e,
            };
            match self.mode {
                WalRecoveryMode::PointInTime => {
                    let later = (contents.records.len() - i - 1) as u64
                        + contents.torn_tail.map_or(0, |t| t.intact_records_dropped);
                    self.stop_at_invalid_batch(path, offset, size, later);
                    return Ok(());
                }
                WalRecoveryMode::Salvage => self.skip_invalid_batch(path, offset, record.len()),
                WalRecoveryMode::TolerateTornTail | WalRecoveryMode::Strict => return Err(invalid),
            }
        }
        for range in &contents.skipped {
            self.skip_range(path, range, size);
        }
        // Invalid batches and damaged ranges, each in file order.
        self.report.dropped[reported_before..].sort_by_key(|d| d.offset);
        if let Some(tail) = &contents.torn_tail {
            self.drop_range(
                path,
                tail.offset,
                tail.dropped_bytes,
                tail.intact_records_dropped,
            );
            self.stopped = Some((path.to_path_buf(), tail.offset));
        }
        Ok(())
    }

    /// The entries of a batch that decodes and is numbered after everything before it.
    fn valid_batch(
        &self,
        record: &[u8],
        log: &Path,
        offset: u64,
    ) -> Result<Vec<(KeyspaceId, Write)>> {
        let entries = WriteBatch::decode(record, log, offset)?;
        let (Some((_, first)), Some((_, last))) = (entries.first(), entries.last()) else {
            return Ok(entries);
        };
        let bad = |reason: String| Err(Error::corruption(log, Some(offset), reason));
        if first.seq() <= self.seq_floor {
            return bad(format!(
                "write batch numbered from {}, not above {}, the highest sequence number \
                 replayed before it or held by a table",
                first.seq(),
                self.seq_floor
            ));
        }
        if last.seq() > MAX_SEQ {
            return bad(format!(
                "write batch numbered up to {}, above the largest sequence number a store \
                 may use ({MAX_SEQ})",
                last.seq()
            ));
        }
        Ok(entries)
    }

    fn apply(&mut self, entries: Vec<(KeyspaceId, Write)>) {
        if let Some((_, last)) = entries.last() {
            self.max_seq = Some(last.seq());
            self.seq_floor = last.seq();
        }
        for (ks, entry) in entries {
            // Each takes every log's writes, and its size is never checked: the largest
            // blocks.
            let mem = (self.mems)
                .entry(ks)
                .or_insert_with(|| Arc::new(MemTable::new(0, usize::MAX)));
            match entry {
                Write::Entry(entry) => mem.apply([entry]),
                Write::Range(tombstone) => mem.add_range_tombstone(tombstone),
            }
        }
        self.report.batches_replayed += 1;
    }

    /// Under `PointInTime`, an invalid batch is damage: replay stops at it.
    fn stop_at_invalid_batch(&mut self, log: &Path, offset: u64, size: u64, later: u64) {
        self.report.dropped.push(DroppedWal {
            log: log.to_path_buf(),
            offset,
            bytes: size - offset,
            intact_batches: later,
            cause: DropCause::InvalidBatch,
        });
        self.stopped = Some((log.to_path_buf(), offset));
    }

    /// Under `Salvage`, an invalid batch is skipped alone.
    fn skip_invalid_batch(&mut self, log: &Path, offset: u64, len: usize) {
        self.report.dropped.push(DroppedWal {
            log: log.to_path_buf(),
            offset,
            bytes: len as u64,
            intact_batches: 1,
            cause: DropCause::InvalidBatch,
        });
    }

    /// A damaged range `Salvage` skipped; one that runs to the end of the log is a torn tail.
    fn skip_range(&mut self, log: &Path, range: &wal::SkippedRange, size: u64) {
        let at_end = range.offset + range.bytes == size;
        self.report.dropped.push(DroppedWal {
            log: log.to_path_buf(),
            offset: range.offset,
            bytes: range.bytes,
            intact_batches: 0,
            cause: if at_end {
                DropCause::TornTail
            } else {
                DropCause::Skipped
            },
        });
    }

    fn drop_range(&mut self, log: &Path, offset: u64, bytes: u64, intact_batches: u64) {
        let cause = match (intact_batches, self.mode) {
            (0, _) => DropCause::TornTail,
            (_, WalRecoveryMode::TolerateTornTail) => DropCause::UnsyncedHole,
            _ => DropCause::Damaged,
        };
        self.report.dropped.push(DroppedWal {
            log: log.to_path_buf(),
            offset,
            bytes,
            intact_batches,
            cause,
        });
    }

    /// The log at `path` holds `len` bytes, `missing` fewer than the next log's note says
    /// it held when writes moved on: its end never reached the disk, and replay stops there.
    fn lost_end(&mut self, path: &Path, len: u64, missing: u64) {
        self.report.dropped.push(DroppedWal {
            log: path.to_path_buf(),
            offset: len,
            bytes: missing,
            intact_batches: 0,
            cause: DropCause::TornTail,
        });
        self.stopped = Some((path.to_path_buf(), len));
    }

    /// A log after the one where replay stopped: harmless if it holds no writes.
    fn after_stop(&mut self, path: &Path, contents: &wal::LogContents, size: u64) -> Result<()> {
        if contents.records.is_empty() {
            return Ok(());
        }
        let Some((stopped_log, offset)) = &self.stopped else {
            return Ok(());
        };
        if self.mode == WalRecoveryMode::TolerateTornTail && contents.sync_marked {
            return Err(Error::corruption(
                stopped_log,
                Some(*offset),
                format!(
                    "the log's end was dropped as unsynced, yet the later log {} was synced \
                     (it holds a sync mark), and older logs are synced in full first, so \
                     synced data is damaged (open with WalRecoveryMode::PointInTime to keep \
                     the writes before the damage)",
                    path.display()
                ),
            ));
        }
        self.report.dropped.push(DroppedWal {
            log: path.to_path_buf(),
            offset: 0,
            bytes: size,
            intact_batches: contents.records.len() as u64
                + contents.torn_tail.map_or(0, |t| t.intact_records_dropped),
            cause: DropCause::AfterEarlierDrop,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, OsFileSystem};
    use crate::wal::LogWriter;

    /// Writes WAL `number` in `dir` holding one batch per key, each putting `key` = `key`.
    fn write_log(dir: &Path, number: u64, first_seq: SeqNo, keys: &[&str]) -> PathBuf {
        let path = dir.join(filename::log_file_name(number));
        let mut log = LogWriter::new(OsFileSystem.create(&path).unwrap());
        for (i, key) in keys.iter().enumerate() {
            let mut batch = WriteBatch::new();
            batch.put(key, key);
            log.add_record(&batch.encode(first_seq + i as u64)).unwrap();
        }
        log.sync().unwrap();
        path
    }

    fn replay(dir: &Path, logs: &[u64], mode: WalRecoveryMode) -> Result<Replayed> {
        replay_logs(&OsFileSystem, dir, logs, mode, 0)
    }

    /// Cuts the last few bytes off a log: its last record is torn.
    fn tear(path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        std::fs::write(path, &bytes[..bytes.len() - 3]).unwrap();
    }

    /// A log whose end was lost is followed by a log of writes that were never synced (no
    /// sync mark): they came after the lost ones, and are dropped with them.
    #[test]
    fn a_torn_log_followed_by_unsynced_writes_drops_them() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_log(dir.path(), 5, 1, &["a", "b", "c"]);
        tear(&first);
        write_log(dir.path(), 6, 4, &["d"]);
        for mode in [
            WalRecoveryMode::TolerateTornTail,
            WalRecoveryMode::PointInTime,
        ] {
            let replayed = replay(dir.path(), &[5, 6], mode).unwrap();
            assert_eq!(
                replayed.max_seq,
                Some(2),
                "{mode:?}: a and b, before the tear"
            );
            assert!(
                replayed.default_mem().get(b"d", SeqNo::MAX).is_none(),
                "{mode:?}"
            );
            let causes: Vec<DropCause> = replayed.report.dropped.iter().map(|d| d.cause).collect();
            assert_eq!(causes, [DropCause::TornTail, DropCause::AfterEarlierDrop]);
        }
    }

    /// A log cut short at a record boundary looks whole; the next log's previous-log note
    /// says how long it was, so the writes after the cut are dropped, not replayed past a hole.
    #[test]
    fn a_log_shorter_than_the_next_logs_note_says_loses_the_writes_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join(filename::log_file_name(5));
        let mut log = LogWriter::new(OsFileSystem.create(&first).unwrap());
        let mut cut_at = 0;
        for (seq, key) in [(1, "a"), (2, "b"), (3, "c")] {
            let mut batch = WriteBatch::new();
            batch.put(key, key);
            log.add_record(&batch.encode(seq)).unwrap();
            if key == "b" {
                cut_at = log.len();
            }
        }
        log.sync().unwrap();
        let whole_len = log.len();
        drop(log);
        let second = dir.path().join(filename::log_file_name(6));
        let mut log = LogWriter::new(OsFileSystem.create(&second).unwrap());
        log.note_previous_log(wal::PreviousLog {
            number: 5,
            len: whole_len,
        })
        .unwrap();
        let mut batch = WriteBatch::new();
        batch.put("d", "d");
        log.add_record(&batch.encode(4)).unwrap();
        log.sync().unwrap();
        drop(log);

        // Whole, every write is replayed.
        let whole = replay(dir.path(), &[5, 6], WalRecoveryMode::TolerateTornTail).unwrap();
        assert_eq!(whole.max_seq, Some(4));
        assert!(whole.report.dropped.is_empty());

        // Cut after b: c is lost, and d, written after it, is dropped.
        let bytes = std::fs::read(&first).unwrap();
        std::fs::write(&first, &bytes[..cut_at as usize]).unwrap();
        for mode in [
            WalRecoveryMode::TolerateTornTail,
            WalRecoveryMode::PointInTime,
        ] {
            let replayed = replay(dir.path(), &[5, 6], mode).unwrap();
            assert_eq!(replayed.max_seq, Some(2), "{mode:?}");
            assert!(
                replayed.default_mem().get(b"d", SeqNo::MAX).is_none(),
                "{mode:?}"
            );
            let dropped = &replayed.report.dropped;
            assert_eq!(dropped.len(), 2, "{dropped:?}");
            assert_eq!(
                (dropped[0].log.clone(), dropped[0].offset),
                (first.clone(), cut_at)
            );
            assert_eq!(dropped[0].bytes, whole_len - cut_at);
            assert_eq!(dropped[1].cause, DropCause::AfterEarlierDrop);
        }
    }

    /// A log whose end was lost is followed by a log that was synced (it holds a sync mark):
    /// the store syncs older logs in full first, so synced bytes were lost.
    #[test]
    fn a_torn_log_followed_by_a_synced_log_is_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_log(dir.path(), 5, 1, &["a", "b", "c"]);
        tear(&first);
        let path = dir.path().join(filename::log_file_name(6));
        let mut log = LogWriter::new(OsFileSystem.create(&path).unwrap());
        for (seq, key) in [(4, "d"), (5, "e")] {
            let mut batch = WriteBatch::new();
            batch.put(key, key);
            log.add_record(&batch.encode(seq)).unwrap();
            // The second record follows a sync: a sync mark goes before it.
            log.sync().unwrap();
        }

        let strict = replay(dir.path(), &[5, 6], WalRecoveryMode::TolerateTornTail);
        match strict {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, first),
            other => panic!(
                "expected a corruption error naming the torn log, got {:?}",
                other.map(|r| r.report)
            ),
        }

        let salvaged = replay(dir.path(), &[5, 6], WalRecoveryMode::PointInTime).unwrap();
        assert_eq!(
            salvaged.report.batches_replayed, 2,
            "a and b, before the tear"
        );
        assert_eq!(salvaged.max_seq, Some(2));
        assert!(salvaged.default_mem().get(b"b", SeqNo::MAX).is_some());
        assert!(
            salvaged.default_mem().get(b"d", SeqNo::MAX).is_none(),
            "d comes after the hole"
        );
        assert_eq!(salvaged.report.dropped.len(), 2);
        assert_eq!(
            salvaged.report.dropped[1].cause,
            DropCause::AfterEarlierDrop
        );
    }

    #[test]
    fn a_torn_log_followed_only_by_empty_logs_is_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_log(dir.path(), 5, 1, &["a", "b"]);
        tear(&first);
        write_log(dir.path(), 6, 3, &[]);
        let replayed = replay(dir.path(), &[5, 6], WalRecoveryMode::TolerateTornTail).unwrap();
        assert_eq!(replayed.report.batches_replayed, 1);
        assert_eq!(replayed.report.dropped.len(), 1);
        assert_eq!(replayed.report.dropped[0].log, first);
        assert_eq!(replayed.report.dropped[0].cause, DropCause::TornTail);
    }

    /// The corruption error's file and offset, or a panic.
    fn corruption_at(result: Result<Replayed>) -> (PathBuf, Option<u64>, String) {
        match result {
            Err(Error::Corruption {
                file,
                offset,
                reason,
            }) => (file, offset, reason),
            Err(e) => panic!("expected corruption, got {e}"),
            Ok(r) => panic!("expected corruption, replayed {:?}", r.report),
        }
    }

    #[test]
    fn a_batch_not_numbered_above_the_one_before_it_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        write_log(dir.path(), 5, 1, &["a", "b", "c"]);
        // Log 6 starts at 3, which log 5 already used.
        let second = write_log(dir.path(), 6, 3, &["d", "e"]);
        let (file, offset, reason) = corruption_at(replay(
            dir.path(),
            &[5, 6],
            WalRecoveryMode::TolerateTornTail,
        ));
        assert_eq!((file, offset), (second.clone(), Some(0)));
        assert!(reason.contains("not above 3"), "{reason}");
        // PointInTime stops there, as at other damage.
        let replayed = replay(dir.path(), &[5, 6], WalRecoveryMode::PointInTime).unwrap();
        assert_eq!(replayed.report.batches_replayed, 3);
        assert_eq!(replayed.max_seq, Some(3));
        assert!(replayed.default_mem().get(b"d", SeqNo::MAX).is_none());
        let dropped = &replayed.report.dropped;
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].log, second);
        assert_eq!(dropped[0].cause, DropCause::InvalidBatch);
        assert_eq!(dropped[0].intact_batches, 1, "e, after the invalid batch");
    }

    #[test]
    fn a_batch_not_numbered_above_the_tables_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let log = write_log(dir.path(), 5, 10, &["a"]);
        let mode = WalRecoveryMode::TolerateTornTail;
        assert!(replay_logs(&OsFileSystem, dir.path(), &[5], mode, 9).is_ok());
        let result = replay_logs(&OsFileSystem, dir.path(), &[5], mode, 10);
        assert_eq!(corruption_at(result).0, log);
    }

    #[test]
    fn a_batch_numbered_past_the_largest_sequence_number_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        write_log(dir.path(), 5, MAX_SEQ - 1, &["a", "b"]);
        let replayed = replay(dir.path(), &[5], WalRecoveryMode::TolerateTornTail).unwrap();
        assert_eq!(replayed.max_seq, Some(MAX_SEQ));
        // Past MAX_SEQ; and near u64::MAX, where the next write would wrap around.
        for first in [MAX_SEQ + 1, u64::MAX - 1] {
            let log = write_log(dir.path(), 6, first, &["c"]);
            let (file, offset, reason) =
                corruption_at(replay(dir.path(), &[6], WalRecoveryMode::TolerateTornTail));
            assert_eq!((file, offset), (log, Some(0)));
            assert!(reason.contains("above the largest"), "{reason}");
        }
    }

    #[test]
    fn strict_recovery_fails_at_a_torn_tail_naming_the_log_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_log(dir.path(), 5, 1, &["a", "b"]);
        let whole = std::fs::read(&first).unwrap().len() as u64;
        tear(&first);
        assert!(replay(dir.path(), &[5], WalRecoveryMode::TolerateTornTail).is_ok());
        let (file, offset, _) = corruption_at(replay(dir.path(), &[5], WalRecoveryMode::Strict));
        assert_eq!(file, first);
        // The torn record is the second: it starts after the first and the sync mark before it.
        assert!(offset.is_some_and(|o| o > 0 && o < whole), "{offset:?}");
    }

    #[test]
    fn salvage_keeps_every_valid_batch_of_every_log() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_log(dir.path(), 5, 1, &["a", "b", "c"]);
        tear(&first);
        // Log 6 holds writes after the tear, one of them numbered 2, which b already took.
        let second = write_log(dir.path(), 6, 2, &["d", "e", "f"]);
        let replayed = replay(dir.path(), &[5, 6], WalRecoveryMode::Salvage).unwrap();
        for (key, kept) in [
            ("a", true),
            ("b", true),
            ("c", false),
            ("d", false),
            ("e", true),
        ] {
            assert_eq!(
                replayed
                    .default_mem()
                    .get(key.as_bytes(), SeqNo::MAX)
                    .is_some(),
                kept,
                "{key}"
            );
        }
        assert_eq!(replayed.report.batches_replayed, 4, "a, b, e and f");
        assert_eq!(replayed.max_seq, Some(4));
        let causes: Vec<(PathBuf, DropCause)> = replayed
            .report
            .dropped
            .iter()
            .map(|d| (d.log.clone(), d.cause))
            .collect();
        assert_eq!(
            causes,
            vec![
                (first, DropCause::TornTail),
                (second.clone(), DropCause::InvalidBatch)
            ]
        );
        assert_eq!(replayed.report.dropped[1].offset, 0);
        assert_eq!(replayed.report.intact_batches_dropped(), 1);
    }
}
