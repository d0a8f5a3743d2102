//! What the commands print: output to stdout, written whole or line by line, and counts
//! with their nouns. A broken pipe ends a command quietly (see `output_error`).

use std::io::{BufWriter, Write};

use crate::{output_error, Failure};

/// Stdout, locked and buffered, for output written line by line.
pub(super) fn stdout() -> BufWriter<std::io::StdoutLock<'static>> {
    BufWriter::new(std::io::stdout().lock())
}

/// Writes a command's whole output to stdout.
pub(super) fn emit(text: &str) -> Result<(), Failure> {
    let mut out = stdout();
    out.write_all(text.as_bytes()).map_err(output_error)?;
    out.flush().map_err(output_error)
}

/// `n` and the noun for `n` of them: "1 pair", "2 pairs".
pub(super) fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
