//! One function per kvtool command, on bloomkv's public API only.

use std::io::{BufRead, BufWriter, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloomkv::fs::OsFileSystem;
use bloomkv::{Db, FilterPolicy, Options, Stats, WriteBatch};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::codec;
use crate::{Cli, Command, Failure};

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<(), Failure> {
    let policy = filter_policy(&cli)?;
    let hex = cli.hex;
    let db_dir = || -> Result<&PathBuf, Failure> {
        cli.db
            .as_ref()
            .ok_or_else(|| Failure::from("this command needs --db DIR"))
    };
    match &cli.command {
        Command::Put { key, value } => {
            let db = open(db_dir()?, policy, true)?;
            db.put(codec::parse(key, hex)?, codec::parse(value, hex)?)?;
            db.close()?;
        }
        Command::Get { key } => {
            let db = open(db_dir()?, policy, false)?;
            match db.get(codec::parse(key, hex)?)? {
                Some(value) => println!("{}", codec::format(&value, hex)),
                None => {
                    return Err(Failure {
                        code: 1,
                        message: String::new(),
                    })
                }
            }
        }
        Command::Delete { key } => {
            let db = open(db_dir()?, policy, false)?;
            db.delete(codec::parse(key, hex)?)?;
            db.close()?;
        }
        Command::Scan {
            from,
            to,
            prefix,
            limit,
            keys_only,
        } => {
            let db = open(db_dir()?, policy, false)?;
            scan(&db, hex, from, to, prefix, *limit, *keys_only)?;
        }
        Command::Load { file, strict } => {
            let db = open(db_dir()?, policy, true)?;
            load(&db, hex, file.as_deref(), *strict)?;
            db.close()?;
        }
        Command::Dump => {
            let db = open(db_dir()?, policy, false)?;
            let mut out = BufWriter::new(std::io::stdout().lock());
            for pair in db.iter() {
                let (k, v) = pair?;
                writeln!(
                    out,
                    "{}\t{}",
                    codec::format(&k, hex),
                    codec::format(&v, hex)
                )?;
            }
            out.flush()?;
        }
        Command::Stats { json } => {
            let db = open(db_dir()?, policy, false)?;
            print_stats(&db.stats(), *json);
        }
        Command::Check => check(db_dir()?)?,
        Command::Compact => {
            let db = open(db_dir()?, policy, false)?;
            db.compact()?;
            db.close()?;
        }
        Command::Sst { file, json } => sst(file, *json)?,
        Command::Bench(args) => crate::bench::run(args, cli.db.as_deref())?,
    }
    Ok(())
}

fn filter_policy(cli: &Cli) -> Result<FilterPolicy, Failure> {
    if cli.no_filter {
        return Ok(FilterPolicy::Disabled);
    }
    let p = cli.filter_fpr.unwrap_or(0.01);
    bloomkv::filter::FilterParams::for_false_positive_rate(p)?;
    Ok(FilterPolicy::FalsePositiveRate(p))
}

fn open(dir: &Path, policy: FilterPolicy, create: bool) -> Result<Db, Failure> {
    if !create && !dir.join("CURRENT").exists() {
        return Err(Failure::from(format!(
            "no bloomkv store at {}",
            dir.display()
        )));
    }
    let options = Options::default()
        .filter_policy(policy)
        .create_if_missing(create);
    Ok(Db::open(dir, options)?)
}

fn scan(
    db: &Db,
    hex: bool,
    from: &Option<String>,
    to: &Option<String>,
    prefix: &Option<String>,
    limit: Option<usize>,
    keys_only: bool,
) -> Result<(), Failure> {
    let from = from.as_deref().map(|k| codec::parse(k, hex)).transpose()?;
    let to = to.as_deref().map(|k| codec::parse(k, hex)).transpose()?;
    let prefix = prefix
        .as_deref()
        .map(|k| codec::parse(k, hex))
        .transpose()?;
    let start = match (&from, &prefix) {
        (Some(f), Some(p)) => Bound::Included(f.as_slice().max(p.as_slice())),
        (Some(f), None) => Bound::Included(f.as_slice()),
        (None, Some(p)) => Bound::Included(p.as_slice()),
        (None, None) => Bound::Unbounded,
    };
    let end = to.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
    let mut out = BufWriter::new(std::io::stdout().lock());
    let pairs = db
        .range(start, end)
        .take_while(|r| match (r, &prefix) {
            (Ok((k, _)), Some(p)) => k.starts_with(p),
            _ => true,
        })
        .take(limit.unwrap_or(usize::MAX));
    for pair in pairs {
        let (k, v) = pair?;
        if keys_only {
            writeln!(out, "{}", codec::format(&k, hex))?;
        } else {
            writeln!(
                out,
                "{} ==> {}",
                codec::format(&k, hex),
                codec::format(&v, hex)
            )?;
        }
    }
    out.flush()?;
    Ok(())
}

/// Splits a `load` line: `key<TAB>value` or `ldb`'s `key ==> value`.
fn split_line(line: &str) -> Option<(&str, &str)> {
    line.split_once('\t').or_else(|| line.split_once(" ==> "))
}

fn load(db: &Db, hex: bool, file: Option<&Path>, strict: bool) -> Result<(), Failure> {
    let (reader, total): (Box<dyn BufRead>, Option<u64>) = match file {
        Some(path) if path != Path::new("-") => {
            let f = std::fs::File::open(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let len = f.metadata().ok().map(|m| m.len());
            (Box::new(std::io::BufReader::new(f)), len)
        }
        _ => (Box::new(std::io::stdin().lock()), None),
    };
    let progress = match total {
        Some(bytes) => ProgressBar::new(bytes).with_style(
            ProgressStyle::with_template("load {bar:40} {bytes}/{total_bytes} {eta}")
                .expect("valid template"),
        ),
        None => ProgressBar::new_spinner(),
    };
    progress.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    let (mut loaded, mut bad) = (0u64, 0u64);
    let mut batch = WriteBatch::new();
    for (index, line) in reader.lines().enumerate() {
        let line = line.map_err(|e| format!("reading input: {e}"))?;
        progress.inc(line.len() as u64 + 1);
        if line.is_empty() {
            continue;
        }
        let parsed = split_line(&line)
            .ok_or_else(|| "no TAB or ' ==> ' separator".to_string())
            .and_then(|(k, v)| Ok((codec::parse(k, hex)?, codec::parse(v, hex)?)));
        match parsed {
            Ok((k, v)) => {
                batch.put(k, v);
                loaded += 1;
            }
            Err(e) if strict => {
                progress.finish_and_clear();
                return Err(Failure::from(format!("line {}: {e}", index + 1)));
            }
            Err(_) => bad += 1,
        }
        if batch.len() >= 1000 {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    db.write(batch)?;
    progress.finish_and_clear();
    eprintln!("loaded {loaded} pairs, skipped {bad} bad lines");
    Ok(())
}

fn print_stats(stats: &Stats, as_json: bool) {
    if as_json {
        let tables: Vec<_> = stats
            .tables
            .iter()
            .map(|t| {
                json!({
                    "level": t.level, "number": t.number, "file_size": t.file_size,
                    "entries": t.entries, "bits_per_key": t.bits_per_key, "hashes": t.hashes,
                    "predicted_false_positive_rate": t.predicted_false_positive_rate,
                    "filter_bytes": t.filter_bytes,
                })
            })
            .collect();
        let levels: Vec<_> = stats
            .levels
            .iter()
            .enumerate()
            .map(|(i, l)| json!({"level": i, "tables": l.tables, "bytes": l.bytes, "entries": l.entries}))
            .collect();
        let doc = json!({
            "levels": levels, "tables": tables,
            "counters": {
                "filter_probes": stats.filter_probes, "filter_negatives": stats.filter_negatives,
                "filter_positives": stats.filter_positives,
                "filter_true_positives": stats.filter_true_positives,
                "data_block_reads": stats.data_block_reads, "bytes_read": stats.bytes_read,
            },
            "filter_memory_bytes": stats.filter_memory_bytes,
            "last_sequence": stats.last_sequence,
        });
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
        return;
    }
    println!("level  tables  entries     bytes");
    for (i, l) in stats.levels.iter().enumerate() {
        if l.tables > 0 {
            println!("L{i:<5} {:>6}  {:>7}  {:>8}", l.tables, l.entries, l.bytes);
        }
    }
    println!();
    println!("table       level  entries     bytes  bits/key  hashes  predicted fpr  filter bytes");
    for t in &stats.tables {
        let fmt_opt = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
        println!(
            "{:06}.sst  L{:<4} {:>7}  {:>8}  {:>8}  {:>6}  {:>13}  {:>12}",
            t.number,
            t.level,
            t.entries,
            t.file_size,
            fmt_opt(t.bits_per_key),
            fmt_opt(t.hashes),
            t.predicted_false_positive_rate
                .map_or("-".to_string(), |p| format!("{p:.6}")),
            t.filter_bytes
        );
    }
    println!();
    println!("filter memory bytes    {}", stats.filter_memory_bytes);
    println!("last sequence          {}", stats.last_sequence);
}

fn check(dir: &Path) -> Result<(), Failure> {
    let report = bloomkv::check::check_store_with(Arc::new(OsFileSystem), dir)?;
    for (path, offset, bytes) in &report.torn_tails {
        println!(
            "note: {} ends in a torn record at offset {offset} ({bytes} bytes)",
            path.display()
        );
    }
    println!(
        "checked {} tables ({} entries) and {} logs ({} records)",
        report.tables_ok, report.table_entries, report.logs, report.log_records
    );
    if report.is_clean() {
        println!("OK");
        return Ok(());
    }
    for problem in &report.problems {
        println!("damage: {problem}");
    }
    Err(Failure::from(format!(
        "{} damaged file(s); first: {}",
        report.problems.len(),
        report.problems[0]
    )))
}

fn sst(file: &Path, as_json: bool) -> Result<(), Failure> {
    let props = bloomkv::sstable::verify_table(Arc::new(OsFileSystem), file)?;
    let filter = props.filter.map(|(bits, hashes, fpr)| json!({"bits_per_key": bits, "hashes": hashes, "predicted_false_positive_rate": fpr}));
    let doc = json!({
        "file": file.display().to_string(),
        "entries": props.entries, "tombstones": props.tombstones, "distinct_keys": props.distinct_keys,
        "smallest_key": codec::format(&props.smallest_key, true),
        "largest_key": codec::format(&props.largest_key, true),
        "smallest_seq": props.smallest_seq, "largest_seq": props.largest_seq,
        "data_blocks": props.data_blocks, "data_size": props.data_size,
        "index_size": props.index_size, "filter_size": props.filter_size_bytes,
        "file_size": props.file_size, "filter": filter,
    });
    if as_json {
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    } else if let serde_json::Value::Object(map) = doc {
        for (k, v) in map {
            println!("{k:<14} {v}");
        }
    }
    Ok(())
}
