//! Leveled compaction: choosing what to merge, and merging it into new tables.
//!
//! Level 0 is compacted into the *base level* once it holds `l0_compaction_trigger` tables; a
//! deeper level is compacted into the next once its bytes exceed its target. The level with the
//! highest ratio of actual to allowed size goes first. Targets come from [`LevelTargets`]: by
//! default they are derived from the largest level up, each `level_size_ratio` times smaller
//! than the one below, so about 90% of the data sits in the last level whatever the store's
//! size, and a small store has few levels (RocksDB's `level_compaction_dynamic_level_bytes`).
//!
//! A deeper level gives up one table at a time: the one whose overlap with the next level is
//! smallest for its size (RocksDB's `kMinOverlappingRatio`), together with every table of the
//! next level it overlaps. Of the bytes such a compaction writes, the most are then the level's
//! own, which is what keeps write amplification down.
//!
//! Compactions run side by side when they do not conflict: `pick` passes over candidates that
//! take a table a running compaction holds, or that would write into a level within the key
//! range a running compaction writes there (each compaction's output lies within the range of
//! its inputs). Level 0 is compacted whole, so at most one compaction takes from it at a time.
//! The second rule matters for a manual compaction, which takes every table: flushes go on
//! beside it, and without the rule a compaction of their tables could write into its output
//! level inside its range, between the tables it will replace.
//!
//! A compaction whose inputs overlap nothing in the output level (nor one another) is a
//! trivial move: the tables change level by a manifest edit, without being rewritten. The
//! exception is a move to the bottom of the tree (no deeper data under the range) of a table
//! holding tombstones: rewritten, the tombstones are dropped.

use std::collections::HashSet;
use std::sync::Arc;

use crate::compaction_filter::{CompactionFilter, FilterScope, Filtered};
use crate::entry::SeqNo;
use crate::error::Result;
use crate::iter::{KeptVersions, WithoutDeleted, ZeroedSeqs};
use crate::manifest::TableMeta;
use crate::options::Options;
use crate::range_tombstone::RangeTombstones;
use crate::sstable::{BlockReads, Table};
use crate::version::{TableHandle, Version};
use crate::walk::{BoxedWalk, Concat, EntryView, MergeWalk, Walk};

/// What a merge drops or changes besides the versions no reader sees.
pub struct MergeRules {
    /// The range deletions in the manifest when the merge began.
    pub ranges: Option<Arc<RangeTombstones>>,
    /// Entries numbered below it have expired; `None` where entries live for ever.
    pub expired_below: Option<SeqNo>,
    /// The user's filter, and the keyspace's name it is told.
    pub filter: Option<(Arc<dyn CompactionFilter>, Arc<str>)>,
    /// The smallest number of a version the filter removed or changed (`u64::MAX`: none).
    pub filtered_from: Arc<std::sync::atomic::AtomicU64>,
}

/// One merge of tables from one level (or, for a full compaction, every level above
/// `output_level`) with the overlapping tables of `output_level`.
pub struct Compaction {
    pub output_level: usize,
    /// Inputs from above `output_level`, newest first for level 0.
    pub inputs: Vec<Arc<TableHandle>>,
    /// Inputs from `output_level`, sorted by key.
    pub output_level_inputs: Vec<Arc<TableHandle>>,
    /// True when no deeper level holds data in the inputs' key range, so tombstones have
    /// nothing left to hide and can be dropped.
    pub drop_tombstones: bool,
    /// False when every input must be rewritten (a full compaction rewrites all tables).
    pub may_move: bool,
    /// The smallest keys of the tables of the level below `output_level` that the merged
    /// range meets, sorted: the output's tables end at them where they can (`Cuts::AtSize`).
    pub next_level_starts: Vec<Vec<u8>>,
}

