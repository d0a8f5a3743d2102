//! `LOOKUPS`: the lookups each table's filter units counted, saved when the store closes so
//! that a reopened store spends its filter memory where lookups went rather than starting
//! from the tree's prediction again (`docs/format-log-manifest.md`, "Lookup counts").
//!
//! The file is a hint. A store without it, or with one that does not read back whole (a
//! wrong magic, a bad checksum, a truncation), opens as it would have without: from the
//! prediction. A record whose table is not live, or is not the table counted (another
//! number of entries or of filter units: a number reused after a repair), is skipped. It is written to `LOOKUPS.tmp`, synced, and renamed
//! over `LOOKUPS`, so a crash leaves the old file or the new one.

use std::collections::HashMap;
use std::path::Path;

use byteorder::{ByteOrder, LittleEndian};

use crate::error::{Error, Result};
use crate::filename::{LOOKUP_COUNTS, LOOKUP_COUNTS_TEMP};
use crate::fs::FileSystem;

/// The file's first eight bytes.
const MAGIC: &[u8; 8] = b"BKVLOOK1";

/// One table's counts: over how many of the store's lookups, and by unit of its filter; with
/// the table's entries, which tell it from another table that took its number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableLookups {
    /// The table's entries.
    pub entries: u64,
    /// The store's lookups the counts cover.
    pub span: u64,
    /// Lookups counted by unit of the table's filter.
    pub counts: Vec<u64>,
}

/// The file's bytes for `tables` (by table number).
pub fn encode(tables: &[(u64, TableLookups)]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    put_u32(&mut out, tables.len() as u32);
    for (number, lookups) in tables {
        put_u64(&mut out, *number);
        put_u64(&mut out, lookups.entries);
        put_u64(&mut out, lookups.span);
        put_u32(&mut out, lookups.counts.len() as u32);
        for &count in &lookups.counts {
            put_u64(&mut out, count);
        }
    }
    let crc = crc32fast::hash(&out);
    put_u32(&mut out, crc);
    out
}

/// The tables' counts in `bytes`, or why they do not read back.
pub fn decode(bytes: &[u8]) -> std::result::Result<HashMap<u64, TableLookups>, String> {
    let body_len = bytes
        .len()
        .checked_sub(4)
        .filter(|&l| l >= MAGIC.len() + 4)
        .ok_or("shorter than its header and checksum")?;
    let (body, crc) = bytes.split_at(body_len);
    if crc32fast::hash(body) != LittleEndian::read_u32(crc) {
        return Err("checksum mismatch".to_string());
    }
    if &body[..MAGIC.len()] != MAGIC {
        return Err("not a lookup-counts file (bad magic)".to_string());
    }
    let mut at = Reader {
        bytes: body,
        at: MAGIC.len(),
    };
    let tables = at.u32()?;
    let mut out = HashMap::new();
    for _ in 0..tables {
        let number = at.u64()?;
        let entries = at.u64()?;
        let span = at.u64()?;
        let units = at.u32()? as usize;
        // Each count takes eight bytes: a count of units larger than the bytes left is a
        // damaged file, refused before anything is allocated for it.
        if units > (body.len() - at.at) / 8 {
            return Err(format!(
                "table {number} claims {units} units past the file's end"
            ));
        }
        let counts = (0..units)
            .map(|_| at.u64())
            .collect::<std::result::Result<_, _>>()?;
        out.insert(
            number,
            TableLookups {
                entries,
                span,
                counts,
            },
        );
    }
    if at.at != body.len() {
        return Err("bytes after the last table".to_string());
    }
    Ok(out)
}

/// Writes `tables` to `dir`'s `LOOKUPS`: a temporary file, synced, renamed over it.
pub fn save(fs: &dyn FileSystem, dir: &Path, tables: &[(u64, TableLookups)]) -> Result<()> {
    let temp = dir.join(LOOKUP_COUNTS_TEMP);
    let written = (|| {
        let mut file = fs.create(&temp)?;
        file.append(&encode(tables))?;
        file.sync()?;
        drop(file);
        fs.rename(&temp, &dir.join(LOOKUP_COUNTS))
    })();
    if written.is_err() && fs.exists(&temp) {
        let _ = fs.remove(&temp);
    }
    written
}

/// The counts `dir`'s `LOOKUPS` holds: `Ok(None)` without the file, `Err` naming the file
/// when it cannot be read or does not read back whole.
pub fn load(fs: &dyn FileSystem, dir: &Path) -> Result<Option<HashMap<u64, TableLookups>>> {
    let path = dir.join(LOOKUP_COUNTS);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let bytes = fs.read_all(&path)?;
    decode(&bytes)
        .map(Some)
        .map_err(|reason| Error::Corruption {
            file: path,
            offset: None,
            reason,
        })
}

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// Reads little-endian numbers from a body whose checksum held.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> std::result::Result<&[u8], String> {
        let end = (self.at.checked_add(n))
            .filter(|&end| end <= self.bytes.len())
            .ok_or("truncated")?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn u32(&mut self) -> std::result::Result<u32, String> {
        self.take(4).map(LittleEndian::read_u32)
    }

    fn u64(&mut self) -> std::result::Result<u64, String> {
        self.take(8).map(LittleEndian::read_u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tables() -> Vec<(u64, TableLookups)> {
        vec![
            (
                12,
                TableLookups {
                    entries: 1_000,
                    span: 40_000,
                    counts: vec![3, 0, 19_000],
                },
            ),
            (
                7,
                TableLookups {
                    entries: 1,
                    span: 1,
                    counts: vec![],
                },
            ),
        ]
    }

    #[test]
    fn counts_come_back_as_they_were_saved() {
        let back = decode(&encode(&tables())).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[&12], tables()[0].1);
        assert_eq!(back[&7], tables()[1].1);
        assert!(decode(&encode(&[])).unwrap().is_empty());
    }

    #[test]
    fn every_truncation_and_every_changed_byte_is_refused() {
        let bytes = encode(&tables());
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "truncated to {len}");
        }
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            assert!(decode(&damaged).is_err(), "byte {at} changed");
        }
    }

    #[test]
    fn a_unit_count_past_the_end_is_refused_before_allocating() {
        // A well-formed file (its checksum holds) whose table claims 2^32 - 1 units.
        let mut body = MAGIC.to_vec();
        put_u32(&mut body, 1);
        put_u64(&mut body, 1);
        put_u64(&mut body, 100);
        put_u64(&mut body, 10);
        put_u32(&mut body, u32::MAX);
        let crc = crc32fast::hash(&body);
        put_u32(&mut body, crc);
        let refused = decode(&body).unwrap_err();
        assert!(refused.contains("past the file's end"), "{refused}");
    }
}
