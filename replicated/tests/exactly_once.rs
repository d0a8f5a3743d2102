//! Exactly-once writes: a session write sent again (its reply lost) is answered with its first
//! response and applied once, in one run of entries, across runs, after a snapshot, and
//! through a cluster whose replies a proxy drops.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bloomkv_replicated::client::Client;
use bloomkv_replicated::{Blob, NodeId, Request, Response, StateMachine, TypeConfig};
use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftSnapshotBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn log_id(index: u64) -> LogId<NodeId> {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

fn entry(index: u64, request: Request) -> Entry<TypeConfig> {
    Entry {
        log_id: log_id(index),
        payload: EntryPayload::Normal(request),
    }
}

fn session(client: u64, seq: u64, write: Request) -> Request {
    Request::Session {
        client,
        seq,
        write: Box::new(write),
    }
}

fn put(key: &str, value: &str) -> Request {
    Request::Put {
        key: Blob::from(key),
        value: Blob::from(value),
    }
}

fn cas(key: &str, expected: Option<&str>, new: Option<&str>) -> Request {
    Request::Cas {
        key: Blob::from(key),
        expected: expected.map(Blob::from),
        new: new.map(Blob::from),
    }
}

fn swapped(index: u64, swapped: bool, found: Option<&str>) -> Response {
    Response {
        index,
        swapped: Some(swapped),
        found: found.map(Blob::from),
        superseded: false,
    }
}

#[tokio::test]
async fn a_retried_session_write_is_answered_as_first_and_applied_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = StateMachine::open(dir.path()).unwrap();
    let reader = sm.reader();
    // In one run: client 1's put, client 2's put of the same key, client 1's retry.
    let replies = sm
        .apply([
            entry(1, session(1, 1, put("k", "a"))),
            entry(2, session(2, 1, put("k", "b"))),
            entry(3, session(1, 1, put("k", "a"))),
        ])
        .await
        .unwrap();
    assert_eq!(replies[2], replies[0]);
    assert_eq!(replies[2].index, 1);
    assert_eq!(reader.get("k").unwrap().as_deref(), Some("b".as_bytes()));

    // Across runs: a compare-and-swap that swapped, retried after the value moved on, is
    // answered "swapped" and does not swap again.
    let first = sm
        .apply([entry(4, session(1, 2, cas("k", Some("b"), Some("c"))))])
        .await
        .unwrap();
    assert_eq!(first, [swapped(4, true, None)]);
    sm.apply([entry(5, session(2, 2, put("k", "d")))])
        .await
        .unwrap();
    let retried = sm
        .apply([entry(6, session(1, 2, cas("k", Some("b"), Some("c"))))])
        .await
        .unwrap();
    assert_eq!(retried, first);
    assert_eq!(reader.get("k").unwrap().as_deref(), Some("d".as_bytes()));

    // An older write of a client that has moved on: not applied, said to be superseded.
    let stale = sm
        .apply([entry(7, session(1, 1, put("k", "a")))])
        .await
        .unwrap();
    assert!(stale[0].superseded);
    assert_eq!(reader.get("k").unwrap().as_deref(), Some("d".as_bytes()));

    // The sessions are in the store: a reopened state machine still knows them.
    drop(reader);
    drop(sm);
    let mut sm = StateMachine::open(dir.path()).unwrap();
    let again = sm
        .apply([entry(8, session(1, 2, cas("k", Some("b"), Some("c"))))])
        .await
        .unwrap();
    assert_eq!(again, first);
    assert_eq!(
        sm.reader().get("k").unwrap().as_deref(),
        Some("d".as_bytes())
    );
}

#[tokio::test]
async fn compare_and_swap_sees_the_writes_before_it_in_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = StateMachine::open(dir.path()).unwrap();
    let replies = sm
        .apply([
            entry(1, cas("k", None, Some("1"))),
            entry(2, cas("k", None, Some("2"))),
            entry(3, cas("k", Some("1"), Some("3"))),
            entry(4, Request::Delete { key: "k".into() }),
            entry(5, cas("k", Some("3"), None)),
            entry(6, cas("k", None, Some("6"))),
            entry(7, cas("k", Some("6"), None)),
        ])
        .await
        .unwrap();
    assert_eq!(
        replies,
        [
            swapped(1, true, None),
            swapped(2, false, Some("1")),
            swapped(3, true, None),
            Response {
                index: 4,
                ..Response::default()
            },
            swapped(5, false, None),
            swapped(6, true, None),
            swapped(7, true, None),
        ]
    );
    assert_eq!(sm.reader().get("k").unwrap(), None);
}

