//! The store's side of the filter plan (`crate::filter_plan`): every new version is fitted
//! to the filters' limit as it is installed, and every few thousand lookups a background turn
//! plans the filters again by the lookups counted, reads back from the files the filters that
//! grow, and installs the new readers in steps. The lookup counts are saved to `LOOKUPS` with
//! each installed plan and at close.

use std::collections::HashMap;
use std::sync::atomic::Ordering as Atomic;
use std::sync::Arc;

use super::keyspaces::limit_share;
use super::{lock, Inner, ShapeState, Tree};
use crate::error::Result;
use crate::filter_plan::{
    fit_filters, inherit_lookup_counts, refit_plan, saved, Change, TableLookups,
};
use crate::keyspace::KeyspaceId;
use crate::manifest::VersionEdit;
use crate::sstable::Table;
use crate::version::Version;

impl Inner {
    /// The version after `edit` (whose new tables' readers are `opened`), with its filters
    /// within the store's limit. Every change of version is made under the shape lock (held
    /// as `_shape`), so the version read here is still current when the caller installs the
    /// result; folding happens before the read state's lock is taken, so lookups never wait
    /// on it.
    pub(super) fn next_version(
        &self,
        shape: &ShapeState,
        tree: &Tree,
        edit: &VersionEdit,
        opened: &HashMap<u64, Table>,
    ) -> Arc<Version> {
        let mut versions = self.next_versions(shape, &[tree], edit, opened);
        versions.pop().expect("one version per tree")
    }

    /// `next_version` for each of `trees` (a flush changes several at once), their shares of
    /// the limit taken from the store as the edit leaves it.
    pub(super) fn next_versions(
        &self,
        _shape: &ShapeState,
        trees: &[&Tree],
        edit: &VersionEdit,
        opened: &HashMap<u64, Table>,
    ) -> Vec<Arc<Version>> {
        let applied: Vec<Version> = (trees.iter())
            .map(|tree| {
                inherit_lookup_counts(&tree.version, edit, opened, &self.count_spans);
                tree.version.apply(tree.id(), edit, opened)
            })
            .collect();
        // After every tree took its inputs' counts: the spans of the tables they leave go.
        self.count_spans.edited(edit, opened.keys().copied());
        let entries = |v: &Version| v.tables().map(|t| t.meta.entries).sum::<u64>();
        let unchanged: u64 = (self.read_state().trees.iter())
            .filter(|t| !trees.iter().any(|changed| changed.id() == t.id()))
            .map(|t| entries(&t.version))
            .sum();
        let total = unchanged + applied.iter().map(entries).sum::<u64>();
        (trees.iter().zip(applied))
            .map(|(tree, version)| {
                let mut options = tree.options().clone();
                let limit = self.governor.filter_limit();
                options.tuning.filter_memory_limit = limit_share(limit, entries(&version), total);
                Arc::new(fit_filters(version, &options, &self.count_spans))
            })
            .collect()
    }

    /// Spends the filter memory again by the lookups counted since the last time, when the
    /// store has a limit that follows lookups and enough lookups came to tell: filters of
    /// tables grown busy are read back from their files (whole, or less folded), those of
    /// tables grown quiet are folded or dropped to make room. The filters are read without
    /// any lock held, and the plan is installed in steps, each only if no flush or compaction
    /// installed another version meanwhile (the next turn plans again). Returns whether it
    /// installed a step.
    pub(super) fn refit_filters(&self) -> bool {
        // Each tree's version and limit, not the trees: a refit reads filters from files for
        // a while, and a tree held meanwhile would keep its memtables in memory.
        let versions: Vec<(KeyspaceId, Arc<Version>, Option<u64>)> = (self.read_state().trees)
            .iter()
            .map(|t| {
                (
                    t.id(),
                    Arc::clone(&t.version),
                    self.tree_options(t, &t.version),
                )
            })
            .map(|(id, version, options)| (id, version, options.tuning.filter_memory_limit))
            .collect();
        let mut refitted = false;
        for (id, version, limit) in versions {
            if let Some(limit) = limit {
                refitted |= self.refit_tree_filters(id, version, limit);
            }
        }
        if refitted {
            // Saved at each plan too, not only at close: a store that is killed reopens
            // with the counts of its last plan. A failure costs only the hint.
            let _ = self.save_lookup_counts();
        }
        refitted
    }

    /// `refit_filters` for one keyspace's tree, its version being `version`.
    fn refit_tree_filters(&self, id: KeyspaceId, version: Arc<Version>, limit: u64) -> bool {
        let Some(changes) = refit_plan(&version, limit, &self.count_spans) else {
            return false;
        };
        // The new filters are made beside the old ones, which the readers of the old version
        // hold until they let go: so the plan is installed in steps of about a sixteenth of
        // the limit in new filters (`REFIT_STEP_DIVISOR`), the shrinks first (as the plan
        // comes), so that every step installed holds no more than the limit. A grown limit
        // can read tens of MiB of filters back; memory never holds all of them beside the old
        // ones.
        let mut version = version;
        let mut installed = false;
        let mut step = HashMap::new();
        let mut step_bytes = 0;
        let last = changes.len().saturating_sub(1);
        for (i, change) in changes.into_iter().enumerate() {
            let Change {
                number,
                planned,
                table,
                residency,
            } = change;
            match table.refit_filters(&residency) {
                Ok(reader) => {
                    step_bytes += planned;
                    step.insert(number, reader);
                }
                // The plan's folds made room for this filter, and it is left for the next
                // turn's plan: the lookup or check that reads the table reports what is wrong
                // with it. Steps already installed stand: each is within the limit.
                Err(_) => break,
            }
            if step_bytes >= limit / REFIT_STEP_DIVISOR || i == last {
                let Some(next) = self.install_refit(id, &version, &step, !installed) else {
                    break;
                };
                (version, installed) = (next, true);
                (step, step_bytes) = (HashMap::new(), 0);
            }
        }
        if installed {
            (self.table_env.counters.filter_refits).fetch_add(1, Atomic::Relaxed);
        }
        installed
    }

