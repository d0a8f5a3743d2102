//! The measured false-positive rate of a filter filled to capacity, over a million absent keys,
//! against the rate its parameters predict.
//!
//! `cargo test --test filters filter_fpr:: -- --nocapture` prints the measured figures.

use bloomkv::filter::{BlockedBloomFilter, BloomFilter};

const KEYS: u64 = 1_000_000;
const PROBES: u64 = 1_000_000;
/// Largest accepted relative gap between the measured and the predicted rate.
const TOLERANCE: f64 = 0.15;

/// Distinct deterministic keys: a tag byte (present or absent set) and the index.
fn key(tag: u8, i: u64) -> [u8; 9] {
    let mut k = [tag; 9];
    k[1..].copy_from_slice(&i.to_le_bytes());
    k
}

fn measure(target: f64) -> (f64, f64) {
    let mut filter = BloomFilter::with_capacity(KEYS, target).unwrap();
    for i in 0..KEYS {
        filter.insert(&key(b'p', i));
    }
    assert!(!filter.is_over_capacity());
    let measured = absent_rate(PROBES, |k| filter.contains(k));
    let predicted = filter.params().predicted_false_positive_rate();
    println!(
        "target {target}: {} bits/key, {} hashes, predicted {predicted}, measured {measured} \
         over {PROBES} absent keys",
        filter.bits_per_key(),
        filter.hashes()
    );
    (measured, predicted)
}

/// The share of `probes` absent keys that `contains` answers "maybe" for.
fn absent_rate(probes: u64, contains: impl Fn(&[u8]) -> bool) -> f64 {
    let false_positives = (0..probes).filter(|&i| contains(&key(b'a', i))).count();
    false_positives as f64 / probes as f64
}

fn check(target: f64) {
    let (measured, predicted) = measure(target);
    assert_within(&format!("target {target}"), measured, predicted, TOLERANCE);
}

/// `measured` within `tolerance` of `predicted`, relative to it.
fn assert_within(what: &str, measured: f64, predicted: f64, tolerance: f64) {
    let gap = (measured - predicted).abs() / predicted;
    assert!(
        gap <= tolerance,
        "{what}: measured {measured}, predicted {predicted} ({:.1}% apart)",
        gap * 100.0
    );
}

#[test]
fn measured_rate_at_one_in_ten() {
    check(0.1);
}

#[test]
fn measured_rate_at_one_in_a_hundred() {
    check(0.01);
}

#[test]
fn measured_rate_at_one_in_a_thousand() {
    check(0.001);
}

#[test]
fn an_overfilled_filter_exceeds_its_prediction() {
    // Twice the keys it was sized for: the rate must be well above the prediction, and the
    // filter must say it is over capacity.
    let mut filter = BloomFilter::with_capacity(50_000, 0.01).unwrap();
    for i in 0..100_000 {
        filter.insert(&key(b'p', i));
    }
    assert!(filter.is_over_capacity());
    let hits = (0..200_000)
        .filter(|&i| filter.contains(&key(b'a', i)))
        .count();
    let measured = hits as f64 / 200_000.0;
    assert!(measured > 5.0 * 0.00943, "measured {measured}");
    let expected = filter.expected_false_positive_rate();
    assert!(
        (measured - expected).abs() / expected < 0.15,
        "{measured} vs {expected}"
    );
}

/// The cache-local layout's measured rate over `probes` absent keys, filled to capacity,
/// against [`BlockedParams`]' prediction: within `tolerance` (5%; the probes are enough that
/// counting noise is a quarter of it or less).
fn check_blocked(target: f64, probes: u64, tolerance: f64) {
    let mut filter = BlockedBloomFilter::with_capacity(KEYS, target).unwrap();
    for i in 0..KEYS {
        filter.insert(&key(b'p', i));
    }
    let measured = absent_rate(probes, |k| filter.contains(k));
    let predicted = filter.params().predicted_false_positive_rate();
    println!(
        "blocked, target {target}: {} bits/key, {} hashes, predicted {predicted}, measured \
         {measured} over {probes} absent keys",
        filter.bits_per_key(),
        filter.hashes()
    );
    assert!(predicted <= target);
    assert_within(
        &format!("blocked, target {target}"),
        measured,
        predicted,
        tolerance,
    );
}

#[test]
fn blocked_layout_measured_rate_at_one_in_a_hundred() {
    check_blocked(0.01, 4_000_000, 0.05);
}

#[test]
fn blocked_layout_measured_rate_at_one_in_a_thousand() {
    check_blocked(0.001, 20_000_000, 0.05);
}

#[test]
fn blocked_layout_measured_rate_at_one_in_ten_thousand() {
    check_blocked(0.0001, 100_000_000, 0.05);
}
