//! `multi_get`: many point lookups on one read state, filters first, each block read once.
//!
//! 1. One read state and one sequence number serve the whole batch; the memtables answer what
//!    they hold.
//! 2. Each remaining key is hashed once, and every filter of every table that may hold it is
//!    probed before any data block is read; while one key's filters are probed, the filter
//!    words of a key a few places ahead are prefetched, so their cache misses overlap.
//! 3. Then in rounds: each unanswered key names the block of the first table still left on its
//!    list (the index says which block); the blocks are sorted by table and position and each
//!    is read once for all the keys that name it. A key the block does not hold moves on to its
//!    next table in the following round. A key is answered by the newest table that holds it,
//!    as in a single `get`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::entry::SeqNo;
use crate::error::Result;
use crate::filter::KeyHash;
use crate::metrics::ReadCountersSnapshot;
use crate::version::{TableHandle, Version};

use super::{check_key_len, Inner};

/// How many keys ahead the filter words are prefetched: far enough for a load from memory to
/// land before the probe, near enough that the lines are still cached when it does.
const PREFETCH_AHEAD: usize = 4;

/// A key the memtables did not answer, on its way through the tables.
struct Pending {
    /// Its place in the caller's batch, and among the keys the memtables did not answer.
    slot: usize,
    key: usize,
    /// Its tables whose filter admits it, newest first: `admitted[next..end]` of the batch's
    /// list are those still to read.
    next: usize,
    end: usize,
}

/// Every filter answer of a batch: key `i`'s candidate tables are
/// `candidates[ends[i - 1]..ends[i]]`, with their filters' answers in `passed` (`true` for a
/// table without a filter); `admitted` lists the candidates that passed, by position.
struct Probed<'v> {
    candidates: Vec<&'v TableHandle>,
    passed: Vec<bool>,
    ends: Vec<usize>,
    admitted: Vec<usize>,
    /// For each key, the candidate that answered it, once one has.
    answered_by: Vec<Option<usize>>,
}

impl<'v> Probed<'v> {
    /// The table `key` reads next.
    fn table_to_read(&self, key: &Pending) -> &'v TableHandle {
        self.candidates[self.admitted[key.next]]
    }

    fn range_of(&self, key: usize) -> std::ops::Range<usize> {
        let start = if key == 0 { 0 } else { self.ends[key - 1] };
        start..self.ends[key]
    }

    /// Counts each key's filter probes as a `get` of it would: every candidate up to the one
    /// that answered (all of them when none did), and none after.
    fn count_probes(&self, tally: &mut LevelTallies) {
        for key in 0..self.ends.len() {
            let range = self.range_of(key);
            let asked_end = self.answered_by[key].map_or(range.end, |answered| answered + 1);
            for c in range.start..asked_end {
                let table = self.candidates[c];
                if !table.table.has_filter() {
                    continue;
                }
                let level = tally.level(table);
                level.filter_probes += 1;
                match self.passed[c] {
                    true => level.filter_positives += 1,
                    false => level.filter_negatives += 1,
                }
            }
        }
    }
}

impl Inner {
    pub(super) fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        at: Option<SeqNo>,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        for key in keys {
            check_key_len(key.as_ref())?;
        }
        let (state, seq) = self.view(at);
        let mut values: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let mut unanswered = Vec::with_capacity(keys.len());
        for (slot, key) in keys.iter().enumerate() {
            let key = key.as_ref();
            match state.memtables().find_map(|mem| mem.get(key, seq)) {
                Some(entry) => values[slot] = entry.into_value(),
                None => unanswered.push(slot),
            }
        }
        let mut tally = LevelTallies::default();
        let (mut probed, mut pending) = probe_filters(&state.version, keys, &unanswered);
        let read = read_blocks(
            &self.batch_block_reads,
            keys,
            &mut probed,
            &mut pending,
            seq,
            &mut values,
            &mut tally,
        );
        // Counted whether or not a read failed, as a failed `get` counts what it did.
        probed.count_probes(&mut tally);
        tally.add_to(&self.table_env.counters);
        read.map(|()| values)
    }
}

/// Step 2: hashes each unanswered key once and asks the filters of every table that may hold
/// it, prefetching those of the key `PREFETCH_AHEAD` places on. Counts nothing yet: a `get`
/// counts only the probes up to the table that answers, known after the reads.
fn probe_filters<'v, K: AsRef<[u8]>>(
    version: &'v Version,
    keys: &'v [K],
    unanswered: &[usize],
) -> (Probed<'v>, Vec<Pending>) {
    let mut probed = Probed {
        candidates: Vec::with_capacity(unanswered.len() * 4),
        passed: Vec::new(),
        ends: Vec::with_capacity(unanswered.len()),
        admitted: Vec::new(),
        answered_by: vec![None; unanswered.len()],
    };
    let mut hashes = Vec::with_capacity(unanswered.len());
    for &slot in unanswered {
        let key = keys[slot].as_ref();
        version.push_candidates(key, &mut probed.candidates);
        hashes.push(KeyHash::of(key));
        probed.ends.push(probed.candidates.len());
    }
    probed.passed = vec![false; probed.candidates.len()];
    let mut pending = Vec::new();
    for (i, hash) in hashes.iter().enumerate() {
        if let Some(ahead) = hashes.get(i + PREFETCH_AHEAD) {
            for table in &probed.candidates[probed.range_of(i + PREFETCH_AHEAD)] {
                table.table.prefetch_filter(ahead);
            }
        }
        let start = probed.admitted.len();
        for c in probed.range_of(i) {
            if probed.candidates[c].table.may_contain(hash) {
                probed.passed[c] = true;
                probed.admitted.push(c);
            }
        }
        if probed.admitted.len() > start {
            pending.push(Pending {
                slot: unanswered[i],
                key: i,
                next: start,
                end: probed.admitted.len(),
            });
        }
    }
    (probed, pending)
}

