//! Keeps the filters a version holds within `Options::filter_memory_limit`.
//!
//! Tables are written within the limit's share of bits per key (`TableWriter::filters_for`),
//! but a store outgrows the filters it wrote when it was smaller, and may be opened with a
//! smaller limit than it was written under. When the filters held exceed the limit, filters
//! are shrunk in memory, one step at a time, where a step costs lookups least: each step
//! halves one table's filter (`BloomFilter::fold`, down to an eighth) or drops it, whichever
//! costs less per byte, and its cost is the false positives it adds per byte it frees,
//! weighted by the share of lookups that reach the table (Monkey's rule, with each table's
//! probes as the budget counts them). The files keep their whole filters: a table compaction
//! rewrites is written anew, and at open each filter is read once its share is known
//! ([`load_filters`]).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use std::sync::Arc;

use super::lookup_shape::table_shares;
use super::{Inner, ShapeState};
use crate::error::Result;
use crate::filter::textbook_rate;
use crate::manifest::VersionEdit;
use crate::sstable::{FilterResidency, Table, FILTER_FOLD_LIMIT};
use crate::version::Version;

impl Inner {
    /// The version after `edit` (whose new tables' readers are `opened`), with its filters
    /// within the store's limit. Every change of version is made under the shape lock (held
    /// as `_shape`), so the version read here is still current when the caller installs the
    /// result; folding happens before the read state's lock is taken, so lookups never wait
    /// on it.
    pub(super) fn next_version(
        &self,
        _shape: &ShapeState,
        edit: &VersionEdit,
        opened: &HashMap<u64, Table>,
    ) -> Arc<Version> {
        let version = self.read_state().version.apply(edit, opened);
        Arc::new(fit_filters(version, self.options.filter_memory_limit))
    }
}

/// `version`, with filters folded or dropped until all of them fit `limit` bytes (as it is
/// when they fit, or without a limit). Every reader of `version` holds its filter (none is
/// deferred: only [`load_filters`] takes such readers).
pub(super) fn fit_filters(version: Version, limit: Option<u64>) -> Version {
    let Some(limit) = limit else {
        return version;
    };
    let held: u64 = (version.tables())
        .map(|t| t.table.filter_memory_bytes() as u64)
        .sum();
    if held <= limit {
        return version;
    }
    let replaced: HashMap<u64, Table> = shrink_plan(&version, limit)
        .into_iter()
        .map(|(number, (table, residency))| {
            // Only folds the filter's size allows are planned; should one fail all the same,
            // the filter is dropped, which frees more than planned.
            let reader = table.with_filter(residency).unwrap_or_else(|_| {
                (table.with_filter(FilterResidency::Dropped)).expect("any filter can be dropped")
            });
            (number, reader)
        })
        .collect();
    version.with_readers(&replaced)
}

/// `version`, whose readers were opened without their filters
/// ([`Table::open_deferring_filter`]), with each filter read and kept as the plan for `limit`
/// says: read one at a time and folded at once, so that the whole filters are never all in
/// memory together.
pub(super) fn load_filters(version: Version, limit: Option<u64>) -> Result<Version> {
    let mut plan = match limit {
        Some(limit) => shrink_plan(&version, limit),
        None => HashMap::new(),
    };
    let mut loaded = HashMap::new();
    for t in version.tables() {
        let residency = match plan.remove(&t.meta.number) {
            Some((_, residency)) => residency,
            None if t.table.filter_is_deferred() => FilterResidency::Whole,
            None => continue,
        };
        loaded.insert(t.meta.number, t.table.load_filter(residency)?);
    }
    Ok(version.with_readers(&loaded))
}

/// A table's whole filter as written, known without reading it.
#[derive(Clone, Copy)]
struct Shape {
    words: u64,
    keys: u64,
    hashes: u32,
}

impl Shape {
    fn of(table: &Table) -> Option<Shape> {
        table.filter_residency().fold_factor()?;
        Some(Shape {
            words: table.whole_filter_words()?,
            keys: table.properties().distinct_keys,
            hashes: table.filter_params()?.hashes(),
        })
    }

    /// Bytes of the filter folded by `factor`.
    fn bytes(&self, factor: u32) -> u64 {
        self.words * 8 / u64::from(factor)
    }

    /// The textbook rate of the filter folded by `factor` (that of the whole one for 1): a
    /// fold keeps the hash count.
    fn rate(&self, factor: u32) -> f64 {
        if self.keys == 0 {
            return 0.0;
        }
        let bits = (self.words * 64) as f64 / f64::from(factor);
        textbook_rate(bits / self.keys as f64, self.hashes)
    }

    /// Whether the filter folds by `factor` into whole words.
    fn folds_by(&self, factor: u32) -> bool {
        factor <= FILTER_FOLD_LIMIT && self.words.is_multiple_of(u64::from(factor))
    }
}

/// One table's filter as the plan goes.
#[derive(Clone, Copy)]
struct Shrinking<'v> {
    table: &'v Table,
    shape: Shape,
    /// The fold from the filter as written (1: whole); `None` once dropped.
    factor: Option<u32>,
    bytes: u64,
    rate: f64,
    /// The share of lookups that reach the table.
    share: f64,
}

