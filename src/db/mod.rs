//! The store: the public API and the state it shares between threads.
//!
//! Each part of the work has a file of its own: `write_group` (writers queued into groups),
//! `write` (the WAL and the memtable), `read` (memtables, then tables through their filters),
//! `background` (the flush and compaction threads and what they wait for), `flush` and
//! `compact` (one job of each kind, and the manifest edit that ends it), `recovery` (opening a
//! store) and `table_writer` (new table files).

use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;

use crate::cursor::Cursor;
use crate::entry::check_key_len;
use crate::error::{Error, Result};
use crate::filename;
use crate::fs::{FileLock, SharedFs};
use crate::iter::DbIterator;
use crate::keyspace::{KeyspaceOptions, DEFAULT_ID};
use crate::memory::allocator;
use crate::options::{Options, WriteOptions};
use crate::sstable::TableEnv;
use crate::stats::Stats;
use crate::write_batch::WriteBatch;

mod background;
mod checkpoint;
mod compact;
mod expiry;
mod filter_memory;
mod flush;
mod keyspace_handle;
mod keyspaces;
mod level0_at_rest;
mod memory;
mod multi_get;
mod read;
mod recovery;
mod replay;
mod snapshot;
mod state;
mod table_writer;
mod transaction;
mod write;
mod write_group;
mod write_rate;
mod write_rest;

pub use checkpoint::Checkpoint;
pub use keyspace_handle::{Keyspace, KeyspaceView};
use recovery::recover;
pub use snapshot::Snapshot;
use state::{
    BackgroundState, Counters, Job, ReadState, ShapeState, StepFailure, Tree, WriterState,
};
pub use transaction::{Mismatch, Transaction, TransactionRange};

/// What recovery found in the WAL when the store was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Write batches replayed from WAL files.
    pub batches_replayed: u64,
    /// The parts of WAL files that were not replayed, in the order recovery found them.
    pub dropped: Vec<DroppedWal>,
    /// Tables whose lookup counts were taken from `LOOKUPS`, saved when the store was last
    /// closed (where its filter memory follows the lookups counted): the plan for the
    /// filters starts from them rather than from the tree's prediction.
    pub tables_lookup_counts_restored: usize,
    /// Why `LOOKUPS` was not used though it was there (it did not read back whole): the
    /// store started from the prediction, as without the file.
    pub lookup_counts_refused: Option<String>,
}

impl RecoveryReport {
    /// Intact write batches that were in the dropped parts: writes that were lost although
    /// their records could be read.
    pub fn intact_batches_dropped(&self) -> u64 {
        self.dropped.iter().map(|d| d.intact_batches).sum()
    }
}

/// A part of a WAL file that recovery did not replay.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DroppedWal {
    /// The log file.
    pub log: PathBuf,
    /// Offset in the file where the dropped part starts.
    pub offset: u64,
    /// Bytes dropped from `offset`.
    pub bytes: u64,
    /// Intact write batches in the dropped part, lost with it.
    pub intact_batches: u64,
    /// Why it was dropped.
    pub cause: DropCause,
}

/// Why recovery dropped part of a WAL file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropCause {
    /// The log ended in an incomplete or damaged record with nothing intact after it: an
    /// append a crash interrupted before its sync returned. Nothing acknowledged as durable
    /// was lost.
    TornTail,
    /// Damage in the unsynced part of the log (no sync mark after it shows it synced) with
    /// intact records after it: a page the crash lost. Everything from the damage on is
    /// dropped, so the store keeps a prefix of the write order; no synced write can lie after
    /// such a hole, since a sync writes out every earlier page.
    UnsyncedHole,
    /// Damage with intact records after it, where [`crate::WalRecoveryMode::PointInTime`]
    /// stopped: the rest of the log is dropped.
    Damaged,
    /// A damaged range that [`crate::WalRecoveryMode::Salvage`] skipped: the intact records
    /// after it were kept.
    Skipped,
    /// A whole log after an earlier log's dropped part, under `PointInTime`: replaying it
    /// would leave a hole in the history.
    AfterEarlierDrop,
    /// An intact record that is not a valid write batch (it does not decode, or its sequence
    /// numbers do not follow the ones before it or pass [`crate::entry::MAX_SEQ`]). Under
    /// `PointInTime` replay stops there and the rest of the log is dropped; `Salvage` skips
    /// the record alone (`bytes` is then the record's length).
    InvalidBatch,
}

