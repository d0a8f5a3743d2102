//! Which keys a bench's lookups ask for: drawn uniformly over the loaded keys, or skewed by a
//! Zipf law over the key order, so that a few key ranges take most lookups (recent entries of
//! a time series, one busy tenant), as in the workloads a store that spends filter memory
//! where lookups go is meant for.

use rand::rngs::SmallRng;
use rand::Rng;

use super::keys::bench_key;

/// How lookups pick their keys.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// Every loaded key (and every absent one) equally likely.
    Uniform,
    /// The key of rank `r` in key order (0 the smallest) drawn in proportion to
    /// `1 / (r + 1)^s`, with exponent `s`.
    Zipf(f64),
}

impl Distribution {
    /// `uniform` or `zipf:S` (`zipf:0.99`).
    pub fn parse(text: &str) -> Result<Distribution, String> {
        if text == "uniform" {
            return Ok(Distribution::Uniform);
        }
        let exponent = text
            .strip_prefix("zipf:")
            .and_then(|s| s.parse::<f64>().ok())
            .ok_or_else(|| {
                format!("use 'uniform' or 'zipf:S' (such as zipf:0.99), got '{text}'")
            })?;
        if !(exponent > 0.0 && exponent <= 10.0) {
            return Err(format!("a Zipf exponent in (0, 10], got {exponent}"));
        }
        Ok(Distribution::Zipf(exponent))
    }

    pub fn name(&self) -> String {
        match self {
            Distribution::Uniform => "uniform".into(),
            Distribution::Zipf(s) => format!("zipf:{s}"),
        }
    }
}

/// Draws lookup keys over a store of `keys` keys (indexes `0..keys`, each key `bench_key`'s).
pub struct LookupKeys {
    keys: u64,
    zipf: Option<ZipfRanks>,
    /// Under a Zipf law: present keys sorted, a sample of the loaded ones, so that a rank in
    /// key order maps to a key. A bench key is a hash of its index, so the order of the
    /// loaded keys is known only by sorting them; a sample of up to `PRESENT_SAMPLE` keeps
    /// that cheap (at 100M keys, ranks 0..95 share the smallest sampled key).
    sorted_present: Vec<[u8; 16]>,
}

/// The most present keys sorted to map Zipf ranks to keys: 16 MiB.
const PRESENT_SAMPLE: u64 = 1 << 20;

impl LookupKeys {
    pub fn new(keys: u64, distribution: Distribution, rng: &mut SmallRng) -> LookupKeys {
        let zipf = match distribution {
            Distribution::Uniform => None,
            Distribution::Zipf(s) => Some(ZipfRanks::new(keys, s)),
        };
        let sorted_present = match zipf {
            None => Vec::new(),
            Some(_) => {
                let sample = keys.min(PRESENT_SAMPLE);
                let mut sorted: Vec<[u8; 16]> = (0..sample)
                    .map(|i| match sample == keys {
                        true => bench_key(i, true),
                        false => bench_key(rng.gen_range(0..keys), true),
                    })
                    .collect();
                sorted.sort_unstable();
                sorted
            }
        };
        LookupKeys {
            keys,
            zipf,
            sorted_present,
        }
    }

    /// `n` keys, present (loaded) or absent.
    pub fn pick(&self, n: u64, present: bool, rng: &mut SmallRng) -> Vec<[u8; 16]> {
        (0..n).map(|_| self.one(present, rng)).collect()
    }

    fn one(&self, present: bool, rng: &mut SmallRng) -> [u8; 16] {
        let Some(zipf) = &self.zipf else {
            return bench_key(rng.gen_range(0..self.keys), present);
        };
        let rank = zipf.sample(rng);
        match present {
            true => {
                let at = (u128::from(rank) * self.sorted_present.len() as u128
                    / u128::from(self.keys)) as usize;
                self.sorted_present[at.min(self.sorted_present.len() - 1)]
            }
            false => absent_key_at(rank, self.keys, rng),
        }
    }
}

/// A random key where the key of rank `rank` of `keys` (spread evenly over the key space, as
/// bench keys are) sits: in the `rank`-th of `keys` equal slices of the space. It is absent
/// from the loaded keys but for a chance of one in 2^64 per key loaded.
fn absent_key_at(rank: u64, keys: u64, rng: &mut SmallRng) -> [u8; 16] {
    let slice = (1u128 << 64) / u128::from(keys);
    let start = u128::from(rank) * slice;
    let high = (start + rng.gen_range(0..slice.max(1))).min(u128::from(u64::MAX)) as u64;
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&high.to_be_bytes());
    key[8..].copy_from_slice(&rng.gen::<u64>().to_be_bytes());
    key
}

/// Ranks `0..n` drawn by a Zipf law of exponent `s`, by rejection-inversion (Hörmann and
/// Derflinger, 1996): constant time per draw, for any `n`, without a table of `n` weights.
/// Internally ranks are `1..=n`, the law `h(x) = x^-s` and `H` its integral.
struct ZipfRanks {
    n: f64,
    s: f64,
    h_integral_x1: f64,
    h_integral_n: f64,
    /// Below this distance from its rounded rank, a draw is accepted without a test.
    squeeze: f64,
}

