//! Index separators: the shortest keys that still tell two data blocks apart, so that an
//! index of random 16-byte keys holds two or three bytes of key per block instead of sixteen.
//! `docs/format.md`, "Index block", gives the rules these functions follow.

use crate::entry::SeqNo;

/// The separator of a data block whose last entry is `(last_key, last_seq)`, given the first
/// user key of the next block (`None` for the table's last block): a key and sequence number
/// at or after every entry of the block and before every entry of the next.
///
/// A sequence number of 0 places a separator after every version of its key, so a
/// shortened key needs none. When a key's versions run across the boundary, no key fits
/// between the blocks and the separator is the last entry itself.
pub fn block_separator(
    last_key: &[u8],
    last_seq: SeqNo,
    next_first_key: Option<&[u8]>,
) -> (Vec<u8>, SeqNo) {
    match next_first_key {
        Some(next) if next == last_key => (last_key.to_vec(), last_seq),
        Some(next) => (shortest_separator(last_key, next), 0),
        None => (shortest_successor(last_key), 0),
    }
}

/// The shortest byte string `s` with `a <= s < b`; `a` must sort before `b`.
///
/// With `p` the length of the common prefix of `a` and `b`, no string shorter than `p + 1`
/// bytes fits (it is a prefix of `a`, so below it, or it leaves the common prefix, below `a`
/// or above `b`), unless `a` itself is that short. So the answer is, in order of preference:
/// - `a` itself when `a` is a prefix of `b` or ends one byte after the common prefix;
/// - `a[..p]` and `a[p] + 1`, when that stays below `b`: either the byte stays below `b[p]`,
///   or it equals `b[p]` and `b` goes on past it;
/// - otherwise `b` is exactly `a[..p]` and `a[p] + 1`, so `s` keeps `a[..=p]` and then
///   needs only the shortest string at or after the rest of `a`.
pub fn shortest_separator(a: &[u8], b: &[u8]) -> Vec<u8> {
    debug_assert!(a < b, "separator asked for keys out of order");
    let p = common_prefix_len(a, b);
    if p + 1 >= a.len() || p >= b.len() {
        return a.to_vec();
    }
    // Here a[p] < b[p], so a[p] + 1 does not overflow.
    let bumped = a[p] + 1;
    if bumped < b[p] || b.len() > p + 1 {
        let mut s = a[..p].to_vec();
        s.push(bumped);
        return s;
    }
    let mut s = a[..=p].to_vec();
    s.extend_from_slice(&shortest_successor(&a[p + 1..]));
    s
}

/// The shortest byte string at or after `a`: `a` up to its first byte below 0xff, that byte
/// incremented, and the rest cut. When that would not be shorter than `a` (the byte is the
/// last, or every byte is 0xff, or `a` is empty), `a` itself.
pub fn shortest_successor(a: &[u8]) -> Vec<u8> {
    match a.iter().position(|&byte| byte != 0xff) {
        Some(i) if i + 1 < a.len() => {
            let mut s = a[..i].to_vec();
            s.push(a[i] + 1);
            s
        }
        _ => a.to_vec(),
    }
}

