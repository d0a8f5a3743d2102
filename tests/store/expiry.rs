//! Expiry and compaction filters: entries of a keyspace with a time to live read as absent
//! once it has passed (never before), through every read call and across a reopen, and go
//! from disk; a user's compaction filter removes and rewrites entries as compactions reach
//! them, but not what a snapshot still reads.

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::{Duration, Instant};

use bloomkv::{CompactionFilter, Db, FilterDecision, FilterInput, KeyspaceOptions, Options};

const TTL: Duration = Duration::from_secs(1);

/// Sleeps until `deadline`.
fn sleep_until(deadline: Instant) {
    if let Some(left) = deadline.checked_duration_since(Instant::now()) {
        sleep(left);
    }
}

#[test]
fn entries_expire_after_their_time_to_live_and_not_before() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let sessions = db
        .keyspace("sessions", KeyspaceOptions::new().ttl(TTL))
        .unwrap();
    let kept = db.keyspace("kept", KeyspaceOptions::new()).unwrap();
    let written = Instant::now();
    for i in 0..2_000 {
        sessions.put(common::key(i), common::value(i, 0)).unwrap();
        kept.put(common::key(i), common::value(i, 0)).unwrap();
    }
    sessions.put("flushed-later", "x").unwrap();
    // Never early: everything reads back while the time to live has not passed since.
    let early = sessions.iter().count();
    if written.elapsed() < TTL {
        assert_eq!(early, 2_001);
    }
    sleep_until(written + TTL * 3);
    assert_eq!(sessions.get(common::key(7)).unwrap(), None);
    assert!(!sessions.contains_key(common::key(7)).unwrap());
    assert_eq!(
        sessions
            .multi_get(&[common::key(8), common::key(9)])
            .unwrap(),
        vec![None, None]
    );
    assert_eq!(sessions.iter().count(), 0);
    assert_eq!(sessions.iter().rev().count(), 0);
    let mut cursor = sessions.cursor();
    cursor.seek_to_first().unwrap();
    assert_eq!(cursor.key(), None);
    assert_eq!(db.snapshot().keyspace(&sessions).unwrap().iter().count(), 0);
    // Another keyspace keeps its entries; a new write lives.
    assert_eq!(kept.iter().count(), 2_000);
    sessions.put("new", "fresh").unwrap();
    assert_eq!(sessions.get("new").unwrap(), Some(b"fresh".to_vec()));

    // Flushed and compacted, the expired entries leave the disk: the tables holding only
    // them are dropped unread, the rest are rewritten without them.
    db.flush().unwrap();
    db.compact().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    let of = |name: &str| {
        stats
            .keyspaces
            .iter()
            .find(|k| k.name == name)
            .unwrap()
            .entries
    };
    assert!(of("sessions") <= 1, "{} entries left", of("sessions"));
    assert_eq!(of("kept"), 2_000);
    assert_eq!(sessions.get("new").unwrap(), Some(b"fresh".to_vec()));
}

#[test]
fn expiry_follows_the_write_times_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let options = || common::small_tree_options().ttl(TTL);
    let written = Instant::now();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        for i in 0..500 {
            db.put(common::key(i), common::value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        db.put("in the log", "x").unwrap();
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    if written.elapsed() < TTL {
        assert_eq!(db.get(common::key(3)).unwrap(), Some(common::value(3, 0)));
    }
    sleep_until(written + TTL * 3);
    assert_eq!(db.get(common::key(3)).unwrap(), None);
    assert_eq!(db.get("in the log").unwrap(), None);
    assert_eq!(db.iter().count(), 0);
    // The tables holding only expired entries go, unread, as the background finds them.
    let deadline = Instant::now() + Duration::from_secs(10);
    while db.stats().table_bytes() > 0 && Instant::now() < deadline {
        sleep(Duration::from_millis(20));
    }
    assert_eq!(db.stats().table_bytes(), 0);
    assert!(db.stats().tables_expired > 0);
}

/// `Options::ttl` is the default keyspace's alone; entries written before a time to live was
/// set, whose numbers compaction zeroed at the bottom, are of unknown age and do not expire
/// (never early); those written after it do.
#[test]
fn the_store_time_to_live_is_the_default_keyspaces_and_old_bottom_entries_stay() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
        for i in 0..300 {
            db.put(common::key(i), common::value(i, 0)).unwrap();
        }
        db.compact().unwrap(); // numbers zeroed at the bottom
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), common::small_tree_options().ttl(TTL)).unwrap();
    let users = db.keyspace("users", KeyspaceOptions::new()).unwrap();
    assert_eq!(users.options().ttl, None);
    let written = Instant::now();
    db.put("fresh", "x").unwrap();
    users.put("user", "y").unwrap();
    sleep_until(written + TTL * 3);
    assert_eq!(db.get("fresh").unwrap(), None);
    assert_eq!(users.get("user").unwrap(), Some(b"y".to_vec()));
    assert_eq!(db.get(common::key(5)).unwrap(), Some(common::value(5, 0)));
    assert_eq!(db.iter().count(), 300);
}

