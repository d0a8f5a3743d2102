//! bloomkv: an embeddable LSM-tree key-value store whose immutable tables each carry a Bloom
//! filter, so that a lookup of a key a table does not hold costs a few memory probes instead of
//! a disk read.
//!
//! ```no_run
//! use bloomkv::{Db, Options};
//! let db = Db::open("/tmp/my-store", Options::default())?;
//! db.put(b"hello", b"world")?;
//! assert_eq!(db.get(b"hello")?.as_deref(), Some(&b"world"[..]));
//! # Ok::<(), bloomkv::Error>(())
//! ```
//!
//! # The API
//!
//! - **The store**: [`Db`] opens, reads (`get`, `get_pinned`, `multi_get`, `contains_key`,
//!   `may_contain`), writes (`put`, `delete`, `delete_range`, [`WriteBatch`] through `write`),
//!   scans
//!   ([`DbIterator`] from `iter`, `range`, `prefix`; [`Cursor`], which seeks), and flushes,
//!   compacts, checks, checkpoints ([`Checkpoint`]) and closes. [`Options`] and [`Tuning`]
//!   configure it (entries that expire: `ttl`; a [`CompactionFilter`] of the user's, with
//!   [`FilterInput`] and [`FilterDecision`]), [`WriteOptions`] a write; [`Stats`] reports on it ([`LevelStats`],
//!   [`TableStats`], [`KeyspaceStats`], [`MemoryRole`] and [`RoleMemory`], the caches').
//! - **Handles**, each owned and keeping the store open: [`Keyspace`] (a named tree of its own,
//!   [`KeyspaceOptions`]) and its reads [`KeyspaceView`]; [`Snapshot`]; [`Transaction`] (and
//!   [`TransactionRange`]), optimistic, across keyspaces; compare-and-swap answers a
//!   [`Mismatch`].
//! - **Filters and tables**: [`FilterPolicy`], [`FilterKind`], [`FilterResidency`],
//!   [`Compression`], [`BlockCache`] (shared between stores), [`PrefixExtractor`]; the
//!   [`filter`] module, a filter library of its own.
//! - **Recovery**: [`WalRecoveryMode`], [`RecoveryReport`], [`repair`] ([`RepairReport`],
//!   [`SalvagedTable`]), the offline [`check`]; [`Error`] for every failure.
//! - **The guide**: [`guide`], the API family by family, with what each is for.
//! - **Files**: [`fs`], the file layer a store reads and writes through (the operating
//!   system's, memory-mapped reads, or an in-memory one that injects faults, for tests).
//!
//! Every struct and enum that may grow is `#[non_exhaustive]`: options are built through
//! their builder methods, and matches on enums keep a wildcard arm.
//!
//! # Inside
//!
//! The read path reads top-down: [`Db`] -> `version` (which tables may hold the key) ->
//! `sstable` (filter first, then index, then one data block from the `cache`'s block cache,
//! or from the file the table cache keeps open) -> block. The [`filter`] module is a
//! standalone Bloom filter library and knows nothing of tables.
#![warn(missing_docs)]

#[doc(hidden)]
pub mod cache;
pub mod check;
mod compaction;
mod compaction_filter;
mod cursor;
mod db;
#[doc(hidden)]
pub mod entry;
pub mod error;
#[doc(hidden)]
pub mod filename;
pub mod filter;
mod filter_plan;
pub mod fs;
#[cfg(test)]
mod import_cycles;
mod iter;
pub mod keyspace;
#[doc(hidden)]
pub mod manifest;
#[doc(hidden)]
pub mod memory;
mod memtable;
#[doc(hidden)]
pub mod metrics;
mod options;
pub mod prefix;
#[doc(hidden)]
pub mod range_tombstone;
mod repair;
mod seq_time;
#[doc(hidden)]
pub mod sstable;
mod stats;
mod value;
mod varint;
mod version;
#[doc(hidden)]
pub mod wal;
mod walk;
mod write_batch;

/// The guide to the API: what each family of calls does, in brief.
pub mod guide {
    #![doc = include_str!("../docs/guide.md")]
}

pub use cache::{BlockCacheStats, TableCacheStats};
pub use compaction_filter::{CompactionFilter, FilterDecision, FilterInput};
pub use cursor::Cursor;
pub use db::{
    Checkpoint, Db, DropCause, DroppedWal, Keyspace, KeyspaceView, Mismatch, RecoveryReport,
    Snapshot, Transaction, TransactionRange,
};
pub use error::{Error, Result};
/// The `LOOKUPS` file's codec, for tests and tools that read the file itself.
#[doc(hidden)]
pub use filter_plan::saved as lookup_counts;
pub use iter::DbIterator;
pub use keyspace::{KeyspaceOptions, DEFAULT_KEYSPACE};
pub use memory::{MemoryRole, RoleMemory};
pub use options::{Options, Tuning, WalRecoveryMode, WriteOptions};
pub use prefix::{ExtractPrefix, PrefixExtractor};
pub use repair::{repair, salvage::SalvagedTable, RepairReport};
pub use sstable::{BlockCache, Compression, FilterKind, FilterPolicy, FilterResidency};
pub use stats::{KeyspaceStats, LevelStats, Stats, TableStats};
pub use value::Value;
pub use write_batch::WriteBatch;
