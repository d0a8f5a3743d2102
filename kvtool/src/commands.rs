//! One function per kvtool command, on bloomkv's public API only.

use std::io::{BufRead, BufWriter, Write};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use bloomkv::entry::{MAX_KEY_LEN, MAX_VALUE_LEN};
use bloomkv::filename::CURRENT;
use bloomkv::fs::OsFileSystem;
use bloomkv::{Db, FilterPolicy, FilterResidency, Options, Stats, WalRecoveryMode, WriteBatch};
use indicatif::ProgressBar;
use serde_json::json;

use crate::cli::{Command, StoreDir, TableFilter, WalMode, WalRecovery};
use crate::{codec, lines, progress};
use crate::{output_error, Failure, NOT_FOUND, SKIPPED_LINES};

/// Runs the parsed command.
pub fn run(command: Command) -> Result<(), Failure> {
    match command {
        Command::Put {
            key,
            value,
            store,
            keys,
            filter,
            wal,
        } => {
            let (key, value) = (
                codec::parse(&key, keys.hex)?,
                codec::parse(&value, keys.hex)?,
            );
            let db = open_to_write(store_dir(&store)?, &filter, &wal, true)?;
            db.put(key, value)?;
            close(db)?;
        }
        Command::Get {
            key,
            store,
            keys,
            wal,
        } => {
            let parsed = codec::parse(&key, keys.hex)?;
            let db = open_read_only(store_dir(&store)?, &wal)?;
            match db.get(parsed)? {
                Some(value) => {
                    let mut out = stdout();
                    writeln!(out, "{}", codec::format(&value, keys.hex)).map_err(output_error)?;
                    out.flush().map_err(output_error)?;
                }
                None => {
                    return Err(Failure {
                        code: NOT_FOUND,
                        message: format!("no such key: {key}"),
                    })
                }
            }
        }
        Command::Delete {
            key,
            store,
            keys,
            filter,
            wal,
        } => {
            let key = codec::parse(&key, keys.hex)?;
            let db = open_to_write(store_dir(&store)?, &filter, &wal, false)?;
            db.delete(key)?;
            close(db)?;
        }
        Command::Scan {
            from,
            to,
            prefix,
            limit,
            keys_only,
            reverse,
            store,
            keys,
            wal,
        } => {
            let parse = |k: Option<String>| k.map(|k| codec::parse(&k, keys.hex)).transpose();
            let range = ScanRange {
                from: parse(from)?,
                to: parse(to)?,
                prefix: parse(prefix)?,
                reverse,
            };
            let db = open_read_only(store_dir(&store)?, &wal)?;
            scan(&db, keys.hex, &range, limit, keys_only)?;
        }
        Command::Load {
            file,
            strict,
            store,
            keys,
            filter,
            wal,
        } => {
            let input = open_input(file.as_deref())?;
            let dir = store_dir(&store)?;
            let (dir_existed, store_existed) = (dir.exists(), dir.join(CURRENT).exists());
            let db = open_to_write(dir, &filter, &wal, true)?;
            let result = load(&db, keys.hex, input, strict);
            let empty = db.iter().next().is_none();
            close(db)?;
            // A strict load that failed before its first pair leaves no store it created.
            if result.is_err() && empty && !store_existed {
                remove_new_store(dir, dir_existed);
            }
            result?;
        }
        Command::Dump { store, keys, wal } => {
            let db = open_read_only(store_dir(&store)?, &wal)?;
            let mut out = stdout();
            for pair in db.iter() {
                let (k, v) = pair?;
                writeln!(out, "{}", lines::dump_line(&k, &v, keys.hex)).map_err(output_error)?;
            }
            out.flush().map_err(output_error)?;
        }
        Command::Stats {
            json,
            store,
            keys,
            wal,
        } => {
            let db = open_read_only(store_dir(&store)?, &wal)?;
            let text = stats_text(&db.stats(), keys.hex, json);
            emit(&text)?;
        }
        Command::Check { store } => check(store_dir(&store)?)?,
        Command::Compact { store, filter, wal } => {
            let db = open_to_write(store_dir(&store)?, &filter, &wal, false)?;
            db.compact()?;
            let stats = db.stats();
            let tables: usize = stats.levels.iter().map(|l| l.tables).sum();
            let entries: u64 = stats.levels.iter().map(|l| l.entries).sum();
            db.close()?;
            emit(&format!(
                "compacted: {} holding {}\n",
                counted(tables as u64, "table", "tables"),
                counted(entries, "entry", "entries")
            ))?;
        }
        Command::Repair { store } => repair(store_dir(&store)?)?,
        Command::Sst { file, json, keys } => sst(&file, keys.hex, json)?,
        Command::Bench(args) => crate::bench::run(&args)?,
    }
    Ok(())
}

