//! Compactions: picked under the shape lock with their inputs marked as taken, merged (or
//! moved) without it, recorded in the manifest under it again.

use std::collections::{HashMap, HashSet};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use super::table_writer::{Cuts, NewTables};
use super::{lock, Counters, Inner, Job, Tree};
use crate::compaction::{self, Compaction, MergeRules, Part};
use crate::entry::SeqNo;
use crate::error::Result;
use crate::filter_plan::Span;
use crate::keyspace::KeyspaceId;
use crate::manifest::{TableMeta, VersionEdit};
use crate::range_tombstone::RangeTombstone;
use crate::sstable::Table;
use crate::version::{TableHandle, Version};
use std::sync::Arc;

impl Inner {
    /// Picks one compaction no other running one conflicts with, and runs it. `Ok(false)`
    /// when there is none.
    pub(super) fn compact_once(&self) -> Result<bool> {
        if self.drop_expired_tables()? {
            return Ok(true);
        }
        let picked = {
            let mut shape = lock(&self.shape);
            let state = self.read_state();
            // The keyspace whose tree needs it most first (each keyspace's running compactions
            // conflict only with its own).
            let mut trees: Vec<(&Arc<Tree>, f64)> = (state.trees.iter())
                .map(|t| (t, compaction::most_urgent(&t.version, t.options())))
                .collect();
            trees.sort_by(|a, b| b.1.total_cmp(&a.1));
            let job = trees.into_iter().find_map(|(tree, _)| {
                let running = shape.compacting.entry(tree.id()).or_default();
                let job = compaction::pick(&tree.version, tree.options(), running)?;
                running.add(&job);
                Some((tree.id(), job))
            });
            job.or_else(|| self.pick_level0_at_rest(&state, &mut shape))
        };
        match picked {
            Some((ks, job)) => self.run_compaction(ks, job).map(|()| true),
            None => Ok(false),
        }
    }

    /// Merges every table into one level, in the caller's thread. It waits for running
    /// compactions to end (none starts while it waits), then takes every table. Flushes go on
    /// throughout; the level-0 tables they add stay above the merge's output, and compactions
    /// of them run beside it only where they write outside its output level's range.
    pub(super) fn compact_all(&self) -> Result<()> {
        let keyspaces: Vec<KeyspaceId> = self.read_state().trees.iter().map(|t| t.id()).collect();
        keyspaces
            .into_iter()
            .try_for_each(|ks| self.compact_keyspace(ks))
    }

    /// Merges every table of keyspace `ks` into one level (nothing once it is dropped).
    fn compact_keyspace(&self, ks: KeyspaceId) -> Result<()> {
        lock(&self.background).manual_waiting += 1;
        let picked = self.take_all_tables_when_free(ks);
        lock(&self.background).manual_waiting -= 1;
        self.background_cv.notify_all();
        let Some(job) = picked else {
            return self.drop_ranges_of_empty_tree(ks);
        };
        let _job = self.start_foreground_job();
        // A panic inside is the caller's error, as one in a background job is a failure.
        let result = super::background::caught(Job::Compaction, || self.run_compaction(ks, job));
        // Recorded as a background compaction's outcome is: a failure stands (and pauses
        // compactions) until a compaction succeeds, a success clears one that stood.
        self.note_outcome(&mut lock(&self.background), Job::Compaction, &result);
        self.background_cv.notify_all();
        result
    }

    /// Drops, by a manifest edit alone, the tables whose every entry has expired (its
    /// newest is numbered below the keyspace's expiry): a store of entries that live a while
    /// and are not written again gives their space back without rewriting them. `true` when
    /// it dropped any.
    fn drop_expired_tables(&self) -> Result<bool> {
        let state = self.read_state();
        let mut dropped = false;
        for tree in state.trees.iter().filter(|t| t.options().ttl.is_some()) {
            let below = self.expired_below(tree);
            if below == 0 {
                continue;
            }
            let mut shape = lock(&self.shape);
            let Ok(current) = self.tree(tree.id()) else {
                continue;
            };
            let running = shape.compacting.entry(tree.id()).or_default();
            let expired: Vec<&Arc<TableHandle>> = (current.version.tables())
                .filter(|t| (1..below).contains(&t.meta.largest_seq))
                .filter(|t| !running.holds(t.meta.number))
                .collect();
            if expired.is_empty() {
                continue;
            }
            let mut edit = VersionEdit {
                removed: expired
                    .iter()
                    .map(|t| (t.meta.level, t.meta.number))
                    .collect(),
                ..VersionEdit::default()
            };
            self.log_edit(&mut shape, &mut edit, std::iter::empty())?;
            let version = self.next_version(&shape, &current, &edit, &HashMap::new());
            self.replace_read_state(|old| old.with_version(current.id(), version));
            self.rotate_manifest_if_long(&mut shape);
            Counters::add(&self.counters.tables_expired, expired.len() as u64);
            for table in expired {
                table.table.mark_obsolete();
            }
            dropped = true;
        }
        Ok(dropped)
    }

