//! Lends the filters the room of the frozen memtables while writes rest.
//!
//! A store's memory is planned with room for `max_immutable_memtables` frozen memtables
//! beside the active one: in 256 MiB, two of 32 MiB beside the filters' 64 MiB. They exist
//! only while writes come faster than flushes: a store that serves lookups after a load,
//! or between bursts of writes, holds none, and that room holds nothing but the page cache's
//! pages of a store many times larger than it (100M keys: 12 GB of tables, where 64 MiB of
//! pages serve well under 1% of the reads). As filter bits, the same memory cuts the false
//! positives that send absent-key lookups to the disk. So, once no memtable has been frozen
//! for a while and no flush or compaction is due, half the room is lent to the filters (the
//! other half is the margin the refits that spend it need, `MemorySplit::new`), and the
//! next refit spends the grown limit; the first memtable frozen after takes it back at once,
//! and the next idle background turn folds the filters to the smaller limit, as does the
//! flush's new version (the active memtable has its own room throughout, and the loan is
//! never all the frozen memtables' room but one memtable's).
//!
//! A loan costs filter reads from the files when it is spent, so writes that pause for less
//! than the loan pays back must not have filters read back and folded at every pause: a loan
//! is a bet on the rest, and waits as `write_rest` says, from `Options::write_buffer_loan_rest`
//! (10 seconds by default).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::lock;
use super::write_rest::Rest;

/// A loan moves only by more than this share of the room.
const MOVE_DIVISOR: u64 = 16;

/// The frozen memtables' room, and what of it the filters hold.
pub(super) struct WriteBufferLoan {
    /// Bytes the frozen memtables may take; 0 for a store that lends nothing.
    room: u64,
    /// Bytes lent now (stored with `rest` locked).
    lent: AtomicU64,
    /// The rest a loan waits for; a loan standing is its bet.
    rest: Mutex<Rest>,
}

impl WriteBufferLoan {
    /// A loan of up to `room` bytes after `first_rest`, counting the rest from `now`.
    pub(super) fn new(room: u64, first_rest: Duration, now: Instant) -> WriteBufferLoan {
        WriteBufferLoan {
            room,
            lent: AtomicU64::new(0),
            rest: Mutex::new(Rest::new(first_rest, now)),
        }
    }

    /// Whether this store lends the room at all.
    pub(super) fn lends(&self) -> bool {
        self.room > 0
    }

    /// Bytes lent to the filters now.
    pub(super) fn lent(&self) -> u64 {
        self.lent.load(Ordering::SeqCst)
    }

    /// A memtable was frozen at `now`: the loan, if any, is taken back at once. Returns
    /// whether there was one, so that the filters are folded to the smaller limit before
    /// the next memtable fills.
    pub(super) fn memtable_frozen(&self, now: Instant) -> bool {
        if !self.lends() {
            return false;
        }
        let mut rest = lock(&self.rest);
        rest.memtable_frozen(now);
        self.lent.swap(0, Ordering::SeqCst) > 0
    }

