//! Reading a log back, telling a torn tail from corruption.

use std::path::Path;

use super::{
    fragment_checksum, LogContents, RecoveryMode, TornTail, BLOCK_SIZE, HEADER_SIZE, TYPE_FIRST,
    TYPE_FULL, TYPE_LAST, TYPE_MIDDLE,
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
    if !(TYPE_FULL..=TYPE_LAST).contains(&kind) {
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

fn starts_record(kind: u8) -> bool {
    kind == TYPE_FULL || kind == TYPE_FIRST
}

/// The offset of an intact FULL or FIRST fragment at or after `from`, if there is one: a
/// record that begins after damage at `from`.
///
/// Every offset of the rest of `from`'s block is tried (the damage may have destroyed the
/// length that led to the next fragment). In each later block the chain of intact fragments
/// from the block's start is followed (a block always starts with a fragment header).
fn find_record_start(data: &[u8], from: usize) -> Option<usize> {
    let first_block_end = block_end(from).min(data.len());
    for offset in from..first_block_end {
        if let Fragment::Intact { kind, .. } = fragment_at(data, offset) {
            if starts_record(kind) {
                return Some(offset);
            }
        }
    }
    let mut block = block_end(from);
    while block < data.len() {
        let mut offset = block;
        while offset < data.len() && offset < block + BLOCK_SIZE {
            match fragment_at(data, offset) {
                Fragment::Intact { kind, next, .. } => {
                    if starts_record(kind) {
                        return Some(offset);
                    }
                    offset = next;
                }
                Fragment::Padding { .. } | Fragment::Damaged { .. } => break,
            }
        }
        block += BLOCK_SIZE;
    }
    None
}

/// Reads every record of the log at `path`; see [`RecoveryMode`] for how damage is treated.
pub fn read_log(fs: &dyn FileSystem, path: &Path, mode: RecoveryMode) -> Result<LogContents> {
    let data = fs.read_all(path)?;
    parse_log(path, &data, mode)
}

/// [`read_log`] on bytes already in memory; `path` names the file in errors.
pub fn parse_log(path: &Path, data: &[u8], mode: RecoveryMode) -> Result<LogContents> {
    let mut contents = LogContents::default();
    // The record being assembled from FIRST/MIDDLE fragments: its offset and bytes so far.
    let mut pending: Option<(usize, Vec<u8>)> = None;
    let mut offset = 0;
    let mut damage: Option<(usize, &'static str)> = None;
    while offset < data.len() {
        match fragment_at(data, offset) {
            Fragment::Padding { next } => offset = next,
            Fragment::Damaged { reason } => {
                damage = Some((offset, reason));
                break;
            }
            Fragment::Intact {
                kind,
                payload,
                next,
            } => {
                match (kind, pending.as_mut()) {
                    (TYPE_FULL, None) => {
                        contents.records.push(payload.to_vec());
                        contents.offsets.push(offset as u64);
                    }
                    (TYPE_FIRST, None) => pending = Some((offset, payload.to_vec())),
                    (TYPE_MIDDLE, Some((_, record))) => record.extend_from_slice(payload),
                    (TYPE_LAST, Some((_, record))) => {
                        record.extend_from_slice(payload);
                        if let Some((start, record)) = pending.take() {
                            contents.records.push(record);
                            contents.offsets.push(start as u64);
                        }
                    }
                    (TYPE_FULL | TYPE_FIRST, Some(_)) => {
                        damage = Some((offset, "a record starts inside an unfinished record"));
                        break;
                    }
                    _ => {
                        damage = Some((offset, "a continuation fragment without a first one"));
                        break;
                    }
                }
                offset = next;
            }
        }
    }
    let dropped_from = match (damage, &pending) {
        (None, None) => return Ok(contents),
        // The file ends inside a record: its last fragments were never written.
        (None, Some((start, _))) => *start,
        (Some((at, reason)), _) => {
            if mode == RecoveryMode::TolerateTornTail {
                if let Some(next) = find_record_start(data, at) {
                    return Err(Error::corruption(
                        path,
                        Some(at as u64),
                        format!(
                            "{reason}, and an intact record follows at offset {next}: \
                             a record before the end of the log is damaged"
                        ),
                    ));
                }
            }
            pending.as_ref().map_or(at, |(start, _)| *start)
        }
    };
    contents.torn_tail = Some(TornTail {
        offset: dropped_from as u64,
        dropped_bytes: (data.len() - dropped_from) as u64,
    });
    Ok(contents)
}