    /// A tree without tables has nothing for its range deletions to delete: each that every
    /// reader sees goes.
    fn drop_ranges_of_empty_tree(&self, ks: KeyspaceId) -> Result<()> {
        let Ok(tree) = self.tree(ks) else {
            return Ok(());
        };
        let deletions = tree.version.range_tombstones();
        if deletions.is_empty() || tree.version.tables().next().is_some() {
            return Ok(());
        }
        let cleared = Cleared {
            smallest: deletions
                .iter()
                .map(|d| d.start.clone())
                .min()
                .unwrap_or_default(),
            largest: deletions
                .iter()
                .map(|d| d.end.clone())
                .max()
                .unwrap_or_default(),
            inputs: HashSet::new(),
            seen_by_all: self
                .live_snapshots()
                .into_iter()
                .min()
                .unwrap_or(SeqNo::MAX),
            applied: deletions.to_vec(),
            ..Cleared::default()
        };
        let edit = VersionEdit::default();
        self.install_compaction(
            ks,
            edit,
            &HashMap::new(),
            std::iter::empty(),
            Some(&cleared),
        )?;
        Ok(())
    }

    fn take_all_tables_when_free(&self, ks: KeyspaceId) -> Option<Compaction> {
        loop {
            {
                let mut shape = lock(&self.shape);
                let running = shape.compacting.entry(ks).or_default();
                if running.is_empty() {
                    let tree = self.tree(ks).ok()?;
                    let job = compaction::full(&tree.version, tree.options())?;
                    running.add(&job);
                    return Some(job);
                }
            }
            let background = lock(&self.background);
            let _ = self
                .background_cv
                .wait_timeout(background, Duration::from_millis(10));
        }
    }

    /// Runs a picked compaction, then frees its inputs for other compactions (whether it
    /// succeeded or not).
    fn run_compaction(&self, ks: KeyspaceId, job: Compaction) -> Result<()> {
        let result = panic::catch_unwind(AssertUnwindSafe(|| match job.is_trivial_move() {
            true => self.move_tables(ks, &job),
            false => self.merge(ks, &job),
        }));
        if let Some(running) = lock(&self.shape).compacting.get_mut(&ks) {
            running.remove(&job);
        }
        self.background_cv.notify_all();
        result.unwrap_or_else(|payload| panic::resume_unwind(payload))
    }

    /// Merges the inputs into new tables of the output level.
    fn merge(&self, ks: KeyspaceId, job: &Compaction) -> Result<()> {
        let (NewTables { added, opened }, cleared) = self.merge_parts(ks, job)?;
        // Each input is removed from the level it lives in (a full compaction takes inputs
        // from every level).
        let removed = job
            .all_inputs()
            .map(|t| (t.meta.level, t.meta.number))
            .collect();
        let written = added.iter().map(|t| t.file_size).sum();
        let installed = self.install_compaction(
            ks,
            VersionEdit {
                next_file_number: Some(self.next_file_number.load(Ordering::SeqCst)),
                added,
                removed,
                ..VersionEdit::default()
            },
            &opened,
            opened.values(),
            Some(&cleared),
        )?;
        if !installed {
            return Ok(());
        }
        // Counted once recorded, as a flush is.
        let levels = &self.counters.levels;
        Counters::add_one(&self.counters.compactions);
        Counters::add_one(&levels[job.output_level].compactions);
        Counters::add(&levels[job.output_level].bytes_written, written);
        for input in job.all_inputs() {
            Counters::add(
                &levels[input.meta.level as usize].bytes_read,
                input.meta.file_size,
            );
        }
        // The manifest no longer names the inputs. Readers may still hold them (an iterator
        // over an older version), and the table cache may need to open their files again for
        // those readers: each file is deleted when the last holder of its table lets go.
        for input in job.all_inputs() {
            input.table.mark_obsolete();
        }
        Ok(())
    }

