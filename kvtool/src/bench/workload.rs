//! What every bench loads and asks for, the same for every setting and every store: the keys
//! and values, the lookup keys, and the loading of bloomkv with its timeline sampled, then the
//! wait for its compactions.

use std::time::{Duration, Instant};

use bloomkv::{Db, Options, WriteBatch};
use indicatif::ProgressBar;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde_json::json;

use super::args::{BenchArgs, Values};
use super::keys::{bench_key, splitmix};
use super::lookup_keys::LookupKeys;
use super::scans::grouped_key;
use crate::{progress, Failure};

/// The keys loaded and looked up: the same for every setting and every peer store. Keys and
/// values are made on the fly from their index, so a load of 100M keys holds nothing in
/// memory but the lookup keys.
pub struct Workload {
    /// Keys loaded: indexes `0..keys`, whose keys are spread over the key space in random order.
    pub keys: u64,
    pub values: Values,
    pub value_size: usize,
    pub cold_present: Vec<[u8; 16]>,
    pub cold_absent: Vec<[u8; 16]>,
    pub warm_present: Vec<[u8; 16]>,
    pub warm_absent: Vec<[u8; 16]>,
    pub mmap_reads: bool,
    /// bloomkv's memtable size, smallest level target and table size, when not the defaults.
    pub memtable_size: Option<u64>,
    pub level1_size: Option<u64>,
    pub table_size: Option<u64>,
    /// Keys loaded last, after compactions settle, each share flushed into a level-0 table of
    /// its own (`--level0-tables`).
    pub level0_tables: u64,
    pub level0_keys_each: u64,
    /// Puts per write while loading (`--load-batch`).
    pub load_batch: u64,
    /// With `--prefix-scans`: keys come in groups of this many that share their first eight
    /// bytes (`scans::grouped_key`).
    pub keys_per_prefix: Option<u64>,
}

impl Workload {
    pub fn new(args: &BenchArgs) -> Workload {
        let mut rng = SmallRng::seed_from_u64(args.seed ^ 0x5eed);
        let keys = LookupKeys::new(args.keys, args.distribution, &mut rng);
        let mut pick = |n: u64, present: bool| keys.pick(n, present, &mut rng);
        Workload {
            cold_present: pick(args.cold_lookups, true),
            cold_absent: pick(args.cold_lookups, false),
            warm_present: pick(args.lookups, true),
            warm_absent: pick(args.lookups, false),
            keys: args.keys,
            values: args.values,
            value_size: args.value_size,
            mmap_reads: args.mmap_reads,
            memtable_size: args.memtable_size,
            level1_size: args.level1_size,
            table_size: args.table_size,
            level0_tables: args.level0_tables,
            level0_keys_each: memtable_keys(args),
            load_batch: args.load_batch,
            keys_per_prefix: args.prefix_scans.then_some(args.keys_per_prefix),
        }
    }

    /// The workload of `--writes`: the keys and values to load, and no lookups.
    pub fn writes_only(args: &BenchArgs) -> Workload {
        Workload {
            keys: args.keys,
            values: args.values,
            value_size: args.value_size,
            cold_present: Vec::new(),
            cold_absent: Vec::new(),
            warm_present: Vec::new(),
            warm_absent: Vec::new(),
            mmap_reads: false,
            memtable_size: None,
            level1_size: None,
            table_size: None,
            level0_tables: 0,
            level0_keys_each: 0,
            load_batch: 1,
            keys_per_prefix: None,
        }
    }

    /// The key loaded `i`-th.
    pub fn key(&self, i: u64) -> [u8; 16] {
        match self.keys_per_prefix {
            None => bench_key(i, true),
            Some(per_prefix) => grouped_key(i, per_prefix),
        }
    }

    /// The value of the key loaded `i`-th: deterministic, so every store gets the same bytes.
    pub fn value(&self, i: u64) -> Vec<u8> {
        let random_len = match self.values {
            Values::Random => self.value_size,
            Values::Compressible => self.value_size / 2,
            Values::Repeated => 0,
            Values::Records => return record_value(i, self.value_size),
        };
        let mut value = Vec::with_capacity(self.value_size);
        let mut state = splitmix(i ^ 0x7a1e_5eed);
        while value.len() < random_len {
            state = splitmix(state);
            let take = (random_len - value.len()).min(8);
            value.extend_from_slice(&state.to_le_bytes()[..take]);
        }
        value.resize(self.value_size, b'v');
        value
    }

