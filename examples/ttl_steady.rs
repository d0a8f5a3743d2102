//! A keyspace whose entries expire, under a steady write load: each write a new key (a
//! session, an event) with 100 random bytes, at a fixed rate, for a while; once a second it
//! prints the bytes of the keyspace's tables (and of its memtable apart). With a time to live
//! the tables level off at about a time to live's worth of writes, and stay there.
//!
//! `cargo run --release --example ttl_steady -- [SECONDS] [TTL_SECONDS] [WRITES_PER_SECOND]`
//! (default 60, 10, 20000). Prints one line a second, then the spread of the sizes after two
//! times to live: lowest, highest and mean.

use std::time::{Duration, Instant};

use bloomkv::{Db, KeyspaceOptions, Options};

fn main() -> bloomkv::Result<()> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| {
            a.parse()
                .expect("numbers: SECONDS TTL_SECONDS WRITES_PER_SECOND")
        })
        .collect();
    let seconds = args.first().copied().unwrap_or(60);
    let ttl = args.get(1).copied().unwrap_or(10);
    let rate = args.get(2).copied().unwrap_or(20_000);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let options = Options::default()
        .memtable_size(4 << 20)
        .table_size(4 << 20)
        .level1_size(16 << 20);
    let db = Db::open(dir.path(), options)?;
    let sessions = db.keyspace(
        "sessions",
        KeyspaceOptions::new().ttl(Duration::from_secs(ttl)),
    )?;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut value = vec![0u8; 100];
    let start = Instant::now();
    let mut written = 0u64;
    let mut sizes = Vec::new();
    for second in 1..=seconds {
        let until = start + Duration::from_secs(second);
        // Writes paced within the second, in batches of 100.
        while Instant::now() < until && written < second * rate {
            let mut batch = bloomkv::WriteBatch::new();
            for _ in 0..100 {
                for chunk in value.chunks_mut(8) {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
                }
                batch.put_in(&sessions, format!("session:{written:012}"), &value);
                written += 1;
            }
            db.write(batch)?;
        }
        if let Some(left) = until.checked_duration_since(Instant::now()) {
            std::thread::sleep(left);
        }
        let stats = db.stats();
        let keyspace = (stats.keyspaces.iter())
            .find(|k| k.name == "sessions")
            .expect("the keyspace");
        let bytes = keyspace.bytes;
        println!(
            "{second:>4} s  {written:>10} written  tables {:>7.1} MiB  memtable {:>5.1} MiB  \
             {:>4} tables  {:>4} dropped whole",
            bytes as f64 / (1 << 20) as f64,
            keyspace.memtable_bytes as f64 / (1 << 20) as f64,
            keyspace.tables.len(),
            stats.tables_expired
        );
        if second > 2 * ttl {
            sizes.push(bytes);
        }
    }
    if let (Some(low), Some(high)) = (sizes.iter().min(), sizes.iter().max()) {
        let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
        let mib = |b: f64| b / (1 << 20) as f64;
        println!(
            "tables after {} s: lowest {:.1} MiB ({:+.1}%), highest {:.1} MiB ({:+.1}%), mean {:.1} MiB",
            2 * ttl,
            mib(*low as f64),
            (*low as f64 / mean - 1.0) * 100.0,
            mib(*high as f64),
            (*high as f64 / mean - 1.0) * 100.0,
            mib(mean)
        );
    }
    Ok(())
}
