//! Linearizable reads on in-process nodes: concurrent reads share the leader's confirmations,
//! each still sees every write acknowledged before it began, and a node that does not lead
//! refuses to confirm.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bloomkv_replicated::client::Client;
use bloomkv_replicated::read_index::ReadIndex;
use bloomkv_replicated::server::Node;

async fn cluster(root: &std::path::Path) -> (Vec<Node>, Vec<String>) {
    let nodes = common::three_nodes(root, |_| {}).await;
    let addrs = common::addrs(&nodes);
    common::init(&nodes, &mut Client::new(addrs.clone())).await;
    (nodes, addrs)
}

/// The index in `nodes` of the leader, once every node knows it.
async fn leader_of(nodes: &[Node]) -> usize {
    for node in nodes {
        (node.raft.wait(Some(Duration::from_secs(10))))
            .metrics(|m| m.current_leader.is_some(), "a known leader")
            .await
            .expect("a leader within 10 s");
    }
    let leader = nodes[0].raft.current_leader().await.expect("a leader");
    leader as usize - 1
}

/// One writer counts up on one key; readers note the last count acknowledged before each
/// read and must read at least that. Reads run concurrently, so they share confirmations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reads_share_confirmations_and_see_every_acknowledged_write() {
    let root = tempfile::tempdir().unwrap();
    let (nodes, addrs) = cluster(root.path()).await;
    let mut writer = Client::new(addrs.clone());
    writer.put("counter", "0").await.unwrap();
    let acknowledged = Arc::new(AtomicU64::new(0));
    let leader = leader_of(&nodes).await;
    let before = nodes[leader].status();

    let writing = {
        let acknowledged = Arc::clone(&acknowledged);
        tokio::spawn(async move {
            for n in 1..=200u64 {
                writer.put("counter", &n.to_string()).await.unwrap();
                acknowledged.store(n, Ordering::SeqCst);
            }
        })
    };
    let mut readers = Vec::new();
    for _ in 0..8 {
        let (addrs, acknowledged) = (addrs.clone(), Arc::clone(&acknowledged));
        readers.push(tokio::spawn(async move {
            let mut client = Client::new(addrs);
            let mut reads = 0u64;
            while acknowledged.load(Ordering::SeqCst) < 200 {
                let floor = acknowledged.load(Ordering::SeqCst);
                let read = (client.get("counter").await.unwrap()).expect("written first");
                let read: u64 = String::from_utf8(read).unwrap().parse().unwrap();
                assert!(read >= floor, "read {read} after {floor} was acknowledged");
                reads += 1;
            }
            reads
        }));
    }
    writing.await.unwrap();
    let mut reads = 0;
    for reader in readers {
        reads += reader.await.unwrap();
    }

    let after = nodes[leader].status();
    let confirmed = after.reads_confirmed - before.reads_confirmed;
    let rounds = after.read_confirmations - before.read_confirmations;
    assert_eq!(confirmed, reads, "every read waited for a confirmation");
    assert!(reads >= 200, "{reads} reads");
    assert!(
        rounds < confirmed,
        "{rounds} confirmations for {confirmed} concurrent reads"
    );
    for node in nodes {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_refuses_to_confirm_and_names_the_leader() {
    let root = tempfile::tempdir().unwrap();
    let (nodes, _) = cluster(root.path()).await;
    let leader = leader_of(&nodes).await;
    let follower = (leader + 1) % nodes.len();
    let (index, task) = ReadIndex::start(nodes[follower].raft.clone());
    let refused = index.confirm().await.expect_err("a follower does not lead");
    let forward = refused
        .forward_to_leader::<openraft::BasicNode>()
        .expect("a forward to the leader");
    assert_eq!(forward.leader_id, Some(leader as u64 + 1));
    assert_eq!(index.counts(), (1, 1));

    // Once the confirming task is gone, a read is refused, not left waiting.
    task.abort();
    let _ = task.await;
    assert!(index.confirm().await.is_err());
    for node in nodes {
        node.shutdown().await;
    }
}
