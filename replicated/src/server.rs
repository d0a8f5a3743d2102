//! Runs one node: its Raft instance on the two stores, and one port where gRPC serves peers
//! (service `Raft`) and clients (service `Kv`), over TLS when the cluster uses it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::error::RaftError;
use openraft::{BasicNode, Config, SnapshotPolicy};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

use crate::client::NodeStatus;
use crate::network::{raft_error_status, Network, Reach, DEFAULT_MAX_MESSAGE, ERROR_KIND};
use crate::proto::kv_server::{Kv, KvServer};
use crate::proto::raft_server::RaftServer;
use crate::read_index::ReadIndex;
use crate::state_machine::StateReader;
use crate::transport::{token_matches, NodeTls, Peer, Stream};
use crate::{proto, LogStore, NodeId, Raft, Request, StateMachine};

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
    /// is a few of these.
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
    /// The longest gRPC message this node sends or takes; a longer one is refused on its
    /// length, before it is read.
    pub max_message_bytes: usize,
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
            max_message_bytes: DEFAULT_MAX_MESSAGE,
        }
    }
}

/// A running node.
pub struct Node {
    pub raft: Raft,
    pub addr: String,
    reader: StateReader,
    read_index: Arc<ReadIndex>,
    acceptor: JoinHandle<()>,
    server: JoinHandle<()>,
    stop_serving: oneshot::Sender<()>,
    confirmer: JoinHandle<()>,
}

/// What the node's services answer with.
#[derive(Clone)]
struct Serving {
    raft: Raft,
    reader: StateReader,
    read_index: Arc<ReadIndex>,
    tls: bool,
    tokens: Arc<Vec<String>>,
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
        // A snapshot chunk travels in one message, with the snapshot's meta.
        let chunk_message = options.snapshot_chunk_bytes.saturating_add(8 << 10);
        if (options.max_message_bytes as u64) < chunk_message {
            return Err(format!(
                "messages of {} bytes cannot carry snapshot chunks of {} (they need {chunk_message})",
                options.max_message_bytes, options.snapshot_chunk_bytes
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
                max_message: options.max_message_bytes,
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
            tls: options.tls.is_some(),
            tokens: Arc::new(options.client_tokens.clone()),
        };
        let (accepted, incoming) = mpsc::channel(64);
        let acceptor = tokio::spawn(accept(listener, options.tls.clone(), accepted));
        let (stop_serving, stopped) = oneshot::channel();
        let max = options.max_message_bytes;
        let router = tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
            .add_service(
                KvServer::new(serving.clone())
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            )
            .add_service(
                RaftServer::new(serving)
                    .max_decoding_message_size(max)
                    .max_encoding_message_size(max),
            );
        let server = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::ReceiverStream::new(incoming);
            let _ = router
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(Node {
            raft,
            addr,
            reader,
            read_index,
            acceptor,
            server,
            stop_serving,
            confirmer,
        })
    }

    /// What this node's state machine holds for `key` (a stale read).
    pub fn local_get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>, bloomkv::Error> {
        self.reader.get(key)
    }

    /// What the node reports to a `Status` request.
    pub fn status(&self) -> NodeStatus {
        status(&self.raft, &self.read_index)
    }

    /// Stops serving and shuts Raft down: the port is free again when it returns, and
    /// connections are closed (calls still running are answered with Raft's shutdown).
    pub async fn shutdown(self) {
        self.acceptor.abort();
        // The listener is dropped once the aborted task has ended: the port is free after.
        let _ = self.acceptor.await;
        let _ = self.stop_serving.send(());
        self.confirmer.abort();
        let _ = self.raft.shutdown().await;
        let mut server = self.server;
        if tokio::time::timeout(std::time::Duration::from_secs(2), &mut server)
            .await
            .is_err()
        {
            server.abort();
        }
    }
}

/// How long a connection may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Idle connections are pinged this often (HTTP/2 keepalive), and dropped when a ping goes
/// unanswered for [`KEEPALIVE_TIMEOUT`]: a peer that vanished without closing (a host gone,
/// a cut cable) does not hold its connection, and calls on it, for ever.
pub(crate) const KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);
pub(crate) const KEEPALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Accepts connections and hands them to gRPC once their TLS handshake is done (each in a task
/// of its own: a slow peer holds up no other).
async fn accept(
    listener: TcpListener,
    tls: Option<NodeTls>,
    accepted: mpsc::Sender<std::io::Result<Stream>>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of file descriptors, say: wait rather than spin.
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (tls, accepted) = (tls.clone(), accepted.clone());
        tokio::spawn(async move {
            let stream = match &tls {
                None => Stream::Plain(stream),
                Some(tls) => {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                        Ok(Ok(stream)) => stream,
                        // No TLS, a certificate neither CA signed, or a peer that never finished
                        // its handshake (holding a task and a descriptor for ever, otherwise).
                        Ok(Err(_)) | Err(_) => return,
                    }
                }
            };
            let _ = accepted.send(Ok(stream)).await;
        });
    }
}

