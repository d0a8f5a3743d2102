//! kvtool's command line: the commands and their arguments, and the options several commands
//! share. A shared option may come before the command (`kvtool --db DIR get KEY`) or after it
//! (`kvtool get --db DIR KEY`); each command's help lists only the shared options it takes,
//! under their own heading, and one given before a command that does not take it is refused.

use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::bench::BenchArgs;
use crate::headings::COMMON;

/// The command line of a bloomkv store: read and write keys, load and dump pairs, inspect
/// tables and their Bloom filters, and measure what the filters save.
#[derive(Parser, Debug)]
#[command(
    name = "kvtool",
    version,
    arg_required_else_help = true,
    after_help = "Common options may come before the command or after it; \
                  `kvtool help COMMAND` lists the options COMMAND takes."
)]
struct Cli {
    #[command(flatten)]
    store: StoreDir,
    #[command(flatten)]
    keys: KeyFormat,
    #[command(flatten)]
    keyspace: KeyspaceArg,
    #[command(flatten)]
    filter: TableFilter,
    #[command(subcommand)]
    command: Command,
}

/// `--db`: the store a command works on.
#[derive(Args, Debug, Clone, Default)]
pub struct StoreDir {
    /// The store's directory.
    #[arg(long, value_name = "DIR", help_heading = COMMON)]
    pub db: Option<PathBuf>,
}

/// `--hex`: how keys and values are given and printed.
#[derive(Args, Debug, Clone, Default)]
pub struct KeyFormat {
    /// Keys and values are given and printed as hex with a 0x prefix, instead of as escaped
    /// text.
    #[arg(long, help_heading = COMMON)]
    pub hex: bool,
}

/// `--keyspace`: the keyspace a command reads or writes.
#[derive(Args, Debug, Clone, Default)]
pub struct KeyspaceArg {
    /// The keyspace to read or write (default: the store's default keyspace). `put` and
    /// `load` create it when the store has none of that name; `stats` then reports its levels
    /// and tables.
    #[arg(long, value_name = "NAME", help_heading = COMMON)]
    pub keyspace: Option<String>,
}

/// `--filter-fpr`, `--no-filter`: the Bloom filters of the tables a command writes (a
/// command that writes opens the store for writing, and opening writes what the log holds
/// into a table).
#[derive(Args, Debug, Clone, Default)]
pub struct TableFilter {
    /// Target false-positive rate of the Bloom filters of the tables this command writes, from
    /// now on: the store records it, and later commands keep it (default: the store's
    /// recorded policy; 0.01 for a new store).
    #[arg(long, value_name = "P", conflicts_with = "no_filter", help_heading = COMMON)]
    pub filter_fpr: Option<f64>,
    /// Write tables without Bloom filters.
    #[arg(long, help_heading = COMMON)]
    pub no_filter: bool,
}

/// How a command opens the store: `--wal-recovery` and `--prefix-extractor`.
#[derive(Args, Debug, Clone, Default)]
pub struct OpenFlags {
    /// What to do with a damaged WAL. Without this flag: drop a torn last record, or what
    /// follows a lost page of writes that were never synced, and refuse other damage.
    /// `strict`: refuse any damage. `point-in-time`: keep the writes before the first damage.
    /// `salvage`: keep every intact record.
    #[arg(long, value_name = "MODE")]
    pub wal_recovery: Option<WalMode>,
    /// The prefix extractor the store's tables were written with, by the name they record
    /// (`fixed:N`, `delimited:0xHH`; `kvtool stats` and `kvtool sst --json` show it): scans use
    /// their prefix filters, and tables written carry them. Without it, the store is opened
    /// without one (its prefix filters unread). A user function's filters cannot be named.
    #[arg(long, value_name = "NAME", value_parser = parse_prefix_extractor)]
    pub prefix_extractor: Option<bloomkv::PrefixExtractor>,
}

