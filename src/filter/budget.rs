//! One memory budget spread over groups of filters, for the fewest false positives in all.
//!
//! A lookup of an absent key in an LSM tree probes one filter per sorted run it may be in, and
//! each false positive costs a read. Given a fixed number of bits, the sum of the rates is
//! smallest when each group's rate is proportional to its keys per probe (Dayan, Athanassoulis
//! and Idreos, "Monkey", SIGMOD 2017): small groups get many bits per key, the largest few.
//!
//! [`allocate`] takes that rule's continuous answer as the target rate of each group, turns it
//! into bits per key and hashes with [`FilterParams::for_false_positive_rate`] (ClickHouse's
//! table), and then, since rows are whole bits per key, moves one row at a time until the
//! budget is kept: while over it, the group that loses least per bit saved steps down a row;
//! while a step up still fits, the group that gains most per bit spent steps up. Greedy steps
//! are not always the best whole-row choice when groups differ much in size (a brute-force
//! search found a case at 2.4 bits per key where they gave twice the false positives), so two
//! more kinds of choice compete with them: rows chosen for a price per bit (a Lagrangian
//! search), and the same with the largest group's row fixed to each row in turn. The choice
//! with the fewest expected false positives wins; the tests hold it within 5% of the best
//! whole-row choice for three groups.
//!
//! [`allocate_blended`] drops the whole-row limit: a share of one group's filters may get the
//! next row up, so the budget is spent to the bit, step by step where it gains most.
//!
//! A group of Ribbon filters ([`FilterGroup::ribbon`]) spends a row's bits at the rate they
//! buy a Ribbon filter ([`ribbon_rate_for_bits_per_key`]): each bit halves its rate about twice
//! as often as a Bloom filter's, so the same budget buys such a group a lower rate, and the
//! rule gives a Bloom group beside it a higher rate than keys per probe alone would.

use super::error::{FilterError, Result};
use super::params::{ideal_bits_per_key, FilterParams, MAX_BITS_PER_KEY};
use super::ribbon::{ribbon_bits_per_key, ribbon_rate_for_bits_per_key};

/// The most bits per key the allocation gives a group: 20 bits (14 hashes) already make a
/// false positive rarer than 1 in 10,000, and each further bit costs every probe of the
/// group more hashing than the false positives it saves. Without the cap, the bits left over
/// after rounding went to the smallest groups, up to 64 bits and 44 hashes a key, and a store
/// under a budget loaded at half the speed of one with uniform filters.
pub const MAX_ALLOCATED_BITS_PER_KEY: u32 = 20;

/// Filters that share parameters, such as the tables of one level of an LSM tree.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct FilterGroup {
    /// Keys the group's filters hold between them.
    pub keys: u64,
    /// Filters of the group one lookup of an absent key probes, on average: at most 1 for
    /// tables of disjoint key ranges (one may hold the key; less when their ranges cover only
    /// part of the keys looked up), up to the table count where every table may (level 0).
    pub probes: f64,
    /// Whether the group's filters are Ribbon filters, which spend a row's bits at a lower
    /// rate than Bloom filters do.
    pub ribbon: bool,
}

impl FilterGroup {
    /// A group of Bloom filters.
    pub fn bloom(keys: u64, probes: f64) -> FilterGroup {
        FilterGroup {
            keys,
            probes,
            ribbon: false,
        }
    }

    /// The rate of the group's filters at row `bits` (bits per key; 0: no filter).
    fn rate_of_row(&self, bits: u32) -> f64 {
        match self.ribbon {
            true => ribbon_rate_of_row(bits),
            false => rate_of_row(bits),
        }
    }

    /// Bits per key the group's filters need for `rate`, ideally (0 for a rate of 1).
    fn ideal_bits(&self, rate: f64) -> f64 {
        match (self.ribbon, rate >= 1.0) {
            (_, true) => 0.0,
            (true, false) => ribbon_bits_per_key(rate).unwrap_or(f64::from(MAX_BITS_PER_KEY)),
            (false, false) => ideal_bits_per_key(rate),
        }
    }

    /// The row for `rate`: the fewest whole bits per key that meet it.
    fn row_for_rate(&self, rate: f64) -> u32 {
        match (self.ribbon, rate >= 1.0) {
            (_, true) => 0,
            (true, false) => (self.ideal_bits(rate).ceil() as u32).max(2),
            (false, false) => row_for_rate(rate),
        }
    }

    /// Bits per key that divide the rate by `e`: how dear a lower rate is in the group.
    fn bits_per_nat(&self) -> f64 {
        match self.ribbon {
            // 1.1 slots a result bit, a result bit halving the rate.
            true => 1.1 / std::f64::consts::LN_2,
            false => 1.0 / (std::f64::consts::LN_2 * std::f64::consts::LN_2),
        }
    }
}

