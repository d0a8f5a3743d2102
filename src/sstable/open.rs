//! Opening a table file: the footer, then the properties, index, filter and prefix filter
//! blocks, each checked, kept in memory for the table's life.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use super::filter::prefix::TablePrefixFilter;
use super::filter::table_filter::{
    filter_agrees, layout_agrees, read_filter_block, read_filter_layout, HeldUnit,
};
use super::filter::unit::FilterKind;
use super::format::{
    BlockKind, Footer, Malformed, FOOTER_LEN, PREFIX_FILTER_VERSION, TWO_LEVEL_INDEX_VERSION,
};
use super::index::block_index as index;
use super::index::table_index::TableIndex;
use super::index::top::TopIndex;
use super::properties::{PrefixFilterProperties, TableProperties};
use super::table::{read_block, Table, TableEnv, TableInner};
use crate::cache::next_table_id;
use crate::error::{Error, Result};
use crate::fs::{RandomAccessFile, SharedFs};
use crate::metrics::ReadCounters;

impl Table {
    /// Opens a table on its own (no block cache; the file stays open while the table lives).
    pub fn open(fs: SharedFs, path: &Path, counters: Arc<ReadCounters>) -> Result<Table> {
        Table::open_in(path, &TableEnv::standalone(fs, counters))
    }

    /// Opens a table of a store: reads and checks the footer, then the index, filter and
    /// properties blocks (each checksummed), and keeps them in memory. Data blocks are read on
    /// demand, through `env`'s caches.
    pub fn open_in(path: &Path, env: &TableEnv) -> Result<Table> {
        Table::open_with(path, env, true)
    }

    /// As [`open_in`](Self::open_in), but the filter block is not read: the table holds no
    /// filter until [`load_filters`](Self::load_filters) makes a reader with one. A store under
    /// a filter memory limit opens so, decides how much of each filter to keep, and then loads
    /// each one and folds it at once: its filters never all sit whole in memory.
    pub(crate) fn open_deferring_filter(path: &Path, env: &TableEnv) -> Result<Table> {
        Table::open_with(path, env, false)
    }