    /// Lends up to `usable` bytes (what whole filters could still use, and the process's
    /// memory leaves) when, at `now`, writes have rested long enough and `writes_pending` (a
    /// frozen memtable, a flush or compaction due) is false; a loan standing shrinks to
    /// `usable` if that fell. It moves only by more than a sixteenth of the room (or to
    /// nothing), so that a refit does not read or fold filters for a few bytes. Returns
    /// whether the loan changed.
    pub(super) fn lend_if_rested(&self, now: Instant, writes_pending: bool, usable: u64) -> bool {
        let rest = &mut *lock(&self.rest);
        let lent = self.lent.load(Ordering::SeqCst);
        let loan = match !writes_pending && rest.rested(now) {
            true => self.room.min(usable),
            false => lent.min(usable),
        };
        let step = self.room / MOVE_DIVISOR;
        let moves = match loan {
            0 => lent > 0,
            _ => loan > lent.saturating_add(step) || loan.saturating_add(step) < lent,
        };
        if !moves {
            return false;
        }
        self.lent.store(loan, Ordering::SeqCst);
        match loan {
            0 => rest.withdraw_bet(),
            _ => rest.bet(now),
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::write_rest::LONGEST_REST;

    const MIB: u64 = 1 << 20;

    const FIRST_REST: Duration = Duration::from_secs(10);

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn lends_the_room_once_writes_rested_and_nothing_is_pending() {
        let start = Instant::now();
        let loan = WriteBufferLoan::new(64 * MIB, FIRST_REST, start);
        assert!(!loan.lend_if_rested(start + secs(9), false, u64::MAX));
        assert!(!loan.lend_if_rested(start + secs(11), true, u64::MAX));
        assert_eq!(loan.lent(), 0);
        assert!(loan.lend_if_rested(start + secs(11), false, u64::MAX));
        assert_eq!(loan.lent(), 64 * MIB);
        // No more than whole filters could use and memory leaves, and less once they leave
        // less; by more than a sixteenth of the room (4 MiB) only, or to nothing.
        let small = WriteBufferLoan::new(64 * MIB, FIRST_REST, start);
        assert!(!small.lend_if_rested(start + secs(11), false, 3 * MIB));
        assert!(small.lend_if_rested(start + secs(11), false, 10 * MIB));
        assert_eq!(small.lent(), 10 * MIB);
        assert!(!small.lend_if_rested(start + secs(12), false, 7 * MIB));
        assert!(!small.lend_if_rested(start + secs(12), false, 13 * MIB));
        assert_eq!(small.lent(), 10 * MIB);
        assert!(small.lend_if_rested(start + secs(12), false, 5 * MIB));
        assert_eq!(small.lent(), 5 * MIB);
        assert!(small.lend_if_rested(start + secs(13), true, 0));
        assert_eq!(small.lent(), 0);
    }

    #[test]
    fn a_frozen_memtable_takes_the_loan_back_at_once() {
        let start = Instant::now();
        let loan = WriteBufferLoan::new(64 * MIB, FIRST_REST, start);
        assert!(!loan.memtable_frozen(start + secs(1)), "nothing was lent");
        assert!(loan.lend_if_rested(start + secs(12), false, u64::MAX));
        assert!(loan.memtable_frozen(start + secs(13)));
        assert_eq!(loan.lent(), 0);
        // The rest counts again from the freeze; a pending write keeps a loan from starting
        // but does not end one (only a freeze does).
        assert!(!loan.lend_if_rested(start + secs(20), false, u64::MAX));
        assert_eq!(loan.lent(), 0);
    }

    #[test]
    fn loans_taken_back_early_wait_twice_as_long_and_one_that_paid_resets_the_wait() {
        let start = Instant::now();
        let loan = WriteBufferLoan::new(MIB, FIRST_REST, start);
        // Writes freezing a memtable every 30 s: the first loan comes 10 s after a freeze
        // and lasts 20 s, under 8 times 10 s.
        let mut freeze = start;
        assert!(loan.lend_if_rested(freeze + secs(10), false, u64::MAX));
        freeze += secs(30);
        assert!(loan.memtable_frozen(freeze));
        // Now 20 s of rest are needed.
        assert!(!loan.lend_if_rested(freeze + secs(19), false, u64::MAX));
        assert!(loan.lend_if_rested(freeze + secs(20), false, u64::MAX));
        freeze += secs(30);
        assert!(loan.memtable_frozen(freeze));
        // 40 s: longer than the writes ever pause, so no loan while they go on.
        assert!(!loan.lend_if_rested(freeze + secs(29), false, u64::MAX));
        freeze += secs(30);
        assert!(!loan.memtable_frozen(freeze));
        // Writes stop: a loan after 40 s that lasts 320 s or more paid; the next wait is 10 s.
        assert!(loan.lend_if_rested(freeze + secs(40), false, u64::MAX));
        freeze += secs(40 + 320);
        assert!(loan.memtable_frozen(freeze));
        assert!(!loan.lend_if_rested(freeze + secs(9), false, u64::MAX));
        assert!(loan.lend_if_rested(freeze + secs(10), false, u64::MAX));
    }

    #[test]
    fn the_wait_never_passes_its_longest() {
        let start = Instant::now();
        let loan = WriteBufferLoan::new(MIB, FIRST_REST, start);
        let mut now = start;
        for _ in 0..20 {
            now += LONGEST_REST;
            assert!(loan.lend_if_rested(now, false, u64::MAX));
            now += secs(1);
            assert!(loan.memtable_frozen(now));
        }
        assert_eq!(lock(&loan.rest).needed(), LONGEST_REST);
    }

    #[test]
    fn a_store_with_no_room_lends_nothing() {
        let start = Instant::now();
        let loan = WriteBufferLoan::new(0, FIRST_REST, start);
        assert!(!loan.lend_if_rested(start + secs(60), false, u64::MAX));
        assert_eq!(loan.lent(), 0);
    }
}