/// Parameters for each group within an average of `bits_per_key` bits over all keys: `None`
/// for a group left without a filter (each of its probes then reads), and at most
/// [`MAX_ALLOCATED_BITS_PER_KEY`]. A group without keys costs no bits and gets that most.
pub fn allocate(groups: &[FilterGroup], bits_per_key: f64) -> Result<Vec<Option<FilterParams>>> {
    let budget = budget_bits(groups, bits_per_key)?;
    let best = whole_row_choices(groups, budget)
        .into_iter()
        .min_by(|a, b| expected_of_rows(groups, a).total_cmp(&expected_of_rows(groups, b)))
        .expect("the greedy choice is always there");
    Ok(best.into_iter().map(params_of_row).collect())
}

/// As [`allocate`], but the budget is spent to the bit: one group may have a share of its
/// filters one row up (a table is one filter, so a level gets some tables at each of two
/// rows). A large group's row costs many bits, so whole rows can leave most of a bit per key
/// unspent: at 100 million keys, with
/// 89% of them in the last level, 10 bits per key allocated 9.9 on paper and 9.3 in the
/// tables' filters, whose last level had 9 bits where the budget paid for 9.5.
pub fn allocate_blended(groups: &[FilterGroup], bits_per_key: f64) -> Result<Vec<GroupFilters>> {
    let budget = budget_bits(groups, bits_per_key)?;
    let best_whole = whole_row_choices(groups, budget)
        .into_iter()
        .map(|rows| blend(groups, &rows, None))
        .min_by(|a, b| expected_of_blend(groups, a).total_cmp(&expected_of_blend(groups, b)))
        .expect("the greedy choice is always there");
    let (rows, share) = steepest_steps(groups, budget);
    let stepped = blend(groups, &rows, share);
    Ok(
        match expected_of_blend(groups, &stepped) <= expected_of_blend(groups, &best_whole) {
            true => stepped,
            false => best_whole,
        },
    )
}

/// With shares allowed, a group's rate between two rows is a mix of theirs, so each step up
/// a row gains in proportion to the bits it spends, and each row's step gains less per bit
/// than the one before (the table's rates fall ever more slowly). Spending the budget one
/// step at a time, always on the step that gains most per bit, then finds the best
/// allocation, the last step taken in part. Groups without keys get the most bits (they
/// cost nothing), groups never probed none.
fn steepest_steps(groups: &[FilterGroup], budget: u64) -> (Vec<u32>, Option<(usize, f64)>) {
    let mut rows: Vec<u32> = groups
        .iter()
        .map(|g| match g.keys {
            0 => MAX_ALLOCATED_BITS_PER_KEY,
            _ => 0,
        })
        .collect();
    loop {
        let room = budget.saturating_sub(total_bits(groups, &rows));
        let Some((i, to)) = best_step_up(groups, &rows, u64::MAX) else {
            return (rows, None);
        };
        let cost = groups[i].keys * u64::from(to - rows[i]);
        if cost > room {
            return (rows, (room > 0).then(|| (i, room as f64 / cost as f64)));
        }
        rows[i] = to;
    }
}

/// One group's filters under [`allocate_blended`]: `lower` for most of its filters, and the
/// next row up for a share of them.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct GroupFilters {
    lower: Option<FilterParams>,
    upper: Option<FilterParams>,
    upper_share: f64,
    /// Of Ribbon filters: their rates are those their bits buy a Ribbon filter.
    ribbon: bool,
}

impl GroupFilters {
    /// The same parameters for every filter of the group.
    pub fn of(params: Option<FilterParams>) -> GroupFilters {
        GroupFilters {
            lower: params,
            upper: params,
            upper_share: 0.0,
            ribbon: false,
        }
    }

    /// The same parameters for every filter of `group`, of its kind.
    pub fn of_group(group: &FilterGroup, params: Option<FilterParams>) -> GroupFilters {
        GroupFilters {
            ribbon: group.ribbon,
            ..GroupFilters::of(params)
        }
    }

    fn whole(group: &FilterGroup, row: u32) -> GroupFilters {
        Self::of_group(group, params_of_row(row))
    }

    /// Parameters for most filters of the group (`None`: no filter).
    pub fn lower(&self) -> Option<FilterParams> {
        self.lower
    }

    /// Parameters for the share [`upper_share`](Self::upper_share) of the group's filters.
    pub fn upper(&self) -> Option<FilterParams> {
        self.upper
    }

    /// The share, 0 to 1, of the group's keys whose filters get [`upper`](Self::upper).
    pub fn upper_share(&self) -> f64 {
        self.upper_share
    }

    /// The parameters of one filter, for `draw` spread evenly over 0..1 across the group's
    /// filters (a hash of the table's number, say): the upper row below the share.
    pub fn pick(&self, draw: f64) -> Option<FilterParams> {
        match draw < self.upper_share {
            true => self.upper,
            false => self.lower,
        }
    }

    /// Whether `params` is one of the group's two choices.
    pub fn includes(&self, params: Option<FilterParams>) -> bool {
        params == self.lower || (self.upper_share > 0.0 && params == self.upper)
    }

