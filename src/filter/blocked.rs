//! A cache-local ("blocked") Bloom filter: all of a key's probes fall in one block of 512
//! bits, a 64-byte cache line, so a probe costs one cache miss where a standard filter's k
//! probes cost up to k once the filters outgrow the CPU caches.
//!
//! - **The block** is `reduce(h1, blocks)`: the top bits of the key's xxh3 hash, by
//!   multiply-shift, as the standard filter maps its positions.
//! - **The positions in the block** come from `h2` (the splitmix64 mix of `h1`, odd): probe
//!   `i` tests bit `x_i >> 55` (the top 9 bits) of `x_i = h2 * MIX^i (mod 2^64)`, one
//!   multiplication a probe. The probe loop has no branch but its count: it ANDs the k bits
//!   it tests, rather than stopping at the first clear one, which an absent key meets at a
//!   random probe.
//! - **Its rate** is not the standard filter's: a block holds a Poisson number of keys around
//!   its mean `512 / bits_per_key`, and crowded blocks answer "maybe" far more often than the
//!   mean predicts. [`blocked_rate`] sums the standard filter's rate within a block of 512 bits
//!   over that distribution, and [`BlockedParams`] picks bits per key and hashes from it, not
//!   from ClickHouse's table, whose rates assume a standard filter (the repository's filter notes,
//!   "Cache-local layout", has the derivation and what was measured).
//! - **Folding** by a factor dividing the block count ORs each run of `factor` consecutive
//!   blocks into one: the block index is a multiply-shift, so `floor(block / factor)` is the
//!   index of the same key in the folded filter, and the positions within a block do not
//!   depend on the block count.

use super::bloom::prefetch_read;
use super::codec::{self, Header};
use super::error::{FilterError, Result};
use super::hash::{reduce, KeyHash};
use super::params::MAX_BITS_PER_KEY;

/// Bits in a block: one 64-byte cache line.
pub const BLOCK_BITS: u64 = 512;
const BLOCK_WORDS: usize = 8;
/// Most hashes a blocked filter takes: 24 probes set over 4% of a block's bits per key, and
/// no rate any bits per key reaches needs more.
pub const MAX_BLOCKED_HASHES: u32 = 24;
/// The odd multiplier (2^64 over the golden ratio) that walks a key's positions in its block.
const MIX: u64 = 0x9e37_79b9_7f4a_7c15;
/// The shift that leaves the top 9 bits of a 64-bit value: a position in 0..512.
const POSITION_SHIFT: u32 = 64 - 9;

/// One cache line of bits, aligned to one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C, align(64))]
struct Block([u64; BLOCK_WORDS]);

/// Targets below this are refused: [`blocked_rate`]'s alternating sum loses its precision
/// (about 1e-9 absolute) near rates this small.
pub const MIN_BLOCKED_TARGET: f64 = 1e-6;

/// The false-positive rate of a blocked filter at `bits_per_key` (over the whole filter) and
/// `hashes`, its blocks filled to capacity (the repository's filter notes, "Cache-local layout").
///
/// An absent key's `k` probes hit `t` distinct bits of its block (`P(T = t)`, from
/// `distinct_probes`); the block holds a Poisson number `j` of keys, mean
/// `λ = 512 / bits_per_key`, each of which set `k` bits drawn with replacement. The chance
/// that `t` given bits are all set, by inclusion and exclusion over the `r` of them left
/// clear, is `Σ_r (-1)^r C(t, r) (1 - r/512)^(k j)`, and its mean over the Poisson count is
/// `Σ_r (-1)^r C(t, r) e^(λ ((1 - r/512)^k - 1))`. Exact for uniform independent probes,
/// where `(1 - (1 - 1/512)^(k j))^k` (the standard rate at the block's mean fill) is not: a
/// block's set bits vary, and the rate is convex in them (the mean-fill form is 0.9% low at
/// 10 bits per key and 6 hashes, 3.4% low at 22 and 11).
pub fn blocked_rate(bits_per_key: f64, hashes: u32) -> f64 {
    let mean = BLOCK_BITS as f64 / bits_per_key;
    let block = BLOCK_BITS as f64;
    let mut rate = 0.0;
    for (t, p_t) in distinct_probes(hashes).into_iter().enumerate().skip(1) {
        let mut all_set = 0.0;
        let mut binomial = 1.0;
        for r in 0..=t {
            let stays_clear = (1.0 - r as f64 / block).powi(hashes as i32);
            let term = binomial * (mean * (stays_clear - 1.0)).exp();
            all_set += if r % 2 == 0 { term } else { -term };
            binomial *= (t - r) as f64 / (r + 1) as f64;
        }
        rate += p_t * all_set;
    }
    rate.clamp(0.0, 1.0)
}

