//! The write path: the WAL, the memtable, and freezing it for a flush.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use super::{lock, BackgroundState, Inner, ReadState, WriterState};
use crate::entry::next_seqs;
use crate::error::{Error, Result};
use crate::filename;
use crate::memtable::MemTable;
use crate::wal::LogWriter;
use crate::write_batch::WriteBatch;

impl Inner {
    pub(super) fn refuse_if_failed(&self) -> Result<()> {
        match &lock(&self.background).error {
            Some(reason) => Err(Error::WritesRefused {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    pub(super) fn fail_writes(&self, reason: String) {
        lock(&self.background).error.get_or_insert(reason);
        self.background_cv.notify_all();
    }

    pub(super) fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        let mut writer = lock(&self.writer);
        self.refuse_if_failed()?;
        self.wait_for_room(&writer)?;
        let (first_seq, last_seq) =
            next_seqs(self.visible_seq.load(Ordering::Acquire), batch.len())?;
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
    pub(super) fn wait_for_room(&self, _writer: &MutexGuard<'_, WriterState>) -> Result<()> {
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
    pub(super) fn freeze_memtable(&self, writer: &mut WriterState) -> Result<()> {
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

    pub(super) fn flush(&self) -> Result<()> {
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
    pub(super) fn wait_until(&self, done: impl Fn(&Inner, &BackgroundState) -> bool) -> Result<()> {
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
}
