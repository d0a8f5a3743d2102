//! The table file format on disk: per-block LZ4 compression as `docs/format.md` and
//! `src/sstable/format.rs` describe it (the trailer's type byte is `kind | compression << 4`,
//! under the crc32), damage that only decompression can catch, the version 3 index block
//! (shortened separators, prefix-compressed, handles as sizes between restart points) and
//! damage to it, and tables of the previous formats (versions 1 and 2) written by the
//! previous code, read and rewritten by this one.
//!
//! The raw bytes are read here with a small decoder of our own (footer, trailers, the index
//! and data block layout, LZ4 with its 4-byte length prefix), so these tests check the bytes
//! on disk and not only that the library agrees with itself.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv::entry::{Entry, ValueKind};
use bloomkv::filter::KeyHash;
use bloomkv::metrics::ReadCounters;
use bloomkv::sstable::{
    verify_table, Compression, Table, TableOptions, FOOTER_LEN, FORMAT_VERSION, MAGIC, TRAILER_LEN,
};
use bloomkv::{Db, Error, Options, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use common::{build_table, open_table, os_fs};

// ---------------------------------------------------------------------------------------
// An independent reader of the format.

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// A block's place: offset and size of its stored contents (the trailer follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Handle {
    offset: u64,
    size: u64,
}

impl Handle {
    fn start(&self) -> usize {
        self.offset as usize
    }
    fn end_of_contents(&self) -> usize {
        (self.offset + self.size) as usize
    }
    fn end(&self) -> usize {
        self.end_of_contents() + TRAILER_LEN
    }
}

#[derive(Debug)]
struct RawFooter {
    index: Handle,
    filter: Option<Handle>,
    properties: Handle,
    version: u32,
}

fn footer(file: &[u8]) -> RawFooter {
    let f = &file[file.len() - FOOTER_LEN..];
    assert_eq!(f[56..64], MAGIC, "magic");
    assert_eq!(u32_at(f, 52), crc32fast::hash(&f[..52]), "footer crc");
    let handle = |at: usize| Handle {
        offset: u64_at(f, at),
        size: u64_at(f, at + 8),
    };
    let filter = handle(16);
    RawFooter {
        index: handle(0),
        filter: (filter.size != 0).then_some(filter),
        properties: handle(32),
        version: u32_at(f, 48),
    }
}

/// The stored contents and type byte of a block, after checking its crc32 (over the stored
/// contents followed by the type byte).
fn stored_block(file: &[u8], h: Handle) -> (&[u8], u8) {
    let contents = &file[h.start()..h.end_of_contents()];
    let type_byte = file[h.end_of_contents()];
    let mut crc = crc32fast::Hasher::new();
    crc.update(contents);
    crc.update(&[type_byte]);
    assert_eq!(
        u32_at(file, h.end_of_contents() + 1),
        crc.finalize(),
        "block crc at {}",
        h.offset
    );
    (contents, type_byte)
}

/// The contents of a block, decompressed according to its type byte's high nibble.
fn block_contents(file: &[u8], h: Handle) -> Vec<u8> {
    let (stored, type_byte) = stored_block(file, h);
    match type_byte >> 4 {
        0 => stored.to_vec(),
        1 => {
            let len = u32_at(stored, 0) as usize;
            let out = lz4_flex::block::decompress(&stored[4..], len).expect("valid LZ4");
            assert_eq!(out.len(), len);
            out
        }
        other => panic!("compression code {other} at {}", h.offset),
    }
}

fn varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return v;
        }
    }
    panic!("varint too long");
}

/// The entries of a data (or index) block's contents.
fn block_entries(contents: &[u8]) -> Vec<Entry> {
    let restarts = u32_at(contents, contents.len() - 4) as usize;
    let end = contents.len() - 4 - 4 * restarts;
    let (mut pos, mut key, mut out) = (0usize, Vec::new(), Vec::new());
    while pos < end {
        let shared = varint(contents, &mut pos) as usize;
        let unshared = varint(contents, &mut pos) as usize;
        let value_len = varint(contents, &mut pos) as usize;
        let seq = varint(contents, &mut pos);
        let kind = contents[pos];
        pos += 1;
        key.truncate(shared);
        key.extend_from_slice(&contents[pos..pos + unshared]);
        pos += unshared;
        let value = contents[pos..pos + value_len].to_vec();
        pos += value_len;
        out.push(match kind {
            0 => Entry::tombstone(key.clone(), seq),
            1 => Entry::value(key.clone(), seq, value),
            k => panic!("entry kind {k}"),
        });
    }
    assert_eq!(pos, end);
    out
}

/// One index entry: a data block's separator (key and sequence number) and handle.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Separator {
    key: Vec<u8>,
    seq: u64,
    handle: Handle,
}

/// The index block of format versions 1 and 2: the data block layout, each entry's value the
/// block's handle as two varints.
fn v2_index(contents: &[u8]) -> Vec<Separator> {
    block_entries(contents)
        .into_iter()
        .map(|e| {
            let mut pos = 0;
            let offset = varint(&e.value, &mut pos);
            let size = varint(&e.value, &mut pos);
            assert_eq!(pos, e.value.len());
            assert_eq!(e.kind, ValueKind::Value);
            Separator {
                key: e.key,
                seq: e.seq,
                handle: Handle { offset, size },
            }
        })
        .collect()
}

/// Entries between restart points of a version 3 index block.
const INDEX_RESTART_INTERVAL: usize = 16;

