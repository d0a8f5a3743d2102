//! Prefix extraction: which leading bytes of a key name the group it belongs to (a user, a
//! tenant, a time bucket), so that a table's prefix filter can say "no key of this table
//! starts with that group" and a scan over the group can pass the table by.
//!
//! An extractor maps a key to its prefix, or to none: a key with no prefix is outside the
//! extractor's domain and in no prefix filter. Every extractor keeps one rule, on which
//! scans rely: when a byte string `p` has prefix `q`, every key that starts with `p` has
//! prefix `q` too. A scan over the keys starting with `p` may then ask each table's prefix
//! filter for `q`; a scan over `p` without a prefix (too short, say) asks none. Fixed lengths
//! and delimiters keep the rule by construction; a user function must keep it itself.
//!
//! An extractor has a name, written into every table it filters: a store opened with an
//! extractor of another name (another length, another delimiter, another version of a user
//! function) never trusts the old prefix filters. It ignores them, and `Stats` counts them.

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use crate::iter::prefix_end;

/// A user's rule for a key's prefix (see the module comment for the rule it must keep).
pub trait ExtractPrefix: Send + Sync {
    /// The rule's name, with a version: change it whenever the rule changes, so that prefix
    /// filters written under the old rule are no longer trusted. At most 255 bytes.
    fn name(&self) -> &str;
    /// The length of `key`'s prefix, or `None` when `key` has none. A length past the key's
    /// end is taken as none: a key shorter than its prefix would be (a scan's prefix, cut
    /// short) is not its own prefix, or a scan over it would ask the filters for the wrong
    /// bytes.
    fn prefix_len(&self, key: &[u8]) -> Option<usize>;
}

/// How a store finds a key's prefix (`Options::prefix_extractor`).
#[derive(Clone)]
#[non_exhaustive]
pub enum PrefixExtractor {
    /// The first `n` bytes; a shorter key has no prefix. RocksDB's fixed prefix.
    Fixed(usize),
    /// The bytes up to and including the first `delimiter` byte (`user:42:` takes
    /// `Delimited(b':')` to `user:`); a key without it has no prefix.
    Delimited(u8),
    /// A function of the user's, named and versioned.
    Custom(Arc<dyn ExtractPrefix>),
}

impl PrefixExtractor {
    /// The name written into tables: `fixed:N`, `delimited:0xHH`, or `custom:` and the
    /// function's name.
    pub fn name(&self) -> String {
        match self {
            PrefixExtractor::Fixed(n) => format!("fixed:{n}"),
            PrefixExtractor::Delimited(d) => format!("delimited:{d:#04x}"),
            PrefixExtractor::Custom(f) => format!("custom:{}", f.name()),
        }
    }

    /// The built-in extractor named `name` (`fixed:N`, `delimited:0xHH`), as
    /// [`name`](Self::name) writes them; `None` for a user function or any other name.
    pub fn from_builtin_name(name: &str) -> Option<PrefixExtractor> {
        let extractor = match name.strip_prefix("fixed:") {
            Some(n) => PrefixExtractor::Fixed(n.parse().ok()?),
            None => {
                let hex = name.strip_prefix("delimited:0x")?;
                PrefixExtractor::Delimited(u8::from_str_radix(hex, 16).ok()?)
            }
        };
        (extractor.validate().is_ok() && extractor.name() == name).then_some(extractor)
    }

    /// `key`'s prefix, or `None` when it has none.
    pub fn prefix<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        let len = match self {
            PrefixExtractor::Fixed(n) => Some(*n).filter(|&n| n <= key.len()),
            PrefixExtractor::Delimited(d) => key.iter().position(|b| b == d).map(|at| at + 1),
            PrefixExtractor::Custom(f) => f.prefix_len(key).filter(|&n| n <= key.len()),
        }?;
        Some(&key[..len])
    }

    /// Checks what an option can get wrong: a fixed length of 0 (every key would share one
    /// prefix), and a name too long for a table's properties.
    pub fn validate(&self) -> crate::Result<()> {
        if matches!(self, PrefixExtractor::Fixed(0)) {
            return Err(crate::Error::InvalidArgument(
                "prefix extractor: a fixed prefix needs at least one byte".into(),
            ));
        }
        if self.name().len() > MAX_NAME_LEN {
            return Err(crate::Error::InvalidArgument(format!(
                "prefix extractor: its name is {} bytes, at most {MAX_NAME_LEN}",
                self.name().len()
            )));
        }
        Ok(())
    }
}

/// The longest extractor name a table records.
pub const MAX_NAME_LEN: usize = 255 + "custom:".len();

