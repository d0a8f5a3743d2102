//! The in-memory table that takes every write before it is flushed to a table file.
//!
//! Entries are kept in a B-tree ordered by key ascending and sequence number descending, so
//! the newest visible version of a key is the first one at or after `(key, snapshot)`.
//!
//! Keys and values are copied into an arena: large blocks that only grow, freed together when
//! the memtable goes (as LevelDB's memtable does). Holding each key and value in a heap buffer
//! of its own cost two allocations per write on the writer's thread and two frees per entry
//! on the flush thread, which a 30M-key load profiled at about 8% of all its CPU time, and
//! the freed small buffers stayed with the allocator, spread over its per-thread arenas.
//!
//! With a prefix extractor (`Options::prefix_extractor`), a memtable also keeps a cache-local
//! Bloom filter of its keys' prefixes, as a table keeps a prefix filter: a scan over a prefix
//! none of its keys has passes the memtable by without a seek, and a walk over a prefix stops
//! copying entries at the prefix's end.

use std::cmp::{Ordering as KeyOrdering, Reverse};
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::entry::{Entry, SeqNo, ValueKind};
use crate::error::Result;
use crate::filter::{BlockedBloomFilter, BlockedParams, KeyHash};
use crate::prefix::PrefixExtractor;

/// Bytes of one arena block for a memtable of `memtable_size` bytes: an eighth of it, so that
/// the memory counted (whole blocks) runs at most an eighth ahead of what entries use, and
/// between 256 bytes and 1 MiB.
fn arena_block_for(memtable_size: usize) -> usize {
    (memtable_size / 8).clamp(256, 1 << 20)
}

/// Bytes held in memory elsewhere: an arena's block, or (only while one lookup runs) the
/// caller's key.
///
/// The memtable creates these only for bytes its arena holds, which stay in place and
/// unchanged until the memtable is dropped, and for a caller's key during a lookup that
/// borrows it. Every `Bytes` in the map thus points at live bytes while the map exists.
#[derive(Clone, Copy)]
struct Bytes {
    ptr: *const u8,
    len: usize,
}

// SAFETY: the bytes a `Bytes` points at are never written after it is made, so sharing or
// sending it between threads shares only immutable data.
unsafe impl Send for Bytes {}
// SAFETY: as above.
unsafe impl Sync for Bytes {}