/// The index block of format version 3: entries of `shared`, `unshared << 1 | has_seq`,
/// the sequence number when flagged, the block's offset at restart points only, its size,
/// the key bytes; then the restart array. An offset not stored is where the block before
/// ends.
fn v3_index(contents: &[u8]) -> Vec<Separator> {
    let restarts = u32_at(contents, contents.len() - 4) as usize;
    let end = contents.len() - 4 - 4 * restarts;
    let (mut pos, mut key, mut out) = (0usize, Vec::new(), Vec::<Separator>::new());
    while pos < end {
        let at_restart = out.len() % INDEX_RESTART_INTERVAL == 0;
        if at_restart {
            let r = out.len() / INDEX_RESTART_INTERVAL;
            assert_eq!(u32_at(contents, end + 4 * r) as usize, pos, "restart {r}");
        }
        let shared = varint(contents, &mut pos) as usize;
        let flagged = varint(contents, &mut pos);
        let seq = if flagged & 1 == 1 {
            let seq = varint(contents, &mut pos);
            assert_ne!(seq, 0, "a sequence number of 0 is not stored");
            seq
        } else {
            0
        };
        let offset = match out.last() {
            _ if at_restart => varint(contents, &mut pos),
            Some(prev) => prev.handle.end() as u64,
            None => unreachable!("entry 0 is a restart point"),
        };
        let size = varint(contents, &mut pos);
        let unshared = (flagged >> 1) as usize;
        assert!(
            !at_restart || shared == 0,
            "a restart point stores its whole key"
        );
        key.truncate(shared);
        key.extend_from_slice(&contents[pos..pos + unshared]);
        pos += unshared;
        out.push(Separator {
            key: key.clone(),
            seq,
            handle: Handle { offset, size },
        });
    }
    assert_eq!(pos, end);
    assert_eq!(restarts, out.len().div_ceil(INDEX_RESTART_INTERVAL));
    out
}

/// The index of a table of any version.
fn index(file: &[u8]) -> Vec<Separator> {
    let f = footer(file);
    let contents = block_contents(file, f.index);
    match f.version {
        1 | 2 => v2_index(&contents),
        3 => v3_index(&contents),
        v => panic!("format version {v}"),
    }
}

/// The data block handles, from the index block, with each block's separator key.
fn data_handles(file: &[u8]) -> Vec<(Vec<u8>, Handle)> {
    index(file).into_iter().map(|s| (s.key, s.handle)).collect()
}

/// Type bytes of every block of a table, checked to tile the file as documented.
struct Layout {
    data: Vec<(Handle, u8)>,
    filter: Option<u8>,
    properties: u8,
    index: u8,
    version: u32,
}

fn layout(file: &[u8]) -> Layout {
    let f = footer(file);
    let handles = data_handles(file);
    let mut expected = 0usize;
    let mut data = Vec::new();
    for (_, h) in &handles {
        assert_eq!(h.start(), expected, "data blocks tile the file");
        expected = h.end();
        data.push((*h, stored_block(file, *h).1));
    }
    let after_data = f.filter.unwrap_or(f.properties);
    assert_eq!(after_data.start(), expected);
    if let Some(filter) = f.filter {
        assert_eq!(filter.end(), f.properties.start());
    }
    assert_eq!(f.properties.end(), f.index.start());
    assert_eq!(f.index.end(), file.len() - FOOTER_LEN);
    Layout {
        data,
        filter: f.filter.map(|h| stored_block(file, h).1),
        properties: stored_block(file, f.properties).1,
        index: stored_block(file, f.index).1,
        version: f.version,
    }
}

/// Every entry of the table, decoded here from the raw data blocks.
fn raw_entries(file: &[u8]) -> Vec<Entry> {
    data_handles(file)
        .into_iter()
        .flat_map(|(_, h)| block_entries(&block_contents(file, h)))
        .collect()
}

/// Rewrites the crc32 of the block at `h` so that it matches its (changed) bytes.
fn fix_crc(file: &mut [u8], h: Handle) {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&file[h.start()..h.end_of_contents()]);
    crc.update(&[file[h.end_of_contents()]]);
    let at = h.end_of_contents() + 1;
    file[at..at + 4].copy_from_slice(&crc.finalize().to_le_bytes());
}

// ---------------------------------------------------------------------------------------
// Helpers.

fn repeat_to(s: &str, n: usize) -> Vec<u8> {
    s.repeat(n / s.len() + 1).into_bytes()[..n].to_vec()
}

fn build(path: &Path, compression: Compression, entries: &[Entry]) {
    let options = TableOptions {
        compression,
        ..TableOptions::default()
    };
    build_table(path, options, entries);
}

/// Checks the table answers every entry: a full scan and a lookup of each key's newest entry.
fn assert_reads_back(path: &Path, entries: &[Entry]) {
    let table = open_table(path);
    let all: Vec<Entry> = table.iter().collect::<Result<_>>().unwrap();
    assert!(all == entries, "{}: scan differs", path.display());
    for (i, e) in entries.iter().enumerate() {
        if i > 0 && entries[i - 1].key == e.key {
            continue;
        }
        let got = table.get(&e.key, &KeyHash::of(&e.key)).unwrap();
        assert_eq!(got.as_ref(), Some(e), "{}", path.display());
    }
}

fn text_entries(n: u64) -> Vec<Entry> {
    (0..n)
        .map(|i| {
            let value = repeat_to(
                &format!("the quick brown fox {i} jumps over the lazy dog; "),
                200,
            );
            Entry::value(format!("key{i:06}"), 1_000_000 - i, value)
        })
        .collect()
}

const DATA_NONE: u8 = 0x01;
const DATA_LZ4: u8 = 0x11;

// ---------------------------------------------------------------------------------------

