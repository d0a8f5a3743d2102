//! Writing sorted entries into new table files.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::Result;
use crate::filename;
use crate::filter::{
    allocate_blended, allocate_for_false_positives, FilterGroup, FilterParams, GroupFilters,
    MAX_BITS_PER_KEY,
};
use crate::filter_plan::{filter_groups, Span};
use crate::keyspace::KeyspaceId;
use crate::manifest::TableMeta;
use crate::options::Options;
use crate::sstable::{Compression, FilterPolicy, Table, TableBuilder, TableEnv, TableOptions};
use crate::version::Version;
use crate::walk::Walk;

use super::Tree;

impl super::Inner {
    /// A writer for a job starting now on `tree`, as it stands.
    pub(super) fn table_writer_for(&self, tree: &Tree) -> TableWriter<'_> {
        self.table_writer_on(tree, &tree.version)
    }

    /// A writer for `tree` that sees it as `version` (a filter budget allocates over it).
    /// Its filters are written within the whole store's filter memory limit: the version
    /// they join holds them to the keyspace's share (`Inner::tree_options`).
    pub(super) fn table_writer_on(&self, tree: &Tree, version: &Version) -> TableWriter<'_> {
        let options = tree.options().clone();
        let tables = version.tables().map(|t| Span::from(&t.meta));
        let shape = shape_of(&options, tables);
        self.writer_with_shape(options, tree.id(), shape, false)
    }

    /// A writer for a compaction of `tree` starting now: its inputs leave their levels, and
    /// `output`, its keys over its key range, arrives at the output level.
    pub(super) fn compaction_writer(
        &self,
        tree: &Tree,
        inputs: &HashSet<u64>,
        output: Span<'_>,
    ) -> TableWriter<'_> {
        let options = tree.options().clone();
        let staying = (tree.version.tables())
            .filter(|t| !inputs.contains(&t.meta.number))
            .map(|t| Span::from(&t.meta));
        let shape = shape_of(&options, staying.chain([output]));
        self.writer_with_shape(options, tree.id(), shape, true)
    }

    fn writer_with_shape(
        &self,
        options: Options,
        keyspace: KeyspaceId,
        shape: Vec<FilterGroup>,
        job_in_shape: bool,
    ) -> TableWriter<'_> {
        TableWriter {
            dir: &self.dir,
            options,
            keyspace,
            env: &self.table_env,
            next_file_number: &self.next_file_number,
            shape,
            job_in_shape,
        }
    }
}

/// The shape a writer needs: keys per level, and under a budget, the probes too (which take
/// a pass over the tables' key ranges).
fn shape_of<'t>(options: &Options, spans: impl Iterator<Item = Span<'t>>) -> Vec<FilterGroup> {
    if options.policy().is_budget() {
        return filter_groups(options.tuning.num_levels, spans);
    }
    let mut groups = vec![
        FilterGroup {
            keys: 0,
            probes: 1.0,
            ribbon: false
        };
        options.tuning.num_levels
    ];
    for span in spans {
        if let Some(group) = groups.get_mut(span.level) {
            group.keys += span.entries;
        }
    }
    groups
}

/// Tables written by one flush or compaction: what the manifest records, and the readers.
#[derive(Default)]
pub(super) struct NewTables {
    pub(super) added: Vec<TableMeta>,
    pub(super) opened: HashMap<u64, Table>,
}

impl NewTables {
    /// Adds `more`, written after these.
    pub(super) fn extend(&mut self, more: NewTables) {
        self.added.extend(more.added);
        self.opened.extend(more.opened);
    }

    /// Deletes the files, once no reader holds them: the step that wrote them failed.
    pub(super) fn discard(&self) {
        for table in self.opened.values() {
            table.mark_obsolete();
        }
    }
}

/// Writes sorted entries into new table files; used by flush, compaction and recovery (which
/// writes tables before the store is assembled).
pub(super) struct TableWriter<'a> {
    pub(super) dir: &'a Path,
    /// Those of the tree written to (`Inner::tree_options`).
    pub(super) options: Options,
    /// The keyspace the tables belong to.
    pub(super) keyspace: KeyspaceId,
    pub(super) env: &'a TableEnv,
    pub(super) next_file_number: &'a AtomicU64,
    /// The tree's shape when the job began, for a filter budget (`filter_groups`).
    pub(super) shape: Vec<FilterGroup>,
    /// Whether `shape` counts the job's own output already (a compaction's does, over the
    /// key range it writes; a flush adds its keys to level 0 as one more run).
    pub(super) job_in_shape: bool,
}

