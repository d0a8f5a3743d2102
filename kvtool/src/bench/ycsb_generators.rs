//! YCSB's keys and request generators, as its core package defines them
//! (`site.ycsb.workloads.CoreWorkload`, `site.ycsb.generator`, `site.ycsb.Utils`), for
//! `kvtool bench --ycsb` (`ycsb.rs`):
//!
//! - keys: `"user"` and the decimal of the FNV-1a 64-bit hash of the record number
//!   (`insertorder=hashed`, `Utils.fnvhash64`, `CoreWorkload.buildKeyName`);
//! - `ZipfianGenerator`: Gray et al.'s algorithm ("Quickly generating billion-record synthetic
//!   databases", SIGMOD 1994) over items `0..n`, item 0 the most popular, with the zeta
//!   constant computed once and extended as items are inserted;
//! - `ScrambledZipfianGenerator`: a Zipfian over 10^10 items whose draw is hashed (FNV) onto
//!   the records, so the popular records are spread over the key space instead of packed at
//!   its start;
//! - `SkewedLatestGenerator`: a Zipfian over the distance from the newest record, so the
//!   records inserted last are the most popular.

use rand::Rng;

/// FNV-1a's 64-bit offset basis and prime.
const FNV_OFFSET_BASIS_64: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the eight bytes of `value`, lowest first, and the
/// absolute value of the result as a signed 64-bit number (so below 2^63, but for the one
/// hash of `i64::MIN`, which stays 2^63 here as it does as an unsigned number).
pub fn fnvhash64(mut value: u64) -> u64 {
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        hash ^= value & 0xff;
        hash = hash.wrapping_mul(FNV_PRIME_64);
        value >>= 8;
    }
    (hash as i64).unsigned_abs()
}

/// The key of record `keynum`, as YCSB builds it with `insertorder=hashed` and its default
/// `zeropadding=1`: `"user"` and the decimal of its hash, such as `user6284781860667377211`
/// for record 0.
pub fn ycsb_key(keynum: u64) -> Vec<u8> {
    format!("user{}", fnvhash64(keynum)).into_bytes()
}

/// The item count of YCSB's scrambled Zipfian (`ScrambledZipfianGenerator.ITEM_COUNT`).
pub const SCRAMBLED_ITEMS: u64 = 10_000_000_000;

/// Terms of a zeta sum added one by one; past them [`zeta`] adds the rest by the
/// Euler-Maclaurin formula, which is exact to about 1e-12 there.
const EXACT_TERMS: u64 = 1_000_000;

/// `zeta(n, theta)` = the sum of `1 / i^theta` for `i` in `1..=n`, the normalising constant of
/// a Zipfian over `n` items. Summed term by term up to a million terms; beyond, the rest is the
/// Euler-Maclaurin formula's integral and corrections, so that the scrambled Zipfian's 10^10
/// items take no time (YCSB precomputes that one constant for `theta` = 0.99, 26.469...).
pub fn zeta(n: u64, theta: f64) -> f64 {
    if n <= EXACT_TERMS {
        return zeta_between(0, n, theta, 0.0);
    }
    let head = zeta_between(0, EXACT_TERMS, theta, 0.0);
    let (a, b) = (EXACT_TERMS as f64, n as f64);
    let f = |x: f64| x.powf(-theta);
    let f1 = |x: f64| -theta * x.powf(-theta - 1.0);
    let f3 = |x: f64| -theta * (theta + 1.0) * (theta + 2.0) * x.powf(-theta - 3.0);
    let integral = if (theta - 1.0).abs() < 1e-12 {
        (b / a).ln()
    } else {
        (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta)
    };
    // The sum over a+1..=b: the integral from a to b, plus (f(b) - f(a)) / 2, plus the
    // derivative corrections.
    head + integral + (f(b) - f(a)) / 2.0 + (f1(b) - f1(a)) / 12.0 - (f3(b) - f3(a)) / 720.0
}

