//! The directory lock on the operating system's files.
//!
//! It is a POSIX record lock (`fcntl`), not an `flock`. A process forked by any thread of the
//! host holds copies of the host's descriptors until it calls exec, and an `flock` lasts as
//! long as any copy of its descriptor: a store closed while another thread spawned a process
//! could stay locked for that instant, and its reopen fail. Record locks belong to a process
//! and a fork does not inherit them. They never conflict within one process, though, and
//! closing any descriptor of the file drops them; so this process's holds are kept in one
//! table, which refuses a second open here and keeps one descriptor per locked file.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use super::FileLock;
use crate::error::{Error, Result};

/// A lock this process holds, by the lock file's canonical path.
struct Held {
    /// The one descriptor the record lock lives on: closing it releases the lock.
    _file: File,
    /// `None` for a writer's exclusive hold; the number of read-only holders otherwise.
    readers: Option<usize>,
}

static HELD: Mutex<Option<HashMap<PathBuf, Held>>> = Mutex::new(None);

fn held() -> MutexGuard<'static, Option<HashMap<PathBuf, Held>>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// One hold of a lock file; the record lock is released when the last hold is dropped.
struct Hold {
    key: PathBuf,
}

impl FileLock for Hold {}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut held = held();
        let table = held.get_or_insert_with(HashMap::new);
        let last = match table.get_mut(&self.key) {
            Some(Held {
                readers: Some(n), ..
            }) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => true,
        };
        if last {
            table.remove(&self.key);
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

/// Takes `path` for a writer: no other holder, in this process or another.
pub(super) fn exclusive(path: &Path) -> Result<Box<dyn FileLock>> {
    let key = canonical(path)?;
    let mut held = held();
    let table = held.get_or_insert_with(HashMap::new);
    // Checked before the file is opened: closing a second descriptor of a file this
    // process holds would release its lock.
    if table.contains_key(&key) {
        return Err(locked(path));
    }
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io_err("opening lock file", path, e))?;
    record_lock(&file, libc::F_WRLCK, path)?;
    table.insert(
        key.clone(),
        Held {
            _file: file,
            readers: None,
        },
    );
    Ok(Box::new(Hold { key }))
}

/// Takes `path` for a reader: any number of readers, no writer. `None` when there is no
/// lock file (taking it writes nothing, so this works on read-only media).
pub(super) fn shared(path: &Path) -> Result<Option<Box<dyn FileLock>>> {
    let key = canonical(path)?;
    let mut held = held();
    let table = held.get_or_insert_with(HashMap::new);
    match table.get_mut(&key) {
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
            record_lock(&file, libc::F_RDLCK, path)?;
            table.insert(
                key.clone(),
                Held {
                    _file: file,
                    readers: Some(1),
                },
            );
        }
    }
    Ok(Some(Box::new(Hold { key })))
}

/// The key of `path` in the table: its directory resolved, so that two spellings of one
/// directory meet, and its name; the file itself may not exist yet.
fn canonical(path: &Path) -> Result<PathBuf> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let dir = dir
        .canonicalize()
        .map_err(|e| io_err("resolving the directory of", path, e))?;
    Ok(dir.join(path.file_name().unwrap_or_default()))
}

/// Sets a record lock of `kind` over the whole file without waiting.
fn record_lock(file: &File, kind: libc::c_int, path: &Path) -> Result<()> {
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

#[cfg(test)]
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
