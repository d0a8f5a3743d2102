//! A standalone Bloom filter library.
//!
//! - [`FilterParams`] picks bits per key and the number of hash functions from a target
//!   false-positive rate, the way ClickHouse's best-practice lookup table does, extended below
//!   the table's reach.
//! - [`BloomFilter`] is a classic (unblocked) Bloom filter over 64-bit words; [`KeyHash`] lets a
//!   caller hash a key once and probe any number of filters with that hash.
//! - [`CountingBloomFilter`] supports removal with saturating 4-bit counters.
//!
//! This module depends on nothing else in the crate: it can be lifted out as it is.

mod bloom;
mod codec;
mod counting;
mod error;
mod hash;
mod params;

pub use bloom::BloomFilter;
pub use counting::CountingBloomFilter;
pub use error::{FilterError, Result};
pub use hash::KeyHash;
pub use params::{FilterParams, MAX_BITS_PER_KEY, MAX_HASHES};
