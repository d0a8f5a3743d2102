//! `kvtool bench --stores ... --prefix-scans`: scans over one key prefix, of prefixes the store
//! holds and of prefixes it does not, store beside store. Keys come in groups of
//! `--keys-per-prefix` that share their first eight bytes (a tenant, a user), the groups
//! spread over the key space as the keys of the other benches are; absent prefixes fall
//! between them. bloomkv runs with prefix filters over those eight bytes
//! (`PrefixExtractor::Fixed(8)`) and, as `bloomkv-no-prefix-filters`, without; RocksDB with a
//! fixed 8-byte prefix extractor, its prefix Bloom filters, and `prefix_same_as_start`
//! iterators.
//!
//! Each store runs in a child process of its own (`children.rs`): it loads the keys, waits for
//! its compactions, then times the present-prefix and the absent-prefix scans, each reading
//! every pair of its prefix, and counts the data blocks each scan read (from the block cache
//! or the disk) and the device's reads.

use std::cell::Cell;
use std::path::Path;

use bloomkv::{Db, PrefixExtractor};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::args::BenchArgs;
use super::children::{
    bloomkv_options, check_stores, child_args, resident, run_children, run_in_child,
    warm_lookups_only,
};
use super::figures::merge;
use super::files::{scratch_dir, write_result};
use super::keys::splitmix;
use super::timing::{time_lookups, Timing};
use super::workload::{load, settle, Workload};
use crate::store_json::prefix_counts;
use crate::Failure;

const KNOWN_STORES: [&str; 3] = ["bloomkv", "bloomkv-no-prefix-filters", "rocksdb"];

/// Bytes of a key that name its group: what every store's prefix extractor takes.
pub const PREFIX_LEN: usize = 8;

/// The prefix of group `group`: present groups' are mixes of even numbers, absent ones' of
/// odd numbers, so an absent prefix is none of the loaded ones but falls among them.
pub fn group_prefix(group: u64, present: bool) -> [u8; PREFIX_LEN] {
    splitmix(group * 2 + u64::from(!present)).to_be_bytes()
}

/// The key loaded `index`-th when keys come `per_prefix` to a group: the group's prefix, then
/// eight bytes of the index's own mix.
pub fn grouped_key(index: u64, per_prefix: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..PREFIX_LEN].copy_from_slice(&group_prefix(index / per_prefix.max(1), true));
    key[PREFIX_LEN..].copy_from_slice(&splitmix(index ^ 0x5ca1_ab1e).to_be_bytes());
    key
}

/// Runs every store of `args.stores` in a child process and reports their scans side by side.
pub fn run(args: &BenchArgs, dir: Option<&Path>) -> Result<(), Failure> {
    if args.stores.is_empty() {
        return Err(Failure::from(
            "--prefix-scans compares stores: add --stores bloomkv,bloomkv-no-prefix-filters,...",
        ));
    }
    check_stores(&args.stores, &KNOWN_STORES, " with --prefix-scans")?;
    if args.keys < args.keys_per_prefix || args.lookups == 0 {
        return Err(Failure::from(
            "--prefix-scans needs at least one group of --keys-per-prefix keys and one scan",
        ));
    }
    let temp = scratch_dir(dir, "bloomkv-scans")?;
    let runs = run_children(&args.stores, temp.path(), |store, out| {
        let mut v = child_args(args, store, out);
        let per_prefix = args.keys_per_prefix.to_string();
        v.extend(["--prefix-scans", "--keys-per-prefix", &per_prefix].map(String::from));
        v.extend(warm_lookups_only(args));
        v
    })?;
    let doc = json!({
        "kind": "prefix-scans",
        "keys": args.keys, "key_size": 16, "keys_per_prefix": args.keys_per_prefix,
        "prefix_len": PREFIX_LEN, "value_size": args.value_size,
        "values": args.values.name(), "scans": args.lookups, "seed": args.seed,
        "load_batch": args.load_batch, "memory_limit_bytes": args.memory_limit,
        "stores": runs, "variant": args.variant,
    });
    print_report(&doc);
    if let Some(path) = &args.json {
        write_result(path, &serde_json::to_string_pretty(&doc)?)?;
    }
    Ok(())
}

