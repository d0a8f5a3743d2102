//! [`FaultFs`]: an in-memory [`FileSystem`] that injects faults and simulates power loss.
//!
//! # Model
//!
//! Files are inodes holding bytes; a directory maps names to inodes. Each inode remembers its
//! *durable* content (what its last successful `sync` made safe) beside its current content.
//! The namespace likewise has a *live* view (what `create`, `rename` and `remove` did) and a
//! *durable* view, which `sync_dir(dir)` brings up to date for the entries of `dir`: its
//! files and its subdirectories. A directory is an entry of its parent like a file: it is
//! durable only once its parent was synced after it was created (and its parent durable in
//! turn); the root (`/`) always is.
//!
//! [`FaultFs::crash`] (alias [`FaultFs::power_loss`]) throws the live state away: the
//! namespace becomes its durable view (a file created in a directory never synced since
//! disappears, a rename not followed by `sync_dir` is undone, an unsynced removal comes back,
//! a directory whose creation was not followed by a sync of its parent disappears with
//! everything in it) and every surviving file holds its durable content. How the unsynced
//! part of an appended file fares is chosen by [`CrashMode`]: dropped entirely, torn (a random
//! prefix of it survives, possibly followed by zeros or garbage), or riddled with holes (a
//! random subset of its 4 KiB pages is lost, as when the kernel wrote dirty pages back in an
//! order of its own), from a seed so a failing case reproduces.
//!
//! `create` on an existing name truncates that file in place (same inode), as `O_TRUNC` does.
//!
//! # Handles across a crash
//!
//! A crash ends the simulated process: every handle opened before it (writable files,
//! readable files, locks) is *invalidated*: its operations fail with an I/O error, and
//! dropping it does nothing (a lock it held is already released). Open new handles after a
//! crash.
//!
//! # Faults
//!
//! Faults are armed at run time and return [`Error::Io`]; none panics. A failed operation
//! changes nothing:
//! - [`FaultFs::fail_nth_append`]: the n-th `append` from now fails, once.
//! - [`FaultFs::fail_next_sync`] / [`FaultFs::fail_next_dir_sync`]: the next file sync or
//!   directory sync fails, once; nothing becomes durable.
//! - [`FaultFs::set_space_left`]: the disk accepts that many more appended bytes; an append
//!   that does not fit fails with [`std::io::ErrorKind::StorageFull`] until space is set again.
//! - [`FaultFs::set_table_appends_fail`]: appends to table files fail until cleared.
//! - [`FaultFs::fail_nth_read`] (once) and [`FaultFs::set_reads_fail`] (until cleared): reads
//!   (`read_at`, `read_all`) fail.
//! - [`FaultFs::cut_power_after`]: after n more mutating operations (create, open_append,
//!   append, sync, rename, remove, sync_dir, create_dir_all), every operation fails as if the
//!   machine had died, until [`FaultFs::crash`]. Stepping n over 0, 1, 2, ... cuts a multi-step protocol
//!   at every point.
//!
//! One more control is not a fault: [`FaultFs::hold_reads_of`] makes `read_at` of chosen
//! files wait until [`FaultFs::release_reads`], so a test can hold a job that reads them (a
//! compaction reading its inputs) in the middle and see what goes on meanwhile.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

mod files;
mod state;

use files::{MemFileLock, MemRandomAccessFile, MemWritableFile};
use state::{injected, is_root, not_found, parent_of, Durable, Faults, State};

/// What a simulated power loss does to the bytes appended since a file's last sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CrashMode {
    /// All unsynced bytes are lost.
    #[default]
    DropUnsynced,
    /// A random prefix (possibly empty, possibly all) of each file's unsynced bytes survives.
    KeepPrefix {
        /// Seeds the random choices.
        seed: u64,
    },
    /// A random prefix survives, followed by a random number of zero bytes (up to the rest of
    /// the unsynced length), as when a file's size reached the disk before its data.
    ZeroTail {
        /// Seeds the random choices.
        seed: u64,
    },
    /// A random prefix survives, followed by a random number of garbage bytes (up to the rest
    /// of the unsynced length), as when sectors were half written.
    GarbageTail {
        /// Seeds the random choices.
        seed: u64,
    },
    /// Each 4 KiB page of the file holding unsynced bytes is kept or lost at random (a share
    /// of pages drawn per file, from none to all), and a lost page's unsynced bytes read back
    /// as zeros, as when the file's size reached the disk but that page never did. Then the
    /// file keeps its length or, half of the time, is cut at a random point of its unsynced
    /// part. The kernel writes dirty pages back in any order, so a lost page may lie between
    /// kept ones: a hole in the middle of the unsynced data, with intact bytes after it.
    LosePages {
        /// Seeds the random choices.
        seed: u64,
    },
}

