//! One unit of a table's filter (the whole filter, or a partition) as a reader holds it, of
//! one of three kinds: a Bloom filter in the standard layout; one in the cache-local layout
//! that keeps all of a key's probes in one 64-byte block (`Options::cache_local_filters`;
//! `docs/filter.md`, "Cache-local layout"); or a Ribbon filter, for long-lived tables
//! (`Options::ribbon_filters_from_level`). The serialized form names which (its magic, and a
//! Bloom filter's hash algorithm: 3 for the cache-local layout), so tables of every kind mix
//! in one store.

use crate::filter::{
    BlockedBloomFilter, BloomFilter, FilterError, FirstBits, KeyHash, RibbonFilter,
};

/// The kind of a table's filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FilterKind {
    /// A Bloom filter whose probes fall anywhere in its bits.
    Bloom,
    /// A Bloom filter whose probes of a key all fall in one 512-bit block.
    CacheLocalBloom,
    /// A Ribbon filter: the same rate as a Bloom filter in about 26% fewer bits.
    Ribbon,
}

impl FilterKind {
    /// The kind's name as `kvtool stats` prints it.
    pub fn name(self) -> &'static str {
        match self {
            FilterKind::Bloom => "bloom",
            FilterKind::CacheLocalBloom => "cache-local-bloom",
            FilterKind::Ribbon => "ribbon",
        }
    }
}

/// A unit's filter, of one of three kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitFilter {
    /// The standard layout: a key's probes anywhere in the bit array.
    Standard(BloomFilter),
    /// The cache-local layout: a key's probes all in one 512-bit block.
    Blocked(BlockedBloomFilter),
    /// A Ribbon filter; it does not fold.
    Ribbon(RibbonFilter),
}

/// The bits a probe of one key tests first, fetched towards the CPU cache ahead of the test
/// ([`UnitFilter::prefetch`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Prefetched {
    /// A standard filter's first two bits.
    First(FirstBits),
    /// A cache-local filter's block, or the first words of a Ribbon filter's row.
    Block,
}

impl UnitFilter {
    /// Decodes a serialized filter of any kind.
    pub fn from_bytes(bytes: &[u8]) -> Result<UnitFilter, FilterError> {
        if RibbonFilter::is_serialized(bytes) {
            return RibbonFilter::from_bytes(bytes).map(UnitFilter::Ribbon);
        }
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
            UnitFilter::Ribbon(f) => f.to_bytes(),
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
            UnitFilter::Ribbon(f) => f.contains_hash(hash),
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
            UnitFilter::Ribbon(f) => {
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
    /// [`BlockedBloomFilter::fold`]); a Ribbon filter folds by 1 only.
    pub fn fold(&self, factor: u32) -> Result<UnitFilter, FilterError> {
        match self {
            UnitFilter::Standard(f) => f.fold(factor).map(UnitFilter::Standard),
            UnitFilter::Blocked(f) => f.fold(factor).map(UnitFilter::Blocked),
            UnitFilter::Ribbon(_) if factor == 1 => Ok(self.clone()),
            UnitFilter::Ribbon(f) => Err(FilterError::CannotFold {
                bits: f.memory_bytes() as u64 * 8,
                factor,
            }),
        }
    }

    /// Bytes of its bit array.
    pub fn memory_bytes(&self) -> usize {
        match self {
            UnitFilter::Standard(f) => f.memory_bytes(),
            UnitFilter::Blocked(f) => f.memory_bytes(),
            UnitFilter::Ribbon(f) => f.memory_bytes(),
        }
    }

    /// A Bloom filter's bits per key and hashes (its bits per key divided by its fold, when
    /// folded); `None` for a Ribbon filter.
    pub fn bloom_params(&self) -> Option<(u32, u32)> {
        match self {
            UnitFilter::Standard(f) => Some((f.bits_per_key(), f.hashes())),
            UnitFilter::Blocked(f) => Some((f.bits_per_key(), f.hashes())),
            UnitFilter::Ribbon(_) => None,
        }
    }

    /// Bits held per key inserted.
    pub fn held_bits_per_key(&self) -> f64 {
        (self.memory_bytes() * 8) as f64 / self.len().max(1) as f64
    }

    /// Keys inserted.
    pub fn len(&self) -> u64 {
        match self {
            UnitFilter::Standard(f) => f.len(),
            UnitFilter::Blocked(f) => f.len(),
            UnitFilter::Ribbon(f) => f.key_count(),
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
            UnitFilter::Ribbon(f) => f.predicted_false_positive_rate(),
        }
    }

    /// The rate its layout's rule predicts for its parameters filled to capacity: the
    /// ClickHouse-based rule for a standard filter, [`crate::filter::blocked_rate`] for a
    /// cache-local one, its columns' for a Ribbon filter.
    pub fn predicted_false_positive_rate(&self) -> f64 {
        match self {
            UnitFilter::Standard(f) => f.params().predicted_false_positive_rate(),
            UnitFilter::Blocked(f) => f.params().predicted_false_positive_rate(),
            UnitFilter::Ribbon(f) => f.predicted_false_positive_rate(),
        }
    }

    /// The filter's kind.
    pub fn kind(&self) -> FilterKind {
        match self {
            UnitFilter::Standard(_) => FilterKind::Bloom,
            UnitFilter::Blocked(_) => FilterKind::CacheLocalBloom,
            UnitFilter::Ribbon(_) => FilterKind::Ribbon,
        }
    }

    /// The standard filter, when it is one.
    pub fn as_standard(&self) -> Option<&BloomFilter> {
        match self {
            UnitFilter::Standard(f) => Some(f),
            UnitFilter::Blocked(_) | UnitFilter::Ribbon(_) => None,
        }
    }
}
