//! How long writes have rested: the time since a memtable was last frozen, and how long a
//! rest must be before something is spent on it.
//!
//! The compaction of level 0 below its trigger (`level0_at_rest`) bets that writes have
//! stopped for a while. The bet costs writes that only a rest which goes on pays back, so
//! writes that pause briefly and often must not have it spent at every pause.
//! The rest waited for starts at a first rest the store's options give, and doubles each time
//! a memtable is frozen less than `PAYBACK` times that rest after a bet was placed (up to
//! `LONGEST_REST`); a bet that stood longer brings it back down to the first rest. Writes
//! that freeze a memtable every 30 seconds, against a first rest of 10, thus see two bets
//! lost, then none while they last.

use std::time::{Duration, Instant};

/// The longest rest waited for, however often bets were lost.
pub(super) const LONGEST_REST: Duration = Duration::from_secs(30 * 60);

/// How many times the rest it waited for a bet must stand to have paid for what it spent.
const PAYBACK: u32 = 8;

/// When writes last froze a memtable, how long they must rest before a bet, and when the
/// bet standing was placed. Its owner keeps it locked with what it bets.
#[derive(Debug)]
pub(super) struct Rest {
    first: Duration,
    last_freeze: Instant,
    needed: Duration,
    bet_since: Option<Instant>,
}

impl Rest {
    /// A rest of `first` before the first bet, counted from `now`.
    pub(super) fn new(first: Duration, now: Instant) -> Rest {
        Rest {
            first,
            last_freeze: now,
            needed: first,
            bet_since: None,
        }
    }

    /// A memtable was frozen at `now`: the rest starts again, and the bet standing, if any,
    /// is judged: one placed less than `PAYBACK` rests ago doubles the next rest, an older
    /// one brings it back to the first.
    pub(super) fn memtable_frozen(&mut self, now: Instant) {
        self.last_freeze = now;
        if let Some(since) = self.bet_since.take() {
            let stood = now.saturating_duration_since(since);
            self.needed = match stood < self.needed * PAYBACK {
                true => (self.needed * 2).min(LONGEST_REST.max(self.first)),
                false => self.first,
            };
        }
    }

    /// Whether writes have rested, at `now`, as long as a bet waits for.
    pub(super) fn rested(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_freeze) >= self.needed
    }

    /// Something was spent on the rest at `now`; a bet standing keeps its time.
    pub(super) fn bet(&mut self, now: Instant) {
        self.bet_since = self.bet_since.or(Some(now));
    }

    /// The rest the next bet waits for.
    #[cfg(test)]
    pub(super) fn needed(&self) -> Duration {
        self.needed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn bets_lost_double_the_rest_and_one_that_paid_resets_it() {
        let start = Instant::now();
        let mut rest = Rest::new(secs(10), start);
        assert!(!rest.rested(start + secs(9)));
        assert!(rest.rested(start + secs(10)));
        rest.bet(start + secs(10));
        // Lost: frozen 20 s after the bet, under 8 times 10 s.
        rest.memtable_frozen(start + secs(30));
        assert_eq!(rest.needed(), secs(20));
        assert!(!rest.rested(start + secs(49)));
        assert!(rest.rested(start + secs(50)));
        // A freeze with no bet standing leaves the rest as it is.
        rest.memtable_frozen(start + secs(60));
        assert_eq!(rest.needed(), secs(20));
        // Paid: stood 160 s, 8 times the 20 s waited for.
        rest.bet(start + secs(101));
        rest.memtable_frozen(start + secs(261));
        assert_eq!(rest.needed(), secs(10));
    }

    #[test]
    fn the_rest_never_passes_its_longest() {
        let start = Instant::now();
        let mut rest = Rest::new(secs(10), start);
        let mut now = start;
        for _ in 0..20 {
            now += LONGEST_REST;
            rest.bet(now);
            now += secs(1);
            rest.memtable_frozen(now);
        }
        assert_eq!(rest.needed(), LONGEST_REST);
        // A first rest longer than the longest is kept.
        let mut long = Rest::new(LONGEST_REST * 2, start);
        long.bet(start);
        long.memtable_frozen(start + secs(1));
        assert_eq!(long.needed(), LONGEST_REST * 2);
    }
}
