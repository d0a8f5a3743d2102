//! The classic Bloom filter over 64-bit words.

use super::error::{FilterError, Result};
use super::hash::{KeyHash, ProbeSequence};
use super::params::{textbook_rate, FilterParams};

const WORD_BITS: u64 = 64;

/// A Bloom filter: a set that may answer "maybe" for keys never inserted (at a rate chosen
/// through [`FilterParams`]) but never answers "no" for a key that was inserted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BloomFilter {
    pub(crate) words: Vec<u64>,
    pub(crate) bits_per_key: u32,
    pub(crate) hashes: u32,
    /// Keys inserted (for a union or intersection: the estimate from the set bits).
    pub(crate) key_count: u64,
    /// How a key's hash becomes its bit positions: fixed when the filter is built, and kept
    /// by its serialized form so that filters written by older versions still answer.
    pub(crate) sequence: ProbeSequence,
}

/// The first two bits a probe of one key tests in one filter, as the index of each one's word
/// and its place in the word: found ahead of the probe by `BloomFilter::prefetch_first_bits`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FirstBits {
    words: [usize; 2],
    shifts: [u32; 2],
}

impl BloomFilter {
    /// A filter sized for `expected_keys` at the parameters' bits per key, rounded up to whole
    /// 64-bit words and never smaller than one word.
    pub fn new(params: FilterParams, expected_keys: u64) -> BloomFilter {
        Self::with_words(params, words_for(params, expected_keys))
    }

    /// A filter like [`new`](Self::new) whose bit count is rounded up further, to a multiple
    /// of `64 * fold_limit` bits, so that [`fold`](Self::fold) can halve it (or cut it to a
    /// quarter...) by any factor that divides `fold_limit`. The rounding costs under
    /// `64 * fold_limit` bits per filter.
    pub fn new_foldable(params: FilterParams, expected_keys: u64, fold_limit: u32) -> BloomFilter {
        let words = words_for(params, expected_keys).next_multiple_of(fold_limit.max(1) as usize);
        Self::with_words(params, words)
    }

    /// An empty filter of `words` 64-bit words.
    fn with_words(params: FilterParams, words: usize) -> BloomFilter {
        BloomFilter {
            words: super::huge_pages::filled(words, 0),
            bits_per_key: params.bits_per_key(),
            hashes: params.hashes(),
            key_count: 0,
            sequence: ProbeSequence::CURRENT,
        }
    }

    /// A filter for `expected_keys` keys at `false_positive_rate`.
    pub fn with_capacity(expected_keys: u64, false_positive_rate: f64) -> Result<BloomFilter> {
        let params = FilterParams::for_false_positive_rate(false_positive_rate)?;
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
        for (word, mask) in self.bits_of(hash) {
            self.words[word] |= mask;
        }
        self.key_count += 1;
    }