    /// The load, in batches of `load_batch` (key, value) pairs, keys in random order.
    #[cfg(feature = "peers")]
    pub fn batches(&self) -> impl Iterator<Item = Vec<([u8; 16], Vec<u8>)>> + '_ {
        self.batches_of(0..self.keys)
    }

    /// The keys loaded `indexes`-th, in batches of `load_batch`.
    fn batches_of(
        &self,
        indexes: std::ops::Range<u64>,
    ) -> impl Iterator<Item = Vec<([u8; 16], Vec<u8>)>> + '_ {
        let size = self.load_batch.max(1);
        let batches = (indexes.end - indexes.start).div_ceil(size);
        (0..batches).map(move |b| {
            let from = indexes.start + b * size;
            (from..(from + size).min(indexes.end))
                .map(|i| (self.key(i), self.value(i)))
                .collect()
        })
    }
}

/// A JSON-like record of `size` bytes for the key loaded `i`-th: a few named fields, then
/// words drawn from a vocabulary of 256 made of syllables, as text fields of real records
/// repeat words far more than they repeat long runs.
fn record_value(i: u64, size: usize) -> Vec<u8> {
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ren", "tas", "vu", "pe", "dor", "sil", "an", "qu", "ex", "om", "bri",
        "zel", "to",
    ];
    let mut state = splitmix(i ^ 0x05ec_02d5);
    let mut word = |value: &mut Vec<u8>| {
        state = splitmix(state);
        let pick = state as u8;
        value.extend_from_slice(SYLLABLES[usize::from(pick & 15)].as_bytes());
        value.extend_from_slice(SYLLABLES[usize::from(pick >> 4)].as_bytes());
    };
    let mut value = Vec::with_capacity(size + 16);
    value.extend_from_slice(format!("{{\"id\":{i},\"name\":\"").as_bytes());
    word(&mut value);
    value.extend_from_slice(b"\",\"city\":\"");
    word(&mut value);
    value.extend_from_slice(format!("\",\"score\":{},\"text\":\"", i % 1000).as_bytes());
    while value.len() < size {
        word(&mut value);
        value.push(b' ');
    }
    value.truncate(size);
    value
}

/// Keys for one level-0 table of `--level0-tables`: about half a memtable's worth, so that
/// the memtable's own bookkeeping never makes it flush twice.
pub fn memtable_keys(args: &BenchArgs) -> u64 {
    let memtable = args
        .memtable_size
        .unwrap_or(Options::default().memtable_size as u64);
    (memtable / (16 + args.value_size as u64) / 2).max(1)
}

/// Loads the workload into `db` (writes, then the memtable flushed) and waits for its
/// compactions; returns the seconds each took.
pub fn load_and_settle(db: &Db, workload: &Workload, label: &str) -> Result<(f64, f64), Failure> {
    let level0_keys = (workload.level0_tables * workload.level0_keys_each).min(workload.keys);
    let tree_keys = workload.keys - level0_keys;
    let load = load(db, workload, 0..tree_keys, label)?;
    let settle_seconds = settle(db, label)?;
    // Fewer tables than the trigger: no compaction takes them.
    let each = workload.level0_keys_each.max(1);
    let mut from = tree_keys;
    while from < workload.keys {
        let to = (from + each).min(workload.keys);
        load_bloomkv(db, workload, from..to, &ProgressBar::hidden())?;
        from = to;
    }
    Ok((load.seconds, settle_seconds))
}

/// How a load went.
pub struct LoadFigures {
    /// From the first write until the flush after the last returned.
    pub seconds: f64,
    /// The longest single batch write: while it waited, no write completed.
    pub longest_write: Duration,
    /// Where the store stood each second of the load.
    pub timeline: Vec<LoadSample>,
}

