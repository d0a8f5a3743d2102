//! The in-memory table that takes every write before it is flushed to a table file.
//!
//! Entries live in a skiplist in an arena (`skiplist.rs`, `arena.rs`), ordered by key
//! ascending and sequence number descending, so the newest visible version of a key is the
//! first one at or after `(key, snapshot)`. Writers insert without a lock, several at once;
//! readers take none, and iterators walk the list in place, copying only the entries they
//! hand out, so a short scan costs what it returns and a reader never waits for a writer.
//!
//! With a prefix extractor (`Options::prefix_extractor`), a memtable also keeps a cache-local
//! Bloom filter of its keys' prefixes, as a table keeps a prefix filter: a scan over a prefix
//! none of its keys has passes the memtable by without a seek.

mod arena;
mod skiplist;

use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use crate::entry::{Entry, SeqNo, ValueKind};
use crate::error::Result;
use crate::filter::{BlockedBloomFilter, BlockedParams, KeyHash};
use crate::prefix::PrefixExtractor;
use crate::range_tombstone::RangeTombstone;
use crate::value::{Newest, Value};
use crate::walk::{next_owned, EntryView, Walk};
use skiplist::{EntryRef, Position, SkipList};

/// Bytes of one arena block for a memtable of `memtable_size` bytes: an eighth of it, so that
/// the memory counted (whole blocks) runs at most an eighth ahead of what entries use, and
/// between 256 bytes and 1 MiB.
fn arena_block_for(memtable_size: usize) -> usize {
    (memtable_size / 8).clamp(256, 1 << 20)
}

/// Bits of a memtable's prefix filter per entry it can hold at the least room an entry takes
/// (`SMALLEST_ENTRY_BYTES`): a 1% rate (cache-local) even when every key has a prefix of its
/// own, and far less when keys share prefixes.
const PREFIX_FILTER_BITS_PER_ENTRY: u32 = 10;

/// Bytes a range deletion is counted at beyond its keys: the vector's slot and the keys'
/// allocations.
const RANGE_TOMBSTONE_OVERHEAD: usize = 80;

/// Arena bytes of the smallest entry: a node's header and one link, an empty key and value.
const SMALLEST_ENTRY_BYTES: usize = 40;

/// The prefixes of a memtable's keys, cut by the store's extractor.
struct PrefixFilter {
    extractor: PrefixExtractor,
    filter: BlockedBloomFilter,
}

impl PrefixFilter {
    /// A filter sized for as many entries as a memtable of `memtable_size` bytes can hold.
    fn for_memtable(extractor: PrefixExtractor, memtable_size: usize) -> PrefixFilter {
        let params = BlockedParams::for_bits_per_key(PREFIX_FILTER_BITS_PER_ENTRY)
            .expect("10 bits per key is within the blocked layout's range");
        let entries = (memtable_size / SMALLEST_ENTRY_BYTES).max(1) as u64;
        PrefixFilter {
            extractor,
            filter: BlockedBloomFilter::new(params, entries),
        }
    }
}

/// A sorted, versioned, in-memory write buffer: many writers and many readers at once.
pub struct MemTable {
    entries: SkipList,
    /// Behind a lock of its own: the filter's bits are plain words. Only stores with a prefix
    /// extractor have one.
    prefixes: Option<Mutex<PrefixFilter>>,
    /// The prefix filter's bytes, fixed at its making.
    prefix_filter_bytes: usize,
    /// The WAL file that holds this memtable's writes.
    log_number: u64,
    /// Range deletions written to it, in the order written. Few, as a rule: a read scans
    /// them all (one that finds none pays one atomic load).
    range_tombstones: RwLock<Vec<RangeTombstone>>,
    /// How many `range_tombstones` holds, and their keys' bytes, read without the lock.
    range_count: AtomicUsize,
    range_bytes: AtomicUsize,
}

