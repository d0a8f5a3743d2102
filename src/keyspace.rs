//! Keyspaces: named trees in one store. Each has its own memtable, its own tables and levels,
//! and its own filter policy, compression, block size and memtable size; all of them share the
//! store's one WAL, its block and table caches, its background threads and its sequence
//! numbers, so a [`WriteBatch`](crate::WriteBatch) that spans keyspaces is atomic, and a
//! snapshot sees every keyspace at one moment.
//!
//! A store always has the default keyspace (named [`DEFAULT_KEYSPACE`]): what `Db::put`,
//! `Db::get` and the other methods of `Db` read and write. A store made before keyspaces opens
//! as a store whose one keyspace is the default.

use std::ops::{Bound, RangeBounds};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::cursor::Cursor;
use crate::db::{byte_bounds, Db, Inner};
use crate::entry::SeqNo;
use crate::error::{Error, Result};
use crate::iter::DbIterator;
use crate::options::{Options, WriteOptions};
use crate::sstable::{Compression, FilterPolicy};
use crate::write_batch::WriteBatch;

/// The name of the keyspace every store has, which `Db`'s own reads and writes use.
pub const DEFAULT_KEYSPACE: &str = "default";

/// A keyspace's number: what WAL records and the manifest name it by. Never reused, so a log
/// record of a dropped keyspace can never reach a later one.
pub(crate) type KeyspaceId = u32;

/// The default keyspace's number.
pub(crate) const DEFAULT_ID: KeyspaceId = 0;

/// What a snapshot of the manifest records as the next keyspace number: nothing while the
/// store never made a keyspace, so that its manifest stays one an older bloomkv reads.
pub(crate) fn recorded_next(next: KeyspaceId) -> Option<KeyspaceId> {
    (next > DEFAULT_ID + 1).then_some(next)
}

/// The longest name a keyspace may have, in bytes.
pub const MAX_KEYSPACE_NAME_LEN: usize = 255;

/// How a keyspace differs from the store's [`Options`]: each field left `None` follows the
/// store's (for the filter policy, the one the store writes with). A keyspace records the
/// options it was created with, and opening it again with an option set records the new
/// value, which the tables written from then on take (as [`Options::filter_policy`] does for
/// the store).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct KeyspaceOptions {
    /// The filter policy of the keyspace's tables.
    pub filter_policy: Option<FilterPolicy>,
    /// How the keyspace's blocks are compressed.
    pub compression: Option<Compression>,
    /// Target size of the keyspace's data blocks.
    pub block_size: Option<usize>,
    /// The keyspace's memtable is frozen once it holds about this many bytes. Every
    /// keyspace's memtable is frozen with it (see `docs/design.md`, "Keyspaces").
    pub memtable_size: Option<usize>,
}

impl KeyspaceOptions {
    /// Options that follow the store's in everything.
    pub fn new() -> KeyspaceOptions {
        KeyspaceOptions::default()
    }

    /// Sets the keyspace's filter policy.
    pub fn filter_policy(mut self, policy: FilterPolicy) -> Self {
        self.filter_policy = Some(policy);
        self
    }

    /// Sets the keyspace's compression.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = Some(compression);
        self
    }

    /// Sets the keyspace's data block size.
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = Some(bytes);
        self
    }

    /// Sets the keyspace's memtable size.
    pub fn memtable_size(mut self, bytes: usize) -> Self {
        self.memtable_size = Some(bytes);
        self
    }

    /// These options with every field `newer` sets taken from it.
    pub(crate) fn updated_by(&self, newer: &KeyspaceOptions) -> KeyspaceOptions {
        KeyspaceOptions {
            filter_policy: newer.filter_policy.or(self.filter_policy),
            compression: newer.compression.or(self.compression),
            block_size: newer.block_size.or(self.block_size),
            memtable_size: newer.memtable_size.or(self.memtable_size),
        }
    }

    /// The options a keyspace's tables and memtable take: the store's, with these applied.
    pub(crate) fn applied_to(&self, store: &Options) -> Options {
        let mut options = store.clone();
        if let Some(policy) = self.filter_policy {
            options.filter_policy = policy;
        }
        if let Some(compression) = self.compression {
            options.compression = compression;
        }
        if let Some(bytes) = self.block_size {
            options.block_size = bytes;
        }
        if let Some(bytes) = self.memtable_size {
            options.memtable_size = bytes;
        }
        options
    }

    /// Checks the options as the store's own are checked.
    pub(crate) fn validate(&self, store: &Options) -> Result<()> {
        self.applied_to(store).validate()
    }
}