#[test]
fn lz4_tables_are_smaller_read_back_and_mark_their_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let entries = text_entries(3_000);
    let lz4 = dir.path().join("lz4.sst");
    let none = dir.path().join("none.sst");
    build(&lz4, Compression::Lz4, &entries);
    build(&none, Compression::None, &entries);

    let lz4_size = std::fs::metadata(&lz4).unwrap().len();
    let none_size = std::fs::metadata(&none).unwrap().len();
    println!("3,000 entries of repeated text: lz4 {lz4_size} bytes, none {none_size} bytes");
    assert!(
        lz4_size * 2 < none_size,
        "lz4 {lz4_size} bytes, none {none_size} bytes"
    );

    for path in [&lz4, &none] {
        assert_reads_back(path, &entries);
        let props = verify_table(os_fs(), path).unwrap();
        // An index of one block: version 3.
        assert_eq!(props.format_version, 3);
        assert_eq!(props.entries, entries.len() as u64);
        assert_eq!(open_table(path).properties().format_version, 3);
        // The raw bytes decode, with our own decoder, to exactly the entries written.
        let file = std::fs::read(path).unwrap();
        assert!(raw_entries(&file) == entries);
    }

    let file = std::fs::read(&lz4).unwrap();
    let l = layout(&file);
    assert_eq!(l.version, 3);
    assert!(l.data.len() > 20, "{} data blocks", l.data.len());
    assert_eq!(l.data[0].1, DATA_LZ4, "first data block: kind 1, LZ4");
    assert!(l.data.iter().all(|(_, t)| *t == DATA_LZ4));
    // The LZ4 data is prefixed with the uncompressed length.
    let (stored, _) = stored_block(&file, l.data[0].0);
    let first_block = block_contents(&file, l.data[0].0);
    assert_eq!(u32_at(stored, 0) as usize, first_block.len());
    assert!(stored.len() * 2 < first_block.len());
    // Filters and properties are never compressed; the index may be.
    assert_eq!(l.filter, Some(0x02));
    assert_eq!(l.properties, 0x03);
    assert!(l.index == 0x04 || l.index == 0x14, "index {:#04x}", l.index);

    let file = std::fs::read(&none).unwrap();
    let l = layout(&file);
    assert_eq!(l.version, 3);
    assert_eq!(l.data[0].1, DATA_NONE, "first data block: kind 1, none");
    assert!(l.data.iter().all(|(_, t)| *t == DATA_NONE));
    assert_eq!((l.filter, l.properties, l.index), (Some(0x02), 0x03, 0x04));
}

#[test]
fn blocks_lz4_cannot_shrink_are_stored_raw() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(0xc0ffee);
    // The first 1,500 values are random bytes, the rest repeated text.
    let entries: Vec<Entry> = (0..3_000u64)
        .map(|i| {
            let value: Vec<u8> = if i < 1_500 {
                (0..100).map(|_| rng.gen()).collect()
            } else {
                repeat_to(&format!("compressible {i} "), 100)
            };
            Entry::value(format!("key{i:06}"), 7, value)
        })
        .collect();
    let random_only = &entries[..1_500];

    // Random values only: with LZ4 asked for, every data block is stored as it is, byte for
    // byte the same as with no compression.
    let lz4 = dir.path().join("random-lz4.sst");
    let none = dir.path().join("random-none.sst");
    build(&lz4, Compression::Lz4, random_only);
    build(&none, Compression::None, random_only);
    let (lz4_file, none_file) = (std::fs::read(&lz4).unwrap(), std::fs::read(&none).unwrap());
    let (l, n) = (layout(&lz4_file), layout(&none_file));
    assert!(l.data.len() > 10);
    assert!(l.data.iter().all(|(_, t)| *t == DATA_NONE));
    let data_end = l.data.last().unwrap().0.end();
    assert_eq!(data_end, n.data.last().unwrap().0.end());
    assert!(lz4_file[..data_end] == none_file[..data_end]);
    assert_reads_back(&lz4, random_only);

    // Mixed: random blocks are stored raw. After a run of blocks that did not compress the
    // builder tries only one block in eight, so the first few text blocks may be stored raw
    // too; from the first one tried on, every text block is compressed.
    let mixed = dir.path().join("mixed.sst");
    build(&mixed, Compression::Lz4, &entries);
    let file = std::fs::read(&mixed).unwrap();
    let (mut raw_blocks, mut text_kinds) = (0, Vec::new());
    for (h, type_byte) in layout(&file).data {
        let keys: Vec<u64> = block_entries(&block_contents(&file, h))
            .iter()
            .map(|e| std::str::from_utf8(&e.key[3..]).unwrap().parse().unwrap())
            .collect();
        if keys.iter().all(|&k| k < 1_500) {
            assert_eq!(type_byte, DATA_NONE, "random block at {}", h.offset);
            raw_blocks += 1;
        } else if keys.iter().all(|&k| k >= 1_500) {
            text_kinds.push(type_byte);
        }
    }
    let text_raw = text_kinds.iter().take_while(|&&t| t == DATA_NONE).count();
    assert!(
        text_raw < 8,
        "{text_raw} text blocks stored raw before one was tried"
    );
    assert!(text_kinds[text_raw..].iter().all(|&t| t == DATA_LZ4));
    assert!(
        raw_blocks > 10 && text_kinds.len() - text_raw > 3,
        "{raw_blocks} raw, {text_kinds:?}"
    );
    assert_reads_back(&mixed, &entries);
    verify_table(os_fs(), &mixed).unwrap();
}

