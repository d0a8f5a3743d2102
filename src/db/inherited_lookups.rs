//! Lookup counts a table takes over: a compaction's outputs from its inputs, and a reopened
//! store's tables from the counts saved when it was last closed (`LOOKUPS`,
//! `crate::lookup_counts`).
//!
//! Where the store spends filter memory by the lookups it counts (`filter_memory.rs`), a table
//! starts with no count of its own and is planned by its predicted share until lookups have
//! reached it. A compaction replaces busy tables with new ones over the same keys: without
//! their inputs' counts, the outputs of a busy key range would be planned as if nobody asked
//! for it, their filters folded until lookups came back to teach the plan again, and under
//! writes that never stop the plan would always be a compaction behind.
//!
//! So each output table is given the lookups its inputs counted over the keys it took from
//! them, before the plan for the new version is made. An input's unit (its whole filter, or a
//! partition) counted a share of the store's lookups: the count over the span of lookups it
//! was counted in. That share is split evenly over the units, of every table the compaction
//! writes, whose keys meet the input unit's. Inputs of one level hold disjoint keys, so their shares add up; the inputs
//! of the level above saw the same lookups on their way down, so an output unit takes the
//! larger of the two levels' sums, not both. The output's counts are its shares over the
//! longest span an input counted in.

use std::collections::{BTreeMap, HashMap};

use super::Inner;
use crate::error::Result;
use crate::lookup_counts::{self, TableLookups};
use crate::manifest::VersionEdit;
use crate::sstable::Table;
use crate::version::{TableHandle, Version};

impl Inner {
    /// Saves every live table's lookup counts to `LOOKUPS`, for the next open; nothing where
    /// the store does not count lookups, or is read-only (it has no manifest to write).
    pub(super) fn save_lookup_counts(&self) -> Result<()> {
        let read_only = super::lock(&self.shape).manifest.is_none();
        if !self.table_env.count_lookups || read_only {
            return Ok(());
        }
        let state = self.read_state();
        let tables: Vec<(u64, TableLookups)> = (state.trees.iter())
            .flat_map(|tree| tree.version.tables())
            .filter_map(|t| {
                let (span, counts) = t.table.lookup_counts();
                (span > 0).then_some((t.meta.number, TableLookups { span, counts }))
            })
            .collect();
        lookup_counts::save(self.fs.as_ref(), &self.dir, &tables)
    }
}

/// Gives each table of `version` the counts `saved` holds for it (by number), where they
/// match its filter's units; returns how many tables took theirs.
pub(super) fn restore_lookup_counts(
    version: &Version,
    saved: &HashMap<u64, TableLookups>,
) -> usize {
    let mut restored = 0;
    for t in version.tables() {
        let Some(lookups) = saved.get(&t.meta.number) else {
            continue;
        };
        // A table of that number with another filter layout is not the one counted.
        if lookups.counts.len() == t.table.filter_units() {
            t.table.inherit_lookup_counts(lookups.span, &lookups.counts);
            restored += 1;
        }
    }
    restored
}

/// Gives each table `edit` adds (opened in `opened`) the lookups that the tables it removes
/// from `old` counted over its keys. A table the edit moves (removed and added under one
/// number) keeps its own counts.
pub(super) fn inherit_lookup_counts(
    old: &Version,
    edit: &VersionEdit,
    opened: &HashMap<u64, Table>,
) {
    if edit.removed.is_empty() {
        return;
    }
    // Removed from one level and added to another under its number: the same table.
    let moved = |number: u64| {
        edit.added.iter().any(|a| a.number == number)
            && edit.removed.iter().any(|&(_, n)| n == number)
    };
    let inputs: Vec<&TableHandle> = (old.tables())
        .filter(|t| edit.removed.contains(&(t.meta.level, t.meta.number)) && !moved(t.meta.number))
        .map(|t| t.as_ref())
        .collect();
    let outputs: Vec<Output> = (edit.added.iter())
        .filter(|meta| !moved(meta.number))
        .filter_map(|meta| {
            let table = opened.get(&meta.number)?;
            Some(Output {
                meta,
                table,
                shares: BTreeMap::new(),
                span: 0,
            })
        })
        .collect();
    let outputs = with_input_shares(outputs, &inputs);
    for output in outputs {
        let units = output.table.filter_units();
        let counts: Vec<u64> = (0..units)
            .map(|u| {
                let share = (output.shares.values()).map(|s| s[u]).fold(0.0, f64::max);
                (share * output.span as f64).round() as u64
            })
            .collect();
        if counts.iter().any(|&c| c > 0) {
            output.table.inherit_lookup_counts(output.span, &counts);
        }
    }
}

/// A table a compaction writes, and the shares of the lookups it takes over: for each input
/// level, one for each unit of its filter; over the longest span an input it meets counted in.
struct Output<'a> {
    meta: &'a crate::manifest::TableMeta,
    table: &'a Table,
    shares: BTreeMap<u32, Vec<f64>>,
    span: u64,
}

/// `outputs` with the shares of the lookups `inputs` counted: each input unit's share, its
/// count over its span, split evenly over the output units (of every output) whose keys meet
/// the input unit's; added up within an input level.
fn with_input_shares<'a>(mut outputs: Vec<Output<'a>>, inputs: &[&TableHandle]) -> Vec<Output<'a>> {
    for input in inputs {
        let table = &input.table;
        let span = table.lookups_counted_span();
        if span == 0 {
            continue;
        }
        for unit in 0..table.filter_units() {
            let (asked, _) = table.lookups_counted(unit);
            if asked == 0 {
                continue;
            }
            // The unit answers for the keys after the previous partition's last key, up to
            // its own last key (the table's first and last keys at the ends, and for a whole
            // filter).
            let first = match unit {
                0 => input.meta.smallest_key.as_slice(),
                u => table
                    .filter_unit_last_key(u - 1)
                    .unwrap_or(&input.meta.smallest_key),
            };
            let last = table
                .filter_unit_last_key(unit)
                .unwrap_or(&input.meta.largest_key);
            let met: Vec<(usize, usize)> = (outputs.iter().enumerate())
                .filter(|(_, o)| {
                    o.meta.smallest_key.as_slice() <= last && first <= o.meta.largest_key.as_slice()
                })
                .flat_map(|(i, o)| output_units_meeting(o.table, first, last).map(move |u| (i, u)))
                .collect();
            let share = asked as f64 / span as f64 / met.len().max(1) as f64;
            for (i, u) in met {
                let output = &mut outputs[i];
                let units = output.table.filter_units();
                let level = output
                    .shares
                    .entry(input.meta.level)
                    .or_insert_with(|| vec![0.0; units]);
                level[u] += share;
                output.span = output.span.max(span);
            }
        }
    }
    outputs
}

/// The units of `output` that answer for keys in `[first, last]` (none when it has no
/// filter).
fn output_units_meeting(output: &Table, first: &[u8], last: &[u8]) -> impl Iterator<Item = usize> {
    let units = output.filter_units();
    let start = output.filter_unit_of(first);
    let end = output.filter_unit_of(last).or(units.checked_sub(1));
    match (start, end) {
        (Some(start), Some(end)) if start <= end => start..end + 1,
        _ => 0..0,
    }
}
