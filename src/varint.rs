//! LEB128 variable-length integers (7 bits a byte, low bits first, high bit = more follows):
//! the one encoding and decoding used by every format of the store (table blocks, the
//! manifest's version edits, the WAL's batch records).

/// Longest encoding of a u64.
pub(crate) const MAX_LEN: usize = 10;

/// Appends `v` as a varint, in its shortest form.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Why bytes are not a varint the store could have written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VarintError {
    /// The bytes end before the last byte of the varint.
    Truncated,
    /// The value does not fit in 64 bits, or the encoding is longer than ten bytes.
    Overflow,
    /// A longer encoding than needed: never written, so a sign of damage.
    NotShortest,
}

impl std::fmt::Display for VarintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VarintError::Truncated => "varint runs past the end",
            VarintError::Overflow => "varint overflows 64 bits",
            VarintError::NotShortest => "varint not in its shortest form",
        })
    }
}

/// Decodes the varint at the start of `input`: its value and how many bytes it took.
pub(crate) fn decode(input: &[u8]) -> Result<(u64, usize), VarintError> {
    let mut value = 0u64;
    for i in 0..MAX_LEN {
        let &byte = input.get(i).ok_or(VarintError::Truncated)?;
        let bits = u64::from(byte & 0x7f);
        if i == MAX_LEN - 1 && byte > 1 {
            return Err(VarintError::Overflow);
        }
        value |= bits << (7 * i);
        if byte & 0x80 == 0 {
            if byte == 0 && i > 0 {
                return Err(VarintError::NotShortest);
            }
            return Ok((value, i + 1));
        }
    }
    Err(VarintError::Overflow)
}

/// Reads a varint from the front of `input`, advancing it; `None` if it is not a varint.
pub(crate) fn take(input: &mut &[u8]) -> Option<u64> {
    let (value, len) = decode(input).ok()?;
    *input = &input[len..];
    Some(value)
}

/// Reads a varint length and that many bytes from the front of `input`.
pub(crate) fn take_slice<'a>(input: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(take(input)?).ok()?;
    if len > input.len() {
        return None;
    }
    let (head, tail) = input.split_at(len);
    *input = tail;
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_truncation_and_malformed_encodings() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            put(&mut buf, v);
            assert_eq!(decode(&buf), Ok((v, buf.len())));
            assert_eq!(decode(&buf[..buf.len() - 1]), Err(VarintError::Truncated));
        }
        assert_eq!(decode(&[0x80, 0x00]), Err(VarintError::NotShortest));
        assert_eq!(
            decode(&[0xff; 9].iter().copied().chain([0x02]).collect::<Vec<_>>()),
            Err(VarintError::Overflow)
        );
        assert_eq!(decode(&[0xff; 11]), Err(VarintError::Overflow));
        let mut input: &[u8] = &[3, b'a', b'b', b'c', 9];
        assert_eq!(take_slice(&mut input), Some(&b"abc"[..]));
        assert_eq!(input, &[9]);
    }
}