impl<'v> Shrinking<'v> {
    /// The filter as the reader holds it, or will once loaded (whole).
    fn start(table: &'v Table, share: f64) -> Option<Shrinking<'v>> {
        let shape = Shape::of(table)?;
        // A deferred filter will be read whole.
        let factor = table.filter_residency().fold_factor()?;
        Some(Shrinking {
            table,
            shape,
            factor: Some(factor),
            bytes: shape.bytes(factor),
            rate: shape.rate(factor),
            share,
        })
    }

    /// The next step: the filter halved once more (while `FILTER_FOLD_LIMIT` and its size
    /// allow) or dropped, whichever adds fewer false positives per byte freed. A fold keeps
    /// the hash count of the whole filter, so the last folds buy little: dropping a filter
    /// folded to a quarter may cost less per byte than folding it to an eighth.
    fn next(&self) -> Shrinking<'v> {
        let dropped = self.dropped();
        match self.halved() {
            Some(halved) if self.cost_of(&halved) <= self.cost_of(&dropped) => halved,
            _ => dropped,
        }
    }

    fn dropped(&self) -> Shrinking<'v> {
        Shrinking {
            factor: None,
            bytes: 0,
            rate: 1.0,
            ..*self
        }
    }

    /// The filter folded once more, if it can be. A reader's folded filter folds further by
    /// what is left of the factor, which divides its words whenever the factor divides the
    /// whole filter's.
    fn halved(&self) -> Option<Shrinking<'v>> {
        let f = self.factor? * 2;
        self.shape.folds_by(f).then(|| Shrinking {
            factor: Some(f),
            bytes: self.shape.bytes(f),
            rate: self.shape.rate(f),
            ..*self
        })
    }

    /// False positives per lookup the step to `next` adds, per byte it frees.
    fn cost_of(&self, next: &Shrinking) -> f64 {
        let freed = self.bytes.saturating_sub(next.bytes).max(1) as f64;
        self.total_cost_of(next) / freed
    }

    /// False positives per lookup the step to `next` adds.
    fn total_cost_of(&self, next: &Shrinking) -> f64 {
        self.share * (next.rate - self.rate).max(0.0)
    }

    fn residency(&self) -> FilterResidency {
        match self.factor {
            None => FilterResidency::Dropped,
            Some(1) => FilterResidency::Whole,
            Some(f) => FilterResidency::Folded(f),
        }
    }
}

/// A step the plan may take: table `at`'s next fold (or drop), at `cost` false positives per
/// lookup added per byte freed.
struct Step {
    cost: f64,
    at: usize,
}

impl PartialEq for Step {
    fn eq(&self, other: &Step) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Step {}
impl PartialOrd for Step {
    fn partial_cmp(&self, other: &Step) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Step {
    /// The heap's top is the cheapest step (ties: the later table, so the order is total).
    fn cmp(&self, other: &Step) -> Ordering {
        (other.cost.total_cmp(&self.cost)).then(self.at.cmp(&other.at))
    }
}

/// For each table whose filter must shrink for all of them to fit `limit` bytes, by file
/// number: the reader and how to keep its filter. Empty when they fit.
fn shrink_plan(version: &Version, limit: u64) -> HashMap<u64, (Table, FilterResidency)> {
    let shares = table_shares(version.tables().map(|t| &t.meta));
    let mut tables: Vec<(u64, Shrinking)> = (version.tables().zip(shares))
        .filter_map(|(t, share)| Some((t.meta.number, Shrinking::start(&t.table, share)?)))
        .collect();
    let mut held: u64 = tables.iter().map(|(_, t)| t.bytes).sum();
    if held <= limit {
        return HashMap::new();
    }
    let step = |at: usize, t: &Shrinking| Step {
        cost: t.cost_of(&t.next()),
        at,
    };
    let mut steps: BinaryHeap<Step> = tables
        .iter()
        .enumerate()
        .map(|(at, (_, t))| step(at, t))
        .collect();
    while held > limit {
        let Some(Step { at, .. }) = steps.pop() else {
            break;
        };
        let excess = held - limit;
        let t = &tables[at].1;
        let mut next = (at, t.next());
        if t.bytes - next.1.bytes >= excess {
            // The last step: the cheapest per byte may free far more than is left to free,
            // and a step that frees just enough may cost fewer false positives in all.
            let ending = tables.iter().enumerate().flat_map(|(i, (_, t))| {
                let steps = [t.halved(), (t.factor.is_some()).then(|| t.dropped())];
                steps.into_iter().flatten().map(move |s| (i, s))
            });
            let cost = |(i, s): &(usize, Shrinking)| tables[*i].1.total_cost_of(s);
            if let Some(best) = ending
                .filter(|(i, s)| tables[*i].1.bytes - s.bytes >= excess)
                .min_by(|a, b| cost(a).total_cmp(&cost(b)))
            {
                if cost(&best) < cost(&next) {
                    steps.push(step(at, t));
                    next = best;
                }
            }
        }
        let (at, next) = next;
        let t = &mut tables[at].1;
        held -= t.bytes - next.bytes;
        (t.factor, t.bytes, t.rate) = (next.factor, next.bytes, next.rate);
        if t.factor.is_some() {
            steps.push(step(at, t));
        }
    }
    tables
        .into_iter()
        .filter(|(_, t)| t.residency() != t.table.filter_residency())
        .map(|(number, t)| (number, (t.table.clone(), t.residency())))
        .collect()
}
