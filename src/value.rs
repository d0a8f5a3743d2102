//! A value read from the store that shares the data block it was read from (with the block
//! cache): reading it costs no allocation and no copy, and it keeps the block alive while it
//! lives, however the store moves on (RocksDB's `PinnableSlice`, fjall's `Slice`). A value
//! found in a memtable is copied out, as RocksDB's `PinnableSlice` copies it: sharing it would
//! keep the whole memtable alive.

use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

use crate::entry::SeqNo;

/// A value read by [`Db::get_pinned`](crate::Db::get_pinned) and its kin: it derefs to
/// `[u8]`, and [`Vec::from`] or `to_vec` copies it out.
///
/// A value read from a table shares the data block it lies in, so it costs no allocation and
/// no copy; while it lives it keeps that block alive, even once the block cache has dropped
/// it or a compaction has removed the table: copy out values kept long, or a few small
/// values may pin many blocks. A value found in a memtable is a copy of its own (one
/// allocation): sharing it would keep the whole memtable alive after its flush.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default())?;
/// db.put("user:1", "ada")?;
/// let value = db.get_pinned("user:1")?.expect("just written");
/// assert_eq!(&*value, b"ada");
/// assert_eq!(value, b"ada");
/// let owned: Vec<u8> = value.into();
/// assert_eq!(owned, b"ada");
/// # Ok::<(), bloomkv::Error>(())
/// ```
#[derive(Clone)]
pub struct Value {
    repr: Repr,
}

#[derive(Clone)]
enum Repr {
    /// Bytes of a data block (its owner).
    Shared(Arc<dyn SharedBytes>, Range<usize>),
    /// A value of its own (copied from a memtable).
    Owned(Vec<u8>),
}

/// Bytes that values share by holding their owner (a decoded block) alive: the store's
/// reading layers hand values out this way without this type knowing theirs.
pub(crate) trait SharedBytes: Send + Sync + std::panic::RefUnwindSafe {
    /// All of the owner's bytes; a value is a range of them.
    fn shared_bytes(&self) -> &[u8];
}

impl Value {
    /// `range` of `owner`'s bytes (a decoded data block's), kept alive with the value.
    pub(crate) fn shared(owner: Arc<dyn SharedBytes>, range: Range<usize>) -> Value {
        Value {
            repr: Repr::Shared(owner, range),
        }
    }

    /// The value's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.repr {
            Repr::Shared(owner, range) => {
                owner.shared_bytes().get(range.clone()).unwrap_or_default()
            }
            Repr::Owned(bytes) => bytes,
        }
    }
}

impl From<Vec<u8>> for Value {
    fn from(bytes: Vec<u8>) -> Value {
        Value {
            repr: Repr::Owned(bytes),
        }
    }
}

impl From<Value> for Vec<u8> {
    fn from(value: Value) -> Vec<u8> {
        match value.repr {
            Repr::Owned(bytes) => bytes,
            _ => value.as_bytes().to_vec(),
        }
    }
}

impl Deref for Value {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsRef<[u8]> for Value {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl std::borrow::Borrow<[u8]> for Value {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Value(b\"{}\")", self.as_bytes().escape_ascii())
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Value {}

impl std::hash::Hash for Value {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Value) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Value {
    fn cmp(&self, other: &Value) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl PartialEq<[u8]> for Value {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_bytes() == other
    }
}

impl PartialEq<&[u8]> for Value {
    fn eq(&self, other: &&[u8]) -> bool {
        self.as_bytes() == *other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for Value {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.as_bytes() == other
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for Value {
    fn eq(&self, other: &&[u8; N]) -> bool {
        self.as_bytes() == *other
    }
}

impl PartialEq<Vec<u8>> for Value {
    fn eq(&self, other: &Vec<u8>) -> bool {
        self.as_bytes() == other.as_slice()
    }
}

impl PartialEq<str> for Value {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for Value {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// The newest version of a key a lookup found.
pub(crate) struct Newest {
    pub seq: SeqNo,
    /// What a read answers: the value, or `None` for the tombstone that deletes the key.
    pub value: Option<Value>,
}

#[cfg(test)]
mod tests {
    use super::Value;

    /// A value goes where a `Vec<u8>` goes: across threads, and into code that catches panics.
    #[test]
    fn a_value_is_send_sync_and_unwind_safe() {
        fn travels<T: Send + Sync + std::panic::UnwindSafe + std::panic::RefUnwindSafe>() {}
        travels::<Value>();
        let value = Value::from(b"ada".to_vec());
        assert_eq!(std::panic::catch_unwind(|| value.len()).unwrap(), 3);
    }
}
