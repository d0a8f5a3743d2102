//! A table's filters, by role: the whole-table filter block ([`block`]); a filter as units
//! the store's filter memory keeps apart, whole or partitioned ([`partitions`]); one unit as a
//! reader holds it, in either layout ([`unit`]); the prefix filter ([`prefix`]); and the
//! table's filter as lookups ask it ([`table_filter`]). The Bloom filters themselves are the
//! crate's `filter` library, which knows nothing of tables.

pub(in crate::sstable) mod block;
pub(in crate::sstable) mod partitions;
pub(in crate::sstable) mod prefix;
pub(in crate::sstable) mod table_filter;
pub(in crate::sstable) mod unit;
