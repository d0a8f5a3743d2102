//! The top level of a two-level index (format version 4): one entry per index partition,
//! kept in memory for the table's life, while the partitions themselves (each an index
//! block of the version 3 layout over a run of data blocks) are read on demand and kept in
//! the store's index cache. A table of 64 MiB holds about thirty partitions, so its resident
//! index is a few hundred bytes where the whole index would be about a hundred kilobytes.
//!
//! `docs/format.md`, "Two-level index", has the bytes.

use std::cmp::Ordering;

use crate::entry::{entry_order, SeqNo};
use crate::sstable::format::{put_varint, BlockHandle, Decoder, Malformed, TRAILER_LEN};
use crate::sstable::index::block_index::BlockIndex;
use crate::sstable::separator::common_prefix_len;

/// Builds a top-level index block from the partitions, in order.
#[derive(Default)]
pub struct TopIndexBuilder {
    entries: Vec<u8>,
    last_key: Vec<u8>,
    count: u64,
}

impl TopIndexBuilder {
    /// Appends the entry of the next partition: its last separator, its stored size (without
    /// the trailer), and the data blocks it indexes with their bytes (trailers included).
    pub fn add(&mut self, separator: &[u8], seq: SeqNo, size: u64, blocks: u64, data_bytes: u64) {
        let shared = common_prefix_len(&self.last_key, separator);
        let delta = &separator[shared..];
        for v in [
            shared as u64,
            delta.len() as u64,
            seq,
            size,
            blocks,
            data_bytes,
        ] {
            put_varint(&mut self.entries, v);
        }
        self.entries.extend_from_slice(delta);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(delta);
        self.count += 1;
    }

    /// The block's contents: the partition count, then the entries.
    pub fn finish(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.entries.len() + 10);
        put_varint(&mut out, self.count);
        out.extend_from_slice(&self.entries);
        out
    }
}

/// The resident top level: for each partition its last separator, its handle, the first data
/// block it indexes and where its data blocks start.
#[derive(Debug)]
pub struct TopIndex {
    /// Every separator key, one after another.
    keys: Vec<u8>,
    /// Where each separator's key ends in `keys`.
    key_ends: Vec<usize>,
    seqs: Vec<SeqNo>,
    partitions: Vec<BlockHandle>,
    /// The first data block of each partition, then the number of data blocks.
    first_blocks: Vec<usize>,
    /// Where each partition's data blocks start, then where the last one's end.
    data_starts: Vec<u64>,
}

impl TopIndex {
    /// Decodes and checks a top-level block whose first partition starts at
    /// `partitions_start`: at least two partitions (a table of one is written with a single
    /// index block), separators rising strictly, every partition and every run of data
    /// blocks non-empty, the partitions tiling the file from `partitions_start`.
    pub fn decode(contents: &[u8], partitions_start: u64) -> Result<TopIndex, Malformed> {
        let mut d = Decoder::new(contents, 0);
        let count = d.varint_len("partition count", contents.len())?;
        if count < 2 {
            return Err(Malformed::new(
                0,
                format!("{count} partitions: a two-level index has at least 2"),
            ));
        }
        let mut top = TopIndex {
            keys: Vec::new(),
            key_ends: Vec::with_capacity(count),
            seqs: Vec::with_capacity(count),
            partitions: Vec::with_capacity(count),
            first_blocks: vec![0],
            data_starts: vec![0],
        };
        let mut offset = partitions_start;
        for p in 0..count {
            let at = d.pos();
            let overflow = || Malformed::new(at, format!("partition {p} runs past 2^64"));
            let prev_key = top.separator_key(p.wrapping_sub(1));
            let prev_len = prev_key.len();
            let shared = d.varint_len("shared key length", prev_len)?;
            let unshared = d.varint_len("unshared key length", contents.len())?;
            let seq = d.varint("sequence number")?;
            let size = d.varint("partition size")?;
            let blocks = d.varint_len("data blocks", usize::MAX)?;
            let data_bytes = d.varint("data bytes")?;
            let delta = d.bytes(unshared, "separator key")?;
            let least_bytes = (blocks as u64).checked_mul(TRAILER_LEN as u64);
            if size < 4 || blocks == 0 || least_bytes.is_none_or(|least| data_bytes < least) {
                return Err(Malformed::new(
                    at,
                    format!(
                        "partition {p}: {size} bytes over {blocks} data blocks of {data_bytes} \
                         bytes"
                    ),
                ));
            }
            let start = top.keys.len() - prev_len;
            top.keys.extend_from_within(start..start + shared);
            top.keys.extend_from_slice(delta);
            top.key_ends.push(top.keys.len());
            top.seqs.push(seq);
            if p > 0 {
                let (key, prev) = (top.separator(p), top.separator(p - 1));
                if entry_order(key.0, key.1, prev.0, prev.1) != Ordering::Greater {
                    return Err(Malformed::new(
                        at,
                        format!("partition {p}'s separator does not sort after the one before"),
                    ));
                }
            }
            let handle = BlockHandle { offset, size };
            offset = handle.checked_end().ok_or_else(overflow)?;
            top.partitions.push(handle);
            let first = top.first_blocks[p];
            top.first_blocks
                .push(first.checked_add(blocks).ok_or_else(overflow)?);
            let start = top.data_starts[p];
            top.data_starts
                .push(start.checked_add(data_bytes).ok_or_else(overflow)?);
        }
        if !d.is_empty() {
            return Err(Malformed::new(
                d.pos(),
                "bytes follow the last partition's entry",
            ));
        }
        top.keys.shrink_to_fit();
        Ok(top)
    }

