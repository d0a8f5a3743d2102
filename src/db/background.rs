//! Background work: flushes of frozen memtables and compactions, one step at a time; a step
//! that fails is undone (its new tables deleted) and retried after a growing pause; the
//! manifest is rewritten as a snapshot once its edits grow too long.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::table_writer::{NewTables, TableWriter};
use super::{lock, Inner, ReadState, ShapeState, StepFailure};
use crate::compaction::{self, Compaction};
use crate::entry::SeqNo;
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::iter::NewestVersions;
use crate::manifest::{ManifestWriter, VersionEdit};
use crate::memtable::MemTable;
use crate::sstable::Table;

/// The first pause before a failed step is retried; it doubles with each failure in a row.
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between retries.
const LONGEST_RETRY_PAUSE: Duration = Duration::from_secs(1);

fn retry_pause(attempts: u32) -> Duration {
    FIRST_RETRY_PAUSE
        .saturating_mul(1 << attempts.min(16))
        .min(LONGEST_RETRY_PAUSE)
}

/// What the background thread does next.
enum Work {
    /// Start a new WAL after the old one failed, then flush.
    RestartWal,
    /// A flush or a compaction.
    Step,
}

impl Inner {
    pub(super) fn has_background_work(&self) -> bool {
        let state = self.read_state();
        !state.immutable.is_empty() || compaction::needs_compaction(&state.version, &self.options)
    }

    pub(super) fn background_loop(&self) {
        while let Some(work) = self.next_work() {
            let result = match work {
                Work::RestartWal => self.restart_wal(),
                Work::Step => self.do_background_step(),
            };
            self.record_outcome(result);
        }
    }

    /// Waits for work that is due (a failed step waits out its pause); `None` at shutdown.
    fn next_work(&self) -> Option<Work> {
        let mut background = lock(&self.background);
        loop {
            if background.shutdown {
                return None;
            }
            let due = background
                .step_failure
                .as_ref()
                .is_none_or(|f| Instant::now() >= f.retry_at);
            let work = if !due {
                None
            } else if background.wal_error.is_some() {
                Some(Work::RestartWal)
            } else if self.has_background_work() {
                Some(Work::Step)
            } else {
                None
            };
            if let Some(work) = work {
                background.busy = true;
                if background.step_failure.is_some() {
                    self.counters
                        .background_retries
                        .fetch_add(1, Ordering::Relaxed);
                }
                return Some(work);
            }
            let pause = background
                .step_failure
                .as_ref()
                .map_or(Duration::from_millis(100), |f| {
                    f.retry_at.saturating_duration_since(Instant::now())
                });
            background = self
                .background_cv
                .wait_timeout(background, pause.max(Duration::from_millis(1)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Clears the failure after a success; after a failure, counts it and sets the pause
    /// before the next attempt.
    fn record_outcome(&self, result: Result<()>) {
        let mut background = lock(&self.background);
        background.busy = false;
        match result {
            Ok(()) => background.step_failure = None,
            Err(e) => {
                let attempts = background.step_failure.as_ref().map_or(0, |f| f.attempts) + 1;
                background.step_failure = Some(StepFailure {
                    reason: e.to_string(),
                    attempts,
                    retry_at: Instant::now() + retry_pause(attempts - 1),
                });
                self.count_failure(&mut background);
            }
        }
        drop(background);
        self.background_cv.notify_all();
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

    /// Merges every table into one level, in the caller's thread.
    pub(super) fn compact_all(&self) -> Result<()> {
        let mut shape = lock(&self.shape);
        let version = Arc::clone(&self.read_state().version);
        match compaction::full(&version, &self.options) {
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

    pub(super) fn flush_memtable(&self, shape: &mut ShapeState, mem: Arc<MemTable>) -> Result<()> {
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
        self.log_edit(shape, &edit, opened.values())?;
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
        self.rotate_manifest_if_long(shape);
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
        self.log_edit(shape, &edit, opened.values())?;
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
        self.rotate_manifest_if_long(shape);
        Ok(())
    }

    /// Makes `edit` durable in the manifest. If that fails, the step's new tables (`outputs`)
    /// are discarded: deleted at once when the edit surely did not reach the manifest, or once
    /// a new manifest is current when it might have.
    fn log_edit<'t>(
        &self,
        shape: &mut ShapeState,
        edit: &VersionEdit,
        outputs: impl Iterator<Item = &'t Table>,
    ) -> Result<()> {
        if shape.manifest.as_ref().is_some_and(|m| m.has_failed()) {
            if let Err(e) = self.rotate_manifest(shape) {
                outputs.for_each(|t| t.mark_obsolete());
                return Err(e);
            }
        }
        let manifest = shape.manifest.as_mut().ok_or(Error::ReadOnly)?;
        if let Err(e) = manifest.append(edit) {
            shape.discarded.extend(outputs.cloned());
            // Usually the new manifest can be written at once, and the tables go with it.
            let _ = self.rotate_manifest(shape);
            return Err(e);
        }
        Ok(())
    }

    /// Rewrites the manifest as one snapshot once its edits have grown past the limit.
    /// A failure here loses nothing: the current manifest stays, and the next edit tries
    /// again.
    fn rotate_manifest_if_long(&self, shape: &mut ShapeState) {
        let Some(manifest) = &shape.manifest else {
            return;
        };
        let limit = self
            .options
            .max_manifest_size
            .max(2 * manifest.snapshot_len());
        if manifest.len() > limit {
            let _ = self.rotate_manifest(shape);
        }
    }

    /// Writes a new manifest holding a snapshot of the tree, makes it current and deletes
    /// the old one, and the tables of steps whose edits failed.
    fn rotate_manifest(&self, shape: &mut ShapeState) -> Result<()> {
        let number = self.new_file_number();
        let snapshot = self.snapshot_edit();
        let manifest = ManifestWriter::create(self.fs.as_ref(), &self.dir, number, &snapshot)?;
        if let Some(old) = shape.manifest.replace(manifest) {
            let _ = self.fs.remove(old.path());
        }
        for table in shape.discarded.drain(..) {
            table.mark_obsolete();
        }
        self.counters
            .manifest_rotations
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The whole state as one edit: every live table, the oldest log still needed, the
    /// counters. Called with the shape lock held, so no flush or compaction is half done.
    fn snapshot_edit(&self) -> VersionEdit {
        let state = self.read_state();
        let oldest_unflushed = state.immutable.last().unwrap_or(&state.mem);
        let version = &state.version;
        VersionEdit {
            log_number: Some(oldest_unflushed.log_number()),
            next_file_number: Some(self.next_file_number.load(Ordering::SeqCst)),
            last_seq: Some(self.visible_seq.load(Ordering::Acquire)),
            added: (0..version.num_levels())
                .flat_map(|l| version.level(l))
                .map(|t| t.meta.clone())
                .collect(),
            removed: Vec::new(),
        }
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
}
