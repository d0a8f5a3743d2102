//! Background work: one thread flushes frozen memtables (and starts a new WAL after the old
//! one failed), `Options::compaction_threads` threads compact. A flush never waits for a
//! compaction: the two share only the short hold of the shape lock that records a finished
//! job. A job that fails is undone (its new tables deleted) and retried after a growing pause,
//! kept per kind of job. The manifest is rewritten as a snapshot once its edits grow too long.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{lock, BackgroundState, Counters, Inner, Job, ShapeState, StepFailure};
use crate::error::{Error, Result};
use crate::manifest::{ManifestWriter, RecordedPolicy, VersionEdit};
use crate::memory::allocator;
use crate::sstable::Table;

/// The first pause before a failed job is retried; it doubles with each failure in a row.
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between retries.
const LONGEST_RETRY_PAUSE: Duration = Duration::from_secs(1);
/// How long an idle background thread sleeps before it looks for work unasked.
const IDLE_PAUSE: Duration = Duration::from_millis(100);

fn retry_pause(attempts: u32) -> Duration {
    FIRST_RETRY_PAUSE
        .saturating_mul(1 << attempts.min(16))
        .min(LONGEST_RETRY_PAUSE)
}

/// What the flush thread does next.
enum FlushWork {
    /// Start a new WAL after the old one failed, then flush.
    RestartWal,
    /// Flush the oldest frozen memtable.
    Flush,
}

/// What a compaction thread does next.
enum CompactionTurn {
    /// Look for a compaction to run; `jobs_ended` is the count of ended jobs now.
    Compact { jobs_ended: u64 },
    /// Spend the filter memory again by the lookups counted (`Inner::refit_filters`).
    RefitFilters,
}

/// Held by `Db::check` (see [`Inner::hold_background`]): no job starts until it is dropped.
pub(super) struct HeldBackground<'a> {
    inner: &'a Inner,
}

impl Drop for HeldBackground<'_> {
    fn drop(&mut self) {
        lock(&self.inner.background).held -= 1;
        self.inner.background_cv.notify_all();
    }
}

/// A flush or compaction running in a caller's thread, counted in `BackgroundState::running`
/// while it lives.
pub(super) struct ForegroundJob<'a> {
    inner: &'a Inner,
}

impl Drop for ForegroundJob<'_> {
    fn drop(&mut self) {
        let mut background = lock(&self.inner.background);
        background.running -= 1;
        background.jobs_ended += 1;
        drop(background);
        self.inner.background_cv.notify_all();
    }
}

impl Inner {
    pub(super) fn has_background_work(&self) -> bool {
        let state = self.read_state();
        state.has_frozen() || state.needs_compaction() || self.level0_due_at_rest(&state)
    }

    /// Hands what a flush or compaction freed back to the system, unless the store leaves
    /// the allocator alone (`Options::tune_allocator`; `crate::allocator` says why).
    pub(super) fn release_freed_memory(&self) {
        if self.options.tune_allocator {
            allocator::release_freed_memory();
        }
    }

    /// The flush thread.
    pub(super) fn flush_loop(&self) {
        while let Some(work) = self.next_flush_work() {
            let result = caught(Job::Flush, || match work {
                FlushWork::RestartWal => self.restart_wal(),
                FlushWork::Flush => self.flush_oldest().map(|_| ()),
            });
            self.record_outcome(Job::Flush, result);
        }
    }

