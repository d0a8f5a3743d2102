//! `multi_get`: many point lookups on one read state, filters first, each block read once.
//!
//! 1. One read state and one sequence number serve the whole batch; the memtables answer what
//!    they hold.
//! 2. Each remaining key is hashed once, and every filter of every table that may hold it is
//!    probed before any data block is read. The filter words of every key are prefetched
//!    before the first probe, so that their cache misses overlap; the first two bits of each
//!    probe are tested without a branch, as absent keys fail them at random.
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
use crate::sstable::BlockHandle;
use crate::version::{TableHandle, Version};

use super::{check_key_len, Inner};

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

/// What the filters said of a batch: key `i`'s candidate tables are
/// `candidates[ends[i - 1]..ends[i]]`, and `admitted` lists, by position, those whose filter
/// passed it (or that have no filter), each key's in order.
struct Probed<'v> {
    candidates: Vec<&'v TableHandle>,
    ends: Vec<usize>,
    admitted: Vec<usize>,
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

    /// Takes back the probes counted for the candidates after the one that answered `key`
    /// (`admitted[key.next]`): a `get` stops at the first table holding the key. The probe
    /// phase counts every candidate, as most keys of a batch are answered by their last or by
    /// none. Which of those later probes passed, `admitted` says, without asking the filters
    /// again.
    fn uncount_after(&self, key: &Pending, user_key: &[u8], tally: &mut LevelTallies) {
        let answered = self.admitted[key.next];
        let passed_later = &self.admitted[key.next + 1..key.end];
        for c in answered + 1..self.range_of(key.key).end {
            let table = self.candidates[c];
            if table.table.has_filter_for(user_key) {
                let passed = passed_later.binary_search(&c).is_ok();
                tally.level(table).take_back_probe(passed);
            }
        }
    }
}

impl Inner {
    pub(crate) fn multi_get<K: AsRef<[u8]>>(
        &self,
        ks: crate::keyspace::KeyspaceId,
        keys: &[K],
        at: Option<SeqNo>,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        for key in keys {
            check_key_len(key.as_ref())?;
        }
        let (state, seq) = self.view(at);
        let tree = (state.tree(ks)).ok_or_else(|| super::read::no_such_keyspace(ks))?;
        let expired_below = self.expired_below(tree);
        let mut values: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let memtables: Vec<_> = tree.memtables().collect();
        let mut unanswered = Vec::with_capacity(keys.len());
        for (slot, key) in keys.iter().enumerate() {
            let key = key.as_ref();
            // A key a range deletion covers, or any key where entries expire, is looked up
            // alone, as a get: it passes by the tables the deletion emptied, which the batched
            // reads would not, and reads as a get decides.
            let gone = tree.gone(key, seq, expired_below);
            if gone.any() {
                let newest = self.newest_unless_gone(tree, key, seq, gone)?;
                values[slot] = newest.and_then(|n| n.value).map(Vec::from);
                continue;
            }
            match memtables.iter().find_map(|mem| mem.get_newest(key, seq)) {
                Some(newest) => values[slot] = newest.value.map(Vec::from),
                None => unanswered.push(slot),
            }
        }
        let mut tally = LevelTallies::default();
        self.count_table_lookups(tree, unanswered.len() as u64);
        let (probed, mut pending) = probe_filters(&tree.version, keys, &unanswered, &mut tally);
        let read = read_blocks(
            &self.batch_block_reads,
            keys,
            &probed,
            &mut pending,
            seq,
            &mut values,
            &mut tally,
        );
        // Counted whether or not a read failed. After a failed read, keys not yet answered keep
        // the probes of all their tables, where a `get` stops at the error.
        tally.add_to(&self.table_env.counters);
        read.map(|()| values)
    }
}

/// How many keys' filter words are prefetched before the first of them is probed: enough for
/// their cache misses to overlap, few enough that the first lines are still cached when
/// probed (two lines per candidate table).
const PREFETCH_BATCH: usize = 64;

