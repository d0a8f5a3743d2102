//! The handles a user reads and writes a keyspace through ([`Keyspace`], [`KeyspaceView`]),
//! and the batch operations that name one. What a keyspace is (its number, options and
//! definition) is `crate::keyspace`, below the store.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use super::snapshot::SnapshotHold;
use super::transaction::Mismatch;
use super::{byte_bounds, Db};
use crate::cursor::Cursor;
use crate::entry::{SeqNo, ValueKind};
use crate::error::Result;
use crate::iter::DbIterator;
use crate::keyspace::{KeyspaceDef, KeyspaceId, KeyspaceOptions};
use crate::options::WriteOptions;
use crate::write_batch::WriteBatch;

impl WriteBatch {
    /// Sets `key` to `value` in `keyspace`. A batch written to a store other than the one
    /// `keyspace` belongs to fails, unless that store has a keyspace of the same number.
    pub fn put_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.push(
            ValueKind::Value,
            keyspace.id(),
            key.as_ref(),
            value.as_ref(),
        )
    }

    /// Deletes `key` from `keyspace`.
    pub fn delete_in(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> &mut Self {
        self.push(ValueKind::Tombstone, keyspace.id(), key.as_ref(), &[])
    }

    /// Deletes every key from `start` (included) to `end` (excluded) in `keyspace` (see
    /// [`Db::delete_range`]).
    pub fn delete_range_in(
        &mut self,
        keyspace: &Keyspace,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> &mut Self {
        self.push_range(keyspace.id(), start.as_ref(), end.as_ref())
    }
}

/// A keyspace of an open store, got from [`Db::keyspace`]: reads and writes of its own keys,
/// apart from every other keyspace's. Its reads are those of a [`KeyspaceView`] of the
/// present, which it dereferences to. Once the keyspace is dropped, every read and write
/// through it fails with [`Error::NoSuchKeyspace`](crate::Error::NoSuchKeyspace).
///
/// Cloning it is cheap; it owns a handle of the store, which stays open while it lives, so it
/// can be kept in a struct or moved into another thread or task.
#[derive(Clone)]
pub struct Keyspace {
    view: KeyspaceView,
}

impl Keyspace {
    pub(crate) fn new(db: &Db, def: Arc<KeyspaceDef>) -> Keyspace {
        Keyspace {
            view: KeyspaceView {
                db: db.clone(),
                def,
                at: None,
            },
        }
    }

    /// The store the keyspace belongs to.
    fn db(&self) -> &Db {
        &self.view.db
    }

    /// The keyspace's number in `db`'s store; `NoSuchKeyspace` when it is a keyspace of
    /// another store, whose numbers mean other keyspaces here.
    pub(crate) fn id_in(&self, db: &Db) -> Result<KeyspaceId> {
        match Arc::ptr_eq(&self.view.db.inner, &db.inner) {
            true => Ok(self.id()),
            false => Err(crate::Error::NoSuchKeyspace {
                name: format!("{} (a keyspace of another store)", self.name()),
            }),
        }
    }

    pub(crate) fn id(&self) -> KeyspaceId {
        self.view.def.id
    }

    /// Sets `key` to `value` in this keyspace (not synced: see [`WriteOptions`]).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_in(self, key, value);
        self.db().write(batch)
    }

    /// Deletes `key` from this keyspace (not synced).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_in(self, key);
        self.db().write(batch)
    }

    /// Deletes every key from `start` (included) to `end` (excluded) in this keyspace, as one
    /// write (see [`Db::delete_range`]).
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range_in(self, start, end);
        self.db().write(batch)
    }

    /// Sets `key` to `value` with `options` (synced when they say so).
    pub fn put_opt(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: &WriteOptions,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_in(self, key, value);
        self.db().write_opt(batch, options)
    }

    /// Sets `key` to `new` (`None`: deletes it) only if it holds `expected` (`None`: absent):
    /// [`Db::compare_and_swap`] in this keyspace.
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<std::result::Result<(), Mismatch>> {
        let options = WriteOptions::default();
        (self.db()).swap(self.id(), key.as_ref(), expected, new, &options)
    }

    /// [`compare_and_swap`](Self::compare_and_swap) with write options (synced when they say
    /// so).
    pub fn compare_and_swap_opt(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        options: &WriteOptions,
    ) -> Result<std::result::Result<(), Mismatch>> {
        (self.db()).swap(self.id(), key.as_ref(), expected, new, options)
    }
}

impl std::ops::Deref for Keyspace {
    type Target = KeyspaceView;

    fn deref(&self) -> &KeyspaceView {
        &self.view
    }
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.view.def.name)
            .finish_non_exhaustive()
    }
}

