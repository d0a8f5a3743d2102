//! The stores across crashes at the awkward moments: a snapshot saved but not yet switched
//! to, a purge asked for before the state machine holds the entries durably, a failed read
//! of the state machine's `ACTIVE`.

use bloomkv_replicated::log_store::DurableIndex;
use bloomkv_replicated::{LogStore, NodeId, Request, StateMachine, TypeConfig};
use openraft::storage::{
    RaftLogReader, RaftLogStorage, RaftLogStorageExt, RaftStateMachine, Snapshot,
};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftSnapshotBuilder};

fn log_id(index: u64) -> LogId<NodeId> {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

fn put(index: u64, key: &str, value: &str) -> Entry<TypeConfig> {
    Entry {
        log_id: log_id(index),
        payload: EntryPayload::Normal(Request::Put {
            key: key.to_string(),
            value: value.to_string(),
        }),
    }
}

async fn snapshot_of(sm: &mut StateMachine) -> Snapshot<TypeConfig> {
    sm.get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_snapshot_saved_before_a_crash_is_installed_on_opening() {
    let dir = tempfile::tempdir().unwrap();
    // The leader's state machine builds a snapshot at index 3.
    let mut leader = StateMachine::open(dir.path().join("leader")).unwrap();
    leader
        .apply([put(1, "a", "1"), put(2, "b", "2"), put(3, "a", "3")])
        .await
        .unwrap();
    let snapshot = snapshot_of(&mut leader).await;
    assert_eq!(snapshot.meta.last_log_id, Some(log_id(3)));

    // A follower installs it, then applies more.
    let mut follower = StateMachine::open(dir.path().join("follower")).unwrap();
    follower
        .install_snapshot(&snapshot.meta, snapshot.snapshot.clone())
        .await
        .unwrap();
    let reader = follower.reader();
    assert_eq!(reader.get("a").unwrap().as_deref(), Some("3"));
    assert_eq!(reader.applied(), Some(log_id(3)));
    follower.apply([put(4, "c", "4")]).await.unwrap();
    drop((follower, reader));
    // Reopened: the live store, not the saved snapshot (which is older).
    let follower = StateMachine::open(dir.path().join("follower")).unwrap();
    assert_eq!(follower.reader().applied(), Some(log_id(4)));
    assert_eq!(follower.reader().get("c").unwrap().as_deref(), Some("4"));

    // A node that crashed after saving the snapshot, before switching to it: its live store
    // is empty, the saved snapshot newer. Copying the saved file stands for that state.
    let crashed = dir.path().join("crashed");
    std::fs::create_dir_all(&crashed).unwrap();
    std::fs::copy(
        dir.path().join("leader").join("snapshot"),
        crashed.join("snapshot"),
    )
    .unwrap();
    let mut reopened = StateMachine::open(&crashed).unwrap();
    assert_eq!(reopened.reader().get("a").unwrap().as_deref(), Some("3"));
    assert_eq!(reopened.reader().get("b").unwrap().as_deref(), Some("2"));
    let (applied, _) = reopened.applied_state().await.unwrap();
    assert_eq!(applied, Some(log_id(3)));
}

#[tokio::test]
async fn a_damaged_snapshot_is_refused_and_the_live_store_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = StateMachine::open(dir.path().join("leader")).unwrap();
    leader.apply([put(1, "a", "1")]).await.unwrap();
    let snapshot = snapshot_of(&mut leader).await;
    let mut follower = StateMachine::open(dir.path().join("follower")).unwrap();
    follower.apply([put(1, "mine", "kept")]).await.unwrap();
    let mut bytes = snapshot.snapshot.get_ref().clone();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    let damaged = Box::new(std::io::Cursor::new(bytes));
    assert!(follower
        .install_snapshot(&snapshot.meta, damaged)
        .await
        .is_err());
    assert_eq!(
        follower.reader().get("mine").unwrap().as_deref(),
        Some("kept")
    );
    assert!(follower.get_current_snapshot().await.unwrap().is_none());
}

#[tokio::test]
async fn a_purge_waits_until_the_state_machine_holds_the_entries_durably() {
    let dir = tempfile::tempdir().unwrap();
    let durable = DurableIndex::new();
    let mut log = LogStore::open_behind(dir.path().join("log"), durable.clone()).unwrap();
    log.blocking_append((1..=10).map(|i| put(i, "k", "v")))
        .await
        .unwrap();
    durable.advance(4);
    log.purge(log_id(8)).await.unwrap();
    // Nothing purged yet: the state machine holds only up to 4 durably.
    assert_eq!(log.try_get_log_entries(1..=10).await.unwrap().len(), 10);
    assert_eq!(log.get_log_state().await.unwrap().last_purged_log_id, None);
    durable.advance(8);
    log.blocking_append([put(11, "k", "v")]).await.unwrap();
    let left: Vec<u64> = log
        .try_get_log_entries(0..)
        .await
        .unwrap()
        .iter()
        .map(|e| e.log_id.index)
        .collect();
    assert_eq!(left, vec![9, 10, 11]);
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(8)));
    assert_eq!(state.last_log_id, Some(log_id(11)));
}

#[test]
fn an_unreadable_active_file_is_an_error_not_a_new_node() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sm");
    drop(StateMachine::open(&root).unwrap());
    let live = root.join("0");
    assert!(live.is_dir());
    // ACTIVE made unreadable as a file: a directory in its place.
    std::fs::create_dir(root.join("ACTIVE")).unwrap();
    assert!(StateMachine::open(&root).is_err());
    assert!(live.is_dir(), "the live generation must survive");
}