/// Whether tables of level `at` are at the bottom of the tree: below level 0, with no keys
/// in any deeper level of `groups` (the tree's levels, top first).
fn at_bottom(groups: &[FilterGroup], at: usize) -> bool {
    at > 0 && groups.iter().skip(at + 1).all(|g| g.keys == 0)
}

impl<'a> TableWriter<'a> {
    /// The filters of new tables of `level`; `new_keys` are the keys the job writes there.
    /// A budget is spread over the tree as it stands, with the job's `new_keys` added to
    /// `level` (and, for level 0, one more table to probe); the tables keep the parameters
    /// they are written with.
    pub(super) fn filters_for(&self, level: u32, new_keys: u64) -> LevelFilters {
        let mut groups = self.shape.clone();
        groups.resize(
            self.options.tuning.num_levels,
            FilterGroup {
                keys: 0,
                probes: 1.0,
                ribbon: false,
            },
        );
        // The levels whose new tables get Ribbon filters spend their bits at Ribbon rates.
        let ribbon_from = self.options.tuning.ribbon_filters_from_level.max(1) as usize;
        for (l, group) in groups.iter_mut().enumerate() {
            group.ribbon = l >= ribbon_from;
        }
        let at = level as usize;
        if !self.job_in_shape {
            // A new level-0 table is one more run, probed by every lookup.
            if at == 0 && groups[at].keys > 0 {
                groups[at].probes += 1.0;
            }
            groups[at].keys += new_keys;
        }
        if self.options.tuning.no_filters_at_bottom && at_bottom(&groups, at) {
            return LevelFilters::Policy(FilterPolicy::Disabled);
        }
        as_compaction_keeps_up(&mut groups[0], self.options.tuning.l0_compaction_trigger);
        let limit = bits_per_key_within_limit(&groups, self.options.tuning.filter_memory_limit);
        let policy = self.options.policy();
        // The allocation, and whether the limit binds; `None` for a fixed rate within it.
        // The budget was checked when the store was opened.
        let allocate = |groups: &[FilterGroup]| match policy {
            FilterPolicy::BitsPerKeyBudget(bits) => Some(match limit {
                Some(most) if most < bits => (allocate_blended(groups, most), true),
                _ => (allocate_blended(groups, bits), false),
            }),
            FilterPolicy::WastedReadsTarget(reads) => {
                Some(match (allocate_for_false_positives(groups, reads), limit) {
                    (Ok((bits, _)), Some(most)) if bits > most => {
                        (allocate_blended(groups, most), true)
                    }
                    (allocated, _) => (
                        allocated.map(|(_, params)| {
                            (groups.iter().zip(params))
                                .map(|(g, p)| GroupFilters::of_group(g, p))
                                .collect()
                        }),
                        false,
                    ),
                })
            }
            other => {
                let asked = other.params().ok().flatten().map(|p| p.bits_per_key());
                match (asked, limit) {
                    (Some(bits), Some(most)) if f64::from(bits) > most => {
                        Some((allocate_blended(groups, most), true))
                    }
                    _ => None,
                }
            }
        };
        let Some((mut allocated, limit_binds)) = allocate(&groups) else {
            return LevelFilters::Policy(policy);
        };
        // Written wider than the limit's share, a filter leaves the memory plan room to keep
        // it whole where lookups go and fold it where they do not (`filter_memory`).
        let widen = match limit_binds && self.options.tuning.filter_memory_follows_lookups {
            true => FILTER_HEADROOM,
            false => 1,
        };
        // A Ribbon filter does not fold: where the plan folds the filters, new tables get
        // Bloom filters (`start_table`), and the budget prices them so.
        if widen > 1 && groups.iter().any(|g| g.ribbon) {
            groups.iter_mut().for_each(|g| g.ribbon = false);
            if let Some((again, _)) = allocate(&groups) {
                allocated = again;
            }
        }
        match allocated {
            Ok(groups) => LevelFilters::Budget {
                group: groups[at],
                widen,
            },
            Err(_) => LevelFilters::Policy(FilterPolicy::Disabled),
        }
    }

    /// The compression of new tables of `level`: the bottom's when no deeper level holds
    /// keys.
    fn compression_for(&self, level: u32) -> Compression {
        (self.options).compression_at(at_bottom(&self.shape, level as usize))
    }