    fn open_with(path: &Path, env: &TableEnv, read_filter: bool) -> Result<Table> {
        let file = env.fs.open_read(path)?;
        let size = file.size();
        let corrupt = |offset: u64, reason: String| Error::corruption(path, Some(offset), reason);
        let Some(footer_offset) = size.checked_sub(FOOTER_LEN as u64) else {
            return Err(corrupt(
                0,
                format!("file is {size} bytes, shorter than the {FOOTER_LEN}-byte footer"),
            ));
        };
        let footer = Footer::decode(
            path,
            footer_offset,
            &file.read_at(footer_offset, FOOTER_LEN)?,
        )?;

        // The blocks after the data must tile the file exactly:
        // [data blocks][filter][prefix filter][properties][index][footer], where a two-level
        // index is its partitions followed by its top level.
        if footer.index.end() != footer_offset {
            return Err(corrupt(
                footer_offset,
                format!(
                    "index block handle ({}, {}) does not end at the footer ({footer_offset})",
                    footer.index.offset, footer.index.size
                ),
            ));
        }
        // The properties come first: from version 5 they say where the prefix filter is and
        // how many levels the index has. They end before the index's handle at the latest
        // (exactly where the index starts, checked below), so a damaged handle is caught
        // before anything is read by it.
        if (footer.properties.checked_end()).is_none_or(|end| end > footer.index.offset) {
            return Err(corrupt(
                footer_offset,
                format!(
                    "properties block handle ({}, {}) runs past the index ({})",
                    footer.properties.offset, footer.properties.size, footer.index.offset
                ),
            ));
        }
        let props_contents = read_block(
            file.as_ref(),
            path,
            footer.properties,
            BlockKind::Properties,
        )?;
        let mut properties = TableProperties::decode(&props_contents, footer.version)
            .map_err(|m| m.in_block(path, BlockKind::Properties, footer.properties.offset))?;
        let filters_end = match &properties.prefix_filter {
            Some(p) if p.handle.size == 0 || p.handle.end() != footer.properties.offset => {
                return Err(corrupt(
                    footer.properties.offset,
                    format!(
                        "prefix filter block handle ({}, {}) does not end where the properties \
                         block starts",
                        p.handle.offset, p.handle.size
                    ),
                ))
            }
            Some(p) => p.handle.offset,
            None => footer.properties.offset,
        };
        let data_end = match footer.filter {
            Some(f) if f.end() != filters_end => {
                return Err(corrupt(
                    footer_offset,
                    format!(
                        "filter block handle ({}, {}) does not end where the next block starts \
                         ({filters_end})",
                        f.offset, f.size
                    ),
                ))
            }
            Some(f) => f.offset,
            None => filters_end,
        };
        let two_level = match footer.version {
            v if v >= PREFIX_FILTER_VERSION => {
                (properties.prefix_filter.as_ref()).is_some_and(|p| p.two_level_index)
            }
            v => v >= TWO_LEVEL_INDEX_VERSION,
        };
        let index = read_index(file.as_ref(), path, &footer, two_level)?;
        let index_start = match &index {
            TableIndex::Single(_) => footer.index.offset,
            TableIndex::TwoLevel(top) => top.partition(0).offset,
        };
        if footer.properties.end() != index_start {
            return Err(corrupt(
                footer_offset,
                format!(
                    "properties block handle ({}, {}) does not end where the index starts \
                     ({index_start})",
                    footer.properties.offset, footer.properties.size
                ),
            ));
        }
        // The index checked that its blocks tile the file from offset 0; they must end where
        // the next block starts.
        if index.data_end() != data_end {
            return Err(corrupt(
                footer.index.offset,
                format!(
                    "index block at offset {}: data blocks end at {}, but the next block \
                     starts at {data_end}",
                    footer.index.offset,
                    index.data_end()
                ),
            ));
        }

        let (mut filter_layout, filters) = match footer.filter {
            Some(h) if read_filter => {
                let (layout, filters) = read_filter_block(file.as_ref(), path, h)?;
                (Some(layout), Some(filters))
            }
            Some(h) => (Some(read_filter_layout(file.as_ref(), path, h)?), None),
            None => (None, None),
        };

        // A prefix filter the store cannot trust is not read: it would only take memory.
        let trusted = |p: &&PrefixFilterProperties| {
            (env.prefix_extractor.as_ref()).is_some_and(|e| e.name() == p.extractor)
        };
        let prefix_filter = match properties.prefix_filter.as_ref().filter(trusted) {
            Some(p) => Some(TablePrefixFilter::read(file.as_ref(), path, p)?),
            None => None,
        };
        properties.format_version = footer.version;
        properties.filter_size_bytes = footer.filter.map_or(0, |h| h.size_with_trailer());
        properties.properties_size = footer.properties.size_with_trailer();
        properties.index_size = footer_offset - index_start;
        properties.file_size = size;

        // The properties must describe the blocks actually present.
        let props_corrupt = |reason: String| {
            Error::corruption(
                path,
                Some(footer.properties.offset),
                format!(
                    "properties block at offset {} disagrees with the table: {reason}",
                    footer.properties.offset
                ),
            )
        };
        if properties.data_blocks != index.blocks() as u64 || properties.data_size != data_end {
            return Err(props_corrupt(format!(
                "{} data blocks of {} bytes recorded, {} blocks of {data_end} bytes indexed",
                properties.data_blocks,
                properties.data_size,
                index.blocks()
            )));
        }
        if let Some(last) = index.last_separator_key() {
            if !last_separator_fits(&index, &last, &properties.largest_key) {
                return Err(props_corrupt(
                    "largest key does not fit the last index entry".to_string(),
                ));
            }
        }
        if let Some(layout) = &mut filter_layout {
            layout.set_whole_keys(properties.distinct_keys);
            properties.filter_kind = Some(layout.kind());
            // The properties' rate is the standard rule's: a cache-local filter has its own,
            // and a Ribbon filter's header says its own.
            if let Some((bits, hashes, rate)) = &mut properties.filter {
                match (layout.kind(), layout.ribbon_rate()) {
                    (FilterKind::CacheLocalBloom, _) => {
                        *rate = crate::filter::blocked_rate(f64::from(*bits), *hashes)
                    }
                    (FilterKind::Ribbon, Some(ribbon)) => *rate = ribbon,
                    _ => {}
                }
            }
            if layout.is_partitioned() {
                properties.filter_partitions = layout.len() as u64;
            }
        }
        let filter_params = properties.filter_params();
        let agrees = match (&filter_layout, &filters) {
            (None, _) => filter_params.is_none(),
            (Some(layout), None) => layout_agrees(layout, filter_params, &properties),
            (Some(layout), Some(fs)) => {
                layout_agrees(layout, filter_params, &properties)
                    && (layout.units().iter().zip(fs))
                        .all(|(u, f)| filter_agrees(f, filter_params, u.keys))
            }
        };
        if !agrees {
            return Err(props_corrupt(
                "filter parameters or key count differ from the filter block".to_string(),
            ));
        }

        let id = next_table_id();
        env.table_cache.adopt(id, file);
        let deferred = filters.is_none() && filter_layout.is_some();
        let units: Arc<[HeldUnit]> = match (&filter_layout, filters) {
            (_, Some(fs)) => fs.into_iter().map(HeldUnit::whole).collect(),
            (Some(layout), None) => vec![HeldUnit::deferred(); layout.len()].into(),
            (None, None) => Arc::new([]),
        };
        let counted_units = filter_layout.as_ref().map_or(1, |l| l.len());
        let table = Table::with_units(
            Arc::new(TableInner {
                id,
                path: path.to_path_buf(),
                env: env.clone(),
                index,
                data_end,
                filter_handle: footer.filter,
                filter_params,
                filter_layout,
                properties,
                prefix_filter,
                obsolete: AtomicBool::new(false),
                first_unit_lookups: AtomicU64::new(0),
                lookups: (1..counted_units).map(|_| AtomicU64::new(0)).collect(),
            }),
            units,
            deferred,
        );
        table.inner.warm_index_cache();
        Ok(table)
    }
}

