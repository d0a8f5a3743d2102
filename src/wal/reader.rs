//! Reading a log back: its records, sync marks and damage, and what each recovery mode keeps.

use std::collections::VecDeque;
use std::path::Path;

use super::{
    fragment_checksum, LogContents, PreviousLog, RecoveryMode, SkippedRange, TornTail, BLOCK_SIZE,
    HEADER_SIZE, PREVIOUS_LOG_LEN, SYNC_MARK_LEN, TYPE_FIRST, TYPE_FULL, TYPE_LAST,
    TYPE_PREVIOUS_LOG, TYPE_SYNC_MARK,
};
use crate::error::{Error, Result};
use crate::fs::FileSystem;

/// What lies at an offset of the log.
enum Fragment<'a> {
    /// An intact fragment; the next one starts at `next`.
    Intact {
        kind: u8,
        payload: &'a [u8],
        next: usize,
    },
    /// The zero padding at the end of a block; the next fragment starts at `next`.
    Padding { next: usize },
    /// Not an intact fragment.
    Damaged { reason: &'static str },
}

fn block_end(offset: usize) -> usize {
    (offset / BLOCK_SIZE + 1) * BLOCK_SIZE
}

/// Parses the fragment at `offset` (`offset < data.len()`).
fn fragment_at(data: &[u8], offset: usize) -> Fragment<'_> {
    let block_end = block_end(offset);
    let left_in_block = block_end - offset;
    if left_in_block < HEADER_SIZE {
        let end = block_end.min(data.len());
        let trailer = data.get(offset..end).unwrap_or(&[]);
        return if trailer.iter().all(|&b| b == 0) {
            Fragment::Padding { next: block_end }
        } else {
            Fragment::Damaged {
                reason: "non-zero bytes in the padding at the end of a block",
            }
        };
    }
    let Some(header) = data.get(offset..offset + HEADER_SIZE) else {
        return Fragment::Damaged {
            reason: "fragment header cut short by the end of the file",
        };
    };
    let stored = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let len = u16::from_le_bytes([header[4], header[5]]);
    let kind = header[6];
    if !(TYPE_FULL..=TYPE_PREVIOUS_LOG).contains(&kind) {
        return Fragment::Damaged {
            reason: if kind == 0 {
                "zero fragment type (zeroed or preallocated space)"
            } else {
                "unknown fragment type"
            },
        };
    }
    let start = offset + HEADER_SIZE;
    let end = start + usize::from(len);
    if end > block_end {
        return Fragment::Damaged {
            reason: "fragment length crosses the block boundary",
        };
    }
    let Some(payload) = data.get(start..end) else {
        return Fragment::Damaged {
            reason: "fragment cut short by the end of the file",
        };
    };
    if fragment_checksum(len, kind, payload) != stored {
        return Fragment::Damaged {
            reason: "fragment checksum mismatch",
        };
    }
    Fragment::Intact {
        kind,
        payload,
        next: end,
    }
}

/// The first offset at or after `from` where an intact fragment or a block's zero padding
/// lies, or the end of the file. Every offset is tried: damage may have destroyed the length
/// that led to the next fragment, and a lost page ends anywhere inside one.
fn resume_after_damage(data: &[u8], from: usize) -> usize {
    (from..data.len())
        .find(|&offset| !matches!(fragment_at(data, offset), Fragment::Damaged { .. }))
        .unwrap_or(data.len())
}

/// The durable length a sync mark at `offset` claims, if its payload is a valid claim: eight
/// bytes, and no more than what precedes the mark (it is written after its sync returned).
fn sync_mark_claim(payload: &[u8], offset: usize) -> Option<u64> {
    let bytes: [u8; SYNC_MARK_LEN] = payload.try_into().ok()?;
    let synced = u64::from_le_bytes(bytes);
    (synced <= offset as u64).then_some(synced)
}

/// The log a previous-log note names, if its payload has the note's length.
fn previous_log(payload: &[u8]) -> Option<PreviousLog> {
    let bytes: [u8; PREVIOUS_LOG_LEN] = payload.try_into().ok()?;
    let (number, len) = bytes.split_at(8);
    Some(PreviousLog {
        number: u64::from_le_bytes(number.try_into().ok()?),
        len: u64::from_le_bytes(len.try_into().ok()?),
    })
}