/// The directory of `--db`, which the command line checked was given.
fn store_dir(store: &StoreDir) -> Result<&Path, Failure> {
    store
        .db
        .as_deref()
        .ok_or_else(|| Failure::from("this command needs --db DIR"))
}

fn stdout() -> BufWriter<std::io::StdoutLock<'static>> {
    BufWriter::new(std::io::stdout().lock())
}

/// Writes a command's whole output to stdout.
fn emit(text: &str) -> Result<(), Failure> {
    let mut out = stdout();
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)
}

/// Writes what is in the memtable to tables before closing, so the tables are written with
/// this command's filter policy (`--filter-fpr`, `--no-filter`) rather than with that of
/// whichever command opens the store next and replays the log.
fn close(db: Db) -> Result<(), Failure> {
    db.flush()?;
    db.close()?;
    Ok(())
}

/// The filter policy `--filter-fpr` or `--no-filter` asks for; `None` without either.
fn filter_policy(filter: &TableFilter) -> Result<Option<FilterPolicy>, Failure> {
    if filter.no_filter {
        return Ok(Some(FilterPolicy::Disabled));
    }
    let Some(p) = filter.filter_fpr else {
        return Ok(None);
    };
    bloomkv::filter::FilterParams::for_false_positive_rate(p)?;
    Ok(Some(FilterPolicy::FalsePositiveRate(p)))
}

/// The filter rate of a store kvtool creates when no filter is asked for.
const NEW_STORE_FILTER_FPR: f64 = 0.01;

/// Fails unless `dir` holds a store: that is, a CURRENT file.
fn require_store(dir: &Path) -> Result<(), Failure> {
    match dir.join(CURRENT).exists() {
        true => Ok(()),
        false => Err(no_store(dir)),
    }
}

/// Why `dir` holds no store: no CURRENT in it, a file where a directory should be, or nothing.
fn no_store(dir: &Path) -> Failure {
    let reason = if dir.is_dir() {
        "the directory has no CURRENT file"
    } else if dir.exists() {
        "it is a file; --db takes the store's directory"
    } else {
        "no such directory"
    };
    Failure::from(format!("no bloomkv store at {} ({reason})", dir.display()))
}

/// The recovery mode `--wal-recovery` names (the library's default without it).
fn wal_recovery_mode(wal: &WalRecovery) -> WalRecoveryMode {
    match wal.wal_recovery {
        Some(WalMode::Strict) => WalRecoveryMode::Strict,
        Some(WalMode::PointInTime) => WalRecoveryMode::PointInTime,
        Some(WalMode::Salvage) => WalRecoveryMode::Salvage,
        None => WalRecoveryMode::default(),
    }
}

/// The options every command starts from: the defaults, with the filters uncapped. A cap
/// made from kvtool's own memory would say nothing of the process that owns the store, and a
/// `compact` from a small shell would rewrite every table's filter to fit it, for good.
fn tool_options() -> Options {
    Options::default().no_filter_memory_limit()
}

/// Opens the store in `dir` for a command that writes, with the filter asked for; without
/// one, a store keeps the filter policy it recorded, and a new one takes a rate of 1%.
fn open_to_write(
    dir: &Path,
    filter: &TableFilter,
    wal: &WalRecovery,
    create: bool,
) -> Result<Db, Failure> {
    let options = tool_options().wal_recovery_mode(wal_recovery_mode(wal));
    let new_store = !dir.join(CURRENT).exists();
    let options = match filter_policy(filter)? {
        Some(policy) => options.filter_policy(policy),
        None if new_store => {
            options.filter_policy(FilterPolicy::FalsePositiveRate(NEW_STORE_FILTER_FPR))
        }
        None => options,
    };
    open(dir, options, create)
}

/// Opens the store for a command that writes. The library refuses to create a store over
/// the files of one that lost its CURRENT, and says what is there.
fn open(dir: &Path, options: Options, create: bool) -> Result<Db, Failure> {
    if !create {
        require_store(dir)?;
    }
    let db = Db::open(dir, options.create_if_missing(create))?;
    note_dropped_wal(&db);
    Ok(db)
}

/// Opens the store for a command that only reads: nothing on disk changes.
fn open_read_only(dir: &Path, wal: &WalRecovery) -> Result<Db, Failure> {
    require_store(dir)?;
    let options = tool_options().wal_recovery_mode(wal_recovery_mode(wal));
    let db = Db::open_read_only(dir, options)?;
    note_dropped_wal(&db);
    Ok(db)
}

/// Says on stderr, whatever the command, what recovery left out of the WAL when it opened
/// the store: writes a user may be looking for.
fn note_dropped_wal(db: &Db) {
    for dropped in &db.recovery_report().dropped {
        eprintln!("note: recovery {}", describe_dropped(dropped));
    }
}

