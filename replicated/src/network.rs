//! Raft's RPCs between nodes, as frames on loopback TCP ([`crate::wire`]).
//!
//! One port per node carries both Raft's RPCs and the client API ([`Message`]). A connection
//! to a peer is kept and reused; any I/O error drops it, reports the peer unreachable, and
//! the next RPC connects again. Raft asks for a new client for each leadership confirmation
//! (a linearizable read's): a client given up with its connection idle leaves it in a pool
//! the next client to that peer takes, rather than each confirmation connecting anew.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{
    Infallible, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftNetwork, RaftNetworkFactory};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;

use crate::transport::{NodeTls, Stream};
use crate::wire::{read_frame, write_frame, DEFAULT_MAX_FRAME};
use crate::{NodeId, Request, Response, TypeConfig};

/// Everything a node's port accepts.
#[derive(Debug, Serialize, Deserialize)]
pub enum Message {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    Client(ClientRequest),
    /// A client's token: its connection may then write and change the membership, if the
    /// node takes the token (answered `Done` or `Unauthorized`).
    Token(String),
}

/// How fresh a read must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Consistency {
    /// Through the leader, after it confirmed it still leads: sees every acknowledged write.
    Linearizable,
    /// From this node's state machine as it is: may miss the latest writes.
    Stale,
}

/// The client API.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ClientRequest {
    Write(Request),
    Read {
        key: String,
        consistency: Consistency,
    },
    /// Makes a new cluster of these voters (node id to address).
    Init {
        members: BTreeMap<NodeId, String>,
    },
    AddLearner {
        id: NodeId,
        addr: String,
    },
    ChangeMembership {
        voters: BTreeSet<NodeId>,
    },
    Status,
}

/// What a node answers a [`ClientRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClientReply {
    Written(Response),
    Value(Option<String>),
    Done,
    Status(NodeStatus),
    /// Ask the leader instead (when known).
    NotLeader {
        leader: Option<(NodeId, String)>,
    },
    Failed(String),
    /// The connection lacks the credential the request needs: a certificate the cluster's
    /// CA signed, or a token the node takes.
    Unauthorized(String),
}

/// A node's view of itself and the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    pub id: NodeId,
    pub term: u64,
    /// "Leader", "Follower", "Candidate", "Learner" or "Shutdown".
    pub state: String,
    pub leader: Option<NodeId>,
    pub last_log_index: Option<u64>,
    pub last_applied_index: Option<u64>,
    /// The index of the snapshot this node holds, built or installed.
    pub snapshot_index: Option<u64>,
    pub purged_index: Option<u64>,
    pub voters: Vec<NodeId>,
    /// Leadership confirmations this node ran for linearizable reads, and the reads they
    /// answered: concurrent reads share one (`read_index.rs`).
    pub read_confirmations: u64,
    pub reads_confirmed: u64,
}

/// Idle connections kept per peer address, at most: the confirmations of linearizable reads
/// run one at a time, and replication keeps its own connections.
const IDLE_PER_PEER: usize = 4;

/// Idle connections to peers, by address, that a new client takes before it connects.
type Idle = Arc<Mutex<HashMap<String, Vec<Stream>>>>;

/// How a node reaches its peers.
#[derive(Clone)]
pub struct Reach {
    /// The local address connections to peers are made from, when the node names one (a
    /// host with several addresses, or a test telling nodes apart by theirs).
    pub source: Option<std::net::IpAddr>,
    /// TLS with the node's certificate (mutual: peers check it), when the cluster uses it.
    pub tls: Option<NodeTls>,
    /// The longest frame sent or taken.
    pub max_frame: u32,
}

impl Default for Reach {
    fn default() -> Reach {
        Reach {
            source: None,
            tls: None,
            max_frame: DEFAULT_MAX_FRAME,
        }
    }
}

/// Makes connections to peers.
#[derive(Clone, Default)]
pub struct Network {
    idle: Idle,
    reach: Arc<Reach>,
}

