//! The span of lookups each table's counts were counted over.
//!
//! A table counts, per unit of its filter, the point lookups that asked the unit for a key the
//! table does not hold (`Table::unit_lookups`). What a count means depends on how many lookups
//! reached the store's tables meanwhile: that span is kept here, by table number, apart from
//! the table, with what the plan does to it: a count taken over from other tables
//! (`inherit`), and a halving, so that old lookups weigh half as much as those to come.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::manifest::VersionEdit;
use crate::metrics::ReadCounters;
use crate::sstable::Table;

/// Where a table's counting began: `ReadCounters::table_lookups` then, and the lookups
/// counted before it whose counts the table took over.
#[derive(Debug, Clone, Copy)]
struct Span {
    since: u64,
    inherited: u64,
}

/// Every live table's span, and the store's count of lookups that reached its tables.
pub(crate) struct CountSpans {
    counters: Arc<ReadCounters>,
    spans: Mutex<HashMap<u64, Span>>,
}

impl CountSpans {
    /// Spans measured by `counters.table_lookups`, the store's count of lookups that reached
    /// its tables.
    pub(crate) fn new(counters: Arc<ReadCounters>) -> CountSpans {
        CountSpans {
            counters,
            spans: Mutex::new(HashMap::new()),
        }
    }

    fn now(&self) -> u64 {
        self.counters.table_lookups.load(Ordering::Relaxed)
    }

    fn spans(&self) -> MutexGuard<'_, HashMap<u64, Span>> {
        self.spans.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Table `number` was opened: its counting begins now, unless it already began.
    pub(crate) fn opened(&self, number: u64) {
        let since = self.now();
        (self.spans()).entry(number).or_insert(Span {
            since,
            inherited: 0,
        });
    }

    /// The lookups that reached the store's tables since table `number`'s counting began,
    /// and the span of those it took over with its counts; 0 for a table not counted yet.
    pub(crate) fn span(&self, number: u64) -> u64 {
        let now = self.now();
        (self.spans().get(&number)).map_or(0, |s| {
            now.saturating_sub(s.since).saturating_add(s.inherited)
        })
    }

    /// `table`'s counts, one for each unit of its filter, and the span they were counted over.
    pub(crate) fn counts(&self, number: u64, table: &Table) -> (u64, Vec<u64>) {
        let counts = (0..table.filter_units())
            .map(|u| table.unit_lookups(u))
            .collect();
        (self.span(number), counts)
    }

    /// Starts table `number`'s counts from `counts`, counted over a span of `span` lookups:
    /// what a compaction's inputs counted over its keys, or what it counted before the store
    /// was last closed. Counted from now on top of it: the store's own count of lookups may be
    /// younger than the span (it starts at zero when the store opens).
    pub(crate) fn inherit(&self, number: u64, table: &Table, span: u64, counts: &[u64]) {
        // A unit asked more often than lookups came is a count gone wrong: held to the span.
        for (unit, &count) in counts.iter().enumerate() {
            table.set_unit_lookups(unit, count.min(span));
        }
        let since = self.now();
        let inherited = span;
        self.spans().insert(number, Span { since, inherited });
    }

    /// Halves table `number`'s counts and the span they were counted over. The halvings race
    /// with lookups counted meanwhile, which may be lost: the counts are an estimate.
    pub(crate) fn age(&self, number: u64, table: &Table) {
        table.halve_unit_lookups();
        let now = self.now();
        if let Some(span) = self.spans().get_mut(&number) {
            let counted = now.saturating_sub(span.since);
            span.since += counted - counted / 2;
            span.inherited /= 2;
        }
    }

    /// Forgets table `number`: it left the store.
    pub(crate) fn forget(&self, number: u64) {
        self.spans().remove(&number);
    }

    /// A version change: the tables `opened` begin counting, and those `edit` removes are
    /// forgotten, but for a table it moves to another level, which keeps its number and span.
    pub(crate) fn edited(&self, edit: &VersionEdit, opened: impl Iterator<Item = u64>) {
        for number in opened {
            self.opened(number);
        }
        let moved = |n: u64| edit.added.iter().any(|a| a.number == n);
        for &(_, number) in edit.removed.iter().filter(|(_, n)| !moved(*n)) {
            self.forget(number);
        }
    }
}
