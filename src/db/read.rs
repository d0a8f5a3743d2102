//! The read path: point lookups and iterators over one consistent view, and the stats.

use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{lock, Inner, ReadState, Tree};
use crate::cursor::Cursor;
use crate::entry::{check_key_len, SeqNo, ValueKind};
use crate::error::{Error, Result};
use crate::filter::KeyHash;
use crate::filter_plan::table_shares;
use crate::iter::{prefix_end, DbIterator, Sources};
use crate::keyspace::KeyspaceId;
use crate::memtable::MemTable;
use crate::prefix::shared_prefix;
use crate::range_tombstone::Gone;
use crate::range_tombstone::RangeTombstones;
use crate::sstable::{FilterKind, FilterProbe, FilterResidency};
use crate::stats::{KeyspaceStats, LevelStats, Stats, TableStats};
use crate::value::{Newest, Value};
use crate::version::{PrefixScope, TableHandle};
use crate::walk::{BoxedWalk, FailingWalk};

impl Inner {
    /// The read state, then the sequence number: in that order every table of the state holds
    /// only entries at or below the number (a flush or compaction keeps, of each key, the
    /// newest version and those live snapshots see, so a number taken first could miss a
    /// version a concurrent flush collapsed away), and what the state lacks is whole later
    /// memtables: the reader sees a prefix of the history. At a snapshot's number `at`, the
    /// newest state serves: the versions the snapshot sees are kept for as long as it lives.
    /// Point lookups borrow their keyspace's tree from the state (`ReadState::tree`): one
    /// reference taken, not two.
    pub(super) fn view(&self, at: Option<SeqNo>) -> (Arc<ReadState>, SeqNo) {
        let state = self.read_state();
        let seq = at.unwrap_or_else(|| self.visible_seq.load(Ordering::Acquire));
        (state, seq)
    }

    /// Keyspace `ks`'s tree as it is now.
    pub(super) fn tree(&self, ks: KeyspaceId) -> Result<Arc<Tree>> {
        let state = self.read_state();
        match state.tree(ks) {
            Some(tree) => Ok(Arc::clone(tree)),
            None => Err(no_such_keyspace(ks)),
        }
    }

    /// What iterators and cursors of keyspace `ks` read: its tree, or once it is dropped, a
    /// source whose every walk fails. A walk whose keys all start with `shared` reads only
    /// the tables whose key range meets it and, when the store's extractor cuts a prefix
    /// from it, whose prefix filters let that through.
    fn sources(
        &self,
        ks: KeyspaceId,
        at: Option<SeqNo>,
        shared: Vec<u8>,
    ) -> (Arc<dyn Sources>, SeqNo) {
        match self.tree(ks) {
            Ok(tree) => {
                let seq = at.unwrap_or_else(|| self.visible_seq.load(Ordering::Acquire));
                let below = self.expired_below(&tree);
                let sources: Arc<dyn Sources> = match self.prefix_scope(shared) {
                    Some(scope) => Arc::new(PrefixWalk { tree, scope }),
                    None => tree,
                };
                match below {
                    0 => (sources, seq),
                    below => (Arc::new(Expiring { sources, below }), seq),
                }
            }
            Err(e) => (Arc::new(Failing(e.to_string())), 0),
        }
    }

    /// The scope of a walk over keys that all start with `prefix` (none for an empty one).
    fn prefix_scope(&self, prefix: Vec<u8>) -> Option<PrefixScope> {
        if prefix.is_empty() {
            return None;
        }
        let hash = self.extracted_prefix_hash(&prefix);
        Some(PrefixScope {
            prefix,
            hash,
            counters: Arc::clone(&self.table_env.counters),
        })
    }