    /// Installs `version` with the readers `replaced` as `id`'s tree's version, when it is
    /// still the one installed (`first`: the first step of a refit, which halves the lookup
    /// counts the plan was made from). Returns the version installed; `None` when a flush or
    /// compaction came first (or the keyspace was dropped), and the next idle turn plans
    /// again.
    fn install_refit(
        &self,
        id: KeyspaceId,
        version: &Arc<Version>,
        replaced: &HashMap<u64, Table>,
        first: bool,
    ) -> Option<Arc<Version>> {
        let shape = lock(&self.shape);
        let state = self.read_state();
        if !(state.tree(id)).is_some_and(|t| Arc::ptr_eq(&t.version, version)) {
            let _ = (self.filters_refit_at).fetch_update(Atomic::Relaxed, Atomic::Relaxed, |at| {
                Some(at.saturating_sub(REFIT_EVERY))
            });
            return None;
        }
        if first {
            for t in version.tables() {
                self.count_spans.age(t.meta.number, &t.table);
            }
        }
        let refitted = Arc::new(version.with_readers(replaced));
        drop(state);
        self.replace_read_state(|old| old.with_version(id, Arc::clone(&refitted)));
        drop(shape);
        Some(refitted)
    }

    /// Counts `n` point lookups that reached `tree`'s tables: for level 0's compaction at
    /// rest (`count_level0_lookups`), and for the filter memory, waking the background
    /// threads when enough came since the last refit for another.
    pub(super) fn count_table_lookups(&self, tree: &Tree, n: u64) {
        self.count_level0_lookups(tree, n);
        if !self.table_env.count_lookups {
            return;
        }
        let before = (self.table_env.counters.table_lookups).fetch_add(n, Atomic::Relaxed);
        if crossed_refit_mark(before, before + n) {
            self.background_cv.notify_all();
        }
    }

    /// Whether a refit is due: enough lookups came since the filters were last spent by them
    /// to spend them again (and the governor to look again).
    pub(super) fn filter_refit_due(&self) -> bool {
        if !self.table_env.count_lookups {
            return false;
        }
        let lookups = self.table_env.counters.table_lookups.load(Atomic::Relaxed);
        let last = self.filters_refit_at.load(Atomic::Relaxed);
        crossed_refit_mark(last, lookups)
    }

    /// Claims a due refit's turn (`filter_refit_due`): the others see it taken.
    pub(super) fn claim_filter_refit(&self) -> bool {
        if !self.table_env.count_lookups {
            return false;
        }
        let lookups = self.table_env.counters.table_lookups.load(Atomic::Relaxed);
        let last = self.filters_refit_at.load(Atomic::Relaxed);
        crossed_refit_mark(last, lookups)
            && (self.filters_refit_at)
                .compare_exchange(last, lookups, Atomic::Relaxed, Atomic::Relaxed)
                .is_ok()
    }
}

/// Lookups between two refits: enough for the counts to move the shares (each table's
/// predicted share counts for `PREDICTED_SHARE_WEIGHT`), few enough that a store serving
/// tens of thousands of lookups a second follows a new skew within a second or two (each
/// refit that installs a plan halves the counts, so old lookups fade).
const REFIT_EVERY: u64 = 8192;

/// Whether the lookup count passed a multiple of `REFIT_EVERY` going from `last` to `now`:
/// a refit's worth of lookups came.
fn crossed_refit_mark(last: u64, now: u64) -> bool {
    now / REFIT_EVERY > last / REFIT_EVERY
}

/// A refit installs what it has read once it holds this share of the limit in new filters,
/// so that the old filters and the new ones are never all in memory together: 6.75 MB of
/// a 108 MB limit (100M keys in 256 MiB).
const REFIT_STEP_DIVISOR: u64 = 16;

impl Inner {
    /// Saves every live table's lookup counts to `LOOKUPS`, for the next open; nothing where
    /// the store does not count lookups, or is read-only (it has no manifest to write).
    pub(super) fn save_lookup_counts(&self) -> Result<()> {
        let read_only = lock(&self.shape).manifest.is_none();
        if !self.table_env.count_lookups || read_only {
            return Ok(());
        }
        let state = self.read_state();
        let tables: Vec<(u64, TableLookups)> = (state.trees.iter())
            .flat_map(|tree| tree.version.tables())
            .filter_map(|t| {
                let (span, counts) = self.count_spans.counts(t.meta.number, &t.table);
                let entries = t.meta.entries;
                let lookups = TableLookups {
                    entries,
                    span,
                    counts,
                };
                (span > 0).then_some((t.meta.number, lookups))
            })
            .collect();
        // The versions are let go before the file is written and synced.
        drop(state);
        saved::save(self.fs.as_ref(), &self.dir, &tables)
    }
}