/// Step 3: rounds of block reads, sorted by table and block, each block read once.
fn read_blocks<'v, K: AsRef<[u8]>>(
    block_reads: &BlockReadTimes,
    keys: &[K],
    probed: &mut Probed<'v>,
    pending: &mut [Pending],
    seq: SeqNo,
    values: &mut [Option<Vec<u8>>],
    tally: &mut LevelTallies,
) -> Result<()> {
    loop {
        // (table number, block, index into `pending`) for each key with a table left.
        let mut wanted: Vec<(u64, usize, usize)> = Vec::new();
        for (p, key) in pending.iter_mut().enumerate() {
            let key_bytes = keys[key.slot].as_ref();
            while key.next < key.end {
                let table = probed.table_to_read(key);
                match table.table.block_for(key_bytes, seq) {
                    Some(block) => {
                        wanted.push((table.meta.number, block, p));
                        break;
                    }
                    None => key.next += 1,
                }
            }
        }
        if wanted.is_empty() {
            return Ok(());
        }
        wanted.sort_unstable();
        let groups: Vec<&[(u64, usize, usize)]> =
            wanted.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)).collect();
        let announce = groups.len() > 1 && block_reads.slow();
        if announce {
            // Every block the round reads is announced first: the reads of those not cached
            // start together, instead of one after another.
            for group in &groups {
                probed
                    .table_to_read(&pending[group[0].2])
                    .table
                    .will_read_block(group[0].1);
            }
        }
        let started = Instant::now();
        let blocks = groups.len() as u64;
        for group in groups {
            let table = probed.table_to_read(&pending[group[0].2]);
            let group_keys: Vec<&[u8]> = group
                .iter()
                .map(|&(_, _, p)| keys[pending[p].slot].as_ref())
                .collect();
            let found =
                (table.table).lookup_in_block(group[0].1, &group_keys, seq, tally.level(table))?;
            for (&(_, _, p), entry) in group.iter().zip(found) {
                let key = &mut pending[p];
                match entry {
                    Some(entry) => {
                        values[key.slot] = entry.into_value();
                        probed.answered_by[key.key] = Some(probed.admitted[key.next]);
                        key.next = key.end;
                    }
                    None => key.next += 1,
                }
            }
        }
        block_reads.record(started.elapsed(), blocks);
    }
}

/// How long a batch's block reads have recently taken, each: the announcement of a round's
/// blocks pays (one system call per block) only when reads go to the disk. Where blocks come
/// from the page cache, in a few microseconds, it made batches of present keys 12% slower than
/// a `get` per key; from the disk (about 80 microseconds a block here), it made them 3.3x
/// faster.
#[derive(Default)]
pub(super) struct BlockReadTimes {
    /// Moving average of the nanoseconds per block read; 0 before any.
    average_nanos: AtomicU64,
}

impl BlockReadTimes {
    /// Reads slower than this are taken to come from the disk.
    const SLOW: Duration = Duration::from_micros(20);

    /// Whether recent reads were slow, or none has been timed yet.
    fn slow(&self) -> bool {
        let average = self.average_nanos.load(Ordering::Relaxed);
        average == 0 || average > Self::SLOW.as_nanos() as u64
    }

    /// Adds `blocks` reads that took `elapsed` in all to the average (weight 1/8 per round).
    fn record(&self, elapsed: Duration, blocks: u64) {
        if blocks == 0 {
            return;
        }
        let each = (elapsed.as_nanos() as u64 / blocks).max(1);
        let old = self.average_nanos.load(Ordering::Relaxed);
        let new = if old == 0 { each } else { (old * 7 + each) / 8 };
        // Lost updates between racing batches only make the average a little older.
        self.average_nanos.store(new.max(1), Ordering::Relaxed);
    }
}

/// What the batch cost, level by level, added to the store's counters once at the end.
#[derive(Default)]
struct LevelTallies {
    levels: Vec<ReadCountersSnapshot>,
}

impl LevelTallies {
    fn level(&mut self, table: &TableHandle) -> &mut ReadCountersSnapshot {
        let level = table.meta.level as usize;
        if self.levels.len() <= level {
            self.levels
                .resize(level + 1, ReadCountersSnapshot::default());
        }
        &mut self.levels[level]
    }

    fn add_to(&self, counters: &crate::metrics::ReadCounters) {
        let none = ReadCountersSnapshot::default();
        for (level, tally) in self.levels.iter().enumerate() {
            counters.add_level(level, &none, tally);
            counters.add_reads(tally);
        }
    }
}
