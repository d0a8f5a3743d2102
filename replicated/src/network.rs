//! Raft's RPCs between nodes, as frames on loopback TCP ([`crate::wire`]).
//!
//! One port per node carries both Raft's RPCs and the client API ([`Message`]). A connection
//! to a peer is kept and reused; any I/O error drops it, reports the peer unreachable, and
//! the next RPC connects again.

use std::collections::{BTreeMap, BTreeSet};
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

use crate::wire::{read_frame, write_frame};
use crate::{NodeId, Request, Response, TypeConfig};

/// Everything a node's port accepts.
#[derive(Debug, Serialize, Deserialize)]
pub enum Message {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    Client(ClientRequest),
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
}

/// Makes connections to peers.
#[derive(Clone, Default)]
pub struct Network;

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            target,
            addr: node.addr.clone(),
            stream: None,
        }
    }
}

/// The connection to one peer.
pub struct Connection {
    target: NodeId,
    addr: String,
    stream: Option<TcpStream>,
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl Connection {
    /// Sends `message` and reads the peer's `Result`, within `ttl`.
    async fn call<T, E>(&mut self, message: Message, ttl: Duration) -> RpcResult<T, E>
    where
        T: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let exchange = async {
            if self.stream.is_none() {
                let stream = TcpStream::connect(&self.addr).await?;
                stream.set_nodelay(true)?;
                self.stream = Some(stream);
            }
            let stream = self.stream.as_mut().expect("connected above");
            write_frame(stream, &message).await?;
            read_frame::<Result<T, RaftError<NodeId, E>>>(stream)
                .await?
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))
        };
        let reply = match tokio::time::timeout(ttl, exchange).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => {
                self.stream = None;
                return Err(RPCError::Unreachable(Unreachable::new(&e)));
            }
            Err(elapsed) => {
                self.stream = None;
                return Err(RPCError::Network(NetworkError::new(&elapsed)));
            }
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
