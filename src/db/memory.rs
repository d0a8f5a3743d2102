//! The store's side of the memory governor (`crate::memory`): what a rebalance reads of the
//! tables, caches and counters, and how the targets it sets are applied. The caches are
//! resized at once; the filters' new limit is spent or folded to by the refit that follows
//! on the same background turn (`filter_memory`).

use std::sync::atomic::Ordering;

use super::{Inner, ReadState};
use crate::memory::{Counted, Given, Governor, MemoryRole, Reading, RoleMemory};
use crate::options::Options;

impl Inner {
    /// Reads the lookups since the last look and has the governor move memory where the
    /// rule says; resizes the caches to their new targets. Called on the background turn
    /// that refits the filters, which then spends a grown limit or folds filters into a
    /// shrunk one. Returns whether any target changed.
    pub(super) fn rebalance_memory(&self) -> bool {
        if !self.governor.moves() {
            return false;
        }
        // The caches shrink before the filters grow (the refit after this); a cache that
        // grows back may refill before the filters are folded: for a moment the two hold
        // more than their sum, never for long.
        let resize = |targets: &[u64; 4]| {
            if let Some(cache) = self.own_block_cache() {
                cache.set_capacity(targets[MemoryRole::BlockCache as usize]);
            }
            if let Some(cache) = &self.table_env.index_cache {
                cache.set_capacity(targets[MemoryRole::IndexPartitions as usize]);
            }
        };
        (self.governor.rebalance(&self.memory_reading(), resize)).is_some()
    }

    /// What the governor weighs: the counts since the open, the live tables' keys, index
    /// partitions and whole filters, every keyspace's.
    fn memory_reading(&self) -> Reading {
        let mut reading = Reading::default();
        let mut partitions = 0u64;
        for t in self
            .read_state()
            .trees
            .iter()
            .flat_map(|t| t.version.tables())
        {
            reading.keys += t.meta.entries;
            partitions += t.table.cached_index_partitions() as u64;
            reading.whole_filters += t.table.whole_filter_bytes();
        }
        // Partitions are sized by what the index cache holds on average: a partition is cut
        // at `index_partition_size` bytes before compression, so they differ little.
        reading.index_partitions = (self.table_env.index_cache.as_ref())
            .map(|cache| cache.stats())
            .filter(|cached| cached.blocks > 0)
            .map(|cached| partitions * cached.bytes.div_ceil(cached.blocks));
        let counters = self.table_env.counters.snapshot();
        let cache = self
            .own_block_cache()
            .map(|c| c.stats())
            .unwrap_or_default();
        reading.cache_hit_rate = cache.hit_rate().unwrap_or(0.0);
        reading.counted = Counted {
            lookups: (self.table_env.counters.table_lookups).load(Ordering::Relaxed),
            cache_hits: cache.hits,
            // Block reads a filter did not answer for: its false positives, and the reads of
            // tables whose filter is dropped (which a present key's may be too: the cache's
            // 5% rule bounds what that misjudgement can cost).
            false_positives: (counters.data_block_reads)
                .saturating_sub(counters.filter_true_positives),
        };
        reading
    }

    /// The block cache when the store owns it: a shared one serves other stores too, and is
    /// not this store's to resize.
    fn own_block_cache(&self) -> Option<&crate::sstable::BlockCache> {
        (self.table_env.block_cache.as_deref()).filter(|_| self.options.block_cache.is_none())
    }

    /// Every role's memory as `Stats::memory` reports it, from `state`, whose filters take
    /// `filter_bytes` (prefix filters included).
    pub(super) fn memory_roles(&self, state: &ReadState, filter_bytes: u64) -> Vec<RoleMemory> {
        let memtables: u64 = (state.trees.iter())
            .flat_map(|t| std::iter::once(&t.mem).chain(&t.immutable))
            .map(|m| m.approximate_bytes() as u64)
            .sum();
        self.governor.roles(|role| match role {
            MemoryRole::Memtables => memtables,
            MemoryRole::BlockCache => self.own_block_cache().map_or(0, |c| c.stats().bytes),
            MemoryRole::IndexPartitions => {
                (self.table_env.index_cache.as_ref()).map_or(0, |c| c.stats().bytes)
            }
            MemoryRole::Filters => filter_bytes,
        })
    }
}

/// The governor for a store opened with `options`, whose own block cache (if any: `None` for
/// none or a shared one) and index cache have the sizes given.
pub(super) fn governor(
    options: &Options,
    own_block_cache: Option<u64>,
    index_cache: Option<u64>,
) -> Governor {
    let memtables = (options.memtable_size as u64)
        .saturating_mul(1 + options.tuning.max_immutable_memtables as u64);
    Governor::new(Given {
        memtables,
        block_cache: own_block_cache,
        index_cache,
        filters: options.tuning.filter_memory_limit,
        follows_reads: options.memory_follows_reads && options.tuning.filter_memory_follows_lookups,
    })
}
