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

use crate::entry::{Entry, SeqNo};
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
    /// Its place in the caller's batch.
    slot: usize,
    /// Its tables whose filter admits it, newest first: `admitted[next..end]` of the batch's
    /// list are those still to read.
    next: usize,
    end: usize,
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
                Some(entry) => values[slot] = value_of(entry),
                None => unanswered.push(slot),
            }
        }
        let mut tally = LevelTallies::default();
        let (admitted, mut pending) = probe_filters(&state.version, keys, &unanswered, &mut tally);
        read_blocks(keys, &admitted, &mut pending, seq, &mut values, &mut tally)?;
        tally.add_to(&self.table_env.counters);
        Ok(values)
    }
}

/// A value, or `None` for a tombstone.
fn value_of(entry: Entry) -> Option<Vec<u8>> {
    (!entry.is_tombstone()).then_some(entry.value)
}

/// Step 2: hashes each unanswered key once and asks the filters of every table that may hold
/// it, prefetching those of the key `PREFETCH_AHEAD` places on. Returns the tables admitted,
/// all keys' in one list, and the keys with any.
fn probe_filters<'v, K: AsRef<[u8]>>(
    version: &'v Version,
    keys: &'v [K],
    unanswered: &[usize],
    tally: &mut LevelTallies,
) -> (Vec<&'v TableHandle>, Vec<Pending>) {
    // Every key's candidate tables in one list: key `i`'s are `candidates[ends[i-1]..ends[i]]`.
    let mut candidates: Vec<&TableHandle> = Vec::with_capacity(unanswered.len() * 4);
    let mut hashes = Vec::with_capacity(unanswered.len());
    let mut ends = Vec::with_capacity(unanswered.len());
    for &slot in unanswered {
        let key = keys[slot].as_ref();
        candidates.extend(version.candidate_tables(key).map(|t| &**t));
        hashes.push(KeyHash::of(key));
        ends.push(candidates.len());
    }
    let tables_of = |i: usize| &candidates[if i == 0 { 0 } else { ends[i - 1] }..ends[i]];
    let mut admitted = Vec::new();
    let mut pending = Vec::new();
    for (i, hash) in hashes.iter().enumerate() {
        if let Some(ahead) = hashes.get(i + PREFETCH_AHEAD) {
            for table in tables_of(i + PREFETCH_AHEAD) {
                table.table.prefetch_filter(ahead);
            }
        }
        let start = admitted.len();
        for &table in tables_of(i) {
            if table.table.filter_admits(hash, tally.level(table)) {
                admitted.push(table);
            }
        }
        if admitted.len() > start {
            let (slot, end) = (unanswered[i], admitted.len());
            pending.push(Pending {
                slot,
                next: start,
                end,
            });
        }
    }
    (admitted, pending)
}

/// Step 3: rounds of block reads, sorted by table and block, each block read once.
fn read_blocks<K: AsRef<[u8]>>(
    keys: &[K],
    admitted: &[&TableHandle],
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
                let table = admitted[key.next];
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
        if groups.len() > 1 {
            // Every block the round reads is announced first: the reads of those not cached
            // start together, instead of one after another.
            for group in &groups {
                admitted[pending[group[0].2].next]
                    .table
                    .will_read_block(group[0].1);
            }
        }
        for group in groups {
            let table = admitted[pending[group[0].2].next];
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
                        values[key.slot] = value_of(entry);
                        key.next = key.end;
                    }
                    None => key.next += 1,
                }
            }
        }
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
        let mut total = ReadCountersSnapshot::default();
        for (level, tally) in self.levels.iter().enumerate() {
            counters.add_level(level, &none, tally);
            total = total.plus(tally);
        }
        counters.add(&total);
    }
}
