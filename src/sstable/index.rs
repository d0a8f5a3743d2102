//! The index block: for each data block, in order, the last entry's key and sequence number
//! (the block's separator) and the block's handle. It uses the data block format, with the
//! handle as the value, and is decoded whole when a table is opened.

use std::cmp::Ordering;

use super::block::Block;
use super::block_builder::BlockBuilder;
use super::format::{BlockHandle, Decoder, Malformed};
use crate::entry::{entry_order, SeqNo, ValueKind};

/// A table's index as kept in memory for the table's life: for each data block its separator
/// (the key and sequence number of its last entry) and its handle. The separators' keys sit
/// end to end in one buffer, so a block costs its key's bytes plus 28 bytes, with no
/// allocation of its own: at 10 million 16-byte keys that halves what a vector of entries,
/// each with its own key, would hold.
#[derive(Debug, Default)]
pub struct BlockIndex {
    keys: Vec<u8>,
    /// `keys[key_ends[i - 1]..key_ends[i]]` is block `i`'s separator key.
    key_ends: Vec<u32>,
    seqs: Vec<SeqNo>,
    handles: Vec<BlockHandle>,
}

impl BlockIndex {
    /// Number of data blocks.
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// Block `i`'s separator key. `i` must be below `len()`.
    pub fn key(&self, i: usize) -> &[u8] {
        let start = if i == 0 {
            0
        } else {
            self.key_ends[i - 1] as usize
        };
        &self.keys[start..self.key_ends[i] as usize]
    }

    /// Block `i`'s separator sequence number. `i` must be below `len()`.
    pub fn seq(&self, i: usize) -> SeqNo {
        self.seqs[i]
    }

    /// Block `i`'s handle, if there is such a block.
    pub fn handle(&self, i: usize) -> Option<BlockHandle> {
        self.handles.get(i).copied()
    }

    pub fn handles(&self) -> &[BlockHandle] {
        &self.handles
    }

    /// The last block's separator key.
    pub fn last_key(&self) -> Option<&[u8]> {
        self.len().checked_sub(1).map(|i| self.key(i))
    }

    /// Bytes of memory held.
    pub fn memory_bytes(&self) -> usize {
        self.keys.capacity()
            + self.key_ends.capacity() * std::mem::size_of::<u32>()
            + self.seqs.capacity() * std::mem::size_of::<SeqNo>()
            + self.handles.capacity() * std::mem::size_of::<BlockHandle>()
            + std::mem::size_of::<BlockIndex>()
    }

    /// The first block that can hold `(key, seq)` or the first entry after it: the first whose
    /// separator is at or after the target. `len()` when the target is past the last.
    pub fn find_block(&self, key: &[u8], seq: SeqNo) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if entry_order(self.key(mid), self.seqs[mid], key, seq) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn push(&mut self, key: &[u8], seq: SeqNo, handle: BlockHandle) -> Result<(), Malformed> {
        let end = u32::try_from(self.keys.len() + key.len())
            .map_err(|_| Malformed::new(0, "index keys exceed 4 GiB"))?;
        self.keys.extend_from_slice(key);
        self.key_ends.push(end);
        self.seqs.push(seq);
        self.handles.push(handle);
        Ok(())
    }

    fn shrink_to_fit(&mut self) {
        self.keys.shrink_to_fit();
        self.key_ends.shrink_to_fit();
        self.seqs.shrink_to_fit();
        self.handles.shrink_to_fit();
    }
}

/// Adds a data block's index entry to the index block being built.
pub fn add(builder: &mut BlockBuilder, last_key: &[u8], last_seq: SeqNo, handle: BlockHandle) {
    let mut value = Vec::with_capacity(20);
    handle.encode_varint(&mut value);
    builder.add(last_key, last_seq, ValueKind::Value, &value);
}

/// Decodes the index block's contents (entry order is checked by the block iterator).
pub fn decode(contents: Vec<u8>) -> Result<BlockIndex, Malformed> {
    let mut it = Block::new(contents)?.iter();
    let mut out = BlockIndex::default();
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
        out.push(&e.key, e.seq, handle)?;
    }
    out.shrink_to_fit();
    Ok(out)
}
