//! A standalone Bloom filter library.
//!
//! - [`FilterParams`] picks bits per key and the number of hash functions from a target
//!   false-positive rate, the way ClickHouse's best-practice lookup table does, extended below
//!   the table's reach.
//! - [`BloomFilter`] is a classic (unblocked) Bloom filter over 64-bit words; [`KeyHash`] lets a
//!   caller hash a key once and probe any number of filters with that hash.
//! - [`BlockedBloomFilter`] keeps all of a key's probes in one 64-byte block (one cache miss
//!   a probe), with parameters from its own rule ([`BlockedParams`], [`blocked_rate`]).
//! - [`CountingBloomFilter`] supports removal with saturating 4-bit counters.
//! - [`RibbonFilter`] is built once from all its keys and takes about 26% fewer bits than a
//!   Bloom filter for the same rate (any rate from `2^-32` up to 1).
//! - [`allocate`] spreads one memory budget over groups of filters (the levels of an LSM tree)
//!   for the fewest false positives in all, by Monkey's rule; [`allocate_blended`] spends it
//!   to the bit, with a share of one group's filters a row up.
//!
//! This module depends on nothing else in the crate: it can be lifted out as it is. The
//! parameter rule, hashing scheme and serialized format are described in the repository's filter notes.
//!
//! ```
//! use bloomkv::filter::{BloomFilter, KeyHash};
//!
//! let mut seen = BloomFilter::with_capacity(10_000, 0.01)?; // 10 bits/key, 5 hashes
//! seen.insert(b"https://example.org/");
//! assert!(seen.contains(b"https://example.org/")); // never a false negative
//!
//! // Hash once, probe any number of filters of any size.
//! let hash = KeyHash::of(b"https://example.org/");
//! assert!(seen.contains_hash(&hash));
//!
//! // A checksummed byte form; any damage to it is an error, never a panic.
//! let again = BloomFilter::from_bytes(&seen.to_bytes())?;
//! assert_eq!(again, seen);
//! # Ok::<(), bloomkv::filter::FilterError>(())
//! ```

mod blocked;
mod bloom;
mod budget;
mod codec;
mod counting;
mod error;
mod hash;
mod huge_pages;
mod params;
mod ribbon;

pub use blocked::{
    blocked_rate, BlockedBloomFilter, BlockedParams, BLOCK_BITS, MAX_BLOCKED_HASHES,
    MIN_BLOCKED_TARGET,
};
pub use bloom::BloomFilter;
pub(crate) use bloom::FirstBits;
pub use budget::{
    allocate, allocate_blended, allocate_for_false_positives, expected_false_positives,
    memory_bits, FilterGroup, GroupFilters, MAX_ALLOCATED_BITS_PER_KEY,
};
pub use counting::CountingBloomFilter;
pub use error::{FilterError, Result};
pub(crate) use hash::splitmix64;
pub use hash::KeyHash;
pub(crate) use params::textbook_rate;
pub use params::{
    false_positive_factor, false_positives_saved_per_byte, ideal_bits_per_key, FilterParams,
    MAX_BITS_PER_KEY, MAX_HASHES,
};
pub use ribbon::{ribbon_bits_per_key, ribbon_rate_for_bits_per_key, RibbonFilter};
