//! The governor: the store's memory as four roles, what each may hold, and the one rule that
//! moves memory between them (`docs/design.md`, "Memory").
//!
//! The options give each role a first target: the memtables their room (`memtable_size`
//! times one active and `max_immutable_memtables` frozen), the block cache its size, the
//! index cache its size, the filters their limit. The total is their sum and never changes:
//! a move takes from one role's target what it gives another's. Each role has a floor it
//! never gives below. Every few thousand lookups the governor reads what the store counted
//! and applies the rule:
//!
//! > Memory moves, a step at a time, from the role whose last bytes save the fewest reads per
//! > byte to the role whose next bytes would save the most, when those save more than nothing
//! > and at least twice as much.
//!
//! What a role's bytes save, per lookup and byte:
//! - the block cache: its recent hits per lookup over its size (LRU-like eviction makes its
//!   last bytes worth no more than its average); while it has served 5% of its reads since
//!   the store opened or more, its bytes are not given at all, which bounds what a move can
//!   cost whatever its last bytes were worth. It takes back only what it gave.
//! - the filters: `filter::false_positives_saved_per_byte`, for the recent false positives
//!   and the keys stored; they never take more than whole filters would hold, nor give below
//!   the limit they were given.
//! - the index cache: nothing, for what the live tables' partitions leave of it with an
//!   eighth of them kept free to grow in; everything, once the partitions have used half that
//!   room: it then takes back what it lent.
//! - the memtables: everything. Their room holds nothing while writes rest, but it is needed
//!   back at the next freeze, at once, and filters that held it would be folded at every
//!   freeze and read back from their files at every pause.
//!
//! Recent means weighted by how recent: a lookup's weight halves every `HALF_LIFE_LOOKUPS`,
//! counted in lookups, not time, so that phases much shorter than a million lookups are
//! judged by their mix and memory does not swing back and forth at each phase.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use crate::filter::{false_positive_factor, false_positives_saved_per_byte};

/// What holds the store's memory, as [`crate::Stats::memory`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MemoryRole {
    /// The active memtable and the frozen ones waiting for a flush.
    Memtables,
    /// Data blocks kept uncompressed in memory.
    BlockCache,
    /// Index partitions of two-level indexes, in a cache of their own.
    IndexPartitions,
    /// The tables' filters, whole, folded or dropped within their limit.
    Filters,
}

impl MemoryRole {
    /// Every role, in the order `Stats::memory` lists them.
    pub const ALL: [MemoryRole; 4] = [
        MemoryRole::Memtables,
        MemoryRole::BlockCache,
        MemoryRole::IndexPartitions,
        MemoryRole::Filters,
    ];

    /// The role's name as `kvtool stats` prints it.
    pub fn name(self) -> &'static str {
        match self {
            MemoryRole::Memtables => "memtables",
            MemoryRole::BlockCache => "block cache",
            MemoryRole::IndexPartitions => "index partitions",
            MemoryRole::Filters => "filters",
        }
    }

    fn at(self) -> usize {
        self as usize
    }
}

/// One role's memory: what the options gave it, what it never gives below, what it may hold
/// now, and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RoleMemory {
    pub role: MemoryRole,
    /// The role's first target, from the options.
    pub given: u64,
    /// The target never goes below this.
    pub floor: u64,
    /// What it may hold now: `given` plus what moved to it, less what moved from it.
    pub target: u64,
    /// Bytes it holds now.
    pub used: u64,
}

/// Lookups over which a lookup's weight halves: long enough that a load whose mix changes
/// every few hundred thousand lookups is judged by the mix, short enough that a lasting
/// change moves memory within a few million lookups.
const HALF_LIFE_LOOKUPS: f64 = (1 << 20) as f64;

/// How many times more per byte the taking role must save than the giving one.
const MOVE_FACTOR: f64 = 2.0;

/// The block cache gives nothing once it has served this share of its reads since the store
/// opened.
const MOST_HIT_RATE_TO_GIVE: f64 = 0.05;

/// A step is this share of the smaller first target of the two roles a move is between; the
/// block cache keeps this share of its own. The index cache keeps this share of its partitions free, and takes
/// its loan back once half of that room is used.
const STEP_DIVISOR: u64 = 8;

/// What the store counted since it opened, as one reading saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Counted {
    /// Point lookups that reached the tables.
    pub lookups: u64,
    pub cache_hits: u64,
    /// Data-block reads no filter answered for: false positives, and reads of tables whose
    /// filter the limit dropped.
    pub false_positives: u64,
}

