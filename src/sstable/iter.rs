//! Walks a table's entries in entry order, one data block at a time, reading ahead.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use super::block::BlockIter;
use super::format::BlockKind;
use super::readahead::ReadAhead;
use super::table::{BlockReads, TableInner};
use super::table_index::IndexCursor;
use crate::entry::{entry_order, Entry, SeqNo};
use crate::error::{Error, Result};

/// An iterator over a table's entries; it keeps the table alive. After an error it yields
/// nothing more.
pub struct TableIterator {
    table: Arc<TableInner>,
    /// The next data block to load, as a place in the index: each step takes the next handle.
    /// `None` after a seek, until the first step finds the block (which may read an index
    /// partition).
    next_block: Option<IndexCursor>,
    block: Option<(BlockIter, u64)>,
    reads: BlockReads,
    readahead: ReadAhead,
    /// A position to seek to inside the next block loaded.
    seek_target: Option<(Vec<u8>, SeqNo)>,
    failed: bool,
}

impl TableIterator {
    pub(crate) fn new(table: Arc<TableInner>, reads: BlockReads) -> TableIterator {
        TableIterator {
            next_block: Some(IndexCursor::at(0)),
            table,
            block: None,
            reads,
            readahead: ReadAhead::new(),
            seek_target: None,
            failed: false,
        }
    }

    /// Back to the first entry.
    pub fn seek_to_first(&mut self) {
        self.next_block = Some(IndexCursor::at(0));
        self.block = None;
        self.seek_target = None;
        self.failed = false;
    }

    /// Positions at the first entry whose user key is `>= key` (its newest version first).
    pub fn seek(&mut self, key: &[u8]) {
        self.seek_entry(key, SeqNo::MAX);
    }

    /// Positions at the first entry at or after `(key, seq)` in entry order.
    pub fn seek_entry(&mut self, key: &[u8], seq: SeqNo) {
        self.next_block = None;
        self.block = None;
        self.seek_target = Some((key.to_vec(), seq));
        self.failed = false;
    }

    fn advance(&mut self) -> Result<Option<Entry>> {
        loop {
            if let Some((it, offset)) = &mut self.block {
                let offset = *offset;
                match it.next_entry() {
                    Ok(Some(e)) => return Ok(Some(e)),
                    Ok(None) => self.block = None,
                    Err(m) => return Err(m.in_block(&self.table.path, BlockKind::Data, offset)),
                }
            }
            let cursor = match &mut self.next_block {
                Some(cursor) => cursor,
                None => {
                    let (key, seq) = self
                        .seek_target
                        .as_ref()
                        .map_or((&[][..], SeqNo::MAX), |(k, s)| (k.as_slice(), *s));
                    let block = self.table.find_block(key, seq, self.reads)?;
                    self.next_block.insert(IndexCursor::at(block))
                }
            };
            let Some(handle) = self.table.next_block_handle(cursor, self.reads)? else {
                return Ok(None);
            };
            self.table.count_scan_block(self.reads);
            let mut it = self
                .table
                .data_block(handle, self.reads, Some(&mut self.readahead))?
                .shared_iter();
            if let Some((key, seq)) = self.seek_target.take() {
                it.seek(&key, seq)
                    .map_err(|m| m.in_block(&self.table.path, BlockKind::Data, handle.offset))?;
            }
            self.block = Some((it, handle.offset));
        }
    }
}

impl Iterator for TableIterator {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        let advanced = self.advance();
        if advanced.is_err() {
            self.block = None;
        }
        step(&mut self.failed, advanced)
    }
}

