//! Reads the blocks written by [`BlockBuilder`](super::block_builder::BlockBuilder): checks
//! the restart array once, then decodes entries on demand, checking every length, every
//! prefix and the order of the entries as it goes.

use std::cell::Cell;
use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

use byteorder::{ByteOrder, LittleEndian};

use super::format::{restart_array, Decoder, Malformed};
use crate::entry::{entry_order, Entry, SeqNo, ValueKind};
use crate::value::{Newest, SharedBytes, Value};
use crate::walk::EntryView;

/// A block's contents whose restart array has been checked: what the block cache holds, shared
/// by every reader that walks it.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Where the restart array starts; entries occupy `0..restarts_start`.
    restarts_start: usize,
    num_restarts: usize,
}

impl SharedBytes for Block {
    fn shared_bytes(&self) -> &[u8] {
        &self.data
    }
}

impl Block {
    /// Checks the restart array: the count fits, offsets start at 0, rise strictly and stay
    /// inside the entries area; a block with no restarts has no entries.
    pub fn new(data: Vec<u8>) -> Result<Block, Malformed> {
        let (restarts_start, num_restarts) = restart_array(&data)?;
        Ok(Block {
            data,
            restarts_start,
            num_restarts,
        })
    }

    fn restart(&self, i: usize) -> Result<usize, Malformed> {
        let at = self.restarts_start + 4 * i;
        self.data
            .get(at..at + 4)
            .map(|b| LittleEndian::read_u32(b) as usize)
            .ok_or_else(|| Malformed::new(at, "restart offset past the end"))
    }

    /// The bytes at `range` of the block, empty when they lie past its end.
    pub(crate) fn bytes(&self, range: Range<usize>) -> &[u8] {
        self.data.get(range).unwrap_or_default()
    }

    /// Bytes of memory the block holds.
    pub fn memory_bytes(&self) -> usize {
        self.data.capacity() + std::mem::size_of::<Block>()
    }

    pub fn iter(self) -> BlockIter {
        Arc::new(self).shared_iter()
    }

    /// An iterator over a shared block (one held by the block cache).
    pub fn shared_iter(self: Arc<Self>) -> BlockIter {
        BlockIter {
            block: self,
            pos: 0,
            key: SPARE_KEY.try_with(Cell::take).unwrap_or_default(),
            has_prev: false,
            prev_seq: 0,
            pending: None,
            current: None,
            failed: false,
        }
    }
}

/// One decoded entry; its key is in the iterator's key buffer.
struct RawEntry {
    seq: SeqNo,
    kind: ValueKind,
    value: Range<usize>,
}

/// Decodes the header and key delta of the entry at `pos` of `entries` against `key` (the
/// previous key, replaced by this entry's key). Returns the entry and where the next starts.
fn decode_entry(
    entries: &[u8],
    pos: usize,
    key: &mut Vec<u8>,
) -> Result<(RawEntry, usize, Ordering), Malformed> {
    let mut d = Decoder::new(entries, pos);
    let shared = d.varint_len("shared key length", key.len())?;
    let unshared = d.varint_len("unshared key length", entries.len())?;
    let value_len = d.varint_len("value length", entries.len())?;
    let seq = d.varint("sequence number")?;
    let kind_at = d.pos();
    let tag = d.u8("kind")?;
    let kind = ValueKind::from_u8(tag)
        .ok_or_else(|| Malformed::new(kind_at, format!("unknown kind tag {tag}")))?;
    if kind == ValueKind::Tombstone && value_len != 0 {
        return Err(Malformed::new(
            kind_at,
            format!("tombstone carries a {value_len}-byte value"),
        ));
    }
    let delta = d.bytes(unshared, "key")?;
    let value_start = d.pos();
    d.bytes(value_len, "value")?;
    // How the new key compares with the previous one: they share `shared` bytes.
    let order = delta.cmp(key.get(shared..).unwrap_or_default());
    key.truncate(shared);
    key.extend_from_slice(delta);
    Ok((
        RawEntry {
            seq,
            kind,
            value: value_start..value_start + value_len,
        },
        d.pos(),
        order,
    ))
}

thread_local! {
    /// The key buffer of the last block iterator dropped on this thread, for the next one to
    /// take: a scan that walks block after block, or lookups key after key, allocate no key
    /// buffer of their own.
    static SPARE_KEY: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

impl Drop for BlockIter {
    fn drop(&mut self) {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        // Not during the thread's end, when its spare is gone already.
        let _ = SPARE_KEY.try_with(|spare| spare.set(key));
    }
}

/// Walks a block's entries in order, from the start or from a sought position.
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the next entry to decode.
    pos: usize,
    /// Key of the entry decoded last.
    key: Vec<u8>,
    has_prev: bool,
    prev_seq: SeqNo,
    /// An entry found by `seek` (its key in `key`), stepped onto by the next `advance`.
    pending: Option<RawEntry>,
    /// The entry the walk stands on (its key in `key`).
    current: Option<RawEntry>,
    failed: bool,
}

