//! A table's index as kept in memory for the table's life: for each data block a separator
//! (a key and sequence number at or after the block's last entry and before the next block's
//! first) and the block's handle, in the encoding of the version 3 index block
//! ([`crate::sstable::index::builder`]), searched in place. A block costs the bytes of its separator
//! that differ from the one before, a byte or two of size, and a sixteenth of a restart
//! point: under 8 bytes for random 16-byte keys, where a decoded entry would cost 44.
//!
//! Version 3 indexes are kept as read; older ones ([`crate::sstable::index::v2`]) are re-encoded at
//! open, with their separators (each block's whole last key) as they are.

use std::cmp::Ordering;
use std::ops::Range;

use byteorder::{ByteOrder, LittleEndian};

use crate::entry::SeqNo;
use crate::sstable::format::{
    restart_array, BlockHandle, Decoder, Malformed, SHORT_SEPARATORS_VERSION,
};
use crate::sstable::index::builder::{HAS_SEQ, INDEX_RESTART_INTERVAL};
use crate::sstable::index::v2 as index_v2;
use crate::sstable::separator::common_prefix_len;

/// Decodes and checks a table's index block, written in format version `version`.
pub fn decode(contents: Vec<u8>, version: u32) -> Result<BlockIndex, Malformed> {
    if version >= SHORT_SEPARATORS_VERSION {
        BlockIndex::from_encoded(contents, false, 0)
    } else {
        index_v2::decode(contents)
    }
}

/// Decodes and checks one partition of a two-level index (format version 4): an index block
/// of the version 3 layout whose first data block starts at `start`.
pub fn decode_partition(contents: Vec<u8>, start: u64) -> Result<BlockIndex, Malformed> {
    BlockIndex::from_encoded(contents, false, start)
}

/// The index, checked: its entries decode, its separators rise, and its handles tile the
/// data area from offset 0, or from a partition's first block (so every accessor below finds
/// what it decodes well formed).
#[derive(Debug)]
pub struct BlockIndex {
    /// Entries, restart array and restart count, as `IndexBuilder::finish` writes them.
    bytes: Vec<u8>,
    /// Where the restart array starts; entries occupy `..restarts_start`.
    restarts_start: usize,
    num_restarts: usize,
    /// Number of data blocks.
    len: usize,
    /// Where the last data block's trailer ends (0 without blocks).
    data_end: u64,
    /// Separators are exactly each block's last entry (format versions 1 and 2), not
    /// shortened ones.
    exact: bool,
}

/// One separator and its block's handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub key: Vec<u8>,
    pub seq: SeqNo,
    pub handle: BlockHandle,
}

/// A position in the index, from which [`BlockIndex::next_handle`] takes consecutive blocks'
/// handles without searching again: a scan pays one step per block.
#[derive(Debug, Clone, Copy)]
pub struct BlockCursor {
    /// The block whose handle comes next.
    block: usize,
    /// Where its entry starts.
    pos: usize,
    /// Where it starts in the file, from the blocks before it (its entry stores it only at a
    /// restart point).
    offset: u64,
}

/// One index entry as stored.
struct RawEntry {
    shared: usize,
    /// Where the bytes of the key after the shared ones lie.
    delta: Range<usize>,
    seq: SeqNo,
    /// The block's offset: stored at restart points only.
    offset: Option<u64>,
    size: u64,
    /// Where the next entry starts.
    next: usize,
}