    /// Writes `entries` into tables at `level`, ended where `cuts` says. On failure no new
    /// file stays behind: finished tables are deleted with the one in progress.
    pub(super) fn write(
        &self,
        entries: impl Walk,
        level: u32,
        expected_keys: u64,
        cuts: Cuts<'_>,
    ) -> Result<NewTables> {
        let mut out = NewTables::default();
        let written = self.write_into(&mut out, entries, level, expected_keys, cuts);
        if let Err(e) = written {
            out.discard();
            return Err(e);
        }
        Ok(out)
    }

    fn write_into(
        &self,
        out: &mut NewTables,
        mut entries: impl Walk,
        level: u32,
        expected_keys: u64,
        mut cuts: Cuts<'_>,
    ) -> Result<()> {
        let filters = self.filters_for(level, expected_keys);
        let compression = self.compression_for(level);
        // A builder dropped unfinished deletes its temporary file.
        let mut current: Option<(u64, TableBuilder)> = None;
        let mut last_key = Vec::new();
        while entries.advance()? {
            let entry = entries.current();
            // A table is cut only between keys: the versions of one key (kept for snapshots)
            // stay in one table, or a level's tables would overlap and a lookup, which asks
            // one table per level, would miss the older versions.
            let cut = current.as_ref().is_some_and(|(_, b)| {
                entry.key != last_key
                    && cuts.before(entry.key, b.estimated_file_size(), self.options.table_size)
            });
            if cut {
                let (number, builder) = current.take().expect("a table is open");
                self.finish_table(number, builder, level, &filters, out)?;
            }
            let (_, builder) = match &mut current {
                Some(open) => open,
                None => {
                    cuts.started_table(entry.key);
                    let started = self.start_table(&filters, compression, level, expected_keys);
                    current.insert(started?)
                }
            };
            builder.add_raw(entry.key, entry.seq, entry.kind, entry.value)?;
            last_key.clear();
            last_key.extend_from_slice(entry.key);
        }
        if let Some((number, builder)) = current {
            self.finish_table(number, builder, level, &filters, out)?;
        }
        Ok(())
    }

    fn start_table(
        &self,
        filters: &LevelFilters,
        compression: Compression,
        level: u32,
        expected_keys: u64,
    ) -> Result<(u64, TableBuilder)> {
        let number = self.next_file_number.fetch_add(1, Ordering::SeqCst);
        let path = self.dir.join(filename::table_file_name(number));
        let table_options = TableOptions {
            block_size: self.options.block_size,
            filter_policy: filters.for_table(number),
            compression,
            index_partition_size: self.options.tuning.index_partition_size,
            // Partitions let the limit keep a busy key range's filter whole; without a
            // binding limit every filter is held whole, and a search of a top level would
            // only cost lookups.
            filter_partition_size: match filters.widens() {
                true => self.options.tuning.filter_partition_size,
                false => 0,
            },
            cache_local_filter: self.options.tuning.cache_local_filters,
            // Not where the memory plan folds filters, which a Ribbon filter cannot.
            ribbon_filter: level > 0
                && level >= self.options.tuning.ribbon_filters_from_level
                && !filters.widens(),
            filter_fold_target: match filters.widens() {
                true => FILTER_HEADROOM,
                false => 1,
            },
            ..TableOptions::default()
        };
        let mut builder = TableBuilder::new(
            Arc::clone(&self.env.fs),
            &path,
            table_options,
            expected_keys,
        )?;
        if let Some(extractor) = &self.options.prefix_extractor {
            builder = builder.with_prefix_filter(extractor, self.options.whole_key_filtering);
        }
        Ok((number, builder))
    }

    fn finish_table(
        &self,
        number: u64,
        builder: TableBuilder,
        level: u32,
        filters: &LevelFilters,
        out: &mut NewTables,
    ) -> Result<()> {
        let props = builder.finish()?;
        let path = self.dir.join(filename::table_file_name(number));
        // A widened filter is read once the new version's plan says how to keep it
        // (`filter_plan::fit_filters`): read whole here, the filters of all of a
        // compaction's outputs would be in memory together, at `FILTER_HEADROOM` times what
        // the limit pays for. Others are read here, outside the shape lock.
        let open = match filters.widens() {
            true => Table::open_deferring_filter,
            false => Table::open_in,
        };
        let table = open(&path, self.env).inspect_err(|_| {
            let _ = self.env.fs.remove(&path);
        })?;
        out.added.push(TableMeta {
            keyspace: self.keyspace,
            ..TableMeta::of_table(number, level, props)
        });
        out.opened.insert(number, table);
        Ok(())
    }
}

