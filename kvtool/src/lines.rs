//! The lines `scan` and `dump` print, and how `load` splits them back into key and value:
//! `key ==> value` (scan's, after RocksDB's `ldb`) and `key<TAB>value` (dump's). `codec`
//! never prints a TAB or `==>` inside a key or value, so a printed line holds exactly one
//! separator; `load` refuses any line that does not, rather than guess where the key ends.

use crate::codec::{self, ARROW};

/// Between key and value in `scan`'s lines: [`ARROW`] with a space on each side.
const SCAN_SEPARATOR: &str = " ==> ";
/// Between key and value in `dump`'s lines.
const DUMP_SEPARATOR: u8 = b'\t';

/// One line of `scan` output, without its newline.
pub fn scan_line(key: &[u8], value: &[u8], hex: bool) -> String {
    format!(
        "{}{SCAN_SEPARATOR}{}",
        codec::format(key, hex),
        codec::format(value, hex)
    )
}

/// One line of `dump` output, without its newline.
pub fn dump_line(key: &[u8], value: &[u8], hex: bool) -> String {
    format!(
        "{}{}{}",
        codec::format(key, hex),
        DUMP_SEPARATOR as char,
        codec::format(value, hex)
    )
}

/// Splits a line of either form into its key and value, still escaped (or hex).
pub fn split(line: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let tabs = positions(line, &[DUMP_SEPARATOR]);
    let arrows = positions(line, ARROW.as_bytes());
    match (tabs.as_slice(), arrows.as_slice()) {
        ([tab], []) => Ok((&line[..*tab], &line[tab + 1..])),
        ([], [arrow]) => split_at_arrow(line, *arrow),
        ([], []) => Err(NO_SEPARATOR.to_string()),
        (_, []) => Err(format!(
            "{} TABs; a line holds one, between key and value (a TAB inside a key or value is \
             written \\x09)",
            tabs.len()
        )),
        ([], _) => Err(format!(
            "'{ARROW}' appears {} times; a line holds one, between key and value (inside a key \
             or value it is written ==\\x3e)",
            arrows.len()
        )),
        (_, _) => Err(format!(
            "both a TAB and '{ARROW}'; a line holds one of them, between key and value (inside \
             a key or value a TAB is written \\x09, '{ARROW}' ==\\x3e)"
        )),
    }
}

const NO_SEPARATOR: &str = "no TAB or ' ==> ' between key and value";

/// Splits a `scan` line at its one [`ARROW`], which must have a space on each side.
fn split_at_arrow(line: &[u8], arrow: usize) -> Result<(&[u8], &[u8]), String> {
    let before = arrow.checked_sub(1).map(|at| line[at]);
    let after = line.get(arrow + ARROW.len()).copied();
    if before != Some(b' ') || after != Some(b' ') {
        return Err(NO_SEPARATOR.to_string());
    }
    Ok((&line[..arrow - 1], &line[arrow + ARROW.len() + 1..]))
}

/// Where `needle` starts in `line`, every time.
fn positions(line: &[u8], needle: &[u8]) -> Vec<usize> {
    line.windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(at, _)| at)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scan_separator_is_the_arrow_between_spaces() {
        assert_eq!(SCAN_SEPARATOR, format!(" {ARROW} "));
    }

    #[test]
    fn printed_lines_split_back_into_what_was_printed() {
        let awkward: [&[u8]; 9] = [
            b"a ==> b",
            b"k ==>",
            b"==> v",
            b" ==",
            b"> ",
            b"tab\there",
            b"",
            b"=",
            b"\xff==\x00>",
        ];
        for key in awkward {
            for value in awkward {
                for hex in [false, true] {
                    let (k, v) = (codec::format(key, hex), codec::format(value, hex));
                    for line in [scan_line(key, value, hex), dump_line(key, value, hex)] {
                        let split = split(line.as_bytes()).unwrap();
                        assert_eq!(split, (k.as_bytes(), v.as_bytes()), "{line}");
                    }
                }
            }
        }
    }

    #[test]
    fn lines_that_split_more_than_one_way_are_refused() {
        assert!(split(b"a ==> b ==> c")
            .unwrap_err()
            .contains("appears 2 times"));
        assert!(split(b"a\tb\tc").unwrap_err().contains("2 TABs"));
        assert!(split(b"a ==> b\tc").unwrap_err().contains("both"));
        assert_eq!(split(b"a==>b").unwrap_err(), NO_SEPARATOR);
        assert_eq!(split(b"a ==>b").unwrap_err(), NO_SEPARATOR);
        assert_eq!(split(b"no separator").unwrap_err(), NO_SEPARATOR);
        assert_eq!(split(b" ==> ").unwrap(), (&b""[..], &b""[..]));
        assert_eq!(split(b"\t").unwrap(), (&b""[..], &b""[..]));
    }
}
