//! A table's index as lookups and scans use it: either one index block, kept whole in memory
//! (format versions 1 to 3, which small tables still are), or a top level kept in memory over
//! index partitions that are read when a lookup or scan needs them and kept in the store's
//! index cache (version 4). A version 5 table (one with a prefix filter) has either, as its
//! properties say. Either way data blocks are numbered from 0 across the table, so
//! batched lookups and scans never see the partitions.

use std::sync::Arc;

use crate::entry::SeqNo;
use crate::error::{Error, Result};
use crate::metrics::ReadCountersSnapshot;
use crate::sstable::format::{BlockHandle, BlockKind};
use crate::sstable::index::block_index::{self as index, BlockCursor, BlockIndex, IndexEntry};
use crate::sstable::index::top::TopIndex;
use crate::sstable::table::{read_block, BlockReads, TableInner};

/// How a table's index is held.
#[derive(Debug)]
pub(crate) enum TableIndex {
    /// One index block, in memory for the table's life.
    Single(Arc<BlockIndex>),
    /// The top level in memory; each partition read on demand, through the index cache.
    TwoLevel(TopIndex),
}

impl TableIndex {
    /// Number of data blocks.
    pub fn blocks(&self) -> usize {
        match self {
            TableIndex::Single(index) => index.len(),
            TableIndex::TwoLevel(top) => top.blocks(),
        }
    }

    /// Where the last data block's trailer ends.
    pub fn data_end(&self) -> u64 {
        match self {
            TableIndex::Single(index) => index.data_end(),
            TableIndex::TwoLevel(top) => top.data_end(),
        }
    }

    /// Whether each separator is exactly its block's last entry (format versions 1 and 2).
    pub fn separators_are_exact(&self) -> bool {
        match self {
            TableIndex::Single(index) => index.separators_are_exact(),
            TableIndex::TwoLevel(_) => false,
        }
    }

    /// Bytes the index keeps in memory for the table's life (cached partitions not counted).
    pub fn resident_bytes(&self) -> usize {
        match self {
            TableIndex::Single(index) => index.memory_bytes(),
            TableIndex::TwoLevel(top) => top.memory_bytes(),
        }
    }

    /// Number of index blocks: 1, or the partitions of a two-level index.
    pub fn partitions(&self) -> usize {
        match self {
            TableIndex::Single(_) => 1,
            TableIndex::TwoLevel(top) => top.len(),
        }
    }

    /// The key of the last data block's separator, when the table has blocks.
    pub fn last_separator_key(&self) -> Option<Vec<u8>> {
        match self {
            TableIndex::Single(index) => index.last_entry().map(|e| e.key),
            TableIndex::TwoLevel(top) => Some(top.separator(top.len() - 1).0.to_vec()),
        }
    }
}

/// A walk over a table's data blocks in order, from some block on. It holds the index block
/// it walks, so a scan reads each partition once.
pub(crate) struct IndexCursor {
    /// The data block whose handle comes next.
    next_block: usize,
    /// The index block holding it, and the place in it; `None` until the first step and after
    /// the end of each partition.
    at: Option<(Arc<BlockIndex>, BlockCursor)>,
}

impl IndexCursor {
    /// A cursor whose first step gives block `block`'s handle (none, past the last block).
    pub fn at(block: usize) -> IndexCursor {
        IndexCursor {
            next_block: block,
            at: None,
        }
    }
}

impl TableInner {
    /// The data block that can hold `(key, seq)` or the first entry after it, with its handle;
    /// `None` past the last block. A lookup counts an index partition read from the file in
    /// `tally`.
    pub(crate) fn locate_block(
        &self,
        key: &[u8],
        seq: SeqNo,
        reads: BlockReads,
        tally: Option<&mut ReadCountersSnapshot>,
    ) -> Result<Option<(usize, BlockHandle)>> {
        match &self.index {
            TableIndex::Single(index) => Ok(index.locate(key, seq)),
            TableIndex::TwoLevel(top) => {
                let Some(p) = top.find(key, seq) else {
                    return Ok(None);
                };
                let partition = self.index_partition(top, p, reads, tally)?;
                let (first, _) = top.blocks_of(p);
                Ok((partition.locate(key, seq)).map(|(i, handle)| (first + i, handle)))
            }
        }
    }

    /// [`locate_block`](Self::locate_block)'s block alone; the number of blocks when the
    /// target lies past the last.
    pub(crate) fn find_block(&self, key: &[u8], seq: SeqNo, reads: BlockReads) -> Result<usize> {
        let found = self.locate_block(key, seq, reads, None)?;
        Ok(found.map_or(self.index.blocks(), |(block, _)| block))
    }

    /// Data block `block`'s handle; `None` when the table has no such block.
    pub(crate) fn block_handle(
        &self,
        block: usize,
        tally: Option<&mut ReadCountersSnapshot>,
    ) -> Result<Option<BlockHandle>> {
        match &self.index {
            TableIndex::Single(index) => Ok(index.handle(block)),
            TableIndex::TwoLevel(top) => {
                let Some(p) = top.partition_of_block(block) else {
                    return Ok(None);
                };
                let partition = self.index_partition(top, p, BlockReads::Cached, tally)?;
                Ok(partition.handle(block - top.blocks_of(p).0))
            }
        }
    }

