//! Opening a store: the manifest, the live tables, the WAL replayed (`replay`), and garbage
//! from before.

use std::collections::HashMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

use super::replay::{replay_logs, Replayed};
use super::table_writer::{Cuts, TableWriter};
use super::{
    write_group, write_rate, BackgroundState, Counters, Inner, ReadState, RecoveryReport,
    ShapeState, Tree, WriterState,
};
use crate::cache::TableCache;
use crate::entry::SeqNo;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::filter_plan::{
    self, load_filters, restore_lookup_counts, saved, CountSpans, TableLookups,
};
use crate::fs::descriptors::{self, DescriptorRoom};
use crate::fs::{FileLock, FileSystem, SharedFs};
use crate::iter::NewestVersions;
use crate::keyspace::{KeyspaceDef, KeyspaceId};
use crate::manifest::{
    self, KeyspaceRecord, ManifestWriter, RecordedPolicy, TableMeta, VersionEdit, WriteTotals,
};
use crate::memtable::MemTable;
use crate::metrics::ReadCounters;
use crate::options::Options;
use crate::range_tombstone::RangeTombstone;
use crate::seq_time::SeqTimes;
use crate::sstable::{BlockCache, IndexCache};
use crate::sstable::{FilterPolicy, Table, TableEnv};
use crate::version::Version;
use crate::wal::LogWriter;

/// What a store's files hold when it is opened: the manifest's tables, opened, and the writes
/// of the logs not yet flushed, replayed in memory. Reading it changes no file.
struct OnDisk {
    /// The live tables, as the manifest records them.
    metas: Vec<TableMeta>,
    opened: HashMap<u64, Table>,
    /// Above every file number in use (the manifest's counter, and every file present).
    next_file: u64,
    /// The highest sequence number in use, in the manifest or the logs.
    last_seq: SeqNo,
    replayed: Replayed,
    /// The store's write I/O so far, as the manifest records it.
    write_totals: WriteTotals,
    /// The filter policy the store recorded.
    filter_policy: Option<FilterPolicy>,
    /// The keyspaces other than the default, and the number the next one takes.
    keyspaces: Vec<KeyspaceRecord>,
    next_keyspace: KeyspaceId,
    /// The live range deletions the manifest records.
    range_tombstones: Vec<(KeyspaceId, RangeTombstone)>,
    /// When sequence numbers were written: the manifest's samples, and one for the writes
    /// replayed, taken now (they were made by now).
    seq_times: SeqTimes,
}

/// Reads the manifest (none for a new store), opens every live table and replays the logs the
/// manifest still needs, oldest first.
fn read_on_disk(dir: &Path, fs: &SharedFs, options: &Options, env: &TableEnv) -> Result<OnDisk> {
    let recovered = if fs.exists(&dir.join(filename::CURRENT)) {
        Some(manifest::recover_manifest(fs.as_ref(), dir)?)
    } else {
        None
    };
    let names = fs.list(dir)?;
    let highest_on_disk = names
        .iter()
        .filter_map(|n| filename::parse_file_name(n))
        .filter_map(|k| k.number())
        .max()
        .unwrap_or(0);
    let (metas, log_number, next_file, last_seq) = match &recovered {
        Some(r) => (
            r.tables.clone(),
            r.log_number,
            r.next_file_number,
            r.last_seq,
        ),
        None => (Vec::new(), 0, 1, 0),
    };
    // A file the manifest relies on is missing: opening anyway would delete the tables a lost
    // edit added, and their data with them.
    if let Some(missing) = recovered
        .as_ref()
        .and_then(|r| r.missing_files(dir, &names).into_iter().next())
    {
        return Err(missing);
    }

    let mut opened = HashMap::new();
    for meta in &metas {
        if meta.level as usize >= options.tuning.num_levels {
            return Err(Error::corruption(
                &dir.join(filename::table_file_name(meta.number)),
                None,
                format!(
                    "manifest places the table at level {} of {}",
                    meta.level, options.tuning.num_levels
                ),
            ));
        }
        let path = dir.join(filename::table_file_name(meta.number));
        // Under a filter memory limit each filter is read once the store knows how much of
        // it to keep (`filter_plan::load_filters`).
        let table = match options.tuning.filter_memory_limit {
            Some(_) => Table::open_deferring_filter(&path, env)?,
            None => Table::open_in(&path, env)?,
        };
        opened.insert(meta.number, table);
    }

    let mut logs: Vec<u64> = names
        .iter()
        .filter_map(|n| match filename::parse_file_name(n) {
            Some(FileKind::Log(number)) if number >= log_number => Some(number),
            _ => None,
        })
        .collect();
    logs.sort_unstable();
    // Tables hold only writes from logs older than the manifest's log number, so every write
    // replayed must be numbered above all of theirs.
    let tables_seq = metas.iter().map(|m| m.largest_seq).max().unwrap_or(0);
    let replayed = replay_logs(
        fs.as_ref(),
        dir,
        &logs,
        options.wal_recovery_mode,
        tables_seq,
    )?;
    let last_seq = replayed.max_seq.map_or(last_seq, |s| s.max(last_seq));
    Ok(OnDisk {
        metas,
        opened,
        next_file: next_file.max(highest_on_disk + 1),
        last_seq,
        replayed,
        filter_policy: (recovered.as_ref())
            .and_then(|r| r.filter_policy)
            .and_then(|p| p.policy()),
        keyspaces: (recovered.as_ref()).map_or_else(Vec::new, |r| r.keyspaces.clone()),
        next_keyspace: recovered.as_ref().map_or(1, |r| r.next_keyspace),
        range_tombstones: (recovered.as_ref())
            .map_or_else(Vec::new, |r| r.range_tombstones.clone()),
        seq_times: {
            let samples = (recovered.as_ref()).map_or_else(Vec::new, |r| r.seq_times.clone());
            let mut times = SeqTimes::recovered(samples, last_seq);
            times.note(last_seq, crate::seq_time::now_secs());
            times
        },
        write_totals: recovered.and_then(|r| r.write_totals).unwrap_or_default(),
    })
}

