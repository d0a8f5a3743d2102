//! How keys and values are written on the command line and printed: escaped text by default,
//! `0x`-prefixed hex with `--hex`.
//!
//! Escaped text is the bytes themselves where they are printable UTF-8, and `\xNN` for each
//! byte of anything else (control characters, invalid UTF-8, characters that print as nothing
//! or as blank space other than the plain space), `\\` for a backslash. A `>` right after `==`
//! is written `\x3e`, so that a printed key or value never holds [`ARROW`], the middle of the
//! separator of `scan`'s lines: whatever the bytes, a printed line splits one way only.

/// Never appears in a printed key or value (see the module documentation).
pub const ARROW: &str = "==>";

/// Parses a command-line key or value.
pub fn parse(text: &str, hex: bool) -> Result<Vec<u8>, String> {
    parse_bytes(text.as_bytes(), hex)
}

/// Parses a key or value read from a file, which need not be UTF-8: in the escaped form any
/// byte other than a backslash stands for itself.
pub fn parse_bytes(text: &[u8], hex: bool) -> Result<Vec<u8>, String> {
    if hex {
        let text =
            std::str::from_utf8(text).map_err(|_| format!("'{}' is not hex", escape(text)))?;
        parse_hex(text)
    } else {
        unescape(text)
    }
}

/// Formats bytes for output.
pub fn format(bytes: &[u8], hex: bool) -> String {
    if hex {
        format_hex(bytes)
    } else {
        escape(bytes)
    }
}

fn parse_hex(text: &str) -> Result<Vec<u8>, String> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .ok_or_else(|| format!("'{text}' is not hex: it must start with 0x"))?;
    if digits.len() % 2 != 0 {
        return Err(format!("'{text}' is not hex: odd number of digits"));
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&digits[i..i + 2], 16)
                .map_err(|_| format!("'{text}' is not hex: bad digit near position {}", i + 2))
        })
        .collect()
}

fn format_hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 + bytes.len() * 2);
    out.push_str("0x");
    for b in bytes {
        out.push_str(&format!("{b:02X}"));
    }
    out
}

/// Printable characters as they are, everything else as `\xNN` per byte: see the module
/// documentation. Any bytes survive a `dump | load` round trip.
fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            let completes_arrow = c == '>' && out.ends_with("==");
            if c == '\\' {
                out.push_str("\\\\");
            } else if completes_arrow || !is_printable(c) {
                push_escaped_bytes(&mut out, c.encode_utf8(&mut [0; 4]).as_bytes());
            } else {
                out.push(c);
            }
        }
        push_escaped_bytes(&mut out, chunk.invalid());
    }
    out
}

fn push_escaped_bytes(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        out.push_str(&format!("\\x{b:02x}"));
    }
}

/// Whether `c` shows as itself on a terminal. Rust's `Debug` for strings draws that line (it
/// escapes control and format characters, such as the bidirectional overrides that reorder
/// what follows them, separators, blank space other than the plain space, and unassigned
/// code points); it also escapes a combining mark at the very start of a string, which is
/// printable after another character, hence the `a` in front.
fn is_printable(c: char) -> bool {
    if c.is_ascii() {
        return matches!(c, ' '..='~');
    }
    let mut buf = [0u8; 5];
    buf[0] = b'a';
    let len = 1 + c.encode_utf8(&mut buf[1..]).len();
    let text = std::str::from_utf8(&buf[..len]).expect("'a' and a char are UTF-8");
    text.escape_debug().count() == 2
}

fn unescape(bytes: &[u8]) -> Result<Vec<u8>, String> {
    // As typed: escaping it again would double the backslash the user is asked about.
    let text = || String::from_utf8_lossy(bytes).into_owned();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        match bytes.get(i + 1) {
            Some(b'\\') => {
                out.push(b'\\');
                i += 2;
            }
            Some(b'x') => {
                let hex = bytes
                    .get(i + 2..i + 4)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("bad escape at byte {i} of '{}'", text()))?;
                out.push(hex);
                i += 4;
            }
            _ => {
                return Err(format!(
                    "bad escape at byte {i} of '{}' (use \\\\ or \\xNN)",
                    text()
                ))
            }
        }
    }
    Ok(out)
}

/// The first key past every key that starts with `prefix`; `None` when none is (every byte
/// of the prefix is 0xff, or it is empty).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unescape(escape(&all).as_bytes()).unwrap(), all);
        assert_eq!(parse_hex(&format_hex(&all)).unwrap(), all);
    }

    #[test]
    fn escape_round_trips_text_with_arrows_and_unicode() {
        for text in [
            "a ==> b",
            "==>",
            "===>>",
            "k ==",
            "> v",
            "é = ==> ü",
            "\u{202e}evil\u{2028}",
            "a\u{301}",
        ] {
            let escaped = escape(text.as_bytes());
            assert!(!escaped.contains(ARROW), "{escaped}");
            assert_eq!(unescape(escaped.as_bytes()).unwrap(), text.as_bytes());
        }
    }

    #[test]
    fn printable_utf8_stays_text_and_the_rest_is_escaped() {
        assert_eq!(escape("é 中 😀 a\u{301}".as_bytes()), "é 中 😀 a\u{301}");
        assert_eq!(escape(b"tab\there\n"), "tab\\x09here\\x0a");
        assert_eq!(escape(b"\x7f\\"), "\\x7f\\\\");
        // Invalid UTF-8, a lone continuation byte, a truncated sequence.
        assert_eq!(escape(b"\xff\x80\xc3"), "\\xff\\x80\\xc3");
        // Invisible or reordering characters print as their bytes.
        assert_eq!(escape("\u{202e}".as_bytes()), "\\xe2\\x80\\xae");
        assert_eq!(escape("\u{a0}".as_bytes()), "\\xc2\\xa0");
        assert_eq!(escape("\u{85}".as_bytes()), "\\xc2\\x85");
        assert_eq!(escape(b"a ==> b =>c ==>"), "a ==\\x3e b =>c ==\\x3e");
    }

    #[test]
    fn bad_hex_is_an_error() {
        assert!(parse_hex("abcd").is_err());
        assert!(parse_hex("0xabc").is_err());
        assert!(parse_hex("0xzz").is_err());
        assert_eq!(parse_hex("0x").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn raw_bytes_other_than_backslash_stand_for_themselves() {
        assert_eq!(parse_bytes(b"a\xff\x00", false).unwrap(), b"a\xff\x00");
        assert!(parse_bytes(b"a\\q", false).is_err());
        assert!(parse_bytes(b"a\\x4", false).is_err());
        assert!(parse_bytes(b"0x\xff", true).is_err());
    }
}
