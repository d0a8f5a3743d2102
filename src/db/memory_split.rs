//! Moves memory between the block cache and the filters, toward whichever saves more reads
//! per byte for the lookups the store serves.
//!
//! Both save data-block reads: a cached block is a read a lookup need not make, and a filter
//! bit more per key is a false positive fewer. Which saves more depends on the lookups. Under
//! a skewed load a small cache holds the hot blocks and serves many lookups; under uniform
//! lookups over a store many times larger than the cache it holds a sliver of the data (32
//! MiB of a 12 GB store: 0.3% of the reads), while the same memory as filter bits cuts the
//! false positives that send absent-key lookups to the disk. So, every few thousand lookups,
//! the store compares the two over the recent lookups, each weighted by how recent it is (the
//! weight halves every `HALF_LIFE_LOOKUPS`, about a million lookups):
//!
//! - the cache saves `hits / lookups` reads per lookup with its `capacity` bytes, about
//!   `hits / (lookups * capacity)` per byte (an average over the cache; its last bytes, the
//!   ones a move would take, save no more than that under LRU-like eviction);
//! - the filters lose `false_positives / lookups` reads per lookup (the data blocks point
//!   lookups read less those a filter's "maybe" found the key in: false positives, and the
//!   reads of tables whose filter the limit dropped), and a Bloom filter near its
//!   best hash count loses `e^(-b ln²2)` at `b` bits per key, so a byte more (`8 / keys` bits
//!   per key) saves about `false_positives / lookups * ln²2 * 8 / keys` per lookup (the
//!   filter memory plan spends it where it saves the most, which this assumes).
//!
//! When one side saves at least twice what the other does per byte, an eighth of the cache's
//! first size moves to it; the cache keeps at least an eighth of its first size, and the
//! filters never drop below the limit they were given. The factor of two keeps the split from
//! swinging on noise. An average is not a margin: a cache whose hot blocks fill a third of it
//! loses nothing to a move, and one whose hot blocks just fit loses them all. So the cache
//! gives memory up only while it has served under 5% of its reads since the store opened,
//! which bounds what a move can cost. The rate since the open, not over the last few thousand
//! lookups: a load that alternates between absent keys (which read few blocks, so the cache
//! looks idle) and present keys the cache serves must not move memory back and forth at each
//! turn, reading filters from their files each time (a Zipf run did, at `6c1932a`). And the
//! cache takes memory back once it saves twice what the filters do per byte over the recent
//! lookups. Recent, not the last few thousand: a uniform load that alternated between
//! 200,000 present and 200,000 absent keys gave the cache its memory back at each present
//! phase and took it again at each absent one, and every move had the filters folded, then
//! read back from their files (tens of MB each time, at 30M and at 100M keys). Weighted over
//! a million lookups, phases much shorter than that are judged by their mix (the last
//! 200,000 lookups carry an eighth of the weight). The half-life is counted in lookups, not
//! time: a store serving a thousand lookups a second takes about 17 minutes to halve a
//! lookup's weight, and moves memory as slowly. Only a
//! store with a filter memory limit, a block cache of its own (a shared one serves other
//! stores too) and filters that follow lookups moves memory.
//!
//! The index cache is sized as a share of memory, which holds every index partition of a
//! store several times larger than it serves (in 256 MiB, 32 MiB; 100M keys take 19 MB).
//! What the live tables' partitions leave of it, with an eighth of them kept free for the
//! indexes to grow in, it lends the filters while their limit binds, and takes back as the
//! indexes grow: memory no lookup would ever use goes where it cuts false positives. The
//! loan needs no judgement of which saves more, only the partitions' count and size, so it
//! is not held to the 5% rule; it grows only by more than a sixteenth of the cache, so that
//! a refit does not read filters back for a few bytes, and shrinks once the partitions have
//! used half the room kept for them.
//!
//! The frozen memtables' room, which holds nothing while writes rest, is lent the same way
//! (`write_buffer_loan`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::write_buffer_loan::WriteBufferLoan;
use super::{lock, Inner};
use crate::options::Options;

/// ln²2: how fast a Bloom filter's false-positive rate falls per bit per key.
const LN2_SQUARED: f64 = std::f64::consts::LN_2 * std::f64::consts::LN_2;

/// How many times more per byte one side must save before memory moves to it.
const MOVE_FACTOR: f64 = 2.0;

/// The cache gives memory up only while it has served fewer of its reads since the store
/// opened than this share: what a move can cost is then bounded by it, whatever its last
/// bytes were worth.
const MOST_HIT_RATE_TO_GIVE: f64 = 0.05;

