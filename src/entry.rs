//! The unit every layer of the store passes around: a user key at a sequence number, holding
//! a value or a tombstone.

use crate::error::{Error, Result};

/// Sequence numbers order every write; a larger number is a newer write.
pub type SeqNo = u64;

/// The largest sequence number a write may take: 2^56 − 1, as in LevelDB and RocksDB, which
/// pack a sequence number and an 8-bit kind into one u64. Far above what any store reaches
/// (2^56 writes at ten million a second take 228 years), it leaves room: adding a batch's
/// count (a u32) to any valid sequence number cannot overflow, so a crafted number is
/// caught as corruption at recovery instead of wrapping around.
pub const MAX_SEQ: SeqNo = u64::MAX >> 8;

/// The first and last sequence numbers for `count` (at least 1) new entries after `last`.
/// Fails with `SequenceExhausted` when the last would pass [`MAX_SEQ`].
pub(crate) fn next_seqs(last: SeqNo, count: usize) -> Result<(SeqNo, SeqNo)> {
    let count = count.max(1) as u64;
    match last.checked_add(count) {
        Some(end) if end <= MAX_SEQ => Ok((last + 1, end)),
        _ => Err(Error::SequenceExhausted {
            last,
            count,
            max: MAX_SEQ,
        }),
    }
}

/// Largest key the store accepts.
pub const MAX_KEY_LEN: usize = 64 * 1024;
/// Largest value the store accepts.
pub const MAX_VALUE_LEN: usize = 256 * 1024 * 1024;

/// Fails with `KeyTooLarge` for a key over [`MAX_KEY_LEN`].
pub(crate) fn check_key_len(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max: MAX_KEY_LEN,
        });
    }
    Ok(())
}

/// Fails when a key or value is over the store's limits.
pub(crate) fn check_entry_len(key: &[u8], value: &[u8]) -> Result<()> {
    check_key_len(key)?;
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max: MAX_VALUE_LEN,
        });
    }
    Ok(())
}

/// Whether an entry sets a value or deletes the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// The key was deleted at this sequence number.
    Tombstone = 0,
    /// The key holds a value from this sequence number on.
    Value = 1,
}

impl ValueKind {
    /// Decodes the on-disk tag; `None` for an unknown tag.
    pub fn from_u8(tag: u8) -> Option<ValueKind> {
        match tag {
            0 => Some(ValueKind::Tombstone),
            1 => Some(ValueKind::Value),
            _ => None,
        }
    }
}

/// One versioned key: entries sort by key ascending, then by sequence number descending, so
/// the newest version of a key comes first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    pub seq: SeqNo,
    pub kind: ValueKind,
    /// Empty for a tombstone.
    pub value: Vec<u8>,
}

impl Entry {
    /// A value entry.
    pub fn value(key: impl Into<Vec<u8>>, seq: SeqNo, value: impl Into<Vec<u8>>) -> Entry {
        Entry {
            key: key.into(),
            seq,
            kind: ValueKind::Value,
            value: value.into(),
        }
    }

    /// A tombstone entry.
    pub fn tombstone(key: impl Into<Vec<u8>>, seq: SeqNo) -> Entry {
        Entry {
            key: key.into(),
            seq,
            kind: ValueKind::Tombstone,
            value: Vec::new(),
        }
    }

    /// True for a tombstone.
    pub fn is_tombstone(&self) -> bool {
        self.kind == ValueKind::Tombstone
    }

    /// What a read answers for this entry: its value, or `None` for a tombstone.
    pub fn into_value(self) -> Option<Vec<u8>> {
        (!self.is_tombstone()).then_some(self.value)
    }
}

/// The store's entry order: key ascending, then sequence number descending.
pub fn entry_order(a_key: &[u8], a_seq: SeqNo, b_key: &[u8], b_seq: SeqNo) -> std::cmp::Ordering {
    a_key.cmp(b_key).then(b_seq.cmp(&a_seq))
}

/// The first eight bytes of a key as a big-endian integer, zero-padded. Key order implies
/// prefix order (`a < b` gives `prefix(a) <= prefix(b)`), so an integer compare settles every
/// comparison whose prefixes differ; only equal prefixes need the bytes.
pub(crate) fn key_prefix(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_stop_at_the_maximum_instead_of_wrapping() {
        assert_eq!(next_seqs(0, 1).unwrap(), (1, 1));
        assert_eq!(next_seqs(41, 3).unwrap(), (42, 44));
        assert_eq!(next_seqs(MAX_SEQ - 3, 3).unwrap(), (MAX_SEQ - 2, MAX_SEQ));
        for (last, count) in [
            (MAX_SEQ - 3, 4),
            (MAX_SEQ, 1),
            (u64::MAX, 1),
            (u64::MAX - 1, 5),
        ] {
            match next_seqs(last, count) {
                Err(Error::SequenceExhausted {
                    last: l,
                    count: c,
                    max,
                }) => {
                    assert_eq!((l, c, max), (last, count as u64, MAX_SEQ));
                }
                other => panic!("{last} + {count}: {other:?}"),
            }
        }
    }
}
