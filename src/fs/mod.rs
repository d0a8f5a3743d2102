//! The one narrow layer every file access of the store goes through.
//!
//! The store never touches `std::fs` directly: it asks a [`FileSystem`] for files. The
//! operating system's implementation is [`OsFileSystem`]; tests substitute one that injects
//! faults (failed writes and syncs, a full disk, loss of everything not yet synced).

pub(crate) mod descriptors;
mod lock;
mod mem;
#[cfg(unix)]
mod mmap;
mod os;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::Result;

pub use mem::{CrashMode, FaultFs};
#[cfg(unix)]
pub use mmap::MmapFileSystem;
/// Where files cannot be mapped here (not a Unix), reads through "memory maps" are positioned
/// reads: `Options::mmap_reads` changes nothing there.
#[cfg(not(unix))]
pub use os::OsFileSystem as MmapFileSystem;
pub use os::OsFileSystem;

/// A file being written, append-only.
pub trait WritableFile: Send + Sync {
    /// Appends bytes (they may sit in a buffer until `flush` or `sync`).
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands buffered bytes to the operating system: they survive a process crash.
    fn flush(&mut self) -> Result<()>;
    /// Flushes and makes the bytes durable (fdatasync): they survive a power loss.
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// True when nothing was appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file read by positioned reads; shared by concurrent readers.
pub trait RandomAccessFile: Send + Sync {
    /// Reads exactly `len` bytes at `offset`; fewer bytes available is an error.
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>>;
    /// Reads exactly `buf.len()` bytes at `offset` into `buf`, for a reader that keeps one
    /// buffer for many reads; fewer bytes available is an error.
    fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let bytes = self.read_at(offset, buf.len())?;
        buf.copy_from_slice(&bytes);
        Ok(())
    }
    /// The file's size when it was opened.
    fn size(&self) -> u64;
    /// Tells the operating system the file's cached pages are not needed (benchmarks use it to
    /// measure cold reads). A no-op where unsupported.
    fn drop_cache(&self) -> Result<()> {
        Ok(())
    }
    /// Tells the operating system `len` bytes at `offset` will be read soon, so that it can
    /// start reading them while the caller does other work (a batch of lookups announces all
    /// its blocks, then reads them). A hint only; a no-op where unsupported.
    fn will_need(&self, offset: u64, len: usize) {
        let _ = (offset, len);
    }
    /// Tells the operating system the cached pages of `len` bytes at `offset` will not be
    /// read again soon (a filter read once and then held in the store's own memory): under
    /// a memory limit, page cache they keep is page cache data blocks lose. Pages (or the
    /// kernel's larger folios) that reach beyond the range stay. A hint only; a no-op where
    /// unsupported.
    fn wont_need(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
}

/// Held while a directory is locked; dropping it releases the lock.
pub trait FileLock: Send + Sync {}

/// The file operations the store needs, and no more.
pub trait FileSystem: Send + Sync + 'static {
    /// Creates (or truncates) a file for writing.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for appending, keeping its contents.
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens a file for positioned reads.
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Reads a whole file.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Deletes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Makes `to` a durable file with the bytes of `from`, which is never written again: a
    /// hard link where the file system offers one, else a copy, synced.
    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        let bytes = self.read_all(from)?;
        let mut file = self.create(to)?;
        file.append(&bytes)?;
        file.sync()
    }
    /// Makes the directory's entries (creations, renames, deletions) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Names of the entries in a directory.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// True when the path exists.
    fn exists(&self, path: &Path) -> bool;
    /// Takes an exclusive lock on `path` (created if missing), failing at once with
    /// `Error::Locked` if another holder has it, in this process or another.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// Takes a shared lock on `path` without creating or writing it: `None` when the file
    /// does not exist. Fails at once with `Error::Locked` while someone holds the exclusive
    /// lock; shared holders do not exclude each other, but exclude `lock`.
    fn lock_shared(&self, path: &Path) -> Result<Option<Box<dyn FileLock>>>;
}

/// A shared handle to a file system.
pub type SharedFs = Arc<dyn FileSystem>;

/// `dir/name`.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}
