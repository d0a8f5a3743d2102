//! A sorted set of versioned entries, in an arena: inserts from any number of threads at once,
//! reads that take no lock, and cursors that walk it in place. Nothing is ever removed, so a
//! node once linked stays linked, and a pointer to it stays valid while the list lives.
//!
//! Entries sort by key ascending, then by sequence number descending (entry order), so the
//! newest version of a key is the first one at or after `(key, snapshot)`.
//!
//! An insert links its node level by level from the bottom, each link with a compare-and-swap
//! on its predecessor's pointer; a lost race finds the splice again from that predecessor,
//! which stays before the new key because nothing moves or goes away. A reader follows
//! pointers loaded with acquire ordering, which the inserter's release publishes after the
//! node's contents are written. Level 0 holds every node; a node on a level above is a short
//! cut that a reader may or may not see yet, either way it lands where it should.

use std::cmp::Ordering as KeyOrdering;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use super::arena::{Arena, ALIGN};
use crate::entry::{SeqNo, ValueKind};

/// Levels of the list: with one node in four rising a level, 12 levels index 4^11 (four
/// million) nodes well, more than a memtable holds of its smallest entries.
const MAX_HEIGHT: usize = 12;

/// A node's fixed part; its links, key and value follow it in the same arena piece:
/// `[Node][AtomicPtr<Node>; height][key][value]`. Only these fixed bytes are ever borrowed
/// as a `Node`; the links and bytes after them are reached through the pointer to the
/// whole piece ([`NodeRef`]), which is what may reach them.
#[repr(C)]
struct Node {
    seq: SeqNo,
    key_len: usize,
    value_len: usize,
    kind: ValueKind,
    height: u8,
}

/// Where each list's sequence of heights starts: any number whose mix is not zero (the mix
/// of zero is zero, which would give the first node every level).
const HEIGHT_SEED: u64 = 0x2545_F491_4F6C_DD1D;

const HEADER: usize = std::mem::size_of::<Node>();
const LINK: usize = std::mem::size_of::<AtomicPtr<Node>>();
const _: () = assert!(HEADER.is_multiple_of(ALIGN) && std::mem::align_of::<Node>() <= ALIGN);

/// A node of a list that lives at least as long as `'a`: the pointer to its whole arena
/// piece (or the head's allocation), from which its links, key and value are reached.
#[derive(Clone, Copy)]
struct NodeRef<'a> {
    ptr: NonNull<Node>,
    list: PhantomData<&'a SkipList>,
}

impl<'a> NodeRef<'a> {
    /// # Safety
    /// `ptr` points at an initialised node (or the head) of a list that outlives `'a`.
    unsafe fn new(ptr: NonNull<Node>) -> NodeRef<'a> {
        NodeRef {
            ptr,
            list: PhantomData,
        }
    }

    fn header(self) -> &'a Node {
        // SAFETY: the header was written before the node was published and is never written
        // again; the node outlives `'a` (the type's invariant).
        unsafe { self.ptr.as_ref() }
    }

    fn link(self, level: usize) -> &'a AtomicPtr<Node> {
        debug_assert!(level < self.header().height as usize);
        // SAFETY: a node is made with `height` links right after its header, each aligned
        // (the header's size is a multiple of 8), and `level < height`; the pointer covers
        // the whole piece.
        unsafe {
            &*(self
                .ptr
                .as_ptr()
                .cast::<u8>()
                .add(HEADER + level * LINK)
                .cast())
        }
    }

    fn next(self, level: usize) -> Option<NodeRef<'a>> {
        let next = NonNull::new(self.link(level).load(Ordering::Acquire))?;
        // SAFETY: a non-null link points at a node of the same list, published with release
        // ordering after it was written; nodes are never removed.
        Some(unsafe { NodeRef::new(next) })
    }

    fn payload(self) -> *const u8 {
        let links = self.header().height as usize * LINK;
        // SAFETY: the key and value follow the links within the node's piece.
        unsafe { self.ptr.as_ptr().cast::<u8>().add(HEADER + links) }
    }

    fn key(self) -> &'a [u8] {
        // SAFETY: `key_len` bytes of key were written after the links before the node was
        // published, and are never written again.
        unsafe { std::slice::from_raw_parts(self.payload(), self.header().key_len) }
    }

    fn value(self) -> &'a [u8] {
        let header = self.header();
        // SAFETY: as for the key; the value follows it.
        unsafe { std::slice::from_raw_parts(self.payload().add(header.key_len), header.value_len) }
    }

    /// How this node's entry sorts against `(key, seq)`.
    fn cmp_to(self, key: &[u8], seq: SeqNo) -> KeyOrdering {
        self.key().cmp(key).then(seq.cmp(&self.header().seq))
    }
}

