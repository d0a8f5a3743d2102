//! A group of puts and deletes applied atomically, and its encoding in a WAL record.
//!
//! ```text
//! record  := first_seq u64 LE | count u32 LE | op*count
//! op      := kind u8 | [keyspace varint] | key_len varint | key | [value_len varint | value]
//! kind    := 0 tombstone | 1 value | 4 range  (in the default keyspace)
//!          | 2 tombstone | 3 value | 6 range  (in the keyspace numbered next)
//! ```
//! The i-th op gets sequence number `first_seq + i`. A range deletion's key is the range's
//! start and its value the range's end (excluded). Ops of the default keyspace are written
//! as they were before keyspaces, so logs of older stores replay as they are.

use std::path::Path;

use crate::entry::{check_entry_len, check_key_len, Entry, SeqNo, ValueKind};
use crate::error::{Error, Result};
use crate::keyspace::{KeyspaceId, DEFAULT_ID};
use crate::range_tombstone::RangeTombstone;
use crate::varint;

/// An op's kind byte adds this when the op names its keyspace.
const IN_KEYSPACE: u8 = 2;
/// The kind byte of a range deletion (in the default keyspace).
const RANGE: u8 = 4;

/// Puts and deletes that are logged in one WAL record and become visible together, in one
/// keyspace or across several.
///
/// ```
/// use bloomkv::{Db, KeyspaceOptions, Options, WriteBatch, WriteOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path(), Options::default())?;
/// let index = db.keyspace("index", KeyspaceOptions::new())?;
/// let mut batch = WriteBatch::new();
/// batch.put("doc:7", "hello").delete("doc:6");
/// batch.put_in(&index, "word:hello", "doc:7"); // another keyspace, the same batch
/// db.write_opt(batch, &WriteOptions::synced())?; // all or nothing, durable on return
/// assert_eq!(index.get("word:hello")?, Some(b"doc:7".to_vec()));
/// # Ok::<(), bloomkv::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<Op>,
    bytes: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Op {
    kind: OpKind,
    keyspace: KeyspaceId,
    key: Vec<u8>,
    /// The value of a put; the end of a range deletion's range.
    value: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Point(ValueKind),
    /// Deletes the keys from `key` (included) to `value` (excluded).
    DeleteRange,
}

/// One write of a batch, numbered: an entry, or a range deletion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Write {
    Entry(Entry),
    Range(RangeTombstone),
}

impl Write {
    pub(crate) fn seq(&self) -> SeqNo {
        match self {
            Write::Entry(e) => e.seq,
            Write::Range(t) => t.seq,
        }
    }
}