    /// A compaction thread.
    pub(super) fn compaction_loop(&self) {
        run_below_foreground(self.options.tuning.compaction_nice);
        // The count of ended jobs when this thread began a turn in which it found nothing it
        // could take: until another job ends, nothing has freed a table for it.
        let mut found_nothing_at = None;
        while let Some(turn) = self.next_compaction_turn(found_nothing_at) {
            let turn_began_at = match turn {
                CompactionTurn::Compact { jobs_ended } => jobs_ended,
                CompactionTurn::RefitFilters => {
                    // A panic must not end the thread with its turn still counted as running.
                    let changed = caught(Job::Compaction, || {
                        let moved = self.rebalance_memory();
                        Ok(self.refit_filters() | moved)
                    });
                    // Only a turn that moved memory or installed filters freed any to hand
                    // back. A turn comes every few thousand lookups, most change nothing,
                    // and the release walks every arena of the allocator under its lock,
                    // which gets that allocate meanwhile wait on.
                    if changed.unwrap_or(true) {
                        self.release_freed_memory();
                    }
                    self.end_idle_turn();
                    continue;
                }
            };
            let outcome = match caught(Job::Compaction, || self.compact_once()) {
                Ok(true) => Ok(()),
                Ok(false) => {
                    self.end_idle_turn();
                    found_nothing_at = Some(turn_began_at);
                    continue;
                }
                Err(e) => Err(e),
            };
            self.release_freed_memory();
            self.record_outcome(Job::Compaction, outcome);
            found_nothing_at = None;
        }
    }

    /// Waits until the flush thread has work that is due; `None` at shutdown.
    fn next_flush_work(&self) -> Option<FlushWork> {
        self.next_job(Job::Flush, |inner, background| {
            if background.wal_error.is_some() {
                Some(FlushWork::RestartWal)
            } else if inner.read_state().has_frozen() {
                Some(FlushWork::Flush)
            } else {
                None
            }
        })
    }

    /// Waits until a compaction may be due, or the filter memory is to be spent again by the
    /// lookups counted; `None` at shutdown.
    fn next_compaction_turn(&self, found_nothing_at: Option<u64>) -> Option<CompactionTurn> {
        self.next_job(Job::Compaction, |inner, background| {
            let may_start = background.manual_waiting == 0
                && found_nothing_at != Some(background.jobs_ended)
                && {
                    let state = inner.read_state();
                    state.needs_compaction()
                        || inner.level0_due_at_rest(&state)
                        || inner.has_expired_tables(&state)
                };
            match may_start {
                true => Some(CompactionTurn::Compact {
                    jobs_ended: background.jobs_ended,
                }),
                false => inner
                    .claim_filter_refit()
                    .then_some(CompactionTurn::RefitFilters),
            }
        })
    }

