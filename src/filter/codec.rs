//! The serialized form of a [`BloomFilter`] (also described in the repository's filter notes):
//!
//! ```text
//! offset  size  field
//!      0     4  magic "BKBF"
//!      4     2  format version (1), little-endian
//!      6     2  hash algorithm (2 = xxh3-64, quadratic probe walk, multiply-shift;
//!                 1 = the linear walk of older files: see `hash.rs`)
//!      8     4  hash count k
//!     12     4  bits per key
//!     16     8  bit count m (a multiple of 64, at least 64)
//!     24     8  key count
//!     32   m/8  the bit array, 64-bit little-endian words
//!  32+m/8     4  crc32 (crc32fast) of every byte before it
//! ```
//!
//! Hash algorithm 3 is the cache-local layout ([`BlockedBloomFilter`](super::BlockedBloomFilter)):
//! the same header, a bit count that is a multiple of 512, the blocks' words in order.

use byteorder::{ByteOrder, LittleEndian};

use super::bloom::BloomFilter;
use super::error::{FilterError, Result};
use super::hash::ProbeSequence;
use super::params::FilterParams;

const MAGIC: &[u8; 4] = b"BKBF";
const FORMAT_VERSION: u16 = 1;
const HEADER_LEN: usize = 32;
const CHECKSUM_LEN: usize = 4;

/// The hash algorithm number of the cache-local layout ([`BlockedBloomFilter`]): its
/// positions are not a probe walk over the whole array, so no `ProbeSequence` reads them.
///
/// [`BlockedBloomFilter`]: super::BlockedBloomFilter
pub(super) const BLOCKED_ALGORITHM: u16 = 3;

/// The fields of a serialized filter's header besides its magic, version and bit count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Header {
    pub algorithm: u16,
    pub hashes: u32,
    pub bits_per_key: u32,
    pub key_count: u64,
}

/// A filter's bytes: the header, `words` (the bit array) and the crc32 of both.
pub(super) fn encode(header: &Header, words: &[u64]) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN + words.len() * 8 + CHECKSUM_LEN];
    out[0..4].copy_from_slice(MAGIC);
    LittleEndian::write_u16(&mut out[4..6], FORMAT_VERSION);
    LittleEndian::write_u16(&mut out[6..8], header.algorithm);
    LittleEndian::write_u32(&mut out[8..12], header.hashes);
    LittleEndian::write_u32(&mut out[12..16], header.bits_per_key);
    LittleEndian::write_u64(&mut out[16..24], words.len() as u64 * 64);
    LittleEndian::write_u64(&mut out[24..32], header.key_count);
    let body_end = out.len() - CHECKSUM_LEN;
    LittleEndian::write_u64_into(words, &mut out[HEADER_LEN..body_end]);
    let crc = crc32fast::hash(&out[..body_end]);
    LittleEndian::write_u32(&mut out[body_end..], crc);
    out
}