/// The unit in which [`CrashMode::LosePages`] loses unsynced data: the usual page size.
pub(crate) const PAGE_SIZE: usize = 4096;

/// An in-memory file system with fault injection and simulated power loss; see the module
/// documentation for its model. Clones share the same files.
#[derive(Clone, Default)]
pub struct FaultFs {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultFs").finish_non_exhaustive()
    }
}

fn lock_state(state: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while the lock was held (a failed assertion in a test thread) leaves the state
    // as consistent as any single operation leaves it; keep going rather than cascade.
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl FaultFs {
    /// An empty file system.
    pub fn new() -> FaultFs {
        FaultFs::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock_state(&self.state)
    }

    /// Chooses what a crash does to unsynced appended bytes (default: they are dropped). The
    /// mode's seed restarts the generator.
    pub fn set_crash_mode(&self, mode: CrashMode) {
        let mut st = self.state();
        st.crash_mode = mode;
        st.rng = match mode {
            CrashMode::DropUnsynced => 0,
            CrashMode::KeepPrefix { seed }
            | CrashMode::ZeroTail { seed }
            | CrashMode::GarbageTail { seed }
            | CrashMode::LosePages { seed } => seed,
        };
    }

    /// Simulates a power loss: everything not made durable is lost (see the module
    /// documentation), every open handle and lock is invalidated, and all armed faults are
    /// cleared.
    pub fn crash(&self) {
        self.state().crash();
    }

    /// Same as [`FaultFs::crash`].
    pub fn power_loss(&self) {
        self.crash();
    }

    /// Makes the `n`-th `append` from now fail (`n = 1`: the next one), once.
    pub fn fail_nth_append(&self, n: u64) {
        self.state().faults.append_countdown = Some(n.saturating_sub(1));
    }

    /// Makes the next append to a table file (a name ending in `.sst.tmp`, as flushes and
    /// compactions write them) panic, once: how a bug inside a background job shows.
    pub fn panic_next_table_append(&self) {
        self.state().faults.panic_next_table_append = true;
    }

    /// While `fail` is true, every append to a table file (a name ending in `.sst.tmp`)
    /// fails: flushes and compactions fail and are retried, frozen memtables wait.
    pub fn set_table_appends_fail(&self, fail: bool) {
        self.state().faults.table_appends_fail = fail;
    }

    /// Makes the next `sync` of a WAL file (a name ending in `.log`) panic, once, after the
    /// bytes appended before it are in the file: how a bug in a group's leader shows.
    pub fn panic_next_wal_sync(&self) {
        self.state().faults.panic_next_wal_sync = true;
    }

    /// Makes the next file `sync` fail, once.
    pub fn fail_next_sync(&self) {
        self.state().faults.fail_next_sync = true;
    }

    /// Makes the next `sync_dir` fail, once.
    pub fn fail_next_dir_sync(&self) {
        self.state().faults.fail_next_dir_sync = true;
    }

    /// While `fail` is true, every directory sync fails (a new WAL file, for one, cannot be
    /// made durable, so none can be started).
    pub fn set_dir_syncs_fail(&self, fail: bool) {
        self.state().faults.dir_syncs_fail = fail;
    }

    /// The disk accepts `bytes` more appended bytes; `None` removes the limit.
    pub fn set_space_left(&self, bytes: Option<u64>) {
        self.state().faults.space_left = bytes;
    }

    /// Makes the `n`-th read from now (`read_at` or `read_all`; `n = 1`: the next) fail, once.
    pub fn fail_nth_read(&self, n: u64) {
        self.state().faults.read_countdown = Some(n.saturating_sub(1));
    }

    /// While `fail` is true, every read fails.
    pub fn set_reads_fail(&self, fail: bool) {
        self.state().faults.reads_fail = fail;
    }

    /// After `n` more mutating operations succeed, the power is cut: that operation and all
    /// later ones fail until [`FaultFs::crash`].
    pub fn cut_power_after(&self, n: u64) {
        self.state().faults.power_countdown = Some(n);
    }

    /// Clears every armed fault (not the crash mode).
    pub fn clear_faults(&self) {
        self.state().faults = Faults::default();
    }

    /// True once a `cut_power_after` countdown has run out (and no crash happened since).
    pub fn power_is_cut(&self) -> bool {
        self.state().faults.power_cut
    }

    /// Makes every `read_at` of these files wait until [`FaultFs::release_reads`] (or a
    /// crash).
    pub fn hold_reads_of(&self, paths: impl IntoIterator<Item = PathBuf>) {
        self.state().held_reads.extend(paths);
    }

    /// Reads waiting on a hold now.
    pub fn held_reads_waiting(&self) -> usize {
        self.state().waiting_reads
    }

    /// Lets every held read go on.
    pub fn release_reads(&self) {
        self.state().release_reads();
    }

    /// The current content of a file, if it exists.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state();
        let id = st.live.get(path)?;
        st.inodes.get(id).map(|inode| inode.data.clone())
    }

    /// Replaces a file's content, durably (creating it and its directories, durably, if
    /// needed). For tests that damage files on purpose.
    pub fn set_contents(&self, path: &Path, bytes: Vec<u8>) {
        let mut st = self.state();
        for dir in path.ancestors().skip(1).filter(|d| !is_root(d)) {
            st.dirs.insert(dir.to_path_buf());
            st.durable_dirs.insert(dir.to_path_buf());
        }
        let id = match st.live.get(path) {
            Some(&id) => id,
            None => {
                let id = st.new_inode();
                st.live.insert(path.to_path_buf(), id);
                id
            }
        };
        st.durable.insert(path.to_path_buf(), id);
        if let Some(inode) = st.inodes.get_mut(&id) {
            inode.durable = Durable::Prefix(bytes.len());
            inode.data = bytes;
        }
        st.collect_garbage();
    }
}