/// One op of a batch as conditions read it: a key set or deleted, or a range deleted.
pub(crate) enum OpView<'a> {
    Key((KeyspaceId, &'a [u8]), Option<&'a [u8]>),
    Range(KeyspaceId, &'a [u8], &'a [u8]),
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::default()
    }

    /// Sets `key` to `value` in the default keyspace.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.push(ValueKind::Value, DEFAULT_ID, key.as_ref(), value.as_ref())
    }

    /// Deletes `key` from the default keyspace.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.push(ValueKind::Tombstone, DEFAULT_ID, key.as_ref(), &[])
    }

    /// Deletes every key from `start` (included) to `end` (excluded) in the default keyspace,
    /// as one write: see [`Db::delete_range`](crate::Db::delete_range). Writes after it in the
    /// batch are not deleted by it. A range with `end <= start` deletes nothing.
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> &mut Self {
        self.push_range(DEFAULT_ID, start.as_ref(), end.as_ref())
    }

    pub(crate) fn push(
        &mut self,
        kind: ValueKind,
        keyspace: KeyspaceId,
        key: &[u8],
        value: &[u8],
    ) -> &mut Self {
        self.push_op(OpKind::Point(kind), keyspace, key, value)
    }

    pub(crate) fn push_range(
        &mut self,
        keyspace: KeyspaceId,
        start: &[u8],
        end: &[u8],
    ) -> &mut Self {
        self.push_op(OpKind::DeleteRange, keyspace, start, end)
    }

    fn push_op(
        &mut self,
        kind: OpKind,
        keyspace: KeyspaceId,
        key: &[u8],
        value: &[u8],
    ) -> &mut Self {
        self.bytes += key.len() + value.len();
        self.ops.push(Op {
            kind,
            keyspace,
            key: key.to_vec(),
            value: value.to_vec(),
        });
        self
    }

    /// The keyspace of every op, when they share one (`None` for an empty batch).
    pub(crate) fn only_keyspace(&self) -> Option<KeyspaceId> {
        let first = self.ops.first()?.keyspace;
        self.ops
            .iter()
            .all(|op| op.keyspace == first)
            .then_some(first)
    }

    /// Each keyspace the batch writes to, in the order of the ops (once per run of ops).
    pub(crate) fn keyspaces(&self) -> impl Iterator<Item = KeyspaceId> + '_ {
        let mut last = None;
        self.ops.iter().filter_map(move |op| {
            let new = last != Some(op.keyspace);
            last = Some(op.keyspace);
            new.then_some(op.keyspace)
        })
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

    /// Each operation's keyspace and key, and its value (`None` for a delete), in order: what
    /// conditions (transactions, compare-and-swap) are checked against.
    pub(crate) fn ops(&self) -> impl Iterator<Item = OpView<'_>> {
        self.ops.iter().map(|op| match op.kind {
            OpKind::Point(kind) => {
                let value = (kind == ValueKind::Value).then_some(op.value.as_slice());
                OpView::Key((op.keyspace, op.key.as_slice()), value)
            }
            OpKind::DeleteRange => OpView::Range(op.keyspace, &op.key, &op.value),
        })
    }

    /// Whether the batch deletes a range.
    pub(crate) fn has_range_deletions(&self) -> bool {
        self.ops.iter().any(|op| op.kind == OpKind::DeleteRange)
    }

    /// Checks every key and value (a range's ends: both keys) against the store's limits.
    pub(crate) fn validate(&self) -> Result<()> {
        self.ops.iter().try_for_each(|op| match op.kind {
            OpKind::Point(_) => check_entry_len(&op.key, &op.value),
            OpKind::DeleteRange => check_key_len(&op.key).and(check_key_len(&op.value)),
        })
    }

    /// The batch's writes with their keyspaces, numbered from `first_seq`; keys and values
    /// move, not copy.
    pub(crate) fn into_writes(self, first_seq: SeqNo) -> impl Iterator<Item = (KeyspaceId, Write)> {
        self.ops.into_iter().enumerate().map(move |(i, op)| {
            let seq = first_seq + i as u64;
            (op.keyspace, numbered(op.kind, op.key, op.value, seq))
        })
    }

    /// The WAL record for this batch.
    pub(crate) fn encode(&self, first_seq: SeqNo) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.bytes + self.ops.len() * 8);
        out.extend_from_slice(&first_seq.to_le_bytes());
        out.extend_from_slice(&(self.ops.len() as u32).to_le_bytes());
        for op in &self.ops {
            let kind = match op.kind {
                OpKind::Point(kind) => kind as u8,
                OpKind::DeleteRange => RANGE,
            };
            match op.keyspace {
                DEFAULT_ID => out.push(kind),
                keyspace => {
                    out.push(kind + IN_KEYSPACE);
                    varint::put(&mut out, u64::from(keyspace));
                }
            }
            varint::put(&mut out, op.key.len() as u64);
            out.extend_from_slice(&op.key);
            if op.kind != OpKind::Point(ValueKind::Tombstone) {
                varint::put(&mut out, op.value.len() as u64);
                out.extend_from_slice(&op.value);
            }
        }
        out
    }

    /// Numbers an encoded record's operations from `first_seq` (a group's leader numbers
    /// records its members encoded in advance).
    pub(crate) fn set_first_seq(record: &mut [u8], first_seq: SeqNo) {
        record[..8].copy_from_slice(&first_seq.to_le_bytes());
    }

    /// Decodes a WAL record into its writes and their keyspaces; `log` and `offset` (the
    /// record's) name where it lies in errors.
    pub(crate) fn decode(
        record: &[u8],
        log: &Path,
        offset: u64,
    ) -> Result<Vec<(KeyspaceId, Write)>> {
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
            let (kind, keyspace) = match tag {
                _ if tag & IN_KEYSPACE != 0 => {
                    let id = varint::take(&mut input).ok_or_else(|| bad("truncated keyspace"))?;
                    let id = KeyspaceId::try_from(id)
                        .ok()
                        .filter(|&id| id != DEFAULT_ID)
                        .ok_or_else(|| bad("keyspace number 0 or out of range"))?;
                    (tag - IN_KEYSPACE, id)
                }
                _ => (tag, DEFAULT_ID),
            };
            let kind = match kind {
                RANGE => OpKind::DeleteRange,
                _ => OpKind::Point(ValueKind::from_u8(kind).ok_or_else(|| bad("unknown op kind"))?),
            };
            let key = varint::take_slice(&mut input).ok_or_else(|| bad("truncated key"))?;
            let value = match kind {
                OpKind::Point(ValueKind::Tombstone) => &[],
                _ => varint::take_slice(&mut input).ok_or_else(|| bad("truncated value"))?,
            };
            let seq = first_seq
                .checked_add(i)
                .ok_or_else(|| bad("sequence overflow"))?;
            entries.push((keyspace, numbered(kind, key.to_vec(), value.to_vec(), seq)));
        }
        if !input.is_empty() {
            return Err(bad("trailing bytes after the last op"));
        }
        Ok(entries)
    }
}

