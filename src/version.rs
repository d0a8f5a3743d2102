//! A version: the set of live tables, level by level, and which of them may hold a key.
//!
//! Level 0 holds tables flushed from memtables; their key ranges overlap, so a lookup asks
//! them newest first. Deeper levels hold tables with disjoint key ranges sorted by key, so a
//! lookup asks at most one table per level.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;

use crate::entry::{key_prefix, SeqNo, ValueKind};
use crate::error::Result;
use crate::filter::KeyHash;
use crate::manifest::{TableMeta, VersionEdit};
use crate::metrics::{ReadCounters, ReadCountersSnapshot, MAX_LEVELS};
use crate::range_tombstone::{Gone, RangeTombstone, RangeTombstones};
use crate::sstable::{PrefixAnswer, Table};
use crate::value::Newest;
use crate::walk::{concat, BoxedWalk, Concat, EntryView, PastKey, Walk};
use std::sync::atomic::Ordering;

/// A live table: what the manifest records of it, and the open reader.
pub struct TableHandle {
    pub meta: TableMeta,
    /// The open reader (cheap to clone: shared inside).
    pub table: Table,
}

impl TableHandle {
    /// True when the table's key range meets `[smallest, largest]`.
    pub fn overlaps(&self, smallest: &[u8], largest: &[u8]) -> bool {
        self.meta.smallest_key.as_slice() <= largest && smallest <= self.meta.largest_key.as_slice()
    }
}

/// The prefixes of a table's smallest and largest keys, kept in one contiguous array per
/// level so that choosing the tables for a lookup touches a cache line or two instead of
/// following a pointer to each table's keys.
#[derive(Clone, Copy)]
struct Fence {
    smallest: u64,
    largest: u64,
}

impl Fence {
    fn of(meta: &TableMeta) -> Fence {
        Fence {
            smallest: key_prefix(&meta.smallest_key),
            largest: key_prefix(&meta.largest_key),
        }
    }

    /// True when the table described by `meta` (and this fence) covers `key`, whose prefix is
    /// `p`; the keys' bytes are read only where the prefixes tie.
    fn covers(&self, p: u64, key: &[u8], meta: &TableMeta) -> bool {
        let above_smallest =
            self.smallest < p || (self.smallest == p && meta.smallest_key.as_slice() <= key);
        let below_largest =
            p < self.largest || (p == self.largest && key <= meta.largest_key.as_slice());
        above_smallest && below_largest
    }
}

/// How many of `fences` (sorted, disjoint) end below prefix `p`. A short level is counted
/// fence by fence: the compares do not depend on one another, where each step of a binary
/// search waits for the load before it (a level of 12 tables: 4 dependent steps, which cost
/// single absent-key lookups in memory about a sixth of their time). Longer levels are
/// narrowed by halves to a short stretch first.
fn first_not_below(fences: &[Fence], p: u64) -> usize {
    const COUNTED: usize = 16;
    let (mut base, mut len) = (0, fences.len());
    while len > COUNTED {
        let half = len / 2;
        if fences[base + half - 1].largest < p {
            base += half;
        }
        len -= half;
    }
    let counted = &fences[base..base + len];
    base + counted.iter().filter(|f| f.largest < p).count()
}

/// The live tables at one moment. Immutable: changes make a new version.
#[derive(Clone)]
pub struct Version {
    levels: Vec<Vec<Arc<TableHandle>>>,
    /// `fences[l][i]` describes `levels[l][i]`.
    fences: Vec<Vec<Fence>>,
    /// The levels below 0 that hold tables, in order: a lookup skips the empty ones without
    /// a search (a tree filled from the bottom leaves most levels empty, and asking each cost
    /// about a fifth of an in-memory absent-key lookup).
    deep_levels_in_use: Vec<usize>,
    /// The tree's live range deletions (the manifest's), and their fragments.
    ranges: Arc<Vec<RangeTombstone>>,
    range_fragments: Arc<RangeTombstones>,
}

impl Version {
    /// An empty version with `num_levels` levels.
    pub fn empty(num_levels: usize) -> Version {
        Version {
            levels: vec![Vec::new(); num_levels],
            fences: vec![Vec::new(); num_levels],
            deep_levels_in_use: Vec::new(),
            ranges: Arc::default(),
            range_fragments: Arc::default(),
        }
    }

    /// The tree's live range deletions.
    pub fn range_tombstones(&self) -> &[RangeTombstone] {
        &self.ranges
    }

