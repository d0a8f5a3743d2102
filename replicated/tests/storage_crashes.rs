//! The stores across crashes at the awkward moments: a snapshot saved but not yet switched
//! to, a purge asked for before the state machine holds the entries durably, a failed read
//! of the state machine's `ACTIVE`.

use bloomkv_replicated::log_store::DurableIndex;
use bloomkv_replicated::{Blob, LogStore, NodeId, Request, StateMachine, TypeConfig};
use openraft::storage::{
    RaftLogReader, RaftLogStorage, RaftLogStorageExt, RaftStateMachine, Snapshot,
};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftSnapshotBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn log_id(index: u64) -> LogId<NodeId> {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

fn put(index: u64, key: &str, value: &str) -> Entry<TypeConfig> {
    Entry {
        log_id: log_id(index),
        payload: EntryPayload::Normal(Request::Put {
            key: Blob::from(key),
            value: Blob::from(value),
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

/// The bytes of a snapshot's data file.
async fn bytes_of(snapshot: &mut Snapshot<TypeConfig>) -> Vec<u8> {
    let mut bytes = Vec::new();
    snapshot.snapshot.read_to_end(&mut bytes).await.unwrap();
    bytes
}

/// Delivers `bytes` to `sm` as Raft does: into the file it began receiving into, in chunks
/// of 7 bytes, then installed.
async fn deliver(
    sm: &mut StateMachine,
    meta: &openraft::SnapshotMeta<NodeId, openraft::BasicNode>,
    bytes: &[u8],
) -> Result<(), openraft::StorageError<NodeId>> {
    let mut receiving = sm.begin_receiving_snapshot().await.unwrap();
    for chunk in bytes.chunks(7) {
        receiving.write_all(chunk).await.unwrap();
    }
    receiving.flush().await.unwrap();
    sm.install_snapshot(meta, receiving).await
}

/// Copies the snapshot saved under `from` (its meta and its data file) to `to`.
fn copy_saved_snapshot(from: &std::path::Path, to: &std::path::Path) {
    let meta = std::fs::read(from.join("snapshot.meta")).unwrap();
    let saved: serde_json::Value = serde_json::from_slice(&meta).unwrap();
    let data = saved["data"].as_str().unwrap();
    std::fs::copy(from.join(data), to.join(data)).unwrap();
    std::fs::write(to.join("snapshot.meta"), meta).unwrap();
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
    let mut snapshot = snapshot_of(&mut leader).await;
    assert_eq!(snapshot.meta.last_log_id, Some(log_id(3)));
    let bytes = bytes_of(&mut snapshot).await;

    // A follower installs it, then applies more.
    let mut follower = StateMachine::open(dir.path().join("follower")).unwrap();
    deliver(&mut follower, &snapshot.meta, &bytes)
        .await
        .unwrap();
    let reader = follower.reader();
    assert_eq!(reader.get("a").unwrap().as_deref(), Some("3".as_bytes()));
    assert_eq!(reader.applied(), Some(log_id(3)));
    follower.apply([put(4, "c", "4")]).await.unwrap();
    drop((follower, reader));
    // Reopened: the live store, not the saved snapshot (which is older).
    let follower = StateMachine::open(dir.path().join("follower")).unwrap();
    assert_eq!(follower.reader().applied(), Some(log_id(4)));
    assert_eq!(
        follower.reader().get("c").unwrap().as_deref(),
        Some("4".as_bytes())
    );

    // A node that crashed after saving the snapshot, before switching to it: its live store
    // is empty, the saved snapshot newer. Copying the saved files stands for that state.
    let crashed = dir.path().join("crashed");
    std::fs::create_dir_all(&crashed).unwrap();
    copy_saved_snapshot(&dir.path().join("leader"), &crashed);
    let mut reopened = StateMachine::open(&crashed).unwrap();
    assert_eq!(
        reopened.reader().get("a").unwrap().as_deref(),
        Some("3".as_bytes())
    );
    assert_eq!(
        reopened.reader().get("b").unwrap().as_deref(),
        Some("2".as_bytes())
    );
    let (applied, _) = reopened.applied_state().await.unwrap();
    assert_eq!(applied, Some(log_id(3)));
}

#[tokio::test]
async fn a_damaged_or_torn_snapshot_is_refused_and_the_live_store_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = StateMachine::open(dir.path().join("leader")).unwrap();
    leader.apply([put(1, "a", "1")]).await.unwrap();
    let mut snapshot = snapshot_of(&mut leader).await;
    let bytes = bytes_of(&mut snapshot).await;
    let root = dir.path().join("follower");
    let mut follower = StateMachine::open(&root).unwrap();
    follower.apply([put(1, "mine", "kept")]).await.unwrap();
    let mut damaged = bytes.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x40;
    let torn = &bytes[..bytes.len() - 3];
    for refused in [&damaged[..], torn] {
        assert!(deliver(&mut follower, &snapshot.meta, refused)
            .await
            .is_err());
        assert_eq!(
            follower.reader().get("mine").unwrap().as_deref(),
            Some("kept".as_bytes())
        );
        assert_eq!(follower.reader().get("a").unwrap(), None);
        assert!(follower.get_current_snapshot().await.unwrap().is_none());
    }
    // Only the live generation is left: no half-unpacked one.
    let generations = std::fs::read_dir(&root)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir())
        .count();
    assert_eq!(generations, 1);
    // The whole transfer, begun again, installs.
    deliver(&mut follower, &snapshot.meta, &bytes)
        .await
        .unwrap();
    assert_eq!(
        follower.reader().get("a").unwrap().as_deref(),
        Some("1".as_bytes())
    );
    let mut saved = follower.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(bytes_of(&mut saved).await, bytes);
}

#[tokio::test]
async fn a_snapshot_saved_in_one_file_by_an_earlier_version_is_converted() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = StateMachine::open(dir.path().join("leader")).unwrap();
    leader
        .apply([put(1, "a", "1"), put(2, "b", "2")])
        .await
        .unwrap();
    let mut snapshot = snapshot_of(&mut leader).await;
    let bytes = bytes_of(&mut snapshot).await;
    // The earlier layout: meta length, meta JSON, archive, in `snapshot`.
    let meta = serde_json::to_vec(&snapshot.meta).unwrap();
    let mut single = (meta.len() as u32).to_be_bytes().to_vec();
    single.extend_from_slice(&meta);
    single.extend_from_slice(&bytes);
    let old = dir.path().join("old");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("snapshot"), single).unwrap();

    let mut reopened = StateMachine::open(&old).unwrap();
    assert!(!old.join("snapshot").exists());
    assert_eq!(
        reopened.reader().get("b").unwrap().as_deref(),
        Some("2".as_bytes())
    );
    let mut saved = reopened.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(saved.meta, snapshot.meta);
    assert_eq!(bytes_of(&mut saved).await, bytes);
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