    /// `false` when no key starting with `prefix` is in keyspace `ks` now: no memtable holds
    /// an entry with it, and every table whose key range meets it has a prefix filter that
    /// rules it out (when the store's extractor cuts a prefix from `prefix`). Reads nothing
    /// from disk. A `true` may be wrong: a filter's false positive, a deleted key, or a
    /// prefix the extractor cuts nothing from.
    pub(crate) fn may_contain_prefix(&self, ks: KeyspaceId, prefix: &[u8]) -> bool {
        let (state, _) = self.view(None);
        let Some(tree) = state.tree(ks) else {
            return false;
        };
        let hash = self.extracted_prefix_hash(prefix);
        let in_memtables = tree.memtables().any(|mem| {
            let ruled_out = hash.as_ref().and_then(|h| mem.may_hold_prefix(h)) == Some(false);
            !ruled_out && mem.holds_prefix(prefix)
        });
        in_memtables || tree.version.may_hold_prefix(prefix, hash.as_ref())
    }

    /// The hash of the prefix the store's extractor cuts from `prefix`, the one its prefix
    /// filters are asked for; `None` without an extractor, or when it cuts none.
    fn extracted_prefix_hash(&self, prefix: &[u8]) -> Option<KeyHash> {
        let extractor = self.options.prefix_extractor.as_ref()?;
        extractor.prefix(prefix).map(KeyHash::of)
    }

    /// The value of `key` at `at` (now, without it); `None` when absent or deleted.
    pub(crate) fn get(
        &self,
        ks: KeyspaceId,
        key: &[u8],
        at: Option<SeqNo>,
    ) -> Result<Option<Vec<u8>>> {
        Ok(self.get_pinned(ks, key, at)?.map(Vec::from))
    }

    /// The value of `key` at `at` (now, without it), shared with the block it lies in (copied
    /// out of a memtable).
    pub(crate) fn get_pinned(
        &self,
        ks: KeyspaceId,
        key: &[u8],
        at: Option<SeqNo>,
    ) -> Result<Option<Value>> {
        Ok(self.newest(ks, key, at)?.and_then(|newest| newest.value))
    }

    /// The newest version of `key` at `at` (now, without it), a tombstone included.
    pub(super) fn newest(
        &self,
        ks: KeyspaceId,
        key: &[u8],
        at: Option<SeqNo>,
    ) -> Result<Option<Newest>> {
        check_key_len(key)?;
        let (state, seq) = self.view(at);
        let tree = state.tree(ks).ok_or_else(|| no_such_keyspace(ks))?;
        self.newest_in(tree, key, seq)
    }

    /// The newest version of `key` at `seq` in `tree`, a tombstone (or a range deletion)
    /// included.
    pub(super) fn newest_in(&self, tree: &Tree, key: &[u8], seq: SeqNo) -> Result<Option<Newest>> {
        let gone = tree.gone(key, seq, self.expired_below(tree));
        self.newest_unless_gone(tree, key, seq, gone)
    }

    /// [`newest_in`](Self::newest_in), with what `gone` takes of the key known.
    pub(super) fn newest_unless_gone(
        &self,
        tree: &Tree,
        key: &[u8],
        seq: SeqNo,
        gone: Gone,
    ) -> Result<Option<Newest>> {
        let newest = match tree.memtables().find_map(|mem| mem.get_newest(key, seq)) {
            Some(newest) => Some(newest),
            None => {
                let hash = KeyHash::of(key);
                self.count_table_lookups(tree, 1);
                // Tables holding nothing newer than the deletion, or the expired, are passed by.
                let counters = &self.table_env.counters;
                (tree.version).get_newest(key, seq, &hash, counters, gone)?
            }
        };
        Ok(gone.apply(newest))
    }

    /// Whether `key` holds a value at `at` (now, without it), from the memtables, the
    /// filters, the indexes and at most the data blocks' keys: no value is copied.
    pub(crate) fn contains_key(
        &self,
        ks: KeyspaceId,
        key: &[u8],
        at: Option<SeqNo>,
    ) -> Result<bool> {
        check_key_len(key)?;
        let (state, seq) = self.view(at);
        let tree = state.tree(ks).ok_or_else(|| no_such_keyspace(ks))?;
        let gone = tree.gone(key, seq, self.expired_below(tree));
        let newest = match tree.memtables().find_map(|mem| mem.newest_kind(key, seq)) {
            Some(newest) => Some(newest),
            None => {
                self.count_table_lookups(tree, 1);
                let hash = KeyHash::of(key);
                let counters = &self.table_env.counters;
                (tree.version).kind_of(key, seq, &hash, counters, gone)?
            }
        };
        Ok(newest.is_some_and(|(kind, at)| kind == ValueKind::Value && !gone.takes(at)))
    }