impl BlockIter {
    fn decode_next(&mut self) -> Result<Option<RawEntry>, Malformed> {
        let entries = self
            .block
            .data
            .get(..self.block.restarts_start)
            .unwrap_or_default();
        if self.pos >= entries.len() {
            return Ok(None);
        }
        let start = self.pos;
        let (raw, next, key_order) = decode_entry(entries, start, &mut self.key)?;
        if self.has_prev {
            let order = key_order.then(self.prev_seq.cmp(&raw.seq));
            if order != Ordering::Greater {
                return Err(Malformed::new(
                    start,
                    "entry does not sort after the entry before it",
                ));
            }
        }
        self.has_prev = true;
        self.prev_seq = raw.seq;
        self.pos = next;
        Ok(Some(raw))
    }

    /// The entry a `seek` found, its value shared with the block: `None` when the seek ran
    /// off the end of the block.
    pub(super) fn sought_newest(&self) -> Option<Newest> {
        let raw = self.pending.as_ref()?;
        let value = (raw.kind == ValueKind::Value)
            .then(|| Value::shared(Arc::clone(&self.block) as _, raw.value.clone()));
        Some(Newest {
            seq: raw.seq,
            value,
        })
    }

    /// Steps onto the next entry in order: `false` at the end of the block. After an error
    /// the iterator stays at the end.
    pub fn advance(&mut self) -> Result<bool, Malformed> {
        self.current = match self.pending.take() {
            Some(raw) => Some(raw),
            None if self.failed => None,
            None => match self.decode_next() {
                Ok(raw) => raw,
                Err(e) => {
                    self.failed = true;
                    self.current = None;
                    return Err(e);
                }
            },
        };
        Ok(self.current.is_some())
    }

