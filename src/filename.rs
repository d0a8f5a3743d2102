//! The names of the files in a store's directory, kept in one place.
//!
//! Numbered files share one counter (the manifest's `next_file_number`), so a number names
//! exactly one file whatever its kind:
//!
//! | kind              | name               |
//! |-------------------|--------------------|
//! | table             | `000123.sst`       |
//! | write-ahead log   | `000123.log`       |
//! | manifest          | `MANIFEST-000123`  |
//! | temporary file    | `000123.tmp`       |
//! | table being built | `000123.sst.tmp`   |
//! | manifest pointer  | `CURRENT`          |
//! | its replacement   | `CURRENT.tmp`      |
//! | directory lock    | `LOCK`             |
//! | lookup counts     | `LOOKUPS`          |
//! | their replacement | `LOOKUPS.tmp`      |
//!
//! Numbers are written in decimal, zero-padded to at least six digits. Parsing is strict: a
//! name is recognised only in exactly the form this module writes, so `0123.sst` or
//! `MANIFEST-+00001` are foreign files, not ours.

/// The name of the file that names the current manifest.
pub const CURRENT: &str = "CURRENT";
/// The name `CURRENT` is written under before it is renamed into place.
pub const CURRENT_TEMP: &str = "CURRENT.tmp";
/// The name of the directory's lock file.
pub const LOCK: &str = "LOCK";
/// The name of the file of the lookups the tables counted (`crate::lookup_counts`).
pub const LOOKUP_COUNTS: &str = "LOOKUPS";
/// The name `LOOKUPS` is written under before it is renamed into place.
pub const LOOKUP_COUNTS_TEMP: &str = "LOOKUPS.tmp";

const MANIFEST_PREFIX: &str = "MANIFEST-";

/// What a file in the store's directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// An immutable sorted table, `NNNNNN.sst`.
    Table(u64),
    /// A write-ahead log, `NNNNNN.log`.
    Log(u64),
    /// A manifest, `MANIFEST-NNNNNN`.
    Manifest(u64),
    /// A temporary file being written, `NNNNNN.tmp`.
    Temp(u64),
    /// A table being written, renamed to `NNNNNN.sst` when finished: `NNNNNN.sst.tmp`.
    TableTemp(u64),
    /// `CURRENT`.
    Current,
    /// `CURRENT.tmp`.
    CurrentTemp,
    /// `LOCK`.
    Lock,
    /// `LOOKUPS`.
    LookupCounts,
    /// `LOOKUPS.tmp`.
    LookupCountsTemp,
}

impl FileKind {
    /// What the file is, in a few words, for messages.
    pub fn describe(&self) -> &'static str {
        match self {
            FileKind::Table(_) => "table",
            FileKind::Log(_) => "write-ahead log",
            FileKind::Manifest(_) => "manifest",
            FileKind::Temp(_) | FileKind::CurrentTemp | FileKind::LookupCountsTemp => "temporary",
            FileKind::TableTemp(_) => "unfinished table",
            FileKind::Current => "CURRENT",
            FileKind::Lock => "lock",
            FileKind::LookupCounts => "lookup counts",
        }
    }

    /// The file's number, for the kinds that have one.
    pub fn number(&self) -> Option<u64> {
        match *self {
            FileKind::Table(n)
            | FileKind::Log(n)
            | FileKind::Manifest(n)
            | FileKind::Temp(n)
            | FileKind::TableTemp(n) => Some(n),
            FileKind::Current
            | FileKind::CurrentTemp
            | FileKind::Lock
            | FileKind::LookupCounts
            | FileKind::LookupCountsTemp => None,
        }
    }
}

fn number(number: u64) -> String {
    format!("{number:06}")
}

/// `000123.sst`.
pub fn table_file_name(n: u64) -> String {
    format!("{}.sst", number(n))
}

/// `000123.log`.
pub fn log_file_name(n: u64) -> String {
    format!("{}.log", number(n))
}