pub(crate) struct Inner {
    dir: PathBuf,
    fs: SharedFs,
    options: Options,
    read_state: RwLock<Arc<ReadState>>,
    /// Writers waiting to be written by a group's leader.
    write_queue: write_group::WriteQueue,
    /// How fast writers may go while level 0 is behind.
    write_rate: write_rate::WriteRate,
    /// Held by a group's leader, and by whoever else starts a new WAL.
    writer: Mutex<WriterState>,
    /// Held for a whole flush: memtables are flushed one at a time, oldest first.
    flushing: Mutex<()>,
    shape: Mutex<ShapeState>,
    /// Sequence number of the last write visible to readers.
    visible_seq: AtomicU64,
    /// Live snapshots, whose versions flushes and compactions keep.
    snapshots: Mutex<snapshot::SnapshotList>,
    /// When sequence numbers were written, for entries that expire (`Options::ttl`).
    seq_times: Mutex<crate::seq_time::SeqTimes>,
    /// How long `multi_get`'s block reads take lately.
    batch_block_reads: multi_get::BlockReadTimes,
    /// The memory each role may hold now, and the filters' limit among them (`memory`).
    governor: crate::memory::Governor,
    /// The span of lookups each table's lookup counts were counted over.
    count_spans: crate::filter_plan::CountSpans,
    /// `ReadCounters::table_lookups` when the filter memory was last spent by the lookups
    /// counted (`filter_memory`).
    filters_refit_at: std::sync::atomic::AtomicU64,
    /// When level 0 is compacted below its trigger because writes rest; `None` when never
    /// (`Options::compact_level0_at_rest`).
    level0_at_rest: Option<level0_at_rest::Level0AtRest>,
    next_file_number: AtomicU64,
    background: Mutex<BackgroundState>,
    /// Signalled when there is background work, and when background work finished.
    background_cv: Condvar,
    /// The file system, read counters and caches every table of the store reads through.
    table_env: TableEnv,
    counters: Counters,
    recovery: RecoveryReport,
    /// The directory's lock: exclusive for a writer, shared for a read-only store (none when
    /// a read-only store has no lock file).
    _lock: Option<Box<dyn FileLock>>,
}

/// A handle of an open store. Cloning it is cheap (a reference count) and every clone is the
/// same store: give one to each thread or task, or keep one in a struct. It is `Send + Sync`
/// and `'static`, as are the [`Keyspace`], [`Snapshot`] and [`Transaction`] handles it gives,
/// each of which keeps the store open too; any number of threads may read while others write.
/// When the last of them is dropped, the store closes (see [`Db::close`]).
#[derive(Clone)]
pub struct Db {
    inner: Arc<Inner>,
    open: Arc<OpenStore>,
}

/// What every handle of one open store shares, and what closes the store when the last
/// handle goes: its background threads.
struct OpenStore {
    inner: Arc<Inner>,
    /// The flush thread and the compaction threads; none in a read-only store.
    workers: Mutex<Vec<JoinHandle<()>>>,
    read_only: bool,
    /// Set by the first close: a drop after `Db::close` does nothing more.
    closed: std::sync::atomic::AtomicBool,
}