impl Compaction {
    /// Every input table.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<TableHandle>> {
        self.inputs.iter().chain(&self.output_level_inputs)
    }

    /// The key range the output will lie in: that of all the inputs.
    pub fn output_range(&self) -> KeyRange {
        key_range(self.inputs.iter().chain(&self.output_level_inputs))
    }

    /// True when the inputs can move to the output level unchanged: nothing there overlaps
    /// them, they do not overlap one another, and no tombstone would be kept at the bottom
    /// that a rewrite would drop.
    pub fn is_trivial_move(&self) -> bool {
        if !self.may_move || !self.output_level_inputs.is_empty() {
            return false;
        }
        let mut by_key: Vec<&Arc<TableHandle>> = self.inputs.iter().collect();
        by_key.sort_by(|a, b| a.meta.smallest_key.cmp(&b.meta.smallest_key));
        let disjoint = by_key
            .windows(2)
            .all(|pair| pair[0].meta.largest_key < pair[1].meta.smallest_key);
        let keeps_tombstones_at_bottom = self.drop_tombstones
            && self
                .inputs
                .iter()
                .any(|t| t.table.properties().tombstones > 0);
        disjoint && !keeps_tombstones_at_bottom
    }

    /// The inputs merged, the keys in `part` only: of each key the newest version and the
    /// newest each of `snapshots` (the live snapshots' numbers) sees, tombstones dropped at
    /// the bottom when nothing older of their key is kept. Inputs are read past the block
    /// cache: one pass over tables about to be deleted must not push out the blocks lookups
    /// keep hitting.
    ///
    /// At the bottom (no deeper level holds the range) a key's entry that every reader sees
    /// (at or below the oldest snapshot; with none, its one remaining entry) gets sequence
    /// number 0, as RocksDB does: nothing older lies below to be ordered against, and anything
    /// newer is a kept newer version, in a higher level or in a memtable, each asked first. A
    /// varint 0 is one byte where a real sequence number takes three to five, none of which
    /// compress.
    ///
    /// The tables of one level below 0 are sorted and disjoint, so they make one stream, read
    /// one table after another: the merge then compares a key against one head per level, not
    /// one per table (a level-0 merge may take a hundred tables of its output level).
    ///
    /// Versions the range deletions of `rules` hide from every reader go, and expired ones
    /// (`WithoutDeleted`); its user's filter applies to what is kept (`Filtered`).
    pub fn merged_entries_in(
        &self,
        part: &Part,
        snapshots: &[SeqNo],
        rules: &MergeRules,
    ) -> impl Walk {
        let in_part: Vec<&Arc<TableHandle>> =
            self.all_inputs().filter(|t| part.meets(&t.meta)).collect();
        let mut streams: Vec<BoxedWalk> = Vec::new();
        for run in in_part.chunk_by(|a, b| a.meta.level == b.meta.level && a.meta.level > 0) {
            let tables: Vec<Table> = run.iter().map(|t| t.table.clone()).collect();
            let part = part.clone();
            let open = move |i: usize| part_stream(&tables[i], &part);
            streams.push(Box::new(Concat::new(run.len(), open)));
        }
        let at_bottom = self.drop_tombstones;
        // At the bottom, a version every reader sees (at or below the oldest snapshot) needs
        // no number: zeroed, it compresses better. It is the only one kept of its key at or
        // below that snapshot, so the order of the key's versions stays.
        // Where entries expire, numbers tell when they were written: none is zeroed.
        let oldest_snapshot = snapshots.iter().copied().min().unwrap_or(SeqNo::MAX);
        let seen_by_all = match at_bottom && rules.expired_below.is_none() {
            true => oldest_snapshot,
            false => 0,
        };
        let mut ascending = snapshots.to_vec();
        ascending.sort_unstable();
        let merged = WithoutDeleted {
            inner: MergeWalk::forward(streams),
            ranges: rules.ranges.clone(),
            snapshots: ascending,
            expired_below: rules.expired_below.unwrap_or(0),
        };
        let scope = (rules.filter.as_ref()).map(|(filter, keyspace)| FilterScope {
            filter: Arc::clone(filter),
            keyspace: Arc::clone(keyspace),
            level: self.output_level as u32,
            newest_snapshot: snapshots.iter().copied().max(),
            changed_from: Arc::clone(&rules.filtered_from),
        });
        let filtered = Filtered::new(merged, scope);
        let kept = KeptVersions::new(filtered, snapshots.to_vec(), at_bottom);
        ZeroedSeqs {
            inner: kept,
            seen_by_all,
            ranges: rules.ranges.clone(),
        }
    }

    /// Splits the merge into at most `max_parts` key ranges of about equal bytes, to be merged
    /// side by side (RocksDB's subcompactions). Only a merge out of level 0, or a full one, is
    /// split: each takes a whole level's worth of the key space, so no other compaction can
    /// run beside it there, and one thread would merge while the others wait. The ranges are
    /// cut at the first keys of output-level tables, so each part writes its own tables and
    /// the parts' tables, in order, are sorted and disjoint.
    pub fn parts(&self, max_parts: usize) -> Vec<Part> {
        let takes_a_level = !self.may_move || self.inputs.iter().any(|t| t.meta.level == 0);
        if !takes_a_level || max_parts < 2 {
            return vec![Part::default()];
        }
        let cuts = split_points(&metas_of(&self.output_level_inputs), max_parts);
        let mut bounds: Vec<Option<Vec<u8>>> = vec![None];
        bounds.extend(cuts.into_iter().map(Some));
        bounds.push(None);
        bounds
            .windows(2)
            .map(|pair| Part {
                from: pair[0].clone(),
                until: pair[1].clone(),
            })
            .collect()
    }
}

