//! [`FileSystem`] on the operating system's files.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFileSystem;

fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::io(format!("{what} {}", path.display()), e)
}

struct OsWritableFile {
    path: PathBuf,
    writer: BufWriter<File>,
    len: u64,
}

impl WritableFile for OsWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.writer
            .write_all(data)
            .map_err(|e| io_err("writing", &self.path, e))?;
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.writer
            .flush()
            .map_err(|e| io_err("flushing", &self.path, e))
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.writer
            .get_ref()
            .sync_data()
            .map_err(|e| io_err("syncing", &self.path, e))
    }

    fn len(&self) -> u64 {
        self.len
    }
}

struct OsRandomAccessFile {
    path: PathBuf,
    file: File,
    size: u64,
}

impl OsRandomAccessFile {
    /// Gives the kernel `advice` about `len` bytes at `offset`. A hint only: one that fails
    /// changes nothing the reads rely on.
    #[cfg(linux_extras)]
    fn advise(&self, offset: u64, len: u64, advice: libc::c_int) {
        use std::os::fd::AsRawFd;
        // A length of 0 would tell the kernel "to the end of the file".
        let (Ok(offset), Ok(len @ 1..)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: the descriptor is open for the life of `self.file`; fadvise only advises.
        unsafe { libc::posix_fadvise(self.file.as_raw_fd(), offset, len, advice) };
    }
}

impl RandomAccessFile for OsRandomAccessFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.read_into(offset, &mut buf)?;
        Ok(buf)
    }

    fn read_into(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        read_exact_at(&self.file, buf, offset).map_err(|e| {
            if e.kind() == ErrorKind::UnexpectedEof {
                Error::corruption(
                    &self.path,
                    Some(offset),
                    format!("read of {} bytes runs past the end of the file", buf.len()),
                )
            } else {
                io_err("reading", &self.path, e)
            }
        })
    }

    fn size(&self) -> u64 {
        self.size
    }

    #[cfg(linux_extras)]
    fn will_need(&self, offset: u64, len: usize) {
        self.advise(offset, len as u64, libc::POSIX_FADV_WILLNEED);
    }

    #[cfg(linux_extras)]
    fn wont_need(&self, offset: u64, len: u64) {
        self.advise(offset, len, libc::POSIX_FADV_DONTNEED);
    }

    #[cfg(linux_extras)]
    fn drop_cache(&self) -> Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open for the life of `self.file`; fadvise only advises.
        let rc =
            unsafe { libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(io_err(
                "dropping cached pages of",
                &self.path,
                std::io::Error::from_raw_os_error(rc),
            ));
        }
        Ok(())
    }
}

/// Fills `buf` from `offset` of `file` without moving a shared cursor, so that threads read
/// one file at once.
#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

/// Fills `buf` from `offset` of `file`: Windows reads at an offset given with each call (the
/// handle's cursor moves, but no read here depends on it).
#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A hint only: where it fails or is unsupported, reads are still correct.
fn advise_random(file: &File) {
    #[cfg(linux_extras)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open for the life of `file`; fadvise only advises.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    }
    #[cfg(not(linux_extras))]
    let _ = file;
}

impl FileSystem for OsFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = File::create(path).map_err(|e| io_err("creating", path, e))?;
        Ok(Box::new(OsWritableFile {
            path: path.to_path_buf(),
            writer: BufWriter::with_capacity(64 * 1024, file),
            len: 0,
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| io_err("opening for append", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| io_err("reading metadata of", path, e))?
            .len();
        Ok(Box::new(OsWritableFile {
            path: path.to_path_buf(),
            writer: BufWriter::with_capacity(64 * 1024, file),
            len,
        }))
    }

    /// Opens a file for positioned reads, telling the kernel its reads are random: a point
    /// lookup reads one block, and the kernel's read-ahead around it would only fill memory
    /// with neighbours nobody asked for. Sequential readers (scans, compaction) read ahead in
    /// large reads of their own.
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| io_err("opening", path, e))?;
        advise_random(&file);
        let size = file
            .metadata()
            .map_err(|e| io_err("reading metadata of", path, e))?
            .len();
        Ok(Arc::new(OsRandomAccessFile {
            path: path.to_path_buf(),
            file,
            size,
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut buf))
            .map_err(|e| io_err("reading", path, e))?;
        Ok(buf)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        fs::rename(from, to).map_err(|e| io_err("renaming", from, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        fs::remove_file(path).map_err(|e| io_err("removing", path, e))
    }

    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        // A link shares the file's blocks. Only where links cannot be made (across file
        // systems, or not offered) is the file copied; any other failure, `to` existing above
        // all, is an error: it may already be a link to `from`, which a copy would truncate.
        let link_error = match fs::hard_link(from, to) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let links_unavailable = matches!(
            link_error.kind(),
            std::io::ErrorKind::CrossesDevices
                | std::io::ErrorKind::PermissionDenied
                | std::io::ErrorKind::Unsupported
        );
        if !links_unavailable {
            return Err(io_err("linking", to, link_error));
        }
        let copy = || -> std::io::Result<()> {
            let mut source = fs::File::open(from)?;
            let mut target = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(to)?;
            std::io::copy(&mut source, &mut target)?;
            target.sync_all()
        };
        copy().map_err(|e| io_err("copying", from, e))
    }

    /// Makes the directory's entries durable. On Windows a directory cannot be opened as a
    /// file to sync, and NTFS journals its entries: there, nothing to do.
    #[cfg(windows)]
    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        Ok(())
    }

    #[cfg(not(windows))]
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        // The parent of a bare relative name is the empty path: the current directory.
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err("syncing directory", dir, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let entries = fs::read_dir(dir).map_err(|e| io_err("listing", dir, e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_err("listing", dir, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        fs::create_dir_all(dir).map_err(|e| io_err("creating directory", dir, e))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        super::lock::exclusive(path)
    }

    fn lock_shared(&self, path: &Path) -> Result<Option<Box<dyn FileLock>>> {
        super::lock::shared(path)
    }
}
