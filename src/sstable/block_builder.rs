//! Builds the sorted blocks of a table (data blocks and the index block share the format):
//! entries with keys prefix-compressed against the previous key, a full key every
//! `restart_interval` entries, and the array of those restart offsets at the end.

use super::format::{put_restart_array, put_varint};
use crate::entry::{SeqNo, ValueKind};

pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// `restart_interval` must be at least 1 (the table options are checked before this).
    pub fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The size `finish` would return now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Appends an entry; the caller guarantees entry order.
    pub fn add(&mut self, key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        let shared = if self.since_restart == self.restart_interval || self.entries == 0 {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        } else {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let unshared = &key[shared..];
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, unshared.len() as u64);
        put_varint(&mut self.buf, value.len() as u64);
        put_varint(&mut self.buf, seq);
        self.buf.push(kind as u8);
        self.buf.extend_from_slice(unshared);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(unshared);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// The block's contents; the builder is reset for the next block.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        put_restart_array(&mut out, &self.restarts);
        self.restarts.clear();
        self.since_restart = 0;
        self.last_key.clear();
        self.entries = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::{block_trailer, BlockKind};
    use super::*;
    use crate::sstable::compression::Compression;

    /// The worked example of `docs/format.md`, byte for byte.
    #[test]
    fn encoding_matches_the_documented_example() {
        let mut b = BlockBuilder::new(16);
        b.add(b"apple", 7, ValueKind::Value, b"red");
        b.add(b"apricot", 9, ValueKind::Value, b"");
        let contents = b.finish();
        let mut want = vec![0x00, 0x05, 0x03, 0x07, 0x01];
        want.extend_from_slice(b"applered");
        want.extend_from_slice(&[0x02, 0x05, 0x00, 0x09, 0x01]);
        want.extend_from_slice(b"ricot");
        want.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(contents, want);
        assert_eq!(
            block_trailer(&contents, BlockKind::Data, Compression::None),
            [0x01, 0x2f, 0x9c, 0x97, 0xb3]
        );
        assert!(b.is_empty());
        assert_eq!(b.estimated_size(), 4);
    }
}