/// Damages data block `target` of an LZ4 table with `damage` (given the file and the block),
/// recomputes the block's crc32 so that the checksum passes, and checks that lookups of keys
/// in that block fail with a corruption error naming the file and the block's offset, while
/// keys of other blocks still read. Returns the error's reason.
fn check_damaged_block(name: &str, target: usize, damage: impl Fn(&mut [u8], Handle)) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.sst"));
    let entries = text_entries(600);
    build(&path, Compression::Lz4, &entries);
    let mut file = std::fs::read(&path).unwrap();
    let blocks = data_handles(&file);
    assert!(blocks.len() >= 3);
    let index = target;
    let target = blocks[index].1;
    assert_eq!(stored_block(&file, target).1, DATA_LZ4);
    let in_target: Vec<Entry> = block_entries(&block_contents(&file, target));
    let elsewhere: Vec<Entry> = (0..3)
        .filter(|&i| i != index)
        .flat_map(|i| block_entries(&block_contents(&file, blocks[i].1)))
        .collect();
    let before_target: usize = blocks[..index]
        .iter()
        .map(|(_, h)| block_entries(&block_contents(&file, *h)).len())
        .sum();

    damage(&mut file, target);
    fix_crc(&mut file, target);
    std::fs::write(&path, &file).unwrap();

    // The index, filter and properties are intact: the table opens.
    let table = open_table(&path);
    let mut reason = String::new();
    for e in &in_target {
        match table.get(&e.key, &KeyHash::of(&e.key)) {
            Err(Error::Corruption {
                file,
                offset,
                reason: r,
            }) => {
                assert_eq!(file, path, "{name}");
                assert_eq!(offset, Some(target.offset), "{name}: {r}");
                reason = r;
            }
            other => panic!("{name}: get {:?} gave {other:?}", e.key),
        }
    }
    for e in &elsewhere {
        let got = table.get(&e.key, &KeyHash::of(&e.key)).unwrap();
        assert_eq!(got.as_ref(), Some(e), "{name}");
    }
    // A scan yields the blocks before the damaged one, then the error.
    let scanned: Vec<Result<Entry>> = table.iter().collect();
    assert_eq!(scanned.len(), before_target + 1, "{name}");
    assert!(matches!(scanned.last(), Some(Err(e)) if e.is_corruption()));
    match verify_table(os_fs(), &path) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, path);
            assert_eq!(offset, Some(target.offset), "{name}");
        }
        other => panic!("{name}: verify gave {other:?}"),
    }
    println!("{name}: {reason}");
    reason
}

#[test]
fn damaged_lz4_data_under_a_valid_checksum_is_corruption() {
    for block in [0, 1] {
        // The length prefix says one byte more than the data decompresses to.
        let reason = check_damaged_block("prefix-plus-one", block, |file, h| {
            let len = u32_at(file, h.start()) + 1;
            file[h.start()..h.start() + 4].copy_from_slice(&len.to_le_bytes());
        });
        assert!(reason.contains("lz4 block does not decompress"), "{reason}");
        // The length prefix claims more than LZ4 could expand the stored bytes to.
        let reason = check_damaged_block("prefix-huge", block, |file, h| {
            file[h.start()..h.start() + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        });
        assert!(reason.contains("lz4 block does not decompress"), "{reason}");
        // The first LZ4 token (literal and match lengths) flipped: the sequences no longer
        // parse into the stated length.
        let reason = check_damaged_block("first-token-flipped", block, |file, h| {
            file[h.start() + 4] ^= 0xff;
        });
        assert!(reason.contains("lz4 block does not decompress"), "{reason}");
    }
    // LZ4 data presented as uncompressed: the block parser rejects it.
    check_damaged_block("lz4-marked-raw", 1, |file, h| {
        file[h.end_of_contents()] = DATA_NONE;
    });
}

#[test]
fn unknown_compression_codes_are_corruption() {
    for type_byte in [0x31u8, 0x41, 0xf1] {
        let reason = check_damaged_block(&format!("code-{type_byte:#04x}"), 1, |file, h| {
            file[h.end_of_contents()] = type_byte;
        });
        let code = type_byte >> 4;
        assert!(
            reason.contains(&format!("unknown compression {code}")),
            "{reason}"
        );
    }
    // An LZ4 block whose trailer says zstd (code 2): its bytes are no zstd frame.
    let reason = check_damaged_block("lz4-marked-zstd", 1, |file, h| {
        file[h.end_of_contents()] = 0x21;
    });
    assert!(
        reason.contains("zstd block does not decompress"),
        "{reason}"
    );
}

// ---------------------------------------------------------------------------------------
// Version 1 files, written by the code of commit a1ab4b1 (see tests/data/format-v1/README.md).

fn v1_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format-v1")
}

/// The entries of tests/data/format-v1/table.sst, as the generator wrote them.
fn v1_table_entries() -> Vec<Entry> {
    let mut out = Vec::new();
    for i in 0..1500u64 {
        let key = format!("t{i:05}").into_bytes();
        let seq = 10_000 + 3 * i;
        if i % 11 == 0 {
            out.push(Entry::tombstone(key.clone(), seq + 2));
        }
        out.push(Entry::value(
            key.clone(),
            seq + 1,
            repeat_to(&format!("table-{i}-"), 60),
        ));
        if i % 7 == 0 {
            out.push(Entry::value(key, seq, repeat_to(&format!("old-{i}-"), 30)));
        }
    }
    out
}

fn v1_value(i: u64) -> Vec<u8> {
    repeat_to(&format!("value-{i}-"), 100)
}

fn sst_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    out.sort();
    out
}

