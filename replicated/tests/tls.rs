//! A cluster over TLS: nodes replicate over mutual TLS, clients need a certificate the CA
//! signed or a token to write or change the membership, strangers are refused, and a message
//! over the configured size is refused.

mod common;

use std::path::Path;

use bloomkv_replicated::certs;
use bloomkv_replicated::client::{Client, ClientError};
use bloomkv_replicated::proto::raft_client::RaftClient;
use bloomkv_replicated::proto::{LeaderId, Vote, VoteRequest};
use bloomkv_replicated::server::{Node, NodeOptions};
use bloomkv_replicated::transport::{ClientTls, Dial, NodeTls};
use tonic::Code;

const TOKEN: &str = "a-token-of-the-cluster";

fn node_tls(dir: &Path, id: u64) -> NodeTls {
    NodeTls::from_pem_files(
        &dir.join("ca.pem"),
        Some(&dir.join("client-ca.pem")),
        &dir.join(format!("node{id}.pem")),
        &dir.join(format!("node{id}.key")),
    )
    .unwrap()
}

/// TLS that trusts the cluster's node CA and presents `dir`'s client certificate as a
/// node's would.
fn posing_as_node(cluster_dir: &Path, dir: &Path, name: &str) -> NodeTls {
    NodeTls::from_pem_files(
        &cluster_dir.join("ca.pem"),
        None,
        &dir.join(format!("{name}.pem")),
        &dir.join(format!("{name}.key")),
    )
    .unwrap()
}

fn client_tls(ca: &Path, identity: Option<&Path>) -> ClientTls {
    let identity = identity.map(|dir| (dir.join("client.pem"), dir.join("client.key")));
    let identity = identity.as_ref().map(|(c, k)| (c.as_path(), k.as_path()));
    ClientTls::from_pem_files(&ca.join("ca.pem"), identity).unwrap()
}

struct Secured {
    _root: tempfile::TempDir,
    certs: tempfile::TempDir,
    nodes: Vec<Node>,
    addrs: Vec<String>,
}

async fn secured_cluster(max_message: usize) -> Secured {
    let certs = tempfile::tempdir().unwrap();
    certs::generate(certs.path(), &[1, 2, 3]).unwrap();
    let root = tempfile::tempdir().unwrap();
    let nodes = common::three_nodes(root.path(), |options| {
        options.tls = Some(node_tls(certs.path(), options.id));
        options.client_tokens = vec![TOKEN.to_string()];
        options.max_message_bytes = max_message;
        options.snapshot_chunk_bytes = 1024;
    })
    .await;
    let addrs = common::addrs(&nodes);
    let mut admin = Client::new(addrs.clone());
    admin.tls = Some(client_tls(certs.path(), Some(certs.path())));
    common::init(&nodes, &mut admin).await;
    Secured {
        _root: root,
        certs,
        nodes,
        addrs,
    }
}

