//! Runs one node: its Raft instance on the two stores, and one TCP port for peers and clients.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::error::RaftError;
use openraft::{BasicNode, Config, SnapshotPolicy};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::network::{ClientReply, ClientRequest, Consistency, Message, Network, NodeStatus};
use crate::read_index::ReadIndex;
use crate::state_machine::StateReader;
use crate::wire::{read_frame, write_frame};
use crate::{LogStore, NodeId, Raft, StateMachine};

/// How a node is run.
#[derive(Debug, Clone)]
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
        let sm = StateMachine::open(options.dir.join("sm"))?;
        // The log drops entries only once the state machine holds them durably.
        let log = LogStore::open_behind(options.dir.join("log"), sm.durable())?;
        let reader = sm.reader();
        let raft = Raft::new(
            options.id,
            Arc::new(config),
            Network::from_address(options.source_ip),
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
        tokio::spawn(handle_connection(stream, serving.clone()));
    }
}

/// Answers the frames of one connection in order until the peer closes it.
async fn handle_connection(mut stream: TcpStream, serving: Serving) {
    let raft = &serving.raft;
    while let Ok(Some(message)) = read_frame::<Message>(&mut stream).await {
        let sent = match message {
            Message::AppendEntries(rpc) => {
                write_frame(&mut stream, &raft.append_entries(rpc).await).await
            }
            Message::Vote(rpc) => write_frame(&mut stream, &raft.vote(rpc).await).await,
            Message::InstallSnapshot(rpc) => {
                write_frame(&mut stream, &raft.install_snapshot(rpc).await).await
            }
            Message::Client(request) => {
                let reply = client_request(&serving, request).await;
                write_frame(&mut stream, &reply).await
            }
        };
        if sent.is_err() {
            return;
        }
    }
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
