//! A table's prefix filter: one Bloom filter over the distinct prefixes of its keys
//! (`docs/format.md`, "Prefix filter block"), read when the table opens and held whole for
//! its life, when the store cuts prefixes as the table's writer did (the store reads no
//! other: `Table::open_with`).

use std::path::Path;

use crate::error::{Error, Result};
use crate::filter::KeyHash;
use crate::fs::RandomAccessFile;
use crate::sstable::filter::block as filter_block;
use crate::sstable::filter::unit::{FilterKind, UnitFilter};
use crate::sstable::format::BlockKind;
use crate::sstable::properties::PrefixFilterProperties;
use crate::sstable::table::read_block;

/// A table's prefix filter, read by a store whose extractor has the name the table's writer
/// used: only then do the filter's prefixes mean what the store's scans ask.
#[derive(Debug)]
pub(crate) struct TablePrefixFilter {
    filter: UnitFilter,
}

/// What a prefix filter says of a prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefixAnswer {
    /// No key of the table has the prefix.
    Absent,
    /// Some key of the table may have it.
    Maybe,
    /// The table has no prefix filter the store trusts (or the walk's prefix has none the
    /// extractor cuts): it cannot tell.
    Unknown,
}

impl TablePrefixFilter {
    /// Reads and checks the prefix filter `props` names.
    pub(in crate::sstable) fn read(
        file: &dyn RandomAccessFile,
        path: &Path,
        props: &PrefixFilterProperties,
    ) -> Result<TablePrefixFilter> {
        let handle = props.handle;
        let contents = read_block(file, path, handle, BlockKind::PrefixFilter)?;
        // Held in memory from here on, as a table's key filter is.
        file.wont_need(handle.offset, handle.size_with_trailer());
        let filter = filter_block::decode(path, handle, &contents)?;
        // Prefix filters are written as standard Bloom filters only.
        if filter.kind() != FilterKind::Bloom {
            return Err(Error::corruption(
                path,
                Some(handle.offset),
                format!(
                    "prefix filter block at offset {}: a filter of kind {}",
                    handle.offset,
                    filter.kind().name()
                ),
            ));
        }
        if filter.len() != props.prefixes {
            return Err(Error::corruption(
                path,
                Some(handle.offset),
                format!(
                    "prefix filter block at offset {}: it holds {} prefixes, the properties \
                     say {}",
                    handle.offset,
                    filter.len(),
                    props.prefixes
                ),
            ));
        }
        Ok(TablePrefixFilter { filter })
    }

    /// What the filter says of the prefix whose hash is `hash`.
    pub(crate) fn answer(&self, hash: &KeyHash) -> PrefixAnswer {
        match self.filter.contains_hash(hash) {
            true => PrefixAnswer::Maybe,
            false => PrefixAnswer::Absent,
        }
    }

    /// Bytes the filter holds in memory.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.filter.memory_bytes()
    }

    /// The filter's predicted false-positive rate (the policy's, for its prefixes).
    pub(crate) fn predicted_false_positive_rate(&self) -> f64 {
        self.filter.predicted_false_positive_rate()
    }
}
