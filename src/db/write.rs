//! The write path: the WAL, the memtable, freezing it for a flush, and starting a new log
//! after the old one failed.

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use super::write_group::{Condition, Group, Turn};
use super::{lock, BackgroundState, Counters, Inner, Job, ReadState, Tree, WriterState};
use crate::entry::next_seqs;
use crate::error::{Error, Result};
use crate::filename;
use crate::keyspace::KeyspaceId;
use crate::wal::{LogWriter, PreviousLog};
use crate::write_batch::{OpView, Write, WriteBatch};

impl Inner {
    /// Writes are refused while the WAL cannot be written.
    pub(super) fn refuse_if_failed(&self) -> Result<()> {
        match &lock(&self.background).wal_error {
            Some(reason) => Err(Error::WritesRefused {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Refuses writes until a new log is started: the failed one may end in part of a record.
    pub(super) fn fail_wal(&self, reason: String) {
        let mut background = lock(&self.background);
        background.wal_error.get_or_insert(reason);
        self.count_failure(&mut background);
        drop(background);
        self.background_cv.notify_all();
    }

    /// Counts a failure of the WAL or of background work, under the background lock so that
    /// a waiter holding it sees the count move together with the failure's reason.
    pub(super) fn count_failure(&self, _background: &mut BackgroundState) {
        Counters::add_one(&self.counters.background_errors);
    }

    fn failures(&self) -> u64 {
        self.counters.background_errors.load(Ordering::Relaxed)
    }

    /// Writes `batch` as a member of a group (see `write_group`): returns once a leader (this
    /// writer or another) has logged it, synced when `sync`, and made it visible.
    pub(super) fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        self.write_if(batch, sync, None)
    }

    /// Writes `batch` only if `condition` holds when its group is written (checked by the
    /// leader under the writer lock); else nothing, and `Error::Conflict`.
    pub(super) fn write_if(
        &self,
        batch: WriteBatch,
        sync: bool,
        condition: Option<Condition>,
    ) -> Result<()> {
        let record = batch.encode(0);
        let mut group = match self.write_queue.join(batch, record, sync, condition) {
            Turn::Done(outcome) => return outcome,
            Turn::Lead(group) => group,
        };
        let written = panic::catch_unwind(AssertUnwindSafe(|| self.write_group(&mut group)));
        let outcome = match written {
            Ok(outcome) => outcome,
            Err(payload) => {
                // Numbers the group took may be in the WAL and, for some members, in the
                // memtable: the next group must not take them again, or one of its writes and
                // one of these would share a number and recovery could not tell which is
                // newer. And the log may end in part of a record: a new one is started before
                // any write is taken (as after a failed append).
                // A panic before the group was numbered (checking a condition, waiting for
                // room) left nothing in the log: the WAL stays usable.
                if let Some(last_seq) = group.last_seq {
                    self.visible_seq.fetch_max(last_seq, Ordering::AcqRel);
                    self.fail_wal("the writer leading a group panicked".into());
                }
                // The members must not wait for ever for a leader that is gone.
                self.write_queue.finish(&group, || {
                    Err(Error::WritesRefused {
                        reason: "the writer leading the group panicked".into(),
                    })
                });
                panic::resume_unwind(payload);
            }
        };
        self.write_queue.finish(&group, || match &outcome {
            Ok(()) => Ok(()),
            Err(e) => Err(e.duplicate()),
        });
        match group.leader_refused() {
            Some(refusal) => Err(refusal),
            None => outcome,
        }
    }

    /// The leader's work: numbers the group's records in queue order, appends them to the WAL
    /// in one write, syncs once if any member asked, then applies them to the memtable and
    /// makes them visible together. A failure fails every member: none of them is visible.
    fn write_group(&self, group: &mut Group) -> Result<()> {
        let mut writer = lock(&self.writer);
        self.refuse_if_failed()?;
        // A memtable is frozen once full, by the write that fills it or a later one; when that
        // keeps failing (no new log can be started), it takes writes up to twice its size and
        // then they get the failure, rather than memory growing without bound. Only after a
        // failed freeze is the size looked at here.
        if writer.freeze_failed && self.read_state().trees.iter().any(|t| t.mem_is_full(2)) {
            self.freeze_memtable(&mut writer)?;
        }
        self.refuse_unknown_keyspaces(group);
        self.refuse_unmet_conditions(group);
        if group.ops() == 0 {
            return Ok(()); // Every member was refused: nothing to write.
        }
        let bytes = group.written().map(|m| m.record.len() as u64).sum();
        self.wait_for_room(&writer, bytes)?;
        let (first_seq, last_seq) =
            next_seqs(self.visible_seq.load(Ordering::Acquire), group.ops())?;
        group.last_seq = Some(last_seq);
        let mut seq = first_seq;
        for member in group.written_mut() {
            WriteBatch::set_first_seq(&mut member.record, seq);
            seq += member.batch.len() as u64;
        }
        // A synced group makes the logs of frozen memtables durable too (`sync_all`).
        let frozen = group.needs_sync().then(|| self.frozen_log_numbers());
        let wal = writer.wal()?;
        let wal_len_before = wal.len();
        let appended = group
            .written()
            .try_for_each(|member| wal.add_record(&member.record));
        let wal_len_after = wal.len();
        let logged = appended.and_then(|()| match &frozen {
            Some(frozen) => writer.sync_all(frozen),
            None => writer.wal()?.flush(),
        });
        Counters::add(&self.counters.wal_bytes, wal_len_after - wal_len_before);
        if let Err(e) = logged {
            // The log may now end in a partial record: appending after it would hide later
            // writes from recovery. Refuse writes until a new log is started; reads go on.
            self.fail_wal(format!("WAL write failed: {e}"));
            return Err(e);
        }
        let state = self.read_state();
        let (mut seq, mut user_bytes) = (first_seq, 0);
        for member in group.written_mut() {
            let batch = std::mem::take(&mut member.batch);
            let ops = batch.len() as u64;
            user_bytes += batch.payload_bytes() as u64;
            apply_to_memtables(&state, batch, seq);
            seq += ops;
        }
        self.visible_seq.store(last_seq, Ordering::Release);
        self.note_written(last_seq);
        Counters::add(&self.counters.user_bytes, user_bytes);
        Counters::add_one(&self.counters.write_groups);
        Counters::add(
            &self.counters.grouped_batches,
            group.written().count() as u64,
        );
        if state.trees.iter().any(|t| t.mem_is_full(1)) {
            // The group is logged (synced if asked) and visible: it succeeded, whatever
            // happens to the next log. A memtable that could not be frozen is frozen by a
            // later write; the failure is counted, as it is nowhere else seen.
            if self.freeze_memtable(&mut writer).is_err() {
                self.count_failure(&mut lock(&self.background));
            }
        }
        Ok(())
    }

    /// Refuses each member whose condition does not hold, in queue order: checked against the
    /// store (which the writer lock keeps as it is) and the writes of the members before it
    /// that stay in the group, as if each member were written alone in turn.
    fn refuse_unmet_conditions(&self, group: &mut Group) {
        if group.members.iter().all(|m| m.condition.is_none()) {
            return;
        }
        let mut earlier = EarlierWrites::default();
        let refusals: Vec<Option<Error>> = (group.members.iter())
            .map(|member| {
                if member.refused.is_some() {
                    return None; // Refused already: it keeps its refusal and writes nothing.
                }
                if let Some(condition) = &member.condition {
                    if let Err(refusal) = self.check_condition(condition, &earlier) {
                        return Some(refusal);
                    }
                }
                earlier.record(&member.batch);
                None
            })
            .collect();
        for (member, refusal) in group.members.iter_mut().zip(refusals) {
            if refusal.is_some() {
                member.refused = refusal;
            }
        }
    }

    /// Refuses each member whose batch writes to a keyspace the store does not have (dropped
    /// since its handle was made, or of another store): checked under the writer lock, which
    /// a drop takes too, so no write lands in a keyspace being dropped.
    fn refuse_unknown_keyspaces(&self, group: &mut Group) {
        let state = self.read_state();
        for member in &mut group.members {
            let mut keyspaces = member.batch.keyspaces();
            if let Some(missing) = keyspaces.find(|&ks| state.tree(ks).is_none()) {
                member.refused = Some(Error::NoSuchKeyspace {
                    name: format!("number {missing} (dropped, or of another store)"),
                });
            }
        }
    }

    /// `Ok` when `condition` holds, given what earlier members of the group write; else the
    /// conflict (or the error that stopped the check). Each key is read once: the conflict
    /// carries the value the check found.
    fn check_condition(&self, condition: &Condition, earlier: &EarlierWrites<'_>) -> Result<()> {
        let conflict = |key: &[u8], current: Option<Vec<u8>>| {
            Err(Error::Conflict {
                key: key.to_vec(),
                current,
            })
        };
        match condition {
            Condition::Holds {
                keyspace,
                key,
                expected,
            } => {
                let current = match earlier.get(*keyspace, key) {
                    Some(value) => value.map(<[u8]>::to_vec),
                    None => self.get(*keyspace, key, None)?,
                };
                if current != *expected {
                    return conflict(key, current);
                }
            }
            Condition::UnchangedSince { keys, seq } => {
                for (keyspace, key) in keys {
                    if let Some(value) = earlier.get(*keyspace, key) {
                        return conflict(key, value.map(<[u8]>::to_vec));
                    }
                    if let Some(newer) = self
                        .newest(*keyspace, key, None)?
                        .filter(|newest| newest.seq > *seq)
                    {
                        return conflict(key, newer.value.map(Vec::from));
                    }
                }
            }
        }
        Ok(())
    }

    /// Delays or stalls the writer while flush or compaction is behind, so memory and
    /// level 0 do not grow without bound, and counts the time in `Stats::stall_micros`. It
    /// takes the writer's guard to show the writer lock is held: other writers queue behind
    /// the one that waits. A write that would wait for background work that is failing gets
    /// `Error::Background` at once.
    fn wait_for_room(&self, _writer: &MutexGuard<'_, WriterState>, bytes: u64) -> Result<()> {
        let started = Instant::now();
        let mut delayed = self.pay_delayed_rate(bytes);
        let result = self.wait_for_room_until_done(&mut delayed);
        if delayed {
            Counters::add_one(&self.counters.write_stalls);
            let waited = started.elapsed().as_micros() as u64;
            Counters::add(&self.counters.stall_micros, waited);
            self.counters
                .longest_stall_micros
                .fetch_max(waited, Ordering::Relaxed);
        }
        result
    }

    /// While level 0 is past its slowdown trigger, waits for this group's `bytes` at the
    /// delayed write rate (`write_rate`); true when it waited. The wait ends early once level
    /// 0 is back under the trigger, or the store is closing: each flush or compaction that
    /// ends wakes it to look.
    fn pay_delayed_rate(&self, bytes: u64) -> bool {
        let trigger = self.options.tuning.l0_slowdown_trigger;
        let level0 = self.read_state().most_level0_tables();
        let wait = self.write_rate.delay(bytes, level0, level0 >= trigger);
        if wait.is_zero() {
            return false;
        }
        let until = Instant::now() + wait;
        let mut background = lock(&self.background);
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            let caught_up = self.read_state().most_level0_tables() < trigger;
            if caught_up || background.shutdown || left.is_zero() {
                break;
            }
            background = match self.background_cv.wait_timeout(background, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        true
    }

    /// Waits while too many memtables wait for their flush or level 0 reached its stop
    /// trigger. The delayed rate keeps the second rare: it is the bound, not the brake.
    fn wait_for_room_until_done(&self, delayed: &mut bool) -> Result<()> {
        // Whether this group was counted as stopped for a flush, and for level 0: once each.
        let (mut counted_flush, mut counted_level0) = (false, false);
        loop {
            let state = self.read_state();
            let level0_full = state.most_level0_tables() >= self.options.tuning.l0_stop_trigger;
            let too_many_frozen =
                state.frozen_logs().len() >= self.options.tuning.max_immutable_memtables;
            if !too_many_frozen && !level0_full {
                return Ok(());
            }
            *delayed = true;
            count_once(
                too_many_frozen,
                &mut counted_flush,
                &self.counters.stops_for_flush,
            );
            count_once(
                level0_full,
                &mut counted_level0,
                &self.counters.stops_for_level0,
            );
            let background = lock(&self.background);
            // A failed WAL needs the flush thread to take the writer lock, which this leader
            // holds: give it up rather than wait.
            if let Some(reason) = &background.wal_error {
                return Err(Error::WritesRefused {
                    reason: reason.clone(),
                });
            }
            let stalled_on = match too_many_frozen {
                true => Job::Flush,
                false => Job::Compaction,
            };
            if let Some(failure) = background.failure(stalled_on) {
                return Err(Error::Background {
                    reason: failure.reason.clone(),
                });
            }
            self.background_cv.notify_all();
            let _ = self
                .background_cv
                .wait_timeout(background, Duration::from_millis(50));
        }
    }

    /// Starts a new WAL file, durable in the directory; a file that was created but whose
    /// entry could not be synced is removed again.
    fn new_log(&self) -> Result<(u64, LogWriter)> {
        let number = self.new_file_number();
        let path = self.path_of(&filename::log_file_name(number));
        let file = self.fs.create(&path)?;
        // The new log's directory entry must be durable before synced writes land in it.
        if let Err(e) = self.fs.sync_dir(&self.dir) {
            drop(file);
            let _ = self.fs.remove(&path);
            return Err(e);
        }
        Ok((number, LogWriter::new(file)))
    }

    /// Freezes the active memtable and starts a new one with a new WAL file.
    pub(super) fn freeze_memtable(&self, writer: &mut WriterState) -> Result<()> {
        // Set until the freeze succeeds: every early return below leaves it set.
        writer.freeze_failed = true;
        let old_number = self.read_state().default_tree().mem.log_number();
        let previous = PreviousLog {
            number: old_number,
            len: writer.wal()?.len(),
        };
        let (number, mut log) = self.new_log()?;
        if let Err(e) = log.note_previous_log(previous) {
            drop(log);
            let _ = self
                .fs
                .remove(&self.path_of(&filename::log_file_name(number)));
            return Err(e);
        }
        // The old log is not synced here: a synced write in the new log would make every
        // earlier write durable, so the write syncs it first (`WriterState::sync_all`). Most
        // logs never need it: their memtable reaches a synced table before any synced write,
        // and the log is deleted with its pages unwritten. Syncing at every freeze wrote the
        // whole load twice (log and level-0 table) and held the writers for each sync.
        // A power loss may then cut the old log short at a record boundary, where it looks
        // whole: the new log's first fragment says how long it was (`wal::PreviousLog`).
        let frozen = self.frozen_log_numbers();
        writer.drop_flushed_logs(&frozen);
        if let Some(old) = writer.wal.replace(log) {
            writer.unsynced_logs.push((old_number, old));
        }
        writer.freeze_failed = false;
        self.install_new_memtable(number);
        Ok(())
    }

    /// Makes the active memtable the newest frozen one, and a new empty one (logged in
    /// `log_number`) active.
    /// Freezes every keyspace's memtable at once (an empty one is replaced, not kept), so
    /// that each log holds the writes of one generation of memtables, flushed together.
    fn install_new_memtable(&self, log_number: u64) {
        // Before the frozen memtable is published, so that no compaction turn sees it flushed
        // while the rest still counts from the freeze before.
        self.level0_rest_ends(Instant::now());
        self.replace_read_state(|old| {
            old.with_trees(|tree| {
                let mut immutable = Vec::with_capacity(tree.immutable.len() + 1);
                if !tree.mem.is_empty() {
                    immutable.push(Arc::clone(&tree.mem));
                }
                immutable.extend(tree.immutable.iter().cloned());
                Arc::new(Tree {
                    keyspace: Arc::clone(&tree.keyspace),
                    mem: tree.keyspace.new_memtable(log_number),
                    immutable,
                    version: Arc::clone(&tree.version),
                })
            })
        });
        self.background_cv.notify_all();
    }

    /// After the WAL failed: starts a new log, then flushes every frozen memtable so that no
    /// log that may end in a partial record is needed any more, and only then accepts writes
    /// again. (Were writes accepted first, a power loss would leave a damaged log followed by
    /// a log of later writes: a hole in the history.) Does nothing while the WAL is healthy.
    pub(super) fn restart_wal(&self) -> Result<()> {
        // Checked before the writer lock too: a group's leader may hold that lock while it
        // waits for a flush, and the flush thread must not wait for it when there is nothing
        // to restart.
        if lock(&self.background).wal_error.is_none() {
            return Ok(());
        }
        let mut writer = lock(&self.writer);
        if lock(&self.background).wal_error.is_none() {
            return Ok(());
        }
        // Always a new log: the old one may end in part of a record, whether its writer
        // recorded a failure or a leader panicked in the middle of an append.
        let (number, log) = self.new_log()?;
        writer.wal = Some(log);
        self.install_new_memtable(number);
        while self.flush_oldest()? {}
        let mut background = lock(&self.background);
        background.wal_error = None;
        // Every frozen memtable is flushed: whatever flush failed before has been done here,
        // and a failure left standing would fail writes that wait for room until the flush
        // thread's next success.
        self.note_outcome(&mut background, Job::Flush, &Ok(()));
        drop(background);
        self.background_cv.notify_all();
        Ok(())
    }

    /// Syncs the WAL: every write acknowledged before is durable once this returns. A failed
    /// sync fails the WAL, as a synced write's would (the log may not hold what it should).
    pub(super) fn sync_wal(&self) -> Result<()> {
        let mut writer = lock(&self.writer);
        self.refuse_if_failed()?;
        let synced = writer.sync_all(&self.frozen_log_numbers());
        if let Err(e) = &synced {
            self.fail_wal(format!("syncing the WAL failed: {e}"));
        }
        synced
    }

    /// Syncs every log that holds writes not yet in a table, for `close` and drop: without
    /// a failure to report when the WAL has already failed (or the store is read-only).
    pub(super) fn sync_logs_for_close(&self) -> Result<()> {
        let mut writer = lock(&self.writer);
        match writer.wal.is_some() {
            true => writer.sync_all(&self.frozen_log_numbers()),
            false => Ok(()),
        }
    }

    /// The log numbers of the frozen memtables, whose logs recovery would still replay.
    fn frozen_log_numbers(&self) -> Vec<u64> {
        self.read_state().frozen_logs()
    }

    /// Writes every memtable that holds a write acknowledged before the call to a table.
    /// It waits for those memtables only, never for an empty list of frozen ones: writers
    /// that go on meanwhile keep freezing memtables, and under a steady stream of writes
    /// the list may never be empty at the moment a waiter looks.
    pub(super) fn flush(&self) -> Result<()> {
        let newest_to_flush = {
            let mut writer = lock(&self.writer);
            self.refuse_if_failed()?;
            let state = self.read_state();
            if state.trees.iter().any(|t| !t.mem.is_empty()) {
                let log_number = state.default_tree().mem.log_number();
                drop(state);
                self.freeze_memtable(&mut writer)?;
                log_number
            } else {
                match state.frozen_logs().last() {
                    Some(&newest) => newest,
                    None => return Ok(()),
                }
            }
        };
        self.wait_until(&[Job::Flush], |inner, _| {
            (inner.read_state().frozen_logs().iter()).all(|&log| log > newest_to_flush)
        })
    }

    /// Blocks until `done` holds, waking whenever background work finishes. Fails if the WAL
    /// fails, or if a background step fails while waiting (it is retried, but the caller
    /// learns of it rather than waiting for a disk that may not come back).
    pub(super) fn wait_until(
        &self,
        watched: &[Job],
        done: impl Fn(&Inner, &BackgroundState) -> bool,
    ) -> Result<()> {
        let mut background = lock(&self.background);
        let failures_before = self.failures();
        loop {
            if let Some(reason) = &background.wal_error {
                return Err(Error::WritesRefused {
                    reason: reason.clone(),
                });
            }
            if done(self, &background) {
                return Ok(());
            }
            if self.failures() != failures_before {
                let failure = watched
                    .iter()
                    .find_map(|&job| background.failure(job).as_ref());
                if let Some(failure) = failure {
                    return Err(Error::Background {
                        reason: failure.reason.clone(),
                    });
                }
            }
            self.background_cv.notify_all();
            background = self
                .background_cv
                .wait_timeout(background, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Lets a failed background step run again now instead of after its pause.
    pub(super) fn retry_now(&self) {
        let mut background = lock(&self.background);
        for job in [Job::Flush, Job::Compaction] {
            if let Some(failure) = background.failure_mut(job) {
                failure.retry_at = Instant::now();
            }
        }
        drop(background);
        self.background_cv.notify_all();
    }
}

/// What the members of a group before the one checked write: the value (`None`: deleted) each
/// key they set or delete ends with, and the ranges they delete.
#[derive(Default)]
struct EarlierWrites<'a> {
    keys: HashMap<(KeyspaceId, &'a [u8]), Option<&'a [u8]>>,
    ranges: Vec<(KeyspaceId, &'a [u8], &'a [u8])>,
}

impl<'a> EarlierWrites<'a> {
    /// Adds a batch's writes, in their order: a range deletion forgets the keys it covers.
    fn record(&mut self, batch: &'a WriteBatch) {
        for op in batch.ops() {
            match op {
                OpView::Key(key, value) => {
                    self.keys.insert(key, value);
                }
                OpView::Range(ks, start, end) => {
                    (self.keys).retain(|(k_ks, k), _| *k_ks != ks || *k < start || *k >= end);
                    self.ranges.push((ks, start, end));
                }
            }
        }
    }

    /// What `key` of keyspace `ks` holds after these writes; `None` when they leave it alone.
    fn get(&self, ks: KeyspaceId, key: &[u8]) -> Option<Option<&'a [u8]>> {
        if let Some(value) = self.keys.get(&(ks, key)) {
            return Some(*value);
        }
        let deleted =
            (self.ranges.iter()).any(|&(r_ks, start, end)| r_ks == ks && start <= key && key < end);
        deleted.then_some(None)
    }
}

/// Adds one to `counter` when `happened`, unless `counted` says it was added already.
fn count_once(happened: bool, counted: &mut bool, counter: &AtomicU64) {
    if happened && !*counted {
        *counted = true;
        Counters::add_one(counter);
    }
}

/// Applies `batch`'s entries, numbered from `first_seq`, to the memtables of their keyspaces
/// (which `refuse_unknown_keyspaces` checked are there).
fn apply_to_memtables(state: &ReadState, batch: WriteBatch, first_seq: u64) {
    let memtable = |ks| {
        &state
            .tree(ks)
            .expect("keyspaces checked under the writer lock")
            .mem
    };
    if let (Some(ks), false) = (batch.only_keyspace(), batch.has_range_deletions()) {
        let entries = batch.into_writes(first_seq).filter_map(|(_, w)| match w {
            Write::Entry(e) => Some(e),
            Write::Range(_) => None,
        });
        memtable(ks).apply(entries);
        return;
    }
    let mut writes = batch.into_writes(first_seq).peekable();
    while let Some((ks, first)) = writes.next() {
        let first = match first {
            Write::Entry(e) => e,
            Write::Range(tombstone) => {
                memtable(ks).add_range_tombstone(tombstone);
                continue;
            }
        };
        let mut run = vec![first];
        while let Some((_, Write::Entry(e))) =
            writes.next_if(|(next, w)| *next == ks && matches!(w, Write::Entry(_)))
        {
            run.push(e);
        }
        memtable(ks).apply(run);
    }
}
