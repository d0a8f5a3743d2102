//! Per-block compression. The compression of each block is recorded in its trailer (and so
//! covered by its checksum); `docs/format.md`, "Block trailer", gives the encoding.

use super::format::Malformed;

/// How table blocks are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Blocks are stored as they are.
    None,
    /// LZ4 (block format), the default: fast enough that a lookup's one block read costs
    /// about as much decompressed as raw, and data that repeats itself takes far less disk and
    /// page cache.
    #[default]
    Lz4,
    /// zstd at level 3: slower to write than LZ4 and about half as fast to read a block, but
    /// it takes repetitive data to noticeably fewer bytes. Meant for cold data, the bottom of
    /// the tree above all (`Options::bottom_compression`), where most bytes live and fewest
    /// reads go. Needs the `zstd` feature (on by default).
    Zstd,
}

/// The zstd level blocks are written at: zstd's own default, the balance its authors chose
/// between the speed of writing and the size written (reading speed barely depends on it).
#[cfg(feature = "zstd")]
const ZSTD_LEVEL: i32 = 3;

/// A compressed block must save at least 1/8 of its size, or it is stored uncompressed:
/// decompressing costs time on every read, worth it only for a real saving.
const MIN_SAVING_DIVISOR: usize = 8;

/// Bytes before the compressed data: the uncompressed length, u32 little-endian.
const LEN_PREFIX: usize = 4;