    /// False: the key was certainly never inserted. True: it probably was.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(&KeyHash::of(key))
    }

    /// [`contains`](Self::contains) for a key already hashed: hash once, probe many filters.
    #[inline]
    pub fn contains_hash(&self, hash: &KeyHash) -> bool {
        self.bits_of(hash)
            .all(|(word, mask)| self.words[word] & mask != 0)
    }

    /// Asks the CPU to bring the words of the first two probes of `contains_hash(hash)` into
    /// its cache, so that a batch of lookups can start the memory loads of the next keys
    /// while it probes this one (an absent key is mostly ruled out by one of those two: each
    /// finds its bit clear about half the time). Changes nothing; on other machines than
    /// x86-64, does nothing.
    pub fn prefetch(&self, hash: &KeyHash) {
        self.prefetch_first_bits(hash);
    }

    /// [`prefetch`](Self::prefetch), returning the two bits for
    /// [`first_bits_set`](Self::first_bits_set) to test once their words have arrived.
    pub(crate) fn prefetch_first_bits(&self, hash: &KeyHash) -> FirstBits {
        let mut bits = self.bits_of(hash);
        // Every filter tests at least one bit (`FilterParams` and the decoder refuse zero
        // hashes); one with a single hash tests its first bit twice.
        let first = bits.next().expect("a filter tests at least one bit");
        let second = bits.next().unwrap_or(first);
        for (word, _) in [first, second] {
            prefetch_read(&self.words[word]);
        }
        FirstBits {
            words: [first.0, second.0],
            shifts: [first.1.trailing_zeros(), second.1.trailing_zeros()],
        }
    }

    /// Whether both of `bits` (from [`prefetch_first_bits`](Self::prefetch_first_bits) on
    /// this filter) are set: `false` means the key is surely absent, `true` that
    /// `contains_hash` must still ask the rest. Tests both without a branch between them, as
    /// a batch's keys fail the first about half the time, at random.
    #[inline]
    pub(crate) fn first_bits_set(&self, bits: &FirstBits) -> bool {
        // Shifts and a bitwise and: compares here would be compiled into branches.
        let first = self.words[bits.words[0]] >> bits.shifts[0];
        let second = self.words[bits.words[1]] >> bits.shifts[1];
        first & second & 1 == 1
    }

    /// The key's `hashes` bits, each as (index of its word, mask within the word).
    #[inline]
    fn bits_of(&self, hash: &KeyHash) -> impl Iterator<Item = (usize, u64)> {
        hash.positions(self.sequence, self.hashes, self.bit_count())
            .map(|pos| ((pos / WORD_BITS) as usize, 1 << (pos % WORD_BITS)))
    }

    /// Size of the bit array.
    pub fn bit_count(&self) -> u64 {
        self.words.len() as u64 * WORD_BITS
    }

    /// Bytes of memory held by the bit array.
    pub fn memory_bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<u64>()
    }

    /// Bit positions probed per key.
    pub fn hashes(&self) -> u32 {
        self.hashes
    }

    /// The bits per key this filter was sized with (after a [`fold`](Self::fold), the
    /// original figure divided by the factor, rounded down and at least 1;
    /// [`expected_false_positive_rate`](Self::expected_false_positive_rate) uses the real
    /// bit count).
    pub fn bits_per_key(&self) -> u32 {
        self.bits_per_key
    }

    /// The parameters the filter was built with.
    pub fn params(&self) -> FilterParams {
        // Both values were validated when the filter was built or decoded.
        FilterParams::new(self.bits_per_key, self.hashes).expect("filter holds valid params")
    }

    /// Keys inserted through `insert` (after `union`/`intersect`: the estimate).
    pub fn len(&self) -> u64 {
        self.key_count
    }

    /// True when no key was inserted.
    pub fn is_empty(&self) -> bool {
        self.key_count == 0
    }

    /// How many keys the filter was sized for.
    pub fn capacity(&self) -> u64 {
        self.bit_count() / self.bits_per_key as u64
    }

    /// True once more keys went in than the filter was sized for: its real false-positive
    /// rate is then above the one its parameters predict.
    pub fn is_over_capacity(&self) -> bool {
        self.key_count > self.capacity()
    }

    /// Number of bits set.
    pub fn set_bits(&self) -> u64 {
        self.words.iter().map(|w| w.count_ones() as u64).sum()
    }

    /// Number of distinct keys inserted, estimated from the share of set bits
    /// (Swamidass & Baldi: `n = -(m / k) ln(1 - X / m)`). Infinite once every bit is set.
    pub fn estimated_len(&self) -> f64 {
        let set = self.set_bits();
        if set == 0 {
            return 0.0;
        }
        let m = self.bit_count() as f64;
        -(m / self.hashes as f64) * (1.0 - set as f64 / m).ln()
    }

    /// The rate expected now, from the keys inserted and the real size of the bit array.
    pub fn expected_false_positive_rate(&self) -> f64 {
        if self.key_count == 0 {
            return 0.0;
        }
        textbook_rate(self.bit_count() as f64 / self.key_count as f64, self.hashes)
    }

    /// The rate [`expected_false_positive_rate`](Self::expected_false_positive_rate) would give
    /// after [`fold`](Self::fold)`(factor)`: what a fold costs, known before folding.
    pub fn folded_false_positive_rate(&self, factor: u32) -> f64 {
        if self.key_count == 0 {
            return 0.0;
        }
        let bits = self.bit_count() as f64 / f64::from(factor.max(1));
        textbook_rate(bits / self.key_count as f64, self.hashes)
    }

    /// Adds every key of `other` (same size, hash count and probe sequence): the result answers "maybe" for
    /// any key either filter holds.
    pub fn union(&mut self, other: &BloomFilter) -> Result<()> {
        self.combine(other, |a, b| a | b)
    }

    /// Keeps only bits set in both filters: the result answers "maybe" for every key both hold
    /// (its false-positive rate can be higher than a filter built from the common keys).
    pub fn intersect(&mut self, other: &BloomFilter) -> Result<()> {
        self.combine(other, |a, b| a & b)
    }

    fn combine(&mut self, other: &BloomFilter, op: impl Fn(u64, u64) -> u64) -> Result<()> {
        if self.shape() != other.shape() {
            return Err(FilterError::ShapeMismatch {
                left: self.shape(),
                right: other.shape(),
            });
        }
        if self.sequence != other.sequence {
            return Err(FilterError::HashMismatch {
                left: self.sequence.algorithm(),
                right: other.sequence.algorithm(),
            });
        }
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a = op(*a, *b);
        }
        let estimate = self.estimated_len();
        self.key_count = if estimate.is_finite() {
            estimate.round() as u64
        } else {
            u64::MAX
        };
        Ok(())
    }

    /// The filter folded to `1 / factor` of its bits: bit `j` of the result is set when any of
    /// bits `factor * j .. factor * (j + 1)` is. It holds every key this one holds (a probe
    /// at position `p` of `m` bits lands on `p / factor` of `m / factor`, as positions are
    /// `x * m / 2^64` rounded down), with the same hashes, at the rate of a filter with
    /// `1 / factor` the bits per key: a store short of memory keeps a folded filter in place of
    /// the whole one, without the keys. The bit count must be a multiple of `64 * factor`
    /// (see [`new_foldable`](Self::new_foldable)).
    pub fn fold(&self, factor: u32) -> Result<BloomFilter> {
        let f = factor as usize;
        if factor == 0 || !self.words.len().is_multiple_of(f) {
            return Err(FilterError::CannotFold {
                bits: self.bit_count(),
                factor,
            });
        }
        let words = match factor.is_power_of_two() {
            // Halving again and again: floor(floor(p / 2) / 2) = floor(p / 4), and so on.
            true => (0..factor.trailing_zeros()).fold(self.words.clone(), |w, _| halve(&w)),
            false => fold_bit_by_bit(&self.words, factor),
        };
        Ok(BloomFilter {
            words,
            bits_per_key: (self.bits_per_key / factor).max(1),
            hashes: self.hashes,
            key_count: self.key_count,
            sequence: self.sequence,
        })
    }

    fn shape(&self) -> (u64, u32) {
        (self.bit_count(), self.hashes)
    }

    /// A filter like `new` that walks its probes with `sequence`: tests of older formats.
    #[cfg(test)]
    pub(crate) fn with_sequence(
        params: FilterParams,
        expected_keys: u64,
        sequence: ProbeSequence,
    ) -> BloomFilter {
        BloomFilter {
            sequence,
            ..Self::new(params, expected_keys)
        }
    }
}

