//! The fixed pieces of a table file: varints, block handles, block trailers and the footer.
//! `docs/format.md`, "Table files", describes every byte.

use std::path::Path;

use byteorder::{ByteOrder, LittleEndian};

use super::compression::{self, Compression};
use crate::error::Error;

/// The newest format version, written in the footer of a table with a prefix filter
/// (`docs/format.md`, "Prefix filter block"), whose properties say whether its index is one
/// block or two levels. Without one, a table whose index is split into partitions under a
/// top-level index is written as version 4 (`docs/format.md`, "Two-level index"), and one
/// whose index fits one partition as version 3. Version 3 shortened the index block's
/// separators and prefix-compressed its entries (`docs/format.md`, "Index block"); version 2
/// added per-block compression (in the high bits of the trailer's type byte). Versions 1 and
/// 2 are read by the same code, their index through its older layout. Readers refuse any
/// other version.
pub const FORMAT_VERSION: u32 = 5;

/// The first format version whose properties name a prefix filter block.
pub const PREFIX_FILTER_VERSION: u32 = 5;

/// The version of a table whose index is one block: what every table was before version 4,
/// and what a small table still is.
pub const SINGLE_INDEX_VERSION: u32 = 3;

/// The first format version whose footer may name a top-level index over index partitions.
pub const TWO_LEVEL_INDEX_VERSION: u32 = 4;

/// The first format version whose index block holds shortened separators in the version 3
/// layout; older versions hold each data block's last entry in the data block layout.
pub const SHORT_SEPARATORS_VERSION: u32 = 3;

/// The oldest format version this build reads.
pub const OLDEST_READABLE_VERSION: u32 = 1;

/// The last eight bytes of every table file: ASCII `bkvtable`.
pub const MAGIC: [u8; 8] = *b"bkvtable";

/// Size of the footer at the end of the file.
pub const FOOTER_LEN: usize = 64;

/// Size of the trailer after every block's contents: a type byte (block kind in the low four
/// bits, compression in the high four) and a crc32.
pub const TRAILER_LEN: usize = 5;

/// What a block holds; stored in its trailer and covered by its checksum, so a handle that
/// points at the wrong kind of block is caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum BlockKind {
    Data = 1,
    Filter = 2,
    Properties = 3,
    Index = 4,
    /// The top level of a two-level index: one entry per index partition.
    TopIndex = 5,
    /// A filter over the prefixes of the table's keys.
    PrefixFilter = 6,
}

impl BlockKind {
    /// Data and index blocks may be compressed; a filter is random bits that never shrink, and
    /// the properties block is a few dozen bytes. Writer and reader both ask here.
    pub fn may_be_compressed(self) -> bool {
        matches!(self, BlockKind::Data | BlockKind::Index)
    }

    pub fn name(self) -> &'static str {
        match self {
            BlockKind::Data => "data",
            BlockKind::Filter => "filter",
            BlockKind::Properties => "properties",
            BlockKind::Index => "index",
            BlockKind::TopIndex => "top-level index",
            BlockKind::PrefixFilter => "prefix filter",
        }
    }
}

/// A damaged byte inside a block's contents: the position within the contents and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    pub at: usize,
    pub reason: String,
}

impl Malformed {
    pub fn new(at: usize, reason: impl Into<String>) -> Malformed {
        Malformed {
            at,
            reason: reason.into(),
        }
    }

    /// The crate error for this damage in the `kind` block that starts at `block_offset`.
    pub fn in_block(self, path: &Path, kind: BlockKind, block_offset: u64) -> Error {
        Error::corruption(
            path,
            Some(block_offset),
            format!(
                "{} block at offset {block_offset}, byte {} of its contents: {}",
                kind.name(),
                self.at,
                self.reason
            ),
        )
    }
}

/// Appends `v` as a varint (the store's one encoding, [`crate::varint`]).
pub fn put_varint(out: &mut Vec<u8>, v: u64) {
    crate::varint::put(out, v);
}