impl OpenStore {
    fn new(inner: &Arc<Inner>, workers: Vec<JoinHandle<()>>, read_only: bool) -> Arc<OpenStore> {
        Arc::new(OpenStore {
            inner: Arc::clone(inner),
            workers: Mutex::new(workers),
            read_only,
            closed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Stops the background threads and records what the next open starts from; the WAL
    /// synced first, so that a power loss after the close keeps every write made before it.
    fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let result = self.inner.sync_logs_for_close();
        let workers = std::mem::take(&mut *lock(&self.workers));
        if workers.is_empty() {
            return result;
        }
        // From here on, tables that readers still hold keep their obsolete files: the next
        // open removes them.
        let inner = &self.inner;
        inner.table_env.store_open.store(false, Ordering::Release);
        lock(&inner.background).shutdown = true;
        inner.background_cv.notify_all();
        for worker in workers {
            let _ = worker.join();
        }
        // A failure to save the lookup counts costs only the hint: the next open starts from
        // the prediction, as without them.
        let _ = inner.save_lookup_counts();
        result.and(inner.record_write_totals())
    }
}

impl Drop for OpenStore {
    /// Does what [`Db::close`] does, without a way to report a failure.
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// The store's directory and how it is open: enough to tell stores apart in a log line or in
/// an `unwrap_err` (the counters are in [`Db::stats`]).
impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.path())
            .field("read_only", &self.open.read_only)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Db {
    /// Opens the store in `path`, creating it if `options.create_if_missing` (the default).
    /// Recovers unflushed writes from the WAL. A second open of the same directory, from this
    /// process or another, fails with `Error::Locked`.
    ///
    /// ```
    /// use bloomkv::{Db, Error, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let again = Db::open(dir.path(), Options::default());
    /// assert!(matches!(again, Err(Error::Locked { .. })), "one open at a time");
    /// db.close()?; // or drop it, and every handle it gave
    /// # Ok::<(), bloomkv::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let options = options.with_memory_shares_resolved();
        let dir = path.as_ref().to_path_buf();
        let fs = Arc::clone(&options.file_system);
        let current = dir.join(filename::CURRENT);
        if !fs.exists(&current) {
            recovery::refuse_store_without_current(fs.as_ref(), &dir)?;
            if !options.create_if_missing {
                return Err(Error::InvalidArgument(format!(
                    "no store at {} (create_if_missing is off)",
                    dir.display()
                )));
            }
            create_store_dir(fs.as_ref(), &dir)?;
        }
        let dir_lock = fs.lock(&dir.join(filename::LOCK))?;
        if options.tune_allocator {
            allocator::hold_thresholds();
        }
        let inner = Arc::new(recover(dir, fs, options, dir_lock)?);
        // Made before the threads start, so that a failure to start one stops those started.
        let open = OpenStore::new(&inner, Vec::new(), false);
        let flush = spawn_worker(&inner, "bloomkv-flush", Inner::flush_loop)?;
        lock(&open.workers).push(flush);
        for i in 0..inner.options.compaction_threads {
            let name = format!("bloomkv-compact-{i}");
            let compaction = spawn_worker(&inner, &name, Inner::compaction_loop)?;
            lock(&open.workers).push(compaction);
        }
        inner.background_cv.notify_all();
        Ok(Db { inner, open })
    }

    /// Opens the store in `path` for reading only, writing nothing: no lock file, no WAL, no
    /// manifest, no compaction, no deletion, so it works on read-only media. It reads the
    /// manifest's tables and replays the WAL into memory: the view a writer would recover.
    ///
    /// It takes a shared lock on the store's lock file (when there is one; taking it writes
    /// nothing): while a writer has the store open this fails with `Error::Locked`, and while
    /// read-only opens hold it a writer's open fails the same way. Any number of read-only
    /// opens may share a store. Writes, `flush` and `compact` return `Error::ReadOnly`.
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let options = options.with_memory_shares_resolved();
        let dir = path.as_ref().to_path_buf();
        let fs = Arc::clone(&options.file_system);
        let lock = fs.lock_shared(&dir.join(filename::LOCK))?;
        let inner = Arc::new(recovery::open_read_only(dir, fs, options, lock)?);
        let open = OpenStore::new(&inner, Vec::new(), true);
        Ok(Db { inner, open })
    }