/// Step 2: hashes each unanswered key once, finds its candidate tables and starts loading
/// their filter words into the CPU cache, `PREFETCH_BATCH` keys at a time; then, with those
/// loads under way, asks the filters. Every probe is counted here; `uncount_after` takes back
/// those a `get` would not make.
fn probe_filters<'v, K: AsRef<[u8]>>(
    version: &'v Version,
    keys: &'v [K],
    unanswered: &[usize],
    tally: &mut LevelTallies,
) -> (Probed<'v>, Vec<Pending>) {
    let mut probed = Probed {
        candidates: Vec::with_capacity(unanswered.len() * 2),
        ends: Vec::with_capacity(unanswered.len()),
        admitted: Vec::new(),
    };
    let mut pending = Vec::new();
    // Per chunk: each key's hash, and each candidate's probe: the unit of its filter that
    // answers and the first bits that unit tests (`FilterProbe`).
    let mut hashes = Vec::with_capacity(PREFETCH_BATCH);
    let mut first_bits = Vec::with_capacity(PREFETCH_BATCH * 2);
    for (chunk, slots) in unanswered.chunks(PREFETCH_BATCH).enumerate() {
        let chunk_start = probed.candidates.len();
        hashes.clear();
        first_bits.clear();
        for &slot in slots {
            let key = keys[slot].as_ref();
            let hash = KeyHash::of(key);
            let first = probed.candidates.len();
            version.push_candidates(key, &mut probed.candidates);
            for table in &probed.candidates[first..] {
                // Also the tables after the one that answers the key, which a `get` would not
                // ask: a table's count of lookups is an estimate of where lookups go.
                let probe = table.table.prefetch_filter(key, &hash);
                if let Some(unit) = probe.unit() {
                    table.table.count_lookup_in(unit);
                }
                first_bits.push(probe);
            }
            hashes.push(hash);
            probed.ends.push(probed.candidates.len());
        }
        for (i, hash) in (chunk * PREFETCH_BATCH..).zip(&hashes) {
            let start = probed.admitted.len();
            for c in probed.range_of(i) {
                let table = probed.candidates[c];
                let probe = &first_bits[c - chunk_start];
                let passed = table.table.may_contain_prefetched(hash, probe);
                if probe.asks_filter() {
                    tally.level(table).count_probe(passed);
                }
                if passed {
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
    }
    (probed, pending)
}

/// Step 3: rounds of block reads, sorted by table and block, each block read once.
fn read_blocks<'v, K: AsRef<[u8]>>(
    block_reads: &BlockReadTimes,
    keys: &[K],
    probed: &Probed<'v>,
    pending: &mut [Pending],
    seq: SeqNo,
    values: &mut [Option<Vec<u8>>],
    tally: &mut LevelTallies,
) -> Result<()> {
    loop {
        // (table number, block, index into `pending`, the block's handle) for each key with a
        // table left: the index is searched once per key, and the block read by its handle.
        let mut wanted: Vec<(u64, usize, usize, BlockHandle)> = Vec::new();
        for (p, key) in pending.iter_mut().enumerate() {
            let key_bytes = keys[key.slot].as_ref();
            while key.next < key.end {
                let table = probed.table_to_read(key);
                match (table.table).locate_counted(key_bytes, seq, tally.level(table))? {
                    Some((block, handle)) => {
                        wanted.push((table.meta.number, block, p, handle));
                        break;
                    }
                    None => key.next += 1,
                }
            }
        }
        if wanted.is_empty() {
            return Ok(());
        }
        wanted.sort_unstable_by_key(|&(table, block, p, _)| (table, block, p));
        let groups: Vec<&[(u64, usize, usize, BlockHandle)]> =
            wanted.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)).collect();
        let announce = groups.len() > 1 && block_reads.slow();
        if announce {
            // Every block the round reads is announced first: the reads of those not cached
            // start together, instead of one after another.
            for group in &groups {
                probed
                    .table_to_read(&pending[group[0].2])
                    .table
                    .will_read(group[0].3);
            }
        }
        let started = Instant::now();
        let blocks = groups.len() as u64;
        for group in groups {
            let table = probed.table_to_read(&pending[group[0].2]);
            let group_keys: Vec<&[u8]> = group
                .iter()
                .map(|&(_, _, p, _)| keys[pending[p].slot].as_ref())
                .collect();
            let found =
                (table.table).lookup_at(group[0].3, &group_keys, seq, tally.level(table))?;
            for (&(_, _, p, _), entry) in group.iter().zip(found) {
                let key = &mut pending[p];
                match entry {
                    Some(entry) => {
                        values[key.slot] = entry.into_value();
                        probed.uncount_after(key, keys[key.slot].as_ref(), tally);
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
