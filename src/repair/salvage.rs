//! Salvaging damaged tables, as LevelDB's `RepairDB` does: every live table is read and
//! checked block by block; a damaged one is rewritten from its intact data blocks into a new
//! table at the same level, its damaged blocks (and a table that cannot be opened at all) are
//! counted as lost, and the original moves to `lost/`, never deleted. The manifest is then
//! rewritten to name what survived.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::entry::Entry;
use crate::error::{Error, Result};
use crate::filename;
use crate::filter::FilterParams;
use crate::fs::{FileSystem, SharedFs};
use crate::manifest::{self, ManifestWriter, RecoveredManifest, TableMeta, VersionEdit};
use crate::metrics::ReadCounters;
use crate::options::Options;
use crate::sstable::{verify_table, FilterPolicy, Table, TableBuilder, TableOptions};

/// The directory, inside the store's, where damaged files are moved.
pub const LOST_DIR: &str = "lost";

/// What became of one damaged table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SalvagedTable {
    /// The damaged table's file name.
    pub file: String,
    /// The damaged table's level.
    pub level: u32,
    /// Why it was taken for damaged: the first error a full check of it found.
    pub damage: String,
    /// Data blocks whose entries were kept.
    pub blocks_kept: u64,
    /// Data blocks dropped: unreadable, failing their checksum, or not in order after the
    /// blocks kept before them.
    pub blocks_dropped: u64,
    /// Entries kept in the new table.
    pub entries_kept: u64,
    /// Entries the manifest counted in the damaged table that the new one lacks.
    pub entries_lost: u64,
    /// The table written from the intact blocks, if any was: under the damaged table's own
    /// name and number, at its level.
    pub replaced_by: Option<String>,
    /// Where the damaged file now is.
    pub moved_to: PathBuf,
}

/// Checks every table the current manifest names; salvages the damaged ones and rewrites the
/// manifest when there were any. The caller holds the store's lock.
pub fn salvage_tables(fs: &SharedFs, dir: &Path, options: &Options) -> Result<Vec<SalvagedTable>> {
    let recovered = manifest::recover_manifest(fs.as_ref(), dir)?;
    // Above every number in use, as recovery reckons it: a log may have been started after
    // the manifest's last edit.
    let highest_on_disk = fs
        .list(dir)?
        .iter()
        .filter_map(|n| filename::parse_file_name(n).and_then(|k| k.number()))
        .max()
        .unwrap_or(0);
    let next_file = recovered.next_file_number.max(highest_on_disk + 1);
    let mut kept: Vec<TableMeta> = Vec::new();
    let mut salvaged = Vec::new();
    for meta in &recovered.tables {
        let path = dir.join(filename::table_file_name(meta.number));
        // Only damage is salvaged: an I/O error (a descriptor short, a read that failed once)
        // says nothing of the table's bytes, and ends the repair instead.
        let damage = match verify_table(Arc::clone(fs), &path) {
            Ok(_) => {
                kept.push(meta.clone());
                continue;
            }
            Err(e @ Error::Corruption { .. }) => e.to_string(),
            Err(e) if !fs.exists(&path) => e.to_string(),
            Err(e) => return Err(e),
        };
        // A keyspace's table is rewritten with the keyspace's block size and compression.
        let table_options = match recovered.keyspaces.iter().find(|k| k.id == meta.keyspace) {
            Some(keyspace) => keyspace.options.applied_to(options),
            None => options.clone(),
        };
        let (outcome, new_meta) = salvage_one(fs, dir, &table_options, meta, damage)?;
        kept.extend(new_meta);
        salvaged.push(outcome);
    }
    if !salvaged.is_empty() {
        rewrite_manifest(fs.as_ref(), dir, &recovered, kept, next_file)?;
    }
    Ok(salvaged)
}

