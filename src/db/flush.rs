//! Flushes: a frozen memtable written as level-0 tables, recorded in the manifest, and the
//! WAL files no memtable needs any more deleted.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::table_writer::{Cuts, NewTables};
use super::{lock, Counters, Inner, ReadState};
use crate::error::Result;
use crate::filename::{self, FileKind};
use crate::iter::KeptVersions;
use crate::manifest::VersionEdit;
use crate::memtable::MemTable;

impl Inner {
    /// Flushes the oldest frozen memtable, if there is one. Memtables are flushed one at a
    /// time and oldest first, whoever flushes (the flush thread, or a caller restarting the
    /// WAL): level 0 is ordered by table number, so an older memtable must get the lower one.
    pub(super) fn flush_oldest(&self) -> Result<bool> {
        let _flushing = lock(&self.flushing);
        let Some(oldest) = self.read_state().immutable.last().cloned() else {
            return Ok(false);
        };
        self.flush_memtable(oldest)?;
        Ok(true)
    }

    /// Writes `mem` as level-0 tables without holding the shape lock (compactions go on
    /// meanwhile), then records them and drops the memtable from the read state.
    fn flush_memtable(&self, mem: Arc<MemTable>) -> Result<()> {
        let snapshots = self.live_snapshots();
        let entries = KeptVersions::new(mem.iter_from(Bound::Unbounded), snapshots, false);
        let NewTables { added, opened } =
            self.table_writer()
                .write(entries, 0, mem.len() as u64, Cuts::Never)?;
        let mut shape = lock(&self.shape);
        let state = self.read_state();
        // Logs older than the oldest memtable still unflushed hold nothing needed any more.
        let live_log = state
            .immutable
            .iter()
            .rev()
            .find(|m| !Arc::ptr_eq(m, &mem))
            .unwrap_or(&state.mem)
            .log_number();
        let mut edit = VersionEdit {
            log_number: Some(live_log),
            next_file_number: Some(self.next_file_number.load(Ordering::SeqCst)),
            last_seq: Some(self.visible_seq.load(Ordering::Acquire)),
            added,
            removed: Vec::new(),
            write_totals: None,
            filter_policy: None,
        };
        self.log_edit(&mut shape, &mut edit, opened.values())?;
        let version = self.next_version(&shape, &edit, &opened);
        self.replace_read_state(|old| ReadState {
            mem: Arc::clone(&old.mem),
            immutable: old
                .immutable
                .iter()
                .filter(|m| !Arc::ptr_eq(m, &mem))
                .cloned()
                .collect(),
            version,
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
        drop(mem);
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