/// Opens (or creates) the store's files: reads what is on disk, writes the replayed writes
/// into a level-0 table, and starts a fresh manifest and WAL.
pub(super) fn recover(
    dir: PathBuf,
    fs: SharedFs,
    mut options: Options,
    lock: Box<dyn FileLock>,
) -> Result<Inner> {
    let table_env = table_env(&fs, &options);
    let fs = Arc::clone(&table_env.fs);
    let OnDisk {
        mut metas,
        mut opened,
        next_file,
        last_seq,
        replayed,
        mut write_totals,
        filter_policy,
        keyspaces,
        next_keyspace,
        mut range_tombstones,
        mut seq_times,
    } = read_on_disk(&dir, &fs, &options, &table_env)?;
    // Every table written from here on, the replayed writes' first, takes the policy the
    // store recorded unless the options give one; the new manifest records it.
    options.filter_policy = Some(options.filter_policy_over(filter_policy));
    let defs = keyspace_defs(&options, &keyspaces);

    let file_numbers = AtomicU64::new(next_file);
    let mut replay_added: Vec<TableMeta> = Vec::new();
    // Each live keyspace's replayed writes go to its level 0; a dropped keyspace's are left
    // out.
    for def in &defs {
        let Some(replay) = replayed.mems.get(&def.id).filter(|m| !m.is_empty()) else {
            continue;
        };
        // The replayed range deletions join the manifest's, as a flush's would.
        (range_tombstones).extend(replay.range_tombstones().into_iter().map(|t| (def.id, t)));
        let writer = TableWriter {
            dir: &dir,
            options: def.options.clone(),
            keyspace: def.id,
            env: &table_env,
            next_file_number: &file_numbers,
            shape: filter_plan::filter_groups(
                options.tuning.num_levels,
                (metas.iter())
                    .filter(|m| m.keyspace == def.id)
                    .map(filter_plan::Span::from),
            ),
            job_in_shape: false,
        };
        let newest = NewestVersions::new(
            replay.iter_from(Bound::Unbounded),
            SeqNo::MAX,
            false,
            Bound::Unbounded,
        );
        let written = writer.write(newest, 0, replay.len() as u64, Cuts::Never)?;
        opened.extend(written.opened);
        replay_added.extend(written.added);
    }
    if !replay_added.is_empty() {
        count_replay_flush(&mut write_totals, &replay_added);
        metas.extend(replay_added);
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
        last_seq: Some(last_seq),
        added: metas,
        removed: Vec::new(),
        write_totals: Some(write_totals.clone()),
        filter_policy: Some(RecordedPolicy::of(&options.policy())),
        next_keyspace: crate::keyspace::recorded_next(next_keyspace),
        keyspaces,
        dropped_keyspaces: Vec::new(),
        added_ranges: range_tombstones,
        removed_ranges: Vec::new(),
        seq_times: {
            seq_times.take_unpersisted();
            seq_times.all().to_vec()
        },
    };
    let (saved_lookups, refused) = saved_lookup_counts(&fs, &dir, &table_env);
    let count_spans = CountSpans::new(Arc::clone(&table_env.counters));
    let mut counts = SavedCounts {
        saved: &saved_lookups,
        spans: &count_spans,
        restored: 0,
    };
    let trees = defs
        .into_iter()
        .map(|def| {
            let mem = def.new_memtable(new_log);
            tree_of(def, mem, &snapshot, &opened, &options, &mut counts)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut replayed = replayed;
    replayed.report.tables_lookup_counts_restored = counts.restored;
    replayed.report.lookup_counts_refused = refused;
    let manifest = ManifestWriter::create(fs.as_ref(), &dir, manifest_number, &snapshot)?;

    // The new manifest is current: everything it does not name is garbage from before.
    remove_unreferenced_files(fs.as_ref(), &dir, &snapshot, manifest_number, new_log);

    let parts = Parts {
        dir,
        fs,
        options,
        table_env,
        count_spans,
        trees,
        next_keyspace,
        last_seq,
        next_file,
        recovery: replayed.report,
        write_totals,
        seq_times,
    };
    Ok(parts.assemble(Some(LogWriter::new(log_file)), Some(manifest), Some(lock)))
}

/// The store's keyspaces: the default, then those the manifest records, each with the
/// store's options and its own applied.
fn keyspace_defs(options: &Options, records: &[KeyspaceRecord]) -> Vec<Arc<KeyspaceDef>> {
    let recorded = records
        .iter()
        .map(|r| KeyspaceDef::recorded(r.id, r.name.clone(), r.options, options));
    std::iter::once(KeyspaceDef::default_of(options))
        .chain(recorded)
        .map(Arc::new)
        .collect()
}

/// The lookup counts saved when the store last closed, as its trees take them over: the
/// spans they start, and how many tables took theirs.
struct SavedCounts<'a> {
    saved: &'a HashMap<u64, TableLookups>,
    spans: &'a CountSpans,
    restored: usize,
}

/// Keyspace `def`'s tree: `mem`, over its tables of `snapshot` (whose readers are `opened`),
/// with their filters read as its share of the filter memory limit allows.
fn tree_of(
    def: Arc<KeyspaceDef>,
    mem: Arc<MemTable>,
    snapshot: &VersionEdit,
    opened: &HashMap<u64, Table>,
    store: &Options,
    counts: &mut SavedCounts,
) -> Result<Arc<Tree>> {
    let version = Version::empty(store.tuning.num_levels).apply(def.id, snapshot, opened);
    // Before the plan: it spends the filter memory by these counts.
    counts.restored += restore_lookup_counts(&version, counts.saved, counts.spans);
    for t in version.tables() {
        counts.spans.opened(t.meta.number);
    }
    let entries = |keyspace: Option<KeyspaceId>| -> u64 {
        (snapshot.added.iter())
            .filter(|t| keyspace.is_none_or(|k| t.keyspace == k))
            .map(|t| t.entries)
            .sum()
    };
    let mut options = def.options.clone();
    options.tuning.filter_memory_limit = super::keyspaces::limit_share(
        store.tuning.filter_memory_limit,
        entries(Some(def.id)),
        entries(None),
    );
    let version = load_filters(version, &options, counts.spans)?;
    Ok(Arc::new(Tree::new(def, mem, Arc::new(version))))
}

/// The lookup counts saved when the store was last closed, where it counts lookups; and why
/// the file was not used, when it was there and did not read back (the store then starts
/// from the prediction, as without it: the counts are a hint).
fn saved_lookup_counts(
    fs: &SharedFs,
    dir: &Path,
    env: &TableEnv,
) -> (HashMap<u64, TableLookups>, Option<String>) {
    if !env.count_lookups {
        return (HashMap::new(), None);
    }
    match saved::load(fs.as_ref(), dir) {
        Ok(saved) => (saved.unwrap_or_default(), None),
        Err(e) => (HashMap::new(), Some(e.to_string())),
    }
}

/// Counts the level-0 tables recovery wrote from the replayed logs as a flush.
fn count_replay_flush(totals: &mut WriteTotals, added: &[TableMeta]) {
    if totals.levels.is_empty() {
        totals.levels.push(Default::default());
    }
    totals.flushes += 1;
    totals.levels[0].bytes_written += added.iter().map(|t| t.file_size).sum::<u64>();
}

/// Opens the store's files without writing a byte: the manifest's tables, and the logs'
/// writes replayed into a memtable that stays in memory. `lock` is the shared lock held
/// against writers, if the store has a lock file.
pub(super) fn open_read_only(
    dir: PathBuf,
    fs: SharedFs,
    mut options: Options,
    lock: Option<Box<dyn FileLock>>,
) -> Result<Inner> {
    if !fs.exists(&dir.join(filename::CURRENT)) {
        refuse_store_without_current(fs.as_ref(), &dir)?;
        return Err(Error::InvalidArgument(format!(
            "no store at {} (read-only opens never create one)",
            dir.display()
        )));
    }
    let table_env = table_env(&fs, &options);
    let fs = Arc::clone(&table_env.fs);
    let on_disk = read_on_disk(&dir, &fs, &options, &table_env)?;
    options.filter_policy = Some(options.filter_policy_over(on_disk.filter_policy));
    let snapshot = VersionEdit {
        added: on_disk.metas,
        added_ranges: on_disk.range_tombstones,
        ..VersionEdit::default()
    };
    let mut replayed = on_disk.replayed.mems;
    let (saved_lookups, refused) = saved_lookup_counts(&fs, &dir, &table_env);
    let count_spans = CountSpans::new(Arc::clone(&table_env.counters));
    let mut counts = SavedCounts {
        saved: &saved_lookups,
        spans: &count_spans,
        restored: 0,
    };
    let trees = keyspace_defs(&options, &on_disk.keyspaces)
        .into_iter()
        .map(|def| {
            let mem = (replayed.remove(&def.id)).unwrap_or_else(|| def.new_memtable(0));
            let opened = &on_disk.opened;
            tree_of(def, mem, &snapshot, opened, &options, &mut counts)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut recovery = on_disk.replayed.report;
    recovery.tables_lookup_counts_restored = counts.restored;
    recovery.lookup_counts_refused = refused;
    let parts = Parts {
        dir,
        fs,
        options,
        table_env,
        count_spans,
        trees,
        next_keyspace: on_disk.next_keyspace,
        last_seq: on_disk.last_seq,
        next_file: on_disk.next_file,
        recovery,
        write_totals: on_disk.write_totals,
        seq_times: on_disk.seq_times,
    };
    Ok(parts.assemble(None, None, lock))
}

/// The pieces of an open store that recovery gathers.
struct Parts {
    dir: PathBuf,
    fs: SharedFs,
    options: Options,
    table_env: TableEnv,
    count_spans: CountSpans,
    trees: Vec<Arc<Tree>>,
    next_keyspace: KeyspaceId,
    last_seq: SeqNo,
    next_file: u64,
    recovery: RecoveryReport,
    write_totals: WriteTotals,
    seq_times: SeqTimes,
}

impl Parts {
    /// The store, with its WAL and manifest when it may write.
    fn assemble(
        self,
        wal: Option<LogWriter>,
        manifest: Option<ManifestWriter>,
        lock: Option<Box<dyn FileLock>>,
    ) -> Inner {
        let may_write = manifest.is_some();
        Inner {
            read_state: RwLock::new(Arc::new(ReadState { trees: self.trees })),
            write_queue: write_group::WriteQueue::new(self.options.tuning.group_commit_wait),
            write_rate: write_rate::WriteRate::new(self.options.tuning.delayed_write_rate),
            writer: Mutex::new(WriterState {
                wal,
                unsynced_logs: Vec::new(),
                freeze_failed: false,
            }),
            flushing: Mutex::new(()),
            shape: Mutex::new(ShapeState {
                manifest,
                discarded: Vec::new(),
                compacting: Default::default(),
                next_keyspace: self.next_keyspace,
            }),
            visible_seq: AtomicU64::new(self.last_seq),
            snapshots: Mutex::new(Default::default()),
            seq_times: Mutex::new(self.seq_times),
            batch_block_reads: Default::default(),
            filters_refit_at: Default::default(),
            // A read-only store runs no compactions, and counts nothing for them.
            level0_at_rest: (self.options.tuning.compact_level0_at_rest)
                .filter(|_| may_write)
                .map(|rest| super::level0_at_rest::Level0AtRest::new(rest, Instant::now())),
            governor: super::memory::governor(
                &self.options,
                (self.table_env.block_cache.as_ref())
                    .filter(|_| self.options.block_cache.is_none())
                    .map(|cache| cache.capacity()),
                (self.table_env.index_cache.as_ref()).map(|cache| cache.capacity()),
            ),
            next_file_number: AtomicU64::new(self.next_file),
            background: Mutex::new(BackgroundState::default()),
            background_cv: Condvar::new(),
            count_spans: self.count_spans,
            table_env: self.table_env,
            counters: Counters::starting_from(self.options.tuning.num_levels, &self.write_totals),
            recovery: self.recovery,
            dir: self.dir,
            fs: self.fs,
            options: self.options,
            _lock: lock,
        }
    }
}

/// What the store's tables read through: its own block cache of `block_cache_size` bytes (or
/// the shared one it was given, or none) and a table cache of `max_open_files`, or fewer when
/// the process's descriptor limit leaves less room. Its `fs`, which the whole store then
/// uses, meets a shortage of descriptors by having the table cache close files, and retries.
pub(super) fn table_env(fs: &SharedFs, options: &Options) -> TableEnv {
    let block_cache = match (&options.block_cache, options.block_cache_size) {
        (Some(shared), _) => Some(Arc::clone(shared)),
        (None, 0) => None,
        (None, bytes) => Some(Arc::new(BlockCache::new(bytes))),
    };
    let room = DescriptorRoom::new(Arc::clone(fs));
    let fs: SharedFs = room.clone();
    let capacity = descriptors::table_cache_capacity(options.max_open_files);
    let table_cache = Arc::new(TableCache::new(Arc::clone(&fs), capacity));
    // Weak: the cache holds the file system, which must not keep the cache alive.
    let cache = Arc::downgrade(&table_cache);
    room.set_make_room(Box::new(move || {
        cache.upgrade().is_some_and(|cache| cache.make_room())
    }));
    let index_cache = (options.tuning.index_cache_size)
        .filter(|&bytes| bytes > 0)
        .map(|bytes| Arc::new(IndexCache::for_index(bytes)));
    TableEnv {
        fs,
        counters: Arc::new(ReadCounters::default()),
        block_cache,
        index_cache,
        table_cache,
        store_open: Arc::new(std::sync::atomic::AtomicBool::new(true)),
        count_lookups: options.tuning.filter_memory_follows_lookups
            && options.tuning.filter_memory_limit.is_some(),
        prefix_extractor: options.prefix_extractor.clone(),
    }
}

pub(super) fn remove_unreferenced_files(
    fs: &dyn FileSystem,
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
            Some(
                FileKind::Temp(_)
                | FileKind::TableTemp(_)
                | FileKind::CurrentTemp
                | FileKind::LookupCountsTemp,
            ) => true,
            // Never a file whose name the store did not make.
            Some(FileKind::Current | FileKind::Lock | FileKind::LookupCounts) | None => false,
        };
        if obsolete {
            let _ = fs.remove(&dir.join(&name));
        }
    }
}

/// `Error::MissingCurrent` when `dir`, which has no `CURRENT`, holds a store's data: tables,
/// logs with writes in them, or manifests that record any table or write. (An empty log or a
/// manifest of an empty store is what a creation cut short leaves behind, and holds nothing.)
pub(super) fn refuse_store_without_current(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    if !fs.exists(dir) {
        return Ok(());
    }
    let mut found = Vec::new();
    for name in fs.list(dir)? {
        let path = dir.join(&name);
        let holds_data = match filename::parse_file_name(&name) {
            Some(FileKind::Table(_)) => true,
            Some(FileKind::Log(_)) => fs.open_read(&path).map_or(true, |f| f.size() > 0),
            Some(FileKind::Manifest(number)) => manifest::read_manifest(fs, &path, number)
                .map_or(true, |m| !m.tables.is_empty() || m.last_seq > 0),
            _ => false,
        };
        if holds_data {
            found.push(name);
        }
    }
    match found.is_empty() {
        true => Ok(()),
        false => Err(Error::MissingCurrent {
            dir: dir.to_path_buf(),
            files: found,
        }),
    }
}