/// `MANIFEST-000123`.
pub fn manifest_file_name(n: u64) -> String {
    format!("{MANIFEST_PREFIX}{}", number(n))
}

/// `000123.tmp`.
pub fn temp_file_name(n: u64) -> String {
    format!("{}.tmp", number(n))
}

/// `000123.sst.tmp`.
pub fn table_temp_file_name(n: u64) -> String {
    format!("{}.tmp", table_file_name(n))
}

/// Parses a number exactly as [`number`] writes it: ASCII digits only, at least six, no
/// superfluous leading zeros beyond the padding, no overflow.
fn parse_number(s: &str) -> Option<u64> {
    if s.len() < 6 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = s.parse().ok()?;
    (number(n) == s).then_some(n)
}

/// Tells what kind of store file `name` is; `None` for a name the store never writes.
pub fn parse_file_name(name: &str) -> Option<FileKind> {
    match name {
        CURRENT => return Some(FileKind::Current),
        CURRENT_TEMP => return Some(FileKind::CurrentTemp),
        LOCK => return Some(FileKind::Lock),
        LOOKUP_COUNTS => return Some(FileKind::LookupCounts),
        LOOKUP_COUNTS_TEMP => return Some(FileKind::LookupCountsTemp),
        _ => {}
    }
    if let Some(rest) = name.strip_prefix(MANIFEST_PREFIX) {
        return parse_number(rest).map(FileKind::Manifest);
    }
    if let Some(table) = name.strip_suffix(".sst.tmp") {
        return parse_number(table).map(FileKind::TableTemp);
    }
    let (stem, ext) = name.rsplit_once('.')?;
    let n = parse_number(stem)?;
    match ext {
        "sst" => Some(FileKind::Table(n)),
        "log" => Some(FileKind::Log(n)),
        "tmp" => Some(FileKind::Temp(n)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_the_parser() {
        for n in [0, 1, 123, 999_999, 1_000_000, u64::MAX] {
            assert_eq!(
                parse_file_name(&table_file_name(n)),
                Some(FileKind::Table(n))
            );
            assert_eq!(parse_file_name(&log_file_name(n)), Some(FileKind::Log(n)));
            assert_eq!(
                parse_file_name(&manifest_file_name(n)),
                Some(FileKind::Manifest(n))
            );
            assert_eq!(parse_file_name(&temp_file_name(n)), Some(FileKind::Temp(n)));
            assert_eq!(
                parse_file_name(&table_temp_file_name(n)),
                Some(FileKind::TableTemp(n))
            );
        }
        assert_eq!(table_file_name(123), "000123.sst");
        assert_eq!(log_file_name(7), "000007.log");
        assert_eq!(manifest_file_name(42), "MANIFEST-000042");
        assert_eq!(table_file_name(1_234_567), "1234567.sst");
        assert_eq!(parse_file_name("CURRENT"), Some(FileKind::Current));
        assert_eq!(parse_file_name("CURRENT.tmp"), Some(FileKind::CurrentTemp));
        assert_eq!(parse_file_name("LOCK"), Some(FileKind::Lock));
        assert_eq!(parse_file_name("LOOKUPS"), Some(FileKind::LookupCounts));
        assert_eq!(
            parse_file_name("LOOKUPS.tmp"),
            Some(FileKind::LookupCountsTemp)
        );
    }

    #[test]
    fn foreign_names_are_rejected() {
        for name in [
            "",
            "123.sst",
            "0000123.sst",
            "000123.SST",
            "000123.ldb",
            "00012a.log",
            "+00123.log",
            "000123",
            ".sst",
            "MANIFEST-",
            "MANIFEST-12",
            "MANIFEST-0000001",
            "MANIFEST-000001 ",
            "manifest-000001",
            "CURRENT2",
            "LOCK.tmp",
            "99999999999999999999.sst",
            "1.sst.tmp",
            "000001.log.tmp",
            "notes.tmp",
        ] {
            assert_eq!(parse_file_name(name), None, "{name:?}");
        }
    }
}
