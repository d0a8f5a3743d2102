//! The store: the write path (WAL, memtable), the read path (memtables, then tables through
//! their filters), flush and compaction in a background thread, and recovery on open.

use std::collections::HashMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::cache::{BlockCache, TableCache};
use crate::compaction::{self, Compaction};
use crate::entry::{check_key_len, Entry, SeqNo};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::filter::KeyHash;
use crate::fs::{FileLock, SharedFs};
use crate::iter::{DbIterator, EntryStream, NewestVersions};
use crate::manifest::{self, ManifestWriter, TableMeta, VersionEdit};
use crate::memtable::MemTable;
use crate::metrics::ReadCounters;
use crate::options::{Options, WalRecoveryMode, WriteOptions};
use crate::sstable::{Table, TableBuilder, TableEnv, TableOptions};
use crate::stats::{LevelStats, Stats, TableStats};
use crate::version::Version;
use crate::wal::{self, LogWriter, RecoveryMode};
use crate::write_batch::WriteBatch;

/// What recovery found in the WAL when the store was opened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Write batches replayed from WAL files.
    pub batches_replayed: u64,
    /// Torn or damaged log tails dropped: (log file, offset where the dropped bytes began,
    /// bytes dropped).
    pub dropped_tails: Vec<(PathBuf, u64, u64)>,
}

/// The memtables and tables a reader sees, swapped as a whole when any of them changes.
struct ReadState {
    mem: Arc<MemTable>,
    /// Frozen memtables waiting to be flushed, newest first.
    immutable: Vec<Arc<MemTable>>,
    version: Arc<Version>,
}

/// Held by the one thread writing at a time.
struct WriterState {
    wal: LogWriter,
}

/// Held while the tree's shape changes (flush, compaction): one change at a time.
struct ShapeState {
    manifest: ManifestWriter,
    /// Per level, where round-robin compaction of that level resumes.
    compact_cursor: Vec<Vec<u8>>,
}

#[derive(Default)]
struct BackgroundState {
    shutdown: bool,
    /// True while the background thread runs a flush or compaction step. (The files a
    /// compaction made obsolete are deleted when their last reader drops them, which may be
    /// later.)
    busy: bool,
    /// Set when a flush or compaction failed; writes are refused from then on.
    error: Option<String>,
}

#[derive(Default)]
struct Counters {
    flushes: AtomicU64,
    compactions: AtomicU64,
    write_stalls: AtomicU64,
}

struct Inner {
    dir: PathBuf,
    fs: SharedFs,
    options: Options,
    read_state: RwLock<Arc<ReadState>>,
    writer: Mutex<WriterState>,
    shape: Mutex<ShapeState>,
    /// Sequence number of the last write visible to readers.
    visible_seq: AtomicU64,
    next_file_number: AtomicU64,
    background: Mutex<BackgroundState>,
    /// Signalled when there is background work, and when background work finished.
    background_cv: Condvar,
    /// The file system, read counters and caches every table of the store reads through.
    table_env: TableEnv,
    counters: Counters,
    recovery: RecoveryReport,
    _lock: Box<dyn FileLock>,
}

/// An open store. `Db` is `Send + Sync`: share it (for example in an `Arc`) between threads;
/// any number of threads may read while others write.
pub struct Db {
    inner: Arc<Inner>,
    worker: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Db {
    /// Opens the store in `path`, creating it if `options.create_if_missing` (the default).
    /// Recovers unflushed writes from the WAL. A second open of the same directory, from this
    /// process or another, fails with `Error::Locked`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        options.validate()?;
        let dir = path.as_ref().to_path_buf();
        let fs = Arc::clone(&options.file_system);
        let current = dir.join(filename::CURRENT);
        if !fs.exists(&current) {
            if !options.create_if_missing {
                return Err(Error::InvalidArgument(format!(
                    "no store at {} (create_if_missing is off)",
                    dir.display()
                )));
            }
            fs.create_dir_all(&dir)?;
        }
        let lock = fs.lock(&dir.join(filename::LOCK))?;
        let inner = Arc::new(recover(dir, fs, options, lock)?);
        let worker_inner = Arc::clone(&inner);
        let worker = std::thread::Builder::new()
            .name("bloomkv-background".into())
            .spawn(move || worker_inner.background_loop())
            .map_err(|e| Error::io("starting the background thread", e))?;
        inner.background_cv.notify_all();
        Ok(Db {
            inner,
            worker: Some(worker),
        })
    }