/// Checks a keyspace's name: 1 to [`MAX_KEYSPACE_NAME_LEN`] bytes.
pub(crate) fn check_name(name: &str) -> Result<()> {
    match name.len() {
        0 => Err(Error::InvalidArgument("a keyspace needs a name".into())),
        n if n > MAX_KEYSPACE_NAME_LEN => Err(Error::InvalidArgument(format!(
            "keyspace name of {n} bytes (at most {MAX_KEYSPACE_NAME_LEN})"
        ))),
        _ => Ok(()),
    }
}

/// What the store knows of one live keyspace.
pub(crate) struct KeyspaceDef {
    pub id: KeyspaceId,
    pub name: String,
    /// The options the keyspace recorded (`None` fields follow the store).
    pub given: KeyspaceOptions,
    /// The store's options with `given` applied: what its tables and memtable take.
    pub options: Options,
    /// Point lookups that reached the keyspace's tables while its level 0 held some, since
    /// a memtable was last frozen (`db::level0_at_rest`).
    pub level0_lookups: AtomicU64,
}

impl KeyspaceDef {
    /// The default keyspace, which follows the store's options.
    pub fn default_of(store: &Options) -> KeyspaceDef {
        KeyspaceDef {
            id: DEFAULT_ID,
            name: DEFAULT_KEYSPACE.to_string(),
            given: KeyspaceOptions::default(),
            options: store.clone(),
            level0_lookups: AtomicU64::new(0),
        }
    }

    /// An empty memtable for the keyspace's writes logged in WAL `log_number`: of its size,
    /// with a prefix filter when the store has an extractor.
    pub(crate) fn new_memtable(
        &self,
        log_number: u64,
    ) -> std::sync::Arc<crate::memtable::MemTable> {
        std::sync::Arc::new(crate::memtable::MemTable::with_prefixes(
            log_number,
            self.options.memtable_size,
            self.options.prefix_extractor.clone(),
        ))
    }

    /// A keyspace other than the default, as the manifest records it.
    pub fn recorded(id: KeyspaceId, name: String, given: KeyspaceOptions, store: &Options) -> Self {
        KeyspaceDef {
            id,
            name,
            given,
            options: given.applied_to(store),
            level0_lookups: AtomicU64::new(0),
        }
    }
}

/// A keyspace of an open store, got from [`Db::keyspace`]: reads and writes of its own keys,
/// apart from every other keyspace's. Its reads are those of a [`KeyspaceView`] of the
/// present, which it dereferences to. Once the keyspace is dropped, every read and write
/// through it fails with [`Error::NoSuchKeyspace`].
pub struct Keyspace<'db> {
    db: &'db Db,
    view: KeyspaceView<'db>,
}

impl<'db> Keyspace<'db> {
    pub(crate) fn new(db: &'db Db, def: Arc<KeyspaceDef>) -> Keyspace<'db> {
        Keyspace {
            db,
            view: KeyspaceView {
                inner: db.inner(),
                def,
                at: None,
            },
        }
    }

    pub(crate) fn id(&self) -> KeyspaceId {
        self.view.def.id
    }

    /// Sets `key` to `value` in this keyspace (not synced: see [`WriteOptions`]).
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_in(self, key, value);
        self.db.write(batch)
    }

    /// Deletes `key` from this keyspace (not synced).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_in(self, key);
        self.db.write(batch)
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
        self.db.write_opt(batch, options)
    }
}

