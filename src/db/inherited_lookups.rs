//! Lookup counts a compaction's output tables take over from its inputs.
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
//! was counted in. That share is split evenly over the output units whose keys meet the
//! input unit's. Inputs of one level hold disjoint keys, so their shares add up; the inputs
//! of the level above saw the same lookups on their way down, so an output unit takes the
//! larger of the two levels' sums, not both. The output's counts are its shares over the
//! longest span an input counted in.

use std::collections::{BTreeMap, HashMap};

use crate::manifest::VersionEdit;
use crate::sstable::Table;
use crate::version::{TableHandle, Version};

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
    let inputs: Vec<&TableHandle> = (old.tables())
        .filter(|t| edit.removed.contains(&(t.meta.level, t.meta.number)))
        .filter(|t| !edit.added.iter().any(|a| a.number == t.meta.number))
        .map(|t| t.as_ref())
        .collect();
    for added in &edit.added {
        let Some(output) = opened.get(&added.number) else {
            continue;
        };
        let meeting: Vec<&TableHandle> = (inputs.iter().copied())
            .filter(|t| t.overlaps(&added.smallest_key, &added.largest_key))
            .collect();
        if let Some((span, counts)) = inherited_counts(output, &meeting) {
            output.inherit_lookup_counts(span, &counts);
        }
    }
}

/// The span and the unit counts `output` takes over from `inputs` (those meeting its keys);
/// `None` when they counted no lookup.
fn inherited_counts(output: &Table, inputs: &[&TableHandle]) -> Option<(u64, Vec<u64>)> {
    let units = output.filter_units();
    let span = inputs
        .iter()
        .map(|t| t.table.lookups_counted_span())
        .max()?;
    if units == 0 || span == 0 {
        return None;
    }
    // Each output unit's share of the lookups, summed within an input level.
    let mut by_level: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for input in inputs {
        let shares = by_level
            .entry(input.meta.level)
            .or_insert_with(|| vec![0.0; units]);
        add_input_shares(output, input, shares);
    }
    let counts: Vec<u64> = (0..units)
        .map(|u| {
            let share = by_level.values().map(|s| s[u]).fold(0.0, f64::max);
            (share * span as f64).round() as u64
        })
        .collect();
    counts.iter().any(|&c| c > 0).then_some((span, counts))
}

/// Adds to `shares` (one for each unit of `output`) the shares of the lookups `input`'s units
/// counted, each split evenly over the output units its keys meet.
fn add_input_shares(output: &Table, input: &TableHandle, shares: &mut [f64]) {
    let table = &input.table;
    let span = table.lookups_counted_span();
    if span == 0 {
        return;
    }
    for unit in 0..table.filter_units() {
        let (asked, _) = table.lookups_counted(unit);
        if asked == 0 {
            continue;
        }
        // The unit answers for the keys after the previous partition's last key, up to its
        // own last key (the table's first and last keys for the ends and a whole filter).
        let first = match unit {
            0 => input.meta.smallest_key.as_slice(),
            u => table
                .filter_unit_last_key(u - 1)
                .unwrap_or(&input.meta.smallest_key),
        };
        let last = table
            .filter_unit_last_key(unit)
            .unwrap_or(&input.meta.largest_key);
        let Some(met) = output_units_meeting(output, first, last) else {
            continue;
        };
        let share = asked as f64 / span as f64 / met.clone().count() as f64;
        for u in met {
            shares[u] += share;
        }
    }
}

/// The units of `output` that answer for keys in `[first, last]`; `None` when none does.
fn output_units_meeting(
    output: &Table,
    first: &[u8],
    last: &[u8],
) -> Option<std::ops::RangeInclusive<usize>> {
    let start = output.filter_unit_of(first)?;
    let end = output
        .filter_unit_of(last)
        .unwrap_or(output.filter_units() - 1);
    (start <= end).then_some(start..=end)
}
