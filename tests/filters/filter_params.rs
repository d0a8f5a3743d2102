//! `FilterParams::for_false_positive_rate` against ClickHouse's published pairs, against an
//! independent implementation of ClickHouse's selection rule over its table (a copy of which is
//! in `tests/data/`), and below the table's reach, where bloomkv extends the rule.

use std::collections::BTreeMap;

use bloomkv::filter::{FilterError, FilterParams, MAX_BITS_PER_KEY, MAX_HASHES};

/// The smallest rate ClickHouse's walk (rows 1..=19) can meet: row 19, 13 hashes.
const TABLE_REACH: f64 = 0.000109;

/// ClickHouse's table: (bits per key, hashes) -> rate.
fn clickhouse_table() -> BTreeMap<(u32, u32), f64> {
    let text = include_str!("../data/clickhouse-probability-table.tsv");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("bits_per_key\thashes\tfalse_positive_rate")
    );
    let table: BTreeMap<(u32, u32), f64> = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 3, "bad line {l:?}");
            (
                (f[0].parse().unwrap(), f[1].parse().unwrap()),
                f[2].parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(table.len(), 157);
    table
}

fn row(table: &BTreeMap<(u32, u32), f64>, b: u32) -> Vec<(u32, f64)> {
    table
        .range((b, 0)..(b + 1, 0))
        .map(|(&(_, k), &r)| (k, r))
        .collect()
}

/// The hash count with the lowest rate in row `b` (the first one on a tie).
fn best_in_row(table: &BTreeMap<(u32, u32), f64>, b: u32) -> (u32, f64) {
    row(table, b)
        .into_iter()
        .min_by(|x, y| x.1.total_cmp(&y.1))
        .unwrap()
}

/// ClickHouse's rule, written from its description, for targets in its table's reach.
fn clickhouse_choice(table: &BTreeMap<(u32, u32), f64>, p: f64) -> Option<(u32, u32)> {
    if p >= 0.283 {
        return Some((2, 2));
    }
    for b in 1..=19 {
        let (best_k, best_rate) = best_in_row(table, b);
        if best_rate <= p {
            let mut k = best_k;
            while k > 1 && table[&(b, k - 1)] <= p {
                k -= 1;
            }
            return Some((b, k));
        }
    }
    None
}

