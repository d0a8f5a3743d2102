//! The filter block: one Bloom filter for the whole table, over its distinct user keys.
//!
//! The block's contents are exactly [`BloomFilter::to_bytes`], which carries its own header
//! and checksum inside the block's trailer checksum.

use std::path::Path;

use crate::error::{Error, Result};
use crate::filter::{
    ribbon_rate_for_bits_per_key, BlockedBloomFilter, BlockedParams, BloomFilter, FilterParams,
    KeyHash, RibbonFilter, BLOCK_BITS,
};
use crate::sstable::filter::unit::UnitFilter;
use crate::sstable::format::BlockHandle;

/// The largest factor a table's filter can be folded by in memory (and any factor dividing
/// it): its bit count is a multiple of 64 times this. A store short of filter memory folds
/// filters rather than dropping them (`docs/design.md`, "Filter memory").
pub const FOLD_LIMIT: u32 = 8;

/// Filters of at least this many bits are rounded up to a multiple of `64 * FOLD_LIMIT` bits,
/// which adds at most 1/64 to them; smaller ones to whole words only, as the rounding would
/// weigh on their rate (and they can only fold by what divides their word count).
pub const FOLDABLE_BITS: u64 = 64 * 64 * FOLD_LIMIT as u64;

/// A filter sized for exactly `hashes.len()` keys (rounded up as [`FOLDABLE_BITS`] says),
/// holding all of them.
pub fn build(params: FilterParams, hashes: &[KeyHash]) -> BloomFilter {
    let keys = hashes.len() as u64;
    let mut filter = match keys.saturating_mul(u64::from(params.bits_per_key())) {
        bits if bits >= FOLDABLE_BITS => BloomFilter::new_foldable(params, keys, FOLD_LIMIT),
        _ => BloomFilter::new(params, keys),
    };
    for h in hashes {
        filter.insert_hash(h);
    }
    filter
}

/// A filter in the cache-local layout sized for exactly `hashes.len()` keys at `params`'
/// bits per key, with the hashes that give the lowest rate at those bits divided by
/// `fold_target` (the fold the store means to keep it at: [`BlockedParams::for_bits_per_key`]),
/// its blocks rounded up as [`FOLDABLE_BLOCKED_BITS`] says.
pub fn build_blocked(
    params: FilterParams,
    hashes: &[KeyHash],
    fold_target: u32,
) -> BlockedBloomFilter {
    let keys = hashes.len() as u64;
    let bits = params.bits_per_key();
    let held_bits = (bits / fold_target.max(1)).max(1);
    let best = BlockedParams::for_bits_per_key(held_bits)
        .and_then(|held| BlockedParams::new(bits, held.hashes()))
        .expect("a table's bits per key are within the blocked layout's range");
    let mut filter = match keys.saturating_mul(u64::from(bits)) {
        b if b >= FOLDABLE_BLOCKED_BITS => BlockedBloomFilter::new_foldable(best, keys, FOLD_LIMIT),
        _ => BlockedBloomFilter::new(best, keys),
    };
    for h in hashes {
        filter.insert_hash(h);
    }
    filter
}

/// Tables of fewer distinct keys than this get a Bloom filter where a Ribbon filter is asked
/// for: a Ribbon filter spans at least two blocks of 64 slots, more than they need.
pub const MIN_RIBBON_KEYS: usize = 128;

/// A Ribbon filter over `hashes` that spends the memory `params` gives a Bloom filter,
/// divided by `fold_target` (a Ribbon filter does not fold, so it is written at the memory
/// the store means to hold), at the lowest rate those bits buy; `None` for a table of fewer
/// than [`MIN_RIBBON_KEYS`] keys, or bits that buy no rate below 1/2.
pub fn build_ribbon(
    params: FilterParams,
    hashes: &[KeyHash],
    fold_target: u32,
) -> Option<RibbonFilter> {
    if hashes.len() < MIN_RIBBON_KEYS {
        return None;
    }
    let bits = f64::from(params.bits_per_key()) / f64::from(fold_target.max(1));
    let rate = ribbon_rate_for_bits_per_key(bits)?;
    RibbonFilter::from_key_hashes(hashes, rate).ok()
}

/// Cache-local filters of at least this many bits are rounded up to a multiple of
/// `FOLD_LIMIT` blocks, which adds at most 1/64 to them, as [`FOLDABLE_BITS`] does for the
/// standard layout's words.
pub const FOLDABLE_BLOCKED_BITS: u64 = 64 * BLOCK_BITS * FOLD_LIMIT as u64;

/// Decodes a filter block's contents, in either layout.
pub fn decode(path: &Path, handle: BlockHandle, contents: &[u8]) -> Result<UnitFilter> {
    UnitFilter::from_bytes(contents).map_err(|e| {
        Error::corruption(
            path,
            Some(handle.offset),
            format!("filter block at offset {}: {e}", handle.offset),
        )
    })
}
