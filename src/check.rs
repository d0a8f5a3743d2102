//! Verifying every checksum of every file of a store, without opening it for writes.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::fs::{FileSystem, OsFileSystem, SharedFs};
use crate::manifest;
use crate::sstable;
use crate::wal::{self, RecoveryMode};

/// What [`check_store`] read, and every problem it found.
#[derive(Debug, Default)]
pub struct CheckReport {
    /// Table files whose every block checksum matched.
    pub tables_ok: usize,
    /// Entries in those tables.
    pub table_entries: u64,
    /// WAL files read.
    pub logs: usize,
    /// Records in those logs.
    pub log_records: u64,
    /// Torn log tails (normal after a crash): file, offset, bytes.
    pub torn_tails: Vec<(PathBuf, u64, u64)>,
    /// Damage found: each error names the file and, where known, the offset.
    pub problems: Vec<Error>,
}

impl CheckReport {
    /// True when no damage was found.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Reads the CURRENT pointer, the manifest, every table (every block) and every WAL file of the
/// store at `dir`, and reports every problem instead of stopping at the first. Tables the
/// manifest names but that are missing are problems too.
pub fn check_store(dir: &Path) -> Result<CheckReport> {
    check_store_with(std::sync::Arc::new(OsFileSystem), dir)
}

/// [`check_store`] through a given file system.
pub fn check_store_with(shared: SharedFs, dir: &Path) -> Result<CheckReport> {
    let fs: &dyn FileSystem = shared.as_ref();
    if !fs.exists(&dir.join(filename::CURRENT)) {
        return Err(Error::InvalidArgument(format!(
            "no store at {}",
            dir.display()
        )));
    }
    let mut report = CheckReport::default();
    let names = fs.list(dir)?;
    match manifest::recover_manifest(fs, dir) {
        Ok(recovered) => report.problems.extend(recovered.missing_files(dir, &names)),
        Err(e) => report.problems.push(e),
    }
    for name in &names {
        let path = dir.join(name);
        match filename::parse_file_name(name) {
            Some(FileKind::Table(_)) => {
                match sstable::verify_table(std::sync::Arc::clone(&shared), &path) {
                    Ok(props) => {
                        report.tables_ok += 1;
                        report.table_entries += props.entries;
                    }
                    Err(e) => report.problems.push(e),
                }
            }
            Some(FileKind::Log(_)) => {
                match wal::read_log(fs, &path, RecoveryMode::TolerateTornTail) {
                    Ok(contents) => {
                        report.logs += 1;
                        report.log_records += contents.records.len() as u64;
                        if let Some(tail) = contents.torn_tail {
                            report
                                .torn_tails
                                .push((path, tail.offset, tail.dropped_bytes));
                        }
                    }
                    Err(e) => report.problems.push(e),
                }
            }
            _ => {}
        }
    }
    Ok(report)
}