/// An op numbered `seq`: an entry, or a range deletion from `key` to `value`.
fn numbered(kind: OpKind, key: Vec<u8>, value: Vec<u8>, seq: SeqNo) -> Write {
    match kind {
        OpKind::Point(kind) => Write::Entry(Entry {
            key,
            seq,
            kind,
            value,
        }),
        OpKind::DeleteRange => Write::Range(RangeTombstone {
            start: key,
            end: value,
            seq,
        }),
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
        let expected: Vec<(KeyspaceId, Write)> = batch.clone().into_writes(41).collect();
        assert_eq!(entries, expected);
        assert_eq!(entries[3].1.seq(), 44);
        assert!(matches!(&entries[1].1, Write::Entry(e) if e.is_tombstone()));
        assert!(entries.iter().all(|(ks, _)| *ks == DEFAULT_ID));
        // Ops of the default keyspace are encoded as before keyspaces: kind 0 or 1 first.
        assert_eq!(record[12], ValueKind::Value as u8);
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
    fn ops_of_other_keyspaces_name_their_keyspace() {
        let mut batch = WriteBatch::new();
        batch.put(b"a", b"0");
        batch.push(ValueKind::Value, 7, b"a", b"1");
        batch.push(ValueKind::Tombstone, 300, b"b", b"");
        assert_eq!(batch.only_keyspace(), None);
        assert_eq!(batch.keyspaces().collect::<Vec<_>>(), [DEFAULT_ID, 7, 300]);
        let record = batch.encode(9);
        let entries = WriteBatch::decode(&record, Path::new("x.log"), 0).unwrap();
        let keyspaces: Vec<KeyspaceId> = entries.iter().map(|(ks, _)| *ks).collect();
        assert_eq!(keyspaces, [DEFAULT_ID, 7, 300]);
        assert_eq!(entries, batch.clone().into_writes(9).collect::<Vec<_>>());
        // The second op: kind 3 (a value in a keyspace), then the keyspace's number.
        assert_eq!(record[12 + 5..12 + 7], [3, 7]);
        for len in 0..record.len() {
            assert!(WriteBatch::decode(&record[..len], Path::new("x.log"), 0).is_err());
        }
        let mut unknown = record.clone();
        unknown[12 + 5] = 5;
        assert!(WriteBatch::decode(&unknown, Path::new("x.log"), 0).is_err());
        // The default keyspace is never named: its ops have kinds 0 and 1.
        let mut named_default = record.clone();
        named_default[12 + 6] = 0;
        assert!(WriteBatch::decode(&named_default, Path::new("x.log"), 0).is_err());
    }

    #[test]
    fn range_deletions_round_trip_in_any_keyspace() {
        let mut batch = WriteBatch::new();
        batch.put(b"a", b"1").delete_range(b"b", b"d");
        batch.push_range(9, b"", b"zz");
        batch.put(b"c", b"after");
        assert!(batch.has_range_deletions());
        let record = batch.encode(5);
        let writes = WriteBatch::decode(&record, Path::new("x.log"), 0).unwrap();
        assert_eq!(writes, batch.clone().into_writes(5).collect::<Vec<_>>());
        let range = |start: &[u8], end: &[u8], seq| {
            Write::Range(RangeTombstone {
                start: start.to_vec(),
                end: end.to_vec(),
                seq,
            })
        };
        assert_eq!(writes[1], (DEFAULT_ID, range(b"b", b"d", 6)));
        assert_eq!(writes[2], (9, range(b"", b"zz", 7)));
        // Kind 4 in the default keyspace, 6 in another.
        assert_eq!(record[12 + 5], 4);
        for len in 0..record.len() {
            assert!(WriteBatch::decode(&record[..len], Path::new("x.log"), 0).is_err());
        }
        let mut bad_end = WriteBatch::new();
        bad_end.delete_range(b"a", vec![0u8; MAX_KEY_LEN + 1]);
        assert!(matches!(bad_end.validate(), Err(Error::KeyTooLarge { .. })));
    }

    #[test]
    fn oversized_key_is_rejected() {
        let mut batch = WriteBatch::new();
        batch.put(vec![0u8; MAX_KEY_LEN + 1], b"v");
        assert!(matches!(batch.validate(), Err(Error::KeyTooLarge { .. })));
    }
}
