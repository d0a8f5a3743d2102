//! What compacting level 0 at rest costs writes that trickle in, and saves the lookups
//! between them (`Options::compact_level0_at_rest`).
//!
//! A small store (1 MiB memtables and tables, 4 MiB level 1) is loaded with 300,000 keys,
//! then takes ROUNDS rounds of a memtable's worth of new keys, flushed, followed by PAUSE_MS
//! milliseconds of gets of absent keys. With the compaction at rest on (`on`, a rest of half
//! a second) each flush is compacted once the rest passes; with it `off`, level 0 waits for
//! its trigger. It prints the table bytes written per byte of keys and values over the
//! rounds, and the level-0 tables the gets met on average.
//!
//! ```text
//! trickle_writes on|off ROUNDS PAUSE_MS
//! ```

use std::error::Error;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use bloomkv::{Db, Options};

/// Keys loaded before the rounds: enough for a tree below level 0.
const PRELOAD: u64 = 300_000;

/// New keys a round: a little under a 1 MiB memtable of 16-byte keys and 100-byte values.
const KEYS_A_ROUND: u64 = 8_000;

/// Gets between two looks at level 0 during a pause.
const GETS_A_LOOK: u64 = 2_000;

/// The `i`-th key: `i` times an odd constant (a bijection of u64), so that consecutive keys
/// land across the key space, as a flush's keys do.
fn key(i: u64) -> Vec<u8> {
    format!("{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).into_bytes()
}

/// Table bytes written (flushes and compactions) and bytes of keys and values written.
fn bytes_written(db: &Db) -> (u64, u64) {
    let stats = db.stats();
    let tables = stats.levels.iter().map(|l| l.bytes_written).sum();
    (tables, stats.user_bytes_written)
}

fn run(at_rest: bool, rounds: u64, pause: Duration) -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let options = Options::default()
        .memtable_size(1 << 20)
        .table_size(1 << 20)
        .level1_size(4 << 20)
        .compact_level0_at_rest(at_rest.then_some(Duration::from_millis(500)));
    let db = Db::open(dir.path(), options)?;
    for i in 0..PRELOAD {
        db.put(key(i), [7u8; 100])?;
    }
    db.flush()?;
    db.wait_for_background_work()?;
    let (tables_before, user_before) = bytes_written(&db);
    let mut next = PRELOAD;
    let (mut looks, mut level0_seen, mut gets) = (0u64, 0u64, 0u64);
    for _ in 0..rounds {
        for _ in 0..KEYS_A_ROUND {
            db.put(key(next), [7u8; 100])?;
            next += 1;
        }
        db.flush()?;
        let until = Instant::now() + pause;
        while Instant::now() < until {
            for _ in 0..GETS_A_LOOK {
                // Keys numbered far past any written: absent.
                db.get(key(u64::MAX / 2 + gets))?;
                gets += 1;
            }
            level0_seen += db.stats().levels[0].tables as u64;
            looks += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    db.wait_for_background_work()?;
    let (tables_after, user_after) = bytes_written(&db);
    let stats = db.stats();
    println!(
        "compaction at rest {}: {:.2} table bytes written per byte written, {} compactions \
         at rest, {:.2} level-0 tables met by the gets on average",
        if at_rest { "on" } else { "off" },
        (tables_after - tables_before) as f64 / (user_after - user_before) as f64,
        stats.level0_compactions_at_rest,
        level0_seen as f64 / looks.max(1) as f64
    );
    Ok(())
}

fn parse(args: &[String]) -> Result<(bool, u64, Duration), Box<dyn Error>> {
    let usage = "usage: trickle_writes on|off ROUNDS PAUSE_MS";
    let [mode, rounds, pause] = args else {
        return Err(usage.into());
    };
    let at_rest = match mode.as_str() {
        "on" => true,
        "off" => false,
        _ => return Err(usage.into()),
    };
    let rounds = match rounds.parse() {
        Ok(n) if (1..=10_000).contains(&n) => n,
        _ => return Err(format!("ROUNDS must be from 1 to 10000, not {rounds:?}").into()),
    };
    let pause = match pause.parse() {
        Ok(ms) if (1..=3_600_000).contains(&ms) => Duration::from_millis(ms),
        _ => return Err(format!("PAUSE_MS must be from 1 to 3600000, not {pause:?}").into()),
    };
    Ok((at_rest, rounds, pause))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args).and_then(|(at_rest, rounds, pause)| run(at_rest, rounds, pause)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("trickle_writes: {e}");
            ExitCode::from(2)
        }
    }
}
