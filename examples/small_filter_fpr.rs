//! The false-positive rate of small filters with many hashes, measured against the textbook
//! rate `(1 - e^(-k n / m))^k` that `FilterParams::predicted_false_positive_rate` gives.
//!
//! A store's upper levels hold small tables (hundreds of keys) that a filter budget gives 15 to
//! 20 bits per key and 10 to 14 hashes. For each of several rows, this builds many filters of
//! 640 keys, and a few of 100,000, probes each with keys it does not hold (20M probes per row
//! and size in all), and prints the predicted and the measured rate side by side.
//!
//!     cargo run --release --example small_filter_fpr

use bloomkv::filter::{BloomFilter, FilterParams};

const PROBES: u64 = 20_000_000;

fn main() {
    for bits in [10u32, 14, 17, 18, 20] {
        let params = best_row(bits);
        for keys in [640u64, 100_000] {
            let filters = (4_000_000 / keys).max(1);
            let (mut false_positives, mut probes) = (0u64, 0u64);
            for f in 0..filters {
                let mut filter = BloomFilter::new(params, keys);
                for i in 0..keys {
                    filter.insert(format!("key{f}-{i}").as_bytes());
                }
                for j in 0..PROBES / filters {
                    probes += 1;
                    false_positives +=
                        u64::from(filter.contains(format!("absent{f}-{j}").as_bytes()));
                }
            }
            let predicted = params.predicted_false_positive_rate();
            let measured = false_positives as f64 / probes as f64;
            println!(
                "{bits} bits/key, {} hashes, {keys:>6} keys a filter: predicted {predicted:.6}, measured {measured:.6} ({:+.0}%; {false_positives} false positives)",
                params.hashes(),
                100.0 * (measured / predicted - 1.0),
            );
        }
    }
}

/// The row's hash count with the lowest predicted rate, as the store picks it.
fn best_row(bits: u32) -> FilterParams {
    (1..=30)
        .filter_map(|k| FilterParams::new(bits, k).ok())
        .min_by(|a, b| {
            let rate = |p: &FilterParams| p.predicted_false_positive_rate();
            rate(a).total_cmp(&rate(b))
        })
        .expect("some hash count fits every row")
}