    /// Bits per key over the group, on average.
    pub fn bits_per_key(&self) -> f64 {
        let bits = |p: Option<FilterParams>| p.map_or(0.0, |p| f64::from(p.bits_per_key()));
        self.mix(bits)
    }

    /// The predicted false-positive rate of a probe of the group, on average.
    pub fn predicted_false_positive_rate(&self) -> f64 {
        let group = FilterGroup {
            keys: 0,
            probes: 0.0,
            ribbon: self.ribbon,
        };
        self.mix(|p| group.rate_of_params(p))
    }

    fn mix(&self, value: impl Fn(Option<FilterParams>) -> f64) -> f64 {
        (1.0 - self.upper_share) * value(self.lower) + self.upper_share * value(self.upper)
    }
}

/// The budget in bits for `bits_per_key` over the groups' keys.
fn budget_bits(groups: &[FilterGroup], bits_per_key: f64) -> Result<u64> {
    if !(bits_per_key >= 0.0 && bits_per_key <= MAX_BITS_PER_KEY as f64) {
        return Err(FilterError::InvalidParams(format!(
            "a budget of 0..={MAX_BITS_PER_KEY} bits per key, got {bits_per_key}"
        )));
    }
    let total_keys: u64 = groups.iter().map(|g| g.keys).sum();
    Ok((bits_per_key * total_keys as f64).floor() as u64)
}

/// Whole-row allocations within `budget` that compete for the fewest false positives: the
/// continuous answer moved row by row into the budget, and the priced choices.
fn whole_row_choices(groups: &[FilterGroup], budget: u64) -> Vec<Vec<u32>> {
    let mut rows: Vec<u32> = monkey_rates(groups, budget as f64)
        .into_iter()
        .zip(groups)
        .map(|(rate, group)| match group.keys {
            0 => MAX_ALLOCATED_BITS_PER_KEY,
            _ if group.probes <= 0.0 => 0,
            _ => group.row_for_rate(rate).min(MAX_ALLOCATED_BITS_PER_KEY),
        })
        .collect();
    step_down_until_within(groups, &mut rows, budget);
    step_up_while_room(groups, &mut rows, budget);
    let mut choices = vec![rows];
    choices.extend(priced_choices(groups, budget));
    choices
}

fn blend(of: &[FilterGroup], rows: &[u32], share: Option<(usize, f64)>) -> Vec<GroupFilters> {
    let mut groups: Vec<GroupFilters> = (of.iter().zip(rows))
        .map(|(g, &r)| GroupFilters::whole(g, r))
        .collect();
    if let Some((i, upper_share)) = share {
        let upper = higher_row(rows[i]).expect("a share is of a step that exists");
        groups[i].upper = params_of_row(upper);
        groups[i].upper_share = upper_share;
    }
    groups
}

fn expected_of_blend(groups: &[FilterGroup], blend: &[GroupFilters]) -> f64 {
    groups
        .iter()
        .zip(blend)
        .map(|(g, b)| g.probes * b.predicted_false_positive_rate())
        .sum()
}

/// The least filter memory (to a thousandth of a bit per key) whose allocation keeps the
/// expected false positives of one absent-key lookup, [`expected_false_positives`], at or
/// under `false_positives`: the budget given as wasted reads per lookup instead of bits per
/// key. When even [`MAX_ALLOCATED_BITS_PER_KEY`] everywhere misses the target, that
/// allocation, the best on offer. Returns the bits per key found and the allocation.
pub fn allocate_for_false_positives(
    groups: &[FilterGroup],
    false_positives: f64,
) -> Result<(f64, Vec<Option<FilterParams>>)> {
    if !(false_positives > 0.0 && false_positives.is_finite()) {
        return Err(FilterError::InvalidParams(format!(
            "a target of wasted reads per lookup must be positive, got {false_positives}"
        )));
    }
    let meets = |bits: f64| -> Result<(bool, Vec<Option<FilterParams>>)> {
        let params = allocate(groups, bits)?;
        Ok((
            expected_false_positives(groups, &params) <= false_positives,
            params,
        ))
    };
    let (mut low, mut high) = (0.0, MAX_ALLOCATED_BITS_PER_KEY as f64);
    let (met, mut best) = meets(high)?;
    if !met {
        return Ok((high, best));
    }
    // The expected false positives fall as the budget grows: 15 halvings reach 20 / 2^15 bits.
    for _ in 0..15 {
        let middle = (low + high) / 2.0;
        match meets(middle)? {
            (true, params) => (high, best) = (middle, params),
            (false, _) => low = middle,
        }
    }
    Ok((high, best))
}

