//! Optimistic transactions and compare-and-swap.
//!
//! A transaction reads through a snapshot and buffers its writes; nothing is locked while it
//! runs. Its commit is one batch written only if none of the keys it read or wrote has a
//! version newer than its snapshot. The check runs in the write group's leader, under the
//! writer lock (`write::refuse_unmet_conditions`), so no write can come between the check
//! and the batch: two transactions that read the same counter cannot both commit. The one
//! that loses gets `Error::Conflict` and retries from a new transaction, as with RocksDB's
//! `OptimisticTransactionDB` and fjall's optimistic transactions.
//!
//! The snapshot is what makes the check sound: while it lives, no compaction drops a version
//! newer than it or zeroes its sequence number (`Compaction::merged_entries_in` zeroes only
//! versions every snapshot sees), so a newer version is always found with its number.

use std::cmp::Ordering;
use std::collections::{btree_map, BTreeMap, BTreeSet};
use std::ops::{Bound, RangeBounds};

use super::write_group::Condition;
use super::{byte_bounds, Db, Keyspace, Snapshot};
use crate::entry::{check_entry_len, check_key_len, ValueKind};
use crate::error::{Error, Result};
use crate::iter::DbIterator;
use crate::keyspace::{KeyspaceId, DEFAULT_ID};
use crate::options::WriteOptions;
use crate::write_batch::WriteBatch;

/// An optimistic transaction: reads see the store as of [`Db::transaction`] and the
/// transaction's own writes; [`Transaction::commit`] writes all of its writes atomically, or
/// none of them and `Error::Conflict` when a key it read or wrote changed since it began.
/// Dropping it without a commit discards its writes. It may read and write any of the
/// store's keyspaces (the `_in` methods); its commit writes them all or none.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default()).unwrap();
/// db.put("counter", 1u64.to_le_bytes()).unwrap();
/// loop {
///     let mut tx = db.transaction();
///     let now = tx.get("counter").unwrap().map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
///     tx.put("counter", (now + 1).to_le_bytes()).unwrap();
///     match tx.commit() {
///         Ok(()) => break,
///         Err(bloomkv::Error::Conflict { .. }) => continue, // another writer came first
///         Err(e) => panic!("{e}"),
///     }
/// }
/// assert_eq!(db.get("counter").unwrap(), Some(2u64.to_le_bytes().to_vec()));
/// ```
pub struct Transaction {
    db: Db,
    snapshot: Snapshot,
    /// Buffered writes by keyspace, the newest per key: a value, or `None` for a delete.
    writes: BTreeMap<KeyspaceId, BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
    /// Keys read from the snapshot (not those answered by the transaction's own writes).
    reads: BTreeSet<(KeyspaceId, Vec<u8>)>,
    /// Buffered range deletions by keyspace, `(start, end)`: they take out the snapshot's
    /// keys in their ranges, and the buffered writes made before them (`writes` holds only
    /// those made after).
    ranges: BTreeMap<KeyspaceId, Vec<KeyRange>>,
}

impl Transaction {
    pub(super) fn new(db: &Db) -> Transaction {
        Transaction {
            db: db.clone(),
            snapshot: db.snapshot(),
            writes: BTreeMap::new(),
            reads: BTreeSet::new(),
            ranges: BTreeMap::new(),
        }
    }