/// What the reader finds in a log, in file order.
#[derive(Debug)]
enum Item {
    Record {
        offset: usize,
        bytes: Vec<u8>,
    },
    /// An intact sync mark: when it was written, the first `synced` bytes were durable.
    SyncMark {
        offset: usize,
        synced: u64,
    },
    /// An intact previous-log note.
    PreviousLog(PreviousLog),
    /// Bytes from `start` to `end` that hold no intact record or mark: damaged fragments, a
    /// record cut short, and the intact fragments of records that could not be completed.
    Damage {
        start: usize,
        end: usize,
        reason: &'static str,
    },
}

/// Walks a log from its start, yielding its items; after damage it resumes at the next
/// intact fragment, so every intact record after damage is found too.
struct Scanner<'a> {
    data: &'a [u8],
    offset: usize,
    /// The record being assembled from FIRST and MIDDLE fragments: its offset, bytes so far.
    pending: Option<(usize, Vec<u8>)>,
    /// Damage not yet reported: where it starts, and what was found there.
    damage: Option<(usize, &'static str)>,
    /// Items found and not yet returned (damage ends where a record begins: two at once).
    ready: VecDeque<Item>,
    finished: bool,
}

impl<'a> Scanner<'a> {
    fn new(data: &'a [u8]) -> Scanner<'a> {
        Scanner {
            data,
            offset: 0,
            pending: None,
            damage: None,
            ready: VecDeque::new(),
            finished: false,
        }
    }

    /// Damage at `at`: the record being assembled, if any, is lost with it.
    fn damaged(&mut self, at: usize, reason: &'static str) {
        let start = self.pending.take().map_or(at, |(start, _)| start);
        self.damage.get_or_insert((start, reason));
    }

    /// Reports the damage before `at`, where something intact begins.
    fn end_damage(&mut self, at: usize) {
        if let Some((start, reason)) = self.damage.take() {
            self.ready.push_back(Item::Damage {
                start,
                end: at,
                reason,
            });
        }
    }

    /// An intact FULL, FIRST or sync mark at `at`: it begins something new.
    fn begin_item(&mut self, kind: u8, payload: &[u8], at: usize) {
        if self.pending.is_some() {
            self.damaged(
                at,
                "a record or sync mark starts inside an unfinished record",
            );
        }
        if kind == TYPE_PREVIOUS_LOG {
            match previous_log(payload) {
                Some(note) => {
                    self.end_damage(at);
                    self.ready.push_back(Item::PreviousLog(note));
                }
                None => self.damaged(at, "a previous-log note of the wrong length"),
            }
            return;
        }
        if kind == TYPE_SYNC_MARK {
            match sync_mark_claim(payload, at) {
                Some(synced) => {
                    self.end_damage(at);
                    self.ready.push_back(Item::SyncMark { offset: at, synced });
                }
                None => self.damaged(at, "a sync mark claims more than precedes it"),
            }
            return;
        }
        self.end_damage(at);
        if kind == TYPE_FULL {
            self.ready.push_back(Item::Record {
                offset: at,
                bytes: payload.to_vec(),
            });
        } else {
            self.pending = Some((at, payload.to_vec()));
        }
    }

    /// An intact MIDDLE or LAST at `at`: it continues the record being assembled.
    fn continue_record(&mut self, kind: u8, payload: &[u8], at: usize) {
        let Some((_, record)) = self.pending.as_mut() else {
            self.damaged(at, "a continuation fragment without a first one");
            return;
        };
        record.extend_from_slice(payload);
        if kind == TYPE_LAST {
            if let Some((offset, bytes)) = self.pending.take() {
                self.ready.push_back(Item::Record { offset, bytes });
            }
        }
    }

    fn finish(&mut self) {
        if let Some((start, _)) = self.pending {
            self.damaged(start, "the file ends inside a record");
        }
        self.end_damage(self.data.len());
        self.finished = true;
    }

    fn step(&mut self) {
        let at = self.offset;
        if at >= self.data.len() {
            self.finish();
            return;
        }
        match fragment_at(self.data, at) {
            Fragment::Padding { next } => self.offset = next,
            Fragment::Damaged { reason } => {
                self.damaged(at, reason);
                self.offset = resume_after_damage(self.data, at + 1);
            }
            Fragment::Intact {
                kind,
                payload,
                next,
            } => {
                self.offset = next;
                match kind {
                    TYPE_FULL | TYPE_FIRST | TYPE_SYNC_MARK | TYPE_PREVIOUS_LOG => {
                        self.begin_item(kind, payload, at)
                    }
                    // MIDDLE or LAST: `fragment_at` passes no other type.
                    _ => self.continue_record(kind, payload, at),
                }
            }
        }
    }
}

impl Iterator for Scanner<'_> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        while self.ready.is_empty() && !self.finished {
            self.step();
        }
        self.ready.pop_front()
    }
}

