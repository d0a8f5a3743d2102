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
//!
//! Archives are written and read as streams, a file at a time through one buffer: a snapshot
//! of a store of any size costs a few hundred KiB of memory to pack, send or unpack.

use std::fmt;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::page_cache::{drop_cached, DROP_EVERY};

const MAGIC: &[u8; 8] = b"BKVSNAP1";

/// Why an archive was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveError {
    /// The bytes end before the archive does, or run on after it.
    Truncated {
        at: u64,
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

/// Bytes copied at a time: packing and unpacking hold one buffer of this size, however large
/// the files.
const COPY_BUFFER: usize = 256 << 10;

/// Packs the files `names` of `dir` into one archive written to `out`, a file at a time
/// through one buffer; returns the archive's length. Each file's checksum is computed as its
/// contents are copied, and written into its header once they are (`out` seeks back).
pub fn pack_to<W: Write + Seek>(
    dir: &Path,
    names: &[String],
    out: &mut W,
) -> Result<u64, ArchiveError> {
    let written = |e: std::io::Error| ArchiveError::Io(format!("writing the archive: {e}"));
    let start = out.stream_position().map_err(written)?;
    out.write_all(MAGIC).map_err(written)?;
    out.write_all(&(names.len() as u32).to_be_bytes())
        .map_err(written)?;
    let mut buffer = vec![0u8; COPY_BUFFER];
    for name in names {
        check_name(name)?;
        let reading = |e: std::io::Error| ArchiveError::Io(format!("reading {name}: {e}"));
        let mut file = std::fs::File::open(dir.join(name)).map_err(reading)?;
        let len = file.metadata().map_err(reading)?.len();
        out.write_all(&(name.len() as u16).to_be_bytes())
            .map_err(written)?;
        out.write_all(name.as_bytes()).map_err(written)?;
        out.write_all(&len.to_be_bytes()).map_err(written)?;
        let crc_at = out.stream_position().map_err(written)?;
        out.write_all(&[0; 4]).map_err(written)?;
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(name.as_bytes());
        let mut left = len;
        while left > 0 {
            let want = left.min(COPY_BUFFER as u64) as usize;
            file.read_exact(&mut buffer[..want]).map_err(reading)?;
            hasher.update(&buffer[..want]);
            out.write_all(&buffer[..want]).map_err(written)?;
            left -= want as u64;
        }
        let end = out.stream_position().map_err(written)?;
        out.seek(SeekFrom::Start(crc_at)).map_err(written)?;
        out.write_all(&hasher.finalize().to_be_bytes())
            .map_err(written)?;
        out.seek(SeekFrom::Start(end)).map_err(written)?;
    }
    let end = out.stream_position().map_err(written)?;
    Ok(end - start)
}

/// Reads an archive from `input` and writes its files into `dir` (which must exist), a file
/// at a time through one buffer, each synced once its checksum is verified; then syncs the
/// directory. On any error the files written so far stay in `dir`: the caller removes it.
/// Bytes after the last file are refused.
pub fn unpack_from<R: Read>(input: &mut R, dir: &Path) -> Result<usize, ArchiveError> {
    let mut reader = Stream { input, at: 0 };
    if reader.array::<8>()? != *MAGIC {
        return Err(ArchiveError::BadMagic);
    }
    let count = u32::from_be_bytes(reader.array()?);
    let io = |what: &str, e: std::io::Error| ArchiveError::Io(format!("{what}: {e}"));
    let mut buffer = vec![0u8; COPY_BUFFER];
    for _ in 0..count {
        let name_len = u16::from_be_bytes(reader.array()?) as usize;
        reader.fill(&mut buffer[..name_len])?;
        let name = std::str::from_utf8(&buffer[..name_len])
            .map_err(|_| ArchiveError::BadName("(not UTF-8)".to_string()))?
            .to_string();
        check_name(&name)?;
        let len = u64::from_be_bytes(reader.array()?);
        let crc = u32::from_be_bytes(reader.array()?);
        let path = dir.join(&name);
        let mut file = std::fs::File::create(&path).map_err(|e| io(&name, e))?;
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(name.as_bytes());
        let mut left = len;
        let mut unsynced = 0;
        while left > 0 {
            let want = left.min(COPY_BUFFER as u64) as usize;
            reader.fill(&mut buffer[..want])?;
            hasher.update(&buffer[..want]);
            file.write_all(&buffer[..want]).map_err(|e| io(&name, e))?;
            left -= want as u64;
            unsynced += want as u64;
            if unsynced >= DROP_EVERY {
                // Written once, read by the store later if at all: out of the page cache.
                file.sync_data().map_err(|e| io(&name, e))?;
                drop_cached(&file);
                unsynced = 0;
            }
        }
        if hasher.finalize() != crc {
            return Err(ArchiveError::Checksum { name });
        }
        file.sync_all().map_err(|e| io(&name, e))?;
        drop_cached(&file);
    }
    if reader.more()? {
        return Err(ArchiveError::Truncated { at: reader.at });
    }
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("syncing the directory", e))?;
    Ok(count as usize)
}

