//! Reads a table file: the footer, index, filter and properties once at open, then one
//! positioned read of one data block per lookup that the filter does not rule out.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::block::{Block, BlockIter};
use super::filter_block;
use super::format::{check_block, BlockHandle, BlockKind, Footer, FOOTER_LEN};
use super::index::{self, IndexEntry};
use super::iter::TableIterator;
use super::properties::TableProperties;
use crate::entry::{Entry, SeqNo};
use crate::error::{Error, Result};
use crate::filter::{BloomFilter, FilterParams, KeyHash};
use crate::fs::{RandomAccessFile, SharedFs};
use crate::metrics::{ReadCounters, ReadCountersSnapshot};

/// An open table. Cloning is cheap (the contents are shared); a `Table` can be shared across
/// threads.
#[derive(Clone)]
pub struct Table {
    pub(crate) inner: Arc<TableInner>,
}

pub(crate) struct TableInner {
    pub(crate) path: PathBuf,
    file: Arc<dyn RandomAccessFile>,
    counters: Arc<ReadCounters>,
    pub(crate) index: Vec<IndexEntry>,
    pub(crate) filter: Option<BloomFilter>,
    pub(crate) filter_handle: Option<BlockHandle>,
    filter_params: Option<FilterParams>,
    pub(crate) properties: TableProperties,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.inner.path)
            .field("data_blocks", &self.inner.index.len())
            .field("has_filter", &self.inner.filter.is_some())
            .finish()
    }
}

/// Reads one block (contents and trailer) and checks its trailer.
fn read_block(
    file: &dyn RandomAccessFile,
    path: &Path,
    handle: BlockHandle,
    kind: BlockKind,
) -> Result<Vec<u8>> {
    let len = usize::try_from(handle.size_with_trailer()).map_err(|_| {
        Error::corruption(
            path,
            Some(handle.offset),
            format!(
                "{} block of {} bytes is too large",
                kind.name(),
                handle.size
            ),
        )
    })?;
    let raw = file.read_at(handle.offset, len)?;
    check_block(path, handle, kind, raw)
}

impl Table {
    /// Opens a table: reads and checks the footer, then the index, filter and properties
    /// blocks (each checksummed), and keeps them in memory. Data blocks are read on demand.
    pub fn open(fs: SharedFs, path: &Path, counters: Arc<ReadCounters>) -> Result<Table> {
        let file = fs.open_read(path)?;
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
        // [data blocks][filter][properties][index][footer].
        if footer.index.end() != footer_offset {
            return Err(corrupt(
                footer_offset,
                format!(
                    "index block handle ({}, {}) does not end at the footer ({footer_offset})",
                    footer.index.offset, footer.index.size
                ),
            ));
        }
        if footer.properties.end() != footer.index.offset {
            return Err(corrupt(
                footer_offset,
                format!(
                    "properties block handle ({}, {}) does not end where the index block starts",
                    footer.properties.offset, footer.properties.size
                ),
            ));
        }
        let data_end = match footer.filter {
            Some(f) if f.end() != footer.properties.offset => {
                return Err(corrupt(
                    footer_offset,
                    format!(
                    "filter block handle ({}, {}) does not end where the properties block starts",
                    f.offset, f.size
                ),
                ))
            }
            Some(f) => f.offset,
            None => footer.properties.offset,
        };

        let index_contents = read_block(file.as_ref(), path, footer.index, BlockKind::Index)?;
        let index = index::decode(index_contents)
            .map_err(|m| m.in_block(path, BlockKind::Index, footer.index.offset))?;
        let index_corrupt = |reason: String| {
            Error::corruption(
                path,
                Some(footer.index.offset),
                format!("index block at offset {}: {reason}", footer.index.offset),
            )
        };
        let mut expected = 0u64;
        for (i, e) in index.iter().enumerate() {
            if e.handle.offset != expected {
                return Err(index_corrupt(format!(
                    "data block {i} starts at {}, expected {expected}",
                    e.handle.offset
                )));
            }
            expected = e.handle.end();
        }
        if expected != data_end {
            return Err(index_corrupt(format!(
                "data blocks end at {expected}, but the next block starts at {data_end}"
            )));
        }

        let filter = match footer.filter {
            Some(h) => {
                let contents = read_block(file.as_ref(), path, h, BlockKind::Filter)?;
                Some(filter_block::decode(path, h, &contents)?)
            }
            None => None,
        };

        let props_contents = read_block(
            file.as_ref(),
            path,
            footer.properties,
            BlockKind::Properties,
        )?;
        let mut properties = TableProperties::decode(&props_contents)
            .map_err(|m| m.in_block(path, BlockKind::Properties, footer.properties.offset))?;
        properties.format_version = footer.version;
        properties.filter_size_bytes = footer.filter.map_or(0, |h| h.size_with_trailer());
        properties.properties_size = footer.properties.size_with_trailer();
        properties.index_size = footer.index.size_with_trailer();
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
        if properties.data_blocks != index.len() as u64 || properties.data_size != data_end {
            return Err(props_corrupt(format!(
                "{} data blocks of {} bytes recorded, {} blocks of {data_end} bytes indexed",
                properties.data_blocks,
                properties.data_size,
                index.len()
            )));
        }
        if let Some(last) = index.last() {
            if last.last_key != properties.largest_key {
                return Err(props_corrupt(
                    "largest key differs from the last index entry".to_string(),
                ));
            }
        }
        let filter_params = match (&filter, properties.filter_params()) {
            (None, None) => None,
            (Some(f), Some(p))
                if f.bits_per_key() == p.bits_per_key()
                    && f.hashes() == p.hashes()
                    && f.len() == properties.distinct_keys =>
            {
                Some(p)
            }
            _ => {
                return Err(props_corrupt(
                    "filter parameters or key count differ from the filter block".to_string(),
                ))
            }
        };

        Ok(Table {
            inner: Arc::new(TableInner {
                path: path.to_path_buf(),
                file,
                counters,
                index,
                filter,
                filter_handle: footer.filter,
                filter_params,
                properties,
            }),
        })
    }