    /// Deletes every key from `start` (included) to `end` (excluded) when the transaction
    /// commits (see [`Db::delete_range`]); the transaction's reads no longer see them, nor its
    /// writes to them before this call. Like a write, it reads nothing, so it adds no key for
    /// the commit to check.
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_at(DEFAULT_ID, start.as_ref(), end.as_ref())
    }

    /// [`delete_range`](Self::delete_range) in `keyspace`.
    pub fn delete_range_in(
        &mut self,
        keyspace: &Keyspace,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<()> {
        let id = keyspace.id_in(&self.db)?;
        self.delete_range_at(id, start.as_ref(), end.as_ref())
    }

    fn delete_range_at(&mut self, keyspace: KeyspaceId, start: &[u8], end: &[u8]) -> Result<()> {
        check_key_len(start)?;
        check_key_len(end)?;
        if start >= end {
            return Ok(());
        }
        if let Some(writes) = self.writes.get_mut(&keyspace) {
            writes.retain(|key, _| key.as_slice() < start || key.as_slice() >= end);
        }
        let ranges = self.ranges.entry(keyspace).or_default();
        ranges.push((start.to_vec(), end.to_vec()));
        Ok(())
    }

    /// Whether a buffered range deletion covers `key` of `keyspace`.
    fn deleted_by_range(&self, keyspace: KeyspaceId, key: &[u8]) -> bool {
        (self.ranges.get(&keyspace)).is_some_and(|ranges| covered(ranges, key))
    }

    /// The value of `key`: the transaction's own write of it if it made one, else the value
    /// at its snapshot. The key joins those the commit checks.
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_at(DEFAULT_ID, key.as_ref())
    }

    /// [`get`](Self::get) of `key` in `keyspace` (of this transaction's store:
    /// `NoSuchKeyspace` otherwise, as for every `_in` call).
    pub fn get_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        self.get_at(keyspace.id_in(&self.db)?, key.as_ref())
    }

    /// Sets `key` to `value` when the transaction commits.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.write(DEFAULT_ID, key.as_ref(), Some(value.as_ref()))
    }

    /// [`put`](Self::put) in `keyspace`.
    pub fn put_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.write(
            keyspace.id_in(&self.db)?,
            key.as_ref(),
            Some(value.as_ref()),
        )
    }

    /// Deletes `key` when the transaction commits.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.write(DEFAULT_ID, key.as_ref(), None)
    }

    /// [`delete`](Self::delete) in `keyspace`.
    pub fn delete_in(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<()> {
        self.write(keyspace.id_in(&self.db)?, key.as_ref(), None)
    }

    fn get_at(&mut self, keyspace: KeyspaceId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(written) = self.writes.get(&keyspace).and_then(|w| w.get(key)) {
            return Ok(written.clone());
        }
        if self.deleted_by_range(keyspace, key) {
            return Ok(None);
        }
        let seq = Some(self.snapshot.sequence_number());
        let value = self.db.inner.get(keyspace, key, seq)?;
        self.reads.insert((keyspace, key.to_vec()));
        Ok(value)
    }

    fn write(&mut self, keyspace: KeyspaceId, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        check_entry_len(key, value.unwrap_or_default())?;
        let writes = self.writes.entry(keyspace).or_default();
        writes.insert(key.to_vec(), value.map(<[u8]>::to_vec));
        Ok(())
    }

    /// Every pair in key order, as the transaction sees them: its snapshot with its own writes
    /// over it (see [`Transaction::range`]).
    pub fn iter(&self) -> TransactionRange<'_> {
        self.range::<&[u8], _>(..)
    }

    /// Pairs with keys in `range`, in key order, as the transaction sees them: its snapshot's,
    /// with the transaction's own puts in place of or beside them and its deletes taken out.
    /// Keys a range yields do not join those the commit checks (only `get` does): a commit
    /// is not refused because a key was added to a range since the snapshot.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> TransactionRange<'_> {
        self.range_at(DEFAULT_ID, byte_bounds(&range))
    }

    /// [`range`](Self::range) in `keyspace`.
    pub fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        keyspace: &Keyspace,
        range: R,
    ) -> TransactionRange<'_> {
        match keyspace.id_in(&self.db) {
            Ok(id) => self.range_at(id, byte_bounds(&range)),
            Err(_) => TransactionRange {
                writes: None,
                deleted: &[],
                stored: super::read::failing_iter(format!(
                    "{} (a keyspace of another store)",
                    keyspace.name()
                )),
                front: Taken::default(),
                back: Taken::default(),
            },
        }
    }

    fn range_at(
        &self,
        keyspace: KeyspaceId,
        (start, end): (Bound<&[u8]>, Bound<&[u8]>),
    ) -> TransactionRange<'_> {
        let writes = match (self.writes.get(&keyspace), bounds_are_empty(start, end)) {
            (Some(writes), false) => Some(writes.range::<[u8], _>((start, end))),
            _ => None,
        };
        let seq = Some(self.snapshot.sequence_number());
        let end = end.map(<[u8]>::to_vec);
        TransactionRange {
            writes,
            deleted: self.ranges.get(&keyspace).map_or(&[], Vec::as_slice),
            stored: self.db.inner.iter(keyspace, start, end, None, seq),
            front: Taken::default(),
            back: Taken::default(),
        }
    }

    /// The sequence number of the snapshot the transaction reads.
    pub fn sequence_number(&self) -> u64 {
        self.snapshot.sequence_number()
    }

    /// Writes the transaction's writes atomically, unless a key it read or wrote has changed
    /// since its snapshot: then nothing, and `Error::Conflict` naming the key. A transaction
    /// that wrote nothing commits at once (its reads were of one consistent snapshot). Only
    /// `Conflict` says for sure that nothing was written: after another error (a failed WAL
    /// write), as after any failed write, the commit may or may not be in the store.
    pub fn commit(self) -> Result<()> {
        self.commit_opt(&WriteOptions::default())
    }

    /// [`Transaction::commit`] with write options (`WriteOptions::synced()` for a commit that
    /// survives power loss once it returns).
    pub fn commit_opt(self, options: &WriteOptions) -> Result<()> {
        if self.writes.is_empty() && self.ranges.is_empty() {
            return Ok(());
        }
        // The range deletions first: the buffered writes are those made after them.
        let mut batch = WriteBatch::new();
        for (&keyspace, ranges) in &self.ranges {
            for (start, end) in ranges {
                batch.push_range(keyspace, start, end);
            }
        }
        for (&keyspace, writes) in &self.writes {
            for (key, value) in writes {
                match value {
                    Some(value) => batch.push(ValueKind::Value, keyspace, key, value),
                    None => batch.push(ValueKind::Tombstone, keyspace, key, &[]),
                };
            }
        }
        let mut keys = self.reads;
        for (keyspace, writes) in self.writes {
            keys.extend(writes.into_keys().map(|key| (keyspace, key)));
        }
        let condition = Condition::UnchangedSince {
            keys: keys.into_iter().collect(),
            seq: self.snapshot.sequence_number(),
        };
        self.db.write_if(batch, options, condition)
    }
}