/// A range of user keys: from `from` (included) until `until` (excluded); `None` is open.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Part {
    pub from: Option<Vec<u8>>,
    pub until: Option<Vec<u8>>,
}

impl Part {
    /// True when some of `table`'s keys may lie in the range.
    fn meets(&self, table: &TableMeta) -> bool {
        let after_from = self.from.as_ref().is_none_or(|f| table.largest_key >= *f);
        let before_until = self.until.as_ref().is_none_or(|u| table.smallest_key < *u);
        after_from && before_until
    }
}

/// The entries of `table` whose keys lie in `part`, read past the block cache.
fn part_stream(table: &Table, part: &Part) -> BoxedWalk {
    let mut entries = table.iter_with(BlockReads::Bypass);
    if let Some(from) = &part.from {
        entries.seek(from);
    }
    Box::new(Until {
        inner: entries,
        until: part.until.clone(),
        done: false,
    })
}

/// A walk that ends at the first key at or past `until`.
struct Until<W> {
    inner: W,
    until: Option<Vec<u8>>,
    done: bool,
}

impl<W: Walk> Walk for Until<W> {
    fn advance(&mut self) -> Result<bool> {
        let within = !self.done
            && self.inner.advance()?
            && (self.until.as_deref()).is_none_or(|until| self.inner.current().key < until);
        self.done = !within;
        Ok(within)
    }

    fn current(&self) -> EntryView<'_> {
        self.inner.current()
    }
}

/// Keys that cut `tables` (sorted, disjoint) into at most `max_parts` runs of about equal
/// bytes: the first keys of the tables that start each run after the first.
fn split_points(tables: &[&TableMeta], max_parts: usize) -> Vec<Vec<u8>> {
    let total: u64 = tables.iter().map(|t| t.file_size).sum();
    let parts = max_parts.min(tables.len()).max(1) as u64;
    let mut cuts = Vec::new();
    let mut before = 0;
    for table in tables {
        // Cut before this table when its middle lies past the end of the current share.
        let share_end = total * (cuts.len() as u64 + 1) / parts;
        let middle_twice = 2 * before + table.file_size;
        if before > 0 && middle_twice > 2 * share_end && (cuts.len() as u64) < parts - 1 {
            cuts.push(table.smallest_key.clone());
        }
        before += table.file_size;
    }
    cuts
}

/// The bytes each level may hold before it is compacted into the next, and the level that
/// level 0 is compacted into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelTargets {
    /// Where level 0 is compacted into. The levels between 0 and it hold nothing.
    pub base_level: usize,
    /// Allowed bytes per level; `u64::MAX` for level 0 (counted in tables), for levels above
    /// the base level, and for the last level, which holds any amount.
    bytes: Vec<u64>,
}

impl LevelTargets {
    /// The targets for `version`'s tree under `options`.
    pub fn new(version: &Version, options: &Options) -> LevelTargets {
        let level_bytes: Vec<u64> = (0..version.num_levels())
            .map(|l| version.level_bytes(l))
            .collect();
        match options.tuning.dynamic_level_sizes {
            true => Self::from_largest_level(&level_bytes, options),
            false => Self::from_level1(level_bytes.len(), options),
        }
    }

    /// Fixed targets: `level1_size` for level 1, `level_size_ratio` times more per level below.
    fn from_level1(num_levels: usize, options: &Options) -> LevelTargets {
        let last = num_levels - 1;
        let bytes = (0..num_levels)
            .map(|level| match level {
                0 => u64::MAX,
                l if l == last => u64::MAX,
                l => {
                    let growth = options.tuning.level_size_ratio.saturating_pow(l as u32 - 1);
                    options.tuning.level1_size.saturating_mul(growth)
                }
            })
            .collect();
        LevelTargets {
            base_level: 1,
            bytes,
        }
    }