    /// The newest entry (value or tombstone) for `key` in this table. `hash` must be
    /// `KeyHash::of(key)`: a store hashes a key once and probes every table with it.
    pub fn get(&self, key: &[u8], hash: &KeyHash) -> Result<Option<Entry>> {
        self.get_at(key, SeqNo::MAX, hash)
    }

    /// The newest entry for `key` whose sequence number is at most `snapshot`.
    pub fn get_at(&self, key: &[u8], snapshot: SeqNo, hash: &KeyHash) -> Result<Option<Entry>> {
        let mut tally = ReadCountersSnapshot::default();
        let found = self.lookup(key, snapshot, hash, &mut tally);
        self.inner.counters.add(&tally);
        found
    }

    /// [`get_at`](Self::get_at), counting into `tally` instead of the shared counters: a
    /// store's lookup visits several tables and adds their tally once. This is the one place
    /// the read counters are counted.
    pub fn lookup(
        &self,
        key: &[u8],
        snapshot: SeqNo,
        hash: &KeyHash,
        tally: &mut ReadCountersSnapshot,
    ) -> Result<Option<Entry>> {
        let inner = &self.inner;
        if let Some(filter) = &inner.filter {
            tally.filter_probes += 1;
            if !filter.contains_hash(hash) {
                tally.filter_negatives += 1;
                return Ok(None);
            }
            tally.filter_positives += 1;
        }
        let i = index::find_block(&inner.index, key, snapshot);
        if i >= inner.index.len() {
            return Ok(None);
        }
        let mut it = inner.read_data_block(i)?;
        tally.data_block_reads += 1;
        tally.bytes_read += inner.block_len_with_trailer(i);
        let offset = inner.block_offset(i);
        it.seek(key, snapshot)
            .map_err(|m| m.in_block(&inner.path, BlockKind::Data, offset))?;
        let found = it
            .next_entry()
            .map_err(|m| m.in_block(&inner.path, BlockKind::Data, offset))?
            .filter(|e| e.key == key);
        if found.is_some() && inner.filter.is_some() {
            tally.filter_true_positives += 1;
        }
        Ok(found)
    }

    /// Every entry in entry order.
    pub fn iter(&self) -> TableIterator {
        TableIterator::new(self.inner.clone())
    }

    /// Entries in entry order, starting at the first entry whose user key is `>= key`.
    pub fn iter_from(&self, key: &[u8]) -> TableIterator {
        let mut it = self.iter();
        it.seek(key);
        it
    }

    pub fn properties(&self) -> &TableProperties {
        &self.inner.properties
    }

    /// Asks the operating system to forget the file's cached pages, so the next reads go to
    /// the disk (benchmarks measure cold lookups this way).
    pub fn drop_cache(&self) -> Result<()> {
        self.inner.file.drop_cache()
    }

    /// The table's Bloom filter, when it has one.
    pub fn filter(&self) -> Option<&BloomFilter> {
        self.inner.filter.as_ref()
    }

    pub fn filter_params(&self) -> Option<FilterParams> {
        self.inner.filter_params
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Number of data blocks.
    pub fn data_blocks(&self) -> usize {
        self.inner.index.len()
    }

    /// Bytes of memory the table keeps: filter bits and index entries.
    pub fn memory_bytes(&self) -> usize {
        let filter = self.inner.filter.as_ref().map_or(0, |f| f.memory_bytes());
        let index: usize = self
            .inner
            .index
            .iter()
            .map(|e| e.last_key.len() + std::mem::size_of::<IndexEntry>())
            .sum();
        filter + index
    }
}

impl TableInner {
    fn block_len_with_trailer(&self, i: usize) -> u64 {
        self.index
            .get(i)
            .map_or(0, |e| e.handle.size_with_trailer())
    }

    pub(crate) fn block_offset(&self, i: usize) -> u64 {
        self.index.get(i).map_or(0, |e| e.handle.offset)
    }

    /// Reads, checksums and parses data block `i`. Point lookups count the read; iterators
    /// (scans, compaction, verification) do not, so the counters describe lookups only.
    pub(crate) fn read_data_block(&self, i: usize) -> Result<BlockIter> {
        let handle = self
            .index
            .get(i)
            .map(|e| e.handle)
            .ok_or_else(|| Error::InvalidArgument(format!("no data block {i}")))?;
        let len = usize::try_from(handle.size_with_trailer()).map_err(|_| {
            Error::corruption(&self.path, Some(handle.offset), "data block too large")
        })?;
        let raw = self.file.read_at(handle.offset, len)?;
        let contents = check_block(&self.path, handle, BlockKind::Data, raw)?;
        let block = Block::new(contents)
            .map_err(|m| m.in_block(&self.path, BlockKind::Data, handle.offset))?;
        Ok(block.iter())
    }
}
