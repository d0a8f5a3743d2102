//! A group of puts and deletes applied atomically, and its encoding in a WAL record.
//!
//! ```text
//! record  := first_seq u64 LE | count u32 LE | op*count
//! op      := kind u8 (0 tombstone, 1 value) | key_len varint | key | [value_len varint | value]
//! ```
//! The i-th op gets sequence number `first_seq + i`.

use std::path::Path;

use crate::entry::{check_entry_len, Entry, SeqNo, ValueKind};
use crate::error::{Error, Result};
use crate::varint;

/// Puts and deletes that are logged in one WAL record and become visible together.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<(ValueKind, Vec<u8>, Vec<u8>)>,
    bytes: usize,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Sets `key` to `value`.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        let (key, value) = (key.as_ref().to_vec(), value.as_ref().to_vec());
        self.bytes += key.len() + value.len();
        self.ops.push((ValueKind::Value, key, value));
        self
    }

    /// Deletes `key`.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        let key = key.as_ref().to_vec();
        self.bytes += key.len();
        self.ops.push((ValueKind::Tombstone, key, Vec::new()));
        self
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Bytes of keys and values in the batch.
    pub fn payload_bytes(&self) -> usize {
        self.bytes
    }

    /// Each operation's key, and its value (`None` for a delete), in order.
    pub(crate) fn ops(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.ops.iter().map(|(kind, key, value)| match kind {
            ValueKind::Value => (key.as_slice(), Some(value.as_slice())),
            ValueKind::Tombstone => (key.as_slice(), None),
        })
    }

    /// Checks every key and value against the store's limits.
    pub(crate) fn validate(&self) -> Result<()> {
        self.ops
            .iter()
            .try_for_each(|(_, key, value)| check_entry_len(key, value))
    }

    /// The batch's entries, numbered from `first_seq`; keys and values move, not copy.
    pub(crate) fn into_entries(self, first_seq: SeqNo) -> impl Iterator<Item = Entry> {
        self.ops
            .into_iter()
            .enumerate()
            .map(move |(i, (kind, key, value))| Entry {
                key,
                seq: first_seq + i as u64,
                kind,
                value,
            })
    }

    /// The WAL record for this batch.
    pub(crate) fn encode(&self, first_seq: SeqNo) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.bytes + self.ops.len() * 8);
        out.extend_from_slice(&first_seq.to_le_bytes());
        out.extend_from_slice(&(self.ops.len() as u32).to_le_bytes());
        for (kind, key, value) in &self.ops {
            out.push(*kind as u8);
            varint::put(&mut out, key.len() as u64);
            out.extend_from_slice(key);
            if *kind == ValueKind::Value {
                varint::put(&mut out, value.len() as u64);
                out.extend_from_slice(value);
            }
        }
        out
    }

    /// Numbers an encoded record's operations from `first_seq` (a group's leader numbers
    /// records its members encoded in advance).
    pub(crate) fn set_first_seq(record: &mut [u8], first_seq: SeqNo) {
        record[..8].copy_from_slice(&first_seq.to_le_bytes());
    }

    /// Decodes a WAL record into its entries; `log` and `offset` (the record's) name where
    /// it lies in errors.
    pub(crate) fn decode(record: &[u8], log: &Path, offset: u64) -> Result<Vec<Entry>> {
        let bad =
            |what: &str| Error::corruption(log, Some(offset), format!("bad write batch: {what}"));
        if record.len() < 12 {
            return Err(bad("record shorter than its header"));
        }
        let first_seq = u64::from_le_bytes(record[0..8].try_into().expect("8 bytes"));
        let count = u32::from_le_bytes(record[8..12].try_into().expect("4 bytes"));
        let mut input = &record[12..];
        let mut entries = Vec::with_capacity((count as usize).min(input.len()));
        for i in 0..count as u64 {
            let (&tag, rest) = input.split_first().ok_or_else(|| bad("truncated op"))?;
            input = rest;
            let kind = ValueKind::from_u8(tag).ok_or_else(|| bad("unknown op kind"))?;
            let key = varint::take_slice(&mut input).ok_or_else(|| bad("truncated key"))?;
            let value = match kind {
                ValueKind::Value => {
                    varint::take_slice(&mut input).ok_or_else(|| bad("truncated value"))?
                }
                ValueKind::Tombstone => &[],
            };
            let seq = first_seq
                .checked_add(i)
                .ok_or_else(|| bad("sequence overflow"))?;
            entries.push(Entry {
                key: key.to_vec(),
                seq,
                kind,
                value: value.to_vec(),
            });
        }
        if !input.is_empty() {
            return Err(bad("trailing bytes after the last op"));
        }
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::MAX_KEY_LEN;

    #[test]
    fn encode_decode_round_trip() {
        let mut batch = WriteBatch::new();
        batch
            .put(b"a", b"1")
            .delete(b"b")
            .put(b"", b"")
            .put(vec![0u8; 300], vec![7u8; 70_000]);
        let record = batch.encode(41);
        let entries = WriteBatch::decode(&record, Path::new("x.log"), 0).unwrap();
        let expected: Vec<Entry> = batch.clone().into_entries(41).collect();
        assert_eq!(entries, expected);
        assert_eq!(entries[3].seq, 44);
        assert!(entries[1].is_tombstone());
    }

    #[test]
    fn every_truncation_is_an_error() {
        let mut batch = WriteBatch::new();
        batch.put(b"key", b"value").delete(b"gone");
        let record = batch.encode(1);
        for len in 0..record.len() {
            assert!(WriteBatch::decode(&record[..len], Path::new("x.log"), 0).is_err());
        }
    }

    #[test]
    fn oversized_key_is_rejected() {
        let mut batch = WriteBatch::new();
        batch.put(vec![0u8; MAX_KEY_LEN + 1], b"v");
        assert!(matches!(batch.validate(), Err(Error::KeyTooLarge { .. })));
    }
}