/// The store once during a load: how far the load had come and how far level 0 lagged.
pub struct LoadSample {
    pub seconds: f64,
    pub keys_written: u64,
    pub level0_tables: usize,
    /// Bytes in each level.
    pub level_bytes: Vec<u64>,
    /// The rate delayed writes were held to, when they were.
    pub delayed_write_rate: Option<u64>,
}

impl LoadSample {
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "seconds": self.seconds, "keys_written": self.keys_written,
            "level0_tables": self.level0_tables, "level_bytes": self.level_bytes,
            "delayed_write_rate": self.delayed_write_rate,
        })
    }
}

/// How often a load's timeline is sampled.
const LOAD_SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// Writes the workload's keys `indexes` into `db` with a progress bar, then flushes.
pub fn load(
    db: &Db,
    workload: &Workload,
    indexes: std::ops::Range<u64>,
    label: &str,
) -> Result<LoadFigures, Failure> {
    let bar = progress::bar(indexes.end - indexes.start, &format!("load ({label})"));
    let started = Instant::now();
    let (longest_write, timeline) = std::thread::scope(|scope| {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let bar = &bar;
        let sampler = scope.spawn(move || sample_load(db, bar, started, stopped));
        let longest_write = load_bloomkv(db, workload, indexes, bar);
        drop(stop);
        let timeline = sampler.join().expect("the sampler does not panic");
        (longest_write, timeline)
    });
    let longest_write = longest_write?;
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    Ok(LoadFigures {
        seconds,
        longest_write,
        timeline,
    })
}

/// Samples `db` every [`LOAD_SAMPLE_EVERY`] until `stopped` closes.
fn sample_load(
    db: &Db,
    bar: &ProgressBar,
    started: Instant,
    stopped: std::sync::mpsc::Receiver<()>,
) -> Vec<LoadSample> {
    let mut samples = Vec::new();
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
        stopped.recv_timeout(LOAD_SAMPLE_EVERY)
    {
        let stats = db.stats();
        samples.push(LoadSample {
            seconds: started.elapsed().as_secs_f64(),
            keys_written: bar.position(),
            level0_tables: stats.levels.first().map_or(0, |l| l.tables),
            level_bytes: stats.levels.iter().map(|l| l.bytes).collect(),
            delayed_write_rate: stats.delayed_write_rate,
        });
    }
    samples
}

/// Waits for `db`'s compactions to end; the seconds it took.
pub fn settle(db: &Db, label: &str) -> Result<f64, Failure> {
    let waiting = progress::waiting(&format!("compactions ({label})"));
    let settling = Instant::now();
    db.wait_for_background_work()?;
    let settle_seconds = settling.elapsed().as_secs_f64();
    waiting.finish_and_clear();
    Ok(settle_seconds)
}

/// Writes the workload's keys `indexes` into `db` in batches, then flushes the memtable.
/// Returns the longest time one batch's write took.
fn load_bloomkv(
    db: &Db,
    workload: &Workload,
    indexes: std::ops::Range<u64>,
    bar: &ProgressBar,
) -> Result<Duration, Failure> {
    let mut longest = Duration::ZERO;
    for pairs in workload.batches_of(indexes) {
        let started = Instant::now();
        if let [(key, value)] = pairs.as_slice() {
            db.put(key, value)?;
        } else {
            let mut batch = WriteBatch::new();
            for (key, value) in &pairs {
                batch.put(key, value);
            }
            db.write(batch)?;
        }
        longest = longest.max(started.elapsed());
        bar.inc(pairs.len() as u64);
    }
    db.flush()?;
    Ok(longest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_text_of_the_asked_size_and_the_same_every_time() {
        for size in [1, 40, 100, 1000] {
            let a = record_value(7, size);
            assert_eq!(a.len(), size);
            assert_eq!(a, record_value(7, size));
            assert!(
                a.iter().all(|b| b.is_ascii_graphic() || *b == b' '),
                "{a:?}"
            );
        }
        assert_ne!(record_value(7, 100), record_value(8, 100));
        assert!(record_value(12, 100).starts_with(b"{\"id\":12,\"name\":\""));
    }
}