/// The header and bit array of a filter's bytes, checked: magic, length, checksum, version,
/// and a bit count that is a positive multiple of 64. The algorithm and parameters are the
/// caller's to check.
pub(super) fn decode(bytes: &[u8]) -> Result<(Header, Vec<u64>)> {
    if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
        return Err(corrupt(format!(
            "{} bytes is shorter than the {}-byte header and checksum",
            bytes.len(),
            HEADER_LEN + CHECKSUM_LEN
        )));
    }
    if &bytes[0..4] != MAGIC {
        return Err(corrupt("bad magic".to_string()));
    }
    let bit_count = LittleEndian::read_u64(&bytes[16..24]);
    let expected_len = bit_count
        .checked_div(8)
        .and_then(|b| usize::try_from(b).ok())
        .and_then(|b| b.checked_add(HEADER_LEN + CHECKSUM_LEN));
    if expected_len != Some(bytes.len()) {
        return Err(corrupt(format!(
            "length {} does not match a bit count of {bit_count}",
            bytes.len()
        )));
    }
    let body_end = bytes.len() - CHECKSUM_LEN;
    let stored = LittleEndian::read_u32(&bytes[body_end..]);
    let actual = crc32fast::hash(&bytes[..body_end]);
    if stored != actual {
        return Err(corrupt(format!(
            "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    let version = LittleEndian::read_u16(&bytes[4..6]);
    if version != FORMAT_VERSION {
        return Err(corrupt(format!("unknown format version {version}")));
    }
    if bit_count == 0 || bit_count % 64 != 0 {
        return Err(corrupt(format!(
            "bit count {bit_count} is not a positive multiple of 64"
        )));
    }
    let header = Header {
        algorithm: LittleEndian::read_u16(&bytes[6..8]),
        hashes: LittleEndian::read_u32(&bytes[8..12]),
        bits_per_key: LittleEndian::read_u32(&bytes[12..16]),
        key_count: LittleEndian::read_u64(&bytes[24..32]),
    };
    let mut words = super::huge_pages::filled((bit_count / 64) as usize, 0u64);
    LittleEndian::read_u64_into(&bytes[HEADER_LEN..body_end], &mut words);
    Ok((header, words))
}

impl BloomFilter {
    /// Serializes the filter with its header and a trailing crc32.
    pub fn to_bytes(&self) -> Vec<u8> {
        let header = Header {
            algorithm: self.sequence.algorithm(),
            hashes: self.hashes,
            bits_per_key: self.bits_per_key,
            key_count: self.key_count,
        };
        encode(&header, &self.words)
    }

    /// Whether `head`, the first bytes (at least 8) of a serialized filter, names the
    /// cache-local layout ([`BlockedBloomFilter`](super::BlockedBloomFilter), hash algorithm
    /// 3): what a reader decodes it as, known before it reads the rest. `None` when `head` is
    /// too short or not a filter's.
    pub fn serialized_is_blocked(head: &[u8]) -> Option<bool> {
        let algorithm = head.get(6..8)?;
        (head.get(..4)? == MAGIC)
            .then(|| u16::from_le_bytes([algorithm[0], algorithm[1]]) == BLOCKED_ALGORITHM)
    }

    /// The number of 64-bit words of the filter whose serialized form is `len` bytes long
    /// (`None` for a length no serialized filter has): its memory, known without reading it.
    pub fn words_in_serialized(len: u64) -> Option<u64> {
        let body = len.checked_sub((HEADER_LEN + CHECKSUM_LEN) as u64)?;
        (body > 0 && body.is_multiple_of(8)).then_some(body / 8)
    }

    /// Decodes [`to_bytes`](Self::to_bytes) output. Any truncation, changed byte, unknown
    /// version or algorithm is an error, never a panic.
    pub fn from_bytes(bytes: &[u8]) -> Result<BloomFilter> {
        let (header, words) = decode(bytes)?;
        let Some(sequence) = ProbeSequence::of_algorithm(header.algorithm) else {
            return Err(corrupt(match header.algorithm {
                BLOCKED_ALGORITHM => format!(
                    "hash algorithm {BLOCKED_ALGORITHM} is the cache-local layout: a \
                     BlockedBloomFilter reads it"
                ),
                other => format!("unknown hash algorithm {other}"),
            }));
        };
        FilterParams::new(header.bits_per_key, header.hashes)
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(BloomFilter {
            words,
            bits_per_key: header.bits_per_key,
            hashes: header.hashes,
            key_count: header.key_count,
            sequence,
        })
    }
}

fn corrupt(msg: String) -> FilterError {
    FilterError::Corrupt(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(sequence: ProbeSequence) -> BloomFilter {
        let params = FilterParams::new(20, 14).unwrap();
        let mut filter = BloomFilter::with_sequence(params, 640, sequence);
        for i in 0..640 {
            filter.insert(format!("key{i}").as_bytes());
        }
        filter
    }

    #[test]
    fn each_probe_sequence_is_written_as_its_algorithm_and_read_back() {
        for (sequence, algorithm) in [(ProbeSequence::Linear, 1u16), (ProbeSequence::Quadratic, 2)]
        {
            let filter = filled(sequence);
            let bytes = filter.to_bytes();
            assert_eq!(LittleEndian::read_u16(&bytes[6..8]), algorithm);
            let back = BloomFilter::from_bytes(&bytes).unwrap();
            assert_eq!(back.sequence, sequence);
            assert_eq!(back, filter);
            assert!((0..640).all(|i| back.contains(format!("key{i}").as_bytes())));
        }
    }

    #[test]
    fn new_filters_use_the_quadratic_walk() {
        let filter = BloomFilter::with_capacity(100, 0.01).unwrap();
        assert_eq!(filter.sequence, ProbeSequence::Quadratic);
        assert_eq!(LittleEndian::read_u16(&filter.to_bytes()[6..8]), 2);
    }

    #[test]
    fn the_two_walks_place_keys_differently() {
        // Same keys, same size: the bit arrays differ, so reading a filter with the other
        // walk than the one that wrote it would miss keys.
        let (linear, quadratic) = (
            filled(ProbeSequence::Linear),
            filled(ProbeSequence::Quadratic),
        );
        assert_ne!(linear.words, quadratic.words);
    }

    #[test]
    fn filters_of_different_walks_do_not_combine() {
        let mut linear = filled(ProbeSequence::Linear);
        let quadratic = filled(ProbeSequence::Quadratic);
        assert_eq!(
            linear.union(&quadratic),
            Err(FilterError::HashMismatch { left: 1, right: 2 })
        );
        assert_eq!(
            linear.intersect(&quadratic),
            Err(FilterError::HashMismatch { left: 1, right: 2 })
        );
    }
}