/// `sum` (zeta over the first `from` items) extended to the first `to` items, term by term.
pub fn zeta_between(from: u64, to: u64, theta: f64, sum: f64) -> f64 {
    let mut sum = sum;
    for i in from..to {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's `ZipfianGenerator`: items `0..items`, item 0 the most popular, `P(i)` proportional
/// to `1 / (i + 1)^theta`. The item count may grow (records inserted during a run): the next
/// draw extends the zeta constant by the new items, as YCSB's does.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta_n: f64,
    zeta_2: f64,
    eta: f64,
}

impl Zipfian {
    /// A Zipfian over `items` items (at least one) with exponent `theta` in (0, 1),
    /// computing its zeta constant (a million terms summed, the rest by formula).
    pub fn new(items: u64, theta: f64) -> Zipfian {
        Zipfian::with_zeta(items, theta, zeta(items, theta))
    }

    /// As [`new`](Self::new), with the zeta constant of `items` given.
    pub fn with_zeta(items: u64, theta: f64, zeta_n: f64) -> Zipfian {
        let items = items.max(1);
        let zeta_2 = zeta_between(0, 2, theta, 0.0);
        let mut zipfian = Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta_n,
            zeta_2,
            eta: 0.0,
        };
        zipfian.eta = zipfian.eta_of(items);
        zipfian
    }

    fn eta_of(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta_2 / self.zeta_n)
    }

    /// An item in `0..items`.
    pub fn next(&mut self, rng: &mut impl Rng) -> u64 {
        self.next_of(self.items, rng)
    }

    /// An item in `0..items`, the item count first grown to `items` if it is more than
    /// before (the zeta constant extended by the new items' terms; a count that shrinks is
    /// ignored, as YCSB's generator ignores it by default). YCSB recomputes `eta` with the
    /// count it was built with; this uses the grown count, as Gray et al.'s formula has it.
    pub fn next_of(&mut self, items: u64, rng: &mut impl Rng) -> u64 {
        if items > self.items {
            self.zeta_n = if items - self.items > EXACT_TERMS {
                zeta(items, self.theta)
            } else {
                zeta_between(self.items, items, self.theta, self.zeta_n)
            };
            self.items = items;
            self.eta = self.eta_of(items);
        }
        let items = self.items;
        let u: f64 = rng.gen();
        let uz = u * self.zeta_n;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(items - 1);
        }
        let item = (items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        item.min(items - 1)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: a Zipfian draw over [`SCRAMBLED_ITEMS`] items, hashed
/// with [`fnvhash64`] onto `0..items`. Which records are popular is spread over the key
/// space, and how popular the most popular are barely depends on the record count.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    zipfian: Zipfian,
    items: u64,
}

impl ScrambledZipfian {
    /// Over records `0..items` (at least one), exponent `theta`: the Zipfian over 10^10 items
    /// takes its zeta constant from [`zeta`] (for 0.99, the 26.469... YCSB precomputes).
    pub fn new(items: u64, theta: f64) -> ScrambledZipfian {
        ScrambledZipfian {
            zipfian: Zipfian::new(SCRAMBLED_ITEMS, theta),
            items: items.max(1),
        }
    }

    /// A record in `0..items`.
    pub fn next(&mut self, rng: &mut impl Rng) -> u64 {
        fnvhash64(self.zipfian.next(rng)) % self.items
    }
}

/// YCSB's `SkewedLatestGenerator`: the newest record the most popular, a Zipfian over the
/// distance back from it.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipfian: Zipfian,
}

impl SkewedLatest {
    /// Over the `records` records there are now (at least one); more may be inserted later.
    pub fn new(records: u64, theta: f64) -> SkewedLatest {
        SkewedLatest {
            zipfian: Zipfian::new(records, theta),
        }
    }