/// Choices by a price per bit ([`lagrangian_rows`]), each filled up greedily: one for all
/// groups, and one for each row of the largest group with the others priced in the bits left.
/// A price alone misses choices where the largest group's first step is worth taking only
/// with the others below their priced rows; fixing that group's row finds them.
fn priced_choices(groups: &[FilterGroup], budget: u64) -> Vec<Vec<u32>> {
    let mut choices = vec![lagrangian_rows(groups, budget)];
    if let Some(largest) = (0..groups.len()).max_by_key(|&i| groups[i].keys) {
        let affordable: Vec<u32> = std::iter::once(0)
            .chain(2..=MAX_ALLOCATED_BITS_PER_KEY)
            .take_while(|&row| groups[largest].keys * u64::from(row) <= budget)
            .collect();
        // The largest group's best row is one of the highest it can afford (the bits a lower
        // row frees go to groups too small to use them), or none when even that starves the
        // others: trying only those keeps an allocation, done before every flush and
        // compaction, well under a millisecond.
        let highest = affordable.len().saturating_sub(4).max(1);
        let rows_to_try = affordable[..1].iter().chain(&affordable[highest..]);
        for &row in rows_to_try {
            let left = budget - groups[largest].keys * u64::from(row);
            let mut others = groups.to_vec();
            others[largest].keys = 0;
            let mut rows = lagrangian_rows(&others, left);
            rows[largest] = row;
            choices.push(rows);
        }
    }
    for rows in &mut choices {
        step_up_while_room(groups, rows, budget);
    }
    choices
}

/// Rows chosen group by group for a price per bit: each group takes the row that minimises
/// its expected false positives plus the price of its bits, and the price is the lowest, found
/// by bisection, at which the total fits `budget`. Where the greedy steps go wrong (groups of
/// very different sizes) this finds the whole-row choice that a continuous start misses.
fn lagrangian_rows(groups: &[FilterGroup], budget: u64) -> Vec<u32> {
    let ladder: Vec<u32> = std::iter::once(0)
        .chain(2..=MAX_ALLOCATED_BITS_PER_KEY)
        .collect();
    let rows_at = |price: f64| -> Vec<u32> {
        groups
            .iter()
            .map(|g| {
                let cost =
                    |b: u32| g.probes * g.rate_of_row(b) + price * (g.keys * b as u64) as f64;
                *ladder
                    .iter()
                    .min_by(|&&a, &&b| cost(a).total_cmp(&cost(b)))
                    .expect("the ladder is not empty")
            })
            .collect()
    };
    // ln(price): from nearly free bits to bits too dear for any filter.
    let (mut cheap, mut dear) = (-60.0_f64, 20.0_f64);
    for _ in 0..40 {
        let middle = (cheap + dear) / 2.0;
        match total_bits(groups, &rows_at(middle.exp())) > budget {
            true => cheap = middle,
            false => dear = middle,
        }
    }
    let rows = rows_at(dear.exp());
    match total_bits(groups, &rows) <= budget {
        true => rows,
        false => vec![0; groups.len()],
    }
}

fn expected_of_rows(groups: &[FilterGroup], rows: &[u32]) -> f64 {
    groups
        .iter()
        .zip(rows)
        .map(|(g, &b)| g.probes * g.rate_of_row(b))
        .sum()
}

/// The expected false positives of one absent-key lookup: each group's rate times its probes.
pub fn expected_false_positives(groups: &[FilterGroup], params: &[Option<FilterParams>]) -> f64 {
    groups
        .iter()
        .zip(params)
        .map(|(g, p)| g.probes * g.rate_of_params(*p))
        .sum()
}

/// Bits the filters of `groups` take with `params`.
pub fn memory_bits(groups: &[FilterGroup], params: &[Option<FilterParams>]) -> u64 {
    groups
        .iter()
        .zip(params)
        .map(|(g, p)| g.keys * p.map_or(0, |p| p.bits_per_key() as u64))
        .sum()
}

/// Monkey's continuous answer: rate_i = c * keys_i * d_i / probes_i (at most 1), with `c` such
/// that the bits an ideal filter needs for those rates, `keys * ln(1/rate) * d_i`, sum to
/// `budget`; `d_i` is the bits per key that divide group i's rate by `e` (`1 / ln(2)^2` for a
/// Bloom filter, `1.1 / ln(2)` for a Ribbon filter), which makes each group's last bit save as
/// many false positives as any other's. `c` is found by bisection on its logarithm.
fn monkey_rates(groups: &[FilterGroup], budget: f64) -> Vec<f64> {
    let rates = |ln_c: f64| -> Vec<f64> {
        groups
            .iter()
            .map(|g| {
                // Never probed: a filter would save nothing. No keys: any filter costs nothing.
                if g.probes <= 0.0 {
                    1.0
                } else if g.keys == 0 {
                    0.0
                } else {
                    (ln_c.exp() * g.keys as f64 * g.bits_per_nat() / g.probes).min(1.0)
                }
            })
            .collect()
    };
    let bits = |rates: &[f64]| -> f64 {
        groups
            .iter()
            .zip(rates)
            .filter(|(g, _)| g.keys > 0)
            .map(|(g, r)| g.keys as f64 * g.ideal_bits(*r))
            .sum()
    };
    let (mut low, mut high) = (-200.0_f64, 50.0_f64);
    for _ in 0..200 {
        let middle = (low + high) / 2.0;
        // A larger c gives higher rates and fewer bits.
        match bits(&rates(middle)) > budget {
            true => low = middle,
            false => high = middle,
        }
    }
    rates(high)
}

