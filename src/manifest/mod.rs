//! The manifest: the durable record of which tables make up the store.
//!
//! A manifest file (`MANIFEST-NNNNNN`) is a log (in the write-ahead log's framing, see
//! [`crate::wal`]) of encoded [`VersionEdit`]s: first a snapshot of the whole state, then one
//! edit per change. Each edit is synced before the change it records is relied upon. The
//! `CURRENT` file names the manifest in use and is replaced atomically ([`set_current`]).
//!
//! Recovery ([`recover_manifest`]) reads `CURRENT`, replays that manifest's edits and returns
//! the live tables and counters. An incomplete last edit (its append was cut by a crash, so it
//! was never acknowledged) is dropped and reported; any other damage is
//! [`Error::Corruption`] naming the file. After recovery, write a new manifest with
//! [`ManifestWriter::create`] from the recovered state rather than appending to the old one,
//! which may end in a torn tail.

mod current;
mod edit;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use current::{read_current, set_current};
pub use edit::{KeyspaceRecord, LevelTotals, RecordedPolicy, TableMeta, VersionEdit, WriteTotals};

use crate::entry::MAX_SEQ;
use crate::error::{Error, Result};
use crate::filename::{manifest_file_name, CURRENT};
use crate::fs::{join, FileSystem};
use crate::wal::{read_log, LogWriter, RecoveryMode, TornTail};

/// Appends edits to a manifest file.
pub struct ManifestWriter {
    number: u64,
    path: PathBuf,
    log: LogWriter,
    /// Bytes of the snapshot the manifest began with.
    snapshot_len: u64,
    /// Set while an edit is written whole and not yet synced: if its sync fails, the edit may
    /// still reach the disk.
    edit_written_unsynced: bool,
}

/// Writes `snapshot` as the first record of a new manifest at `path`, synced, with its
/// directory entry durable (CURRENT must not name a file that a power loss could take away).
fn write_snapshot(
    fs: &dyn FileSystem,
    dir: &Path,
    path: &Path,
    snapshot: &VersionEdit,
) -> Result<LogWriter> {
    let mut log = LogWriter::new(fs.create(path)?);
    log.add_record(&snapshot.encode())?;
    log.sync()?;
    fs.sync_dir(dir)?;
    Ok(log)
}

impl ManifestWriter {
    /// Writes a new manifest `MANIFEST-<number>` in `dir` holding `snapshot`, syncs it and its
    /// directory entry, then makes it current ([`set_current`]). The snapshot must set
    /// `log_number`, `next_file_number` and `last_seq` (else [`Error::InvalidArgument`]).
    ///
    /// If this fails the previous manifest (if any) stays current.
    pub fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        number: u64,
        snapshot: &VersionEdit,
    ) -> Result<ManifestWriter> {
        if snapshot.log_number.is_none()
            || snapshot.next_file_number.is_none()
            || snapshot.last_seq.is_none()
        {
            return Err(Error::InvalidArgument(
                "a manifest snapshot must set log_number, next_file_number and last_seq"
                    .to_string(),
            ));
        }
        let path = join(dir, &manifest_file_name(number));
        let log = match write_snapshot(fs, dir, &path, snapshot) {
            Ok(log) => log,
            Err(e) => {
                // CURRENT does not name it yet: a manifest that never became current would
                // only be left behind.
                let _ = fs.remove(&path);
                return Err(e);
            }
        };
        // Not removed if this fails: the rename inside may have happened, and CURRENT may
        // name the new manifest after all.
        set_current(fs, dir, number)?;
        let snapshot_len = log.len();
        Ok(ManifestWriter {
            number,
            path,
            log,
            snapshot_len,
            edit_written_unsynced: false,
        })
    }

    /// Appends `edit` and syncs it: once this returns, the edit survives a power loss. After
    /// a failure the writer refuses further edits ([`Error::WritesRefused`]); write a new
    /// manifest.
    pub fn append(&mut self, edit: &VersionEdit) -> Result<()> {
        self.log.add_record(&edit.encode())?;
        self.edit_written_unsynced = true;
        self.log.sync()?;
        self.edit_written_unsynced = false;
        Ok(())
    }

    /// After a failed [`ManifestWriter::append`]: whether the edit may yet be read back. True
    /// when only its sync failed (the record is whole in the file); false when writing the
    /// record failed, which leaves it without its last fragment, so recovery drops it as a
    /// torn tail.
    pub fn failed_edit_may_be_durable(&self) -> bool {
        self.edit_written_unsynced
    }

    /// This manifest's file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The manifest file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The manifest file's size in bytes (to decide when to start a fresh one).
    pub fn len(&self) -> u64 {
        self.log.len()
    }

    /// Bytes of the snapshot the manifest began with (to tell edits that grew it from a big
    /// tree's snapshot).
    pub fn snapshot_len(&self) -> u64 {
        self.snapshot_len
    }

    /// True once an append failed: the file may end in part of that edit, so it takes no
    /// more; write a new manifest.
    pub fn has_failed(&self) -> bool {
        self.log.has_failed()
    }

    /// True when nothing was written (never the case after `create`).
    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }
}

