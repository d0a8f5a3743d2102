//! A full check of a table file: every block read and checksummed, every entry decoded, and
//! the whole checked against the index, the filter and the properties.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use super::filter::prefix::{PrefixAnswer, TablePrefixFilter};
use super::format::BlockKind;
use super::index::block_index::IndexEntry;
use super::index::table_index::TableIndex;
use super::properties::TableProperties;
use super::table::Table;
use crate::entry::{entry_order, SeqNo, ValueKind};
use crate::error::{Error, Result};
use crate::filter::KeyHash;
use crate::fs::SharedFs;
use crate::metrics::ReadCounters;
use crate::prefix::PrefixExtractor;

/// Reads and checks every block of the table at `path`. On damage the error names the file
/// and the offset of the bad block.
pub fn verify_table(fs: SharedFs, path: &Path) -> Result<TableProperties> {
    let table = Table::open(Arc::clone(&fs), path, Arc::new(ReadCounters::new()))?;
    let inner = &table.inner;
    let props = &inner.properties;

    let prefix_check = PrefixCheck::of(&fs, path, &table)?;
    let mut prev: Option<(Vec<u8>, SeqNo)> = None;
    let (mut entries, mut tombstones, mut distinct) = (0u64, 0u64, 0u64);
    let (mut raw_key_bytes, mut raw_value_bytes) = (0u64, 0u64);
    let (mut smallest_seq, mut largest_seq) = (SeqNo::MAX, 0);
    let mut smallest_key: Option<Vec<u8>> = None;

    // The separator of the block before, until the next block's first entry is checked to
    // sort after it.
    let mut prev_separator: Option<IndexEntry> = None;
    let partitions = inner.index.partitions();
    let separators = (0..partitions).map(|p| inner.index_partition_entries(p));
    let separators = separators
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .flatten();
    for (i, separator) in separators.enumerate() {
        let offset = separator.handle.offset;
        let bad = |reason: String| {
            Error::corruption(
                path,
                Some(offset),
                format!("data block {i} at offset {offset}: {reason}"),
            )
        };
        let mut it = inner.read_data_block(separator.handle)?;
        let mut in_block = 0u64;
        while let Some(e) = it
            .next_entry()
            .map_err(|m| m.in_block(path, BlockKind::Data, offset))?
        {
            let new_key = match &prev {
                Some((pk, ps)) => {
                    if entry_order(&e.key, e.seq, pk, *ps) != Ordering::Greater {
                        return Err(bad(
                            "first entry does not sort after the previous block".into()
                        ));
                    }
                    let sep = prev_separator.take();
                    if sep.is_some_and(|s| entry_order(&s.key, s.seq, &e.key, e.seq).is_ge()) {
                        return Err(bad(
                            "first entry does not sort after the previous block's separator".into(),
                        ));
                    }
                    e.key != *pk
                }
                None => true,
            };
            if new_key {
                distinct += 1;
                if table.filter_units() > 0 && !table.may_contain(&e.key, &KeyHash::of(&e.key)) {
                    let at = inner.filter_handle.map_or(offset, |h| h.offset);
                    return Err(Error::corruption(
                        path,
                        Some(at),
                        format!(
                            "filter block at offset {at} does not hold a key of data block {i}"
                        ),
                    ));
                }
                if let Some(missing) = prefix_check.as_ref().and_then(|c| c.missing(&e.key)) {
                    return Err(Error::corruption(
                        path,
                        Some(missing),
                        format!(
                            "prefix filter block at offset {missing} does not hold the prefix \
                             of a key of data block {i}"
                        ),
                    ));
                }
            }
            if smallest_key.is_none() {
                smallest_key = Some(e.key.clone());
            }
            entries += 1;
            in_block += 1;
            if e.kind == ValueKind::Tombstone {
                tombstones += 1;
            }
            raw_key_bytes += e.key.len() as u64;
            raw_value_bytes += e.value.len() as u64;
            smallest_seq = smallest_seq.min(e.seq);
            largest_seq = largest_seq.max(e.seq);
            prev = Some((e.key, e.seq));
        }
        if in_block == 0 {
            return Err(bad("block holds no entries".into()));
        }
        if let Some((last_key, last_seq)) = &prev {
            if !separator_fits(&inner.index, last_key, *last_seq, &separator) {
                return Err(bad("last entry does not fit the index's separator".into()));
            }
        }
        prev_separator = Some(separator);
    }

    if entries == 0 {
        smallest_seq = 0;
    }
    let counted = (
        entries,
        tombstones,
        distinct,
        raw_key_bytes,
        raw_value_bytes,
        smallest_seq,
        largest_seq,
    );
    let recorded = (
        props.entries,
        props.tombstones,
        props.distinct_keys,
        props.raw_key_bytes,
        props.raw_value_bytes,
        props.smallest_seq,
        props.largest_seq,
    );
    let smallest_key = smallest_key.unwrap_or_default();
    let largest_key = prev.map(|(k, _)| k).unwrap_or_default();
    if counted != recorded || smallest_key != props.smallest_key || largest_key != props.largest_key
    {
        let at = props.data_size + props.filter_size_bytes;
        return Err(Error::corruption(
            path,
            Some(at),
            format!(
                "properties block at offset {at} disagrees with the data: recorded (entries, tombstones, \
                 distinct keys, key bytes, value bytes, smallest seq, largest seq) = {recorded:?}, \
                 counted {counted:?}, or the smallest/largest keys differ"
            ),
        ));
    }
    Ok(props.clone())
}

/// Whether a block's last entry `(key, seq)` agrees with its separator: it is the separator
/// in an index of exact separators (format versions 1 and 2), and at or before it in a
/// shortened one.
fn separator_fits(index: &TableIndex, key: &[u8], seq: SeqNo, separator: &IndexEntry) -> bool {
    let order = entry_order(key, seq, &separator.key, separator.seq);
    if index.separators_are_exact() {
        order.is_eq()
    } else {
        order.is_le()
    }
}

/// A table's prefix filter, read and checked, and when its extractor is one this build can
/// rebuild from its name (a fixed length or a delimiter; a user function is known only to the
/// store that has it), checked to hold the prefix of every key.
struct PrefixCheck {
    extractor: Option<PrefixExtractor>,
    filter: TablePrefixFilter,
    offset: u64,
}

impl PrefixCheck {
    /// The check of the table at `path`, read as `table`: its prefix filter is read here,
    /// as a reader of the table on its own has no extractor and leaves it unread.
    fn of(fs: &SharedFs, path: &Path, table: &Table) -> Result<Option<PrefixCheck>> {
        let Some(props) = table.inner.properties.prefix_filter.as_ref() else {
            return Ok(None);
        };
        let file = fs.open_read(path)?;
        Ok(Some(PrefixCheck {
            extractor: PrefixExtractor::from_builtin_name(&props.extractor),
            filter: TablePrefixFilter::read(file.as_ref(), path, props)?,
            offset: props.handle.offset,
        }))
    }

    /// The prefix filter's offset, when it misses `key`'s prefix.
    fn missing(&self, key: &[u8]) -> Option<u64> {
        let prefix = self.extractor.as_ref()?.prefix(key)?;
        let answer = self.filter.answer(&KeyHash::of(prefix));
        (answer == PrefixAnswer::Absent).then_some(self.offset)
    }
}
