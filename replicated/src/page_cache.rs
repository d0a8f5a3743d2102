//! Keeping a snapshot's bytes out of the page cache once they are on disk.
//!
//! A snapshot is written and read once, front to back: its pages are never read again from
//! the cache. Left there, they fill it; under a memory cgroup (a container's limit) the page
//! cache counts against the limit, and a follower held to 512 MiB that had received 361 MiB
//! of a 993 MiB snapshot spent its time reclaiming pages, receiving about half a MiB a
//! second, where dropping them took it back to tens of MiB a second. So whoever writes or
//! reads a snapshot file tells the kernel, as it goes, that the pages behind it can go.

use std::fs::File;
use std::io::{self, Read};

/// Bytes read or written between two drops of what lies behind.
pub(crate) const DROP_EVERY: u64 = 16 << 20;

/// Tells the kernel that `file`'s cached pages (the clean ones: dirty pages stay until
/// written) are not needed again. Advice only: nothing is lost if it is not taken.
pub(crate) fn drop_cached(file: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: the descriptor is open for as long as `file` is borrowed, and the call
        // reads no memory of ours.
        unsafe {
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

/// A file read front to back that drops the pages it has read every `DROP_EVERY` bytes.
pub(crate) struct DropBehind<'a> {
    file: &'a File,
    since_drop: u64,
}

impl<'a> DropBehind<'a> {
    pub(crate) fn new(file: &'a File) -> DropBehind<'a> {
        DropBehind {
            file,
            since_drop: 0,
        }
    }
}

impl Read for DropBehind<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (&*self.file).read(buf)?;
        self.since_drop += n as u64;
        if self.since_drop >= DROP_EVERY || n == 0 {
            drop_cached(self.file);
            self.since_drop = 0;
        }
        Ok(n)
    }
}
