//! Slowing writers down smoothly while level 0 is behind, so that it never has to stop them.
//!
//! Once level 0 holds `l0_slowdown_trigger` tables, each write group pays for its bytes at a
//! *delayed rate*: the leader sleeps until the group's turn, as if the writes went through a
//! pipe of that many bytes per second. The rate starts at `delayed_write_rate` and follows
//! level 0: each time the leader finds more level-0 tables than at its last look, the rate
//! drops by a fifth; each time it finds fewer, it rises by a quarter (up to the option). So a
//! writer that outruns compaction settles at about the rate compaction sustains, instead of
//! filling level 0 up to `l0_stop_trigger` and waiting there for a whole compaction, which
//! took ten seconds and more at 30M keys. RocksDB's write controller is the model
//! (`delayed_write_rate`, and the same factors), though it adjusts its rate when a new version
//! is installed, from its estimate of pending compaction bytes as well as from level 0.
//!
//! Short debts are not slept: a thread sleeps for at least about a millisecond, so a group
//! whose turn is less than `MIN_SLEEP` away goes ahead and the debt carries over. Long ones are
//! cut to `MAX_WAIT`: after one very large batch, the next writer would otherwise wait for all
//! of its bytes at once, seconds with no write completing.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::lock;
use crate::options::MIN_DELAYED_WRITE_RATE;

/// The shortest sleep worth taking: shorter ones overshoot by more than they wait.
const MIN_SLEEP: Duration = Duration::from_millis(1);

/// The longest one group waits for the bytes before it.
const MAX_WAIT: Duration = Duration::from_millis(500);

/// The slowest a delayed writer is ever made to go, so a write always completes.
const MIN_RATE: f64 = MIN_DELAYED_WRITE_RATE as f64;

/// Factors by which the rate falls when level 0 grows and rises when it shrinks.
const SLOWER: f64 = 0.8;
const FASTER: f64 = 1.25;

/// The delayed rate and the writers' debt against it.
pub(super) struct WriteRate {
    max_rate: f64,
    state: Mutex<RateState>,
}

struct RateState {
    /// Bytes per second while delayed.
    rate: f64,
    /// When the bytes paid for so far have gone through; `None` when writes are not delayed.
    paid_until: Option<Instant>,
    /// Level-0 tables at the last delayed write.
    last_level0: usize,
}

impl WriteRate {
    /// A controller whose delayed rate starts at, and never exceeds, `bytes_per_second`.
    pub(super) fn new(bytes_per_second: u64) -> WriteRate {
        let max_rate = (bytes_per_second as f64).max(MIN_RATE);
        WriteRate {
            max_rate,
            state: Mutex::new(RateState {
                rate: max_rate,
                paid_until: None,
                last_level0: 0,
            }),
        }
    }

    /// How long a group of `bytes` must wait before it is written, with `level0` tables in
    /// level 0, given whether level 0 is past its slowdown trigger. Zero when not delayed.
    pub(super) fn delay(&self, bytes: u64, level0: usize, slow_down: bool) -> Duration {
        self.delay_at(Instant::now(), bytes, level0, slow_down)
    }

    /// [`delay`](Self::delay) for a group that asks at `now`.
    fn delay_at(&self, now: Instant, bytes: u64, level0: usize, slow_down: bool) -> Duration {
        let mut state = lock(&self.state);
        if !slow_down {
            // Behind no longer: the next slowdown starts afresh, at the full delayed rate.
            state.paid_until = None;
            state.rate = self.max_rate;
            return Duration::ZERO;
        }
        if state.paid_until.is_some() {
            state.rate = self.adjusted(state.rate, state.last_level0, level0);
        }
        state.last_level0 = level0;
        let start = state
            .paid_until
            .map_or(now, |t| t.clamp(now, now + MAX_WAIT));
        let paid_until = start + Duration::from_secs_f64(bytes as f64 / state.rate);
        state.paid_until = Some(paid_until);
        let wait = start.saturating_duration_since(now);
        if wait < MIN_SLEEP {
            return Duration::ZERO;
        }
        wait
    }