/// The crc32 of a file's name and contents: a name damaged in flight is caught too (what
/// packing computes as it copies).
#[cfg(test)]
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

/// An archive being read, and how far.
struct Stream<'a, R> {
    input: &'a mut R,
    at: u64,
}

impl<R: Read> Stream<'_, R> {
    /// Fills `out` from the archive; an archive that ends first is cut short.
    fn fill(&mut self, out: &mut [u8]) -> Result<(), ArchiveError> {
        self.input.read_exact(out).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => ArchiveError::Truncated { at: self.at },
            _ => ArchiveError::Io(format!("reading the archive at byte {}: {e}", self.at)),
        })?;
        self.at += out.len() as u64;
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ArchiveError> {
        let mut out = [0u8; N];
        self.fill(&mut out)?;
        Ok(out)
    }

    /// Whether any byte is left.
    fn more(&mut self) -> Result<bool, ArchiveError> {
        let mut byte = [0u8; 1];
        loop {
            match self.input.read(&mut byte) {
                Ok(n) => return Ok(n > 0),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ArchiveError::Io(format!("reading the archive: {e}"))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

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
        let bytes = packed(dir.path(), &names).unwrap();
        (dir, names, bytes)
    }

    fn packed(dir: &Path, names: &[String]) -> Result<Vec<u8>, ArchiveError> {
        let mut out = Cursor::new(Vec::new());
        let len = pack_to(dir, names, &mut out)?;
        assert_eq!(len, out.get_ref().len() as u64);
        Ok(out.into_inner())
    }

    fn unpacked(bytes: &[u8]) -> Result<usize, ArchiveError> {
        let out = tempfile::tempdir().unwrap();
        unpack_from(&mut Cursor::new(bytes), out.path())
    }

    #[test]
    fn files_come_back_as_they_went_in() {
        let (_dir, _, bytes) = sample();
        let out = tempfile::tempdir().unwrap();
        assert_eq!(
            unpack_from(&mut Cursor::new(&bytes), out.path()).unwrap(),
            3
        );
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
    fn files_larger_than_the_buffer_stream_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..COPY_BUFFER * 2 + 12_345)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        std::fs::write(dir.path().join("big.sst"), &big).unwrap();
        std::fs::write(dir.path().join("small"), b"s").unwrap();
        let names = vec!["big.sst".to_string(), "small".to_string()];
        // Packed after other bytes: the archive's length, and its checksums, are its own.
        let mut out = Cursor::new(b"prefix".to_vec());
        out.seek(SeekFrom::End(0)).unwrap();
        let len = pack_to(dir.path(), &names, &mut out).unwrap();
        let bytes = out.into_inner()[6..].to_vec();
        assert_eq!(len, bytes.len() as u64);
        let back = tempfile::tempdir().unwrap();
        assert_eq!(
            unpack_from(&mut Cursor::new(&bytes), back.path()).unwrap(),
            2
        );
        assert_eq!(std::fs::read(back.path().join("big.sst")).unwrap(), big);
        let mut changed = bytes.clone();
        changed[COPY_BUFFER + 100] ^= 1;
        assert_eq!(
            unpacked(&changed),
            Err(ArchiveError::Checksum {
                name: "big.sst".to_string()
            })
        );
    }

    #[test]
    fn every_truncation_and_every_changed_byte_is_refused() {
        let (_dir, _, bytes) = sample();
        for len in 0..bytes.len() {
            assert!(unpacked(&bytes[..len]).is_err(), "truncated to {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            unpacked(&longer),
            Err(ArchiveError::Truncated {
                at: bytes.len() as u64
            })
        );
        for i in 0..bytes.len() {
            let mut changed = bytes.clone();
            changed[i] ^= 0x5a;
            assert!(unpacked(&changed).is_err(), "byte {i} changed");
        }
    }

    #[test]
    fn names_that_leave_the_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["../x", "a/b", "..", ".", ""] {
            assert!(matches!(
                packed(dir.path(), &[name.to_string()]),
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
            unpacked(&bytes),
            Err(ArchiveError::BadName("../evil".to_string()))
        );
    }
}
