//! Group commit: writers queue up, and the one at the head of the queue writes for a group.
//!
//! A writer encodes its batch before it joins, so that work runs in parallel. The writer at
//! the head of the queue, when no group is being written, becomes the leader: it takes a
//! group of queued batches, writes them (see `Inner::write_group`) and hands each member its
//! result. The others sleep until their result is in, or until they reach the head. One
//! fsync then covers every member that asked for one, and the order of the queue is the order
//! of the sequence numbers.
//!
//! A synced group costs an fsync, and writers that arrive meanwhile queue for the next group.
//! Writers that write again as soon as their write returns would then split into two cohorts
//! that take turns, each waiting out the other's fsync as well as its own: 8 such threads made
//! groups of 4. So the leader of a group that will sync first waits, for at most
//! `Options::group_commit_wait`, until every writer of the previous group has joined again (a
//! writer that does not come back costs one such wait). A lone writer never waits: it was the
//! whole previous group.
//!
//! That leader first yields the processor between looks at the queue, for at most
//! `YIELD_AT_MOST`, and only then sleeps until the last writer wakes it. The writers it waits
//! for are runnable and back within tens of microseconds, while a sleeping leader is woken by
//! the last of them, one more wake-up on the critical path, and lets its processor go idle,
//! which on a virtual machine slowed the next fsync's own wake-up too. Measured with 8 synced
//! writers on 2 cores: sleeping, a gather took about 90 µs and an fsync 270 µs; yielding,
//! 55 µs and 190 µs (docs/benchmarks.md, "gathering without sleeping"). Yielding keeps a
//! processor busy when no other thread is runnable, hence the bound.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use super::lock;
use crate::entry::SeqNo;
use crate::error::{Error, Result};
use crate::keyspace::KeyspaceId;
use crate::write_batch::WriteBatch;

/// A group holds at most this many bytes of records...
const MAX_GROUP_BYTES: usize = 1 << 20;
/// ...and when its first record is small, at most this much more than that record, so a small
/// write is not held back behind the write of a large one.
const SMALL_RECORD_ROOM: usize = 128 << 10;

/// How long a gathering leader yields before it sleeps instead: about twice what gathering 8
/// writers took on 2 cores.
const YIELD_AT_MOST: Duration = Duration::from_micros(100);

/// How long a queued writer spins, keeping its processor, before it yields it: about what a
/// running leader takes to write a small group of unsynced writes (a 1,000-byte put took 5
/// to 8 us at the median). A writer that yields at once hands its processor to whatever else
/// is runnable, and when threads outnumber processors it gets it back a scheduler slice later,
/// though its write was done microseconds after: 4 threads on 2 cores, 95% gets and 5% puts
/// of 1,000 bytes, put p95 235 to 429 us and p99 1.3 to 1.7 ms yielding at once, 12 to 19 us
/// and 35 to 243 us spinning 10 us first.
const WAIT_SPIN_AT_MOST: Duration = Duration::from_micros(10);

/// How long a queued writer yields before it sleeps instead: about what a group of unsynced
/// writes takes, so a writer still waiting after it is behind a longer group (a sync, a
/// memtable freeze) and sleeps. Longer yields took processor time from the leader and the
/// flush and compaction threads: 4 threads of 1,000-byte YCSB records on 2 cores, three runs
/// each, loaded 119k puts/s yielding 100 us, 151k yielding 20 us, 144k sleeping at once;
/// workload A ran 125k, 145k and 132k ops/s, F 145k, 126k and 108k.
const WAIT_YIELD_AT_MOST: Duration = Duration::from_micros(20);

/// What must hold for a batch to be written: the leader checks it under the writer lock, so
/// nothing changes between the check and the write.
pub(super) enum Condition {
    /// `key` of `keyspace` holds `expected` (`None`: nothing). A compare-and-swap.
    Holds {
        keyspace: KeyspaceId,
        key: Vec<u8>,
        expected: Option<Vec<u8>>,
    },
    /// No version of any of `keys` (each in its keyspace) is newer than `seq`. A
    /// transaction's commit.
    UnchangedSince {
        keys: Vec<(KeyspaceId, Vec<u8>)>,
        seq: SeqNo,
    },
}