/// A built-in prefix extractor by the name tables record.
fn parse_prefix_extractor(name: &str) -> Result<bloomkv::PrefixExtractor, String> {
    bloomkv::PrefixExtractor::from_builtin_name(name).ok_or_else(|| {
        format!("'{name}' is no built-in extractor's name: use fixed:N (N >= 1) or delimited:0xHH")
    })
}

/// The values of `--wal-recovery`.
#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum WalMode {
    Strict,
    PointInTime,
    Salvage,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Set KEY to VALUE (creates a missing store).
    Put {
        /// The key: text in which `\\` is a backslash and `\xNN` any byte (hex with --hex).
        key: String,
        /// The value, written the way KEY is.
        value: String,
        #[command(flatten)]
        store: StoreDir,
        #[command(flatten)]
        keys: KeyFormat,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        #[command(flatten)]
        filter: TableFilter,
        #[command(flatten)]
        opening: OpenFlags,
    },
    /// Print the value of KEY; exit 1 when there is none.
    Get {
        /// The key: text in which `\\` is a backslash and `\xNN` any byte (hex with --hex).
        key: String,
        #[command(flatten)]
        store: StoreDir,
        #[command(flatten)]
        keys: KeyFormat,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        #[command(flatten)]
        opening: OpenFlags,
    },
    /// Delete KEY.
    Delete {
        /// The key: text in which `\\` is a backslash and `\xNN` any byte (hex with --hex).
        key: String,
        #[command(flatten)]
        store: StoreDir,
        #[command(flatten)]
        keys: KeyFormat,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        #[command(flatten)]
        filter: TableFilter,
        #[command(flatten)]
        opening: OpenFlags,
    },
    /// Delete every key from BEGIN (inclusive) to END (exclusive), as one write (ldb's
    /// `deleterange`).
    #[command(name = "deleterange", alias = "delete-range")]
    DeleteRange {
        /// The first key deleted: text in which `\\` is a backslash and `\xNN` any byte (hex
        /// with --hex).
        begin: String,
        /// The first key past the range, which stays.
        end: String,
        #[command(flatten)]
        store: StoreDir,
        #[command(flatten)]
        keys: KeyFormat,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        #[command(flatten)]
        filter: TableFilter,
        #[command(flatten)]
        opening: OpenFlags,
    },
    /// Print `key ==> value` lines in key order (or, with --reverse, last key first).
    Scan {
        /// First key (inclusive).
        #[arg(long, value_name = "KEY")]
        from: Option<String>,
        /// Last key (exclusive).
        #[arg(long, value_name = "KEY")]
        to: Option<String>,
        /// Only keys starting with this prefix.
        #[arg(long)]
        prefix: Option<String>,
        /// At most this many pairs.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Print keys only.
        #[arg(long)]
        keys_only: bool,
        /// Last key first: from the end of the range (or prefix) down; --limit counts from
        /// there.
        #[arg(long)]
        reverse: bool,
        #[command(flatten)]
        store: StoreDir,
        #[command(flatten)]
        keys: KeyFormat,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        #[command(flatten)]
        opening: OpenFlags,
    },
    /// Bulk-load pairs from FILE or stdin (creates a missing store).
    ///
    /// Reads `key<TAB>value` lines (what `dump` prints) and `key ==> value` lines (what `scan`
    /// prints). A bad line is counted and skipped, and the exit status is then 3; with
    /// --strict the first bad line stops the load with exit status 2.
    Load {
        /// Input file; `-` or nothing for stdin.
        file: Option<PathBuf>,
        /// Fail at the first bad line instead of counting and skipping it.
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        store: StoreDir,
        #[command(flatten)]
        keys: KeyFormat,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        #[command(flatten)]
        filter: TableFilter,
        #[command(flatten)]
        opening: OpenFlags,
    },
    /// Print every pair as a `key<TAB>value` line, the format `load` reads back.
    Dump {
        #[command(flatten)]
        store: StoreDir,
        #[command(flatten)]
        keys: KeyFormat,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        #[command(flatten)]
        opening: OpenFlags,
    },
    /// Levels, tables, filters and counters.
    Stats {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreDir,
        #[command(flatten)]
        keys: KeyFormat,
        #[command(flatten)]
        keyspace: KeyspaceArg,
        #[command(flatten)]
        opening: OpenFlags,
    },
    /// Verify every checksum of every file; on damage name the file and offset (exit 2).
    Check {
        #[command(flatten)]
        store: StoreDir,
    },
    /// Rewrite every table into one level, with the filter asked for (--filter-fpr,
    /// --no-filter): this is how a store's filter is changed.
    Compact {
        #[command(flatten)]
        store: StoreDir,
        #[command(flatten)]
        filter: TableFilter,
        #[command(flatten)]
        opening: OpenFlags,
    },
    /// Make a damaged store open again: point CURRENT at the newest intact manifest when it
    /// is lost, keep every intact WAL record (skipping damaged ones) and write them into a
    /// table. Prints what was dropped.
    Repair {
        #[command(flatten)]
        store: StoreDir,
    },
    /// One table file's properties, like `sst_dump --show_properties`.
    Sst {
        /// The table file: a NNNNNN.sst in a store's directory.
        file: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        keys: KeyFormat,
    },
    /// Measure how much I/O the filters avoid, and lookup speed; with --stores, compare
    /// whole stores' lookups, or with --writes their sustained writes.
    // Boxed: its many options would make every command as large as it.
    Bench(Box<BenchArgs>),
}