    /// Writes the merged inputs, in parts side by side when the job splits (see
    /// `Compaction::parts`): this thread writes the first part, and one more thread each of the
    /// others. If any part fails, or panics, the tables the others wrote are discarded too.
    fn merge_parts(&self, ks: KeyspaceId, job: &Compaction) -> Result<(NewTables, Cleared)> {
        let parts = job.parts(self.options.compaction_threads);
        let expected_keys = job.all_inputs().map(|t| t.meta.entries).sum::<u64>();
        let keys_per_part = expected_keys / parts.len() as u64;
        let inputs: HashSet<u64> = job.all_inputs().map(|t| t.meta.number).collect();
        let (smallest, largest) = job.output_range();
        let output = Span {
            smallest: &smallest,
            largest: &largest,
            entries: expected_keys,
            level: job.output_level,
        };
        // The tree is held only to make the writer: held for the whole merge, it would keep
        // every memtable flushed meanwhile in memory until the merge ends.
        let (writer, rules, applied) = match self.tree(ks) {
            Ok(tree) => {
                // The range deletions the manifest holds (a memtable's are not durable yet).
                let ranges = tree.version.range_fragments();
                let rules = MergeRules {
                    ranges: (!ranges.is_empty()).then(|| Arc::clone(ranges)),
                    expired_below: (tree.options().ttl).map(|_| self.expired_below(&tree)),
                    filter: (self.options.compaction_filter.as_ref())
                        .map(|f| (Arc::clone(f), Arc::from(tree.keyspace.name.as_str()))),
                    filtered_from: Arc::new(AtomicU64::new(u64::MAX)),
                };
                let applied = tree.version.range_tombstones().to_vec();
                (
                    self.compaction_writer(&tree, &inputs, output),
                    rules,
                    applied,
                )
            }
            // A keyspace dropped since the job was picked: nothing to write.
            Err(_) => return Ok((NewTables::default(), Cleared::default())),
        };
        let snapshots = self.live_snapshots();
        let cleared = Cleared {
            smallest: smallest.clone(),
            largest: largest.clone(),
            inputs: inputs.clone(),
            seen_by_all: snapshots.iter().copied().min().unwrap_or(SeqNo::MAX),
            applied,
            snapshots: snapshots.clone(),
            filtered_from: Arc::clone(&rules.filtered_from),
        };
        let write_part = |part: &Part| {
            writer.write(
                job.merged_entries_in(part, &snapshots, &rules),
                job.output_level as u32,
                keys_per_part,
                Cuts::at_size(&job.next_level_starts),
            )
        };
        let Some((first, others)) = parts.split_first() else {
            return Ok((NewTables::default(), cleared));
        };
        // Every part is joined before anything is kept or discarded, panics too.
        let written: Vec<thread::Result<Result<NewTables>>> = thread::scope(|scope| {
            let threads: Vec<_> = others
                .iter()
                .map(|part| scope.spawn(|| write_part(part)))
                .collect();
            let here = panic::catch_unwind(AssertUnwindSafe(|| write_part(first)));
            std::iter::once(here)
                .chain(threads.into_iter().map(|t| t.join()))
                .collect()
        });
        let mut all = NewTables::default();
        let mut failure = None;
        let mut panicked = None;
        for part in written {
            match part {
                Ok(Ok(tables)) => all.extend(tables),
                Ok(Err(e)) => {
                    failure.get_or_insert(e);
                }
                Err(payload) => {
                    panicked.get_or_insert(payload);
                }
            }
        }
        if failure.is_some() || panicked.is_some() {
            all.discard();
        }
        if let Some(payload) = panicked {
            panic::resume_unwind(payload);
        }
        if let Some(e) = failure {
            return Err(e);
        }
        if !others.is_empty() {
            Counters::add_one(&self.counters.split_compactions);
        }
        Ok((all, cleared))
    }

    /// Moves the inputs to the output level by a manifest edit alone: the same files, the
    /// same numbers, another level.
    fn move_tables(&self, ks: KeyspaceId, job: &Compaction) -> Result<()> {
        let level = job.output_level;
        let moved: Vec<TableMeta> = job
            .inputs
            .iter()
            .map(|t| TableMeta {
                level: level as u32,
                ..t.meta.clone()
            })
            .collect();
        let opened: HashMap<u64, Table> = job
            .inputs
            .iter()
            .map(|t| (t.meta.number, t.table.clone()))
            .collect();
        let removed = job
            .inputs
            .iter()
            .map(|t| (t.meta.level, t.meta.number))
            .collect();
        // A failed edit must not discard the tables: they are the inputs, still live. The move
        // is counted once recorded, as a flush is.
        let edit = VersionEdit {
            added: moved,
            removed,
            ..VersionEdit::default()
        };
        if !self.install_compaction(ks, edit, &opened, std::iter::empty(), None)? {
            return Ok(());
        }
        let counters = &self.counters.levels[level];
        Counters::add_one(&self.counters.trivial_moves);
        Counters::add(&counters.tables_moved, job.inputs.len() as u64);
        let bytes: u64 = job.inputs.iter().map(|t| t.meta.file_size).sum();
        Counters::add(&counters.bytes_moved, bytes);
        Ok(())
    }

