//! How often lookups reach each level's filters: the tree's shape as a filter budget sees it.
//!
//! Monkey's rule gives each level a false-positive rate in proportion to its keys per probe.
//! A level whose tables cover the whole key space is probed by every lookup of an absent key,
//! but the levels above the last one rarely do: a compaction takes a table out of its level
//! and leaves a gap in the level's key range until later merges fill it (measured after a
//! random load of 1M keys: the four levels were probed by 7%, 16%, 58% and 100% of absent
//! lookups). Bits given to a level that few lookups reach are mostly wasted, so the budget
//! counts each level's probes by the share of lookups that fall inside its tables' ranges.
//!
//! That share is estimated from the tables alone, without reading them: lookups are taken to
//! be drawn like the stored keys, and every table is a sample of where keys are. A table
//! inside a level's ranges counts all its keys, a table cut by a range's end counts the part of
//! its key range that the range covers, measured on the bytes past the table's common prefix
//! read as a number. A level's own keys all count, so a level whose range holds keys of no
//! other level (new keys beyond the old ones, say) still has the share its keys give it.

use crate::filter::FilterGroup;
use crate::manifest::TableMeta;

/// A key range, and how many keys it holds: a table, or the output of a job to come.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span<'a> {
    pub(crate) smallest: &'a [u8],
    pub(crate) largest: &'a [u8],
    pub(crate) entries: u64,
    pub(crate) level: usize,
}

impl<'a> From<&'a TableMeta> for Span<'a> {
    fn from(table: &'a TableMeta) -> Span<'a> {
        Span {
            smallest: &table.smallest_key,
            largest: &table.largest_key,
            entries: table.entries,
            level: table.level as usize,
        }
    }
}

/// Per level, the keys its tables hold and the filters of the level one lookup of an absent
/// key probes on average: the share of lookups inside the level's ranges below level 0, the
/// sum of each table's share at level 0 (its tables overlap, each is a run of its own). An
/// empty level counts one probe, as a table written there will be probed by every lookup at
/// first.
pub(crate) fn filter_groups<'a>(
    num_levels: usize,
    spans: impl IntoIterator<Item = Span<'a>>,
) -> Vec<FilterGroup> {
    let mut levels = by_level(spans);
    levels.resize(num_levels.max(levels.len()), Vec::new());
    let stored = StoredKeys::of(&levels);
    levels
        .iter()
        .take(num_levels)
        .enumerate()
        .map(|(l, spans)| FilterGroup {
            keys: spans.iter().map(|s| s.entries).sum(),
            probes: match (l, spans.is_empty()) {
                (_, true) => 1.0,
                // Level-0 tables overlap: each is a run of its own.
                (0, false) => spans.iter().map(|s| stored.share(&[*s])).sum(),
                (_, false) => stored.share(spans),
            },
            ribbon: false,
        })
        .collect()
}

/// Each table's share of the lookups (drawn like the stored keys) whose key falls in its
/// range, in the order given.
pub(crate) fn table_shares<'a>(tables: impl Iterator<Item = &'a TableMeta> + Clone) -> Vec<f64> {
    let levels = by_level(tables.clone().map(Span::from));
    let stored = StoredKeys::of(&levels);
    tables.map(|t| stored.share(&[Span::from(t)])).collect()
}

/// `spans` level by level, each level sorted by smallest key.
fn by_level<'a>(spans: impl IntoIterator<Item = Span<'a>>) -> Vec<Vec<Span<'a>>> {
    let mut levels: Vec<Vec<Span<'a>>> = Vec::new();
    for span in spans {
        if levels.len() <= span.level {
            levels.resize(span.level + 1, Vec::new());
        }
        levels[span.level].push(span);
    }
    for level in &mut levels {
        level.sort_by(|a, b| a.smallest.cmp(b.smallest));
    }
    levels
}

/// Where the stored keys are: every level below 0 as one run of sorted, disjoint tables, and
/// every level-0 table as a run of its own.
struct StoredKeys<'s, 'a> {
    runs: Vec<Run<'s, 'a>>,
    total: u64,
}

