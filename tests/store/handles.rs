//! Owned handles: a store's `Db`, keyspaces, snapshots and transactions are `'static`, live in
//! structs, move into threads and async tasks, and keep the store open until the last goes.

use std::thread;

use bloomkv::{
    Cursor, Db, DbIterator, Error, Keyspace, KeyspaceOptions, KeyspaceView, Options, Snapshot,
    Transaction,
};

fn assert_owned<T: Send + Sync + 'static>() {}

/// An iterator is used by one thread at a time: it moves, and is not shared.
fn assert_movable<T: Send + 'static>() {}

#[test]
fn every_handle_is_send_sync_and_static_and_iterators_move() {
    assert_owned::<Db>();
    assert_owned::<Keyspace>();
    assert_owned::<KeyspaceView>();
    assert_owned::<Snapshot>();
    assert_owned::<Transaction>();
    assert_movable::<DbIterator>();
    assert_movable::<Cursor>();
}

/// What an application keeps: no `Db` of its own in sight, only handles.
struct App {
    users: Keyspace,
    before_import: Snapshot,
}

/// Opens the store, writes, and returns handles only: the `Db` it opened is gone when it
/// returns.
fn open_app(dir: &std::path::Path) -> App {
    let db = Db::open(dir, Options::default()).unwrap();
    let users = db.keyspace("users", KeyspaceOptions::new()).unwrap();
    users.put("ada", "1815").unwrap();
    let before_import = db.snapshot();
    users.put("grace", "1906").unwrap();
    App {
        users,
        before_import,
    }
}

#[test]
fn handles_kept_in_a_struct_read_after_the_scope_that_opened_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let app = open_app(dir.path());
    assert_eq!(app.users.get("grace").unwrap(), Some(b"1906".to_vec()));
    let then = app.before_import.keyspace(&app.users).unwrap();
    assert_eq!(then.get("ada").unwrap(), Some(b"1815".to_vec()));
    assert_eq!(then.get("grace").unwrap(), None, "the snapshot is older");

    // Into threads: each with its own clone, writing and reading.
    let writers: Vec<_> = (0..4u32)
        .map(|t| {
            let users = app.users.clone();
            thread::spawn(move || {
                for i in 0..500u32 {
                    users.put(format!("t{t}-{i:04}"), i.to_le_bytes()).unwrap();
                }
                users.get(format!("t{t}-0499")).unwrap()
            })
        })
        .collect();
    for w in writers {
        assert_eq!(w.join().unwrap(), Some(499u32.to_le_bytes().to_vec()));
    }
    let snapshot = app.before_import.clone();
    let users = app.users.clone();
    let seen = thread::spawn(move || snapshot.keyspace(&users).unwrap().iter().count())
        .join()
        .unwrap();
    assert_eq!(seen, 1, "a snapshot moved into a thread keeps its moment");
    assert_eq!(app.users.iter().count(), 2 + 4 * 500);
}

#[test]
fn handles_move_into_tasks_on_a_multi_threaded_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let app = open_app(dir.path());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..8u32)
        .map(|t| {
            let (users, snapshot) = (app.users.clone(), app.before_import.clone());
            runtime.spawn(async move {
                // Held across an await point, as a request handler would.
                let view = snapshot.keyspace(&users).unwrap();
                tokio::task::yield_now().await;
                users.put(format!("task{t}"), "done").unwrap();
                tokio::task::yield_now().await;
                (
                    view.get("grace").unwrap(),
                    users.get(format!("task{t}")).unwrap(),
                )
            })
        })
        .collect();
    for task in tasks {
        let (old, new) = runtime.block_on(task).unwrap();
        assert_eq!(old, None);
        assert_eq!(new, Some(b"done".to_vec()));
    }
    assert_eq!(app.users.prefix("task").count(), 8);
}

#[test]
fn the_store_stays_open_while_any_handle_lives_and_closes_with_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let app = open_app(dir.path());
    // The Db that opened it is gone, but its handles hold it: a second open is refused.
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    app.users.put("linus", "1969").unwrap();
    let App {
        users,
        before_import,
    } = app;
    drop(users);
    // The snapshot alone still holds the store, and reads through it.
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    assert_eq!(before_import.get("anything").unwrap(), None);
    drop(before_import);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let users = db.existing_keyspace("users").unwrap();
    assert_eq!(users.get("linus").unwrap(), Some(b"1969".to_vec()));
}

#[test]
fn close_of_one_clone_leaves_the_store_to_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let other = db.clone();
    let keyspace = db.keyspace("k", KeyspaceOptions::new()).unwrap();
    db.put("a", "1").unwrap();
    db.close().unwrap();
    // Still open: locked, and its background threads still flush.
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    other.put("b", "2").unwrap();
    other.flush().unwrap();
    assert!(!other.stats().tables.is_empty(), "the flush wrote a table");
    assert_eq!(other.get("a").unwrap(), Some(b"1".to_vec()));
    other.close().unwrap();
    // The keyspace handle still holds it.
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(Error::Locked { .. })
    ));
    keyspace.put("x", "y").unwrap();
    drop(keyspace);
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get("b").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn a_transaction_outlives_the_db_handle_that_began_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put("k", "before").unwrap();
    let mut tx = db.transaction();
    drop(db);
    let tx = thread::spawn(move || {
        assert_eq!(tx.get("k").unwrap(), Some(b"before".to_vec()));
        tx.put("k", "after").unwrap();
        tx
    })
    .join()
    .unwrap();
    tx.commit().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get("k").unwrap(), Some(b"after".to_vec()));
}

/// A keyspace handle of one store, used with another store's transaction or snapshot, is
/// refused: keyspace numbers mean other keyspaces there.
#[test]
fn a_keyspace_of_another_store_is_refused_by_transactions_and_snapshots() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Db::open(dir_a.path(), Options::default()).unwrap();
    let b = Db::open(dir_b.path(), Options::default()).unwrap();
    let ours = b.keyspace("same-number", KeyspaceOptions::new()).unwrap();
    let theirs = a.keyspace("same-number", KeyspaceOptions::new()).unwrap();
    theirs.put("k", "a's").unwrap();
    ours.put("k", "b's").unwrap();

    let mut tx = b.transaction();
    let refused = |r: &bloomkv::Result<_>| matches!(r, Err(Error::NoSuchKeyspace { .. }));
    assert!(refused(&tx.get_in(&theirs, "k").map(|_| ())));
    assert!(refused(&tx.put_in(&theirs, "k", "v")));
    assert!(refused(&tx.delete_in(&theirs, "k")));
    let mut range = tx.range_in::<&[u8], _>(&theirs, ..);
    assert!(matches!(
        range.next(),
        Some(Err(Error::NoSuchKeyspace { .. }))
    ));
    drop(range);
    assert_eq!(tx.get_in(&ours, "k").unwrap(), Some(b"b's".to_vec()));
    tx.commit().unwrap();

    let snapshot = b.snapshot();
    assert!(matches!(
        snapshot.keyspace(&theirs),
        Err(Error::NoSuchKeyspace { .. })
    ));
    let view = snapshot.keyspace(&ours).unwrap();
    assert_eq!(view.get("k").unwrap(), Some(b"b's".to_vec()));
    assert_eq!(
        theirs.get("k").unwrap(),
        Some(b"a's".to_vec()),
        "a's store untouched"
    );
}
