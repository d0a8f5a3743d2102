//! Walks: sorted runs of entries that lend the entry they stand on, so that nothing is copied
//! until a caller takes it (LevelDB's and RocksDB's internal iterators work the same way).
//!
//! A walk starts before its first entry. [`Walk::advance`] moves it onto the next one, and
//! [`Walk::current`] borrows that entry until the walk moves again. Every source of a read
//! (a block, a table, a level, a memtable) is a walk, and so are the layers above them (the
//! merge of every source, the versions a snapshot sees): a scan copies an entry once, when
//! it hands the pair to the user, and a compaction once, into the table it writes.

use std::cmp::Ordering;

use crate::entry::{entry_order, Entry, SeqNo, ValueKind};
use crate::error::Result;

/// One entry, borrowed from the walk that stands on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryView<'a> {
    pub key: &'a [u8],
    pub seq: SeqNo,
    pub kind: ValueKind,
    /// Empty for a tombstone.
    pub value: &'a [u8],
}

impl EntryView<'_> {
    /// An owned copy.
    pub fn to_entry(self) -> Entry {
        Entry {
            key: self.key.to_vec(),
            seq: self.seq,
            kind: self.kind,
            value: self.value.to_vec(),
        }
    }

    pub fn is_tombstone(&self) -> bool {
        self.kind == ValueKind::Tombstone
    }
}

/// A sorted run of entries that lends the one it stands on.
pub(crate) trait Walk: Send {
    /// Moves onto the next entry: `true` when there is one, `false` at the end. After the end
    /// or an error, the walk stays at its end.
    fn advance(&mut self) -> Result<bool>;

    /// The entry the walk stands on: only after `advance` returned `true`, until the next
    /// call to `advance`.
    fn current(&self) -> EntryView<'_>;
}

/// A walk of any kind, as the layers above the sources hold them.
pub(crate) type BoxedWalk = Box<dyn Walk>;

impl<W: Walk + ?Sized> Walk for Box<W> {
    fn advance(&mut self) -> Result<bool> {
        (**self).advance()
    }

    fn current(&self) -> EntryView<'_> {
        (**self).current()
    }
}

/// A walk's next entry, copied: what an `Iterator` of owned entries over a walk returns.
pub(crate) fn next_owned(walk: &mut impl Walk) -> Option<Result<Entry>> {
    match walk.advance() {
        Ok(true) => Some(Ok(walk.current().to_entry())),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

/// A walk as an iterator of owned entries, each copied as it is handed out; nothing after the
/// first error.
#[cfg(test)]
pub(crate) struct Entries<W> {
    walk: W,
    done: bool,
}

#[cfg(test)]
impl<W: Walk> Entries<W> {
    pub fn new(walk: W) -> Entries<W> {
        Entries { walk, done: false }
    }
}

#[cfg(test)]
impl<W: Walk> Iterator for Entries<W> {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.done {
            return None;
        }
        let next = next_owned(&mut self.walk);
        self.done = !matches!(next, Some(Ok(_)));
        next
    }
}

/// Walks of disjoint, sorted runs one after another (a level's tables, in key order or the
/// reverse), each opened only when the one before it is done.
pub(crate) struct Concat<F> {
    open: F,
    count: usize,
    next: usize,
    current: Option<BoxedWalk>,
}

impl<F: FnMut(usize) -> BoxedWalk + Send> Concat<F> {
    /// Runs `0..count`, the walk of run `i` made by `open(i)` when it is reached.
    pub fn new(count: usize, open: F) -> Concat<F> {
        Concat {
            open,
            count,
            next: 0,
            current: None,
        }
    }
}

impl<F: FnMut(usize) -> BoxedWalk + Send> Walk for Concat<F> {
    fn advance(&mut self) -> Result<bool> {
        loop {
            if let Some(walk) = &mut self.current {
                match walk.advance() {
                    Ok(true) => return Ok(true),
                    Ok(false) => self.current = None,
                    Err(e) => {
                        self.current = None;
                        self.next = self.count;
                        return Err(e);
                    }
                }
            }
            if self.next == self.count {
                return Ok(false);
            }
            self.current = Some((self.open)(self.next));
            self.next += 1;
        }
    }

    fn current(&self) -> EntryView<'_> {
        self.current
            .as_ref()
            .expect("a concatenation lends an entry only while it stands on one")
            .current()
    }
}

/// Walks of disjoint runs, made already, one after another.
pub(crate) fn concat(walks: Vec<BoxedWalk>) -> BoxedWalk {
    let count = walks.len();
    let mut walks = walks.into_iter();
    let open = move |_| walks.next().expect("one walk for each run");
    Box::new(Concat::new(count, open))
}

