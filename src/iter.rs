//! Merging sorted entry streams, and the user-facing iterator over a consistent snapshot.

use std::ops::Bound;
use std::sync::Arc;

use crate::entry::{SeqNo, ValueKind};
use crate::error::Result;
use crate::range_tombstone::{Gone, RangeTombstones};
use crate::walk::{BoxedWalk, EntryView, MergeWalk, Walk};

/// The newest version of each key a snapshot sees, walking forwards over a sorted walk (and,
/// when asked, only keys whose newest version is a value). Entries newer than `snapshot` are
/// invisible. The walk ends at the first key past `end`, before old versions and tombstones
/// are skipped, so that a walk whose range holds no more live keys stops at its bound instead
/// of reading on through deleted ones. Nothing is copied but each key handed out, into a
/// buffer reused from key to key. With `ranges`, a version a range deletion the snapshot sees
/// came after reads as a tombstone.
pub(crate) struct NewestVersions<W> {
    inner: W,
    snapshot: SeqNo,
    drop_tombstones: bool,
    end: Bound<Vec<u8>>,
    ranges: Option<Arc<RangeTombstones>>,
    /// Versions numbered below it have expired, and read as deleted.
    expired_below: SeqNo,
    /// The key last handed out, once one was.
    last_key: Option<Vec<u8>>,
    done: bool,
}

impl<W: Walk> NewestVersions<W> {
    /// Wraps a walk in entry order.
    pub fn new(inner: W, snapshot: SeqNo, drop_tombstones: bool, end: Bound<Vec<u8>>) -> Self {
        NewestVersions {
            inner,
            snapshot,
            drop_tombstones,
            end,
            ranges: None,
            expired_below: 0,
            last_key: None,
            done: false,
        }
    }

    /// The walk, with versions `ranges` deletes, and those numbered below `expired_below`,
    /// read as deleted.
    fn hiding(mut self, ranges: Option<Arc<RangeTombstones>>, expired_below: SeqNo) -> Self {
        self.ranges = ranges;
        self.expired_below = expired_below;
        self
    }