/// `P(T = t)` for `t` in `0..=hashes`: the chance that `hashes` positions drawn uniformly,
/// with replacement, from a block's 512 are `t` distinct ones.
fn distinct_probes(hashes: u32) -> Vec<f64> {
    let block = BLOCK_BITS as f64;
    let mut p = vec![0.0; hashes as usize + 1];
    p[0] = 1.0;
    for _ in 0..hashes {
        let mut next = vec![0.0; p.len()];
        for (t, &now) in p.iter().enumerate() {
            next[t] += now * t as f64 / block;
            if t + 1 < p.len() {
                next[t + 1] += now * (block - t as f64) / block;
            }
        }
        p = next;
    }
    p
}

/// The blocks of a filter for `expected_keys` at `params`' bits per key: whole blocks, at
/// least one.
fn blocks_for(params: BlockedParams, expected_keys: u64) -> usize {
    let bits = expected_keys.saturating_mul(u64::from(params.bits_per_key));
    bits.div_ceil(BLOCK_BITS).max(1) as usize
}

/// Bits per key and hashes of a blocked filter, chosen by [`blocked_rate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockedParams {
    bits_per_key: u32,
    hashes: u32,
}

impl BlockedParams {
    /// The fewest bits per key whose best rate meets `target`, and at those bits the fewest
    /// hashes that meet it (ClickHouse's convention, on the blocked filter's own rates).
    /// Targets below [`MIN_BLOCKED_TARGET`] are refused as unreachable.
    pub fn for_false_positive_rate(target: f64) -> Result<BlockedParams> {
        if !(target > 0.0 && target < 1.0) {
            return Err(FilterError::NotARate(target));
        }
        if target < MIN_BLOCKED_TARGET {
            return Err(FilterError::UnreachableRate {
                target,
                best: MIN_BLOCKED_TARGET,
            });
        }
        let mut best = 1.0f64;
        for bits_per_key in 1..=MAX_BITS_PER_KEY {
            for hashes in 1..=MAX_BLOCKED_HASHES {
                let rate = blocked_rate(f64::from(bits_per_key), hashes);
                best = best.min(rate);
                if rate <= target {
                    return Ok(BlockedParams {
                        bits_per_key,
                        hashes,
                    });
                }
            }
        }
        Err(FilterError::UnreachableRate { target, best })
    }

    /// The hashes that give the lowest [`blocked_rate`] at `bits_per_key` (1 to 64): the
    /// blocked layout's choice for a memory already decided, as a store's budget decides it.
    pub fn for_bits_per_key(bits_per_key: u32) -> Result<BlockedParams> {
        let bits = f64::from(bits_per_key);
        let best = (1..=MAX_BLOCKED_HASHES)
            .min_by(|&a, &b| blocked_rate(bits, a).total_cmp(&blocked_rate(bits, b)))
            .expect("at least one hash count");
        BlockedParams::new(bits_per_key, best)
    }

