//! Lookup counts a table takes over: a compaction's outputs from its inputs, and a reopened
//! store's tables from the counts saved when it was last closed (`LOOKUPS`, `saved`).
//!
//! Where the store spends filter memory by the lookups it counts (`fit`), a table
//! starts with no count of its own and is planned by its predicted share until lookups have
//! reached it. A compaction replaces busy tables with new ones over the same keys: without
//! their inputs' counts, the outputs of a busy key range would be planned as if nobody asked
//! for it, their filters folded until lookups came back to teach the plan again, and under
//! writes that never stop the plan would always be a compaction behind.
//!
//! So each output table is given the lookups its inputs counted over the keys it took from
//! them, before the plan for the new version is made. An input's unit (its whole filter, or a
//! partition) counted a share of the store's lookups: the count over the span of lookups it
//! was counted in (with the plan's damping of young counts). That share is split evenly over
//! the units, of every table the compaction writes, whose keys meet the input unit's. Inputs
//! of one level below 0 hold disjoint keys, so their shares add up; a level-0 table, and the
//! inputs of another level, saw the same lookups on their way down, so an output unit takes
//! the largest of those sums, not their total, and never more than every lookup. The
//! output's counts are its shares over the longest span an input counted in.

use std::collections::{BTreeMap, HashMap};

use super::counts::CountSpans;
use super::fit::PREDICTED_SHARE_WEIGHT;
use super::saved::TableLookups;
use crate::manifest::VersionEdit;
use crate::sstable::Table;
use crate::version::{TableHandle, Version};

/// Gives each table of `version` the counts `saved` holds for it (by number), where the record
/// is of that table (its entries and its filter's units match); returns how many tables took
/// theirs.
pub(crate) fn restore_lookup_counts(
    version: &Version,
    saved: &HashMap<u64, TableLookups>,
    spans: &CountSpans,
) -> usize {
    let mut restored = 0;
    for t in version.tables() {
        let Some(lookups) = saved.get(&t.meta.number) else {
            continue;
        };
        // A table of that number with other entries or another filter layout is not the one
        // counted (a number reused after a repair went back to an older manifest).
        let same = lookups.entries == t.meta.entries;
        if same && lookups.counts.len() == t.table.filter_units() {
            spans.inherit(t.meta.number, &t.table, lookups.span, &lookups.counts);
            restored += 1;
        }
    }
    restored
}

/// Gives each table `edit` adds (opened in `opened`) the lookups that the tables it removes
/// from `old` counted over its keys. A table the edit moves (removed and added under one
/// number) keeps its own counts.
pub(crate) fn inherit_lookup_counts(
    old: &Version,
    edit: &VersionEdit,
    opened: &HashMap<u64, Table>,
    spans: &CountSpans,
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
    let outputs = with_input_shares(outputs, &inputs, spans);
    for output in outputs {
        let units = output.table.filter_units();
        let counts: Vec<u64> = (0..units)
            .map(|u| {
                let share = (output.shares.values()).map(|s| s[u]).fold(0.0, f64::max);
                // No unit is asked by more than every lookup.
                (share.min(1.0) * output.span as f64).round() as u64
            })
            .collect();
        if counts.iter().any(|&c| c > 0) {
            spans.inherit(output.meta.number, output.table, output.span, &counts);
        }
    }
}

/// A table a compaction writes, and the shares of the lookups it takes over: for each group of
/// inputs whose keys are disjoint ([`Group`]), one for each unit of its filter; over the
/// longest span an input it meets counted in.
struct Output<'a> {
    meta: &'a crate::manifest::TableMeta,
    table: &'a Table,
    shares: BTreeMap<Group, Vec<f64>>,
    span: u64,
}

/// Inputs whose shares add up: a level's tables below level 0 hold disjoint keys, so a lookup
/// asks at most one of them. Level 0's tables overlap, and one lookup asks every one that
/// covers its key: each is a group of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Group {
    Level(u32),
    LevelZeroTable(u64),
}

impl Group {
    fn of(input: &TableHandle) -> Group {
        match input.meta.level {
            0 => Group::LevelZeroTable(input.meta.number),
            level => Group::Level(level),
        }
    }
}

/// `outputs` with the shares of the lookups `inputs` counted: each input unit's share, its
/// count over its span, split evenly over the output units (of every output) whose keys meet
/// the input unit's; added up within a [`Group`]. A share is damped as the plan damps a
/// table's own (`PREDICTED_SHARE_WEIGHT` lookups beside its span), so that a young input's
/// few lookups do not stand for the longest span an input counted in.
fn with_input_shares<'a>(
    mut outputs: Vec<Output<'a>>,
    inputs: &[&TableHandle],
    spans: &CountSpans,
) -> Vec<Output<'a>> {
    for input in inputs {
        let table = &input.table;
        let span = spans.span(input.meta.number);
        if span == 0 {
            continue;
        }
        for unit in 0..table.filter_units() {
            let asked = table.unit_lookups(unit);
            if asked == 0 {
                continue;
            }
            // The unit answers for the keys after the previous partition's last key, up to
            // its own last key (the table's first and last keys at the ends, and for a whole
            // filter).
            let first = match unit
                .checked_sub(1)
                .and_then(|u| table.filter_unit_last_key(u))
            {
                // The first key after the previous partition's last.
                Some(previous) => [previous, &[0]].concat(),
                None => input.meta.smallest_key.clone(),
            };
            let first = first.as_slice();
            let last = table
                .filter_unit_last_key(unit)
                .unwrap_or(&input.meta.largest_key);
            let met: Vec<(usize, usize)> = (outputs.iter().enumerate())
                .filter(|(_, o)| {
                    o.meta.smallest_key.as_slice() <= last && first <= o.meta.largest_key.as_slice()
                })
                .flat_map(|(i, o)| output_units_meeting(o.table, first, last).map(move |u| (i, u)))
                .collect();
            let share =
                asked as f64 / (span as f64 + PREDICTED_SHARE_WEIGHT) / met.len().max(1) as f64;
            for (i, u) in met {
                let output = &mut outputs[i];
                let units = output.table.filter_units();
                let level = output
                    .shares
                    .entry(Group::of(input))
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