/// The store's state as a manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredManifest {
    /// The number of the manifest read.
    pub manifest_number: u64,
    /// The oldest write-ahead log still needed.
    pub log_number: u64,
    /// The next unused file number: at least the last recorded value, and above every file
    /// number the manifest mentions (tables, the log, the manifest itself).
    pub next_file_number: u64,
    /// The largest sequence number in use.
    pub last_seq: u64,
    /// The live tables, ordered by level then file number.
    pub tables: Vec<TableMeta>,
    /// The write I/O totals of the last edit that carried them (none from a manifest older
    /// than them).
    pub write_totals: Option<WriteTotals>,
    /// The filter policy the store last wrote its tables with (`None` before stores recorded
    /// it; [`RecordedPolicy::policy`] gives it).
    pub filter_policy: Option<RecordedPolicy>,
    /// The number the next keyspace created takes: above every keyspace the manifest ever
    /// recorded, dropped ones included, when its edits say so.
    pub next_keyspace: u32,
    /// The live keyspaces other than the default, by number.
    pub keyspaces: Vec<KeyspaceRecord>,
    /// The incomplete last edit that was dropped, if any.
    /// The live range deletions, with their keyspace's number.
    pub range_tombstones: Vec<(u32, crate::range_tombstone::RangeTombstone)>,
    /// Every sample of when sequence numbers were written, in the order recorded.
    pub seq_times: Vec<(u64, u64)>,
    pub torn_tail: Option<TornTail>,
}

impl RecoveredManifest {
    /// The files this manifest relies on that are not among `names` (the directory's
    /// entries): the WAL it names as the oldest still needed, and every live table. Neither is
    /// deleted while a durable edit needs it, so each missing one means an edit was lost or
    /// the file was removed from outside. One corruption error each, naming the manifest.
    pub fn missing_files(&self, dir: &Path, names: &[String]) -> Vec<Error> {
        let manifest = dir.join(manifest_file_name(self.manifest_number));
        let log = crate::filename::log_file_name(self.log_number);
        let log_problem = (!names.contains(&log))
            .then(|| format!("names WAL {log} as still needed, but it is missing"));
        let table_problems = self.tables.iter().filter_map(|t| {
            let name = crate::filename::table_file_name(t.number);
            (!names.contains(&name)).then(|| format!("names table {name}, but it is missing"))
        });
        log_problem
            .into_iter()
            .chain(table_problems)
            .map(|what| {
                Error::corruption(
                    &manifest,
                    None,
                    format!("{what}: an edit of the manifest was lost or the file was removed"),
                )
            })
            .collect()
    }
}