    /// Parameters given directly: 1 to 64 bits per key, 1 to [`MAX_BLOCKED_HASHES`] hashes.
    pub fn new(bits_per_key: u32, hashes: u32) -> Result<BlockedParams> {
        if !(1..=MAX_BITS_PER_KEY).contains(&bits_per_key) {
            return Err(FilterError::InvalidParams(format!(
                "bits per key {bits_per_key} is outside 1..={MAX_BITS_PER_KEY}"
            )));
        }
        if !(1..=MAX_BLOCKED_HASHES).contains(&hashes) {
            return Err(FilterError::InvalidParams(format!(
                "hash count {hashes} is outside 1..={MAX_BLOCKED_HASHES} for a blocked filter"
            )));
        }
        Ok(BlockedParams {
            bits_per_key,
            hashes,
        })
    }

    /// Bits per key the parameters give.
    pub fn bits_per_key(&self) -> u32 {
        self.bits_per_key
    }

    /// Bits a key sets in its block.
    pub fn hashes(&self) -> u32 {
        self.hashes
    }

    /// The rate of a filter of these parameters filled to capacity ([`blocked_rate`]).
    pub fn predicted_false_positive_rate(&self) -> f64 {
        blocked_rate(f64::from(self.bits_per_key), self.hashes)
    }
}

/// A Bloom filter whose probes of one key all fall in one 64-byte block (see the module
/// comment): never a false negative, like [`BloomFilter`](super::BloomFilter), at a rate
/// [`BlockedParams`] predicts.
///
/// ```
/// use bloomkv::filter::BlockedBloomFilter;
///
/// let mut seen = BlockedBloomFilter::with_capacity(10_000, 0.01)?;
/// seen.insert(b"https://example.org/");
/// assert!(seen.contains(b"https://example.org/"));
/// let again = BlockedBloomFilter::from_bytes(&seen.to_bytes())?;
/// assert_eq!(again, seen);
/// # Ok::<(), bloomkv::filter::FilterError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedBloomFilter {
    blocks: Vec<Block>,
    bits_per_key: u32,
    hashes: u32,
    key_count: u64,
}

impl BlockedBloomFilter {
    /// A filter like [`new`](Self::new) whose block count is rounded up to a multiple of
    /// `fold_limit`, so that [`fold`](Self::fold) can divide it by any factor that divides
    /// `fold_limit`.
    pub fn new_foldable(
        params: BlockedParams,
        expected_keys: u64,
        fold_limit: u32,
    ) -> BlockedBloomFilter {
        let blocks = blocks_for(params, expected_keys).next_multiple_of(fold_limit.max(1) as usize);
        Self::with_blocks(params, blocks)
    }

    /// A filter for `expected_keys` at the parameters' bits per key, rounded up to whole
    /// blocks and never smaller than one.
    pub fn new(params: BlockedParams, expected_keys: u64) -> BlockedBloomFilter {
        Self::with_blocks(params, blocks_for(params, expected_keys))
    }

    /// An empty filter of `blocks` blocks.
    fn with_blocks(params: BlockedParams, blocks: usize) -> BlockedBloomFilter {
        BlockedBloomFilter {
            blocks: super::huge_pages::filled(blocks, Block::default()),
            bits_per_key: params.bits_per_key,
            hashes: params.hashes,
            key_count: 0,
        }
    }

    /// A filter for `expected_keys` keys at `false_positive_rate`.
    pub fn with_capacity(
        expected_keys: u64,
        false_positive_rate: f64,
    ) -> Result<BlockedBloomFilter> {
        let params = BlockedParams::for_false_positive_rate(false_positive_rate)?;
        Ok(Self::new(params, expected_keys))
    }

    /// Adds a key.
    #[inline]
    pub fn insert(&mut self, key: &[u8]) {
        self.insert_hash(&KeyHash::of(key));
    }

    /// Adds a key already hashed with [`KeyHash::of`].
    #[inline]
    pub fn insert_hash(&mut self, hash: &KeyHash) {
        let at = self.block_of(hash);
        let block = &mut self.blocks[at].0;
        let mut x = hash.h2;
        for _ in 0..self.hashes {
            let bit = x >> POSITION_SHIFT;
            block[(bit >> 6) as usize] |= 1 << (bit & 63);
            x = x.wrapping_mul(MIX);
        }
        self.key_count += 1;
    }