impl fmt::Debug for PrefixExtractor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl PartialEq for PrefixExtractor {
    /// Two extractors are the same when their names are: the name is what tables trust.
    fn eq(&self, other: &PrefixExtractor) -> bool {
        self.name() == other.name()
    }
}

/// The longest byte string every key within `start..end` starts with: the common prefix of
/// the two bounds (a key between two keys that share leading bytes shares them too), or,
/// when the end is where the keys starting with some `x` end (`x` with its last byte below
/// 0xff raised by one, as a prefix scan's end is), that `x` when the start begins with it.
/// Empty when a bound is open or nothing is shared.
pub(crate) fn shared_prefix(start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> Vec<u8> {
    let (Bound::Included(s) | Bound::Excluded(s)) = start else {
        return Vec::new();
    };
    let (Bound::Included(e) | Bound::Excluded(e)) = end else {
        return Vec::new();
    };
    let common = s.iter().zip(e).take_while(|(a, b)| a == b).count();
    let scan_end = matches!(end, Bound::Excluded(_))
        .then(|| s.get(..e.len()))
        .flatten()
        .filter(|x| prefix_end(x) == *end);
    match scan_end {
        Some(x) if x.len() > common => x.to_vec(),
        _ => s[..common].to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct UpToSecondColon;

    impl ExtractPrefix for UpToSecondColon {
        fn name(&self) -> &str {
            "two-colons.v1"
        }
        fn prefix_len(&self, key: &[u8]) -> Option<usize> {
            let mut colons = key.iter().enumerate().filter(|(_, &b)| b == b':');
            colons.nth(1).map(|(at, _)| at + 1)
        }
    }

    #[test]
    fn each_extractor_finds_its_prefix_or_none() {
        let fixed = PrefixExtractor::Fixed(4);
        assert_eq!(fixed.prefix(b"user:42"), Some(&b"user"[..]));
        assert_eq!(fixed.prefix(b"usr"), None);
        assert_eq!(fixed.prefix(b"user"), Some(&b"user"[..]));

        let delimited = PrefixExtractor::Delimited(b':');
        assert_eq!(delimited.prefix(b"user:42:x"), Some(&b"user:"[..]));
        assert_eq!(delimited.prefix(b"user"), None);

        let custom = PrefixExtractor::Custom(Arc::new(UpToSecondColon));
        assert_eq!(custom.prefix(b"user:42:x"), Some(&b"user:42:"[..]));
        assert_eq!(custom.prefix(b"user:42"), None);
    }

    #[test]
    fn names_tell_extractors_apart() {
        assert_eq!(PrefixExtractor::Fixed(8).name(), "fixed:8");
        assert_eq!(PrefixExtractor::Delimited(b':').name(), "delimited:0x3a");
        let custom = PrefixExtractor::Custom(Arc::new(UpToSecondColon));
        assert_eq!(custom.name(), "custom:two-colons.v1");
        assert_ne!(PrefixExtractor::Fixed(8), PrefixExtractor::Fixed(9));
        assert!(PrefixExtractor::Fixed(0).validate().is_err());
        assert!(PrefixExtractor::Delimited(0).validate().is_ok());
        for builtin in [PrefixExtractor::Fixed(8), PrefixExtractor::Delimited(b':')] {
            let again = PrefixExtractor::from_builtin_name(&builtin.name());
            assert_eq!(again, Some(builtin));
        }
        for other in [
            "fixed:0",
            "fixed:x",
            "delimited:0x3",
            "custom:fixed:8",
            "fixed:08",
        ] {
            assert_eq!(PrefixExtractor::from_builtin_name(other), None, "{other}");
        }
    }

    #[test]
    fn keys_between_two_bounds_share_their_common_prefix() {
        let inc = |k: &[u8]| Bound::Included(k.to_vec());
        let exc = |k: &[u8]| Bound::Excluded(k.to_vec());
        assert_eq!(shared_prefix(&inc(b"user:4"), &exc(b"user:5")), b"user:4");
        assert_eq!(shared_prefix(&inc(b"user:4"), &inc(b"user:5")), b"user:");
        assert_eq!(shared_prefix(&inc(b"ab"), &inc(b"abz")), b"ab");
        assert_eq!(shared_prefix(&inc(b"a"), &exc(b"b")), b"a");
        assert_eq!(shared_prefix(&inc(b"a"), &inc(b"b")), b"");
        assert_eq!(
            shared_prefix(&inc(b"user:42:7"), &exc(b"user:42;")),
            b"user:42:"
        );
        assert_eq!(shared_prefix(&inc(b"a"), &Bound::Unbounded), b"");
        assert_eq!(shared_prefix(&Bound::Unbounded, &exc(b"b")), b"");
    }
}