/// Bits per key for `rate` by the table's rule; 0 (no filter) for a rate of 1.
fn row_for_rate(rate: f64) -> u32 {
    if rate >= 1.0 {
        return 0;
    }
    FilterParams::for_false_positive_rate(rate).map_or(MAX_BITS_PER_KEY, |p| p.bits_per_key())
}

/// Row `bits` at its best hash count; `None` for 0 bits. Row 1 (one hash, rate 1 in the
/// table) is no better than no filter, so the ladder goes 0, 2, 3, ...
fn params_of_row(bits: u32) -> Option<FilterParams> {
    (bits >= 2).then(|| FilterParams::best_for_bits(bits))
}

fn rate_of(params: Option<FilterParams>) -> f64 {
    params.map_or(1.0, |p| p.predicted_false_positive_rate())
}

/// [`rate_of`] for row `bits`, from a table made once: the searches above ask it hundreds of
/// thousands of times per allocation, and a flush or compaction allocates before it writes.
fn rate_of_row(bits: u32) -> f64 {
    static RATES: std::sync::OnceLock<Vec<f64>> = std::sync::OnceLock::new();
    let rates = RATES.get_or_init(|| {
        (0..=MAX_ALLOCATED_BITS_PER_KEY)
            .map(|b| rate_of(params_of_row(b)))
            .collect()
    });
    rates
        .get(bits as usize)
        .copied()
        .unwrap_or_else(|| rate_of(params_of_row(bits)))
}

/// [`rate_of_row`] for a Ribbon filter spending row `bits`' bits: the rate they buy it.
fn ribbon_rate_of_row(bits: u32) -> f64 {
    match bits {
        0 => 1.0,
        b => ribbon_rate_for_bits_per_key(f64::from(b)).unwrap_or(1.0),
    }
}

impl FilterGroup {
    /// The rate of the group's filters at `params` (`None`: no filter).
    fn rate_of_params(&self, params: Option<FilterParams>) -> f64 {
        match (self.ribbon, params) {
            (true, Some(p)) => ribbon_rate_of_row(p.bits_per_key()),
            _ => rate_of(params),
        }
    }
}

fn lower_row(bits: u32) -> Option<u32> {
    match bits {
        0 => None,
        2 => Some(0),
        b => Some(b - 1),
    }
}

fn higher_row(bits: u32) -> Option<u32> {
    match bits {
        0 => Some(2),
        b if b < MAX_ALLOCATED_BITS_PER_KEY => Some(b + 1),
        _ => None,
    }
}

/// Expected false positives added, and bits freed, by moving group `g` from row `from` to `to`.
fn step(group: &FilterGroup, from: u32, to: u32) -> (f64, u64) {
    let added = group.probes * (group.rate_of_row(to) - group.rate_of_row(from));
    let freed = group.keys * from.abs_diff(to) as u64;
    (added, freed)
}

fn total_bits(groups: &[FilterGroup], rows: &[u32]) -> u64 {
    groups
        .iter()
        .zip(rows)
        .map(|(g, &b)| g.keys * b as u64)
        .sum()
}

fn step_down_until_within(groups: &[FilterGroup], rows: &mut [u32], budget: u64) {
    while total_bits(groups, rows) > budget {
        let cheapest = (0..groups.len())
            .filter(|&i| groups[i].keys > 0)
            .filter_map(|i| lower_row(rows[i]).map(|to| (i, to)))
            .min_by(|&(a, to_a), &(b, to_b)| {
                let (cost_a, freed_a) = step(&groups[a], rows[a], to_a);
                let (cost_b, freed_b) = step(&groups[b], rows[b], to_b);
                (cost_a / freed_a as f64).total_cmp(&(cost_b / freed_b as f64))
            });
        match cheapest {
            Some((i, to)) => rows[i] = to,
            None => return,
        }
    }
}

fn step_up_while_room(groups: &[FilterGroup], rows: &mut [u32], budget: u64) {
    loop {
        let room = budget - total_bits(groups, rows);
        match best_step_up(groups, rows, room) {
            Some((i, to)) => rows[i] = to,
            None => return,
        }
    }
}

