//! The commands that read pairs: `get`, `scan` and `dump`. They open the store read-only, so
//! nothing on disk changes.

use std::io::Write;
use std::ops::Bound;

use bloomkv::KeyspaceView;

use super::open::{keyspace, open_read_only, store_dir};
use super::output::stdout;
use crate::cli::{KeyFormat, KeyspaceArg, OpenFlags, StoreDir};
use crate::{codec, lines};
use crate::{output_error, Failure, NOT_FOUND};

/// `get`: prints the value of `key`, or fails with exit code 1 when there is none.
pub(super) fn get(
    key: &str,
    store: &StoreDir,
    keys: &KeyFormat,
    keyspace_arg: &KeyspaceArg,
    opening: &OpenFlags,
) -> Result<(), Failure> {
    let parsed = codec::parse(key, keys.hex)?;
    let db = open_read_only(store_dir(store)?, opening)?;
    match keyspace(&db, keyspace_arg, false)?.get_pinned(parsed)? {
        Some(value) => {
            let mut out = stdout();
            writeln!(out, "{}", codec::format(&value, keys.hex)).map_err(output_error)?;
            out.flush().map_err(output_error)
        }
        None => Err(Failure {
            code: NOT_FOUND,
            message: format!("no such key: {key}"),
        }),
    }
}

/// What `scan` was asked for, as given.
pub(super) struct ScanArgs {
    pub from: Option<String>,
    pub to: Option<String>,
    pub prefix: Option<String>,
    pub limit: Option<usize>,
    pub keys_only: bool,
    pub reverse: bool,
}

/// `scan`: prints the pairs of a range, a prefix or the whole keyspace.
pub(super) fn scan(
    args: ScanArgs,
    store: &StoreDir,
    keys: &KeyFormat,
    keyspace_arg: &KeyspaceArg,
    opening: &OpenFlags,
) -> Result<(), Failure> {
    let parse = |k: Option<String>| k.map(|k| codec::parse(&k, keys.hex)).transpose();
    let range = ScanRange {
        from: parse(args.from)?,
        to: parse(args.to)?,
        prefix: parse(args.prefix)?,
        reverse: args.reverse,
    };
    let db = open_read_only(store_dir(store)?, opening)?;
    let ks = keyspace(&db, keyspace_arg, false)?;
    print_range(&ks, keys.hex, &range, args.limit, args.keys_only)
}

/// `dump`: prints every pair as a line `load` reads back.
pub(super) fn dump(
    store: &StoreDir,
    keys: &KeyFormat,
    keyspace_arg: &KeyspaceArg,
    opening: &OpenFlags,
) -> Result<(), Failure> {
    let db = open_read_only(store_dir(store)?, opening)?;
    let ks = keyspace(&db, keyspace_arg, false)?;
    let mut out = stdout();
    for pair in ks.iter() {
        let (k, v) = pair?;
        writeln!(out, "{}", lines::dump_line(&k, &v, keys.hex)).map_err(output_error)?;
    }
    out.flush().map_err(output_error)
}

/// The keys `scan` visits.
struct ScanRange {
    from: Option<Vec<u8>>,
    to: Option<Vec<u8>>,
    prefix: Option<Vec<u8>>,
    /// Last key first.
    reverse: bool,
}

/// Prints the pairs of `range` as `scan` does, or only their keys.
fn print_range(
    db: &KeyspaceView,
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
    let past_prefix = range.prefix.as_deref().and_then(codec::prefix_end);
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
