//! kvtool: the command line for a bloomkv store, after RocksDB's `ldb` and `sst_dump`.
//!
//! Exit codes: 0 success; 1 `get` found no such key; 2 any error, usage errors included;
//! 3 `load` skipped bad lines (and loaded the others). Errors other than usage errors are one
//! line on stderr.

mod bench;
mod cli;
mod codec;
mod commands;
mod headings;
mod lines;
mod progress;
mod store_json;

use std::process::ExitCode;

/// Exit code when `get` finds no such key.
pub const NOT_FOUND: u8 = 1;
/// Exit code for every error.
pub const ERROR: u8 = 2;
/// Exit code when `load` skipped bad lines: the input was read to its end and every good
/// line loaded, but not everything in it is in the store.
pub const SKIPPED_LINES: u8 = 3;

/// A failure: the message for stderr and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl<E: std::fmt::Display + 'static> From<E> for Failure {
    fn from(e: E) -> Failure {
        let advice = (&e as &dyn std::any::Any)
            .downcast_ref::<bloomkv::Error>()
            .and_then(advice_for);
        Failure {
            code: ERROR,
            message: match advice {
                Some(advice) => format!("{e}; {advice}"),
                None => e.to_string(),
            },
        }
    }
}

/// What to run about a damaged file of a store, whichever command met it.
pub fn advice_for(error: &bloomkv::Error) -> Option<String> {
    let bloomkv::Error::Corruption { file, .. } = error else {
        return None;
    };
    let store = file.parent()?.display();
    Some(match file.extension().and_then(|e| e.to_str()) {
        Some("log") => format!(
            "read past the damage with --wal-recovery salvage (or point-in-time), or run \
             `kvtool --db {store} repair` to keep every intact record for good"
        ),
        _ => format!(
            "run `kvtool --db {store} check` to see the damage and `kvtool --db {store} repair` \
             to keep what is intact"
        ),
    })
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
    // Clap prints its errors with the usage and a pointer to --help, and exits 2 (help and
    // --version go to stdout and exit 0).
    let command = cli::parse().unwrap_or_else(|e| e.exit());
    match commands::run(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.message.is_empty() {
                eprintln!("kvtool: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}