    /// False: the key was certainly never inserted. True: it probably was.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(&KeyHash::of(key))
    }

    /// [`contains`](Self::contains) for a key already hashed: hash once, probe many filters.
    /// Tests all k bits and ANDs them, with no branch on what it finds.
    #[inline]
    pub fn contains_hash(&self, hash: &KeyHash) -> bool {
        let block = &self.blocks[self.block_of(hash)].0;
        let mut x = hash.h2;
        let mut all = 1u64;
        for _ in 0..self.hashes {
            let bit = x >> POSITION_SHIFT;
            all &= block[(bit >> 6) as usize] >> (bit & 63);
            x = x.wrapping_mul(MIX);
        }
        all & 1 == 1
    }

    /// Asks the CPU to bring the key's block into its cache: a batch of lookups can start
    /// the next keys' loads while it probes this one. Changes nothing; on other machines than
    /// x86-64, does nothing.
    pub fn prefetch(&self, hash: &KeyHash) {
        prefetch_read(&self.blocks[self.block_of(hash)].0[0]);
    }

    #[inline]
    fn block_of(&self, hash: &KeyHash) -> usize {
        reduce(hash.h1, self.blocks.len() as u64) as usize
    }

    /// Size of the bit array: a multiple of 512.
    pub fn bit_count(&self) -> u64 {
        self.blocks.len() as u64 * BLOCK_BITS
    }

    /// Bytes of memory the bits take.
    pub fn memory_bytes(&self) -> usize {
        self.blocks.len() * std::mem::size_of::<Block>()
    }

    /// Bits a key sets in its block.
    pub fn hashes(&self) -> u32 {
        self.hashes
    }

    /// Bits per key the filter was sized with (the folded share after a fold).
    pub fn bits_per_key(&self) -> u32 {
        self.bits_per_key
    }

    /// The filter's parameters.
    pub fn params(&self) -> BlockedParams {
        BlockedParams {
            bits_per_key: self.bits_per_key,
            hashes: self.hashes,
        }
    }

    /// Keys inserted.
    pub fn len(&self) -> u64 {
        self.key_count
    }

    /// Whether no key was inserted.
    pub fn is_empty(&self) -> bool {
        self.key_count == 0
    }

    /// The rate [`blocked_rate`] gives for the keys this filter holds over its bits (the
    /// predicted rate of its parameters once filled to capacity; 0 when empty).
    pub fn expected_false_positive_rate(&self) -> f64 {
        match self.key_count {
            0 => 0.0,
            keys => blocked_rate(self.bit_count() as f64 / keys as f64, self.hashes),
        }
    }

    /// Adds every key of `other`, a filter of the same size and hashes, to this one. Its key
    /// count becomes the sum of both, an upper bound: keys in both count twice.
    pub fn union(&mut self, other: &BlockedBloomFilter) -> Result<()> {
        let shape = |f: &BlockedBloomFilter| (f.bit_count(), f.hashes);
        if shape(self) != shape(other) {
            return Err(FilterError::ShapeMismatch {
                left: shape(self),
                right: shape(other),
            });
        }
        for (mine, theirs) in self.blocks.iter_mut().zip(&other.blocks) {
            for (a, b) in mine.0.iter_mut().zip(theirs.0) {
                *a |= b;
            }
        }
        self.key_count = self.key_count.saturating_add(other.key_count);
        Ok(())
    }

    /// The filter folded to `1 / factor` of its blocks (each run of `factor` consecutive
    /// blocks ORed into one; see the module comment): it holds every key this one holds, with
    /// the same hashes, at the rate of `1 / factor` the bits per key. The block count must be
    /// a multiple of `factor`.
    pub fn fold(&self, factor: u32) -> Result<BlockedBloomFilter> {
        let f = factor as usize;
        if factor == 0 || !self.blocks.len().is_multiple_of(f) {
            return Err(FilterError::CannotFold {
                bits: self.bit_count(),
                factor,
            });
        }
        let mut blocks = super::huge_pages::filled(self.blocks.len() / f, Block::default());
        for (folded, run) in blocks.iter_mut().zip(self.blocks.chunks_exact(f)) {
            for block in run {
                for (a, b) in folded.0.iter_mut().zip(block.0) {
                    *a |= b;
                }
            }
        }
        Ok(BlockedBloomFilter {
            blocks,
            bits_per_key: (self.bits_per_key / factor).max(1),
            hashes: self.hashes,
            key_count: self.key_count,
        })
    }

    /// Serializes the filter in the format of [`BloomFilter`](super::BloomFilter), with hash
    /// algorithm 3 (the repository's filter notes, "Serialized format").
    pub fn to_bytes(&self) -> Vec<u8> {
        let words: Vec<u64> = self.blocks.iter().flat_map(|b| b.0).collect();
        let header = Header {
            algorithm: codec::BLOCKED_ALGORITHM,
            hashes: self.hashes,
            bits_per_key: self.bits_per_key,
            key_count: self.key_count,
        };
        codec::encode(&header, &words)
    }

    /// Decodes [`to_bytes`](Self::to_bytes) output. Any truncation, changed byte, other hash
    /// algorithm or bit count not a multiple of 512 is an error, never a panic.
    pub fn from_bytes(bytes: &[u8]) -> Result<BlockedBloomFilter> {
        let (header, words) = codec::decode(bytes)?;
        if header.algorithm != codec::BLOCKED_ALGORITHM {
            return Err(FilterError::Corrupt(format!(
                "hash algorithm {} is not the blocked layout's ({})",
                header.algorithm,
                codec::BLOCKED_ALGORITHM
            )));
        }
        if !words.len().is_multiple_of(BLOCK_WORDS) {
            return Err(FilterError::Corrupt(format!(
                "{} bits is not a whole number of {BLOCK_BITS}-bit blocks",
                words.len() as u64 * 64
            )));
        }
        BlockedParams::new(header.bits_per_key, header.hashes)
            .map_err(|e| FilterError::Corrupt(e.to_string()))?;
        let mut blocks = super::huge_pages::filled(words.len() / BLOCK_WORDS, Block::default());
        for (block, w) in blocks.iter_mut().zip(words.chunks_exact(BLOCK_WORDS)) {
            block.0.copy_from_slice(w);
        }
        Ok(BlockedBloomFilter {
            blocks,
            bits_per_key: header.bits_per_key,
            hashes: header.hashes,
            key_count: header.key_count,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::textbook_rate;

    fn filled(keys: u64, params: BlockedParams) -> BlockedBloomFilter {
        let mut filter = BlockedBloomFilter::new(params, keys);
        for i in 0..keys {
            filter.insert(format!("key{i}").as_bytes());
        }
        filter
    }

    #[test]
    fn the_best_hashes_for_a_memory_are_the_lowest_rate_at_it() {
        for bits in [4, 8, 10, 16, 23] {
            let params = BlockedParams::for_bits_per_key(bits).unwrap();
            let best = params.predicted_false_positive_rate();
            for k in 1..=MAX_BLOCKED_HASHES {
                assert!(
                    best <= blocked_rate(f64::from(bits), k),
                    "{bits} bits, {k} hashes"
                );
            }
        }
        // The rule of `for_false_positive_rate` at 1% picks 10 bits and 6 hashes.
        assert_eq!(BlockedParams::for_bits_per_key(10).unwrap().hashes(), 6);
        let foldable =
            BlockedBloomFilter::new_foldable(BlockedParams::new(10, 6).unwrap(), 1000, 8);
        assert!(foldable.fold(8).is_ok());
    }

    #[test]
    fn every_key_inserted_is_found() {
        let filter = filled(20_000, BlockedParams::new(10, 6).unwrap());
        assert!((0..20_000).all(|i| filter.contains(format!("key{i}").as_bytes())));
        assert_eq!(filter.len(), 20_000);
        assert_eq!(filter.bit_count() % BLOCK_BITS, 0);
    }

    #[test]
    fn a_keys_probes_stay_in_one_block() {
        let mut filter = BlockedBloomFilter::new(BlockedParams::new(10, 8).unwrap(), 1000);
        filter.insert(b"one key");
        let touched: Vec<usize> = (filter.blocks.iter().enumerate())
            .filter(|(_, b)| b.0.iter().any(|w| *w != 0))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(touched, vec![filter.block_of(&KeyHash::of(b"one key"))]);
        let set: u32 = filter.blocks[touched[0]]
            .0
            .iter()
            .map(|w| w.count_ones())
            .sum();
        assert!((1..=8).contains(&set), "{set} bits set by 8 probes");
    }

    #[test]
    fn the_rule_costs_more_bits_than_a_standard_filter_at_fewer_hashes() {
        // A blocked filter's crowded blocks raise its rate: at 10 bits per key its best rate
        // is above the standard filter's best (0.82% at 7 hashes, textbook), at fewer
        // hashes (6, which RocksDB's blocked filter takes there too).
        let (best_hashes, blocked_best) = (1..=MAX_BLOCKED_HASHES)
            .map(|k| (k, blocked_rate(10.0, k)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        assert!(blocked_best > textbook_rate(10.0, 7), "{blocked_best}");
        assert!(blocked_best < 0.0125, "{blocked_best}");
        assert_eq!(best_hashes, 6);
        for target in [0.01, 0.001, 0.0001] {
            let p = BlockedParams::for_false_positive_rate(target).unwrap();
            assert!(p.predicted_false_positive_rate() <= target);
            // One bit per key fewer misses the target at every hash count.
            let fewer = f64::from(p.bits_per_key() - 1);
            assert!((1..=MAX_BLOCKED_HASHES).all(|k| blocked_rate(fewer, k) > target));
            // And at these bits, one hash fewer misses it.
            let bits = f64::from(p.bits_per_key());
            assert!(p.hashes() == 1 || blocked_rate(bits, p.hashes() - 1) > target);
        }
    }

    #[test]
    fn the_rate_matches_a_direct_sum_over_the_blocks_key_counts() {
        // The closed form against the sum it replaces: over j ~ Poisson(λ), the exact chance
        // that k probes find their bits set in a block into which k j probes fell, computed
        // by a dynamic program over the block's count of set bits.
        for (bits, k) in [(10.0, 6), (16.0, 7), (22.0, 11), (4.0, 3)] {
            let mean = BLOCK_BITS as f64 / bits;
            let n = BLOCK_BITS as usize;
            let mut set = vec![0.0; n + 1];
            set[0] = 1.0;
            let (mut direct, mut weight) = (0.0, (-mean).exp());
            for j in 0..(mean + 12.0 * mean.sqrt() + 20.0) as usize {
                let all_set: f64 = (set.iter().enumerate())
                    .map(|(s, p)| p * (s as f64 / n as f64).powi(k))
                    .sum();
                direct += weight * all_set;
                for _ in 0..k {
                    let mut next = vec![0.0; n + 1];
                    for (s, &p) in set.iter().enumerate() {
                        next[s] += p * s as f64 / n as f64;
                        if s < n {
                            next[s + 1] += p * (n - s) as f64 / n as f64;
                        }
                    }
                    set = next;
                }
                weight *= mean / (j + 1) as f64;
            }
            let closed = blocked_rate(bits, k as u32);
            assert!(
                (closed - direct).abs() / direct < 1e-6,
                "{bits} {k}: {closed} {direct}"
            );
        }
    }

    #[test]
    fn distinct_probes_is_a_distribution() {
        let p = distinct_probes(11);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(p[0], 0.0);
        // Eleven draws from 512 are all distinct with probability Π (1 - i/512).
        let all: f64 = (0..11).map(|i| 1.0 - i as f64 / 512.0).product();
        assert!((p[11] - all).abs() < 1e-12);
    }

    #[test]
    fn the_rate_tends_to_the_standard_one_as_blocks_hold_many_keys() {
        // With hundreds of keys a block, the Poisson spread is narrow around the mean: the
        // blocked rate approaches the standard filter's rate at the same bits and hashes.
        let blocked = blocked_rate(1.0, 1);
        let standard = textbook_rate(1.0, 1);
        assert!(
            (blocked - standard).abs() / standard < 0.01,
            "{blocked} {standard}"
        );
    }

    #[test]
    fn bad_rates_and_parameters_are_refused() {
        for bad in [0.0, 1.0, -0.5, f64::NAN] {
            assert!(BlockedParams::for_false_positive_rate(bad).is_err());
        }
        for unreachable in [1e-30, MIN_BLOCKED_TARGET / 2.0] {
            assert!(matches!(
                BlockedParams::for_false_positive_rate(unreachable),
                Err(FilterError::UnreachableRate { .. })
            ));
        }
        assert!(BlockedParams::new(0, 4).is_err());
        assert!(BlockedParams::new(65, 4).is_err());
        assert!(BlockedParams::new(10, 0).is_err());
        assert!(BlockedParams::new(10, MAX_BLOCKED_HASHES + 1).is_err());
    }

    #[test]
    fn a_folded_filter_keeps_every_key_at_the_rate_of_its_share() {
        let params = BlockedParams::new(16, 8).unwrap();
        let filter = filled(8_192, params);
        assert_eq!(filter.blocks.len() % 4, 0);
        for factor in [2, 4] {
            let folded = filter.fold(factor).unwrap();
            assert_eq!(folded.bit_count(), filter.bit_count() / u64::from(factor));
            assert!((0..8_192).all(|i| folded.contains(format!("key{i}").as_bytes())));
            let expected = blocked_rate(16.0 / f64::from(factor), 8);
            assert!((folded.expected_false_positive_rate() - expected).abs() < 1e-12);
        }
        assert!(matches!(
            filter.fold(3),
            Err(FilterError::CannotFold { factor: 3, .. })
        ));
        assert!(filter.fold(0).is_err());
    }

    #[test]
    fn a_union_holds_the_keys_of_both() {
        let params = BlockedParams::new(10, 6).unwrap();
        let mut left = BlockedBloomFilter::new(params, 2_000);
        let mut right = BlockedBloomFilter::new(params, 2_000);
        for i in 0..1_000 {
            left.insert(format!("left{i}").as_bytes());
            right.insert(format!("right{i}").as_bytes());
        }
        left.union(&right).unwrap();
        assert!((0..1_000).all(|i| left.contains(format!("right{i}").as_bytes())));
        assert!((0..1_000).all(|i| left.contains(format!("left{i}").as_bytes())));
        let other = BlockedBloomFilter::new(params, 4_000);
        assert!(matches!(
            left.union(&other),
            Err(FilterError::ShapeMismatch { .. })
        ));
    }

    #[test]
    fn the_serialized_form_round_trips_and_refuses_damage() {
        let filter = filled(3_000, BlockedParams::new(12, 7).unwrap());
        let bytes = filter.to_bytes();
        assert_eq!(&bytes[6..8], &codec::BLOCKED_ALGORITHM.to_le_bytes());
        assert_eq!(BlockedBloomFilter::from_bytes(&bytes).unwrap(), filter);
        for at in [0, 5, 6, 9, 20, 40, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            assert!(BlockedBloomFilter::from_bytes(&bad).is_err(), "byte {at}");
        }
        for cut in [0, 10, 35, bytes.len() - 1] {
            assert!(BlockedBloomFilter::from_bytes(&bytes[..cut]).is_err());
        }
        // A standard filter's bytes are not a blocked filter, nor the other way round.
        let standard = crate::filter::BloomFilter::with_capacity(3_000, 0.01).unwrap();
        assert!(BlockedBloomFilter::from_bytes(&standard.to_bytes()).is_err());
        assert!(crate::filter::BloomFilter::from_bytes(&bytes).is_err());
    }
}