    /// Number of partitions.
    pub fn len(&self) -> usize {
        self.partitions.len()
    }

    /// Number of data blocks.
    pub fn blocks(&self) -> usize {
        self.first_blocks[self.len()]
    }

    /// Where the last data block's trailer ends.
    pub fn data_end(&self) -> u64 {
        self.data_starts[self.len()]
    }

    /// Where the last partition's trailer ends: where the top-level block starts.
    pub fn partitions_end(&self) -> u64 {
        self.partitions[self.len() - 1].end()
    }

    /// Partition `p`'s handle.
    pub fn partition(&self, p: usize) -> BlockHandle {
        self.partitions[p]
    }

    /// The first data block partition `p` indexes, and how many it does.
    pub fn blocks_of(&self, p: usize) -> (usize, usize) {
        let first = self.first_blocks[p];
        (first, self.first_blocks[p + 1] - first)
    }

    /// Partition `p`'s last separator: that of its last data block.
    pub fn separator(&self, p: usize) -> (&[u8], SeqNo) {
        (self.separator_key(p), self.seqs[p])
    }

    fn separator_key(&self, p: usize) -> &[u8] {
        let start = p
            .checked_sub(1)
            .and_then(|q| self.key_ends.get(q))
            .copied()
            .unwrap_or(0);
        let end = self.key_ends.get(p).copied().unwrap_or(start);
        &self.keys[start..end]
    }

    /// The partition whose blocks can hold `(key, seq)` or the first entry after it: the
    /// first whose last separator is at or after the target; `None` past the last.
    pub fn find(&self, key: &[u8], seq: SeqNo) -> Option<usize> {
        let p = partition_point(self.len(), |p| {
            let (k, s) = self.separator(p);
            entry_order(k, s, key, seq) == Ordering::Less
        });
        (p < self.len()).then_some(p)
    }

    /// The partition that indexes data block `block`; `None` past the last block.
    pub fn partition_of_block(&self, block: usize) -> Option<usize> {
        (block < self.blocks()).then(|| self.first_blocks.partition_point(|&f| f <= block) - 1)
    }

    /// Checks that `index`, read as partition `p`, is the one this level describes: as many
    /// blocks, tiling the same bytes, ending at the same separator, and starting after the
    /// partition before it ends (so partitions never overlap in keys).
    pub fn check_partition(&self, p: usize, index: &BlockIndex) -> Result<(), String> {
        let (_, blocks) = self.blocks_of(p);
        if index.len() != blocks || index.data_end() != self.data_starts[p + 1] {
            return Err(format!(
                "indexes {} data blocks ending at {}; the top level says {blocks} ending at {}",
                index.len(),
                index.data_end(),
                self.data_starts[p + 1]
            ));
        }
        let last = index.last_entry();
        let (key, seq) = self.separator(p);
        if last.is_none_or(|e| e.key != key || e.seq != seq) {
            return Err("its last separator is not the top level's".to_string());
        }
        if let (Some(before), Some(first)) = (p.checked_sub(1), index.entries_from(0).next()) {
            let (key, seq) = self.separator(before);
            if entry_order(&first.key, first.seq, key, seq) != Ordering::Greater {
                return Err(format!(
                    "its first separator does not sort after partition {before}'s last"
                ));
            }
        }
        Ok(())
    }

    /// Where partition `p`'s data blocks start.
    pub fn data_start(&self, p: usize) -> u64 {
        self.data_starts[p]
    }

    /// Bytes of memory held.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<TopIndex>()
            + self.keys.capacity()
            + self.key_ends.capacity() * std::mem::size_of::<usize>()
            + self.seqs.capacity() * std::mem::size_of::<SeqNo>()
            + self.partitions.capacity() * std::mem::size_of::<BlockHandle>()
            + self.first_blocks.capacity() * std::mem::size_of::<usize>()
            + self.data_starts.capacity() * std::mem::size_of::<u64>()
    }
}