impl Bytes {
    /// Refers to `slice`; the caller keeps it alive while this is used.
    fn of(slice: &[u8]) -> Bytes {
        Bytes {
            ptr: slice.as_ptr(),
            len: slice.len(),
        }
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` and `len` describe initialised bytes that outlive every use of this
        // value: an arena's bytes live as long as the memtable that holds both, and a lookup
        // key outlives the lookup (see the type's comment).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// A map key: a key's bytes and its sequence number, ordered by key ascending, then by
/// sequence number descending.
#[derive(Clone, Copy)]
struct MemKey {
    key: Bytes,
    seq: Reverse<SeqNo>,
}

impl MemKey {
    fn new(key: &[u8], seq: SeqNo) -> MemKey {
        MemKey {
            key: Bytes::of(key),
            seq: Reverse(seq),
        }
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> KeyOrdering {
        (self.key.as_slice(), self.seq).cmp(&(other.key.as_slice(), other.seq))
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<KeyOrdering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == KeyOrdering::Equal
    }
}

impl Eq for MemKey {}

/// Append-only storage: bytes once copied in stay where they are, unchanged, until the arena
/// is dropped.
struct Arena {
    /// Bytes of a block; keys and values over a quarter of it get a block of their own, so
    /// that a large value does not leave most of a block unused.
    block_size: usize,
    /// Bytes of every block together: the memory the arena holds.
    allocated: usize,
    /// Every block, each the pointer and capacity of a `Vec` given up; all reads and writes of
    /// a block go through its pointer.
    blocks: Vec<(*mut u8, usize)>,
    /// The block new bytes go to (an index into `blocks`), and how much of it is used.
    current: Option<usize>,
    used: usize,
}

// SAFETY: the arena owns its blocks; bytes are written only through `&mut Arena` and never
// after, so moving it to another thread or reading it from several is sound.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

impl Arena {
    fn new(block_size: usize) -> Arena {
        Arena {
            block_size,
            allocated: 0,
            blocks: Vec::new(),
            current: None,
            used: 0,
        }
    }

    /// Copies `bytes` in and returns where they now lie.
    fn copy_in(&mut self, bytes: &[u8]) -> Bytes {
        let len = bytes.len();
        if len == 0 {
            // An empty slice needs only a non-null, aligned pointer.
            return Bytes {
                ptr: std::ptr::NonNull::dangling().as_ptr(),
                len,
            };
        }
        let ptr = if len > self.block_size / 4 {
            self.new_block(len)
        } else {
            let room = self.current.map_or(0, |b| self.blocks[b].1 - self.used);
            if room < len {
                self.new_block(self.block_size);
                self.current = Some(self.blocks.len() - 1);
                self.used = 0;
            }
            let (block, _) = self.blocks[self.current.expect("a current block")];
            // SAFETY: `used + len` is within the block (checked above).
            let at = unsafe { block.add(self.used) };
            self.used += len;
            at
        };
        // SAFETY: `ptr` has room for `len` bytes that nothing refers to yet, and `bytes` lies
        // outside the arena's unused space.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, len) };
        Bytes { ptr, len }
    }

    /// A new block with room for `len` bytes (at least one), kept for the arena's life. Its
    /// bytes are not initialised: only those copied in are ever read.
    fn new_block(&mut self, len: usize) -> *mut u8 {
        let mut block = std::mem::ManuallyDrop::new(Vec::<u8>::with_capacity(len.max(1)));
        let (ptr, capacity) = (block.as_mut_ptr(), block.capacity());
        self.blocks.push((ptr, capacity));
        self.allocated += capacity;
        ptr
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for &(ptr, capacity) in &self.blocks {
            // SAFETY: each block is the buffer of a `Vec<u8>` of `capacity` given up in
            // `new_block`, freed once, here; its length 0 drops no elements.
            drop(unsafe { Vec::from_raw_parts(ptr, 0, capacity) });
        }
    }
}

/// Bits of a memtable's prefix filter per entry it can hold at the least bookkeeping an
/// entry costs (`SLOT_BYTES`, an empty key and value): a 1% rate (cache-local) even when
/// every key has a prefix of its own, and far less when keys share prefixes. About 1.5% of
/// the memtable's size.
const PREFIX_FILTER_BITS_PER_ENTRY: u32 = 10;

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
        let entries = (memtable_size / SLOT_BYTES).max(1) as u64;
        PrefixFilter {
            extractor,
            filter: BlockedBloomFilter::new(params, entries),
        }
    }

    fn insert(&mut self, key: &[u8]) {
        if let Some(prefix) = self.extractor.prefix(key) {
            self.filter.insert(prefix);
        }
    }
}

/// The map and the arena its keys and values lie in, behind one lock. The map is declared
/// first, so it is dropped first: nothing refers into the arena once the arena goes.
struct Contents {
    map: BTreeMap<MemKey, (ValueKind, Bytes)>,
    arena: Arena,
    prefixes: Option<PrefixFilter>,
}

impl Contents {
    fn entry(&self, key: &MemKey, (kind, value): &(ValueKind, Bytes)) -> Entry {
        Entry {
            key: key.key.as_slice().to_vec(),
            seq: key.seq.0,
            kind: *kind,
            value: value.as_slice().to_vec(),
        }
    }

    /// The first entry at or after (`key`, `snapshot`), if it is of `key`.
    fn newest_of(&self, key: &[u8], snapshot: SeqNo) -> Option<(&MemKey, &(ValueKind, Bytes))> {
        let (found, value) = self.map.range(MemKey::new(key, snapshot)..).next()?;
        (found.key.as_slice() == key).then_some((found, value))
    }
}

/// Bytes of bookkeeping per entry, besides its key and value in the arena: its B-tree slot,
/// with nodes two-thirds full on average and one internal node per eleven leaves.
const SLOT_BYTES: usize =
    (std::mem::size_of::<MemKey>() + std::mem::size_of::<(ValueKind, Bytes)>()) * 17 / 10;

/// A sorted, versioned, in-memory write buffer, shared by one writer and many readers.
pub struct MemTable {
    contents: RwLock<Contents>,
    approximate_bytes: AtomicUsize,
    /// The WAL file that holds this memtable's writes.
    log_number: u64,
}

impl std::fmt::Debug for MemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // No lock is taken: a memtable may be printed by a thread that holds it.
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
        MemTable {
            contents: RwLock::new(Contents {
                map: BTreeMap::new(),
                arena: Arena::new(arena_block_for(memtable_size)),
                prefixes: extractor.map(|e| PrefixFilter::for_memtable(e, memtable_size)),
            }),
            approximate_bytes: AtomicUsize::new(0),
            log_number,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Contents> {
        self.contents.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The WAL file that holds this memtable's writes.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Adds entries (one batch) under a single lock acquisition.
    pub fn apply(&self, entries: impl IntoIterator<Item = Entry>) {
        let mut contents = self.contents.write().unwrap_or_else(|e| e.into_inner());
        let Contents {
            map,
            arena,
            prefixes,
        } = &mut *contents;
        for e in entries {
            if let Some(prefixes) = prefixes {
                prefixes.insert(&e.key);
            }
            let key = MemKey {
                key: arena.copy_in(&e.key),
                seq: Reverse(e.seq),
            };
            let value = arena.copy_in(&e.value);
            map.insert(key, (e.kind, value));
        }
        if map.is_empty() {
            return;
        }
        let filter_bytes = prefixes.as_ref().map_or(0, |p| p.filter.memory_bytes());
        let held = arena.allocated + map.len() * SLOT_BYTES + filter_bytes;
        self.approximate_bytes.store(held, Ordering::Relaxed);
    }

    /// What the prefix filter says of the prefix hashed as `hash` (cut by the store's
    /// extractor): `Some(false)` when no key written has it, `Some(true)` when one may have;
    /// `None` without a filter.
    pub fn may_hold_prefix(&self, hash: &KeyHash) -> Option<bool> {
        let contents = self.read();
        let prefixes = contents.prefixes.as_ref()?;
        Some(prefixes.filter.contains_hash(hash))
    }

    /// Whether an entry (a value or a tombstone, of any version) has a key that starts with
    /// `prefix`: one seek, nothing copied.
    pub fn holds_prefix(&self, prefix: &[u8]) -> bool {
        let contents = self.read();
        let first = contents.map.range(MemKey::new(prefix, SeqNo::MAX)..).next();
        first.is_some_and(|(key, _)| key.key.as_slice().starts_with(prefix))
    }

    /// The newest version of `key` with a sequence number at most `snapshot`.
    pub fn get(&self, key: &[u8], snapshot: SeqNo) -> Option<Entry> {
        let contents = self.read();
        let (found, value) = contents.newest_of(key, snapshot)?;
        Some(contents.entry(found, value))
    }

    /// Whether the newest version of `key` at most `snapshot` is a value or a tombstone,
    /// without copying the value.
    pub fn kind_of(&self, key: &[u8], snapshot: SeqNo) -> Option<ValueKind> {
        let contents = self.read();
        contents
            .newest_of(key, snapshot)
            .map(|(_, (kind, _))| *kind)
    }

    /// Approximate memory held: the arena's blocks, and the B-tree's slots.
    pub fn approximate_bytes(&self) -> usize {
        self.approximate_bytes.load(Ordering::Relaxed)
    }

    /// Number of entries (every version counts).
    pub fn len(&self) -> usize {
        self.read().map.len()
    }

    /// True when no write went in (no lock taken: lookups skip empty memtables cheaply).
    pub fn is_empty(&self) -> bool {
        self.approximate_bytes.load(Ordering::Relaxed) == 0
    }

    /// Entries at or after `start`, in entry order, read in chunks so that the lock is never
    /// held while the caller works.
    pub fn iter_from(self: &Arc<Self>, start: Bound<&[u8]>) -> MemTableIter {
        self.iter_between(start, Bound::Unbounded)
    }

    /// [`iter_from`](Self::iter_from) that ends before the first key past `end`: no chunk
    /// copies an entry beyond it (a walk over one prefix reads none of the next prefix's).
    pub fn iter_between(
        self: &Arc<Self>,
        start: Bound<&[u8]>,
        end: Bound<Vec<u8>>,
    ) -> MemTableIter {
        let next = match start {
            Bound::Included(k) => Bound::Included((k.to_vec(), Reverse(SeqNo::MAX))),
            Bound::Excluded(k) => Bound::Excluded((k.to_vec(), Reverse(0))),
            Bound::Unbounded => Bound::Unbounded,
        };
        MemTableIter::new(self, next, end, false)
    }

    /// Entries at or before `end`, in reverse entry order (keys descending, each key's
    /// versions oldest first), read in chunks as [`iter_from`](Self::iter_from) reads them.
    pub fn iter_back_to(self: &Arc<Self>, end: Bound<&[u8]>) -> MemTableIter {
        self.iter_back_between(end, Bound::Unbounded)
    }

    /// [`iter_back_to`](Self::iter_back_to) that ends after the last key at or past `start`.
    pub fn iter_back_between(
        self: &Arc<Self>,
        end: Bound<&[u8]>,
        start: Bound<Vec<u8>>,
    ) -> MemTableIter {
        // A key's versions run from the newest (`Reverse(MAX)` first) to the oldest
        // (`Reverse(0)` last): up to and including `k` ends at its oldest possible version,
        // short of `k` before its newest.
        let next = match end {
            Bound::Included(k) => Bound::Included((k.to_vec(), Reverse(0))),
            Bound::Excluded(k) => Bound::Excluded((k.to_vec(), Reverse(SeqNo::MAX))),
            Bound::Unbounded => Bound::Unbounded,
        };
        MemTableIter::new(self, next, start, true)
    }
}

/// How many entries a [`MemTableIter`] copies out per lock acquisition.
const ITER_CHUNK: usize = 256;

/// An iterator over a memtable, forwards or backwards, that sees entries written after it
/// started as well; callers filter by sequence number for a consistent snapshot.
pub struct MemTableIter {
    mem: Arc<MemTable>,
    /// Where the next refill starts (walking backwards, ends): a key and sequence number of
    /// the iterator's own.
    next: Bound<(Vec<u8>, Reverse<SeqNo>)>,
    /// The key bound the walk ends at: the last keys forwards, the first ones backwards.
    stop: Bound<Vec<u8>>,
    /// Walking in reverse entry order.
    backward: bool,
    buffer: VecDeque<Entry>,
    done: bool,
}

impl MemTableIter {
    fn new(
        mem: &Arc<MemTable>,
        next: Bound<(Vec<u8>, Reverse<SeqNo>)>,
        stop: Bound<Vec<u8>>,
        backward: bool,
    ) -> MemTableIter {
        MemTableIter {
            mem: Arc::clone(mem),
            next,
            stop,
            backward,
            buffer: VecDeque::new(),
            done: false,
        }
    }

    fn refill(&mut self) {
        let contents = self.mem.read();
        let edge = match &self.next {
            Bound::Included((key, Reverse(seq))) => Bound::Included(MemKey::new(key, *seq)),
            Bound::Excluded((key, Reverse(seq))) => Bound::Excluded(MemKey::new(key, *seq)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let stop = &self.stop;
        let within = |(key, _): &(&MemKey, _)| match self.backward {
            false => crate::iter::at_or_before(key.key.as_slice(), stop),
            true => crate::iter::at_or_after(key.key.as_slice(), stop),
        };
        let mut copy = |(key, value)| self.buffer.push_back(contents.entry(key, value));
        match self.backward {
            false => (contents.map.range((edge, Bound::Unbounded)))
                .take_while(within)
                .take(ITER_CHUNK)
                .for_each(&mut copy),
            true => (contents.map.range((Bound::Unbounded, edge)))
                .rev()
                .take_while(within)
                .take(ITER_CHUNK)
                .for_each(&mut copy),
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
    fn iterator_walks_chunks_in_entry_order() {
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
    fn backward_iterator_walks_chunks_in_reverse_entry_order() {
        let mem = Arc::new(MemTable::new(1, 64 << 20));
        // Three versions a key: chunks of 256 entries end inside keys too.
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
        let mem = MemTable::new(1, 4096);
        assert_eq!(mem.approximate_bytes(), 0);
        mem.apply([Entry::value(b"k".to_vec(), 1, b"v".to_vec())]);
        assert_eq!(mem.approximate_bytes(), 512 + SLOT_BYTES);
        // A value over a quarter block gets a block of its own, counted whole.
        mem.apply([Entry::value(b"big".to_vec(), 2, vec![7; 200])]);
        assert_eq!(mem.approximate_bytes(), 512 + 200 + 2 * SLOT_BYTES);
        // Small entries fill the first block before a second one is counted.
        // (507 bytes are left in it; these take 600.)
        mem.apply((0..150u8).map(|i| Entry::value(vec![i], 3 + i as u64, vec![i; 3])));
        assert_eq!(mem.approximate_bytes(), 2 * 512 + 200 + 152 * SLOT_BYTES);
    }

    #[test]
    fn empty_keys_and_values_need_no_block() {
        let mem = MemTable::new(1, 64 << 20);
        mem.apply([Entry::tombstone(Vec::new(), 1)]);
        mem.apply([Entry::value(Vec::new(), 2, Vec::new())]);
        assert!(mem.get(b"", 1).unwrap().is_tombstone());
        let newest = mem.get(b"", 2).unwrap();
        assert_eq!((newest.kind, newest.value), (ValueKind::Value, Vec::new()));
        assert!(mem.get(b"\0", 2).is_none());
    }

    #[test]
    fn bounded_walks_copy_nothing_past_their_bound() {
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
        // One refill took the 199 entries left of the prefix, not a whole chunk past it.
        assert_eq!(forward.buffer.len(), 199);
        assert_eq!(forward.buffer.back().unwrap().key, b"1:199");
        assert!(forward.next().is_some());
        assert_eq!(forward.count(), 198);

        let mut backward =
            mem.iter_back_between(Bound::Excluded(b"1;"), Bound::Included(b"1:".to_vec()));
        assert_eq!(backward.next().unwrap().unwrap().key, b"1:199");
        assert_eq!(backward.buffer.len(), 199);
        assert_eq!(backward.buffer.back().unwrap().key, b"1:000");
        assert_eq!(backward.count(), 199);

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
        let filter_bytes = (64 << 20) / SLOT_BYTES * 10 / 8;
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
}