/// Level 0 as it stands when compaction keeps up: at most `trigger` tables. A backlog is
/// passing, and the tables below it stay: a budget spread over a level 0 of twenty tables
/// gave each of them many bits and the long-lived last level, written meanwhile, a row or
/// two fewer than the budget buys it once level 0 drains (100M keys: 9.3 bits per key in
/// the filters against a budget of 10). So the filters are sized for the tree the tables
/// will live in, and a backlog's extra level-0 tables take more memory while they last.
fn as_compaction_keeps_up(level0: &mut FilterGroup, trigger: usize) {
    let steady = trigger.max(1) as f64;
    if level0.probes > steady {
        level0.keys = (level0.keys as f64 * steady / level0.probes) as u64;
        level0.probes = steady;
    }
}

/// The bits per key a filter memory limit leaves for every key of `groups` (the tree as the
/// job will leave it); `None` without a limit or keys. Entries count as keys, old versions
/// and tombstones included, where filters hold each distinct key once: the share is never
/// above what fits.
fn bits_per_key_within_limit(groups: &[FilterGroup], limit: Option<u64>) -> Option<f64> {
    let keys: u64 = groups.iter().map(|g| g.keys).sum();
    let limit = limit?;
    (keys > 0).then(|| (limit as f64 * 8.0 / keys as f64).min(f64::from(MAX_BITS_PER_KEY)))
}

/// How many times the bits per key a limit's share pays for a table's filter is written
/// with, when the limit binds and its memory follows lookups: the memory plan may then keep
/// a busy table's filter whole, at a fraction of its share's rate, and fold a quiet one by
/// up to the same factor back to its share (`FILTER_FOLD_LIMIT` allows an eighth).
pub(super) const FILTER_HEADROOM: u32 = 4;

/// The filters of the new tables of one level.
pub(super) enum LevelFilters {
    /// The store's policy, as it is.
    Policy(FilterPolicy),
    /// The level's share of a budget: the lower of two rows for most tables, the upper for
    /// a share of them; each written with `widen` times the row's bits per key and the row's
    /// hashes.
    Budget { group: GroupFilters, widen: u32 },
}

impl LevelFilters {
    /// The policy for table `number`: under a budget, the upper row when a hash of the
    /// number falls in the share, so that the level's tables spread over the two rows
    /// in the proportions the budget pays for.
    fn for_table(&self, number: u64) -> FilterPolicy {
        match self {
            LevelFilters::Policy(policy) => *policy,
            LevelFilters::Budget { group, widen } => {
                let hash = xxhash_rust::xxh3::xxh3_64(&number.to_le_bytes());
                let draw = (hash >> 11) as f64 / (1u64 << 53) as f64;
                group.pick(draw).map_or(FilterPolicy::Disabled, |p| {
                    FilterPolicy::Params(widened(p, *widen))
                })
            }
        }
    }

    /// Bits per key, on average over the level's new tables, as the limit or budget pays for
    /// them (a widened filter is held at that once folded); `None` for no filter.
    pub(super) fn bits_per_key(&self) -> Option<f64> {
        match self {
            LevelFilters::Policy(policy) => policy
                .params()
                .ok()
                .flatten()
                .map(|p| f64::from(p.bits_per_key())),
            LevelFilters::Budget { group, .. } => {
                (group.lower().is_some() || group.upper_share() > 0.0).then(|| group.bits_per_key())
            }
        }
    }

    /// Whether a table with filter `params` is one these could have written; `blocked`: in
    /// the cache-local layout, whose hashes are its own, so only the bits per key tell.
    pub(super) fn includes(&self, params: Option<FilterParams>, blocked: bool) -> bool {
        let bits = |p: Option<FilterParams>| p.map(|p| p.bits_per_key());
        match self {
            LevelFilters::Policy(policy) => bits(policy.params().ok().flatten()) == bits(params),
            LevelFilters::Budget { group, widen } => {
                let upper = (group.upper_share() > 0.0).then(|| group.upper()).flatten();
                [group.lower(), upper].into_iter().any(|row| {
                    let written = row.map(|r| widened(r, *widen));
                    match blocked {
                        true => bits(written) == bits(params),
                        false => written == params,
                    }
                })
            }
        }
    }

    /// Whether the new tables' filters are written wider than the limit pays for.
    fn widens(&self) -> bool {
        matches!(self, LevelFilters::Budget { widen, .. } if *widen > 1)
    }
}

