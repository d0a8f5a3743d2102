//! One hash per key, and the k bit positions derived from it.
//!
//! A key is hashed once with xxh3-64 (`h1`); a second, independent-looking 64-bit value `h2` is
//! derived from it by the splitmix64 finaliser and forced odd. Probe `i` looks at
//! `x_i = h1 + i * h2 (mod 2^64)`. Because `h2` is odd, the `x_i` are pairwise distinct for any
//! k <= 2^64: the probes cannot collapse onto one position the way plain double hashing with an
//! even or zero step can. Each `x_i` is mapped onto `0..m` by a multiply-shift
//! (`(x_i * m) >> 64`), which uses the high bits and avoids a division on the hot path.

use xxhash_rust::xxh3::xxh3_64;

/// A key's hash, computed once and usable to probe any number of filters of any size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyHash {
    pub(crate) h1: u64,
    pub(crate) h2: u64,
}

impl KeyHash {
    /// Hashes `key` (any bytes, the empty key included).
    #[inline]
    pub fn of(key: &[u8]) -> KeyHash {
        Self::from_u64(xxh3_64(key))
    }

    /// Builds the probe pair from a 64-bit hash computed elsewhere with xxh3-64.
    #[inline]
    pub fn from_u64(h1: u64) -> KeyHash {
        KeyHash {
            h1,
            h2: splitmix64(h1) | 1,
        }
    }

    /// The first half of the hash (xxh3-64 of the key).
    pub fn as_u64(&self) -> u64 {
        self.h1
    }

    /// The `hashes` bit positions of this key in a table of `bit_count` bits.
    #[inline]
    pub(crate) fn positions(&self, hashes: u32, bit_count: u64) -> impl Iterator<Item = u64> {
        let (h1, h2) = (self.h1, self.h2);
        (0..hashes as u64).map(move |i| reduce(h1.wrapping_add(i.wrapping_mul(h2)), bit_count))
    }

    /// `x_0 = h1`, the unreduced value of probe 0. The hot paths walk the probes with
    /// [`next_probe`](Self::next_probe), an addition per probe instead of a multiplication;
    /// both give the same `x_i = h1 + i * h2 (mod 2^64)` as [`positions`](Self::positions).
    #[inline]
    pub(crate) fn first_probe(&self) -> u64 {
        self.h1
    }

    /// `x_(i+1)` from `x_i`.
    #[inline]
    pub(crate) fn next_probe(&self, x: u64) -> u64 {
        x.wrapping_add(self.h2)
    }
}

/// Maps a well-mixed 64-bit value uniformly onto `0..range` without `%`.
#[inline]
pub(crate) fn reduce(x: u64, range: u64) -> u64 {
    ((x as u128 * range as u128) >> 64) as u64
}

/// The splitmix64 finaliser: a bijective mix, so `h2` looks independent of `h1`.
#[inline]
fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_step_is_odd_so_probes_never_repeat_before_reduction() {
        for key in [&b""[..], b"a", b"bloomkv", &[0u8; 1000]] {
            let h = KeyHash::of(key);
            assert_eq!(h.h2 & 1, 1);
            let raw: Vec<u64> = (0..64u64)
                .map(|i| h.h1.wrapping_add(i.wrapping_mul(h.h2)))
                .collect();
            let mut dedup = raw.clone();
            dedup.sort_unstable();
            dedup.dedup();
            assert_eq!(dedup.len(), raw.len());
        }
    }

    #[test]
    fn stepping_probes_gives_the_same_positions() {
        for (key, m) in [(&b"k"[..], 64u64), (b"bloomkv", 10_048), (b"", 1 << 40)] {
            let h = KeyHash::of(key);
            let mut x = h.first_probe();
            let stepped: Vec<u64> = (0..20)
                .map(|_| {
                    let pos = reduce(x, m);
                    x = h.next_probe(x);
                    pos
                })
                .collect();
            assert_eq!(stepped, h.positions(20, m).collect::<Vec<_>>());
        }
    }

    #[test]
    fn reduce_stays_in_range() {
        for range in [1u64, 64, 1000, u32::MAX as u64 + 7] {
            for x in [0, 1, u64::MAX / 2, u64::MAX] {
                assert!(reduce(x, range) < range);
            }
        }
        assert_eq!(reduce(u64::MAX, 64), 63);
        assert_eq!(reduce(0, 64), 0);
    }
}