/// Where a command keeps the shared options it takes; `None` for those it does not take.
struct SharedOptions<'a> {
    db: Option<&'a mut Option<PathBuf>>,
    /// Whether the command fails without `--db`.
    needs_db: bool,
    hex: Option<&'a mut bool>,
    filter: Option<&'a mut TableFilter>,
    keyspace: Option<&'a mut Option<String>>,
}

impl Command {
    fn shared_options(&mut self) -> SharedOptions<'_> {
        match self {
            Command::Put {
                store,
                keys,
                filter,
                keyspace,
                ..
            }
            | Command::Delete {
                store,
                keys,
                filter,
                keyspace,
                ..
            }
            | Command::DeleteRange {
                store,
                keys,
                filter,
                keyspace,
                ..
            }
            | Command::Load {
                store,
                keys,
                filter,
                keyspace,
                ..
            } => SharedOptions {
                db: Some(&mut store.db),
                needs_db: true,
                hex: Some(&mut keys.hex),
                filter: Some(filter),
                keyspace: Some(&mut keyspace.keyspace),
            },
            Command::Get {
                store,
                keys,
                keyspace,
                ..
            }
            | Command::Scan {
                store,
                keys,
                keyspace,
                ..
            }
            | Command::Dump {
                store,
                keys,
                keyspace,
                ..
            }
            | Command::Stats {
                store,
                keys,
                keyspace,
                ..
            } => SharedOptions {
                db: Some(&mut store.db),
                needs_db: true,
                hex: Some(&mut keys.hex),
                filter: None,
                keyspace: Some(&mut keyspace.keyspace),
            },
            Command::Check { store } | Command::Repair { store } => SharedOptions {
                db: Some(&mut store.db),
                needs_db: true,
                hex: None,
                filter: None,
                keyspace: None,
            },
            Command::Compact { store, filter, .. } => SharedOptions {
                db: Some(&mut store.db),
                needs_db: true,
                hex: None,
                filter: Some(filter),
                keyspace: None,
            },
            Command::Sst { keys, .. } => SharedOptions {
                db: None,
                needs_db: false,
                hex: Some(&mut keys.hex),
                filter: None,
                keyspace: None,
            },
            Command::Bench(args) => SharedOptions {
                db: Some(&mut args.db),
                needs_db: false,
                hex: None,
                filter: None,
                keyspace: None,
            },
        }
    }
}

