//! The write-ahead log: a file of checksummed records, appended and synced before a write is
//! acknowledged, and replayed after a restart.
//!
//! # Framing
//!
//! The file is a sequence of 32 KiB blocks. A record is cut into fragments so that no fragment
//! crosses a block boundary; each fragment is a 7-byte header followed by its payload:
//!
//! ```text
//! checksum: u32 LE   crc32 of (length bytes, type byte, payload)
//! length:   u16 LE   payload bytes in this fragment
//! type:     u8       1 FULL, 2 FIRST, 3 MIDDLE, 4 LAST, 5 SYNC MARK
//! payload:  [u8; length]
//! ```
//!
//! A record that fits in what is left of the block is one FULL fragment; otherwise FIRST,
//! any number of MIDDLE, then LAST. When fewer than 7 bytes are left in a block the writer
//! fills them with zeros and starts the next block. Since every block begins with a fragment
//! header, a reader can find record boundaries again after damage. `docs/format-log-manifest.md`
//! describes the format byte by byte.
//!
//! # Sync marks
//!
//! Before the first record appended after a sync, the writer appends a *sync mark*: a
//! fragment of its own, between records, whose payload is the file length that sync made
//! durable (u64 LE). A mark is only written once its sync has returned, so it never claims
//! more than is durable. Nothing is appended at the sync itself, so a log synced for the last
//! time (as a log is when the store moves to the next one) ends durable, with no unsynced
//! bytes after it.
//!
//! # Previous-log notes
//!
//! A log started when a memtable is frozen begins with a *previous-log note*: a fragment of
//! its own naming the log before it and that log's length. The older log is not synced then
//! (a later synced write syncs it first), so a power loss may cut it short at a record
//! boundary, which looks like a whole log. The note tells recovery how long it was: if it is
//! shorter, its end was lost, and writes in the newer log came after the lost ones.
//!
//! # Recovery
//!
//! A power loss can leave the unsynced end of a log damaged in two ways. The last appended
//! record may be incomplete: cut short, followed by zeros, or followed by garbage (a *torn
//! tail*). And since the kernel writes unsynced pages back in any order, a page in the middle
//! of the unsynced part may be lost while later ones survive: a *hole* followed by intact
//! records. Neither held an acknowledged synced write, since a sync writes out every earlier
//! page.
//!
//! Damage to bytes that were synced is something else: corruption. The sync marks tell the two
//! apart. Damage at offset X is corruption when an intact mark after it claims that more than
//! X bytes were durable; otherwise the damage and everything after it lie in the unsynced part
//! of the log and are dropped. [`read_log`] applies this rule or another one, as the
//! [`RecoveryMode`] says. Logs written before sync marks existed have none, so any damage in
//! them reads as unsynced.
//!
//! A limit remains: the stretch synced last is proved durable only by the mark in front of
//! the next record, which is unsynced. If no record followed, or the power went before that
//! mark reached the disk, damage inside that stretch cannot be told from a lost page and is
//! dropped (and reported) as unsynced.

mod reader;
mod writer;

pub use reader::{parse_log, read_log};
pub use writer::LogWriter;

/// The log's block size: fragments never cross a multiple of it.
pub const BLOCK_SIZE: usize = 32 * 1024;
/// Bytes of a fragment header: checksum (4), length (2), type (1).
pub const HEADER_SIZE: usize = 7;

pub(crate) const TYPE_FULL: u8 = 1;
pub(crate) const TYPE_FIRST: u8 = 2;
pub(crate) const TYPE_MIDDLE: u8 = 3;
pub(crate) const TYPE_LAST: u8 = 4;
pub(crate) const TYPE_SYNC_MARK: u8 = 5;
/// Payload bytes of a sync mark: the durable length, u64 LE.
pub(crate) const SYNC_MARK_LEN: usize = 8;
pub(crate) const TYPE_PREVIOUS_LOG: u8 = 6;
/// Payload bytes of a previous-log note: the log's number and its length, u64 LE each.
pub(crate) const PREVIOUS_LOG_LEN: usize = 16;

/// The checksum stored in a fragment header.
pub(crate) fn fragment_checksum(len: u16, kind: u8, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&len.to_le_bytes());
    h.update(&[kind]);
    h.update(payload);
    h.finalize()
}

/// How [`read_log`] treats damage: bytes that are not an intact record or sync mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Damage that no intact sync mark after it shows to be synced lies in the unsynced part
    /// of the log: it and everything after it are dropped and reported (a torn tail, or a hole
    /// left by a lost page with intact records after it). Damage that a later mark shows to be
    /// synced is [`crate::Error::Corruption`] naming the file and the offset.
    #[default]
    TolerateTornTail,
    /// Any damage, even a torn tail, is [`crate::Error::Corruption`] naming the file and the
    /// offset. For logs that were closed cleanly, or to check a log.
    Strict,
    /// Stop at the first damage wherever it is, keep every record before it and report the
    /// rest of the file as dropped. For salvaging a consistent prefix of a damaged log.
    PointInTime,
    /// Skip every damaged range and keep every intact record, before and after the damage;
    /// each skipped range is reported. The result may miss records between intact ones, so
    /// this is for salvaging what can be salvaged, not for a consistent history.
    Salvage,
}

/// The part of a log that recovery dropped: from damage to the end of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// File offset where the dropped part starts: the start of the first incomplete or
    /// damaged record (every record before it was returned).
    pub offset: u64,
    /// Bytes from `offset` to the end of the file.
    pub dropped_bytes: u64,
    /// Intact records found after the damage and dropped with it. Zero for a torn tail;
    /// more when a lost page left a hole in the unsynced part (or, under
    /// [`RecoveryMode::PointInTime`], when damage came before intact records).
    pub intact_records_dropped: u64,
}

/// A damaged range that [`RecoveryMode::Salvage`] skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkippedRange {
    /// File offset of the first damaged byte (or of the first fragment of a record that
    /// could not be completed).
    pub offset: u64,
    /// Bytes skipped from `offset`, up to the next intact record or sync mark or the end of
    /// the file.
    pub bytes: u64,
}

/// Everything [`read_log`] recovered from a log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogContents {
    /// The complete records, in the order they were added.
    pub records: Vec<Vec<u8>>,
    /// File offset of each record's first fragment, parallel to `records`.
    pub offsets: Vec<u64>,
    /// What was dropped at the end, if anything (every mode but `Salvage`).
    pub torn_tail: Option<TornTail>,
    /// The damaged ranges skipped, in file order (`Salvage` only).
    pub skipped: Vec<SkippedRange>,
    /// Whether the log holds an intact sync mark: the log was synced while the store wrote
    /// it, and so, since the store syncs older logs first, was every older log in full.
    pub sync_marked: bool,
    /// The first intact previous-log note: the number of the log written before this one,
    /// and that log's length when this one was started.
    pub previous_log: Option<PreviousLog>,
}

/// What a new log says of the log before it, in its first fragment: that log may not have
/// been synced when writes moved on, so recovery checks that it is whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreviousLog {
    pub number: u64,
    /// The bytes it held when the store started the next log.
    pub len: u64,
}

#[cfg(test)]
mod recovery_tests;
#[cfg(test)]
mod tests;