    /// `false` when `key` is surely absent now: the memtables say it is deleted, or none holds
    /// it and every table's filter rules it out. Reads nothing from disk and counts nothing
    /// (the filter counters measure lookups that go on to the data).
    pub(crate) fn may_contain(&self, ks: KeyspaceId, key: &[u8]) -> bool {
        let (state, seq) = self.view(None);
        let Some(tree) = state.tree(ks) else {
            return false;
        };
        let gone = tree.gone(key, seq, self.expired_below(tree));
        if let Some((kind, at)) = tree.memtables().find_map(|mem| mem.newest_kind(key, seq)) {
            return kind == ValueKind::Value && !gone.takes(at);
        }
        if gone.any() {
            // Only tables newer than the deletion may hold the key; asking each as a get
            // would is more than this quick check is for.
            return true;
        }
        let hash = KeyHash::of(key);
        // Every candidate's filter words are fetched first, so that their cache misses
        // overlap instead of coming one after another; past 8 candidates (many level-0
        // tables), the rest are asked as they come.
        let mut candidates = tree.version.candidate_tables(key);
        let mut first: [Option<(&TableHandle, FilterProbe)>; 8] = [None; 8];
        for (slot, table) in first.iter_mut().zip(&mut candidates) {
            *slot = Some((table, table.table.prefetch_filter(key, &hash)));
        }
        let maybe = (first.iter().map_while(|t| t.as_ref()))
            .any(|(table, probe)| table.table.may_contain_prefetched(&hash, probe))
            || candidates.any(|table| table.table.may_contain(key, &hash));
        maybe
    }

    pub(crate) fn iter(
        &self,
        ks: KeyspaceId,
        start: Bound<&[u8]>,
        end: Bound<Vec<u8>>,
        prefix: Option<Vec<u8>>,
        at: Option<SeqNo>,
    ) -> DbIterator {
        let start = start.map(<[u8]>::to_vec);
        let mut shared = shared_prefix(&start, &end);
        if let Some(p) = prefix.as_ref().filter(|p| p.len() > shared.len()) {
            shared = p.clone();
        }
        let (state, seq) = self.sources(ks, at, shared);
        DbIterator::new(state, seq, start, end, prefix)
    }

    /// A cursor over the pairs within `lower..upper` at `at` (now, without it).
    pub(crate) fn cursor(
        &self,
        ks: KeyspaceId,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        at: Option<SeqNo>,
    ) -> Cursor {
        let owned = |b: Bound<&[u8]>| b.map(<[u8]>::to_vec);
        let (lower, upper) = (owned(lower), owned(upper));
        let (state, seq) = self.sources(ks, at, shared_prefix(&lower, &upper));
        Cursor::new(state, seq, lower, upper)
    }

