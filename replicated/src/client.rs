//! A client of the service (`proto/bloomkv.proto`, service `Kv`): finds the leader and follows
//! its redirects.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;
use tonic::Status;

use crate::network::{DEFAULT_MAX_MESSAGE, ERROR_KIND};
use crate::proto::kv_client::KvClient;
use crate::transport::{never_connected, ClientTls, Dial};
use crate::{proto, Blob, NodeId, Request, Response};

/// How fresh a read must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consistency {
    /// Through the leader, after it confirmed it still leads: sees every acknowledged write.
    Linearizable,
    /// From this node's state machine as it is: may miss the latest writes.
    Stale,
}

/// A request of the client API, one of the `Kv` service's calls.
#[derive(Debug, Clone)]
pub enum ClientRequest {
    Write(Request),
    Read {
        key: Blob,
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

/// What a node answered a [`ClientRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientReply {
    Written(Response),
    Value(Option<Vec<u8>>),
    Done,
    Status(NodeStatus),
    /// Ask the leader instead (when known).
    NotLeader {
        leader: Option<(NodeId, String)>,
    },
    Failed(String),
}

/// A node's view of itself and the cluster: the gRPC message as it is
/// (`proto/bloomkv.proto`).
pub use crate::proto::NodeStatus;

/// What a request could not do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// No node answered as leader within the tries.
    NoLeader,
    /// A node refused the request.
    Failed(String),
    /// The request needs a credential the client lacks (a certificate the cluster's CA
    /// signed, or a token the nodes take), or a node refused the client's token.
    Unauthorized(String),
    /// No connection could be made: the request was not sent.
    Io(String),
    /// The request was sent but no reply came: a write may or may not have been applied.
    NoReply(String),
    /// The node answered something this request does not expect.
    Unexpected(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::NoLeader => write!(f, "no leader answered"),
            ClientError::Failed(msg) => write!(f, "refused: {msg}"),
            ClientError::Unauthorized(msg) => write!(f, "not authorized: {msg}"),
            ClientError::Io(msg) => write!(f, "connection: {msg}"),
            ClientError::NoReply(msg) => write!(f, "sent, but no reply (outcome unknown): {msg}"),
            ClientError::Unexpected(msg) => write!(f, "unexpected reply: {msg}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// A client knowing the addresses of some nodes; it asks the one it last found leading.
///
/// Its writes are a session's (`src/apply.rs`): each carries the client's id and the next
/// sequence number, so a write whose reply was lost is sent again, and applied once. A write
/// that still ends in [`ClientError::NoReply`] may have been applied: to send it again under
/// its own number, start a client [`with_session`](Client::with_session) at the number before
/// it (`session().1 - 1`) and write it again.
///
/// Set `tls`, `timeout` and `max_message` before the first request: each node's channel is
/// made with them at the first request to it.
pub struct Client {
    addrs: Vec<String>,
    leader: usize,
    /// A channel to each node asked so far: one connection each, shared by the client's
    /// clones.
    channels: HashMap<String, Channel>,
    /// Tries (each up to every known node) before giving up on finding a leader.
    pub tries: u32,
    /// How long a request waits for its reply before it counts as lost.
    pub timeout: Duration,
    /// TLS to the nodes (their CA, and the client's certificate if it has one).
    pub tls: Option<ClientTls>,
    /// A token sent with every request (`authorization: Bearer` metadata), which lets the
    /// client write.
    pub token: Option<String>,
    /// The longest message sent or taken.
    pub max_message: usize,
    id: u64,
    last_seq: u64,
}

impl Client {
    /// A client with a new session id, drawn at random.
    pub fn new(addrs: impl IntoIterator<Item = impl Into<String>>) -> Client {
        Client::with_session(addrs, random_id(), 0)
    }

    /// A client going on with session `id` after sequence number `last_seq`: a process that
    /// restarts and kept both sends its writes again exactly once.
    pub fn with_session(
        addrs: impl IntoIterator<Item = impl Into<String>>,
        id: u64,
        last_seq: u64,
    ) -> Client {
        Client {
            addrs: addrs.into_iter().map(Into::into).collect(),
            leader: 0,
            channels: HashMap::new(),
            tries: 60,
            timeout: Duration::from_secs(10),
            tls: None,
            token: None,
            max_message: DEFAULT_MAX_MESSAGE,
            id,
            last_seq,
        }
    }

    /// The session's id, and the sequence number of its last write.
    pub fn session(&self) -> (u64, u64) {
        (self.id, self.last_seq)
    }

    /// Sends `request` to the node at `addr` and reads its reply.
    pub async fn send_to(
        &mut self,
        addr: &str,
        request: ClientRequest,
    ) -> Result<ClientReply, ClientError> {
        let mut kv = self.kv(addr)?;
        let token = match &self.token {
            None => None,
            Some(token) => Some(
                format!("Bearer {token}")
                    .parse::<MetadataValue<Ascii>>()
                    .map_err(|_| {
                        ClientError::Failed(
                            "the token is not valid in a header (visible ASCII only)".to_string(),
                        )
                    })?,
            ),
        };
        let max = self.max_message;
        let call = async move {
            let t = token.as_ref();
            Ok(match request {
                ClientRequest::Write(write) => {
                    let write = proto::Request::from(write);
                    // Refused here, unsent, rather than by a gRPC layer on either side,
                    // whose refusal could not tell "not sent" from "sent, no reply".
                    let len = prost::Message::encoded_len(&write);
                    if len > max {
                        return Ok(ClientReply::Failed(format!(
                            "the write's {len} bytes are over the message limit of {max}"
                        )));
                    }
                    let reply = kv.write(with_token(write, t)).await?;
                    ClientReply::Written(reply.into_inner().into())
                }
                ClientRequest::Read { key, consistency } => {
                    let consistency = match consistency {
                        Consistency::Linearizable => proto::Consistency::Linearizable,
                        Consistency::Stale => proto::Consistency::Stale,
                    };
                    let read = proto::ReadRequest {
                        key: key.0,
                        consistency: consistency.into(),
                    };
                    ClientReply::Value(kv.read(with_token(read, t)).await?.into_inner().value)
                }
                ClientRequest::Init { members } => {
                    let members = members.into_iter().collect();
                    kv.init(with_token(proto::InitRequest { members }, t))
                        .await?;
                    ClientReply::Done
                }
                ClientRequest::AddLearner { id, addr } => {
                    kv.add_learner(with_token(proto::AddLearnerRequest { id, addr }, t))
                        .await?;
                    ClientReply::Done
                }
                ClientRequest::ChangeMembership { voters } => {
                    let voters = voters.into_iter().collect();
                    kv.change_membership(with_token(proto::ChangeMembershipRequest { voters }, t))
                        .await?;
                    ClientReply::Done
                }
                ClientRequest::Status => {
                    let status = kv.status(with_token(proto::StatusRequest {}, t)).await?;
                    ClientReply::Status(status.into_inner())
                }
            })
        };
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(status)) => refusal(addr, status),
            Err(_) => Err(ClientError::NoReply(format!(
                "{addr}: no reply in {timeout:?}"
            ))),
        }
    }

    /// A client of the node at `addr`, on the channel to it (made at the first ask).
    fn kv(&mut self, addr: &str) -> Result<KvClient<Channel>, ClientError> {
        let channel = match self.channels.get(addr) {
            Some(channel) => channel.clone(),
            None => {
                // Half the request's time: a node that cannot be reached fails as not
                // connected (not sent) before the request's own timeout calls it lost.
                let dial = Dial {
                    source: None,
                    tls: self.tls.as_ref().map(ClientTls::connector),
                    timeout: self.timeout / 2,
                };
                let channel = (dial.channel(addr)).map_err(|e| ClientError::Io(e.to_string()))?;
                self.channels.insert(addr.to_string(), channel.clone());
                channel
            }
        };
        Ok(KvClient::new(channel)
            .max_decoding_message_size(self.max_message)
            .max_encoding_message_size(self.max_message))
    }

    /// Sends `request` to the leader, following redirects and trying every node in turn
    /// while none leads (during an election). Reads, status requests and session writes whose
    /// reply was lost are sent again. Others are not: a write outside a session may have been
    /// applied, and a membership change sent again is made again (a learner added again has
    /// its replication, and any snapshot on its way, started over). They end in
    /// [`ClientError::NoReply`].
    pub async fn send(&mut self, request: ClientRequest) -> Result<ClientReply, ClientError> {
        let resend_after_lost_reply = match &request {
            ClientRequest::Read { .. } | ClientRequest::Status => true,
            ClientRequest::Write(write) => matches!(write, Request::Session { .. }),
            _ => false,
        };
        let mut unreachable = None;
        // Once a request may have reached a node, a failure to reach one later does not mean
        // it was never sent.
        let mut sent = false;
        for _ in 0..self.tries {
            for _ in 0..self.addrs.len() {
                let asked = self.leader;
                let addr = self.addrs[asked].clone();
                match self.send_to(&addr, request.clone()).await {
                    Ok(ClientReply::NotLeader {
                        leader: Some((_, leader_addr)),
                    }) if leader_addr != addr => {
                        self.leader = match self.addrs.iter().position(|a| *a == leader_addr) {
                            Some(at) => at,
                            None => {
                                self.addrs.push(leader_addr);
                                self.addrs.len() - 1
                            }
                        };
                    }
                    // No leader known (or a node naming itself while it steps down): next.
                    Ok(ClientReply::NotLeader { .. }) => {
                        self.leader = (asked + 1) % self.addrs.len();
                        unreachable = None;
                    }
                    Err(e @ ClientError::Io(_)) => {
                        self.leader = (asked + 1) % self.addrs.len();
                        unreachable = Some(e);
                    }
                    Err(ClientError::NoReply(_)) if resend_after_lost_reply => {
                        self.leader = (asked + 1) % self.addrs.len();
                        sent = true;
                        unreachable = None;
                    }
                    other => return other,
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // When the last node tried could not even be reached, why (a refused connection, a
        // failed TLS handshake) says more than that no leader answered.
        match unreachable {
            Some(ClientError::Io(e)) if sent => Err(ClientError::NoReply(e)),
            Some(e) => Err(e),
            None if sent => Err(ClientError::NoReply(
                "sent, then no node answered as leader".to_string(),
            )),
            None => Err(ClientError::NoLeader),
        }
    }

    /// Applies `write` once, as the session's next write, sending it again while its reply
    /// is lost.
    pub async fn write(&mut self, write: Request) -> Result<Response, ClientError> {
        self.last_seq += 1;
        let request = ClientRequest::Write(Request::Session {
            client: self.id,
            seq: self.last_seq,
            write: Box::new(write),
        });
        match self.send(request).await? {
            ClientReply::Written(response) if response.superseded => {
                Err(ClientError::Failed(format!(
                    "write {} of session {:#x} was not applied: the session has applied a later \
                     one (is another client using its id?)",
                    self.last_seq, self.id
                )))
            }
            ClientReply::Written(response) => Ok(response),
            other => Err(unexpected(other)),
        }
    }

    pub async fn put(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<Response, ClientError> {
        self.write(Request::Put {
            key: Blob::from(key.as_ref()),
            value: Blob::from(value.as_ref()),
        })
        .await
    }

    /// Puts every pair in one write: one log entry, applied at once on every node.
    pub async fn put_many<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Response, ClientError> {
        let pairs = (pairs.into_iter())
            .map(|(k, v)| (Blob::from(k.as_ref()), Blob::from(v.as_ref())))
            .collect();
        self.write(Request::PutMany { pairs }).await
    }

    pub async fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<Response, ClientError> {
        self.write(Request::Delete {
            key: Blob::from(key.as_ref()),
        })
        .await
    }

    /// Sets `key` to `new` (`None` deletes it) if its value is `expected` (`None`: absent).
    /// The response says whether it swapped, and if not, the value it found.
    pub async fn compare_and_swap(
        &mut self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<Response, ClientError> {
        self.write(Request::Cas {
            key: Blob::from(key.as_ref()),
            expected: expected.map(Blob::from),
            new: new.map(Blob::from),
        })
        .await
    }

    /// A linearizable read, through the leader.
    pub async fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>, ClientError> {
        let request = ClientRequest::Read {
            key: Blob::from(key.as_ref()),
            consistency: Consistency::Linearizable,
        };
        match self.send(request).await? {
            ClientReply::Value(value) => Ok(value),
            other => Err(unexpected(other)),
        }
    }

    /// A read of whatever the node at `addr` has applied.
    pub async fn stale_get(
        &mut self,
        addr: &str,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>, ClientError> {
        let request = ClientRequest::Read {
            key: Blob::from(key.as_ref()),
            consistency: Consistency::Stale,
        };
        match self.send_to(addr, request).await? {
            ClientReply::Value(value) => Ok(value),
            other => Err(unexpected(other)),
        }
    }

    /// Makes a cluster of `members` (id to address), asking the node at `addr`.
    pub async fn init(
        &mut self,
        addr: &str,
        members: BTreeMap<NodeId, String>,
    ) -> Result<(), ClientError> {
        match self.send_to(addr, ClientRequest::Init { members }).await? {
            ClientReply::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    pub async fn add_learner(&mut self, id: NodeId, addr: &str) -> Result<(), ClientError> {
        let request = ClientRequest::AddLearner {
            id,
            addr: addr.to_string(),
        };
        match self.send(request).await? {
            ClientReply::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    pub async fn change_membership(&mut self, voters: BTreeSet<NodeId>) -> Result<(), ClientError> {
        match self
            .send(ClientRequest::ChangeMembership { voters })
            .await?
        {
            ClientReply::Done => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    pub async fn status(&mut self, addr: &str) -> Result<NodeStatus, ClientError> {
        match self.send_to(addr, ClientRequest::Status).await? {
            ClientReply::Status(status) => Ok(status),
            other => Err(unexpected(other)),
        }
    }
}

/// `message` as a request, with the client's token (`Bearer` and the token) if it has one.
fn with_token<T>(message: T, token: Option<&MetadataValue<Ascii>>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(value) = token {
        request
            .metadata_mut()
            .insert("authorization", value.clone());
    }
    request
}

/// What a failed call means: a node's answer (its status carries [`ERROR_KIND`]), or the
/// transport's failure, before the request went out ([`ClientError::Io`]) or after
/// ([`ClientError::NoReply`]).
fn refusal(addr: &str, status: Status) -> Result<ClientReply, ClientError> {
    let message = status.message().to_string();
    let kind = status
        .metadata()
        .get(ERROR_KIND)
        .and_then(|k| k.to_str().ok());
    // A status that came over the wire carries the response's headers (its content type);
    // one tonic made here, on a failure to decode a reply, carries none.
    let from_the_node = status.metadata().get("content-type").is_some();
    match kind {
        // Raft stopped under the call: a write may have been committed all the same.
        Some("stopping") => Err(ClientError::NoReply(format!("{addr}: {message}"))),
        Some("not-leader") => {
            let text = |key| status.metadata().get(key).and_then(|v| v.to_str().ok());
            let id = text("leader-id").and_then(|id| id.parse().ok());
            let leader_addr = text("leader-addr").map(str::to_string);
            Ok(ClientReply::NotLeader {
                leader: id.zip(leader_addr),
            })
        }
        Some("unauthorized") => Err(ClientError::Unauthorized(message)),
        Some(_) => Ok(ClientReply::Failed(message)),
        None if never_connected(&status) => Err(ClientError::Io(format!("{addr}: {message}"))),
        // Refused by the node's gRPC layer before any handler ran (a message over its
        // limit, a field missing, permission denied): not applied.
        None if from_the_node
            && matches!(
                status.code(),
                tonic::Code::OutOfRange
                    | tonic::Code::ResourceExhausted
                    | tonic::Code::InvalidArgument
                    | tonic::Code::Unimplemented
                    | tonic::Code::PermissionDenied
            ) =>
        {
            Ok(ClientReply::Failed(format!("{addr}: {message}")))
        }
        None => Err(ClientError::NoReply(format!("{addr}: {status}"))),
    }
}

fn unexpected(reply: ClientReply) -> ClientError {
    match reply {
        ClientReply::Failed(msg) => ClientError::Failed(msg),
        other => ClientError::Unexpected(format!("{other:?}")),
    }
}

/// A session id no other client is likely to draw: the standard library's random hash keys,
/// mixed with the time and the process id.
fn random_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    hasher.write_u128(now.as_nanos());
    hasher.write_u32(std::process::id());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use tonic::metadata::MetadataMap;
    use tonic::Code;

    use super::*;

    fn status(code: Code, headers: &[(&'static str, &'static str)]) -> Status {
        let mut metadata = MetadataMap::new();
        for (key, value) in headers {
            metadata.insert(*key, MetadataValue::from_static(value));
        }
        Status::with_metadata(code, "why", metadata)
    }

    #[test]
    fn a_failed_call_says_whether_the_request_was_refused_sent_or_never_sent() {
        let told = |s| refusal("n1", s);
        // A node's own answers.
        let leader = status(
            Code::FailedPrecondition,
            &[
                (ERROR_KIND, "not-leader"),
                ("leader-id", "2"),
                ("leader-addr", "127.0.0.1:2"),
            ],
        );
        assert_eq!(
            told(leader),
            Ok(ClientReply::NotLeader {
                leader: Some((2, "127.0.0.1:2".to_string()))
            })
        );
        let failed = status(Code::Aborted, &[(ERROR_KIND, "failed")]);
        assert_eq!(told(failed), Ok(ClientReply::Failed("why".to_string())));
        let unauthorized = status(Code::Unauthenticated, &[(ERROR_KIND, "unauthorized")]);
        assert!(matches!(
            told(unauthorized),
            Err(ClientError::Unauthorized(_))
        ));
        // Raft stopped under the call: the write may have been committed.
        let stopping = status(Code::Unavailable, &[(ERROR_KIND, "stopping")]);
        assert!(matches!(told(stopping), Err(ClientError::NoReply(_))));

        // The node's gRPC layer refused the message: it came over the wire, nothing was done.
        let too_long = status(Code::OutOfRange, &[("content-type", "application/grpc")]);
        assert!(matches!(told(too_long), Ok(ClientReply::Failed(_))));
        // The same code made here, decoding a reply: the request was sent.
        let reply_too_long = status(Code::OutOfRange, &[]);
        assert!(matches!(told(reply_too_long), Err(ClientError::NoReply(_))));
        // The transport's failure after sending.
        let lost = status(Code::Unavailable, &[]);
        assert!(matches!(told(lost), Err(ClientError::NoReply(_))));
    }

    #[tokio::test]
    async fn a_node_that_cannot_be_reached_is_not_sent_to_and_an_oversized_write_not_sent() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let mut client = Client::new([addr.clone()]);
        let refused = client.send_to(&addr, ClientRequest::Status).await;
        assert!(matches!(refused, Err(ClientError::Io(_))), "{refused:?}");

        client.max_message = 1 << 10;
        let big = ClientRequest::Write(Request::Put {
            key: Blob::from("k"),
            value: Blob(vec![0; 2 << 10]),
        });
        match client.send_to(&addr, big).await {
            Ok(ClientReply::Failed(why)) => {
                assert!(why.contains("over the message limit"), "{why}")
            }
            other => panic!("an oversized write was not refused unsent: {other:?}"),
        }

        client.token = Some("not\na header".to_string());
        let refused = client.send_to(&addr, ClientRequest::Status).await;
        assert!(
            matches!(refused, Err(ClientError::Failed(_))),
            "{refused:?}"
        );
    }
}
