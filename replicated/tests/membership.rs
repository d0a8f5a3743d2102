//! Membership changes on in-process nodes: a learner joins (catching up by snapshot), is made
//! a voter, and a voter leaves; writes go on throughout.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use bloomkv_replicated::client::Client;
use bloomkv_replicated::server::{Node, NodeOptions};

async fn start(id: u64, root: &std::path::Path) -> Node {
    let mut options = NodeOptions::new(id, "127.0.0.1:0", root.join(format!("n{id}")));
    options.snapshot_every = 100;
    // Snapshots of a few tens of KiB go in many chunks, as large ones do.
    options.snapshot_chunk_bytes = 4096;
    Node::start(options).await.expect("the node starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_joins_becomes_a_voter_and_a_voter_leaves() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start(id, root.path()).await);
    }
    let members: BTreeMap<u64, String> = (1..=3u64)
        .zip(nodes.iter().map(|n| n.addr.clone()))
        .collect();
    let mut client = Client::new(members.values().cloned().collect::<Vec<_>>());
    client.init(&nodes[0].addr, members).await.unwrap();
    for i in 0..300 {
        client
            .put(&format!("k{i:04}"), &format!("v{i}"))
            .await
            .unwrap();
    }

    // Node 4 joins as a learner. With the log below the snapshots purged, it can only catch
    // up from a snapshot.
    let fourth = start(4, root.path()).await;
    client.add_learner(4, &fourth.addr).await.unwrap();
    wait_until_applied(&fourth, 300).await;
    let metrics = fourth.raft.metrics().borrow().clone();
    assert!(
        metrics.snapshot.is_some_and(|s| s.index >= 200),
        "{metrics:?}"
    );
    assert_eq!(
        fourth.local_get("k0000").unwrap().as_deref(),
        Some("v0".as_bytes())
    );

    // Node 4 becomes a voter and node 1 leaves.
    let voters: BTreeSet<u64> = [2, 3, 4].into();
    client.change_membership(voters.clone()).await.unwrap();
    let mut client = Client::new([
        fourth.addr.clone(),
        nodes[1].addr.clone(),
        nodes[2].addr.clone(),
    ]);
    for i in 300..400 {
        client
            .put(&format!("k{i:04}"), &format!("v{i}"))
            .await
            .unwrap();
    }
    let status = client.status(&fourth.addr).await.unwrap();
    assert_eq!(
        status.voters.iter().copied().collect::<BTreeSet<u64>>(),
        voters
    );
    assert_eq!(
        client.get("k0399").await.unwrap().as_deref(),
        Some("v399".as_bytes())
    );

    // The node that left is shut down; the three voters go on, and each applies every write.
    nodes.remove(0).shutdown().await;
    client.put("after", "node 1 left").await.unwrap();
    // The write is committed on a quorum, not yet in every log: the highest last index among
    // the nodes is at least its index (one node's own may still lag behind it).
    let mut last = 0;
    for node in nodes.iter().chain([&fourth]) {
        let status = client.status(&node.addr).await.unwrap();
        last = last.max(status.last_log_index.unwrap_or(0));
    }
    for node in nodes.iter().chain([&fourth]) {
        wait_until_applied(node, last).await;
        assert_eq!(
            node.local_get("after").unwrap().as_deref(),
            Some("node 1 left".as_bytes())
        );
        assert_eq!(
            node.local_get("k0150").unwrap().as_deref(),
            Some("v150".as_bytes())
        );
    }
    for node in nodes.into_iter().chain([fourth]) {
        node.shutdown().await;
    }
}

/// Waits (up to 20 s) until `node` has applied the log up to `index`.
async fn wait_until_applied(node: &Node, index: u64) {
    let started = Instant::now();
    while node
        .raft
        .metrics()
        .borrow()
        .last_applied
        .is_none_or(|a| a.index < index)
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "node did not apply up to {index}: {:?}",
            node.raft.metrics().borrow()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
