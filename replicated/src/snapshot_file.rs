//! The file a snapshot's data lives in while it is sent or received: a `tokio::fs::File` that,
//! written to, syncs what it has taken every `DROP_EVERY` bytes before it takes more, and
//! drops the synced pages from the page cache; read, it drops what it has read as it goes.
//!
//! A node receiving a snapshot of a gigabyte writes a gigabyte into its page cache. Under a
//! memory cgroup (a container's limit), the page cache counts against the limit, and cgroup
//! v1 writes none of the dirty pages back to make room: a follower held to 512 MiB stopped
//! with 378 MB dirty and nothing under writeback, every write waiting. Syncing as it goes
//! keeps the dirty pages to `DROP_EVERY`, and dropping the clean ones keeps the cache from
//! filling the limit (`page_cache.rs`).

use std::future::Future;
use std::io::{self, SeekFrom};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};
use tokio::task::JoinHandle;

use crate::page_cache::{drop_cached, DROP_EVERY};

/// A snapshot's data file (see the module comment).
pub struct SnapshotFile {
    file: tokio::fs::File,
    /// Where a snapshot being received lies, for installing to move it into place.
    path: Option<std::path::PathBuf>,
    /// The same open file, for syncing on a blocking thread while `file` stays here.
    for_sync: std::fs::File,
    unsynced: u64,
    syncing: Option<JoinHandle<io::Result<()>>>,
    read_since_drop: u64,
}

impl SnapshotFile {
    pub fn new(file: std::fs::File) -> io::Result<SnapshotFile> {
        let for_sync = file.try_clone()?;
        Ok(SnapshotFile {
            file: tokio::fs::File::from_std(file),
            path: None,
            for_sync,
            unsynced: 0,
            syncing: None,
            read_since_drop: 0,
        })
    }

    /// A file a snapshot is being received into, at `path`.
    pub fn receiving(file: std::fs::File, path: std::path::PathBuf) -> io::Result<SnapshotFile> {
        let mut data = SnapshotFile::new(file)?;
        data.path = Some(path);
        Ok(data)
    }

    /// Where the snapshot being received lies.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// The file, every write handed to it finished.
    pub async fn into_std(self) -> std::fs::File {
        self.file.into_std().await
    }

    /// Ends a sync under way, or starts one once `DROP_EVERY` bytes were written since the
    /// last (after the writes handed to the file have finished), and waits for it; a sync
    /// then drops the pages it made clean.
    fn poll_synced(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.syncing.is_none() && self.unsynced >= DROP_EVERY {
            ready!(Pin::new(&mut self.file).poll_flush(cx))?;
            let file = self.for_sync.try_clone()?;
            self.syncing = Some(tokio::task::spawn_blocking(move || {
                file.sync_data()?;
                drop_cached(&file);
                Ok(())
            }));
            self.unsynced = 0;
        }
        if let Some(syncing) = &mut self.syncing {
            let done = ready!(Pin::new(syncing).poll(cx));
            self.syncing = None;
            done.map_err(io::Error::other)??;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_synced(cx))?;
        let written = ready!(Pin::new(&mut self.file).poll_write(cx, buf))?;
        self.unsynced += written as u64;
        Poll::Ready(Ok(written))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.file).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.file).poll_shutdown(cx)
    }
}

impl AsyncRead for SnapshotFile {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.file).poll_read(cx, buf))?;
        self.read_since_drop += (buf.filled().len() - before) as u64;
        if self.read_since_drop >= DROP_EVERY {
            drop_cached(&self.for_sync);
            self.read_since_drop = 0;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(mut self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        Pin::new(&mut self.file).start_seek(position)
    }

    fn poll_complete(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<u64>> {
        Pin::new(&mut self.file).poll_complete(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

    use super::*;

    #[tokio::test]
    async fn bytes_written_across_syncs_and_seeks_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let mut data = SnapshotFile::new(file).unwrap();
        let chunk: Vec<u8> = (0..(3 << 20)).map(|i| (i % 253) as u8).collect();
        // 48 MiB in chunks of 3 MiB: three syncs on the way.
        for _ in 0..16 {
            data.write_all(&chunk).await.unwrap();
        }
        // A chunk written again at an offset, as Raft writes one it sends twice.
        data.seek(SeekFrom::Start(3 << 20)).await.unwrap();
        data.write_all(&chunk[..10]).await.unwrap();
        data.flush().await.unwrap();
        data.seek(SeekFrom::Start(0)).await.unwrap();
        let mut back = Vec::new();
        data.read_to_end(&mut back).await.unwrap();
        assert_eq!(back.len(), 48 << 20);
        assert!(back.chunks(3 << 20).all(|c| c == chunk));
        let std_file = data.into_std().await;
        assert_eq!(std_file.metadata().unwrap().len(), 48 << 20);
    }
}
