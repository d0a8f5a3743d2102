//! Keyspaces: named trees in one store, with one WAL and atomic batches across them.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use bloomkv::{
    Compression, Db, Error, FilterPolicy, KeyspaceOptions, Options, WriteBatch, WriteOptions,
    DEFAULT_KEYSPACE,
};

fn pairs(
    iter: impl Iterator<Item = bloomkv::Result<(Vec<u8>, Vec<u8>)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    iter.map(|r| r.unwrap()).collect()
}

#[test]
fn keyspaces_keep_their_keys_apart() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let users = db.keyspace("users", KeyspaceOptions::new()).unwrap();
    let emails = db.keyspace("emails", KeyspaceOptions::new()).unwrap();
    db.put("k", "default").unwrap();
    users.put("k", "user").unwrap();
    emails.put("k", "email").unwrap();
    emails.put("only-in-emails", "1").unwrap();

    assert_eq!(db.get("k").unwrap(), Some(b"default".to_vec()));
    assert_eq!(users.get("k").unwrap(), Some(b"user".to_vec()));
    assert_eq!(emails.get("k").unwrap(), Some(b"email".to_vec()));
    assert_eq!(db.get("only-in-emails").unwrap(), None);
    assert!(!users.may_contain("only-in-emails"));
    assert_eq!(pairs(users.iter()), vec![(b"k".to_vec(), b"user".to_vec())]);
    assert_eq!(emails.range("o"..).count(), 1);
    assert_eq!(pairs(emails.iter().rev())[0].0, b"only-in-emails".to_vec());

    users.delete("k").unwrap();
    assert_eq!(users.get("k").unwrap(), None);
    assert_eq!(emails.get("k").unwrap(), Some(b"email".to_vec()));
    assert_eq!(db.get("k").unwrap(), Some(b"default".to_vec()));
    assert_eq!(db.keyspace_names(), ["default", "users", "emails"]);
    // "default" names the store's own keyspace.
    let default = db
        .keyspace(DEFAULT_KEYSPACE, KeyspaceOptions::new())
        .unwrap();
    assert_eq!(default.get("k").unwrap(), Some(b"default".to_vec()));
}

/// Writes `n` keys to each of `names` (values naming the keyspace), through tables: the
/// memtables are small, so flushes and compactions run in every keyspace.
fn fill(db: &Db, names: &[&str], n: u64) {
    for name in names {
        let ks = db.keyspace(name, KeyspaceOptions::new()).unwrap();
        for i in 0..n {
            ks.put(common::key(i), format!("{name}-{i}")).unwrap();
        }
    }
}

fn check_filled(db: &Db, names: &[&str], n: u64) {
    for name in names {
        let ks = db.existing_keyspace(name).unwrap();
        for i in (0..n).step_by(7) {
            let expected = format!("{name}-{i}").into_bytes();
            assert_eq!(
                ks.get(common::key(i)).unwrap(),
                Some(expected),
                "{name} {i}"
            );
        }
        assert_eq!(ks.iter().count() as u64, n, "{name}");
    }
}

