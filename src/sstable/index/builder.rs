//! Builds the index block of format version 3: one entry per data block, its separator
//! prefix-compressed against the one before, its sequence number only when not 0, and its
//! handle as the block's size alone, the offset following from the blocks before it (the
//! data blocks tile the file). Every [`INDEX_RESTART_INTERVAL`] entries a restart point
//! holds the whole key and the whole handle. `docs/format.md`, "Index block", has the bytes.
//!
//! The same encoding is the index's form in memory ([`crate::sstable::index::block_index::BlockIndex`]), for tables
//! of every version.

use crate::entry::SeqNo;
use crate::sstable::format::{put_restart_array, put_varint, BlockHandle};
use crate::sstable::separator::common_prefix_len;

/// Entries between restart points of a version 3 index block: a lookup scans at most this
/// many, and a restart costs a whole key, a whole offset and 4 bytes of restart array.
pub const INDEX_RESTART_INTERVAL: usize = 16;

/// The low bit of an entry's second varint: a sequence number follows.
pub const HAS_SEQ: u64 = 1;

#[derive(Default)]
pub struct IndexBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    last_key: Vec<u8>,
    entries: usize,
}

impl IndexBuilder {
    pub fn new() -> IndexBuilder {
        IndexBuilder::default()
    }

    /// The size `finish` would return now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Appends the entry of the next data block. The caller guarantees that separators rise
    /// and that `handle` starts where the previous block's trailer ends; an entry between
    /// restart points does not store its offset.
    pub fn add(&mut self, separator: &[u8], seq: SeqNo, handle: BlockHandle) {
        let at_restart = self.entries.is_multiple_of(INDEX_RESTART_INTERVAL);
        let shared = if at_restart {
            self.restarts.push(self.buf.len() as u32);
            0
        } else {
            common_prefix_len(&self.last_key, separator)
        };
        let delta = &separator[shared..];
        put_varint(&mut self.buf, shared as u64);
        let has_seq = seq != 0;
        put_varint(
            &mut self.buf,
            (delta.len() as u64) << 1 | u64::from(has_seq),
        );
        if has_seq {
            put_varint(&mut self.buf, seq);
        }
        if at_restart {
            put_varint(&mut self.buf, handle.offset);
        }
        put_varint(&mut self.buf, handle.size);
        self.buf.extend_from_slice(delta);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(delta);
        self.entries += 1;
    }

    /// The block's contents: the entries, then the restart array and its count.
    pub fn finish(self) -> Vec<u8> {
        let mut out = self.buf;
        put_restart_array(&mut out, &self.restarts);
        out
    }
}