    /// The live range deletions as fragments.
    pub fn range_fragments(&self) -> &Arc<RangeTombstones> {
        &self.range_fragments
    }

    /// The newest sequence number at most `snapshot` of a live range deletion covering `key`.
    pub fn range_covering_seq(&self, key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        self.range_fragments.covering_seq(key, snapshot)
    }

    /// Tables of `level`: level 0 newest first, deeper levels by key.
    pub fn level(&self, level: usize) -> &[Arc<TableHandle>] {
        &self.levels[level]
    }

    /// Every table, level 0 first.
    pub fn tables(&self) -> impl Iterator<Item = &Arc<TableHandle>> + Clone {
        self.levels.iter().flatten()
    }

    /// Number of levels.
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Total file bytes in `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|t| t.meta.file_size).sum()
    }

    /// The newest version of `key` at most `snapshot` in any table, asking each candidate
    /// table's filter first, its value shared with the block it lies in. `hash` is the key's
    /// hash, computed once by the caller for all tables; what the lookup cost is added to
    /// `counters` once, at its end.
    ///
    /// Versions `gone` says are deleted or expired are not looked for: a table holding
    /// nothing newer is not asked (a get of a deleted key costs no read of an old table).
    pub(crate) fn get_newest(
        &self,
        key: &[u8],
        snapshot: SeqNo,
        hash: &KeyHash,
        counters: &ReadCounters,
        gone: Gone,
    ) -> Result<Option<Newest>> {
        self.first_holding(key, counters, gone, |table, tally| {
            table.lookup_newest(key, snapshot, hash, tally)
        })
    }

    /// Whether the newest version of `key` at most `snapshot` in any table is a value or a
    /// tombstone, and its number, without copying the value out.
    pub fn kind_of(
        &self,
        key: &[u8],
        snapshot: SeqNo,
        hash: &KeyHash,
        counters: &ReadCounters,
        gone: Gone,
    ) -> Result<Option<(ValueKind, SeqNo)>> {
        self.first_holding(key, counters, gone, |table, tally| {
            table.lookup_kind(key, snapshot, hash, tally)
        })
    }

    /// Asks `find` of each table that may hold `key`, newest first, until one answers; tables
    /// whose every entry `gone` takes are passed by. Each table's filter counts
    /// go to its level's counters as it is probed; the lookup's block reads, to the store's,
    /// once at the end.
    fn first_holding<T>(
        &self,
        key: &[u8],
        counters: &ReadCounters,
        gone: Gone,
        find: impl Fn(&Table, &mut ReadCountersSnapshot) -> Result<Option<T>>,
    ) -> Result<Option<T>> {
        let mut tally = ReadCountersSnapshot::default();
        let mut found = Ok(None);
        for handle in self.candidate_tables(key) {
            if gone.takes(handle.meta.largest_seq) {
                continue;
            }
            let before = tally;
            let answer = find(&handle.table, &mut tally);
            counters.add_level(handle.meta.level as usize, &before, &tally);
            match answer {
                Ok(None) => continue,
                other => {
                    found = other;
                    break;
                }
            }
        }
        counters.add_reads(&tally);
        found
    }

    /// The tables that may hold `key`, in the order a lookup must ask them: level-0 tables
    /// covering the key newest first, then at most one table per deeper level.
    pub fn candidate_tables<'a>(
        &'a self,
        key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<TableHandle>> + 'a {
        let p = key_prefix(key);
        self.level0_covering(key, p)
            .chain(self.deeper_covering(key, p))
    }

    /// Appends to `out` the tables of `candidate_tables(key)`: a batch gathers many keys'
    /// candidates into one list, without a chained iterator per key.
    pub fn push_candidates<'a>(&'a self, key: &'a [u8], out: &mut Vec<&'a TableHandle>) {
        let p = key_prefix(key);
        for table in self.level0_covering(key, p) {
            out.push(table);
        }
        for table in self.deeper_covering(key, p) {
            out.push(table);
        }
    }

    /// The level-0 tables whose range includes `key` (prefix `p`), newest first.
    fn level0_covering<'a>(
        &'a self,
        key: &'a [u8],
        p: u64,
    ) -> impl Iterator<Item = &'a Arc<TableHandle>> + 'a {
        (self.levels[0].iter().zip(&self.fences[0]))
            .filter(move |(t, f)| f.covers(p, key, &t.meta))
            .map(|(t, _)| t)
    }

    /// Of each deeper level that holds tables, the one whose range includes `key`, if any.
    fn deeper_covering<'a>(
        &'a self,
        key: &'a [u8],
        p: u64,
    ) -> impl Iterator<Item = &'a Arc<TableHandle>> + 'a {
        (self.deep_levels_in_use.iter()).filter_map(move |&l| self.table_covering(l, key, p))
    }

    /// In a level of disjoint sorted tables, the one whose range includes `key` (prefix `p`).
    fn table_covering(&self, level: usize, key: &[u8], p: u64) -> Option<&Arc<TableHandle>> {
        let (tables, fences) = (&self.levels[level], &self.fences[level]);
        // Every table before `first` ends below the key's prefix, hence below the key. A table
        // whose largest prefix equals the key's may still end below the key.
        let first = first_not_below(fences, p);
        let idx = first
            + fences[first..]
                .iter()
                .zip(&tables[first..])
                .take_while(|(f, t)| f.largest == p && t.meta.largest_key.as_slice() < key)
                .count();
        let (fence, table) = (fences.get(idx)?, &tables[idx]);
        fence.covers(p, key, &table.meta).then_some(table)
    }

    /// Tables of `level` whose key range meets `[smallest, largest]`.
    pub fn overlapping(
        &self,
        level: usize,
        smallest: &[u8],
        largest: &[u8],
    ) -> Vec<Arc<TableHandle>> {
        self.levels[level]
            .iter()
            .filter(|t| t.overlaps(smallest, largest))
            .cloned()
            .collect()
    }

    /// Sorted streams over every table from `start` on, newest data first: one per level-0
    /// table, one per deeper level.
    pub fn streams_from(&self, start: Bound<&[u8]>) -> Vec<BoxedWalk> {
        let mut streams: Vec<BoxedWalk> = self.levels[0]
            .iter()
            .map(|t| table_stream(&t.table, start))
            .collect();
        for tables in &self.levels[1..] {
            if !tables.is_empty() {
                streams.push(level_stream(tables.clone(), start));
            }
        }
        streams
    }

    /// [`streams_from`](Self::streams_from) walking backwards: every table's entries at or
    /// before `end`, in reverse entry order, one stream per level-0 table and per deeper level.
    pub fn streams_back_to(&self, end: Bound<&[u8]>) -> Vec<BoxedWalk> {
        // A level-0 table wholly above the end has nothing to give, but its walk would read
        // its first block to find that out.
        let mut streams: Vec<BoxedWalk> = self.levels[0]
            .iter()
            .filter(|t| starts_at_or_before(&t.meta.smallest_key, end))
            .map(|t| Box::new(t.table.iter_back_to(end)) as BoxedWalk)
            .collect();
        for tables in &self.levels[1..] {
            if !tables.is_empty() {
                streams.push(level_back_stream(tables.clone(), end));
            }
        }
        streams
    }

    /// Whether any table may hold a key starting with `prefix`: one whose key range meets
    /// the prefix's, and whose prefix filter, asked for `hash` (the hash of the prefix's
    /// extractor prefix, when it has one), does not rule it out.
    pub fn may_hold_prefix(&self, prefix: &[u8], hash: Option<&KeyHash>) -> bool {
        (0..self.levels.len())
            .flat_map(|level| self.meeting_prefix(level, prefix))
            .any(|t| hash.is_none_or(|h| t.table.prefix_answer(h) != PrefixAnswer::Absent))
    }

    /// The tables of `level` whose key range meets the keys that start with `prefix`, in the
    /// level's order. A deeper level's tables are sorted and disjoint: those are a run, found
    /// by two searches rather than a pass over the level.
    fn meeting_prefix<'a>(
        &'a self,
        level: usize,
        prefix: &'a [u8],
    ) -> impl DoubleEndedIterator<Item = &'a Arc<TableHandle>> + 'a {
        let tables = &self.levels[level];
        let run = match level {
            0 => &tables[..],
            _ => prefix_run(tables, prefix),
        };
        run.iter()
            .filter(move |t| level > 0 || range_may_hold_prefix(&t.meta, prefix))
    }

    /// [`streams_from`](Self::streams_from) for a walk within `scope`'s prefix: only the tables
    /// whose key range meets the prefix's and whose prefix filter lets it through, each
    /// walked from `start`.
    pub fn streams_within(&self, start: Bound<&[u8]>, scope: &PrefixScope) -> Vec<BoxedWalk> {
        let from_edge = match start {
            Bound::Included(k) => k <= scope.prefix.as_slice(),
            Bound::Excluded(k) => k < scope.prefix.as_slice(),
            Bound::Unbounded => true,
        };
        self.scoped_streams(scope, false, from_edge, |t| table_stream(t, start))
    }

    /// [`streams_back_to`](Self::streams_back_to) for a walk within `scope`'s prefix.
    pub fn streams_back_within(&self, end: Bound<&[u8]>, scope: &PrefixScope) -> Vec<BoxedWalk> {
        let from_edge = match (end, crate::iter::prefix_end(&scope.prefix)) {
            (Bound::Unbounded, _) => true,
            (_, Bound::Unbounded) => false,
            (Bound::Included(k) | Bound::Excluded(k), Bound::Excluded(past)) => {
                k >= past.as_slice()
            }
            (_, Bound::Included(_)) => false,
        };
        self.scoped_streams(scope, true, from_edge, |t| Box::new(t.iter_back_to(end)))
    }

    /// One stream per level-0 table and per deeper level, over the tables `scope` admits,
    /// each walked by `walk` (in descending key order when `backward`). A walk that starts
    /// at the edge of the prefix's keys (`from_edge`: its first key, or its last, walking
    /// backwards) sees all of a table's keys with the prefix before any other: only then
    /// does a table let through that gives none of them count as the filter's false
    /// positive.
    fn scoped_streams(
        &self,
        scope: &PrefixScope,
        backward: bool,
        from_edge: bool,
        walk: impl Fn(&Table) -> BoxedWalk,
    ) -> Vec<BoxedWalk> {
        let mut streams = Vec::new();
        for level in 0..self.levels.len() {
            let meeting = self.meeting_prefix(level, &scope.prefix);
            // Level 0's tables stay newest first, as the merge wants its sources; a deeper
            // level's are walked from the end the walk starts at.
            let in_walk_order: Box<dyn Iterator<Item = &Arc<TableHandle>>> = match backward {
                true if level > 0 => Box::new(meeting.rev()),
                _ => Box::new(meeting),
            };
            let admitted: Vec<BoxedWalk> = in_walk_order
                .filter_map(|t| scope.admits(level, t).map(|a| (t, a)))
                .map(|(t, answer)| match from_edge {
                    true => scope.checked(level, answer, walk(&t.table)),
                    false => walk(&t.table),
                })
                .collect();
            match level {
                0 => streams.extend(admitted),
                // A deeper level's tables are disjoint and in walk order: one after another.
                _ if !admitted.is_empty() => streams.push(concat(admitted)),
                _ => {}
            }
        }
        streams
    }

    /// The same tables, with the readers in `replaced` (by file number) in place of the ones
    /// they replace: the same files read through other filters (see
    /// [`Table::with_filter`]).
    pub fn with_readers(&self, replaced: &HashMap<u64, Table>) -> Version {
        let mut version = self.clone();
        for handle in version.levels.iter_mut().flatten() {
            if let Some(table) = replaced.get(&handle.meta.number) {
                *handle = Arc::new(TableHandle {
                    meta: handle.meta.clone(),
                    table: table.clone(),
                });
            }
        }
        version
    }

    /// The range deletions of keyspace `keyspace` after `edit`, and their fragments (the
    /// ones before, shared, when the edit changes none).
    fn ranges_after(
        &self,
        keyspace: u32,
        edit: &VersionEdit,
    ) -> (Arc<Vec<RangeTombstone>>, Arc<RangeTombstones>) {
        let mine = |list: &[(u32, RangeTombstone)]| list.iter().any(|(ks, _)| *ks == keyspace);
        if !mine(&edit.added_ranges) && !mine(&edit.removed_ranges) {
            return (Arc::clone(&self.ranges), Arc::clone(&self.range_fragments));
        }
        let removed: Vec<&RangeTombstone> = (edit.removed_ranges.iter())
            .filter(|(ks, _)| *ks == keyspace)
            .map(|(_, t)| t)
            .collect();
        let mut ranges: Vec<RangeTombstone> = (self.ranges.iter())
            .filter(|t| !removed.contains(t))
            .cloned()
            .collect();
        ranges.extend(
            (edit.added_ranges.iter())
                .filter(|(ks, _)| *ks == keyspace)
                .map(|(_, t)| t.clone()),
        );
        let fragments = RangeTombstones::new(&ranges);
        (Arc::new(ranges), Arc::new(fragments))
    }

    /// The version of keyspace `keyspace` after `edit` (whose tables of other keyspaces it
    /// leaves out); `opened` holds the readers of the tables the edit adds. A table the edit
    /// moves (removes and adds back) keeps the reader this version holds, whose filter may
    /// have been shrunk since the move was picked.
    pub fn apply(
        &self,
        keyspace: u32,
        edit: &VersionEdit,
        opened: &HashMap<u64, Table>,
    ) -> Version {
        let mut levels = self.levels.clone();
        let mut removed = HashMap::new();
        for (level, number) in &edit.removed {
            if let Some(tables) = levels.get_mut(*level as usize) {
                if let Some(at) = tables.iter().position(|t| t.meta.number == *number) {
                    removed.insert(*number, tables.remove(at).table.clone());
                }
            }
        }
        for meta in edit.added.iter().filter(|t| t.keyspace == keyspace) {
            let reader = removed
                .get(&meta.number)
                .or_else(|| opened.get(&meta.number));
            if let (Some(tables), Some(table)) = (levels.get_mut(meta.level as usize), reader) {
                tables.push(Arc::new(TableHandle {
                    meta: meta.clone(),
                    table: table.clone(),
                }));
            }
        }
        levels[0].sort_by_key(|t| std::cmp::Reverse(t.meta.number));
        for tables in &mut levels[1..] {
            tables.sort_by(|a, b| a.meta.smallest_key.cmp(&b.meta.smallest_key));
        }
        let fences = levels
            .iter()
            .map(|tables| tables.iter().map(|t| Fence::of(&t.meta)).collect())
            .collect();
        let deep_levels_in_use = (1..levels.len())
            .filter(|&l| !levels[l].is_empty())
            .collect();
        let (ranges, range_fragments) = self.ranges_after(keyspace, edit);
        Version {
            levels,
            fences,
            deep_levels_in_use,
            ranges,
            range_fragments,
        }
    }
}

/// A walk over one table from `start` on.
pub fn table_stream(table: &Table, start: Bound<&[u8]>) -> BoxedWalk {
    match start {
        Bound::Included(key) => Box::new(table.iter_from(key)),
        Bound::Excluded(key) => Box::new(PastKey::new(table.iter_from(key), key.to_vec())),
        Bound::Unbounded => Box::new(table.iter()),
    }
}

/// A walk over keys that all start with `prefix`: the tables whose key range misses the
/// prefix's have nothing for it, nor, when `hash` is the hash of the prefix the store's
/// extractor cuts from it, do those whose prefix filter rules that out.
pub struct PrefixScope {
    pub prefix: Vec<u8>,
    pub hash: Option<KeyHash>,
    pub counters: Arc<ReadCounters>,
}

impl PrefixScope {
    /// Whether the walk should read `table` of `level`, one whose key range meets the
    /// prefix's: whether its prefix filter, when the store trusts it, lets the prefix through.
    /// Counts the filter's probe and its answer.
    fn admits(&self, level: usize, table: &TableHandle) -> Option<PrefixAnswer> {
        let Some(hash) = &self.hash else {
            return Some(PrefixAnswer::Unknown);
        };
        let answer = table.table.prefix_answer(hash);
        let counters = &self.counters.prefix_levels[level.min(MAX_LEVELS - 1)];
        match answer {
            PrefixAnswer::Unknown => {}
            PrefixAnswer::Maybe => {
                counters.probes.fetch_add(1, Ordering::Relaxed);
            }
            PrefixAnswer::Absent => {
                counters.probes.fetch_add(1, Ordering::Relaxed);
                counters.negatives.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        }
        Some(answer)
    }

    /// `stream`, of a table of `level` the prefix filter let through (`answer`), counting a
    /// false positive when its first entry does not start with the prefix.
    fn checked(&self, level: usize, answer: PrefixAnswer, stream: BoxedWalk) -> BoxedWalk {
        if answer != PrefixAnswer::Maybe {
            return stream;
        }
        Box::new(FirstEntryCheck {
            inner: stream,
            prefix: self.prefix.clone(),
            counters: Some((Arc::clone(&self.counters), level.min(MAX_LEVELS - 1))),
        })
    }
}

/// Counts a prefix filter's false positive when the walk of a table it let through finds no
/// key with the prefix at its start.
struct FirstEntryCheck {
    inner: BoxedWalk,
    prefix: Vec<u8>,
    /// Until the first entry: where to count.
    counters: Option<(Arc<ReadCounters>, usize)>,
}

impl Walk for FirstEntryCheck {
    fn advance(&mut self) -> Result<bool> {
        let stepped = self.inner.advance();
        if let Some((counters, level)) = self.counters.take() {
            let found = match &stepped {
                Ok(true) => self.inner.current().key.starts_with(&self.prefix),
                Ok(false) => false,
                Err(_) => true,
            };
            if !found {
                let fp = &counters.prefix_levels[level].false_positives;
                fp.fetch_add(1, Ordering::Relaxed);
            }
        }
        stepped
    }

    fn current(&self) -> EntryView<'_> {
        self.inner.current()
    }
}

/// The run of `tables` (sorted by key, disjoint) whose key ranges meet the keys that start
/// with `prefix`: from the first whose largest key is at or past it, up to the first whose
/// smallest key is past every key with it.
fn prefix_run<'t>(tables: &'t [Arc<TableHandle>], prefix: &[u8]) -> &'t [Arc<TableHandle>] {
    let first = tables.partition_point(|t| t.meta.largest_key.as_slice() < prefix);
    let rest = &tables[first..];
    let past = rest.partition_point(|t| {
        t.meta.smallest_key.as_slice() <= prefix || t.meta.smallest_key.starts_with(prefix)
    });
    &rest[..past]
}

/// Whether a table's key range meets the keys that start with `prefix`.
fn range_may_hold_prefix(meta: &TableMeta, prefix: &[u8]) -> bool {
    meta.largest_key.as_slice() >= prefix
        && (meta.smallest_key.as_slice() <= prefix || meta.smallest_key.starts_with(prefix))
}

/// A walk over a level of disjoint tables, opening each table's iterator only when the
/// previous one is done.
fn level_stream(tables: Vec<Arc<TableHandle>>, start: Bound<&[u8]>) -> BoxedWalk {
    let first = match start {
        Bound::Included(key) | Bound::Excluded(key) => {
            tables.partition_point(|t| t.meta.largest_key.as_slice() < key)
        }
        Bound::Unbounded => 0,
    };
    let start: Bound<Vec<u8>> = start.map(|k| k.to_vec());
    let count = tables.len() - first;
    let open = move |i: usize| {
        let table = &tables[first + i].table;
        match i {
            0 => table_stream(table, start.as_ref().map(Vec::as_slice)),
            _ => Box::new(table.iter()) as BoxedWalk,
        }
    };
    Box::new(Concat::new(count, open))
}

/// Whether a table whose smallest key is `smallest` may hold keys at or before `end`.
fn starts_at_or_before(smallest: &[u8], end: Bound<&[u8]>) -> bool {
    match end {
        Bound::Included(key) => smallest <= key,
        Bound::Excluded(key) => smallest < key,
        Bound::Unbounded => true,
    }
}

/// [`level_stream`] walking backwards: from the last table that can hold keys at or before
/// `end` down to the first, each table's iterator opened when the one after it is done.
fn level_back_stream(tables: Vec<Arc<TableHandle>>, end: Bound<&[u8]>) -> BoxedWalk {
    let past = tables.partition_point(|t| starts_at_or_before(&t.meta.smallest_key, end));
    let end: Bound<Vec<u8>> = end.map(|k| k.to_vec());
    let open = move |i: usize| {
        let bound = match i {
            0 => end.as_ref().map(Vec::as_slice),
            _ => Bound::Unbounded,
        };
        Box::new(tables[past - 1 - i].table.iter_back_to(bound)) as BoxedWalk
    };
    Box::new(Concat::new(past, open))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Halving down to 16 fences and counting the rest finds the same first fence as a binary
    /// search, for every length around the halving steps and every prefix between and on the
    /// fences, repeated prefixes (tables whose keys share their first eight bytes) included.
    #[test]
    fn first_not_below_agrees_with_a_binary_search() {
        for len in 0..=70u64 {
            // Each largest prefix repeats up to three times, as tables sharing a prefix do.
            let fences: Vec<Fence> = (0..len)
                .map(|i| Fence {
                    smallest: 10 * (i / 3),
                    largest: 10 * (i / 3) + 5,
                })
                .collect();
            for p in 0..=10 * (len / 3 + 2) {
                let expected = fences.partition_point(|f| f.largest < p);
                assert_eq!(
                    first_not_below(&fences, p),
                    expected,
                    "len {len}, prefix {p}"
                );
            }
        }
    }
}
