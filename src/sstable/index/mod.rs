//! A table's index, by role: the in-memory form of an index block ([`block_index`]), written
//! by [`builder`]; the older format versions' block, re-encoded at open ([`v2`]); the top
//! level of a two-level index over partitions read on demand ([`top`]); and the index as
//! lookups and scans use it, whichever of these a table has ([`table_index`]).

pub(in crate::sstable) mod block_index;
pub(in crate::sstable) mod builder;
pub(in crate::sstable) mod table_index;
pub(in crate::sstable) mod top;
pub(in crate::sstable) mod v2;
