//! Raft's RPCs between nodes, as gRPC calls (`proto/bloomkv.proto`, service `Raft`).
//!
//! One gRPC channel per peer address, kept for the node's life: every RPC to that peer, from
//! replication, elections and the leadership confirmations of linearizable reads, is a stream
//! on its one HTTP/2 connection. A call Raft gives up on (a timeout, a cancelled confirmation)
//! resets its own stream, not the connection; a connection that fails is made again at the
//! next call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{
    Infallible, InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError,
    RemoteError, Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftNetwork, RaftNetworkFactory};
use serde::de::DeserializeOwned;
use tonic::transport::Channel;
use tonic::Status;

use crate::proto::raft_client::RaftClient;
use crate::transport::{never_connected, Dial, NodeTls};
use crate::{NodeId, TypeConfig};

/// The largest message a node or client sends or takes unless configured otherwise: far
/// above a snapshot chunk (1 MiB) or a batch of appended entries, and far below what a damaged
/// or hostile length could make a reader allocate.
pub const DEFAULT_MAX_MESSAGE: usize = 64 << 20;

/// The metadata key under which a node says what kind of error its status is: a status
/// without it came from the transport.
pub(crate) const ERROR_KIND: &str = "bloomkv-error";

/// How a node reaches its peers.
#[derive(Clone)]
pub struct Reach {
    /// The local address connections to peers are made from, when the node names one (a
    /// host with several addresses, or a test telling nodes apart by theirs).
    pub source: Option<std::net::IpAddr>,
    /// TLS with the node's certificate (mutual: peers check it), when the cluster uses it.
    pub tls: Option<NodeTls>,
    /// The longest message sent or taken.
    pub max_message: usize,
}

impl Default for Reach {
    fn default() -> Reach {
        Reach {
            source: None,
            tls: None,
            max_message: DEFAULT_MAX_MESSAGE,
        }
    }
}

/// Makes clients of peers, each on the one channel to its peer.
#[derive(Clone, Default)]
pub struct Network {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
    reach: Arc<Reach>,
}

impl Network {
    pub fn new(reach: Reach) -> Network {
        Network {
            channels: Arc::default(),
            reach: Arc::new(reach),
        }
    }

    /// The channel to `addr`, made at the first ask.
    fn channel(&self, addr: &str) -> std::io::Result<Channel> {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(channel) = channels.get(addr) {
            return Ok(channel.clone());
        }
        let dial = Dial {
            source: self.reach.source,
            tls: self.reach.tls.as_ref().map(NodeTls::connector),
            timeout: Duration::from_secs(2),
        };
        let channel = dial.channel(addr)?;
        channels.insert(addr.to_string(), channel.clone());
        Ok(channel)
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        let max = self.reach.max_message;
        let client = self.channel(&node.addr).map(|channel| {
            RaftClient::new(channel)
                .max_decoding_message_size(max)
                .max_encoding_message_size(max)
        });
        Connection {
            target,
            client: client.map_err(|e| e.to_string()),
            max_message: max,
        }
    }
}

/// A client of one peer; or why there is none (an address that is no URI).
pub struct Connection {
    target: NodeId,
    client: Result<RaftClient<Channel>, String>,
    /// The longest message sent: a batch of entries over it is split.
    max_message: usize,
}

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

/// The status a node answers a Raft RPC with when Raft returned an error: the error as JSON
/// in the status's details, for the caller's Raft.
pub(crate) fn raft_error_status<E: serde::Serialize + std::fmt::Display>(
    error: &RaftError<NodeId, E>,
) -> Status {
    let mut metadata = tonic::metadata::MetadataMap::new();
    metadata.insert(
        ERROR_KIND,
        tonic::metadata::MetadataValue::from_static("raft"),
    );
    let details = serde_json::to_vec(error).expect("Raft's errors serialize to JSON");
    Status::with_details_and_metadata(
        tonic::Code::Internal,
        error.to_string(),
        details.into(),
        metadata,
    )
}