#[test]
fn version_1_table_reads_every_entry() {
    let path = v1_dir().join("table.sst");
    let file = std::fs::read(&path).unwrap();
    let l = layout(&file);
    assert_eq!(l.version, 1, "the fixture is a version 1 table");
    assert!(l.data.len() > 50);
    assert!(l.data.iter().all(|(_, t)| *t == DATA_NONE));
    assert_eq!(l.index, 0x04);

    let entries = v1_table_entries();
    assert!(
        raw_entries(&file) == entries,
        "fixture differs from its generator"
    );
    assert_reads_back(&path, &entries);
    let table = open_table(&path);
    assert_eq!(table.properties().format_version, 1);
    assert_eq!(table.properties().entries, 1_852);
    // Older versions through a snapshot.
    for i in (0..1500u64).step_by(7) {
        let key = format!("t{i:05}").into_bytes();
        let seq = 10_000 + 3 * i;
        let old = table
            .get_at(&key, seq, &KeyHash::of(&key))
            .unwrap()
            .unwrap();
        assert_eq!(old.value, repeat_to(&format!("old-{i}-"), 30));
        assert_eq!(old.kind, ValueKind::Value);
    }
    let absent = b"t99999";
    assert_eq!(table.get(absent, &KeyHash::of(absent)).unwrap(), None);
    assert_eq!(verify_table(os_fs(), &path).unwrap().format_version, 1);
}

type Model = std::collections::BTreeMap<Vec<u8>, Vec<u8>>;

/// Every key of `0..probes` (`key{i:05}`) reads as the model says, and a scan yields the
/// model.
fn assert_store_matches(db: &Db, model: &Model, probes: u64) {
    for i in 0..probes {
        let key = format!("key{i:05}").into_bytes();
        assert_eq!(db.get(&key).unwrap(), model.get(&key).cloned(), "key{i:05}");
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = db.iter().collect::<Result<_>>().unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(all == want, "scan differs from the model");
}

/// Copies the store fixture at `fixture` to `dir/store`, opens it (its `tables` tables all of
/// format `version`), checks it against `model`, writes on top, compacts, and checks that
/// every table is then of the current version and every read still agrees, then and after a
/// reopen.
fn old_store_reads_writes_and_compacts(
    fixture: &Path,
    version: u32,
    tables: usize,
    mut model: Model,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    for entry in std::fs::read_dir(fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), store.join(entry.file_name())).unwrap();
    }
    let old_tables = sst_files(&store);
    assert_eq!(old_tables.len(), tables);
    for path in &old_tables {
        let file = std::fs::read(path).unwrap();
        assert_eq!(footer(&file).version, version, "{}", path.display());
        assert_eq!(verify_table(os_fs(), path).unwrap().format_version, version);
    }

    let db = Db::open(&store, Options::default()).unwrap();
    assert_eq!(db.stats().tables.len(), tables);
    assert_store_matches(&db, &model, 2100);

    // New writes on top of the old tables.
    let value = |i: u64| repeat_to(&format!("value-{i}-"), 100);
    for i in 2000..2050u64 {
        db.put(format!("key{i:05}"), value(i)).unwrap();
        model.insert(format!("key{i:05}").into_bytes(), value(i));
    }
    db.put("key00001", "overwritten").unwrap();
    model.insert(b"key00001".to_vec(), b"overwritten".to_vec());
    db.delete("key00003").unwrap();
    model.remove(&b"key00003"[..]);
    db.put("key00010", "back from the dead").unwrap();
    model.insert(b"key00010".to_vec(), b"back from the dead".to_vec());
    assert_store_matches(&db, &model, 2100);

    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    assert_store_matches(&db, &model, 2100);
    let new_tables = sst_files(&store);
    assert!(!new_tables.is_empty());
    for path in &new_tables {
        assert!(
            !old_tables.contains(path),
            "{} survived compaction",
            path.display()
        );
        let file = std::fs::read(path).unwrap();
        let l = layout(&file);
        // Small tables, whose index is one block, are written as version 3.
        assert_eq!(l.version, 3, "{}", path.display());
        assert_eq!(
            FORMAT_VERSION, 5,
            "the newest, for tables with a prefix filter"
        );
        // The values repeat themselves: compaction wrote LZ4 blocks.
        assert!(
            l.data.iter().all(|(_, t)| *t == DATA_LZ4),
            "{}",
            path.display()
        );
        assert_eq!(verify_table(os_fs(), path).unwrap().format_version, 3);
    }
    db.close().unwrap();

    let db = Db::open(&store, Options::default()).unwrap();
    assert_store_matches(&db, &model, 2100);
    db.close().unwrap();
}

#[test]
fn version_1_store_opens_reads_writes_and_compacts_to_version_3() {
    let model = (0..2000u64)
        .filter(|i| !i.is_multiple_of(10))
        .map(|i| (format!("key{i:05}").into_bytes(), v1_value(i)))
        .collect();
    old_store_reads_writes_and_compacts(&v1_dir().join("store"), 1, 4, model);
}

// ---------------------------------------------------------------------------------------
// Version 2 files, written by the code of commit dd04d87 (see tests/data/format-v2/README.md),
// the last whose index holds each data block's last entry whole.

fn v2_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format-v2")
}