impl<'s, 'a> StoredKeys<'s, 'a> {
    fn of(levels: &'s [Vec<Span<'a>>]) -> StoredKeys<'s, 'a> {
        let level0 = levels
            .first()
            .into_iter()
            .flatten()
            .map(std::slice::from_ref);
        let deeper = levels.iter().skip(1).map(Vec::as_slice);
        let runs: Vec<Run> = level0.chain(deeper).map(Run::new).collect();
        let total = runs.iter().map(Run::keys).sum();
        StoredKeys { runs, total }
    }

    /// The share of the stored keys inside `ranges` (sorted by smallest key, disjoint); 1 when
    /// no table holds keys (nothing says where lookups go).
    fn share(&self, ranges: &[Span]) -> f64 {
        if self.total == 0 {
            return 1.0;
        }
        let inside: f64 = (self.runs.iter())
            .flat_map(|run| ranges.iter().map(|r| run.keys_within(r)))
            .sum();
        (inside / self.total as f64).clamp(0.0, 1.0)
    }
}

/// Sorted, disjoint tables, with a running count of their keys.
struct Run<'s, 'a> {
    tables: &'s [Span<'a>],
    /// `keys_before[i]`: keys of `tables[..i]`.
    keys_before: Vec<u64>,
}

impl<'s, 'a> Run<'s, 'a> {
    fn new(tables: &'s [Span<'a>]) -> Run<'s, 'a> {
        let keys_before = std::iter::once(0)
            .chain(tables.iter().scan(0, |sum, s| {
                *sum += s.entries;
                Some(*sum)
            }))
            .collect();
        Run {
            tables,
            keys_before,
        }
    }

    fn keys(&self) -> u64 {
        *self.keys_before.last().expect("starts with 0")
    }

    /// Keys of the run inside `range`: every table wholly inside counts all its keys, the (at
    /// most two) tables it cuts count the part of their key range it covers.
    fn keys_within(&self, range: &Span) -> f64 {
        let first = self.tables.partition_point(|s| s.largest < range.smallest);
        let end = self.tables.partition_point(|s| s.smallest <= range.largest);
        if first >= end {
            return 0.0;
        }
        let inside =
            |table: &Span| range.smallest <= table.smallest && table.largest <= range.largest;
        let part = |table: &Span| table.entries as f64 * covered_fraction(table, range);
        let (mut keys, mut whole_from, mut whole_to) = (0.0, first, end);
        if !inside(&self.tables[first]) {
            keys += part(&self.tables[first]);
            whole_from += 1;
        }
        // A lone table cut by the range was counted above, as the first.
        if whole_from < whole_to && !inside(&self.tables[end - 1]) {
            keys += part(&self.tables[end - 1]);
            whole_to -= 1;
        }
        keys + (self.keys_before[whole_to] - self.keys_before[whole_from]) as f64
    }
}

/// The fraction of `sample`'s key range that `range` covers (they overlap).
fn covered_fraction(sample: &Span, range: &Span) -> f64 {
    if sample.smallest == sample.largest {
        return 1.0;
    }
    let from = range.smallest.max(sample.smallest);
    let to = range.largest.min(sample.largest);
    (position_in(sample, to) - position_in(sample, from)).max(0.0)
}

