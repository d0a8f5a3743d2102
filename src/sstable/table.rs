//! A table file as readers hold it: the footer, properties, index, filter and prefix filter,
//! read once at open (`open.rs`) and kept in memory, then for each lookup that the filter does
//! not rule out one data block, from the block cache or with one positioned read. The file
//! itself is held by the store's table cache, which may close it between reads.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::block::{Block, BlockIter};
use super::filter::partitions::FilterLayout;
use super::filter::prefix::{PrefixAnswer, TablePrefixFilter};
use super::filter::table_filter::HeldUnit;
use super::filter::unit::UnitFilter;
use super::format::{check_block, BlockHandle, BlockKind, Malformed};
use super::index::table_index::TableIndex;
use super::iter::{TableBackIterator, TableIterator};
use super::properties::TableProperties;
use super::readahead::ReadAhead;
use super::{BlockCache, IndexCache};
use crate::cache::TableCache;
use crate::entry::{Entry, SeqNo, ValueKind};
use crate::error::{Error, Result};
use crate::filter::{FilterParams, KeyHash};
use crate::fs::{RandomAccessFile, SharedFs};
use crate::metrics::{ReadCounters, ReadCountersSnapshot};
use crate::prefix::PrefixExtractor;
use crate::value::Newest;

/// What a table reads through: the store's file system, its counters and its two caches.
#[derive(Clone)]
pub struct TableEnv {
    pub fs: SharedFs,
    pub counters: Arc<ReadCounters>,
    /// `None` turns block caching off: every data block is read from the file.
    pub block_cache: Option<Arc<BlockCache>>,
    /// Partitions of two-level indexes already read. `None`: every partition a lookup needs
    /// is read from the file (tools reading one table).
    pub(crate) index_cache: Option<Arc<IndexCache>>,
    pub table_cache: Arc<TableCache>,
    /// True while the store that owns the tables is open. Files are opened and deleted by path
    /// only then: a reader that outlives its store (an iterator kept after `Db` was dropped)
    /// must neither read nor delete a file that a store opened later in the same directory may
    /// have made under the same name. Such a reader can still use the files the table cache
    /// holds open, and gets an error past them; recovery removes obsolete files left behind.
    pub store_open: Arc<AtomicBool>,
    /// Whether lookups are counted per table, for a filter memory limit that follows them
    /// (`Options::filter_memory_follows_lookups`): off, a lookup touches no shared counter
    /// for it.
    pub(crate) count_lookups: bool,
    /// The extractor the store cuts prefixes with: a table's prefix filter is trusted only
    /// when it was written with an extractor of the same name.
    pub(crate) prefix_extractor: Option<PrefixExtractor>,
}

impl TableEnv {
    /// For a table read on its own (tools, tests): no block cache, and a table cache of its own.
    pub fn standalone(fs: SharedFs, counters: Arc<ReadCounters>) -> TableEnv {
        TableEnv {
            table_cache: Arc::new(TableCache::new(Arc::clone(&fs), 1)),
            fs,
            counters,
            block_cache: None,
            index_cache: None,
            store_open: Arc::new(AtomicBool::new(true)),
            prefix_extractor: None,
            count_lookups: false,
        }
    }
}

/// How a read of data blocks uses the block cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockReads {
    /// Point lookups and scans: blocks come from the cache when there, and what is read goes
    /// in. The cache's eviction favours blocks hit more than once, so a long scan does not
    /// push out the blocks lookups keep hitting.
    Cached,
    /// Compaction and verification: the cache is neither asked nor filled. Their reads are
    /// one pass over whole tables that will soon be deleted.
    Bypass,
}

/// An open table. Cloning is cheap (the contents are shared); a `Table` can be shared across
/// threads.
#[derive(Clone)]
pub struct Table {
    pub(crate) inner: Arc<TableInner>,
    /// The filters lookups probe, one per unit of the table's filter (one for a whole
    /// filter, one per partition of a partitioned one): as written, or folded or dropped
    /// where the store's filter memory limit asked for less (a `Table` with smaller filters
    /// is another value over the same file, index and caches; see [`Table::with_filters`]).
    /// Empty for a table written without a filter.
    pub(super) units: Arc<[HeldUnit]>,
    /// The filter block was not read at open ([`Table::open_deferring_filter`]): every unit
    /// is `Whole` with no filter, and [`Table::load_filters`] reads them. A store never
    /// serves lookups through such a reader.
    pub(super) deferred: bool,
    /// Unit 0's filter when the filter is whole (not partitioned) and held: a probe of a
    /// whole filter follows this one pointer, as it did before filters had units.
    pub(super) whole: Option<Arc<UnitFilter>>,
    /// Whether the filter is partitioned: a probe searches its top level first.
    pub(super) partitioned: bool,
    /// Whether the table was written with a filter.
    pub(super) filtered: bool,
}