/// "dropped N bytes of LOG from offset O (cause, M intact write batches lost)".
fn describe_dropped(dropped: &bloomkv::DroppedWal) -> String {
    format!(
        "dropped {} of {} from offset {} ({:?}, {} lost)",
        counted(dropped.bytes, "byte", "bytes"),
        dropped.log.display(),
        dropped.offset,
        dropped.cause,
        counted(
            dropped.intact_batches,
            "intact write batch",
            "intact write batches"
        ),
    )
}

fn repair(dir: &Path) -> Result<(), Failure> {
    require_store_files(dir)?;
    let report = bloomkv::repair(dir, tool_options())?;
    let mut text = String::new();
    for (name, why) in &report.unusable_manifests {
        text += &format!("passed over {name}: {why}\n");
    }
    if let Some(name) = &report.restored_current {
        text += &format!("restored CURRENT: it names {name}\n");
    }
    let recovery = &report.recovery;
    text += &format!(
        "kept {} from the WAL\n",
        counted(recovery.batches_replayed, "write batch", "write batches")
    );
    for dropped in &recovery.dropped {
        text += &format!("{}\n", describe_dropped(dropped));
    }
    for table in &report.salvaged {
        text += &format!(
            "damaged table {} (level {}): {}\n  kept {} and {}, dropped {} and {}; {}; the damaged file is now {}\n",
            table.file,
            table.level,
            table.damage,
            counted(table.blocks_kept, "block", "blocks"),
            counted(table.entries_kept, "entry", "entries"),
            counted(table.blocks_dropped, "block", "blocks"),
            counted(table.entries_lost, "entry", "entries"),
            match &table.replaced_by {
                Some(name) => format!("what was kept is in {name}"),
                None => "nothing of it was kept".to_string(),
            },
            table.moved_to.display(),
        );
    }
    if !report.salvaged.is_empty() {
        text += &format!(
            "lost {} of damaged tables\n",
            counted(report.table_entries_lost(), "entry", "entries")
        );
    }
    // The repair is judged as `check` judges the store: what it could not mend fails it.
    let after = bloomkv::check::check_store_with(Arc::new(OsFileSystem), dir)?;
    if !after.is_clean() {
        emit(&text)?;
        let problems: Vec<String> = after.problems.iter().map(|p| p.to_string()).collect();
        return Err(Failure::from(format!(
            "the store opens, but check still finds damage: {}",
            problems.join("; ")
        )));
    }
    text += "the store opens again and check finds no damage\n";
    emit(&text)
}