    /// A record in `0..records`, where `records` is how many there are now (at least one):
    /// `records - 1` the most likely. (YCSB draws `max - zipfian(max)` with `max` the
    /// newest record, so never record 0 and never a distance of `max`; this draws every
    /// distance from 0 to the oldest record.)
    pub fn next(&mut self, records: u64, rng: &mut impl Rng) -> u64 {
        let records = records.max(1);
        let back = self.zipfian.next_of(records, rng);
        records - 1 - back.min(records - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn fnv_hashes_as_ycsb_does() {
        // FNV-1a over eight bytes, lowest first; the values a Java `Utils.fnvhash64` gives.
        assert_eq!(fnvhash64(0), 6_284_781_860_667_377_211);
        assert_eq!(fnvhash64(1), 8_517_097_267_634_966_620);
        assert_eq!(fnvhash64(42), 55_488_592_825_689_361);
        assert_eq!(fnvhash64(999_999), 2_744_965_632_448_235_251);
        // The first record's key, the one every YCSB load starts with.
        assert_eq!(ycsb_key(0), b"user6284781860667377211");
        for n in 0..10_000 {
            assert!(fnvhash64(n) < 1 << 63);
        }
    }

    #[test]
    fn zeta_by_formula_matches_the_sum_and_ycsbs_constant() {
        for theta in [0.5, 0.99] {
            let n = 3 * EXACT_TERMS + 17;
            let summed = zeta_between(0, n, theta, 0.0);
            let formula = zeta(n, theta);
            assert!(
                ((summed - formula) / summed).abs() < 1e-12,
                "{theta}: {summed} against {formula}"
            );
        }
        // ScrambledZipfianGenerator.ZETAN, YCSB's precomputed zeta(10^10, 0.99).
        let ycsb = 26.469_028_201_783_02;
        assert!((zeta(SCRAMBLED_ITEMS, 0.99) - ycsb).abs() < 1e-9);
        // Extended item by item, as inserts grow it, zeta agrees with it computed at once.
        let grown = zeta_between(1000, 1500, 0.99, zeta(1000, 0.99));
        assert!((grown - zeta(1500, 0.99)).abs() < 1e-12);
    }

    /// Draws of a Zipfian over 1,000 items: item 0 the most frequent, with about its share
    /// `1 / zeta(1000)`, and shares falling with the rank.
    #[test]
    fn zipfian_draws_item_zero_most_with_its_share() {
        let (items, draws) = (1000u64, 400_000u32);
        let mut rng = SmallRng::seed_from_u64(7);
        let mut zipfian = Zipfian::new(items, 0.99);
        let mut counts = vec![0u32; items as usize];
        for _ in 0..draws {
            counts[zipfian.next(&mut rng) as usize] += 1;
        }
        let share = |i: usize| f64::from(counts[i]) / f64::from(draws);
        let expected = 1.0 / zeta(items, 0.99);
        assert!(
            (share(0) - expected).abs() < 0.01,
            "item 0 drew {} of the draws, expected {expected}",
            share(0)
        );
        assert!(
            counts.iter().all(|&c| c <= counts[0]),
            "{:?}",
            &counts[..10]
        );
        assert!(share(1) > share(10) && share(10) > share(500));
        // P(1) / P(0) = 2^-0.99.
        let ratio = share(1) / share(0);
        assert!((ratio - 0.5f64.powf(0.99)).abs() < 0.03, "{ratio}");
    }

    #[test]
    fn zipfian_grows_with_inserted_items() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut zipfian = Zipfian::new(10, 0.99);
        let mut most = 0;
        for _ in 0..100_000 {
            let item = zipfian.next_of(5000, &mut rng);
            assert!(item < 5000);
            most = most.max(item);
        }
        assert_eq!(zipfian.items, 5000);
        assert!(most > 1000, "draws stayed below {most}");
        assert!((zipfian.zeta_n - zeta(5000, 0.99)).abs() < 1e-12);
    }

    #[test]
    fn scrambled_zipfian_stays_in_range_and_spreads_its_hot_records() {
        let mut rng = SmallRng::seed_from_u64(11);
        for records in [1u64, 2, 7, 1000, 123_457] {
            let mut scrambled = ScrambledZipfian::new(records, 0.99);
            for _ in 0..20_000 {
                assert!(scrambled.next(&mut rng) < records);
            }
        }
        // The hottest records are not the first ones: the hash spreads them.
        let records = 100_000u64;
        let mut scrambled = ScrambledZipfian::new(records, 0.99);
        let mut counts = std::collections::HashMap::new();
        let draws = 200_000;
        for _ in 0..draws {
            *counts.entry(scrambled.next(&mut rng)).or_insert(0u32) += 1;
        }
        let (&hottest, &most) = counts.iter().max_by_key(|(_, &c)| c).unwrap();
        assert_eq!(hottest, fnvhash64(0) % records);
        // Item 0 of 10^10 takes 1 / 26.47 of the draws.
        let share = f64::from(most) / f64::from(draws);
        assert!((share - 1.0 / 26.469).abs() < 0.01, "{share}");
        // Skewed, yet over many records.
        assert!(counts.len() > 20_000, "{} records drawn", counts.len());
    }

    #[test]
    fn skewed_latest_favours_the_newest_records() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut latest = SkewedLatest::new(1000, 0.99);
        let (mut newest, mut recent) = (0, 0);
        let draws = 100_000u32;
        for i in 0..draws {
            // Records keep arriving: the newest moves.
            let records = 1000 + u64::from(i / 100);
            let record = latest.next(records, &mut rng);
            assert!(record < records);
            newest += u32::from(record == records - 1);
            recent += u32::from(record + 100 >= records);
        }
        let share = f64::from(newest) / f64::from(draws);
        assert!(share > 0.1 && share < 0.2, "newest drawn {share}");
        assert!(f64::from(recent) / f64::from(draws) > 0.6);
        let mut one = SkewedLatest::new(1, 0.99);
        assert_eq!(one.next(1, &mut rng), 0);
    }
}