#[test]
fn keyspaces_flush_compact_and_reopen_with_their_options() {
    let dir = tempfile::tempdir().unwrap();
    let options = common::small_tree_options();
    {
        let db = Db::open(dir.path(), options.clone()).unwrap();
        let strict = KeyspaceOptions::new()
            .filter_policy(FilterPolicy::FalsePositiveRate(0.001))
            .compression(Compression::None)
            .block_size(512);
        db.keyspace("strict", strict).unwrap();
        db.keyspace("plain", KeyspaceOptions::new()).unwrap();
        fill(&db, &["strict", "plain"], 3000);
        db.compact().unwrap();
        check_filled(&db, &["strict", "plain"], 3000);
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.keyspace_names(), ["default", "strict", "plain"]);
    check_filled(&db, &["strict", "plain"], 3000);
    let stats = db.stats();
    assert!(
        stats.tables.is_empty(),
        "the default keyspace holds nothing"
    );
    let strict = &stats.keyspaces[1];
    assert_eq!(strict.name, "strict");
    assert_eq!(strict.filter_policy, FilterPolicy::FalsePositiveRate(0.001));
    assert_eq!(
        (strict.compression, strict.block_size),
        (Compression::None, 512)
    );
    assert_eq!(strict.entries, 3000);
    let plain = &stats.keyspaces[2];
    assert_eq!(plain.compression, Compression::Lz4);
    // Each keyspace's tables carry its own filter: 0.1% takes more bits per key than 1%.
    let bits = |tables: &[bloomkv::TableStats]| tables.iter().map(|t| t.bits_per_key).max();
    assert!(
        bits(&strict.tables) > bits(&plain.tables),
        "{strict:?} {plain:?}"
    );
    // Options set later are recorded and kept; unset ones keep what was recorded.
    let strict = db
        .keyspace("strict", KeyspaceOptions::new().block_size(2048))
        .unwrap();
    assert_eq!(strict.options().block_size, Some(2048));
    assert_eq!(strict.options().compression, Some(Compression::None));
    drop(strict);
    db.close().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let strict = db.existing_keyspace("strict").unwrap();
    assert_eq!(strict.options().block_size, Some(2048));
    assert_eq!(
        strict.options().filter_policy,
        Some(FilterPolicy::FalsePositiveRate(0.001))
    );
}

#[test]
fn unflushed_writes_of_every_keyspace_replay_from_the_one_wal() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let a = db.keyspace("a", KeyspaceOptions::new()).unwrap();
        let b = db.keyspace("b", KeyspaceOptions::new()).unwrap();
        let mut batch = WriteBatch::new();
        batch
            .put_in(&a, "x", "1")
            .put_in(&b, "x", "2")
            .put("x", "0");
        db.write(batch).unwrap();
        a.delete("x").unwrap();
        assert!(db.stats().keyspaces.iter().all(|k| k.tables.is_empty()));
        // Dropped without a close: the WAL is synced, no table is written.
    }
    let logs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count();
    assert!(logs >= 1);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.recovery_report().batches_replayed, 2);
    assert_eq!(db.get("x").unwrap(), Some(b"0".to_vec()));
    let a = db.existing_keyspace("a").unwrap();
    let b = db.existing_keyspace("b").unwrap();
    assert_eq!(a.get("x").unwrap(), None);
    assert_eq!(b.get("x").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn a_dropped_keyspace_is_gone_with_its_files_and_its_logged_writes() {
    let dir = tempfile::tempdir().unwrap();
    let options = common::small_tree_options();
    let db = Db::open(dir.path(), options.clone()).unwrap();
    fill(&db, &["doomed", "kept"], 2000);
    db.flush().unwrap();
    let doomed = db.existing_keyspace("doomed").unwrap();
    doomed.put("unflushed", "in the WAL only").unwrap();
    let tables_before: Vec<u64> = db.stats().keyspaces[1]
        .tables
        .iter()
        .map(|t| t.number)
        .collect();
    assert!(!tables_before.is_empty());

    db.drop_keyspace("doomed").unwrap();
    assert!(matches!(doomed.get("k"), Err(Error::NoSuchKeyspace { .. })));
    assert!(matches!(
        doomed.put("k", "v"),
        Err(Error::NoSuchKeyspace { .. })
    ));
    assert!(matches!(
        doomed.iter().next(),
        Some(Err(Error::NoSuchKeyspace { .. }))
    ));
    assert_eq!(db.keyspace_names(), ["default", "kept"]);
    for number in &tables_before {
        let file = dir.path().join(bloomkv::filename::table_file_name(*number));
        assert!(!file.exists(), "{} outlived the drop", file.display());
    }
    assert!(matches!(
        db.drop_keyspace("doomed"),
        Err(Error::NoSuchKeyspace { .. })
    ));
    assert!(matches!(
        db.drop_keyspace(DEFAULT_KEYSPACE),
        Err(Error::InvalidArgument(_))
    ));
    drop(doomed);

    // A keyspace made again under the old name is a new one: the dropped one's writes still
    // in the WAL never reach it, before or after a reopen.
    let again = db.keyspace("doomed", KeyspaceOptions::new()).unwrap();
    assert_eq!(again.get("unflushed").unwrap(), None);
    drop(again);
    drop(db);
    let db = Db::open(dir.path(), options).unwrap();
    let again = db.existing_keyspace("doomed").unwrap();
    assert_eq!(again.iter().count(), 0);
    check_filled(&db, &["kept"], 2000);
    assert!(db.check().is_clean());
}

#[test]
fn snapshots_see_every_keyspace_at_one_moment() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let a = db.keyspace("a", KeyspaceOptions::new()).unwrap();
    let b = db.keyspace("b", KeyspaceOptions::new()).unwrap();
    let mut batch = WriteBatch::new();
    batch.put_in(&a, "balance", "10").put_in(&b, "balance", "0");
    db.write(batch).unwrap();
    let snapshot = db.snapshot();
    let mut transfer = WriteBatch::new();
    transfer
        .put_in(&a, "balance", "5")
        .put_in(&b, "balance", "5");
    db.write(transfer).unwrap();
    fill(&db, &["a", "b"], 1500); // flushes and compactions keep what the snapshot sees
    let at = |ks| snapshot.keyspace(ks).unwrap().get("balance").unwrap();
    assert_eq!(
        (at(&a), at(&b)),
        (Some(b"10".to_vec()), Some(b"0".to_vec()))
    );
    assert_eq!(a.get("balance").unwrap(), Some(b"5".to_vec()));
    assert_eq!(
        snapshot.keyspace(&b).unwrap().range::<&str, _>(..).count(),
        1
    );
}

