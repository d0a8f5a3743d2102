//! Keyspaces: named trees in one store. Each has its own memtable, its own tables and levels,
//! and its own filter policy, compression, block size and memtable size; all of them share the
//! store's one WAL, its block and table caches, its background threads and its sequence
//! numbers, so a [`WriteBatch`](crate::WriteBatch) that spans keyspaces is atomic, and a
//! snapshot sees every keyspace at one moment.
//!
//! A store always has the default keyspace (named [`DEFAULT_KEYSPACE`]): what `Db::put`,
//! `Db::get` and the other methods of `Db` read and write. A store made before keyspaces opens
//! as a store whose one keyspace is the default.

use std::sync::atomic::AtomicU64;

use crate::error::{Error, Result};
use crate::options::Options;
use crate::sstable::{Compression, FilterPolicy};

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
    /// How the keyspace's blocks are compressed; set, it is the bottom's too unless
    /// `bottom_compression` is.
    pub compression: Option<Compression>,
    /// How the blocks of the keyspace's tables at the bottom of its tree are compressed (see
    /// [`Options::bottom_compression`]).
    pub bottom_compression: Option<Compression>,
    /// Target size of the keyspace's data blocks.
    pub block_size: Option<usize>,
    /// The keyspace's memtable is frozen once it holds about this many bytes. Every
    /// keyspace's memtable is frozen with it (see the repository's design notes, "Keyspaces").
    pub memtable_size: Option<usize>,
    /// How long the keyspace's entries live (see [`Options::ttl`], which is the default
    /// keyspace's alone). `None`: they live until deleted. Once recorded, a time to live can
    /// be changed at an open, not taken away.
    pub ttl: Option<std::time::Duration>,
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

    /// Sets the compression of the keyspace's tables at the bottom of its tree.
    pub fn bottom_compression(mut self, compression: Compression) -> Self {
        self.bottom_compression = Some(compression);
        self
    }

    /// Sets the keyspace's data block size.
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = Some(bytes);
        self
    }

    /// Sets how long the keyspace's entries live, in whole seconds (see [`Options::ttl`]).
    pub fn ttl(mut self, ttl: std::time::Duration) -> Self {
        self.ttl = Some(ttl);
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
            bottom_compression: newer.bottom_compression.or(self.bottom_compression),
            block_size: newer.block_size.or(self.block_size),
            memtable_size: newer.memtable_size.or(self.memtable_size),
            ttl: newer.ttl.or(self.ttl),
        }
    }

    /// The options a keyspace's tables and memtable take: the store's, with these applied.
    pub(crate) fn applied_to(&self, store: &Options) -> Options {
        let mut options = store.clone();
        if let Some(policy) = self.filter_policy {
            options.filter_policy = Some(policy);
        }
        if let Some(compression) = self.compression {
            options.compression = compression;
            options.bottom_compression = None;
        }
        if let Some(bottom) = self.bottom_compression {
            options.bottom_compression = Some(bottom);
        }
        if let Some(bytes) = self.block_size {
            options.block_size = bytes;
        }
        if let Some(bytes) = self.memtable_size {
            options.memtable_size = bytes;
        }
        // The store's time to live is the default keyspace's alone.
        options.ttl = self.ttl;
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