/// The first position of `0..len` where `pred` is false, `pred` being true for a prefix.
fn partition_point(len: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn top(entries: &[(&[u8], SeqNo, u64, u64, u64)]) -> Vec<u8> {
        let mut b = TopIndexBuilder::default();
        for &(k, s, size, blocks, bytes) in entries {
            b.add(k, s, size, blocks, bytes);
        }
        b.finish()
    }

    #[test]
    fn round_trips_and_finds_partitions() {
        let bytes = top(&[
            (b"apple", 0, 100, 3, 3000),
            (b"apricot", 7, 50, 2, 2000),
            (b"banana", 0, 60, 1, 900),
        ]);
        let t = TopIndex::decode(&bytes, 6000).unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(t.blocks(), 6);
        assert_eq!(t.data_end(), 5900);
        assert_eq!(
            t.partition(0),
            BlockHandle {
                offset: 6000,
                size: 100
            }
        );
        assert_eq!(
            t.partition(1),
            BlockHandle {
                offset: 6105,
                size: 50
            }
        );
        assert_eq!(t.partitions_end(), 6105 + 55 + 65);
        assert_eq!(t.separator(1), (&b"apricot"[..], 7));
        assert_eq!(t.blocks_of(1), (3, 2));
        assert_eq!(t.data_start(2), 5000);
        assert_eq!(t.find(b"a", SeqNo::MAX), Some(0));
        assert_eq!(t.find(b"apple", 0), Some(0));
        assert_eq!(t.find(b"apple\0", SeqNo::MAX), Some(1));
        assert_eq!(t.find(b"apricot", 8), Some(1));
        assert_eq!(t.find(b"apricot", 7), Some(1));
        assert_eq!(t.find(b"apricot", 6), Some(2));
        assert_eq!(t.find(b"banana", 0), Some(2));
        assert_eq!(t.find(b"banana\0", SeqNo::MAX), None);
        let owners: Vec<_> = (0..7).map(|b| t.partition_of_block(b)).collect();
        let want = [Some(0), Some(0), Some(0), Some(1), Some(1), Some(2), None];
        assert_eq!(owners, want);
    }

    /// The worked example of `docs/format.md`, "Two-level index (version 4)", byte by byte.
    #[test]
    fn the_documented_example_has_the_documented_bytes() {
        let bytes = top(&[(b"key0007", 0, 57, 8, 32000), (b"l", 0, 30, 3, 12100)]);
        let documented = [
            0x02, 0x00, 0x07, 0x00, 0x39, 0x08, 0x80, 0xfa, 0x01, b'k', b'e', b'y', b'0', b'0',
            b'0', b'7', 0x00, 0x01, 0x00, 0x1e, 0x03, 0xc4, 0x5e, b'l',
        ];
        assert_eq!(bytes, documented);
        let t = TopIndex::decode(&bytes, 9000).unwrap();
        assert_eq!(t.partition(1).offset, 9062);
        assert_eq!(t.partitions_end(), 9097);
        assert_eq!((t.data_start(1), t.data_end()), (32000, 44100));
    }

    #[test]
    fn rejects_damage() {
        let good = top(&[(b"a", 0, 100, 3, 3000), (b"b", 0, 50, 2, 2000)]);
        assert!(TopIndex::decode(&good, 0).is_ok());
        let one = top(&[(b"a", 0, 100, 3, 3000)]);
        assert!(TopIndex::decode(&one, 0).is_err());
        let falling = top(&[(b"b", 0, 100, 3, 3000), (b"a", 0, 50, 2, 2000)]);
        assert!(TopIndex::decode(&falling, 0).is_err());
        let empty_run = top(&[(b"a", 0, 100, 0, 0), (b"b", 0, 50, 2, 2000)]);
        assert!(TopIndex::decode(&empty_run, 0).is_err());
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(TopIndex::decode(&trailing, 0).is_err());
        for cut in 0..good.len() {
            assert!(TopIndex::decode(&good[..cut], 0).is_err(), "cut at {cut}");
        }
        // Any byte changed decodes to an error or to another well-formed level, never a panic.
        for at in 0..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[at] ^= 1 << bit;
                let _ = TopIndex::decode(&bad, 0);
            }
        }
        let mut huge = TopIndexBuilder::default();
        huge.add(b"a", 0, 100, usize::MAX as u64 / 2, 3000);
        huge.add(b"b", 0, 100, 1, 3000);
        assert!(TopIndex::decode(&huge.finish(), 0).is_err());
        assert!(TopIndex::decode(&good, u64::MAX - 10).is_err());
    }
}