pub(crate) struct TableInner {
    /// Unique among every table reader of the process: the caches' key.
    pub(super) id: u64,
    pub(crate) path: PathBuf,
    pub(super) env: TableEnv,
    pub(crate) index: TableIndex,
    /// Where the data blocks end (the filter, or properties, block starts).
    pub(super) data_end: u64,
    pub(crate) filter_handle: Option<BlockHandle>,
    pub(super) filter_params: Option<FilterParams>,
    /// The filter's units: one for a whole filter, the partitions under their top level for
    /// a partitioned one; `None` without a filter.
    pub(crate) filter_layout: Option<FilterLayout>,
    pub(crate) properties: TableProperties,
    /// The filter over the prefixes of the table's keys, when it has one.
    pub(crate) prefix_filter: Option<TablePrefixFilter>,
    /// Set when the store no longer needs the table: the file is deleted once the last reader
    /// (a version, an iterator) lets go of it, so no reader ever finds its file gone.
    pub(super) obsolete: AtomicBool,
    /// Point lookups that asked unit 0 of the table's filter (the whole filter, or the first
    /// partition) for a key: how often lookups come to its key range. Every reader of the
    /// table counts here (`with_filters` shares it). Kept in the table itself, so that a
    /// probe of a whole filter counts without following another pointer.
    pub(super) first_unit_lookups: AtomicU64,
    /// The same for each further partition of a partitioned filter (unit `u` at `u - 1`).
    pub(super) lookups: Box<[AtomicU64]>,
}

impl Drop for TableInner {
    fn drop(&mut self) {
        self.env.table_cache.forget(self.id);
        // No reader of this table is left to hit its index partitions: the index cache, sized
        // as a share of the machine, would otherwise keep them until evicted.
        if let (TableIndex::TwoLevel(top), Some(cache)) = (&self.index, &self.env.index_cache) {
            for p in 0..top.len() {
                cache.remove(self.id, top.partition(p).offset);
            }
        }
        if self.obsolete.load(Ordering::Acquire) && self.env.store_open.load(Ordering::Acquire) {
            // A file left behind is found and removed at the next open.
            let _ = self.env.fs.remove(&self.path);
        }
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.inner.path)
            .field("data_blocks", &self.inner.index.blocks())
            .field("filter", &self.filter_residency())
            .finish()
    }
}