/// The distinct keys of tests/data/format-v2/table.sst, ascending, with their numbers of
/// versions, as the generator wrote them: the empty key, keys that are prefixes of one
/// another, keys of 0xff bytes, and two keys whose versions run across blocks.
fn v2_table_keys() -> Vec<(Vec<u8>, u64)> {
    let mut keys = vec![(Vec::new(), 3)];
    for i in 0..300u64 {
        let base = format!("t{i:04}").into_bytes();
        let versions = match i {
            150 => 70,
            _ if i % 7 == 0 => 3,
            _ => 1,
        };
        keys.push((base.clone(), versions));
        if i % 5 == 0 {
            keys.push(([base.as_slice(), b"\xff"].concat(), 2));
            keys.push(([base.as_slice(), b"\xff\xff"].concat(), 1));
        }
    }
    keys.push((vec![0xff], 2));
    keys.push((vec![0xff, 0xff], 40));
    keys.push((vec![0xff, 0xff, 0xff], 1));
    keys
}

/// The entries of tests/data/format-v2/table.sst: key `k` has versions
/// `1_000_000 - 100 k - j`; version `j` is a tombstone when `k + j` is 3 mod 4.
fn v2_table_entries() -> Vec<Entry> {
    let mut out = Vec::new();
    for (k, (key, versions)) in v2_table_keys().into_iter().enumerate() {
        let newest = 1_000_000 - 100 * k as u64;
        for j in 0..versions {
            let seq = newest - j;
            if (k as u64 + j) % 4 == 3 {
                out.push(Entry::tombstone(key.clone(), seq));
            } else {
                let value = repeat_to(&format!("value-{seq}-"), 40);
                out.push(Entry::value(key.clone(), seq, value));
            }
        }
    }
    out
}