/// The prefixes a run scans: `n` of loaded groups and `n` absent ones, drawn from the seed.
fn scan_prefixes(args: &BenchArgs) -> (Vec<[u8; PREFIX_LEN]>, Vec<[u8; PREFIX_LEN]>) {
    let mut rng = SmallRng::seed_from_u64(args.seed ^ 0x5ca7);
    let groups = args.keys.div_ceil(args.keys_per_prefix.max(1));
    let mut pick = |present: bool| -> Vec<[u8; PREFIX_LEN]> {
        (0..args.lookups)
            .map(|_| group_prefix(rng.gen_range(0..groups), present))
            .collect()
    };
    (pick(true), pick(false))
}

/// In the child: enters the cgroup, loads and scans one store in `dir`, writes its figures.
pub fn run_child(args: &BenchArgs, dir: Option<&Path>, store: &str) -> Result<(), Failure> {
    run_in_child(args, dir, |dir| measure_child(args, dir, store))
}

/// The figures of `store`'s load and scans in `dir`.
fn measure_child(args: &BenchArgs, dir: &Path, store: &str) -> Result<Value, Failure> {
    let workload = Workload::new(args);
    let prefixes = scan_prefixes(args);
    let mut figures = match store {
        "bloomkv" | "bloomkv-no-prefix-filters" => {
            let mut options = bloomkv_options(args)?;
            if store == "bloomkv" {
                options = options.prefix_extractor(PrefixExtractor::Fixed(PREFIX_LEN));
            }
            run_bloomkv(store, &workload, &prefixes, dir, options)?
        }
        other => run_peer(other, &workload, &prefixes, dir)?,
    };
    let (resident_bytes, peak_resident_bytes) = resident()?;
    figures["resident_bytes"] = json!(resident_bytes);
    figures["peak_resident_bytes"] = json!(peak_resident_bytes);
    Ok(figures)
}

/// Times `scan` over `prefixes`, each answer checked to hold pairs exactly when `present`;
/// the timing's JSON with the pairs read per scan and the store's blocks per scan, counted by
/// `blocks` before and after.
pub fn time_scans(
    prefixes: &[[u8; PREFIX_LEN]],
    present: bool,
    mut scan: impl FnMut(&[u8]) -> Result<u64, String>,
    blocks: impl Fn() -> u64,
) -> Result<Value, Failure> {
    let pairs = Cell::new(0u64);
    let before = blocks();
    let timing: Timing = time_lookups(prefixes, present, |p| {
        let n = scan(p)?;
        pairs.set(pairs.get() + n);
        Ok(n > 0)
    })?;
    let scans = timing.lookups.max(1) as f64;
    let read = blocks() - before;
    let mut figures = timing.to_json();
    figures["pairs_per_scan"] = json!(pairs.get() as f64 / scans);
    figures["blocks_per_scan"] = json!(read as f64 / scans);
    Ok(figures)
}

fn run_bloomkv(
    store: &str,
    workload: &Workload,
    (present, absent): &(Vec<[u8; PREFIX_LEN]>, Vec<[u8; PREFIX_LEN]>),
    dir: &Path,
    options: bloomkv::Options,
) -> Result<Value, Failure> {
    let described = format!("{options:?}");
    let db = Db::open(dir, options)?;
    let load = load(&db, workload, 0..workload.keys, store)?;
    let settle_seconds = settle(&db, store)?;
    let scan = |p: &[u8]| -> Result<u64, String> {
        let mut n = 0;
        for pair in db.prefix(p) {
            pair.map_err(|e| e.to_string())?;
            n += 1;
        }
        Ok(n)
    };
    let blocks = || db.stats().scan_block_reads;
    let before = db.stats();
    let present = time_scans(present, true, scan, blocks)?;
    let middle = db.stats();
    let absent = time_scans(absent, false, scan, blocks)?;
    let after = db.stats();
    let per_scan = |earlier: &bloomkv::Stats, later: &bloomkv::Stats, scans: u64| {
        let (p0, n0, _) = prefix_counts(earlier);
        let (p1, n1, _) = prefix_counts(later);
        let scans = scans.max(1) as f64;
        json!({
            "prefix_filter_probes_per_scan": (p1 - p0) as f64 / scans,
            "prefix_filter_negatives_per_scan": (n1 - n0) as f64 / scans,
        })
    };
    let lookups = workload.warm_present.len() as u64;
    let mut figures = json!({
        "store": store,
        "configuration": described,
        "load_seconds": load.seconds, "settle_seconds": settle_seconds,
        "present": present, "absent": absent,
        "tables": after.tables.len(),
        "filter_memory_bytes": after.filter_memory_bytes,
        "prefix_filter_memory_bytes": after.prefix_filter_memory_bytes,
    });
    merge(
        &mut figures["present"],
        &per_scan(&before, &middle, lookups),
    );
    merge(&mut figures["absent"], &per_scan(&middle, &after, lookups));
    Ok(figures)
}

