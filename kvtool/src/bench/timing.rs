//! Timing a run of lookups: gets per second and latency percentiles, for bloomkv and the peer
//! stores alike.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{progress, Failure};

/// How fast a run of lookups went, and what I/O it did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    pub lookups: u64,
    pub gets_per_second: f64,
    pub p50: Duration,
    pub p99: Duration,
    /// The I/O of the thread that ran the lookups, over the run (Linux only).
    pub io: Option<IoCounts>,
}

impl Timing {
    pub fn to_json(self) -> serde_json::Value {
        let per_get = |n: Option<u64>| n.map(|n| n as f64 / self.lookups.max(1) as f64);
        let io = self.io.unwrap_or_default();
        json!({
            "lookups": self.lookups,
            "gets_per_second": self.gets_per_second,
            "p50_us": self.p50.as_secs_f64() * 1e6,
            "p99_us": self.p99.as_secs_f64() * 1e6,
            "read_calls_per_get": per_get(io.read_calls),
            "device_read_bytes_per_get": per_get(io.device_read_bytes),
            "device_reads_per_get": per_get(io.device_reads),
        })
    }
}

/// I/O counted over a run of lookups. The first two are the lookup thread's own
/// (`/proc/thread-self/io`: read-family system calls, and bytes the device was asked for on
/// its behalf, which page-cache hits do not count); `device_reads` is every read the store's
/// block device completed (its `stat` in sysfs), background work included, so it describes
/// the lookups only when nothing else reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoCounts {
    pub read_calls: Option<u64>,
    pub device_read_bytes: Option<u64>,
    pub device_reads: Option<u64>,
}

impl IoCounts {
    /// The counts now.
    pub fn now() -> IoCounts {
        let thread = std::fs::read_to_string("/proc/thread-self/io").unwrap_or_default();
        let field = |name: &str| {
            thread
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
        };
        IoCounts {
            read_calls: field("syscr"),
            device_read_bytes: field("read_bytes"),
            device_reads: device_reads_completed(),
        }
    }

    /// What happened between `earlier` and `self`.
    pub fn since(self, earlier: IoCounts) -> IoCounts {
        let delta = |a: Option<u64>, b: Option<u64>| Some(a?.saturating_sub(b?));
        IoCounts {
            read_calls: delta(self.read_calls, earlier.read_calls),
            device_read_bytes: delta(self.device_read_bytes, earlier.device_read_bytes),
            device_reads: delta(self.device_reads, earlier.device_reads),
        }
    }
}

/// The sysfs `stat` file of the block device that holds the store, once
/// [`watch_device_of`] has found it.
static DEVICE_STAT: OnceLock<PathBuf> = OnceLock::new();

/// Counts, from now on, the reads of the block device that holds `dir` (a directory that
/// exists). Where the device has no sysfs entry (an overlay, a network file system), device
/// reads are not reported.
pub fn watch_device_of(dir: &Path) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let Ok(meta) = std::fs::metadata(dir) else {
            return;
        };
        let dev = meta.dev();
        let stat = PathBuf::from(format!(
            "/sys/dev/block/{}:{}/stat",
            libc::major(dev),
            libc::minor(dev)
        ));
        if stat.exists() {
            let _ = DEVICE_STAT.set(stat);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = dir;
}

/// Reads completed by the watched device: the first field of its sysfs `stat`.
fn device_reads_completed() -> Option<u64> {
    let text = std::fs::read_to_string(DEVICE_STAT.get()?).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Times `get` over `keys`, checking each answer (found or not) is `present`, with a progress
/// bar on stderr.
pub fn time_lookups<K: AsRef<[u8]>>(
    keys: &[K],
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
    let io_before = IoCounts::now();
    let started = Instant::now();
    for (i, key) in keys.iter().enumerate() {
        let t = Instant::now();
        let found = get(key.as_ref()).map_err(Failure::from)?;
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
    let io = IoCounts::now().since(io_before);
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
        io: Some(io),
    })
}
