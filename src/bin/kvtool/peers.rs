//! `kvtool bench --peers`: the same load and warm lookups on RocksDB and fjall, in the same
//! run, so the ratios to bloomkv compare like with like. Built only with `--features peers`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::bench::{LookupFigures, Workload};
use crate::Failure;

/// One peer's figures.
pub struct PeerResult {
    name: &'static str,
    /// Writes, then the memtable flushed.
    load_seconds: f64,
    /// Then, until compactions stopped, where the store can wait for that.
    settle_seconds: Option<f64>,
    present: Timing,
    absent: Timing,
    /// RocksDB's `BLOOM_FILTER_USEFUL` over the absent lookups (reads its filters avoided).
    filter_useful: Option<u64>,
    note: &'static str,
}

struct Timing {
    gets_per_second: f64,
    p50: Duration,
    p99: Duration,
}

impl PeerResult {
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "store": self.name, "load_seconds": self.load_seconds,
            "settle_seconds": self.settle_seconds,
            "present_gets_per_second": self.present.gets_per_second,
            "present_p50_us": self.present.p50.as_secs_f64() * 1e6,
            "present_p99_us": self.present.p99.as_secs_f64() * 1e6,
            "absent_gets_per_second": self.absent.gets_per_second,
            "absent_p50_us": self.absent.p50.as_secs_f64() * 1e6,
            "absent_p99_us": self.absent.p99.as_secs_f64() * 1e6,
            "bloom_filter_useful": self.filter_useful, "configuration": self.note,
        })
    }
}