/// Recovers the state recorded by the manifest `CURRENT` names. A missing `CURRENT` is
/// [`Error::Corruption`] here: use [`read_current`] first to tell a new store.
pub fn recover_manifest(fs: &dyn FileSystem, dir: &Path) -> Result<RecoveredManifest> {
    let Some(number) = read_current(fs, dir)? else {
        return Err(Error::corruption(
            &join(dir, CURRENT),
            None,
            "no CURRENT file: the store has no manifest",
        ));
    };
    let path = join(dir, &manifest_file_name(number));
    if !fs.exists(&path) {
        return Err(Error::corruption(
            &path,
            None,
            "the manifest named by CURRENT does not exist",
        ));
    }
    read_manifest(fs, &path, number)
}

/// Replays manifest `number` at `path` (see [`recover_manifest`]).
pub fn read_manifest(fs: &dyn FileSystem, path: &Path, number: u64) -> Result<RecoveredManifest> {
    let contents = read_log(fs, path, RecoveryMode::TolerateTornTail)?;
    if let Some(tail) = contents.torn_tail.filter(|t| t.intact_records_dropped > 0) {
        // The log reader takes damage with intact records after it for a page lost from the
        // unsynced part when no sync mark proves otherwise (manifests written before sync
        // marks have none). But every edit is synced before the next is written, so no crash
        // leaves a hole before an intact edit: the damaged edit was durable.
        return Err(Error::corruption(
            path,
            Some(tail.offset),
            format!(
                "a damaged edit is followed by {} intact edits",
                tail.intact_records_dropped
            ),
        ));
    }
    if contents.records.is_empty() {
        return Err(Error::corruption(
            path,
            Some(0),
            "the manifest holds no complete edit",
        ));
    }
    let mut log_number = None;
    let mut next_file_number = None;
    let mut last_seq = None;
    let mut write_totals = None;
    let mut filter_policy = None;
    let mut next_keyspace = None;
    let mut keyspaces: BTreeMap<u32, KeyspaceRecord> = BTreeMap::new();
    let mut live: BTreeMap<u64, TableMeta> = BTreeMap::new();
    let mut live_ranges = std::collections::BTreeSet::new();
    let mut seq_times = Vec::new();
    for (record, &offset) in contents.records.iter().zip(&contents.offsets) {
        let bad = |reason: String| Error::corruption(path, Some(offset), reason);
        let edit = VersionEdit::decode_inner(record)
            .map_err(|e| bad(format!("edit byte {}: {}", e.offset, e.reason)))?;
        if let Some(seq) = edit.last_seq.filter(|&s| s > MAX_SEQ) {
            return Err(bad(format!(
                "last sequence number {seq} is above the largest a store may use ({MAX_SEQ})"
            )));
        }
        log_number = edit.log_number.or(log_number);
        next_file_number = edit.next_file_number.or(next_file_number);
        last_seq = edit.last_seq.or(last_seq);
        write_totals = edit.write_totals.or(write_totals);
        filter_policy = edit.filter_policy.or(filter_policy);
        // Numbers only grow: a number below the next one and not live was dropped, and may
        // not come back.
        let next_before = next_keyspace.unwrap_or(0);
        next_keyspace = next_keyspace.max(edit.next_keyspace);
        for keyspace in edit.keyspaces {
            if keyspace.id < next_before && !keyspaces.contains_key(&keyspace.id) {
                return Err(bad(format!(
                    "edit makes keyspace {}, a number already used",
                    keyspace.id
                )));
            }
            let taken = keyspaces
                .values()
                .any(|k| k.name == keyspace.name && k.id != keyspace.id);
            if taken || keyspace.name == crate::keyspace::DEFAULT_KEYSPACE {
                return Err(bad(format!(
                    "keyspace {} takes the name {:?}, which another keyspace has",
                    keyspace.id, keyspace.name
                )));
            }
            keyspaces.insert(keyspace.id, keyspace);
        }
        for &(level, number) in &edit.removed {
            match live.get(&number) {
                Some(t) if t.level == level => {
                    live.remove(&number);
                }
                _ => {
                    return Err(bad(format!(
                        "edit removes table {number} at level {level}, which is not live there"
                    )))
                }
            }
        }
        for table in edit.added {
            if table.largest_seq > MAX_SEQ {
                return Err(bad(format!(
                    "table {} holds sequence numbers up to {}, above the largest a store may \
                     use ({MAX_SEQ})",
                    table.number, table.largest_seq
                )));
            }
            if table.smallest_key > table.largest_key || table.smallest_seq > table.largest_seq {
                return Err(bad(format!(
                    "table {} has its smallest bound above its largest",
                    table.number
                )));
            }
            if live.contains_key(&table.number) {
                return Err(bad(format!(
                    "edit adds table {}, which is already live",
                    table.number
                )));
            }
            if table.keyspace != crate::keyspace::DEFAULT_ID
                && !keyspaces.contains_key(&table.keyspace)
            {
                return Err(bad(format!(
                    "edit adds table {} to keyspace {}, which does not exist",
                    table.number, table.keyspace
                )));
            }
            live.insert(table.number, table);
        }
        for range in edit.removed_ranges {
            if !live_ranges.remove(&range) {
                return Err(bad(format!(
                    "edit removes a range deletion of keyspace {} at {}, which is not live",
                    range.0, range.1.seq
                )));
            }
        }
        for range in edit.added_ranges {
            let (id, tombstone) = &range;
            if *id != crate::keyspace::DEFAULT_ID && !keyspaces.contains_key(id) {
                return Err(bad(format!(
                    "edit adds a range deletion to keyspace {id}, which does not exist"
                )));
            }
            if tombstone.seq > last_seq.unwrap_or(0) {
                return Err(bad(format!(
                    "edit adds a range deletion numbered {}, above the last sequence number",
                    tombstone.seq
                )));
            }
            live_ranges.insert(range);
        }
        seq_times.extend(edit.seq_times);
        for id in edit.dropped_keyspaces {
            live_ranges.retain(|(ks, _)| *ks != id);
            if keyspaces.remove(&id).is_none() {
                return Err(bad(format!(
                    "edit drops keyspace {id}, which does not exist"
                )));
            }
            if let Some(t) = live.values().find(|t| t.keyspace == id) {
                return Err(bad(format!(
                    "edit drops keyspace {id} but leaves its table {}",
                    t.number
                )));
            }
        }
    }
    let missing = |what: &str| {
        Error::corruption(
            path,
            None,
            format!("no edit of the manifest sets the {what}"),
        )
    };
    let log_number = log_number.ok_or_else(|| missing("log number"))?;
    let last_seq = last_seq.ok_or_else(|| missing("last sequence number"))?;
    let recorded_next = next_file_number.ok_or_else(|| missing("next file number"))?;
    let highest_used = live
        .keys()
        .copied()
        .chain([log_number, number])
        .max()
        .unwrap_or(number);
    let next_file_number = recorded_next.max(highest_used.saturating_add(1));
    let mut tables: Vec<TableMeta> = live.into_values().collect();
    tables.sort_by_key(|t| (t.level, t.number));
    let next_keyspace = keyspaces
        .keys()
        .map(|&id| id.saturating_add(1))
        .chain(next_keyspace)
        .max()
        .unwrap_or(1)
        .max(1);
    Ok(RecoveredManifest {
        manifest_number: number,
        log_number,
        next_file_number,
        last_seq,
        tables,
        write_totals,
        filter_policy,
        next_keyspace,
        keyspaces: keyspaces.into_values().collect(),
        range_tombstones: live_ranges.into_iter().collect(),
        seq_times,
        torn_tail: contents.torn_tail,
    })
}

#[cfg(test)]
mod tests;
