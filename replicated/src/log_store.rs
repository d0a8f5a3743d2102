//! The Raft log, the vote and the committed index in one bloomkv store.
//!
//! Keys (all values are JSON):
//!
//! - `e` + the entry's index as 8 big-endian bytes: a log entry. Big-endian makes key order
//!   index order, so a range of indexes is a range scan.
//! - `m/vote`, `m/committed`: the vote and the committed log id.
//! - `m/purged`: the last purged log id; `m/last`: the last log id in the log, kept beside
//!   the entries in every batch that changes them, so the log state is two point reads.
//!
//! Appends, truncations and votes are synced before they are acknowledged: Raft counts a
//! node's vote and its log as durable once it answered. The committed index and purges are
//! not synced (Raft recomputes the first and tolerates a purge undone by a crash).
//!
//! A purge waits until the state machine holds, durably, every entry it removes
//! ([`DurableIndex`]): openraft asks for a purge as soon as it hands a snapshot to the state
//! machine, and a crash before the state machine switched to it must not leave a log whose
//! entries below the purge are gone while the state machine never applied them.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bloomkv::{Db, Options, WriteBatch, WriteOptions};
use openraft::storage::{LogFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::{Entry, ErrorSubject, ErrorVerb, LogId, OptionalSend, StorageError, Vote};
use serde::de::DeserializeOwned;

use crate::{json, read_json, storage_error, NodeId, StorageResult, TypeConfig};

const ENTRY_PREFIX: u8 = b'e';
const VOTE: &[u8] = b"m/vote";
const COMMITTED: &[u8] = b"m/committed";
const PURGED: &[u8] = b"m/purged";
const LAST: &[u8] = b"m/last";

/// The key of the log entry at `index`.
fn entry_key(index: u64) -> [u8; 9] {
    let mut key = [ENTRY_PREFIX; 9];
    key[1..].copy_from_slice(&index.to_be_bytes());
    key
}

/// How far the state machine's state is durable: the log may drop entries up to there.
#[derive(Debug, Clone)]
pub struct DurableIndex(Arc<AtomicU64>);

impl DurableIndex {
    /// Nothing durable yet.
    pub fn new() -> DurableIndex {
        DurableIndex(Arc::new(AtomicU64::new(0)))
    }

    /// Every index: for a state machine durable at every apply.
    pub fn everything() -> DurableIndex {
        DurableIndex(Arc::new(AtomicU64::new(u64::MAX)))
    }

    /// Records that the state up to `index` is durable.
    pub fn advance(&self, index: u64) {
        self.0.fetch_max(index.saturating_add(1), Ordering::AcqRel);
    }

    fn covers(&self, index: u64) -> bool {
        index < self.0.load(Ordering::Acquire)
    }
}

impl Default for DurableIndex {
    fn default() -> Self {
        Self::new()
    }
}

/// The log store; its reader is a clone sharing the same store.
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Db>,
    durable: DurableIndex,
    /// A purge asked for beyond what the state machine holds durably, done once it does.
    pending_purge: Arc<Mutex<Option<LogId<NodeId>>>>,
}

fn logs_error(verb: ErrorVerb, e: impl std::fmt::Display) -> StorageError<NodeId> {
    storage_error(ErrorSubject::Logs, verb, e)
}

/// The log store's options: a small share of memory for its filters. A node runs this store
/// beside its state machine's, and each store caps its filters at its own share of the
/// process's memory (`Options::filter_memory_share`): at the default quarter each, the two
/// together could take half. The log holds the entries Raft has not purged yet, read by
/// index, so its filters matter little; the state machine's keep the default.
fn log_options() -> Options {
    Options::default().filter_memory_share(LOG_FILTER_MEMORY_SHARE)
}

/// The share of the process's memory the log store's filters may take.
const LOG_FILTER_MEMORY_SHARE: f64 = 0.05;

impl LogStore {
    /// Opens (or creates) the log store in `dir`, purging at once whatever Raft asks.
    pub fn open(dir: impl AsRef<Path>) -> Result<LogStore, bloomkv::Error> {
        Self::open_behind(dir, DurableIndex::everything())
    }

    /// Opens (or creates) the log store in `dir`, purging only entries `durable` covers.
    pub fn open_behind(
        dir: impl AsRef<Path>,
        durable: DurableIndex,
    ) -> Result<LogStore, bloomkv::Error> {
        let db = Db::open(dir, log_options())?;
        Ok(LogStore {
            db: Arc::new(db),
            durable,
            pending_purge: Arc::new(Mutex::new(None)),
        })
    }

    /// Does the purge waiting for the state machine, once its entries are durable there.
    fn purge_when_durable(&self) -> StorageResult<()> {
        let mut pending = self.pending_purge.lock().unwrap_or_else(|e| e.into_inner());
        let Some(log_id) = *pending else {
            return Ok(());
        };
        if !self.durable.covers(log_id.index) {
            return Ok(());
        }
        let mut batch = WriteBatch::new();
        for key in self.keys_in(..=log_id.index)? {
            batch.delete(key);
        }
        batch.put(PURGED, json(&log_id));
        let last: Option<LogId<NodeId>> = self.read(LAST)?;
        if last.is_none_or(|l| l.index < log_id.index) {
            batch.put(LAST, json(&log_id));
        }
        self.write(batch, false)?;
        *pending = None;
        Ok(())
    }