/// The share of the cache's first size one move takes, and the share it always keeps.
const STEP_DIVISOR: u64 = 8;

/// Lookups over which a lookup's weight in the comparison halves: long enough that a load
/// whose mix changes every few hundred thousand lookups is judged by the mix, short enough
/// that a lasting change moves memory within a few million lookups (seconds for a store
/// serving hundreds of thousands a second; minutes at a thousand a second).
const HALF_LIFE_LOOKUPS: f64 = (1 << 20) as f64;

/// The share of the memory the process may use that its anonymous memory (heap and stacks,
/// which a memory cgroup cannot reclaim), counted without the write buffers' loan, may take
/// with it: the rest is for the page cache and for what the store's plan does not count
/// (refits hold new filters beside old ones; the allocator holds freed memory). A Zipf run
/// at 100M keys in 256 MiB lent half the frozen memtables' room with no such bound, and its
/// cgroup killed the process at 250 MiB of anonymous memory.
const LOAN_MEMORY_SHARE: (u64, u64) = (3, 4);

/// The index cache's loan grows only by more than this share of its first size, and shrinks
/// once the cache has less than this share of the partitions free beside them (half the
/// room a loan leaves them).
const LOAN_STEP_DIVISOR: u64 = 16;

/// The filter memory limit now, and what moves memory between it and the block cache, and
/// lends the filters what the index cache and the frozen memtables' room cannot use.
pub(super) struct MemorySplit {
    /// The filters' limit now but for the write buffers' loan: the one given, what moved
    /// from the block cache, and what the index cache lends (stored with `held` locked);
    /// `u64::MAX` for none.
    filter_limit: AtomicU64,
    /// The frozen memtables' room, lent while writes rest.
    write_buffers: WriteBufferLoan,
    /// The limit the options gave, and the block cache's first size: the filters never go
    /// below the one, and the cache keeps an eighth of the other.
    given_filter_limit: u64,
    given_cache: u64,
    moves: bool,
    /// The memory the process may use (`memory::available`), read when the store opened:
    /// the write buffers' loan keeps the process's anonymous memory within
    /// `LOAN_MEMORY_SHARE` of it.
    memory_available: Option<u64>,
    /// The index cache's first size, and whether it lends the filters what its partitions
    /// leave of it.
    given_index_cache: u64,
    lends_index: bool,
    /// What moved and what is lent, the counters at the last look, and the recent lookups'
    /// counts. Locked for a whole
    /// rebalance: a refit turn may begin while a long one still reads filters.
    held: Mutex<Held>,
}

/// What a [`MemorySplit`] has moved and lent.
#[derive(Debug, Default)]
struct Held {
    /// Bytes the block cache has given the filters, net of what it took back.
    moved: u64,
    /// Bytes the index cache lends the filters.
    lent: u64,
    last: Counted,
    /// The recent lookups' counts, as the split now stands would have seen them.
    recent: Recent,
}

/// What the store counted since it opened, as one look saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Counted {
    pub lookups: u64,
    pub cache_hits: u64,
    pub false_positives: u64,
}

/// Lookups, cache hits and false positives, each weighted by how recent it is: the weight
/// halves every `HALF_LIFE_LOOKUPS` lookups.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Recent {
    pub lookups: f64,
    pub cache_hits: f64,
    pub false_positives: f64,
}

impl Recent {
    /// The window after `seen`, counted since the last look: what came before weighs less by
    /// the lookups `seen` holds.
    fn after(self, seen: Counted) -> Recent {
        let kept = 0.5f64.powf(seen.lookups as f64 / HALF_LIFE_LOOKUPS);
        Recent {
            lookups: self.lookups * kept + seen.lookups as f64,
            cache_hits: self.cache_hits * kept + seen.cache_hits as f64,
            false_positives: self.false_positives * kept + seen.false_positives as f64,
        }
    }

    /// The window as the split after a move would have seen it: `to_filters` bytes moved
    /// (negative: to the cache), the cache going from `cache` bytes to `after`, over `keys`
    /// keys. Counted at the old split, the window would go on arguing for the move it already
    /// made, and memory would overshoot by several steps before the recent lookups caught up.
    /// The rule's own model rescales it: the cache's hits in proportion to its size, the
    /// false positives by `e^(-ln²2 * 8 * bytes / keys)`.
    fn moved(self, to_filters: i64, cache: u64, after: u64, keys: u64) -> Recent {
        if cache == 0 || keys == 0 {
            return self;
        }
        Recent {
            lookups: self.lookups,
            cache_hits: self.cache_hits * after as f64 / cache as f64,
            false_positives: self.false_positives
                * (-LN2_SQUARED * 8.0 * to_filters as f64 / keys as f64).exp(),
        }
    }
}