/// `params` with `widen` times the bits per key (at most `MAX_BITS_PER_KEY`), same hashes.
fn widened(params: FilterParams, widen: u32) -> FilterParams {
    let bits = (params.bits_per_key() * widen).min(MAX_BITS_PER_KEY);
    FilterParams::new(bits, params.hashes()).unwrap_or(params)
}

/// Where a writer ends one table and starts the next.
pub(super) enum Cuts<'a> {
    /// Never: the output is one table (a flush's level-0 table, whose range may overlap others
    /// of its level anyway).
    Never,
    /// At `table_size` bytes, or earlier where a table of the next level down starts.
    ///
    /// A later compaction of one of these tables rewrites every table of the next level its
    /// range meets. Ended at an arbitrary key, a table and the one after it both meet the
    /// next-level table their boundary falls in, which is then rewritten with either, however
    /// little of it either covers. Ended just before a next-level table starts, the two meet
    /// no next-level table in common. So once a table holds half of `table_size`, it ends
    /// before the first key at or past the next such start (RocksDB cuts its compaction
    /// outputs at the next level's file boundaries on the same grounds). The share needed
    /// grows by a twentieth of `table_size` (up to 90%) with each start the table has already
    /// passed, so that a next level of small tables does not cut this one into slivers.
    AtSize {
        /// The smallest keys of the next level's tables, sorted.
        next_level_starts: &'a [Vec<u8>],
        /// How many of them lie at or before the last key looked at.
        passed: usize,
        /// How many of them the table in progress passed after its first key.
        passed_in_table: usize,
    },
}

impl<'a> Cuts<'a> {
    /// Cuts at `table_size`, and at the starts of the next level's tables.
    pub(super) fn at_size(next_level_starts: &'a [Vec<u8>]) -> Cuts<'a> {
        Cuts::AtSize {
            next_level_starts,
            passed: 0,
            passed_in_table: 0,
        }
    }

    /// Whether the table in progress, of `size` bytes so far, ends before `key` (a key other
    /// than the last one written: a key's versions stay in one table).
    fn before(&mut self, key: &[u8], size: u64, table_size: u64) -> bool {
        let Cuts::AtSize {
            next_level_starts,
            passed,
            passed_in_table,
        } = self
        else {
            return false;
        };
        let percent = 50 + (5 * *passed_in_table as u64).min(40);
        let crossed = advance_past(next_level_starts, passed, key);
        *passed_in_table += crossed;
        size >= table_size || (crossed > 0 && size >= table_size.saturating_mul(percent) / 100)
    }

    /// A new table begins with `first_key`: the starts at or before it are behind the table.
    fn started_table(&mut self, first_key: &[u8]) {
        if let Cuts::AtSize {
            next_level_starts,
            passed,
            passed_in_table,
        } = self
        {
            advance_past(next_level_starts, passed, first_key);
            *passed_in_table = 0;
        }
    }
}

/// Moves `passed` on past the `starts` at or before `key`, and returns how many it passed.
/// Keys come in order, so the starts passed are a prefix: each is looked at once.
fn advance_past(starts: &[Vec<u8>], passed: &mut usize, key: &[u8]) -> usize {
    let before = *passed;
    while starts
        .get(*passed)
        .is_some_and(|start| start.as_slice() <= key)
    {
        *passed += 1;
    }
    *passed - before
}

#[cfg(test)]
mod tests {
    use super::{as_compaction_keeps_up, Cuts, LevelFilters};
    use crate::filter::{allocate_blended, FilterGroup};
    use crate::sstable::FilterPolicy;

    /// A 100M-key tree during a load: level 0 backed up to `level0_tables` tables of 250,000
    /// keys, levels 4 to 6 below it.
    fn loading(level0_tables: u64) -> Vec<FilterGroup> {
        let mut groups = vec![
            FilterGroup {
                keys: 0,
                probes: 1.0,
                ribbon: false
            };
            7
        ];
        groups[0] = FilterGroup {
            keys: level0_tables * 250_000,
            probes: level0_tables as f64,
            ribbon: false,
        };
        groups[4].keys = 8_000_000;
        groups[5].keys = 30_000_000;
        groups[6].keys = 60_000_000;
        groups
    }

    #[test]
    fn a_level_0_backlog_takes_no_bits_from_the_levels_below() {
        let last_level_bits = |level0_tables| {
            let mut groups = loading(level0_tables);
            as_compaction_keeps_up(&mut groups[0], 4);
            allocate_blended(&groups, 10.0).unwrap()[6].bits_per_key()
        };
        assert_eq!(last_level_bits(20), last_level_bits(4));
        // Without the steady shape, twenty level-0 tables took bits from the last level.
        let backed_up = allocate_blended(&loading(20), 10.0).unwrap()[6].bits_per_key();
        assert!(backed_up < last_level_bits(4) - 0.2, "{backed_up}");
        let mut small = loading(3);
        as_compaction_keeps_up(&mut small[0], 4);
        assert_eq!(small[0], loading(3)[0]);
    }

