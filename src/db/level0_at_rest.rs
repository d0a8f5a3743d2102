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
//! `Options::compact_level0_at_rest` (10 seconds by default), and lookups have asked level
//! 0's filters `PROBES_WORTH_A_COMPACTION` times since, level 0 is compacted as if it had
//! reached its trigger. A store nobody reads keeps its writes' cheaper shape.
//!
//! The compaction bets that writes have stopped: if a memtable is frozen soon after it, the
//! rest waited for the next one doubles (`write_rest`), so writes that pause often do not have
//! each flush compacted on its own.

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::write_rest::Rest;
use super::{lock, Inner, ReadState, ShapeState};
use crate::compaction::{self, Compaction};
use crate::keyspace::KeyspaceId;

/// Filter probes of level-0 tables since the last freeze that make compacting level 0 worth
/// its writes: a store read at a hundred lookups a second reaches them in under two minutes.
pub(super) const PROBES_WORTH_A_COMPACTION: u64 = 10_000;

/// The rest writes have had, and lookups' probes of level 0 since it began.
pub(super) struct Level0AtRest {
    state: Mutex<State>,
}

struct State {
    rest: Rest,
    /// Level-0 filter probes (`ReadCounters::levels[0]`) when the last memtable was frozen.
    probes_at_freeze: u64,
}

impl Level0AtRest {
    /// Counts a rest of `first_rest` from `now`, and probes from `probes`.
    pub(super) fn new(first_rest: Duration, now: Instant, probes: u64) -> Level0AtRest {
        Level0AtRest {
            state: Mutex::new(State {
                rest: Rest::new(first_rest, now),
                probes_at_freeze: probes,
            }),
        }
    }

    /// A memtable was frozen at `now`, with level 0's filters probed `probes` times so far.
    pub(super) fn memtable_frozen(&self, now: Instant, probes: u64) {
        let mut state = lock(&self.state);
        state.rest.memtable_frozen(now);
        state.probes_at_freeze = probes;
    }

    /// Whether level 0, holding tables, is to be compacted at `now`: writes have rested long
    /// enough, and lookups probed its filters often enough since (`probes` so far).
    pub(super) fn due(&self, now: Instant, probes: u64) -> bool {
        let state = lock(&self.state);
        state.rest.rested(now)
            && probes.saturating_sub(state.probes_at_freeze) >= PROBES_WORTH_A_COMPACTION
    }

    /// A compaction of level 0 began at `now` because writes rested.
    pub(super) fn compaction_started(&self, now: Instant) {
        lock(&self.state).rest.bet(now);
    }
}

impl Inner {
    /// How many times lookups have asked level-0 tables' filters since the store opened.
    pub(super) fn level0_probes(&self) -> u64 {
        self.table_env.counters.levels[0]
            .probes
            .load(Ordering::Relaxed)
    }

    /// Whether level 0 is to be compacted below its trigger now: some keyspace's level 0
    /// holds tables, no memtable waits for a flush, and writes have rested and lookups asked
    /// level 0 as `Level0AtRest::due` wants.
    pub(super) fn level0_due_at_rest(&self, state: &ReadState) -> bool {
        let Some(at_rest) = &self.level0_at_rest else {
            return false;
        };
        !state.has_frozen()
            && state.trees.iter().any(|t| !t.version.level(0).is_empty())
            && at_rest.due(Instant::now(), self.level0_probes())
    }

    /// When level 0 is due to be compacted at rest: the compaction of the level 0 with the
    /// most tables that conflicts with no running compaction, recorded as running in `shape`.
    pub(super) fn pick_level0_at_rest(
        &self,
        state: &ReadState,
        shape: &mut ShapeState,
    ) -> Option<(KeyspaceId, Compaction)> {
        let at_rest = self.level0_at_rest.as_ref()?;
        if !self.level0_due_at_rest(state) {
            return None;
        }
        let mut trees: Vec<_> = state.trees.iter().collect();
        trees.sort_by_key(|t| std::cmp::Reverse(t.version.level(0).len()));
        let (ks, job) = trees.into_iter().find_map(|tree| {
            let running = shape.compacting.entry(tree.id()).or_default();
            let job = compaction::pick_level0(&tree.version, tree.options(), running)?;
            running.add(&job);
            Some((tree.id(), job))
        })?;
        at_rest.compaction_started(Instant::now());
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
    fn due_once_writes_rested_and_lookups_probed_level0() {
        let start = Instant::now();
        let at_rest = Level0AtRest::new(secs(10), start, 500);
        let enough = 500 + PROBES_WORTH_A_COMPACTION;
        assert!(
            !at_rest.due(start + secs(9), enough),
            "writes rested 9 s of 10"
        );
        assert!(!at_rest.due(start + secs(11), enough - 1), "too few probes");
        assert!(at_rest.due(start + secs(11), enough));
        // A freeze starts both counts again.
        at_rest.memtable_frozen(start + secs(12), enough);
        assert!(!at_rest.due(start + secs(30), enough + 5));
        assert!(at_rest.due(start + secs(30), enough + PROBES_WORTH_A_COMPACTION));
    }

    #[test]
    fn a_compaction_soon_followed_by_writes_makes_the_next_wait_longer() {
        let start = Instant::now();
        let at_rest = Level0AtRest::new(secs(10), start, 0);
        let probes = PROBES_WORTH_A_COMPACTION;
        assert!(at_rest.due(start + secs(10), probes));
        at_rest.compaction_started(start + secs(10));
        // Frozen 20 s later: the bet was lost, the next rest is 20 s.
        at_rest.memtable_frozen(start + secs(30), 0);
        assert!(!at_rest.due(start + secs(49), probes));
        assert!(at_rest.due(start + secs(50), probes));
    }
}