/// A batch waiting to be written.
pub(super) struct Pending {
    ticket: u64,
    pub(super) batch: WriteBatch,
    pub(super) condition: Option<Condition>,
    /// Set by the leader when the condition does not hold: the batch is left out of the
    /// group's write, and this is its writer's outcome.
    pub(super) refused: Option<Error>,
    /// The batch's WAL record, numbered from sequence 0 until the leader numbers it.
    pub(super) record: Vec<u8>,
    pub(super) sync: bool,
    /// The thread writing it, so a leader can tell when the writers of the last group are back.
    writer: ThreadId,
    /// Wakes this writer alone, so that finishing a group wakes the next leader first and
    /// only the writers who have something to do. (One per write, not per thread: a condition
    /// variable must stay with one mutex, and a thread may write to several stores.)
    wake: Arc<Waiter>,
}

/// How a queued writer is told that its turn may have come: first by a flag it watches while
/// it spins (`WAIT_SPIN_AT_MOST`) and then yields the processor (`WAIT_YIELD_AT_MOST`), then
/// by a condition variable it sleeps on. A group of unsynced writes is written in
/// microseconds: a writer that slept through it paid a sleep and a wake-up per write, and 4
/// threads of unsynced puts wrote slower than one. The flag and `asleep` are hints; the
/// queue's state, read under its lock, decides.
pub(super) struct Waiter {
    condvar: Condvar,
    /// Set when something this writer waits for happened: its outcome is in, or it may lead.
    poked: AtomicBool,
    /// Set, under the queue's lock, while the writer sleeps on `condvar`: only then does a
    /// wake-up cost a system call.
    asleep: AtomicBool,
}

impl Waiter {
    fn new() -> Waiter {
        Waiter {
            condvar: Condvar::new(),
            poked: AtomicBool::new(false),
            asleep: AtomicBool::new(false),
        }
    }

    /// Tells the writer to look at the queue again, by a caller that holds the queue's lock
    /// (so the writer is not between its last look and its sleep).
    fn poke_locked(&self) {
        self.poked.store(true, Ordering::SeqCst);
        if self.asleep.load(Ordering::SeqCst) {
            self.condvar.notify_one();
        }
    }

    /// [`poke_locked`](Self::poke_locked) by a caller that does not hold `queue`'s lock: a
    /// writer seen asleep is woken only after the lock has been taken once, so that it is
    /// either asleep for real or yet to look at `poked`.
    fn poke(&self, queue: &Mutex<QueueState>) {
        // Sequentially consistent with the writer's `asleep` store and `poked` load: one of
        // the two sides sees the other's store.
        self.poked.store(true, Ordering::SeqCst);
        if self.asleep.load(Ordering::SeqCst) {
            drop(lock(queue));
            self.condvar.notify_one();
        }
    }
}

/// What a writer that joined the queue does next.
pub(super) enum Turn {
    /// A leader wrote the batch; this is the outcome.
    Done(Result<()>),
    /// This writer leads: it writes these batches (its own first), then calls
    /// [`WriteQueue::finish`].
    Lead(Group),
}

/// The batches one leader writes.
pub(super) struct Group {
    pub(super) members: Vec<Pending>,
    /// The last sequence number given to the group's records, once the leader numbered them.
    pub(super) last_seq: Option<SeqNo>,
}

impl Group {
    /// The members whose batches are written: all but those refused for their condition.
    pub(super) fn written(&self) -> impl Iterator<Item = &Pending> {
        self.members.iter().filter(|p| p.refused.is_none())
    }

    /// As `written`, mutably.
    pub(super) fn written_mut(&mut self) -> impl Iterator<Item = &mut Pending> {
        self.members.iter_mut().filter(|p| p.refused.is_none())
    }

    /// True when any member written asked for its write to be synced.
    pub(super) fn needs_sync(&self) -> bool {
        self.written().any(|p| p.sync)
    }

    /// Operations the group writes.
    pub(super) fn ops(&self) -> usize {
        self.written().map(|p| p.batch.len()).sum()
    }

    /// The leader's own outcome when its batch was refused for its condition.
    pub(super) fn leader_refused(&self) -> Option<Error> {
        let leader = self.members.first()?;
        leader.refused.as_ref().map(Error::duplicate)
    }
}

