//! The store's shared state, below `Inner`: each keyspace's memtables and tables (`Tree`), the
//! set of them readers take at once (`ReadState`), the writer's log (`WriterState`), the
//! background threads' failures (`BackgroundState`) and the store's counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::entry::SeqNo;
use crate::error::{Error, Result};
use crate::keyspace::{KeyspaceDef, KeyspaceId, DEFAULT_ID};
use crate::manifest::{LevelTotals, ManifestWriter, WriteTotals};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::range_tombstone::{Gone, RangeTombstone, RangeTombstones};
use crate::version::Version;
use crate::wal::LogWriter;

/// One keyspace's memtables and tables.
pub(crate) struct Tree {
    pub(super) keyspace: Arc<KeyspaceDef>,
    pub(super) mem: Arc<MemTable>,
    /// Frozen memtables waiting to be flushed, newest first.
    pub(super) immutable: Vec<Arc<MemTable>>,
    pub(super) version: Arc<Version>,
}

impl Tree {
    pub(super) fn new(
        keyspace: Arc<KeyspaceDef>,
        mem: Arc<MemTable>,
        version: Arc<Version>,
    ) -> Tree {
        Tree {
            keyspace,
            mem,
            immutable: Vec::new(),
            version,
        }
    }

    pub(super) fn id(&self) -> KeyspaceId {
        self.keyspace.id
    }

    /// The options its tables and memtable take.
    pub(super) fn options(&self) -> &Options {
        &self.keyspace.options
    }

    /// The memtables holding anything, newest first.
    pub(super) fn memtables(&self) -> impl Iterator<Item = &Arc<MemTable>> {
        std::iter::once(&self.mem)
            .chain(&self.immutable)
            .filter(|m| !m.is_empty())
    }

    /// The newest sequence number at most `snapshot` of a range deletion covering `key`, in
    /// its memtables or its version: versions of `key` older than it are deleted.
    pub(super) fn range_covering_seq(&self, key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        let in_memtables = self
            .memtables()
            .filter_map(|m| m.covering_seq(key, snapshot));
        in_memtables
            .chain(self.version.range_covering_seq(key, snapshot))
            .max()
    }

    /// What a reader at `snapshot` takes for gone of `key`: versions older than its covering
    /// range deletion, and those numbered below `expired_below`.
    pub(super) fn gone(&self, key: &[u8], snapshot: SeqNo, expired_below: SeqNo) -> Gone {
        Gone {
            deleted_at: self.range_covering_seq(key, snapshot),
            expired_below,
        }
    }

    /// Every range deletion a reader at `snapshot` sees, as fragments; `None` when there is
    /// none (the usual case, which costs a reader nothing more).
    pub(super) fn range_fragments(&self, snapshot: SeqNo) -> Option<Arc<RangeTombstones>> {
        let in_memtables: Vec<RangeTombstone> = (self.memtables())
            .filter(|m| m.has_range_tombstones())
            .flat_map(|m| m.range_tombstones())
            .filter(|t| t.seq <= snapshot)
            .collect();
        let fragments = self.version.range_fragments();
        match (in_memtables.is_empty(), fragments.is_empty()) {
            (true, true) => None,
            (true, false) => Some(Arc::clone(fragments)),
            _ => {
                let all = self.version.range_tombstones().iter().chain(&in_memtables);
                Some(Arc::new(RangeTombstones::new(all)))
            }
        }
    }

    /// True when its memtable holds `times` its size or more.
    pub(super) fn mem_is_full(&self, times: usize) -> bool {
        self.mem.approximate_bytes() >= times * self.options().memtable_size
    }

    /// The log number of its oldest memtable not yet flushed.
    pub(super) fn oldest_log(&self) -> u64 {
        self.immutable.last().unwrap_or(&self.mem).log_number()
    }

    /// The same memtables over `version`.
    pub(super) fn with_version(&self, version: Arc<Version>) -> Tree {
        Tree {
            keyspace: Arc::clone(&self.keyspace),
            mem: Arc::clone(&self.mem),
            immutable: self.immutable.clone(),
            version,
        }
    }
}

