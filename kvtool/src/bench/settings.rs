//! The filter-settings bench, `kvtool bench` without `--stores`: how much disk I/O the
//! filters avoid, and how fast lookups are.
//!
//! For each filter setting the same keys are loaded (in random order, through the public API)
//! into a store of their own that ends with several levels. Then present and absent keys are
//! looked up twice: first cold (every table file dropped from the page cache with
//! `posix_fadvise(DONTNEED)`), then warm. The counters in `Stats` give the reads per get and
//! the measured false-positive rate; the clock gives gets per second and latency percentiles.
//! With `--peers`, RocksDB and fjall take the same load and warm lookups (`peers.rs`).

use std::path::Path;
use std::time::Instant;

use bloomkv::{Db, FilterPolicy, Options, Stats};

use super::args::{parse_settings, BenchArgs};
use super::figures::{LevelLookups, LookupFigures, SettingResult};
use super::files::{scratch_dir, write_result};
use super::settings_plot::plot_svg;
use super::settings_report::{print_header, print_report, results_json};
use super::workload::{load_and_settle, Workload};
use crate::{progress, Failure};

/// Runs every setting of `--settings` in a store of its own in `dir`, then reports them side
/// by side.
pub fn run(args: &BenchArgs, dir: Option<&Path>) -> Result<(), Failure> {
    let settings = parse_settings(&args.settings)?;
    let trigger = Options::default().tuning.l0_compaction_trigger as u64;
    if args.level0_tables >= trigger {
        return Err(Failure::from(format!(
            "--level0-tables {} would start a compaction: at most {}",
            args.level0_tables,
            trigger - 1
        )));
    }
    if args.peers && !cfg!(feature = "peers") {
        return Err(Failure::from(
            "--peers needs kvtool built with `--features peers`",
        ));
    }
    if settings.is_empty() || args.keys == 0 || args.lookups == 0 {
        return Err(Failure::from(
            "bench needs at least one setting, one key and one lookup",
        ));
    }
    let temp = scratch_dir(dir, "bloomkv-bench")?;
    print_header(args);
    let workload = Workload::new(args);
    let mut results = Vec::new();
    for (label, policy) in &settings {
        let store_dir = temp.path().join(format!("store-{label}"));
        results.push(run_setting(label, *policy, &store_dir, &workload)?);
        std::fs::remove_dir_all(&store_dir)?;
    }
    print_report(args, &results);
    let peers = if args.peers {
        let ours = results
            .iter()
            .find(|r| r.params.is_some_and(|p| p.bits_per_key() == 10))
            .ok_or_else(|| {
                Failure::from("--peers compares at 10 bits per key: include the 0.01 setting")
            })?;
        compare_with_peers(ours, &workload, temp.path())?
    } else {
        Vec::new()
    };
    if let Some(path) = &args.json {
        let mut doc = results_json(args, &results);
        doc["peers"] = serde_json::Value::Array(peers);
        write_result(path, &serde_json::to_string_pretty(&doc).expect("json"))?;
    }
    if let Some(path) = &args.plot {
        write_result(path, &plot_svg(&results))?;
    }
    Ok(())
}

#[cfg(feature = "peers")]
fn compare_with_peers(
    ours: &SettingResult,
    workload: &Workload,
    dir: &Path,
) -> Result<Vec<serde_json::Value>, Failure> {
    let peers = super::peers::run(workload, dir)?;
    super::peers::print_comparison(
        ours.load_seconds,
        ours.settle_seconds,
        &ours.warm_present,
        &ours.warm_absent,
        &peers,
    );
    Ok(peers.iter().map(|p| p.to_json()).collect())
}

#[cfg(not(feature = "peers"))]
fn compare_with_peers(
    _: &SettingResult,
    _: &Workload,
    _: &Path,
) -> Result<Vec<serde_json::Value>, Failure> {
    Err(Failure::from(
        "--peers needs kvtool built with `--features peers`",
    ))
}

fn run_setting(
    label: &str,
    policy: FilterPolicy,
    dir: &Path,
    workload: &Workload,
) -> Result<SettingResult, Failure> {
    // Each setting's filters whole, as the setting gives them: the report compares settings.
    // The tree stays as loaded while it is read, `--level0-tables` standing for a store under
    // writes: no compaction of level 0 at rest.
    let mut options = Options::default()
        .tune_allocator(true)
        .no_filter_memory_limit()
        .filter_policy(policy)
        .mmap_reads(workload.mmap_reads)
        .compact_level0_at_rest(None);
    if let Some(bytes) = workload.memtable_size {
        options = options.memtable_size(bytes as usize);
    }
    if let Some(bytes) = workload.level1_size {
        options = options.level1_size(bytes);
    }
    if let Some(bytes) = workload.table_size {
        options = options.table_size(bytes);
    }
    let db = Db::open(dir, options)?;
    let (load_seconds, settle_seconds) = load_and_settle(&db, workload, label)?;
    let stats = db.stats();
    let shape = stats.levels.iter().map(|l| l.tables).collect();
    let write_amplification = stats.write_amplification();
    let stall_seconds = stats.stall_micros as f64 / 1e6;
    let (cold_p, cold_a) = (&workload.cold_present, &workload.cold_absent);
    let (warm_p, warm_a) = (&workload.warm_present, &workload.warm_absent);
    db.drop_table_caches()?;
    let cold_present = lookups(&db, cold_p, true, &format!("cold present ({label})"))?;
    db.drop_table_caches()?;
    let cold_absent = lookups(&db, cold_a, false, &format!("cold absent ({label})"))?;
    // The cold phases dropped the table files from the page cache, and lookups read with a
    // "random" hint, which the kernel answers without read-ahead: put the files back in memory,
    // as the peers' files are after their load, so that "warm" means the same for every store.
    read_files_into_page_cache(dir, label)?;
    let warm_present = lookups(&db, warm_p, true, &format!("warm present ({label})"))?;
    let warm_absent = lookups(&db, warm_a, false, &format!("warm absent ({label})"))?;
    // A budget gives each level its own parameters; the tables report theirs.
    let params = match policy.is_budget() {
        true => None,
        false => policy.params()?,
    };
    let filter_memory_bytes = db.stats().filter_memory_bytes;
    db.close()?;
    Ok(SettingResult {
        label: label.to_string(),
        params,
        load_seconds,
        settle_seconds,
        write_amplification,
        stall_seconds,
        shape,
        filter_memory_bytes,
        cold_present,
        cold_absent,
        warm_present,
        warm_absent,
    })
}

