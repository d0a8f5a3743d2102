//! Choosing bits per key and the hash count from a target false-positive rate.
//!
//! Within the reach of ClickHouse's best-practice table (targets >= 0.000109) the choice is
//! exactly ClickHouse's: the first row (bits per key) whose best rate meets the target, and in
//! that row the fewest hashes that still meet it. Below that reach ClickHouse silently answers
//! 19 bits / 13 hashes; we instead go on walking further rows (20 from ClickHouse's table, then
//! 21..=64 computed from `(1 - e^(-k/b))^k`) and fail clearly when even 64 bits per key cannot
//! meet the target.

use super::error::{FilterError, Result};

/// Largest bits per key any filter may use.
pub const MAX_BITS_PER_KEY: u32 = 64;
/// Largest hash count any filter may use.
pub const MAX_HASHES: u32 = 64;

/// ClickHouse's published rates: `CLICKHOUSE_TABLE[b - 1][k - 1]` is the false-positive rate
/// at `b` bits per key and `k` hashes, for `b` in 1..=20 and `k` in 1..=14 (0.0 = no entry).
const CLICKHOUSE_TABLE: [[f64; 14]; 20] = [
    [1.0, 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0.],
    [0.393, 0.4, 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0.],
    [
        0.283, 0.237, 0.253, 0., 0., 0., 0., 0., 0., 0., 0., 0., 0., 0.,
    ],
    [
        0.221, 0.155, 0.147, 0.16, 0., 0., 0., 0., 0., 0., 0., 0., 0., 0.,
    ],
    [
        0.181, 0.109, 0.092, 0.092, 0.101, 0., 0., 0., 0., 0., 0., 0., 0., 0.,
    ],
    [
        0.154, 0.0804, 0.0609, 0.0561, 0.0578, 0.0638, 0., 0., 0., 0., 0., 0., 0., 0.,
    ],
    [
        0.133, 0.0618, 0.0423, 0.0359, 0.0347, 0.0364, 0., 0., 0., 0., 0., 0., 0., 0.,
    ],
    [
        0.118, 0.0489, 0.0306, 0.024, 0.0217, 0.0216, 0.0229, 0., 0., 0., 0., 0., 0., 0.,
    ],
    [
        0.105, 0.0397, 0.0228, 0.0166, 0.0141, 0.0133, 0.0135, 0.0145, 0., 0., 0., 0., 0., 0.,
    ],
    [
        0.0952, 0.0329, 0.0174, 0.0118, 0.00943, 0.00844, 0.00819, 0.00846, 0., 0., 0., 0., 0., 0.,
    ],
    [
        0.0869, 0.0276, 0.0136, 0.00864, 0.0065, 0.00552, 0.00513, 0.00509, 0., 0., 0., 0., 0., 0.,
    ],
    [
        0.08, 0.0236, 0.0108, 0.00646, 0.00459, 0.00371, 0.00329, 0.00314, 0., 0., 0., 0., 0., 0.,
    ],
    [
        0.074, 0.0203, 0.00875, 0.00492, 0.00332, 0.00255, 0.00217, 0.00199, 0.00194, 0., 0., 0.,
        0., 0.,
    ],
    [
        0.0689, 0.0177, 0.00718, 0.00381, 0.00244, 0.00179, 0.00146, 0.00129, 0.00121, 0.0012, 0.,
        0., 0., 0.,
    ],
    [
        0.0645, 0.0156, 0.00596, 0.003, 0.00183, 0.00128, 0.001, 0.000852, 0.000775, 0.000744, 0.,
        0., 0., 0.,
    ],
    [
        0.0606, 0.0138, 0.005, 0.00239, 0.00139, 0.000935, 0.000702, 0.000574, 0.000505, 0.00047,
        0.000459, 0., 0., 0.,
    ],
    [
        0.0571, 0.0123, 0.00423, 0.00193, 0.00107, 0.000692, 0.000499, 0.000394, 0.000335,
        0.000302, 0.000287, 0.000284, 0., 0.,
    ],
    [
        0.054, 0.0111, 0.00362, 0.00158, 0.000839, 0.000519, 0.00036, 0.000275, 0.000226, 0.000198,
        0.000183, 0.000176, 0., 0.,
    ],
    [
        0.0513, 0.00998, 0.00312, 0.0013, 0.000663, 0.000394, 0.000264, 0.000194, 0.000155,
        0.000132, 0.000118, 0.000111, 0.000109, 0.,
    ],
    [
        0.0488, 0.00906, 0.0027, 0.00108, 0.00053, 0.000303, 0.000196, 0.00014, 0.000108, 8.89e-05,
        7.77e-05, 7.12e-05, 6.79e-05, 6.71e-05,
    ],
];