/// The keyspaces' trees a reader sees, swapped as a whole when any of them changes, so that
/// a change of several (a flush of every keyspace) is seen at once.
pub(super) struct ReadState {
    /// By keyspace number; the default keyspace's first.
    pub(super) trees: Vec<Arc<Tree>>,
}

impl ReadState {
    #[inline]
    pub(super) fn tree(&self, id: KeyspaceId) -> Option<&Arc<Tree>> {
        // The default keyspace is always first: most lookups find it without a search.
        if id == DEFAULT_ID {
            return self.trees.first();
        }
        let at = self.trees.binary_search_by_key(&id, |t| t.id()).ok()?;
        Some(&self.trees[at])
    }

    pub(super) fn default_tree(&self) -> &Arc<Tree> {
        &self.trees[0]
    }

    /// Every tree's live range deletions (those its version holds), with its keyspace's
    /// number: what a manifest written whole records.
    pub(super) fn range_tombstones(&self) -> Vec<(KeyspaceId, RangeTombstone)> {
        (self.trees.iter())
            .flat_map(|t| {
                let id = t.id();
                t.version
                    .range_tombstones()
                    .iter()
                    .map(move |r| (id, r.clone()))
            })
            .collect()
    }

    pub(super) fn named(&self, name: &str) -> Option<&Arc<Tree>> {
        self.trees.iter().find(|t| t.keyspace.name == name)
    }

    /// The log numbers of every frozen memtable, oldest first, each once.
    pub(super) fn frozen_logs(&self) -> Vec<u64> {
        let mut logs: Vec<u64> = (self.trees.iter())
            .flat_map(|t| t.immutable.iter().map(|m| m.log_number()))
            .collect();
        logs.sort_unstable();
        logs.dedup();
        logs
    }

    /// The level-0 tables of the keyspace that has the most: what writes slow down and stop
    /// for.
    pub(super) fn most_level0_tables(&self) -> usize {
        let counts = self.trees.iter().map(|t| t.version.level(0).len());
        counts.max().unwrap_or(0)
    }

    /// True when some keyspace's tree needs a compaction.
    pub(super) fn needs_compaction(&self) -> bool {
        (self.trees.iter()).any(|t| crate::compaction::needs_compaction(&t.version, t.options()))
    }

    /// True when some keyspace has a frozen memtable waiting for a flush.
    pub(super) fn has_frozen(&self) -> bool {
        self.trees.iter().any(|t| !t.immutable.is_empty())
    }

    /// The oldest log a memtable still needs: older ones hold nothing unflushed.
    pub(super) fn oldest_log(&self) -> u64 {
        let oldest = self.trees.iter().map(|t| t.oldest_log()).min();
        oldest.expect("a store always has its default keyspace")
    }

    /// This state with the trees `change` gives for each in place of it.
    pub(super) fn with_trees(&self, mut change: impl FnMut(&Arc<Tree>) -> Arc<Tree>) -> ReadState {
        ReadState {
            trees: self.trees.iter().map(&mut change).collect(),
        }
    }

    /// This state with `version` as keyspace `id`'s (its memtables as they are: the caller
    /// holds the shape lock, which keeps versions, not memtables, from changing).
    pub(super) fn with_version(&self, id: KeyspaceId, version: Arc<Version>) -> ReadState {
        self.with_trees(|t| match t.id() == id {
            true => Arc::new(t.with_version(Arc::clone(&version))),
            false => Arc::clone(t),
        })
    }
}

/// Held by the one thread writing at a time.
pub(super) struct WriterState {
    /// `None` in a read-only store.
    pub(super) wal: Option<LogWriter>,
    /// The logs of frozen memtables, by log number, oldest first, that nothing has synced
    /// yet. They are synced before any later write is made durable (a synced write, or a
    /// sync of the WAL), so that a durable write never survives an earlier one; a log whose
    /// memtable reached a table first is dropped unsynced, and its unwritten pages with it.
    pub(super) unsynced_logs: Vec<(u64, LogWriter)>,
    /// Set when freezing the full memtable failed (no new log could be started), cleared
    /// when a freeze succeeds: only then does a write group look at the memtable's size first.
    pub(super) freeze_failed: bool,
}