    pub(super) fn stats(&self) -> Stats {
        let counters = self.table_env.counters.snapshot();
        let (background_error, writes_refused) = {
            let background = lock(&self.background);
            (
                background.any_failure().map(|f| f.reason.clone()),
                background.wal_error.clone(),
            )
        };
        let state = self.read_state();
        let trees: Vec<TreeStats> = state.trees.iter().map(|t| self.tree_stats(t)).collect();
        let filter_memory_bytes = trees.iter().map(|t| t.filter_memory_bytes).sum();
        let memory = self.memory_roles(&state, filter_memory_bytes);
        let prefix_filter_memory_bytes = trees.iter().map(|t| t.prefix_memory_bytes).sum();
        let tables_prefix_filter_ignored = (trees.iter())
            .flat_map(|t| &t.levels)
            .map(|l| l.tables_prefix_filter_ignored)
            .sum();
        let index_memory_bytes = trees.iter().map(|t| t.index_memory_bytes).sum();
        let keyspaces = (state.trees.iter().zip(&trees))
            .map(|(tree, stats)| keyspace_stats(tree, stats))
            .collect();
        let TreeStats { levels, tables, .. } =
            trees.into_iter().next().expect("the default keyspace");
        let state = state.default_tree();
        let (live_snapshots, oldest_snapshot) = {
            let snapshots = lock(&self.snapshots);
            (snapshots.len(), snapshots.oldest())
        };
        Stats {
            filter_probes: counters.filter_probes,
            filter_negatives: counters.filter_negatives,
            filter_positives: counters.filter_positives,
            filter_true_positives: counters.filter_true_positives,
            data_block_reads: counters.data_block_reads,
            bytes_read: counters.bytes_read,
            levels,
            tables,
            memtable_bytes: state.mem.approximate_bytes() as u64,
            immutable_memtables: state.immutable.len(),
            last_sequence: self.visible_seq.load(Ordering::Acquire),
            live_snapshots,
            oldest_snapshot,
            flushes: self.counters.flushes.load(Ordering::Relaxed),
            compactions: self.counters.compactions.load(Ordering::Relaxed),
            trivial_moves: self.counters.trivial_moves.load(Ordering::Relaxed),
            split_compactions: self.counters.split_compactions.load(Ordering::Relaxed),
            tables_expired: self.counters.tables_expired.load(Ordering::Relaxed),
            level0_compactions_at_rest: (self.counters.level0_compactions_at_rest)
                .load(Ordering::Relaxed),
            write_stalls: self.counters.write_stalls.load(Ordering::Relaxed),
            stall_micros: self.counters.stall_micros.load(Ordering::Relaxed),
            write_stops_for_flush: self.counters.stops_for_flush.load(Ordering::Relaxed),
            write_stops_for_level0: self.counters.stops_for_level0.load(Ordering::Relaxed),
            longest_stall_micros: self.counters.longest_stall_micros.load(Ordering::Relaxed),
            delayed_write_rate: self.write_rate.current_rate(),
            user_bytes_written: self.counters.user_bytes.load(Ordering::Relaxed),
            wal_bytes_written: self.counters.wal_bytes.load(Ordering::Relaxed),
            write_groups: self.counters.write_groups.load(Ordering::Relaxed),
            grouped_batches: self.counters.grouped_batches.load(Ordering::Relaxed),
            background_errors: self.counters.background_errors.load(Ordering::Relaxed),
            background_retries: self.counters.background_retries.load(Ordering::Relaxed),
            background_error,
            writes_refused,
            manifest_rotations: self.counters.manifest_rotations.load(Ordering::Relaxed),
            filter_memory_bytes,
            prefix_filter_memory_bytes,
            tables_prefix_filter_ignored,
            prefix_extractor: (self.options.prefix_extractor.as_ref()).map(|e| e.name()),
            memtable_prefix_filter_probes: (self.table_env.counters.memtable_prefix_probes)
                .load(Ordering::Relaxed),
            memtable_prefix_filter_negatives: (self.table_env.counters.memtable_prefix_negatives)
                .load(Ordering::Relaxed),
            filter_reads: self.table_env.counters.filter_reads.load(Ordering::Relaxed),
            filter_bytes_read: (self.table_env.counters.filter_bytes_read).load(Ordering::Relaxed),
            filter_refits: self
                .table_env
                .counters
                .filter_refits
                .load(Ordering::Relaxed),
            filter_memory_limit: self.governor.filter_limit(),
            memory,
            filter_policy: self.options.policy(),
            index_memory_bytes,
            keyspaces,
            block_cache: self
                .table_env
                .block_cache
                .as_ref()
                .map(|c| c.stats())
                .unwrap_or_default(),
            index_cache: (self.table_env.index_cache)
                .as_ref()
                .map(|c| c.stats())
                .unwrap_or_default(),
            index_block_reads: counters.index_block_reads,
            scan_block_reads: (self.table_env.counters.scan_block_reads).load(Ordering::Relaxed),
            table_cache: self.table_env.table_cache.stats(),
        }
    }