/// ClickHouse's best (lowest-rate) hash count for each row, `BEST_HASHES[b - 1]`; row 1 has
/// only one entry and is never chosen.
const CLICKHOUSE_BEST_HASHES: [u32; 20] = [
    1, 1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 8, 9, 10, 10, 11, 12, 12, 13, 14,
];

/// At or above this target ClickHouse answers 2 bits per key, 2 hashes.
const CLICKHOUSE_COARSEST_TARGET: f64 = 0.283;

/// ClickHouse only walks rows 1..=19; row 20 and beyond are our extension.
const CLICKHOUSE_LAST_WALKED_ROW: u32 = 19;

/// Textbook estimate of a Bloom filter's false-positive rate at `b` bits per key and `k` hashes.
pub(crate) fn textbook_rate(bits_per_key: f64, hashes: u32) -> f64 {
    (1.0 - (-(hashes as f64) / bits_per_key).exp()).powi(hashes as i32)
}

/// How fast a Bloom filter's false-positive rate falls per bit per key at its best hash
/// count: about `e^(-b ln²2)` at `b` bits per key.
const RATE_FALL_PER_BIT: f64 = std::f64::consts::LN_2 * std::f64::consts::LN_2;

/// What filter memory is worth: how much `bytes` more (negative: fewer) of filters spread
/// over `keys` keys multiply their false positives by, near the best hash count. The one
/// rule the store's memory governor and the budget's spreading both price filter bits by.
pub fn false_positive_factor(bytes: f64, keys: f64) -> f64 {
    if keys <= 0.0 {
        return 1.0;
    }
    (-RATE_FALL_PER_BIT * 8.0 * bytes / keys).exp()
}

/// False positives per lookup one byte more of filters over `keys` keys saves, for filters
/// that now let `false_positives` through per lookup: the slope of
/// [`false_positive_factor`] at zero.
pub fn false_positives_saved_per_byte(false_positives: f64, keys: f64) -> f64 {
    if keys <= 0.0 {
        return 0.0;
    }
    false_positives * RATE_FALL_PER_BIT * 8.0 / keys
}

/// Bits per key an ideal Bloom filter (best hash count, fractional bits) needs for `rate`.
pub fn ideal_bits_per_key(rate: f64) -> f64 {
    (1.0 / rate).ln() / RATE_FALL_PER_BIT
}

/// The rate of row `b`, hash count `k`: ClickHouse's figure where its table has one, the
/// textbook estimate elsewhere.
fn row_rate(bits_per_key: u32, hashes: u32) -> f64 {
    let (b, k) = (bits_per_key as usize, hashes as usize);
    if b <= CLICKHOUSE_TABLE.len() && k <= CLICKHOUSE_TABLE[0].len() {
        let rate = CLICKHOUSE_TABLE[b - 1][k - 1];
        if rate > 0.0 {
            return rate;
        }
    }
    textbook_rate(bits_per_key as f64, hashes)
}