/// A compare-and-swap that found the key holding something other than what it expected: it
/// wrote nothing. Returned as a value ([`Db::compare_and_swap`] gives `Ok(Err(Mismatch))`),
/// since it is an answer, not a failure: read `current` and try again.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Mismatch {
    /// What the key held when the swap was checked (`None`: nothing).
    pub current: Option<Vec<u8>>,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.current {
            Some(value) => write!(f, "the key holds another value ({} bytes)", value.len()),
            None => write!(f, "the key holds nothing"),
        }
    }
}

impl std::error::Error for Mismatch {}

impl Db {
    /// Starts an optimistic transaction (see [`Transaction`]).
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self)
    }

    /// Sets `key` to `new` (`None`: deletes it) only if it holds `expected` now (`None`: it is
    /// absent), atomically with respect to every other write; else writes nothing and returns
    /// `Ok(Err(Mismatch))` with what the key holds. `Err` is kept for failures (a WAL write
    /// that failed, a key too long). Not synced: see [`Db::compare_and_swap_opt`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = bloomkv::Db::open(dir.path(), bloomkv::Options::default())?;
    /// assert!(db.compare_and_swap("leader", None, Some(b"node-1"))?.is_ok());
    /// let lost = db.compare_and_swap("leader", None, Some(b"node-2"))?.unwrap_err();
    /// assert_eq!(lost.current.as_deref(), Some(&b"node-1"[..]));
    /// # Ok::<(), bloomkv::Error>(())
    /// ```
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<std::result::Result<(), Mismatch>> {
        let options = WriteOptions::default();
        self.swap(DEFAULT_ID, key.as_ref(), expected, new, &options)
    }

    /// [`compare_and_swap`](Self::compare_and_swap) with write options
    /// (`WriteOptions::synced()` for a swap that survives power loss once it returns).
    pub fn compare_and_swap_opt(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        options: &WriteOptions,
    ) -> Result<std::result::Result<(), Mismatch>> {
        self.swap(DEFAULT_ID, key.as_ref(), expected, new, options)
    }

    /// A compare-and-swap of `key` in `keyspace`.
    pub(super) fn swap(
        &self,
        keyspace: KeyspaceId,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        options: &WriteOptions,
    ) -> Result<std::result::Result<(), Mismatch>> {
        let mut batch = WriteBatch::new();
        match new {
            Some(value) => batch.push(ValueKind::Value, keyspace, key, value),
            None => batch.push(ValueKind::Tombstone, keyspace, key, &[]),
        };
        let condition = Condition::Holds {
            keyspace,
            key: key.to_vec(),
            expected: expected.map(<[u8]>::to_vec),
        };
        match self.write_if(batch, options, condition) {
            Ok(()) => Ok(Ok(())),
            Err(Error::Conflict { current, .. }) => Ok(Err(Mismatch { current })),
            Err(e) => Err(e),
        }
    }

    /// Writes `batch` if `condition` holds when it is written.
    fn write_if(
        &self,
        batch: WriteBatch,
        options: &WriteOptions,
        condition: Condition,
    ) -> Result<()> {
        self.refuse_if_read_only()?;
        batch.validate()?;
        self.inner.write_if(batch, options.sync, Some(condition))
    }
}