/// The split as it stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Split {
    pub cache: u64,
    pub filters: u64,
}

/// What a rebalance weighs about the live tables.
#[derive(Debug, Clone, Copy, Default)]
struct Tables {
    keys: u64,
    /// Index partitions, which live in the index cache.
    index_partitions: u64,
    /// Bytes the filters would take held whole: more memory they cannot use.
    whole_filters: u64,
    /// Bytes the filters take as held.
    held_filters: u64,
}

impl MemorySplit {
    /// The split `options` give. `cache_bytes` is the block cache's size when the store owns
    /// its cache (`None`: no cache, or one shared with other stores).
    /// `index_cache_bytes` is the index cache's size (`None` without one).
    pub(super) fn new(
        options: &Options,
        cache_bytes: Option<u64>,
        index_cache_bytes: Option<u64>,
    ) -> MemorySplit {
        let given_filter_limit = options.filter_memory_limit.unwrap_or(u64::MAX);
        let follows = options.memory_follows_reads
            && options.filter_memory_follows_lookups
            && options.filter_memory_limit.is_some();
        // Half the frozen memtables' room: the refits that spend a loan hold new filters
        // beside the old ones (a sixteenth of the limit a step), and memory outside the
        // store's plan (the allocator's, table metadata, stacks) takes some 30 MiB at 100M
        // keys. Lent whole, the room left a store of 100M keys in 256 MiB at 253 MiB at rest.
        // And no more than all frozen memtables' room but one: the memtable frozen next
        // takes its room back before the filters are folded to the smaller limit.
        let memtable = options.memtable_size as u64;
        let frozen = options.max_immutable_memtables as u64;
        let frozen_room = (memtable.saturating_mul(frozen) / 2)
            .min(memtable.saturating_mul(frozen.saturating_sub(1)));
        let loan_rest = options.write_buffer_loan_rest.filter(|_| follows);
        MemorySplit {
            filter_limit: AtomicU64::new(given_filter_limit),
            write_buffers: match loan_rest {
                Some(rest) => WriteBufferLoan::new(frozen_room, rest, Instant::now()),
                None => WriteBufferLoan::new(0, Duration::ZERO, Instant::now()),
            },
            memory_available: loan_rest.and_then(|_| crate::memory::available()),
            given_filter_limit,
            given_cache: cache_bytes.unwrap_or(0),
            moves: follows && cache_bytes.is_some_and(|b| b >= STEP_DIVISOR),
            given_index_cache: index_cache_bytes.unwrap_or(0),
            lends_index: follows && index_cache_bytes.is_some(),
            held: Mutex::new(Held::default()),
        }
    }

    /// The limit the filters are held to now.
    pub(super) fn filter_limit(&self) -> Option<u64> {
        match self.filter_limit.load(Ordering::Relaxed) {
            u64::MAX => None,
            limit => Some(limit.saturating_add(self.write_buffers.lent())),
        }
    }

    /// What the process's memory leaves the write buffers' loan: `LOAN_MEMORY_SHARE` of the
    /// memory available, less the `anonymous` memory the process holds without the loan (the
    /// filters it holds, `held_filters`, above `limit`, the limit without the loan, are the
    /// loan's); nothing where either figure cannot be read.
    fn memory_left_for_loan(&self, anonymous: Option<u64>, held_filters: u64, limit: u64) -> u64 {
        let (Some(available), Some(anonymous)) = (self.memory_available, anonymous) else {
            return 0;
        };
        let (share, of) = LOAN_MEMORY_SHARE;
        let without_loan = anonymous.saturating_sub(held_filters.saturating_sub(limit));
        (available / of * share).saturating_sub(without_loan)
    }

    /// Bytes of the frozen memtables' room lent to the filters now.
    pub(super) fn lent_by_write_buffers(&self) -> u64 {
        self.write_buffers.lent()
    }

    /// A memtable was frozen: takes back the write buffers' loan. Returns whether there was
    /// one, and so filters to fold to the smaller limit.
    pub(super) fn memtable_frozen(&self) -> bool {
        self.write_buffers.memtable_frozen(Instant::now())
    }

    /// Bytes the block cache has given the filters (net of what it took back).
    pub(super) fn moved_to_filters(&self) -> u64 {
        lock(&self.held).moved
    }

    /// Bytes the index cache lends the filters now.
    pub(super) fn lent_by_index_cache(&self) -> u64 {
        lock(&self.held).lent
    }