impl Compression {
    /// The code stored in a block trailer: 0 none, 1 LZ4, 2 zstd.
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
        }
    }

    pub fn from_code(code: u8) -> Option<Compression> {
        match code {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// Whether this build can write and read blocks so compressed.
    pub fn is_available(self) -> bool {
        self != Compression::Zstd || cfg!(feature = "zstd")
    }

    /// The most bytes a block stored in `stored_len` bytes can decompress to: a larger claim
    /// is damage, and must not get to ask for a huge allocation. LZ4 expands by at most
    /// 255x; zstd can describe a run of 128 KiB in a few bytes.
    fn max_expansion(self, stored_len: usize) -> usize {
        let ratio = match self {
            Compression::None => 1,
            Compression::Lz4 => 255,
            Compression::Zstd => 1 << 15,
        };
        stored_len.saturating_mul(ratio).saturating_add(16)
    }
}

/// `contents` compressed with `compression` when that saves at least 1/8, with the
/// compression actually used; otherwise `None` (store `contents` as they are).
/// A compression that does not pay, or that this build lacks, gives `None` too.
pub fn compress(contents: &[u8], compression: Compression) -> Option<(Vec<u8>, Compression)> {
    let len = u32::try_from(contents.len()).ok()?;
    let mut out = Vec::with_capacity(LEN_PREFIX + contents.len() / 2);
    out.extend_from_slice(&len.to_le_bytes());
    match compression {
        Compression::None => return None,
        Compression::Lz4 => out.extend_from_slice(&lz4_flex::block::compress(contents)),
        Compression::Zstd => zstd_compress(contents, &mut out)?,
    }
    let worth_it = out.len() <= contents.len() - contents.len() / MIN_SAVING_DIVISOR;
    worth_it.then_some((out, compression))
}

/// Appends `contents` as one zstd frame to `out`. The context (some hundreds of KiB) is
/// made once a thread: a table's blocks are compressed one after another on one thread.
#[cfg(feature = "zstd")]
fn zstd_compress(contents: &[u8], out: &mut Vec<u8>) -> Option<()> {
    thread_local! {
        static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    COMPRESSOR.with_borrow_mut(|slot| {
        let compressor = match slot {
            Some(c) => c,
            None => slot.insert(zstd::bulk::Compressor::new(ZSTD_LEVEL).ok()?),
        };
        let frame = compressor.compress(contents).ok()?;
        out.extend_from_slice(&frame);
        Some(())
    })
}

#[cfg(not(feature = "zstd"))]
fn zstd_compress(_contents: &[u8], _out: &mut Vec<u8>) -> Option<()> {
    None
}

/// Decompresses one zstd frame into `out`, which is as long as the block says it is;
/// returns the bytes written. The context is made once a thread, as for compression.
#[cfg(feature = "zstd")]
fn zstd_decompress(data: &[u8], out: &mut [u8]) -> Result<usize, String> {
    thread_local! {
        static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    DECOMPRESSOR.with_borrow_mut(|slot| {
        let decompressor = match slot {
            Some(d) => d,
            None => slot.insert(zstd::bulk::Decompressor::new().map_err(|e| e.to_string())?),
        };
        (decompressor.decompress_to_buffer(data, out)).map_err(|e| e.to_string())
    })
}

#[cfg(not(feature = "zstd"))]
fn zstd_decompress(_data: &[u8], _out: &mut [u8]) -> Result<usize, String> {
    Err("this build has no zstd (the `zstd` feature is off)".to_string())
}

/// Whether the next data block of a table is worth trying to compress. Data that does not
/// compress (random or already compressed values) made LZ4 a tenth of a compaction's time,
/// spent on blocks stored as they were. After [`GIVE_UP_AFTER`] blocks in a row that did not
/// pay, only every [`RETRY_EVERY`]th block is tried; one that pays brings back trying all.
#[derive(Debug, Default)]
pub struct CompressionProbe {
    failures_in_a_row: u32,
    skipped: u32,
}

/// Blocks in a row that did not compress before the probe starts skipping.
pub const GIVE_UP_AFTER: u32 = 4;
/// While skipping, one block in this many is tried.
pub const RETRY_EVERY: u32 = 8;

impl CompressionProbe {
    /// Whether to try compressing the next block.
    pub fn should_try(&mut self) -> bool {
        if self.failures_in_a_row < GIVE_UP_AFTER {
            return true;
        }
        self.skipped += 1;
        if self.skipped >= RETRY_EVERY {
            self.skipped = 0;
            return true;
        }
        false
    }

    /// Records whether a block that was tried compressed enough to be stored compressed.
    pub fn record(&mut self, paid: bool) {
        self.failures_in_a_row = if paid {
            0
        } else {
            self.failures_in_a_row.saturating_add(1)
        };
        self.skipped = 0;
    }
}

/// The uncompressed contents of a block stored with `compression`. `max_len` bounds the
/// length the block may claim, beside what the compression can expand to.
pub fn decompress(
    stored: Vec<u8>,
    compression: Compression,
    max_len: usize,
) -> Result<Vec<u8>, Malformed> {
    if compression == Compression::None {
        return Ok(stored);
    }
    let name = compression.name();
    let Some((prefix, data)) = stored.split_first_chunk::<LEN_PREFIX>() else {
        return Err(Malformed::new(
            0,
            format!("{name} block shorter than its length prefix"),
        ));
    };
    let len = u32::from_le_bytes(*prefix) as usize;
    let max_len = max_len.min(compression.max_expansion(data.len()));
    if len > max_len {
        return Err(Malformed::new(
            0,
            format!("{name} block claims {len} bytes uncompressed, more than {max_len}"),
        ));
    }
    let mut out = vec![0u8; len];
    let written = match compression {
        Compression::Zstd => zstd_decompress(data, &mut out),
        _ => lz4_flex::block::decompress_into(data, &mut out).map_err(|e| e.to_string()),
    };
    match written {
        Ok(n) if n == len => Ok(out),
        Ok(n) => Err(Malformed::new(
            LEN_PREFIX,
            format!("{name} block decompressed to {n} bytes, its prefix says {len}"),
        )),
        Err(e) => Err(Malformed::new(
            LEN_PREFIX,
            format!("{name} data does not decompress: {e}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which of `n` blocks the probe tries, when each tried block pays as `pays` says.
    fn tried(n: usize, pays: impl Fn(usize) -> bool) -> Vec<usize> {
        let mut probe = CompressionProbe::default();
        (0..n)
            .filter(|&i| {
                let tries = probe.should_try();
                if tries {
                    probe.record(pays(i));
                }
                tries
            })
            .collect()
    }

    #[test]
    fn blocks_that_compress_are_all_tried() {
        assert_eq!(tried(100, |_| true), (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn blocks_that_never_compress_are_tried_one_in_eight_after_four() {
        let tried = tried(4 + 8 * 10, |_| false);
        let expected: Vec<usize> = (0..4).chain((1..=10).map(|r| 3 + 8 * r)).collect();
        assert_eq!(tried, expected);
    }

    #[test]
    fn a_block_that_pays_again_brings_back_trying_every_block() {
        // Nothing compresses until block 40, everything from there on.
        let tried = tried(60, |i| i >= 40);
        let first_paying = *tried.iter().find(|&&i| i >= 40).unwrap();
        assert!(first_paying < 40 + RETRY_EVERY as usize);
        let after: Vec<usize> = tried.into_iter().filter(|&i| i >= first_paying).collect();
        assert_eq!(after, (first_paying..60).collect::<Vec<_>>());
    }

    /// The compressions this build writes.
    fn compressing() -> Vec<Compression> {
        [Compression::Lz4, Compression::Zstd]
            .into_iter()
            .filter(|c| c.is_available())
            .collect()
    }

    #[test]
    fn repetitive_blocks_compress_and_round_trip() {
        let contents: Vec<u8> = (0..4096u32).map(|i| (i % 7) as u8).collect();
        for compression in compressing() {
            let (stored, used) = compress(&contents, compression).expect("compresses");
            assert_eq!(used, compression);
            assert!(stored.len() < contents.len() / 4, "{compression:?}");
            assert_eq!(decompress(stored, used, 1 << 20).unwrap(), contents);
        }
    }

    /// Text-like data with repeats far apart (keys and values of one table): zstd's larger
    /// window and entropy coding take it well below LZ4.
    #[cfg(feature = "zstd")]
    #[test]
    fn zstd_takes_text_below_lz4() {
        let mut contents = Vec::new();
        for i in 0..400u32 {
            let line = format!(
                "user:{:08}|{{\"name\":\"n{}\",\"visits\":{}}}\n",
                i * 7,
                i % 13,
                i % 101
            );
            contents.extend_from_slice(line.as_bytes());
        }
        let (lz4, _) = compress(&contents, Compression::Lz4).unwrap();
        let (zstd, _) = compress(&contents, Compression::Zstd).unwrap();
        assert!(
            zstd.len() * 4 < lz4.len() * 3,
            "zstd {} lz4 {}",
            zstd.len(),
            lz4.len()
        );
        assert_eq!(
            decompress(zstd, Compression::Zstd, 1 << 20).unwrap(),
            contents
        );
    }

    #[test]
    fn blocks_that_barely_shrink_are_stored_raw() {
        // Pseudo-random bytes do not compress.
        let mut x = 0x1234_5678_9abc_def0u64;
        let contents: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for compression in compressing() {
            assert_eq!(compress(&contents, compression), None);
        }
        assert_eq!(compress(&contents, Compression::None), None);
    }

    #[test]
    fn damaged_blocks_are_errors() {
        let contents = vec![b'a'; 4096];
        for compression in compressing() {
            let (stored, _) = compress(&contents, compression).unwrap();
            let fails = |bytes: Vec<u8>, max_len| decompress(bytes, compression, max_len).is_err();
            assert!(fails(stored[..3].to_vec(), 1 << 20));
            assert!(fails(stored.clone(), 100));
            let mut truncated = stored.clone();
            truncated.truncate(stored.len() - 2);
            assert!(fails(truncated, 1 << 20), "{compression:?}");
            let mut wrong_len = stored.clone();
            wrong_len[0] = wrong_len[0].wrapping_add(1);
            assert!(fails(wrong_len, 1 << 20), "{compression:?}");
            // A claim past what the stored bytes can expand to is refused before allocating.
            let mut huge = stored;
            huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
            assert!(fails(huge, usize::MAX), "{compression:?}");
        }
    }
}