/// Decodes the entry at `pos` of `entries`; a restart point's entry shares nothing and holds
/// its block's offset. Every lookup decodes a few dozen entries, so this stays lean: the
/// common one-byte varints are read inline, and errors are built only on damage.
#[inline(always)]
fn decode_entry(entries: &[u8], pos: usize, at_restart: bool) -> Result<RawEntry, Malformed> {
    let mut at = pos;
    let shared = varint(entries, &mut at, "shared key length")?;
    if at_restart && shared != 0 {
        return Err(Malformed::new(pos, "a restart point shares key bytes"));
    }
    let flagged = varint(entries, &mut at, "unshared key length")?;
    let seq = if flagged & HAS_SEQ != 0 {
        let seq_at = at;
        match varint(entries, &mut at, "sequence number")? {
            0 => {
                return Err(Malformed::new(
                    seq_at,
                    "sequence number 0 is stored as none",
                ))
            }
            seq => seq,
        }
    } else {
        0
    };
    let offset = if at_restart {
        Some(varint(entries, &mut at, "block offset")?)
    } else {
        None
    };
    let size = varint(entries, &mut at, "block size")?;
    let key_len = flagged >> 1;
    let key_end = usize::try_from(key_len)
        .ok()
        .and_then(|n| at.checked_add(n))
        .filter(|&end| end <= entries.len())
        .ok_or_else(|| {
            Malformed::new(
                at,
                format!(
                    "separator key: {key_len} bytes run past the end ({} left)",
                    entries.len() - at
                ),
            )
        })?;
    Ok(RawEntry {
        // Checked against the previous key's length by whoever rebuilds keys.
        shared: usize::try_from(shared).unwrap_or(usize::MAX),
        delta: at..key_end,
        seq,
        offset,
        size,
        next: key_end,
    })
}

/// The varint at `pos` of `bytes`, moving `pos` past it. One- and two-byte varints (key
/// lengths, block sizes) are read inline; anything longer, or not in its shortest form, goes
/// through the store's checked decoder.
#[inline(always)]
fn varint(bytes: &[u8], pos: &mut usize, what: &str) -> Result<u64, Malformed> {
    match bytes.get(*pos..) {
        Some(&[low, ..]) if low < 0x80 => {
            *pos += 1;
            Ok(u64::from(low))
        }
        Some(&[low, high, ..]) if high < 0x80 && high != 0 => {
            *pos += 2;
            Ok(u64::from(low & 0x7f) | u64::from(high) << 7)
        }
        _ => {
            let mut d = Decoder::new(bytes, *pos);
            let value = d.varint(what)?;
            *pos = d.pos();
            Ok(value)
        }
    }
}

/// How a separator key compares with a target key, and how many leading bytes they share:
/// enough to compare the next, prefix-compressed, key without rebuilding it.
#[derive(Clone, Copy)]
struct KeyVsTarget {
    order: Ordering,
    common: usize,
}

impl KeyVsTarget {
    /// One pass over the shared bytes: separators are a few bytes long, too short for a call
    /// to `memcmp` to pay.
    #[inline]
    fn of(key: &[u8], target: &[u8]) -> KeyVsTarget {
        let common = common_prefix_len(key, target);
        let order = match (key.get(common), target.get(common)) {
            (Some(k), Some(t)) => k.cmp(t),
            _ => key.len().cmp(&target.len()),
        };
        KeyVsTarget { order, common }
    }

    /// The comparison for the next key: this key's first `shared` bytes, then `delta`.
    #[inline]
    fn next(self, shared: usize, delta: &[u8], target: &[u8]) -> KeyVsTarget {
        if shared > self.common {
            // The next key keeps the byte where this one left the target (or went past its
            // end): it compares the same way.
            return self;
        }
        // The next key's first `shared` bytes are the target's: the rest decides.
        let rest = target.get(shared..).unwrap_or_default();
        let vs = KeyVsTarget::of(delta, rest);
        KeyVsTarget {
            order: vs.order,
            common: shared + vs.common,
        }
    }

    /// How the entry of the compared key and `seq` sorts against the target key at
    /// `target_seq`.
    #[inline]
    fn entry_order(self, seq: SeqNo, target_seq: SeqNo) -> Ordering {
        self.order.then(target_seq.cmp(&seq))
    }
}

