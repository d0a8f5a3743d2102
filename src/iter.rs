//! Merging sorted entry streams, and the user-facing iterator over a consistent snapshot.

use std::cmp::Ordering;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;
use std::ops::Bound;

use crate::entry::{entry_order, Entry, SeqNo};
use crate::error::Result;

/// A sorted stream of entries (memtable, table, or a merge of them).
pub type EntryStream = Box<dyn Iterator<Item = Result<Entry>> + Send>;

struct HeapItem {
    entry: Entry,
    /// Position of the source; a lower index is a newer source and wins ties.
    source: usize,
}

impl Ord for HeapItem {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse so the smallest entry comes out first.
        entry_order(
            &other.entry.key,
            other.entry.seq,
            &self.entry.key,
            self.entry.seq,
        )
        .then(other.source.cmp(&self.source))
    }
}

impl PartialOrd for HeapItem {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for HeapItem {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for HeapItem {}

/// Merges sorted streams into one sorted stream. Sources are given newest first. The first
/// error from any source is passed on and ends the stream.
pub struct MergingIterator {
    sources: Vec<EntryStream>,
    heap: BinaryHeap<HeapItem>,
    pending_error: Option<crate::error::Error>,
    failed: bool,
}

impl MergingIterator {
    /// Merges `sources`, newest first.
    pub fn new(mut sources: Vec<EntryStream>) -> MergingIterator {
        let mut heap = BinaryHeap::with_capacity(sources.len());
        let mut pending_error = None;
        for (source, stream) in sources.iter_mut().enumerate() {
            match stream.next() {
                Some(Ok(entry)) => heap.push(HeapItem { entry, source }),
                Some(Err(e)) => {
                    pending_error.get_or_insert(e);
                }
                None => {}
            }
        }
        MergingIterator {
            sources,
            heap,
            pending_error,
            failed: false,
        }
    }
}

impl Iterator for MergingIterator {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        if let Some(e) = self.pending_error.take() {
            self.failed = true;
            return Some(Err(e));
        }
        // The source whose entry comes out usually has the next one too: put it in the top's
        // place and sift it down once, rather than a pop and a push that sift twice.
        let mut top = self.heap.peek_mut()?;
        let source = top.source;
        match self.sources[source].next() {
            Some(Ok(next)) => Some(Ok(std::mem::replace(&mut top.entry, next))),
            Some(Err(e)) => {
                self.pending_error = Some(e);
                Some(Ok(PeekMut::pop(top).entry))
            }
            None => Some(Ok(PeekMut::pop(top).entry)),
        }
    }
}

/// Keeps only the newest version of each key from a sorted stream (and, when asked, drops
/// keys whose newest version is a tombstone). Entries newer than `snapshot` are invisible.
pub struct NewestVersions<I> {
    inner: I,
    snapshot: SeqNo,
    drop_tombstones: bool,
    last_key: Option<Vec<u8>>,
}

impl<I: Iterator<Item = Result<Entry>>> NewestVersions<I> {
    /// Wraps a sorted stream.
    pub fn new(inner: I, snapshot: SeqNo, drop_tombstones: bool) -> Self {
        NewestVersions {
            inner,
            snapshot,
            drop_tombstones,
            last_key: None,
        }
    }
}

impl<I: Iterator<Item = Result<Entry>>> Iterator for NewestVersions<I> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        loop {
            let entry = match self.inner.next()? {
                Ok(entry) => entry,
                Err(e) => return Some(Err(e)),
            };
            if entry.seq > self.snapshot || self.last_key.as_deref() == Some(&entry.key[..]) {
                continue;
            }
            self.last_key = Some(entry.key.clone());
            if entry.is_tombstone() && self.drop_tombstones {
                continue;
            }
            return Some(Ok(entry));
        }
    }
}

/// What a flush or compaction writes of a sorted stream: of each key's versions, the newest,
/// and for each live snapshot the newest it can see (RocksDB keeps versions the same way).
/// The snapshots split the sequence numbers into stripes, `..=s1`, `s1+1..=s2`, ...,
/// `sn+1..`; a version older than another of its stripe is seen by no reader, and goes.
/// With `drop_tombstones` (nothing lies below the output), a tombstone that is the oldest
/// version kept goes too: with nothing older left to hide, "deleted" and "absent" read the
/// same at every snapshot.
pub struct KeptVersions<I> {
    inner: I,
    /// Live snapshots, ascending.
    snapshots: Vec<SeqNo>,
    drop_tombstones: bool,
    /// The versions kept of the key being read, newest first, and the stripe of the last.
    key_versions: Vec<Entry>,
    last_stripe: usize,
    /// Versions ready to be returned, in order.
    ready: std::collections::VecDeque<Entry>,
    done: bool,
}

impl<I: Iterator<Item = Result<Entry>>> KeptVersions<I> {
    /// Wraps a sorted stream; `snapshots` in any order.
    pub fn new(inner: I, mut snapshots: Vec<SeqNo>, drop_tombstones: bool) -> Self {
        snapshots.sort_unstable();
        snapshots.dedup();
        KeptVersions {
            inner,
            snapshots,
            drop_tombstones,
            key_versions: Vec::new(),
            last_stripe: 0,
            ready: std::collections::VecDeque::new(),
            done: false,
        }
    }

