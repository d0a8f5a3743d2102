//! Walks a table's entries in entry order, one data block at a time, reading ahead.

use std::cmp::Ordering;
use std::ops::{Bound, Range};
use std::sync::Arc;

use super::block::{Block, BlockIter};
use super::format::BlockKind;
use super::index::table_index::IndexCursor;
use super::readahead::ReadAhead;
use super::table::{BlockReads, TableInner};
use crate::entry::{entry_order, Entry, SeqNo, ValueKind};
use crate::error::{Error, Result};
use crate::walk::{next_owned, EntryView, Walk};

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

    /// Steps onto the next entry, loading the next block when this one is done.
    fn step(&mut self) -> Result<bool> {
        loop {
            if let Some((it, offset)) = &mut self.block {
                let offset = *offset;
                match it.advance() {
                    Ok(true) => return Ok(true),
                    Ok(false) => self.block = None,
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
                return Ok(false);
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

impl Walk for TableIterator {
    fn advance(&mut self) -> Result<bool> {
        if self.failed {
            return Ok(false);
        }
        let stepped = self.step();
        if stepped.is_err() {
            self.failed = true;
            self.block = None;
        }
        stepped
    }

    fn current(&self) -> EntryView<'_> {
        let (it, _) = (self.block.as_ref()).expect("a table iterator lends only an entry it holds");
        it.current()
    }
}

impl Iterator for TableIterator {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        next_owned(self)
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
    /// The loaded block, its keys one after another, and its entries in entry order, taken
    /// from the back: buffers reused from block to block.
    block: Option<Arc<Block>>,
    keys: Vec<u8>,
    spots: Vec<Spot>,
    /// The entry the walk stands on, taken from `spots`.
    current: Option<Spot>,
    reads: BlockReads,
    failed: bool,
}

/// Where one decoded entry of the loaded block lies: its key in the key buffer, its value in
/// the block.
#[derive(Clone)]
struct Spot {
    key: Range<usize>,
    seq: SeqNo,
    kind: ValueKind,
    value: Range<usize>,
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
            block: None,
            keys: Vec::new(),
            spots: Vec::new(),
            current: None,
            reads,
            failed: false,
        }
    }

    /// Whether the entry `(key, seq)` lies at or before the end.
    fn within_end(&self, key: &[u8], seq: SeqNo) -> bool {
        let order = |(end, end_seq): &(Vec<u8>, SeqNo)| entry_order(key, seq, end, *end_seq);
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

    /// Loads block `block`'s entries at or before the end. Each is decoded once, forwards
    /// (prefix compression runs from the restart points on): its key is kept, its value
    /// stays in the block.
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
        self.keys.clear();
        self.spots.clear();
        while it.advance().map_err(in_block)? {
            let entry = it.current();
            let key = self.keys.len()..self.keys.len() + entry.key.len();
            self.keys.extend_from_slice(entry.key);
            let (seq, kind) = (entry.seq, entry.kind);
            let value = it.current_value_range();
            self.spots.push(Spot {
                key,
                seq,
                kind,
                value,
            });
        }
        // Only the block the end falls in holds entries past it.
        let keys = &self.keys;
        let keep = (self.spots).partition_point(|s| self.within_end(&keys[s.key.clone()], s.seq));
        self.spots.truncate(keep);
        self.block = Some(Arc::clone(it.block()));
        Ok(())
    }

    fn step(&mut self) -> Result<bool> {
        loop {
            if let Some(spot) = self.spots.pop() {
                self.current = Some(spot);
                return Ok(true);
            }
            self.current = None;
            let block = match self.next_block {
                Some(next) => next,
                None => self.first_block()?,
            };
            let Some(block) = block else {
                self.next_block = Some(None);
                return Ok(false);
            };
            self.next_block = Some(block.checked_sub(1));
            self.load(block)?;
        }
    }
}

impl Walk for TableBackIterator {
    fn advance(&mut self) -> Result<bool> {
        if self.failed {
            return Ok(false);
        }
        let stepped = self.step();
        if stepped.is_err() {
            self.failed = true;
            self.spots.clear();
            self.current = None;
        }
        stepped
    }

    fn current(&self) -> EntryView<'_> {
        let (Some(spot), Some(block)) = (&self.current, &self.block) else {
            panic!("a table iterator lends only an entry it holds");
        };
        EntryView {
            key: &self.keys[spot.key.clone()],
            seq: spot.seq,
            kind: spot.kind,
            value: block.bytes(spot.value.clone()),
        }
    }
}

impl Iterator for TableBackIterator {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        next_owned(self)
    }
}
