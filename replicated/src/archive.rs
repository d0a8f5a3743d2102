//! The bytes a state-machine snapshot travels as: the files of a bloomkv checkpoint, each
//! with its name, length and crc32, so the receiver verifies every file before it opens the
//! store they make.
//!
//! ```text
//! "BKVSNAP1"                       8 bytes
//! file count                       u32 big-endian
//! per file:  name length           u16 big-endian
//!            name                  UTF-8, a plain file name (no '/', not "." or "..")
//!            contents length       u64 big-endian
//!            crc32 of name, then contents   u32 big-endian
//!            contents
//! ```
//!
//! Nothing may follow the last file.

use std::fmt;
use std::path::Path;

const MAGIC: &[u8; 8] = b"BKVSNAP1";

/// Why an archive was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveError {
    /// The bytes end before the archive does, or run on after it.
    Truncated {
        at: usize,
    },
    BadMagic,
    /// A name that could leave the directory, or is not UTF-8.
    BadName(String),
    /// A file whose name and contents do not match its checksum.
    Checksum {
        name: String,
    },
    /// Reading or writing a file failed.
    Io(String),
}

impl fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArchiveError::Truncated { at } => write!(f, "snapshot archive cut short at byte {at}"),
            ArchiveError::BadMagic => write!(f, "not a snapshot archive (bad magic)"),
            ArchiveError::BadName(name) => write!(f, "snapshot archive names a bad file {name:?}"),
            ArchiveError::Checksum { name } => {
                write!(f, "snapshot file {name} does not match its checksum")
            }
            ArchiveError::Io(msg) => write!(f, "snapshot archive: {msg}"),
        }
    }
}

impl std::error::Error for ArchiveError {}

/// Packs the files `names` of `dir` into one archive.
pub fn pack(dir: &Path, names: &[String]) -> Result<Vec<u8>, ArchiveError> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(names.len() as u32).to_be_bytes());
    for name in names {
        check_name(name)?;
        let contents = std::fs::read(dir.join(name))
            .map_err(|e| ArchiveError::Io(format!("reading {name}: {e}")))?;
        out.extend_from_slice(&(name.len() as u16).to_be_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&(contents.len() as u64).to_be_bytes());
        out.extend_from_slice(&checksum(name, &contents).to_be_bytes());
        out.extend_from_slice(&contents);
    }
    Ok(out)
}

/// The files of an archive, every checksum verified, as (name, contents).
pub fn unpack(bytes: &[u8]) -> Result<Vec<(String, &[u8])>, ArchiveError> {
    let mut reader = Reader { bytes, at: 0 };
    if reader.take(MAGIC.len())? != MAGIC {
        return Err(ArchiveError::BadMagic);
    }
    let count = u32::from_be_bytes(reader.array()?);
    let mut files = Vec::new();
    for _ in 0..count {
        let name_len = u16::from_be_bytes(reader.array()?) as usize;
        let name = std::str::from_utf8(reader.take(name_len)?)
            .map_err(|_| ArchiveError::BadName("(not UTF-8)".to_string()))?
            .to_string();
        check_name(&name)?;
        let len = u64::from_be_bytes(reader.array()?);
        let crc = u32::from_be_bytes(reader.array()?);
        let len = usize::try_from(len).map_err(|_| ArchiveError::Truncated { at: reader.at })?;
        let contents = reader.take(len)?;
        if checksum(&name, contents) != crc {
            return Err(ArchiveError::Checksum { name });
        }
        files.push((name, contents));
    }
    if reader.at != bytes.len() {
        return Err(ArchiveError::Truncated { at: reader.at });
    }
    Ok(files)
}

/// Writes the files of a verified archive into `dir` (which must exist), each synced, and
/// syncs the directory.
pub fn unpack_into(bytes: &[u8], dir: &Path) -> Result<usize, ArchiveError> {
    let files = unpack(bytes)?;
    let io = |what: &str, e: std::io::Error| ArchiveError::Io(format!("{what}: {e}"));
    for (name, contents) in &files {
        let path = dir.join(name);
        let mut file = std::fs::File::create(&path).map_err(|e| io(name, e))?;
        std::io::Write::write_all(&mut file, contents).map_err(|e| io(name, e))?;
        file.sync_all().map_err(|e| io(name, e))?;
    }
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("syncing the directory", e))?;
    Ok(files.len())
}

/// The crc32 of a file's name and contents: a name damaged in flight is caught too.
fn checksum(name: &str, contents: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(name.as_bytes());
    hasher.update(contents);
    hasher.finalize()
}

fn check_name(name: &str) -> Result<(), ArchiveError> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && name.len() <= u16::MAX as usize;
    if plain {
        Ok(())
    } else {
        Err(ArchiveError::BadName(name.to_string()))
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ArchiveError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(ArchiveError::Truncated { at: self.at })?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ArchiveError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (tempfile::TempDir, Vec<String>, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("000001.sst"), b"table bytes").unwrap();
        std::fs::write(dir.path().join("CURRENT"), b"MANIFEST-000003\n").unwrap();
        std::fs::write(dir.path().join("empty.log"), b"").unwrap();
        let names: Vec<String> = ["000001.sst", "CURRENT", "empty.log"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let bytes = pack(dir.path(), &names).unwrap();
        (dir, names, bytes)
    }

    #[test]
    fn files_come_back_as_they_went_in() {
        let (_dir, _, bytes) = sample();
        let out = tempfile::tempdir().unwrap();
        assert_eq!(unpack_into(&bytes, out.path()).unwrap(), 3);
        assert_eq!(
            std::fs::read(out.path().join("000001.sst")).unwrap(),
            b"table bytes"
        );
        assert_eq!(
            std::fs::read(out.path().join("CURRENT")).unwrap(),
            b"MANIFEST-000003\n"
        );
        assert_eq!(std::fs::read(out.path().join("empty.log")).unwrap(), b"");
    }

    #[test]
    fn every_truncation_and_every_changed_byte_is_refused() {
        let (_dir, _, bytes) = sample();
        for len in 0..bytes.len() {
            assert!(unpack(&bytes[..len]).is_err(), "truncated to {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            unpack(&longer),
            Err(ArchiveError::Truncated { at: bytes.len() })
        );
        for i in 0..bytes.len() {
            let mut changed = bytes.clone();
            changed[i] ^= 0x5a;
            assert!(unpack(&changed).is_err(), "byte {i} changed");
        }
    }

    #[test]
    fn names_that_leave_the_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["../x", "a/b", "..", ".", ""] {
            assert!(matches!(
                pack(dir.path(), &[name.to_string()]),
                Err(ArchiveError::BadName(_))
            ));
        }
        // A hand-made archive naming "../evil".
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&1u32.to_be_bytes());
        bytes.extend_from_slice(&7u16.to_be_bytes());
        bytes.extend_from_slice(b"../evil");
        bytes.extend_from_slice(&0u64.to_be_bytes());
        bytes.extend_from_slice(&checksum("../evil", b"").to_be_bytes());
        assert_eq!(
            unpack(&bytes),
            Err(ArchiveError::BadName("../evil".to_string()))
        );
    }
}