/// The words of a filter for `expected_keys` at `params`' bits per key: whole words, at
/// least one.
fn words_for(params: FilterParams, expected_keys: u64) -> usize {
    let bits = expected_keys
        .saturating_mul(params.bits_per_key() as u64)
        .max(WORD_BITS);
    bits.div_ceil(WORD_BITS) as usize
}

/// `words` (an even number of them) folded by 2: bit `j` of the result is bits `2j` and
/// `2j + 1` ORed, so each source word gives 32 bits, a word at a time.
fn halve(words: &[u64]) -> Vec<u64> {
    let mut halved = super::huge_pages::filled(words.len() / 2, 0u64);
    for (word, pair) in halved.iter_mut().zip(words.chunks_exact(2)) {
        *word = pair_bits_ored(pair[0]) | (pair_bits_ored(pair[1]) << 32);
    }
    halved
}

/// The 32 bits of `x` whose bit `j` is bit `2j` OR bit `2j + 1` of `x`, in the low half.
fn pair_bits_ored(x: u64) -> u64 {
    // OR each pair into its even bit, then gather the even bits into the low half, moving
    // groups of 1, 2, 4, 8 and 16 bits together.
    let mut x = (x | (x >> 1)) & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = (x | (x >> 4)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x >> 8)) & 0x0000_ffff_0000_ffff;
    (x | (x >> 16)) & 0x0000_0000_ffff_ffff
}

/// `words` folded by any `factor` dividing their number, one set bit at a time: bit `p` goes
/// to bit `p / factor`.
fn fold_bit_by_bit(words: &[u64], factor: u32) -> Vec<u64> {
    let mut folded = super::huge_pages::filled(words.len() / factor as usize, 0u64);
    for (i, &word) in words.iter().enumerate() {
        let mut rest = word;
        while rest != 0 {
            let bit = (i as u64) * WORD_BITS + u64::from(rest.trailing_zeros());
            let to = bit / u64::from(factor);
            folded[(to / WORD_BITS) as usize] |= 1 << (to % WORD_BITS);
            rest &= rest - 1;
        }
    }
    folded
}