impl WriterState {
    pub(super) fn wal(&mut self) -> Result<&mut LogWriter> {
        self.wal.as_mut().ok_or(Error::ReadOnly)
    }

    /// Forgets the unsynced logs whose memtables are no longer frozen ones (`frozen` holds
    /// the log numbers of those that are): flushed, so their writes are in a synced table.
    pub(super) fn drop_flushed_logs(&mut self, frozen: &[u64]) {
        self.unsynced_logs
            .retain(|(number, _)| frozen.contains(number));
    }

    /// Syncs the logs of frozen memtables still waiting for a flush, then the active log:
    /// every write made so far is durable once this returns.
    pub(super) fn sync_all(&mut self, frozen: &[u64]) -> Result<()> {
        self.drop_flushed_logs(frozen);
        for (_, log) in &mut self.unsynced_logs {
            log.sync()?;
        }
        self.unsynced_logs.clear();
        self.wal()?.sync()
    }
}

/// Held while a change of the tree's shape is recorded (a flush's or compaction's edit, and
/// the new version, and a manifest rewrite when one is due), while a compaction is picked, and
/// by `Db::check`: never while a flush or compaction writes its tables.
pub(super) struct ShapeState {
    /// `None` in a read-only store. Once an edit failed to reach it, the next edit goes to a
    /// new manifest instead.
    pub(super) manifest: Option<ManifestWriter>,
    /// Tables written by a step whose edit failed to reach the manifest. They are deleted
    /// once a new manifest is current, since the failed edit might have been durable.
    pub(super) discarded: Vec<crate::sstable::Table>,
    /// What running compactions hold: no other compaction may conflict with them.
    pub(super) compacting: std::collections::HashMap<KeyspaceId, crate::compaction::Running>,
    /// The number the next keyspace created takes.
    pub(super) next_keyspace: KeyspaceId,
}

/// A background step that failed, retried after a growing pause.
pub(super) struct StepFailure {
    pub(super) reason: String,
    /// Failures in a row.
    pub(super) attempts: u32,
    pub(super) retry_at: Instant,
}

/// The kinds of background job. Each has threads of its own, and a failure and retry pause of
/// its own, so a compaction (running long, or failing) never holds back a flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Job {
    Flush,
    Compaction,
}

#[derive(Default)]
pub(super) struct BackgroundState {
    pub(super) shutdown: bool,
    /// Flushes and compactions running now, in background threads or in a caller's
    /// (`compact`, `resume`). (The files a compaction made obsolete are deleted when their
    /// last reader drops them, which may be later.)
    pub(super) running: usize,
    /// While nonzero no job starts: `Db::check` holds the files in use still.
    pub(super) held: usize,
    /// Manual compactions waiting for the running ones to finish: no background compaction
    /// starts meanwhile.
    pub(super) manual_waiting: usize,
    /// Jobs finished (or failed) since open: a compaction thread that found nothing it could
    /// take waits for this to move.
    pub(super) jobs_ended: u64,
    /// Set while the WAL cannot be written: writes are refused until a new log is started.
    pub(super) wal_error: Option<String>,
    /// The last flush failed; set until one succeeds.
    pub(super) flush_failure: Option<StepFailure>,
    /// The last compaction failed; set until one succeeds.
    pub(super) compaction_failure: Option<StepFailure>,
}

impl BackgroundState {
    pub(super) fn failure(&self, job: Job) -> &Option<StepFailure> {
        match job {
            Job::Flush => &self.flush_failure,
            Job::Compaction => &self.compaction_failure,
        }
    }

    pub(super) fn failure_mut(&mut self, job: Job) -> &mut Option<StepFailure> {
        match job {
            Job::Flush => &mut self.flush_failure,
            Job::Compaction => &mut self.compaction_failure,
        }
    }

