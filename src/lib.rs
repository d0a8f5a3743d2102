//! bloomkv: an embeddable LSM-tree key-value store whose immutable tables each carry a Bloom
//! filter, so that a lookup of a key a table does not hold costs a few memory probes instead of
//! a disk read.
//!
//! The crate is layered so that each layer can be read on its own:
//! - [`filter`]: a standalone Bloom filter library (it knows nothing of tables).
//! - [`sstable`]: the immutable sorted table file, with its filter block.
//! - the store itself: WAL, memtable, manifest, versions, compaction.

pub mod entry;
pub mod error;
pub mod filter;
pub mod fs;
pub mod metrics;
pub mod sstable;

pub use error::{Error, Result};
pub use sstable::FilterPolicy;