    fn read<T: DeserializeOwned>(&self, key: &[u8]) -> StorageResult<Option<T>> {
        read_json(&self.db, key, ErrorSubject::Logs)
    }

    fn write(&self, batch: WriteBatch, sync: bool) -> StorageResult<()> {
        self.db
            .write_opt(batch, &WriteOptions::default().sync(sync))
            .map_err(|e| logs_error(ErrorVerb::Write, e))
    }

    /// The stored entries whose indexes lie in `range`, as (key, JSON) pairs in index order.
    fn scan(&self, range: impl RangeBounds<u64>) -> StorageResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let start = match range.start_bound() {
            Bound::Included(&i) => Some(i),
            Bound::Excluded(&i) => i.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&i) => i.checked_add(1),
            Bound::Excluded(&i) => Some(i),
            Bound::Unbounded => None,
        };
        let Some(start) = start else {
            return Ok(Vec::new());
        };
        let start_key = entry_key(start);
        // Without an end: the first key after every entry key.
        let end_key = end.map_or(vec![ENTRY_PREFIX + 1], |e| entry_key(e).to_vec());
        self.db
            .range(start_key.to_vec()..end_key)
            .map(|item| item.map_err(|e| logs_error(ErrorVerb::Read, e)))
            .collect()
    }

    /// The entries whose indexes lie in `range`, in order.
    fn entries_in(&self, range: impl RangeBounds<u64>) -> StorageResult<Vec<Entry<TypeConfig>>> {
        self.scan(range)?
            .into_iter()
            .map(|(_, value)| {
                serde_json::from_slice(&value).map_err(|e| logs_error(ErrorVerb::Read, e))
            })
            .collect()
    }

    /// The keys of the entries whose indexes lie in `range`.
    fn keys_in(&self, range: impl RangeBounds<u64>) -> StorageResult<Vec<Vec<u8>>> {
        Ok(self.scan(range)?.into_iter().map(|(key, _)| key).collect())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry<TypeConfig>>> {
        self.entries_in(range)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let last_purged_log_id: Option<LogId<NodeId>> = self.read(PURGED)?;
        let last: Option<LogId<NodeId>> = self.read(LAST)?;
        Ok(LogState {
            last_purged_log_id,
            // With every entry purged, the last log id is the last purged one.
            last_log_id: last.or(last_purged_log_id),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StorageResult<()> {
        let mut batch = WriteBatch::new();
        batch.put(VOTE, json(vote));
        self.write(batch, true)
            .map_err(|e| storage_error(ErrorSubject::Vote, ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote<NodeId>>> {
        self.read(VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> StorageResult<()> {
        let mut batch = WriteBatch::new();
        match committed {
            Some(id) => batch.put(COMMITTED, json(&id)),
            None => batch.delete(COMMITTED),
        };
        self.write(batch, false)
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId<NodeId>>> {
        self.read(COMMITTED)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        self.purge_when_durable()?;
        let mut batch = WriteBatch::new();
        let mut last = None;
        for entry in entries {
            batch.put(entry_key(entry.log_id.index), json(&entry));
            last = Some(entry.log_id);
        }
        if let Some(last) = last {
            batch.put(LAST, json(&last));
        }
        let result = self.write(batch, true);
        callback.log_io_completed(
            result
                .as_ref()
                .map(|_| ())
                .map_err(|e| std::io::Error::other(e.to_string())),
        );
        result
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let mut batch = WriteBatch::new();
        for key in self.keys_in(log_id.index..)? {
            batch.delete(key);
        }
        // The entry before the cut is the new last one; none left means the purged one.
        let before = match log_id.index.checked_sub(1) {
            Some(i) => (self.read::<Entry<TypeConfig>>(&entry_key(i))?).map(|e| e.log_id),
            None => None,
        };
        match before.or(self.read::<LogId<NodeId>>(PURGED)?) {
            Some(id) => batch.put(LAST, json(&id)),
            None => batch.delete(LAST),
        };
        self.write(batch, true)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        {
            let mut pending = self.pending_purge.lock().unwrap_or_else(|e| e.into_inner());
            if pending.is_none_or(|p| p.index < log_id.index) {
                *pending = Some(log_id);
            }
        }
        self.purge_when_durable()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_store_caps_its_filters_at_its_own_share_of_memory() {
        let dir = tempfile::tempdir().unwrap();
        let store = LogStore::open(dir.path()).unwrap();
        let expected = bloomkv::memory::available()
            .map(|bytes| (bytes as f64 * LOG_FILTER_MEMORY_SHARE) as u64);
        assert_eq!(store.db.stats().filter_memory_limit, expected);
    }
}
