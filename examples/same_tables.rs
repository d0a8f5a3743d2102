//! Compares two builds of the store on the same tables.
//!
//! `kvtool bench` loads a store of its own in each run, and two loads end in trees of
//! different shapes (level-0 tables left, a level-4 table covering more or less of the key
//! space), which move a get's cost by more than a build does. This program loads a store
//! once, then times gets of it opened read-only, so that no flush or compaction changes its
//! tables between the runs of either build. It uses only what the store has offered since
//! before its filters were partitioned, so it compiles against older builds too.
//!
//! ```text
//! same_tables load DIR KEYS            write KEYS keys (16 bytes, 100-byte values), one
//!                                      put each, in an order that mixes the key space
//! same_tables read DIR KEYS LOOKUPS    a pass of LOOKUPS present gets and one of absent
//!                                      gets to warm the caches, then a pass of present
//!                                      gets and two of absent gets, each of other keys
//! ```

use std::error::Error;
use std::process::ExitCode;
use std::time::Instant;

use bloomkv::{Db, Options};

/// A bijection of u64 (SplitMix64's finalizer): consecutive numbers give keys spread over
/// the key space.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The `i`-th key: keys `0..KEYS` are loaded, any other is absent.
fn key(i: u64) -> Vec<u8> {
    format!("{:016x}", mix(i)).into_bytes()
}

/// 100 bytes that do not compress.
fn value(i: u64) -> Vec<u8> {
    (0..13u64)
        .flat_map(|w| mix(i ^ (w << 40)).to_le_bytes())
        .take(100)
        .collect()
}

/// Bytes this process has read from the device so far (Linux; 0 elsewhere).
fn device_bytes_read() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    (io.lines())
        .find_map(|l| l.strip_prefix("read_bytes: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Times a get of each key, each `present` or not as expected, and prints gets/s, device
/// pages read and filters asked a get.
fn timed(db: &Db, keys: &[Vec<u8>], present: bool, label: &str) -> Result<(), Box<dyn Error>> {
    let probes = db.stats().filter_probes;
    let read = device_bytes_read();
    let start = Instant::now();
    for k in keys {
        if db.get(k)?.is_some() != present {
            let (expected, found) = match present {
                true => ("present", "absent"),
                false => ("absent", "present"),
            };
            let key = String::from_utf8_lossy(k);
            return Err(format!(
                "key {key} should be {expected} but is {found}: was the store loaded with \
                 `same_tables load` and this many keys?"
            )
            .into());
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let n = keys.len() as f64;
    println!(
        "{label}: {:.0} gets/s, {:.4} device pages a get, {:.3} filters a get",
        n / seconds,
        (device_bytes_read() - read) as f64 / 4096.0 / n,
        (db.stats().filter_probes - probes) as f64 / n
    );
    Ok(())
}

fn tables_per_level(db: &Db) -> Vec<usize> {
    db.stats().levels.iter().map(|l| l.tables).collect()
}

fn load(dir: &str, keys: u64) -> Result<(), Box<dyn Error>> {
    let db = Db::open(dir, Options::default())?;
    let start = Instant::now();
    for i in 0..keys {
        db.put(key(i), value(i))?;
    }
    db.flush()?;
    db.wait_for_background_work()?;
    println!(
        "loaded {keys} keys in {:.1} s; tables per level {:?}",
        start.elapsed().as_secs_f64(),
        tables_per_level(&db)
    );
    Ok(())
}

fn read(dir: &str, keys: u64, lookups: u64) -> Result<(), Box<dyn Error>> {
    let db = Db::open_read_only(dir, Options::default())?;
    println!("tables per level {:?}", tables_per_level(&db));
    // Each pass draws other keys: present ones from the loaded range, absent ones above it.
    let present = |pass: u64| -> Vec<Vec<u8>> {
        (0..lookups)
            .map(|j| key(mix(j + pass * lookups + (1 << 50)) % keys))
            .collect()
    };
    let absent = |pass: u64| -> Vec<Vec<u8>> {
        (0..lookups)
            .map(|j| key(keys + pass * lookups + j))
            .collect()
    };
    timed(&db, &present(0), true, "warming, present")?;
    timed(&db, &absent(0), false, "warming, absent")?;
    timed(&db, &present(1), true, "present")?;
    timed(&db, &absent(1), false, "absent")?;
    timed(&db, &absent(2), false, "absent, again")?;
    Ok(())
}

/// The most lookups a pass: the passes' keys are held in memory, 26 bytes or so each.
const MOST_LOOKUPS: u64 = 100_000_000;

/// A whole number from 1 to `most`, named `what` in errors.
fn number(arg: Option<&String>, what: &str, most: u64) -> Result<u64, Box<dyn Error>> {
    let arg = arg.ok_or_else(|| format!("missing {what}"))?;
    match arg.parse() {
        Ok(n) if (1..=most).contains(&n) => Ok(n),
        _ => Err(format!("{what} must be a whole number from 1 to {most}, not {arg:?}").into()),
    }
}

fn run(args: &[String]) -> Result<(), Box<dyn Error>> {
    let usage = "usage: same_tables load DIR KEYS | same_tables read DIR KEYS LOOKUPS";
    let (Some(mode), Some(dir)) = (args.first(), args.get(1)) else {
        return Err(usage.into());
    };
    // Absent keys are numbered from KEYS up, three passes of LOOKUPS: all must fit a u64.
    let keys = number(args.get(2), "KEYS", u64::MAX - 3 * MOST_LOOKUPS);
    match mode.as_str() {
        "load" => load(dir, keys?),
        "read" => read(dir, keys?, number(args.get(3), "LOOKUPS", MOST_LOOKUPS)?),
        _ => Err(usage.into()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("same_tables: {e}");
            ExitCode::from(2)
        }
    }
}