fn choice(p: f64) -> (u32, u32) {
    let params = FilterParams::for_false_positive_rate(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    (params.bits_per_key(), params.hashes())
}

fn next_up(x: f64) -> f64 {
    f64::from_bits(x.to_bits() + 1)
}

fn next_down(x: f64) -> f64 {
    f64::from_bits(x.to_bits() - 1)
}

#[test]
fn clickhouse_reference_pairs() {
    assert_eq!(choice(0.001), (15, 7));
    assert_eq!(choice(0.025), (8, 4));
    assert_eq!(choice(0.05), (7, 3));
    assert_eq!(choice(0.1), (5, 3));
    assert_eq!(choice(0.2), (4, 2));
    for p in [0.283, 0.3, 0.5, 0.9, 0.999_999] {
        assert_eq!(choice(p), (2, 2), "target {p}");
    }
    let one_percent = FilterParams::for_false_positive_rate(0.01).unwrap();
    assert_eq!((one_percent.bits_per_key(), one_percent.hashes()), (10, 5));
    assert_eq!(one_percent.predicted_false_positive_rate(), 0.00943);
}

#[test]
fn best_hash_count_per_row_matches_clickhouse() {
    let table = clickhouse_table();
    let best: Vec<u32> = (2..=20).map(|b| best_in_row(&table, b).0).collect();
    assert_eq!(
        best,
        [1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 8, 9, 10, 10, 11, 12, 12, 13, 14]
    );
}

#[test]
fn predicted_rate_is_the_table_figure_within_the_table() {
    let table = clickhouse_table();
    for (&(b, k), &rate) in &table {
        let params = FilterParams::new(b, k).unwrap();
        assert_eq!(params.predicted_false_positive_rate(), rate, "({b}, {k})");
    }
}

#[test]
fn choice_matches_clickhouse_rule_over_a_dense_grid() {
    let table = clickhouse_table();
    let mut targets = Vec::new();
    // Log-spaced from the table's reach up to 0.999.
    let (lo, hi) = (TABLE_REACH.ln(), 0.999f64.ln());
    let steps = 20_000;
    for i in 0..=steps {
        targets.push((lo + (hi - lo) * i as f64 / steps as f64).exp());
    }
    // Every table value, and the neighbours on either side of it.
    for &rate in table.values() {
        targets.extend([rate, next_up(rate), next_down(rate), rate * 1.000_001]);
        targets.push(rate * 0.999_999);
    }
    let mut compared = 0;
    for p in targets {
        if !(TABLE_REACH..1.0).contains(&p) {
            continue;
        }
        let expected = clickhouse_choice(&table, p).expect("within the table's reach");
        assert_eq!(choice(p), expected, "target {p:e}");
        compared += 1;
    }
    assert!(compared > 20_000, "only {compared} targets compared");
}

#[test]
fn choice_meets_the_target_within_the_table() {
    for i in 0..=2_000 {
        let p = TABLE_REACH * (0.999 / TABLE_REACH).powf(i as f64 / 2_000.0);
        let params = FilterParams::for_false_positive_rate(p).unwrap();
        if p < 0.283 {
            assert!(params.predicted_false_positive_rate() <= p, "target {p:e}");
        }
    }
}

/// Below the table's reach: the first row (20..=64) whose best rate meets the target, the
/// fewest hashes in it that meet the target, or `UnreachableRate` when 64 bits cannot.
#[test]
fn extension_below_the_table_reach() {
    let best_at = |b: u32| {
        (1..=MAX_HASHES)
            .map(|k| {
                FilterParams::new(b, k)
                    .unwrap()
                    .predicted_false_positive_rate()
            })
            .fold(f64::INFINITY, f64::min)
    };
    let floor = best_at(MAX_BITS_PER_KEY);
    let mut targets: Vec<f64> = (0..=3_000)
        .map(|i| TABLE_REACH * (1e-16f64 / TABLE_REACH).powf(i as f64 / 3_000.0))
        .collect();
    targets.extend([next_down(TABLE_REACH), 0.0001, 6.71e-5, next_down(6.71e-5)]);
    targets.sort_by(|a, b| b.total_cmp(a));
    let mut previous_bits = 0;
    let (mut met, mut unreachable) = (0, 0);
    for p in targets {
        if p >= TABLE_REACH {
            continue;
        }
        match FilterParams::for_false_positive_rate(p) {
            Ok(params) => {
                let (b, k) = (params.bits_per_key(), params.hashes());
                assert!(params.predicted_false_positive_rate() <= p, "target {p:e}");
                assert!(
                    (20..=MAX_BITS_PER_KEY).contains(&b),
                    "target {p:e}: {b} bits"
                );
                assert!((1..=MAX_HASHES).contains(&k), "target {p:e}: {k} hashes");
                // The first row that can meet the target...
                if b > 20 {
                    assert!(
                        best_at(b - 1) > p,
                        "target {p:e}: row {} also meets it",
                        b - 1
                    );
                }
                // ...with the fewest hashes that meet it.
                if k > 1 {
                    let fewer = FilterParams::new(b, k - 1).unwrap();
                    assert!(fewer.predicted_false_positive_rate() > p, "target {p:e}");
                }
                assert!(b >= previous_bits, "bits per key fell as the target fell");
                previous_bits = b;
                met += 1;
            }
            Err(FilterError::UnreachableRate { target, best }) => {
                assert_eq!(target, p);
                assert!(floor > p, "target {p:e} is reachable at 64 bits per key");
                assert_eq!(best, floor);
                unreachable += 1;
            }
            Err(e) => panic!("target {p:e}: unexpected error {e}"),
        }
    }
    assert!(
        met > 1_000 && unreachable > 100,
        "{met} met, {unreachable} unreachable"
    );
    assert!(matches!(
        FilterParams::for_false_positive_rate(1e-20),
        Err(FilterError::UnreachableRate { .. })
    ));
}

#[test]
fn targets_that_are_not_rates_are_errors() {
    for p in [
        f64::NAN,
        0.0,
        -0.0,
        -0.01,
        1.0,
        1.5,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        match FilterParams::for_false_positive_rate(p) {
            Err(FilterError::NotARate(got)) => {
                assert!(got.to_bits() == p.to_bits() || (got.is_nan() && p.is_nan()))
            }
            other => panic!("target {p}: expected NotARate, got {other:?}"),
        }
    }
}

#[test]
fn explicit_params_are_validated() {
    for (b, k) in [(0, 5), (65, 5), (10, 0), (10, 65), (0, 0), (u32::MAX, 1)] {
        assert!(
            matches!(FilterParams::new(b, k), Err(FilterError::InvalidParams(_))),
            "({b}, {k}) accepted"
        );
    }
    for (b, k) in [(1, 1), (64, 64), (10, 5), (64, 1), (1, 64)] {
        let params = FilterParams::new(b, k).unwrap();
        assert_eq!((params.bits_per_key(), params.hashes()), (b, k));
        let rate = params.predicted_false_positive_rate();
        assert!(rate > 0.0 && rate <= 1.0, "({b}, {k}): {rate}");
    }
    // Outside the table the prediction is the textbook estimate.
    let p = FilterParams::new(30, 20)
        .unwrap()
        .predicted_false_positive_rate();
    let textbook = (1.0 - (-20.0f64 / 30.0).exp()).powi(20);
    assert!((p - textbook).abs() < 1e-15, "{p} against {textbook}");
}
