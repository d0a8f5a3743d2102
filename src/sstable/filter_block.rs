//! The filter block: one Bloom filter for the whole table, over its distinct user keys.
//!
//! The block's contents are exactly [`BloomFilter::to_bytes`], which carries its own header
//! and checksum inside the block's trailer checksum.

use std::path::Path;

use super::format::BlockHandle;
use crate::error::{Error, Result};
use crate::filter::{BloomFilter, FilterParams, KeyHash};

/// A filter sized for exactly `hashes.len()` keys, holding all of them.
pub fn build(params: FilterParams, hashes: &[KeyHash]) -> BloomFilter {
    let mut filter = BloomFilter::new(params, hashes.len() as u64);
    for h in hashes {
        filter.insert_hash(h);
    }
    filter
}

/// Decodes a filter block's contents.
pub fn decode(path: &Path, handle: BlockHandle, contents: &[u8]) -> Result<BloomFilter> {
    BloomFilter::from_bytes(contents).map_err(|e| {
        Error::corruption(
            path,
            Some(handle.offset),
            format!("filter block at offset {}: {e}", handle.offset),
        )
    })
}