/// What a call's outcome means to Raft: the reply; the peer's Raft's error; unreachable (no
/// connection, or it failed: Raft backs off); or a network error (a timeout, a reply that
/// is not one).
fn outcome<P, T, E>(
    target: NodeId,
    called: Result<Result<tonic::Response<P>, Status>, tokio::time::error::Elapsed>,
) -> RpcResult<T, E>
where
    T: TryFrom<P, Error = Status>,
    E: std::error::Error + DeserializeOwned,
{
    let status = match called {
        Err(elapsed) => return Err(RPCError::Network(NetworkError::new(&elapsed))),
        Ok(Ok(reply)) => {
            return T::try_from(reply.into_inner())
                .map_err(|e| RPCError::Network(NetworkError::new(&e)))
        }
        Ok(Err(status)) => status,
    };
    let from_raft = status
        .metadata()
        .get(ERROR_KIND)
        .is_some_and(|k| k == "raft");
    if from_raft {
        if let Ok(e) = serde_json::from_slice::<RaftError<NodeId, E>>(status.details()) {
            return Err(RPCError::RemoteError(RemoteError::new(target, e)));
        }
    }
    if never_connected(&status) || status.code() == tonic::Code::Unavailable {
        return Err(RPCError::Unreachable(Unreachable::new(&status)));
    }
    Err(RPCError::Network(NetworkError::new(&status)))
}