/// Keys the v2 table does not hold, around the edges of those it does.
fn v2_absent_keys() -> Vec<Vec<u8>> {
    [
        &b"\x00"[..],
        b"s",
        b"t",
        b"t0000\x00",
        b"t0000\xfe",
        b"t0000\xff\x00",
        b"t0000\xff\xff\xff",
        b"t0150\x00",
        b"t02999",
        b"u",
        b"\xfe\xff",
        b"\xff\x00",
        b"\xff\xff\x00",
        b"\xff\xff\xff\xff",
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect()
}

/// Data blocks whose first user key is the last user key of the block before (a key's
/// versions split between them), from the raw bytes.
fn split_boundaries(file: &[u8]) -> Vec<usize> {
    let blocks: Vec<Vec<Entry>> = data_handles(file)
        .into_iter()
        .map(|(_, h)| block_entries(&block_contents(file, h)))
        .collect();
    (1..blocks.len())
        .filter(|&i| blocks[i - 1].last().unwrap().key == blocks[i][0].key)
        .collect()
}

/// Every entry through a snapshot at its own sequence number, and one below it (the next
/// older version, or none).
fn assert_every_version_reads(table: &Table, entries: &[Entry]) {
    for (i, e) in entries.iter().enumerate() {
        let hash = KeyHash::of(&e.key);
        assert_eq!(
            table.get_at(&e.key, e.seq, &hash).unwrap().as_ref(),
            Some(e)
        );
        let older = entries.get(i + 1).filter(|o| o.key == e.key);
        assert_eq!(
            table.get_at(&e.key, e.seq - 1, &hash).unwrap().as_ref(),
            older,
            "{:?} below {}",
            e.key,
            e.seq
        );
    }
}

#[test]
fn version_2_table_reads_every_entry() {
    let path = v2_dir().join("table.sst");
    let file = std::fs::read(&path).unwrap();
    let l = layout(&file);
    assert_eq!(l.version, 2, "the fixture is a version 2 table");
    assert_eq!(l.data.len(), 50);
    let entries = v2_table_entries();
    assert!(
        raw_entries(&file) == entries,
        "fixture differs from its generator"
    );
    // Its index holds each block's last entry whole; some keys' versions span blocks.
    for (i, s) in index(&file).iter().enumerate() {
        let last = block_entries(&block_contents(&file, s.handle))
            .pop()
            .unwrap();
        assert_eq!((&s.key, s.seq), (&last.key, last.seq), "block {i}");
    }
    assert!(
        split_boundaries(&file).len() >= 4,
        "{:?}",
        split_boundaries(&file)
    );

    assert_reads_back(&path, &entries);
    let table = open_table(&path);
    assert_eq!(table.properties().format_version, 2);
    assert_eq!(table.properties().entries, 681);
    assert_eq!(table.data_blocks(), 50);
    assert_every_version_reads(&table, &entries);
    for key in v2_absent_keys() {
        assert_eq!(
            table.get(&key, &KeyHash::of(&key)).unwrap(),
            None,
            "{key:?}"
        );
    }
    assert_eq!(verify_table(os_fs(), &path).unwrap().format_version, 2);
}

/// A table rewritten from an older one's entries, as compaction does, is of version 3 and
/// answers every lookup, seek and scan as the older one does.
#[test]
fn version_1_and_2_tables_rewritten_as_version_3_answer_alike() {
    let dir = tempfile::tempdir().unwrap();
    for (old_path, old_version) in [
        (v1_dir().join("table.sst"), 1),
        (v2_dir().join("table.sst"), 2),
    ] {
        let old = open_table(&old_path);
        assert_eq!(old.properties().format_version, old_version);
        let entries: Vec<Entry> = old.iter().collect::<Result<_>>().unwrap();
        let new_path = dir.path().join(format!("from-v{old_version}.sst"));
        let options = TableOptions {
            block_size: 512,
            ..TableOptions::default()
        };
        build_table(&new_path, options, &entries);
        let new = open_table(&new_path);
        assert_eq!(new.properties().format_version, 3);
        assert_eq!(footer(&std::fs::read(&new_path).unwrap()).version, 3);
        assert_reads_back(&new_path, &entries);
        assert_every_version_reads(&new, &entries);

        let mut probes: Vec<Vec<u8>> = entries.iter().map(|e| e.key.clone()).collect();
        probes.extend(v2_absent_keys());
        probes.extend(entries.iter().map(|e| [e.key.as_slice(), b"\x00"].concat()));
        for key in &probes {
            let hash = KeyHash::of(key);
            for snapshot in [u64::MAX, 1_000_000, 999_950, 970_000, 20_000, 10_000, 0] {
                assert_eq!(
                    new.get_at(key, snapshot, &hash).unwrap(),
                    old.get_at(key, snapshot, &hash).unwrap(),
                    "{key:?} at {snapshot}"
                );
            }
            let from_new: Vec<Entry> = new.iter_from(key).take(3).collect::<Result<_>>().unwrap();
            let from_old: Vec<Entry> = old.iter_from(key).take(3).collect::<Result<_>>().unwrap();
            assert_eq!(from_new, from_old, "seek to {key:?}");
        }
        verify_table(os_fs(), &new_path).unwrap();
    }
}

#[test]
fn version_2_store_opens_reads_writes_and_compacts_to_version_3() {
    let model = (0..2000u64)
        .filter(|i| !i.is_multiple_of(10))
        .map(|i| {
            let newer = i >= 1200 && (i - 1200).is_multiple_of(3);
            let prefix = if newer { "newer" } else { "value" };
            let value = repeat_to(&format!("{prefix}-{i}-"), 100);
            (format!("key{i:05}").into_bytes(), value)
        })
        .collect();
    old_store_reads_writes_and_compacts(&v2_dir().join("store"), 2, 6, model);
}

// ---------------------------------------------------------------------------------------
// Version 3 index blocks.

#[test]
fn version_3_index_holds_short_separators_and_sequence_numbers_only_for_split_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let entries = v2_table_entries();
    let options = TableOptions {
        block_size: 512,
        compression: Compression::None,
        ..TableOptions::default()
    };
    build_table(&path, options, &entries);
    let file = std::fs::read(&path).unwrap();
    let l = layout(&file);
    assert_eq!((l.version, l.index), (3, 0x04));
    assert!(raw_entries(&file) == entries);

    let index = index(&file);
    let blocks: Vec<Vec<Entry>> = index
        .iter()
        .map(|s| block_entries(&block_contents(&file, s.handle)))
        .collect();
    assert_eq!(index.len(), 50);
    let (mut split, mut shortened) = (0, 0);
    for (i, s) in index.iter().enumerate() {
        let last = blocks[i].last().unwrap();
        let after_last = (s.key.as_slice(), std::cmp::Reverse(s.seq))
            >= (last.key.as_slice(), std::cmp::Reverse(last.seq));
        assert!(
            after_last,
            "block {i}: separator {s:?} before its last entry"
        );
        match blocks.get(i + 1).map(|b| &b[0]) {
            Some(next) if next.key == last.key => {
                // A key's versions run on into the next block: the exact last entry.
                assert_eq!((&s.key, s.seq), (&last.key, last.seq), "block {i}");
                assert_ne!(s.seq, 0);
                split += 1;
            }
            Some(next) => {
                assert_eq!(s.seq, 0, "block {i}");
                assert!(s.key < next.key, "block {i}: {s:?} not before {next:?}");
                assert!(s.key.len() <= last.key.len());
                shortened += usize::from(s.key.len() < last.key.len());
            }
            None => {
                assert_eq!(s.seq, 0);
                assert!(s.key >= last.key);
            }
        }
    }
    assert_eq!(split, split_boundaries(&file).len());
    assert!(split >= 4, "{split} split boundaries");
    // Keys here mostly differ in their last byte, which leaves nothing to cut, but not all.
    assert!(
        shortened >= 5,
        "{shortened} separators shorter than the last key"
    );
    let at = |i: usize| (index[i].key.as_slice(), index[i].seq);
    // Block 2 ends at `t0019` before `t0020`; block 1 at `t0010\xff\xff` before `t0011`.
    assert_eq!(at(2), (&b"t002"[..], 0));
    assert_eq!(at(1), (&b"t0010\xff\xff"[..], 0));
    // `t0150`'s 70 versions fill four blocks and end in a fifth.
    assert_eq!(at(21), (&b"t0150"[..], 978_889));
    assert_eq!(at(24), (&b"t0150"[..], 978_845));
    assert_eq!(at(46), (&b"\xff"[..], 0));
    assert_eq!(at(47), (&b"\xff\xff"[..], 957_786));
    // The last key is all 0xff: nothing shorter is at or after it.
    assert_eq!(index.last().unwrap().key, b"\xff\xff\xff");

    assert_reads_back(&path, &entries);
    let table = open_table(&path);
    assert_every_version_reads(&table, &entries);
    for key in v2_absent_keys() {
        assert_eq!(
            table.get(&key, &KeyHash::of(&key)).unwrap(),
            None,
            "{key:?}"
        );
    }
    assert_eq!(table.properties().largest_key, b"\xff\xff\xff");
    verify_table(os_fs(), &path).unwrap();
}

#[test]
fn version_3_index_keeps_the_real_largest_key_in_the_properties() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let entries = text_entries(300);
    build(&path, Compression::None, &entries);
    let file = std::fs::read(&path).unwrap();
    let last = index(&file).pop().unwrap();
    // `key000299`'s shortest successor is `l`.
    assert_eq!((last.key.as_slice(), last.seq), (&b"l"[..], 0));
    let table = open_table(&path);
    assert_eq!(table.properties().largest_key, b"key000299");
    // Keys after the largest and up to the last separator map to the last block, and are
    // not found there; keys past it map to no block.
    assert_eq!(
        table.block_for(b"key000299", u64::MAX).unwrap(),
        Some(table.data_blocks() - 1)
    );
    assert_eq!(
        table.block_for(b"key1", u64::MAX).unwrap(),
        Some(table.data_blocks() - 1)
    );
    assert_eq!(
        table.block_for(b"l", 0).unwrap(),
        Some(table.data_blocks() - 1)
    );
    assert_eq!(
        table.block_for(b"l", u64::MAX).unwrap(),
        Some(table.data_blocks() - 1)
    );
    assert_eq!(table.block_for(b"l\x00", u64::MAX).unwrap(), None);
    assert_eq!(table.get(b"key1", &KeyHash::of(b"key1")).unwrap(), None);
}

