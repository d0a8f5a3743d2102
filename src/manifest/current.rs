//! The `CURRENT` file: which manifest is the store's, replaced atomically.

use std::path::Path;

use crate::error::{Error, Result};
use crate::filename::{manifest_file_name, parse_file_name, FileKind, CURRENT, CURRENT_TEMP};
use crate::fs::{join, FileSystem};

/// The content of `CURRENT` naming manifest `number`: `MANIFEST-000123 1a2b3c4d\n`, where the
/// hex digits are the crc32 of the name.
pub(crate) fn current_contents(number: u64) -> String {
    let name = manifest_file_name(number);
    let crc = crc32fast::hash(name.as_bytes());
    format!("{name} {crc:08x}\n")
}

/// Parses `CURRENT`'s bytes; the reason on failure.
fn parse_current(bytes: &[u8]) -> std::result::Result<u64, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let line = text
        .strip_suffix('\n')
        .ok_or("does not end with a newline")?;
    let (name, crc_hex) = line
        .split_once(' ')
        .ok_or("no space between the manifest name and its checksum")?;
    let is_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    if crc_hex.len() != 8 || !crc_hex.bytes().all(is_hex) {
        return Err(format!(
            "checksum {crc_hex:?} is not 8 lowercase hex digits"
        ));
    }
    let stored = u32::from_str_radix(crc_hex, 16).map_err(|e| e.to_string())?;
    if crc32fast::hash(name.as_bytes()) != stored {
        return Err("checksum does not match the manifest name".to_string());
    }
    match parse_file_name(name) {
        Some(FileKind::Manifest(number)) => Ok(number),
        _ => Err(format!("{name:?} is not a manifest file name")),
    }
}

/// Makes manifest `manifest_number` the current one: writes `CURRENT.tmp`, syncs it, renames
/// it over `CURRENT` and syncs the directory. A power loss at any point leaves either the old
/// `CURRENT` or the new one, never a partial one.
pub fn set_current(fs: &dyn FileSystem, dir: &Path, manifest_number: u64) -> Result<()> {
    let temp = join(dir, CURRENT_TEMP);
    let result = (|| {
        let mut file = fs.create(&temp)?;
        file.append(current_contents(manifest_number).as_bytes())?;
        file.sync()?;
        drop(file);
        fs.rename(&temp, &join(dir, CURRENT))?;
        fs.sync_dir(dir)
    })();
    if result.is_err() && fs.exists(&temp) {
        // Best effort: a stale temp file is harmless (the next attempt truncates it).
        let _ = fs.remove(&temp);
    }
    result
}

/// The number of the manifest `CURRENT` names; `None` when there is no `CURRENT` (a new
/// store). A damaged `CURRENT` is [`Error::Corruption`] naming it.
pub fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<Option<u64>> {
    let path = join(dir, CURRENT);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let bytes = fs.read_all(&path)?;
    parse_current(&bytes)
        .map(Some)
        .map_err(|reason| Error::corruption(&path, None, reason))
}
