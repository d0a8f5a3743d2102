//! Leveled compaction: choosing what to merge, and merging it into new tables.
//!
//! Level 0 is compacted into level 1 once it holds `l0_compaction_trigger` tables; a deeper
//! level is compacted into the next once its bytes exceed its target
//! (`level1_size * level_size_ratio^(level - 1)`). The level with the highest ratio of actual
//! to allowed size goes first. A deeper level gives up one table at a time, taken round-robin
//! through its key space, together with every table of the next level it overlaps.
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

use crate::entry::{Entry, SeqNo};
use crate::error::Result;
use crate::iter::{EntryStream, MergingIterator, NewestVersions};
use crate::options::Options;
use crate::sstable::BlockReads;
use crate::version::{TableHandle, Version};

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
}

impl Compaction {
    /// Every input table.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<TableHandle>> {
        self.inputs.iter().chain(&self.output_level_inputs)
    }

    /// The key range the output will lie in: that of all the inputs.
    fn output_range(&self) -> KeyRange {
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

    /// The inputs merged: newest version of each key only, tombstones dropped at the bottom.
    /// Inputs are read past the block cache: one pass over tables about to be deleted must
    /// not push out the blocks lookups keep hitting.
    ///
    /// At the bottom (no deeper level holds the range) each key's one remaining entry gets
    /// sequence number 0, as RocksDB does: nothing older lies below to be ordered against, and
    /// anything newer is in a higher level or a memtable, which a lookup asks first. A varint
    /// 0 is one byte where a real sequence number takes three to five, none of which compress.
    pub fn merged_entries(&self) -> impl Iterator<Item = Result<Entry>> {
        let streams: Vec<EntryStream> = self
            .all_inputs()
            .map(|t| Box::new(t.table.iter_with(BlockReads::Bypass)) as EntryStream)
            .collect();
        let at_bottom = self.drop_tombstones;
        NewestVersions::new(MergingIterator::new(streams), SeqNo::MAX, at_bottom).map(
            move |entry| {
                entry.map(|mut e| {
                    if at_bottom {
                        e.seq = 0;
                    }
                    e
                })
            },
        )
    }
}

/// Allowed bytes for `level` (>= 1).
pub fn level_target_bytes(options: &Options, level: usize) -> u64 {
    let growth = options
        .level_size_ratio
        .saturating_pow(level.saturating_sub(1) as u32);
    options.level1_size.saturating_mul(growth)
}

/// How urgently each level needs compaction; >= 1.0 means it does.
pub fn level_scores(version: &Version, options: &Options) -> Vec<f64> {
    let last = version.num_levels() - 1;
    (0..last)
        .map(|level| {
            if level == 0 {
                version.level(0).len() as f64 / options.l0_compaction_trigger as f64
            } else {
                version.level_bytes(level) as f64 / level_target_bytes(options, level) as f64
            }
        })
        .collect()
}

/// True when some level needs compaction.
pub fn needs_compaction(version: &Version, options: &Options) -> bool {
    level_scores(version, options).iter().any(|&s| s >= 1.0)
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
/// one. `cursor[level]` is the largest key of the last table
/// taken from that level; it is advanced here.
pub fn pick(
    version: &Version,
    options: &Options,
    cursor: &mut [Vec<u8>],
    running: &Running,
) -> Option<Compaction> {
    let mut needy: Vec<(usize, f64)> = level_scores(version, options)
        .into_iter()
        .enumerate()
        .filter(|&(_, score)| score >= 1.0)
        .collect();
    needy.sort_by(|a, b| b.1.total_cmp(&a.1));
    needy
        .into_iter()
        .find_map(|(level, _)| pick_from(version, level, &mut cursor[level], running))
}

/// A compaction out of `level` that conflicts with no running one: all of level 0, or the
/// next table of a deeper level, round-robin from `cursor`, that can go.
fn pick_from(
    version: &Version,
    level: usize,
    cursor: &mut Vec<u8>,
    running: &Running,
) -> Option<Compaction> {
    if level == 0 {
        let job = with_overlaps(version, 1, version.level(0).to_vec());
        return (!running.conflicts_with(&job)).then_some(job);
    }
    let tables = version.level(level);
    let start = tables
        .iter()
        .position(|t| t.meta.smallest_key > *cursor)
        .unwrap_or(0);
    let job = (0..tables.len())
        .map(|i| &tables[(start + i) % tables.len()])
        .map(|table| with_overlaps(version, level + 1, vec![Arc::clone(table)]))
        .find(|job| !running.conflicts_with(job))?;
    cursor.clone_from(&job.inputs[0].meta.largest_key);
    Some(job)
}

/// A compaction of every table into one level: the shallowest level, at or below the deepest
/// that holds data, whose target holds all the bytes (the last level holds any amount), so that
/// no compaction moves part of it on afterwards. Every table is rewritten, even when one level
/// already holds them all: that is how a store changes its tables' filter or compression.
/// `None` for a store without tables.
pub fn full(version: &Version, options: &Options) -> Option<Compaction> {
    let last = version.num_levels() - 1;
    let deepest = (1..=last)
        .rev()
        .find(|&l| !version.level(l).is_empty())
        .unwrap_or(1);
    let total: u64 = (0..=last).map(|l| version.level_bytes(l)).sum();
    let output_level = (deepest..=last)
        .find(|&l| l == last || total < level_target_bytes(options, l))
        .unwrap_or(last);
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
    let drop_tombstones = (output_level + 1..version.num_levels()).all(|l| {
        version
            .overlapping(l, &merged_smallest, &merged_largest)
            .is_empty()
    });
    Compaction {
        output_level,
        inputs,
        output_level_inputs,
        drop_tombstones,
        may_move: true,
    }
}
