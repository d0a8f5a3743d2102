//! The lookups a table counts for each unit of its filter, when its store counts them
//! (`TableEnv::count_lookups`): how often lookups come to each unit's key range, which the
//! store's plan for its filter memory reads to spend bits where lookups go. The counts age
//! (halve) as the plan asks, and a new table may take over counts from the tables it
//! replaced. The table only keeps them; what they are worth is the plan's to judge.

use std::sync::atomic::Ordering;

use super::table_filter::UnitFor;
use crate::metrics::ReadCountersSnapshot;
use crate::sstable::Table;

impl Table {
    /// Counts a point lookup that asked unit `unit` of the table's filter for a key, when
    /// its store counts them (`TableEnv::count_lookups`).
    pub(crate) fn count_lookup_in(&self, unit: usize) {
        if self.inner.env.count_lookups {
            if let Some(count) = self.inner.unit_lookups(unit) {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Tallies a point lookup that found `key` in the table (a value or a tombstone): a true
    /// positive where a filter is held for it, and its count taken back from the unit of the
    /// filter as written, held or not, which `filter_admits` counted it for. That unit could
    /// only have let the key through, so bits spent on it saved the lookup nothing: what a unit
    /// counts is then the lookups its false positives would cost, and the plan
    /// (`filter_memory.rs`) spends memory on the filters that turn keys away, not on those of
    /// the tables that hold them (under present-key gets, the bottom level's). A count a
    /// halving took to zero meanwhile stays at zero.
    pub(crate) fn count_found(&self, key: &[u8], tally: &mut ReadCountersSnapshot) {
        let unit = match self.unit_for(key) {
            UnitFor::NoFilter => return,
            UnitFor::PastEnd => {
                tally.filter_true_positives += 1;
                return;
            }
            UnitFor::Unit(unit) => unit,
        };
        if self.unit_filter(unit).is_some() {
            tally.filter_true_positives += 1;
        }
        if self.inner.env.count_lookups {
            if let Some(count) = self.inner.unit_lookups(unit) {
                let _ =
                    count.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| c.checked_sub(1));
            }
        }
    }

    /// Halves the lookups counted and the span they were counted over, so that old lookups
    /// weigh half as much as those to come. The halvings race with lookups counted
    /// meanwhile, which may be lost: the counts are an estimate.
    pub(crate) fn age_lookup_counts(&self) {
        let rest = self.inner.lookups.iter();
        for count in std::iter::once(&self.inner.first_unit_lookups).chain(rest) {
            count.store(count.load(Ordering::Relaxed) / 2, Ordering::Relaxed);
        }
        let inherited = self.inner.inherited_span.load(Ordering::Relaxed);
        (self.inner.inherited_span).store(inherited / 2, Ordering::Relaxed);
        let now = (self.inner.env.counters.table_lookups).load(Ordering::Relaxed);
        let counted = now.saturating_sub(self.inner.counted_since.load(Ordering::Relaxed));
        (self.inner.counted_since).fetch_add(counted - counted / 2, Ordering::Relaxed);
    }

    /// Starts the table's lookup counts from `counts` (one for each unit of its filter),
    /// counted over a span of `span` lookups that reached the store's tables: the lookups a
    /// compaction's inputs counted over the keys this table took from them, or those the
    /// table counted before the store was last closed, so that the plan for the filters'
    /// memory sees where lookups go from the table's first day. For a table no lookup has
    /// reached yet; where the store does not count lookups, nothing changes.
    pub(crate) fn inherit_lookup_counts(&self, span: u64, counts: &[u64]) {
        if !self.inner.env.count_lookups {
            return;
        }
        // A unit asked more often than lookups came is a count gone wrong: held to the span.
        for (unit, &count) in counts.iter().enumerate() {
            if let Some(counter) = self.inner.unit_lookups(unit) {
                counter.store(count.min(span), Ordering::Relaxed);
            }
        }
        // Counted from now on top of the span taken over: the store's own count of lookups
        // may be younger than the span (it starts at zero when the store opens).
        let now = (self.inner.env.counters.table_lookups).load(Ordering::Relaxed);
        (self.inner.counted_since).store(now, Ordering::Relaxed);
        (self.inner.inherited_span).store(span, Ordering::Relaxed);
    }

    /// The table's lookup counts, one for each unit of its filter, and the span of lookups
    /// they were counted over: what the store saves when it closes.
    pub(crate) fn lookup_counts(&self) -> (u64, Vec<u64>) {
        let counts = (0..self.filter_units())
            .map(|unit| self.lookups_counted(unit).0)
            .collect();
        (self.lookups_counted_span(), counts)
    }

    /// The point lookups that asked unit `unit` of the table's filter for a key since the
    /// table was opened, and those that reached the store's tables meanwhile
    /// (`ReadCounters::table_lookups`).
    pub(crate) fn lookups_counted(&self, unit: usize) -> (u64, u64) {
        let asked = (self.inner.unit_lookups(unit)).map_or(0, |c| c.load(Ordering::Relaxed));
        (asked, self.lookups_counted_span())
    }

    /// The lookups that reached the store's tables since this table's counting began, and
    /// the span of those it took over with its counts (`inherit_lookup_counts`).
    pub(crate) fn lookups_counted_span(&self) -> u64 {
        let now = (self.inner.env.counters.table_lookups).load(Ordering::Relaxed);
        let since = self.inner.counted_since.load(Ordering::Relaxed);
        let inherited = self.inner.inherited_span.load(Ordering::Relaxed);
        now.saturating_sub(since).saturating_add(inherited)
    }
}
