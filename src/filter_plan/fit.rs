//! The plan for the filters' memory: which unit of each table's filter (the whole filter, or
//! a partition) is held whole, folded or dropped for all of them to fit the filters' share,
//! where a step costs lookups least (`docs/design.md`, "Filter memory").
//!
//! Each step halves one unit (`BloomFilter::fold`, down to an eighth) or drops it, whichever
//! adds fewer false positives per byte it frees, weighted by the share of lookups that reach
//! the unit (Monkey's rule, with each table's share as the tree's shape predicts it, or as
//! counted: [`lookup_shares`]). The files keep their whole filters: at open each filter is
//! read once its share is known ([`load_filters`]), a flush's or compaction's new tables are
//! fitted as they are installed ([`fit_filters`]), and the store's refits read filters back
//! from their files as lookups move ([`refit_plan`]).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::counts::CountSpans;
use super::shape::table_shares;
use crate::error::{Error, Result};
use crate::filter::{blocked_rate, textbook_rate, BLOCK_BITS};
use crate::options::Options;
use crate::sstable::{FilterKind, FilterResidency, Table, FILTER_FOLD_LIMIT};
use crate::version::Version;

/// A plan must cut the false positives per lookup below this share of what the filters held
/// give before filters are read back for it.
const REFIT_GAIN: f64 = 0.95;

/// One table's filter to be held otherwise: the reader now, how to hold each unit, and the
/// bytes that takes.
pub(crate) struct Change {
    pub number: u64,
    pub table: Table,
    pub residency: Vec<FilterResidency>,
    pub planned: u64,
}

/// The changes that spend `limit` (a tree's share) over `version`'s filters by the lookups
/// counted, shrinks first, then the growths that read filters back from their files; `None`
/// when the plan is not worth the reads: within a twentieth of the false positives the
/// filters held give, unless they stand above the limit (memory moved back to a cache) and
/// must be folded to it whatever the plan costs.
pub(crate) fn refit_plan(version: &Version, limit: u64, spans: &CountSpans) -> Option<Vec<Change>> {
    let limit = beside_prefix_filters(version, limit);
    let shares = lookup_shares(version, Some(spans));
    let now = plan_cost(version, &shares, |t| t.table.filter_units_residency());
    let plan = fit_plan(version, limit, &shares, Start::Whole);
    let planned = plan_cost(version, &shares, |t| match plan.get(&t.meta.number) {
        Some((_, r)) => r.clone(),
        None => t.table.filter_units_residency(),
    });
    let held: u64 = (version.tables())
        .map(|t| t.table.filter_memory_bytes() as u64)
        .sum();
    if planned >= now * REFIT_GAIN && held <= limit {
        return None;
    }
    let mut changes: Vec<(i64, Change)> = (plan.into_iter())
        .map(|(number, (table, residency))| {
            let planned = planned_bytes(&table, &residency);
            let growth = planned as i64 - held_bytes(&table) as i64;
            let change = Change {
                number,
                table,
                residency,
                planned,
            };
            (growth, change)
        })
        .collect();
    changes.sort_by_key(|(growth, change)| (*growth, change.number));
    Some(changes.into_iter().map(|(_, change)| change).collect())
}

/// How many lookups a table's share as the tree's shape predicts it (lookups drawn like the
/// stored keys) counts for beside those counted since the table was opened: a new table
/// starts at the predicted share and moves to the counted one as lookups come.
pub(crate) const PREDICTED_SHARE_WEIGHT: f64 = 2000.0;