    /// What the index cache lends the filters, given that every live table's index
    /// partitions take `partitions` bytes in it, that whole filters would take
    /// `whole_filters`, and the filters' limit without the loan is `limit`: what the
    /// partitions leave of its first size, with an eighth of them kept free for the index to
    /// grow in, but no more than whole filters can use.
    fn index_loan(&self, partitions: u64, whole_filters: u64, limit: u64) -> u64 {
        let needed = partitions.saturating_add(partitions / STEP_DIVISOR);
        let spare = self.given_index_cache.saturating_sub(needed);
        spare.min(whole_filters.saturating_sub(limit))
    }

    /// Whether the loan should go from `lent` to `loan`, the partitions taking `partitions`
    /// bytes: up only by more than a sixteenth of the cache (a loan that followed the
    /// partitions' average size would have each refit read filters back for a few bytes);
    /// down once the partitions have used half the room kept for them, or the loan falls by
    /// more than a sixteenth of the cache, or to nothing.
    fn loan_changes(&self, lent: u64, loan: u64, partitions: u64) -> bool {
        let step = self.given_index_cache / LOAN_STEP_DIVISOR;
        if loan > lent {
            return loan - lent > step;
        }
        let room_used = self.given_index_cache - lent < partitions + partitions / LOAN_STEP_DIVISOR;
        loan < lent && (room_used || lent - loan > step || loan == 0)
    }

    /// The move the recent lookups call for, if any, out of `now`, given `keys` in the store.
    /// `hit_rate` is the cache's hits over the reads it served since the store opened.
    fn next_move(&self, seen: Recent, now: Split, keys: u64, hit_rate: f64) -> Option<i64> {
        let step = self.given_cache / STEP_DIVISOR;
        let floor = self.given_cache / STEP_DIVISOR;
        if seen.lookups < 1.0 || keys == 0 || now.cache == 0 {
            return None;
        }
        let per_lookup = |n: f64| n / seen.lookups;
        let cache_saves = per_lookup(seen.cache_hits) / now.cache as f64;
        let filters_save = per_lookup(seen.false_positives) * LN2_SQUARED * 8.0 / keys as f64;
        let cache_serves_little = hit_rate < MOST_HIT_RATE_TO_GIVE;
        if filters_save >= MOVE_FACTOR * cache_saves && cache_serves_little && now.cache > floor {
            Some(step.min(now.cache - floor) as i64)
        } else if cache_saves >= MOVE_FACTOR * filters_save && now.filters > self.given_filter_limit
        {
            Some(-(step.min(now.filters - self.given_filter_limit) as i64))
        } else {
            None
        }
    }
}

