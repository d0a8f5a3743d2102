//! The immutable sorted table file: data blocks of prefix-compressed entries, a Bloom filter
//! over the table's user keys (in the standard or the cache-local layout, [`UnitFilter`]),
//! with a prefix extractor one over their prefixes too, a properties block, an index and a
//! fixed footer.
//! `docs/format.md`, "Table files", gives the layout byte by byte.
//!
//! - [`TableBuilder`] writes a table from entries in entry order.
//! - [`Table`] opens one, keeps its index and filter in memory, and answers point lookups
//!   (asking the filter first) and ordered scans ([`TableIterator`]).
//! - [`verify_table`] reads and checks every block (the prefix filter's too, whatever
//!   extractor wrote it).
//!
//! Blocks may be compressed ([`Compression`], LZ4 by default); the block cache holds them
//! decompressed and parsed.

mod block;
mod block_builder;
mod builder;
mod cached;
mod compression;
mod filter;
mod format;
mod index;
mod iter;
mod open;
mod options;
mod properties;
mod readahead;
mod separator;
mod table;
mod verify;

pub use block::Block;
pub use builder::{temp_path, TableBuilder};
pub use cached::BlockCache;
pub(crate) use cached::IndexCache;
pub use compression::Compression;
pub use filter::block::FOLD_LIMIT as FILTER_FOLD_LIMIT;
pub use filter::prefix::PrefixAnswer;
pub(crate) use filter::table_filter::FilterProbe;
pub use filter::table_filter::FilterResidency;
pub use filter::unit::{FilterKind, UnitFilter};
pub(crate) use format::BlockHandle;
pub use format::{FOOTER_LEN, FORMAT_VERSION, MAGIC, TRAILER_LEN};
pub(crate) use index::block_index::BlockIndex;
pub use iter::{TableBackIterator, TableIterator};
pub use options::{FilterPolicy, TableOptions, MAX_BLOCK_SIZE};
pub use properties::{PrefixFilterProperties, TableProperties};
pub use table::{BlockReads, Table, TableEnv};
pub use verify::verify_table;
