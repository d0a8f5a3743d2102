//! Appending records to a log.

use super::{
    fragment_checksum, PreviousLog, BLOCK_SIZE, HEADER_SIZE, SYNC_MARK_LEN, TYPE_FIRST, TYPE_FULL,
    TYPE_LAST, TYPE_MIDDLE, TYPE_PREVIOUS_LOG, TYPE_SYNC_MARK,
};
use crate::error::{Error, Result};
use crate::fs::WritableFile;

const ZEROS: [u8; HEADER_SIZE] = [0; HEADER_SIZE];

/// Appends records to a log file in the framing described in [`crate::wal`], with a sync
/// mark before the first record after each sync.
///
/// After any failed append or sync the writer refuses further work with
/// [`Error::WritesRefused`]: a record may be half written and a failed sync leaves unknown
/// bytes durable, so the log must not be extended; the caller starts a new log instead.
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    /// Bytes already used in the current block.
    block_offset: usize,
    /// One fragment, header and payload, assembled for a single append.
    buf: Vec<u8>,
    /// Bytes the last successful sync made durable (0 before any).
    synced: u64,
    /// The durable length the last sync mark claimed: a new mark is due when `synced` passes it.
    claimed: u64,
    failed: Option<String>,
}

impl LogWriter {
    /// A writer appending to `file`. A file that already holds bytes is continued at its end
    /// (block boundaries are computed from its length).
    pub fn new(file: Box<dyn WritableFile>) -> LogWriter {
        let block_offset = (file.len() % BLOCK_SIZE as u64) as usize;
        LogWriter {
            file,
            block_offset,
            buf: Vec::new(),
            synced: 0,
            claimed: 0,
            failed: None,
        }
    }

    fn check_usable(&self) -> Result<()> {
        match &self.failed {
            Some(reason) => Err(Error::WritesRefused {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    fn remember<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.failed = Some(format!("an earlier log write failed: {e}"));
        }
        r
    }

    /// Appends one record (any length, including zero). The bytes may sit in buffers until
    /// [`LogWriter::flush`] or [`LogWriter::sync`].
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        self.check_usable()?;
        let r = self.emit(payload);
        self.remember(r)
    }

    fn emit(&mut self, payload: &[u8]) -> Result<()> {
        if self.synced > self.claimed {
            self.append_sync_mark()?;
        }
        let mut rest = payload;
        let mut first = true;
        loop {
            if BLOCK_SIZE - self.block_offset < HEADER_SIZE {
                self.pad_block()?;
            }
            let left = BLOCK_SIZE - self.block_offset;
            let take = rest.len().min(left - HEADER_SIZE);
            let last = take == rest.len();
            let kind = match (first, last) {
                (true, true) => TYPE_FULL,
                (true, false) => TYPE_FIRST,
                (false, false) => TYPE_MIDDLE,
                (false, true) => TYPE_LAST,
            };
            let (chunk, tail) = rest.split_at(take);
            self.append_fragment(kind, chunk)?;
            rest = tail;
            first = false;
            if last {
                return Ok(());
            }
        }
    }

    /// Fills the rest of the block, too short for a fragment header, with zeros.
    fn pad_block(&mut self) -> Result<()> {
        let left = BLOCK_SIZE - self.block_offset;
        if left > 0 {
            self.file.append(&ZEROS[..left])?;
        }
        self.block_offset = 0;
        Ok(())
    }

    /// Appends one fragment; it must fit in what is left of the block.
    fn append_fragment(&mut self, kind: u8, chunk: &[u8]) -> Result<()> {
        // A fragment fits in a block, so its length fits in u16.
        let len = chunk.len() as u16;
        self.buf.clear();
        self.buf
            .extend_from_slice(&fragment_checksum(len, kind, chunk).to_le_bytes());
        self.buf.extend_from_slice(&len.to_le_bytes());
        self.buf.push(kind);
        self.buf.extend_from_slice(chunk);
        self.file.append(&self.buf)?;
        self.block_offset += HEADER_SIZE + chunk.len();
        Ok(())
    }

    /// Appends a sync mark claiming what the last sync made durable. Skipped when the block
    /// has room for a header but not for a mark: the record goes first, and the mark is tried
    /// again before the next record.
    fn append_sync_mark(&mut self) -> Result<()> {
        if BLOCK_SIZE - self.block_offset < HEADER_SIZE {
            self.pad_block()?;
        }
        if BLOCK_SIZE - self.block_offset < HEADER_SIZE + SYNC_MARK_LEN {
            return Ok(());
        }
        self.append_fragment(TYPE_SYNC_MARK, &self.synced.to_le_bytes())?;
        self.claimed = self.synced;
        Ok(())
    }

    /// Appends a previous-log note: `previous` is the log written before this one. Meant as
    /// the first fragment of a new log, so that any record of the log that survives a power
    /// loss has the note before it.
    pub fn note_previous_log(&mut self, previous: PreviousLog) -> Result<()> {
        self.check_usable()?;
        let mut payload = [0u8; super::PREVIOUS_LOG_LEN];
        payload[..8].copy_from_slice(&previous.number.to_le_bytes());
        payload[8..].copy_from_slice(&previous.len.to_le_bytes());
        let r = self.append_fragment(TYPE_PREVIOUS_LOG, &payload);
        self.remember(r)
    }

    /// Hands buffered bytes to the operating system (they survive a process crash).
    pub fn flush(&mut self) -> Result<()> {
        self.check_usable()?;
        let r = self.file.flush();
        self.remember(r)
    }

    /// Makes every record added so far durable (it survives a power loss). The next record
    /// will follow a sync mark saying so; nothing is appended now, so a log synced for the
    /// last time ends with its last record, durable.
    pub fn sync(&mut self) -> Result<()> {
        self.check_usable()?;
        let r = self.file.sync();
        self.remember(r)?;
        self.synced = self.file.len();
        Ok(())
    }

    /// True once an append or sync failed: the log must not be extended.
    pub fn has_failed(&self) -> bool {
        self.failed.is_some()
    }

    /// Bytes in the log file, including any it held before this writer.
    pub fn len(&self) -> u64 {
        self.file.len()
    }

    /// True when the log file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