    /// The failure `Stats` reports: a flush's first, since writes wait on flushes.
    pub(super) fn any_failure(&self) -> Option<&StepFailure> {
        self.flush_failure
            .as_ref()
            .or(self.compaction_failure.as_ref())
    }
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) flushes: AtomicU64,
    pub(super) compactions: AtomicU64,
    pub(super) trivial_moves: AtomicU64,
    /// Merges split into parts run side by side (counted since open).
    pub(super) split_compactions: AtomicU64,
    /// Tables dropped whole because every entry in them expired (since open).
    pub(super) tables_expired: AtomicU64,
    /// Compactions of level 0 below its trigger started because writes rested (since open).
    pub(super) level0_compactions_at_rest: AtomicU64,
    pub(super) write_stalls: AtomicU64,
    /// Time writers spent delayed or stalled.
    pub(super) stall_micros: AtomicU64,
    /// Groups stopped, by what they waited for, and the longest wait of one group (since
    /// open).
    pub(super) stops_for_flush: AtomicU64,
    pub(super) stops_for_level0: AtomicU64,
    pub(super) longest_stall_micros: AtomicU64,
    /// Bytes of keys and values in acknowledged writes.
    pub(super) user_bytes: AtomicU64,
    /// Bytes appended to WAL files (records and their headers).
    pub(super) wal_bytes: AtomicU64,
    /// Write groups, and the batches in them.
    pub(super) write_groups: AtomicU64,
    pub(super) grouped_batches: AtomicU64,
    pub(super) background_errors: AtomicU64,
    pub(super) background_retries: AtomicU64,
    pub(super) manifest_rotations: AtomicU64,
    /// Per level: what flushes and compactions wrote into it and read out of it.
    pub(super) levels: Vec<LevelCounters>,
}

/// The I/O of flushes and compactions at one level.
#[derive(Default)]
pub(super) struct LevelCounters {
    /// Bytes of tables written into the level (by flushes at level 0, compactions deeper).
    pub(super) bytes_written: AtomicU64,
    /// Bytes of the level's tables that compactions read.
    pub(super) bytes_read: AtomicU64,
    /// Compactions whose output went into the level.
    pub(super) compactions: AtomicU64,
    /// Tables moved into the level without being rewritten, and their bytes.
    pub(super) tables_moved: AtomicU64,
    pub(super) bytes_moved: AtomicU64,
}

impl Counters {
    /// Counters that go on from `totals`, the manifest's record of the store's write I/O.
    pub(super) fn starting_from(num_levels: usize, totals: &WriteTotals) -> Counters {
        let at = |v: u64| AtomicU64::new(v);
        let level = |l: usize| totals.levels.get(l).copied().unwrap_or_default();
        Counters {
            flushes: at(totals.flushes),
            compactions: at(totals.compactions),
            trivial_moves: at(totals.trivial_moves),
            write_stalls: at(totals.write_stalls),
            stall_micros: at(totals.stall_micros),
            user_bytes: at(totals.user_bytes),
            wal_bytes: at(totals.wal_bytes),
            levels: (0..num_levels)
                .map(|l| LevelCounters {
                    bytes_written: at(level(l).bytes_written),
                    bytes_read: at(level(l).bytes_read),
                    compactions: at(level(l).compactions),
                    tables_moved: at(level(l).tables_moved),
                    bytes_moved: at(level(l).bytes_moved),
                })
                .collect(),
            ..Counters::default()
        }
    }

    /// The write I/O totals, for the manifest.
    pub(super) fn write_totals(&self) -> WriteTotals {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        WriteTotals {
            user_bytes: get(&self.user_bytes),
            wal_bytes: get(&self.wal_bytes),
            write_stalls: get(&self.write_stalls),
            stall_micros: get(&self.stall_micros),
            flushes: get(&self.flushes),
            compactions: get(&self.compactions),
            trivial_moves: get(&self.trivial_moves),
            levels: self
                .levels
                .iter()
                .map(|l| LevelTotals {
                    bytes_written: get(&l.bytes_written),
                    bytes_read: get(&l.bytes_read),
                    compactions: get(&l.compactions),
                    tables_moved: get(&l.tables_moved),
                    bytes_moved: get(&l.bytes_moved),
                })
                .collect(),
        }
    }

    pub(super) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn add_one(counter: &AtomicU64) {
        Counters::add(counter, 1);
    }
}