/// A hint to load the cache line holding `word`; no effect on what any code reads.
#[inline]
pub(super) fn prefetch_read(word: &u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it reads nothing the program sees and cannot
    // fault, and `word` is a valid reference besides.
    unsafe {
        std::arch::x86_64::_mm_prefetch(
            (word as *const u64).cast::<i8>(),
            std::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = word;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(tag: &str, i: u64) -> Vec<u8> {
        format!("{tag}-{i}").into_bytes()
    }

    /// Folding by f sets exactly the bits a filter of 1/f the size would have set for the
    /// same keys (a probe's position scales down with the bit count), so a folded filter
    /// answers as one built small: never "no" for a key inserted, and at the smaller
    /// filter's rate.
    #[test]
    fn a_folded_filter_is_the_filter_built_with_fewer_bits() {
        for factor in [2, 4, 5] {
            let mut whole = BloomFilter::new(FilterParams::new(20, 7).unwrap(), 6_400);
            let mut small = BloomFilter::new(FilterParams::new(20 / factor, 7).unwrap(), 6_400);
            for i in 0..6_400 {
                whole.insert(&key("in", i));
                small.insert(&key("in", i));
            }
            let folded = whole.fold(factor).unwrap();
            assert_eq!(folded.words, small.words, "factor {factor}");
            assert_eq!(folded.bit_count(), whole.bit_count() / u64::from(factor));
            assert_eq!(folded.len(), 6_400);
            assert_eq!(folded.hashes(), 7);
            assert!((0..6_400).all(|i| folded.contains(&key("in", i))));
            let rate = (0..50_000)
                .filter(|&i| folded.contains(&key("out", i)))
                .count() as f64
                / 50_000.0;
            let expected = folded.expected_false_positive_rate();
            assert_eq!(expected, whole.folded_false_positive_rate(factor));
            assert!(
                (rate - expected).abs() < 0.2 * expected,
                "factor {factor}: measured {rate}, expected {expected}"
            );
        }
    }

    /// Halving a word at a time sets the same bits as moving each bit on its own.
    #[test]
    fn halving_by_words_agrees_with_folding_bit_by_bit() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let words: Vec<u64> = (0..64)
            .map(|i| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                match i % 4 {
                    0 => state,
                    1 => state & state >> 7,
                    2 => u64::MAX,
                    _ => 1 << (i % 64),
                }
            })
            .collect();
        assert_eq!(halve(&words), fold_bit_by_bit(&words, 2));
        assert_eq!(halve(&halve(&halve(&words))), fold_bit_by_bit(&words, 8));
    }

    /// A filter folds only into whole words; `new_foldable` rounds its size so it can.
    #[test]
    fn folding_needs_a_factor_that_divides_the_words() {
        let odd = BloomFilter::new(FilterParams::new(10, 5).unwrap(), 6_400 + 7);
        assert_eq!(odd.words.len(), 1_002);
        assert!(odd.fold(2).is_ok());
        assert_eq!(
            odd.fold(4),
            Err(FilterError::CannotFold {
                bits: 1_002 * 64,
                factor: 4
            })
        );
        assert!(odd.fold(0).is_err());
        let foldable = BloomFilter::new_foldable(FilterParams::new(10, 5).unwrap(), 6_407, 4);
        assert_eq!(foldable.words.len(), 1_004);
        assert_eq!(foldable.fold(4).unwrap().words.len(), 251);
        assert_eq!(foldable.fold(1).unwrap(), foldable);
    }

    /// The first two bits a prefetch names are bits of the key's probe: set for every key
    /// inserted, and when either is clear the full probe says "no" too. With one hash the
    /// first bit stands for both.
    #[test]
    fn first_bits_agree_with_the_full_probe() {
        for hashes in [1, 2, 7] {
            let mut f = BloomFilter::new(FilterParams::new(10, hashes).unwrap(), 2_000);
            for i in 0..2_000 {
                f.insert(&key("in", i));
            }
            for i in 0..2_000 {
                let hash = KeyHash::of(&key("in", i));
                let bits = f.prefetch_first_bits(&hash);
                assert!(f.first_bits_set(&bits), "hashes {hashes}, key {i}");
            }
            let mut ruled_out = 0;
            for i in 0..20_000 {
                let hash = KeyHash::of(&key("out", i));
                if !f.first_bits_set(&f.prefetch_first_bits(&hash)) {
                    ruled_out += 1;
                    assert!(!f.contains_hash(&hash), "hashes {hashes}, key {i}");
                }
            }
            // About half the bits are clear at 10 bits a key, whatever the hash count: most
            // absent keys fail one of their first two bits.
            assert!(ruled_out > 10_000, "hashes {hashes}: {ruled_out} of 20000");
        }
    }
}
