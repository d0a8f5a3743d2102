//! LEB128 variable-length integers, used by the WAL's batch records.

/// Appends `v` as a varint.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint from the front of `input`, advancing it; `None` if truncated or overlong.
pub(crate) fn take(input: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, &byte) in input.iter().enumerate().take(10) {
        let bits = (byte & 0x7f) as u64;
        if i == 9 && byte > 1 {
            return None;
        }
        value |= bits << (7 * i);
        if byte & 0x80 == 0 {
            *input = &input[i + 1..];
            return Some(value);
        }
    }
    None
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
    fn round_trip_and_truncation() {
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            put(&mut buf, v);
            let mut input = &buf[..];
            assert_eq!(take(&mut input), Some(v));
            assert!(input.is_empty());
            let mut short = &buf[..buf.len() - 1];
            assert_eq!(take(&mut short), None);
        }
    }
}
