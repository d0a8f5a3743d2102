//! Making a damaged store open again: a lost `CURRENT` is pointed at the newest manifest that
//! is intact and whose files are all there; every live table is checked block by block, and a
//! damaged one is rewritten from its intact blocks (the original moved to `lost/`, see
//! [`salvage`]); the WAL is replayed keeping every intact record
//! ([`WalRecoveryMode::Salvage`]). What is dropped is reported.

pub mod salvage;

use std::path::Path;

use crate::db::{Db, RecoveryReport};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::fs::FileSystem;
use crate::manifest;
use crate::options::{Options, WalRecoveryMode};
use salvage::SalvagedTable;

/// What [`repair`] did.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RepairReport {
    /// The manifest `CURRENT` was made to name again, when it was lost.
    pub restored_current: Option<String>,
    /// Manifests passed over while looking for one to restore, and why.
    pub unusable_manifests: Vec<(String, String)>,
    /// Damaged tables, each rewritten from its intact blocks (or dropped when none were).
    pub salvaged: Vec<SalvagedTable>,
    /// What replaying the WAL kept and dropped.
    pub recovery: RecoveryReport,
}

impl RepairReport {
    /// Entries of damaged tables that are gone.
    pub fn table_entries_lost(&self) -> u64 {
        self.salvaged.iter().map(|t| t.entries_lost).sum()
    }

    /// Whether the repair dropped anything: entries of tables, or records of the WAL.
    pub fn dropped_anything(&self) -> bool {
        self.salvaged
            .iter()
            .any(|t| t.entries_lost > 0 || t.blocks_dropped > 0)
            || !self.recovery.dropped.is_empty()
    }
}

/// Repairs the store at `path` (see the module documentation); the store must not be open.
/// `options` are those the store is used with (its filter, its file system); the WAL is read
/// in [`WalRecoveryMode::Salvage`] whatever they say. After a repair the store opens with any
/// recovery mode: what the logs held is in a table, and the logs are new.
pub fn repair(path: impl AsRef<Path>, options: Options) -> Result<RepairReport> {
    options.validate()?;
    let dir = path.as_ref();
    let fs = options.file_system.as_ref();
    let mut report = RepairReport::default();
    // A directory without a CURRENT or a manifest holds no store to repair: say so before
    // taking the lock, which would leave a LOCK file in it.
    let names = fs.list(dir)?;
    let any_manifest = names
        .iter()
        .any(|n| matches!(filename::parse_file_name(n), Some(FileKind::Manifest(_))));
    if !any_manifest && !names.iter().any(|n| n == filename::CURRENT) {
        return Err(Error::InvalidArgument(format!(
            "{} holds no bloomkv store to repair: no CURRENT and no manifest",
            dir.display()
        )));
    }
    {
        let _lock = fs.lock(&dir.join(filename::LOCK))?;
        if !fs.exists(&dir.join(filename::CURRENT)) {
            let restored = restore_current(fs, dir, &mut report.unusable_manifests)?;
            report.restored_current = Some(restored);
        }
        report.salvaged = salvage::salvage_tables(&options.file_system, dir, &options)?;
        // Table numbers may be used again after a repair went back to an older manifest, and
        // salvaged tables are new: the lookups counted before describe another store.
        let counts = dir.join(filename::LOOKUP_COUNTS);
        if fs.exists(&counts) {
            fs.remove(&counts)?;
        }
    }
    let db = Db::open(
        dir,
        options
            .wal_recovery_mode(WalRecoveryMode::Salvage)
            .create_if_missing(false),
    )?;
    report.recovery = db.recovery_report().clone();
    db.close()?;
    Ok(report)
}

/// Points `CURRENT` at the newest manifest that reads back whole and whose tables and log
/// are all present; returns its name.
fn restore_current(
    fs: &dyn FileSystem,
    dir: &Path,
    unusable: &mut Vec<(String, String)>,
) -> Result<String> {
    let names = fs.list(dir)?;
    let mut manifests: Vec<u64> = names
        .iter()
        .filter_map(|n| match filename::parse_file_name(n) {
            Some(FileKind::Manifest(number)) => Some(number),
            _ => None,
        })
        .collect();
    manifests.sort_unstable_by(|a, b| b.cmp(a));
    for number in manifests {
        let name = filename::manifest_file_name(number);
        let why_not = match manifest::read_manifest(fs, &dir.join(&name), number) {
            Ok(recovered) => match recovered.missing_files(dir, &names).into_iter().next() {
                None => {
                    manifest::set_current(fs, dir, number)?;
                    return Ok(name);
                }
                Some(missing) => missing.to_string(),
            },
            Err(e) => e.to_string(),
        };
        unusable.push((name, why_not));
    }
    Err(Error::InvalidArgument(format!(
        "{} has no CURRENT file and no intact manifest to restore it from{}",
        dir.display(),
        match unusable.is_empty() {
            true => String::new(),
            false => format!(" (tried {})", unusable.len()),
        }
    )))
}