/// Walks a table's entries backwards, in reverse entry order (keys descending, each key's
/// versions oldest first), one data block at a time; it keeps the table alive. Each block is
/// decoded whole and handed out last entry first: a block's entries are prefix-compressed
/// from its restart points forward, so there is no stepping back inside one. A walk reads
/// only the blocks it returns entries from (and the one its bound falls in). After an error
/// it yields nothing more.
pub struct TableBackIterator {
    table: Arc<TableInner>,
    /// The last entry to yield, in entry order: entries after it are skipped.
    end: Bound<(Vec<u8>, SeqNo)>,
    /// The next block to load (going down); `None` until the first step finds the block the
    /// end falls in, `Some(None)` once block 0 is done.
    next_block: Option<Option<usize>>,
    /// The loaded block's entries in entry order, taken from the back.
    entries: Vec<Entry>,
    reads: BlockReads,
    failed: bool,
}

impl TableBackIterator {
    /// Entries at or before `end` (a key and sequence number in entry order), last first.
    pub(crate) fn new(
        table: Arc<TableInner>,
        end: Bound<(Vec<u8>, SeqNo)>,
        reads: BlockReads,
    ) -> TableBackIterator {
        TableBackIterator {
            table,
            end,
            next_block: None,
            entries: Vec::new(),
            reads,
            failed: false,
        }
    }

    /// Whether `entry` lies at or before the end.
    fn within_end(&self, entry: &Entry) -> bool {
        let order = |(key, seq): &(Vec<u8>, SeqNo)| entry_order(&entry.key, entry.seq, key, *seq);
        match &self.end {
            Bound::Included(end) => order(end) != Ordering::Greater,
            Bound::Excluded(end) => order(end) == Ordering::Less,
            Bound::Unbounded => true,
        }
    }

    /// The block the end falls in: the one that can hold it or the first entry after it, or
    /// the last block when the end lies past them all.
    fn first_block(&self) -> Result<Option<usize>> {
        let blocks = self.table.index.blocks();
        let found = match &self.end {
            Bound::Included((key, seq)) | Bound::Excluded((key, seq)) => {
                self.table.find_block(key, *seq, self.reads)?
            }
            Bound::Unbounded => blocks,
        };
        Ok(blocks.checked_sub(1).map(|last| found.min(last)))
    }

    /// Loads block `block`'s entries at or before the end.
    fn load(&mut self, block: usize) -> Result<()> {
        let Some(handle) = self.table.block_handle(block, None)? else {
            let reason = format!("the index has no handle for data block {block}");
            return Err(Error::corruption(&self.table.path, None, reason));
        };
        self.table.count_scan_block(self.reads);
        let data = self.table.data_block(handle, self.reads, None)?;
        let mut it = data.shared_iter();
        let in_block = |m: super::format::Malformed| {
            m.in_block(&self.table.path, BlockKind::Data, handle.offset)
        };
        // The buffer of the block before, emptied by the walk: its room is reused.
        let mut entries = std::mem::take(&mut self.entries);
        entries.clear();
        while let Some(entry) = it.next_entry().map_err(in_block)? {
            entries.push(entry);
        }
        // Only the block the end falls in holds entries past it.
        let keep = entries.partition_point(|e| self.within_end(e));
        entries.truncate(keep);
        self.entries = entries;
        Ok(())
    }

    fn advance(&mut self) -> Result<Option<Entry>> {
        loop {
            if let Some(entry) = self.entries.pop() {
                return Ok(Some(entry));
            }
            let block = match self.next_block {
                Some(next) => next,
                None => self.first_block()?,
            };
            let Some(block) = block else {
                self.next_block = Some(None);
                return Ok(None);
            };
            self.next_block = Some(block.checked_sub(1));
            self.load(block)?;
        }
    }
}

impl Iterator for TableBackIterator {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        if self.failed {
            return None;
        }
        let advanced = self.advance();
        if advanced.is_err() {
            self.entries.clear();
        }
        step(&mut self.failed, advanced)
    }
}

/// A walk's step from what its `advance` found: the entry, the end, or an error, after which
/// the walk (marked `failed`) yields nothing more.
fn step(failed: &mut bool, advanced: Result<Option<Entry>>) -> Option<Result<Entry>> {
    match advanced {
        Ok(entry) => entry.map(Ok),
        Err(e) => {
            *failed = true;
            Some(Err(e))
        }
    }
}
