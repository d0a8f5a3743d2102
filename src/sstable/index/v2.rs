//! The index block of format versions 1 and 2: the data block layout, one entry per data
//! block whose key and sequence number are the block's last entry's and whose value is the
//! block's handle (two varints). Read at open and re-encoded into the in-memory form of
//! every index ([`BlockIndex`]), with these exact separators.

use crate::entry::ValueKind;
use crate::sstable::block::Block;
use crate::sstable::format::{BlockHandle, Decoder, Malformed};
use crate::sstable::index::block_index::BlockIndex;
use crate::sstable::index::builder::IndexBuilder;

/// Decodes the index block's contents (entry order is checked by the block iterator). The
/// handles must tile the data area from offset 0: the in-memory form keeps only the offsets
/// of restart points, so a gap must be caught here.
pub fn decode(contents: Vec<u8>) -> Result<BlockIndex, Malformed> {
    let mut it = Block::new(contents)?.iter();
    let mut out = IndexBuilder::new();
    let (mut block, mut end) = (0usize, 0u64);
    while let Some(e) = it.next_entry()? {
        let bad = |reason: String| Malformed::new(0, format!("index entry {block}: {reason}"));
        if e.kind != ValueKind::Value {
            return Err(bad("not a value entry".to_string()));
        }
        let mut d = Decoder::new(&e.value, 0);
        let handle = BlockHandle::decode_varint(&mut d).map_err(|m| bad(m.reason))?;
        if !d.is_empty() {
            return Err(bad("bytes after the block handle".to_string()));
        }
        if handle.offset != end {
            return Err(bad(format!(
                "data block {block} starts at {}, expected {end}",
                handle.offset
            )));
        }
        end = handle
            .checked_end()
            .ok_or_else(|| bad(format!("data block {block} runs past 2^64 bytes")))?;
        out.add(&e.key, e.seq, handle);
        block += 1;
    }
    BlockIndex::from_encoded(out.finish(), true, 0)
}
