//! Optimistic transactions and compare-and-swap: a commit or a swap happens whole or not at
//! all, and never over a write it did not see.

use crate::common;

use std::sync::Arc;
use std::thread;

use bloomkv::{
    Db, Error, Keyspace, KeyspaceOptions, Mismatch, Options, WriteOptions, DEFAULT_KEYSPACE,
};

const THREADS: u64 = 8;
const INCREMENTS: u64 = 10_000;

fn counter(value: Option<Vec<u8>>) -> u64 {
    value.map_or(0, |v| u64::from_le_bytes(v.try_into().expect("8 bytes")))
}

fn assert_mismatch(result: bloomkv::Result<Result<(), Mismatch>>, current: Option<&[u8]>) {
    match result {
        Ok(Err(mismatch)) => assert_eq!(mismatch.current.as_deref(), current),
        other => panic!("expected a mismatch, got {other:?}"),
    }
}

fn assert_conflict_on(result: bloomkv::Result<()>, key: &[u8], current: Option<&[u8]>) {
    match result {
        Err(Error::Conflict { key: k, current: c }) => {
            assert_eq!(k, key);
            assert_eq!(c.as_deref(), current);
        }
        other => panic!("expected a conflict on {key:?}, got {other:?}"),
    }
}

/// Eight threads add one to the same counter ten thousand times each, retrying on conflict,
/// while memtables are flushed and compacted beneath them: no increment is lost.
#[test]
fn concurrent_transactions_lose_no_increment() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), common::small_tree_options()).unwrap());
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = Arc::clone(&db);
            thread::spawn(move || {
                let mut conflicts = 0u64;
                for i in 0..INCREMENTS {
                    loop {
                        let mut tx = db.transaction();
                        let now = counter(tx.get("counter").unwrap());
                        tx.put("counter", (now + 1).to_le_bytes()).unwrap();
                        // A write of its own beside the counter, so tables keep coming.
                        tx.put(common::key(t * INCREMENTS + i), common::value(i, t))
                            .unwrap();
                        match tx.commit() {
                            Ok(()) => break,
                            Err(Error::Conflict { key, .. }) => {
                                assert_eq!(key, b"counter");
                                conflicts += 1;
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    let conflicts: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(counter(db.get("counter").unwrap()), THREADS * INCREMENTS);
    assert!(conflicts > 0, "eight threads on one key never conflicted");
    assert!(db.stats().flushes > 0);
    for t in 0..THREADS {
        for i in (0..INCREMENTS).step_by(997) {
            let key = common::key(t * INCREMENTS + i);
            assert_eq!(db.get(&key).unwrap(), Some(common::value(i, t)));
        }
    }
}

/// The same with compare-and-swap, on a counter in each of three keyspaces: read, then swap
/// the value read for one more. Each thread holds its own handles of the keyspaces, moved
/// into it.
#[test]
fn concurrent_compare_and_swap_in_three_keyspaces_loses_no_increment() {
    const SWAPS: u64 = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let keyspaces: Vec<Keyspace> = (["default", "a", "b"].iter())
        .map(|name| match *name {
            "default" => db
                .keyspace(DEFAULT_KEYSPACE, KeyspaceOptions::new())
                .unwrap(),
            name => db.keyspace(name, KeyspaceOptions::new()).unwrap(),
        })
        .collect();
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let keyspaces = keyspaces.clone();
            thread::spawn(move || {
                for i in 0..SWAPS as usize * keyspaces.len() {
                    let keyspace = &keyspaces[i % keyspaces.len()];
                    let mut seen = keyspace.get("counter").unwrap();
                    loop {
                        let next = (counter(seen.clone()) + 1).to_le_bytes();
                        match keyspace.compare_and_swap("counter", seen.as_deref(), Some(&next)) {
                            Ok(Ok(())) => break,
                            Ok(Err(mismatch)) => seen = mismatch.current,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    for keyspace in &keyspaces {
        let total = counter(keyspace.get("counter").unwrap());
        assert_eq!(total, THREADS * SWAPS, "{}", keyspace.name());
    }
}

#[test]
fn a_key_read_and_changed_since_fails_the_commit_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("a", "1").unwrap();

    let mut tx = db.transaction();
    assert_eq!(tx.get("a").unwrap(), Some(b"1".to_vec()));
    tx.put("b", "from tx").unwrap();
    db.put("a", "2").unwrap();
    assert_conflict_on(tx.commit(), b"a", Some(b"2"));
    assert_eq!(
        db.get("b").unwrap(),
        None,
        "nothing of the transaction was written"
    );

    // A delete is a change too; and a key the transaction only wrote is checked as well.
    let mut tx = db.transaction();
    tx.get("a").unwrap();
    tx.put("d", "from tx").unwrap();
    db.delete("a").unwrap();
    assert_conflict_on(tx.commit_opt(&bloomkv::WriteOptions::synced()), b"a", None);
    assert_eq!(db.get("d").unwrap(), None);
    let mut tx = db.transaction();
    tx.put("c", "from tx").unwrap();
    db.put("c", "from elsewhere").unwrap();
    assert_conflict_on(tx.commit(), b"c", Some(b"from elsewhere"));
    assert_eq!(db.get("c").unwrap(), Some(b"from elsewhere".to_vec()));

    // Keys nobody else touched commit, and a transaction that only read commits at once.
    let mut tx = db.transaction();
    tx.get("x").unwrap();
    tx.put("y", "1").unwrap();
    db.put("z", "unrelated").unwrap();
    tx.commit().unwrap();
    assert_eq!(db.get("y").unwrap(), Some(b"1".to_vec()));
    let mut tx = db.transaction();
    tx.get("y").unwrap();
    db.put("y", "2").unwrap();
    tx.commit().unwrap();
}

/// A change made after the snapshot is still found once flushes and compactions have moved
/// it to the bottom of the tree, where versions every reader sees lose their number.
#[test]
fn a_change_is_found_after_it_was_compacted_to_the_bottom() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    db.put("k", "old").unwrap();
    let mut tx = db.transaction();
    assert_eq!(tx.get("k").unwrap(), Some(b"old".to_vec()));
    db.put("k", "new").unwrap();
    for i in 0..20_000 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    tx.put("k", "from tx").unwrap();
    assert_conflict_on(tx.commit(), b"k", Some(b"new"));
    assert_eq!(db.get("k").unwrap(), Some(b"new".to_vec()));
}

#[test]
fn reads_see_the_transactions_own_writes_and_its_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("a", "1").unwrap();
    let mut tx = db.transaction();
    db.put("a", "later").unwrap();
    assert_eq!(
        tx.get("a").unwrap(),
        Some(b"1".to_vec()),
        "the snapshot's value"
    );
    tx.put("b", "mine").unwrap();
    tx.delete("a").unwrap();
    assert_eq!(tx.get("b").unwrap(), Some(b"mine".to_vec()));
    assert_eq!(tx.get("a").unwrap(), None);
    assert_eq!(db.get("b").unwrap(), None, "not written before the commit");
    drop(tx);
    assert_eq!(
        db.get("b").unwrap(),
        None,
        "a dropped transaction writes nothing"
    );
    assert_eq!(db.get("a").unwrap(), Some(b"later".to_vec()));
}

#[test]
fn compare_and_swap_writes_only_over_what_it_expects() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.compare_and_swap("k", None, Some(b"1")).unwrap().unwrap();
    assert_mismatch(db.compare_and_swap("k", None, Some(b"2")), Some(b"1"));
    assert_mismatch(db.compare_and_swap("k", Some(b"0"), Some(b"2")), Some(b"1"));
    assert_eq!(db.get("k").unwrap(), Some(b"1".to_vec()));
    db.compare_and_swap("k", Some(b"1"), Some(b"2"))
        .unwrap()
        .unwrap();
    let synced = WriteOptions::synced();
    (db.compare_and_swap_opt("k", Some(b"2"), None, &synced)
        .unwrap())
    .unwrap();
    assert_eq!(db.get("k").unwrap(), None);
    assert_mismatch(db.compare_and_swap("k", Some(b"2"), None), None);

    // In a keyspace: its own keys, apart from the default keyspace's.
    let other = db.keyspace("other", KeyspaceOptions::new()).unwrap();
    db.put("k", "default's").unwrap();
    assert_mismatch(other.compare_and_swap("k", Some(b"default's"), None), None);
    other
        .compare_and_swap("k", None, Some(b"1"))
        .unwrap()
        .unwrap();
    assert_mismatch(
        other.compare_and_swap_opt("k", None, None, &synced),
        Some(b"1"),
    );
    assert_eq!(other.get("k").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get("k").unwrap(), Some(b"default's".to_vec()));

    // Bad input is refused before anything is checked or written.
    let long = vec![7u8; 70_000];
    assert!(matches!(
        db.compare_and_swap(&long, None, Some(b"v")),
        Err(Error::KeyTooLarge { .. })
    ));
    let mut tx = db.transaction();
    assert!(matches!(tx.put(&long, "v"), Err(Error::KeyTooLarge { .. })));
}

#[test]
fn a_read_only_store_refuses_conditional_writes() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(dir.path(), Options::default())
        .unwrap()
        .close()
        .unwrap();
    let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert!(matches!(
        db.compare_and_swap("k", None, Some(b"v")),
        Err(Error::ReadOnly)
    ));
    let mut tx = db.transaction();
    tx.put("k", "v").unwrap();
    assert!(matches!(tx.commit(), Err(Error::ReadOnly)));
}

/// Refused writes are in neither the memtable nor the log: a reopen, which replays the log,
/// does not bring them back.
#[test]
fn refused_writes_stay_out_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("a", "1").unwrap();
    let mut tx = db.transaction();
    tx.get("a").unwrap();
    tx.put("refused", "tx").unwrap();
    db.put("a", "2").unwrap();
    assert!(matches!(tx.commit(), Err(Error::Conflict { .. })));
    assert_mismatch(
        db.compare_and_swap("a", Some(b"1"), Some(b"refused")),
        Some(b"2"),
    );
    db.compare_and_swap("b", None, Some(b"kept"))
        .unwrap()
        .unwrap();
    drop(db); // no flush: the log is all there is
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get("refused").unwrap(), None);
    assert_eq!(db.get("a").unwrap(), Some(b"2".to_vec()));
    assert_eq!(db.get("b").unwrap(), Some(b"kept".to_vec()));
}

/// A range's pairs as strings.
fn pairs_of(
    it: impl Iterator<Item = bloomkv::Result<(Vec<u8>, Vec<u8>)>>,
) -> Vec<(String, String)> {
    it.map(|r| {
        let (k, v) = r.unwrap();
        (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())
    })
    .collect()
}

/// A range in a transaction is its snapshot with its own writes laid over it, in key order,
/// read from either end.
#[test]
fn ranges_merge_the_snapshot_with_the_transactions_own_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    for i in 0..2_000u64 {
        db.put(format!("k{i:05}"), format!("stored {i}")).unwrap();
    }
    db.flush().unwrap();
    let mut tx = db.transaction();
    db.put("k00001", "after the snapshot").unwrap();
    db.put("k99999", "after the snapshot").unwrap();
    tx.put("k00000", "mine").unwrap(); // over a stored key
    tx.put("k00001x", "mine").unwrap(); // between two stored keys
    tx.delete("k00002").unwrap(); // a stored key taken out
    tx.delete("k00002a").unwrap(); // a delete of nothing
    tx.put("a", "mine, first").unwrap(); // before every stored key
    tx.put("z", "mine, last").unwrap(); // after every stored key

    let mut model: std::collections::BTreeMap<String, String> = (0..2_000u64)
        .map(|i| (format!("k{i:05}"), format!("stored {i}")))
        .collect();
    model.insert("k00000".into(), "mine".into());
    model.insert("k00001x".into(), "mine".into());
    model.remove("k00002");
    model.insert("a".into(), "mine, first".into());
    model.insert("z".into(), "mine, last".into());
    let pairs = |it: bloomkv::TransactionRange<'_>| -> Vec<(String, String)> {
        it.map(|r| {
            let (k, v) = r.unwrap();
            (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())
        })
        .collect()
    };
    let all: Vec<_> = model.clone().into_iter().collect();
    assert_eq!(pairs(tx.iter()), all);
    let some: Vec<_> = model
        .range("k00000".to_string().."k00003".to_string())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(pairs(tx.range("k00000".."k00003")), some);
    assert_eq!(pairs(tx.range("k00001x"..="k00001x")).len(), 1);
    assert!(
        pairs(tx.range("z".."a")).is_empty(),
        "a reversed range is empty"
    );
    assert!(pairs(tx.range("k00001".."k00001")).is_empty());
    // Backwards, and from both ends at once, the same pairs.
    let mut backward = pairs_of(tx.iter().rev());
    backward.reverse();
    assert_eq!(backward, all);
    let mut backward = pairs_of(tx.range("k00000".."k00003").rev());
    backward.reverse();
    assert_eq!(backward, some);
    for split in [0, 1, 2, 3, 4, 1_000, 2_003] {
        let mut both = tx.iter();
        let front = pairs_of(both.by_ref().take(split));
        let mut rest = pairs_of(both.rev());
        rest.reverse();
        assert_eq!([front, rest].concat(), all, "split at {split}");
    }
    let both = common::read_from_both_ends(tx.iter());
    assert_eq!(pairs_of(both.into_iter().map(Ok)), all, "alternating ends");
    // The transaction's view; the store's own moved on.
    assert_eq!(
        db.get("k00001").unwrap(),
        Some(b"after the snapshot".to_vec())
    );
    tx.commit().unwrap();
    assert_eq!(db.get("k00002").unwrap(), None);
    assert_eq!(db.get("z").unwrap(), Some(b"mine, last".to_vec()));
}

/// A transfer between two keyspaces: the commit writes both or neither, and a write to either
/// keyspace since the transaction began refuses the whole of it.
#[test]
fn a_transaction_across_keyspaces_commits_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let (from, to) = (
        db.keyspace("from", KeyspaceOptions::new()).unwrap(),
        db.keyspace("to", KeyspaceOptions::new()).unwrap(),
    );
    from.put("alice", 10u64.to_le_bytes()).unwrap();
    to.put("bob", 0u64.to_le_bytes()).unwrap();
    let transfer = |tx: &mut bloomkv::Transaction| {
        let a = counter(tx.get_in(&from, "alice").unwrap());
        let b = counter(tx.get_in(&to, "bob").unwrap());
        tx.put_in(&from, "alice", (a - 3).to_le_bytes()).unwrap();
        tx.put_in(&to, "bob", (b + 3).to_le_bytes()).unwrap();
    };

    let mut tx = db.transaction();
    transfer(&mut tx);
    // Read back through the transaction, its own writes over its snapshot, per keyspace.
    assert_eq!(counter(tx.get_in(&to, "bob").unwrap()), 3);
    let pairs: Vec<_> = tx
        .range_in::<&[u8], _>(&to, ..)
        .map(Result::unwrap)
        .collect();
    assert_eq!(pairs, vec![(b"bob".to_vec(), 3u64.to_le_bytes().to_vec())]);
    assert_eq!(
        tx.get("alice").unwrap(),
        None,
        "the default keyspace is apart"
    );
    tx.commit_opt(&WriteOptions::synced()).unwrap();
    assert_eq!(counter(from.get("alice").unwrap()), 7);
    assert_eq!(counter(to.get("bob").unwrap()), 3);

    // A write to the second keyspace after the transaction read it: nothing is written.
    let mut tx = db.transaction();
    transfer(&mut tx);
    to.put("bob", 100u64.to_le_bytes()).unwrap();
    assert!(matches!(tx.commit(), Err(Error::Conflict { .. })));
    assert_eq!(
        counter(from.get("alice").unwrap()),
        7,
        "the first keyspace untouched"
    );
    assert_eq!(counter(to.get("bob").unwrap()), 100);

    // A delete in one keyspace with a put in another.
    let mut tx = db.transaction();
    tx.delete_in(&from, "alice").unwrap();
    tx.put_in(&to, "carol", "new").unwrap();
    tx.commit().unwrap();
    assert_eq!(from.get("alice").unwrap(), None);
    assert_eq!(to.get("carol").unwrap(), Some(b"new".to_vec()));
}