#[derive(Default)]
struct QueueState {
    waiting: VecDeque<Pending>,
    next_ticket: u64,
    /// A leader is writing a group now, or gathering one.
    leading: bool,
    /// The leader at the head of the queue sleeps until the writers of the last group are
    /// back: the writer who completes them wakes it.
    sleeping_gatherer: bool,
    /// The threads that wrote the last group, kept only when `rejoin_wait` is not zero. A
    /// list, not a set: a group has a handful of writers, and the write path should not build
    /// a set for each group.
    last_writers: Vec<ThreadId>,
    /// Outcomes of members whose group was written, until each collects its own.
    finished: HashMap<u64, Result<()>>,
}

impl QueueState {
    /// True when every writer of the last group is queued again.
    fn gathered(&self) -> bool {
        self.last_writers
            .iter()
            .all(|w| self.waiting.iter().any(|p| p.writer == *w))
    }
}

pub(super) struct WriteQueue {
    state: Mutex<QueueState>,
    /// How long the leader of a synced group waits for the last group's writers to join again.
    rejoin_wait: Duration,
}

impl WriteQueue {
    /// An empty queue whose synced groups wait up to `rejoin_wait` for the last group's writers.
    pub(super) fn new(rejoin_wait: Duration) -> WriteQueue {
        WriteQueue {
            state: Mutex::default(),
            rejoin_wait,
        }
    }

    /// Queues a batch and waits for its turn: either its outcome, or the lead of a group.
    pub(super) fn join(
        &self,
        batch: WriteBatch,
        record: Vec<u8>,
        sync: bool,
        condition: Option<Condition>,
    ) -> Turn {
        let mut state = lock(&self.state);
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        let wake = Arc::new(Waiter::new());
        state.waiting.push_back(Pending {
            ticket,
            batch,
            condition,
            refused: None,
            record,
            sync,
            writer: thread::current().id(),
            wake: Arc::clone(&wake),
        });
        // Woken when the writers it waits for are all in, not by every writer that joins.
        if state.sleeping_gatherer && state.gathered() {
            if let Some(leader) = state.waiting.front() {
                leader.wake.condvar.notify_one();
            }
        }
        loop {
            if let Some(outcome) = state.finished.remove(&ticket) {
                return Turn::Done(outcome);
            }
            let at_head = state.waiting.front().is_some_and(|p| p.ticket == ticket);
            if at_head && !state.leading {
                state.leading = true;
                state = self.gather(state, &wake);
                let group = take_group(&mut state.waiting);
                if !self.rejoin_wait.is_zero() {
                    state.last_writers.clear();
                    let writers = group.members.iter().map(|p| p.writer);
                    state.last_writers.extend(writers);
                }
                return Turn::Lead(group);
            }
            state = self.wait_for_turn(state, &wake);
        }
    }