    /// The stripe of `seq`: how many snapshots are older than it.
    fn stripe(&self, seq: SeqNo) -> usize {
        self.snapshots.partition_point(|&s| s < seq)
    }

    /// Passes the versions kept of the key just finished on to `ready`.
    fn finish_key(&mut self) {
        if self.drop_tombstones {
            while self.key_versions.last().is_some_and(Entry::is_tombstone) {
                self.key_versions.pop();
            }
        }
        self.ready.extend(self.key_versions.drain(..));
    }
}

impl<I: Iterator<Item = Result<Entry>>> Iterator for KeptVersions<I> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        loop {
            if let Some(entry) = self.ready.pop_front() {
                return Some(Ok(entry));
            }
            if self.done {
                return None;
            }
            match self.inner.next() {
                None => {
                    self.done = true;
                    self.finish_key();
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Some(Ok(entry)) => {
                    let stripe = self.stripe(entry.seq);
                    match self.key_versions.last() {
                        Some(last) if last.key == entry.key => {
                            // Versions come newest first: an older one in the same stripe
                            // is hidden from every reader.
                            if stripe != self.last_stripe {
                                self.last_stripe = stripe;
                                self.key_versions.push(entry);
                            }
                        }
                        _ => {
                            self.finish_key();
                            self.last_stripe = stripe;
                            self.key_versions.push(entry);
                        }
                    }
                }
            }
        }
    }
}

/// Iterator over key-value pairs of the store as of one moment, in key order.
pub struct DbIterator {
    inner: NewestVersions<MergingIterator>,
    end: Bound<Vec<u8>>,
    prefix: Option<Vec<u8>>,
    done: bool,
}

impl DbIterator {
    pub(crate) fn new(
        sources: Vec<EntryStream>,
        snapshot: SeqNo,
        end: Bound<Vec<u8>>,
        prefix: Option<Vec<u8>>,
    ) -> DbIterator {
        DbIterator {
            inner: NewestVersions::new(MergingIterator::new(sources), snapshot, true),
            end,
            prefix,
            done: false,
        }
    }

    fn past_end(&self, key: &[u8]) -> bool {
        let beyond_range = match &self.end {
            Bound::Included(end) => key > end.as_slice(),
            Bound::Excluded(end) => key >= end.as_slice(),
            Bound::Unbounded => false,
        };
        beyond_range || self.prefix.as_ref().is_some_and(|p| !key.starts_with(p))
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.inner.next() {
            Some(Ok(entry)) if !self.past_end(&entry.key) => Some(Ok((entry.key, entry.value))),
            Some(Err(e)) => {
                self.done = true;
                Some(Err(e))
            }
            _ => {
                self.done = true;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(entries: Vec<Entry>) -> EntryStream {
        Box::new(entries.into_iter().map(Ok))
    }

    #[test]
    fn merge_keeps_newest_and_hides_tombstones() {
        let newer = stream(vec![
            Entry::value(b"a".to_vec(), 5, b"a5".to_vec()),
            Entry::tombstone(b"c".to_vec(), 6),
        ]);
        let older = stream(vec![
            Entry::value(b"a".to_vec(), 1, b"a1".to_vec()),
            Entry::value(b"b".to_vec(), 2, b"b2".to_vec()),
            Entry::value(b"c".to_vec(), 3, b"c3".to_vec()),
        ]);
        let it = DbIterator::new(vec![newer, older], 10, Bound::Unbounded, None);
        let got: Vec<_> = it.map(|r| r.unwrap()).collect();
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), b"a5".to_vec()),
                (b"b".to_vec(), b"b2".to_vec())
            ]
        );
    }

    #[test]
    fn snapshot_hides_later_writes_and_end_bound_stops() {
        let s = stream(vec![
            Entry::value(b"a".to_vec(), 9, b"new".to_vec()),
            Entry::value(b"a".to_vec(), 1, b"old".to_vec()),
            Entry::value(b"b".to_vec(), 2, b"b".to_vec()),
            Entry::value(b"c".to_vec(), 2, b"c".to_vec()),
        ]);
        let it = DbIterator::new(vec![s], 5, Bound::Excluded(b"c".to_vec()), None);
        let got: Vec<_> = it.map(|r| r.unwrap()).collect();
        assert_eq!(
            got,
            vec![
                (b"a".to_vec(), b"old".to_vec()),
                (b"b".to_vec(), b"b".to_vec())
            ]
        );
    }

    #[test]
    fn error_from_a_source_is_reported() {
        let bad: EntryStream = Box::new(
            vec![
                Ok(Entry::value(b"a".to_vec(), 1, vec![])),
                Err(crate::error::Error::InvalidArgument("boom".into())),
            ]
            .into_iter(),
        );
        let it = DbIterator::new(vec![bad], 10, Bound::Unbounded, None);
        let got: Vec<_> = it.collect();
        assert_eq!(got.len(), 2);
        assert!(got[1].is_err());
    }
}