#[test]
fn a_zero_time_to_live_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let refused = Db::open(dir.path(), Options::default().ttl(Duration::ZERO));
    assert!(matches!(refused, Err(bloomkv::Error::InvalidArgument(_))));
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let zero = KeyspaceOptions::new().ttl(Duration::from_millis(10));
    assert!(matches!(
        db.keyspace("k", zero),
        Err(bloomkv::Error::InvalidArgument(_))
    ));
}

/// Removes keys starting with `drop:`, and makes values starting with `old:` start with
/// `new:`; counts the entries it is asked about, and notes the keyspaces it is told.
#[derive(Default)]
struct Rules {
    asked: AtomicU64,
    keyspaces: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl CompactionFilter for Rules {
    fn filter(&self, entry: FilterInput<'_>) -> FilterDecision {
        self.asked.fetch_add(1, Ordering::Relaxed);
        self.keyspaces
            .lock()
            .unwrap()
            .insert(entry.keyspace.to_string());
        if entry.key.starts_with(b"drop:") {
            return FilterDecision::Remove;
        }
        match entry.value.strip_prefix(b"old:") {
            Some(rest) => FilterDecision::Change([b"new:", rest].concat()),
            None => FilterDecision::Keep,
        }
    }
}

#[test]
fn a_compaction_filter_removes_and_changes_entries_compactions_reach() {
    let dir = tempfile::tempdir().unwrap();
    let rules = Arc::new(Rules::default());
    let options = common::small_tree_options().compaction_filter(rules.clone());
    let db = Db::open(dir.path(), options).unwrap();
    let other = db.keyspace("other", KeyspaceOptions::new()).unwrap();
    for i in 0..1_000u64 {
        db.put(format!("drop:{i:04}"), "x").unwrap();
        db.put(format!("keep:{i:04}"), format!("old:{i}")).unwrap();
        other.put(format!("drop:{i:04}"), "y").unwrap();
    }
    // An older version below, which a removal must keep hidden.
    db.compact().unwrap();
    assert!(rules.asked.load(Ordering::Relaxed) > 0);
    assert_eq!(db.get("drop:0001").unwrap(), None);
    assert_eq!(db.get("keep:0001").unwrap(), Some(b"new:1".to_vec()));
    assert_eq!(db.prefix("drop:").count(), 0);
    assert_eq!(other.iter().count(), 0);
    let told = rules.keyspaces.lock().unwrap().clone();
    assert!(
        told.contains("default") && told.contains("other"),
        "{told:?}"
    );
}

#[test]
fn a_compaction_filter_leaves_what_a_snapshot_reads() {
    let dir = tempfile::tempdir().unwrap();
    let options = common::small_tree_options().compaction_filter(Arc::new(Rules::default()));
    let db = Db::open(dir.path(), options).unwrap();
    for i in 0..500u64 {
        db.put(format!("drop:{i:04}"), "x").unwrap();
    }
    let snapshot = db.snapshot();
    db.compact().unwrap();
    assert_eq!(snapshot.prefix("drop:").count(), 500);
    drop(snapshot);
    db.compact().unwrap();
    assert_eq!(db.prefix("drop:").count(), 0);
    assert_eq!(db.stats().table_bytes(), 0);
}
