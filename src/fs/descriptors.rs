//! Running within the process's file descriptor limit.
//!
//! A store keeps table files open in its table cache, and needs a few more descriptors of its
//! own (the lock, the WAL, the manifest, the tables a flush or a compaction writes, a directory
//! while it is synced). The embedding program needs some too. Two things keep the store from
//! failing on "too many open files" (EMFILE):
//! - at open, the table cache is sized to what the soft `RLIMIT_NOFILE` leaves
//!   ([`table_cache_capacity`]), not taken as `max_open_files` regardless;
//! - [`DescriptorRoom`] wraps the store's file system: an operation that fails for want of a
//!   descriptor has the table cache close some of its files, and is tried again, instead of
//!   failing a read, a flush or a compaction.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::{FileLock, FileSystem, RandomAccessFile, SharedFs, WritableFile};
use crate::error::{Error, Result};

/// Descriptors left, at the least, for the store's own files besides its table cache and for
/// the embedding program; an eighth of the limit more is left to the program.
const RESERVED_DESCRIPTORS: usize = 12;
/// The table cache keeps at least this many files open, whatever the limit.
const MIN_TABLE_CACHE: usize = 4;
/// Tries of one operation that keeps failing for want of descriptors.
const ATTEMPTS: usize = 4;

/// Files the table cache may keep open: `max_open_files`, or fewer when the process's soft
/// descriptor limit leaves less room.
pub fn table_cache_capacity(max_open_files: usize) -> usize {
    match soft_descriptor_limit() {
        Some(limit) => max_open_files.min(room_under(limit)),
        None => max_open_files,
    }
}

/// Table files that fit under a descriptor limit of `limit`.
fn room_under(limit: usize) -> usize {
    limit
        .saturating_sub(RESERVED_DESCRIPTORS + limit / 8)
        .max(MIN_TABLE_CACHE)
}

#[cfg(unix)]
fn soft_descriptor_limit() -> Option<usize> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct it is given, nothing else.
    let status = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    if status != 0 || limit.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    usize::try_from(limit.rlim_cur).ok()
}

#[cfg(not(unix))]
fn soft_descriptor_limit() -> Option<usize> {
    None
}

/// True for an error that means the process, or the system, ran out of file descriptors.
pub fn is_out_of_descriptors(error: &Error) -> bool {
    #[cfg(unix)]
    if let Error::Io { source, .. } = error {
        return matches!(source.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
    }
    let _ = error;
    false
}

/// Closes some open files to free descriptors; true when it closed any.
pub type MakeRoom = Box<dyn Fn() -> bool + Send + Sync>;

/// A file system that, when an operation fails for want of descriptors, asks for room (the
/// table cache closes files) and tries again.
pub struct DescriptorRoom {
    inner: SharedFs,
    make_room: OnceLock<MakeRoom>,
}

impl DescriptorRoom {
    /// Wraps `inner`; until [`DescriptorRoom::set_make_room`] is called, errors pass through.
    pub fn new(inner: SharedFs) -> Arc<DescriptorRoom> {
        Arc::new(DescriptorRoom {
            inner,
            make_room: OnceLock::new(),
        })
    }

    /// Sets what frees descriptors (once; later calls are ignored).
    pub fn set_make_room(&self, make_room: MakeRoom) {
        let _ = self.make_room.set(make_room);
    }

    fn with_room<T>(&self, op: impl Fn(&dyn FileSystem) -> Result<T>) -> Result<T> {
        let mut result = op(self.inner.as_ref());
        for _ in 1..ATTEMPTS {
            match &result {
                Err(e) if is_out_of_descriptors(e) => {}
                _ => break,
            }
            let freed = self.make_room.get().is_some_and(|make_room| make_room());
            if !freed {
                break;
            }
            result = op(self.inner.as_ref());
        }
        result
    }
}

impl FileSystem for DescriptorRoom {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.with_room(|fs| fs.create(path))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.with_room(|fs| fs.open_append(path))
    }
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.with_room(|fs| fs.open_read(path))
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.with_room(|fs| fs.read_all(path))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        self.with_room(|fs| fs.link_or_copy(from, to))
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.with_room(|fs| fs.sync_dir(dir))
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.with_room(|fs| fs.list(dir))
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.with_room(|fs| fs.lock(path))
    }
    fn lock_shared(&self, path: &Path) -> Result<Option<Box<dyn FileLock>>> {
        self.with_room(|fs| fs.lock_shared(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_cache_gets_what_the_limit_leaves() {
        assert_eq!(room_under(1024), 1024 - 12 - 128);
        assert_eq!(room_under(256), 256 - 12 - 32);
        assert_eq!(room_under(23), 23 - 12 - 2);
        assert_eq!(room_under(10), MIN_TABLE_CACHE);
    }

    /// A file system whose opens fail with EMFILE until `free` files were "closed".
    struct Scarce {
        inner: SharedFs,
        failures_left: AtomicUsize,
    }

    impl Scarce {
        fn fail<T>(&self, op: impl FnOnce() -> Result<T>) -> Result<T> {
            let left = self.failures_left.load(Ordering::SeqCst);
            if left > 0 {
                self.failures_left.store(left - 1, Ordering::SeqCst);
                return Err(Error::io(
                    "opening",
                    std::io::Error::from_raw_os_error(libc::EMFILE),
                ));
            }
            op()
        }
    }

    impl FileSystem for Scarce {
        fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
            self.fail(|| self.inner.create(path))
        }
        fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
            self.inner.open_append(path)
        }
        fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
            self.fail(|| self.inner.open_read(path))
        }
        fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
            self.inner.read_all(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> Result<()> {
            self.inner.rename(from, to)
        }
        fn remove(&self, path: &Path) -> Result<()> {
            self.inner.remove(path)
        }
        fn sync_dir(&self, dir: &Path) -> Result<()> {
            self.inner.sync_dir(dir)
        }
        fn list(&self, dir: &Path) -> Result<Vec<String>> {
            self.inner.list(dir)
        }
        fn create_dir_all(&self, dir: &Path) -> Result<()> {
            self.inner.create_dir_all(dir)
        }
        fn exists(&self, path: &Path) -> bool {
            self.inner.exists(path)
        }
        fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
            self.inner.lock(path)
        }
        fn lock_shared(&self, path: &Path) -> Result<Option<Box<dyn FileLock>>> {
            self.inner.lock_shared(path)
        }
    }

    fn scarce(failures: usize) -> Arc<DescriptorRoom> {
        let inner: SharedFs = Arc::new(crate::fs::FaultFs::new());
        inner.create_dir_all(Path::new("/d")).unwrap();
        DescriptorRoom::new(Arc::new(Scarce {
            inner,
            failures_left: AtomicUsize::new(failures),
        }))
    }

    #[test]
    fn an_open_out_of_descriptors_makes_room_and_succeeds() {
        let fs = scarce(2);
        let asked = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&asked);
        fs.set_make_room(Box::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            true
        }));
        fs.create(Path::new("/d/f")).unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        fs.open_read(Path::new("/d/f")).unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn without_room_to_make_the_error_is_returned() {
        let fs = scarce(1);
        let err = match fs.create(Path::new("/d/f")) {
            Err(e) => e,
            Ok(_) => panic!("created without a descriptor"),
        };
        assert!(is_out_of_descriptors(&err));
        let fs = scarce(10);
        fs.set_make_room(Box::new(|| true));
        let err = fs.create(Path::new("/d/f")).err().unwrap();
        assert!(is_out_of_descriptors(&err), "{err}");
    }
}
