//! A table's filters, by role: the whole-table filter block ([`block`]); a filter as units
//! the store's filter memory keeps apart, whole or partitioned ([`partitions`]); one unit as a
//! reader holds it, in either layout ([`unit`]); the prefix filter ([`prefix`]); how much of each unit a reader
//! holds ([`residency`]); the table's filter as lookups ask it ([`table_filter`]); and the lookups counted per unit for the
//! store's filter memory ([`lookup_counts`]). The Bloom filters themselves are the
//! crate's `filter` library, which knows nothing of tables.

pub(in crate::sstable) mod block;
pub(in crate::sstable) mod lookup_counts;
pub(in crate::sstable) mod partitions;
pub(in crate::sstable) mod prefix;
pub(in crate::sstable) mod residency;
pub(in crate::sstable) mod table_filter;
pub(in crate::sstable) mod unit;
