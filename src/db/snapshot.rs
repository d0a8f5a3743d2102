//! Snapshots: the store as it was at one sequence number, for as long as the handle lives.
//!
//! A snapshot is only a number and a registration. Reads at it go through the newest read
//! state and skip every version above the number; flushes and compactions keep, of each key,
//! the newest version each live snapshot can see (`iter::KeptVersions`), so those versions are
//! there to be found. A flush or compaction reads the live snapshots when it begins; one taken
//! later has a number at or above every entry that job reads, so the newest version it keeps
//! is the one that snapshot sees.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{lock, Db, Inner};
use super::{Keyspace, KeyspaceView};
use crate::cursor::Cursor;
use crate::entry::SeqNo;
use crate::error::Result;
use crate::iter::DbIterator;
use crate::keyspace::{KeyspaceId, DEFAULT_ID};

/// Live snapshots: how many handles hold each sequence number.
#[derive(Default)]
pub(super) struct SnapshotList {
    held: BTreeMap<SeqNo, usize>,
}

impl SnapshotList {
    /// The sequence numbers held, ascending.
    pub(super) fn numbers(&self) -> Vec<SeqNo> {
        self.held.keys().copied().collect()
    }

    pub(super) fn len(&self) -> usize {
        self.held.values().sum()
    }

    pub(super) fn oldest(&self) -> Option<SeqNo> {
        self.held.keys().next().copied()
    }
}

impl Inner {
    /// Registers a snapshot at the newest visible write and returns its number. The number
    /// is read under the list's lock, which every job takes to read the list: no job can
    /// begin between the two.
    fn register_snapshot(&self) -> SeqNo {
        let mut list = lock(&self.snapshots);
        let seq = self.visible_seq.load(Ordering::Acquire);
        *list.held.entry(seq).or_insert(0) += 1;
        seq
    }

    /// The live snapshots' numbers, ascending: what a flush or compaction beginning now keeps
    /// versions for.
    pub(super) fn live_snapshots(&self) -> Vec<SeqNo> {
        lock(&self.snapshots).numbers()
    }

    fn release_snapshot(&self, seq: SeqNo) {
        let mut list = lock(&self.snapshots);
        if let Some(count) = list.held.get_mut(&seq) {
            *count -= 1;
            if *count == 0 {
                list.held.remove(&seq);
            }
        }
    }
}

/// The store as it was when [`Db::snapshot`](super::Db::snapshot) was called: reads see every
/// write made before and none made after, whatever is written, flushed or compacted meanwhile.
/// Versions a snapshot sees are kept on disk while it lives, so hold one only as long as
/// needed; dropping it (and its clones, and the views it gave) releases them. It owns a handle
/// of the store, which stays open while it lives: keep it in a struct, or move it into
/// another thread or task.
#[derive(Clone)]
pub struct Snapshot {
    hold: Arc<SnapshotHold>,
}

/// One registration in the live snapshots, shared by a snapshot's clones and views and
/// released when the last of them goes; it keeps the store open meanwhile.
pub(crate) struct SnapshotHold {
    db: Db,
    seq: SeqNo,
    /// The keyspaces live when it was taken, by number (numbers are never used again). A
    /// keyspace made later, even under a dropped one's name, held nothing the snapshot saw.
    keyspaces: Vec<KeyspaceId>,
}

impl SnapshotHold {
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    pub(crate) fn seq(&self) -> SeqNo {
        self.seq
    }
}

impl Drop for SnapshotHold {
    fn drop(&mut self) {
        self.db.inner.release_snapshot(self.seq);
    }
}

impl Snapshot {
    /// A snapshot of `db` at its newest visible write.
    pub(super) fn take(db: &Db) -> Snapshot {
        let seq = db.inner.register_snapshot();
        // Read after the registration: a keyspace made in between is one the snapshot may
        // see (it has no write numbered at or below `seq`), so either order is a true one.
        let keyspaces = db.inner.read_state().trees.iter().map(|t| t.id()).collect();
        Snapshot {
            hold: Arc::new(SnapshotHold {
                db: db.clone(),
                seq,
                keyspaces,
            }),
        }
    }

