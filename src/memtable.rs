//! The in-memory table that takes every write before it is flushed to a table file.
//!
//! Entries are kept in a B-tree ordered by key ascending and sequence number descending, so
//! the newest visible version of a key is the first one at or after `(key, snapshot)`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::entry::{Entry, SeqNo, ValueKind};
use crate::error::Result;

type MemKey = (Vec<u8>, Reverse<SeqNo>);

/// Bytes a B-tree slot of one entry takes: its key (the key's `Vec` and sequence number)
/// and its value (kind and the value's `Vec`), with nodes two-thirds full on average and
/// one internal node per eleven leaves.
const SLOT_BYTES: usize =
    (std::mem::size_of::<MemKey>() + std::mem::size_of::<(ValueKind, Vec<u8>)>()) * 17 / 10;

/// Bytes the allocator hands out for a heap buffer of `len` bytes: a header of 8 bytes,
/// rounded up to 16, at least 32 (glibc's malloc; others are close).
fn heap_bytes(len: usize) -> usize {
    match len {
        0 => 0,
        _ => (len + 8).div_ceil(16).max(2) * 16,
    }
}

/// Memory one entry holds in the memtable: its slot and its key's and value's buffers.
fn entry_bytes(key_len: usize, value_len: usize) -> usize {
    SLOT_BYTES + heap_bytes(key_len) + heap_bytes(value_len)
}

/// A sorted, versioned, in-memory write buffer, shared by one writer and many readers.
#[derive(Debug)]
pub struct MemTable {
    map: RwLock<BTreeMap<MemKey, (ValueKind, Vec<u8>)>>,
    approximate_bytes: AtomicUsize,
    /// The WAL file that holds this memtable's writes.
    log_number: u64,
}

impl MemTable {
    /// An empty memtable whose writes are logged in WAL `log_number`.
    pub fn new(log_number: u64) -> MemTable {
        MemTable {
            map: RwLock::new(BTreeMap::new()),
            approximate_bytes: AtomicUsize::new(0),
            log_number,
        }
    }

    /// The WAL file that holds this memtable's writes.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Adds entries (one batch) under a single lock acquisition.
    pub fn apply(&self, entries: impl IntoIterator<Item = Entry>) {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let mut added = 0;
        for e in entries {
            added += entry_bytes(e.key.len(), e.value.len());
            map.insert((e.key, Reverse(e.seq)), (e.kind, e.value));
        }
        self.approximate_bytes.fetch_add(added, Ordering::Relaxed);
    }

    /// The newest version of `key` with a sequence number at most `snapshot`.
    pub fn get(&self, key: &[u8], snapshot: SeqNo) -> Option<Entry> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let start = (key.to_vec(), Reverse(snapshot));
        let ((found_key, Reverse(seq)), (kind, value)) = map.range(start..).next()?;
        (found_key.as_slice() == key).then(|| Entry {
            key: found_key.clone(),
            seq: *seq,
            kind: *kind,
            value: value.clone(),
        })
    }

    /// Whether the newest version of `key` at most `snapshot` is a value or a tombstone,
    /// without copying the value.
    pub fn kind_of(&self, key: &[u8], snapshot: SeqNo) -> Option<ValueKind> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        let start = (key.to_vec(), Reverse(snapshot));
        let ((found_key, _), (kind, _)) = map.range(start..).next()?;
        (found_key.as_slice() == key).then_some(*kind)
    }

    /// Approximate memory held by keys, values and bookkeeping.
    pub fn approximate_bytes(&self) -> usize {
        self.approximate_bytes.load(Ordering::Relaxed)
    }

    /// Number of entries (every version counts).
    pub fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// True when no write went in (no lock taken: lookups skip empty memtables cheaply).
    pub fn is_empty(&self) -> bool {
        self.approximate_bytes.load(Ordering::Relaxed) == 0
    }

    /// Entries at or after `start`, in entry order, read in chunks so that the lock is never
    /// held while the caller works.
    pub fn iter_from(self: &Arc<Self>, start: Bound<&[u8]>) -> MemTableIter {
        let next = match start {
            Bound::Included(k) => Bound::Included((k.to_vec(), Reverse(SeqNo::MAX))),
            Bound::Excluded(k) => Bound::Excluded((k.to_vec(), Reverse(0))),
            Bound::Unbounded => Bound::Unbounded,
        };
        MemTableIter {
            mem: Arc::clone(self),
            next,
            buffer: VecDeque::new(),
            done: false,
        }
    }
}

/// How many entries a [`MemTableIter`] copies out per lock acquisition.
const ITER_CHUNK: usize = 256;

/// An iterator over a memtable that sees entries written after it started as well; callers
/// filter by sequence number for a consistent snapshot.
pub struct MemTableIter {
    mem: Arc<MemTable>,
    next: Bound<MemKey>,
    buffer: VecDeque<Entry>,
    done: bool,
}

impl MemTableIter {
    fn refill(&mut self) {
        let map = self.mem.map.read().unwrap_or_else(|e| e.into_inner());
        let range = map.range((self.next.clone(), Bound::Unbounded));
        for ((key, Reverse(seq)), (kind, value)) in range.take(ITER_CHUNK) {
            self.buffer.push_back(Entry {
                key: key.clone(),
                seq: *seq,
                kind: *kind,
                value: value.clone(),
            });
        }
        match self.buffer.back() {
            Some(last) => self.next = Bound::Excluded((last.key.clone(), Reverse(last.seq))),
            None => self.done = true,
        }
    }
}

impl Iterator for MemTableIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.buffer.is_empty() && !self.done {
            self.refill();
        }
        self.buffer.pop_front().map(Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_sees_newest_version_within_snapshot() {
        let mem = MemTable::new(1);
        mem.apply([Entry::value(b"k".to_vec(), 1, b"one".to_vec())]);
        mem.apply([Entry::tombstone(b"k".to_vec(), 2)]);
        mem.apply([Entry::value(b"k".to_vec(), 3, b"three".to_vec())]);
        assert_eq!(mem.get(b"k", 3).unwrap().value, b"three");
        assert!(mem.get(b"k", 2).unwrap().is_tombstone());
        assert_eq!(mem.get(b"k", 1).unwrap().value, b"one");
        assert!(mem.get(b"k", 0).is_none());
        assert!(mem.get(b"j", 9).is_none());
        assert!(mem.get(b"kk", 9).is_none());
    }

    #[test]
    fn iterator_walks_chunks_in_entry_order() {
        let mem = Arc::new(MemTable::new(1));
        let entries: Vec<Entry> = (0..1000u32)
            .map(|i| Entry::value(format!("{:05}", i / 2).into_bytes(), i as u64, vec![]))
            .collect();
        mem.apply(entries);
        let got: Vec<Entry> = mem
            .iter_from(Bound::Unbounded)
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(got.len(), 1000);
        for pair in got.windows(2) {
            let ord =
                crate::entry::entry_order(&pair[0].key, pair[0].seq, &pair[1].key, pair[1].seq);
            assert_eq!(ord, std::cmp::Ordering::Less);
        }
        let from: Vec<Entry> = mem
            .iter_from(Bound::Excluded(b"00498"))
            .map(|e| e.unwrap())
            .collect();
        assert_eq!(from.len(), 2);
        assert_eq!(from[0].key, b"00499");
    }
}