/// Merges walks into one sorted walk. Sources come newest first; of equal entries, the newer
/// source's comes first walking forwards and last walking backwards (the backward walk of the
/// versions a snapshot sees keeps the last version it reads). A min-heap of source numbers,
/// compared through the entries the sources lend: no entry moves.
pub(crate) struct MergeWalk {
    sources: Vec<BoxedWalk>,
    /// Sources standing on an entry, the one whose entry comes first at the top.
    heap: Vec<usize>,
    started: bool,
    /// The sources run in reverse entry order, and so does the merge.
    backward: bool,
}

impl MergeWalk {
    /// Merges `sources`, newest first, each in entry order.
    pub fn forward(sources: Vec<BoxedWalk>) -> MergeWalk {
        MergeWalk::new(sources, false)
    }

    /// Merges `sources`, newest first, each in reverse entry order (keys descending, a key's
    /// versions oldest first).
    pub fn backward(sources: Vec<BoxedWalk>) -> MergeWalk {
        MergeWalk::new(sources, true)
    }

    fn new(sources: Vec<BoxedWalk>, backward: bool) -> MergeWalk {
        MergeWalk {
            heap: Vec::with_capacity(sources.len()),
            sources,
            started: false,
            backward,
        }
    }

    /// Whether source `a`'s entry comes out before source `b`'s.
    fn comes_before(&self, a: usize, b: usize) -> bool {
        let (x, y) = (self.sources[a].current(), self.sources[b].current());
        let order = entry_order(x.key, x.seq, y.key, y.seq).then(a.cmp(&b));
        match self.backward {
            false => order == Ordering::Less,
            true => order == Ordering::Greater,
        }
    }

    /// Moves the source at heap place `at` down until neither child comes before it.
    fn sift_down(&mut self, mut at: usize) {
        loop {
            let left = 2 * at + 1;
            if left >= self.heap.len() {
                return;
            }
            let right = left + 1;
            let child = match right < self.heap.len()
                && self.comes_before(self.heap[right], self.heap[left])
            {
                true => right,
                false => left,
            };
            if !self.comes_before(self.heap[child], self.heap[at]) {
                return;
            }
            self.heap.swap(at, child);
            at = child;
        }
    }

    /// Steps every source onto its first entry and heaps those that have one.
    fn start(&mut self) -> Result<()> {
        self.started = true;
        for (i, source) in self.sources.iter_mut().enumerate() {
            if source.advance()? {
                self.heap.push(i);
            }
        }
        for at in (0..self.heap.len() / 2).rev() {
            self.sift_down(at);
        }
        Ok(())
    }

    fn step(&mut self) -> Result<()> {
        if !self.started {
            return self.start();
        }
        let Some(&top) = self.heap.first() else {
            return Ok(());
        };
        // The source whose entry was handed out usually has the next one too: it stays at
        // the top's place and sinks once.
        if !self.sources[top].advance()? {
            self.heap.swap_remove(0);
        }
        self.sift_down(0);
        Ok(())
    }
}

impl Walk for MergeWalk {
    fn advance(&mut self) -> Result<bool> {
        match self.step() {
            Ok(()) => Ok(!self.heap.is_empty()),
            Err(e) => {
                // Nothing after an error: the merge would skip the failed source's entries.
                self.heap.clear();
                Err(e)
            }
        }
    }

    fn current(&self) -> EntryView<'_> {
        self.sources[self.heap[0]].current()
    }
}

/// A walk over entries held in a vector, in the order given.
#[cfg(test)]
pub(crate) struct VecWalk {
    entries: Vec<Entry>,
    /// One past the entry the walk stands on.
    next: usize,
}

#[cfg(test)]
impl VecWalk {
    pub fn new(entries: Vec<Entry>) -> VecWalk {
        VecWalk { entries, next: 0 }
    }
}

#[cfg(test)]
impl Walk for VecWalk {
    fn advance(&mut self) -> Result<bool> {
        if self.next <= self.entries.len() {
            self.next += 1;
        }
        Ok(self.next <= self.entries.len())
    }

    fn current(&self) -> EntryView<'_> {
        view_of(&self.entries[self.next - 1])
    }
}

/// An owned entry, lent.
#[cfg(test)]
fn view_of(entry: &Entry) -> EntryView<'_> {
    EntryView {
        key: &entry.key,
        seq: entry.seq,
        kind: entry.kind,
        value: &entry.value,
    }
}

/// A walk that fails once, with the error it was made with, and then ends.
pub(crate) struct FailingWalk(Option<crate::error::Error>);

impl FailingWalk {
    pub fn new(error: crate::error::Error) -> FailingWalk {
        FailingWalk(Some(error))
    }
}

