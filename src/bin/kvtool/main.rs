//! kvtool: the command line for a bloomkv store, after RocksDB's `ldb` and `sst_dump`.
//!
//! Exit codes: 0 success; 1 `get` found no such key; 2 any error, with one line on stderr.

mod bench;
mod codec;
mod commands;
mod compare;
mod lines;
#[allow(dead_code)]
mod memlimit;
#[cfg(feature = "peers")]
mod peers;
mod timing;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code when `get` finds no such key.
pub const NOT_FOUND: u8 = 1;
/// Exit code for every error.
pub const ERROR: u8 = 2;

/// The command line for a bloomkv store.
#[derive(Parser, Debug)]
#[command(name = "kvtool", version, about)]
pub struct Cli {
    /// The store's directory.
    #[arg(long, global = true)]
    db: Option<PathBuf>,
    /// Keys and values are given and printed as hex with a 0x prefix.
    #[arg(long, global = true)]
    hex: bool,
    /// Target false-positive rate of the filters of tables written (default 0.01).
    #[arg(long, global = true, value_name = "P", conflicts_with = "no_filter")]
    filter_fpr: Option<f64>,
    /// Write tables without a filter.
    #[arg(long, global = true)]
    no_filter: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Set KEY to VALUE (creates a missing store).
    Put { key: String, value: String },
    /// Print the value of KEY; exit 1 when there is none.
    Get { key: String },
    /// Delete KEY.
    Delete { key: String },
    /// Print pairs in key order.
    Scan {
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Last key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// Only keys starting with this prefix.
        #[arg(long)]
        prefix: Option<String>,
        /// At most this many pairs.
        #[arg(long)]
        limit: Option<usize>,
        /// Print keys only.
        #[arg(long)]
        keys_only: bool,
    },
    /// Bulk-load `key<TAB>value` lines (or `dump` output) from FILE or stdin (creates a
    /// missing store).
    Load {
        /// Input file; `-` or nothing for stdin.
        file: Option<PathBuf>,
        /// Fail at the first bad line instead of counting and skipping it.
        #[arg(long)]
        strict: bool,
    },
    /// Print every pair in the format `load` reads back.
    Dump,
    /// Levels, tables, filters and counters.
    Stats {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Verify every checksum of every file; on damage name the file and offset (exit 2).
    Check,
    /// Merge every table into one level.
    Compact,
    /// One table file's properties, like `sst_dump --show_properties`.
    Sst {
        file: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Measure how much I/O the filters avoid, and lookup speed.
    Bench(bench::BenchArgs),
}

/// A failure: the message for stderr and the exit code.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure {
            code: ERROR,
            message: e.to_string(),
        }
    }
}

/// Clap's usage errors span several lines (message, tips, usage); kvtool's errors are one line,
/// so keep the message and tips, drop the usage, and point at `--help`.
fn usage_error(e: &clap::Error) -> String {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand
    ) {
        // Clap would print the whole help, or a usage block, here.
        let names: Vec<String> = <Cli as clap::CommandFactory>::command()
            .get_subcommands()
            .map(|c| c.get_name().to_string())
            .collect();
        return format!(
            "no command given; commands: {} (see kvtool --help)",
            names.join(", ")
        );
    }
    let rendered = e.render().to_string();
    let message: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let message = message.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    format!("{message} (see kvtool --help)")
}

/// A failure to write to stdout. A closed pipe (`kvtool dump | head`) is the reader's choice,
/// not an error: stop quietly with success.
pub fn output_error(e: std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Failure {
            code: 0,
            message: String::new(),
        }
    } else {
        Failure::from(format!("writing output: {e}"))
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            eprintln!("kvtool: {}", usage_error(&e));
            return ExitCode::from(2);
        }
    };
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.message.is_empty() {
                eprintln!("kvtool: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}