    /// The entry `advance` stepped onto, borrowed from the block.
    pub(crate) fn current(&self) -> EntryView<'_> {
        let raw = self
            .current
            .as_ref()
            .expect("a block iterator lends an entry only while it stands on one");
        EntryView {
            key: &self.key,
            seq: raw.seq,
            kind: raw.kind,
            value: self.block.bytes(raw.value.clone()),
        }
    }

    /// Where the value of the entry the iterator stands on lies in the block.
    pub(super) fn current_value_range(&self) -> Range<usize> {
        self.current.as_ref().map_or(0..0, |raw| raw.value.clone())
    }

    /// The block the iterator walks.
    pub(super) fn block(&self) -> &Arc<Block> {
        &self.block
    }

    /// The next entry in order, copied; `None` at the end of the block. After an error the
    /// iterator stays at the end.
    pub fn next_entry(&mut self) -> Result<Option<Entry>, Malformed> {
        Ok(self.advance()?.then(|| self.current().to_entry()))
    }

    /// The key, kind and sequence number of the entry a `seek` found, without copying its
    /// value; `None` when the seek ran off the end of the block.
    pub fn sought(&self) -> Option<(&[u8], ValueKind, SeqNo)> {
        self.pending
            .as_ref()
            .map(|raw| (self.key.as_slice(), raw.kind, raw.seq))
    }

    /// The key and sequence number of the entry at restart point `i`. A restart entry shares
    /// no prefix with the one before it, so its key lies whole in the block: a seek compares it
    /// in place, with no copy. The rest of the entry is checked when a scan decodes it.
    fn restart_key(&self, i: usize) -> Result<(&[u8], SeqNo), Malformed> {
        let entries = self
            .block
            .data
            .get(..self.block.restarts_start)
            .unwrap_or_default();
        let at = self.block.restart(i)?;
        let mut d = Decoder::new(entries, at);
        d.varint_len("shared key length", 0)?;
        let key_len = d.varint_len("unshared key length", entries.len())?;
        d.varint_len("value length", entries.len())?;
        let seq = d.varint("sequence number")?;
        d.u8("kind")?;
        Ok((d.bytes(key_len, "key")?, seq))
    }

    /// Positions the iterator so that `next_entry` returns the first entry at or after
    /// `(key, seq)` in entry order (key ascending, sequence number descending).
    pub fn seek(&mut self, key: &[u8], seq: SeqNo) -> Result<(), Malformed> {
        let result = self.seek_inner(key, seq);
        if result.is_err() {
            self.failed = true;
            self.pending = None;
        }
        result
    }

    fn seek_inner(&mut self, key: &[u8], seq: SeqNo) -> Result<(), Malformed> {
        self.pending = None;
        self.current = None;
        self.failed = false;
        // The first restart whose key is at or after the target; the target lies in the
        // run that starts one restart earlier.
        let (mut lo, mut hi) = (0, self.block.num_restarts);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let (k, s) = self.restart_key(mid)?;
            if entry_order(k, s, key, seq) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let start = lo.saturating_sub(1);
        self.pos = if self.block.num_restarts == 0 {
            0
        } else {
            self.block.restart(start)?
        };
        self.key.clear();
        self.has_prev = false;
        while let Some(raw) = self.decode_next()? {
            if entry_order(&self.key, raw.seq, key, seq) != Ordering::Less {
                self.pending = Some(raw);
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::block_builder::BlockBuilder;
    use super::*;

    fn build(entries: &[Entry], interval: usize) -> Vec<u8> {
        let mut b = BlockBuilder::new(interval);
        for e in entries {
            b.add(&e.key, e.seq, e.kind, &e.value);
        }
        b.finish()
    }

    fn sample() -> Vec<Entry> {
        let mut v = Vec::new();
        for i in 0..100u32 {
            let key = format!("key{:05}", i * 2).into_bytes();
            v.push(Entry::value(key.clone(), 10, format!("v{i}")));
            if i % 7 == 0 {
                v.push(Entry::tombstone(key, 5));
            }
        }
        v
    }

    fn all(block: Block) -> Result<Vec<Entry>, Malformed> {
        let mut it = block.iter();
        let mut out = Vec::new();
        while let Some(e) = it.next_entry()? {
            out.push(e);
        }
        Ok(out)
    }

    #[test]
    fn round_trip_at_several_restart_intervals() {
        let entries = sample();
        for interval in [1, 2, 16, 1000] {
            let block = Block::new(build(&entries, interval)).unwrap();
            assert_eq!(all(block).unwrap(), entries);
        }
    }

    #[test]
    fn seek_finds_first_entry_at_or_after_target() {
        let entries = sample();
        for interval in [1, 3, 16] {
            let data = build(&entries, interval);
            for probe in 0..205u32 {
                let key = format!("key{probe:05}").into_bytes();
                for seq in [u64::MAX, 10, 7, 5, 0] {
                    let want = entries
                        .iter()
                        .find(|e| entry_order(&e.key, e.seq, &key, seq) != Ordering::Less);
                    let mut it = Block::new(data.clone()).unwrap().iter();
                    it.seek(&key, seq).unwrap();
                    assert_eq!(it.next_entry().unwrap().as_ref(), want);
                }
            }
        }
    }

    #[test]
    fn empty_block_is_valid_and_empty() {
        let data = BlockBuilder::new(16).finish();
        assert_eq!(data.len(), 4);
        let mut it = Block::new(data).unwrap().iter();
        it.seek(b"x", 0).unwrap();
        assert_eq!(it.next_entry().unwrap(), None);
    }

    #[test]
    fn malformed_blocks_give_errors_not_panics() {
        let entries = sample();
        let data = build(&entries, 4);
        for cut in 0..data.len() {
            if let Ok(b) = Block::new(data[..cut].to_vec()) {
                // A truncated block may still parse as a shorter valid block only by chance;
                // either way decoding must not panic.
                let _ = all(b);
            }
        }
        for i in 0..data.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut bad = data.clone();
                bad[i] ^= x;
                if let Ok(b) = Block::new(bad) {
                    let _ = all(b);
                }
            }
        }
        // Out-of-order entries are caught by the iterator.
        let mut b = BlockBuilder::new(16);
        b.add(b"b", 1, ValueKind::Value, b"");
        b.add(b"a", 1, ValueKind::Value, b"");
        assert!(all(Block::new(b.finish()).unwrap()).is_err());
        // Same key, rising sequence number.
        let mut b = BlockBuilder::new(16);
        b.add(b"a", 1, ValueKind::Value, b"");
        b.add(b"a", 2, ValueKind::Value, b"");
        assert!(all(Block::new(b.finish()).unwrap()).is_err());
        // An unknown kind tag.
        let mut b = BlockBuilder::new(16);
        b.add(b"a", 1, ValueKind::Value, b"x");
        let mut data = b.finish();
        data[4] = 9;
        assert!(all(Block::new(data).unwrap()).is_err());
        // A restart offset past the entries.
        let mut b = BlockBuilder::new(1);
        b.add(b"a", 1, ValueKind::Value, b"x");
        b.add(b"b", 1, ValueKind::Value, b"x");
        let mut data = b.finish();
        let n = data.len();
        data[n - 8] = 200;
        assert!(Block::new(data).is_err());
    }
}