/// Lookups, cache hits and false positives, each weighted by how recent it is.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Recent {
    pub lookups: f64,
    pub cache_hits: f64,
    pub false_positives: f64,
}

impl Recent {
    /// The window after `seen`, counted since the last reading: what came before weighs less
    /// by the lookups `seen` holds.
    pub(crate) fn after(self, seen: Counted) -> Recent {
        let kept = 0.5f64.powf(seen.lookups as f64 / HALF_LIFE_LOOKUPS);
        Recent {
            lookups: self.lookups * kept + seen.lookups as f64,
            cache_hits: self.cache_hits * kept + seen.cache_hits as f64,
            false_positives: self.false_positives * kept + seen.false_positives as f64,
        }
    }

    /// The window as the targets after a move would have seen it, by the rule's own model:
    /// the cache's hits in proportion to its size, the false positives by
    /// [`false_positive_factor`]. Counted at the old targets, the window would go on arguing
    /// for the move already made, and memory would overshoot.
    fn moved(self, before: &[u64; 4], after: &[u64; 4], keys: u64) -> Recent {
        let cache = MemoryRole::BlockCache.at();
        let filters = MemoryRole::Filters.at();
        let cache_hits = match before[cache] {
            0 => self.cache_hits,
            b => self.cache_hits * after[cache] as f64 / b as f64,
        };
        let grown = after[filters] as f64 - before[filters] as f64;
        Recent {
            lookups: self.lookups,
            cache_hits,
            false_positives: self.false_positives * false_positive_factor(grown, keys as f64),
        }
    }
}

/// What a rebalance reads of the store.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Reading {
    /// Counted since the store opened.
    pub counted: Counted,
    /// The block cache's hits over the reads it served since the store opened.
    pub cache_hit_rate: f64,
    /// Keys in the live tables.
    pub keys: u64,
    /// Bytes the live tables' index partitions take in the index cache, when known (some
    /// partition has been read to size them by).
    pub index_partitions: Option<u64>,
    /// Bytes the filters would take held whole: more they cannot use.
    pub whole_filters: u64,
}

/// What the options give the roles.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Given {
    pub memtables: u64,
    /// The block cache's size when the store owns its cache (`None`: none, or one shared
    /// with other stores, which this store must not resize).
    pub block_cache: Option<u64>,
    pub index_cache: Option<u64>,
    /// The filters' limit (`None`: uncapped, and then nothing moves).
    pub filters: Option<u64>,
    /// Whether memory follows reads (`Options::memory_follows_reads` and the filters
    /// following lookups).
    pub follows_reads: bool,
}

/// A move of `bytes` from one role's target to another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Move {
    pub from: MemoryRole,
    pub to: MemoryRole,
    pub bytes: u64,
}

/// The store's memory by role, and the rule that moves it.
pub(crate) struct Governor {
    given: [u64; 4],
    floors: [u64; 4],
    /// Which roles take part in moves: one the store cannot resize does not.
    movable: [bool; 4],
    uncapped_filters: bool,
    /// The filters' target, read on every flush and compaction without the lock.
    filter_target: AtomicU64,
    state: Mutex<State>,
}

/// What the governor holds between readings.
#[derive(Debug, Default)]
struct State {
    targets: [u64; 4],
    last: Counted,
    recent: Recent,
}

impl Governor {
    pub(crate) fn new(given: Given) -> Governor {
        let mut sizes = [0; 4];
        sizes[MemoryRole::Memtables.at()] = given.memtables;
        sizes[MemoryRole::BlockCache.at()] = given.block_cache.unwrap_or(0);
        sizes[MemoryRole::IndexPartitions.at()] = given.index_cache.unwrap_or(0);
        sizes[MemoryRole::Filters.at()] = given.filters.unwrap_or(0);
        let mut floors = sizes;
        floors[MemoryRole::BlockCache.at()] = sizes[MemoryRole::BlockCache.at()] / STEP_DIVISOR;
        floors[MemoryRole::IndexPartitions.at()] = 0;
        let follows = given.follows_reads && given.filters.is_some();
        let mut movable = [false; 4];
        movable[MemoryRole::Filters.at()] = follows;
        movable[MemoryRole::BlockCache.at()] = follows && given.block_cache.is_some();
        movable[MemoryRole::IndexPartitions.at()] = follows && given.index_cache.is_some();
        Governor {
            given: sizes,
            floors,
            movable,
            uncapped_filters: given.filters.is_none(),
            filter_target: AtomicU64::new(sizes[MemoryRole::Filters.at()]),
            state: Mutex::new(State {
                targets: sizes,
                ..State::default()
            }),
        }
    }

