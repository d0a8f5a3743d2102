//! One unit of a table's filter (the whole filter, or a partition) as a reader holds it: the
//! standard layout, or the cache-local one that keeps all of a key's probes in one 64-byte
//! block (`Options::cache_local_filters`; `docs/filter.md`, "Cache-local layout"). The
//! serialized header names which (hash algorithm 3 for the cache-local one), so tables of
//! both kinds mix in one store.

use crate::filter::{BlockedBloomFilter, BloomFilter, FilterError, FirstBits, KeyHash};

/// A unit's filter, in one of the two layouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitFilter {
    /// The standard layout: a key's probes anywhere in the bit array.
    Standard(BloomFilter),
    /// The cache-local layout: a key's probes all in one 512-bit block.
    Blocked(BlockedBloomFilter),
}

/// The bits a probe of one key tests first, fetched towards the CPU cache ahead of the test
/// ([`UnitFilter::prefetch`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Prefetched {
    /// A standard filter's first two bits.
    First(FirstBits),
    /// A cache-local filter's block: every bit the probe tests is in it.
    Block,
}

impl UnitFilter {
    /// Decodes a serialized filter of either layout.
    pub fn from_bytes(bytes: &[u8]) -> Result<UnitFilter, FilterError> {
        match BloomFilter::serialized_is_blocked(bytes) {
            Some(true) => BlockedBloomFilter::from_bytes(bytes).map(UnitFilter::Blocked),
            _ => BloomFilter::from_bytes(bytes).map(UnitFilter::Standard),
        }
    }

    /// The serialized form, its header naming its layout.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            UnitFilter::Standard(f) => f.to_bytes(),
            UnitFilter::Blocked(f) => f.to_bytes(),
        }
    }

    /// False: `key` was never inserted. True: it probably was.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(&KeyHash::of(key))
    }

    /// False: the key of `hash` was never inserted. True: it probably was.
    #[inline]
    pub fn contains_hash(&self, hash: &KeyHash) -> bool {
        match self {
            UnitFilter::Standard(f) => f.contains_hash(hash),
            UnitFilter::Blocked(f) => f.contains_hash(hash),
        }
    }

    /// Starts the memory loads a probe of `hash` needs first (see
    /// [`BloomFilter::prefetch`]).
    pub(crate) fn prefetch(&self, hash: &KeyHash) -> Prefetched {
        match self {
            UnitFilter::Standard(f) => Prefetched::First(f.prefetch_first_bits(hash)),
            UnitFilter::Blocked(f) => {
                f.prefetch(hash);
                Prefetched::Block
            }
        }
    }

    /// Whether the key of `hash`, prefetched as `bits`, may have been inserted: a standard
    /// filter tests its first two bits without a branch before the rest.
    #[inline]
    pub(crate) fn contains_prefetched(&self, hash: &KeyHash, bits: &Prefetched) -> bool {
        match (self, bits) {
            (UnitFilter::Standard(f), Prefetched::First(first)) => {
                f.first_bits_set(first) && f.contains_hash(hash)
            }
            _ => self.contains_hash(hash),
        }
    }

    /// The filter folded to `1 / factor` of its bits (see [`BloomFilter::fold`] and
    /// [`BlockedBloomFilter::fold`]).
    pub fn fold(&self, factor: u32) -> Result<UnitFilter, FilterError> {
        match self {
            UnitFilter::Standard(f) => f.fold(factor).map(UnitFilter::Standard),
            UnitFilter::Blocked(f) => f.fold(factor).map(UnitFilter::Blocked),
        }
    }

    /// Bytes of its bit array.
    pub fn memory_bytes(&self) -> usize {
        match self {
            UnitFilter::Standard(f) => f.memory_bytes(),
            UnitFilter::Blocked(f) => f.memory_bytes(),
        }
    }

    /// The bits per key it was sized with (divided by its fold, when folded).
    pub fn bits_per_key(&self) -> u32 {
        match self {
            UnitFilter::Standard(f) => f.bits_per_key(),
            UnitFilter::Blocked(f) => f.bits_per_key(),
        }
    }

    /// Probes a key sets and tests.
    pub fn hashes(&self) -> u32 {
        match self {
            UnitFilter::Standard(f) => f.hashes(),
            UnitFilter::Blocked(f) => f.hashes(),
        }
    }

    /// Keys inserted.
    pub fn len(&self) -> u64 {
        match self {
            UnitFilter::Standard(f) => f.len(),
            UnitFilter::Blocked(f) => f.len(),
        }
    }

    /// Whether no key was inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rate the filter's own rule predicts for the keys it holds over its bits.
    pub fn expected_false_positive_rate(&self) -> f64 {
        match self {
            UnitFilter::Standard(f) => f.expected_false_positive_rate(),
            UnitFilter::Blocked(f) => f.expected_false_positive_rate(),
        }
    }

    /// The rate its layout's rule predicts for its parameters filled to capacity: the
    /// ClickHouse-based rule for a standard filter, [`crate::filter::blocked_rate`] for a
    /// cache-local one.
    pub fn predicted_false_positive_rate(&self) -> f64 {
        match self {
            UnitFilter::Standard(f) => f.params().predicted_false_positive_rate(),
            UnitFilter::Blocked(f) => f.params().predicted_false_positive_rate(),
        }
    }

    /// Whether the filter is in the cache-local layout.
    pub fn is_blocked(&self) -> bool {
        matches!(self, UnitFilter::Blocked(_))
    }

    /// The standard filter, when it is one.
    pub fn as_standard(&self) -> Option<&BloomFilter> {
        match self {
            UnitFilter::Standard(f) => Some(f),
            UnitFilter::Blocked(_) => None,
        }
    }
}