/// The reads of one keyspace: of the present (a [`Keyspace`] dereferences to one), or of a
/// snapshot's moment ([`Snapshot::keyspace`](crate::Snapshot::keyspace)). A snapshot's view
/// holds the snapshot's versions, and the store, as long as it lives.
#[derive(Clone)]
pub struct KeyspaceView {
    db: Db,
    def: Arc<KeyspaceDef>,
    /// The snapshot read at; `None` reads the present.
    at: Option<Arc<SnapshotHold>>,
}

impl KeyspaceView {
    pub(crate) fn at(snapshot: &Arc<SnapshotHold>, def: Arc<KeyspaceDef>) -> KeyspaceView {
        KeyspaceView {
            db: snapshot.db().clone(),
            def,
            at: Some(Arc::clone(snapshot)),
        }
    }

    /// The sequence number read at; `None`: the present.
    fn seq(&self) -> Option<SeqNo> {
        self.at.as_ref().map(|hold| hold.seq())
    }

    fn inner(&self) -> &super::Inner {
        &self.db.inner
    }

    pub(crate) fn def(&self) -> &Arc<KeyspaceDef> {
        &self.def
    }

    /// The keyspace's name.
    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The options the keyspace's tables are written with: the store's, with the keyspace's
    /// own applied.
    pub fn options(&self) -> KeyspaceOptions {
        let o = &self.def.options;
        KeyspaceOptions {
            filter_policy: Some(o.policy()),
            compression: Some(o.compression),
            bottom_compression: Some(o.compression_at(true)),
            block_size: Some(o.block_size),
            memtable_size: Some(o.memtable_size),
            ttl: o.ttl,
        }
    }

    /// The value of `key`, or `None` when it is absent or deleted.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner().get(self.def.id, key.as_ref(), self.seq())
    }

    /// [`get`](Self::get) without a copy (see [`Db::get_pinned`]).
    pub fn get_pinned(&self, key: impl AsRef<[u8]>) -> Result<Option<crate::Value>> {
        self.inner()
            .get_pinned(self.def.id, key.as_ref(), self.seq())
    }

    /// The values of `keys`, in their order, all read at one moment (see [`Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner().multi_get(self.def.id, keys, self.seq())
    }

    /// Whether `key` holds a value, without copying the value out.
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.inner()
            .contains_key(self.def.id, key.as_ref(), self.seq())
    }

    /// `false` when `key` is surely absent from the keyspace now; `true` when it may be
    /// present (see [`Db::may_contain`]).
    pub fn may_contain(&self, key: impl AsRef<[u8]>) -> bool {
        let key = key.as_ref();
        crate::entry::check_key_len(key).is_ok() && self.inner().may_contain(self.def.id, key)
    }

    /// `false` when no key of the keyspace starts with `prefix` now; `true` when one may (see
    /// [`Db::may_contain_prefix`]).
    pub fn may_contain_prefix(&self, prefix: impl AsRef<[u8]>) -> bool {
        self.inner()
            .may_contain_prefix(self.def.id, prefix.as_ref())
    }

    /// Every pair of the keyspace in key order.
    pub fn iter(&self) -> DbIterator {
        self.inner().iter(
            self.def.id,
            Bound::Unbounded,
            Bound::Unbounded,
            None,
            self.seq(),
        )
    }

    /// Pairs with keys in `range`, in key order (takes what [`Db::range`] takes).
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIterator {
        let (start, end) = byte_bounds(&range);
        let end = end.map(<[u8]>::to_vec);
        self.inner().iter(self.def.id, start, end, None, self.seq())
    }

    /// Pairs whose key starts with `prefix`, in key order.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        let prefix = prefix.as_ref();
        let start = Bound::Included(prefix);
        let prefix = Some(prefix.to_vec());
        self.inner()
            .iter(self.def.id, start, Bound::Unbounded, prefix, self.seq())
    }

    /// A [`Cursor`] over the keyspace's pairs.
    pub fn cursor(&self) -> Cursor {
        self.inner()
            .cursor(self.def.id, Bound::Unbounded, Bound::Unbounded, self.seq())
    }

    /// A [`Cursor`] over the keyspace's pairs with keys in `range`.
    pub fn cursor_over<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Cursor {
        let (lower, upper) = byte_bounds(&range);
        self.inner().cursor(self.def.id, lower, upper, self.seq())
    }
}

impl std::fmt::Debug for KeyspaceView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyspaceView")
            .field("name", &self.def.name)
            .field("at", &self.seq())
            .finish_non_exhaustive()
    }
}
