//! Timing a run of lookups: gets per second and latency percentiles, for bloomkv and the peer
//! stores alike.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::{progress, Failure};

/// How fast a run of lookups went.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    pub lookups: u64,
    pub gets_per_second: f64,
    pub p50: Duration,
    pub p99: Duration,
}

impl Timing {
    pub fn to_json(self) -> serde_json::Value {
        json!({
            "lookups": self.lookups,
            "gets_per_second": self.gets_per_second,
            "p50_us": self.p50.as_secs_f64() * 1e6,
            "p99_us": self.p99.as_secs_f64() * 1e6,
        })
    }
}

/// Times `get` over `keys`, checking each answer (found or not) is `present`, with a progress
/// bar on stderr.
pub fn time_lookups(
    keys: &[[u8; 16]],
    present: bool,
    mut get: impl FnMut(&[u8]) -> Result<bool, String>,
) -> Result<Timing, Failure> {
    let what = if present {
        "present keys"
    } else {
        "absent keys"
    };
    let bar = progress::bar(keys.len() as u64, what);
    let mut latencies = Vec::with_capacity(keys.len());
    let started = Instant::now();
    for (i, key) in keys.iter().enumerate() {
        let t = Instant::now();
        let found = get(key).map_err(Failure::from)?;
        latencies.push(t.elapsed());
        if found != present {
            return Err(Failure::from(format!(
                "lookup {i} answered {}found",
                if present { "not " } else { "" }
            )));
        }
        if i % 4096 == 0 {
            bar.set_position(i as u64);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    latencies.sort_unstable();
    let percentile = |q: f64| {
        latencies
            .get(((latencies.len().max(1) - 1) as f64 * q) as usize)
            .copied()
            .unwrap_or_default()
    };
    Ok(Timing {
        lookups: keys.len() as u64,
        gets_per_second: keys.len() as f64 / elapsed.max(1e-9),
        p50: percentile(0.5),
        p99: percentile(0.99),
    })
}