impl std::fmt::Debug for MemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTable")
            .field("approximate_bytes", &self.approximate_bytes())
            .field("log_number", &self.log_number)
            .finish()
    }
}

impl MemTable {
    /// An empty memtable whose writes are logged in WAL `log_number`, to be frozen once it
    /// holds about `memtable_size` bytes (which sets the size of its arena's blocks).
    pub fn new(log_number: u64, memtable_size: usize) -> MemTable {
        MemTable::with_prefixes(log_number, memtable_size, None)
    }

    /// [`new`](Self::new), keeping a filter of the prefixes `extractor` cuts from the keys
    /// written, when there is one.
    pub fn with_prefixes(
        log_number: u64,
        memtable_size: usize,
        extractor: Option<PrefixExtractor>,
    ) -> MemTable {
        let prefixes = extractor.map(|e| PrefixFilter::for_memtable(e, memtable_size));
        MemTable {
            entries: SkipList::new(arena_block_for(memtable_size)),
            prefix_filter_bytes: prefixes.as_ref().map_or(0, |p| p.filter.memory_bytes()),
            prefixes: prefixes.map(Mutex::new),
            log_number,
            range_tombstones: RwLock::new(Vec::new()),
            range_count: AtomicUsize::new(0),
            range_bytes: AtomicUsize::new(0),
        }
    }

    /// Adds a range deletion. Readers see it once their snapshot reaches its number.
    pub fn add_range_tombstone(&self, tombstone: RangeTombstone) {
        if tombstone.start >= tombstone.end {
            return; // covers no key
        }
        let bytes = tombstone.start.len() + tombstone.end.len() + RANGE_TOMBSTONE_OVERHEAD;
        let mut list = self
            .range_tombstones
            .write()
            .unwrap_or_else(|e| e.into_inner());
        list.push(tombstone);
        self.range_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.range_count.store(list.len(), Ordering::Release);
    }

    /// Whether a range deletion was written to it.
    pub fn has_range_tombstones(&self) -> bool {
        self.range_tombstone_count() > 0
    }

    /// How many range deletions were written to it.
    pub fn range_tombstone_count(&self) -> usize {
        self.range_count.load(Ordering::Acquire)
    }

    /// Its range deletions, in the order written.
    pub fn range_tombstones(&self) -> Vec<RangeTombstone> {
        match self.has_range_tombstones() {
            true => (self
                .range_tombstones
                .read()
                .unwrap_or_else(|e| e.into_inner()))
            .clone(),
            false => Vec::new(),
        }
    }

    /// The newest sequence number at most `snapshot` of a range deletion covering `key`.
    pub fn covering_seq(&self, key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        if !self.has_range_tombstones() {
            return None;
        }
        let list = self
            .range_tombstones
            .read()
            .unwrap_or_else(|e| e.into_inner());
        (list.iter())
            .filter(|t| t.seq <= snapshot && t.covers(key))
            .map(|t| t.seq)
            .max()
    }

    /// The WAL file that holds this memtable's writes.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Adds entries (one batch, or part of one), taking the prefix filter's lock, when there
    /// is one, once for them all. Threads may apply at once; readers see each entry whole or
    /// not yet.
    pub fn apply(&self, entries: impl IntoIterator<Item = Entry>) {
        let mut prefixes =
            (self.prefixes.as_ref()).map(|p| p.lock().unwrap_or_else(|e| e.into_inner()));
        for e in entries {
            if let Some(prefixes) = prefixes.as_deref_mut() {
                if let Some(prefix) = prefixes.extractor.prefix(&e.key) {
                    prefixes.filter.insert(prefix);
                }
            }
            self.entries.insert(&e.key, e.seq, e.kind, &e.value);
        }
    }

    /// What the prefix filter says of the prefix hashed as `hash` (cut by the store's
    /// extractor): `Some(false)` when no key written has it, `Some(true)` when one may have;
    /// `None` without a filter.
    pub fn may_hold_prefix(&self, hash: &KeyHash) -> Option<bool> {
        let prefixes = self.prefixes.as_ref()?;
        let prefixes = prefixes.lock().unwrap_or_else(|e| e.into_inner());
        Some(prefixes.filter.contains_hash(hash))
    }

