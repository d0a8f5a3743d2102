//! Walks a table's entries in entry order, one data block at a time, reading ahead.

use std::sync::Arc;

use super::block::BlockIter;
use super::format::BlockKind;
use super::readahead::ReadAhead;
use super::table::{BlockReads, TableInner};
use super::table_index::IndexCursor;
use crate::entry::{Entry, SeqNo};
use crate::error::Result;

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
        match self.advance() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                self.block = None;
                Some(Err(e))
            }
        }
    }
}