impl ZipfRanks {
    fn new(n: u64, s: f64) -> ZipfRanks {
        let mut z = ZipfRanks {
            n: n as f64,
            s,
            h_integral_x1: 0.0,
            h_integral_n: 0.0,
            squeeze: 0.0,
        };
        z.h_integral_x1 = z.h_integral(1.5) - 1.0;
        z.h_integral_n = z.h_integral(z.n + 0.5);
        z.squeeze = 2.0 - z.h_integral_inverse(z.h_integral(2.5) - z.h(2.0));
        z
    }

    fn sample(&self, rng: &mut SmallRng) -> u64 {
        loop {
            let u = self.h_integral_n + rng.gen::<f64>() * (self.h_integral_x1 - self.h_integral_n);
            let x = self.h_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, self.n);
            if k - x <= self.squeeze || u >= self.h_integral(k + 0.5) - self.h(k) {
                return k as u64 - 1;
            }
        }
    }

    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    /// `(x^(1-s) - 1) / (1 - s)`, which is `ln x` at `s = 1`.
    fn h_integral(&self, x: f64) -> f64 {
        let ln_x = x.ln();
        expm1_over_x((1.0 - self.s) * ln_x) * ln_x
    }

    fn h_integral_inverse(&self, x: f64) -> f64 {
        let t = (x * (1.0 - self.s)).max(-1.0);
        (ln1p_over_x(t) * x).exp()
    }
}

/// `(e^x - 1) / x`, 1 at 0.
fn expm1_over_x(x: f64) -> f64 {
    match x.abs() > 1e-8 {
        true => x.exp_m1() / x,
        false => 1.0 + x / 2.0,
    }
}

/// `ln(1 + x) / x`, 1 at 0.
fn ln1p_over_x(x: f64) -> f64 {
    match x.abs() > 1e-8 {
        true => x.ln_1p() / x,
        false => 1.0 - x / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn zeta(n: u64, s: f64) -> f64 {
        (1..=n).map(|k| (k as f64).powf(-s)).sum()
    }

    #[test]
    fn zipf_ranks_follow_the_law() {
        let mut rng = SmallRng::seed_from_u64(7);
        let (n, s, draws) = (1000u64, 0.99, 200_000);
        let z = ZipfRanks::new(n, s);
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        let total = zeta(n, s);
        for rank in [0usize, 1, 9, 99] {
            let expected = ((rank + 1) as f64).powf(-s) / total * draws as f64;
            let got = counts[rank] as f64;
            assert!(
                (got - expected).abs() < 5.0 * expected.sqrt() + 0.01 * expected,
                "rank {rank}: {got} draws, expected {expected:.0}"
            );
        }
        // The top tenth of the ranks takes most draws.
        let top: u64 = counts[..100].iter().sum();
        assert!(top as f64 > 0.6 * draws as f64, "{top}");
    }

    #[test]
    fn zipf_keys_crowd_the_start_of_the_key_space() {
        let mut rng = SmallRng::seed_from_u64(3);
        let keys = LookupKeys::new(1_000_000, Distribution::Zipf(0.99), &mut rng);
        for present in [true, false] {
            let picked = keys.pick(10_000, present, &mut rng);
            let first_hundredth = picked.iter().filter(|k| k[0] < 3).count();
            // Uniform keys would put 1.2% there; a Zipf law over a million keys, about 70%.
            assert!(first_hundredth > 6_000, "{present}: {first_hundredth}");
        }
        let absent = keys.pick(1000, false, &mut rng);
        let present: std::collections::HashSet<[u8; 16]> =
            (0..1_000_000).map(|i| bench_key(i, true)).collect();
        assert!(absent.iter().all(|k| !present.contains(k)));
    }

    #[test]
    fn uniform_keys_are_the_bench_keys() {
        let mut rng = SmallRng::seed_from_u64(3);
        let keys = LookupKeys::new(1000, Distribution::Uniform, &mut rng);
        let loaded: std::collections::HashSet<[u8; 16]> =
            (0..1000).map(|i| bench_key(i, true)).collect();
        assert!(keys
            .pick(100, true, &mut rng)
            .iter()
            .all(|k| loaded.contains(k)));
        assert!(keys
            .pick(100, false, &mut rng)
            .iter()
            .all(|k| !loaded.contains(k)));
    }

    #[test]
    fn distributions_parse() {
        assert_eq!(Distribution::parse("uniform"), Ok(Distribution::Uniform));
        assert_eq!(
            Distribution::parse("zipf:0.99"),
            Ok(Distribution::Zipf(0.99))
        );
        assert!(Distribution::parse("zipf:").is_err());
        assert!(Distribution::parse("zipf:-1").is_err());
        assert!(Distribution::parse("normal").is_err());
    }
}