    /// Sets `key` to `value` (not synced: see [`WriteOptions`]).
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

    /// Applies a batch with default options.
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies every operation of `batch` atomically: after a crash all of it or none of it is
    /// there, and readers see all of it or none of it.
    pub fn write_opt(&self, batch: WriteBatch, options: &WriteOptions) -> Result<()> {
        batch.validate()?;
        if batch.is_empty() {
            return Ok(());
        }
        self.inner.write(batch, options.sync)
    }

    /// The value of `key`, or `None` when it is absent or deleted.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        check_key_len(key)?;
        Ok(self
            .inner
            .get_entry(key)?
            .filter(|e| !e.is_tombstone())
            .map(|e| e.value))
    }

    /// Every pair in key order, as of now (later writes are not seen).
    pub fn iter(&self) -> DbIterator {
        self.inner.iter(Bound::Unbounded, Bound::Unbounded, None)
    }

    /// Pairs with keys in `[start, end)` bounds, in key order, as of now.
    pub fn range(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> DbIterator {
        self.inner.iter(start, end.map(|k| k.to_vec()), None)
    }

    /// Pairs whose key starts with `prefix`, in key order, as of now.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        let prefix = prefix.as_ref();
        self.inner.iter(
            Bound::Included(prefix),
            Bound::Unbounded,
            Some(prefix.to_vec()),
        )
    }

    /// Writes the memtable to a table and waits until it is durable and recorded.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Flushes, then merges every table into one level (tombstones and old versions dropped).
    pub fn compact(&self) -> Result<()> {
        self.inner.flush()?;
        let inner = &self.inner;
        let mut shape = lock(&inner.shape);
        let version = Arc::clone(&inner.read_state().version);
        match compaction::full(&version) {
            Some(job) => inner.run_compaction(&mut shape, job),
            None => Ok(()),
        }
    }

    /// Waits until every frozen memtable is flushed and no level needs compaction, so the
    /// tree's shape stays put (benchmarks and tests measure a settled tree this way).
    pub fn wait_for_background_work(&self) -> Result<()> {
        self.inner
            .wait_until(|inner, background| !background.busy && !inner.has_background_work())
    }

    /// Empties the block cache (all of it, when shared with other stores) and asks the
    /// operating system to forget every live table file's cached pages, so that the next
    /// lookups read from the disk. For measuring cold reads; data is unaffected.
    pub fn drop_table_caches(&self) -> Result<()> {
        if let Some(cache) = &self.inner.table_env.block_cache {
            cache.clear();
        }
        let version = Arc::clone(&self.inner.read_state().version);
        (0..version.num_levels())
            .flat_map(|l| version.level(l))
            .try_for_each(|t| t.table.drop_cache())
    }

    /// Counters and the shape of the tree.
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

    /// Syncs the WAL, stops background work and releases the directory. Dropping a `Db`
    /// does the same but cannot report an error.
    pub fn close(mut self) -> Result<()> {
        let result = lock(&self.inner.writer).wal.sync();
        self.stop_worker();
        result
    }

    fn stop_worker(&mut self) {
        // From here on, tables that readers still hold keep their obsolete files: the next
        // open removes them.
        self.inner
            .table_env
            .store_open
            .store(false, Ordering::Release);
        lock(&self.inner.background).shutdown = true;
        self.inner.background_cv.notify_all();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = lock(&self.inner.writer).wal.flush();
        self.stop_worker();
    }
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

    // ---- read path -------------------------------------------------------------------

    /// The read state, then the sequence number: in that order every table of the state holds
    /// only entries at or below the number (tables keep only each key's newest version, so a
    /// number taken first could hide a version a concurrent flush collapsed away), and what
    /// the state lacks is whole later memtables: the reader sees a prefix of the history.
    fn snapshot(&self) -> (Arc<ReadState>, SeqNo) {
        let state = self.read_state();
        (state, self.visible_seq.load(Ordering::Acquire))
    }

    fn get_entry(&self, key: &[u8]) -> Result<Option<Entry>> {
        let (state, snapshot) = self.snapshot();
        let memtables = std::iter::once(&state.mem).chain(&state.immutable);
        for mem in memtables.filter(|m| !m.is_empty()) {
            if let Some(entry) = mem.get(key, snapshot) {
                return Ok(Some(entry));
            }
        }
        let hash = KeyHash::of(key);
        state.version.get(key, &hash, &self.table_env.counters)
    }

    fn iter(
        &self,
        start: Bound<&[u8]>,
        end: Bound<Vec<u8>>,
        prefix: Option<Vec<u8>>,
    ) -> DbIterator {
        let (state, snapshot) = self.snapshot();
        let mut sources: Vec<EntryStream> = std::iter::once(&state.mem)
            .chain(&state.immutable)
            .map(|m| Box::new(m.iter_from(start)) as EntryStream)
            .collect();
        sources.extend(state.version.streams_from(start));
        DbIterator::new(sources, snapshot, end, prefix)
    }

    // ---- write path ------------------------------------------------------------------

    fn refuse_if_failed(&self) -> Result<()> {
        match &lock(&self.background).error {
            Some(reason) => Err(Error::WritesRefused {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    fn fail_writes(&self, reason: String) {
        lock(&self.background).error.get_or_insert(reason);
        self.background_cv.notify_all();
    }

    fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        let mut writer = lock(&self.writer);
        self.refuse_if_failed()?;
        self.wait_for_room(&writer)?;
        let first_seq = self.visible_seq.load(Ordering::Acquire) + 1;
        let record = batch.encode(first_seq);
        let logged = writer.wal.add_record(&record).and_then(|()| {
            if sync {
                writer.wal.sync()
            } else {
                writer.wal.flush()
            }
        });
        if let Err(e) = logged {
            // The log may now end in a partial record: appending after it would hide later
            // writes from recovery. Refuse writes; reads go on.
            self.fail_writes(format!("WAL write failed: {e}"));
            return Err(e);
        }
        let last_seq = first_seq + batch.len() as u64 - 1;
        let state = self.read_state();
        state.mem.apply(batch.into_entries(first_seq));
        self.visible_seq.store(last_seq, Ordering::Release);
        if state.mem.approximate_bytes() >= self.options.memtable_size {
            // This batch is logged (synced if asked) and visible: it succeeded. If starting
            // the next WAL fails, `freeze_memtable` has refused further writes with the reason;
            // reporting this write as failed would invite a retry that applies it twice.
            let _ = self.freeze_memtable(&mut writer);
        }
        Ok(())
    }

    /// Delays or stalls the writer while flush or compaction is behind, so memory and
    /// level 0 do not grow without bound. It takes the writer's guard to show the writer lock
    /// is held: other writers queue behind the one that waits.
    fn wait_for_room(&self, _writer: &MutexGuard<'_, WriterState>) -> Result<()> {
        let mut delayed = false;
        loop {
            let state = self.read_state();
            let level0 = state.version.level(0).len();
            if !delayed && level0 >= self.options.l0_slowdown_trigger {
                self.counters.write_stalls.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
                delayed = true;
                continue;
            }
            let too_many_frozen = state.immutable.len() >= self.options.max_immutable_memtables;
            if !too_many_frozen && level0 < self.options.l0_stop_trigger {
                return Ok(());
            }
            if !delayed {
                self.counters.write_stalls.fetch_add(1, Ordering::Relaxed);
                delayed = true;
            }
            let background = lock(&self.background);
            if let Some(reason) = &background.error {
                return Err(Error::WritesRefused {
                    reason: reason.clone(),
                });
            }
            self.background_cv.notify_all();
            let _ = self
                .background_cv
                .wait_timeout(background, Duration::from_millis(50));
        }
    }

    /// Freezes the active memtable and starts a new one with a new WAL file.
    fn freeze_memtable(&self, writer: &mut WriterState) -> Result<()> {
        let number = self.new_file_number();
        let path = self.path_of(&filename::log_file_name(number));
        let opened = self.fs.create(&path).and_then(|file| {
            // The new log's directory entry must be durable before synced writes land in it.
            self.fs.sync_dir(&self.dir).map(|()| file)
        });
        // The old log is synced, not just flushed: a synced write in the new log makes every
        // earlier write durable, and the unsynced writes at the end of the old log are
        // earlier. Without this a power loss could keep a synced write in the new log and
        // drop unsynced ones before it, leaving a hole in the recovered history.
        let file = match opened.and_then(|f| writer.wal.sync().map(|()| f)) {
            Ok(file) => file,
            Err(e) => {
                self.fail_writes(format!("starting a new WAL failed: {e}"));
                return Err(e);
            }
        };
        writer.wal = LogWriter::new(file);
        self.replace_read_state(|old| {
            let mut immutable = vec![Arc::clone(&old.mem)];
            immutable.extend(old.immutable.iter().cloned());
            ReadState {
                mem: Arc::new(MemTable::new(number)),
                immutable,
                version: Arc::clone(&old.version),
            }
        });
        self.background_cv.notify_all();
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        {
            let mut writer = lock(&self.writer);
            self.refuse_if_failed()?;
            if !self.read_state().mem.is_empty() {
                self.freeze_memtable(&mut writer)?;
            }
        }
        self.wait_until(|inner, _| inner.read_state().immutable.is_empty())
    }

    /// Blocks until `done` holds, waking whenever background work finishes; fails if
    /// background work failed.
    fn wait_until(&self, done: impl Fn(&Inner, &BackgroundState) -> bool) -> Result<()> {
        let mut background = lock(&self.background);
        loop {
            if let Some(reason) = &background.error {
                return Err(Error::WritesRefused {
                    reason: reason.clone(),
                });
            }
            if done(self, &background) {
                return Ok(());
            }
            self.background_cv.notify_all();
            background = self
                .background_cv
                .wait_timeout(background, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    // ---- background work -------------------------------------------------------------

    fn has_background_work(&self) -> bool {
        let state = self.read_state();
        !state.immutable.is_empty() || compaction::needs_compaction(&state.version, &self.options)
    }

    fn background_loop(&self) {
        loop {
            {
                let mut background = lock(&self.background);
                loop {
                    if background.shutdown {
                        return;
                    }
                    if background.error.is_none() && self.has_background_work() {
                        background.busy = true;
                        break;
                    }
                    background = self
                        .background_cv
                        .wait_timeout(background, Duration::from_millis(100))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
            if let Err(e) = self.do_background_step() {
                self.fail_writes(format!("background flush or compaction failed: {e}"));
            }
            lock(&self.background).busy = false;
            self.background_cv.notify_all();
        }
    }

    /// Flushes the oldest frozen memtable if there is one, else runs one compaction.
    fn do_background_step(&self) -> Result<()> {
        let mut shape = lock(&self.shape);
        let state = self.read_state();
        if let Some(oldest) = state.immutable.last() {
            return self.flush_memtable(&mut shape, Arc::clone(oldest));
        }
        let picked = compaction::pick(&state.version, &self.options, &mut shape.compact_cursor);
        match picked {
            Some(job) => self.run_compaction(&mut shape, job),
            None => Ok(()),
        }
    }

    fn table_writer(&self) -> TableWriter<'_> {
        TableWriter {
            dir: &self.dir,
            options: &self.options,
            env: &self.table_env,
            next_file_number: &self.next_file_number,
        }
    }

    fn flush_memtable(&self, shape: &mut ShapeState, mem: Arc<MemTable>) -> Result<()> {
        let entries = NewestVersions::new(mem.iter_from(Bound::Unbounded), SeqNo::MAX, false);
        let NewTables { added, opened } =
            self.table_writer()
                .write(entries, 0, mem.len() as u64, false)?;
        let state = self.read_state();
        // Logs older than the oldest memtable still unflushed hold nothing needed any more.
        let live_log = state
            .immutable
            .iter()
            .rev()
            .find(|m| !Arc::ptr_eq(m, &mem))
            .unwrap_or(&state.mem)
            .log_number();
        let edit = VersionEdit {
            log_number: Some(live_log),
            next_file_number: Some(self.next_file_number.load(Ordering::SeqCst)),
            last_seq: Some(self.visible_seq.load(Ordering::Acquire)),
            added,
            removed: Vec::new(),
        };
        shape.manifest.append(&edit)?;
        self.replace_read_state(|old| ReadState {
            mem: Arc::clone(&old.mem),
            immutable: old
                .immutable
                .iter()
                .filter(|m| !Arc::ptr_eq(m, &mem))
                .cloned()
                .collect(),
            version: Arc::new(old.version.apply(&edit, &opened)),
        });
        self.counters.flushes.fetch_add(1, Ordering::Relaxed);
        self.remove_obsolete_logs(live_log);
        Ok(())
    }

    fn run_compaction(&self, shape: &mut ShapeState, job: Compaction) -> Result<()> {
        let expected_keys = job.all_inputs().map(|t| t.meta.entries).sum::<u64>();
        let NewTables { added, opened } = self.table_writer().write(
            job.merged_entries(),
            job.output_level as u32,
            expected_keys,
            true,
        )?;
        // Each input is removed from the level it lives in (a full compaction takes inputs
        // from every level).
        let removed: Vec<(u32, u64)> = job
            .all_inputs()
            .map(|t| (t.meta.level, t.meta.number))
            .collect();
        let edit = VersionEdit {
            log_number: None,
            next_file_number: Some(self.next_file_number.load(Ordering::SeqCst)),
            last_seq: None,
            added,
            removed,
        };
        shape.manifest.append(&edit)?;
        self.replace_read_state(|old| ReadState {
            mem: Arc::clone(&old.mem),
            immutable: old.immutable.clone(),
            version: Arc::new(old.version.apply(&edit, &opened)),
        });
        self.counters.compactions.fetch_add(1, Ordering::Relaxed);
        // The manifest no longer names the inputs. Readers may still hold them (an iterator
        // over an older version), and the table cache may need to open their files again for
        // those readers: each file is deleted when the last holder of its table lets go.
        for input in job.all_inputs() {
            input.table.mark_obsolete();
        }
        Ok(())
    }

    fn remove_obsolete_logs(&self, live_log: u64) {
        if let Ok(names) = self.fs.list(&self.dir) {
            for name in names {
                if let Some(FileKind::Log(n)) = filename::parse_file_name(&name) {
                    if n < live_log {
                        let _ = self.fs.remove(&self.path_of(&name));
                    }
                }
            }
        }
    }

    // ---- stats -----------------------------------------------------------------------

    fn stats(&self) -> Stats {
        let counters = self.table_env.counters.snapshot();
        let state = self.read_state();
        let version = &state.version;
        let mut levels = Vec::with_capacity(version.num_levels());
        let mut tables = Vec::new();
        let mut filter_memory_bytes = 0;
        let mut index_memory_bytes = 0;
        for level in 0..version.num_levels() {
            let mut summary = LevelStats::default();
            for handle in version.level(level) {
                summary.tables += 1;
                summary.bytes += handle.meta.file_size;
                summary.entries += handle.meta.entries;
                let params = handle.table.filter_params();
                let filter_bytes = handle.table.filter_memory_bytes() as u64;
                filter_memory_bytes += filter_bytes;
                index_memory_bytes += handle.table.index_memory_bytes() as u64;
                tables.push(TableStats {
                    level,
                    number: handle.meta.number,
                    file_size: handle.meta.file_size,
                    entries: handle.meta.entries,
                    smallest_key: handle.meta.smallest_key.clone(),
                    largest_key: handle.meta.largest_key.clone(),
                    bits_per_key: params.map(|p| p.bits_per_key()),
                    hashes: params.map(|p| p.hashes()),
                    predicted_false_positive_rate: params
                        .map(|p| p.predicted_false_positive_rate()),
                    filter_bytes,
                });
            }
            levels.push(summary);
        }
        Stats {
            filter_probes: counters.filter_probes,
            filter_negatives: counters.filter_negatives,
            filter_positives: counters.filter_positives,
            filter_true_positives: counters.filter_true_positives,
            data_block_reads: counters.data_block_reads,
            bytes_read: counters.bytes_read,
            levels,
            tables,
            memtable_bytes: state.mem.approximate_bytes() as u64,
            immutable_memtables: state.immutable.len(),
            last_sequence: self.visible_seq.load(Ordering::Acquire),
            flushes: self.counters.flushes.load(Ordering::Relaxed),
            compactions: self.counters.compactions.load(Ordering::Relaxed),
            write_stalls: self.counters.write_stalls.load(Ordering::Relaxed),
            filter_memory_bytes,
            index_memory_bytes,
            block_cache: self
                .table_env
                .block_cache
                .as_ref()
                .map(|c| c.stats())
                .unwrap_or_default(),
            table_cache: self.table_env.table_cache.stats(),
        }
    }
}

// ---- recovery ----------------------------------------------------------------------------

/// Opens (or creates) the store's files: reads the manifest, opens every live table, replays
/// WAL files not yet flushed into a level-0 table, and starts a fresh manifest and WAL.
fn recover(dir: PathBuf, fs: SharedFs, options: Options, lock: Box<dyn FileLock>) -> Result<Inner> {
    let table_env = table_env(&fs, &options);
    let recovered = if fs.exists(&dir.join(filename::CURRENT)) {
        Some(manifest::recover_manifest(fs.as_ref(), &dir)?)
    } else {
        None
    };
    let names = fs.list(&dir)?;
    let highest_on_disk = names
        .iter()
        .filter_map(|n| filename::parse_file_name(n))
        .filter_map(|k| k.number())
        .max()
        .unwrap_or(0);
    let (mut metas, log_number, next_file, last_seq) = match &recovered {
        Some(r) => (
            r.tables.clone(),
            r.log_number,
            r.next_file_number,
            r.last_seq,
        ),
        None => (Vec::new(), 0, 1, 0),
    };
    let next_file = next_file.max(highest_on_disk + 1);
    // A file the manifest relies on is missing: opening anyway would delete the tables a lost
    // edit added, and their data with them.
    if let Some(missing) = recovered
        .as_ref()
        .and_then(|r| r.missing_files(&dir, &names).into_iter().next())
    {
        return Err(missing);
    }

    let mut opened = HashMap::new();
    for meta in &metas {
        if meta.level as usize >= options.num_levels {
            return Err(Error::corruption(
                &dir.join(filename::table_file_name(meta.number)),
                None,
                format!(
                    "manifest places the table at level {} of {}",
                    meta.level, options.num_levels
                ),
            ));
        }
        let path = dir.join(filename::table_file_name(meta.number));
        opened.insert(meta.number, Table::open_in(&path, &table_env)?);
    }

    // Replay every log at or after the manifest's log number, oldest first.
    let mut logs: Vec<u64> = names
        .iter()
        .filter_map(|n| match filename::parse_file_name(n) {
            Some(FileKind::Log(number)) if number >= log_number => Some(number),
            _ => None,
        })
        .collect();
    logs.sort_unstable();
    let replayed = replay_logs(fs.as_ref(), &dir, &logs, options.wal_recovery_mode)?;
    let (replay, report) = (replayed.mem, replayed.report);
    let max_seq = replayed.max_seq.map_or(last_seq, |s| s.max(last_seq));

    let file_numbers = AtomicU64::new(next_file);
    if !replay.is_empty() {
        let writer = TableWriter {
            dir: &dir,
            options: &options,
            env: &table_env,
            next_file_number: &file_numbers,
        };
        let entries = NewestVersions::new(replay.iter_from(Bound::Unbounded), SeqNo::MAX, false);
        let written = writer.write(entries, 0, replay.len() as u64, false)?;
        opened.extend(written.opened);
        metas.extend(written.added);
    }
    let new_log = file_numbers.fetch_add(1, Ordering::SeqCst);
    let manifest_number = file_numbers.fetch_add(1, Ordering::SeqCst);
    let next_file = file_numbers.into_inner();

    let log_path = dir.join(filename::log_file_name(new_log));
    let log_file = fs.create(&log_path)?;
    fs.sync_dir(&dir)?;

    let snapshot = VersionEdit {
        log_number: Some(new_log),
        next_file_number: Some(next_file),
        last_seq: Some(max_seq),
        added: metas,
        removed: Vec::new(),
    };
    let version = Version::empty(options.num_levels).apply(&snapshot, &opened);
    let manifest = ManifestWriter::create(fs.as_ref(), &dir, manifest_number, &snapshot)?;

    // The new manifest is current: everything it does not name is garbage from before.
    remove_unreferenced_files(fs.as_ref(), &dir, &snapshot, manifest_number, new_log);

    Ok(Inner {
        read_state: RwLock::new(Arc::new(ReadState {
            mem: Arc::new(MemTable::new(new_log)),
            immutable: Vec::new(),
            version: Arc::new(version),
        })),
        writer: Mutex::new(WriterState {
            wal: LogWriter::new(log_file),
        }),
        shape: Mutex::new(ShapeState {
            manifest,
            compact_cursor: vec![Vec::new(); options.num_levels],
        }),
        visible_seq: AtomicU64::new(max_seq),
        next_file_number: AtomicU64::new(next_file),
        background: Mutex::new(BackgroundState::default()),
        background_cv: Condvar::new(),
        table_env,
        counters: Counters::default(),
        recovery: report,
        dir,
        fs,
        options,
        _lock: lock,
    })
}

/// What the store's tables read through: its own block cache of `block_cache_size` bytes (or
/// the shared one it was given, or none) and a table cache of `max_open_files`.
fn table_env(fs: &SharedFs, options: &Options) -> TableEnv {
    let block_cache = match (&options.block_cache, options.block_cache_size) {
        (Some(shared), _) => Some(Arc::clone(shared)),
        (None, 0) => None,
        (None, bytes) => Some(Arc::new(BlockCache::new(bytes))),
    };
    TableEnv {
        fs: Arc::clone(fs),
        counters: Arc::new(ReadCounters::default()),
        block_cache,
        table_cache: Arc::new(TableCache::new(Arc::clone(fs), options.max_open_files)),
        store_open: Arc::new(std::sync::atomic::AtomicBool::new(true)),
    }
}

/// The writes recovered from WAL files.
struct Replayed {
    mem: Arc<MemTable>,
    /// Highest sequence number replayed, if any write was.
    max_seq: Option<SeqNo>,
    report: RecoveryReport,
}

/// Replays WAL files `logs` (oldest first) into a memtable.
///
/// A log may end in a torn record: the write it held was never acknowledged. But a later log
/// that holds writes after such a tear would leave a hole in the history (later writes kept,
/// earlier ones lost). That is a corruption error under `TolerateTornTail`; under
/// `PointInTime` replay stops at the tear and the later logs' writes are dropped and
/// reported.
fn replay_logs(
    fs: &dyn crate::fs::FileSystem,
    dir: &Path,
    logs: &[u64],
    mode: WalRecoveryMode,
) -> Result<Replayed> {
    let read_mode = match mode {
        WalRecoveryMode::TolerateTornTail => RecoveryMode::TolerateTornTail,
        WalRecoveryMode::PointInTime => RecoveryMode::PointInTime,
    };
    let mem = Arc::new(MemTable::new(0));
    let mut report = RecoveryReport::default();
    let mut max_seq = None;
    let mut tear: Option<(PathBuf, u64)> = None;
    for number in logs {
        let path = dir.join(filename::log_file_name(*number));
        let contents = wal::read_log(fs, &path, read_mode)?;
        if let Some((torn_log, offset)) = &tear {
            if contents.records.is_empty() {
                continue;
            }
            if mode == WalRecoveryMode::TolerateTornTail {
                return Err(Error::corruption(
                    torn_log,
                    Some(*offset),
                    format!(
                        "the log ends in a torn record, yet the later log {} holds writes: \
                         replaying them would leave a hole (open with \
                         WalRecoveryMode::PointInTime to keep the writes before the tear)",
                        path.display()
                    ),
                ));
            }
            let size = fs.open_read(&path)?.size();
            report.dropped_tails.push((path, 0, size));
            continue;
        }
        if let Some(tail) = &contents.torn_tail {
            report
                .dropped_tails
                .push((path.clone(), tail.offset, tail.dropped_bytes));
            tear = Some((path.clone(), tail.offset));
        }
        for record in &contents.records {
            let entries = WriteBatch::decode(record, &path)?;
            if let Some(last) = entries.last() {
                max_seq = Some(max_seq.map_or(last.seq, |m: SeqNo| m.max(last.seq)));
            }
            mem.apply(entries);
            report.batches_replayed += 1;
        }
    }
    Ok(Replayed {
        mem,
        max_seq,
        report,
    })
}

/// Tables written by one flush or compaction: what the manifest records, and the readers.
struct NewTables {
    added: Vec<TableMeta>,
    opened: HashMap<u64, Table>,
}

/// Writes sorted entries into new table files; used by flush, compaction and recovery (which
/// writes tables before the store is assembled).
struct TableWriter<'a> {
    dir: &'a Path,
    options: &'a Options,
    env: &'a TableEnv,
    next_file_number: &'a AtomicU64,
}

impl TableWriter<'_> {
    fn table_options(&self) -> TableOptions {
        TableOptions {
            block_size: self.options.block_size,
            filter_policy: self.options.filter_policy,
            compression: self.options.compression,
            ..TableOptions::default()
        }
    }

    /// Writes `entries` into tables at `level`, cut at `table_size` bytes when asked.
    fn write(
        &self,
        entries: impl Iterator<Item = Result<Entry>>,
        level: u32,
        expected_keys: u64,
        cut_at_table_size: bool,
    ) -> Result<NewTables> {
        let mut out = NewTables {
            added: Vec::new(),
            opened: HashMap::new(),
        };
        let mut current: Option<(u64, TableBuilder)> = None;
        for entry in entries {
            let entry = entry?;
            let (_, builder) = match &mut current {
                Some(open) => open,
                None => current.insert(self.start_table(expected_keys)?),
            };
            builder.add(&entry)?;
            if cut_at_table_size && builder.estimated_file_size() >= self.options.table_size {
                let (number, builder) = current.take().expect("a table is open");
                self.finish_table(number, builder, level, &mut out)?;
            }
        }
        if let Some((number, builder)) = current {
            self.finish_table(number, builder, level, &mut out)?;
        }
        Ok(out)
    }

    fn start_table(&self, expected_keys: u64) -> Result<(u64, TableBuilder)> {
        let number = self.next_file_number.fetch_add(1, Ordering::SeqCst);
        let path = self.dir.join(filename::table_file_name(number));
        let builder = TableBuilder::new(
            Arc::clone(&self.env.fs),
            &path,
            self.table_options(),
            expected_keys,
        )?;
        Ok((number, builder))
    }

    fn finish_table(
        &self,
        number: u64,
        builder: TableBuilder,
        level: u32,
        out: &mut NewTables,
    ) -> Result<()> {
        let props = builder.finish()?;
        let path = self.dir.join(filename::table_file_name(number));
        let table = Table::open_in(&path, self.env)?;
        out.added.push(TableMeta {
            number,
            level,
            file_size: props.file_size,
            smallest_key: props.smallest_key,
            largest_key: props.largest_key,
            smallest_seq: props.smallest_seq,
            largest_seq: props.largest_seq,
            entries: props.entries,
        });
        out.opened.insert(number, table);
        Ok(())
    }
}

fn remove_unreferenced_files(
    fs: &dyn crate::fs::FileSystem,
    dir: &Path,
    live: &VersionEdit,
    manifest: u64,
    log: u64,
) {
    let live_tables: std::collections::HashSet<u64> = live.added.iter().map(|m| m.number).collect();
    let Ok(names) = fs.list(dir) else { return };
    for name in names {
        let obsolete = match filename::parse_file_name(&name) {
            Some(FileKind::Table(n)) => !live_tables.contains(&n),
            Some(FileKind::Log(n)) => n < log,
            Some(FileKind::Manifest(n)) => n != manifest,
            Some(FileKind::Temp(_) | FileKind::CurrentTemp) => true,
            // A table builder interrupted before its rename leaves `NNNNNN.sst.tmp`.
            _ => name.ends_with(".tmp"),
        };
        if obsolete {
            let _ = fs.remove(&dir.join(&name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, OsFileSystem};

    /// Writes WAL `number` in `dir` holding one batch per key, each putting `key` = `key`.
    fn write_log(dir: &Path, number: u64, first_seq: SeqNo, keys: &[&str]) -> PathBuf {
        let path = dir.join(filename::log_file_name(number));
        let mut log = LogWriter::new(OsFileSystem.create(&path).unwrap());
        for (i, key) in keys.iter().enumerate() {
            let mut batch = WriteBatch::new();
            batch.put(key, key);
            log.add_record(&batch.encode(first_seq + i as u64)).unwrap();
        }
        log.sync().unwrap();
        path
    }

    /// Cuts the last few bytes off a log: its last record is torn.
    fn tear(path: &Path) {
        let bytes = std::fs::read(path).unwrap();
        std::fs::write(path, &bytes[..bytes.len() - 3]).unwrap();
    }

    #[test]
    fn a_torn_log_followed_by_writes_is_a_hole() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_log(dir.path(), 5, 1, &["a", "b", "c"]);
        tear(&first);
        write_log(dir.path(), 6, 4, &["d"]);

        let strict = replay_logs(
            &OsFileSystem,
            dir.path(),
            &[5, 6],
            WalRecoveryMode::TolerateTornTail,
        );
        match strict {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, first),
            other => panic!(
                "expected a corruption error naming the torn log, got {:?}",
                other.map(|r| r.report)
            ),
        }

        let salvaged = replay_logs(
            &OsFileSystem,
            dir.path(),
            &[5, 6],
            WalRecoveryMode::PointInTime,
        )
        .unwrap();
        assert_eq!(
            salvaged.report.batches_replayed, 2,
            "a and b, before the tear"
        );
        assert_eq!(salvaged.max_seq, Some(2));
        assert!(salvaged.mem.get(b"b", SeqNo::MAX).is_some());
        assert!(
            salvaged.mem.get(b"d", SeqNo::MAX).is_none(),
            "d comes after the hole"
        );
        assert_eq!(salvaged.report.dropped_tails.len(), 2);
    }

    #[test]
    fn a_torn_log_followed_only_by_empty_logs_is_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let first = write_log(dir.path(), 5, 1, &["a", "b"]);
        tear(&first);
        write_log(dir.path(), 6, 3, &[]);
        let replayed = replay_logs(
            &OsFileSystem,
            dir.path(),
            &[5, 6],
            WalRecoveryMode::TolerateTornTail,
        )
        .unwrap();
        assert_eq!(replayed.report.batches_replayed, 1);
        assert_eq!(replayed.report.dropped_tails.len(), 1);
        assert_eq!(replayed.report.dropped_tails[0].0, first);
    }
}