impl Walk for FailingWalk {
    fn advance(&mut self) -> Result<bool> {
        match self.0.take() {
            Some(e) => Err(e),
            None => Ok(false),
        }
    }

    fn current(&self) -> EntryView<'_> {
        unreachable!("a failing walk never stands on an entry")
    }
}

/// A walk that skips the versions of one key at its start: a walk from just past a key,
/// made from one that starts at it.
pub(crate) struct PastKey<W> {
    inner: W,
    key: Option<Vec<u8>>,
}

impl<W: Walk> PastKey<W> {
    pub fn new(inner: W, key: Vec<u8>) -> PastKey<W> {
        PastKey {
            inner,
            key: Some(key),
        }
    }
}

impl<W: Walk> Walk for PastKey<W> {
    fn advance(&mut self) -> Result<bool> {
        let Some(key) = self.key.take() else {
            return self.inner.advance();
        };
        while self.inner.advance()? {
            if self.inner.current().key != key.as_slice() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn current(&self) -> EntryView<'_> {
        self.inner.current()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(keys: &[(&str, SeqNo)]) -> Vec<Entry> {
        (keys.iter())
            .map(|(k, s)| Entry::value(k.as_bytes().to_vec(), *s, format!("{k}{s}")))
            .collect()
    }

    fn boxed(entries: Vec<Entry>) -> BoxedWalk {
        Box::new(VecWalk::new(entries))
    }

    fn collect(walk: impl Walk) -> Vec<Entry> {
        Entries::new(walk).map(|e| e.unwrap()).collect()
    }

    #[test]
    fn a_merge_comes_out_in_entry_order_the_newer_source_first_on_ties() {
        let newer = entries(&[("a", 5), ("c", 6), ("e", 1)]);
        let older = entries(&[("a", 1), ("b", 2), ("c", 6), ("d", 4)]);
        let got = collect(MergeWalk::forward(vec![
            boxed(newer.clone()),
            boxed(Vec::new()),
            boxed(older.clone()),
        ]));
        let want = vec![
            newer[0].clone(),
            older[0].clone(),
            older[1].clone(),
            newer[1].clone(),
            older[2].clone(),
            older[3].clone(),
            newer[2].clone(),
        ];
        assert_eq!(got, want);
        let back = |v: &Vec<Entry>| v.iter().rev().cloned().collect::<Vec<_>>();
        let got = collect(MergeWalk::backward(vec![
            boxed(back(&newer)),
            boxed(back(&older)),
        ]));
        // Walking back, of equal entries the older source's comes first: the exact reverse.
        assert_eq!(got, back(&want));
    }

    #[test]
    fn a_merge_of_many_sources_agrees_with_a_sort() {
        let mut all = Vec::new();
        let mut sources = Vec::new();
        for s in 0..13u64 {
            let mut mine: Vec<Entry> = (0..40u64)
                .filter(|i| (i * 7 + s) % 5 < 2)
                .map(|i| Entry::value(format!("{i:03}").into_bytes(), 100 - s, vec![s as u8]))
                .collect();
            mine.sort_by(|a, b| entry_order(&a.key, a.seq, &b.key, b.seq));
            all.extend(mine.clone());
            sources.push(boxed(mine));
        }
        all.sort_by(|a, b| entry_order(&a.key, a.seq, &b.key, b.seq));
        assert_eq!(collect(MergeWalk::forward(sources)), all);
    }

    #[test]
    fn an_error_ends_the_merge_and_a_concatenation() {
        let err = || crate::error::Error::NoSuchKeyspace { name: "x".into() };
        let mut merge = MergeWalk::forward(vec![
            boxed(entries(&[("a", 1)])),
            Box::new(FailingWalk::new(err())),
        ]);
        assert!(merge.advance().is_err());
        assert!(!merge.advance().unwrap());
        let runs = [entries(&[("a", 1)]), Vec::new()];
        let mut concat = Concat::new(3, |i| match runs.get(i) {
            Some(run) => boxed(run.clone()),
            None => Box::new(FailingWalk::new(err())),
        });
        assert!(concat.advance().unwrap());
        assert_eq!(concat.current().key, b"a");
        assert!(concat.advance().is_err());
        assert!(!concat.advance().unwrap());
    }

    #[test]
    fn past_key_skips_every_version_of_its_key() {
        let all = entries(&[("a", 3), ("a", 0), ("b", 2)]);
        assert_eq!(
            collect(PastKey::new(VecWalk::new(all.clone()), b"a".to_vec())),
            all[2..]
        );
        assert_eq!(
            collect(PastKey::new(VecWalk::new(all.clone()), b"0".to_vec())),
            all
        );
    }
}