/// One entry of the list, borrowed from it.
#[derive(Clone, Copy)]
pub(crate) struct EntryRef<'a> {
    node: NodeRef<'a>,
}

impl<'a> EntryRef<'a> {
    pub(crate) fn key(&self) -> &'a [u8] {
        self.node.key()
    }
    pub(crate) fn value(&self) -> &'a [u8] {
        self.node.value()
    }
    pub(crate) fn seq(&self) -> SeqNo {
        self.node.header().seq
    }
    pub(crate) fn kind(&self) -> ValueKind {
        self.node.header().kind
    }
    /// The next entry in entry order.
    pub(crate) fn next(&self) -> Option<EntryRef<'a>> {
        self.node.next(0).map(|node| EntryRef { node })
    }
    /// Where this entry lies, to come back to it while the list lives (see [`Position`]).
    pub(crate) fn position(&self) -> Position {
        Position(self.node.ptr)
    }
}

/// A place in a list, kept without a borrow: the iterators of a memtable hold one beside the
/// `Arc` of their memtable, which keeps the node alive.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Position(NonNull<Node>);

// SAFETY: a position is only dereferenced through `SkipList::at`, whose caller holds the list
// alive; the node it names is immutable but for its atomic links.
unsafe impl Send for Position {}
// SAFETY: as above.
unsafe impl Sync for Position {}

/// The list: a head with every level's first link, and the arena that holds the nodes.
pub(super) struct SkipList {
    /// The head's piece holds a node header of height `MAX_HEIGHT` and no key; it is never
    /// compared, only followed.
    head: NonNull<Node>,
    arena: Arena,
    /// Entries inserted.
    len: AtomicUsize,
    /// Feeds the choice of each node's height.
    heights: AtomicU64,
}

