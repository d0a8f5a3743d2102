//! Runs one node: its Raft instance on the two stores, and one TCP port for peers and clients.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::error::RaftError;
use openraft::{BasicNode, Config, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::network::{
    ClientReply, ClientRequest, Consistency, Message, Network, NodeStatus, Reach,
};
use crate::read_index::ReadIndex;
use crate::state_machine::StateReader;
use crate::transport::{token_matches, NodeTls, Peer, Stream};
use crate::wire::{read_frame, write_frame, DEFAULT_MAX_FRAME};
use crate::{LogStore, NodeId, Raft, Request, StateMachine};

/// How a node is run.
#[derive(Clone)]
pub struct NodeOptions {
    pub id: NodeId,
    /// `host:port` to listen on, and by which peers reach this node.
    pub addr: String,
    /// Holds `log/` (the log store) and `sm/` (the state machine).
    pub dir: PathBuf,
    /// Build a snapshot after this many applied entries (and purge the log below it).
    pub snapshot_every: u64,
    /// Bytes of a snapshot each install RPC carries: the memory a transfer holds on either end
    /// is a few of these (and their JSON, about three and a half bytes a byte).
    pub snapshot_chunk_bytes: u64,
    pub heartbeat_ms: u64,
    pub election_timeout_ms: (u64, u64),
    /// The local address connections to peers are made from (none: the system picks).
    pub source_ip: Option<std::net::IpAddr>,
    /// TLS with the cluster's CA and this node's certificate: peers must present
    /// certificates the CA signed, and clients need one, or a token, to write.
    pub tls: Option<NodeTls>,
    /// Tokens that let a client's connection write and change the membership.
    pub client_tokens: Vec<String>,
    /// The longest frame this node sends or takes; a longer one is refused on its length.
    pub max_frame_bytes: u32,
}

impl std::fmt::Debug for NodeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeTls")
    }
}

impl NodeOptions {
    /// Defaults for a node on loopback.
    pub fn new(id: NodeId, addr: impl Into<String>, dir: impl AsRef<Path>) -> NodeOptions {
        NodeOptions {
            id,
            addr: addr.into(),
            dir: dir.as_ref().to_path_buf(),
            snapshot_every: 5_000,
            snapshot_chunk_bytes: 1 << 20,
            heartbeat_ms: 100,
            election_timeout_ms: (400, 800),
            source_ip: None,
            tls: None,
            client_tokens: Vec::new(),
            max_frame_bytes: DEFAULT_MAX_FRAME,
        }
    }
}

/// A running node.
pub struct Node {
    pub raft: Raft,
    pub addr: String,
    reader: StateReader,
    read_index: Arc<ReadIndex>,
    server: JoinHandle<()>,
    confirmer: JoinHandle<()>,
}

/// What a connection's requests are served with.
#[derive(Clone)]
struct Serving {
    raft: Raft,
    reader: StateReader,
    read_index: Arc<ReadIndex>,
    tls: Option<NodeTls>,
    tokens: Arc<Vec<String>>,
    max_frame: u32,
}