/// True when no key lies between `start` and `end` (which `BTreeMap::range` refuses to take).
fn bounds_are_empty(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e)) => s >= e,
        _ => false,
    }
}

/// A range of keys, `(start, end)`, end excluded.
type KeyRange = (Vec<u8>, Vec<u8>);

/// Whether one of `ranges` covers `key`.
fn covered(ranges: &[KeyRange], key: &[u8]) -> bool {
    (ranges.iter()).any(|(start, end)| start.as_slice() <= key && key < end.as_slice())
}

/// A transaction's buffered writes in a range: a value, or `None` for a delete.
type BufferedWrites<'t> = btree_map::Range<'t, Vec<u8>, Option<Vec<u8>>>;

/// One buffered write: its key, and its value or `None` for a delete.
type BufferedWrite<'t> = (&'t Vec<u8>, &'t Option<Vec<u8>>);

/// The pairs of a range as a transaction sees them ([`Transaction::range`]): the snapshot's
/// entries and the transaction's buffered writes, merged in key order, from either end
/// (`.rev()`), as a `DbIterator` is.
pub struct TransactionRange<'t> {
    writes: Option<BufferedWrites<'t>>,
    /// The transaction's range deletions in the keyspace: stored pairs they cover are out.
    deleted: &'t [KeyRange],
    stored: DbIterator,
    /// What each end took from the two sources and has not handed out yet.
    front: Taken<'t>,
    back: Taken<'t>,
}

/// What one end of a [`TransactionRange`] took from each source, ahead of the merge.
#[derive(Default)]
struct Taken<'t> {
    written: Option<BufferedWrite<'t>>,
    stored: Option<Result<(Vec<u8>, Vec<u8>)>>,
}

impl TransactionRange<'_> {
    /// Takes each source's next pair at one end. A source whose two ends have met may still
    /// hold its last pair in the other end's hands: that pair is the next at this end too.
    fn take_next(&mut self, backward: bool) {
        let (this, other) = match backward {
            false => (&mut self.front, &mut self.back),
            true => (&mut self.back, &mut self.front),
        };
        if this.written.is_none() {
            let next = match (&mut self.writes, backward) {
                (Some(writes), false) => writes.next(),
                (Some(writes), true) => writes.next_back(),
                (None, _) => None,
            };
            this.written = next.or_else(|| other.written.take());
        }
        if this.stored.is_none() {
            let next = match backward {
                false => self.stored.next(),
                true => self.stored.next_back(),
            };
            this.stored = next.or_else(|| other.stored.take());
        }
    }

    /// The next pair from the front (or, `backward`, the back): of the two sources' pairs,
    /// the one that comes first that way, a buffered write standing in for the stored pair
    /// of its key, and a buffered delete taking the key out.
    fn step(&mut self, backward: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        loop {
            self.take_next(backward);
            let taken = match backward {
                false => &mut self.front,
                true => &mut self.back,
            };
            let order = match (&taken.written, &taken.stored) {
                (None, None) => return None,
                // An error first: it ends the range.
                (_, Some(Err(_))) | (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some((wrote, _)), Some(Ok((stored, _)))) => match backward {
                    false => wrote.as_slice().cmp(stored),
                    true => stored.cmp(wrote),
                },
            };
            match order {
                Ordering::Greater => match taken.stored.take() {
                    Some(Ok((key, _))) if covered(self.deleted, &key) => continue,
                    stored => return stored,
                },
                // The transaction's write of the key stands in for the stored value.
                Ordering::Equal => drop(taken.stored.take()),
                Ordering::Less => {}
            }
            let (key, value) = taken.written.take()?;
            if let Some(value) = value {
                return Some(Ok((key.clone(), value.clone())));
            }
            // A delete of its own: the key is gone for the transaction.
        }
    }
}

impl Iterator for TransactionRange<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}

impl DoubleEndedIterator for TransactionRange<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}