/// Reads one block (contents and trailer) and checks its trailer.
pub(super) fn read_block(
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
    /// A reader over `inner` holding `units` of its filter.
    pub(super) fn with_units(
        inner: Arc<TableInner>,
        units: Arc<[HeldUnit]>,
        deferred: bool,
    ) -> Table {
        let partitioned = (inner.filter_layout.as_ref()).is_some_and(|l| l.is_partitioned());
        let whole = match partitioned {
            false => units.first().and_then(|u| u.filter.clone()),
            true => None,
        };
        Table {
            filtered: inner.filter_layout.is_some(),
            inner,
            units,
            deferred,
            whole,
            partitioned,
        }
    }

    /// What the table's prefix filter says of the prefix hashed as `hash`: `Unknown` when it
    /// has none, or one written with another extractor than the store's.
    pub fn prefix_answer(&self, hash: &KeyHash) -> PrefixAnswer {
        (self.inner.prefix_filter.as_ref()).map_or(PrefixAnswer::Unknown, |f| f.answer(hash))
    }

    /// Bytes of the prefix filter held in memory (0 without one).
    pub fn prefix_filter_memory_bytes(&self) -> usize {
        (self.inner.prefix_filter.as_ref()).map_or(0, |f| f.memory_bytes())
    }

    /// Whether the table has a prefix filter the store does not trust (written with an
    /// extractor of another name, or read by a store without one), left unread.
    pub fn prefix_filter_ignored(&self) -> bool {
        self.inner.properties.prefix_filter.is_some() && self.inner.prefix_filter.is_none()
    }

    /// The prefix filter's predicted false-positive rate, when it has a trusted one.
    pub fn prefix_filter_predicted_rate(&self) -> Option<f64> {
        (self.inner.prefix_filter.as_ref()).map(|f| f.predicted_false_positive_rate())
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
        self.inner.env.counters.add(&tally);
        found
    }

    /// [`get_at`](Self::get_at), counting into `tally` instead of the shared counters: a
    /// store's lookup visits several tables and adds their tally once. Lookups count into
    /// the read counters in [`filter_admits`](Self::filter_admits), `read_block` and
    /// `find_in` only.
    pub fn lookup(
        &self,
        key: &[u8],
        snapshot: SeqNo,
        hash: &KeyHash,
        tally: &mut ReadCountersSnapshot,
    ) -> Result<Option<Entry>> {
        self.lookup_with(key, snapshot, hash, tally, BlockIter::next_entry)
    }

    /// [`lookup`](Self::lookup) answering with a value that shares the block it lies in.
    pub(crate) fn lookup_newest(
        &self,
        key: &[u8],
        snapshot: SeqNo,
        hash: &KeyHash,
        tally: &mut ReadCountersSnapshot,
    ) -> Result<Option<Newest>> {
        self.lookup_with(key, snapshot, hash, tally, |it| Ok(it.sought_newest()))
    }

    /// Whether the table holds `key` at `snapshot`, and as what (a value or a tombstone),
    /// without copying the value out.
    pub fn lookup_kind(
        &self,
        key: &[u8],
        snapshot: SeqNo,
        hash: &KeyHash,
        tally: &mut ReadCountersSnapshot,
    ) -> Result<Option<(ValueKind, SeqNo)>> {
        self.lookup_with(key, snapshot, hash, tally, |it| {
            Ok(it.sought().map(|(_, kind, seq)| (kind, seq)))
        })
    }

    /// One key's lookup: the filter, the index, then the block, where `read` takes the entry
    /// the seek found.
    fn lookup_with<T>(
        &self,
        key: &[u8],
        snapshot: SeqNo,
        hash: &KeyHash,
        tally: &mut ReadCountersSnapshot,
        read: impl Fn(&mut BlockIter) -> std::result::Result<Option<T>, Malformed>,
    ) -> Result<Option<T>> {
        if !self.filter_admits(key, hash, tally) {
            return Ok(None);
        }
        let located = (self.inner).locate_block(key, snapshot, BlockReads::Cached, Some(tally))?;
        let Some((_, handle)) = located else {
            return Ok(None);
        };
        let data = self.read_block(handle, tally)?;
        self.find_in(data, handle, key, snapshot, tally, &read)
    }

    /// The data block that would hold `key` at `snapshot`, from the index alone; `None` when
    /// the key lies past the table's last block. An index partition may have to be read.
    pub fn block_for(&self, key: &[u8], snapshot: SeqNo) -> Result<Option<usize>> {
        let located = (self.inner).locate_block(key, snapshot, BlockReads::Cached, None)?;
        Ok(located.map(|(block, _)| block))
    }

    /// [`block_for`](Self::block_for) with the block's handle, counting an index partition
    /// read into `tally`: a batched lookup finds each key's block once, then announces and
    /// reads it by its handle.
    pub(crate) fn locate_counted(
        &self,
        key: &[u8],
        snapshot: SeqNo,
        tally: &mut ReadCountersSnapshot,
    ) -> Result<Option<(usize, BlockHandle)>> {
        (self.inner).locate_block(key, snapshot, BlockReads::Cached, Some(tally))
    }

    /// Announces that data block `block` will be read soon, unless the block cache holds it:
    /// the operating system starts reading it meanwhile. A hint; failures are ignored.
    pub fn will_read_block(&self, block: usize) {
        if let Ok(Some(handle)) = self.inner.block_handle(block, None) {
            self.will_read(handle);
        }
    }

    /// [`will_read_block`](Self::will_read_block) for the block at `handle`.
    pub(crate) fn will_read(&self, handle: BlockHandle) {
        let inner = &self.inner;
        let cached =
            (inner.env.block_cache.as_deref()).is_some_and(|c| c.contains(inner.id, handle.offset));
        if cached {
            return;
        }
        if let (Ok(file), Ok(len)) = (inner.file(), usize::try_from(handle.size_with_trailer())) {
            file.will_need(handle.offset, len);
        }
    }

    /// Looks up each of `keys` (at `snapshot`) in data block `block`, read once: the newest
    /// entry of each at or below `snapshot`, if the block holds one.
    pub fn lookup_in_block(
        &self,
        block: usize,
        keys: &[&[u8]],
        snapshot: SeqNo,
        tally: &mut ReadCountersSnapshot,
    ) -> Result<Vec<Option<Entry>>> {
        let handle = (self.inner.block_handle(block, Some(&mut *tally))?)
            .ok_or_else(|| Error::InvalidArgument(format!("no data block {block}")))?;
        self.lookup_at(handle, keys, snapshot, tally)
    }

    /// [`lookup_in_block`](Self::lookup_in_block) for the block at `handle`.
    pub(crate) fn lookup_at(
        &self,
        handle: BlockHandle,
        keys: &[&[u8]],
        snapshot: SeqNo,
        tally: &mut ReadCountersSnapshot,
    ) -> Result<Vec<Option<Entry>>> {
        let data = self.read_block(handle, tally)?;
        keys.iter()
            .map(|key| {
                self.find_in(
                    Arc::clone(&data),
                    handle,
                    key,
                    snapshot,
                    tally,
                    &BlockIter::next_entry,
                )
            })
            .collect()
    }

    /// The data block at `handle` for a point lookup, counted as one read.
    fn read_block(
        &self,
        handle: BlockHandle,
        tally: &mut ReadCountersSnapshot,
    ) -> Result<Arc<Block>> {
        let data = self.inner.data_block(handle, BlockReads::Cached, None)?;
        tally.data_block_reads += 1;
        tally.bytes_read += handle.size_with_trailer();
        Ok(data)
    }

    /// Seeks `key` in `data` (the data block at `handle`, which the iterator takes); where the
    /// block holds it, `read` takes the entry from the iterator, and a filter's "maybe" counts
    /// as a true positive.
    fn find_in<T>(
        &self,
        data: Arc<Block>,
        handle: BlockHandle,
        key: &[u8],
        snapshot: SeqNo,
        tally: &mut ReadCountersSnapshot,
        read: &impl Fn(&mut BlockIter) -> std::result::Result<Option<T>, Malformed>,
    ) -> Result<Option<T>> {
        let inner = &self.inner;
        let in_block = |m: Malformed| m.in_block(&inner.path, BlockKind::Data, handle.offset);
        let mut it = data.shared_iter();
        it.seek(key, snapshot).map_err(in_block)?;
        let answer = match it.sought() {
            Some((k, _, _)) if k == key => read(&mut it).map_err(in_block)?,
            _ => None,
        };
        if answer.is_some() {
            self.count_found(key, tally);
        }
        Ok(answer)
    }

    /// Every entry in entry order, reading through the block cache.
    pub fn iter(&self) -> TableIterator {
        self.iter_with(BlockReads::Cached)
    }

    /// Every entry in entry order, with the given use of the block cache.
    pub fn iter_with(&self, reads: BlockReads) -> TableIterator {
        TableIterator::new(self.inner.clone(), reads)
    }

    /// Entries in entry order, starting at the first entry whose user key is `>= key`.
    pub fn iter_from(&self, key: &[u8]) -> TableIterator {
        let mut it = self.iter();
        it.seek(key);
        it
    }

    /// Entries at or before `end` (a user key; a bound on it), in reverse entry order: keys
    /// descending, each key's versions oldest first.
    pub fn iter_back_to(&self, end: Bound<&[u8]>) -> TableBackIterator {
        // A key's versions run from the newest to the oldest (sequence number 0) in entry
        // order: up to and including `k` ends at its oldest, short of `k` before its newest.
        let end = match end {
            Bound::Included(k) => Bound::Included((k.to_vec(), 0)),
            Bound::Excluded(k) => Bound::Excluded((k.to_vec(), SeqNo::MAX)),
            Bound::Unbounded => Bound::Unbounded,
        };
        TableBackIterator::new(self.inner.clone(), end, BlockReads::Cached)
    }

    /// Marks the table as no longer part of the store: its file is deleted when the last
    /// reader holding the table drops it.
    pub fn mark_obsolete(&self) {
        self.inner.obsolete.store(true, Ordering::Release);
    }

    pub fn properties(&self) -> &TableProperties {
        &self.inner.properties
    }

    /// Asks the operating system to forget the file's cached pages, so the next reads go to
    /// the disk (benchmarks measure cold lookups this way).
    pub fn drop_cache(&self) -> Result<()> {
        self.inner.file()?.drop_cache()
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Number of data blocks.
    pub fn data_blocks(&self) -> usize {
        self.inner.index.blocks()
    }

    /// Bytes of memory the table keeps: filter bits (its prefix filter's too) and index
    /// entries.
    pub fn memory_bytes(&self) -> usize {
        self.filter_memory_bytes() + self.prefix_filter_memory_bytes() + self.index_memory_bytes()
    }

    /// Bytes of the index held in memory.
    pub fn index_memory_bytes(&self) -> usize {
        self.inner.index.resident_bytes()
    }

    /// Index partitions of a two-level index, which live in the index cache (0 for an index
    /// of one block, held in memory for the table's life).
    pub fn cached_index_partitions(&self) -> usize {
        match &self.inner.index {
            TableIndex::Single(_) => 0,
            TableIndex::TwoLevel(top) => top.len(),
        }
    }
}

impl TableInner {
    /// Counts a data block a scan reads (`reads` is `Cached` for scans; compaction and
    /// verification bypass the cache, and are not counted).
    pub(super) fn count_scan_block(&self, reads: BlockReads) {
        if reads == BlockReads::Cached {
            (self.env.counters.scan_block_reads).fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The lookup count of unit `unit` of the table's filter.
    pub(super) fn unit_lookups(&self, unit: usize) -> Option<&AtomicU64> {
        match unit {
            0 => Some(&self.first_unit_lookups),
            u => self.lookups.get(u - 1),
        }
    }

    /// The table's open file, from the table cache (opened again if it was closed).
    /// Once the store is closed, only a file the cache still holds is used (see
    /// [`TableEnv::store_open`]).
    pub(crate) fn file(&self) -> Result<Arc<dyn RandomAccessFile>> {
        if self.env.store_open.load(Ordering::Acquire) {
            return self.env.table_cache.file(self.id, &self.path);
        }
        self.env.table_cache.open_file(self.id).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{}: the store was closed and the file is no longer open",
                self.path.display()
            ))
        })
    }

    /// The data block at `handle` (one of the index's), checked and parsed: from the block
    /// cache when `reads` allows and it is there, else read (through `readahead` when given)
    /// and, when `reads` allows, cached. Point lookups count their blocks; iterators (scans,
    /// compaction, verification) do not, so the read counters describe lookups only.
    pub(crate) fn data_block(
        &self,
        handle: BlockHandle,
        reads: BlockReads,
        readahead: Option<&mut ReadAhead>,
    ) -> Result<Arc<Block>> {
        let cache = match reads {
            BlockReads::Cached => self.env.block_cache.as_deref(),
            BlockReads::Bypass => None,
        };
        if let Some(block) = cache.and_then(|c| c.get(self.id, handle.offset)) {
            return Ok(block);
        }
        let len = usize::try_from(handle.size_with_trailer()).map_err(|_| {
            Error::corruption(&self.path, Some(handle.offset), "data block too large")
        })?;
        let file = self.file()?;
        let raw = match readahead {
            Some(ahead) => ahead.read(file.as_ref(), handle.offset, len, self.data_end)?,
            None => file.read_at(handle.offset, len)?,
        };
        let contents = check_block(&self.path, handle, BlockKind::Data, raw)?;
        let block = Arc::new(
            Block::new(contents)
                .map_err(|m| m.in_block(&self.path, BlockKind::Data, handle.offset))?,
        );
        if let Some(cache) = cache {
            cache.insert(self.id, handle.offset, Arc::clone(&block));
        }
        Ok(block)
    }

    /// Reads, checksums and parses the data block at `handle` from the file, bypassing the
    /// block cache.
    pub(crate) fn read_data_block(&self, handle: BlockHandle) -> Result<BlockIter> {
        Ok(self
            .data_block(handle, BlockReads::Bypass, None)?
            .shared_iter())
    }
}