impl Inner {
    /// Looks at the recent lookups and moves memory between the block cache and
    /// the filters when one saves far more reads per byte (the module's rule), and lends the
    /// filters what the index cache cannot use. Called on the background turn that refits
    /// the filters, which then spends a grown limit, or folds filters into a shrunk one.
    /// Returns whether the limit changed.
    pub(super) fn rebalance_memory(&self) -> bool {
        let split = &self.memory_split;
        if !(split.moves || split.lends_index || split.write_buffers.lends()) {
            return false;
        }
        let mut held = match split.held.try_lock() {
            Ok(held) => held,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            // Another turn is rebalancing.
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        let tables = self.live_tables();
        let lent = self.lend_spare_index_cache(&mut held, &tables);
        let moved = self.move_between_cache_and_filters(&mut held, &tables);
        let limit = split.given_filter_limit + held.moved + held.lent;
        split.filter_limit.store(limit, Ordering::Relaxed);
        lent || moved || self.lend_write_buffers(&tables, limit)
    }

    /// Lends the filters half the frozen memtables' room while writes rest, within what
    /// whole filters can use beyond `limit` (the limit without it) and what the process's
    /// memory leaves (`MemorySplit::memory_left_for_loan`). Returns whether the loan changed.
    fn lend_write_buffers(&self, tables: &Tables, limit: u64) -> bool {
        let split = &self.memory_split;
        if !split.write_buffers.lends() {
            return false;
        }
        let anonymous = crate::memory::anonymous_resident();
        let usable = (tables.whole_filters.saturating_sub(limit)).min(split.memory_left_for_loan(
            anonymous,
            tables.held_filters,
            limit,
        ));
        let now = Instant::now();
        (split.write_buffers).lend_if_rested(now, self.has_background_work(), usable)
    }

    /// The live tables' keys, index partitions and whole filters' bytes, every keyspace's.
    fn live_tables(&self) -> Tables {
        let state = self.read_state();
        let mut tables = Tables::default();
        for t in state.trees.iter().flat_map(|t| t.version.tables()) {
            tables.keys += t.meta.entries;
            tables.index_partitions += t.table.cached_index_partitions() as u64;
            tables.whole_filters += t.table.whole_filter_bytes();
            tables.held_filters += t.table.filter_memory_bytes() as u64;
        }
        tables
    }

    /// Lends the filters the index cache's memory that every live table's index partitions
    /// leave spare, or takes it back as they grow (`MemorySplit::index_loan`). The partitions
    /// are counted, and sized by what the cache holds on average: a partition is cut at
    /// `index_partition_size` bytes before compression, so they differ little. Returns
    /// whether the loan changed.
    fn lend_spare_index_cache(&self, held: &mut Held, tables: &Tables) -> bool {
        let split = &self.memory_split;
        let Some(cache) = (self.table_env.index_cache.as_ref()).filter(|_| split.lends_index)
        else {
            return false;
        };
        let cached = cache.stats();
        if cached.blocks == 0 {
            // Nothing to size a partition by yet: no lookup has needed one.
            return false;
        }
        let partitions = tables.index_partitions * cached.bytes.div_ceil(cached.blocks);
        let without_loan = split.given_filter_limit + held.moved;
        let loan = split.index_loan(partitions, tables.whole_filters, without_loan);
        if !split.loan_changes(held.lent, loan, partitions) {
            return false;
        }
        // The cache shrinks before the filters grow; the filters shrink (at the refit that
        // follows) after the cache may refill.
        cache.set_capacity(split.given_index_cache - loan);
        held.lent = loan;
        true
    }

    /// Moves memory between the block cache and the filters by the module's rule, no more
    /// to the filters than whole filters can use.
    fn move_between_cache_and_filters(&self, held: &mut Held, tables: &Tables) -> bool {
        let split = &self.memory_split;
        let Some(cache) = self.table_env.block_cache.as_ref().filter(|_| split.moves) else {
            return false;
        };
        let counters = self.table_env.counters.snapshot();
        let cache_stats = cache.stats();
        let now_counted = Counted {
            lookups: self
                .table_env
                .counters
                .table_lookups
                .load(Ordering::Relaxed),
            cache_hits: cache_stats.hits,
            // Block reads a filter did not answer for: its false positives, and the reads of
            // tables whose filter is dropped (which a present key's may be too: the 5% rule
            // bounds what that misjudgement can cost).
            false_positives: (counters.data_block_reads)
                .saturating_sub(counters.filter_true_positives),
        };
        // Counters read one by one may lag each other: a difference is never below zero.
        let last = std::mem::replace(&mut held.last, now_counted);
        let seen = Counted {
            lookups: now_counted.lookups.saturating_sub(last.lookups),
            cache_hits: now_counted.cache_hits.saturating_sub(last.cache_hits),
            false_positives: (now_counted.false_positives).saturating_sub(last.false_positives),
        };
        // The index cache's loan is not the block cache's to take back.
        let now = Split {
            cache: cache.capacity(),
            filters: split.given_filter_limit + held.moved,
        };
        let hit_rate = cache_stats.hit_rate().unwrap_or(0.0);
        held.recent = held.recent.after(seen);
        let Some(to_filters) = split.next_move(held.recent, now, tables.keys, hit_rate) else {
            return false;
        };
        let usable = (tables.whole_filters).saturating_sub(now.filters + held.lent);
        let to_filters = to_filters.min(usable as i64);
        if to_filters == 0 {
            return false;
        }
        // The cache shrinks before the filters grow, and the filters shrink (at the refit that
        // follows) before the cache fills: the two never hold more than their sum for long.
        let after = now.cache.saturating_add_signed(-to_filters);
        cache.set_capacity(after);
        held.moved = held.moved.saturating_add_signed(to_filters);
        held.recent = held.recent.moved(to_filters, now.cache, after, tables.keys);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One look's counts alone, as the store judged them before it weighed recent lookups.
    impl From<Counted> for Recent {
        fn from(c: Counted) -> Recent {
            Recent::default().after(c)
        }
    }

    fn split(cache: u64, filters: u64) -> MemorySplit {
        let mut options = Options::default().filter_memory_limit(filters);
        options.memory_follows_reads = true;
        MemorySplit::new(&options, Some(cache), None)
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_write_buffers_lend_only_what_keeps_the_heap_within_three_quarters_of_memory() {
        let mut s = split(32 * MIB, 64 * MIB);
        s.memory_available = Some(256 * MIB);
        // 150 MiB of heap, the filters at their limit: 42 MiB left under 192 MiB.
        assert_eq!(
            s.memory_left_for_loan(Some(150 * MIB), 100 * MIB, 100 * MIB),
            42 * MIB
        );
        // The same heap with 30 MiB of it the loan's filters: 120 MiB without it, 72 left.
        assert_eq!(
            s.memory_left_for_loan(Some(150 * MIB), 130 * MIB, 100 * MIB),
            72 * MIB
        );
        // A heap above three quarters leaves nothing; so does a figure that cannot be read.
        assert_eq!(s.memory_left_for_loan(Some(200 * MIB), 0, 100 * MIB), 0);
        assert_eq!(s.memory_left_for_loan(None, 0, 100 * MIB), 0);
        s.memory_available = None;
        assert_eq!(s.memory_left_for_loan(Some(MIB), 0, 100 * MIB), 0);
    }

    #[test]
    fn the_write_buffers_lend_half_their_room_and_never_all_of_it() {
        let lent_by = |memtables: usize| {
            let mut options = Options::default().filter_memory_limit(64 * MIB);
            options.max_immutable_memtables = memtables;
            MemorySplit::new(&options, Some(32 * MIB), None).write_buffers
        };
        assert!(lent_by(2).lends());
        assert!(
            !lent_by(1).lends(),
            "the one frozen memtable needs all its room"
        );
        let off = Options::default()
            .filter_memory_limit(64 * MIB)
            .write_buffer_loan_rest(None);
        assert!(!MemorySplit::new(&off, Some(32 * MIB), None)
            .write_buffers
            .lends());
    }

    #[test]
    fn uniform_absent_lookups_over_a_big_store_move_memory_to_the_filters() {
        let s = split(32 * MIB, 64 * MIB);
        // 100M keys, 11% of lookups a false positive, the cache serving 0.3% of them.
        let seen = Counted {
            lookups: 10_000,
            cache_hits: 30,
            false_positives: 1_100,
        };
        let now = Split {
            cache: 32 * MIB,
            filters: 64 * MIB,
        };
        assert_eq!(
            s.next_move(seen.into(), now, 100_000_000, 0.003),
            Some(4 * MIB as i64)
        );
        // Never below an eighth of the cache.
        let nearly_empty = Split {
            cache: 5 * MIB,
            filters: 91 * MIB,
        };
        assert_eq!(
            s.next_move(seen.into(), nearly_empty, 100_000_000, 0.003),
            Some(MIB as i64)
        );
        let empty = Split {
            cache: 4 * MIB,
            filters: 92 * MIB,
        };
        assert_eq!(s.next_move(seen.into(), empty, 100_000_000, 0.003), None);
    }

    #[test]
    fn a_cache_that_serves_the_lookups_keeps_its_memory_and_gets_it_back() {
        let s = split(32 * MIB, 64 * MIB);
        // A skewed load: the cache serves 60% of lookups; the filters' false positives are
        // rare.
        let seen = Counted {
            lookups: 10_000,
            cache_hits: 6_000,
            false_positives: 100,
        };
        let given = Split {
            cache: 32 * MIB,
            filters: 64 * MIB,
        };
        // Nothing below the given limit for the cache to take back.
        assert_eq!(s.next_move(seen.into(), given, 100_000_000, 0.6), None);
        let moved = Split {
            cache: 20 * MIB,
            filters: 76 * MIB,
        };
        assert_eq!(
            s.next_move(seen.into(), moved, 100_000_000, 0.6),
            Some(-(4 * MIB as i64))
        );
    }

    #[test]
    fn a_cache_that_served_a_twentieth_of_its_reads_gives_nothing_up() {
        let s = split(32 * MIB, 64 * MIB);
        // Filters would save more per byte in this window (absent keys read few blocks, so the
        // cache looks idle), but since the open it has served 6% of its reads.
        let seen = Counted {
            lookups: 10_000,
            cache_hits: 10,
            false_positives: 5_000,
        };
        let now = Split {
            cache: 32 * MIB,
            filters: 64 * MIB,
        };
        assert_eq!(s.next_move(seen.into(), now, 1_000_000, 0.06), None);
    }

    /// How a simulated store judges its lookups.
    #[derive(Clone, Copy, PartialEq)]
    enum Judged {
        /// Over the lookups since the last look alone.
        ByWindow,
        /// Over the recent lookups, the window rescaled after each move (as the store does)
        /// or not.
        ByRecent { rescaled: bool },
    }

    /// A load's rates: the share of lookups the cache serves at its first size, and the share
    /// that meet a false positive at the filters' first limit.
    #[derive(Clone, Copy)]
    struct Load {
        hits: f64,
        false_positives: f64,
    }

    /// The moves a store of 30M keys, a 32 MiB cache and a 20 MiB filter limit makes when it
    /// looks every 8,192 lookups, `looks` times in each of `phases` in turn, and its cache
    /// has served 1% of its reads since the open (so it may give memory). The counts follow
    /// the split as the rule models it: the cache's hits in proportion to its size, the
    /// false positives falling by `e^(-ln²2)` for each bit per key the filters gained.
    fn moves(phases: &[Load], looks: usize, judged: Judged) -> Vec<i64> {
        let (given_cache, given_filters, keys) = (32 * MIB, 20 * MIB, 30_000_000u64);
        let s = split(given_cache, given_filters);
        let mut now = Split {
            cache: given_cache,
            filters: given_filters,
        };
        let mut window = Recent::default();
        let mut moves = Vec::new();
        for load in phases {
            for _ in 0..looks {
                let hits = load.hits * now.cache as f64 / given_cache as f64;
                let bits = 8.0 * (now.filters - given_filters) as f64 / keys as f64;
                let false_positives = load.false_positives * (-LN2_SQUARED * bits).exp();
                let seen = Counted {
                    lookups: 8_192,
                    cache_hits: (hits * 8_192.0).round() as u64,
                    false_positives: (false_positives * 8_192.0).round() as u64,
                };
                window = match judged {
                    Judged::ByWindow => seen.into(),
                    Judged::ByRecent { .. } => window.after(seen),
                };
                let Some(m) = s.next_move(window, now, keys, 0.01) else {
                    continue;
                };
                let after = now.cache.saturating_add_signed(-m);
                if judged == (Judged::ByRecent { rescaled: true }) {
                    window = window.moved(m, now.cache, after, keys);
                }
                now.cache = after;
                now.filters = now.filters.saturating_add_signed(m);
                moves.push(m);
            }
        }
        moves
    }

    #[test]
    fn phases_of_present_and_absent_keys_move_memory_one_way_not_back_and_forth() {
        // Phases of 200,000 lookups. Present keys: the cache serves 3% of them, and 0.5% meet
        // a false positive; absent keys: the cache serves 0.01%, and 5% meet a false
        // positive. Over each phase alone the cache saves more per byte in one and the
        // filters in the other.
        let present = Load {
            hits: 0.03,
            false_positives: 0.005,
        };
        let absent = Load {
            hits: 0.0001,
            false_positives: 0.05,
        };
        let phases = [present, absent].repeat(4);
        let by_window = moves(&phases, 24, Judged::ByWindow);
        assert!(by_window.iter().any(|&m| m > 0));
        assert!(
            by_window.iter().any(|&m| m < 0),
            "each phase alone swings the split: {by_window:?}"
        );
        // Over the recent lookups the mix decides: the filters save more, and memory moves
        // their way only.
        let by_recent = moves(&phases, 24, Judged::ByRecent { rescaled: true });
        assert!(!by_recent.is_empty());
        assert!(
            by_recent.iter().all(|&m| m > 0),
            "memory moved back: {by_recent:?}"
        );
    }

    #[test]
    fn a_move_rescales_the_window_so_memory_does_not_overshoot() {
        // 1% of lookups served by the cache, 2% meeting a false positive: three steps of
        // 4 MiB take the false positives to 0.4%, where the filters no longer save twice
        // what the cache does per byte.
        let steady = [Load {
            hits: 0.01,
            false_positives: 0.02,
        }];
        let rescaled = moves(&steady, 400, Judged::ByRecent { rescaled: true });
        assert_eq!(rescaled, vec![4 * MIB as i64; 3]);
        // Judged on counts made before the moves, the window goes on asking for more.
        let stale = moves(&steady, 400, Judged::ByRecent { rescaled: false });
        assert!(stale.len() > 3 && stale.iter().all(|&m| m > 0), "{stale:?}");
    }

    #[test]
    fn a_lasting_change_of_load_moves_memory_within_a_few_million_lookups() {
        let s = split(32 * MIB, 64 * MIB);
        let moved = Split {
            cache: 20 * MIB,
            filters: 76 * MIB,
        };
        // A million absent-key lookups that the filters serve, then a skew the cache serves.
        let absent = Counted {
            lookups: 8_192,
            cache_hits: 1,
            false_positives: 900,
        };
        let skewed = Counted {
            lookups: 8_192,
            cache_hits: 5_000,
            false_positives: 8,
        };
        let mut window = Recent::default();
        for _ in 0..128 {
            window = window.after(absent);
        }
        assert_eq!(s.next_move(window, moved, 100_000_000, 0.6), None);
        let mut lookups = 0;
        while s.next_move(window, moved, 100_000_000, 0.6).is_none() {
            window = window.after(skewed);
            lookups += skewed.lookups;
            assert!(lookups < 4_000_000, "no move after {lookups} lookups");
        }
        assert!(lookups > 8_192, "moved on one window: {lookups}");
        assert!(s.next_move(window, moved, 100_000_000, 0.6).unwrap() < 0);
    }

    #[test]
    fn close_calls_and_empty_windows_move_nothing() {
        let s = split(32 * MIB, 64 * MIB);
        let now = Split {
            cache: 20 * MIB,
            filters: 76 * MIB,
        };
        assert_eq!(
            s.next_move(Counted::default().into(), now, 1_000_000, 0.0),
            None
        );
        // Filters save 1.5 times what the cache does per byte: within the factor of two.
        let keys = 10_000_000u64;
        let fp = 1_000u64;
        let filters_save = fp as f64 / 10_000.0 * LN2_SQUARED * 8.0 / keys as f64;
        let hits = (filters_save / 1.5 * 20.0 * MIB as f64 * 10_000.0) as u64;
        let seen = Counted {
            lookups: 10_000,
            cache_hits: hits,
            false_positives: fp,
        };
        assert_eq!(s.next_move(seen.into(), now, keys, 0.0), None);
    }

    #[test]
    fn the_index_cache_lends_what_its_partitions_leave_spare_and_filters_can_use() {
        let options = (Options::default().filter_memory_limit(64 * MIB)).memory_follows_reads(true);
        let s = MemorySplit::new(&options, Some(32 * MIB), Some(32 * MIB));
        assert!(s.lends_index);
        // 100M keys: 16 MiB of partitions keep 18 MiB, and lend the other 14 MiB.
        assert_eq!(s.index_loan(16 * MIB, 256 * MIB, 64 * MIB), 14 * MIB);
        // No more than whole filters would take beyond the limit.
        assert_eq!(s.index_loan(16 * MIB, 70 * MIB, 64 * MIB), 6 * MIB);
        assert_eq!(s.index_loan(16 * MIB, 50 * MIB, 64 * MIB), 0);
        // Partitions that fill the cache lend nothing.
        assert_eq!(s.index_loan(30 * MIB, 256 * MIB, 64 * MIB), 0);
        // Without a limit, or with the moves off, the index cache lends nothing.
        let options = Options::default().no_filter_memory_limit();
        assert!(!MemorySplit::new(&options, None, Some(32 * MIB)).lends_index);
        let options = (Options::default().filter_memory_limit(MIB)).memory_follows_reads(false);
        assert!(!MemorySplit::new(&options, None, Some(32 * MIB)).lends_index);
    }

    #[test]
    fn the_loan_grows_by_steps_and_shrinks_before_the_partitions_outgrow_their_room() {
        let options = (Options::default().filter_memory_limit(64 * MIB)).memory_follows_reads(true);
        let s = MemorySplit::new(&options, None, Some(32 * MIB));
        // Up only by more than a sixteenth of the cache (2 MiB).
        assert!(s.loan_changes(0, 14 * MIB, 16 * MIB));
        assert!(!s.loan_changes(13 * MIB, 14 * MIB, 16 * MIB));
        // Down when the partitions have used half their room: 14 MiB lent leaves 18 MiB, and
        // 17 MiB of partitions want 17 MiB and a sixteenth.
        assert!(!s.loan_changes(14 * MIB, 13 * MIB, 16 * MIB));
        assert!(s.loan_changes(14 * MIB, 13 * MIB, 17 * MIB));
        // Or by more than a sixteenth, or to nothing.
        assert!(s.loan_changes(14 * MIB, 11 * MIB, 16 * MIB));
        assert!(s.loan_changes(MIB, 0, MIB));
        assert!(!s.loan_changes(0, 0, MIB));
    }

    #[test]
    fn a_store_without_a_limit_or_a_cache_of_its_own_never_moves() {
        let options = Options::default().no_filter_memory_limit();
        assert!(!MemorySplit::new(&options, Some(32 * MIB), None).moves);
        let options = Options::default().filter_memory_limit(MIB);
        assert!(!MemorySplit::new(&options, None, None).moves);
        let options = (Options::default().filter_memory_limit(MIB)).memory_follows_reads(false);
        assert!(!MemorySplit::new(&options, Some(32 * MIB), None).moves);
    }
}