    /// The levels and tables of one keyspace's tree, and the memory its filters and indexes
    /// hold. The per-level write and probe counters are the whole store's.
    fn tree_stats(&self, tree: &Tree) -> TreeStats {
        let state = tree;
        let version = &state.version;
        let mut levels = Vec::with_capacity(version.num_levels());
        let mut tables = Vec::new();
        let mut filter_memory_bytes = 0;
        let mut prefix_memory_bytes = 0;
        let mut index_memory_bytes = 0;
        // The targets are those of the version reported, not of one a job installed since.
        let writer = self.table_writer_on(tree, version);
        let mut shares = table_shares(version.tables().map(|t| &t.meta)).into_iter();
        for level in 0..version.num_levels() {
            // An empty level has no share of its own to report.
            let target = writer.filters_for(level as u32, 0);
            let target_bits_per_key = match version.level(level).is_empty() {
                true => None,
                false => target.bits_per_key(),
            };
            let io = &self.counters.levels[level];
            let (filter_probes, filter_positives, filter_true_positives) = self
                .table_env
                .counters
                .levels
                .get(level)
                .map_or((0, 0, 0), |c| c.get());
            let (prefix_filter_probes, prefix_filter_negatives, prefix_filter_false_positives) =
                (self.table_env.counters.prefix_levels.get(level)).map_or((0, 0, 0), |c| c.get());
            let load = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
            let mut summary = LevelStats {
                bytes_written: load(&io.bytes_written),
                bytes_read: load(&io.bytes_read),
                compactions: load(&io.compactions),
                tables_moved: load(&io.tables_moved),
                bytes_moved: load(&io.bytes_moved),
                target_bits_per_key,
                filter_probes,
                filter_positives,
                filter_true_positives,
                prefix_filter_probes,
                prefix_filter_negatives,
                prefix_filter_false_positives,
                ..LevelStats::default()
            };
            let mut filtered = Vec::new();
            // Filter bytes held by kind, and the entries of the tables with a filter.
            let mut held_by_kind: Vec<(FilterKind, u64)> = Vec::new();
            let mut filtered_entries = 0;
            for handle in version.level(level) {
                let share = shares.next().unwrap_or(0.0);
                summary.tables += 1;
                summary.bytes += handle.meta.file_size;
                summary.entries += handle.meta.entries;
                let params = handle.table.filter_params();
                let resident_rate = params.map(|_| handle.table.resident_false_positive_rate());
                if let Some(rate) = resident_rate {
                    filtered.push((rate, share, handle.meta.entries));
                }
                let residency = handle.table.filter_residency();
                summary.tables_filter_shrunk += usize::from(matches!(
                    residency,
                    FilterResidency::Folded(_) | FilterResidency::Dropped
                ));
                let kind = handle.table.filter_kind();
                let blocked = kind == Some(FilterKind::CacheLocalBloom);
                summary.tables_off_target += usize::from(!target.includes(params, blocked));
                let filter_bytes = handle.table.filter_memory_bytes() as u64;
                if let Some(kind) = kind {
                    filtered_entries += handle.meta.entries;
                    match held_by_kind.iter_mut().find(|(k, _)| *k == kind) {
                        Some((_, bytes)) => *bytes += filter_bytes,
                        None => held_by_kind.push((kind, filter_bytes)),
                    }
                }
                let prefix_filter_bytes = handle.table.prefix_filter_memory_bytes() as u64;
                filter_memory_bytes += filter_bytes + prefix_filter_bytes;
                prefix_memory_bytes += prefix_filter_bytes;
                summary.tables_prefix_filter_ignored +=
                    usize::from(handle.table.prefix_filter_ignored());
                index_memory_bytes += handle.table.index_memory_bytes() as u64;
                let (lookup_span, unit_lookups) =
                    (self.count_spans).counts(handle.meta.number, &handle.table);
                let lookups_counted = unit_lookups.iter().sum();
                tables.push(TableStats {
                    level,
                    number: handle.meta.number,
                    file_size: handle.meta.file_size,
                    entries: handle.meta.entries,
                    smallest_key: handle.meta.smallest_key.clone(),
                    largest_key: handle.meta.largest_key.clone(),
                    bits_per_key: params.map(|p| p.bits_per_key()),
                    hashes: params.map(|p| p.hashes()),
                    predicted_false_positive_rate: handle.table.predicted_filter_rate(),
                    resident_false_positive_rate: resident_rate,
                    filter_bytes,
                    filter_residency: residency,
                    filter_partitions: match handle.table.is_partitioned() {
                        true => handle.table.filter_units_residency(),
                        false => Vec::new(),
                    },
                    filter_kind: kind,
                    prefix_filter_bytes,
                    prefix_filter_predicted_rate: handle.table.prefix_filter_predicted_rate(),
                    lookups_counted,
                    lookup_span,
                });
            }
            summary.predicted_false_positive_rate = level_rate(&filtered);
            summary.filter_kind = (held_by_kind.iter())
                .max_by_key(|(_, bytes)| *bytes)
                .map(|(kind, _)| *kind);
            let held_bytes: u64 = held_by_kind.iter().map(|(_, bytes)| bytes).sum();
            summary.filter_bits_per_key =
                (filtered_entries > 0).then(|| held_bytes as f64 * 8.0 / filtered_entries as f64);
            levels.push(summary);
        }
        TreeStats {
            levels,
            tables,
            filter_memory_bytes,
            prefix_memory_bytes,
            index_memory_bytes,
        }
    }
}