    /// Targets derived from the largest level up. Each level above the last is allowed
    /// `1 / level_size_ratio` of the one below, but never less than `level1_size`. The base
    /// level is the deepest whose share would be at most `level1_size`, and never below the
    /// first level holding data: level 0 must not skip over older data, which lookups would
    /// then find first.
    fn from_largest_level(level_bytes: &[u64], options: &Options) -> LevelTargets {
        let last = level_bytes.len() - 1;
        let ratio = options.tuning.level_size_ratio;
        let mut share = vec![0u64; last + 1];
        share[last] = level_bytes[1..].iter().copied().max().unwrap_or(0);
        for level in (1..last).rev() {
            share[level] = share[level + 1] / ratio;
        }
        let fits_base = (1..=last)
            .rev()
            .find(|&l| share[l] <= options.tuning.level1_size)
            .unwrap_or(1);
        let first_with_data = (1..=last).find(|&l| level_bytes[l] > 0).unwrap_or(last);
        let base_level = fits_base.min(first_with_data);
        let bytes = (0..=last)
            .map(|level| match level {
                l if l < base_level || l == last => u64::MAX,
                l => share[l].max(options.tuning.level1_size),
            })
            .collect();
        LevelTargets { base_level, bytes }
    }

    /// Allowed bytes for `level`; `u64::MAX` where no size limit applies.
    pub fn bytes(&self, level: usize) -> u64 {
        self.bytes[level]
    }

    /// How urgently each level but the last needs compaction; >= 1.0 means it does.
    pub fn scores(&self, version: &Version, options: &Options) -> Vec<f64> {
        let last = version.num_levels() - 1;
        (0..last)
            .map(|level| match level {
                0 => version.level(0).len() as f64 / options.tuning.l0_compaction_trigger as f64,
                l if self.bytes[l] == u64::MAX => 0.0,
                l => version.level_bytes(l) as f64 / self.bytes[l] as f64,
            })
            .collect()
    }
}

/// The highest score of any level: how badly the tree needs a compaction (1 and above: it
/// does).
pub fn most_urgent(version: &Version, options: &Options) -> f64 {
    let targets = LevelTargets::new(version, options);
    let scores = targets.scores(version, options);
    scores.into_iter().fold(0.0, f64::max)
}

/// True when some level needs compaction.
pub fn needs_compaction(version: &Version, options: &Options) -> bool {
    let targets = LevelTargets::new(version, options);
    targets.scores(version, options).iter().any(|&s| s >= 1.0)
}

/// What running compactions hold: their input tables, and for each, its output level and the
/// key range it writes there.
#[derive(Default)]
pub struct Running {
    tables: HashSet<u64>,
    outputs: Vec<(usize, KeyRange)>,
}

/// The smallest and largest key of a range, both included.
type KeyRange = (Vec<u8>, Vec<u8>);

impl Running {
    /// True when no compaction runs.
    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }

    /// Records `job` as running.
    pub fn add(&mut self, job: &Compaction) {
        self.tables.extend(job.all_inputs().map(|t| t.meta.number));
        self.outputs.push((job.output_level, job.output_range()));
    }

    /// Records `job` as ended.
    pub fn remove(&mut self, job: &Compaction) {
        for input in job.all_inputs() {
            self.tables.remove(&input.meta.number);
        }
        let output = (job.output_level, job.output_range());
        if let Some(at) = self.outputs.iter().position(|o| *o == output) {
            self.outputs.swap_remove(at);
        }
    }

    /// True when a running compaction takes table `number`.
    pub fn holds(&self, number: u64) -> bool {
        self.tables.contains(&number)
    }

    /// True when `job` takes a table a running compaction holds, or writes into a level within
    /// the range a running compaction writes there.
    fn conflicts_with(&self, job: &Compaction) -> bool {
        let (smallest, largest) = job.output_range();
        job.all_inputs()
            .any(|t| self.tables.contains(&t.meta.number))
            || self.outputs.iter().any(|(level, (lo, hi))| {
                *level == job.output_level && *lo <= largest && smallest <= *hi
            })
    }
}