/// A forward reader over a byte slice that never reads past `limit` and reports where it
/// failed.
pub struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(bytes: &'a [u8], pos: usize) -> Decoder<'a> {
        Decoder { bytes, pos }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// Reads a varint (shortest form, fitting in a u64).
    pub fn varint(&mut self, what: &str) -> Result<u64, Malformed> {
        let start = self.pos;
        let rest = self.bytes.get(start..).unwrap_or_default();
        let (value, len) = crate::varint::decode(rest)
            .map_err(|e| Malformed::new(start, format!("{what}: {e}")))?;
        self.pos += len;
        Ok(value)
    }

    /// A varint that must fit in `usize` and be at most `max`.
    pub fn varint_len(&mut self, what: &str, max: usize) -> Result<usize, Malformed> {
        let start = self.pos;
        let v = self.varint(what)?;
        match usize::try_from(v) {
            Ok(n) if n <= max => Ok(n),
            _ => Err(Malformed::new(start, format!("{what} {v} exceeds {max}"))),
        }
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, Malformed> {
        let Some(&b) = self.bytes.get(self.pos) else {
            return Err(Malformed::new(self.pos, format!("{what}: past the end")));
        };
        self.pos += 1;
        Ok(b)
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], Malformed> {
        let end = self.pos.checked_add(n);
        match end.and_then(|end| self.bytes.get(self.pos..end)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(Malformed::new(
                self.pos,
                format!(
                    "{what}: {n} bytes run past the end ({} left)",
                    self.bytes.len().saturating_sub(self.pos)
                ),
            )),
        }
    }

    /// A varint length followed by that many bytes.
    pub fn length_prefixed(&mut self, what: &str) -> Result<&'a [u8], Malformed> {
        let n = self.varint_len(what, self.bytes.len())?;
        self.bytes(n, what)
    }
}

/// Where a block's contents lie in the file: its trailer follows the contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    pub offset: u64,
    /// Length of the contents, without the trailer.
    pub size: u64,
}

impl BlockHandle {
    /// The file offset just past the block's trailer (saturating: a damaged handle may be huge).
    pub fn end(&self) -> u64 {
        self.offset
            .saturating_add(self.size)
            .saturating_add(TRAILER_LEN as u64)
    }

    /// The file offset just past the block's trailer, or `None` past 2^64.
    pub fn checked_end(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(TRAILER_LEN as u64)
    }

    /// Contents plus trailer.
    pub fn size_with_trailer(&self) -> u64 {
        self.size.saturating_add(TRAILER_LEN as u64)
    }

    pub fn decode_varint(d: &mut Decoder<'_>) -> Result<BlockHandle, Malformed> {
        let offset = d.varint("block offset")?;
        let size = d.varint("block size")?;
        Ok(BlockHandle { offset, size })
    }
}
/// Appends a block's restart array: each restart offset, then their count, all u32
/// little-endian. Data blocks and the index block end with one.
pub fn put_restart_array(out: &mut Vec<u8>, restarts: &[u32]) {
    out.reserve_exact(4 * restarts.len() + 4);
    for &r in restarts {
        out.extend_from_slice(&r.to_le_bytes());
    }
    out.extend_from_slice(&(restarts.len() as u32).to_le_bytes());
}

/// Reads the restart array at the end of a block: where it starts and how many offsets it
/// holds, checked to fit, to be there exactly when the block holds entries, to start at 0,
/// and to rise strictly within the entries.
pub fn restart_array(bytes: &[u8]) -> Result<(usize, usize), Malformed> {
    let Some(count_at) = bytes.len().checked_sub(4) else {
        return Err(Malformed::new(
            0,
            format!("{} bytes cannot hold the restart count", bytes.len()),
        ));
    };
    let num_restarts = LittleEndian::read_u32(&bytes[count_at..]) as usize;
    let start = num_restarts
        .checked_mul(4)
        .and_then(|n| count_at.checked_sub(n))
        .ok_or_else(|| {
            Malformed::new(
                count_at,
                format!("restart count {num_restarts} does not fit in the block"),
            )
        })?;
    if (num_restarts == 0) != (start == 0) {
        return Err(Malformed::new(
            count_at,
            "a block holds restart points exactly when it holds entries",
        ));
    }
    let mut prev = None;
    for (i, word) in bytes[start..count_at].chunks_exact(4).enumerate() {
        let r = LittleEndian::read_u32(word) as usize;
        let in_order = match prev {
            None => r == 0,
            Some(p) => r > p && r < start,
        };
        if !in_order {
            return Err(Malformed::new(
                start + 4 * i,
                format!("restart offset {r} is out of order or out of range"),
            ));
        }
        prev = Some(r);
    }
    Ok((start, num_restarts))
}

/// The checksum stored in a block's trailer: crc32 of the contents followed by the kind byte.
pub fn block_crc(contents: &[u8], kind: u8) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(contents);
    h.update(&[kind]);
    h.finalize()
}

