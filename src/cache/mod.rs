//! The caches of the read path, all bounded and all shared by every table of a store:
//!
//! - [`BlockCache`](crate::BlockCache): data blocks already read, checksum-verified, decompressed and parsed,
//!   bounded in bytes. A hit costs a hash-table probe: no read, no copy, no crc.
//! - The index cache: the same cache over index partitions of two-level indexes, bounded by
//!   `Options::index_cache_size`, apart from data blocks so that scans never push them out.
//! - [`TableCache`]: open table files, bounded in number (`Options::max_open_files`). Filters
//!   and indexes (their top levels) of live tables stay in memory whatever this cache holds;
//!   only the file descriptor (or memory map) of a table is opened on demand and closed when
//!   least used.
//!
//! All are built on `quick_cache`, a sharded cache whose eviction (a Clock-PRO / S3-FIFO
//! variant) keeps entries that were hit more than once ahead of entries seen once, so a long
//! scan cannot flush the hot blocks. `docs/design.md`, "Caches", explains the choices.

mod block;
mod hash;
mod table;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use block::{BlockCacheOf, BlockCacheStats, CachedBlock};
pub use table::{TableCache, TableCacheStats};

/// A cache's eviction hook: counts evictions, and holds the evicted values until the shard
/// lock is released, so dropping them (freeing a block, closing a file) happens outside it.
struct CountEvictions(Arc<AtomicU64>);

impl Clone for CountEvictions {
    fn clone(&self) -> Self {
        CountEvictions(Arc::clone(&self.0))
    }
}

impl<K, V> quick_cache::Lifecycle<K, V> for CountEvictions {
    type RequestState = Vec<V>;

    fn begin_request(&self) -> Self::RequestState {
        Vec::new()
    }

    fn on_evict(&self, evicted: &mut Self::RequestState, _key: K, value: V) {
        self.0.fetch_add(1, Ordering::Relaxed);
        evicted.push(value);
    }
}

/// A process-wide unique number for each table reader opened. Cache keys use it rather than
/// the file number, so that two stores sharing one block cache never see each other's blocks,
/// and a table reopened after a repair never sees stale blocks.
pub fn next_table_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