/// A status this node gives, of `kind` (`not-leader`, `stopping`, `failed`, `unauthorized`),
/// so that clients tell it from the transport's.
fn node_status(
    code: Code,
    kind: &'static str,
    message: String,
    mut metadata: MetadataMap,
) -> Status {
    metadata.insert(ERROR_KIND, MetadataValue::from_static(kind));
    Status::with_metadata(code, message, metadata)
}

fn failed(message: impl std::fmt::Display) -> Status {
    node_status(
        Code::Aborted,
        "failed",
        message.to_string(),
        MetadataMap::new(),
    )
}

fn unauthorized(message: &str) -> Status {
    node_status(
        Code::Unauthenticated,
        "unauthorized",
        message.to_string(),
        MetadataMap::new(),
    )
}

/// `not-leader`, naming the leader when the error says another node leads; `stopping` when
/// Raft stopped (the node is shutting down: a write may have been committed all the same, so
/// the client must not take it for refused); else `failed`.
fn refused<E>(e: RaftError<NodeId, E>) -> Status
where
    E: std::error::Error + openraft::TryAsRef<openraft::error::ForwardToLeader<NodeId, BasicNode>>,
{
    if let RaftError::Fatal(fatal) = &e {
        let message = format!("the node's Raft stopped: {fatal}");
        return node_status(Code::Unavailable, "stopping", message, MetadataMap::new());
    }
    let Some(forward) = e.forward_to_leader::<BasicNode>() else {
        return failed(e);
    };
    let mut metadata = MetadataMap::new();
    let leader = forward.leader_id.zip(forward.leader_node.as_ref());
    if let Some((id, node)) = leader {
        metadata.insert("leader-id", MetadataValue::from(id));
        if let Ok(addr) = node.addr.parse() {
            metadata.insert("leader-addr", addr);
        }
    }
    node_status(
        Code::FailedPrecondition,
        "not-leader",
        "this node does not lead".to_string(),
        metadata,
    )
}

/// Who is on the other end of `request`'s connection.
fn peer<T>(request: &tonic::Request<T>) -> Peer {
    (request.extensions().get::<Peer>().copied()).unwrap_or(Peer::Anonymous)
}

impl Serving {
    /// Whether `request` may write or change the membership: without TLS, anyone may do
    /// anything, as on a trusted network (tokens need TLS: `Node::start` refuses them
    /// without it); with TLS, a client certificate or a token the node takes.
    fn may_write<T>(&self, request: &tonic::Request<T>) -> Result<(), Status> {
        if !self.tls || peer(request) != Peer::Anonymous {
            return Ok(());
        }
        let Some(given) = request.metadata().get("authorization") else {
            return Err(unauthorized(
                "writes and membership changes need a certificate the cluster's client CA \
                 signed, or a token",
            ));
        };
        let token = given.to_str().ok().and_then(|v| v.strip_prefix("Bearer "));
        match token {
            Some(token) if token_matches(&self.tokens, token) => Ok(()),
            _ => Err(unauthorized("the node does not take this token")),
        }
    }