impl Node {
    /// Opens the node's stores (recovering them) and starts serving on `options.addr`.
    pub async fn start(options: NodeOptions) -> Result<Node, Box<dyn std::error::Error>> {
        let config = Config {
            cluster_name: "bloomkv".to_string(),
            heartbeat_interval: options.heartbeat_ms,
            election_timeout_min: options.election_timeout_ms.0,
            election_timeout_max: options.election_timeout_ms.1,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(options.snapshot_every),
            snapshot_max_chunk_size: options.snapshot_chunk_bytes,
            // Per chunk. openraft's 200 ms suits chunks into memory; a chunk into a file that
            // is synced every 16 MiB, on a node under a memory limit, takes longer, and a
            // timed-out chunk is sent again.
            install_snapshot_timeout: 10_000,
            // Keep no log the snapshot covers: a follower further behind gets the snapshot.
            max_in_snapshot_log_to_keep: 0,
            ..Config::default()
        }
        .validate()?;
        // A snapshot chunk travels in one frame, as JSON: up to four bytes a byte, and the
        // snapshot's meta.
        let chunk_frame = options.snapshot_chunk_bytes.saturating_mul(4) + (4 << 10);
        if u64::from(options.max_frame_bytes) < chunk_frame {
            return Err(format!(
                "frames of {} bytes cannot carry snapshot chunks of {} (they need {chunk_frame})",
                options.max_frame_bytes, options.snapshot_chunk_bytes
            )
            .into());
        }
        if !options.client_tokens.is_empty() && options.tls.is_none() {
            // Without TLS no peer is authenticated, so anyone could send Raft's RPCs: a token
            // guarding client writes alone would protect nothing.
            return Err("client tokens need TLS (a node CA, and the node's certificate)".into());
        }
        let sm = StateMachine::open(options.dir.join("sm"))?;
        // The log drops entries only once the state machine holds them durably.
        let log = LogStore::open_behind(options.dir.join("log"), sm.durable())?;
        let reader = sm.reader();
        let raft = Raft::new(
            options.id,
            Arc::new(config),
            Network::new(Reach {
                source: options.source_ip,
                tls: options.tls.clone(),
                max_frame: options.max_frame_bytes,
            }),
            log,
            sm,
        )
        .await?;
        let listener = TcpListener::bind(&options.addr).await?;
        let addr = listener.local_addr()?.to_string();
        let (read_index, confirmer) = ReadIndex::start(raft.clone());
        let serving = Serving {
            raft: raft.clone(),
            reader: reader.clone(),
            read_index: Arc::clone(&read_index),
            tls: options.tls.clone(),
            tokens: Arc::new(options.client_tokens.clone()),
            max_frame: options.max_frame_bytes,
        };
        let server = tokio::spawn(serve(listener, serving));
        Ok(Node {
            raft,
            addr,
            reader,
            read_index,
            server,
            confirmer,
        })
    }

    /// What this node's state machine holds for `key` (a stale read).
    pub fn local_get(&self, key: &str) -> Result<Option<String>, bloomkv::Error> {
        self.reader.get(key)
    }

    /// What the node reports to a `Status` request.
    pub fn status(&self) -> NodeStatus {
        status(&self.raft, &self.read_index)
    }

    /// Stops serving and shuts Raft down.
    pub async fn shutdown(self) {
        self.server.abort();
        self.confirmer.abort();
        let _ = self.raft.shutdown().await;
    }
}

async fn serve(listener: TcpListener, serving: Serving) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors, say: wait rather than spin.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let serving = serving.clone();
        tokio::spawn(async move {
            // The handshake runs in the connection's task: a slow peer holds up no other.
            let (stream, peer) = match &serving.tls {
                None => (Stream::Plain(stream), Peer::Anonymous),
                Some(tls) => match tls.accept(stream).await {
                    Ok(accepted) => accepted,
                    // No TLS, or a certificate the CA did not sign.
                    Err(_) => return,
                },
            };
            handle_connection(stream, peer, serving).await;
        });
    }
}

/// What a connection may do: as a node of the cluster, Raft's RPCs; as a client, write and
/// change the membership. Without TLS, anyone may do anything, as on a trusted network
/// (tokens need TLS: `Node::start` refuses them without it).
struct Allowed {
    raft: bool,
    writes: bool,
}

impl Allowed {
    fn at_start(serving: &Serving, peer: Peer) -> Allowed {
        let open = serving.tls.is_none();
        Allowed {
            raft: open || peer == Peer::Node,
            writes: open || peer != Peer::Anonymous,
        }
    }
}