/// The most urgent compaction that does not conflict with a running one, if any level needs
/// one.
pub fn pick(version: &Version, options: &Options, running: &Running) -> Option<Compaction> {
    let targets = LevelTargets::new(version, options);
    let mut needy: Vec<(usize, f64)> = targets
        .scores(version, options)
        .into_iter()
        .enumerate()
        .filter(|&(_, score)| score >= 1.0)
        .collect();
    needy.sort_by(|a, b| b.1.total_cmp(&a.1));
    needy
        .into_iter()
        .find_map(|(level, _)| pick_from(version, level, &targets, running))
}

/// All of level 0 into the base level, below the trigger, unless level 0 is empty or a
/// running compaction conflicts (a store whose writes rest, `Options::compact_level0_at_rest`).
pub fn pick_level0(version: &Version, options: &Options, running: &Running) -> Option<Compaction> {
    if version.level(0).is_empty() {
        return None;
    }
    pick_from(version, 0, &LevelTargets::new(version, options), running)
}

/// A compaction out of `level` that conflicts with no running one: all of level 0 into the
/// base level, or the table of a deeper level that overlaps the fewest bytes of the next
/// level for its own size.
fn pick_from(
    version: &Version,
    level: usize,
    targets: &LevelTargets,
    running: &Running,
) -> Option<Compaction> {
    if level == 0 {
        let job = with_overlaps(version, targets.base_level, version.level(0).to_vec());
        return (!running.conflicts_with(&job)).then_some(job);
    }
    let tables = version.level(level);
    let overlaps = overlap_bytes(&metas_of(tables), &metas_of(version.level(level + 1)));
    let mut order: Vec<usize> = (0..tables.len()).collect();
    // Overlap per byte of the table, scaled to an integer (parts per million) to sort by.
    order.sort_by_key(|&i| {
        let size = tables[i].meta.file_size.max(1) as u128;
        (overlaps[i] as u128 * 1_000_000) / size
    });
    order
        .into_iter()
        .map(|i| with_overlaps(version, level + 1, vec![Arc::clone(&tables[i])]))
        .find(|job| !running.conflicts_with(job))
}

fn metas_of(tables: &[Arc<TableHandle>]) -> Vec<&TableMeta> {
    tables.iter().map(|t| &t.meta).collect()
}

/// For each table of `upper` (sorted, disjoint), the file bytes of the tables of `lower`
/// (sorted, disjoint) its key range overlaps, found in one pass over both.
fn overlap_bytes(upper: &[&TableMeta], lower: &[&TableMeta]) -> Vec<u64> {
    let mut first = 0;
    upper
        .iter()
        .map(|meta| {
            // Tables of `lower` wholly before this one are wholly before every later one too.
            while first < lower.len() && lower[first].largest_key < meta.smallest_key {
                first += 1;
            }
            lower[first..]
                .iter()
                .take_while(|t| t.smallest_key <= meta.largest_key)
                .map(|t| t.file_size)
                .sum()
        })
        .collect()
}

/// A compaction of every table into one level, so that no compaction moves part of it on
/// afterwards. With dynamic level sizes that is the last level. With fixed ones it is the
/// shallowest level, at or below the deepest that holds data, whose target holds all the bytes
/// (the last level holds any amount). Every table is rewritten, even when one level already
/// holds them all: that is how a store changes its tables' filter or compression. `None` for a
/// store without tables.
pub fn full(version: &Version, options: &Options) -> Option<Compaction> {
    let last = version.num_levels() - 1;
    let deepest = (1..=last)
        .rev()
        .find(|&l| !version.level(l).is_empty())
        .unwrap_or(1);
    let total: u64 = (0..=last).map(|l| version.level_bytes(l)).sum();
    let targets = LevelTargets::from_level1(version.num_levels(), options);
    let output_level = match options.tuning.dynamic_level_sizes {
        true => last,
        false => (deepest..=last)
            .find(|&l| total < targets.bytes(l))
            .unwrap_or(last),
    };
    let inputs: Vec<Arc<TableHandle>> = (0..output_level)
        .flat_map(|l| version.level(l).iter().cloned())
        .collect();
    let output_level_inputs = version.level(output_level).to_vec();
    if inputs.is_empty() && output_level_inputs.is_empty() {
        return None;
    }
    Some(Compaction {
        output_level,
        inputs,
        output_level_inputs,
        drop_tombstones: true,
        may_move: false,
        next_level_starts: Vec::new(),
    })
}