// SAFETY: the head and every node live in memory the list owns (the head's piece and the
// arena), written only before publication or through atomics; see the module's comment.
unsafe impl Send for SkipList {}
// SAFETY: as above.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// An empty list whose nodes go to arena blocks of `block_size` bytes.
    pub(super) fn new(block_size: usize) -> SkipList {
        let layout = head_layout();
        // SAFETY: the layout's size is not zero.
        let head = unsafe { std::alloc::alloc(layout) } as *mut Node;
        let Some(head) = NonNull::new(head) else {
            std::alloc::handle_alloc_error(layout);
        };
        // SAFETY: the piece has room for the header and MAX_HEIGHT links, aligned.
        unsafe { init_node(head, MAX_HEIGHT, &[], 0, ValueKind::Value, &[]) };
        SkipList {
            head,
            arena: Arena::new(block_size),
            len: AtomicUsize::new(0),
            heights: AtomicU64::new(HEIGHT_SEED),
        }
    }

    fn head(&self) -> NodeRef<'_> {
        // SAFETY: the head lives as long as the list.
        unsafe { NodeRef::new(self.head) }
    }

    /// Entries inserted.
    pub(super) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Bytes of the arena's blocks: what the entries hold.
    pub(super) fn memory_bytes(&self) -> usize {
        self.arena.allocated()
    }

    /// The entry at `position`.
    ///
    /// # Safety
    /// `position` was taken from an entry of this list.
    pub(crate) unsafe fn at(&self, position: Position) -> EntryRef<'_> {
        // SAFETY: the node is one of this list's (the caller's promise), and lives as long.
        EntryRef {
            node: unsafe { NodeRef::new(position.0) },
        }
    }

    /// Adds an entry. Safe to call from many threads at once; readers see it whole or not at
    /// all. The store never adds two entries of the same key and sequence number; the list
    /// would hold both, but a backward walk would see only one.
    pub(super) fn insert(&self, key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        let height = self.random_height();
        let size = HEADER + height * LINK + key.len() + value.len();
        let piece = self.arena.alloc(size).cast::<Node>();
        // SAFETY: the piece is ours, aligned, with room for the node's parts.
        unsafe { init_node(piece, height, key, seq, kind, value) };
        // SAFETY: initialised just above; it lives as long as the arena.
        let node = unsafe { NodeRef::new(piece) };
        let mut prev = [self.head(); MAX_HEIGHT];
        let mut next: [Option<NodeRef<'_>>; MAX_HEIGHT] = [None; MAX_HEIGHT];
        let mut from = self.head();
        for level in (0..MAX_HEIGHT).rev() {
            (prev[level], next[level]) = self.splice_at(from, level, key, seq);
            from = prev[level];
        }
        for level in 0..height {
            loop {
                let successor = next[level].map_or(std::ptr::null_mut(), |n| n.ptr.as_ptr());
                // Not yet reachable on this level: the exchange below publishes it.
                node.link(level).store(successor, Ordering::Relaxed);
                let linked = prev[level].link(level).compare_exchange(
                    successor,
                    piece.as_ptr(),
                    Ordering::Release,
                    Ordering::Acquire,
                );
                if linked.is_ok() {
                    break;
                }
                // Another insert linked a node after `prev` first; `prev` still sorts before
                // this key, so the splice is found again from it.
                (prev[level], next[level]) = self.splice_at(prev[level], level, key, seq);
            }
        }
        self.len.fetch_add(1, Ordering::Release);
    }

    /// A height for a new node: one more level with probability 1/4 each, up to MAX_HEIGHT.
    fn random_height(&self) -> usize {
        // A Weyl sequence mixed by SplitMix64's finaliser: threads share it without a lock.
        let mut z = (self.heights).fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // Each pair of zero low bits is one level more.
        (1 + (z.trailing_zeros() / 2) as usize).min(MAX_HEIGHT)
    }

    /// On `level`, starting from `from` (which sorts before `(key, seq)`): the last node
    /// before `(key, seq)` and the first one at or after it.
    fn splice_at<'a>(
        &'a self,
        mut from: NodeRef<'a>,
        level: usize,
        key: &[u8],
        seq: SeqNo,
    ) -> (NodeRef<'a>, Option<NodeRef<'a>>) {
        loop {
            match from.next(level) {
                Some(next) if next.cmp_to(key, seq) == KeyOrdering::Less => from = next,
                next => return (from, next),
            }
        }
    }

    /// The last node before `(key, seq)` (or, `inclusive`, at or before it), the head when
    /// there is none; and the node after it on level 0 as the walk met it. Inserts may link
    /// nodes between the two after the walk: a second look at the first one's successor could
    /// find one of those, which may sort before the target.
    fn last_before(
        &self,
        key: &[u8],
        seq: SeqNo,
        inclusive: bool,
    ) -> (NodeRef<'_>, Option<NodeRef<'_>>) {
        let mut at = self.head();
        let mut after = None;
        for level in (0..MAX_HEIGHT).rev() {
            after = None;
            while let Some(next) = at.next(level) {
                match next.cmp_to(key, seq) {
                    KeyOrdering::Less => at = next,
                    KeyOrdering::Equal if inclusive => at = next,
                    _ => {
                        after = Some(next);
                        break;
                    }
                }
            }
        }
        (at, after)
    }

    /// The entry of `node`; `None` for the head.
    fn entry<'a>(&'a self, node: NodeRef<'a>) -> Option<EntryRef<'a>> {
        (node.ptr != self.head).then_some(EntryRef { node })
    }

    /// The first entry.
    pub(crate) fn first(&self) -> Option<EntryRef<'_>> {
        self.head().next(0).map(|node| EntryRef { node })
    }

    /// The first entry at or after `(key, seq)` in entry order.
    pub(crate) fn seek(&self, key: &[u8], seq: SeqNo) -> Option<EntryRef<'_>> {
        let (_, after) = self.last_before(key, seq, false);
        after.map(|node| EntryRef { node })
    }

    /// The last entry before `(key, seq)`, or at or before it (`inclusive`).
    pub(crate) fn seek_back(
        &self,
        key: &[u8],
        seq: SeqNo,
        inclusive: bool,
    ) -> Option<EntryRef<'_>> {
        self.entry(self.last_before(key, seq, inclusive).0)
    }

    /// The last entry.
    pub(crate) fn last(&self) -> Option<EntryRef<'_>> {
        let mut at = self.head();
        for level in (0..MAX_HEIGHT).rev() {
            while let Some(next) = at.next(level) {
                at = next;
            }
        }
        self.entry(at)
    }

    /// The entry before `entry` in entry order.
    pub(crate) fn prev(&self, entry: EntryRef<'_>) -> Option<EntryRef<'_>> {
        self.seek_back(entry.key(), entry.seq(), false)
    }
}

impl Drop for SkipList {
    fn drop(&mut self) {
        // SAFETY: the head was allocated in `new` with this layout and is freed once; the
        // nodes need no drop, their arena frees them.
        unsafe { std::alloc::dealloc(self.head.as_ptr() as *mut u8, head_layout()) };
    }
}

