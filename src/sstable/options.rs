//! How a table is built: block size, restart interval, filter policy, compression.

use super::compression::Compression;
use crate::error::{Error, Result};
use crate::filter::FilterParams;

/// Whether tables carry a Bloom filter, and how selective it is.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum FilterPolicy {
    /// No filter block: every lookup inside a table's key range reads a data block.
    Disabled,
    /// A filter over the table's distinct user keys, sized for this false-positive rate.
    FalsePositiveRate(f64),
    /// One filter-memory budget for a whole store: an average of this many bits per key,
    /// aimed at over every table (each table keeps what it was given when it was written, so
    /// the store's average drifts from it as the tree changes shape; no level gets more than
    /// [`crate::filter::MAX_ALLOCATED_BITS_PER_KEY`]). The store spreads it across levels by Monkey's rule
    /// ([`crate::filter::allocate`]): the small upper levels, and level 0's tables, each
    /// probed by lookups, get more bits per key, the large last level fewer. Each table is
    /// written with its level's share as the tree stands when the table is written. A table
    /// on its own (`TableBuilder`) cannot take a budget.
    BitsPerKeyBudget(f64),
    /// One filter-memory budget for a whole store, given as the wasted reads it may cost: the
    /// expected data-block reads of one absent-key lookup that find nothing (the sum of the
    /// false-positive rates of the filters it probes). The store gives the tree the least
    /// memory whose Monkey allocation meets it ([`crate::filter::allocate_for_false_positives`]),
    /// as the tree stands when each table is written; otherwise as `BitsPerKeyBudget`.
    WastedReadsTarget(f64),
    /// Exactly these parameters: what a store's budget comes to for one table.
    Params(FilterParams),
}

impl Default for FilterPolicy {
    fn default() -> FilterPolicy {
        FilterPolicy::FalsePositiveRate(0.01)
    }
}

impl FilterPolicy {
    /// Whether the policy is a store-wide budget, spread over the levels.
    pub fn is_budget(&self) -> bool {
        matches!(
            self,
            FilterPolicy::BitsPerKeyBudget(_) | FilterPolicy::WastedReadsTarget(_)
        )
    }

    /// The filter parameters the policy asks for; `None` when disabled.
    pub fn params(&self) -> Result<Option<FilterParams>> {
        match *self {
            FilterPolicy::Disabled => Ok(None),
            FilterPolicy::FalsePositiveRate(p) => FilterParams::for_false_positive_rate(p)
                .map(Some)
                .map_err(|e| Error::InvalidArgument(format!("filter policy: {e}"))),
            FilterPolicy::Params(params) => Ok(Some(params)),
            FilterPolicy::BitsPerKeyBudget(_) | FilterPolicy::WastedReadsTarget(_) => {
                Err(Error::InvalidArgument(
                    "filter policy: a budget (bits per key or wasted reads) is spread over a \
                     store's levels; a single table needs a rate or parameters"
                        .into(),
                ))
            }
        }
    }

    /// Checks the policy's numbers: a rate within (0, 1), a budget a store can be given.
    pub fn validate(&self) -> Result<()> {
        match *self {
            FilterPolicy::FalsePositiveRate(p) => {
                FilterParams::for_false_positive_rate(p)?;
            }
            FilterPolicy::BitsPerKeyBudget(bits) => {
                crate::filter::allocate(&[], bits)?;
            }
            FilterPolicy::WastedReadsTarget(reads) => {
                crate::filter::allocate_for_false_positives(&[], reads)?;
            }
            FilterPolicy::Disabled | FilterPolicy::Params(_) => {}
        }
        Ok(())
    }
}

/// Largest block size accepted: block offsets inside a block are 32-bit.
pub const MAX_BLOCK_SIZE: usize = 64 << 20;

/// Options for writing a table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableOptions {
    /// Target size of a data block's contents; a block is closed once it reaches this size.
    pub block_size: usize,
    /// A key is stored whole (not prefix-compressed) every this many entries of a data block.
    /// The index block has its own interval, 16, fixed by the format.
    pub restart_interval: usize,
    pub filter_policy: FilterPolicy,
    /// How data and index blocks are compressed (each one stored raw when compression does not
    /// save at least 1/8 of it).
    pub compression: Compression,
    /// Bytes of index per index partition: an index that grows past one is written as
    /// partitions under a top-level index (format version 4). 0 writes one index block.
    pub index_partition_size: usize,
    /// Bytes of filter per filter partition: a filter that would be at least two is written
    /// as partitions of about this size under a top level (`docs/format.md`, "Partitioned
    /// filter"), which a store's filter memory keeps apart. 0 (the default) writes one
    /// filter.
    pub filter_partition_size: usize,
    /// Writes a whole filter in the cache-local layout: all of a key's probes in one 64-byte
    /// block, with the bits per key the policy gives and the hashes that give the lowest
    /// rate at them (`docs/filter.md`, "Cache-local layout"). Partitions stay standard.
    pub cache_local_filter: bool,
    /// Writes a whole filter as a Ribbon filter (`docs/filter.md`, "Ribbon filters"), in the
    /// memory the policy gives a Bloom filter (divided by `filter_fold_target`) at the lower
    /// rate it buys; tables of fewer than 128 keys keep a Bloom filter. A partitioned filter's
    /// partitions are all Ribbon filters when each holds at least 128 keys. Before
    /// `cache_local_filter`.
    pub ribbon_filter: bool,
    /// The factor a store means to fold the filter by in memory (1: none), when it writes it
    /// wider than its share to leave room to fold (`docs/design.md`, "Filter memory"): a
    /// cache-local filter takes the hashes best at its bits per key divided by this, so that
    /// folded to its share it has that share's best rate.
    pub filter_fold_target: u32,
}

impl Default for TableOptions {
    fn default() -> TableOptions {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            filter_policy: FilterPolicy::default(),
            compression: Compression::default(),
            index_partition_size: 4096,
            filter_partition_size: 0,
            cache_local_filter: false,
            ribbon_filter: false,
            filter_fold_target: 1,
        }
    }
}

impl TableOptions {
    /// Checks the options; returns the filter parameters they call for.
    pub fn validate(&self) -> Result<Option<FilterParams>> {
        if !(1..=MAX_BLOCK_SIZE).contains(&self.block_size) {
            return Err(Error::InvalidArgument(format!(
                "block size must be 1..={MAX_BLOCK_SIZE}, got {}",
                self.block_size
            )));
        }
        if !(1..=u16::MAX as usize).contains(&self.restart_interval) {
            return Err(Error::InvalidArgument(format!(
                "restart interval must be 1..={}, got {}",
                u16::MAX,
                self.restart_interval
            )));
        }
        self.filter_policy.params()
    }
}