/// The hash count with the lowest rate in row `b`.
fn best_hashes(bits_per_key: u32) -> u32 {
    if let Some(&k) = CLICKHOUSE_BEST_HASHES.get(bits_per_key as usize - 1) {
        return k;
    }
    (1..=MAX_HASHES)
        .min_by(|&a, &b| row_rate(bits_per_key, a).total_cmp(&row_rate(bits_per_key, b)))
        .unwrap_or(1)
}

/// In row `b`, walk down from the best hash count and keep the fewest hashes whose rate still
/// meets `target`: fewer probes for a rate that is only slightly higher.
fn fewest_hashes_meeting(bits_per_key: u32, target: f64) -> u32 {
    let best = best_hashes(bits_per_key);
    (1..best)
        .rev()
        .find(|&k| row_rate(bits_per_key, k) > target)
        .map_or(1, |k| k + 1)
}

/// Bits per key and hash count for a Bloom filter, with the false-positive rate they predict.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct FilterParams {
    bits_per_key: u32,
    hashes: u32,
    predicted_false_positive_rate: f64,
}

impl FilterParams {
    /// Picks parameters for a target false-positive rate the way ClickHouse's best-practice
    /// table does, extended to 64 bits per key below its reach.
    pub fn for_false_positive_rate(target: f64) -> Result<FilterParams> {
        if !(target > 0.0 && target < 1.0) {
            return Err(FilterError::NotARate(target));
        }
        if target >= CLICKHOUSE_COARSEST_TARGET {
            return Ok(Self::from_row(2, 2));
        }
        let meets = |b: u32| row_rate(b, best_hashes(b)) <= target;
        let clickhouse_row = (2..=CLICKHOUSE_LAST_WALKED_ROW).find(|&b| meets(b));
        let row = clickhouse_row
            .or_else(|| (CLICKHOUSE_LAST_WALKED_ROW + 1..=MAX_BITS_PER_KEY).find(|&b| meets(b)));
        match row {
            Some(b) => Ok(Self::from_row(b, fewest_hashes_meeting(b, target))),
            None => Err(FilterError::UnreachableRate {
                target,
                best: row_rate(MAX_BITS_PER_KEY, best_hashes(MAX_BITS_PER_KEY)),
            }),
        }
    }

    /// Explicit parameters: 1..=64 bits per key and 1..=64 hashes.
    pub fn new(bits_per_key: u32, hashes: u32) -> Result<FilterParams> {
        if !(1..=MAX_BITS_PER_KEY).contains(&bits_per_key) {
            return Err(FilterError::InvalidParams(format!(
                "bits per key must be 1..={MAX_BITS_PER_KEY}, got {bits_per_key}"
            )));
        }
        if !(1..=MAX_HASHES).contains(&hashes) {
            return Err(FilterError::InvalidParams(format!(
                "hash count must be 1..={MAX_HASHES}, got {hashes}"
            )));
        }
        Ok(Self::from_row(bits_per_key, hashes))
    }

    /// Row `bits_per_key` (1..=64) of the table at its best hash count: the lowest rate that
    /// many bits per key give.
    pub(crate) fn best_for_bits(bits_per_key: u32) -> FilterParams {
        Self::from_row(bits_per_key, best_hashes(bits_per_key))
    }

    fn from_row(bits_per_key: u32, hashes: u32) -> FilterParams {
        FilterParams {
            bits_per_key,
            hashes,
            predicted_false_positive_rate: row_rate(bits_per_key, hashes),
        }
    }

    /// Bits of filter per key inserted.
    pub fn bits_per_key(&self) -> u32 {
        self.bits_per_key
    }

    /// Number of bit positions probed per key.
    pub fn hashes(&self) -> u32 {
        self.hashes
    }

    /// The rate these parameters predict for a filter filled to its capacity: ClickHouse's
    /// table figure where the table has one, else `(1 - e^(-k/b))^k`.
    pub fn predicted_false_positive_rate(&self) -> f64 {
        self.predicted_false_positive_rate
    }
}
