//! Background work: flushes of frozen memtables and compactions, one step at a time.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::table_writer::{NewTables, TableWriter};
use super::{lock, Inner, ReadState, ShapeState};
use crate::compaction::{self, Compaction};
use crate::entry::SeqNo;
use crate::error::Result;
use crate::filename::{self, FileKind};
use crate::iter::NewestVersions;
use crate::manifest::VersionEdit;
use crate::memtable::MemTable;

impl Inner {
    pub(super) fn has_background_work(&self) -> bool {
        let state = self.read_state();
        !state.immutable.is_empty() || compaction::needs_compaction(&state.version, &self.options)
    }

    pub(super) fn background_loop(&self) {
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
    pub(super) fn do_background_step(&self) -> Result<()> {
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

    pub(super) fn table_writer(&self) -> TableWriter<'_> {
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

    pub(super) fn run_compaction(&self, shape: &mut ShapeState, job: Compaction) -> Result<()> {
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

    pub(super) fn remove_obsolete_logs(&self, live_log: u64) {
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
