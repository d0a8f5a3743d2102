//! A counting Bloom filter: 4-bit counters instead of bits, so keys can be removed.

use super::error::Result;
use super::hash::{KeyHash, ProbeSequence};
use super::params::FilterParams;

const COUNTERS_PER_WORD: u64 = 16;
const COUNTER_MAX: u64 = 15;

/// A Bloom filter whose cells are 4-bit saturating counters.
///
/// A counter that reached 15 stays at 15: it may stand for more insertions than it can count,
/// so decrementing it could drop a key still present to zero. Never decrementing a saturated
/// counter means removal can never cause a false negative; the price is that such a cell
/// stays set forever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountingBloomFilter {
    words: Vec<u64>,
    hashes: u32,
    key_count: u64,
}

impl CountingBloomFilter {
    /// Sized for `expected_keys` at the parameters' cells per key (four bits of memory each).
    pub fn new(params: FilterParams, expected_keys: u64) -> CountingBloomFilter {
        let cells = expected_keys
            .saturating_mul(params.bits_per_key() as u64)
            .max(COUNTERS_PER_WORD);
        CountingBloomFilter {
            words: vec![0; cells.div_ceil(COUNTERS_PER_WORD) as usize],
            hashes: params.hashes(),
            key_count: 0,
        }
    }

    /// Sized for `expected_keys` at `false_positive_rate`.
    pub fn with_capacity(expected_keys: u64, false_positive_rate: f64) -> Result<Self> {
        let params = FilterParams::for_false_positive_rate(false_positive_rate)?;
        Ok(Self::new(params, expected_keys))
    }

    fn cell_count(&self) -> u64 {
        self.words.len() as u64 * COUNTERS_PER_WORD
    }

    fn counter(&self, cell: u64) -> u64 {
        (self.words[(cell / COUNTERS_PER_WORD) as usize] >> ((cell % COUNTERS_PER_WORD) * 4)) & 0xf
    }

    fn add_to_counter(&mut self, cell: u64, delta: i8) {
        let shift = (cell % COUNTERS_PER_WORD) * 4;
        let word = &mut self.words[(cell / COUNTERS_PER_WORD) as usize];
        let value = (*word >> shift) & 0xf;
        let new = match delta {
            1 => (value + 1).min(COUNTER_MAX),
            _ if value == COUNTER_MAX || value == 0 => value,
            _ => value - 1,
        };
        *word = (*word & !(0xf << shift)) | (new << shift);
    }

    /// Adds a key.
    pub fn insert(&mut self, key: &[u8]) {
        let hash = KeyHash::of(key);
        for cell in hash.positions(ProbeSequence::CURRENT, self.hashes, self.cell_count()) {
            self.add_to_counter(cell, 1);
        }
        self.key_count += 1;
    }

    /// False: certainly absent. True: probably present.
    pub fn contains(&self, key: &[u8]) -> bool {
        let hash = KeyHash::of(key);
        hash.positions(ProbeSequence::CURRENT, self.hashes, self.cell_count())
            .all(|cell| self.counter(cell) != 0)
    }

    /// Removes a key inserted earlier. Returns false, changing nothing, when the filter says
    /// the key is certainly absent. Removing a key that was never inserted but collides with
    /// present keys (a false positive) can make those keys' counters too low: remove only
    /// keys you inserted.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        if !self.contains(key) {
            return false;
        }
        let hash = KeyHash::of(key);
        for cell in hash.positions(ProbeSequence::CURRENT, self.hashes, self.cell_count()) {
            self.add_to_counter(cell, -1);
        }
        self.key_count = self.key_count.saturating_sub(1);
        true
    }

    /// Keys inserted minus keys removed.
    pub fn len(&self) -> u64 {
        self.key_count
    }

    /// True when no key is held.
    pub fn is_empty(&self) -> bool {
        self.key_count == 0
    }

    /// Cells whose counter is saturated (these can never be cleared again).
    pub fn saturated_cells(&self) -> u64 {
        (0..self.cell_count())
            .filter(|&c| self.counter(c) == COUNTER_MAX)
            .count() as u64
    }

    /// Bytes of memory held by the counters.
    pub fn memory_bytes(&self) -> usize {
        self.words.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturated_counter_is_never_decremented() {
        let mut f = CountingBloomFilter::new(FilterParams::new(8, 3).unwrap(), 10);
        for _ in 0..20 {
            f.insert(b"hot");
        }
        assert!(f.saturated_cells() >= 1);
        for _ in 0..20 {
            assert!(f.remove(b"hot"));
        }
        // Saturated cells stay at 15, so the key still reads present: no false negative
        // for any other key that shares them.
        assert!(f.contains(b"hot"));
        assert_eq!(f.len(), 0);
    }
}