/// A level's predicted false-positive rate from its filtered tables' (rate, share of lookups,
/// keys): weighted by the lookups that reach each table, which is not its keys (a table
/// written when its level was sparser spans more of the key space per key); by keys when no
/// lookup reaches the level; `None` without filters.
fn level_rate(tables: &[(f64, f64, u64)]) -> Option<f64> {
    let weighted = |weight: &dyn Fn(&(f64, f64, u64)) -> f64| {
        let total: f64 = tables.iter().map(weight).sum();
        (total > 0.0).then(|| tables.iter().map(|t| t.0 * weight(t)).sum::<f64>() / total)
    };
    weighted(&|t| t.1).or_else(|| weighted(&|t| t.2 as f64))
}

pub(super) fn no_such_keyspace(ks: KeyspaceId) -> Error {
    Error::NoSuchKeyspace {
        name: format!("number {ks} (dropped)"),
    }
}

/// One keyspace's share of the stats.
struct TreeStats {
    levels: Vec<LevelStats>,
    tables: Vec<TableStats>,
    filter_memory_bytes: u64,
    prefix_memory_bytes: u64,
    index_memory_bytes: u64,
}

fn keyspace_stats(tree: &Tree, stats: &TreeStats) -> KeyspaceStats {
    let options = tree.options();
    KeyspaceStats {
        name: tree.keyspace.name.clone(),
        levels: stats.levels.clone(),
        tables: stats.tables.clone(),
        entries: stats.tables.iter().map(|t| t.entries).sum(),
        bytes: stats.tables.iter().map(|t| t.file_size).sum(),
        memtable_bytes: tree.mem.approximate_bytes() as u64,
        immutable_memtables: tree.immutable.len(),
        filter_memory_bytes: stats.filter_memory_bytes,
        range_deletions: tree
            .memtables()
            .map(|m| m.range_tombstone_count())
            .sum::<usize>()
            + tree.version.range_tombstones().len(),
        filter_policy: options.policy(),
        compression: options.compression,
        bottom_compression: options.compression_at(true),
        block_size: options.block_size,
        memtable_size: options.memtable_size,
    }
}

/// An iterator that yields `NoSuchKeyspace` naming `name`, once: a range of a keyspace this
/// store does not have.
pub(super) fn failing_iter(name: String) -> DbIterator {
    let unbounded = || std::ops::Bound::Unbounded;
    DbIterator::new(Arc::new(Failing(name)), 0, unbounded(), unbounded(), None)
}

/// The source of a dropped keyspace's iterators: every walk yields its error, once.
struct Failing(String);

impl Failing {
    fn stream(&self) -> Vec<BoxedWalk> {
        let error = Error::NoSuchKeyspace {
            name: self.0.clone(),
        };
        vec![Box::new(FailingWalk::new(error))]
    }
}