/// Moves the damaged table `meta` to `lost/`, then writes its intact blocks into a table of
/// the same name, number and level, with the block size and compression of `options` (its
/// keyspace's). The number matters: level-0 tables are ordered by it, and
/// under a new, higher number the salvaged (older) data would read as the newest.
fn salvage_one(
    fs: &SharedFs,
    dir: &Path,
    options: &Options,
    meta: &TableMeta,
    damage: String,
) -> Result<(SalvagedTable, Option<TableMeta>)> {
    let name = filename::table_file_name(meta.number);
    let path = dir.join(&name);
    let lost_dir = dir.join(LOST_DIR);
    fs.create_dir_all(&lost_dir)?;
    // Absent when an earlier repair moved it and stopped before its new manifest: that copy
    // is read. Otherwise it goes under a name no earlier repair left there.
    let moved_to = match fs.exists(&path) {
        true => {
            let moved_to = free_name(fs.as_ref(), &lost_dir, &name);
            fs.rename(&path, &moved_to)?;
            fs.sync_dir(&lost_dir)?;
            fs.sync_dir(dir)?;
            moved_to
        }
        false => latest_in_lost(fs.as_ref(), &lost_dir, &name),
    };
    let mut outcome = SalvagedTable {
        file: name.clone(),
        level: meta.level,
        damage,
        blocks_kept: 0,
        blocks_dropped: 0,
        entries_kept: 0,
        entries_lost: meta.entries,
        replaced_by: None,
        moved_to: moved_to.clone(),
    };
    let mut new_meta = None;
    // A table whose footer, index or properties cannot be read keeps nothing.
    if let Ok(table) = Table::open(Arc::clone(fs), &moved_to, Arc::new(ReadCounters::new())) {
        let builder_options = TableOptions {
            block_size: options.block_size,
            filter_policy: policy_like(table.inner.properties.filter),
            compression: options.compression,
            index_partition_size: options.tuning.index_partition_size,
            ..TableOptions::default()
        };
        let mut builder = TableBuilder::new(Arc::clone(fs), &path, builder_options, meta.entries)?;
        let mut last: Option<(Vec<u8>, u64)> = None;
        for p in 0..table.inner.index.partitions() {
            // A damaged index partition loses the blocks it indexes; the others are kept.
            let separators = match table.inner.index_partition_entries(p) {
                Ok(separators) => separators,
                Err(e) if e.is_corruption() => {
                    outcome.blocks_dropped += table.inner.index_partition_blocks(p) as u64;
                    continue;
                }
                Err(e) => return Err(e),
            };
            for separator in separators {
                match intact_entries(&table, separator.handle, last.as_ref()) {
                    Some(entries) => {
                        for entry in &entries {
                            builder.add(entry)?;
                        }
                        if let Some(e) = entries.last() {
                            last = Some((e.key.clone(), e.seq));
                        }
                        outcome.blocks_kept += 1;
                        outcome.entries_kept += entries.len() as u64;
                    }
                    None => outcome.blocks_dropped += 1,
                }
            }
        }
        if outcome.entries_kept > 0 {
            let props = builder.finish()?;
            new_meta = Some(TableMeta {
                keyspace: meta.keyspace,
                ..TableMeta::of_table(meta.number, meta.level, props)
            });
            outcome.replaced_by = Some(name);
        } else {
            builder.abandon()?;
        }
    }
    outcome.entries_lost = meta.entries.saturating_sub(outcome.entries_kept);
    Ok((outcome, new_meta))
}

/// `lost/name`, or `lost/name.1`, `.2`, ... when an earlier repair left one there.
fn free_name(fs: &dyn FileSystem, lost_dir: &Path, name: &str) -> PathBuf {
    let mut candidate = lost_dir.join(name);
    let mut n = 0;
    while fs.exists(&candidate) {
        n += 1;
        candidate = lost_dir.join(format!("{name}.{n}"));
    }
    candidate
}

/// The copy of `name` a repair moved to `lost/` last.
fn latest_in_lost(fs: &dyn FileSystem, lost_dir: &Path, name: &str) -> PathBuf {
    let mut latest = lost_dir.join(name);
    let mut n = 1;
    while fs.exists(&lost_dir.join(format!("{name}.{n}"))) {
        latest = lost_dir.join(format!("{name}.{n}"));
        n += 1;
    }
    latest
}

/// The entries of one data block, when the block reads back whole (checksum, decoding) and
/// its first entry sorts after `after`, the last entry kept before it.
fn intact_entries(
    table: &Table,
    handle: crate::sstable::BlockHandle,
    after: Option<&(Vec<u8>, u64)>,
) -> Option<Vec<Entry>> {
    let mut it = table.inner.read_data_block(handle).ok()?;
    let mut entries = Vec::new();
    while let Some(entry) = it.next_entry().ok()? {
        entries.push(entry);
    }
    let first = entries.first()?;
    let in_order = after.is_none_or(|(key, seq)| {
        crate::entry::entry_order(&first.key, first.seq, key, *seq).is_gt()
    });
    in_order.then_some(entries)
}

/// The filter a damaged table had, for its replacement: the same bits per key and hashes,
/// or the default rate when its filter is unknown.
fn policy_like(filter: Option<(u32, u32, f64)>) -> FilterPolicy {
    match filter.map(|(bits, hashes, _)| FilterParams::new(bits, hashes)) {
        Some(Ok(params)) => FilterPolicy::Params(params),
        _ => FilterPolicy::default(),
    }
}

/// Writes a new manifest naming `tables`, with the rest of the state as recovered, and makes
/// it current.
fn rewrite_manifest(
    fs: &dyn FileSystem,
    dir: &Path,
    recovered: &RecoveredManifest,
    tables: Vec<TableMeta>,
    next_file: u64,
) -> Result<()> {
    let number = next_file;
    let snapshot = VersionEdit {
        log_number: Some(recovered.log_number),
        next_file_number: Some(number + 1),
        last_seq: Some(recovered.last_seq),
        added: tables,
        removed: Vec::new(),
        write_totals: recovered.write_totals.clone(),
        filter_policy: recovered.filter_policy,
        next_keyspace: crate::keyspace::recorded_next(recovered.next_keyspace),
        keyspaces: recovered.keyspaces.clone(),
        dropped_keyspaces: Vec::new(),
        added_ranges: recovered.range_tombstones.clone(),
        removed_ranges: Vec::new(),
        seq_times: recovered.seq_times.clone(),
    };
    ManifestWriter::create(fs, dir, number, &snapshot)?;
    Ok(())
}