/// A snapshot does not read a keyspace made after it, even one under the name of a keyspace
/// it saw and that was dropped since: the new one's emptiness is not what the snapshot saw.
/// The dropped one's views fail too (its data went with it); keyspaces it saw still read.
#[test]
fn a_snapshot_refuses_keyspaces_made_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    let kept = db.keyspace("kept", KeyspaceOptions::new()).unwrap();
    let users = db.keyspace("users", KeyspaceOptions::new()).unwrap();
    kept.put("k", "kept").unwrap();
    users.put("k", "old").unwrap();
    let snapshot = db.snapshot();
    let old_view = snapshot.keyspace(&users).unwrap();
    assert_eq!(old_view.get("k").unwrap(), Some(b"old".to_vec()));

    db.drop_keyspace("users").unwrap();
    let users_again = db.keyspace("users", KeyspaceOptions::new()).unwrap();
    users_again.put("k", "new").unwrap();
    let later = db.keyspace("later", KeyspaceOptions::new()).unwrap();
    for made_after in [&users_again, &later] {
        match snapshot.keyspace(made_after) {
            Err(Error::NoSuchKeyspace { name }) => assert!(name.contains("after"), "{name}"),
            other => panic!("{:?}", other.map(|v| v.name().to_string())),
        }
    }
    assert!(matches!(
        old_view.get("k"),
        Err(Error::NoSuchKeyspace { .. })
    ));
    assert!(matches!(
        snapshot.keyspace(&users).and_then(|v| v.get("k")),
        Err(Error::NoSuchKeyspace { .. })
    ));
    let kept_view = snapshot.keyspace(&kept).unwrap();
    assert_eq!(kept_view.get("k").unwrap(), Some(b"kept".to_vec()));
    // A snapshot taken now reads the new keyspace.
    let now = db.snapshot().keyspace(&users_again).unwrap();
    assert_eq!(now.get("k").unwrap(), Some(b"new".to_vec()));
}

#[test]
fn bad_keyspace_requests_get_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let invalid =
        |r: bloomkv::Result<bloomkv::Keyspace>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(db.keyspace("", KeyspaceOptions::new())));
    assert!(invalid(
        db.keyspace(&"n".repeat(256), KeyspaceOptions::new())
    ));
    assert!(invalid(
        db.keyspace("tiny", KeyspaceOptions::new().block_size(1))
    ));
    assert!(invalid(
        db.keyspace("tiny", KeyspaceOptions::new().memtable_size(10))
    ));
    assert!(db.existing_keyspace("tiny").is_none());
    // The default keyspace takes the store's options.
    let sized = KeyspaceOptions::new().block_size(8192);
    assert!(invalid(db.keyspace(DEFAULT_KEYSPACE, sized)));
    let ks = db.keyspace("k", KeyspaceOptions::new()).unwrap();
    let too_long = vec![0u8; bloomkv::entry::MAX_KEY_LEN + 1];
    assert!(matches!(
        ks.put(&too_long, "v"),
        Err(Error::KeyTooLarge { .. })
    ));
    drop(ks);
    db.close().unwrap();

    // A read-only open reads keyspaces and refuses to make or drop one.
    let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert!(db.existing_keyspace("k").is_some());
    assert!(matches!(
        db.keyspace("new", KeyspaceOptions::new()),
        Err(Error::ReadOnly)
    ));
    assert!(matches!(db.drop_keyspace("k"), Err(Error::ReadOnly)));
}