#[cfg(feature = "peers")]
fn run_peer(
    store: &str,
    workload: &Workload,
    prefixes: &(Vec<[u8; PREFIX_LEN]>, Vec<[u8; PREFIX_LEN]>),
    dir: &Path,
) -> Result<Value, Failure> {
    match store {
        "rocksdb" => super::peers::run_rocksdb_scans(workload, prefixes, dir),
        other => Err(Failure::from(format!("no prefix scans for {other}"))),
    }
}

#[cfg(not(feature = "peers"))]
fn run_peer(
    store: &str,
    _: &Workload,
    _: &(Vec<[u8; PREFIX_LEN]>, Vec<[u8; PREFIX_LEN]>),
    _: &Path,
) -> Result<Value, Failure> {
    Err(Failure::from(format!(
        "--stores {store} needs kvtool built with `--features peers`"
    )))
}

/// Prints each store's scans, and bloomkv's ratios to the others.
fn print_report(doc: &Value) {
    println!(
        "prefix scans: {} keys of 16 bytes in groups of {} sharing their first {} bytes, {}-byte {} values; {} present-prefix and {} absent-prefix scans each; memory {}",
        doc["keys"],
        doc["keys_per_prefix"],
        doc["prefix_len"],
        doc["value_size"],
        doc["values"].as_str().unwrap_or("?"),
        doc["scans"],
        doc["scans"],
        doc["memory_limit_bytes"]
            .as_u64()
            .map_or("not limited".to_string(), |b| format!("{} MiB", b >> 20)),
    );
    let empty = Vec::new();
    let stores = doc["stores"].as_array().unwrap_or(&empty);
    println!(
        "  {:<26} {:>7} {:>13} {:>13} {:>11} {:>11} {:>12} {:>12}",
        "store",
        "load s",
        "present /s",
        "absent /s",
        "blocks/p",
        "blocks/a",
        "dev reads/p",
        "dev reads/a"
    );
    for s in stores {
        let name = s["store"].as_str().unwrap_or("?");
        if let Some(failure) = s["failed"].as_str() {
            println!("  {name:<26} failed: {failure}");
            continue;
        }
        let f = |phase: &str, field: &str| s[phase][field].as_f64().unwrap_or(f64::NAN);
        println!(
            "  {name:<26} {:>7.1} {:>13.0} {:>13.0} {:>11.3} {:>11.3} {:>12.3} {:>12.3}",
            s["load_seconds"].as_f64().unwrap_or(f64::NAN),
            f("present", "gets_per_second"),
            f("absent", "gets_per_second"),
            f("present", "blocks_per_scan"),
            f("absent", "blocks_per_scan"),
            f("present", "device_reads_per_get"),
            f("absent", "device_reads_per_get"),
        );
    }
    let Some(ours) = stores
        .iter()
        .find(|s| s["store"] == "bloomkv" && s["failed"].is_null())
    else {
        return;
    };
    for other in stores
        .iter()
        .filter(|s| s["store"] != "bloomkv" && s["failed"].is_null())
    {
        let ratio = |phase: &str, field: &str| {
            ours[phase][field].as_f64().unwrap_or(f64::NAN)
                / other[phase][field].as_f64().unwrap_or(f64::NAN)
        };
        println!(
            "  bloomkv / {}: present scans {:.2}x, absent scans {:.2}x; absent blocks per scan {:.3}x",
            other["store"].as_str().unwrap_or("?"),
            ratio("present", "gets_per_second"),
            ratio("absent", "gets_per_second"),
            ratio("absent", "blocks_per_scan"),
        );
    }
}
