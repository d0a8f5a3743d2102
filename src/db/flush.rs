//! Flushes: a frozen memtable written as level-0 tables, recorded in the manifest, and the
//! WAL files no memtable needs any more deleted.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::table_writer::{Cuts, NewTables};
use super::{lock, Counters, Inner, Tree};
use crate::error::Result;
use crate::filename::{self, FileKind};
use crate::iter::KeptVersions;
use crate::keyspace::KeyspaceId;
use crate::manifest::VersionEdit;
use crate::memtable::MemTable;
use crate::version::Version;

impl Inner {
    /// Flushes the oldest generation of frozen memtables (those of one log, one per keyspace
    /// that had writes in it), if there is one. Generations are flushed one at a time and
    /// oldest first, whoever flushes (the flush thread, or a caller restarting the WAL):
    /// level 0 is ordered by table number, so an older memtable must get the lower one.
    pub(super) fn flush_oldest(&self) -> Result<bool> {
        let _flushing = lock(&self.flushing);
        let state = self.read_state();
        let Some(&log) = state.frozen_logs().first() else {
            return Ok(false);
        };
        let frozen: Vec<(Arc<Tree>, Arc<MemTable>)> = (state.trees.iter())
            .filter_map(|tree| {
                let oldest = tree.immutable.last().filter(|m| m.log_number() == log)?;
                Some((Arc::clone(tree), Arc::clone(oldest)))
            })
            .collect();
        drop(state);
        self.flush_memtables(&frozen)?;
        Ok(true)
    }

    /// Writes each memtable of `frozen` as level-0 tables of its keyspace without holding the
    /// shape lock (compactions go on meanwhile), then records them all in one edit (the
    /// generation reaches the tables all at once, or not at all) and drops the memtables from
    /// the read state.
    fn flush_memtables(&self, frozen: &[(Arc<Tree>, Arc<MemTable>)]) -> Result<()> {
        let snapshots = self.live_snapshots();
        let mut written = NewTables::default();
        for (tree, mem) in frozen {
            let entries =
                KeptVersions::new(mem.iter_from(Bound::Unbounded), snapshots.clone(), false);
            let writer = self.table_writer_for(tree);
            match writer.write(entries, 0, mem.len() as u64, Cuts::Never) {
                Ok(tables) => written.extend(tables),
                Err(e) => {
                    written.discard();
                    return Err(e);
                }
            }
        }
        let NewTables { added, opened } = written;
        let is_flushed = |m: &Arc<MemTable>| frozen.iter().any(|(_, f)| Arc::ptr_eq(f, m));
        let mut shape = lock(&self.shape);
        let state = self.read_state();
        // Logs older than the oldest memtable still unflushed hold nothing needed any more.
        let live_log = (state.trees.iter())
            .map(|t| {
                let unflushed = t.immutable.iter().rev().find(|m| !is_flushed(m));
                unflushed.unwrap_or(&t.mem).log_number()
            })
            .min()
            .expect("a store always has its default keyspace");
        let mut edit = VersionEdit {
            log_number: Some(live_log),
            next_file_number: Some(self.next_file_number.load(Ordering::SeqCst)),
            last_seq: Some(self.visible_seq.load(Ordering::Acquire)),
            added,
            seq_times: self.new_seq_times(),
            // The memtables' range deletions move to the manifest with their tables.
            added_ranges: (frozen.iter())
                .flat_map(|(tree, mem)| {
                    let id = tree.id();
                    mem.range_tombstones().into_iter().map(move |t| (id, t))
                })
                .collect(),
            ..VersionEdit::default()
        };
        self.log_edit(&mut shape, &mut edit, opened.values())?;
        let flushed: Vec<&Tree> = (state.trees.iter())
            .filter(|t| frozen.iter().any(|(f, _)| f.id() == t.id()))
            .map(|t| t.as_ref())
            .collect();
        let new_versions = self.next_versions(&shape, &flushed, &edit, &opened);
        let versions: Vec<(KeyspaceId, Arc<Version>)> =
            flushed.iter().map(|t| t.id()).zip(new_versions).collect();
        drop(state);
        self.replace_read_state(|old| {
            old.with_trees(|tree| {
                let version = versions.iter().find(|(id, _)| *id == tree.id());
                Arc::new(Tree {
                    keyspace: Arc::clone(&tree.keyspace),
                    mem: Arc::clone(&tree.mem),
                    immutable: (tree.immutable.iter())
                        .filter(|m| !is_flushed(m))
                        .cloned()
                        .collect(),
                    version: version
                        .map_or_else(|| Arc::clone(&tree.version), |v| Arc::clone(&v.1)),
                })
            })
        });
        // Counted once recorded (a job whose edit failed is retried, and counted then), so
        // the totals in this job's own edit leave it out: the next edit, or the close, has it.
        Counters::add_one(&self.counters.flushes);
        Counters::add(
            &self.counters.levels[0].bytes_written,
            edit.added.iter().map(|t| t.file_size).sum(),
        );
        self.rotate_manifest_if_long(&mut shape);
        drop(shape);
        self.remove_obsolete_logs(live_log);
        self.release_freed_memory();
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
}