/// The trailer's type byte: kind in the low four bits, compression in the high four.
fn type_byte(kind: BlockKind, compression: Compression) -> u8 {
    kind as u8 | (compression.code() << 4)
}

/// The trailer for `contents` (as stored: compressed if `compression` says so) of `kind`.
pub fn block_trailer(
    contents: &[u8],
    kind: BlockKind,
    compression: Compression,
) -> [u8; TRAILER_LEN] {
    let mut t = [0u8; TRAILER_LEN];
    let type_byte = type_byte(kind, compression);
    t[0] = type_byte;
    LittleEndian::write_u32(&mut t[1..5], block_crc(contents, type_byte));
    t
}

/// The most a block of `kind` can hold uncompressed, as the writer builds them: a data block
/// closes once it reaches the block size, so it holds at most that plus one entry; an index
/// block is refused past 2 GiB. Damaged bytes under a valid checksum (a crafted file) cannot
/// make a reader allocate more.
fn max_contents_len(kind: BlockKind) -> usize {
    use crate::entry::{MAX_KEY_LEN, MAX_VALUE_LEN};
    match kind {
        BlockKind::Data => super::options::MAX_BLOCK_SIZE + MAX_KEY_LEN + MAX_VALUE_LEN + 64,
        BlockKind::Index => u32::MAX as usize / 2,
        // never compressed
        BlockKind::Filter
        | BlockKind::Properties
        | BlockKind::TopIndex
        | BlockKind::PrefixFilter => 0,
    }
}

/// Splits a block as read from the file (stored contents + trailer), checks kind and
/// checksum, and returns the contents, decompressed. `raw` must be exactly
/// `handle.size_with_trailer()` bytes.
pub fn check_block(
    path: &Path,
    handle: BlockHandle,
    kind: BlockKind,
    mut raw: Vec<u8>,
) -> crate::Result<Vec<u8>> {
    let corrupt = |reason: String| {
        Error::corruption(
            path,
            Some(handle.offset),
            format!(
                "{} block at offset {}: {reason}",
                kind.name(),
                handle.offset
            ),
        )
    };
    let Some(split) = raw.len().checked_sub(TRAILER_LEN) else {
        return Err(corrupt("shorter than its trailer".to_string()));
    };
    let (stored_kind, stored_crc) = match raw.get(split..) {
        Some(t) if t.len() == TRAILER_LEN => (t[0], LittleEndian::read_u32(&t[1..5])),
        _ => return Err(corrupt("shorter than its trailer".to_string())),
    };
    raw.truncate(split);
    let actual = block_crc(&raw, stored_kind);
    if actual != stored_crc {
        return Err(corrupt(format!(
            "checksum mismatch: stored {stored_crc:#010x}, computed {actual:#010x}"
        )));
    }
    let (kind_code, compression_code) = (stored_kind & 0x0f, stored_kind >> 4);
    if kind_code != kind as u8 {
        return Err(corrupt(format!(
            "trailer says block kind {kind_code}, expected {} ({})",
            kind as u8,
            kind.name()
        )));
    }
    let Some(compression) = Compression::from_code(compression_code) else {
        return Err(corrupt(format!(
            "trailer names unknown compression {compression_code}"
        )));
    };
    if compression != Compression::None && !kind.may_be_compressed() {
        return Err(corrupt(format!(
            "a {} block is never compressed, yet its trailer says {}",
            kind.name(),
            compression.name()
        )));
    }
    compression::decompress(raw, compression, max_contents_len(kind)).map_err(|m| {
        corrupt(format!(
            "{} block does not decompress: {}",
            compression.name(),
            m.reason
        ))
    })
}

/// The last [`FOOTER_LEN`] bytes of a table file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    pub index: BlockHandle,
    /// `None` when the table was written with `FilterPolicy::Disabled` (stored as 0, 0).
    pub filter: Option<BlockHandle>,
    pub properties: BlockHandle,
    pub version: u32,
}