/// What lies after the first damage, for deciding what it was.
#[derive(Default)]
struct AfterDamage {
    records: u64,
    /// The sync mark claiming the most: its offset and the durable length it claims.
    highest_claim: Option<(usize, u64)>,
}

impl AfterDamage {
    fn tally(items: Scanner<'_>) -> AfterDamage {
        let mut after = AfterDamage::default();
        for item in items {
            match item {
                Item::Record { .. } => after.records += 1,
                Item::SyncMark { offset, synced } => {
                    if after.highest_claim.is_none_or(|(_, most)| synced > most) {
                        after.highest_claim = Some((offset, synced));
                    }
                }
                Item::Damage { .. } | Item::PreviousLog(_) => {}
            }
        }
        after
    }
}

/// Reads every record of the log at `path`; see [`RecoveryMode`] for how damage is treated.
pub fn read_log(fs: &dyn FileSystem, path: &Path, mode: RecoveryMode) -> Result<LogContents> {
    let data = fs.read_all(path)?;
    parse_log(path, &data, mode)
}

/// [`read_log`] on bytes already in memory; `path` names the file in errors.
pub fn parse_log(path: &Path, data: &[u8], mode: RecoveryMode) -> Result<LogContents> {
    let mut contents = LogContents::default();
    let mut items = Scanner::new(data);
    let (start, end, reason) = loop {
        match items.next() {
            None => return Ok(contents),
            Some(Item::Record { offset, bytes }) => push_record(&mut contents, offset, bytes),
            Some(Item::SyncMark { .. }) => contents.sync_marked = true,
            Some(Item::PreviousLog(note)) => {
                contents.previous_log.get_or_insert(note);
            }
            Some(Item::Damage { start, end, reason }) => break (start, end, reason),
        }
    };
    match mode {
        RecoveryMode::Strict => Err(Error::corruption(
            path,
            Some(start as u64),
            format!("{reason} (strict recovery accepts no damage, not even a torn tail)"),
        )),
        RecoveryMode::Salvage => {
            contents.skipped.push(skipped(start, end));
            salvage_rest(&mut contents, items);
            Ok(contents)
        }
        RecoveryMode::TolerateTornTail | RecoveryMode::PointInTime => {
            let after = AfterDamage::tally(items);
            contents.sync_marked |= after.highest_claim.is_some();
            if mode == RecoveryMode::TolerateTornTail {
                check_damage_is_unsynced(path, start, reason, &after)?;
            }
            contents.torn_tail = Some(TornTail {
                offset: start as u64,
                dropped_bytes: (data.len() - start) as u64,
                intact_records_dropped: after.records,
            });
            Ok(contents)
        }
    }
}

fn push_record(contents: &mut LogContents, offset: usize, bytes: Vec<u8>) {
    contents.records.push(bytes);
    contents.offsets.push(offset as u64);
}

fn skipped(start: usize, end: usize) -> SkippedRange {
    SkippedRange {
        offset: start as u64,
        bytes: (end - start) as u64,
    }
}

/// Keeps every record after the first damage and reports every later damaged range.
fn salvage_rest(contents: &mut LogContents, items: Scanner<'_>) {
    for item in items {
        match item {
            Item::Record { offset, bytes } => push_record(contents, offset, bytes),
            Item::SyncMark { .. } => contents.sync_marked = true,
            Item::PreviousLog(note) => {
                contents.previous_log.get_or_insert(note);
            }
            Item::Damage { start, end, .. } => contents.skipped.push(skipped(start, end)),
        }
    }
}

/// Damage at `start` may be dropped as unsynced unless a sync mark after it shows that the
/// bytes there had been synced: then an acknowledged write is damaged, and that is corruption.
fn check_damage_is_unsynced(
    path: &Path,
    start: usize,
    reason: &str,
    after: &AfterDamage,
) -> Result<()> {
    match after.highest_claim {
        Some((mark, synced)) if synced > start as u64 => Err(Error::corruption(
            path,
            Some(start as u64),
            format!(
                "{reason}, yet the sync mark at offset {mark} shows the log was durable \
                 through offset {synced}: synced data is damaged"
            ),
        )),
        _ => Ok(()),
    }
}
