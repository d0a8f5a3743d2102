//! The index block: for each data block, in order, the last entry's key and sequence number
//! (the block's separator) and the block's handle. It uses the data block format, with the
//! handle as the value, and is decoded whole when a table is opened.

use std::cmp::Ordering;

use super::block::Block;
use super::block_builder::BlockBuilder;
use super::format::{BlockHandle, Decoder, Malformed};
use crate::entry::{entry_order, SeqNo, ValueKind};

/// One data block as the index describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// User key of the block's last entry.
    pub last_key: Vec<u8>,
    /// Sequence number of the block's last entry.
    pub last_seq: SeqNo,
    pub handle: BlockHandle,
}

/// Adds a data block's index entry to the index block being built.
pub fn add(builder: &mut BlockBuilder, last_key: &[u8], last_seq: SeqNo, handle: BlockHandle) {
    let mut value = Vec::with_capacity(20);
    handle.encode_varint(&mut value);
    builder.add(last_key, last_seq, ValueKind::Value, &value);
}

/// Decodes the index block's contents (entry order is checked by the block iterator).
pub fn decode(contents: Vec<u8>) -> Result<Vec<IndexEntry>, Malformed> {
    let mut it = Block::new(contents)?.iter();
    let mut out = Vec::new();
    while let Some(e) = it.next_entry()? {
        let at = out.len();
        if e.kind != ValueKind::Value {
            return Err(Malformed::new(
                0,
                format!("index entry {at} is not a value entry"),
            ));
        }
        let mut d = Decoder::new(&e.value, 0);
        let handle = BlockHandle::decode_varint(&mut d)
            .map_err(|m| Malformed::new(0, format!("index entry {at}: {}", m.reason)))?;
        if !d.is_empty() {
            return Err(Malformed::new(
                0,
                format!("index entry {at}: bytes after the block handle"),
            ));
        }
        out.push(IndexEntry {
            last_key: e.key,
            last_seq: e.seq,
            handle,
        });
    }
    Ok(out)
}

/// The first block that can hold `(key, seq)` or the first entry after it: the first whose
/// separator is at or after the target. `index.len()` when the target is past the last.
pub fn find_block(index: &[IndexEntry], key: &[u8], seq: SeqNo) -> usize {
    index.partition_point(|e| entry_order(&e.last_key, e.last_seq, key, seq) == Ordering::Less)
}