    /// Whether `request` may be one of Raft's RPCs: only from a certificate the node CA
    /// signed, when the cluster uses TLS.
    fn may_send_raft<T>(&self, request: &tonic::Request<T>) -> Result<(), Status> {
        if self.tls && peer(request) != Peer::Node {
            return Err(Status::permission_denied(
                "Raft's RPCs need a certificate the cluster's node CA signed",
            ));
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl Kv for Serving {
    async fn write(
        &self,
        request: tonic::Request<proto::Request>,
    ) -> Result<tonic::Response<proto::Response>, Status> {
        self.may_write(&request)?;
        let write = Request::try_from(request.into_inner())?;
        if let Request::Session { write: inner, .. } = &write {
            if matches!(**inner, Request::Session { .. }) {
                return Err(failed("a session write cannot hold another session's"));
            }
        }
        match self.raft.client_write(write).await {
            Ok(response) => Ok(tonic::Response::new(response.data.into())),
            Err(e) => Err(refused(e)),
        }
    }

    async fn read(
        &self,
        request: tonic::Request<proto::ReadRequest>,
    ) -> Result<tonic::Response<proto::ReadReply>, Status> {
        let read = request.into_inner();
        if read.consistency() == proto::Consistency::Linearizable {
            self.read_index.confirm().await.map_err(refused)?;
        }
        match self.reader.get(&read.key) {
            Ok(value) => Ok(tonic::Response::new(proto::ReadReply { value })),
            Err(e) => Err(failed(e)),
        }
    }

    async fn init(
        &self,
        request: tonic::Request<proto::InitRequest>,
    ) -> Result<tonic::Response<proto::Done>, Status> {
        self.may_write(&request)?;
        let nodes: BTreeMap<NodeId, BasicNode> = (request.into_inner().members.into_iter())
            .map(|(id, addr)| (id, BasicNode { addr }))
            .collect();
        match self.raft.initialize(nodes).await {
            Ok(()) => Ok(tonic::Response::new(proto::Done {})),
            Err(e) => Err(failed(e)),
        }
    }

    async fn add_learner(
        &self,
        request: tonic::Request<proto::AddLearnerRequest>,
    ) -> Result<tonic::Response<proto::Done>, Status> {
        self.may_write(&request)?;
        let proto::AddLearnerRequest { id, addr } = request.into_inner();
        // Answered once the membership that adds it is committed, not once the learner has
        // caught up (which can take minutes for a large state machine, past any client's
        // patience): its own status says when it has.
        match self.raft.add_learner(id, BasicNode { addr }, false).await {
            Ok(_) => Ok(tonic::Response::new(proto::Done {})),
            Err(e) => Err(refused(e)),
        }
    }

    async fn change_membership(
        &self,
        request: tonic::Request<proto::ChangeMembershipRequest>,
    ) -> Result<tonic::Response<proto::Done>, Status> {
        self.may_write(&request)?;
        let voters: std::collections::BTreeSet<NodeId> =
            request.into_inner().voters.into_iter().collect();
        match self.raft.change_membership(voters, false).await {
            Ok(_) => Ok(tonic::Response::new(proto::Done {})),
            Err(e) => Err(refused(e)),
        }
    }

    async fn status(
        &self,
        _: tonic::Request<proto::StatusRequest>,
    ) -> Result<tonic::Response<proto::NodeStatus>, Status> {
        Ok(tonic::Response::new(status(&self.raft, &self.read_index)))
    }
}

#[tonic::async_trait]
impl proto::raft_server::Raft for Serving {
    async fn append_entries(
        &self,
        request: tonic::Request<proto::AppendEntriesRequest>,
    ) -> Result<tonic::Response<proto::AppendEntriesReply>, Status> {
        self.may_send_raft(&request)?;
        let rpc = request.into_inner().try_into()?;
        match self.raft.append_entries(rpc).await {
            Ok(response) => Ok(tonic::Response::new(response.into())),
            Err(e) => Err(raft_error_status(&e)),
        }
    }

    async fn vote(
        &self,
        request: tonic::Request<proto::VoteRequest>,
    ) -> Result<tonic::Response<proto::VoteReply>, Status> {
        self.may_send_raft(&request)?;
        let rpc = request.into_inner().try_into()?;
        match self.raft.vote(rpc).await {
            Ok(response) => Ok(tonic::Response::new(response.into())),
            Err(e) => Err(raft_error_status(&e)),
        }
    }

    async fn install_snapshot(
        &self,
        request: tonic::Request<proto::InstallSnapshotRequest>,
    ) -> Result<tonic::Response<proto::InstallSnapshotReply>, Status> {
        self.may_send_raft(&request)?;
        let rpc = request.into_inner().try_into()?;
        match self.raft.install_snapshot(rpc).await {
            Ok(response) => Ok(tonic::Response::new(response.into())),
            Err(e) => Err(raft_error_status(&e)),
        }
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