/// Bytes at the start that `a` and `b` share.
pub fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sep(a: &[u8], b: &[u8]) -> Vec<u8> {
        let s = shortest_separator(a, b);
        assert!(
            a <= s.as_slice() && s.as_slice() < b,
            "{a:?} <= {s:?} < {b:?}"
        );
        s
    }

    #[test]
    fn separators_cut_after_the_first_differing_byte() {
        assert_eq!(sep(b"abcd", b"abx"), b"abd");
        // `abc` is as short as `abd`: a key is kept as it is unless a shorter one fits.
        assert_eq!(sep(b"abc", b"abx"), b"abc");
        assert_eq!(sep(b"abcdef", b"abzzzz"), b"abd");
        assert_eq!(sep(b"a\x00\x00\x00", b"c"), b"b");
        // `hellp` is the limit itself: keep `hello`, then the shortest at or after `world`.
        assert_eq!(sep(b"helloworld", b"hellp"), b"hellox");
    }

    #[test]
    fn a_next_byte_equal_to_the_limit_still_separates_when_the_limit_goes_on() {
        // a[p] + 1 == b[p], and b is longer: `abd` < `abdx`.
        assert_eq!(sep(b"abcq", b"abdx"), b"abd");
        // b ends right there: `abd` is b itself, so the rest of a is shortened instead.
        assert_eq!(sep(b"abcq", b"abd"), b"abcq");
        assert_eq!(sep(b"abcqrs", b"abd"), b"abcr");
        assert_eq!(sep(b"abc\xff\xffqz", b"abd"), b"abc\xff\xffr");
    }

    #[test]
    fn prefixes_and_empty_keys_keep_the_smaller_key() {
        assert_eq!(sep(b"", b"a"), b"");
        assert_eq!(sep(b"", b"\x00"), b"");
        assert_eq!(sep(b"ab", b"abc"), b"ab");
        assert_eq!(sep(b"ab", b"ab\x00"), b"ab");
        // One byte past the common prefix is already as short as it gets.
        assert_eq!(sep(b"abc", b"abd"), b"abc");
        assert_eq!(sep(b"a", b"b"), b"a");
    }

    #[test]
    fn bytes_of_0xff_are_never_incremented() {
        assert_eq!(sep(b"a\xff\xff", b"b"), b"a\xff\xff");
        assert_eq!(sep(b"a\xff\xff\x01", b"b"), b"a\xff\xff\x01");
        assert_eq!(sep(b"a\xff\xff\x01\x05", b"b"), b"a\xff\xff\x02");
        assert_eq!(sep(b"\xfe\xff\x00\x00", b"\xff"), b"\xfe\xff\x01");
        assert_eq!(sep(b"\xff", b"\xff\xff"), b"\xff");
        assert_eq!(sep(b"\xff\x00", b"\xff\xff"), b"\xff\x00");
        assert_eq!(sep(b"\xff\x00\x00", b"\xff\xff"), b"\xff\x01");
    }

    #[test]
    fn successors_cut_after_the_first_byte_below_0xff() {
        assert_eq!(shortest_successor(b"abc"), b"b");
        assert_eq!(shortest_successor(b"\xff\xffab"), b"\xff\xffb");
        assert_eq!(shortest_successor(b"a\x00\x00"), b"b");
        // Already as short as it gets: the last byte, all 0xff, empty.
        assert_eq!(shortest_successor(b"a"), b"a");
        assert_eq!(shortest_successor(b"\xffa"), b"\xffa");
        assert_eq!(shortest_successor(b"\xff\x00"), b"\xff\x00");
        assert_eq!(shortest_successor(b"\xff\xff\xff"), b"\xff\xff\xff");
        assert_eq!(shortest_successor(b""), b"");
    }

    #[test]
    fn block_separators_keep_the_sequence_number_only_for_split_versions() {
        assert_eq!(
            block_separator(b"apple", 9, Some(b"apricot")),
            (b"apq".to_vec(), 0)
        );
        assert_eq!(
            block_separator(b"apple", 9, Some(b"apple")),
            (b"apple".to_vec(), 9)
        );
        assert_eq!(block_separator(b"", 4, Some(b"")), (Vec::new(), 4));
        assert_eq!(block_separator(b"", 4, Some(b"a")), (Vec::new(), 0));
        assert_eq!(block_separator(b"apple", 9, None), (b"b".to_vec(), 0));
        assert_eq!(
            block_separator(b"\xff\xff", 9, None),
            (b"\xff\xff".to_vec(), 0)
        );
    }

    /// Every string over `alphabet` shorter than `len` bytes.
    fn all_shorter(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
        if len == 0 {
            return Vec::new();
        }
        let mut out = vec![Vec::new()];
        let mut last = vec![Vec::new()];
        for _ in 1..len {
            last = last
                .iter()
                .flat_map(|s: &Vec<u8>| {
                    alphabet.iter().map(move |&c| [s.as_slice(), &[c]].concat())
                })
                .collect();
            out.extend(last.iter().cloned());
        }
        out
    }

    /// Keys over a few bytes that meet at the edges: 0x00, 0xff, neighbours.
    fn small_key() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(prop::sample::select(vec![0u8, 1, 2, 0xfe, 0xff]), 0..5)
    }

    proptest! {
        #[test]
        fn separators_fit_and_nothing_shorter_does(a in small_key(), b in small_key()) {
            prop_assume!(a < b);
            let s = shortest_separator(&a, &b);
            prop_assert!(a <= s && s < b);
            // Every byte a shorter answer could need: those of the keys and one above them.
            let alphabet = [0u8, 1, 2, 3, 0xfe, 0xff];
            for shorter in all_shorter(&alphabet, s.len()) {
                prop_assert!(!(a <= shorter && shorter < b), "{:?} is shorter than {:?}", shorter, s);
            }
        }

        #[test]
        fn successors_are_at_or_after_and_nothing_shorter_is(a in small_key()) {
            let s = shortest_successor(&a);
            prop_assert!(s >= a);
            for shorter in all_shorter(&[0u8, 1, 2, 3, 0xfe, 0xff], s.len()) {
                prop_assert!(shorter < a, "{:?} is shorter than {:?}", shorter, s);
            }
        }
    }
}