/// Each filter unit's share of the lookups (a whole filter is one unit, a partitioned one
/// a unit per partition), by table in the order of `version.tables()`.
///
/// A table's share is as the tree's shape predicts it or (given the `counted` spans) as counted
/// since the table was opened, the prediction counting for `PREDICTED_SHARE_WEIGHT` lookups. A
/// lookup counts for a table when it asked the table's filter for a key the table does not
/// hold (`Table::count_found`): only those can cost a false positive. A lookup that
/// finds its key in a table met a filter that could only let it through, and bits spent
/// there would save it nothing: under gets of present keys, most of them found in the
/// bottom level, counting those put memory into the bottom level's filters that the upper
/// levels' filters, which every such get asks and must turn away, needed. (The prediction
/// still counts every lookup whose key falls in the table's range; it weighs only until
/// lookups are counted.)
///
/// The table's share is then split over its partitions: by their keys, and as counted, each
/// partition's keys counting for `PARTITION_PRIOR_LOOKUPS` lookups beside those it was asked.
/// A store of 100M keys has some fifteen thousand partitions: a few thousand lookups leave
/// most of them with none or one, and a plan that took those counts at their word would
/// chase noise, reading partitions back and folding others at every refit. Spread this way,
/// a partition's share leaves its keys' only when lookups really crowd into it.
fn lookup_shares(version: &Version, counted: Option<&CountSpans>) -> Vec<Vec<f64>> {
    let predicted = table_shares(version.tables().map(|t| &t.meta));
    (version.tables().zip(predicted))
        .map(|(t, predicted)| {
            let table = &t.table;
            let units = table.filter_units();
            let keys: Vec<f64> = (0..units)
                .map(|u| table.filter_unit_shape(u).map_or(0.0, |(_, k)| k as f64))
                .collect();
            let all_keys: f64 = keys.iter().sum();
            let key_share = |u: usize| match all_keys > 0.0 {
                true => keys[u] / all_keys,
                false => 1.0 / units as f64,
            };
            let Some(counted) = counted else {
                return (0..units).map(|u| predicted * key_share(u)).collect();
            };
            let asked: Vec<f64> = (0..units).map(|u| table.unit_lookups(u) as f64).collect();
            let table_asked: f64 = asked.iter().sum();
            let lookups = counted.span(t.meta.number) as f64;
            let share = (table_asked + PREDICTED_SHARE_WEIGHT * predicted)
                / (lookups + PREDICTED_SHARE_WEIGHT);
            let prior = PARTITION_PRIOR_LOOKUPS * units as f64;
            (0..units)
                .map(|u| share * (asked[u] + prior * key_share(u)) / (table_asked + prior))
                .collect()
        })
        .collect()
}

/// How many lookups a partition's keys count for, beside those it was asked, when a table's
/// share of lookups is split over its partitions (see [`lookup_shares`]).
const PARTITION_PRIOR_LOOKUPS: f64 = 16.0;

/// False positives per lookup of `version`'s filters, each table's units kept as
/// `residency` says.
fn plan_cost(
    version: &Version,
    shares: &[Vec<f64>],
    residency: impl Fn(&crate::version::TableHandle) -> Vec<FilterResidency>,
) -> f64 {
    let mut cost = 0.0;
    for (t, shares) in version.tables().zip(shares) {
        for ((u, share), kept) in shares.iter().enumerate().zip(residency(t)) {
            if let Some(shape) = Shape::of_written(&t.table, u) {
                cost += share * kept.fold_factor().map_or(1.0, |f| shape.rate(f));
            }
        }
    }
    cost
}

/// What `limit` leaves for the filters over whole keys once `version`'s prefix filters, held
/// whole for their tables' lives, are paid for.
fn beside_prefix_filters(version: &Version, limit: u64) -> u64 {
    let prefix_bytes: u64 = (version.tables())
        .map(|t| t.table.prefix_filter_memory_bytes() as u64)
        .sum();
    limit.saturating_sub(prefix_bytes)
}

/// `version`, with filters folded or dropped until all of them fit the limit (as it is when
/// they fit, or without a limit), and the filters of readers opened without them (a flush's
/// or compaction's new tables, under a limit) read and kept as the plan says. A filter that
/// cannot be read (or should a planned fold fail all the same) is dropped, which frees more
/// than planned: the lookup or check that reads the table reports what is wrong with it.
pub(crate) fn fit_filters(version: Version, options: &Options, spans: &CountSpans) -> Version {
    let dropped = |table: &Table, _| table.with_filter(FilterResidency::Dropped);
    apply_plan(version, options, spans, dropped).expect("any filter can be dropped")
}