impl<'db> std::ops::Deref for Keyspace<'db> {
    type Target = KeyspaceView<'db>;

    fn deref(&self) -> &KeyspaceView<'db> {
        &self.view
    }
}

impl std::fmt::Debug for Keyspace<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.view.def.name)
            .finish_non_exhaustive()
    }
}

/// The reads of one keyspace: of the present (a [`Keyspace`] dereferences to one), or of a
/// snapshot's moment ([`Snapshot::keyspace`](crate::Snapshot::keyspace)).
pub struct KeyspaceView<'a> {
    inner: &'a Inner,
    def: Arc<KeyspaceDef>,
    /// The snapshot's sequence number; `None` reads the present.
    at: Option<SeqNo>,
}

impl<'a> KeyspaceView<'a> {
    pub(crate) fn at(inner: &'a Inner, def: Arc<KeyspaceDef>, seq: SeqNo) -> KeyspaceView<'a> {
        KeyspaceView {
            inner,
            def,
            at: Some(seq),
        }
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
            filter_policy: Some(o.filter_policy),
            compression: Some(o.compression),
            block_size: Some(o.block_size),
            memtable_size: Some(o.memtable_size),
        }
    }

    /// The value of `key`, or `None` when it is absent or deleted.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner.get(self.def.id, key.as_ref(), self.at)
    }

    /// [`get`](Self::get) without a copy (see [`Db::get_pinned`]).
    pub fn get_pinned(&self, key: impl AsRef<[u8]>) -> Result<Option<crate::Value>> {
        self.inner.get_pinned(self.def.id, key.as_ref(), self.at)
    }

    /// The values of `keys`, in their order, all read at one moment (see [`Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.multi_get(self.def.id, keys, self.at)
    }

    /// Whether `key` holds a value, without copying the value out.
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.inner.contains_key(self.def.id, key.as_ref(), self.at)
    }

    /// `false` when `key` is surely absent from the keyspace now; `true` when it may be
    /// present (see [`Db::may_contain`]).
    pub fn may_contain(&self, key: impl AsRef<[u8]>) -> bool {
        let key = key.as_ref();
        crate::entry::check_key_len(key).is_ok() && self.inner.may_contain(self.def.id, key)
    }

    /// `false` when no key of the keyspace starts with `prefix` now; `true` when one may (see
    /// [`Db::may_contain_prefix`]).
    pub fn may_contain_prefix(&self, prefix: impl AsRef<[u8]>) -> bool {
        self.inner.may_contain_prefix(self.def.id, prefix.as_ref())
    }

    /// Every pair of the keyspace in key order.
    pub fn iter(&self) -> DbIterator {
        (self.inner).iter(
            self.def.id,
            Bound::Unbounded,
            Bound::Unbounded,
            None,
            self.at,
        )
    }

    /// Pairs with keys in `range`, in key order (takes what [`Db::range`] takes).
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIterator {
        let (start, end) = byte_bounds(&range);
        let end = end.map(<[u8]>::to_vec);
        self.inner.iter(self.def.id, start, end, None, self.at)
    }

    /// Pairs whose key starts with `prefix`, in key order.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        let prefix = prefix.as_ref();
        let start = Bound::Included(prefix);
        let prefix = Some(prefix.to_vec());
        (self.inner).iter(self.def.id, start, Bound::Unbounded, prefix, self.at)
    }

    /// A [`Cursor`] over the keyspace's pairs.
    pub fn cursor(&self) -> Cursor {
        (self.inner).cursor(self.def.id, Bound::Unbounded, Bound::Unbounded, self.at)
    }

    /// A [`Cursor`] over the keyspace's pairs with keys in `range`.
    pub fn cursor_over<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Cursor {
        let (lower, upper) = byte_bounds(&range);
        self.inner.cursor(self.def.id, lower, upper, self.at)
    }
}

impl std::fmt::Debug for KeyspaceView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyspaceView")
            .field("name", &self.def.name)
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}