    /// True for a store opened with [`Db::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.open.read_only
    }

    /// Brings a store whose WAL could not be written back to accepting writes, and retries a
    /// failed flush or compaction now rather than after its pause. The store does both by
    /// itself, with backoff; call this to do it at once (for example after freeing disk
    /// space). Returns the error that still stands, if any.
    pub fn resume(&self) -> Result<()> {
        self.refuse_if_read_only()?;
        // Jobs that began before the cause was gone end first (and may fail once more): the
        // wait below must learn only of failures of jobs that start from here.
        drop(self.inner.hold_background());
        {
            let _job = self.inner.start_foreground_job();
            self.inner.restart_wal()?;
        }
        self.inner.retry_now();
        self.wait_for_background_work()?;
        self.inner.standing_failure()
    }

    /// Sets `key` to `value` (not synced: see [`WriteOptions`]).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default())?;
    /// db.put("user:1", "ada")?;
    /// db.put(b"user:1", b"grace")?; // anything that is bytes: the newest write wins
    /// assert_eq!(db.get("user:1")?, Some(b"grace".to_vec()));
    /// # Ok::<(), bloomkv::Error>(())
    /// ```
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Deletes `key` (not synced).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Deletes every key from `start` (included) to `end` (excluded) as one write, however
    /// many keys the range holds: a range deletion, kept beside the entries (in the memtable,
    /// then in the manifest) until compactions have dropped every older version it covers.
    /// Reads, iterators, cursors and snapshots taken after it see none of those keys; a get
    /// of one passes by the tables older than the deletion unread. A range with `end <=
    /// start` deletes nothing. Meant for ranges (a tenant, a time window), not for single
    /// keys: every read checks the live range deletions, so keep them to thousands, not
    /// millions.
    ///
    /// ```
    /// use bloomkv::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default())?;
    /// for i in 0..100 {
    ///     db.put(format!("tenant1/{i:03}"), "x")?;
    /// }
    /// db.put("tenant2/000", "y")?;
    /// db.delete_range("tenant1/", "tenant10")?; // "0" follows "/"
    /// assert_eq!(db.get("tenant1/007")?, None);
    /// assert_eq!(db.iter().count(), 1);
    /// # Ok::<(), bloomkv::Error>(())
    /// ```
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(start, end);
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies a batch with default options.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies every operation of `batch` atomically: after a crash all of it or none of it is
    /// there, and readers see all of it or none of it.
    pub fn write_opt(&self, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
        self.refuse_if_read_only()?;
        batch.validate()?;
        if batch.is_empty() {
            return Ok(());
        }
        self.inner.write(batch, options.sync)
    }

    /// The value of `key`, or `None` when it is absent or deleted.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default())?;
    /// db.put("k", "v")?;
    /// assert_eq!(db.get("k")?, Some(b"v".to_vec()));
    /// db.delete("k")?;
    /// assert_eq!(db.get("k")?, None);
    /// assert_eq!(db.get("never written")?, None); // the filters answer: no disk read
    /// # Ok::<(), bloomkv::Error>(())
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner.get(DEFAULT_ID, key.as_ref(), None)
    }

    /// [`get`](Self::get) without a copy: the value shares the block (or memtable) it was
    /// read from, and keeps it alive while it lives (see [`Value`](crate::Value)).
    pub fn get_pinned(&self, key: impl AsRef<[u8]>) -> Result<Option<crate::Value>> {
        self.inner.get_pinned(DEFAULT_ID, key.as_ref(), None)
    }

    /// The values of `keys`, in their order (`None` for an absent or deleted key), all read
    /// at one moment. Faster than a `get` per key: every key is hashed once, the filters of
    /// all keys are asked before any data block is read, and each block several keys need
    /// is read once, in table and file order. Keys may repeat and come in any order.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.multi_get(DEFAULT_ID, keys, None)
    }

    /// Whether `key` holds a value, answered like `get` but without copying the value out.
    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.inner.contains_key(DEFAULT_ID, key.as_ref(), None)
    }

    /// `false` when `key` is surely absent; `true` when it may be present. Asks the memtables
    /// and the tables' filters only, never a data block: cheaper than `get`, and a `true` may
    /// be a filter's false positive (or a table without a filter). An oversized key is never
    /// stored, so it is surely absent.
    pub fn may_contain(&self, key: impl AsRef<[u8]>) -> bool {
        let key = key.as_ref();
        check_key_len(key).is_ok() && self.inner.may_contain(DEFAULT_ID, key)
    }

    /// `false` when no key starts with `prefix`; `true` when one may. Asks the memtables and
    /// the tables' prefix filters only (`Options::prefix_extractor`), never a data block: a
    /// table whose key range meets the prefix, and whose prefix filter does not rule it out
    /// (or that has none the store trusts, or when the extractor cuts nothing from `prefix`),
    /// answers `true`; so do deleted keys still in the memtables or tables.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use bloomkv::{Db, Options, PrefixExtractor};
    /// let options = Options::default().prefix_extractor(PrefixExtractor::Delimited(b':'));
    /// let db = Db::open(dir.path(), options)?;
    /// db.put("app:1", "x")?;
    /// db.put("user:42", "ada")?;
    /// db.flush()?; // "team:" falls within the table's keys; its prefix filter rules it out
    /// assert!(db.may_contain_prefix("user:"));
    /// assert!(!db.may_contain_prefix("team:"));
    /// # Ok::<(), bloomkv::Error>(())
    /// ```
    pub fn may_contain_prefix(&self, prefix: impl AsRef<[u8]>) -> bool {
        self.inner.may_contain_prefix(DEFAULT_ID, prefix.as_ref())
    }

    /// A consistent view of the store as of now: reads through it see every write made
    /// before and none after, until it is dropped (see [`Snapshot`]).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default())?;
    /// db.put("k", "old")?;
    /// let snapshot = db.snapshot();
    /// db.put("k", "new")?;
    /// db.flush()?; // flushes and compactions keep what a live snapshot sees
    /// assert_eq!(snapshot.get("k")?, Some(b"old".to_vec()));
    /// assert_eq!(db.get("k")?, Some(b"new".to_vec()));
    /// # Ok::<(), bloomkv::Error>(())
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::take(self)
    }

    /// Every pair in key order, as of now (later writes are not seen).
    pub fn iter(&self) -> DbIterator {
        (self.inner).iter(DEFAULT_ID, Bound::Unbounded, Bound::Unbounded, None, None)
    }

    /// Pairs with keys in `range`, in key order, as of now. Takes what `BTreeMap::range`
    /// takes: `db.range("a".."c")`, `db.range(b"k".to_vec()..)`, or a pair of `Bound`s.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default())?;
    /// for key in ["a", "b", "c", "d"] {
    ///     db.put(key, key.to_uppercase())?;
    /// }
    /// let keys = (db.range("b".."d").map(|pair| pair.map(|(key, _)| key)))
    ///     .collect::<bloomkv::Result<Vec<_>>>()?;
    /// assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
    /// let last = db.range("b"..).next_back().transpose()?; // from either end
    /// assert_eq!(last, Some((b"d".to_vec(), b"D".to_vec())));
    /// # Ok::<(), bloomkv::Error>(())
    /// ```
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIterator {
        let (start, end) = byte_bounds(&range);
        (self.inner).iter(DEFAULT_ID, start, end.map(<[u8]>::to_vec), None, None)
    }

    /// A [`Cursor`] over every pair as of now: seeks, and steps forwards and backwards, all
    /// over that one view.
    pub fn cursor(&self) -> Cursor {
        (self.inner).cursor(DEFAULT_ID, Bound::Unbounded, Bound::Unbounded, None)
    }

    /// A [`Cursor`] over the pairs with keys in `range`, as of now: no step or seek leaves
    /// the range, and a walk reads only the blocks of the range (and those the bounds fall
    /// in). Takes what [`range`](Self::range) takes.
    pub fn cursor_over<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Cursor {
        let (lower, upper) = byte_bounds(&range);
        self.inner.cursor(DEFAULT_ID, lower, upper, None)
    }

    /// Pairs whose key starts with `prefix`, in key order, as of now.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        let prefix = prefix.as_ref();
        self.inner.iter(
            DEFAULT_ID,
            Bound::Included(prefix),
            Bound::Unbounded,
            Some(prefix.to_vec()),
            None,
        )
    }

    /// The keyspace named `name`, created with `options` when the store has none of that
    /// name (the creation is durable when this returns). When it exists, each option
    /// `options` sets that differs from the one it recorded is recorded in its place and
    /// taken by the tables written from now on; options left unset keep what it recorded.
    /// `"default"` names the default keyspace, which follows the store's [`Options`].
    ///
    /// ```
    /// use bloomkv::{Db, FilterPolicy, KeyspaceOptions, Options, WriteBatch};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::default())?;
    /// let users = db.keyspace("users", KeyspaceOptions::new())?;
    /// let emails = db.keyspace(
    ///     "emails",
    ///     KeyspaceOptions::new().filter_policy(FilterPolicy::FalsePositiveRate(0.001)),
    /// )?;
    /// let mut batch = WriteBatch::new();
    /// batch.put_in(&users, "user:1", "alice").put_in(&emails, "alice@example.com", "user:1");
    /// db.write(batch)?; // both or neither, across a crash
    /// assert_eq!(emails.get("alice@example.com")?.as_deref(), Some(&b"user:1"[..]));
    /// assert_eq!(db.get("user:1")?, None); // the default keyspace holds neither
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keyspace(&self, name: &str, options: KeyspaceOptions) -> Result<Keyspace> {
        crate::keyspace::check_name(name)?;
        if name == crate::keyspace::DEFAULT_KEYSPACE {
            if options != KeyspaceOptions::default() {
                return Err(Error::InvalidArgument(
                    "the default keyspace takes the store's Options, not KeyspaceOptions".into(),
                ));
            }
            let state = self.inner.read_state();
            return Ok(Keyspace::new(
                self,
                Arc::clone(&state.default_tree().keyspace),
            ));
        }
        options.validate(&self.inner.options)?;
        if let Some(tree) = self.inner.read_state().named(name) {
            if tree.keyspace.given.updated_by(&options) == tree.keyspace.given {
                return Ok(Keyspace::new(self, Arc::clone(&tree.keyspace)));
            }
        }
        self.refuse_if_read_only()?;
        let def = self.inner.open_keyspace(name, options)?;
        Ok(Keyspace::new(self, def))
    }

    /// The keyspace named `name`, if the store has one, as it is (a read-only store opens
    /// its keyspaces this way).
    pub fn existing_keyspace(&self, name: &str) -> Option<Keyspace> {
        let state = self.inner.read_state();
        let tree = state.named(name)?;
        Some(Keyspace::new(self, Arc::clone(&tree.keyspace)))
    }

    /// The names of the store's keyspaces, the default first, then in the order they were
    /// created.
    pub fn keyspace_names(&self) -> Vec<String> {
        let state = self.inner.read_state();
        (state.trees.iter())
            .map(|t| t.keyspace.name.clone())
            .collect()
    }

    /// Drops the keyspace named `name` and every key in it, durably when this returns: its
    /// tables are deleted once no reader holds them, and its writes still in the WAL are
    /// never replayed. Handles of it fail from then on with [`Error::NoSuchKeyspace`]. The
    /// default keyspace cannot be dropped.
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        self.refuse_if_read_only()?;
        if name == crate::keyspace::DEFAULT_KEYSPACE {
            return Err(Error::InvalidArgument(
                "the default keyspace cannot be dropped".into(),
            ));
        }
        self.inner.drop_keyspace(name)
    }

    /// Makes every write acknowledged so far durable, by syncing the WAL once (RocksDB's
    /// `SyncWAL`, fjall's `persist`): many unsynced writes, then one `sync_wal`, cost one sync
    /// where synced writes cost one each (or one per group). No table is written.
    pub fn sync_wal(&self) -> Result<()> {
        self.refuse_if_read_only()?;
        self.inner.sync_wal()
    }

    /// Writes the memtable to a table and waits until it is durable and recorded.
    pub fn flush(&self) -> Result<()> {
        self.refuse_if_read_only()?;
        self.inner.flush()
    }

    /// Flushes, then merges every table into one level (tombstones and old versions dropped,
    /// but for those live snapshots see), written with the options the store was opened with:
    /// its filter and compression.
    pub fn compact(&self) -> Result<()> {
        self.refuse_if_read_only()?;
        self.inner.flush()?;
        self.inner.compact_all()
    }

    /// Waits until every frozen memtable is flushed and no level needs compaction, nor level
    /// 0 a compaction at rest that is due (`Options::compact_level0_at_rest`), nor a refit of
    /// the filters to the lookups counted, so the tree's shape and its filters stay put until
    /// writes or lookups come (benchmarks and tests measure a settled tree this way). It waits
    /// for a quiet moment, so call it when writes have stopped: writers that never pause keep
    /// the background busy and may keep it from returning, and so may lookups that never
    /// pause, each few thousand of which make another refit due.
    pub fn wait_for_background_work(&self) -> Result<()> {
        if self.is_read_only() {
            return Ok(());
        }
        let every_job = [Job::Flush, Job::Compaction];
        self.inner.wait_until(&every_job, |inner, background| {
            background.running == 0 && !inner.has_background_work() && !inner.filter_refit_due()
        })
    }

    /// Empties the block cache (all of it, when shared with other stores) and asks the
    /// operating system to forget every live table file's cached pages, so that the next
    /// lookups read from the disk. For measuring cold reads; data is unaffected.
    pub fn drop_table_caches(&self) -> Result<()> {
        if let Some(cache) = &self.inner.table_env.block_cache {
            cache.clear();
        }
        let state = self.inner.read_state();
        let dropped = (state.trees.iter())
            .flat_map(|tree| tree.version.tables())
            .try_for_each(|t| t.table.drop_cache());
        dropped
    }

    /// Verifies every checksum of what the store relies on (see [`crate::check`]), holding
    /// flushes and compactions back meanwhile so the files checked are the ones in use.
    pub fn check(&self) -> crate::check::CheckReport {
        let _held = self.inner.hold_background();
        let _shape = lock(&self.inner.shape);
        crate::check::check_view(&self.inner.fs, &self.inner.dir)
    }

    /// Counters and the shape of the tree.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default())?;
    /// db.put("k", "v")?;
    /// db.flush()?;
    /// let stats = db.stats();
    /// assert_eq!(stats.tables.len(), 1);
    /// assert_eq!(stats.tables[0].entries, 1);
    /// println!("{} bytes in tables, filters {} bytes", stats.table_bytes(), stats.filter_memory_bytes);
    /// # Ok::<(), bloomkv::Error>(())
    /// ```
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// What recovery found in the WAL when this store was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Closes the store if this is its last handle: syncs the WAL, stops background work,
    /// records the write I/O totals in the manifest and releases the directory, reporting
    /// any failure. While other handles of the store live (clones, keyspaces, snapshots,
    /// transactions), it syncs the WAL and leaves the store open to them: it closes when the
    /// last of them is dropped, which does the same without a way to report an error.
    pub fn close(self) -> Result<()> {
        match Arc::into_inner(self.open) {
            Some(open) => open.close(),
            // Other handles keep the store open: what is written so far is made durable.
            None => self.inner.sync_logs_for_close(),
        }
    }

    fn refuse_if_read_only(&self) -> Result<()> {
        match self.is_read_only() {
            true => Err(Error::ReadOnly),
            false => Ok(()),
        }
    }
}