#[test]
fn checkpoints_carry_keyspaces() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy");
    let db = Db::open(dir.path().join("db"), common::small_tree_options()).unwrap();
    fill(&db, &["x", "y"], 500);
    db.checkpoint(&copy).unwrap();
    drop(db);
    let db = Db::open(&copy, common::small_tree_options()).unwrap();
    check_filled(&db, &["x", "y"], 500);
}

#[test]
fn a_model_of_three_keyspaces_agrees_through_flushes_compactions_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["a", "b", "c"];
    let mut model: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = vec![BTreeMap::new(); 3];
    let mut seed = 12345u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..4 {
        let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
        let spaces: Vec<_> = (names.iter())
            .map(|n| db.keyspace(n, KeyspaceOptions::new()).unwrap())
            .collect();
        for _ in 0..3000 {
            let mut batch = WriteBatch::new();
            for _ in 0..1 + next() % 3 {
                let which = (next() % 3) as usize;
                let key = common::key(next() % 400);
                match next() % 4 {
                    0 => {
                        batch.delete_in(&spaces[which], &key);
                        model[which].remove(&key);
                    }
                    _ => {
                        let value = format!("{round}-{}", next()).into_bytes();
                        batch.put_in(&spaces[which], &key, &value);
                        model[which].insert(key, value);
                    }
                }
            }
            db.write(batch).unwrap();
        }
        for (ks, expected) in spaces.iter().zip(&model) {
            let got: BTreeMap<_, _> = pairs(ks.iter()).into_iter().collect();
            assert_eq!(&got, expected, "round {round}, keyspace {}", ks.name());
        }
        if round % 2 == 1 {
            db.compact().unwrap();
        }
    }
}

const CHILD_ENV: &str = "BLOOMKV_KEYSPACE_CRASH_CHILD_DIR";

/// Runs only as the child: batch `i` puts key `i` in each of three keyspaces (and counts it
/// in the default one), every tenth synced, printing `i` once acknowledged, until killed.
#[test]
fn keyspace_crash_child_writer() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = Db::open(&dir, common::small_tree_options()).expect("child open");
    let spaces: Vec<_> = (["one", "two", "three"].iter())
        .map(|n| {
            db.keyspace(n, KeyspaceOptions::new())
                .expect("child keyspace")
        })
        .collect();
    let mut i = spaces[0].iter().count() as u64;
    loop {
        let mut batch = WriteBatch::new();
        for ks in &spaces {
            batch.put_in(ks, common::key(i), common::value(i, 0));
        }
        batch.put("count", (i + 1).to_le_bytes());
        let options = match i % 10 {
            0 => WriteOptions::synced(),
            _ => WriteOptions::default(),
        };
        db.write_opt(batch, &options).expect("child write");
        println!("{i}");
        i += 1;
    }
}

