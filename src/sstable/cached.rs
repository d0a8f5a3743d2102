//! The block caches tables read through: one of data blocks, which a user may size or share
//! between stores, and one of index partitions.

use super::{Block, BlockIndex};
use crate::cache::{BlockCacheOf, CachedBlock};

/// A sharded cache of decoded data blocks, bounded in bytes. Share one between stores by
/// passing the same `Arc<BlockCache>` to each store's `Options::block_cache`.
pub type BlockCache = BlockCacheOf<Block>;

/// The cache of index partitions.
pub(crate) type IndexCache = BlockCacheOf<BlockIndex>;

impl CachedBlock for Block {
    fn memory_bytes(&self) -> usize {
        Block::memory_bytes(self)
    }
}

impl CachedBlock for BlockIndex {
    fn memory_bytes(&self) -> usize {
        BlockIndex::memory_bytes(self)
    }
}

impl BlockCacheOf<Block> {
    /// A cache holding at most `capacity_bytes` of data blocks.
    pub fn new(capacity_bytes: u64) -> BlockCache {
        // 4 KiB blocks are the default.
        BlockCache::with_capacity(capacity_bytes, capacity_bytes / 4096)
    }
}

impl BlockCacheOf<BlockIndex> {
    /// A cache holding at most `capacity_bytes` of index partitions. The estimate of how many
    /// it will hold, which sizes the eviction's memory of blocks it let go, stays small: the
    /// cache is a share of the machine's memory and holds a few thousand partitions of 4 KiB
    /// at 100M keys.
    pub(crate) fn for_index(capacity_bytes: u64) -> IndexCache {
        IndexCache::with_capacity(capacity_bytes, (capacity_bytes / 4096).min(1 << 14))
    }
}