    /// Whether an entry (a value or a tombstone, of any version) has a key that starts with
    /// `prefix`: one seek, nothing copied.
    pub fn holds_prefix(&self, prefix: &[u8]) -> bool {
        let first = self.entries.seek(prefix, SeqNo::MAX);
        first.is_some_and(|e| e.key().starts_with(prefix))
    }

    /// The newest version of `key` with a sequence number at most `snapshot`, borrowed.
    fn newest_of(&self, key: &[u8], snapshot: SeqNo) -> Option<EntryRef<'_>> {
        self.entries.seek(key, snapshot).filter(|e| e.key() == key)
    }

    /// The newest version of `key` with a sequence number at most `snapshot`.
    #[cfg(test)]
    pub fn get(&self, key: &[u8], snapshot: SeqNo) -> Option<Entry> {
        self.newest_of(key, snapshot).map(|e| view(e).to_entry())
    }

    /// The newest version of `key` with a sequence number at most `snapshot`, its value
    /// copied out: a value that shared the memtable would keep all of it (up to
    /// `memtable_size`) alive after its flush, where a value from a table keeps one block.
    pub(crate) fn get_newest(&self, key: &[u8], snapshot: SeqNo) -> Option<Newest> {
        let entry = self.newest_of(key, snapshot)?;
        let value = (entry.kind() == ValueKind::Value).then(|| Value::from(entry.value().to_vec()));
        Some(Newest {
            seq: entry.seq(),
            value,
        })
    }

    /// Whether the newest version of `key` at most `snapshot` is a value or a tombstone, and
    /// its number, without copying the value.
    pub fn newest_kind(&self, key: &[u8], snapshot: SeqNo) -> Option<(ValueKind, SeqNo)> {
        self.newest_of(key, snapshot).map(|e| (e.kind(), e.seq()))
    }

    /// Approximate memory held: the arena's blocks (entries with their list links), and the
    /// prefix filter.
    pub fn approximate_bytes(&self) -> usize {
        let ranges = self.range_bytes.load(Ordering::Relaxed);
        match self.entries.memory_bytes() + ranges {
            0 => 0,
            entries => entries + self.prefix_filter_bytes,
        }
    }

    /// Number of entries (every version counts).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no write went in.
    pub fn is_empty(&self) -> bool {
        self.entries.len() == 0 && !self.has_range_tombstones()
    }

    /// Entries at or after `start`, in entry order, walked in place.
    pub fn iter_from(self: &Arc<Self>, start: Bound<&[u8]>) -> MemTableIter {
        self.iter_between(start, Bound::Unbounded)
    }

    /// [`iter_from`](Self::iter_from) that ends before the first key past `end`.
    pub fn iter_between(
        self: &Arc<Self>,
        start: Bound<&[u8]>,
        end: Bound<Vec<u8>>,
    ) -> MemTableIter {
        let first = match start {
            Bound::Included(k) => self.entries.seek(k, SeqNo::MAX),
            // Past every version of `k`: at or after the oldest, then past its equals.
            Bound::Excluded(k) => {
                let mut at = self.entries.seek(k, 0);
                while let Some(e) = at.filter(|e| e.key() == k) {
                    at = e.next();
                }
                at
            }
            Bound::Unbounded => self.entries.first(),
        };
        MemTableIter::new(self, first.map(|e| e.position()), end, false)
    }

    /// Entries at or before `end`, in reverse entry order (keys descending, each key's
    /// versions oldest first), walked in place.
    pub fn iter_back_to(self: &Arc<Self>, end: Bound<&[u8]>) -> MemTableIter {
        self.iter_back_between(end, Bound::Unbounded)
    }

    /// [`iter_back_to`](Self::iter_back_to) that ends after the last key at or past `start`.
    pub fn iter_back_between(
        self: &Arc<Self>,
        end: Bound<&[u8]>,
        start: Bound<Vec<u8>>,
    ) -> MemTableIter {
        // A key's versions run from the newest (`MAX` first) to the oldest (0 last): up to
        // and including `k` ends at its oldest possible version, short of `k` before its
        // newest.
        let last = match end {
            Bound::Included(k) => self.entries.seek_back(k, 0, true),
            Bound::Excluded(k) => self.entries.seek_back(k, SeqNo::MAX, false),
            Bound::Unbounded => self.entries.last(),
        };
        MemTableIter::new(self, last.map(|e| e.position()), start, true)
    }
}