    /// The handle of the block at `cursor`, moving it on; `None` past the last block.
    pub(crate) fn next_block_handle(
        &self,
        cursor: &mut IndexCursor,
        reads: BlockReads,
    ) -> Result<Option<BlockHandle>> {
        loop {
            if cursor.at.is_none() {
                cursor.at = self.index_block_at(cursor.next_block, reads)?;
            }
            let Some((index, at)) = &mut cursor.at else {
                return Ok(None);
            };
            if let Some(handle) = index.next_handle(at) {
                cursor.next_block += 1;
                return Ok(Some(handle));
            }
            // The end of a partition: the next block, if any, is the next partition's first.
            if cursor.next_block >= self.index.blocks() {
                return Ok(None);
            }
            cursor.at = None;
        }
    }

    /// The index block holding data block `block`, with a place in it at that block; `None`
    /// past the last block.
    fn index_block_at(
        &self,
        block: usize,
        reads: BlockReads,
    ) -> Result<Option<(Arc<BlockIndex>, BlockCursor)>> {
        let (index, first) = match &self.index {
            TableIndex::Single(index) if block < index.len() => (Arc::clone(index), 0),
            TableIndex::Single(_) => return Ok(None),
            TableIndex::TwoLevel(top) => {
                let Some(p) = top.partition_of_block(block) else {
                    return Ok(None);
                };
                let partition = self.index_partition(top, p, reads, None)?;
                (partition, top.blocks_of(p).0)
            }
        };
        let at = index.cursor(block - first);
        Ok(Some((index, at)))
    }

    /// Reads the index partitions into the index cache, while the cache has room for them
    /// beside what it holds. A store opens every table so, those it writes included: as long
    /// as its indexes fit the cache, lookups find each partition in memory, as they would a
    /// whole index, and no lookup pays a partition's first read; once they outgrow it,
    /// partitions are read when lookups need them and the cache keeps those they touch. A
    /// partition that cannot be read is left for the lookup that needs it to report, as a
    /// damaged data block is: the rest of the table, and of the store, stays readable.
    pub(crate) fn warm_index_cache(&self) {
        let (TableIndex::TwoLevel(top), Some(cache)) =
            (&self.index, self.env.index_cache.as_deref())
        else {
            return;
        };
        for p in 0..top.len() {
            // A partition takes at least its stored size in memory (more when compressed).
            let held = cache.stats();
            if held.bytes.saturating_add(top.partition(p).size) > held.capacity {
                return;
            }
            if self
                .index_partition(top, p, BlockReads::Cached, None)
                .is_err()
            {
                return;
            }
        }
    }

    /// Number of data blocks index block `p` covers (of [`TableIndex::partitions`]).
    pub(crate) fn index_partition_blocks(&self, p: usize) -> usize {
        match &self.index {
            TableIndex::Single(index) => index.len(),
            TableIndex::TwoLevel(top) => top.blocks_of(p).1,
        }
    }

    /// Every separator and handle of index block `p` (of [`TableIndex::partitions`]), read
    /// from the file when it is a partition (checks and repairs walk each once).
    pub(crate) fn index_partition_entries(&self, p: usize) -> Result<Vec<IndexEntry>> {
        let index = match &self.index {
            TableIndex::Single(index) => Arc::clone(index),
            TableIndex::TwoLevel(top) => self.index_partition(top, p, BlockReads::Bypass, None)?,
        };
        Ok(index.entries_from(0).collect())
    }

    /// Index partition `p`, from the index cache when `reads` allows and it is there, else
    /// read from the file, checked against the top level and, when `reads` allows, cached.
    /// A read from the file is counted in `tally`, when given.
    fn index_partition(
        &self,
        top: &TopIndex,
        p: usize,
        reads: BlockReads,
        tally: Option<&mut ReadCountersSnapshot>,
    ) -> Result<Arc<BlockIndex>> {
        let handle = top.partition(p);
        let cache = match reads {
            BlockReads::Cached => self.env.index_cache.as_deref(),
            BlockReads::Bypass => None,
        };
        if let Some(found) = cache.and_then(|c| c.get(self.id, handle.offset)) {
            return Ok(found);
        }
        let contents = read_block(self.file()?.as_ref(), &self.path, handle, BlockKind::Index)?;
        let partition = index::decode_partition(contents, top.data_start(p))
            .map_err(|m| m.in_block(&self.path, BlockKind::Index, handle.offset))?;
        top.check_partition(p, &partition).map_err(|reason| {
            Error::corruption(
                &self.path,
                Some(handle.offset),
                format!(
                    "index partition {p} at offset {} disagrees with the top-level index: \
                     {reason}",
                    handle.offset
                ),
            )
        })?;
        if let Some(tally) = tally {
            tally.index_block_reads += 1;
        }
        let partition = Arc::new(partition);
        if let Some(cache) = cache {
            cache.insert(self.id, handle.offset, Arc::clone(&partition));
        }
        Ok(partition)
    }
}