fn client(cluster: &Secured, tls: Option<ClientTls>, token: Option<&str>) -> Client {
    let mut client = Client::new(cluster.addrs.clone());
    client.tls = tls;
    client.token = token.map(str::to_string);
    client.tries = 3;
    client.timeout = std::time::Duration::from_secs(3);
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_need_a_certificate_or_a_token_and_strangers_are_refused() {
    let cluster = secured_cluster(1 << 20).await;
    let dir = cluster.certs.path();

    // A client certificate: writes (replicated over the nodes' mutual TLS) and reads.
    let mut certified = client(&cluster, Some(client_tls(dir, Some(dir))), None);
    certified.put("k", "by certificate").await.unwrap();
    assert_eq!(
        certified.get("k").await.unwrap().as_deref(),
        Some("by certificate".as_bytes())
    );

    // A token over TLS: writes.
    let mut with_token = client(&cluster, Some(client_tls(dir, None)), Some(TOKEN));
    with_token.put("k", "by token").await.unwrap();

    // Neither: reads, but no write and no membership change.
    let mut reader = client(&cluster, Some(client_tls(dir, None)), None);
    assert_eq!(
        reader.get("k").await.unwrap().as_deref(),
        Some("by token".as_bytes())
    );
    assert!(matches!(
        reader.put("k", "anonymous").await,
        Err(ClientError::Unauthorized(_))
    ));
    assert!(matches!(
        reader.add_learner(9, "127.0.0.1:1").await,
        Err(ClientError::Unauthorized(_))
    ));

    // A wrong token is refused.
    let mut wrong = client(&cluster, Some(client_tls(dir, None)), Some("guess"));
    assert!(matches!(
        wrong.put("k", "guessed").await,
        Err(ClientError::Unauthorized(_))
    ));

    // Without TLS, or trusting another CA, nothing gets through.
    let mut plain = client(&cluster, None, Some(TOKEN));
    assert!(plain.get("k").await.is_err());
    let strangers = tempfile::tempdir().unwrap();
    certs::generate(strangers.path(), &[1]).unwrap();
    let mut stranger = client(
        &cluster,
        Some(client_tls(strangers.path(), Some(strangers.path()))),
        None,
    );
    assert!(stranger.get("k").await.is_err());
    assert_eq!(
        certified.get("k").await.unwrap().as_deref(),
        Some("by token".as_bytes())
    );

    for node in cluster.nodes {
        node.shutdown().await;
    }
}

/// Asks the node at `addr` for a vote in `term` as a peer would, over TLS made by `tls`:
/// the answer's code (`Ok` for an answer).
async fn vote_answered(tls: tokio_rustls::TlsConnector, addr: &str, term: u64) -> Code {
    let dial = Dial {
        source: None,
        tls: Some(tls),
        timeout: std::time::Duration::from_secs(3),
    };
    let mut raft = RaftClient::new(dial.channel(addr).unwrap());
    let vote = VoteRequest {
        vote: Some(Vote {
            leader_id: Some(LeaderId { term, node_id: 7 }),
            committed: false,
        }),
        last_log_id: None,
    };
    match raft.vote(vote).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_the_node_cas_certificate_gets_no_answer_to_raft_rpcs() {
    let cluster = secured_cluster(1 << 20).await;
    let dir = cluster.certs.path();
    let addr = &cluster.addrs[1];

    // A node of the cluster is answered (a vote for an old term, which changes nothing).
    let node = node_tls(dir, 1).connector();
    assert_eq!(vote_answered(node, addr, 0).await, Code::Ok);

    // TLS without a certificate (a client's connection) is not.
    let anonymous = client_tls(dir, None).connector();
    assert_eq!(
        vote_answered(anonymous, addr, 99).await,
        Code::PermissionDenied
    );

    // Nor is a client's certificate, though the node takes it for writes: the client CA
    // signed it, not the node CA.
    let client_as_node = posing_as_node(dir, dir, "client").connector();
    assert_eq!(
        vote_answered(client_as_node, addr, 99).await,
        Code::PermissionDenied
    );

    // Nor a certificate of another CA, presented to a node it trusts: no connection.
    let strangers = tempfile::tempdir().unwrap();
    certs::generate(strangers.path(), &[1]).unwrap();
    let rogue = posing_as_node(dir, strangers.path(), "node1").connector();
    assert_ne!(vote_answered(rogue, addr, 99).await, Code::Ok);
    // The cluster's term did not move for the strangers' votes.
    assert!(cluster.nodes[1].raft.metrics().borrow().current_term < 99);

    for node in cluster.nodes {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_over_the_configured_size_is_refused_and_the_node_serves_on() {
    let cluster = secured_cluster(16 << 10).await;
    let dir = cluster.certs.path();
    let mut big = client(&cluster, Some(client_tls(dir, Some(dir))), None);
    // The client's own limit lets it send; the nodes refuse the message on its length.
    big.max_message = 1 << 20;
    big.tries = 1;
    let value = "v".repeat(64 << 10);
    match big.put("big", &value).await {
        Err(ClientError::Failed(why)) => assert!(why.contains("message length too large"), "{why}"),
        other => panic!("a message over the limit was not refused: {other:?}"),
    }
    let mut small = client(&cluster, Some(client_tls(dir, Some(dir))), None);
    small.put("small", "fits").await.unwrap();
    // Tokens without TLS would guard nothing (no peer is authenticated): refused at start.
    let root = tempfile::tempdir().unwrap();
    let mut options = NodeOptions::new(8, "127.0.0.1:0", root.path());
    options.client_tokens = vec![TOKEN.to_string()];
    let refused = Node::start(options).await.err().expect("refused");
    assert!(refused.to_string().contains("need TLS"), "{refused}");
    // A limit too small for the snapshot chunks is refused when the node starts.
    let root = tempfile::tempdir().unwrap();
    let mut options = NodeOptions::new(9, "127.0.0.1:0", root.path());
    options.max_message_bytes = 16 << 10;
    let refused = Node::start(options).await.err().expect("refused");
    assert!(refused.to_string().contains("snapshot chunks"), "{refused}");
    assert_eq!(small.get("big").await.unwrap(), None);
    assert_eq!(
        small.get("small").await.unwrap().as_deref(),
        Some("fits".as_bytes())
    );
    for node in cluster.nodes {
        node.shutdown().await;
    }
}