impl Footer {
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut f = [0u8; FOOTER_LEN];
        let filter = self.filter.unwrap_or_default();
        LittleEndian::write_u64(&mut f[0..8], self.index.offset);
        LittleEndian::write_u64(&mut f[8..16], self.index.size);
        LittleEndian::write_u64(&mut f[16..24], filter.offset);
        LittleEndian::write_u64(&mut f[24..32], filter.size);
        LittleEndian::write_u64(&mut f[32..40], self.properties.offset);
        LittleEndian::write_u64(&mut f[40..48], self.properties.size);
        LittleEndian::write_u32(&mut f[48..52], self.version);
        let crc = crc32fast::hash(&f[0..52]);
        LittleEndian::write_u32(&mut f[52..56], crc);
        f[56..64].copy_from_slice(&MAGIC);
        f
    }

    /// Decodes the footer found at `footer_offset` of `path`: magic, then checksum, then
    /// version.
    pub fn decode(path: &Path, footer_offset: u64, bytes: &[u8]) -> crate::Result<Footer> {
        let corrupt = |reason: String| Error::corruption(path, Some(footer_offset), reason);
        let f: &[u8; FOOTER_LEN] = bytes
            .try_into()
            .map_err(|_| corrupt(format!("footer is {} bytes, not {FOOTER_LEN}", bytes.len())))?;
        if f[56..64] != MAGIC {
            return Err(corrupt(
                "bad magic: not a bloomkv table file (or truncated)".to_string(),
            ));
        }
        let stored = LittleEndian::read_u32(&f[52..56]);
        let actual = crc32fast::hash(&f[0..52]);
        if stored != actual {
            return Err(corrupt(format!(
                "footer checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
            )));
        }
        let version = LittleEndian::read_u32(&f[48..52]);
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(corrupt(format!(
                "unknown table format version {version} (this build reads \
                 {OLDEST_READABLE_VERSION} to {FORMAT_VERSION})"
            )));
        }
        let handle = |at: usize| BlockHandle {
            offset: LittleEndian::read_u64(&f[at..at + 8]),
            size: LittleEndian::read_u64(&f[at + 8..at + 16]),
        };
        let filter = handle(16);
        let filter = if filter == BlockHandle::default() {
            None
        } else if filter.size == 0 {
            return Err(corrupt(format!(
                "filter handle has offset {} but size 0",
                filter.offset
            )));
        } else {
            Some(filter)
        };
        Ok(Footer {
            index: handle(0),
            filter,
            properties: handle(32),
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overflow() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            let mut d = Decoder::new(&buf, 0);
            assert_eq!(d.varint("v"), Ok(v));
            assert!(d.is_empty());
            // Every strict prefix is truncated.
            for cut in 0..buf.len() {
                assert!(Decoder::new(&buf[..cut], 0).varint("v").is_err());
            }
        }
        let too_big = [0xffu8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert!(Decoder::new(&too_big, 0).varint("v").is_err());
        let too_long = [0x80u8; 11];
        assert!(Decoder::new(&too_long, 0).varint("v").is_err());
    }

    #[test]
    fn footer_round_trips_and_checks_every_field() {
        let path = Path::new("t.sst");
        let footer = Footer {
            index: BlockHandle {
                offset: 900,
                size: 40,
            },
            filter: Some(BlockHandle {
                offset: 500,
                size: 300,
            }),
            properties: BlockHandle {
                offset: 805,
                size: 90,
            },
            version: FORMAT_VERSION,
        };
        let bytes = footer.encode();
        assert_eq!(Footer::decode(path, 0, &bytes).unwrap(), footer);
        for i in 0..FOOTER_LEN {
            let mut bad = bytes;
            bad[i] ^= 0x01;
            assert!(Footer::decode(path, 0, &bad).unwrap_err().is_corruption());
        }
        let no_filter = Footer {
            filter: None,
            ..footer
        };
        assert_eq!(
            Footer::decode(path, 0, &no_filter.encode()).unwrap(),
            no_filter
        );
    }

    #[test]
    fn block_check_catches_kind_and_checksum() {
        let path = Path::new("t.sst");
        let handle = BlockHandle { offset: 0, size: 3 };
        let mut raw = b"abc".to_vec();
        raw.extend_from_slice(&block_trailer(b"abc", BlockKind::Data, Compression::None));
        assert_eq!(
            check_block(path, handle, BlockKind::Data, raw.clone()).unwrap(),
            b"abc"
        );
        assert!(check_block(path, handle, BlockKind::Index, raw.clone()).is_err());
        let mut bad = raw.clone();
        bad[1] ^= 0xff;
        assert!(check_block(path, handle, BlockKind::Data, bad).is_err());
        assert!(check_block(path, handle, BlockKind::Data, raw[..3].to_vec()).is_err());
    }
}