fn head_layout() -> std::alloc::Layout {
    std::alloc::Layout::from_size_align(HEADER + MAX_HEIGHT * LINK, ALIGN)
        .expect("the head's size fits a layout")
}

/// Writes a node of `height` null links, `key` and `value` at `piece`.
///
/// # Safety
/// `piece` is aligned to [`ALIGN`], unshared, with room for `HEADER + height * LINK +
/// key.len() + value.len()` bytes.
unsafe fn init_node(
    piece: NonNull<Node>,
    height: usize,
    key: &[u8],
    seq: SeqNo,
    kind: ValueKind,
    value: &[u8],
) {
    let node = piece.as_ptr();
    node.write(Node {
        seq,
        key_len: key.len(),
        value_len: value.len(),
        kind,
        height: height as u8,
    });
    let links = (node as *mut u8).add(HEADER) as *mut AtomicPtr<Node>;
    for level in 0..height {
        links.add(level).write(AtomicPtr::new(std::ptr::null_mut()));
    }
    let payload = (node as *mut u8).add(HEADER + height * LINK);
    std::ptr::copy_nonoverlapping(key.as_ptr(), payload, key.len());
    std::ptr::copy_nonoverlapping(value.as_ptr(), payload.add(key.len()), value.len());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    fn collect(list: &SkipList) -> Vec<(Vec<u8>, SeqNo)> {
        let mut out = Vec::new();
        let mut at = list.first();
        while let Some(e) = at {
            out.push((e.key().to_vec(), e.seq()));
            at = e.next();
        }
        out
    }

    #[test]
    fn entries_come_out_in_entry_order_both_ways() {
        let list = SkipList::new(4096);
        let mut model = BTreeSet::new();
        for i in 0..2000u64 {
            let key = format!("{:04}", (i * 7919) % 500).into_bytes();
            list.insert(&key, i, ValueKind::Value, &i.to_le_bytes());
            model.insert((key, std::cmp::Reverse(i)));
        }
        let expected: Vec<(Vec<u8>, SeqNo)> = model.iter().map(|(k, s)| (k.clone(), s.0)).collect();
        assert_eq!(collect(&list), expected);
        let mut back = Vec::new();
        let mut at = list.last();
        while let Some(e) = at {
            back.push((e.key().to_vec(), e.seq()));
            at = list.prev(e);
        }
        back.reverse();
        assert_eq!(back, expected);
        let found = list.seek(b"0100", SeqNo::MAX).unwrap();
        assert_eq!(found.key(), b"0100");
        assert_eq!(found.value(), found.seq().to_le_bytes());
        assert_eq!(list.seek(b"0100", 0).unwrap().key(), b"0101");
        assert!(list.seek(b"9", 0).is_none());
        assert_eq!(
            list.seek_back(b"0100", SeqNo::MAX, false).unwrap().key(),
            b"0099"
        );
        assert!(list.seek_back(b"", SeqNo::MAX, true).is_none());
        assert_eq!(list.len(), 2000);
    }

    #[test]
    fn concurrent_inserts_and_readers_agree_with_a_model() {
        let list = Arc::new(SkipList::new(1 << 16));
        let writers: Vec<_> = (0..8u64)
            .map(|t| {
                let list = Arc::clone(&list);
                std::thread::spawn(move || {
                    for i in 0..5000u64 {
                        let seq = t * 5000 + i;
                        let key = format!("{:05}", (seq * 40503) % 7000).into_bytes();
                        list.insert(&key, seq, ValueKind::Value, &seq.to_be_bytes());
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..8)
            .map(|_| {
                let list = Arc::clone(&list);
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        // Whatever a walk sees is in entry order, each value its own.
                        let mut last: Option<(Vec<u8>, SeqNo)> = None;
                        let mut at = list.first();
                        while let Some(e) = at {
                            assert_eq!(e.value(), e.seq().to_be_bytes());
                            if let Some((k, s)) = &last {
                                assert!(
                                    (k.as_slice(), std::cmp::Reverse(*s))
                                        < (e.key(), std::cmp::Reverse(e.seq()))
                                );
                            }
                            last = Some((e.key().to_vec(), e.seq()));
                            at = e.next();
                        }
                    }
                })
            })
            .collect();
        for t in writers.into_iter().chain(readers) {
            t.join().unwrap();
        }
        let mut model: Vec<(Vec<u8>, SeqNo)> = (0..40_000u64)
            .map(|seq| (format!("{:05}", (seq * 40503) % 7000).into_bytes(), seq))
            .collect();
        model.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        assert_eq!(collect(&list), model);
        assert_eq!(list.len(), 40_000);
    }
}