/// Removes the empty store a failed command created in `dir`: the directory too when the
/// command made it, else only the files a store names (the directory may hold others).
fn remove_new_store(dir: &Path, dir_existed: bool) {
    if !dir_existed {
        let _ = std::fs::remove_dir_all(dir);
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_store_file = name
            .to_str()
            .and_then(bloomkv::filename::parse_file_name)
            .is_some();
        if is_store_file {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Fails unless `dir` is a directory: `repair` works on a store that may lack CURRENT.
fn require_store_files(dir: &Path) -> Result<(), Failure> {
    match dir.is_dir() {
        true => Ok(()),
        false => Err(no_store(dir)),
    }
}

/// The keys `scan` visits.
struct ScanRange {
    from: Option<Vec<u8>>,
    to: Option<Vec<u8>>,
    prefix: Option<Vec<u8>>,
    /// Last key first.
    reverse: bool,
}

/// The first key past every key that starts with `prefix`; `None` when none is (every byte
/// of the prefix is 0xff, or it is empty).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}

fn scan(
    db: &Db,
    hex: bool,
    range: &ScanRange,
    limit: Option<usize>,
    keys_only: bool,
) -> Result<(), Failure> {
    let start = match (&range.from, &range.prefix) {
        (Some(f), Some(p)) => Bound::Included(f.as_slice().max(p.as_slice())),
        (Some(f), None) => Bound::Included(f.as_slice()),
        (None, Some(p)) => Bound::Included(p.as_slice()),
        (None, None) => Bound::Unbounded,
    };
    // The prefix ends the range too, so that a reverse scan starts at the prefix's last key.
    let past_prefix = range.prefix.as_deref().and_then(prefix_end);
    let end = match (range.to.as_deref(), past_prefix.as_deref()) {
        (Some(to), Some(past)) => Bound::Excluded(to.min(past)),
        (Some(end), None) | (None, Some(end)) => Bound::Excluded(end),
        (None, None) => Bound::Unbounded,
    };
    let mut out = stdout();
    let pairs = db.range::<&[u8], _>((start, end));
    let pairs: Box<dyn Iterator<Item = _>> = match range.reverse {
        true => Box::new(pairs.rev()),
        false => Box::new(pairs),
    };
    let pairs = pairs
        .take_while(|r| match (r, &range.prefix) {
            (Ok((k, _)), Some(p)) => k.starts_with(p),
            _ => true,
        })
        .take(limit.unwrap_or(usize::MAX));
    for pair in pairs {
        let (k, v) = pair?;
        if keys_only {
            writeln!(out, "{}", codec::format(&k, hex))
        } else {
            writeln!(out, "{}", lines::scan_line(&k, &v, hex))
        }
        .map_err(output_error)?;
    }
    out.flush().map_err(output_error)
}

/// Where `load` reads from, and its size when known (for the progress bar).
struct Input {
    reader: Box<dyn BufRead>,
    bytes: Option<u64>,
}

fn open_input(file: Option<&Path>) -> Result<Input, Failure> {
    match file {
        Some(path) if path != Path::new("-") => {
            let f = std::fs::File::open(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let bytes = f.metadata().ok().map(|m| m.len());
            Ok(Input {
                reader: Box::new(std::io::BufReader::new(f)),
                bytes,
            })
        }
        _ => Ok(Input {
            reader: Box::new(std::io::stdin().lock()),
            bytes: None,
        }),
    }
}

/// One `load` line as a pair, or why it is bad.
fn parse_line(line: &[u8], hex: bool) -> Result<(Vec<u8>, Vec<u8>), String> {
    let (k, v) = lines::split(line)?;
    let key = codec::parse_bytes(k, hex).map_err(|e| format!("key: {e}"))?;
    let value = codec::parse_bytes(v, hex).map_err(|e| format!("value: {e}"))?;
    if key.len() > MAX_KEY_LEN {
        return Err(format!(
            "key of {} bytes exceeds the limit of {MAX_KEY_LEN} bytes",
            key.len()
        ));
    }
    if value.len() > MAX_VALUE_LEN {
        return Err(format!(
            "value of {} bytes exceeds the limit of {MAX_VALUE_LEN} bytes",
            value.len()
        ));
    }
    Ok((key, value))
}

/// Pairs per write batch during `load`.
const LOAD_BATCH: usize = 1000;
/// Inputs at least this long get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 1 << 20;

fn load(db: &Db, hex: bool, mut input: Input, strict: bool) -> Result<(), Failure> {
    let progress = match input.bytes {
        Some(bytes) if bytes >= PROGRESS_MIN_BYTES => progress::bytes(bytes, "load"),
        Some(_) => ProgressBar::hidden(),
        // A pipe's length is unknown: count lines instead.
        None => progress::lines("load"),
    };
    let (mut loaded, mut bad) = (0u64, 0u64);
    let mut first_bad: Option<(u64, String)> = None;
    let mut batch = WriteBatch::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read = input
            .reader
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("reading input at line {}: {e}", number + 1))?;
        if read == 0 {
            break;
        }
        number += 1;
        match input.bytes {
            Some(_) => progress.inc(read as u64),
            None => progress.inc(1),
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        if line.is_empty() {
            continue;
        }
        match parse_line(&line, hex) {
            Ok((k, v)) => {
                batch.put(k, v);
                loaded += 1;
            }
            Err(e) if strict => {
                progress.finish_and_clear();
                // The pairs before the bad line go in, as those of earlier batches did.
                db.write(std::mem::take(&mut batch))?;
                let before = match loaded {
                    0 => "nothing was loaded".to_string(),
                    1 => "1 pair before it was loaded".to_string(),
                    n => format!("{n} pairs before it were loaded"),
                };
                return Err(Failure::from(format!("line {number}: {e} ({before})")));
            }
            Err(e) => {
                bad += 1;
                first_bad.get_or_insert((number, e));
            }
        }
        if batch.len() >= LOAD_BATCH {
            db.write(std::mem::take(&mut batch))?;
        }
    }
    db.write(batch)?;
    progress.finish_and_clear();
    let pairs = counted(loaded, "pair", "pairs");
    let Some((number, e)) = first_bad else {
        eprintln!("loaded {pairs}");
        return Ok(());
    };
    let skipped = counted(bad, "bad line", "bad lines");
    eprintln!("loaded {pairs}, skipped {skipped} (first: line {number}: {e})");
    // The report above is the message; the exit status tells scripts that lines were lost.
    Err(Failure {
        code: SKIPPED_LINES,
        message: String::new(),
    })
}

/// `n` and the noun for `n` of them: "1 pair", "2 pairs".
fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Each level's shape and I/O, as `stats --json` and `bench --writes` report them.
pub fn levels_json(stats: &Stats) -> Vec<serde_json::Value> {
    stats
        .levels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            json!({
                "level": i, "tables": l.tables, "bytes": l.bytes, "entries": l.entries,
                "bytes_written": l.bytes_written, "bytes_read": l.bytes_read,
                "compactions": l.compactions, "tables_moved": l.tables_moved,
                "bytes_moved": l.bytes_moved, "target_bits_per_key": l.target_bits_per_key,
                "tables_off_target": l.tables_off_target,
                "filter_probes": l.filter_probes, "filter_negatives": l.filter_negatives(),
                "filter_positives": l.filter_positives,
                "filter_true_positives": l.filter_true_positives,
                "measured_false_positive_rate": l.measured_false_positive_rate(),
                "predicted_false_positive_rate": l.predicted_false_positive_rate,
            })
        })
        .collect()
}

fn stats_json(stats: &Stats, hex: bool) -> serde_json::Value {
    let tables: Vec<_> = stats
        .tables
        .iter()
        .map(|t| {
            json!({
                "level": t.level, "number": t.number, "file_size": t.file_size,
                "entries": t.entries,
                "smallest_key": codec::format(&t.smallest_key, hex),
                "largest_key": codec::format(&t.largest_key, hex),
                "bits_per_key": t.bits_per_key, "hashes": t.hashes,
                "predicted_false_positive_rate": t.predicted_false_positive_rate,
                "filter_bytes": t.filter_bytes,
            })
        })
        .collect();
    json!({
        "levels": levels_json(stats),
        "tables": tables,
        "totals": {
            "tables": stats.tables.len(),
            "entries": stats.levels.iter().map(|l| l.entries).sum::<u64>(),
            "bytes": stats.table_bytes(),
        },
        "counters": {
            "filter_probes": stats.filter_probes,
            "filter_negatives": stats.filter_negatives,
            "filter_positives": stats.filter_positives,
            "filter_true_positives": stats.filter_true_positives,
            "filter_false_positives": stats.filter_false_positives(),
            "measured_false_positive_rate": stats.measured_false_positive_rate(),
            "data_block_reads": stats.data_block_reads,
            "bytes_read": stats.bytes_read,
            "flushes": stats.flushes,
            "compactions": stats.compactions,
            "trivial_moves": stats.trivial_moves,
            "split_compactions": stats.split_compactions,
            "write_stalls": stats.write_stalls,
            "write_stops_for_flush": stats.write_stops_for_flush,
            "write_stops_for_level0": stats.write_stops_for_level0,
            "longest_stall_seconds": stats.longest_stall_micros as f64 / 1e6,
        },
        "writes": {
            "user_bytes": stats.user_bytes_written,
            "wal_bytes": stats.wal_bytes_written,
            "flush_bytes": stats.flush_bytes_written(),
            "compaction_bytes_written": stats.compaction_bytes_written(),
            "compaction_bytes_read": stats.compaction_bytes_read(),
            "write_amplification": stats.write_amplification(),
            "stall_seconds": stats.stall_micros as f64 / 1e6,
        },
        "memtable_bytes": stats.memtable_bytes,
        "immutable_memtables": stats.immutable_memtables,
        "filter_policy": policy_text(&stats.filter_policy),
        "filter_memory_bytes": stats.filter_memory_bytes,
        "filter_memory_limit_bytes": stats.filter_memory_limit,
        "tables_filter_shrunk": tables_filter_shrunk(stats),
        "filter_partitions": filter_partitions_json(stats),
        "index_memory_bytes": stats.index_memory_bytes,
        "index_cache": {
            "capacity_bytes": stats.index_cache.capacity,
            "bytes": stats.index_cache.bytes,
            "hits": stats.index_cache.hits,
            "misses": stats.index_cache.misses,
            "evictions": stats.index_cache.evictions,
        },
        "index_partition_reads": stats.index_block_reads,
        "block_cache": {
            "capacity_bytes": stats.block_cache.capacity,
            "bytes": stats.block_cache.bytes,
            "blocks": stats.block_cache.blocks,
            "hits": stats.block_cache.hits,
            "misses": stats.block_cache.misses,
            "inserts": stats.block_cache.inserts,
            "evictions": stats.block_cache.evictions,
            "hit_rate": stats.block_cache.hit_rate(),
        },
        "table_cache": {
            "max_open_files": stats.table_cache.capacity,
            "open_files": stats.table_cache.open_files,
            "opens": stats.table_cache.opens,
            "closes": stats.table_cache.closes,
        },
        "last_sequence": stats.last_sequence,
    })
}

fn tables_filter_shrunk(stats: &Stats) -> usize {
    stats.levels.iter().map(|l| l.tables_filter_shrunk).sum()
}

/// Partitioned filters: how many tables have one, and how their partitions are held.
struct PartitionCounts {
    tables: usize,
    partitions: usize,
    whole: usize,
    folded: usize,
    dropped: usize,
}

fn partition_counts(stats: &Stats) -> PartitionCounts {
    let mut c = PartitionCounts {
        tables: 0,
        partitions: 0,
        whole: 0,
        folded: 0,
        dropped: 0,
    };
    for t in stats
        .tables
        .iter()
        .filter(|t| !t.filter_partitions.is_empty())
    {
        c.tables += 1;
        for p in &t.filter_partitions {
            c.partitions += 1;
            match p {
                FilterResidency::Whole => c.whole += 1,
                FilterResidency::Folded(_) => c.folded += 1,
                _ => c.dropped += 1,
            }
        }
    }
    c
}

pub(crate) fn filter_partitions_json(stats: &Stats) -> serde_json::Value {
    let c = partition_counts(stats);
    json!({
        "tables": c.tables,
        "partitions": c.partitions,
        "whole": c.whole,
        "folded": c.folded,
        "dropped": c.dropped,
    })
}

/// The filter policy the store writes with, in the words of kvtool's options and bench
/// settings: `none`, a rate, `budget:B`, `reads:R`, or exact parameters.
fn policy_text(policy: &FilterPolicy) -> String {
    match policy {
        FilterPolicy::Disabled => "none".to_string(),
        FilterPolicy::FalsePositiveRate(p) => format!("rate {p}"),
        FilterPolicy::BitsPerKeyBudget(b) => format!("budget:{b} (bits per key over the levels)"),
        FilterPolicy::WastedReadsTarget(r) => format!("reads:{r} (wasted reads per absent get)"),
        FilterPolicy::Params(p) => {
            format!("{} bits per key, {} hashes", p.bits_per_key(), p.hashes())
        }
    }
}

/// The filters' memory, with the limit they are held to and how many were shrunk to fit it.
fn filter_memory_text(stats: &Stats) -> String {
    match stats.filter_memory_limit {
        None => format!("{} (no limit)", stats.filter_memory_bytes),
        Some(limit) => format!(
            "{} of a limit of {limit} ({} tables' filters shrunk to fit){}",
            stats.filter_memory_bytes,
            tables_filter_shrunk(stats),
            match partition_counts(stats) {
                c if c.tables == 0 => String::new(),
                c => format!(
                    "; {} tables in {} filter partitions: {} whole, {} folded, {} dropped",
                    c.tables, c.partitions, c.whole, c.folded, c.dropped
                ),
            }
        ),
    }
}

fn stats_text(stats: &Stats, hex: bool, as_json: bool) -> String {
    use std::fmt::Write as _;
    if as_json {
        let doc = stats_json(stats, hex);
        return serde_json::to_string_pretty(&doc).expect("a JSON value serializes") + "\n";
    }
    let mut out = String::new();
    let total_entries: u64 = stats.levels.iter().map(|l| l.entries).sum();
    // Bits per key as the level's tables have them (a range when they differ): the target of
    // a policy would be that of the options this command opened with, not the store's.
    let _ = writeln!(
        out,
        "level  tables  entries     bytes     written        read  moved in  filter bits/key"
    );
    for (i, l) in stats.levels.iter().enumerate() {
        if l.tables > 0 || l.bytes_written > 0 || l.bytes_moved > 0 {
            let _ = writeln!(
                out,
                "L{i:<5} {:>6}  {:>7}  {:>8}  {:>10}  {:>10}  {:>8}  {:>15}",
                l.tables,
                l.entries,
                l.bytes,
                l.bytes_written,
                l.bytes_read,
                l.bytes_moved,
                level_bits_per_key(stats, i),
            );
        }
    }
    let _ = writeln!(
        out,
        "total  {:>6}  {:>7}  {:>8}",
        stats.tables.len(),
        total_entries,
        stats.table_bytes()
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "table       level  entries     bytes  bits/key  hashes  predicted fpr  filter bytes"
    );
    for t in &stats.tables {
        let fmt_opt = |v: Option<u32>| v.map_or("none".to_string(), |v| v.to_string());
        let _ = writeln!(
            out,
            "{:06}.sst  L{:<4} {:>7}  {:>8}  {:>8}  {:>6}  {:>13}  {:>12}",
            t.number,
            t.level,
            t.entries,
            t.file_size,
            fmt_opt(t.bits_per_key),
            fmt_opt(t.hashes),
            t.predicted_false_positive_rate
                .map_or("none".to_string(), |p| format!("{p:.6}")),
            t.filter_bytes
        );
    }
    let _ = writeln!(out);
    let measured = stats
        .measured_false_positive_rate()
        .map_or("-".to_string(), |p| format!("{p:.6}"));
    let cache = &stats.block_cache;
    let amplification = stats
        .write_amplification()
        .map_or("-".to_string(), |w| format!("{w:.2}"));
    // Three headings, for what each count covers: the store's life (kept in its manifest),
    // this open, and now.
    let life: [(&str, String); 9] = [
        ("flushes", stats.flushes.to_string()),
        ("compactions", stats.compactions.to_string()),
        ("trivial moves", stats.trivial_moves.to_string()),
        ("write stalls", stats.write_stalls.to_string()),
        (
            "stall seconds",
            format!("{:.3}", stats.stall_micros as f64 / 1e6),
        ),
        ("user bytes written", stats.user_bytes_written.to_string()),
        ("WAL bytes written", stats.wal_bytes_written.to_string()),
        (
            "table bytes written",
            format!(
                "{} (flushes {}, compactions {})",
                stats.flush_bytes_written() + stats.compaction_bytes_written(),
                stats.flush_bytes_written(),
                stats.compaction_bytes_written()
            ),
        ),
        ("write amplification", amplification),
    ];
    let this_open: [(&str, String); 18] = [
        ("filter probes", stats.filter_probes.to_string()),
        ("filter negatives", stats.filter_negatives.to_string()),
        ("filter positives", stats.filter_positives.to_string()),
        (
            "filter true positives",
            stats.filter_true_positives.to_string(),
        ),
        ("measured fpr", measured),
        ("data block reads", stats.data_block_reads.to_string()),
        ("bytes read", stats.bytes_read.to_string()),
        ("split compactions", stats.split_compactions.to_string()),
        (
            "write stops for flush",
            stats.write_stops_for_flush.to_string(),
        ),
        (
            "write stops for level 0",
            stats.write_stops_for_level0.to_string(),
        ),
        (
            "longest stall seconds",
            format!("{:.3}", stats.longest_stall_micros as f64 / 1e6),
        ),
        ("block cache hits", cache.hits.to_string()),
        ("block cache misses", cache.misses.to_string()),
        ("block cache inserts", cache.inserts.to_string()),
        ("block cache evictions", cache.evictions.to_string()),
        ("index partition reads", stats.index_block_reads.to_string()),
        ("index cache hits", stats.index_cache.hits.to_string()),
        ("table file opens", stats.table_cache.opens.to_string()),
    ];
    let now: [(&str, String); 9] = [
        ("filter policy", policy_text(&stats.filter_policy)),
        ("memtable bytes", stats.memtable_bytes.to_string()),
        ("filter memory bytes", filter_memory_text(stats)),
        ("index memory bytes", stats.index_memory_bytes.to_string()),
        (
            "index cache bytes",
            format!(
                "{} of {}",
                stats.index_cache.bytes, stats.index_cache.capacity
            ),
        ),
        (
            "block cache bytes",
            format!("{} of {}", cache.bytes, cache.capacity),
        ),
        (
            "open table files",
            format!(
                "{} of {}",
                stats.table_cache.open_files, stats.table_cache.capacity
            ),
        ),
        ("last sequence", stats.last_sequence.to_string()),
        (
            "background error",
            stats
                .background_error
                .clone()
                .unwrap_or_else(|| "none".into()),
        ),
    ];
    for (heading, counters) in [
        ("over the store's life:", &life[..]),
        ("since this open:", &this_open[..]),
        ("now:", &now[..]),
    ] {
        let _ = writeln!(out, "{heading}");
        for (name, value) in counters {
            let _ = writeln!(out, "  {name:<22} {value}");
        }
    }
    out
}

/// The bits per key of level `level`'s tables: one number, a range when they differ, `none`
/// when no table has a filter.
fn level_bits_per_key(stats: &Stats, level: usize) -> String {
    let bits: Vec<Option<u32>> = stats
        .tables
        .iter()
        .filter(|t| t.level == level)
        .map(|t| t.bits_per_key)
        .collect();
    let with = bits.iter().flatten();
    let (low, high) = (with.clone().min(), with.max());
    let unfiltered = bits.iter().any(Option::is_none);
    match (low, high, unfiltered) {
        (None, _, _) => "none".to_string(),
        (Some(l), Some(h), false) if l == h => l.to_string(),
        (Some(l), Some(h), false) => format!("{l}-{h}"),
        (Some(l), Some(h), true) => format!("none, {l}-{h}"),
        _ => "-".to_string(),
    }
}

fn check(dir: &Path) -> Result<(), Failure> {
    // First whether there is a store at all, so that a missing directory or CURRENT reads as
    // "no store" rather than as damage or an I/O error.
    require_store(dir)?;
    let report = bloomkv::check::check_store_with(Arc::new(OsFileSystem), dir)?;
    let mut out = String::new();
    for (path, offset, bytes) in &report.torn_tails {
        out += &format!(
            "note: {} ends in a torn record at offset {offset} ({bytes} bytes)\n",
            path.display()
        );
    }
    let damaged_logs = match report.damaged_logs {
        0 => String::new(),
        n => format!(", {n} of them damaged"),
    };
    out += &format!(
        "checked {} ({}) and {} ({}{damaged_logs})\n",
        counted(report.tables_ok as u64, "table", "tables"),
        counted(report.table_entries, "entry", "entries"),
        counted(report.logs as u64, "log", "logs"),
        counted(report.log_records, "intact record", "intact records"),
    );
    for path in &report.unreferenced {
        out += &format!(
            "unreferenced: {} (the store does not use it)\n",
            path.display()
        );
    }
    if report.is_clean() {
        out += "OK\n";
        return emit(&out);
    }
    for problem in &report.problems {
        out += &format!("damage: {problem}\n");
    }
    emit(&out)?;
    Err(Failure::from(format!(
        "{}; first: {}",
        counted(
            report.problems.len() as u64,
            "damaged file",
            "damaged files"
        ),
        report.problems[0]
    )))
}

fn sst(file: &Path, hex: bool, as_json: bool) -> Result<(), Failure> {
    if !file.is_file() {
        return Err(Failure::from(match file.is_dir() {
            true => format!(
                "{} is a directory; sst takes one table file (NNNNNN.sst), and \
                 `kvtool --db DIR stats` describes a store",
                file.display()
            ),
            false => format!("no such table file: {}", file.display()),
        }));
    }
    // A store's other files are named for what they are: say so rather than "bad magic".
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if let Some(kind) = bloomkv::filename::parse_file_name(name) {
        if !matches!(kind, bloomkv::filename::FileKind::Table(_)) {
            return Err(Failure::from(format!(
                "{} is not a table but a store's {} file; `kvtool --db DIR check` reads those",
                file.display(),
                kind.describe()
            )));
        }
    }
    let props = bloomkv::sstable::verify_table(Arc::new(OsFileSystem), file)?;
    if as_json {
        let filter = props.filter.map(|(bits, hashes, fpr)| {
            json!({"bits_per_key": bits, "hashes": hashes, "predicted_false_positive_rate": fpr})
        });
        let doc = json!({
            "file": file.display().to_string(),
            "entries": props.entries, "tombstones": props.tombstones,
            "distinct_keys": props.distinct_keys,
            "smallest_key": codec::format(&props.smallest_key, hex),
            "largest_key": codec::format(&props.largest_key, hex),
            "smallest_seq": props.smallest_seq, "largest_seq": props.largest_seq,
            "data_blocks": props.data_blocks, "data_size": props.data_size,
            "index_size": props.index_size, "filter_size": props.filter_size_bytes,
            "file_size": props.file_size, "filter": filter,
            "filter_partitions": props.filter_partitions,
            "format_version": props.format_version,
            "raw_key_bytes": props.raw_key_bytes, "raw_value_bytes": props.raw_value_bytes,
        });
        return emit(
            &(serde_json::to_string_pretty(&doc).expect("a JSON value serializes") + "\n"),
        );
    }
    let filter = match props.filter {
        Some((bits, hashes, fpr)) => {
            let parts = match props.filter_partitions {
                0 => String::new(),
                n => format!(", in {n} partitions"),
            };
            format!("bloom, {bits} bits per key, {hashes} hashes, predicted fpr {fpr:.6}{parts}")
        }
        None => "none".to_string(),
    };
    let rows: [(&str, String); 17] = [
        ("file", file.display().to_string()),
        ("format version", props.format_version.to_string()),
        ("file size", props.file_size.to_string()),
        ("entries", props.entries.to_string()),
        ("tombstones", props.tombstones.to_string()),
        ("distinct keys", props.distinct_keys.to_string()),
        ("smallest key", codec::format(&props.smallest_key, hex)),
        ("largest key", codec::format(&props.largest_key, hex)),
        ("smallest seq", props.smallest_seq.to_string()),
        ("largest seq", props.largest_seq.to_string()),
        ("raw key bytes", props.raw_key_bytes.to_string()),
        ("raw value bytes", props.raw_value_bytes.to_string()),
        ("data blocks", props.data_blocks.to_string()),
        ("data size", props.data_size.to_string()),
        ("index size", props.index_size.to_string()),
        ("filter size", props.filter_size_bytes.to_string()),
        ("filter", filter),
    ];
    let mut out = String::from("table properties:\n");
    for (name, value) in rows {
        out += &format!("  {name:<16} {value}\n");
    }
    out += "checksums: OK\n";
    emit(&out)
}