impl FaultFs {
    /// Opens a handle on the inode `path` names, counting it as open.
    fn open_handle(st: &mut State, path: &Path, what: &str) -> Result<u64> {
        let id = *st.live.get(path).ok_or_else(|| not_found(what, path))?;
        st.inode_mut(id, path)?.open_handles += 1;
        Ok(id)
    }
}

impl FileSystem for FaultFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut st = self.state();
        st.mutating_op("creating", path)?;
        if !st.dir_exists(&parent_of(path)) {
            return Err(not_found("creating", path));
        }
        if st.dirs.contains(path) {
            return Err(injected(
                format!("creating {}", path.display()),
                ErrorKind::Other,
                "is a directory",
            ));
        }
        match st.live.get(path).copied() {
            Some(id) => {
                // O_TRUNC on the existing inode: the durable content is what it was.
                let inode = st.inode_mut(id, path)?;
                if let Durable::Prefix(len) = inode.durable {
                    let len = len.min(inode.data.len());
                    inode.durable = Durable::Owned(inode.data[..len].to_vec());
                }
                inode.data.clear();
            }
            None => {
                let id = st.new_inode();
                st.live.insert(path.to_path_buf(), id);
            }
        }
        let inode = Self::open_handle(&mut st, path, "creating")?;
        Ok(Box::new(MemWritableFile {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
            inode,
            epoch: st.epoch,
            len: 0,
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut st = self.state();
        st.mutating_op("opening for append", path)?;
        let inode = Self::open_handle(&mut st, path, "opening for append")?;
        let len = st.inodes.get(&inode).map_or(0, |i| i.data.len() as u64);
        Ok(Box::new(MemWritableFile {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
            inode,
            epoch: st.epoch,
            len,
        }))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let mut st = self.state();
        st.check_epoch(st.epoch, "opening", path)?;
        let inode = Self::open_handle(&mut st, path, "opening")?;
        let size = st.inodes.get(&inode).map_or(0, |i| i.data.len() as u64);
        Ok(Arc::new(MemRandomAccessFile {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
            inode,
            epoch: st.epoch,
            size,
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let mut st = self.state();
        st.read_fault("reading", path)?;
        let id = *st
            .live
            .get(path)
            .ok_or_else(|| not_found("reading", path))?;
        Ok(st.inode_mut(id, path)?.data.clone())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.state();
        st.mutating_op("renaming", from)?;
        if !st.dir_exists(&parent_of(to)) || st.dirs.contains(to) {
            return Err(not_found("renaming to", to));
        }
        let id = *st
            .live
            .get(from)
            .ok_or_else(|| not_found("renaming", from))?;
        if from == to {
            return Ok(());
        }
        st.live.remove(from);
        st.live.insert(to.to_path_buf(), id);
        st.collect_garbage();
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut st = self.state();
        st.mutating_op("removing", path)?;
        st.live
            .remove(path)
            .ok_or_else(|| not_found("removing", path))?;
        st.collect_garbage();
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut st = self.state();
        st.mutating_op("syncing directory", dir)?;
        if !st.dir_exists(dir) {
            return Err(not_found("syncing directory", dir));
        }
        if st.faults.fail_next_dir_sync || st.faults.dir_syncs_fail {
            st.faults.fail_next_dir_sync = false;
            return Err(injected(
                format!("syncing directory {}", dir.display()),
                ErrorKind::Other,
                "injected directory sync failure",
            ));
        }
        let in_dir = |p: &PathBuf| p.parent().unwrap_or(Path::new("")) == dir;
        st.durable.retain(|p, _| !in_dir(p));
        let entries: Vec<(PathBuf, u64)> = st
            .live
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, id)| (p.clone(), *id))
            .collect();
        st.durable.extend(entries);
        let subdirs: Vec<PathBuf> = st.dirs.iter().filter(|d| in_dir(d)).cloned().collect();
        st.durable_dirs.extend(subdirs);
        st.collect_garbage();
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let st = self.state();
        st.check_epoch(st.epoch, "listing", dir)?;
        if !st.dir_exists(dir) {
            return Err(not_found("listing", dir));
        }
        let mut names: Vec<String> = st
            .live
            .keys()
            .chain(st.dirs.iter())
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut st = self.state();
        st.mutating_op("creating directory", dir)?;
        if st.live.contains_key(dir) {
            return Err(injected(
                format!("creating directory {}", dir.display()),
                ErrorKind::AlreadyExists,
                "a file of that name exists",
            ));
        }
        for d in dir.ancestors().filter(|d| !is_root(d)) {
            st.dirs.insert(d.to_path_buf());
        }
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.state();
        st.live.contains_key(path) || st.dirs.contains(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut st = self.state();
        st.check_epoch(st.epoch, "locking", path)?;
        if !st.live.contains_key(path) {
            if !st.dir_exists(&parent_of(path)) {
                return Err(not_found("opening lock file", path));
            }
            let id = st.new_inode();
            st.live.insert(path.to_path_buf(), id);
        }
        if st.shared_locks.contains_key(path) || !st.locks.insert(path.to_path_buf()) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
            });
        }
        Ok(Box::new(MemFileLock {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
            epoch: st.epoch,
            shared: false,
        }))
    }

    fn lock_shared(&self, path: &Path) -> Result<Option<Box<dyn FileLock>>> {
        let mut st = self.state();
        st.check_epoch(st.epoch, "locking", path)?;
        if !st.live.contains_key(path) {
            return Ok(None);
        }
        if st.locks.contains(path) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
            });
        }
        *st.shared_locks.entry(path.to_path_buf()).or_insert(0) += 1;
        Ok(Some(Box::new(MemFileLock {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
            epoch: st.epoch,
            shared: true,
        })))
    }
}

#[cfg(test)]
mod tests;