#[test]
fn a_batch_across_three_keyspaces_is_all_or_nothing_across_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let mut durable = 0;
    for (round, millis) in [400u64, 250, 600, 300, 500].into_iter().enumerate() {
        let after = Duration::from_millis(millis);
        let last = common::run_child_and_kill(
            &common::test_name(module_path!(), "keyspace_crash_child_writer"),
            CHILD_ENV,
            dir.path(),
            after,
        );
        // Every tenth batch is synced: the last such that was acknowledged.
        let synced = last.map(|last| last - last % 10);
        let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
        let counts: Vec<u64> = (["one", "two", "three"].iter())
            .map(|n| match db.existing_keyspace(n) {
                Some(ks) => ks.iter().count() as u64,
                None => 0,
            })
            .collect();
        let count = db.get("count").unwrap().map_or(0, |v| {
            u64::from_le_bytes(v.try_into().expect("an 8-byte count"))
        });
        // Every keyspace holds the same prefix of the batches, and the default keyspace's
        // count says how long: no batch is in one keyspace and not another.
        assert!(
            counts.iter().all(|&c| c == count),
            "round {round}: {counts:?} / {count}"
        );
        for name in ["one", "two", "three"] {
            if let Some(ks) = db.existing_keyspace(name) {
                for i in (0..count).step_by(97).chain(count.checked_sub(1)) {
                    assert_eq!(ks.get(common::key(i)).unwrap(), Some(common::value(i, 0)));
                }
            }
        }
        // Every synced batch (and the batches before it) survived.
        if let Some(synced) = synced {
            assert!(
                count > synced,
                "round {round}: synced {synced}, found {count}"
            );
        }
        assert!(count >= durable, "round {round}: {count} after {durable}");
        durable = count;
        db.close().unwrap();
    }
    assert!(durable > 0, "the child never wrote");
}

#[test]
fn a_dropped_keyspaces_unsynced_log_does_not_break_a_later_synced_write() {
    let fs = bloomkv::fs::FaultFs::new();
    let dir = "/dropped";
    let mut options = common::small_tree_options().file_system(std::sync::Arc::new(fs.clone()));
    options.memtable_size = 16 * 1024;
    options.tuning.max_immutable_memtables = 8;
    let db = Db::open(dir, options.clone()).unwrap();
    // Flushes fail, so the frozen memtables stay: logs that hold only the keyspace's writes.
    fs.set_table_appends_fail(true);
    let doomed = db.keyspace("doomed", KeyspaceOptions::new()).unwrap();
    for i in 0..350u32 {
        doomed.put(format!("k{i:05}"), [b'v'; 100]).unwrap();
    }
    assert!(db.stats().keyspaces[1].immutable_memtables >= 2);
    drop(doomed);
    db.drop_keyspace("doomed").unwrap();
    let mut batch = WriteBatch::new();
    batch.put("after", "the drop");
    db.write_opt(batch, &WriteOptions::synced()).unwrap();
    fs.power_loss();
    drop(db);
    fs.set_table_appends_fail(false);
    let db = Db::open(dir, options.create_if_missing(false)).unwrap();
    assert_eq!(db.get("after").unwrap(), Some(b"the drop".to_vec()));
    assert_eq!(db.keyspace_names(), ["default"]);
}

#[test]
fn a_store_that_never_made_a_keyspace_writes_no_keyspace_field() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    fill_default(&db);
    db.compact().unwrap();
    db.checkpoint(dir.path().join("copy")).unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), common::small_tree_options()).unwrap();
    db.close().unwrap();
    // Every edit of the manifest (and of the checkpoint's) decodes without keyspace fields:
    // an older bloomkv, which knows none of them, reads it.
    for store in [dir.path().to_path_buf(), dir.path().join("copy")] {
        let edits = manifest_edits(&store);
        assert!(!edits.is_empty());
        for edit in edits {
            assert_eq!(edit.next_keyspace, None, "{}", store.display());
            assert!(edit.keyspaces.is_empty() && edit.dropped_keyspaces.is_empty());
            assert!(edit.added.iter().all(|t| t.keyspace == 0));
        }
    }
}

fn fill_default(db: &Db) {
    for i in 0..2000 {
        db.put(common::key(i), common::value(i, 0)).unwrap();
    }
}

/// The edits of the manifest `CURRENT` names in `dir`.
fn manifest_edits(dir: &std::path::Path) -> Vec<bloomkv::manifest::VersionEdit> {
    let fs = bloomkv::fs::OsFileSystem;
    let number = bloomkv::manifest::read_current(&fs, dir).unwrap().unwrap();
    let path = dir.join(bloomkv::filename::manifest_file_name(number));
    let contents = bloomkv::wal::read_log(&fs, &path, bloomkv::wal::RecoveryMode::Strict).unwrap();
    (contents.records.iter())
        .map(|r| bloomkv::manifest::VersionEdit::decode(r).unwrap())
        .collect()
}
