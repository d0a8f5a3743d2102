//! The commands that write pairs: `put`, `delete` and `load`. Each flushes before it closes,
//! so the tables it leaves have the filter it asked for.

use std::io::BufRead;
use std::path::Path;

use bloomkv::entry::{MAX_KEY_LEN, MAX_VALUE_LEN};
use bloomkv::filename::CURRENT;
use bloomkv::{Db, Keyspace, WriteBatch};
use indicatif::ProgressBar;

use super::open::{keyspace, open_to_write, store_dir};
use super::output::counted;
use crate::cli::{KeyFormat, KeyspaceArg, OpenFlags, StoreDir, TableFilter};
use crate::{codec, lines, progress};
use crate::{Failure, SKIPPED_LINES};

/// `put`: sets `key` to `value`, creating a missing store.
pub(super) fn put(
    key: &str,
    value: &str,
    store: &StoreDir,
    keys: &KeyFormat,
    keyspace_arg: &KeyspaceArg,
    filter: &TableFilter,
    opening: &OpenFlags,
) -> Result<(), Failure> {
    let (key, value) = (codec::parse(key, keys.hex)?, codec::parse(value, keys.hex)?);
    let db = open_to_write(store_dir(store)?, filter, opening, true)?;
    keyspace(&db, keyspace_arg, true)?.put(key, value)?;
    close(db)
}

/// `delete`: deletes `key`.
pub(super) fn delete(
    key: &str,
    store: &StoreDir,
    keys: &KeyFormat,
    keyspace_arg: &KeyspaceArg,
    filter: &TableFilter,
    opening: &OpenFlags,
) -> Result<(), Failure> {
    let key = codec::parse(key, keys.hex)?;
    let db = open_to_write(store_dir(store)?, filter, opening, false)?;
    keyspace(&db, keyspace_arg, false)?.delete(key)?;
    close(db)
}

/// `deleterange`: deletes the keys from `begin` to `end` (excluded) as one write.
pub(super) fn delete_range(
    (begin, end): (&str, &str),
    store: &StoreDir,
    keys: &KeyFormat,
    keyspace_arg: &KeyspaceArg,
    filter: &TableFilter,
    opening: &OpenFlags,
) -> Result<(), Failure> {
    let (begin, end) = (codec::parse(begin, keys.hex)?, codec::parse(end, keys.hex)?);
    let db = open_to_write(store_dir(store)?, filter, opening, false)?;
    keyspace(&db, keyspace_arg, false)?.delete_range(begin, end)?;
    close(db)
}

/// The store and keyspace `load` writes to, and how.
pub(super) struct LoadTarget<'a> {
    pub store: &'a StoreDir,
    pub keyspace: &'a KeyspaceArg,
    pub filter: &'a TableFilter,
    pub opening: &'a OpenFlags,
}

/// `load`: writes the pairs of `file` (or stdin), creating a missing store.
pub(super) fn load(
    file: Option<&Path>,
    strict: bool,
    keys: &KeyFormat,
    target: LoadTarget,
) -> Result<(), Failure> {
    let input = open_input(file)?;
    let dir = store_dir(target.store)?;
    let (dir_existed, store_existed) = (dir.exists(), dir.join(CURRENT).exists());
    let db = open_to_write(dir, target.filter, target.opening, true)?;
    let ks = keyspace(&db, target.keyspace, true)?;
    let result = load_input(&db, &ks, keys.hex, input, strict);
    // A new store holds pairs only in the keyspace loaded.
    let empty = ks.iter().next().is_none();
    drop(ks);
    close(db)?;
    // A strict load that failed before its first pair leaves no store it created.
    if result.is_err() && empty && !store_existed {
        remove_new_store(dir, dir_existed);
    }
    result
}

/// Writes what is in the memtable to tables before closing, so the tables are written with
/// this command's filter policy (`--filter-fpr`, `--no-filter`) rather than with that of
/// whichever command opens the store next and replays the log.
fn close(db: Db) -> Result<(), Failure> {
    db.flush()?;
    db.close()?;
    Ok(())
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

/// Pairs per write batch during `load`.
const LOAD_BATCH: usize = 1000;
/// Inputs at least this long get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 1 << 20;

/// Writes the pairs of `input`'s lines in batches, counting and skipping bad lines, or
/// stopping at the first with `strict`.
fn load_input(
    db: &Db,
    ks: &Keyspace,
    hex: bool,
    mut input: Input,
    strict: bool,
) -> Result<(), Failure> {
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
                batch.put_in(ks, k, v);
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