impl BlockIndex {
    /// Checks an index in the version 3 encoding, whose first block starts at `start`, and
    /// keeps it. `exact` says whether its separators are the blocks' last entries (an older
    /// index re-encoded).
    pub(in crate::sstable) fn from_encoded(
        mut bytes: Vec<u8>,
        exact: bool,
        start: u64,
    ) -> Result<BlockIndex, Malformed> {
        let (restarts_start, num_restarts) = restart_array(&bytes)?;
        bytes.shrink_to_fit();
        let mut index = BlockIndex {
            bytes,
            restarts_start,
            num_restarts,
            len: 0,
            data_end: 0,
            exact,
        };
        (index.len, index.data_end) = index.check_entries(start)?;
        Ok(index)
    }

    fn entries(&self) -> &[u8] {
        self.bytes.get(..self.restarts_start).unwrap_or_default()
    }

    fn restart(&self, r: usize) -> Option<usize> {
        let at = self.restarts_start.checked_add(4 * r)?;
        let word = self.bytes.get(at..at.checked_add(4)?)?;
        (r < self.num_restarts).then(|| LittleEndian::read_u32(word) as usize)
    }

    /// Decodes every entry once: restart points where the restart array says, every
    /// separator after the one before it, every offset where the blocks before end (the first
    /// at `start`). Returns the number of blocks and where the last ends.
    fn check_entries(&self, start: u64) -> Result<(usize, u64), Malformed> {
        let entries = self.entries();
        let (mut pos, mut block) = (0usize, 0usize);
        let mut key: Vec<u8> = Vec::new();
        let mut prev_seq = 0;
        let mut end = start;
        while pos < entries.len() {
            let at_restart = block.is_multiple_of(INDEX_RESTART_INTERVAL);
            let restart = block / INDEX_RESTART_INTERVAL;
            if at_restart && self.restart(restart) != Some(pos) {
                return Err(Malformed::new(
                    pos,
                    format!("entry {block} is not where restart point {restart} says"),
                ));
            }
            let e = decode_entry(entries, pos, at_restart)?;
            if e.shared > key.len() {
                return Err(Malformed::new(
                    pos,
                    format!(
                        "entry {block} shares {} key bytes of the {} before it",
                        e.shared,
                        key.len()
                    ),
                ));
            }
            let delta = &entries[e.delta.clone()];
            let key_order = delta.cmp(&key[e.shared..]);
            if block > 0 && key_order.then(prev_seq.cmp(&e.seq)) != Ordering::Greater {
                return Err(Malformed::new(
                    pos,
                    format!("separator {block} does not sort after the one before it"),
                ));
            }
            key.truncate(e.shared);
            key.extend_from_slice(delta);
            prev_seq = e.seq;
            if let Some(offset) = e.offset.filter(|&o| o != end) {
                return Err(Malformed::new(
                    pos,
                    format!("data block {block} starts at {offset}, expected {end}"),
                ));
            }
            end = BlockHandle {
                offset: end,
                size: e.size,
            }
            .checked_end()
            .ok_or_else(|| {
                Malformed::new(pos, format!("data block {block} runs past 2^64 bytes"))
            })?;
            pos = e.next;
            block += 1;
        }
        if block.div_ceil(INDEX_RESTART_INTERVAL) != self.num_restarts {
            return Err(Malformed::new(
                self.restarts_start,
                format!(
                    "{} restart points for {block} entries, one every {INDEX_RESTART_INTERVAL} expected",
                    self.num_restarts
                ),
            ));
        }
        Ok((block, end))
    }

    /// Number of data blocks.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Where the last data block's trailer ends: where the blocks after the data start.
    pub fn data_end(&self) -> u64 {
        self.data_end
    }

    /// Whether each separator is exactly its block's last entry (format versions 1 and 2);
    /// otherwise it is at or after it and before the next block's first.
    pub fn separators_are_exact(&self) -> bool {
        self.exact
    }