    fn step(&mut self) -> Result<bool> {
        while self.inner.advance()? {
            let entry = self.inner.current();
            if !at_or_before(entry.key, &self.end) {
                return Ok(false);
            }
            if entry.seq > self.snapshot || self.last_key.as_deref() == Some(entry.key) {
                continue;
            }
            let last = self.last_key.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(entry.key);
            let gone = Gone::of(
                self.ranges.as_deref(),
                self.expired_below,
                entry.key,
                self.snapshot,
            );
            let deleted = entry.is_tombstone() || gone.takes(entry.seq);
            if !(deleted && self.drop_tombstones) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl<W: Walk> Walk for NewestVersions<W> {
    fn advance(&mut self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        let stepped = self.step();
        self.done = !matches!(stepped, Ok(true));
        stepped
    }

    fn current(&self) -> EntryView<'_> {
        self.inner.current()
    }
}

/// [`NewestVersions`] walking backwards, over a walk in reverse entry order: a key's versions
/// come oldest first, so each key's are read to its end, and the newest the snapshot sees is
/// kept (skipped when it is a tombstone). The walk ends at the first key before `start`. The
/// version kept is copied (the walk has moved past it by the time it is known to be the
/// newest), into buffers reused from key to key.
pub(crate) struct NewestVersionsBack<W> {
    inner: W,
    snapshot: SeqNo,
    start: Bound<Vec<u8>>,
    /// Range deletions and expiry, as [`NewestVersions`] takes them.
    ranges: Option<Arc<RangeTombstones>>,
    expired_below: SeqNo,
    /// The version handed out: key, sequence number, kind, value.
    key: Vec<u8>,
    seq: SeqNo,
    kind: ValueKind,
    value: Vec<u8>,
    /// The inner walk stands on the first version of the next key, read while finishing the
    /// key before.
    on_next_key: bool,
    done: bool,
}

impl<W: Walk> NewestVersionsBack<W> {
    /// Wraps a walk in reverse entry order.
    pub fn new(
        inner: W,
        snapshot: SeqNo,
        start: Bound<Vec<u8>>,
        ranges: Option<Arc<RangeTombstones>>,
        expired_below: SeqNo,
    ) -> Self {
        NewestVersionsBack {
            inner,
            snapshot,
            start,
            ranges,
            expired_below,
            key: Vec::new(),
            seq: 0,
            kind: ValueKind::Tombstone,
            value: Vec::new(),
            on_next_key: false,
            done: false,
        }
    }

    /// Reads the next key's versions: `Some(true)` when the snapshot sees one of them and its
    /// newest is a value, `None` at the end.
    fn next_key(&mut self) -> Result<Option<bool>> {
        if !std::mem::take(&mut self.on_next_key) && !self.inner.advance()? {
            return Ok(None);
        }
        let first = self.inner.current();
        if !at_or_after(first.key, &self.start) {
            return Ok(None);
        }
        self.key.clear();
        self.key.extend_from_slice(first.key);
        let mut seen = false;
        loop {
            let version = self.inner.current();
            if version.seq <= self.snapshot {
                seen = true;
                self.seq = version.seq;
                self.kind = version.kind;
                self.value.clear();
                self.value.extend_from_slice(version.value);
            }
            if !self.inner.advance()? {
                break;
            }
            if self.inner.current().key != self.key.as_slice() {
                self.on_next_key = true;
                break;
            }
        }
        let gone = Gone::of(
            self.ranges.as_deref(),
            self.expired_below,
            &self.key,
            self.snapshot,
        );
        Ok(Some(
            seen && self.kind == ValueKind::Value && !gone.takes(self.seq),
        ))
    }
}

impl<W: Walk> Walk for NewestVersionsBack<W> {
    fn advance(&mut self) -> Result<bool> {
        while !self.done {
            match self.next_key() {
                Ok(Some(true)) => return Ok(true),
                Ok(Some(false)) => {}
                Ok(None) => self.done = true,
                Err(e) => {
                    self.done = true;
                    return Err(e);
                }
            }
        }
        Ok(false)
    }

    fn current(&self) -> EntryView<'_> {
        EntryView {
            key: &self.key,
            seq: self.seq,
            kind: self.kind,
            value: &self.value,
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
pub(crate) struct KeptVersions<W> {
    inner: W,
    /// Live snapshots, ascending.
    snapshots: Vec<SeqNo>,
    drop_tombstones: bool,
    /// The key being read, once one was, and the stripe of its last version kept.
    key: Option<Vec<u8>>,
    last_stripe: usize,
    /// Tombstones of the key kept since its last value (only with `drop_tombstones`): they
    /// go out only if an older value of the key is kept after them.
    held: Vec<SeqNo>,
    /// Held tombstones going out, newest first, before the value the inner walk stands on.
    releasing: std::collections::VecDeque<SeqNo>,
    /// What the walk stands on: a released tombstone, or the inner walk's entry.
    at_tombstone: Option<SeqNo>,
    value_waits: bool,
}

impl<W: Walk> KeptVersions<W> {
    /// Wraps a walk in entry order; `snapshots` in any order.
    pub fn new(inner: W, mut snapshots: Vec<SeqNo>, drop_tombstones: bool) -> Self {
        snapshots.sort_unstable();
        snapshots.dedup();
        KeptVersions {
            inner,
            snapshots,
            drop_tombstones,
            key: None,
            last_stripe: 0,
            held: Vec::new(),
            releasing: std::collections::VecDeque::new(),
            at_tombstone: None,
            value_waits: false,
        }
    }

    /// The stripe of `seq`: how many snapshots are older than it.
    fn stripe(&self, seq: SeqNo) -> usize {
        self.snapshots.partition_point(|&s| s < seq)
    }

    fn step(&mut self) -> Result<bool> {
        self.at_tombstone = self.releasing.pop_front();
        if self.at_tombstone.is_some() {
            return Ok(true);
        }
        if std::mem::take(&mut self.value_waits) {
            return Ok(true);
        }
        while self.inner.advance()? {
            let entry = self.inner.current();
            let stripe = self.stripe(entry.seq);
            match &mut self.key {
                // Versions come newest first: an older one in the same stripe is hidden
                // from every reader.
                Some(key) if key.as_slice() == entry.key => {
                    if stripe == self.last_stripe {
                        continue;
                    }
                }
                key => {
                    let key = key.get_or_insert_with(Vec::new);
                    key.clear();
                    key.extend_from_slice(entry.key);
                    // Tombstones left at the end of the key before are its oldest kept
                    // versions: with nothing older below, they go.
                    self.held.clear();
                }
            }
            self.last_stripe = stripe;
            if entry.is_tombstone() && self.drop_tombstones {
                self.held.push(entry.seq);
                continue;
            }
            if !self.held.is_empty() {
                self.releasing.extend(self.held.drain(..));
                self.at_tombstone = self.releasing.pop_front();
                self.value_waits = true;
            }
            return Ok(true);
        }
        Ok(false)
    }
}

impl<W: Walk> Walk for KeptVersions<W> {
    /// Ends where the inner walk ends (and, as every walk, stays at its end).
    fn advance(&mut self) -> Result<bool> {
        self.step()
    }

    fn current(&self) -> EntryView<'_> {
        match (self.at_tombstone, &self.key) {
            (Some(seq), Some(key)) => EntryView {
                key,
                seq,
                kind: ValueKind::Tombstone,
                value: &[],
            },
            _ => self.inner.current(),
        }
    }
}

/// A walk whose versions at or below `seen_by_all` get sequence number 0 (see
/// [`Compaction::merged_entries_in`](crate::compaction::Compaction::merged_entries_in)), but
/// those of keys a range deletion covers: read against the deletion's number, a version
/// written after it must keep its own.
pub(crate) struct ZeroedSeqs<W> {
    pub inner: W,
    pub seen_by_all: SeqNo,
    pub ranges: Option<Arc<RangeTombstones>>,
}

impl<W: Walk> Walk for ZeroedSeqs<W> {
    fn advance(&mut self) -> Result<bool> {
        self.inner.advance()
    }

    fn current(&self) -> EntryView<'_> {
        let mut entry = self.inner.current();
        let covered = || (self.ranges.as_ref()).is_some_and(|r| !r.covering(entry.key).is_empty());
        if entry.seq <= self.seen_by_all && !covered() {
            entry.seq = 0;
        }
        entry
    }
}

/// A walk in entry order without the versions range deletions hide from every reader: a
/// version older than a deletion covering its key, with no live snapshot (of `snapshots`,
/// ascending) that sees the version but not the deletion; and without the versions numbered
/// below `expired_below` but not 0 (expired: every reader takes them for deleted).
pub(crate) struct WithoutDeleted<W> {
    pub inner: W,
    pub ranges: Option<Arc<RangeTombstones>>,
    pub snapshots: Vec<SeqNo>,
    pub expired_below: SeqNo,
}

impl<W: Walk> WithoutDeleted<W> {
    fn deleted(&self, key: &[u8], seq: SeqNo) -> bool {
        let expiry = Gone {
            deleted_at: None,
            expired_below: self.expired_below,
        };
        if expiry.takes(seq) {
            return true;
        }
        let Some(ranges) = &self.ranges else {
            return false;
        };
        let seen_between = |from: SeqNo, to: SeqNo| {
            let first = self.snapshots.partition_point(|&s| s < from);
            self.snapshots.get(first).is_some_and(|&s| s < to)
        };
        (ranges.covering(key).iter()).any(|&at| at > seq && !seen_between(seq, at))
    }
}

impl<W: Walk> Walk for WithoutDeleted<W> {
    fn advance(&mut self) -> Result<bool> {
        while self.inner.advance()? {
            let entry = self.inner.current();
            if !self.deleted(entry.key, entry.seq) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn current(&self) -> EntryView<'_> {
        self.inner.current()
    }
}

/// What a walk over the store reads: the memtables and tables of one read state, each as a
/// sorted stream starting at a bound, forwards or backwards. Walks built from one value see
/// the same entries, however often they start again.
pub(crate) trait Sources: Send + Sync {
    /// Every source's entries at or after `start`, in entry order; newest source first.
    fn forward(&self, start: Bound<&[u8]>) -> Vec<BoxedWalk>;
    /// Every source's entries at or before `end`, in reverse entry order; newest source first.
    fn backward(&self, end: Bound<&[u8]>) -> Vec<BoxedWalk>;
    /// The range deletions a reader at `snapshot` sees; `None` when there are none.
    fn range_deletions(&self, _snapshot: SeqNo) -> Option<Arc<RangeTombstones>> {
        None
    }

    /// The number below which entries have expired (`Options::ttl`); 0 for none.
    fn expired_below(&self) -> SeqNo {
        0
    }
}

/// The visible pairs of `sources` within `start..end`, in key order, as of `snapshot`.
pub(crate) fn walk_forward(
    sources: &dyn Sources,
    start: Bound<&[u8]>,
    end: &Bound<Vec<u8>>,
    snapshot: SeqNo,
) -> ForwardWalk {
    let merged = MergeWalk::forward(sources.forward(start));
    let ranges = sources.range_deletions(snapshot);
    let expired_below = sources.expired_below();
    NewestVersions::new(merged, snapshot, true, end.clone()).hiding(ranges, expired_below)
}

/// The visible pairs of `sources` within `start..end`, in descending key order, as of
/// `snapshot`.
pub(crate) fn walk_backward(
    sources: &dyn Sources,
    start: &Bound<Vec<u8>>,
    end: Bound<&[u8]>,
    snapshot: SeqNo,
) -> BackwardWalk {
    let merged = MergeWalk::backward(sources.backward(end));
    let ranges = sources.range_deletions(snapshot);
    let expired_below = sources.expired_below();
    NewestVersionsBack::new(merged, snapshot, start.clone(), ranges, expired_below)
}

/// A walk forwards over the store: merged, cut at its far bound, newest versions only.
pub(crate) type ForwardWalk = NewestVersions<MergeWalk>;
/// A walk backwards over the store, the same way.
pub(crate) type BackwardWalk = NewestVersionsBack<MergeWalk>;

/// The end of the keys that start with `prefix`: the first key past them all (`prefix` with
/// its last byte below 0xff raised by one, the bytes after it dropped), unbounded when every
/// byte is 0xff.
pub(crate) fn prefix_end(prefix: &[u8]) -> Bound<Vec<u8>> {
    match prefix.iter().rposition(|&b| b != 0xff) {
        Some(at) => {
            let mut end = prefix[..=at].to_vec();
            end[at] += 1;
            Bound::Excluded(end)
        }
        None => Bound::Unbounded,
    }
}

/// Whether `key` lies at or after `start`.
pub(crate) fn at_or_after(key: &[u8], start: &Bound<Vec<u8>>) -> bool {
    match start {
        Bound::Included(start) => key >= start.as_slice(),
        Bound::Excluded(start) => key > start.as_slice(),
        Bound::Unbounded => true,
    }
}

/// Whether `key` lies at or before `end`.
pub(crate) fn at_or_before(key: &[u8], end: &Bound<Vec<u8>>) -> bool {
    match end {
        Bound::Included(end) => key <= end.as_slice(),
        Bound::Excluded(end) => key < end.as_slice(),
        Bound::Unbounded => true,
    }
}

/// Iterator over the key-value pairs of the store as of one moment, in key order, and from
/// the other end too (`.rev()`, `next_back`): each end walks only as far as it is asked, and
/// the two stop where they meet, as `BTreeMap`'s range does.
pub struct DbIterator {
    sources: Arc<dyn Sources>,
    snapshot: SeqNo,
    /// The range, a prefix's included: every key from `start` to `end` starts with it.
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// Each end's walk, begun at its first step.
    front: Option<ForwardWalk>,
    back: Option<BackwardWalk>,
    /// The last key each end returned (once it has returned one): the other end stops short
    /// of it. Buffers reused from key to key.
    front_last: Option<Vec<u8>>,
    back_last: Option<Vec<u8>>,
    done: bool,
}

impl DbIterator {
    /// The pairs of `sources` within `start..end` (and starting with `prefix`, when given) as
    /// of `snapshot`.
    pub(crate) fn new(
        sources: Arc<dyn Sources>,
        snapshot: SeqNo,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        prefix: Option<Vec<u8>>,
    ) -> DbIterator {
        // A prefix bounds both walks: the backward one starts at the prefix's end.
        let (start, end) = match &prefix {
            Some(prefix) => (
                later_start(start, prefix),
                earlier_end(end, prefix_end(prefix)),
            ),
            None => (start, end),
        };
        DbIterator {
            sources,
            snapshot,
            start,
            end,
            front: None,
            back: None,
            front_last: None,
            back_last: None,
            done: false,
        }
    }
}

/// Hands out the pair a walk stepped onto (`stepped`) unless it lies where the other end has
/// been (each walk starts within the range and is cut at its far bound, so every pair is in
/// range); records the key handed out as the last of its end. `None` ends the iterator (both
/// ends: what is left between them is nothing).
fn hand_out(
    stepped: Result<bool>,
    walk: &impl Walk,
    met_other_end: impl Fn(&[u8]) -> bool,
    last: &mut Option<Vec<u8>>,
) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
    match stepped {
        Ok(true) => {
            let entry = walk.current();
            if met_other_end(entry.key) {
                return None;
            }
            let last = last.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(entry.key);
            Some(Ok((entry.key.to_vec(), entry.value.to_vec())))
        }
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

/// The later of `start` and the start of the keys beginning with `prefix`.
fn later_start(start: Bound<Vec<u8>>, prefix: &[u8]) -> Bound<Vec<u8>> {
    match at_or_after(prefix, &start) {
        true => Bound::Included(prefix.to_vec()),
        false => start,
    }
}

/// The earlier of two ends.
fn earlier_end(a: Bound<Vec<u8>>, b: Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    let key = |end: &Bound<Vec<u8>>| match end {
        Bound::Included(k) | Bound::Excluded(k) => Some(k.clone()),
        Bound::Unbounded => None,
    };
    match (key(&a), key(&b)) {
        (None, _) => b,
        (_, None) => a,
        // Of two ends at one key, the one that leaves the key out.
        (Some(ka), Some(kb)) if ka == kb => match a {
            Bound::Excluded(_) => a,
            _ => b,
        },
        (Some(ka), Some(kb)) => match ka < kb {
            true => a,
            false => b,
        },
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let front = (self.front).get_or_insert_with(|| {
            let start = self.start.as_ref().map(Vec::as_slice);
            walk_forward(self.sources.as_ref(), start, &self.end, self.snapshot)
        });
        let stepped = front.advance();
        let back_last = self.back_last.as_deref();
        let met = |key: &[u8]| back_last.is_some_and(|b| key >= b);
        let pair = hand_out(stepped, front, met, &mut self.front_last);
        self.done = !matches!(pair, Some(Ok(_)));
        pair
    }
}

impl DoubleEndedIterator for DbIterator {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let back = (self.back).get_or_insert_with(|| {
            let end = self.end.as_ref().map(Vec::as_slice);
            walk_backward(self.sources.as_ref(), &self.start, end, self.snapshot)
        });
        let stepped = back.advance();
        let front_last = self.front_last.as_deref();
        let met = |key: &[u8]| front_last.is_some_and(|f| key <= f);
        let pair = hand_out(stepped, back, met, &mut self.back_last);
        self.done = !matches!(pair, Some(Ok(_)));
        pair
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Entry;

    fn stream(entries: Vec<Entry>) -> BoxedWalk {
        Box::new(crate::walk::VecWalk::new(entries))
    }

    /// Sources held in memory, newest first, each in entry order.
    struct Fixed(Vec<Vec<Entry>>);

    impl Sources for Fixed {
        fn forward(&self, start: Bound<&[u8]>) -> Vec<BoxedWalk> {
            let start = start.map(<[u8]>::to_vec);
            let from = |s: &Vec<Entry>| -> Vec<Entry> {
                (s.iter().filter(|e| at_or_after(&e.key, &start)).cloned()).collect()
            };
            self.0.iter().map(|s| stream(from(s))).collect()
        }

        fn backward(&self, end: Bound<&[u8]>) -> Vec<BoxedWalk> {
            let end = end.map(<[u8]>::to_vec);
            let to = |s: &Vec<Entry>| -> Vec<Entry> {
                (s.iter()
                    .rev()
                    .filter(|e| at_or_before(&e.key, &end))
                    .cloned())
                .collect()
            };
            self.0.iter().map(|s| stream(to(s))).collect()
        }
    }

    fn pairs(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        (pairs.iter())
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    /// Forwards, backwards (reversed back) and from both ends at once, which must agree.
    fn every_way(
        sources: Vec<Vec<Entry>>,
        snapshot: SeqNo,
        end: Bound<Vec<u8>>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let sources: Arc<dyn Sources> = Arc::new(Fixed(sources));
        let iter = || {
            DbIterator::new(
                sources.clone(),
                snapshot,
                Bound::Unbounded,
                end.clone(),
                None,
            )
        };
        let forward: Vec<_> = iter().map(|r| r.unwrap()).collect();
        let mut backward: Vec<_> = iter().rev().map(|r| r.unwrap()).collect();
        backward.reverse();
        assert_eq!(backward, forward);
        let mut both = iter();
        let (mut front, mut back) = (Vec::new(), Vec::new());
        while let Some(pair) = both.next() {
            front.push(pair.unwrap());
            match both.next_back() {
                Some(pair) => back.push(pair.unwrap()),
                None => break,
            }
        }
        front.extend(back.into_iter().rev());
        assert_eq!(front, forward);
        forward
    }

    #[test]
    fn merge_keeps_newest_and_hides_tombstones() {
        let newer = vec![
            Entry::value(b"a".to_vec(), 5, b"a5".to_vec()),
            Entry::tombstone(b"c".to_vec(), 6),
        ];
        let older = vec![
            Entry::value(b"a".to_vec(), 1, b"a1".to_vec()),
            Entry::value(b"b".to_vec(), 2, b"b2".to_vec()),
            Entry::value(b"c".to_vec(), 3, b"c3".to_vec()),
            Entry::value(b"d".to_vec(), 4, b"d4".to_vec()),
        ];
        let got = every_way(vec![newer, older], 10, Bound::Unbounded);
        assert_eq!(got, pairs(&[("a", "a5"), ("b", "b2"), ("d", "d4")]));
    }

    #[test]
    fn snapshot_hides_later_writes_and_end_bound_stops() {
        let s = vec![
            Entry::value(b"a".to_vec(), 9, b"new".to_vec()),
            Entry::value(b"a".to_vec(), 1, b"old".to_vec()),
            Entry::value(b"b".to_vec(), 7, b"b".to_vec()),
            Entry::tombstone(b"b".to_vec(), 4),
            Entry::value(b"b".to_vec(), 2, b"b2".to_vec()),
            Entry::value(b"c".to_vec(), 2, b"c".to_vec()),
        ];
        let got = every_way(vec![s.clone()], 5, Bound::Excluded(b"c".to_vec()));
        assert_eq!(got, pairs(&[("a", "old")]));
        let got = every_way(vec![s], 3, Bound::Included(b"c".to_vec()));
        assert_eq!(got, pairs(&[("a", "old"), ("b", "b2"), ("c", "c")]));
    }

    #[test]
    fn a_prefix_walks_backwards_from_its_end() {
        let s = vec![
            Entry::value(b"a".to_vec(), 1, vec![]),
            Entry::value(b"b".to_vec(), 1, vec![]),
            Entry::value(b"ba".to_vec(), 1, vec![]),
            Entry::value(b"b\xff".to_vec(), 1, vec![]),
            Entry::value(b"c".to_vec(), 1, vec![]),
        ];
        let sources: Arc<dyn Sources> = Arc::new(Fixed(vec![s]));
        let prefix = Some(b"b".to_vec());
        let iter = DbIterator::new(
            sources,
            9,
            Bound::Included(b"b".to_vec()),
            Bound::Unbounded,
            prefix,
        );
        let keys: Vec<Vec<u8>> = iter.rev().map(|r| r.unwrap().0).collect();
        assert_eq!(keys, [b"b\xff".to_vec(), b"ba".to_vec(), b"b".to_vec()]);
        assert_eq!(prefix_end(b"ab"), Bound::Excluded(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff\xff"), Bound::Excluded(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff"), Bound::Unbounded);
        assert_eq!(prefix_end(b""), Bound::Unbounded);
    }

    /// Sources whose every stream fails after its first entry.
    struct Failing;

    impl Sources for Failing {
        fn forward(&self, _: Bound<&[u8]>) -> Vec<BoxedWalk> {
            vec![failing()]
        }

        fn backward(&self, _: Bound<&[u8]>) -> Vec<BoxedWalk> {
            vec![failing()]
        }
    }

    fn failing() -> BoxedWalk {
        use crate::walk::{Concat, FailingWalk, VecWalk};
        let run = |i| -> BoxedWalk {
            match i {
                0 => Box::new(VecWalk::new(vec![Entry::value(b"a".to_vec(), 1, vec![])])),
                _ => Box::new(FailingWalk::new(crate::error::Error::InvalidArgument(
                    "boom".into(),
                ))),
            }
        };
        Box::new(Concat::new(2, run))
    }

    #[test]
    fn error_from_a_source_is_reported_at_either_end() {
        let iter = || {
            DbIterator::new(
                Arc::new(Failing),
                10,
                Bound::Unbounded,
                Bound::Unbounded,
                None,
            )
        };
        let got: Vec<_> = iter().collect();
        assert_eq!(got.len(), 2);
        assert!(got[1].is_err());
        // Backwards, the key's versions are read to their end first: the error comes first.
        let got: Vec<_> = iter().rev().collect();
        assert_eq!(got.len(), 1);
        assert!(got[0].is_err());
    }

    /// The versions a flush or compaction keeps, worked out key by key: of each stripe
    /// between snapshots the newest version, and at the bottom no trailing tombstones.
    fn kept_by_model(entries: &[Entry], snapshots: &[SeqNo], drop_tombstones: bool) -> Vec<Entry> {
        let stripe = |seq: SeqNo| snapshots.iter().filter(|&&s| s < seq).count();
        let mut out = Vec::new();
        for versions in entries.chunk_by(|a, b| a.key == b.key) {
            let mut kept: Vec<Entry> = Vec::new();
            for v in versions {
                if kept
                    .last()
                    .is_none_or(|last| stripe(last.seq) != stripe(v.seq))
                {
                    kept.push(v.clone());
                }
            }
            while drop_tombstones && kept.last().is_some_and(Entry::is_tombstone) {
                kept.pop();
            }
            out.extend(kept);
        }
        out
    }

    #[test]
    fn kept_versions_agree_with_a_model() {
        use crate::walk::{Entries, VecWalk};
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
        for _ in 0..500 {
            let mut entries: Vec<Entry> = Vec::new();
            for key in 0..rng.gen_range(1..6u8) {
                let mut seqs: Vec<SeqNo> = (0..rng.gen_range(1..7))
                    .map(|_| rng.gen_range(1..40))
                    .collect();
                seqs.sort_unstable_by(|a, b| b.cmp(a));
                seqs.dedup();
                for seq in seqs {
                    entries.push(match rng.gen_bool(0.4) {
                        true => Entry::tombstone(vec![key], seq),
                        false => Entry::value(vec![key], seq, vec![key; seq as usize]),
                    });
                }
            }
            let snapshots: Vec<SeqNo> = (0..rng.gen_range(0..4))
                .map(|_| rng.gen_range(1..40))
                .collect();
            let mut sorted = snapshots.clone();
            sorted.sort_unstable();
            sorted.dedup();
            for drop_tombstones in [false, true] {
                let walk = KeptVersions::new(
                    VecWalk::new(entries.clone()),
                    snapshots.clone(),
                    drop_tombstones,
                );
                let got: Vec<Entry> = Entries::new(walk).map(|e| e.unwrap()).collect();
                let want = kept_by_model(&entries, &sorted, drop_tombstones);
                assert_eq!(
                    got, want,
                    "{entries:?} snapshots {snapshots:?} drop {drop_tombstones}"
                );
            }
        }
    }

    /// Drains a walk into (key, seq) pairs.
    fn keys_and_seqs(mut walk: impl Walk) -> Vec<(Vec<u8>, SeqNo)> {
        let mut out = Vec::new();
        while walk.advance().unwrap() {
            let e = walk.current();
            out.push((e.key.to_vec(), e.seq));
        }
        out
    }

    fn deletion(start: &str, end: &str, seq: SeqNo) -> crate::range_tombstone::RangeTombstone {
        crate::range_tombstone::RangeTombstone {
            start: start.into(),
            end: end.into(),
            seq,
        }
    }

    /// A compaction's view of range deletions: versions a deletion hides from every reader
    /// go, those a snapshot between them sees stay, and no version of a covered key loses its
    /// number (a zeroed version written after the deletion would read as deleted).
    #[test]
    fn range_deletions_drop_what_no_reader_sees_and_keep_covered_numbers() {
        let ranges = Some(Arc::new(RangeTombstones::new(&[deletion("b", "d", 10)])));
        let entries = vec![
            Entry::value("a", 3, "a3"),
            Entry::value("b", 12, "b12"),
            Entry::value("b", 5, "b5"),
            Entry::value("c", 7, "c7"),
            Entry::value("c", 2, "c2"),
            Entry::value("d", 4, "d4"),
        ];
        let kept = |snapshots: Vec<SeqNo>| {
            keys_and_seqs(WithoutDeleted {
                inner: crate::walk::VecWalk::new(entries.clone()),
                ranges: ranges.clone(),
                snapshots,
                expired_below: 0,
            })
        };
        let pair = |k: &str, seq| (k.as_bytes().to_vec(), seq);
        assert_eq!(
            kept(vec![]),
            vec![pair("a", 3), pair("b", 12), pair("d", 4)]
        );
        // A snapshot at 6 sees b5 and c2 but not the deletion: they stay; c7 is newer than
        // the snapshot and older than the deletion, seen by no one.
        assert_eq!(
            kept(vec![6]),
            vec![
                pair("a", 3),
                pair("b", 12),
                pair("b", 5),
                pair("c", 2),
                pair("d", 4)
            ]
        );
        let zeroed = keys_and_seqs(ZeroedSeqs {
            inner: crate::walk::VecWalk::new(entries.clone()),
            seen_by_all: SeqNo::MAX,
            ranges: ranges.clone(),
        });
        assert_eq!(zeroed[0], pair("a", 0));
        assert_eq!(zeroed[1], pair("b", 12), "covered: keeps its number");
        assert_eq!(zeroed[5], pair("d", 0));
    }
}