    /// Records a compaction's edit in the manifest and swaps in the version it makes. On
    /// failure `outputs` are discarded (see `log_edit`).
    /// Records a compaction of keyspace `ks` and installs its version. Returns `false`, and
    /// discards the outputs, when the keyspace was dropped while the compaction ran: its
    /// inputs are gone already.
    fn install_compaction<'t>(
        &self,
        ks: KeyspaceId,
        mut edit: VersionEdit,
        opened: &HashMap<u64, Table>,
        outputs: impl Iterator<Item = &'t Table>,
        cleared: Option<&Cleared>,
    ) -> Result<bool> {
        let mut shape = lock(&self.shape);
        let Ok(tree) = self.tree(ks) else {
            outputs.for_each(|t| t.mark_obsolete());
            return Ok(false);
        };
        if let Some(cleared) = cleared {
            // A snapshot taken during the merge may read a version the user's filter changed:
            // the merge is not installed (the compaction comes again, with the snapshot known).
            let changed_from = cleared.filtered_from.load(Ordering::Relaxed);
            let new_readers = (self.live_snapshots().into_iter())
                .any(|s| s >= changed_from && !cleared.snapshots.contains(&s));
            if new_readers {
                outputs.for_each(|t| t.mark_obsolete());
                return Ok(false);
            }
            let (removed, added) = cleared.range_edit(&tree.version);
            edit.removed_ranges = removed.into_iter().map(|t| (ks, t)).collect();
            edit.added_ranges = added.into_iter().map(|t| (ks, t)).collect();
        }
        self.log_edit(&mut shape, &mut edit, outputs)?;
        let version = self.next_version(&shape, &tree, &edit, opened);
        self.replace_read_state(|old| old.with_version(ks, version));
        self.rotate_manifest_if_long(&mut shape);
        Ok(true)
    }
}

/// What a merge did to the range deletions: of every entry in its inputs' key range
/// (`smallest..=largest`), it dropped those older than a deletion every reader sees (numbered
/// `seen_by_all` or below).
struct Cleared {
    smallest: Vec<u8>,
    largest: Vec<u8>,
    /// The inputs' file numbers.
    inputs: HashSet<u64>,
    seen_by_all: SeqNo,
    /// The range deletions the merge applied (those live when it began).
    applied: Vec<RangeTombstone>,
    /// The live snapshots when it began.
    snapshots: Vec<SeqNo>,
    /// The smallest number of a version the user's filter removed or changed.
    filtered_from: Arc<AtomicU64>,
}

impl Default for Cleared {
    fn default() -> Self {
        Cleared {
            smallest: Vec::new(),
            largest: Vec::new(),
            inputs: HashSet::new(),
            seen_by_all: 0,
            applied: Vec::new(),
            snapshots: Vec::new(),
            filtered_from: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }
}

impl Cleared {
    /// The range deletions of `version` with nothing left to delete, and what remains of
    /// those with something left in part of their range. A deletion every reader sees (one
    /// the merge applied) has nothing left to delete in the merged range, where the merge
    /// dropped every older entry of the inputs, unless a table outside the merge holds older
    /// entries there; and nothing left outside it where no table holds older entries. What
    /// memtables hold is newer than every deletion in the manifest.
    fn range_edit(&self, version: &Version) -> (Vec<RangeTombstone>, Vec<RangeTombstone>) {
        let (mut removed, mut added) = (Vec::new(), Vec::new());
        if self.smallest > self.largest {
            return (removed, added);
        }
        for deletion in version.range_tombstones() {
            if deletion.seq > self.seen_by_all || !self.applied.contains(deletion) {
                continue;
            }
            // Whether a table outside the merge holds entries older than the deletion that
            // `part` may cover.
            let older_left = |part: &RangeTombstone| {
                version.tables().any(|t| {
                    let meta = &t.meta;
                    !self.inputs.contains(&meta.number)
                        && meta.smallest_seq < deletion.seq
                        && part.meets(&meta.smallest_key, &meta.largest_key)
                })
            };
            let mut parts = deletion.without(&self.smallest, &self.largest);
            parts.extend(self.within_merged(deletion));
            let kept: Vec<RangeTombstone> =
                parts.iter().filter(|p| older_left(p)).cloned().collect();
            // All still needed: the deletion stays whole.
            if kept.len() < parts.len() {
                removed.push(deletion.clone());
                added.extend(kept);
            }
        }
        (removed, added)
    }

    /// The part of `deletion` within the merged range, if any.
    fn within_merged(&self, deletion: &RangeTombstone) -> Option<RangeTombstone> {
        let mut past_largest = self.largest.clone();
        past_largest.push(0);
        let start = (&deletion.start).max(&self.smallest).clone();
        let end = (&deletion.end).min(&past_largest).clone();
        (start < end).then_some(RangeTombstone {
            start,
            end,
            seq: deletion.seq,
        })
    }
}