impl Connection {
    fn client(&self) -> Result<RaftClient<Channel>, Unreachable> {
        (self.client.clone()).map_err(|e| Unreachable::new(&std::io::Error::other(e)))
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, Infallible> {
        let mut client = self.client()?;
        let entries = rpc.entries.len() as u64;
        let rpc = crate::proto::AppendEntriesRequest::from(rpc);
        // A batch over the message limit would be refused on every try, and replication
        // would stall: openraft sends fewer entries when told the payload is too large.
        if prost::Message::encoded_len(&rpc) > self.max_message && entries > 1 {
            let hint = PayloadTooLarge::new_entries_hint(entries / 2);
            return Err(RPCError::PayloadTooLarge(hint));
        }
        let call = client.append_entries(rpc);
        outcome(
            self.target,
            tokio::time::timeout(option.hard_ttl(), call).await,
        )
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        let mut client = self.client()?;
        let call = client.install_snapshot(crate::proto::InstallSnapshotRequest::from(rpc));
        outcome(
            self.target,
            tokio::time::timeout(option.hard_ttl(), call).await,
        )
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, Infallible> {
        let mut client = self.client()?;
        let call = client.vote(crate::proto::VoteRequest::from(rpc));
        outcome(
            self.target,
            tokio::time::timeout(option.hard_ttl(), call).await,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use openraft::Vote;
    use tokio::net::TcpListener;
    use tokio_stream::StreamExt;

    use super::*;
    use crate::proto;
    use crate::proto::raft_server::{Raft, RaftServer};

    /// A peer that grants every vote after `delay`.
    struct SlowPeer {
        delay: Duration,
    }

    #[tonic::async_trait]
    impl Raft for SlowPeer {
        async fn append_entries(
            &self,
            _: tonic::Request<proto::AppendEntriesRequest>,
        ) -> Result<tonic::Response<proto::AppendEntriesReply>, Status> {
            Err(Status::unimplemented("votes only"))
        }

        async fn vote(
            &self,
            request: tonic::Request<proto::VoteRequest>,
        ) -> Result<tonic::Response<proto::VoteReply>, Status> {
            tokio::time::sleep(self.delay).await;
            let rpc = VoteRequest::try_from(request.into_inner())?;
            let granted = VoteResponse::new(rpc.vote, None, true);
            Ok(tonic::Response::new(granted.into()))
        }

        async fn install_snapshot(
            &self,
            _: tonic::Request<proto::InstallSnapshotRequest>,
        ) -> Result<tonic::Response<proto::InstallSnapshotReply>, Status> {
            Err(Status::unimplemented("votes only"))
        }
    }

    /// A peer on loopback answering votes after `delay`, and the count of connections it
    /// accepted.
    async fn peer(delay: Duration) -> (String, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        let incoming =
            tokio_stream::wrappers::TcpListenerStream::new(listener).map(move |connection| {
                counted.fetch_add(1, Ordering::SeqCst);
                connection
            });
        let server =
            tonic::transport::Server::builder().add_service(RaftServer::new(SlowPeer { delay }));
        tokio::spawn(server.serve_with_incoming(incoming));
        (addr, accepted)
    }

    async fn vote(network: &mut Network, addr: &str, ttl: Duration) -> bool {
        let mut connection = network.new_client(2, &BasicNode::new(addr)).await;
        let rpc = VoteRequest::new(Vote::new(1, 1), None);
        connection.vote(rpc, RPCOption::new(ttl)).await.is_ok()
    }

    #[tokio::test]
    async fn every_client_of_a_peer_shares_its_one_connection() {
        let (addr, accepted) = peer(Duration::from_millis(20)).await;
        let mut network = Network::default();
        for _ in 0..5 {
            assert!(vote(&mut network, &addr, Duration::from_secs(5)).await);
        }
        // At once, as the confirmations of reads and replication call.
        let calls: Vec<_> = (0..16)
            .map(|_| {
                let (mut network, addr) = (network.clone(), addr.clone());
                tokio::spawn(async move { vote(&mut network, &addr, Duration::from_secs(5)).await })
            })
            .collect();
        for call in calls {
            assert!(call.await.unwrap());
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection, shared");
    }

    #[tokio::test]
    async fn a_call_given_up_leaves_the_connection_to_the_next() {
        let (addr, accepted) = peer(Duration::from_millis(300)).await;
        let mut network = Network::default();
        // Timed out, and cancelled by its caller mid-call, as Raft cancels RPCs.
        assert!(!vote(&mut network, &addr, Duration::from_millis(20)).await);
        let cancelled = tokio::time::timeout(
            Duration::from_millis(20),
            vote(&mut network, &addr, Duration::from_secs(5)),
        );
        assert!(cancelled.await.is_err());
        // The next call gets its own reply, on the same connection.
        assert!(vote(&mut network, &addr, Duration::from_secs(5)).await);
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_batch_of_entries_over_the_message_limit_is_sent_back_to_be_split() {
        let network = Network::new(Reach {
            max_message: 4 << 10,
            ..Reach::default()
        });
        // Nobody need listen: the batch is measured before anything is sent.
        let mut connection = network
            .clone()
            .new_client(2, &BasicNode::new("127.0.0.1:1"))
            .await;
        let entry = |index| openraft::Entry::<TypeConfig> {
            log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), index),
            payload: openraft::EntryPayload::Normal(crate::Request::Put {
                key: crate::Blob::from("k"),
                value: crate::Blob(vec![7; 1000]),
            }),
        };
        let rpc = AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            entries: (1..=10).map(entry).collect(),
            leader_commit: None,
        };
        let option = RPCOption::new(Duration::from_secs(1));
        match connection.append_entries(rpc, option).await {
            Err(RPCError::PayloadTooLarge(too_large)) => {
                assert_eq!(too_large.entries_hint(), 5);
            }
            other => panic!("a batch of 10 KB was not sent back: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_peer_nobody_listens_for_is_unreachable_and_a_raft_error_is_the_peers() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let mut connection = Network::default()
            .new_client(2, &BasicNode::new(&addr))
            .await;
        let rpc = VoteRequest::new(Vote::new(1, 1), None);
        let refused = connection
            .vote(rpc, RPCOption::new(Duration::from_secs(5)))
            .await;
        assert!(
            matches!(refused, Err(RPCError::Unreachable(_))),
            "{refused:?}"
        );

        let error: RaftError<NodeId, Infallible> =
            RaftError::Fatal(openraft::error::Fatal::Stopped);
        let status = raft_error_status(&error);
        let told =
            outcome::<proto::VoteReply, VoteResponse<NodeId>, Infallible>(2, Ok(Err(status)));
        match told {
            Err(RPCError::RemoteError(remote)) => {
                assert_eq!(remote.target, 2);
                assert!(matches!(
                    remote.source,
                    RaftError::Fatal(openraft::error::Fatal::Stopped)
                ));
            }
            other => panic!("not the peer's error: {other:?}"),
        }
    }
}