/// A borrowed entry, as walks lend them.
fn view(e: EntryRef<'_>) -> EntryView<'_> {
    EntryView {
        key: e.key(),
        seq: e.seq(),
        kind: e.kind(),
        value: e.value(),
    }
}

/// An iterator over a memtable, forwards or backwards, that walks the list in place and sees
/// entries written after it started as well; callers filter by sequence number for a
/// consistent snapshot. It holds its memtable, so the entries it stands on stay valid.
pub struct MemTableIter {
    mem: Arc<MemTable>,
    /// The entry the walk stands on, or before its first step the one it will step onto;
    /// always one of `mem`'s list.
    at: Option<Position>,
    started: bool,
    /// The key bound the walk ends at: the last keys forwards, the first ones backwards.
    stop: Bound<Vec<u8>>,
    /// Walking in reverse entry order.
    backward: bool,
}

impl MemTableIter {
    fn new(
        mem: &Arc<MemTable>,
        at: Option<Position>,
        stop: Bound<Vec<u8>>,
        backward: bool,
    ) -> MemTableIter {
        MemTableIter {
            mem: Arc::clone(mem),
            at,
            started: false,
            stop,
            backward,
        }
    }

    /// The entry at `at`, borrowed from the memtable.
    fn entry(&self, at: Position) -> EntryRef<'_> {
        // SAFETY: `at` was taken from an entry of `mem`'s list, which `mem` keeps alive.
        unsafe { self.mem.entries.at(at) }
    }

    /// Moves to the next entry in the walk's direction.
    fn step(&mut self) {
        let Some(at) = self.at else { return };
        let entry = self.entry(at);
        let next = match self.backward {
            false => entry.next(),
            true => self.mem.entries.prev(entry),
        };
        self.at = next.map(|e| e.position());
    }
}

impl Walk for MemTableIter {
    fn advance(&mut self) -> Result<bool> {
        match self.started {
            true => self.step(),
            false => self.started = true,
        }
        let Some(at) = self.at else {
            return Ok(false);
        };
        let key = self.entry(at).key();
        let within = match self.backward {
            false => crate::iter::at_or_before(key, &self.stop),
            true => crate::iter::at_or_after(key, &self.stop),
        };
        if !within {
            self.at = None;
        }
        Ok(within)
    }

    fn current(&self) -> EntryView<'_> {
        let at = self
            .at
            .expect("a memtable iterator lends only an entry it stands on");
        view(self.entry(at))
    }
}