impl Network {
    pub fn new(reach: Reach) -> Network {
        Network {
            idle: Idle::default(),
            reach: Arc::new(reach),
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        let stream = (self.idle.lock().unwrap_or_else(|e| e.into_inner()))
            .get_mut(&node.addr)
            .and_then(Vec::pop);
        Connection {
            target,
            addr: node.addr.clone(),
            stream,
            idle: Arc::clone(&self.idle),
            reach: Arc::clone(&self.reach),
        }
    }
}

/// The connection to one peer. `stream` is `None` until the first RPC connects, after an
/// error, and while an exchange is under way: a call dropped before its reply came (Raft
/// cancels RPCs) leaves no stream with a reply still to read.
pub struct Connection {
    target: NodeId,
    addr: String,
    stream: Option<Stream>,
    idle: Idle,
    reach: Arc<Reach>,
}

/// A connection to `addr` as `reach` says: from its source address, over TLS.
async fn connect(addr: &str, reach: &Reach) -> std::io::Result<Stream> {
    let stream = match reach.source {
        None => TcpStream::connect(addr).await?,
        Some(ip) => {
            let target = tokio::net::lookup_host(addr)
                .await?
                .find(|a| a.is_ipv4() == ip.is_ipv4())
                .ok_or_else(|| std::io::Error::other(format!("{addr}: no address to reach")))?;
            let socket = match ip {
                std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
                std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
            };
            socket.bind(std::net::SocketAddr::new(ip, 0))?;
            socket.connect(target).await?
        }
    };
    stream.set_nodelay(true)?;
    match &reach.tls {
        Some(tls) => tls.connect(stream, addr).await,
        None => Ok(Stream::Plain(stream)),
    }
}

impl Drop for Connection {
    /// Leaves an idle connection for the next client to this peer.
    fn drop(&mut self) {
        let Some(stream) = self.stream.take() else {
            return;
        };
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let kept = idle.entry(std::mem::take(&mut self.addr)).or_default();
        if kept.len() < IDLE_PER_PEER {
            kept.push(stream);
        }
    }
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl Connection {
    /// Sends `message` and reads the peer's `Result`, within `ttl`.
    async fn call<T, E>(&mut self, message: Message, ttl: Duration) -> RpcResult<T, E>
    where
        T: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        // Taken out for the exchange, and put back only once the reply has been read.
        let taken = self.stream.take();
        let (addr, reach) = (&self.addr, &self.reach);
        let max = reach.max_frame;
        let exchange = async move {
            let mut stream = match taken {
                Some(stream) => stream,
                None => connect(addr, reach).await?,
            };
            write_frame(&mut stream, &message, max).await?;
            let reply = read_frame::<_, Result<T, RaftError<NodeId, E>>>(&mut stream, max)
                .await?
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
            Ok::<_, std::io::Error>((stream, reply))
        };
        let reply = match tokio::time::timeout(ttl, exchange).await {
            Ok(Ok((stream, reply))) => {
                self.stream = Some(stream);
                reply
            }
            Ok(Err(e)) => return Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(elapsed) => return Err(RPCError::Network(NetworkError::new(&elapsed))),
        };
        reply.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, Infallible> {
        self.call(Message::AppendEntries(rpc), option.hard_ttl())
            .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        self.call(Message::InstallSnapshot(rpc), option.hard_ttl())
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, Infallible> {
        self.call(Message::Vote(rpc), option.hard_ttl()).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use openraft::Vote;
    use tokio::net::TcpListener;

    use super::*;

    /// A peer that counts the connections it accepts and answers every vote it reads after
    /// `delay`.
    async fn peer(delay: Duration) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    while let Ok(Some(Message::Vote(rpc))) =
                        read_frame(&mut stream, DEFAULT_MAX_FRAME).await
                    {
                        tokio::time::sleep(delay).await;
                        let reply: Result<_, RaftError<NodeId, Infallible>> =
                            Ok(VoteResponse::new(rpc.vote, None, true));
                        if write_frame(&mut stream, &reply, DEFAULT_MAX_FRAME)
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    async fn client(network: &mut Network, addr: &str) -> Connection {
        network.new_client(2, &BasicNode::new(addr)).await
    }

    async fn vote(connection: &mut Connection, ttl: Duration) -> bool {
        let rpc = VoteRequest::new(Vote::new(1, 1), None);
        connection.vote(rpc, RPCOption::new(ttl)).await.is_ok()
    }

    fn idle(network: &Network, addr: &str) -> usize {
        network.idle.lock().unwrap().get(addr).map_or(0, Vec::len)
    }

    #[tokio::test]
    async fn a_client_given_up_idle_leaves_its_connection_to_the_next() {
        let (addr, accepted) = peer(Duration::ZERO).await;
        let mut network = Network::default();
        for _ in 0..5 {
            let mut connection = client(&mut network, &addr).await;
            assert!(vote(&mut connection, Duration::from_secs(5)).await);
            assert!(vote(&mut connection, Duration::from_secs(5)).await);
            drop(connection);
            assert_eq!(idle(&network, &addr), 1);
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection, reused");

        // Clients at once each connect; no more than IDLE_PER_PEER stay idle.
        let mut many = Vec::new();
        for _ in 0..IDLE_PER_PEER + 2 {
            let mut connection = client(&mut network, &addr).await;
            assert!(vote(&mut connection, Duration::from_secs(5)).await);
            many.push(connection);
        }
        drop(many);
        assert_eq!(idle(&network, &addr), IDLE_PER_PEER);
    }

    #[tokio::test]
    async fn a_connection_whose_reply_never_came_is_not_reused() {
        let (addr, accepted) = peer(Duration::from_millis(300)).await;
        let mut network = Network::default();

        // Timed out: the reply is still to come on that connection.
        let mut connection = client(&mut network, &addr).await;
        assert!(!vote(&mut connection, Duration::from_millis(20)).await);
        drop(connection);
        assert_eq!(idle(&network, &addr), 0);

        // Cancelled by its caller mid-exchange, as Raft cancels RPCs.
        let mut connection = client(&mut network, &addr).await;
        let cancelled = tokio::time::timeout(
            Duration::from_millis(20),
            vote(&mut connection, Duration::from_secs(5)),
        );
        assert!(cancelled.await.is_err());
        drop(connection);
        assert_eq!(idle(&network, &addr), 0);

        // A new client connects afresh and reads its own reply.
        let mut connection = client(&mut network, &addr).await;
        assert!(vote(&mut connection, Duration::from_secs(5)).await);
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }
}
