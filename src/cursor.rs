//! A cursor: one consistent view of the store that a reader moves over freely, forwards and
//! backwards, and repositions with seeks (RocksDB's iterator, LevelDB's `DBIter`).
//!
//! The view is a read state (memtables and a version) and a sequence number, taken when the
//! cursor is made: every step sees the same pairs, whatever is written, flushed or compacted
//! meanwhile. A cursor walks in one direction at a time, over the sources merged as
//! [`DbIterator`](crate::DbIterator) merges them. A step against the direction of the walk
//! (`prev` after `next`) starts a walk the other way from the current key: a seek of every
//! source, paid once per turn, not per step; steps in one direction cost what an iterator's
//! do.

use std::ops::Bound;
use std::sync::Arc;

use crate::entry::SeqNo;
use crate::error::Result;
use crate::iter::{
    at_or_after, at_or_before, walk_backward, walk_forward, BackwardWalk, ForwardWalk, Sources,
};
use crate::walk::Walk;

/// The walk a cursor is on; the cursor is at the pair the walk stands on.
enum OnWalk {
    /// No walk: before the first seek, after an error, or off either end.
    Idle,
    Forward(ForwardWalk),
    Backward(BackwardWalk),
}

impl OnWalk {
    /// The pair the walk stands on, borrowed from it.
    fn pair(&self) -> Option<(&[u8], &[u8])> {
        let entry = match self {
            OnWalk::Idle => return None,
            OnWalk::Forward(walk) => walk.current(),
            OnWalk::Backward(walk) => walk.current(),
        };
        Some((entry.key, entry.value))
    }
}

/// A movable position over the key-value pairs of one consistent view of the store, within
/// optional lower and upper bounds (made by [`Db::cursor`](crate::Db::cursor),
/// [`Db::cursor_over`](crate::Db::cursor_over) and the same on a
/// [`Snapshot`](crate::Snapshot)).
///
/// A cursor starts unpositioned: [`seek`](Self::seek) (the first key at or after a key),
/// [`seek_for_prev`](Self::seek_for_prev) (the last key at or before it, "the newest entry at
/// or before this time"), [`seek_to_first`](Self::seek_to_first) or
/// [`seek_to_last`](Self::seek_to_last) place it, and [`next`](Self::next) and
/// [`prev`](Self::prev) move it. [`key`](Self::key) and [`value`](Self::value) say where it
/// is; `None` when it is unpositioned or has moved off either end of its bounds, where
/// `next` and `prev` leave it (seek again). An error reading the store is returned by the
/// move that met it and leaves the cursor unpositioned.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default())?;
/// for (k, v) in [("t:01", "a"), ("t:05", "b"), ("t:09", "c")] {
///     db.put(k, v)?;
/// }
/// let mut cursor = db.cursor_over("t:".."t;");
/// cursor.seek_for_prev("t:07")?; // the newest entry at or before t:07
/// assert_eq!(cursor.key(), Some(&b"t:05"[..]));
/// cursor.prev()?;
/// assert_eq!(cursor.value(), Some(&b"a"[..]));
/// cursor.prev()?; // off the front
/// assert_eq!(cursor.key(), None);
/// cursor.seek_to_last()?;
/// assert_eq!(cursor.key(), Some(&b"t:09"[..]));
/// # Ok::<(), bloomkv::Error>(())
/// ```
pub struct Cursor {
    sources: Arc<dyn Sources>,
    snapshot: SeqNo,
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    walk: OnWalk,
}

impl Cursor {
    pub(crate) fn new(
        sources: Arc<dyn Sources>,
        snapshot: SeqNo,
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
    ) -> Cursor {
        Cursor {
            sources,
            snapshot,
            lower,
            upper,
            walk: OnWalk::Idle,
        }
    }

    /// The key the cursor is at; `None` when it is not at one.
    pub fn key(&self) -> Option<&[u8]> {
        self.walk.pair().map(|(key, _)| key)
    }

    /// The value of the key the cursor is at; `None` when it is not at one.
    pub fn value(&self) -> Option<&[u8]> {
        self.walk.pair().map(|(_, value)| value)
    }

    /// Whether the cursor is at a key.
    pub fn valid(&self) -> bool {
        !matches!(self.walk, OnWalk::Idle)
    }

    /// Moves to the first key within the bounds.
    pub fn seek_to_first(&mut self) -> Result<()> {
        let start = self.lower.clone();
        self.walk_forward_from(start)
    }

    /// Moves to the last key within the bounds.
    pub fn seek_to_last(&mut self) -> Result<()> {
        let end = self.upper.clone();
        self.walk_backward_from(end)
    }

    /// Moves to the first key at or after `key` (and within the bounds).
    pub fn seek(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        let start = match &self.lower {
            lower if !at_or_after(key, lower) => lower.clone(),
            _ => Bound::Included(key.to_vec()),
        };
        self.walk_forward_from(start)
    }

    /// Moves to the last key at or before `key` (and within the bounds).
    pub fn seek_for_prev(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        let end = match &self.upper {
            upper if !at_or_before(key, upper) => upper.clone(),
            _ => Bound::Included(key.to_vec()),
        };
        self.walk_backward_from(end)
    }

    /// Moves to the next key; an unpositioned cursor stays so.
    // A move, not an `Iterator::next`: the cursor stays where it is and can turn back; a
    // `DbIterator` is the cursor's iterator.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        match &self.walk {
            OnWalk::Idle => Ok(()),
            OnWalk::Forward(_) => self.step(),
            OnWalk::Backward(walk) => {
                let key = walk.current().key.to_vec();
                self.walk_forward_from(Bound::Excluded(key))
            }
        }
    }

    /// Moves to the previous key; an unpositioned cursor stays so.
    pub fn prev(&mut self) -> Result<()> {
        match &self.walk {
            OnWalk::Idle => Ok(()),
            OnWalk::Backward(_) => self.step(),
            OnWalk::Forward(walk) => {
                let key = walk.current().key.to_vec();
                self.walk_backward_from(Bound::Excluded(key))
            }
        }
    }

    fn walk_forward_from(&mut self, start: Bound<Vec<u8>>) -> Result<()> {
        let start = start.as_ref().map(Vec::as_slice);
        let walk = walk_forward(self.sources.as_ref(), start, &self.upper, self.snapshot);
        self.walk = OnWalk::Forward(walk);
        self.step()
    }

    fn walk_backward_from(&mut self, end: Bound<Vec<u8>>) -> Result<()> {
        let end = end.as_ref().map(Vec::as_slice);
        let walk = walk_backward(self.sources.as_ref(), &self.lower, end, self.snapshot);
        self.walk = OnWalk::Backward(walk);
        self.step()
    }

    /// One step of the walk the cursor is on. Every walk starts within the bounds and is cut
    /// at the bound it walks towards, so each pair it gives lies within them. The walk's end
    /// or an error leaves the cursor unpositioned.
    fn step(&mut self) -> Result<()> {
        let stepped = match &mut self.walk {
            OnWalk::Forward(walk) => walk.advance(),
            OnWalk::Backward(walk) => walk.advance(),
            OnWalk::Idle => Ok(false),
        };
        if !matches!(stepped, Ok(true)) {
            self.walk = OnWalk::Idle;
        }
        stepped.map(|_| ())
    }
}