    /// Whether any memory can move: the filters and at least one other role take part.
    pub(crate) fn moves(&self) -> bool {
        self.movable[MemoryRole::Filters.at()]
            && (self.movable[MemoryRole::BlockCache.at()]
                || self.movable[MemoryRole::IndexPartitions.at()])
    }

    /// The limit the filters are held to now; `None` when they are uncapped.
    pub(crate) fn filter_limit(&self) -> Option<u64> {
        (!self.uncapped_filters).then(|| self.filter_target.load(Ordering::Relaxed))
    }

    /// Every role's memory, `used` filled in by `used`.
    pub(crate) fn roles(&self, used: impl Fn(MemoryRole) -> u64) -> Vec<RoleMemory> {
        let targets = lock(&self.state).targets;
        MemoryRole::ALL
            .iter()
            .map(|&role| RoleMemory {
                role,
                given: self.given[role.at()],
                floor: self.floors[role.at()],
                target: targets[role.at()],
                used: used(role),
            })
            .collect()
    }

    /// Reads the store and makes the moves the rule calls for: at most one from each role,
    /// and none back, so that a role that took does not give in the same reading.
    /// When any moved, `apply` is given the targets after them (the caller resizes what
    /// holds the memory: under the governor's lock, so `roles` never shows a target its
    /// holder does not have yet), and they are returned; `None` when nothing moved, or
    /// another thread is rebalancing.
    pub(crate) fn rebalance(
        &self,
        reading: &Reading,
        apply: impl FnOnce(&[u64; 4]),
    ) -> Option<[u64; 4]> {
        let mut state = match self.state.try_lock() {
            Ok(state) => state,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        let last = std::mem::replace(&mut state.last, reading.counted);
        // Counters read one by one may lag each other: a difference is never below zero.
        let seen = Counted {
            lookups: reading.counted.lookups.saturating_sub(last.lookups),
            cache_hits: reading.counted.cache_hits.saturating_sub(last.cache_hits),
            false_positives: (reading.counted.false_positives).saturating_sub(last.false_positives),
        };
        state.recent = state.recent.after(seen);
        let mut moved_by = [false; 4];
        let mut moved = false;
        while let Some(m) = self.next_move(&state.targets, &state.recent, reading, &moved_by) {
            let before = state.targets;
            state.targets[m.from.at()] -= m.bytes;
            state.targets[m.to.at()] += m.bytes;
            state.recent = state.recent.moved(&before, &state.targets, reading.keys);
            moved_by[m.from.at()] = true;
            moved_by[m.to.at()] = true;
            moved = true;
        }
        if !moved {
            return None;
        }
        apply(&state.targets);
        let filters = state.targets[MemoryRole::Filters.at()];
        self.filter_target.store(filters, Ordering::Relaxed);
        Some(state.targets)
    }

    /// The move the rule calls for from `targets`, if any, no role in `moved_by` giving.
    fn next_move(
        &self,
        targets: &[u64; 4],
        recent: &Recent,
        reading: &Reading,
        moved_by: &[bool; 4],
    ) -> Option<Move> {
        let value = Value {
            governor: self,
            targets,
            recent,
            reading,
        };
        let roles = MemoryRole::ALL.into_iter().filter(|r| self.movable[r.at()]);
        let taker = (roles.clone())
            .filter(|&r| value.room(r) > 0)
            .max_by(|&a, &b| value.of_taking(a).total_cmp(&value.of_taking(b)))?;
        let giver = roles
            .filter(|&r| r != taker && !moved_by[r.at()] && value.spare(r) > 0)
            .min_by(|&a, &b| value.of_keeping(a).total_cmp(&value.of_keeping(b)))?;
        let (taking, keeping) = (value.of_taking(taker), value.of_keeping(giver));
        if !(taking > 0.0 && taking >= MOVE_FACTOR * keeping) {
            return None;
        }
        let room = value.spare(giver).min(value.room(taker));
        // Memory its role cannot use, and memory a role needs back, move at once. A move
        // judged on what both sides' bytes save goes by steps of an eighth of the smaller
        // first target of the two, so that each step is judged on counts it moved. A move of
        // less than half a step is not worth the refit's reads, unless it gives the taker all
        // it can take (a cache taking back the last of what it gave).
        let step = (self.given[giver.at()].min(self.given[taker.at()]) / STEP_DIVISOR).max(1);
        let judged = taking.is_finite() && keeping > 0.0;
        let bytes = match judged {
            true => room.min(step),
            false => room,
        };
        let fills_taker = bytes == value.room(taker);
        if bytes < step / 2 && taking.is_finite() && !fills_taker {
            return None;
        }
        Some(Move {
            from: giver,
            to: taker,
            bytes,
        })
    }
}

/// What each role's bytes save, and what it can give and take, at one set of targets.
struct Value<'a> {
    governor: &'a Governor,
    targets: &'a [u64; 4],
    recent: &'a Recent,
    reading: &'a Reading,
}

