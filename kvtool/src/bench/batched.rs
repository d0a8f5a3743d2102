//! Batched lookups against single gets: `multi_get` in batches of 16, 64 and 256 keys, and
//! `may_contain` for absent keys, on the same store as a `--stores` run's gets.
//!
//! The ways take turns over slices of the key list, so that each meets the same mix of
//! cached and uncached blocks as the store's caches warm up (beyond memory, a way measured
//! after the others would find their blocks cached).

use std::time::{Duration, Instant};

use bloomkv::Db;
use serde_json::{json, Value};

use crate::Failure;

/// Keys each way takes in turn, at most: fewer when the key list is short, so that every way
/// gets at least two turns, but never fewer than the largest batch.
const SLICE: usize = 1024;
const LARGEST_BATCH: usize = 256;

#[derive(Clone, Copy)]
enum Way {
    Get,
    MultiGet(usize),
    MayContain,
}

impl Way {
    fn name(self) -> String {
        match self {
            Way::Get => "get".into(),
            Way::MultiGet(n) => format!("multi_get_{n}"),
            Way::MayContain => "may_contain".into(),
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Tally {
    keys: u64,
    time: Duration,
    /// Data-block reads per key, from a separate pass over a few slices.
    blocks_per_key: f64,
    /// `may_contain` answers of "maybe" for absent keys.
    maybes: u64,
}

/// Measures every way over `keys` (present or absent, as `present` says) and returns each
/// way's keys per second, data-block reads per key and ratio to single gets.
pub fn measure(db: &Db, keys: &[[u8; 16]], present: bool) -> Result<Value, Failure> {
    let mut ways = vec![
        Way::Get,
        Way::MultiGet(16),
        Way::MultiGet(64),
        Way::MultiGet(256),
    ];
    if !present {
        ways.push(Way::MayContain);
    }
    let mut tallies = vec![Tally::default(); ways.len()];
    let slice_len = (keys.len() / (2 * ways.len())).clamp(LARGEST_BATCH, SLICE);
    for (i, slice) in keys.chunks(slice_len).enumerate() {
        let w = i % ways.len();
        let started = Instant::now();
        let maybes = run(db, ways[w], slice, present)?;
        let tally = &mut tallies[w];
        tally.time += started.elapsed();
        tally.keys += slice.len() as u64;
        tally.maybes += maybes;
    }
    // Block reads are counted in a pass of their own, after the clock: reading `Stats`
    // between the timed slices walks every table and evicts the filters from the CPU
    // caches, which slowed every way, the fastest the most.
    let counted = &keys[..keys.len().min(4 * SLICE)];
    for (way, tally) in ways.iter().zip(&mut tallies) {
        let before = db.stats().data_block_reads;
        run(db, *way, counted, present)?;
        let blocks = db.stats().data_block_reads - before;
        tally.blocks_per_key = blocks as f64 / counted.len().max(1) as f64;
    }
    // A way that got no turn (a key list shorter than a few slices) was not measured.
    let per_second =
        |t: &Tally| (t.keys > 0).then(|| t.keys as f64 / t.time.as_secs_f64().max(1e-9));
    let single = per_second(&tallies[0]);
    let figures: serde_json::Map<String, Value> = ways
        .iter()
        .zip(&tallies)
        .map(|(way, t)| {
            let figures = json!({
                "keys": t.keys,
                "keys_per_second": per_second(t),
                "versus_get": per_second(t).zip(single).map(|(way, get)| way / get),
                "blocks_per_key": t.blocks_per_key,
                "maybe_rate": matches!(way, Way::MayContain)
                    .then_some(t.keys)
                    .filter(|&keys| keys > 0)
                    .map(|keys| t.maybes as f64 / keys as f64),
            });
            (way.name(), figures)
        })
        .collect();
    Ok(Value::Object(figures))
}

/// Looks `slice` up one way; checks every answer, and returns the "maybe"s of `may_contain`.
fn run(db: &Db, way: Way, slice: &[[u8; 16]], present: bool) -> Result<u64, Failure> {
    let wrong = || {
        Failure::from(format!(
            "a bench key was {}found",
            if present { "not " } else { "" }
        ))
    };
    match way {
        Way::Get => {
            for key in slice {
                if db.get(key)?.is_some() != present {
                    return Err(wrong());
                }
            }
            Ok(0)
        }
        Way::MultiGet(n) => {
            for batch in slice.chunks(n) {
                let values = db.multi_get(batch)?;
                if values.iter().any(|v| v.is_some() != present) {
                    return Err(wrong());
                }
            }
            Ok(0)
        }
        Way::MayContain => Ok(slice.iter().map(|k| u64::from(db.may_contain(k))).sum()),
    }
}

/// Prints a `--stores` run's batched figures (bloomkv's), if it has them.
pub fn print(store: &Value) {
    let Some(batched) = store.get("batched") else {
        return;
    };
    println!();
    println!(
        "batched lookups ({}): keys/s, and against single gets",
        store["store"].as_str().unwrap_or("?")
    );
    println!("  way               present keys/s  x get  blocks/key   absent keys/s  x get");
    let names = [
        "get",
        "multi_get_16",
        "multi_get_64",
        "multi_get_256",
        "may_contain",
    ];
    for name in names {
        let (p, a) = (&batched["present"][name], &batched["absent"][name]);
        let cell = |v: &Value, key: &str, digits: usize| {
            v[key]
                .as_f64()
                .map_or("-".to_string(), |x| format!("{x:.digits$}"))
        };
        println!(
            "  {:<16}  {:>14}  {:>5}  {:>10}  {:>14}  {:>5}",
            name,
            cell(p, "keys_per_second", 0),
            cell(p, "versus_get", 2),
            cell(p, "blocks_per_key", 3),
            cell(a, "keys_per_second", 0),
            cell(a, "versus_get", 2),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: u64, salt: u8) -> Vec<[u8; 16]> {
        (0..n)
            .map(|i| {
                let mut k = [salt; 16];
                k[8..].copy_from_slice(&i.to_be_bytes());
                k
            })
            .collect()
    }

    #[test]
    fn every_way_is_measured_on_a_short_key_list() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), bloomkv::Options::default()).unwrap();
        let present = keys(2000, 1);
        for k in &present {
            db.put(k, b"v").unwrap();
        }
        let figures = measure(&db, &present, true).unwrap();
        for way in ["get", "multi_get_16", "multi_get_64", "multi_get_256"] {
            assert!(figures[way]["keys"].as_u64().unwrap() >= 256, "{way}");
            assert!(figures[way]["keys_per_second"].as_f64().unwrap() > 0.0);
        }
        let figures = measure(&db, &keys(2000, 2), false).unwrap();
        assert!(figures["may_contain"]["keys"].as_u64().unwrap() >= 256);
        assert!(figures["may_contain"]["maybe_rate"].as_f64().unwrap() < 0.5);
    }

    #[test]
    fn a_way_without_a_turn_is_reported_as_not_measured() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), bloomkv::Options::default()).unwrap();
        // Fewer keys than the smallest slice: one turn, the first way's.
        let figures = measure(&db, &keys(200, 2), false).unwrap();
        assert!(figures["get"]["keys_per_second"].as_f64().is_some());
        assert!(figures["multi_get_16"]["keys_per_second"].is_null());
        assert!(figures["may_contain"]["maybe_rate"].is_null());
    }
}