/// Answers the frames of one connection in order until the peer closes it.
async fn handle_connection(mut stream: Stream, peer: Peer, serving: Serving) {
    let raft = &serving.raft;
    let max = serving.max_frame;
    let mut allowed = Allowed::at_start(&serving, peer);
    while let Ok(Some(message)) = read_frame::<_, Message>(&mut stream, max).await {
        let sent = match message {
            // A peer without the CA's certificate gets no answer at all: the connection ends.
            Message::AppendEntries(_) | Message::Vote(_) | Message::InstallSnapshot(_)
                if !allowed.raft =>
            {
                return;
            }
            Message::AppendEntries(rpc) => {
                write_frame(&mut stream, &raft.append_entries(rpc).await, max).await
            }
            Message::Vote(rpc) => write_frame(&mut stream, &raft.vote(rpc).await, max).await,
            Message::InstallSnapshot(rpc) => {
                write_frame(&mut stream, &raft.install_snapshot(rpc).await, max).await
            }
            Message::Token(token) => {
                if !token_matches(&serving.tokens, &token) {
                    // Refused, and the connection ends: one guess a connection.
                    let refused = "the node does not take this token".to_string();
                    let _ =
                        write_frame(&mut stream, &ClientReply::Unauthorized(refused), max).await;
                    return;
                }
                allowed.writes = true;
                write_frame(&mut stream, &ClientReply::Done, max).await
            }
            Message::Client(request) if !allowed.writes && needs_credential(&request) => {
                let reply = ClientReply::Unauthorized(
                    "writes and membership changes need a certificate the cluster's CA signed, \
                     or a token"
                        .to_string(),
                );
                write_frame(&mut stream, &reply, max).await
            }
            Message::Client(request) => {
                let reply = client_request(&serving, request).await;
                write_frame(&mut stream, &reply, max).await
            }
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Whether `request` changes anything: reads and status requests need no credential.
fn needs_credential(request: &ClientRequest) -> bool {
    !matches!(request, ClientRequest::Read { .. } | ClientRequest::Status)
}

/// `NotLeader` when the error says another node leads, else `Failed`.
fn refused<E>(e: RaftError<NodeId, E>) -> ClientReply
where
    E: std::error::Error + openraft::TryAsRef<openraft::error::ForwardToLeader<NodeId, BasicNode>>,
{
    match e.forward_to_leader::<BasicNode>() {
        Some(forward) => ClientReply::NotLeader {
            leader: forward
                .leader_id
                .zip(forward.leader_node.as_ref().map(|n| n.addr.clone())),
        },
        None => ClientReply::Failed(e.to_string()),
    }
}

async fn client_request(serving: &Serving, request: ClientRequest) -> ClientReply {
    let raft = &serving.raft;
    match request {
        ClientRequest::Write(Request::Session { write, .. })
            if matches!(*write, Request::Session { .. }) =>
        {
            ClientReply::Failed("a session write cannot hold another session's".to_string())
        }
        ClientRequest::Write(write) => match raft.client_write(write).await {
            Ok(response) => ClientReply::Written(response.data),
            Err(e) => refused(e),
        },
        ClientRequest::Read { key, consistency } => {
            if consistency == Consistency::Linearizable {
                if let Err(e) = serving.read_index.confirm().await {
                    return refused(e);
                }
            }
            match serving.reader.get(&key) {
                Ok(value) => ClientReply::Value(value),
                Err(e) => ClientReply::Failed(e.to_string()),
            }
        }
        ClientRequest::Init { members } => {
            let nodes: BTreeMap<NodeId, BasicNode> = members
                .into_iter()
                .map(|(id, addr)| (id, BasicNode { addr }))
                .collect();
            match raft.initialize(nodes).await {
                Ok(()) => ClientReply::Done,
                Err(e) => ClientReply::Failed(e.to_string()),
            }
        }
        ClientRequest::AddLearner { id, addr } => {
            // Answered once the membership that adds it is committed, not once the learner
            // has caught up (which can take minutes for a large state machine, past any
            // client's patience): its own status says when it has.
            match raft.add_learner(id, BasicNode { addr }, false).await {
                Ok(_) => ClientReply::Done,
                Err(e) => refused(e),
            }
        }
        ClientRequest::ChangeMembership { voters } => {
            match raft.change_membership(voters, false).await {
                Ok(_) => ClientReply::Done,
                Err(e) => refused(e),
            }
        }
        ClientRequest::Status => ClientReply::Status(status(raft, &serving.read_index)),
    }
}

fn status(raft: &Raft, read_index: &ReadIndex) -> NodeStatus {
    let m = raft.metrics().borrow().clone();
    let (read_confirmations, reads_confirmed) = read_index.counts();
    NodeStatus {
        id: m.id,
        term: m.current_term,
        state: format!("{:?}", m.state),
        leader: m.current_leader,
        last_log_index: m.last_log_index,
        last_applied_index: m.last_applied.map(|l| l.index),
        snapshot_index: m.snapshot.map(|l| l.index),
        purged_index: m.purged.map(|l| l.index),
        voters: m.membership_config.membership().voter_ids().collect(),
        read_confirmations,
        reads_confirmed,
    }
}