/// The smallest and largest key over `tables`.
fn key_range<'a>(tables: impl Iterator<Item = &'a Arc<TableHandle>> + Clone) -> (Vec<u8>, Vec<u8>) {
    let smallest = tables.clone().map(|t| &t.meta.smallest_key).min();
    let largest = tables.map(|t| &t.meta.largest_key).max();
    (
        smallest.cloned().unwrap_or_default(),
        largest.cloned().unwrap_or_default(),
    )
}

fn with_overlaps(
    version: &Version,
    output_level: usize,
    inputs: Vec<Arc<TableHandle>>,
) -> Compaction {
    let (smallest, largest) = key_range(inputs.iter());
    let output_level_inputs = version.overlapping(output_level, &smallest, &largest);
    // The output-level tables pulled in may reach beyond the inputs' range, and their
    // tombstones are merged too: a tombstone may go only if no deeper level holds anything in
    // the range of every table merged.
    let (merged_smallest, merged_largest) = key_range(inputs.iter().chain(&output_level_inputs));
    let below = |l: usize| version.overlapping(l, &merged_smallest, &merged_largest);
    let next_level = match output_level + 1 < version.num_levels() {
        true => below(output_level + 1),
        false => Vec::new(),
    };
    let drop_tombstones = next_level.is_empty()
        && (output_level + 2..version.num_levels()).all(|l| below(l).is_empty());
    let next_level_starts = next_level
        .iter()
        .map(|t| t.meta.smallest_key.clone())
        .collect();
    Compaction {
        output_level,
        inputs,
        output_level_inputs,
        drop_tombstones,
        may_move: true,
        next_level_starts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn options() -> Options {
        Options::default().level1_size(8 * MIB).level_size_ratio(10)
    }

    /// Targets of levels 1..=5 of a seven-level tree (level 6, the last, holds any amount).
    fn targets_of(level_bytes: &[u64], options: &Options) -> (usize, Vec<u64>) {
        let targets = LevelTargets::from_largest_level(level_bytes, options);
        (
            targets.base_level,
            (1..6).map(|l| targets.bytes(l)).collect(),
        )
    }

    #[test]
    fn an_empty_tree_compacts_level_0_into_the_last_level() {
        let (base, bytes) = targets_of(&[0; 7], &options());
        assert_eq!(base, 6);
        assert!(bytes.iter().all(|&b| b == u64::MAX));
    }

    #[test]
    fn targets_shrink_by_the_ratio_from_the_last_level_up_to_the_base_level() {
        let last = 2_200 * MIB;
        let (base, bytes) = targets_of(&[0, 0, 0, 0, 0, 0, last], &options());
        // 2,200 -> 220 -> 22 -> 2.2 MiB: level 3 is the deepest whose share fits 8 MiB.
        assert_eq!(base, 3);
        assert_eq!(
            bytes,
            vec![u64::MAX, u64::MAX, 8 * MIB, last / 100, last / 10]
        );
    }

    #[test]
    fn a_last_level_within_level1_size_keeps_the_base_at_the_bottom() {
        let (base, _) = targets_of(&[5 * MIB, 0, 0, 0, 0, 0, 8 * MIB], &options());
        assert_eq!(base, 6);
        let (base, bytes) = targets_of(&[0, 0, 0, 0, 0, 0, 8 * MIB + 1], &options());
        assert_eq!(base, 5);
        assert_eq!(
            bytes[4],
            8 * MIB,
            "no level is allowed less than level1_size"
        );
    }

    #[test]
    fn level_0_never_skips_a_level_that_holds_data() {
        let (base, bytes) = targets_of(&[0, 0, 3 * MIB, 0, 0, 0, 50 * MIB], &options());
        assert_eq!(base, 2);
        assert_eq!(bytes[1..], [8 * MIB, 8 * MIB, 8 * MIB, 8 * MIB]);
    }

    #[test]
    fn a_tree_too_large_for_its_levels_starts_at_level_1() {
        let last = 100_000_000 * MIB;
        let (base, bytes) = targets_of(&[0, 0, 0, 0, 0, 0, last], &options());
        assert_eq!(base, 1);
        assert_eq!(bytes[0], last / 100_000);
    }

    #[test]
    fn the_largest_level_sets_the_shape_even_when_it_is_not_the_last() {
        // A tree written with fixed sizes: its bulk in level 4, so it migrates down.
        let (base, bytes) = targets_of(
            &[0, 7 * MIB, 80 * MIB, 800 * MIB, 1_300 * MIB, 0, 0],
            &options(),
        );
        assert_eq!(base, 1);
        assert_eq!(bytes[4], 130 * MIB);
        assert_eq!(bytes[3], 13 * MIB);
    }

    #[test]
    fn fixed_targets_grow_by_the_ratio_from_level_1() {
        let targets = LevelTargets::from_level1(7, &options());
        assert_eq!(targets.base_level, 1);
        let bytes: Vec<u64> = (0..7).map(|l| targets.bytes(l)).collect();
        assert_eq!(
            bytes,
            vec![
                u64::MAX,
                8 * MIB,
                80 * MIB,
                800 * MIB,
                8_000 * MIB,
                80_000 * MIB,
                u64::MAX
            ]
        );
    }

    fn meta(smallest: &str, largest: &str, file_size: u64) -> TableMeta {
        TableMeta {
            keyspace: 0,
            number: 0,
            level: 0,
            file_size,
            smallest_key: smallest.as_bytes().to_vec(),
            largest_key: largest.as_bytes().to_vec(),
            smallest_seq: 0,
            largest_seq: 0,
            entries: 0,
        }
    }

    #[test]
    fn split_points_cut_at_table_starts_into_about_equal_bytes() {
        let tables = [
            meta("a", "b", 10),
            meta("c", "d", 10),
            meta("e", "f", 10),
            meta("g", "h", 10),
            meta("i", "j", 10),
            meta("k", "l", 10),
        ];
        let tables: Vec<&TableMeta> = tables.iter().collect();
        let keys = |cuts: Vec<Vec<u8>>| -> Vec<String> {
            cuts.into_iter()
                .map(|k| String::from_utf8(k).unwrap())
                .collect()
        };
        assert_eq!(keys(split_points(&tables, 2)), vec!["g"]);
        assert_eq!(keys(split_points(&tables, 3)), vec!["e", "i"]);
        assert_eq!(keys(split_points(&tables, 10)).len(), 5);
        assert!(split_points(&tables, 1).is_empty());
        assert!(split_points(&tables[..1], 4).is_empty());
        assert!(split_points(&[], 4).is_empty());
    }

    #[test]
    fn split_points_follow_bytes_not_table_counts() {
        let cut = |sizes: &[u64]| {
            let tables: Vec<TableMeta> = sizes
                .iter()
                .enumerate()
                .map(|(i, &size)| {
                    let key = ((b'a' + i as u8) as char).to_string();
                    meta(&key, &key, size)
                })
                .collect();
            split_points(&tables.iter().collect::<Vec<_>>(), 2)
        };
        assert_eq!(cut(&[100, 1, 1, 100]), vec![b"c".to_vec()]);
        assert_eq!(cut(&[1, 1, 1, 1, 100]), vec![b"e".to_vec()]);
        assert_eq!(cut(&[100, 1, 1, 1, 1]), vec![b"b".to_vec()]);
    }

    #[test]
    fn a_part_meets_the_tables_its_range_may_hold_keys_of() {
        let part = Part {
            from: Some(b"d".to_vec()),
            until: Some(b"g".to_vec()),
        };
        assert!(!part.meets(&meta("a", "c", 1)));
        assert!(part.meets(&meta("a", "d", 1)));
        assert!(part.meets(&meta("e", "f", 1)));
        assert!(part.meets(&meta("f", "z", 1)));
        assert!(!part.meets(&meta("g", "z", 1)), "until is excluded");
        assert!(Part::default().meets(&meta("a", "z", 1)));
    }

    #[test]
    fn overlap_bytes_counts_every_lower_table_a_range_meets_ends_included() {
        let upper = [
            meta("b", "d", 1),
            meta("f", "f", 1),
            meta("g", "h", 1),
            meta("x", "z", 1),
        ];
        let lower = [
            meta("a", "b", 10),
            meta("c", "c", 20),
            meta("d", "f", 40),
            meta("h", "k", 80),
            meta("m", "n", 160),
        ];
        let upper: Vec<&TableMeta> = upper.iter().collect();
        let lower: Vec<&TableMeta> = lower.iter().collect();
        assert_eq!(overlap_bytes(&upper, &lower), vec![70, 40, 80, 0]);
    }
}