/// `version`, whose readers were opened without their filters
/// ([`Table::open_deferring_filter`]), with each filter read and kept as the plan for the
/// limit says: read one at a time and folded at once, so that the whole filters are never
/// all in memory together. A filter that cannot be read fails it.
pub(crate) fn load_filters(
    version: Version,
    options: &Options,
    spans: &CountSpans,
) -> Result<Version> {
    apply_plan(version, options, spans, |_, e| Err(e))
}

/// `version` with each filter kept as the plan for the store's limit says, and each reader
/// opened without its filter given it; `failed` answers for a reader whose filter could not
/// be read or folded.
fn apply_plan(
    version: Version,
    options: &Options,
    spans: &CountSpans,
    failed: impl Fn(&Table, Error) -> Result<Table>,
) -> Result<Version> {
    let mut plan = match options.tuning.filter_memory_limit {
        Some(limit) => {
            let counted = Some(spans).filter(|_| options.tuning.filter_memory_follows_lookups);
            let shares = lookup_shares(&version, counted);
            let limit = beside_prefix_filters(&version, limit);
            fit_plan(&version, limit, &shares, Start::AsHeld)
        }
        None => HashMap::new(),
    };
    let mut replaced = HashMap::new();
    for t in version.tables() {
        let residency = match plan.remove(&t.meta.number) {
            Some((_, residency)) => residency,
            None if t.table.filter_is_deferred() => {
                vec![FilterResidency::Whole; t.table.filter_units()]
            }
            None => continue,
        };
        let reader = match t.table.load_filters(&residency) {
            Ok(reader) => reader,
            Err(e) => failed(&t.table, e)?,
        };
        replaced.insert(t.meta.number, reader);
    }
    Ok(version.with_readers(&replaced))
}

/// Bytes the table's filter units take held as `residency` says (the top level of a
/// partitioned filter not counted: it stays whatever becomes of the units).
fn planned_bytes(table: &Table, residency: &[FilterResidency]) -> u64 {
    (residency.iter().enumerate())
        .filter_map(|(unit, r)| {
            let shape = Shape::of_written(table, unit)?;
            match r {
                FilterResidency::Whole => Some(shape.bytes(1)),
                FilterResidency::Folded(f) => Some(shape.bytes(*f)),
                FilterResidency::Dropped | FilterResidency::NoFilter => None,
            }
        })
        .sum()
}

/// Bytes the table's filter units take as held now.
fn held_bytes(table: &Table) -> u64 {
    (table.filter_memory_bytes() - table.filter_top_bytes()) as u64
}

/// One unit of a table's filter (the whole filter, or a partition) as written, known
/// without reading it.
#[derive(Clone, Copy)]
struct Shape {
    words: u64,
    keys: u64,
    hashes: u32,
    /// Its kind: a cache-local filter's rate is the blocked layout's, and it folds by
    /// blocks; a Ribbon filter's rate is its own, and it does not fold.
    kind: FilterKind,
    /// A Ribbon unit's predicted rate, as its header or its top-level entry gives it.
    ribbon_rate: Option<f64>,
}

impl Shape {
    /// The shape of unit `unit` of the table's filter as written, held or not.
    fn of_written(table: &Table, unit: usize) -> Option<Shape> {
        let (words, keys) = table.filter_unit_shape(unit)?;
        Some(Shape {
            words,
            keys,
            hashes: table.filter_params()?.hashes(),
            kind: table.filter_kind()?,
            ribbon_rate: table.filter_unit_ribbon_rate(unit),
        })
    }

    /// Bytes of the filter folded by `factor`.
    fn bytes(&self, factor: u32) -> u64 {
        self.words * 8 / u64::from(factor)
    }

    /// The rate of the filter folded by `factor` (that of the whole one for 1), by its
    /// layout's rule: the textbook rate, or the blocked layout's. A fold keeps the hash count.
    fn rate(&self, factor: u32) -> f64 {
        if self.keys == 0 {
            return 0.0;
        }
        let bits_per_key = (self.words * 64) as f64 / f64::from(factor) / self.keys as f64;
        match self.kind {
            FilterKind::CacheLocalBloom => blocked_rate(bits_per_key, self.hashes),
            // Held whole only.
            FilterKind::Ribbon => self.ribbon_rate.unwrap_or(1.0),
            _ => textbook_rate(bits_per_key, self.hashes),
        }
    }