impl Value<'_> {
    fn target(&self, role: MemoryRole) -> u64 {
        self.targets[role.at()]
    }

    fn given(&self, role: MemoryRole) -> u64 {
        self.governor.given[role.at()]
    }

    /// The index cache's partitions and the room kept for them to grow in.
    fn index_needs(&self) -> Option<u64> {
        let partitions = self.reading.index_partitions?;
        Some(partitions + partitions / STEP_DIVISOR)
    }

    /// Whether the index partitions have used half the room kept for them.
    fn index_short(&self) -> bool {
        let target = self.target(MemoryRole::IndexPartitions);
        (self.reading.index_partitions).is_some_and(|p| {
            target < p + p / (2 * STEP_DIVISOR) && target < self.given(MemoryRole::IndexPartitions)
        })
    }

    /// Reads per lookup a byte of the block cache saves.
    fn cache_per_byte(&self) -> f64 {
        let capacity = self.target(MemoryRole::BlockCache);
        if self.recent.lookups < 1.0 || capacity == 0 {
            return 0.0;
        }
        self.recent.cache_hits / self.recent.lookups / capacity as f64
    }

    /// Reads per lookup a byte more of filters saves.
    fn filters_per_byte(&self) -> f64 {
        if self.recent.lookups < 1.0 {
            return 0.0;
        }
        let per_lookup = self.recent.false_positives / self.recent.lookups;
        false_positives_saved_per_byte(per_lookup, self.reading.keys as f64)
    }

    /// What the role's last bytes save: what giving a step would cost.
    fn of_keeping(&self, role: MemoryRole) -> f64 {
        match role {
            MemoryRole::Memtables => f64::INFINITY,
            MemoryRole::BlockCache if self.reading.cache_hit_rate >= MOST_HIT_RATE_TO_GIVE => {
                f64::INFINITY
            }
            MemoryRole::BlockCache => self.cache_per_byte(),
            MemoryRole::IndexPartitions => 0.0,
            MemoryRole::Filters => self.filters_per_byte(),
        }
    }

    /// What the role's next bytes would save.
    fn of_taking(&self, role: MemoryRole) -> f64 {
        match role {
            MemoryRole::Memtables => 0.0,
            MemoryRole::BlockCache => self.cache_per_byte(),
            MemoryRole::IndexPartitions if self.index_short() => f64::INFINITY,
            MemoryRole::IndexPartitions => 0.0,
            MemoryRole::Filters => self.filters_per_byte(),
        }
    }

    /// Bytes the role can give: what its target holds above its floor, and for the index
    /// cache above its partitions' needs.
    fn spare(&self, role: MemoryRole) -> u64 {
        let above_floor = self
            .target(role)
            .saturating_sub(self.governor.floors[role.at()]);
        match role {
            MemoryRole::Memtables => 0,
            MemoryRole::IndexPartitions => match self.index_needs() {
                Some(needs) => self.target(role).saturating_sub(needs),
                None => 0,
            },
            MemoryRole::BlockCache | MemoryRole::Filters => above_floor,
        }
    }

    /// Bytes the role can take: the block cache only what it gave, the index cache what its
    /// partitions need once short of it, the filters only what whole filters would hold.
    fn room(&self, role: MemoryRole) -> u64 {
        match role {
            MemoryRole::Memtables => 0,
            MemoryRole::BlockCache => self.given(role).saturating_sub(self.target(role)),
            MemoryRole::IndexPartitions => match (self.index_short(), self.index_needs()) {
                (true, Some(needs)) => needs.min(self.given(role)) - self.target(role),
                _ => 0,
            },
            MemoryRole::Filters => (self.reading.whole_filters).saturating_sub(self.target(role)),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