/// The bounds of `range` as byte slices.
pub(crate) fn byte_bounds<'a, K: AsRef<[u8]> + 'a, R: RangeBounds<K>>(
    range: &'a R,
) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
    (
        range.start_bound().map(AsRef::as_ref),
        range.end_bound().map(AsRef::as_ref),
    )
}

/// Starts a background thread running `work` until the store shuts down.
fn spawn_worker(inner: &Arc<Inner>, name: &str, work: fn(&Inner)) -> Result<JoinHandle<()>> {
    let inner = Arc::clone(inner);
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || work(&inner))
        .map_err(|e| Error::io(format!("starting the background thread {name}"), e))
}

/// Creates the directory of a new store and makes its entry durable: a directory is an
/// entry of its parent, and until the parent is synced a power loss can take the directory
/// away with every file the store has synced in it. The parent is synced even when the
/// directory already existed, since whoever made it may not have synced it; directories this
/// call creates above it get their parents synced too.
fn create_store_dir(fs: &dyn crate::fs::FileSystem, dir: &Path) -> Result<()> {
    let created: Vec<PathBuf> = dir
        .ancestors()
        .skip(1)
        .take_while(|a| a.parent().is_some() && !a.as_os_str().is_empty() && !fs.exists(a))
        .map(Path::to_path_buf)
        .collect();
    fs.create_dir_all(dir)?;
    for entry in std::iter::once(dir).chain(created.iter().map(PathBuf::as_path)) {
        fs.sync_dir(parent_dir(entry))?;
    }
    Ok(())
}

/// The directory holding `path` (the empty path, the current directory, for a bare name).
fn parent_dir(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

impl Inner {
    fn read_state(&self) -> Arc<ReadState> {
        Arc::clone(&self.read_state.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn replace_read_state(&self, change: impl FnOnce(&ReadState) -> ReadState) {
        let mut state = self.read_state.write().unwrap_or_else(|e| e.into_inner());
        *state = Arc::new(change(&state));
    }

    fn path_of(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn new_file_number(&self) -> u64 {
        self.next_file_number.fetch_add(1, Ordering::SeqCst)
    }
}