/// The position of an index entry's parts: where its key bytes start and where the next
/// entry starts, and where its offset varint lies (restart points only).
struct EntryLayout {
    offset_at: Option<usize>,
    key_at: usize,
    next: usize,
}

fn v3_entry_layout(contents: &[u8], mut pos: usize, at_restart: bool) -> EntryLayout {
    varint(contents, &mut pos);
    let flagged = varint(contents, &mut pos);
    if flagged & 1 == 1 {
        varint(contents, &mut pos);
    }
    let offset_at = at_restart.then_some(pos);
    if at_restart {
        varint(contents, &mut pos);
    }
    varint(contents, &mut pos);
    EntryLayout {
        offset_at,
        key_at: pos,
        next: pos + (flagged >> 1) as usize,
    }
}

/// Damages the (uncompressed) index block of a version 3 table with `damage` (given its
/// contents, changed in place, and where the restart array starts), recomputes its crc32,
/// and checks that opening and verifying the table fail with a corruption error naming the
/// file and the index block, whose reason contains `expected`.
fn check_damaged_index(name: &str, expected: &str, damage: impl Fn(&mut Vec<u8>, usize)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.sst"));
    let options = TableOptions {
        block_size: 1024,
        compression: Compression::None,
        ..TableOptions::default()
    };
    build_table(&path, options, &text_entries(200));
    let mut file = std::fs::read(&path).unwrap();
    let f = footer(&file);
    assert_eq!(f.version, 3);
    assert!(
        index(&file).len() > 33,
        "{name}: three restart points at least"
    );
    let contents = &mut file[f.index.start()..f.index.end_of_contents()];
    let mut changed = contents.to_vec();
    let restarts = u32_at(contents, contents.len() - 4) as usize;
    damage(&mut changed, contents.len() - 4 - 4 * restarts);
    assert_eq!(changed.len(), contents.len(), "{name}: same length");
    contents.copy_from_slice(&changed);
    fix_crc(&mut file, f.index);
    std::fs::write(&path, &file).unwrap();

    let check = |result: Result<()>, what: &str| match result {
        Err(Error::Corruption {
            file,
            offset,
            reason,
        }) => {
            assert_eq!(file, path, "{name}");
            assert_eq!(offset, Some(f.index.offset), "{name} {what}: {reason}");
            assert!(reason.contains("index block at offset"), "{name}: {reason}");
            assert!(reason.contains(expected), "{name} {what}: {reason}");
            println!("{name}: {reason}");
        }
        other => panic!("{name} {what}: {other:?}"),
    };
    let opened = Table::open(os_fs(), &path, Arc::new(ReadCounters::new())).map(|_| ());
    check(opened, "open");
    check(verify_table(os_fs(), &path).map(|_| ()), "verify");
}

#[test]
fn damaged_version_3_index_is_corruption_never_a_panic() {
    // The restart array: entry 16 starts at restart offset 1.
    let restart = |c: &[u8], start: usize, r: usize| u32_at(c, start + 4 * r) as usize;
    check_damaged_index("varint-runs-on", "shared key length", |c, start| {
        let at = restart(c, start, 1);
        c[at..start].fill(0xff);
    });
    check_damaged_index(
        "restart-shares",
        "restart point shares key bytes",
        |c, start| {
            let at = restart(c, start, 1);
            c[at] = 0x01;
        },
    );
    check_damaged_index("shared-past-key", "entry 1 shares 127 key bytes", |c, _| {
        let first = v3_entry_layout(c, 0, true);
        c[first.next] = 0x7f;
    });
    check_damaged_index(
        "keys-not-rising",
        "separator 16 does not sort after",
        |c, start| {
            let at = v3_entry_layout(c, restart(c, start, 1), true).key_at;
            c[at] = b'a'; // "key..." becomes "aey...", before entry 15
        },
    );
    check_damaged_index("block-offset", "data block 16 starts at", |c, start| {
        let e16 = v3_entry_layout(c, restart(c, start, 1), true);
        c[e16.offset_at.unwrap()] ^= 0x01;
    });
    check_damaged_index(
        "restart-moved",
        "not where restart point 1 says",
        |c, start| {
            let at = start + 4;
            let moved = (u32_at(c, at) - 1).to_le_bytes();
            c[at..at + 4].copy_from_slice(&moved);
        },
    );
    check_damaged_index("restart-count", "does not fit", |c, _| {
        let n = c.len();
        c[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
    });
    check_damaged_index(
        "restart-out-of-order",
        "out of order or out of range",
        |c, start| {
            c[start + 4..start + 8].copy_from_slice(&0u32.to_le_bytes());
        },
    );
    check_damaged_index("sequence-zero", "sequence number 0", |c, _| {
        // Entry 1 says a sequence number follows, and the byte after (its size's first)
        // reads as one: make it 0.
        let e0 = v3_entry_layout(c, 0, true);
        c[e0.next + 1] |= 0x01;
        c[e0.next + 2] = 0x00;
    });
}
