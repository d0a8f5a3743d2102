//! kvtool: the command line for a bloomkv store, after RocksDB's `ldb` and `sst_dump`.
//!
//! Exit codes: 0 success; 1 `get` found no such key; 2 any error, usage errors included;
//! 3 `load` skipped bad lines (and loaded the others). Errors other than usage errors are one
//! line on stderr.

mod batched;
mod bench;
mod cli;
mod codec;
mod commands;
mod compare;
mod lines;
#[allow(dead_code)]
mod memlimit;
#[cfg(feature = "peers")]
mod peers;
mod progress;
mod sustained;
mod timing;

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

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure {
            code: ERROR,
            message: e.to_string(),
        }
    }
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
