//! When sequence numbers were written, roughly: samples of (sequence number, time) that bound
//! from above the time each write was made, so that entries can expire a while after they
//! were written (`Options::ttl`) without a time stored in each of them.
//!
//! A sample `(s, t)` says every write numbered `s` or below was made by time `t`. An entry
//! numbered `n` was then written by the time of the first sample at or above `n`: it expires
//! once that time plus the time to live has passed. The bound is never early, and late by at
//! most the gap between samples (a second while writes come; a sample is also taken when one
//! is asked for and writes were made since the last). Entries written after the last sample
//! never expire until a sample covers them.
//!
//! Samples live in memory, go to the manifest with each flush (the tables it writes hold only
//! writes the samples cover), and are thinned to [`MAX_SAMPLES`]: dropping a sample moves
//! some entries' bound to a later sample, which keeps it a bound from above.

use crate::entry::SeqNo;

/// Samples kept at most; past it every other sample of the older half goes.
pub const MAX_SAMPLES: usize = 1024;

/// The seconds between samples while writes come.
const SAMPLE_EVERY_SECS: u64 = 1;

/// Samples, ascending in both sequence number and time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeqTimes {
    samples: Vec<(SeqNo, u64)>,
    /// How many of `samples` the manifest holds already.
    persisted: usize,
}

impl SeqTimes {
    /// Samples as a manifest recorded them (all persisted), but those above `last_seq`, the
    /// last write recovered: a sample may be of writes a power loss took from the log, and
    /// would tell the writes that take their numbers again wrong times.
    pub fn recovered(mut samples: Vec<(SeqNo, u64)>, last_seq: SeqNo) -> SeqTimes {
        samples.retain(|&(seq, _)| seq <= last_seq);
        samples.sort_unstable();
        samples.dedup_by_key(|s| s.0);
        let mut times = SeqTimes {
            samples,
            persisted: 0,
        };
        times.thin();
        times.persisted = times.samples.len();
        times
    }

    /// Notes that every write up to `seq` was made by `now` (seconds since the Unix epoch),
    /// when the last sample is a second old or more and covers less.
    pub fn note(&mut self, seq: SeqNo, now: u64) {
        match self.samples.last() {
            Some(&(last_seq, last_time))
                if last_seq >= seq || now < last_time + SAMPLE_EVERY_SECS => {}
            _ => {
                self.samples.push((seq, now));
                self.thin();
            }
        }
    }

    /// The first sequence number not known to be expired under a time to live of `ttl_secs`
    /// at `now`: every entry numbered below it was written `ttl_secs` or more ago. 0 when
    /// none is known to be.
    pub fn expired_below(&self, ttl_secs: u64, now: u64) -> SeqNo {
        let Some(written_by) = now.checked_sub(ttl_secs) else {
            return 0;
        };
        // The last sample taken at or before `written_by`: everything up to its number was.
        let at = self.samples.partition_point(|&(_, t)| t <= written_by);
        match at.checked_sub(1) {
            Some(i) => self.samples[i].0.saturating_add(1),
            None => 0,
        }
    }

    /// The samples the manifest does not hold yet, marked as held.
    pub fn take_unpersisted(&mut self) -> Vec<(SeqNo, u64)> {
        let new = self.samples[self.persisted.min(self.samples.len())..].to_vec();
        self.persisted = self.samples.len();
        new
    }

    /// Every sample (what a manifest written whole records).
    pub fn all(&self) -> &[(SeqNo, u64)] {
        &self.samples
    }

    /// Past [`MAX_SAMPLES`], drops every other sample of the older half.
    fn thin(&mut self) {
        if self.samples.len() <= MAX_SAMPLES {
            return;
        }
        let half = self.samples.len() / 2;
        let mut i = 0;
        self.samples.retain(|_| {
            i += 1;
            i > half || i % 2 == 0
        });
        // Which survivors the manifest holds is no longer a prefix: all are written again.
        self.persisted = 0;
    }
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_the_first_sample_that_covers_them() {
        let mut times = SeqTimes::default();
        times.note(10, 1000);
        times.note(20, 1000); // within the second: no sample
        times.note(30, 1005);
        times.note(40, 1010);
        // A ttl of 100: at 1099 nothing is known to be 100 seconds old.
        assert_eq!(times.expired_below(100, 1099), 0);
        // At 1100 the writes up to 10 are.
        assert_eq!(times.expired_below(100, 1100), 11);
        // Writes 11..=30 were made by 1005.
        assert_eq!(times.expired_below(100, 1105), 31);
        assert_eq!(times.expired_below(100, 5000), 41);
        assert_eq!(times.expired_below(u64::MAX, 5000), 0);
    }

    #[test]
    fn thinning_keeps_bounds_from_above() {
        let mut times = SeqTimes::default();
        for i in 0..3 * MAX_SAMPLES as u64 {
            times.note(i * 10 + 10, 1000 + i);
        }
        assert!(times.all().len() <= MAX_SAMPLES);
        // Never early: at each moment, what is called expired was written ttl ago.
        for now in (1100..1100 + 3 * MAX_SAMPLES as u64).step_by(37) {
            let below = times.expired_below(100, now);
            // Write numbered n was made by 1000 + (ceil(n / 10) - 1).
            if below > 0 {
                let last_expired = below - 1;
                let written = 1000 + last_expired.div_ceil(10).saturating_sub(1);
                assert!(
                    written + 100 <= now,
                    "{last_expired} written at {written}, now {now}"
                );
            }
        }
        assert!(times.expired_below(100, 1000 + 3 * MAX_SAMPLES as u64 + 100) > 0);
    }

    #[test]
    fn unpersisted_samples_are_handed_out_once() {
        let mut times = SeqTimes::recovered(vec![(5, 100), (1, 90), (20, 120)], 10);
        assert_eq!(times.all(), &[(1, 90), (5, 100)]);
        assert!(times.take_unpersisted().is_empty());
        times.note(9, 101);
        assert_eq!(times.take_unpersisted(), vec![(9, 101)]);
        assert!(times.take_unpersisted().is_empty());
    }
}
