//! [`FileSystem`] on the operating system's files, with reads served from memory maps.
//!
//! An option (`Options::mmap_reads(true)`), not the default. A positioned read through a map
//! is a copy out of the page cache with no system call, cheaper than `pread` while the data
//! fits in memory. The hazards: the kernel, not the store, decides what stays in memory, so
//! once the data outgrows it every fault reads from disk; if a table file is truncated or
//! unreadable while mapped (by another process, or a failing disk), touching the vanished
//! pages raises SIGBUS and kills the process instead of returning an error; and each map
//! counts against the kernel's per-process limit (`vm.max_map_count`). The default,
//! [`super::OsFileSystem`] with the block cache, has none of these. Files are still read whole
//! by `read_all` and written through the same buffered writer as [`super::OsFileSystem`].

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::os::OsFileSystem;
use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// The real file system, reading through memory maps.
#[derive(Debug, Default, Clone, Copy)]
pub struct MmapFileSystem;

/// A read-only shared mapping of a whole file.
struct MappedFile {
    path: PathBuf,
    ptr: *const u8,
    len: usize,
    /// Kept open for `drop_cache`.
    #[cfg_attr(not(linux_extras), allow(dead_code))]
    file: File,
}

// SAFETY: the mapping is read-only and lives until `drop`; reads copy out of it.
unsafe impl Send for MappedFile {}
// SAFETY: as above; no interior mutability.
unsafe impl Sync for MappedFile {}

impl MappedFile {
    fn open(path: &Path) -> Result<MappedFile> {
        use std::os::fd::AsRawFd;
        let file =
            File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("reading metadata of {}", path.display()), e))?
            .len();
        let len = usize::try_from(len).map_err(|_| {
            Error::InvalidArgument(format!("{} is too large to map", path.display()))
        })?;
        let ptr = if len == 0 {
            std::ptr::null()
        } else {
            // SAFETY: a fresh read-only mapping of an open descriptor; the result is checked below.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(Error::io(
                    format!("mapping {}", path.display()),
                    std::io::Error::last_os_error(),
                ));
            }
            // A fault should bring in the page asked for, not a read-ahead window around it.
            // SAFETY: advising exactly the mapping just made; a failed hint changes nothing.
            unsafe { libc::madvise(p, len, libc::MADV_RANDOM) };
            p as *const u8
        };
        Ok(MappedFile {
            path: path.to_path_buf(),
            ptr,
            len,
            file,
        })
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: unmapping exactly the mapping made in `open`, once.
            unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
        }
    }
}

impl MappedFile {
    /// The `len` mapped bytes at `offset`; reaching past the end of the file is an error.
    fn mapped(&self, offset: u64, len: usize) -> Result<&[u8]> {
        let start = usize::try_from(offset).ok().filter(|&s| s <= self.len);
        let range = start.and_then(|s| {
            s.checked_add(len)
                .filter(|&e| e <= self.len)
                .map(|e| (s, e))
        });
        let Some((start, end)) = range else {
            return Err(Error::corruption(
                &self.path,
                Some(offset),
                format!("read of {len} bytes runs past the end of the file"),
            ));
        };
        if start == end {
            return Ok(&[]);
        }
        // SAFETY: `start..end` lies inside the live mapping, checked above, which lives as
        // long as `self`.
        Ok(unsafe { std::slice::from_raw_parts(self.ptr.add(start), end - start) })
    }
}

impl RandomAccessFile for MappedFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        Ok(self.mapped(offset, len)?.to_vec())
    }

    fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        buf.copy_from_slice(self.mapped(offset, buf.len())?);
        Ok(())
    }

    fn size(&self) -> u64 {
        self.len as u64
    }

    fn wont_need(&self, offset: u64, len: u64) {
        #[cfg(linux_extras)]
        use std::os::fd::AsRawFd;
        // Mapped pages stay whatever fadvise says: unmap the pages the range covers whole
        // from this process first (the next touch faults them back in), then advise.
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let (Ok(offset), Ok(len), Ok(page)) = (
            usize::try_from(offset),
            usize::try_from(len),
            usize::try_from(page),
        ) else {
            return;
        };
        let end = offset.saturating_add(len).min(self.len);
        let (first, last) = (
            offset.next_multiple_of(page.max(1)),
            end / page.max(1) * page,
        );
        if self.ptr.is_null() || first >= last {
            return;
        }
        // SAFETY: `first..last` is page-aligned and lies inside the live read-only mapping
        // made in `open` (`last <= self.len`); dropping its pages only makes the next read
        // fault them in again.
        unsafe {
            libc::madvise(
                self.ptr.add(first) as *mut libc::c_void,
                last - first,
                libc::MADV_DONTNEED,
            );
        }
        #[cfg(linux_extras)]
        // SAFETY: the descriptor is open for the life of `self.file`; fadvise only advises.
        unsafe {
            libc::posix_fadvise(
                self.file.as_raw_fd(),
                first as i64,
                (last - first) as i64,
                libc::POSIX_FADV_DONTNEED,
            );
        }
    }

    fn drop_cache(&self) -> Result<()> {
        // Pages mapped into this process stay cached whatever fadvise says: unmap them from
        // the page tables first. The mapping stays valid; the next touch faults them back in.
        if !self.ptr.is_null() {
            // SAFETY: advising exactly the live read-only mapping made in `open`.
            let rc = unsafe {
                libc::madvise(self.ptr as *mut libc::c_void, self.len, libc::MADV_DONTNEED)
            };
            if rc != 0 {
                return Err(Error::io(
                    format!("dropping mapped pages of {}", self.path.display()),
                    std::io::Error::last_os_error(),
                ));
            }
        }
        #[cfg(linux_extras)]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: the descriptor is open for the life of `self.file`; fadvise only
            // advises.
            let rc = unsafe {
                libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED)
            };
            if rc != 0 {
                return Err(Error::io(
                    format!("dropping cached pages of {}", self.path.display()),
                    std::io::Error::from_raw_os_error(rc),
                ));
            }
        }
        Ok(())
    }
}

impl FileSystem for MmapFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        OsFileSystem.create(path)
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        OsFileSystem.open_append(path)
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(MappedFile::open(path)?))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        OsFileSystem.read_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        OsFileSystem.rename(from, to)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        OsFileSystem.remove(path)
    }

    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        OsFileSystem.link_or_copy(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        OsFileSystem.sync_dir(dir)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        OsFileSystem.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        OsFileSystem.create_dir_all(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        OsFileSystem.exists(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        OsFileSystem.lock(path)
    }

    fn lock_shared(&self, path: &Path) -> Result<Option<Box<dyn FileLock>>> {
        OsFileSystem.lock_shared(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_reads_match_the_file_and_refuse_to_run_past_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let file = MmapFileSystem.open_read(&path).unwrap();
        assert_eq!(file.size(), 10_000);
        assert_eq!(file.read_at(0, 10).unwrap(), &data[..10]);
        assert_eq!(file.read_at(9_990, 10).unwrap(), &data[9_990..]);
        assert!(file.read_at(9_991, 10).unwrap_err().is_corruption());
        assert!(file.read_at(u64::MAX, 1).unwrap_err().is_corruption());
        file.drop_cache().unwrap();
        std::fs::write(dir.path().join("empty"), b"").unwrap();
        let empty = MmapFileSystem.open_read(&dir.path().join("empty")).unwrap();
        assert_eq!(empty.read_at(0, 0).unwrap(), Vec::<u8>::new());
        assert!(empty.read_at(0, 1).is_err());
    }
}
