//! The hash both caches look up and shard by. Their keys are the store's own numbers (a table
//! reader's id, a block's offset), never input from outside, so a hash keyed against chosen
//! collisions (std's SipHash, or ahash, which would be one more dependency for the library)
//! buys nothing. A multiply-rotate over the key's words, then a 64-bit finalizer so that the
//! high bits a shard is chosen by depend on every bit of the key, is enough, and costs a few
//! multiplications per lookup.

use std::hash::{BuildHasherDefault, Hasher};

use crate::filter::splitmix64;

/// Hashes the words written to it (`write_u64` per number of a key).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NumberHasher(u64);

/// Makes a [`NumberHasher`] per hash.
pub(crate) type NumberHashBuilder = BuildHasherDefault<NumberHasher>;

impl Hasher for NumberHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(23) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        splitmix64(self.0)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    /// Keys as the block cache sees them (a few tables, blocks 4 KiB apart) land evenly in
    /// 64 buckets chosen by the hash's top bits and in 64 chosen by its low bits.
    #[test]
    fn block_keys_spread_evenly_over_high_and_low_bits() {
        let hasher = NumberHashBuilder::default();
        let (mut high, mut low) = ([0u32; 64], [0u32; 64]);
        let mut keys = 0u32;
        for table in 1..=8u64 {
            for block in 0..8192u64 {
                let h = hasher.hash_one((table, block * 4096));
                high[(h >> 58) as usize] += 1;
                low[(h & 63) as usize] += 1;
                keys += 1;
            }
        }
        let mean = keys / 64;
        for (name, buckets) in [("high", high), ("low", low)] {
            for (i, &n) in buckets.iter().enumerate() {
                assert!(
                    n > mean * 9 / 10 && n < mean * 11 / 10,
                    "{name} bucket {i}: {n} keys, mean {mean}"
                );
            }
        }
        // Different keys, different hashes; the same key, the same hash.
        assert_ne!(hasher.hash_one((1u64, 0u64)), hasher.hash_one((0u64, 1u64)));
        assert_eq!(
            hasher.hash_one((7u64, 4096u64)),
            hasher.hash_one((7u64, 4096u64))
        );
    }
}
