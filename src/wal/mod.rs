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
//! type:     u8       1 FULL, 2 FIRST, 3 MIDDLE, 4 LAST
//! payload:  [u8; length]
//! ```
//!
//! A record that fits in what is left of the block is one FULL fragment; otherwise FIRST,
//! any number of MIDDLE, then LAST. When fewer than 7 bytes are left in a block the writer
//! fills them with zeros and starts the next block. Since every block begins with a fragment
//! header, a reader can find record boundaries again after damage. `docs/format-log-manifest.md`
//! describes the format byte by byte.
//!
//! # Recovery
//!
//! A power loss can leave the last appended record incomplete: cut short, followed by zeros,
//! or followed by garbage. That *torn tail* was never acknowledged (its sync never returned)
//! and is dropped. Damage followed by an intact record is something else: a record that was
//! acknowledged is unreadable, and that is corruption. [`read_log`] tells the two apart (see
//! [`RecoveryMode`]).

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

/// The checksum stored in a fragment header.
pub(crate) fn fragment_checksum(len: u16, kind: u8, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&len.to_le_bytes());
    h.update(&[kind]);
    h.update(payload);
    h.finalize()
}

/// How [`read_log`] treats a damaged record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// Damage that runs to the end of the file (no intact record starts after it) is a torn
    /// tail: the records before it are returned and the tail is reported. Damage followed by
    /// an intact record is [`crate::Error::Corruption`] naming the file and the offset.
    #[default]
    TolerateTornTail,
    /// Stop at the first damaged record wherever it is, keep every record before it and
    /// report the rest of the file as dropped. For salvaging what can be salvaged.
    PointInTime,
}

/// The part of a log that recovery dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TornTail {
    /// File offset where the dropped part starts: the start of the first incomplete or
    /// damaged record (every record before it was returned).
    pub offset: u64,
    /// Bytes from `offset` to the end of the file.
    pub dropped_bytes: u64,
}

/// Everything [`read_log`] recovered from a log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogContents {
    /// The complete records, in the order they were added.
    pub records: Vec<Vec<u8>>,
    /// File offset of each record's first fragment, parallel to `records`.
    pub offsets: Vec<u64>,
    /// What was dropped at the end, if anything.
    pub torn_tail: Option<TornTail>,
}

#[cfg(test)]
mod tests;
