//! A log-linear histogram of latencies: every power of two cut into 128 equal buckets, so a
//! percentile read from it is within 0.4% of the latency recorded (exact below 128 ns). Each
//! thread of a run records into a histogram of its own; the run merges them. 60 KiB each,
//! however many operations.

/// Bits of the buckets within one power of two: 2^7 = 128 of them.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets for every value of a `u64`.
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// Latencies in nanoseconds.
#[derive(Clone)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    max: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum: 0,
            max: 0,
        }
    }
}

/// The bucket of `value`.
fn bucket(value: u64) -> usize {
    if value < SUB {
        return value as usize;
    }
    let log = 63 - value.leading_zeros();
    let shift = log - SUB_BITS;
    ((shift as u64 + 1) * SUB + ((value >> shift) - SUB)) as usize
}

/// The lowest value of bucket `index` and its width.
fn bucket_range(index: usize) -> (u64, u64) {
    let index = index as u64;
    if index < SUB {
        return (index, 1);
    }
    let (group, offset) = (index / SUB, index % SUB);
    let shift = group - 1;
    ((SUB + offset) << shift, 1 << shift)
}

impl LatencyHistogram {
    /// Counts one latency of `nanos`.
    pub fn record(&mut self, nanos: u64) {
        self.counts[bucket(nanos)] += 1;
        self.count += 1;
        self.sum += u128::from(nanos);
        self.max = self.max.max(nanos);
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// Latencies counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The latency at quantile `q` (0.5, 0.99, 0.999), in microseconds: the middle of the
    /// bucket holding the `ceil(q * count)`-th smallest; `None` when nothing was counted.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (index, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (low, width) = bucket_range(index);
                let middle = low as f64 + (width - 1) as f64 / 2.0;
                return Some(middle.min(self.max as f64) / 1e3);
            }
        }
        Some(self.max as f64 / 1e3)
    }

    /// The mean latency in microseconds.
    pub fn mean_us(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64 / 1e3)
    }

    /// The longest latency in microseconds.
    pub fn max_us(&self) -> Option<f64> {
        (self.count > 0).then(|| self.max as f64 / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for value in (0..100_000u64).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let index = bucket(value);
            assert!(index < BUCKETS);
            assert!(index >= last, "{value}");
            last = index;
            let (low, width) = bucket_range(index);
            assert!(
                low <= value && value - low < width,
                "{value}: {low} {width}"
            );
            // Buckets are at most 1/128 of their values wide.
            assert!(width == 1 || width * SUB <= low, "{value}");
        }
    }

    #[test]
    fn quantiles_are_within_a_bucket_of_the_exact_ones() {
        let mut h = LatencyHistogram::default();
        assert_eq!(h.quantile_us(0.5), None);
        // 1 us to 100 ms, one each.
        let values: Vec<u64> = (1..=100_000u64).map(|i| i * 1000).collect();
        let mut halves = (LatencyHistogram::default(), LatencyHistogram::default());
        for (i, &v) in values.iter().enumerate() {
            h.record(v);
            if i % 2 == 0 {
                halves.0.record(v);
            } else {
                halves.1.record(v);
            }
        }
        halves.0.merge(&halves.1);
        for (q, exact) in [(0.5, 50_000.0), (0.99, 99_000.0), (0.999, 99_900.0)] {
            let got = h.quantile_us(q).unwrap();
            assert!(
                (got - exact).abs() / exact < 0.005,
                "{q}: {got} against {exact}"
            );
            assert_eq!(halves.0.quantile_us(q), Some(got));
        }
        assert_eq!(h.count(), 100_000);
        assert_eq!(h.max_us(), Some(100_000.0));
        assert!((h.mean_us().unwrap() - 50_000.5).abs() < 1e-6);
        let mut one = LatencyHistogram::default();
        one.record(42);
        assert_eq!(one.quantile_us(0.999), Some(0.042));
    }
}
