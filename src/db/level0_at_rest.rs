//! Compacts level 0 once writes rest, before it reaches its trigger.
//!
//! Level 0 waits for `l0_compaction_trigger` tables before it is compacted into the base
//! level, so that each such compaction, which rewrites the base level's tables in its range,
//! takes several flushes' worth of writes at once. Meanwhile each point lookup asks the filter
//! of every level-0 table whose range holds its key, which is nearly all of them (a flush holds
//! keys from across the key space): after a load of 100M keys that left three level-0 tables,
//! an absent get asked 4.9 filters instead of 2.0. While writes go on, that is the price of
//! cheaper writes; once they stop, waiting for the trigger saves nothing, and the tables
//! stay until writes come back, which may be never. So once no memtable has been frozen for
//! `Options::compact_level0_at_rest` (10 seconds by default), no other compaction is due,
//! and `LOOKUPS_WORTH_A_COMPACTION` lookups have reached a keyspace's tables while its level
//! 0 held some since, that level 0 is compacted as if it had reached its trigger. A keyspace
//! nobody reads keeps its writes' cheaper shape.
//!
//! The compaction bets that writes have stopped: if a memtable is frozen soon after it, the
//! rest waited for the next one doubles (`write_rest`), so writes that pause often do not have
//! each flush compacted on its own.

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::write_rest::Rest;
use super::{lock, Counters, Inner, ReadState, ShapeState, Tree};
use crate::compaction::{self, Compaction};
use crate::keyspace::KeyspaceId;

/// Lookups that reached a keyspace's tables while its level 0 held some, since the last
/// freeze, that make compacting its level 0 worth the writes: a store read at a hundred
/// lookups a second reaches them in under two minutes.
pub(super) const LOOKUPS_WORTH_A_COMPACTION: u64 = 10_000;

/// The rest writes have had, for the compaction of level 0 that bets on it.
pub(super) struct Level0AtRest {
    rest: Mutex<Rest>,
}

impl Level0AtRest {
    /// Counts a rest of `first_rest` from `now`.
    pub(super) fn new(first_rest: Duration, now: Instant) -> Level0AtRest {
        Level0AtRest {
            rest: Mutex::new(Rest::new(first_rest, now)),
        }
    }

    /// A memtable was frozen at `now`.
    fn memtable_frozen(&self, now: Instant) {
        lock(&self.rest).memtable_frozen(now);
    }

    /// Whether writes have rested, at `now`, as long as a compaction of level 0 waits for.
    fn rested(&self, now: Instant) -> bool {
        lock(&self.rest).rested(now)
    }

    /// A compaction of level 0 began at `now` because writes rested.
    fn compaction_started(&self, now: Instant) {
        lock(&self.rest).bet(now);
    }
}

impl Tree {
    /// Whether lookups asked this tree's level 0 often enough since the last freeze for a
    /// compaction of it at rest.
    fn level0_read_enough(&self) -> bool {
        !self.version.level(0).is_empty()
            && self.keyspace.level0_lookups.load(Ordering::Relaxed) >= LOOKUPS_WORTH_A_COMPACTION
    }
}

impl Inner {
    /// Counts `n` point lookups that reached `tree`'s tables: they asked its level 0 when it
    /// holds tables. Once level 0 is empty, or was asked often enough, nothing is written:
    /// the shared counter is only read.
    pub(super) fn count_level0_lookups(&self, tree: &Tree, n: u64) {
        let counter = &tree.keyspace.level0_lookups;
        if self.level0_at_rest.is_some()
            && !tree.version.level(0).is_empty()
            && counter.load(Ordering::Relaxed) < LOOKUPS_WORTH_A_COMPACTION
        {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// A memtable is frozen at `now`: writes rest no more, and each keyspace counts the
    /// lookups of its level 0 afresh.
    pub(super) fn level0_rest_ends(&self, now: Instant) {
        let Some(at_rest) = &self.level0_at_rest else {
            return;
        };
        at_rest.memtable_frozen(now);
        for tree in self.read_state().trees.iter() {
            tree.keyspace.level0_lookups.store(0, Ordering::Relaxed);
        }
    }

    /// Whether some keyspace's level 0 is to be compacted below its trigger now: no
    /// memtable waits for a flush, no other compaction is due, writes have rested long
    /// enough, and lookups asked that level 0 often enough since.
    pub(super) fn level0_due_at_rest(&self, state: &ReadState) -> bool {
        let Some(at_rest) = &self.level0_at_rest else {
            return false;
        };
        state.trees.iter().any(|t| t.level0_read_enough())
            && !state.has_frozen()
            && !state.needs_compaction()
            && at_rest.rested(Instant::now())
    }

    /// When level 0 is due to be compacted at rest: the compaction of the most tables, of
    /// a level 0 read often enough, that conflicts with no running compaction, recorded as
    /// running in `shape`.
    pub(super) fn pick_level0_at_rest(
        &self,
        state: &ReadState,
        shape: &mut ShapeState,
    ) -> Option<(KeyspaceId, Compaction)> {
        let at_rest = self.level0_at_rest.as_ref()?;
        if !self.level0_due_at_rest(state) {
            return None;
        }
        let mut trees: Vec<_> = (state.trees.iter())
            .filter(|t| t.level0_read_enough())
            .collect();
        trees.sort_by_key(|t| std::cmp::Reverse(t.version.level(0).len()));
        let (ks, job) = trees.into_iter().find_map(|tree| {
            let running = shape.compacting.entry(tree.id()).or_default();
            let job = compaction::pick_level0(&tree.version, tree.options(), running)?;
            running.add(&job);
            Some((tree.id(), job))
        })?;
        at_rest.compaction_started(Instant::now());
        Counters::add_one(&self.counters.level0_compactions_at_rest);
        Some((ks, job))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn rested_once_no_memtable_was_frozen_for_the_rest() {
        let start = Instant::now();
        let at_rest = Level0AtRest::new(secs(10), start);
        assert!(!at_rest.rested(start + secs(9)));
        assert!(at_rest.rested(start + secs(11)));
        at_rest.memtable_frozen(start + secs(12));
        assert!(!at_rest.rested(start + secs(21)));
        assert!(at_rest.rested(start + secs(22)));
    }

    #[test]
    fn a_compaction_soon_followed_by_writes_makes_the_next_wait_longer() {
        let start = Instant::now();
        let at_rest = Level0AtRest::new(secs(10), start);
        assert!(at_rest.rested(start + secs(10)));
        at_rest.compaction_started(start + secs(10));
        // Frozen 20 s later: the bet was lost, the next rest is 20 s.
        at_rest.memtable_frozen(start + secs(30));
        assert!(!at_rest.rested(start + secs(49)));
        assert!(at_rest.rested(start + secs(50)));
    }
}
