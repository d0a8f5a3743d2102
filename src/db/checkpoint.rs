//! Checkpoints: the store as of one moment, written to another directory as a store of its
//! own that `Db::open` opens.
//!
//! A checkpoint flushes the memtable, then takes the version current after the flush: every
//! write up to some sequence number is in its tables, and none after. The tables are
//! immutable, so each is hard-linked into the new directory (copied where links are not
//! offered): a checkpoint costs a flush and a few directory entries, not a copy of the data.
//! Holding the version keeps a table a compaction makes obsolete on disk until it is linked.
//! A fresh manifest naming exactly those tables, and an empty log, make the directory a store;
//! its filters travel inside its tables, so a reader of the copy never rebuilds them.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::Db;
use crate::error::{Error, Result};
use crate::filename;
use crate::manifest::{ManifestWriter, RecordedPolicy, TableMeta, VersionEdit};

/// What [`Db::checkpoint`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The new store's directory.
    pub dir: PathBuf,
    /// The names of every file of the new store, relative to `dir`: its tables, an empty
    /// log, its manifest and `CURRENT`. Copying these files elsewhere copies the store.
    pub files: Vec<String>,
    /// Tables in the checkpoint.
    pub tables: usize,
    /// Bytes of those tables.
    pub table_bytes: u64,
    /// The checkpoint holds every write numbered up to this one, and the new store numbers its
    /// writes above it.
    pub last_seq: u64,
}

impl Db {
    /// Writes the store as of now to `dir` (created if missing; it must hold no store), as a
    /// store that [`Db::open`] opens. Writes that arrive while the checkpoint is taken may or
    /// may not be in it; every write acknowledged before the call is.
    ///
    /// Fails with [`Error::InvalidArgument`] when `dir` already holds files, and with
    /// [`Error::ReadOnly`] on a read-only store (its memtable cannot be flushed).
    ///
    /// ```
    /// use bloomkv::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let backups = tempfile::tempdir().unwrap();
    /// let db = Db::open(dir.path(), Options::default())?;
    /// db.put("k", "v")?;
    /// let copy_dir = backups.path().join("nightly");
    /// db.checkpoint(&copy_dir)?; // hard links where it can: cheap, and the store goes on
    /// let copy = Db::open(&copy_dir, Options::default())?;
    /// assert_eq!(copy.get("k")?, Some(b"v".to_vec()));
    /// # Ok::<(), bloomkv::Error>(())
    /// ```
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<Checkpoint> {
        self.refuse_if_read_only()?;
        let dir = dir.as_ref();
        let fs = self.inner.fs.as_ref();
        // Every directory created on the way is synced into its parent, as `Db::open` does:
        // a checkpoint into a new nested path must survive a power loss whole.
        super::create_store_dir(fs, dir)?;
        if !fs.list(dir)?.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "checkpoint directory {} is not empty",
                dir.display()
            )));
        }
        // Every write numbered up to here is in the memtable the flush writes out.
        let visible = self.inner.visible_seq.load(Ordering::Acquire);
        self.inner.flush()?;
        // Holding the version keeps its tables' files until they are linked.
        let state = self.inner.read_state();
        let metas: Vec<TableMeta> = (state.trees.iter())
            .flat_map(|tree| tree.version.tables().map(|t| t.meta.clone()))
            .collect();
        let mut files = Vec::with_capacity(metas.len() + 2);
        for meta in &metas {
            let name = filename::table_file_name(meta.number);
            fs.link_or_copy(&self.inner.path_of(&name), &dir.join(&name))?;
            files.push(name);
        }
        let log_number = metas.iter().map(|m| m.number).max().unwrap_or(0) + 1;
        let manifest_number = log_number + 1;
        // The tables hold a prefix of the writes, at least up to `visible`. Their own numbers
        // can be lower: compaction zeroes them at the bottom level. A range deletion the
        // flush recorded may be numbered above both (a write made during the flush).
        let ranges = state.range_tombstones();
        let last_seq = (metas.iter().map(|m| m.largest_seq))
            .chain(ranges.iter().map(|(_, r)| r.seq))
            .max()
            .unwrap_or(0)
            .max(visible);
        // An empty log: the manifest names the log a store writes next, and recovery wants it.
        let log_name = filename::log_file_name(log_number);
        fs.create(&dir.join(&log_name))?.sync()?;
        files.push(log_name);
        let snapshot = VersionEdit {
            log_number: Some(log_number),
            next_file_number: Some(manifest_number + 1),
            last_seq: Some(last_seq),
            added: metas.clone(),
            removed: Vec::new(),
            write_totals: None,
            filter_policy: Some(RecordedPolicy::of(&self.inner.options.policy())),
            next_keyspace: crate::keyspace::recorded_next(
                super::lock(&self.inner.shape).next_keyspace,
            ),
            keyspaces: super::keyspaces::records(&state),
            dropped_keyspaces: Vec::new(),
            added_ranges: ranges,
            removed_ranges: Vec::new(),
            // Samples of writes the copy may lack would tell its later writes' times wrong.
            seq_times: (self.inner.all_seq_times().into_iter())
                .filter(|&(seq, _)| seq <= last_seq)
                .collect(),
        };
        // Syncs the manifest and the directory, then writes CURRENT.
        ManifestWriter::create(fs, dir, manifest_number, &snapshot)?;
        files.push(filename::manifest_file_name(manifest_number));
        files.push(filename::CURRENT.to_string());
        Ok(Checkpoint {
            dir: dir.to_path_buf(),
            files,
            tables: metas.len(),
            table_bytes: metas.iter().map(|m| m.file_size).sum(),
            last_seq,
        })
    }
}