/// Where `key` (within `span`) lies between the span's smallest (0) and largest (1) key: the
/// eight bytes past their common prefix read as numbers, and `key`'s placed between them.
fn position_in(span: &Span, key: &[u8]) -> f64 {
    let common = span
        .smallest
        .iter()
        .zip(span.largest)
        .take_while(|(a, b)| a == b)
        .count();
    let number = |k: &[u8]| -> f64 {
        let mut bytes = [0u8; 8];
        let tail = k.get(common..).unwrap_or(&[]);
        let n = tail.len().min(8);
        bytes[..n].copy_from_slice(&tail[..n]);
        u64::from_be_bytes(bytes) as f64
    };
    let (low, high) = (number(span.smallest), number(span.largest));
    if high <= low {
        return 0.0;
    }
    ((number(key) - low) / (high - low)).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> Vec<u8> {
        n.to_be_bytes().to_vec()
    }

    /// Tables of `level` over `[from, to)` of the u64 key space, `count` of equal width, each
    /// holding `entries` keys.
    fn tables(level: u32, from: u64, to: u64, count: u64, entries: u64) -> Vec<TableMeta> {
        let width = (to - from) / count;
        (0..count)
            .map(|i| TableMeta {
                keyspace: 0,
                number: u64::from(level) * 1000 + i,
                level,
                file_size: 1,
                smallest_key: key(from + i * width),
                largest_key: key(from + (i + 1) * width - 1),
                smallest_seq: 0,
                largest_seq: 0,
                entries,
            })
            .collect()
    }

    const SPACE: u64 = 1 << 40;

    fn groups(all: &[TableMeta], levels: usize) -> Vec<FilterGroup> {
        filter_groups(levels, all.iter().map(Span::from))
    }

    #[test]
    fn a_level_over_the_whole_key_space_is_probed_by_every_lookup() {
        let mut all = tables(2, 0, SPACE, 1000, 100);
        all.extend(tables(1, 0, SPACE, 10, 1000));
        let g = groups(&all, 3);
        assert_eq!(g[1].keys, 10_000);
        assert_eq!(g[2].keys, 100_000);
        assert!((g[1].probes - 1.0).abs() < 0.01, "{g:?}");
        assert!((g[2].probes - 1.0).abs() < 0.01, "{g:?}");
        assert_eq!(g[0].probes, 1.0, "an empty level counts one probe");
    }

    #[test]
    fn a_level_over_part_of_the_key_space_is_probed_by_that_share() {
        let mut all = tables(3, 0, SPACE, 1000, 100);
        // A quarter of the key space, cut mid-way through the bottom's tables.
        all.extend(tables(2, SPACE / 3 + 7, SPACE / 3 + 7 + SPACE / 4, 5, 500));
        let g = groups(&all, 4);
        // A quarter of the bottom's keys, and all of the level's own.
        let expected = (0.25 * 100_000.0 + 2_500.0) / 102_500.0;
        assert!((g[2].probes - expected).abs() < 0.002, "{g:?}");
    }

    #[test]
    fn a_table_cut_at_both_ends_counts_once() {
        // One bottom table over the whole space; a level-1 table over a tenth of it.
        let mut all = tables(2, 0, SPACE, 1, 1_000_000);
        all.extend(tables(1, SPACE / 2, SPACE / 2 + SPACE / 10, 1, 10));
        let g = groups(&all, 3);
        let expected = (100_000.0 + 10.0) / 1_000_010.0;
        assert!((g[1].probes - expected).abs() < 0.001, "{g:?}");
        // A range running off the end of the stored keys counts the part inside.
        let mut all = tables(2, 0, SPACE / 2, 1, 1_000_000);
        all.extend(tables(1, SPACE / 4, SPACE / 4 + SPACE / 2, 1, 10));
        let g = groups(&all, 3);
        assert!((g[1].probes - 0.5).abs() < 0.001, "{g:?}");
    }

    #[test]
    fn a_level_beyond_the_last_levels_keys_keeps_the_share_of_its_own() {
        // Old keys in the bottom half; new keys, above them, only in level 1.
        let mut all = tables(2, 0, SPACE / 2, 100, 9_000);
        all.extend(tables(1, SPACE / 2, SPACE, 10, 10_000));
        let g = groups(&all, 3);
        assert!((g[1].probes - 0.1).abs() < 0.001, "{g:?}");
        assert!((g[2].probes - 0.9).abs() < 0.001, "{g:?}");
    }

    #[test]
    fn each_level0_table_is_a_run_of_its_own() {
        let mut all = tables(2, 0, SPACE, 100, 1000);
        all.extend(tables(0, 0, SPACE, 1, 50));
        all.extend(tables(0, 0, SPACE, 1, 50));
        all.extend(tables(0, 0, SPACE / 2, 1, 50));
        let g = groups(&all, 3);
        assert_eq!(g[0].keys, 150);
        assert!((g[0].probes - 2.5).abs() < 0.02, "{g:?}");
    }

    #[test]
    fn without_keys_to_go_by_every_level_counts_one_probe() {
        let g = filter_groups(3, std::iter::empty());
        assert!(g.iter().all(|g| g.keys == 0 && g.probes == 1.0));
        let all = tables(1, 0, SPACE, 4, 0);
        assert_eq!(groups(&all, 2)[1].probes, 1.0);
    }

    #[test]
    fn keys_with_a_common_prefix_are_placed_past_it() {
        let span = Span {
            smallest: b"user:000000",
            largest: b"user:999999",
            entries: 1,
            level: 1,
        };
        // Read byte by byte, '5' lies 5/9 of the way from '0' to '9'.
        let middle = position_in(&span, b"user:500000");
        assert!((middle - 5.0 / 9.0).abs() < 0.005, "{middle}");
        assert_eq!(position_in(&span, b"user:000000"), 0.0);
        assert_eq!(position_in(&span, b"user:999999"), 1.0);
    }

    #[test]
    fn each_table_gets_its_own_share() {
        let mut all = tables(2, 0, SPACE, 100, 1000);
        all.extend(tables(1, 0, SPACE / 10, 2, 100));
        let shares = table_shares(all.iter());
        assert!((shares[0] - 0.01).abs() < 1e-3, "{shares:?}");
        assert!((shares[100] - 0.05).abs() < 1e-3, "{shares:?}");
    }
}
