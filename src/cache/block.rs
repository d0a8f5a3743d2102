//! A block cache: decoded blocks keyed by (table id, block offset), bounded in bytes, of any
//! kind that knows its memory (`CachedBlock`). A store keeps two (`sstable::BlockCache` and
//! `sstable::IndexCache`): one of data blocks, and one of index partitions (two-level
//! indexes), so that a scan's data blocks never push out the index that every lookup needs
//! first.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quick_cache::sync::Cache;
use quick_cache::{OptionsBuilder, Weighter};

use super::CountEvictions;

/// Which block: the reader's unique table id and the block's offset in the file.
type BlockKey = (u64, u64);

/// What a cache can hold: a decoded block that knows the memory it takes.
pub trait CachedBlock: Send + Sync + 'static {
    /// Bytes of memory the block holds.
    fn memory_bytes(&self) -> usize;
}

/// Bytes a cached block is charged: its contents plus the bookkeeping around it (key, `Arc`
/// header, the cache's slot), so that a cache of many small blocks still respects its bound.
fn charge<V: CachedBlock>(block: &V) -> u64 {
    block.memory_bytes() as u64 + 64
}

#[derive(Clone, Copy)]
struct BlockWeighter;

impl<V: CachedBlock> Weighter<BlockKey, Arc<V>> for BlockWeighter {
    fn weight(&self, _key: &BlockKey, block: &Arc<V>) -> u64 {
        charge(block.as_ref())
    }
}

/// What a block cache has done since it was made (a cache shared by several stores counts
/// for all of them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockCacheStats {
    /// Bytes the cache may hold.
    pub capacity: u64,
    /// Bytes it holds now.
    pub bytes: u64,
    /// Blocks it holds now.
    pub blocks: u64,
    pub hits: u64,
    pub misses: u64,
    pub inserts: u64,
    pub evictions: u64,
}

impl BlockCacheStats {
    /// Hits over lookups (`None` before any lookup).
    pub fn hit_rate(&self) -> Option<f64> {
        let lookups = self.hits + self.misses;
        (lookups > 0).then(|| self.hits as f64 / lookups as f64)
    }
}

/// A sharded cache of decoded blocks of kind `V`, bounded in bytes.
pub struct BlockCacheOf<V: CachedBlock> {
    cache: Cache<BlockKey, Arc<V>, BlockWeighter, super::hash::NumberHashBuilder, CountEvictions>,
    capacity: AtomicU64,
    /// The largest charge kept: the main queue's share of one shard.
    largest_block: u64,
    hits: AtomicU64,
    misses: AtomicU64,
    inserts: AtomicU64,
    evictions: Arc<AtomicU64>,
}

impl<V: CachedBlock> std::fmt::Debug for BlockCacheOf<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity.load(Ordering::Relaxed))
            .field("bytes", &self.cache.weight())
            .finish()
    }
}

impl<V: CachedBlock> BlockCacheOf<V> {
    /// A cache holding at most `capacity_bytes` of blocks, about `estimated_blocks` of them.
    /// Shards: enough that readers on different cores rarely meet on one lock (quick_cache
    /// halves them while a shard would hold fewer than 32 blocks).
    pub(crate) fn with_capacity(capacity_bytes: u64, estimated_blocks: u64) -> BlockCacheOf<V> {
        let evictions = Arc::new(AtomicU64::new(0));
        let estimated_blocks = estimated_blocks.clamp(16, 1 << 24) as usize;
        let shards = (std::thread::available_parallelism().map_or(4, |n| n.get()) * 4).max(4);
        let options = OptionsBuilder::new()
            .estimated_items_capacity(estimated_blocks)
            .weight_capacity(capacity_bytes.max(1))
            .shards(shards)
            // A tenth of each shard for blocks seen once (S3-FIFO's small queue): at quick_cache's
            // default of 3%, a small cache's probation queue holds less than one block, and a
            // scan's blocks then push hot ones out.
            .hot_allocation(0.9)
            .build()
            .expect("estimated capacity and weight capacity are set");
        let cache = Cache::with_options(
            options,
            BlockWeighter,
            super::hash::NumberHashBuilder::default(),
            CountEvictions(Arc::clone(&evictions)),
        );
        BlockCacheOf {
            largest_block: cache.shard_capacity() / 10 * 9,
            cache,
            capacity: AtomicU64::new(capacity_bytes),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            evictions,
        }
    }

    /// The block at `offset` of table `table_id`, if cached.
    pub fn get(&self, table_id: u64, offset: u64) -> Option<Arc<V>> {
        let found = self.cache.get(&(table_id, offset));
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Whether the block at `offset` of table `table_id` is cached; counts nothing, and
    /// leaves the block's place in the cache as it was.
    pub fn contains(&self, table_id: u64, offset: u64) -> bool {
        self.cache.peek(&(table_id, offset)).is_some()
    }

    /// Caches a block just read and verified. A block too big for one shard's share of the
    /// cache is not kept (nor counted): it would only push out everything else.
    pub fn insert(&self, table_id: u64, offset: u64, block: Arc<V>) {
        if charge(block.as_ref()) > self.largest_block {
            return;
        }
        self.inserts.fetch_add(1, Ordering::Relaxed);
        self.cache.insert((table_id, offset), block);
    }

    /// Drops the block at `offset` of table `table_id`, if cached.
    pub(crate) fn remove(&self, table_id: u64, offset: u64) {
        self.cache.remove(&(table_id, offset));
    }

    /// Drops every block (benchmarks measure cold reads this way).
    pub fn clear(&self) {
        self.cache.clear();
    }

    /// The bytes the cache may hold.
    pub fn capacity(&self) -> u64 {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Lets the cache hold `bytes` from now on (evicting down to them when it holds more).
    /// The largest block it takes stays what its first capacity set.
    pub(crate) fn set_capacity(&self, bytes: u64) {
        self.cache.set_capacity(bytes.max(1));
        self.capacity.store(bytes, Ordering::Relaxed);
    }

    pub fn stats(&self) -> BlockCacheStats {
        BlockCacheStats {
            capacity: self.capacity.load(Ordering::Relaxed),
            bytes: self.cache.weight(),
            blocks: self.cache.len() as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            inserts: self.inserts.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}
