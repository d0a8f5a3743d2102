//! Opening a store for a command: the directory `--db` names, the options every command
//! starts from, the filter `--filter-fpr` or `--no-filter` asks for, and the recovery mode
//! of `--wal-recovery`. Whatever the command, what recovery dropped from the WAL is said on
//! stderr.

use std::path::Path;

use bloomkv::filename::CURRENT;
use bloomkv::{Db, FilterPolicy, Keyspace, KeyspaceOptions, Options, WalRecoveryMode};

use super::output::counted;
use crate::cli::{KeyspaceArg, OpenFlags, StoreDir, TableFilter, WalMode};
use crate::Failure;

/// The directory of `--db`, which the command line checked was given.
pub(super) fn store_dir(store: &StoreDir) -> Result<&Path, Failure> {
    store
        .db
        .as_deref()
        .ok_or_else(|| Failure::from("this command needs --db DIR"))
}

/// Opens the store in `dir` for a command that writes, with the filter asked for; without
/// one, a store keeps the filter policy it recorded, and a new one takes a rate of 1%.
pub(super) fn open_to_write(
    dir: &Path,
    filter: &TableFilter,
    opening: &OpenFlags,
    create: bool,
) -> Result<Db, Failure> {
    let options = opening_options(opening);
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

/// The keyspace `--keyspace` names (the default keyspace without it), made when `create` and
/// the store has none of that name; else a missing one fails.
pub(super) fn keyspace(db: &Db, arg: &KeyspaceArg, create: bool) -> Result<Keyspace, Failure> {
    let name = arg.keyspace.as_deref().unwrap_or(bloomkv::DEFAULT_KEYSPACE);
    if create {
        return Ok(db.keyspace(name, KeyspaceOptions::new())?);
    }
    db.existing_keyspace(name).ok_or_else(|| {
        let names = db.keyspace_names().join(", ");
        Failure::from(format!(
            "the store has no keyspace {name:?} (it has: {names})"
        ))
    })
}

/// Opens the store for a command that only reads: nothing on disk changes.
pub(super) fn open_read_only(dir: &Path, opening: &OpenFlags) -> Result<Db, Failure> {
    require_store(dir)?;
    let db = Db::open_read_only(dir, opening_options(opening))?;
    note_dropped_wal(&db);
    Ok(db)
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

/// The options every command starts from: the defaults, with the filters uncapped and the
/// allocator tuned (kvtool is the whole process). A cap made from kvtool's own memory would
/// say nothing of the process that owns the store, and a `compact` from a small shell would
/// rewrite every table's filter to fit it, for good.
pub(super) fn tool_options() -> Options {
    Options::default()
        .no_filter_memory_limit()
        .tune_allocator(true)
}

/// [`tool_options`] with what `--wal-recovery` and `--prefix-extractor` ask for.
fn opening_options(opening: &OpenFlags) -> Options {
    let mut options = tool_options().wal_recovery_mode(wal_recovery_mode(opening));
    options.prefix_extractor = opening.prefix_extractor.clone();
    options
}

/// The recovery mode `--wal-recovery` names (the library's default without it).
fn wal_recovery_mode(opening: &OpenFlags) -> WalRecoveryMode {
    match opening.wal_recovery {
        Some(WalMode::Strict) => WalRecoveryMode::Strict,
        Some(WalMode::PointInTime) => WalRecoveryMode::PointInTime,
        Some(WalMode::Salvage) => WalRecoveryMode::Salvage,
        None => WalRecoveryMode::default(),
    }
}

/// Fails unless `dir` holds a store: that is, a CURRENT file.
pub(super) fn require_store(dir: &Path) -> Result<(), Failure> {
    match dir.join(CURRENT).exists() {
        true => Ok(()),
        false => Err(no_store(dir)),
    }
}

/// Why `dir` holds no store: no CURRENT in it, a file where a directory should be, or nothing.
pub(super) fn no_store(dir: &Path) -> Failure {
    let reason = if dir.is_dir() {
        "the directory has no CURRENT file"
    } else if dir.exists() {
        "it is a file; --db takes the store's directory"
    } else {
        "no such directory"
    };
    Failure::from(format!("no bloomkv store at {} ({reason})", dir.display()))
}

/// Says on stderr, whatever the command, what recovery left out of the WAL when it opened
/// the store: writes a user may be looking for.
fn note_dropped_wal(db: &Db) {
    for dropped in &db.recovery_report().dropped {
        eprintln!("note: recovery {}", describe_dropped(dropped));
    }
}

/// "dropped N bytes of LOG from offset O (cause, M intact write batches lost)".
pub(super) fn describe_dropped(dropped: &bloomkv::DroppedWal) -> String {
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
