//! The file handles `FaultFs` gives out: a writer that appends to an inode, a reader of one,
//! and a lock. Each checks the epoch it was opened in, so a handle that outlived a crash or a
//! power cut fails as a dead process's would, and each lets go of its inode when dropped.

use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::{injected, lock_state, Durable, State};
use crate::error::{Error, Result};
use crate::fs::{FileLock, RandomAccessFile, WritableFile};

pub(super) struct MemWritableFile {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) path: PathBuf,
    pub(super) inode: u64,
    pub(super) epoch: u64,
    pub(super) len: u64,
}

impl WritableFile for MemWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut st = lock_state(&self.state);
        st.check_epoch(self.epoch, "writing", &self.path)?;
        st.mutating_op("writing", &self.path)?;
        if st.faults.panic_next_table_append && self.path.to_string_lossy().ends_with(".sst.tmp") {
            st.faults.panic_next_table_append = false;
            drop(st);
            panic!("injected panic while writing {}", self.path.display());
        }
        if st.faults.table_appends_fail && self.path.to_string_lossy().ends_with(".sst.tmp") {
            return Err(injected(
                format!("writing {}", self.path.display()),
                ErrorKind::Other,
                "injected failure of table appends",
            ));
        }
        if let Some(n) = st.faults.append_countdown {
            if n == 0 {
                st.faults.append_countdown = None;
                return Err(injected(
                    format!("writing {}", self.path.display()),
                    ErrorKind::Other,
                    "injected write failure",
                ));
            }
            st.faults.append_countdown = Some(n - 1);
        }
        if let Some(space) = st.faults.space_left {
            if data.len() as u64 > space {
                return Err(injected(
                    format!("writing {}", self.path.display()),
                    ErrorKind::StorageFull,
                    "no space left on device",
                ));
            }
            st.faults.space_left = Some(space - data.len() as u64);
        }
        st.inode_mut(self.inode, &self.path)?
            .data
            .extend_from_slice(data);
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let st = lock_state(&self.state);
        st.check_epoch(self.epoch, "flushing", &self.path)
    }

    fn sync(&mut self) -> Result<()> {
        let mut st = lock_state(&self.state);
        st.check_epoch(self.epoch, "syncing", &self.path)?;
        st.mutating_op("syncing", &self.path)?;
        if st.faults.panic_next_wal_sync && self.path.to_string_lossy().ends_with(".log") {
            st.faults.panic_next_wal_sync = false;
            drop(st);
            panic!("injected panic while syncing {}", self.path.display());
        }
        if st.faults.fail_next_sync {
            st.faults.fail_next_sync = false;
            return Err(injected(
                format!("syncing {}", self.path.display()),
                ErrorKind::Other,
                "injected sync failure",
            ));
        }
        let inode = st.inode_mut(self.inode, &self.path)?;
        inode.durable = Durable::Prefix(inode.data.len());
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

pub(super) fn release_handle(state: &Mutex<State>, inode: u64, epoch: u64) {
    let mut st = lock_state(state);
    if st.epoch != epoch {
        return;
    }
    if let Some(node) = st.inodes.get_mut(&inode) {
        node.open_handles = node.open_handles.saturating_sub(1);
    }
    st.collect_garbage();
}

impl Drop for MemWritableFile {
    fn drop(&mut self) {
        release_handle(&self.state, self.inode, self.epoch);
    }
}

pub(super) struct MemRandomAccessFile {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) path: PathBuf,
    pub(super) inode: u64,
    pub(super) epoch: u64,
    pub(super) size: u64,
}

impl RandomAccessFile for MemRandomAccessFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut st = lock_state(&self.state);
        if st.held_reads.contains(&self.path) {
            let released = Arc::clone(&st.reads_released);
            st.waiting_reads += 1;
            while st.held_reads.contains(&self.path) {
                st = released.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            st.waiting_reads -= 1;
        }
        st.check_epoch(self.epoch, "reading", &self.path)?;
        st.read_fault("reading", &self.path)?;
        let inode = st.inode_mut(self.inode, &self.path)?;
        let start = usize::try_from(offset).ok();
        let end = start.and_then(|s| s.checked_add(len));
        match (start, end) {
            (Some(start), Some(end)) if end <= inode.data.len() => {
                Ok(inode.data[start..end].to_vec())
            }
            _ => Err(Error::corruption(
                &self.path,
                Some(offset),
                format!("read of {len} bytes runs past the end of the file"),
            )),
        }
    }

    fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for MemRandomAccessFile {
    fn drop(&mut self) {
        release_handle(&self.state, self.inode, self.epoch);
    }
}

pub(super) struct MemFileLock {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) path: PathBuf,
    pub(super) epoch: u64,
    pub(super) shared: bool,
}

impl FileLock for MemFileLock {}

impl Drop for MemFileLock {
    fn drop(&mut self) {
        let mut st = lock_state(&self.state);
        if st.epoch != self.epoch {
            return;
        }
        if !self.shared {
            st.locks.remove(&self.path);
        } else if let Some(holders) = st.shared_locks.get_mut(&self.path) {
            *holders -= 1;
            if *holders == 0 {
                st.shared_locks.remove(&self.path);
            }
        }
    }
}
