//! Compaction filters: a callback of the user's that decides, for each entry a compaction
//! rewrites, to keep it, remove it or change its value (`Options::compaction_filter`). Expiry
//! (`Options::ttl`) is the store's own rule of the same kind.

use crate::entry::{SeqNo, ValueKind};
use crate::error::Result;
use crate::walk::{EntryView, Walk};
use std::sync::Arc;

/// An entry a compaction asks a [`CompactionFilter`] about: the newest version of its key,
/// a value, which no live snapshot reads (each reads an older version, or there is none).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct FilterInput<'a> {
    /// The name of the entry's keyspace (`"default"` for the store's own).
    pub keyspace: &'a str,
    /// The level the compaction writes to.
    pub level: u32,
    /// The key.
    pub key: &'a [u8],
    /// The value.
    pub value: &'a [u8],
}

/// What a [`CompactionFilter`] decides for an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterDecision {
    /// Leave it as it is.
    Keep,
    /// Delete the key: reads find it absent, as after a `delete` (older versions below are
    /// hidden too).
    Remove,
    /// Give the key this value instead, at the same sequence number.
    Change(Vec<u8>),
}

/// A user's rule applied as compactions rewrite entries: to drop what is no longer wanted
/// (expired sessions, a tenant's data) or rewrite values (a migration), without a write of
/// each. It sees each key's newest value when a compaction reaches it, unless a live
/// snapshot reads that value (a snapshot reads what it read when it was taken): until then
/// reads see the entry as it was written. It must be fast
/// and must not call into the store (it runs inside compactions, on their threads).
///
/// ```
/// use std::sync::Arc;
/// use bloomkv::{CompactionFilter, Db, FilterDecision, FilterInput, Options};
///
/// /// Drops every key of the `tmp:` prefix as compactions meet it.
/// struct DropTemporary;
///
/// impl CompactionFilter for DropTemporary {
///     fn filter(&self, entry: FilterInput<'_>) -> FilterDecision {
///         match entry.key.starts_with(b"tmp:") {
///             true => FilterDecision::Remove,
///             false => FilterDecision::Keep,
///         }
///     }
/// }
///
/// # let dir = tempfile::tempdir().unwrap();
/// let options = Options::default().compaction_filter(Arc::new(DropTemporary));
/// let db = Db::open(dir.path(), options)?;
/// db.put("tmp:1", "scratch")?;
/// db.put("user:1", "ada")?;
/// db.compact()?;
/// assert_eq!(db.get("tmp:1")?, None);
/// assert_eq!(db.get("user:1")?, Some(b"ada".to_vec()));
/// # Ok::<(), bloomkv::Error>(())
/// ```
pub trait CompactionFilter: Send + Sync {
    /// What to do with `entry`.
    fn filter(&self, entry: FilterInput<'_>) -> FilterDecision;
}

/// A user's filter, and where it applies: a keyspace and a level, and the versions no live
/// snapshot reads (numbered above `newest_snapshot`).
pub(crate) struct FilterScope {
    pub filter: Arc<dyn CompactionFilter>,
    pub keyspace: Arc<str>,
    pub level: u32,
    pub newest_snapshot: Option<SeqNo>,
    /// The smallest number of a version the filter removed or changed (`u64::MAX`: none),
    /// shared by the merge's parts: a snapshot taken since the merge began that reads it
    /// keeps the merge from being installed.
    pub changed_from: Arc<std::sync::atomic::AtomicU64>,
}

/// A compaction's merged walk (every version, in entry order) with a user's filter applied
/// to the newest version of each key when it is a value no snapshot reads. A removal
/// becomes a tombstone at the value's number, which the versions kept after it then treat
/// as any tombstone (gone at the bottom once nothing older is kept).
pub(crate) struct Filtered<W> {
    pub inner: W,
    pub scope: Option<FilterScope>,
    /// The key of the last entry handed out, to tell a key's newest version.
    last_key: Vec<u8>,
    started: bool,
    /// What the filter made of the current entry, when it changed it.
    changed: Option<(ValueKind, Vec<u8>)>,
}

impl<W: Walk> Filtered<W> {
    pub fn new(inner: W, scope: Option<FilterScope>) -> Self {
        Filtered {
            inner,
            scope,
            last_key: Vec::new(),
            started: false,
            changed: None,
        }
    }

    /// The filter's decision on the current entry, when it is asked; `None` otherwise.
    fn decide(&mut self) -> Option<FilterDecision> {
        let scope = self.scope.as_ref()?;
        let entry = self.inner.current();
        let newest = !self.started || entry.key != self.last_key.as_slice();
        self.started = true;
        self.last_key.clear();
        self.last_key.extend_from_slice(entry.key);
        let unread = scope.newest_snapshot.is_none_or(|s| entry.seq > s);
        let asked = newest && entry.kind == ValueKind::Value && unread;
        asked.then(|| {
            scope.filter.filter(FilterInput {
                keyspace: &scope.keyspace,
                level: scope.level,
                key: entry.key,
                value: entry.value,
            })
        })
    }
}

impl<W: Walk> Walk for Filtered<W> {
    fn advance(&mut self) -> Result<bool> {
        self.changed = None;
        if !self.inner.advance()? {
            return Ok(false);
        }
        self.changed = match self.decide() {
            None | Some(FilterDecision::Keep) => None,
            Some(FilterDecision::Change(value)) => Some((ValueKind::Value, value)),
            Some(FilterDecision::Remove) => Some((ValueKind::Tombstone, Vec::new())),
        };
        if let (Some(_), Some(scope)) = (&self.changed, &self.scope) {
            let seq = self.inner.current().seq;
            (scope.changed_from).fetch_min(seq, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(true)
    }

    fn current(&self) -> EntryView<'_> {
        let entry = self.inner.current();
        match &self.changed {
            Some((kind, value)) => EntryView {
                kind: *kind,
                value,
                ..entry
            },
            None => entry,
        }
    }
}