    /// Lets go of the queue until `waiter` is poked: spinning for at most `WAIT_SPIN_AT_MOST`,
    /// yielding the processor for at most `WAIT_YIELD_AT_MOST`, then asleep. Returns the queue
    /// locked again, for the caller to look.
    fn wait_for_turn<'a>(
        &'a self,
        state: MutexGuard<'a, QueueState>,
        waiter: &Waiter,
    ) -> MutexGuard<'a, QueueState> {
        waiter.poked.store(false, Ordering::SeqCst);
        drop(state);
        let stop_spinning = Instant::now() + WAIT_SPIN_AT_MOST;
        // The clock is read between runs of 64 looks, not at each.
        while !waiter.poked.load(Ordering::Acquire) && Instant::now() < stop_spinning {
            for _ in 0..64 {
                std::hint::spin_loop();
                if waiter.poked.load(Ordering::Acquire) {
                    break;
                }
            }
        }
        let stop_yielding = Instant::now() + WAIT_YIELD_AT_MOST;
        while !waiter.poked.load(Ordering::Acquire) && Instant::now() < stop_yielding {
            thread::yield_now();
        }
        let state = lock(&self.state);
        // Set under the lock, then `poked` looked at: a poke either finds it set, or came
        // first and is seen.
        waiter.asleep.store(true, Ordering::SeqCst);
        let state = (waiter.condvar)
            .wait_while(state, |_| !waiter.poked.load(Ordering::SeqCst))
            .unwrap_or_else(|e| e.into_inner());
        waiter.asleep.store(false, Ordering::SeqCst);
        state
    }

    /// Before leading a group that will sync, waits up to `rejoin_wait` until every writer of
    /// the last group is queued again: yielding the processor to them in between looks, for
    /// at most `YIELD_AT_MOST`, then asleep.
    fn gather<'a>(
        &'a self,
        mut state: MutexGuard<'a, QueueState>,
        wake: &Waiter,
    ) -> MutexGuard<'a, QueueState> {
        if self.rejoin_wait.is_zero() || !state.waiting.iter().any(|p| p.sync) {
            return state;
        }
        let start = Instant::now();
        let deadline = start + self.rejoin_wait;
        let stop_yielding = start + self.rejoin_wait.min(YIELD_AT_MOST);
        while !state.gathered() && Instant::now() < stop_yielding {
            drop(state);
            thread::yield_now();
            state = lock(&self.state);
        }
        state.sleeping_gatherer = true;
        loop {
            let now = Instant::now();
            if state.gathered() || now >= deadline {
                break;
            }
            state = match wake.condvar.wait_timeout(state, deadline - now) {
                Ok((state, _)) => state,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        state.sleeping_gatherer = false;
        state
    }

    /// Hands every member but the leader (the first) its outcome, `outcome` for each (its
    /// refusal for one whose condition did not hold), and lets the next leader go: it is
    /// woken first, since the next sync waits on it.
    pub(super) fn finish(&self, group: &Group, outcome: impl Fn() -> Result<()>) {
        let mut state = lock(&self.state);
        for member in group.members.iter().skip(1) {
            let result = match &member.refused {
                Some(refusal) => Err(refusal.duplicate()),
                None => outcome(),
            };
            state.finished.insert(member.ticket, result);
        }
        state.leading = false;
        if let Some(next) = state.waiting.front() {
            next.wake.poke_locked();
        }
        drop(state);
        for member in group.members.iter().skip(1) {
            member.wake.poke(&self.state);
        }
    }
}

/// Takes the batches at the head of the queue, as many as the size bounds allow (always at
/// least the first).
fn take_group(waiting: &mut VecDeque<Pending>) -> Group {
    let first_len = waiting.front().map_or(0, |p| p.record.len());
    let limit = if first_len <= SMALL_RECORD_ROOM {
        first_len + SMALL_RECORD_ROOM
    } else {
        MAX_GROUP_BYTES
    };
    let mut bytes = 0;
    let mut members = Vec::new();
    while let Some(next) = waiting.front() {
        if !members.is_empty() && bytes + next.record.len() > limit {
            break;
        }
        bytes += next.record.len();
        members.extend(waiting.pop_front());
    }
    Group {
        members,
        last_seq: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(ticket: u64, bytes: usize) -> Pending {
        Pending {
            ticket,
            batch: WriteBatch::new(),
            condition: None,
            refused: None,
            record: vec![0; bytes],
            sync: false,
            writer: thread::current().id(),
            wake: Arc::new(Waiter::new()),
        }
    }

    fn group_sizes(records: &[usize]) -> Vec<usize> {
        let mut waiting: VecDeque<Pending> = records
            .iter()
            .enumerate()
            .map(|(i, &b)| pending(i as u64, b))
            .collect();
        let mut sizes = Vec::new();
        while !waiting.is_empty() {
            sizes.push(take_group(&mut waiting).members.len());
        }
        sizes
    }

    #[test]
    fn small_records_group_up_to_the_room_after_the_first() {
        // The limit is 100 + 128 KiB = 131,172 bytes: 1,311 records of 100 bytes.
        assert_eq!(group_sizes(&[100; 1400]), vec![1311, 89]);
    }

    #[test]
    fn a_small_write_is_not_held_behind_a_large_one() {
        // The small first write goes alone; the small one after the large one rides along.
        assert_eq!(group_sizes(&[100, 900 << 10, 100]), vec![1, 2]);
    }

    #[test]
    fn a_large_first_record_allows_a_group_up_to_the_maximum() {
        assert_eq!(
            group_sizes(&[200 << 10, 300 << 10, 400 << 10, 200 << 10]),
            vec![3, 1]
        );
    }

    #[test]
    fn one_record_larger_than_the_maximum_is_a_group_of_its_own() {
        assert_eq!(group_sizes(&[2 << 20, 100]), vec![1, 1]);
    }
}
