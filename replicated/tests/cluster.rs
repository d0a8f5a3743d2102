//! Three `bloomkv-node` processes on loopback: acknowledged writes survive SIGKILL of the
//! leader, a new leader serves them, and a node that was down catches up by snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bloomkv_replicated::client::Client;
use bloomkv_replicated::client::NodeStatus;

/// A node process; killed (SIGKILL) when dropped.
struct NodeProcess {
    id: u64,
    addr: String,
    child: Child,
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start(id: u64, addr: &str, root: &Path) -> NodeProcess {
    let child = Command::new(env!("CARGO_BIN_EXE_bloomkv-node"))
        .args(["serve", "--id", &id.to_string(), "--addr", addr, "--dir"])
        .arg(root.join(format!("node{id}")))
        .args(["--snapshot-every", "100"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the node binary starts");
    NodeProcess {
        id,
        addr: addr.to_string(),
        child,
    }
}

/// Polls `probe` until it returns `Some`, or fails after `limit`.
async fn wait_for<T>(what: &str, limit: Duration, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        assert!(started.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn status(addr: &str) -> Option<NodeStatus> {
    Client::new([addr]).status(addr).await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_survive_the_leader_killed_and_a_lagging_node_catches_up_by_snapshot() {
    let root = tempfile::tempdir().unwrap();
    let addrs: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let mut nodes: Vec<Option<NodeProcess>> = (1..=3u64)
        .map(|id| Some(start(id, &addrs[id as usize - 1], root.path())))
        .collect();
    let members: BTreeMap<u64, String> = (1..=3u64).zip(addrs.iter().cloned()).collect();
    let mut client = Client::new(addrs.clone());
    wait_for("node 1 to listen", Duration::from_secs(20), async || {
        client.init(&addrs[0], members.clone()).await.ok()
    })
    .await;

    // Acknowledged writes, then the leader killed.
    for i in 0..150 {
        client
            .put(&format!("k{i:04}"), &format!("v{i}"))
            .await
            .unwrap();
    }
    let leader = wait_for("a leader", Duration::from_secs(20), async || {
        status(&addrs[0]).await.and_then(|s| s.leader)
    })
    .await;
    drop(nodes[leader as usize - 1].take());

    // A new leader, among the two left, serves every acknowledged write.
    let survivors: Vec<String> = (1..=3u64)
        .filter(|&id| id != leader)
        .map(|id| addrs[id as usize - 1].clone())
        .collect();
    let mut client = Client::new(survivors.clone());
    for i in 0..150 {
        assert_eq!(
            client.get(&format!("k{i:04}")).await.unwrap(),
            Some(format!("v{i}").into_bytes()),
            "k{i:04} after the leader was killed"
        );
    }
    let new_leader = wait_for("a new leader", Duration::from_secs(20), async || {
        status(&survivors[0])
            .await
            .and_then(|s| s.leader)
            .filter(|&l| l != leader)
    })
    .await;
    assert_ne!(new_leader, leader);

    // More writes while the old leader is down: past several snapshots, with the log below
    // them purged, so the old leader can only catch up from a snapshot.
    for i in 150..500 {
        client
            .put(&format!("k{i:04}"), &format!("v{i}"))
            .await
            .unwrap();
    }
    client.delete("k0003").await.unwrap();
    let leader_status = wait_for(
        "the leader to purge its log",
        Duration::from_secs(20),
        async || {
            let addr = &addrs[new_leader as usize - 1];
            status(addr)
                .await
                .filter(|s| s.purged_index.is_some_and(|p| p > 200))
        },
    )
    .await;
    assert!(leader_status.snapshot_index.unwrap() > 200);

    // The old leader comes back on its own directory and catches up.
    let restarted = start(leader, &addrs[leader as usize - 1], root.path());
    let target = leader_status.last_log_index.unwrap();
    let caught_up = wait_for(
        "the restarted node to catch up",
        Duration::from_secs(30),
        async || {
            status(&restarted.addr)
                .await
                .filter(|s| s.last_applied_index.is_some_and(|a| a >= target))
        },
    )
    .await;
    // It holds a snapshot above what it had applied before it was killed.
    assert!(caught_up.snapshot_index.unwrap() > 200, "{caught_up:?}");
    for i in [0u64, 149, 150, 499] {
        assert_eq!(
            client
                .stale_get(&restarted.addr, &format!("k{i:04}"))
                .await
                .unwrap(),
            Some(format!("v{i}").into_bytes()),
            "k{i:04} on the restarted node"
        );
    }
    assert_eq!(
        client.stale_get(&restarted.addr, "k0003").await.unwrap(),
        None
    );
    let voters: BTreeSet<u64> = caught_up.voters.iter().copied().collect();
    assert_eq!(voters, (1..=3).collect());
    assert_eq!(restarted.id, leader);
}