/// The step up a row, costing at most `room` bits, that removes the most expected false
/// positives per bit spent: the group and the row it would move to.
fn best_step_up(groups: &[FilterGroup], rows: &[u32], room: u64) -> Option<(usize, u32)> {
    // A group no lookup probes gains nothing from bits.
    (0..groups.len())
        .filter(|&i| groups[i].keys > 0 && groups[i].probes > 0.0)
        .filter_map(|i| higher_row(rows[i]).map(|to| (i, to)))
        .filter(|&(i, to)| groups[i].keys * u64::from(to - rows[i]) <= room)
        .max_by(|&(a, to_a), &(b, to_b)| {
            let (gain_a, spent_a) = step(&groups[a], rows[a], to_a);
            let (gain_b, spent_b) = step(&groups[b], rows[b], to_b);
            // `gain` is negative: the rate falls.
            (-gain_a / spent_a as f64).total_cmp(&(-gain_b / spent_b as f64))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leveled tree: `levels` levels of one run each, growing by `ratio`, the last of
    /// `last_keys` keys.
    fn leveled(levels: u32, ratio: u64, last_keys: u64) -> Vec<FilterGroup> {
        (0..levels)
            .rev()
            .map(|up| FilterGroup {
                keys: last_keys / ratio.pow(up),
                probes: 1.0,
                ribbon: false,
            })
            .collect()
    }

    fn uniform(groups: &[FilterGroup], bits: u32) -> Vec<Option<FilterParams>> {
        vec![params_of_row(bits); groups.len()]
    }

    #[test]
    fn five_levels_at_ten_bits_per_key_waste_a_third_of_uniform_filters() {
        let groups = leveled(5, 10, 10_000_000);
        let budgeted = allocate(&groups, 10.0).unwrap();
        let total_keys: u64 = groups.iter().map(|g| g.keys).sum();
        assert!(memory_bits(&groups, &budgeted) <= 10 * total_keys);
        let flat = uniform(&groups, 10);
        let ours = expected_false_positives(&groups, &budgeted);
        let theirs = expected_false_positives(&groups, &flat);
        // The paper's figures for this tree: about 0.012 against 0.041.
        assert!((0.035..0.045).contains(&theirs), "{theirs}");
        assert!(ours < 0.016, "{ours}");
        assert!(theirs / ours > 2.5, "{theirs} / {ours}");
        eprintln!("sum of rates: {ours:.4} budgeted, {theirs:.4} uniform");
    }

    #[test]
    fn ribbon_groups_buy_lower_rates_with_the_same_bits() {
        let bloom = leveled(4, 10, 10_000_000);
        let ribbon: Vec<FilterGroup> = (bloom.iter())
            .map(|g| FilterGroup { ribbon: true, ..*g })
            .collect();
        let spent = |groups: &[FilterGroup], a: &[GroupFilters]| -> f64 {
            (groups.iter().zip(a))
                .map(|(g, f)| g.keys as f64 * f.bits_per_key())
                .sum()
        };
        let false_positives = |groups: &[FilterGroup], a: &[GroupFilters]| -> f64 {
            (groups.iter().zip(a))
                .map(|(g, f)| g.probes * f.predicted_false_positive_rate())
                .sum()
        };
        let budget = 10.0 * bloom.iter().map(|g| g.keys).sum::<u64>() as f64;
        let with_bloom = allocate_blended(&bloom, 10.0).unwrap();
        let with_ribbon = allocate_blended(&ribbon, 10.0).unwrap();
        let used = spent(&ribbon, &with_ribbon);
        assert!(
            used <= budget * 1.000001,
            "{used} of {budget}: {with_ribbon:?}"
        );
        assert!(spent(&ribbon, &with_ribbon) > 0.99 * budget);
        let (b, r) = (
            false_positives(&bloom, &with_bloom),
            false_positives(&ribbon, &with_ribbon),
        );
        // A Ribbon filter's 10 bits per key give about a fifth of a Bloom filter's rate.
        assert!(r * 3.0 < b, "ribbon {r} against bloom {b}");
        // A Bloom level 0 beside Ribbon levels: its rate rises against keys per probe alone.
        let mut mixed = ribbon.clone();
        mixed[0].ribbon = false;
        let rates = monkey_rates(&mixed, budget);
        let alone = monkey_rates(&ribbon, budget);
        assert!(
            rates[0] / rates[1] > 1.2 * alone[0] / alone[1],
            "{rates:?} {alone:?}"
        );
    }

    #[test]
    fn rates_follow_the_closed_form_within_a_row() {
        let groups = leveled(5, 10, 10_000_000);
        let continuous = monkey_rates(
            &groups,
            10.0 * groups.iter().map(|g| g.keys).sum::<u64>() as f64,
        );
        // Proportional to each level's keys: ten times the rate per level down.
        for pair in continuous.windows(2) {
            assert!((pair[1] / pair[0] - 10.0).abs() < 1e-6, "{continuous:?}");
        }
        let params = allocate(&groups, 10.0).unwrap();
        let bits: Vec<u32> = params.iter().map(|p| p.unwrap().bits_per_key()).collect();
        // Whole rows, and the table's rates rather than an ideal filter's, cost little against
        // the continuous optimum.
        let optimum: f64 = continuous.iter().sum();
        let chosen = expected_false_positives(&groups, &params);
        assert!(chosen <= 1.25 * optimum, "{chosen} against {optimum}");
        assert!(bits.windows(2).all(|p| p[0] >= p[1]), "{bits:?}");
    }

    #[test]
    fn the_budget_is_kept_after_rounding_and_nearly_used() {
        let shapes = [
            leveled(4, 10, 1_000_000),
            leveled(7, 4, 3_000_000),
            vec![
                FilterGroup {
                    keys: 40_000,
                    probes: 8.0,
                    ribbon: false,
                },
                FilterGroup {
                    keys: 1_000_000,
                    probes: 1.0,
                    ribbon: false,
                },
                FilterGroup {
                    keys: 9_000_000,
                    probes: 1.0,
                    ribbon: false,
                },
            ],
            vec![FilterGroup {
                keys: 12_345,
                probes: 1.0,
                ribbon: false,
            }],
        ];
        for groups in &shapes {
            let total: u64 = groups.iter().map(|g| g.keys).sum();
            for bits in [0.0, 1.5, 4.0, 7.3, 10.0, 16.0] {
                let params = allocate(groups, bits).unwrap();
                let used = memory_bits(groups, &params);
                let budget = (bits * total as f64).floor() as u64;
                assert!(used <= budget, "{used} > {budget} at {bits}");
                // No group below the cap has a step up that still fits.
                for (g, p) in groups.iter().zip(&params) {
                    let bits = p.map_or(0, |p| p.bits_per_key());
                    if let Some(next) = higher_row(bits) {
                        let step = g.keys * u64::from(next - bits);
                        assert!(step > budget - used, "{used} of {budget}: {g:?} at {bits}");
                    }
                }
            }
        }
    }

    #[test]
    fn empty_and_unprobed_groups_change_nothing_for_the_others() {
        let groups = leveled(4, 10, 1_000_000);
        let alone = allocate(&groups, 10.0).unwrap();
        let mut with_others = groups.clone();
        with_others.push(FilterGroup {
            keys: 0,
            probes: 1.0,
            ribbon: false,
        });
        with_others.push(FilterGroup {
            keys: 0,
            probes: 1.0,
            ribbon: false,
        });
        with_others.insert(
            0,
            FilterGroup {
                keys: 0,
                probes: 3.0,
                ribbon: false,
            },
        );
        let params = allocate(&with_others, 10.0).unwrap();
        assert_eq!(&params[1..5], &alone[..]);
        let never_probed = [
            FilterGroup {
                keys: 5,
                probes: 0.0,
                ribbon: false,
            },
            FilterGroup {
                keys: 1_000,
                probes: 1.0,
                ribbon: false,
            },
        ];
        let params = allocate(&never_probed, 10.0).unwrap();
        assert!(params[0].is_none(), "{params:?}");
    }

    /// Every whole-row choice for three groups, against the allocation.
    #[test]
    fn three_groups_get_the_best_whole_row_choice() {
        let ladder: Vec<u32> = std::iter::once(0)
            .chain(2..=MAX_ALLOCATED_BITS_PER_KEY)
            .collect();
        let shapes = [
            [100, 1_000, 10_000],
            [500, 3_000, 7_000],
            [10, 10_000, 100_000],
        ];
        for keys in shapes {
            let groups: Vec<FilterGroup> = keys
                .iter()
                .map(|&k| FilterGroup {
                    keys: k,
                    probes: 1.0,
                    ribbon: false,
                })
                .collect();
            for bits in [1.0, 2.4, 5.0, 9.6, 14.0] {
                let budget = (bits * keys.iter().sum::<u64>() as f64).floor() as u64;
                let mut best = f64::MAX;
                for &a in &ladder {
                    for &b in &ladder {
                        for &c in &ladder {
                            let rows = [a, b, c];
                            if total_bits(&groups, &rows) <= budget {
                                best = best.min(expected_of_rows(&groups, &rows));
                            }
                        }
                    }
                }
                let chosen = expected_false_positives(&groups, &allocate(&groups, bits).unwrap());
                assert!(
                    chosen <= best * 1.05 + 1e-12,
                    "{keys:?} at {bits}: {chosen} against {best}"
                );
            }
        }
    }

    #[test]
    fn more_probes_earn_more_bits() {
        let groups = [
            FilterGroup {
                keys: 1_000_000,
                probes: 8.0,
                ribbon: false,
            },
            FilterGroup {
                keys: 1_000_000,
                probes: 1.0,
                ribbon: false,
            },
        ];
        let params = allocate(&groups, 8.0).unwrap();
        let bits: Vec<u32> = params.iter().map(|p| p.unwrap().bits_per_key()).collect();
        assert!(bits[0] > bits[1], "{bits:?}");
    }

    #[test]
    fn a_reads_target_gets_the_least_memory_that_meets_it() {
        let groups = leveled(5, 10, 1_000_000);
        for target in [0.05, 0.01, 0.002] {
            let (bits, params) = allocate_for_false_positives(&groups, target).unwrap();
            assert!(expected_false_positives(&groups, &params) <= target);
            assert_eq!(params, allocate(&groups, bits).unwrap());
            // A little less memory misses the target.
            let less = allocate(&groups, bits - 0.01).unwrap();
            assert!(
                expected_false_positives(&groups, &less) > target,
                "{target}"
            );
        }
        // The uniform 0.01 rows' wasted reads are met with less memory under the budget.
        let uniform_rows = uniform(&groups, 10);
        let uniform_reads = expected_false_positives(&groups, &uniform_rows);
        let (bits, params) = allocate_for_false_positives(&groups, uniform_reads).unwrap();
        assert!(memory_bits(&groups, &params) < memory_bits(&groups, &uniform_rows));
        assert!(bits < 10.0);
    }

    #[test]
    fn an_unreachable_reads_target_gets_the_most_bits_and_a_bad_one_is_an_error() {
        let groups = leveled(4, 10, 100_000);
        let (bits, params) = allocate_for_false_positives(&groups, 1e-12).unwrap();
        assert_eq!(bits, MAX_ALLOCATED_BITS_PER_KEY as f64);
        assert_eq!(params, allocate(&groups, bits).unwrap());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(allocate_for_false_positives(&groups, bad).is_err());
        }
    }

    /// The tree of a settled 100M-key store: two small levels above a last one of 89%.
    fn hundred_million() -> Vec<FilterGroup> {
        [(1_000_000, 0.1), (10_000_000, 0.9), (89_000_000, 1.0)]
            .iter()
            .map(|&(keys, probes)| FilterGroup {
                keys,
                probes,
                ribbon: false,
            })
            .collect()
    }

    #[test]
    fn a_blended_allocation_spends_the_budget_to_the_bit() {
        let shapes = [
            hundred_million(),
            leveled(5, 10, 10_000_000),
            leveled(7, 4, 3_000_000),
        ];
        for groups in shapes {
            let keys: u64 = groups.iter().map(|g| g.keys).sum();
            for bits in [4.0, 7.5, 10.0, 13.0] {
                let whole = allocate(&groups, bits).unwrap();
                let blended = allocate_blended(&groups, bits).unwrap();
                let spent: f64 = groups
                    .iter()
                    .zip(&blended)
                    .map(|(g, b)| g.keys as f64 * b.bits_per_key())
                    .sum();
                let budget = bits * keys as f64;
                assert!(spent <= budget + 1.0, "{spent} over {budget}");
                // Nothing is left but what no group could use (every group at the cap).
                let capped = blended
                    .iter()
                    .all(|b| b.bits_per_key() == MAX_ALLOCATED_BITS_PER_KEY as f64);
                assert!(capped || spent >= budget - 1.0, "{spent} of {budget}");
                let ours = expected_of_blend(&groups, &blended);
                let theirs = expected_false_positives(&groups, &whole);
                assert!(ours <= theirs, "{ours} against whole rows' {theirs}");
                assert!(blended.iter().filter(|b| b.upper_share() > 0.0).count() <= 1);
            }
        }
    }

    #[test]
    fn at_a_hundred_million_keys_the_last_level_gets_the_bits_whole_rows_left() {
        let groups = hundred_million();
        let whole = allocate(&groups, 10.0).unwrap();
        let blended = allocate_blended(&groups, 10.0).unwrap();
        let last_whole = whole[2].unwrap();
        assert_eq!(last_whole.bits_per_key(), 9);
        let last = blended[2];
        assert_eq!(last.lower(), Some(last_whole));
        assert_eq!(last.upper().map(|p| p.bits_per_key()), Some(10));
        assert!(last.bits_per_key() > 9.2, "{}", last.bits_per_key());
        let (ours, theirs) = (
            expected_of_blend(&groups, &blended),
            expected_false_positives(&groups, &whole),
        );
        assert!(ours < 0.9 * theirs, "{ours} against {theirs}");
    }

    #[test]
    fn a_share_picks_the_upper_row_for_draws_below_it() {
        let groups = hundred_million();
        let last = allocate_blended(&groups, 10.0).unwrap()[2];
        let draws = 10_000;
        let upper = (0..draws)
            .filter(|&i| last.pick((i as f64 + 0.5) / draws as f64) == last.upper())
            .count();
        let share = upper as f64 / draws as f64;
        assert!((share - last.upper_share()).abs() < 1e-3, "{share}");
        assert!(last.includes(last.lower()) && last.includes(last.upper()));
        assert!(!last.includes(params_of_row(12)));
    }

    #[test]
    fn no_budget_means_no_filters_and_bad_budgets_are_errors() {
        let groups = leveled(3, 10, 1_000);
        assert!(allocate(&groups, 0.0).unwrap().iter().all(|p| p.is_none()));
        assert!(allocate(&groups, -1.0).is_err());
        assert!(allocate(&groups, f64::NAN).is_err());
        assert!(allocate(&groups, 65.0).is_err());
        let empty = [FilterGroup {
            keys: 0,
            probes: 1.0,
            ribbon: false,
        }];
        let params = allocate(&empty, 10.0).unwrap();
        assert_eq!(
            params[0].unwrap().bits_per_key(),
            MAX_ALLOCATED_BITS_PER_KEY
        );
    }
}
