//! Verifying every checksum of what a store relies on: its manifest, every table the manifest
//! names, and the logs it still needs. Other files in the directory are listed as
//! unreferenced, not as damage: the store never reads them (and deletes those it made).
//!
//! The check reads one consistent view: [`check_store`] holds the store's lock (shared, so a
//! writer cannot open the store meanwhile, and it fails with `Error::Locked` while one has),
//! and [`crate::Db::check`] holds the open store's tree still while it reads.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::fs::{FileSystem, OsFileSystem, SharedFs};
use crate::manifest;
use crate::sstable;
use crate::wal::{self, RecoveryMode};

/// What a check read, and every problem it found.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct CheckReport {
    /// Table files whose every block checksum matched.
    pub tables_ok: usize,
    /// Entries in those tables.
    pub table_entries: u64,
    /// WAL files read, damaged ones too.
    pub logs: usize,
    /// Intact records in those logs (in a damaged log, those a salvaging read keeps).
    pub log_records: u64,
    /// Logs among them with damage (each also in `problems`).
    pub damaged_logs: usize,
    /// Torn log tails (normal after a crash): file, offset, bytes.
    pub torn_tails: Vec<(PathBuf, u64, u64)>,
    /// Files in the directory the store does not rely on: tables and logs the manifest no
    /// longer needs, older manifests, temporary files, and files the store did not make.
    pub unreferenced: Vec<PathBuf>,
    /// Damage found: each error names the file and, where known, the offset.
    pub problems: Vec<Error>,
}

impl CheckReport {
    /// True when no damage was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks the store at `dir`, which must not be open for writing (see the module
/// documentation), and reports every problem instead of stopping at the first.
pub fn check_store(dir: &Path) -> Result<CheckReport> {
    check_store_with(std::sync::Arc::new(OsFileSystem), dir)
}

/// [`check_store`] through a given file system.
pub fn check_store_with(shared: SharedFs, dir: &Path) -> Result<CheckReport> {
    if !shared.exists(&dir.join(filename::CURRENT)) {
        return Err(Error::InvalidArgument(format!(
            "no store at {}",
            dir.display()
        )));
    }
    let _lock = shared.lock_shared(&dir.join(filename::LOCK))?;
    Ok(check_view(&shared, dir))
}

/// Checks the files the manifest `CURRENT` names relies on; the caller keeps them from
/// changing meanwhile.
pub(crate) fn check_view(shared: &SharedFs, dir: &Path) -> CheckReport {
    let fs: &dyn FileSystem = shared.as_ref();
    let mut report = CheckReport::default();
    let names = match fs.list(dir) {
        Ok(names) => names,
        Err(e) => {
            report.problems.push(e);
            return report;
        }
    };
    let recovered = match manifest::recover_manifest(fs, dir) {
        Ok(recovered) => recovered,
        Err(e) => {
            report.problems.push(e);
            return report;
        }
    };
    report.problems.extend(recovered.missing_files(dir, &names));
    let live_tables: HashSet<u64> = recovered.tables.iter().map(|t| t.number).collect();
    for name in &names {
        let path = dir.join(name);
        match filename::parse_file_name(name) {
            Some(FileKind::Table(n)) if live_tables.contains(&n) => {
                check_table(shared, &path, &mut report)
            }
            Some(FileKind::Log(n)) if n >= recovered.log_number => {
                check_log(fs, &path, &mut report)
            }
            Some(FileKind::Manifest(n)) if n == recovered.manifest_number => {}
            Some(FileKind::Current | FileKind::Lock | FileKind::LookupCounts) => {}
            _ => report.unreferenced.push(path),
        }
    }
    report
}

fn check_table(shared: &SharedFs, path: &Path, report: &mut CheckReport) {
    match sstable::verify_table(std::sync::Arc::clone(shared), path) {
        Ok(props) => {
            report.tables_ok += 1;
            report.table_entries += props.entries;
        }
        Err(e) => report.problems.push(e),
    }
}

fn check_log(fs: &dyn FileSystem, path: &Path, report: &mut CheckReport) {
    match wal::read_log(fs, path, RecoveryMode::TolerateTornTail) {
        Ok(contents) => {
            report.logs += 1;
            report.log_records += contents.records.len() as u64;
            if let Some(tail) = contents.torn_tail {
                report
                    .torn_tails
                    .push((path.to_path_buf(), tail.offset, tail.dropped_bytes));
            }
        }
        Err(e) => {
            // Counted as read, with what a salvaging read would keep: a check that says
            // "0 logs" beside the damage of one misleads.
            report.logs += 1;
            report.damaged_logs += 1;
            if let Ok(intact) = wal::read_log(fs, path, RecoveryMode::Salvage) {
                report.log_records += intact.records.len() as u64;
            }
            report.problems.push(e);
        }
    }
}
