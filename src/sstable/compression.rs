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
}

/// A compressed block must save at least 1/8 of its size, or it is stored uncompressed:
/// decompressing costs time on every read, worth it only for a real saving.
const MIN_SAVING_DIVISOR: usize = 8;

/// Bytes before the LZ4 data: the uncompressed length, u32 little-endian.
const LZ4_LEN_PREFIX: usize = 4;

impl Compression {
    /// The code stored in a block trailer: 0 none, 1 LZ4.
    pub fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
        }
    }

    pub fn from_code(code: u8) -> Option<Compression> {
        match code {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
        }
    }
}

/// `contents` compressed with `compression` when that saves at least 1/8, with the
/// compression actually used; otherwise `None` (store `contents` as they are).
pub fn compress(contents: &[u8], compression: Compression) -> Option<(Vec<u8>, Compression)> {
    match compression {
        Compression::None => None,
        Compression::Lz4 => {
            let len = u32::try_from(contents.len()).ok()?;
            let mut out = Vec::with_capacity(LZ4_LEN_PREFIX + contents.len() / 2);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&lz4_flex::block::compress(contents));
            let worth_it = out.len() <= contents.len() - contents.len() / MIN_SAVING_DIVISOR;
            worth_it.then_some((out, Compression::Lz4))
        }
    }
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

/// LZ4 expands by at most 255x: a block claiming more is damaged, and must not get to ask
/// for a huge allocation.
pub fn max_decompressed_len(stored_len: usize) -> usize {
    stored_len.saturating_mul(255).saturating_add(16)
}

/// The uncompressed contents of a block stored with `compression`. `max_len` bounds the
/// length the block may claim.
pub fn decompress(
    stored: Vec<u8>,
    compression: Compression,
    max_len: usize,
) -> Result<Vec<u8>, Malformed> {
    match compression {
        Compression::None => Ok(stored),
        Compression::Lz4 => {
            let Some((prefix, data)) = stored.split_first_chunk::<LZ4_LEN_PREFIX>() else {
                return Err(Malformed::new(
                    0,
                    "LZ4 block shorter than its length prefix",
                ));
            };
            let len = u32::from_le_bytes(*prefix) as usize;
            if len > max_len {
                return Err(Malformed::new(
                    0,
                    format!("LZ4 block claims {len} bytes uncompressed, more than {max_len}"),
                ));
            }
            let mut out = vec![0u8; len];
            match lz4_flex::block::decompress_into(data, &mut out) {
                Ok(n) if n == len => Ok(out),
                Ok(n) => Err(Malformed::new(
                    LZ4_LEN_PREFIX,
                    format!("LZ4 block decompressed to {n} bytes, its prefix says {len}"),
                )),
                Err(e) => Err(Malformed::new(
                    LZ4_LEN_PREFIX,
                    format!("LZ4 data does not decompress: {e}"),
                )),
            }
        }
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

    #[test]
    fn repetitive_blocks_compress_and_round_trip() {
        let contents: Vec<u8> = (0..4096u32).map(|i| (i % 7) as u8).collect();
        let (stored, used) = compress(&contents, Compression::Lz4).expect("compresses");
        assert_eq!(used, Compression::Lz4);
        assert!(stored.len() < contents.len() / 4);
        assert_eq!(decompress(stored, used, 1 << 20).unwrap(), contents);
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
        assert_eq!(compress(&contents, Compression::Lz4), None);
        assert_eq!(compress(&contents, Compression::None), None);
    }

    #[test]
    fn damaged_lz4_blocks_are_errors() {
        let contents = vec![b'a'; 4096];
        let (stored, _) = compress(&contents, Compression::Lz4).unwrap();
        assert!(decompress(stored[..3].to_vec(), Compression::Lz4, 1 << 20).is_err());
        assert!(decompress(stored.clone(), Compression::Lz4, 100).is_err());
        let mut truncated = stored.clone();
        truncated.truncate(stored.len() - 2);
        assert!(decompress(truncated, Compression::Lz4, 1 << 20).is_err());
        let mut wrong_len = stored;
        wrong_len[0] = wrong_len[0].wrapping_add(1);
        assert!(decompress(wrong_len, Compression::Lz4, 1 << 20).is_err());
    }
}