    /// Whether the filter folds by `factor` into whole words (whole 512-bit blocks for the
    /// cache-local layout).
    fn folds_by(&self, factor: u32) -> bool {
        let unit = match self.kind {
            FilterKind::CacheLocalBloom => BLOCK_BITS / 64,
            FilterKind::Ribbon => return factor == 1,
            _ => 1,
        };
        factor <= FILTER_FOLD_LIMIT && self.words.is_multiple_of(unit * u64::from(factor))
    }
}

/// One unit of a table's filter as the plan goes.
#[derive(Clone, Copy)]
struct Shrinking<'v> {
    table: &'v Table,
    unit: usize,
    shape: Shape,
    /// The fold from the filter as written (1: whole); `None` once dropped.
    factor: Option<u32>,
    bytes: u64,
    rate: f64,
    /// The share of lookups that reach the table.
    share: f64,
}

impl<'v> Shrinking<'v> {
    /// The unit as the reader holds it, or will once loaded (whole); or (`Start::Whole`)
    /// whole, as written, whatever is held. `None` for a unit not held (dropped) when the
    /// plan starts from what is held.
    fn start(
        table: &'v Table,
        unit: usize,
        held: FilterResidency,
        share: f64,
        from: Start,
    ) -> Option<Shrinking<'v>> {
        let shape = Shape::of_written(table, unit)?;
        let factor = match from {
            // A deferred filter will be read whole.
            Start::AsHeld => held.fold_factor()?,
            Start::Whole => 1,
        };
        Some(Shrinking {
            table,
            unit,
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

/// A step the plan may take: unit `at`'s next fold (or drop), at `cost` false positives per
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
    /// The heap's top is the cheapest step (ties: the later unit, so the order is total).
    fn cmp(&self, other: &Step) -> Ordering {
        (other.cost.total_cmp(&self.cost)).then(self.at.cmp(&other.at))
    }
}

/// Where a plan starts from: the filters as held (it can only shrink them), or every filter
/// whole (it may grow back some held folded or dropped, which are then read from the file).
#[derive(Clone, Copy, PartialEq)]
enum Start {
    AsHeld,
    Whole,
}

/// For each table whose filter is to be kept otherwise than it is held for all of them to
/// fit `limit` bytes, by file number: the reader and how to keep each unit of its filter.
/// `shares` are the units' shares of lookups, by table in the order of `version.tables()`.
/// Empty when they fit.
fn fit_plan(
    version: &Version,
    limit: u64,
    shares: &[Vec<f64>],
    from: Start,
) -> HashMap<u64, (Table, Vec<FilterResidency>)> {
    let mut tables: Vec<(u64, Shrinking)> = Vec::new();
    for (t, shares) in version.tables().zip(shares) {
        let residency = t.table.filter_units_residency();
        for (unit, (&share, &held)) in shares.iter().zip(&residency).enumerate() {
            if let Some(s) = Shrinking::start(&t.table, unit, held, share, from) {
                tables.push((t.meta.number, s));
            }
        }
    }
    // Partitioned filters' top levels stay whatever the plan does with the partitions.
    let tops: u64 = (version.tables())
        .map(|t| t.table.filter_top_bytes() as u64)
        .sum();
    let limit = limit.saturating_sub(tops);
    let mut held: u64 = tables.iter().map(|(_, t)| t.bytes).sum();
    if held <= limit && from == Start::AsHeld {
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
    // Units of one table are consecutive: each table's residency is taken once.
    let mut plan: HashMap<u64, (Table, Vec<FilterResidency>)> = HashMap::new();
    let mut held: (Option<u64>, Vec<FilterResidency>) = (None, Vec::new());
    for (number, t) in tables {
        if held.0 != Some(number) {
            held = (Some(number), t.table.filter_units_residency());
        }
        if t.residency() == held.1[t.unit] {
            continue;
        }
        let (_, kept) = (plan.entry(number)).or_insert_with(|| (t.table.clone(), held.1.clone()));
        kept[t.unit] = t.residency();
    }
    plan
}