/// Reads every file of `dir` once, so the page cache holds them.
fn read_files_into_page_cache(dir: &Path, label: &str) -> Result<(), Failure> {
    use std::io::Read;
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            files.push((entry.path(), entry.metadata()?.len()));
        }
    }
    let total = files.iter().map(|(_, len)| len).sum();
    let bar = progress::bytes(total, &format!("into the page cache ({label})"));
    let mut buf = vec![0u8; 1 << 20];
    for (path, _) in files {
        let mut file = std::fs::File::open(&path)?;
        loop {
            let read = file.read(&mut buf)?;
            if read == 0 {
                break;
            }
            bar.inc(read as u64);
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// Each level's lookups between two readings of `Stats`, and its filters at the second.
fn level_lookups(before: &Stats, after: &Stats) -> Vec<LevelLookups> {
    after
        .levels
        .iter()
        .enumerate()
        .map(|(l, now)| {
            let then = before.levels.get(l).copied().unwrap_or_default();
            let absent = |s: &bloomkv::LevelStats| s.filter_probes - s.filter_true_positives;
            let false_positives =
                |s: &bloomkv::LevelStats| s.filter_positives - s.filter_true_positives;
            LevelLookups {
                tables: now.tables,
                keys: now.entries,
                filter_bytes: after
                    .tables
                    .iter()
                    .filter(|t| t.level == l)
                    .map(|t| t.filter_bytes)
                    .sum(),
                absent_probes: absent(now) - absent(&then),
                false_positives: false_positives(now) - false_positives(&then),
                predicted_rate: now.predicted_false_positive_rate,
            }
        })
        .collect()
}

/// The tables of a `Stats`, arranged to find those whose key range covers a key: level 0's
/// all (they overlap), one by binary search in each deeper level (sorted, disjoint).
struct CoveringTables<'s> {
    levels: Vec<Vec<&'s bloomkv::TableStats>>,
}

impl<'s> CoveringTables<'s> {
    fn new(stats: &'s Stats) -> CoveringTables<'s> {
        let mut levels: Vec<Vec<&bloomkv::TableStats>> = vec![Vec::new(); stats.levels.len()];
        for table in &stats.tables {
            levels[table.level].push(table);
        }
        for level in levels.iter_mut().skip(1) {
            level.sort_by(|a, b| a.smallest_key.cmp(&b.smallest_key));
        }
        CoveringTables { levels }
    }

    /// The number of tables a lookup of `key` consults (those whose key range covers it:
    /// what the lookup would read without filters), and the sum of their predicted rates (a
    /// table without a filter counts 1: it always costs a read).
    fn consulted(&self, key: &[u8]) -> (u64, f64) {
        let covers = |t: &&&bloomkv::TableStats| {
            t.smallest_key.as_slice() <= key && key <= t.largest_key.as_slice()
        };
        let level0 = self.levels.first().into_iter().flatten().filter(covers);
        let deeper = self.levels.iter().skip(1).filter_map(|level| {
            let at = level.partition_point(|t| t.largest_key.as_slice() < key);
            level.get(at).filter(covers)
        });
        level0.chain(deeper).fold((0, 0.0), |(n, p), t| {
            (n + 1, p + t.predicted_false_positive_rate.unwrap_or(1.0))
        })
    }
}

fn lookups(
    db: &Db,
    keys: &[[u8; 16]],
    present: bool,
    what: &str,
) -> Result<LookupFigures, Failure> {
    let bar = progress::bar(keys.len() as u64, what);
    let before = db.stats();
    let covering = CoveringTables::new(&before);
    let (consulted, predicted) = keys
        .iter()
        .map(|k| covering.consulted(k))
        .fold((0, 0.0), |(n, p), (kn, kp)| (n + kn, p + kp));
    let mut latencies = Vec::with_capacity(keys.len());
    let started = Instant::now();
    for (i, key) in keys.iter().enumerate() {
        let t = Instant::now();
        let found = db.get(key)?;
        latencies.push(t.elapsed());
        if found.is_some() != present {
            return Err(Failure::from(format!(
                "bench key {i} was {}found",
                if present { "not " } else { "" }
            )));
        }
        if i % 4096 == 0 {
            bar.set_position(i as u64);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let after = db.stats();
    latencies.sort_unstable();
    let percentile = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    Ok(LookupFigures {
        lookups: keys.len() as u64,
        data_block_reads: after.data_block_reads - before.data_block_reads,
        bytes_read: after.bytes_read - before.bytes_read,
        filter_probes: after.filter_probes - before.filter_probes,
        filter_negatives: after.filter_negatives - before.filter_negatives,
        false_positives: after.filter_false_positives() - before.filter_false_positives(),
        tables_consulted: consulted,
        predicted_reads: predicted,
        gets_per_second: keys.len() as f64 / elapsed,
        p50: percentile(0.50),
        p99: percentile(0.99),
        levels: level_lookups(&before, &after),
    })
}