    #[test]
    fn tables_of_a_level_spread_over_its_two_rows_as_the_budget_says() {
        // A settled 100M-key tree: the last level's row costs 89M bits, more than whole rows
        // leave, so it gets a share of the next row.
        let mut groups = loading(0);
        groups[4] = FilterGroup {
            keys: 1_000_000,
            probes: 0.1,
            ribbon: false,
        };
        groups[5].keys = 10_000_000;
        groups[6].keys = 89_000_000;
        let last = allocate_blended(&groups, 10.0).unwrap()[6];
        assert!((0.1..0.9).contains(&last.upper_share()), "{last:?}");
        let filters = LevelFilters::Budget {
            group: last,
            widen: 1,
        };
        let tables = 20_000;
        let upper = (1..=tables)
            .filter(|&n| match filters.for_table(n) {
                FilterPolicy::Params(p) => Some(p) == last.upper(),
                other => panic!("{other:?}"),
            })
            .count();
        let share = upper as f64 / tables as f64;
        assert!(
            (share - last.upper_share()).abs() < 0.02,
            "{share} against {last:?}"
        );
        assert!(filters.includes(last.lower(), false) && filters.includes(last.upper(), false));
        assert_eq!(filters.bits_per_key(), Some(last.bits_per_key()));
    }

    fn keys(names: &[&str]) -> Vec<Vec<u8>> {
        names.iter().map(|k| k.as_bytes().to_vec()).collect()
    }

    #[test]
    fn never_cuts_even_past_table_size() {
        assert!(!Cuts::Never.before(b"k", 1 << 40, 100));
    }

    #[test]
    fn cuts_at_table_size_without_a_next_level() {
        let mut cuts = Cuts::at_size(&[]);
        assert!(!cuts.before(b"a", 99, 100));
        assert!(cuts.before(b"b", 100, 100));
    }

    #[test]
    fn cuts_at_a_next_level_start_once_half_full() {
        let starts = keys(&["c", "g"]);
        let mut cuts = Cuts::at_size(&starts);
        cuts.started_table(b"a");
        // "c" is passed at 40 of 100 bytes: too early to end the table there.
        assert!(!cuts.before(b"c", 40, 100));
        // Between starts, half full is not enough.
        assert!(!cuts.before(b"d", 70, 100));
        // "g" is passed with one start behind: the table needs 55 bytes, and has 70.
        assert!(cuts.before(b"h", 70, 100));
        cuts.started_table(b"h");
        // No start lies ahead: only the size ends the next table.
        assert!(!cuts.before(b"z", 99, 100));
        assert!(cuts.before(b"zz", 100, 100));
    }

    #[test]
    fn starts_before_a_tables_first_key_do_not_count_for_it() {
        // A part of a split compaction begins far into the next level's range.
        let starts = keys(&["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "p"]);
        let mut cuts = Cuts::at_size(&starts);
        cuts.started_table(b"k");
        assert!(!cuts.before(b"l", 60, 100));
        assert!(cuts.before(b"q", 50, 100));
    }

    #[test]
    fn each_start_passed_raises_the_share_needed_up_to_nine_tenths() {
        let names: Vec<String> = (0..20).map(|i| format!("k{i:02}")).collect();
        let starts: Vec<Vec<u8>> = names.iter().map(|k| k.as_bytes().to_vec()).collect();
        let mut cuts = Cuts::at_size(&starts);
        cuts.started_table(b"k");
        // Ten starts passed at 10 bytes: the share needed is then 50% + 10 * 5%, capped at 90%.
        for name in &names[..10] {
            assert!(!cuts.before(name.as_bytes(), 10, 100));
        }
        assert!(!cuts.before(names[10].as_bytes(), 89, 100));
        assert!(cuts.before(names[11].as_bytes(), 90, 100));
        // A new table starts the count again: 50% at its first start, 55% at its second.
        cuts.started_table(names[11].as_bytes());
        assert!(!cuts.before(names[12].as_bytes(), 49, 100));
        assert!(!cuts.before(names[13].as_bytes(), 54, 100));
        assert!(cuts.before(names[14].as_bytes(), 60, 100));
    }
}