impl Sources for Failing {
    fn forward(&self, _: Bound<&[u8]>) -> Vec<BoxedWalk> {
        self.stream()
    }

    fn backward(&self, _: Bound<&[u8]>) -> Vec<BoxedWalk> {
        self.stream()
    }
}

/// A tree's sources for a walk within one prefix: the memtables, and the tables the scope
/// admits.
struct PrefixWalk {
    tree: Arc<Tree>,
    scope: PrefixScope,
}

impl Sources for PrefixWalk {
    fn forward(&self, start: Bound<&[u8]>) -> Vec<BoxedWalk> {
        let end = prefix_end(&self.scope.prefix);
        let mut streams = self.memtable_streams(|m| Box::new(m.iter_between(start, end.clone())));
        streams.extend(self.tree.version.streams_within(start, &self.scope));
        streams
    }

    fn backward(&self, end: Bound<&[u8]>) -> Vec<BoxedWalk> {
        let first = Bound::Included(self.scope.prefix.clone());
        let mut streams =
            self.memtable_streams(|m| Box::new(m.iter_back_between(end, first.clone())));
        streams.extend(self.tree.version.streams_back_within(end, &self.scope));
        streams
    }

    fn range_deletions(&self, snapshot: SeqNo) -> Option<Arc<RangeTombstones>> {
        self.tree.range_fragments(snapshot)
    }
}

/// Sources whose entries numbered below `below` have expired (`Options::ttl`), as of when
/// the walk was made.
struct Expiring {
    sources: Arc<dyn Sources>,
    below: SeqNo,
}

impl Sources for Expiring {
    fn forward(&self, start: Bound<&[u8]>) -> Vec<BoxedWalk> {
        self.sources.forward(start)
    }

    fn backward(&self, end: Bound<&[u8]>) -> Vec<BoxedWalk> {
        self.sources.backward(end)
    }

    fn range_deletions(&self, snapshot: SeqNo) -> Option<Arc<RangeTombstones>> {
        self.sources.range_deletions(snapshot)
    }

    fn expired_below(&self) -> SeqNo {
        self.below
    }
}

impl PrefixWalk {
    /// The tree's memtables walked by `walk`, newest first, but those whose prefix filter
    /// rules out the prefix the store's extractor cuts from the walk's: no seek, no copy.
    fn memtable_streams(&self, walk: impl Fn(&Arc<MemTable>) -> BoxedWalk) -> Vec<BoxedWalk> {
        let counters = &self.scope.counters;
        let may_hold = |mem: &Arc<MemTable>| {
            let answer = (self.scope.hash.as_ref()).and_then(|h| mem.may_hold_prefix(h));
            if let Some(held) = answer {
                counters
                    .memtable_prefix_probes
                    .fetch_add(1, Ordering::Relaxed);
                if !held {
                    (counters.memtable_prefix_negatives).fetch_add(1, Ordering::Relaxed);
                }
            }
            answer != Some(false)
        };
        self.tree
            .memtables()
            .filter(|m| may_hold(m))
            .map(walk)
            .collect()
    }
}

/// Each of `tree`'s memtables walked by `walk`, newest first.
fn memtable_streams(tree: &Tree, walk: impl Fn(&Arc<MemTable>) -> BoxedWalk) -> Vec<BoxedWalk> {
    tree.memtables().map(walk).collect()
}

impl Sources for Tree {
    fn forward(&self, start: Bound<&[u8]>) -> Vec<BoxedWalk> {
        let mut streams = memtable_streams(self, |m| Box::new(m.iter_from(start)));
        streams.extend(self.version.streams_from(start));
        streams
    }

    fn backward(&self, end: Bound<&[u8]>) -> Vec<BoxedWalk> {
        let mut streams = memtable_streams(self, |m| Box::new(m.iter_back_to(end)));
        streams.extend(self.version.streams_back_to(end));
        streams
    }

    fn range_deletions(&self, snapshot: SeqNo) -> Option<Arc<RangeTombstones>> {
        self.range_fragments(snapshot)
    }
}