    fn inner(&self) -> &Inner {
        &self.hold.db.inner
    }

    fn seq(&self) -> SeqNo {
        self.hold.seq
    }

    /// The sequence number of the last write the snapshot sees.
    pub fn sequence_number(&self) -> u64 {
        self.seq()
    }

    /// The reads of `keyspace` at this snapshot's moment: with the snapshot's other views,
    /// one consistent view across keyspaces. `NoSuchKeyspace` for a keyspace of another
    /// store, or one made after the snapshot (even under the name of one it saw, since
    /// dropped: that one's data went with it). Reads of a view whose keyspace was dropped
    /// since fail with `NoSuchKeyspace` as well.
    pub fn keyspace(&self, keyspace: &Keyspace) -> Result<KeyspaceView> {
        let id = keyspace.id_in(&self.hold.db)?;
        if !self.hold.keyspaces.contains(&id) {
            return Err(crate::Error::NoSuchKeyspace {
                name: format!("{} (made after the snapshot)", keyspace.name()),
            });
        }
        Ok(KeyspaceView::at(&self.hold, Arc::clone(keyspace.def())))
    }

    /// The value of `key` as of the snapshot, or `None` when it was absent or deleted.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner().get(DEFAULT_ID, key.as_ref(), Some(self.seq()))
    }

    /// [`get`](Self::get) without a copy (see [`Db::get_pinned`](super::Db::get_pinned)).
    pub fn get_pinned(&self, key: impl AsRef<[u8]>) -> Result<Option<crate::Value>> {
        self.inner()
            .get_pinned(DEFAULT_ID, key.as_ref(), Some(self.seq()))
    }

    /// The values of `keys` as of the snapshot, in their order: see
    /// [`Db::multi_get`](super::Db::multi_get).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner().multi_get(DEFAULT_ID, keys, Some(self.seq()))
    }

    /// Whether `key` held a value as of the snapshot, without copying the value.
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.inner()
            .contains_key(DEFAULT_ID, key.as_ref(), Some(self.seq()))
    }

    /// Every pair in key order, as of the snapshot.
    pub fn iter(&self) -> DbIterator {
        self.inner().iter(
            DEFAULT_ID,
            Bound::Unbounded,
            Bound::Unbounded,
            None,
            Some(self.seq()),
        )
    }

    /// A [`Cursor`] over every pair the snapshot sees.
    pub fn cursor(&self) -> Cursor {
        self.inner().cursor(
            DEFAULT_ID,
            Bound::Unbounded,
            Bound::Unbounded,
            Some(self.seq()),
        )
    }

    /// A [`Cursor`] over the pairs the snapshot sees with keys in `range`.
    pub fn cursor_over<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(&self, range: R) -> Cursor {
        let (lower, upper) = super::byte_bounds(&range);
        self.inner()
            .cursor(DEFAULT_ID, lower, upper, Some(self.seq()))
    }

    /// Pairs with keys in `range`, in key order, as of the snapshot (see [`crate::Db::range`]).
    pub fn range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(&self, range: R) -> DbIterator {
        let (start, end) = super::byte_bounds(&range);
        self.inner().iter(
            DEFAULT_ID,
            start,
            end.map(<[u8]>::to_vec),
            None,
            Some(self.seq()),
        )
    }

    /// Pairs whose key starts with `prefix`, in key order, as of the snapshot.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        let prefix = prefix.as_ref();
        let start = Bound::Included(prefix);
        self.inner().iter(
            DEFAULT_ID,
            start,
            Bound::Unbounded,
            Some(prefix.to_vec()),
            Some(self.seq()),
        )
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("seq", &self.seq())
            .finish()
    }
}
