//! The directory lock on the operating system's files.
//!
//! It is a POSIX record lock (`fcntl`), not an `flock`. A process forked by any thread of the
//! host holds copies of the host's descriptors until it calls exec, and an `flock` lasts as
//! long as any copy of its descriptor: a store closed while another thread spawned a process
//! could stay locked for that instant, and its reopen fail. Record locks belong to a process
//! and a fork does not inherit them. They never conflict within one process, though, and
//! closing any descriptor of the file drops them; so this process's holds are kept in one
//! table, by the file's device and inode (whatever path names it), which refuses a second
//! open here and keeps one descriptor per locked file. Record locks and `flock`s do not see
//! each other on Linux: a build that took `flock`s and this one do not exclude each other.
//!
//! Elsewhere than on a Unix, the lock is the standard library's file lock (`LockFileEx` on
//! Windows), with the same table by the file's canonical path.

use std::collections::HashMap;
use std::fs::{File, Metadata, OpenOptions};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use super::FileLock;
use crate::error::{Error, Result};

/// A lock file as the table knows it: its device and inode, whatever path names it (a
/// symbolic link, a bind mount).
#[cfg(unix)]
type FileId = (u64, u64);

#[cfg(unix)]
fn file_id(_path: &Path, meta: &Metadata) -> std::io::Result<FileId> {
    use std::os::unix::fs::MetadataExt;
    Ok((meta.dev(), meta.ino()))
}

/// A lock file as the table knows it: its canonical path.
#[cfg(not(unix))]
type FileId = std::path::PathBuf;

#[cfg(not(unix))]
fn file_id(path: &Path, _meta: &Metadata) -> std::io::Result<FileId> {
    std::fs::canonicalize(path)
}

/// A second copy of `id`, for the table and the hold: a device and inode are `Copy`, a path
/// is not.
#[allow(clippy::clone_on_copy)]
fn copy_of(id: &FileId) -> FileId {
    id.clone()
}

/// How a lock is held: by one writer, or by any number of readers.
#[derive(Clone, Copy)]
enum Kind {
    Exclusive,
    Shared,
}

/// A lock this process holds.
struct Held {
    /// The one descriptor the record lock lives on: closing it releases the lock.
    _file: File,
    /// `None` for a writer's exclusive hold; the number of read-only holders otherwise.
    readers: Option<usize>,
}

static HELD: Mutex<Option<HashMap<FileId, Held>>> = Mutex::new(None);

fn held() -> MutexGuard<'static, Option<HashMap<FileId, Held>>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// One hold of a lock file; the record lock is released when the last hold is dropped.
struct Hold {
    id: FileId,
}

impl FileLock for Hold {}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut held = held();
        let table = held.get_or_insert_with(HashMap::new);
        let last = match table.get_mut(&self.id) {
            Some(Held {
                readers: Some(n), ..
            }) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => true,
        };
        if last {
            table.remove(&self.id);
        }
    }
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::io(format!("{what} {}", path.display()), e)
}

fn locked(path: &Path) -> Error {
    Error::Locked {
        path: path.to_path_buf(),
    }
}

/// The lock file's identity, read without opening it (`None` when there is no such file):
/// a second descriptor of a file this process holds would release its lock once closed.
fn existing_id(path: &Path) -> Result<Option<FileId>> {
    match std::fs::metadata(path).and_then(|meta| file_id(path, &meta)) {
        Ok(id) => Ok(Some(id)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err("reading the metadata of lock file", path, e)),
    }
}

/// Takes `path` for a writer: no other holder, in this process or another.
pub(super) fn exclusive(path: &Path) -> Result<Box<dyn FileLock>> {
    let mut held = held();
    let table = held.get_or_insert_with(HashMap::new);
    if existing_id(path)?.is_some_and(|id| table.contains_key(&id)) {
        return Err(locked(path));
    }
    // A file made here can hold no lock of this process: every hold is of a file that existed
    // when it was taken, and the table's lock keeps holds from being taken meanwhile.
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io_err("opening lock file", path, e))?;
    let meta = file.metadata().map_err(|e| io_err("reading", path, e))?;
    let id = file_id(path, &meta).map_err(|e| io_err("reading", path, e))?;
    lock_file(&file, Kind::Exclusive, path)?;
    table.insert(
        copy_of(&id),
        Held {
            _file: file,
            readers: None,
        },
    );
    Ok(Box::new(Hold { id }))
}

/// Takes `path` for a reader: any number of readers, no writer. `None` when there is no
/// lock file (taking it writes nothing, so this works on read-only media).
pub(super) fn shared(path: &Path) -> Result<Option<Box<dyn FileLock>>> {
    let mut held = held();
    let table = held.get_or_insert_with(HashMap::new);
    let Some(id) = existing_id(path)? else {
        return Ok(None);
    };
    match table.get_mut(&id) {
        // The process's read lock is on the first reader's descriptor; no second one is
        // opened, since closing it would release the lock.
        Some(Held {
            readers: Some(n), ..
        }) => *n += 1,
        Some(Held { readers: None, .. }) => return Err(locked(path)),
        None => {
            let file = match File::open(path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(io_err("opening lock file", path, e)),
            };
            lock_file(&file, Kind::Shared, path)?;
            table.insert(
                copy_of(&id),
                Held {
                    _file: file,
                    readers: Some(1),
                },
            );
        }
    }
    Ok(Some(Box::new(Hold { id })))
}

