//! The lookups a table counts for each unit of its filter, when its store counts them
//! (`TableEnv::count_lookups`): plain counters of the lookups that asked a unit for a key the
//! table does not hold. What they are worth, over what span they were counted, and when they
//! halve is the filter plan's to judge (`crate::filter_plan`).

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
    /// (`crate::filter_plan`) spends memory on the filters that turn keys away, not on those of
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

    /// The lookups that asked unit `unit` of the table's filter for a key it does not hold
    /// (0 for a unit past the filter's).
    pub(crate) fn unit_lookups(&self, unit: usize) -> u64 {
        (self.inner.unit_lookups(unit)).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Sets unit `unit`'s count (taken over from other tables, or saved by the store).
    pub(crate) fn set_unit_lookups(&self, unit: usize, count: u64) {
        if let Some(counter) = self.inner.unit_lookups(unit) {
            counter.store(count, Ordering::Relaxed);
        }
    }

    /// Halves every unit's count.
    pub(crate) fn halve_unit_lookups(&self) {
        let rest = self.inner.lookups.iter();
        for count in std::iter::once(&self.inner.first_unit_lookups).chain(rest) {
            count.store(count.load(Ordering::Relaxed) / 2, Ordering::Relaxed);
        }
    }
}