    /// Waits until `want` finds work for a `job` thread, no failed job of that kind is still
    /// pausing, and nothing holds background work back; counts the job as running. `None` at
    /// shutdown.
    fn next_job<W>(
        &self,
        job: Job,
        want: impl Fn(&Inner, &BackgroundState) -> Option<W>,
    ) -> Option<W> {
        let mut background = lock(&self.background);
        loop {
            if background.shutdown {
                return None;
            }
            let failure = background.failure(job);
            let due = failure
                .as_ref()
                .is_none_or(|f| Instant::now() >= f.retry_at);
            if due && background.held == 0 {
                if let Some(work) = want(self, &background) {
                    background.running += 1;
                    if background.failure(job).is_some() {
                        Counters::add_one(&self.counters.background_retries);
                    }
                    return Some(work);
                }
            }
            let pause = background.failure(job).as_ref().map_or(IDLE_PAUSE, |f| {
                f.retry_at.saturating_duration_since(Instant::now())
            });
            background = self
                .background_cv
                .wait_timeout(background, pause.max(Duration::from_millis(1)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Ends a compaction thread's turn in which it found nothing to take (every candidate
    /// conflicts with a running compaction). It is not a job: nothing is counted as ended.
    fn end_idle_turn(&self) {
        lock(&self.background).running -= 1;
        // `hold_background` may be waiting for running jobs to reach zero.
        self.background_cv.notify_all();
    }

    /// The failure of a flush or compaction that still stands, as an error. A failure of a
    /// kind of job with nothing left to do is moot (a failed full compaction of a tree that
    /// needs none, say): it is cleared, not reported.
    pub(super) fn standing_failure(&self) -> Result<()> {
        let state = self.read_state();
        let mut background = lock(&self.background);
        if !state.has_frozen() {
            *background.failure_mut(Job::Flush) = None;
        }
        if !state.needs_compaction() && !self.level0_due_at_rest(&state) {
            *background.failure_mut(Job::Compaction) = None;
        }
        match [Job::Flush, Job::Compaction]
            .iter()
            .find_map(|&job| background.failure(job).as_ref())
        {
            Some(failure) => Err(Error::Background {
                reason: failure.reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Clears the kind's failure after a success; after a failure, counts it and sets the
    /// pause before the next attempt.
    fn record_outcome(&self, job: Job, result: Result<()>) {
        let mut background = lock(&self.background);
        background.running -= 1;
        background.jobs_ended += 1;
        self.note_outcome(&mut background, job, &result);
        drop(background);
        self.background_cv.notify_all();
    }

    /// The one record of what failed: a job of `job`'s kind ended with `result`, whether a
    /// background thread or a caller (`Db::compact`, `Db::resume`) ran it.
    pub(super) fn note_outcome(
        &self,
        background: &mut BackgroundState,
        job: Job,
        result: &Result<()>,
    ) {
        match result {
            Ok(()) => *background.failure_mut(job) = None,
            Err(e) => {
                let attempts = background.failure(job).as_ref().map_or(0, |f| f.attempts) + 1;
                *background.failure_mut(job) = Some(StepFailure {
                    reason: e.to_string(),
                    attempts,
                    retry_at: Instant::now() + retry_pause(attempts - 1),
                });
                self.count_failure(background);
            }
        }
    }

    /// Keeps every background job from starting, and waits for the running ones to end, until
    /// the guard is dropped.
    pub(super) fn hold_background(&self) -> HeldBackground<'_> {
        let mut background = lock(&self.background);
        background.held += 1;
        drop(
            self.background_cv
                .wait_while(background, |b| b.running > 0)
                .unwrap_or_else(|e| e.into_inner()),
        );
        HeldBackground { inner: self }
    }

    /// Counts a flush or compaction a caller runs in its own thread as running, once nothing
    /// holds background work back.
    pub(super) fn start_foreground_job(&self) -> ForegroundJob<'_> {
        let background = lock(&self.background);
        let mut background = self
            .background_cv
            .wait_while(background, |b| b.held > 0)
            .unwrap_or_else(|e| e.into_inner());
        background.running += 1;
        ForegroundJob { inner: self }
    }

    /// Makes `edit` durable in the manifest, with the write I/O totals as of now. If that
    /// fails, the job's new tables (`outputs`) are discarded: deleted at once when the edit
    /// surely did not reach the manifest, or once a new manifest is current when it might
    /// have.
    pub(super) fn log_edit<'t>(
        &self,
        shape: &mut ShapeState,
        edit: &mut VersionEdit,
        outputs: impl Iterator<Item = &'t Table>,
    ) -> Result<()> {
        edit.write_totals = Some(self.counters.write_totals());
        if shape.manifest.as_ref().is_some_and(|m| m.has_failed()) {
            if let Err(e) = self.rotate_manifest(shape) {
                outputs.for_each(|t| t.mark_obsolete());
                return Err(e);
            }
        }
        let manifest = shape.manifest.as_mut().ok_or(Error::ReadOnly)?;
        if let Err(e) = manifest.append(edit) {
            match manifest.failed_edit_may_be_durable() {
                true => shape.discarded.extend(outputs.cloned()),
                false => outputs.for_each(|t| t.mark_obsolete()),
            }
            // Usually the new manifest can be written at once, and the tables go with it.
            let _ = self.rotate_manifest(shape);
            return Err(e);
        }
        Ok(())
    }

    /// Appends an edit holding only the write I/O totals, so that what was written since the
    /// last flush or compaction is counted after a reopen too. Nothing in a read-only store.
    pub(super) fn record_write_totals(&self) -> Result<()> {
        let mut shape = lock(&self.shape);
        if shape.manifest.is_none() {
            return Ok(());
        }
        self.log_edit(&mut shape, &mut VersionEdit::default(), std::iter::empty())
    }

    /// Rewrites the manifest as one snapshot once its edits have grown past the limit.
    /// A failure here loses nothing: the current manifest stays, and the next edit tries
    /// again.
    pub(super) fn rotate_manifest_if_long(&self, shape: &mut ShapeState) {
        let Some(manifest) = &shape.manifest else {
            return;
        };
        let limit = self
            .options
            .tuning
            .max_manifest_size
            .max(2 * manifest.snapshot_len());
        if manifest.len() > limit {
            let _ = self.rotate_manifest(shape);
        }
    }

    /// Writes a new manifest holding a snapshot of the tree, makes it current and deletes
    /// the old one, and the tables of jobs whose edits failed.
    fn rotate_manifest(&self, shape: &mut ShapeState) -> Result<()> {
        let number = self.new_file_number();
        let snapshot = self.snapshot_edit(shape.next_keyspace);
        let manifest = ManifestWriter::create(self.fs.as_ref(), &self.dir, number, &snapshot)?;
        if let Some(old) = shape.manifest.replace(manifest) {
            let _ = self.fs.remove(old.path());
        }
        for table in shape.discarded.drain(..) {
            table.mark_obsolete();
        }
        Counters::add_one(&self.counters.manifest_rotations);
        Ok(())
    }

    /// The whole state as one edit: every live table, the oldest log still needed, the
    /// counters. Called with the shape lock held, so every finished job's edit is in the
    /// version; tables that running jobs are writing reach the new manifest by their own
    /// edits.
    fn snapshot_edit(&self, next_keyspace: u32) -> VersionEdit {
        let state = self.read_state();
        VersionEdit {
            log_number: Some(state.oldest_log()),
            next_file_number: Some(self.next_file_number.load(Ordering::SeqCst)),
            last_seq: Some(self.visible_seq.load(Ordering::Acquire)),
            added: (state.trees.iter())
                .flat_map(|tree| tree.version.tables().map(|t| t.meta.clone()))
                .collect(),
            removed: Vec::new(),
            write_totals: Some(self.counters.write_totals()),
            filter_policy: Some(RecordedPolicy::of(&self.options.policy())),
            next_keyspace: crate::keyspace::recorded_next(next_keyspace),
            keyspaces: super::keyspaces::records(&state),
            dropped_keyspaces: Vec::new(),
            added_ranges: state.range_tombstones(),
            removed_ranges: Vec::new(),
            seq_times: self.all_seq_times(),
        }
    }
}

/// Runs a background job, turning a panic inside it into a failure: recorded and retried as
/// an I/O error is. A panic that ended the thread would leave the job counted as running, and
/// every wait for background work (`flush`, `compact`, `resume`, `check`) would wait for ever.
pub(super) fn caught<T>(job: Job, run: impl FnOnce() -> Result<T>) -> Result<T> {
    panic::catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|payload| {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        Err(Error::Background {
            reason: format!("a {} panicked: {message}", job_name(job)),
        })
    })
}

fn job_name(job: Job) -> &'static str {
    match job {
        Job::Flush => "flush",
        Job::Compaction => "compaction",
    }
}

/// Lowers the calling thread's CPU priority by `nice` (`Options::compaction_nice`; on Linux
/// `nice` applies to the calling thread alone, and the threads it starts inherit it). A hint
/// only: where it fails, nothing else changes.
fn run_below_foreground(nice: u8) {
    #[cfg(linux_extras)]
    // SAFETY: nice only changes the calling thread's scheduling priority.
    unsafe {
        libc::nice(i32::from(nice));
    }
    #[cfg(not(linux_extras))]
    let _ = nice;
}