    /// The rate after level 0 went from `before` to `now` tables.
    fn adjusted(&self, rate: f64, before: usize, now: usize) -> f64 {
        match now.cmp(&before) {
            std::cmp::Ordering::Greater => (rate * SLOWER).max(MIN_RATE),
            std::cmp::Ordering::Less => (rate * FASTER).min(self.max_rate),
            std::cmp::Ordering::Equal => rate,
        }
    }

    /// The delayed rate now, in bytes per second (for `Stats`).
    pub(super) fn current_rate(&self) -> Option<u64> {
        let state = lock(&self.state);
        state.paid_until.map(|_| state.rate as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn writes_are_not_delayed_below_the_trigger() {
        let rate = WriteRate::new(16 * MIB);
        assert_eq!(rate.delay(10 * MIB, 3, false), Duration::ZERO);
        assert_eq!(rate.current_rate(), None);
    }

    #[test]
    fn delayed_writes_pay_for_their_bytes_at_the_rate() {
        let rate = WriteRate::new(16 * MIB);
        let now = Instant::now();
        // The first group starts at once; the next waits for the first one's bytes.
        assert_eq!(rate.delay_at(now, 4 * MIB, 20, true), Duration::ZERO);
        let later = now + Duration::from_millis(50);
        let wait = rate.delay_at(later, MIB, 20, true);
        assert_eq!(
            wait,
            Duration::from_millis(200),
            "4 MiB at 16 MiB/s, 50 ms on"
        );
        assert_eq!(rate.current_rate(), Some(16 * MIB));
    }

    #[test]
    fn no_group_waits_longer_than_the_cap() {
        let rate = WriteRate::new(16 * MIB);
        let now = Instant::now();
        // 64 MiB at 16 MiB/s would be four seconds.
        rate.delay_at(now, 64 * MIB, 20, true);
        assert_eq!(rate.delay_at(now, 1, 20, true), MAX_WAIT);
    }

    #[test]
    fn small_debts_are_carried_not_slept() {
        let rate = WriteRate::new(16 * MIB);
        // 100 bytes at 16 MiB/s is 6 µs: well under the shortest sleep.
        for _ in 0..10 {
            assert_eq!(rate.delay(100, 20, true), Duration::ZERO);
        }
    }

    #[test]
    fn the_rate_falls_while_level_0_grows_and_recovers_as_it_shrinks() {
        let rate = WriteRate::new(16 * MIB);
        rate.delay(1, 20, true);
        rate.delay(1, 21, true);
        rate.delay(1, 22, true);
        let slowed = rate.current_rate().unwrap() as f64;
        let close = |a: f64, b: f64| (a - b).abs() <= 1.0;
        assert!(close(slowed, 16.0 * MIB as f64 * 0.8 * 0.8), "{slowed}");
        rate.delay(1, 21, true);
        let recovered = rate.current_rate().unwrap() as f64;
        assert!(close(recovered, slowed * 1.25), "{recovered}");
        // Rising as level 0 keeps shrinking, but never above the configured rate.
        for level0 in (0..21).rev() {
            rate.delay(1, level0, true);
        }
        assert_eq!(rate.current_rate(), Some(16 * MIB));
    }

    #[test]
    fn the_rate_never_falls_below_its_floor() {
        let rate = WriteRate::new(16 * MIB);
        for level0 in 20..200 {
            rate.delay(1, level0, true);
        }
        assert_eq!(rate.current_rate(), Some(MIN_RATE as u64));
    }

    #[test]
    fn leaving_the_slowdown_restores_the_full_rate() {
        let rate = WriteRate::new(16 * MIB);
        for level0 in 20..30 {
            rate.delay(1, level0, true);
        }
        rate.delay(1, 5, false);
        rate.delay(1, 20, true);
        assert_eq!(rate.current_rate(), Some(16 * MIB));
    }
}