impl Iterator for MemTableIter {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        next_owned(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_sees_newest_version_within_snapshot() {
        let mem = MemTable::new(1, 64 << 20);
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
    fn iterator_walks_in_entry_order() {
        let mem = Arc::new(MemTable::new(1, 64 << 20));
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

    #[test]
    fn backward_iterator_walks_in_reverse_entry_order() {
        let mem = Arc::new(MemTable::new(1, 64 << 20));
        // Three versions a key: a step back from a key's newest version lands on the oldest
        // of the key before.
        let entries: Vec<Entry> = (0..1000u32)
            .map(|i| Entry::value(format!("{:05}", i / 3).into_bytes(), i as u64, vec![]))
            .collect();
        mem.apply(entries);
        let forward: Vec<Entry> = (mem.iter_from(Bound::Unbounded))
            .map(|e| e.unwrap())
            .collect();
        let mut backward: Vec<Entry> = (mem.iter_back_to(Bound::Unbounded))
            .map(|e| e.unwrap())
            .collect();
        backward.reverse();
        assert_eq!(backward, forward);
        let to: Vec<(Vec<u8>, u64)> = (mem.iter_back_to(Bound::Included(b"00001")))
            .map(|e| e.map(|e| (e.key, e.seq)).unwrap())
            .collect();
        let key = |k: &str| k.as_bytes().to_vec();
        let expected = [(key("00001"), 3), (key("00001"), 4), (key("00001"), 5)];
        let expected = expected
            .into_iter()
            .chain((0..3).map(|s| (key("00000"), s)));
        assert_eq!(to, expected.collect::<Vec<_>>());
        let before: Vec<Vec<u8>> = (mem.iter_back_to(Bound::Excluded(b"00001")))
            .map(|e| e.unwrap().key)
            .collect();
        assert_eq!(before, [key("00000"), key("00000"), key("00000")]);
    }

    #[test]
    fn keys_and_values_of_every_size_read_back_across_arena_blocks() {
        let mem = Arc::new(MemTable::new(1, 64 << 20));
        // Small entries fill several blocks; large values get blocks of their own, between
        // small entries; empty values and the empty key take no arena bytes.
        let mut expected = Vec::new();
        for i in 0..30_000u32 {
            let key = format!("key{i:06}").into_bytes();
            let len = match i % 1000 {
                0 => (1 << 18) + 1 + i as usize,
                1 => 0,
                _ => 40 + (i % 7) as usize,
            };
            let value: Vec<u8> = (0..len).map(|b| (b as u32 ^ i) as u8).collect();
            expected.push((key, value));
        }
        expected.push((Vec::new(), b"empty key".to_vec()));
        for (seq, chunk) in expected.chunks(100).enumerate() {
            mem.apply(
                chunk
                    .iter()
                    .enumerate()
                    .map(|(i, (k, v))| Entry::value(k.clone(), (seq * 100 + i) as u64, v.clone())),
            );
        }
        for (seq, (key, value)) in expected.iter().enumerate() {
            let got = mem.get(key, SeqNo::MAX).expect("written");
            assert_eq!(&got.value, value, "key {key:?}");
            assert_eq!(got.seq, seq as u64);
        }
        let mut sorted = expected.clone();
        sorted.sort();
        let walked: Vec<(Vec<u8>, Vec<u8>)> = mem
            .iter_from(Bound::Unbounded)
            .map(|e| e.unwrap())
            .map(|e| (e.key, e.value))
            .collect();
        assert_eq!(walked, sorted);
        let payload: usize = expected.iter().map(|(k, v)| k.len() + v.len()).sum();
        assert!(mem.approximate_bytes() >= payload);
    }

    #[test]
    fn the_size_counts_whole_arena_blocks_of_an_eighth_of_the_memtable() {
        let mem = MemTable::new(1, 8192);
        assert_eq!(mem.approximate_bytes(), 0);
        mem.apply([Entry::value(b"k".to_vec(), 1, b"v".to_vec())]);
        assert_eq!(mem.approximate_bytes(), 1024);
        // An entry over a quarter block gets a block of its own, of its own size: its node's
        // header and links, its key and value, rounded up to 8 bytes.
        mem.apply([Entry::value(b"big".to_vec(), 2, vec![7; 300])]);
        let big = mem.approximate_bytes() - 1024;
        assert!(
            (32 + 8 + 303..=32 + 12 * 8 + 303 + 7).contains(&big),
            "{big}"
        );
        // Small entries (at most 136 bytes each) fill the first block before a second one is
        // counted.
        mem.apply((0..4u8).map(|i| Entry::value(vec![i], 3 + i as u64, vec![i; 3])));
        assert_eq!(mem.approximate_bytes(), 1024 + big);
        // A hundred more take at least 40 bytes each: four blocks or more, counted whole.
        mem.apply((4..104u8).map(|i| Entry::value(vec![i], 3 + i as u64, vec![i; 3])));
        let small = mem.approximate_bytes() - big;
        assert!(small >= 4 * 1024 && small.is_multiple_of(1024), "{small}");
        assert_eq!(mem.len(), 106);
    }

    #[test]
    fn empty_keys_and_values_read_back() {
        let mem = MemTable::new(1, 64 << 20);
        mem.apply([Entry::tombstone(Vec::new(), 1)]);
        mem.apply([Entry::value(Vec::new(), 2, Vec::new())]);
        assert!(mem.get(b"", 1).unwrap().is_tombstone());
        let newest = mem.get(b"", 2).unwrap();
        assert_eq!((newest.kind, newest.value), (ValueKind::Value, Vec::new()));
        assert!(mem.get(b"\0", 2).is_none());
    }

    #[test]
    fn bounded_walks_stop_at_their_bound() {
        let mem = Arc::new(MemTable::new(1, 64 << 20));
        mem.apply((0..600u32).map(|i| {
            Entry::value(
                format!("{}:{:03}", i / 200, i % 200).into_bytes(),
                i as u64,
                vec![],
            )
        }));
        let end = Bound::Excluded(b"1;".to_vec());
        let mut forward = mem.iter_between(Bound::Included(b"1:"), end);
        assert_eq!(forward.next().unwrap().unwrap().key, b"1:000");
        assert!(forward.next().is_some());
        assert_eq!(forward.count(), 198);
        let after = mem.iter_between(Bound::Excluded(b"1:100"), Bound::Excluded(b"1;".to_vec()));
        assert_eq!(after.map(|e| e.unwrap().key).next().unwrap(), b"1:101");

        let mut backward =
            mem.iter_back_between(Bound::Excluded(b"1;"), Bound::Included(b"1:".to_vec()));
        assert_eq!(backward.next().unwrap().unwrap().key, b"1:199");
        let rest: Vec<Vec<u8>> = backward.map(|e| e.unwrap().key).collect();
        assert_eq!(rest.len(), 199);
        assert_eq!(rest.last().unwrap(), b"1:000");

        assert!(mem.holds_prefix(b"2:1"));
        assert!(!mem.holds_prefix(b"3"));
        assert!(!mem.holds_prefix(b"1:2"));
    }

    #[test]
    fn a_memtable_with_an_extractor_filters_its_prefixes() {
        let extractor = PrefixExtractor::Delimited(b':');
        let mem = MemTable::with_prefixes(1, 64 << 20, Some(extractor));
        assert_eq!(mem.approximate_bytes(), 0);
        mem.apply(
            (0..100u32).map(|i| {
                Entry::value(format!("user{}:{i}", i % 10).into_bytes(), i as u64, vec![])
            }),
        );
        mem.apply([Entry::tombstone(b"gone:1".to_vec(), 100)]);
        mem.apply([Entry::value(b"no delimiter".to_vec(), 101, vec![])]);
        for user in 0..10 {
            let prefix = format!("user{user}:");
            assert_eq!(
                mem.may_hold_prefix(&KeyHash::of(prefix.as_bytes())),
                Some(true)
            );
        }
        assert_eq!(mem.may_hold_prefix(&KeyHash::of(b"gone:")), Some(true));
        let ruled_out = (10..1010)
            .filter(|u| {
                mem.may_hold_prefix(&KeyHash::of(format!("user{u}:").as_bytes())) == Some(false)
            })
            .count();
        assert!(
            ruled_out >= 990,
            "{ruled_out} of 1000 absent prefixes ruled out"
        );
        // The filter's bits count in the memtable's size: 10 bits an entry it can hold.
        let filter_bytes = (64 << 20) / SMALLEST_ENTRY_BYTES * 10 / 8;
        assert!(
            mem.approximate_bytes() >= filter_bytes,
            "{}",
            mem.approximate_bytes()
        );
        assert!(mem.approximate_bytes() < filter_bytes + (9 << 20));
        assert_eq!(
            MemTable::new(1, 64 << 20).may_hold_prefix(&KeyHash::of(b"user1:")),
            None
        );
    }

    #[test]
    fn an_iterator_keeps_its_memtable_and_arena_alive() {
        let mem = Arc::new(MemTable::new(1, 64 << 20));
        mem.apply(
            (0..1000u32)
                .map(|i| Entry::value(format!("{i:04}").into_bytes(), i as u64, vec![i as u8; 64])),
        );
        let mut iter = mem.iter_from(Bound::Included(b"0500"));
        drop(mem);
        let first = iter.next().unwrap().unwrap();
        assert_eq!(first.key, b"0500");
        assert_eq!(iter.count(), 499);
    }

    /// Eight threads write while eight read: every entry a writer has finished is found by
    /// `get` with its value, and the newest version of a key wins; walks stay in order.
    #[test]
    fn eight_writers_and_eight_readers_agree_with_a_model() {
        use std::sync::atomic::{AtomicU64, Ordering};
        const PER_WRITER: u64 = 4000;
        let mem = Arc::new(MemTable::new(1, 64 << 20));
        let done: Arc<Vec<AtomicU64>> = Arc::new((0..8).map(|_| AtomicU64::new(0)).collect());
        let key = |t: u64, i: u64| format!("{:04}-{t}", i % 1000).into_bytes();
        // Writer t's i-th write has sequence number i * 8 + t + 1: versions of a key from one
        // writer rise with i.
        let value = |t: u64, i: u64| (i * 8 + t + 1).to_le_bytes().repeat(3);
        let writers: Vec<_> = (0..8u64)
            .map(|t| {
                let (mem, done) = (Arc::clone(&mem), Arc::clone(&done));
                std::thread::spawn(move || {
                    for i in 0..PER_WRITER {
                        mem.apply([Entry::value(key(t, i), i * 8 + t + 1, value(t, i))]);
                        done[t as usize].store(i + 1, Ordering::Release);
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..8u64)
            .map(|r| {
                let (mem, done) = (Arc::clone(&mem), Arc::clone(&done));
                std::thread::spawn(move || {
                    let mut x = r.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    for n in 0..20_000u64 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let t = x % 8;
                        let written = done[t as usize].load(Ordering::Acquire);
                        if written == 0 {
                            continue;
                        }
                        let i = (x >> 8) % written;
                        // Seen as of i's own sequence number: exactly version i.
                        let got = mem.get(&key(t, i), i * 8 + t + 1).expect("written");
                        assert_eq!(got.value, value(t, i));
                        // The newest version is at least as new as the last one finished.
                        let newest = mem.get(&key(t, i), SeqNo::MAX).expect("written");
                        assert!(newest.seq > i * 8 + t);
                        if n % 2000 == 0 {
                            let walked: Vec<Entry> = mem
                                .iter_from(Bound::Included(b"0500"))
                                .take(300)
                                .map(|e| e.unwrap())
                                .collect();
                            for pair in walked.windows(2) {
                                let order = crate::entry::entry_order(
                                    &pair[0].key,
                                    pair[0].seq,
                                    &pair[1].key,
                                    pair[1].seq,
                                );
                                assert_eq!(order, std::cmp::Ordering::Less);
                            }
                        }
                    }
                })
            })
            .collect();
        for t in writers.into_iter().chain(readers) {
            t.join().unwrap();
        }
        assert_eq!(mem.len() as u64, 8 * PER_WRITER);
        for t in 0..8 {
            for i in PER_WRITER - 1000..PER_WRITER {
                assert_eq!(mem.get(&key(t, i), SeqNo::MAX).unwrap().value, value(t, i));
            }
        }
    }
}
