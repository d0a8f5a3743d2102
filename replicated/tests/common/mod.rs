//! Three nodes in one process, made one cluster: what several tests start from.

use std::collections::BTreeMap;
use std::path::Path;

use bloomkv_replicated::client::Client;
use bloomkv_replicated::server::{Node, NodeOptions};

/// Nodes 1 to 3 on loopback, under `root`, each with the options `configure` sets.
pub async fn three_nodes(root: &Path, configure: impl Fn(&mut NodeOptions)) -> Vec<Node> {
    let mut nodes = Vec::new();
    for id in 1..=3u64 {
        let mut options = NodeOptions::new(id, "127.0.0.1:0", root.join(format!("n{id}")));
        configure(&mut options);
        nodes.push(Node::start(options).await.expect("the node starts"));
    }
    nodes
}

/// The nodes' addresses, in id order.
pub fn addrs(nodes: &[Node]) -> Vec<String> {
    nodes.iter().map(|n| n.addr.clone()).collect()
}

/// Makes `nodes` (ids 1 up) one cluster, asking the first through `admin`.
pub async fn init(nodes: &[Node], admin: &mut Client) {
    let members: BTreeMap<u64, String> = (1..).zip(addrs(nodes)).collect();
    admin
        .init(&nodes[0].addr, members)
        .await
        .expect("the cluster initializes");
}