    /// Bytes of memory held.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.capacity() + std::mem::size_of::<BlockIndex>()
    }

    /// The first block that can hold `(key, seq)` or the first entry after it: the first whose
    /// separator is at or after the target. `len()` when the target is past the last.
    #[cfg(test)]
    pub fn find_block(&self, key: &[u8], seq: SeqNo) -> usize {
        self.locate(key, seq).map_or(self.len, |(block, _)| block)
    }

    /// The first block whose separator is at or after `(key, seq)`, with its handle; `None`
    /// past the last.
    ///
    /// The restart points' separators, stored whole, are binary-searched for the first at or
    /// after the target; the target's block is then that one or one of the fifteen before it,
    /// which a forward scan compares without rebuilding their keys.
    pub fn locate(&self, key: &[u8], seq: SeqNo) -> Option<(usize, BlockHandle)> {
        let (mut lo, mut hi) = (0, self.num_restarts);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let before_target = self.restart_separator(mid).is_some_and(|(k, s)| {
                KeyVsTarget::of(k, key).entry_order(s, seq) == Ordering::Less
            });
            if before_target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        self.scan_from_restart(lo.saturating_sub(1), key, seq)
    }

    /// Restart point `r`'s separator, whose key lies whole in the entry.
    fn restart_separator(&self, r: usize) -> Option<(&[u8], SeqNo)> {
        let entries = self.entries();
        let e = decode_entry(entries, self.restart(r)?, true).ok()?;
        Some((entries.get(e.delta)?, e.seq))
    }

    /// The first block from restart point `r` on whose separator is at or after the target.
    fn scan_from_restart(&self, r: usize, key: &[u8], seq: SeqNo) -> Option<(usize, BlockHandle)> {
        let entries = self.entries();
        let mut cursor = self.cursor(r * INDEX_RESTART_INTERVAL);
        let mut vs = KeyVsTarget::of(&[], key);
        loop {
            let block = cursor.block;
            let (e, handle) = self.step(&mut cursor)?;
            vs = vs.next(e.shared, entries.get(e.delta)?, key);
            if vs.entry_order(e.seq, seq) != Ordering::Less {
                return Some((block, handle));
            }
        }
    }

    /// Decodes the entry at `cursor` and moves it on to the next block.
    #[inline]
    fn step(&self, cursor: &mut BlockCursor) -> Option<(RawEntry, BlockHandle)> {
        if cursor.block >= self.len {
            return None;
        }
        let at_restart = cursor.block.is_multiple_of(INDEX_RESTART_INTERVAL);
        let e = decode_entry(self.entries(), cursor.pos, at_restart).ok()?;
        let handle = BlockHandle {
            offset: e.offset.unwrap_or(cursor.offset),
            size: e.size,
        };
        *cursor = BlockCursor {
            block: cursor.block + 1,
            pos: e.next,
            offset: handle.end(),
        };
        Some((e, handle))
    }

    /// A cursor at block `block` (at the end when `block` is `len()` or more), found from the
    /// restart point before it.
    pub fn cursor(&self, block: usize) -> BlockCursor {
        let restart = block / INDEX_RESTART_INTERVAL;
        let Some(pos) = self.restart(restart).filter(|_| block < self.len) else {
            return BlockCursor {
                block: self.len,
                pos: self.restarts_start,
                offset: self.data_end,
            };
        };
        let mut cursor = BlockCursor {
            block: restart * INDEX_RESTART_INTERVAL,
            pos,
            offset: 0,
        };
        while cursor.block < block && self.step(&mut cursor).is_some() {}
        cursor
    }

    /// The handle of the block at `cursor`, moving the cursor on; `None` past the last.
    pub fn next_handle(&self, cursor: &mut BlockCursor) -> Option<BlockHandle> {
        self.step(cursor).map(|(_, handle)| handle)
    }

    /// Block `i`'s handle, if there is such a block.
    pub fn handle(&self, i: usize) -> Option<BlockHandle> {
        self.next_handle(&mut self.cursor(i))
    }

    /// Every block's separator and handle, in order, from block `from` on.
    pub fn entries_from(&self, from: usize) -> impl Iterator<Item = IndexEntry> + '_ {
        // Keys are rebuilt from the restart point before `from`.
        let restart = from / INDEX_RESTART_INTERVAL * INDEX_RESTART_INTERVAL;
        let mut cursor = self.cursor(restart);
        let mut key = Vec::new();
        std::iter::from_fn(move || {
            let (e, handle) = self.step(&mut cursor)?;
            key.truncate(e.shared);
            key.extend_from_slice(self.entries().get(e.delta)?);
            Some(IndexEntry {
                key: key.clone(),
                seq: e.seq,
                handle,
            })
        })
        .skip(from - restart)
    }

    /// The last block's separator and handle.
    pub fn last_entry(&self) -> Option<IndexEntry> {
        self.entries_from(self.len.checked_sub(1)?).next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::entry_order;
    use crate::sstable::index::builder::IndexBuilder;
    use crate::sstable::separator::block_separator;
    use proptest::prelude::*;

    /// An index over blocks of the given sizes with the given separators.
    fn index_of(separators: &[(Vec<u8>, SeqNo)], size: impl Fn(usize) -> u64) -> BlockIndex {
        let mut b = IndexBuilder::new();
        let mut offset = 0;
        for (i, (key, seq)) in separators.iter().enumerate() {
            let handle = BlockHandle {
                offset,
                size: size(i),
            };
            b.add(key, *seq, handle);
            offset = handle.end();
        }
        BlockIndex::from_encoded(b.finish(), false, 0).unwrap()
    }

    fn numbered(n: usize) -> Vec<(Vec<u8>, SeqNo)> {
        (0..n)
            .map(|i| (format!("key{:05}", i * 10).into_bytes(), 0))
            .collect()
    }

    #[test]
    fn entries_and_handles_read_back_across_restart_points() {
        for n in [0, 1, 15, 16, 17, 40, 100] {
            let seps = numbered(n);
            let index = index_of(&seps, |i| 100 + i as u64);
            assert_eq!(index.len(), n);
            let entries: Vec<IndexEntry> = index.entries_from(0).collect();
            assert_eq!(entries.len(), n);
            let mut offset = 0;
            for (i, e) in entries.iter().enumerate() {
                assert_eq!((&e.key, e.seq), (&seps[i].0, seps[i].1));
                assert_eq!(
                    e.handle,
                    BlockHandle {
                        offset,
                        size: 100 + i as u64
                    }
                );
                assert_eq!(index.handle(i), Some(e.handle));
                assert_eq!(index.entries_from(i).next().as_ref(), Some(e));
                offset = e.handle.end();
            }
            assert_eq!(index.data_end(), offset);
            assert_eq!(index.handle(n), None);
            assert_eq!(index.entries_from(n).next(), None);
            assert_eq!(index.last_entry(), entries.last().cloned());
            for from in [0, n / 2, n] {
                let mut cursor = index.cursor(from);
                let rest: Vec<BlockHandle> =
                    std::iter::from_fn(|| index.next_handle(&mut cursor)).collect();
                assert!(rest.iter().eq(entries[from..].iter().map(|e| &e.handle)));
            }
        }
    }

    #[test]
    fn lookups_take_the_first_separator_at_or_after_the_target() {
        let seps = numbered(50);
        let index = index_of(&seps, |_| 4000);
        for probe in 0..=500u32 {
            let key = format!("key{probe:05}").into_bytes();
            let want = seps.iter().position(|(k, _)| *k >= key).unwrap_or(50);
            assert_eq!(index.find_block(&key, SeqNo::MAX), want, "{probe}");
            let located = index.locate(&key, 7);
            assert_eq!(located.map(|(b, _)| b), (want < 50).then_some(want));
            assert_eq!(located.map(|(_, h)| h), index.handle(want));
        }
        assert_eq!(index.find_block(b"", SeqNo::MAX), 0);
        assert_eq!(index.find_block(b"zzz", SeqNo::MAX), 50);
    }

    #[test]
    fn split_versions_are_found_by_sequence_number() {
        // Blocks 0 and 1 both hold versions of "k": block 0 ends at ("k", 7).
        let seps = vec![(b"k".to_vec(), 7), (b"l".to_vec(), 0), (b"m".to_vec(), 0)];
        let index = index_of(&seps, |_| 10);
        assert_eq!(index.find_block(b"k", SeqNo::MAX), 0);
        assert_eq!(index.find_block(b"k", 7), 0);
        assert_eq!(index.find_block(b"k", 6), 1);
        assert_eq!(index.find_block(b"k", 0), 1);
        assert_eq!(index.find_block(b"l", 0), 1);
        assert_eq!(index.find_block(b"l\x00", SeqNo::MAX), 2);
    }

    /// The worked example of `docs/format.md`, "Index block", byte for byte: block 0 ends at
    /// `("apple", 7)` before `"apricot"`; block 1 ends at `("apricot", 9)` and block 2 begins
    /// with `("apricot", 8)`; block 2, the last, ends at `"banana"`.
    #[test]
    fn encoding_matches_the_documented_example() {
        let sizes = [4000, 300, 4100];
        let (mut b, mut offset) = (IndexBuilder::new(), 0);
        for (i, (key, seq)) in [
            block_separator(b"apple", 7, Some(b"apricot")),
            block_separator(b"apricot", 9, Some(b"apricot")),
            block_separator(b"banana", 3, None),
        ]
        .into_iter()
        .enumerate()
        {
            let handle = BlockHandle {
                offset,
                size: sizes[i],
            };
            b.add(&key, seq, handle);
            offset = handle.end();
        }
        let contents = b.finish();
        let want: Vec<u8> = [
            &[0x00, 0x06, 0x00, 0xa0, 0x1f][..],
            b"apq",
            &[0x02, 0x0b, 0x09, 0xac, 0x02],
            b"ricot",
            &[0x00, 0x02, 0x84, 0x20],
            b"c",
            &[0, 0, 0, 0, 1, 0, 0, 0],
        ]
        .concat();
        assert_eq!(contents, want);
        let index = BlockIndex::from_encoded(contents, false, 0).unwrap();
        assert_eq!(
            index.handle(2),
            Some(BlockHandle {
                offset: 4310,
                size: 4100
            })
        );
        assert_eq!(index.data_end(), 8415);
    }

    fn damaged(bytes: &[u8]) -> String {
        BlockIndex::from_encoded(bytes.to_vec(), false, 0)
            .unwrap_err()
            .reason
    }

    #[test]
    fn damaged_indexes_are_rejected_with_the_reason() {
        let mut b = IndexBuilder::new();
        for (i, key) in [&b"a"[..], b"ab", b"b"].iter().enumerate() {
            b.add(
                key,
                0,
                BlockHandle {
                    offset: 105 * i as u64,
                    size: 100,
                },
            );
        }
        let good = b.finish();
        BlockIndex::from_encoded(good.clone(), false, 0).unwrap();
        // Entry 0: shared 0, unshared 1 << 1, offset 0, size 100, "a". Entry 1 ("ab"):
        // shared 1, unshared 1 << 1, size 100, "b". Entry 2 ("b"): shared 0, the same.
        let want: Vec<u8> = [
            &[0x00, 0x02, 0x00, 0x64, b'a'][..],
            &[0x01, 0x02, 0x64, b'b'],
            &[0x00, 0x02, 0x64, b'b'],
            &[0, 0, 0, 0, 1, 0, 0, 0],
        ]
        .concat();
        assert_eq!(good, want);
        let with = |at: usize, bytes: &[u8]| {
            let mut bad = good.clone();
            bad[at..at + bytes.len()].copy_from_slice(bytes);
            damaged(&bad)
        };
        // A varint that runs to the end of the entries.
        let reason = with(9, &[0x80; 4]);
        assert!(reason.contains("shared key length"), "{reason}");
        // The sequence number flag, with 0 after it (0 is written as no sequence number).
        assert!(with(1, &[0x03]).contains("sequence number 0 is stored as none"));
        assert!(with(0, &[0x01]).contains("restart point shares key bytes"));
        assert!(with(2, &[0x05]).contains("data block 0 starts at 5, expected 0"));
        assert!(with(5, &[0x02]).contains("entry 1 shares 2 key bytes of the 1 before it"));
        // "a" after "ab": keys not rising.
        assert!(with(12, b"a").contains("separator 2 does not sort after the one before it"));
        // A key longer than the entries left.
        assert!(with(10, &[0x10]).contains("separator key"));
        // The restart array: an offset inside entry 0, a count claiming the entries' bytes,
        // a count that does not fit, a block too short for the count.
        assert!(with(13, &[3]).contains("restart offset 3 is out of order or out of range"));
        assert!(with(17, &[2]).contains("out of order or out of range"));
        assert!(with(17, &[0xff]).contains("does not fit"));
        assert!(with(17, &[0]).contains("exactly when it holds entries"));
        assert!(damaged(&good[..3]).contains("cannot hold the restart count"));

        // 20 entries: a second restart point that is not at entry 16.
        let mut b = IndexBuilder::new();
        for (i, (key, _)) in numbered(20).into_iter().enumerate() {
            b.add(
                &key,
                0,
                BlockHandle {
                    offset: 105 * i as u64,
                    size: 100,
                },
            );
        }
        let mut bad = b.finish();
        let n = bad.len();
        bad[n - 8] -= 1;
        assert!(damaged(&bad).contains("entry 16 is not where restart point 1 says"));
        bad[n - 8] += 1;
        bad[n - 4] = 3;
        assert!(!damaged(&bad).is_empty());
    }

    /// An index of 40 blocks, some separators with sequence numbers: three restart points.
    fn sample_index_bytes() -> Vec<u8> {
        let mut b = IndexBuilder::new();
        for (i, (key, _)) in numbered(40).into_iter().enumerate() {
            let seq = if i % 3 == 0 { 0 } else { 1000 + i as u64 };
            b.add(
                &key,
                seq,
                BlockHandle {
                    offset: 4005 * i as u64,
                    size: 4000,
                },
            );
        }
        b.finish()
    }

    /// Uses every accessor of an index that was accepted: each must agree with the others.
    fn exercise(index: &BlockIndex, key: &[u8], seq: SeqNo) {
        let n = index.len();
        let entries: Vec<IndexEntry> = index.entries_from(0).collect();
        assert_eq!(entries.len(), n);
        let mut cursor = index.cursor(0);
        let handles = std::iter::from_fn(|| index.next_handle(&mut cursor));
        assert!(handles.eq(entries.iter().map(|e| e.handle)));
        assert_eq!(index.last_entry(), entries.last().cloned());
        let found = index.find_block(key, seq);
        let want = entries
            .iter()
            .position(|e| entry_order(&e.key, e.seq, key, seq) != Ordering::Less);
        assert_eq!(found, want.unwrap_or(n));
    }

    #[test]
    fn any_damage_gives_an_error_or_a_consistent_index_never_a_panic() {
        let index_bytes = sample_index_bytes();
        exercise(
            &BlockIndex::from_encoded(index_bytes.clone(), false, 0).unwrap(),
            b"key00100",
            5,
        );
        for at in 0..index_bytes.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = index_bytes.clone();
                bad[at] ^= flip;
                if let Ok(index) = BlockIndex::from_encoded(bad, false, 0) {
                    exercise(&index, b"key00100", 5);
                }
            }
        }
        for cut in 0..index_bytes.len() {
            if let Ok(index) = BlockIndex::from_encoded(index_bytes[..cut].to_vec(), false, 0) {
                exercise(&index, b"key00100", 5);
            }
        }
    }

    /// Sorted entries `(key, seq)` cut into blocks at `cuts`: each block's last entry.
    fn blocks_of(entries: &[(Vec<u8>, SeqNo)], cuts: &[usize]) -> Vec<Range<usize>> {
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % entries.len()).collect();
        bounds.push(0);
        bounds.push(entries.len());
        bounds.sort_unstable();
        bounds.dedup();
        bounds.windows(2).map(|w| w[0]..w[1]).collect()
    }

    fn small_keys() -> impl Strategy<Value = Vec<(Vec<u8>, SeqNo)>> {
        let key =
            proptest::collection::vec(prop::sample::select(vec![0u8, 1, b'a', 0xfe, 0xff]), 0..4);
        proptest::collection::vec((key, 1..4u64), 1..80).prop_map(|mut v| {
            v.sort_by(|a, b| entry_order(&a.0, a.1, &b.0, b.1));
            v.dedup();
            v
        })
    }

    proptest! {
        #[test]
        fn mutated_or_random_index_bytes_never_panic(
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
            random in proptest::collection::vec(any::<u8>(), 0..120),
            key in proptest::collection::vec(any::<u8>(), 0..10),
            seq in any::<u64>(),
        ) {
            let mut mutated = sample_index_bytes();
            for (at, byte) in edits {
                let n = mutated.len();
                mutated[at % n] = byte;
            }
            for bytes in [mutated, random] {
                if let Ok(index) = BlockIndex::from_encoded(bytes, false, 0) {
                    exercise(&index, &key, seq);
                }
            }
        }

        #[test]
        fn every_key_maps_to_the_block_whose_range_holds_it(
            entries in small_keys(),
            cuts in proptest::collection::vec(any::<usize>(), 0..30),
            probes in proptest::collection::vec(
                (proptest::collection::vec(prop::sample::select(vec![0u8, 1, 2, b'a', b'b', 0xfe, 0xff]), 0..5), 0..5u64),
                40,
            ),
        ) {
            let blocks = blocks_of(&entries, &cuts);
            let separators: Vec<(Vec<u8>, SeqNo)> = blocks
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let (last_key, last_seq) = &entries[r.end - 1];
                    let next = blocks.get(i + 1).map(|n| entries[n.start].0.as_slice());
                    block_separator(last_key, *last_seq, next)
                })
                .collect();
            let index = index_of(&separators, |i| 50 + i as u64 % 7);
            prop_assert_eq!(index.len(), blocks.len());
            // Every present entry is found in its own block.
            for (b, r) in blocks.iter().enumerate() {
                for (key, seq) in &entries[r.clone()] {
                    prop_assert_eq!(index.find_block(key, *seq), b);
                }
            }
            // Any target lands in the block whose range would hold it: every entry of the
            // blocks before sorts before it, every entry of the blocks after sorts after it.
            for (key, seq) in probes.iter().chain(entries.iter()) {
                let b = index.find_block(key, *seq);
                let before = |e: &(Vec<u8>, SeqNo)| entry_order(&e.0, e.1, key, *seq) == Ordering::Less;
                let held_before = blocks.get(b).map_or(entries.len(), |r| r.start);
                prop_assert!(entries[..held_before].iter().all(before));
                let after = blocks.get(b).map_or(entries.len(), |r| r.end);
                prop_assert!(!entries[after..].iter().any(before));
                if b < blocks.len() {
                    let e = &index.entries_from(b).next().unwrap();
                    prop_assert!(entry_order(&e.key, e.seq, key, *seq) != Ordering::Less);
                }
            }
        }
    }
}