/// Times `get` over `keys`, checking each answer is as expected.
fn time_lookups(
    keys: &[[u8; 16]],
    present: bool,
    mut get: impl FnMut(&[u8]) -> Result<bool, String>,
) -> Result<Timing, Failure> {
    let mut latencies = Vec::with_capacity(keys.len());
    let started = Instant::now();
    for key in keys {
        let t = Instant::now();
        let found = get(key).map_err(Failure::from)?;
        latencies.push(t.elapsed());
        if found != present {
            return Err(Failure::from("a peer store answered a lookup wrongly"));
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let percentile = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    Ok(Timing {
        gets_per_second: keys.len() as f64 / elapsed,
        p50: percentile(0.5),
        p99: percentile(0.99),
    })
}

/// Runs both peers in subdirectories of `dir`.
pub fn run(workload: &Workload, dir: &Path) -> Result<Vec<PeerResult>, Failure> {
    let rocks = run_rocksdb(workload, &dir.join("rocksdb"))?;
    let fjall = run_fjall(workload, &dir.join("fjall"))?;
    Ok(vec![rocks, fjall])
}

fn run_rocksdb(workload: &Workload, dir: &Path) -> Result<PeerResult, Failure> {
    use rocksdb::statistics::Ticker;
    use rocksdb::{
        BlockBasedOptions, DBCompressionType, Options, WaitForCompactOptions, WriteBatch, DB,
    };
    eprintln!("peers: loading RocksDB");
    let mut options = Options::default();
    options.create_if_missing(true);
    options.enable_statistics();
    // bloomkv does not compress either.
    options.set_compression_type(DBCompressionType::None);
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    options.set_block_based_table_factory(&table);
    let db = DB::open(&options, dir).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let keys: Vec<[u8; 16]> = workload.loaded_keys().collect();
    for chunk in keys.chunks(1000) {
        let mut batch = WriteBatch::default();
        for key in chunk {
            batch.put(key, &workload.value);
        }
        db.write(batch).map_err(|e| e.to_string())?;
    }
    db.flush().map_err(|e| e.to_string())?;
    let load_seconds = started.elapsed().as_secs_f64();
    let settling = Instant::now();
    let mut wait = WaitForCompactOptions::default();
    wait.set_flush(true);
    db.wait_for_compact(&wait).map_err(|e| e.to_string())?;
    let settle_seconds = Some(settling.elapsed().as_secs_f64());
    let get = |k: &[u8]| {
        db.get_pinned(k)
            .map(|v| v.is_some())
            .map_err(|e| e.to_string())
    };
    let present = time_lookups(&workload.warm_present, true, get)?;
    let useful_before = options.get_ticker_count(Ticker::BloomFilterUseful);
    let absent = time_lookups(&workload.warm_absent, false, get)?;
    let useful = options.get_ticker_count(Ticker::BloomFilterUseful) - useful_before;
    Ok(PeerResult {
        name: "RocksDB",
        load_seconds,
        settle_seconds,
        present,
        absent,
        filter_useful: Some(useful),
        note: "full Bloom filter 10 bits/key, no compression, default block cache, statistics on",
    })
}

fn run_fjall(workload: &Workload, dir: &Path) -> Result<PeerResult, Failure> {
    use fjall::{Database, KeyspaceCreateOptions};
    eprintln!("peers: loading fjall");
    let db = Database::builder(dir).open().map_err(|e| e.to_string())?;
    let items = db
        .keyspace("bench", KeyspaceCreateOptions::default)
        .map_err(|e| e.to_string())?;
    let started = Instant::now();
    let keys: Vec<[u8; 16]> = workload.loaded_keys().collect();
    for chunk in keys.chunks(1000) {
        let mut batch = db.batch();
        for key in chunk {
            batch.insert(&items, key.to_vec(), workload.value.clone());
        }
        batch.commit().map_err(|e| e.to_string())?;
    }
    items
        .rotate_memtable_and_wait()
        .map_err(|e| e.to_string())?;
    let load_seconds = started.elapsed().as_secs_f64();
    let get = |k: &[u8]| items.get(k).map(|v| v.is_some()).map_err(|e| e.to_string());
    let present = time_lookups(&workload.warm_present, true, get)?;
    let absent = time_lookups(&workload.warm_absent, false, get)?;
    Ok(PeerResult {
        name: "fjall",
        load_seconds,
        settle_seconds: None,
        present,
        absent,
        filter_useful: None,
        note: "default options (its default filters and LZ4 compression)",
    })
}

/// Prints each store's load time and warm gets per second, with bloomkv's ratio to it.
pub fn print_comparison(
    our_load: f64,
    our_settle: f64,
    present: &LookupFigures,
    absent: &LookupFigures,
    peers: &[PeerResult],
) {
    println!();
    println!("peers, same keys and lookups (bloomkv at 0.01 = 10 bits/key; warm):");
    println!("  load s = writes + memtable flush; settle s = then until compactions stopped");
    println!("  store     load s  settle s  present gets/s  absent gets/s  present p99 us  absent p99 us  reads avoided by filters");
    println!(
        "  bloomkv  {:>6.1}  {:>8.1}  {:>14.0}  {:>13.0}  {:>14.2}  {:>13.2}  {}",
        our_load,
        our_settle,
        present.gets_per_second,
        absent.gets_per_second,
        present.p99.as_secs_f64() * 1e6,
        absent.p99.as_secs_f64() * 1e6,
        absent.filter_negatives
    );
    for p in peers {
        println!(
            "  {:<7}  {:>6.1}  {:>8}  {:>14.0}  {:>13.0}  {:>14.2}  {:>13.2}  {}",
            p.name,
            p.load_seconds,
            p.settle_seconds
                .map_or("n/a".to_string(), |s| format!("{s:.1}")),
            p.present.gets_per_second,
            p.absent.gets_per_second,
            p.present.p99.as_secs_f64() * 1e6,
            p.absent.p99.as_secs_f64() * 1e6,
            p.filter_useful
                .map_or("(not reported)".to_string(), |u| u.to_string())
        );
    }
    println!();
    println!("  bloomkv / peer     load speed  present gets/s  absent gets/s");
    for p in peers {
        println!(
            "  bloomkv / {:<7}  {:>9.2}x  {:>13.2}x  {:>12.2}x",
            p.name,
            p.load_seconds / our_load,
            present.gets_per_second / p.present.gets_per_second,
            absent.gets_per_second / p.absent.gets_per_second
        );
    }
}