#[tokio::test]
async fn sessions_travel_in_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = StateMachine::open(dir.path().join("leader")).unwrap();
    let first = leader
        .apply([entry(1, session(9, 1, cas("k", None, Some("x"))))])
        .await
        .unwrap();
    let mut snapshot = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let mut follower = StateMachine::open(dir.path().join("follower")).unwrap();
    let mut receiving = follower.begin_receiving_snapshot().await.unwrap();
    let mut bytes = Vec::new();
    snapshot.snapshot.read_to_end(&mut bytes).await.unwrap();
    receiving.write_all(&bytes).await.unwrap();
    receiving.flush().await.unwrap();
    follower
        .install_snapshot(&snapshot.meta, receiving)
        .await
        .unwrap();
    let retried = follower
        .apply([entry(2, session(9, 1, cas("k", None, Some("x"))))])
        .await
        .unwrap();
    assert_eq!(retried, first);
}

/// A proxy in front of `target` that passes requests on as they come, and replies HTTP/2 frame
/// by frame; but while `drop_replies` is above zero (counting it down), it cuts the connection
/// instead of passing on the frame that would end a reply (a frame with END_STREAM on a
/// stream): the node applied the write, and the client never learns it.
async fn lossy_proxy(target: String, drop_replies: Arc<AtomicUsize>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (target, drop_replies) = (target.clone(), Arc::clone(&drop_replies));
            tokio::spawn(async move {
                let Ok(node) = TcpStream::connect(&target).await else {
                    return;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_node, mut to_node) = node.into_split();
                let requests = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut from_client, &mut to_node).await;
                });
                while let Some(frame) = read_http2_frame(&mut from_node).await {
                    let ends_a_reply = frame_ends_a_stream(&frame);
                    let dropping = ends_a_reply
                        && drop_replies
                            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                            .is_ok();
                    if dropping || to_client.write_all(&frame).await.is_err() {
                        break;
                    }
                }
                requests.abort();
            });
        }
    });
    addr
}

/// One HTTP/2 frame (its 9-byte header and its payload), as it was read.
async fn read_http2_frame(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<Vec<u8>> {
    let mut header = [0u8; 9];
    stream.read_exact(&mut header).await.ok()?;
    let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
    let mut frame = header.to_vec();
    frame.resize(9 + len, 0);
    stream.read_exact(&mut frame[9..]).await.ok()?;
    Some(frame)
}

/// Whether `frame` is a DATA or HEADERS frame with END_STREAM on a stream (not the
/// connection): the last of a reply.
fn frame_ends_a_stream(frame: &[u8]) -> bool {
    let (kind, flags) = (frame[3], frame[4]);
    let stream = u32::from_be_bytes([frame[5] & 0x7f, frame[6], frame[7], frame[8]]);
    (kind == 0 || kind == 1) && flags & 1 == 1 && stream != 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_reply_was_lost_is_sent_again_and_applied_once() {
    let root = tempfile::tempdir().unwrap();
    let nodes = common::three_nodes(root.path(), |_| {}).await;
    let addrs = common::addrs(&nodes);
    let mut direct = Client::new(addrs.clone());
    common::init(&nodes, &mut direct).await;
    direct.put("counter", "0").await.unwrap();
    let leader = nodes[0].raft.current_leader().await.unwrap();
    let leader_addr = nodes[leader as usize - 1].addr.clone();

    // Every write goes through a proxy to the leader that loses the first two replies.
    let drop_replies = Arc::new(AtomicUsize::new(0));
    let proxy = lossy_proxy(leader_addr, Arc::clone(&drop_replies)).await;
    let mut client = Client::new([proxy]);
    for n in 0..20u64 {
        drop_replies.store(2, Ordering::SeqCst);
        let (from, to) = (n.to_string(), (n + 1).to_string());
        let response = client
            .compare_and_swap("counter", Some(from.as_bytes()), Some(to.as_bytes()))
            .await
            .unwrap();
        // Applied a second time, the swap would fail (the counter moved on) and say so.
        assert_eq!(response.swapped, Some(true), "write {n}: {response:?}");
        assert_eq!(
            drop_replies.load(Ordering::SeqCst),
            0,
            "two replies were lost"
        );
    }
    assert_eq!(
        direct.get("counter").await.unwrap().as_deref(),
        Some("20".as_bytes())
    );

    // Two processes on one session: the one behind is told its write was not applied.
    let mut ahead = Client::with_session(addrs.clone(), 0x5e55, 5);
    ahead.put("shared", "ahead").await.unwrap();
    let mut behind = Client::with_session(addrs.clone(), 0x5e55, 0);
    let refused = behind.put("shared", "behind").await;
    assert!(
        matches!(&refused, Err(bloomkv_replicated::client::ClientError::Failed(m)) if m.contains("not applied")),
        "{refused:?}"
    );
    assert_eq!(
        direct.get("shared").await.unwrap().as_deref(),
        Some("ahead".as_bytes())
    );
    for node in nodes {
        node.shutdown().await;
    }
}