/// Sets a record lock of `kind` over the whole file without waiting.
#[cfg(unix)]
fn lock_file(file: &File, kind: Kind, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let kind = match kind {
        Kind::Exclusive => libc::F_WRLCK,
        Kind::Shared => libc::F_RDLCK,
    };
    // SAFETY: `flock` is plain data; every field fcntl reads is set below or zero.
    let mut request: libc::flock = unsafe { std::mem::zeroed() };
    request.l_type = kind as libc::c_short;
    request.l_whence = libc::SEEK_SET as libc::c_short;
    // SAFETY: the descriptor is open for the life of `file`, and `request` outlives the call.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &request) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EAGAIN) => Err(locked(path)),
        _ => Err(io_err("locking", path, e)),
    }
}

/// Locks the whole file for `kind` without waiting, with the standard library's lock.
#[cfg(not(unix))]
fn lock_file(file: &File, kind: Kind, path: &Path) -> Result<()> {
    let taken = match kind {
        Kind::Exclusive => file.try_lock(),
        Kind::Shared => file.try_lock_shared(),
    };
    match taken {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(locked(path)),
        Err(std::fs::TryLockError::Error(e)) => Err(io_err("locking", path, e)),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_writer_excludes_everyone_and_readers_share() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        assert!(shared(&path).unwrap().is_none(), "no file, no lock");
        let writer = exclusive(&path).unwrap();
        assert!(matches!(exclusive(&path), Err(Error::Locked { .. })));
        assert!(matches!(shared(&path), Err(Error::Locked { .. })));
        drop(writer);
        let first = shared(&path).unwrap().unwrap();
        let second = shared(&path).unwrap().unwrap();
        assert!(matches!(exclusive(&path), Err(Error::Locked { .. })));
        drop(first);
        assert!(matches!(exclusive(&path), Err(Error::Locked { .. })));
        drop(second);
        drop(exclusive(&path).unwrap());
    }

    /// Whether a forked child process can take a record lock of `kind` on `path`, through a
    /// descriptor of its own (the child calls nothing but open, fcntl and _exit).
    fn child_can_lock(path: &Path, kind: libc::c_int) -> bool {
        let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `flock` is plain data; zero is a valid value of every field.
        let mut request: libc::flock = unsafe { std::mem::zeroed() };
        request.l_type = kind as libc::c_short;
        request.l_whence = libc::SEEK_SET as libc::c_short;
        // SAFETY: the child only opens, locks and exits, all async-signal-safe.
        let child = unsafe { libc::fork() };
        if child == 0 {
            unsafe {
                let fd = libc::open(name.as_ptr(), libc::O_RDWR);
                let rc = libc::fcntl(fd, libc::F_SETLK, &request);
                libc::_exit(if fd >= 0 && rc == 0 { 0 } else { 1 });
            }
        }
        assert!(child > 0, "fork failed");
        let mut status = 0;
        // SAFETY: `child` is this process's child; `status` outlives the call.
        unsafe { libc::waitpid(child, &mut status, 0) };
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    }

    #[test]
    fn another_process_meets_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let writer = exclusive(&path).unwrap();
        assert!(!child_can_lock(&path, libc::F_RDLCK));
        assert!(!child_can_lock(&path, libc::F_WRLCK));
        drop(writer);
        let reader = shared(&path).unwrap().unwrap();
        assert!(child_can_lock(&path, libc::F_RDLCK));
        assert!(!child_can_lock(&path, libc::F_WRLCK));
        drop(reader);
        assert!(child_can_lock(&path, libc::F_WRLCK));
    }

    #[test]
    fn a_second_path_to_the_same_file_meets_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let alias = dir.path().join("alias");
        std::os::unix::fs::symlink(dir.path(), &alias).unwrap();
        let writer = exclusive(&path).unwrap();
        assert!(matches!(
            exclusive(&alias.join("LOCK")),
            Err(Error::Locked { .. })
        ));
        drop(writer);
        drop(exclusive(&alias.join("LOCK")).unwrap());
    }

    #[test]
    fn a_forked_child_does_not_keep_a_released_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let writer = exclusive(&path).unwrap();
        // SAFETY: the child only sleeps and exits, both async-signal-safe.
        let child = unsafe { libc::fork() };
        if child == 0 {
            unsafe {
                libc::sleep(2);
                libc::_exit(0);
            }
        }
        assert!(child > 0, "fork failed");
        drop(writer);
        let again = exclusive(&path);
        let mut status = 0;
        // SAFETY: `child` is this process's child; `status` outlives the call.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert!(
            again.is_ok(),
            "the child's copy of the descriptor kept the lock"
        );
    }
}