/// Reads and checks the index the footer names: one index block, or (`two_level`: format
/// version 4, or 5 when the properties say so) a top-level index, whose partitions are read
/// when lookups need them.
fn read_index(
    file: &dyn RandomAccessFile,
    path: &Path,
    footer: &Footer,
    two_level: bool,
) -> Result<TableIndex> {
    let handle = footer.index;
    if !two_level {
        let contents = read_block(file, path, handle, BlockKind::Index)?;
        let index = index::decode(contents, footer.version)
            .map_err(|m| m.in_block(path, BlockKind::Index, handle.offset))?;
        return Ok(TableIndex::Single(Arc::new(index)));
    }
    let contents = read_block(file, path, handle, BlockKind::TopIndex)?;
    let in_top = |m: Malformed| m.in_block(path, BlockKind::TopIndex, handle.offset);
    let top = TopIndex::decode(&contents, footer.properties.end()).map_err(in_top)?;
    if top.partitions_end() != handle.offset {
        return Err(Error::corruption(
            path,
            Some(handle.offset),
            format!(
                "top-level index block at offset {}: its partitions end at {}",
                handle.offset,
                top.partitions_end()
            ),
        ));
    }
    Ok(TableIndex::TwoLevel(top))
}

/// Whether the last separator agrees with the largest key the properties record: it is that
/// key in an index of exact separators, and at or after it in a shortened one.
fn last_separator_fits(index: &TableIndex, separator: &[u8], largest_key: &[u8]) -> bool {
    if index.separators_are_exact() {
        separator == largest_key
    } else {
        separator >= largest_key
    }
}