/// Parses the command line. Usage errors and requests for help come back as clap's errors,
/// for `clap::Error::exit` to print as clap prints them.
pub fn parse() -> Result<Command, clap::Error> {
    let matches = Cli::command().try_get_matches()?;
    let cli = Cli::from_arg_matches(&matches)?;
    let name = matches.subcommand_name().unwrap_or_default().to_string();
    cli.into_command(&name)
        .map_err(|(kind, message)| usage_error(&name, kind, message))
}

impl Cli {
    /// The command `name`, with the shared options given before it moved into it.
    fn into_command(self, name: &str) -> Result<Command, (ErrorKind, String)> {
        let Cli {
            store,
            keys,
            filter,
            keyspace,
            mut command,
        } = self;
        let given_before = (store, keys, filter, keyspace);
        move_shared_options(given_before, command.shared_options(), name)
            .map_err(|message| (ErrorKind::ArgumentConflict, message))?;
        check_shared_options(command.shared_options(), name)?;
        Ok(command)
    }
}

/// Moves the shared options given before the command `name` into the command's own.
fn move_shared_options(
    (store, keys, filter, keyspace): (StoreDir, KeyFormat, TableFilter, KeyspaceArg),
    takes: SharedOptions,
    name: &str,
) -> Result<(), String> {
    move_value("--db <DIR>", store.db, takes.db, name)?;
    move_value("--keyspace <NAME>", keyspace.keyspace, takes.keyspace, name)?;
    move_flag("--hex", keys.hex, takes.hex, name)?;
    let (fpr_slot, no_filter_slot) = match takes.filter {
        Some(f) => (Some(&mut f.filter_fpr), Some(&mut f.no_filter)),
        None => (None, None),
    };
    move_value("--filter-fpr <P>", filter.filter_fpr, fpr_slot, name)?;
    move_flag("--no-filter", filter.no_filter, no_filter_slot, name)
}

/// What clap cannot check when a shared option may come before the command or after it.
fn check_shared_options(options: SharedOptions, name: &str) -> Result<(), (ErrorKind, String)> {
    if options
        .filter
        .is_some_and(|f| f.filter_fpr.is_some() && f.no_filter)
    {
        return Err((
            ErrorKind::ArgumentConflict,
            "the argument '--filter-fpr <P>' cannot be used with '--no-filter'".into(),
        ));
    }
    if options.needs_db && options.db.is_some_and(|db| db.is_none()) {
        return Err((
            ErrorKind::MissingRequiredArgument,
            format!("'{name}' needs the store's directory: --db <DIR>"),
        ));
    }
    Ok(())
}

/// Moves an option's value given before the command into the command's own.
fn move_value<T>(
    option: &str,
    before: Option<T>,
    slot: Option<&mut Option<T>>,
    command: &str,
) -> Result<(), String> {
    let Some(value) = before else {
        return Ok(());
    };
    match slot {
        None => Err(does_not_apply(option, command)),
        Some(Some(_)) => Err(given_twice(option, command)),
        Some(slot) => {
            *slot = Some(value);
            Ok(())
        }
    }
}

/// Moves a flag given before the command into the command's own.
fn move_flag(
    option: &str,
    before: bool,
    slot: Option<&mut bool>,
    command: &str,
) -> Result<(), String> {
    if !before {
        return Ok(());
    }
    match slot {
        None => Err(does_not_apply(option, command)),
        Some(true) => Err(given_twice(option, command)),
        Some(slot) => {
            *slot = true;
            Ok(())
        }
    }
}

fn does_not_apply(option: &str, command: &str) -> String {
    format!("the argument '{option}' does not apply to '{command}'")
}

fn given_twice(option: &str, command: &str) -> String {
    format!("the argument '{option}' is given both before and after '{command}'")
}

/// A usage error about the subcommand `name`, rendered as clap renders its own, with the
/// subcommand's usage.
fn usage_error(name: &str, kind: ErrorKind, message: String) -> clap::Error {
    let mut cli = Cli::command();
    cli.build();
    if let Some(subcommand) = cli.find_subcommand_mut(name) {
        return subcommand.error(kind, message);
    }
    cli.error(kind, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }
}
