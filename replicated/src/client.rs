//! A client of the service: finds the leader and follows its redirects.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::net::TcpStream;

use crate::network::{ClientReply, ClientRequest, Consistency, Message, NodeStatus};
use crate::transport::{ClientTls, Stream};
use crate::wire::{read_frame, write_frame, DEFAULT_MAX_FRAME};
use crate::{NodeId, Request, Response};

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
/// sequence number, so a write whose reply was lost is sent again, and applied once.
pub struct Client {
    addrs: Vec<String>,
    leader: usize,
    connection: Option<(String, Stream)>,
    /// Tries (each up to every known node) before giving up on finding a leader.
    pub tries: u32,
    /// How long a request waits for its reply before it counts as lost.
    pub timeout: Duration,
    /// TLS to the nodes (their CA, and the client's certificate if it has one).
    pub tls: Option<ClientTls>,
    /// A token presented on every new connection, which lets the client write.
    pub token: Option<String>,
    /// The longest frame sent or taken.
    pub max_frame: u32,
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
            connection: None,
            tries: 60,
            timeout: Duration::from_secs(10),
            tls: None,
            token: None,
            max_frame: DEFAULT_MAX_FRAME,
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
        let lost = |e: String| ClientError::NoReply(format!("{addr}: {e}"));
        if self.connection.as_ref().is_none_or(|(a, _)| a != addr) {
            self.connection = None;
            let stream = self.connect(addr).await?;
            self.connection = Some((addr.to_string(), stream));
        }
        let (_, stream) = self.connection.as_mut().expect("connected above");
        let max = self.max_frame;
        let exchange = async {
            write_frame(stream, &Message::Client(request), max).await?;
            read_frame::<_, ClientReply>(stream, max)
                .await?
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))
        };
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(ClientReply::Unauthorized(why))) => Err(ClientError::Unauthorized(why)),
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => {
                self.connection = None;
                Err(lost(e.to_string()))
            }
            Err(_) => {
                self.connection = None;
                Err(lost(format!("no reply in {timeout:?}")))
            }
        }
    }

    /// A new connection to `addr`: over TLS when the client has it, its token presented.
    async fn connect(&self, addr: &str) -> Result<Stream, ClientError> {
        let io = |e: std::io::Error| ClientError::Io(format!("{addr}: {e}"));
        let connecting = async {
            let tcp = TcpStream::connect(addr).await.map_err(io)?;
            tcp.set_nodelay(true).map_err(io)?;
            let mut stream = match &self.tls {
                Some(tls) => tls.connect(tcp, addr).await.map_err(io)?,
                None => Stream::Plain(tcp),
            };
            if let Some(token) = &self.token {
                let max = self.max_frame;
                write_frame(&mut stream, &Message::Token(token.clone()), max)
                    .await
                    .map_err(io)?;
                match read_frame::<_, ClientReply>(&mut stream, max).await {
                    Ok(Some(ClientReply::Done)) => {}
                    Ok(Some(ClientReply::Unauthorized(why))) => {
                        return Err(ClientError::Unauthorized(why))
                    }
                    Ok(other) => return Err(ClientError::Unexpected(format!("{other:?}"))),
                    Err(e) => return Err(io(e)),
                }
            }
            Ok(stream)
        };
        match tokio::time::timeout(self.timeout, connecting).await {
            Ok(connected) => connected,
            Err(_) => Err(ClientError::Io(format!(
                "{addr}: no connection in {:?}",
                self.timeout
            ))),
        }
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

    pub async fn put(&mut self, key: &str, value: &str) -> Result<Response, ClientError> {
        self.write(Request::Put {
            key: key.to_string(),
            value: value.to_string(),
        })
        .await
    }

    /// Puts every pair in one write: one log entry, applied at once on every node.
    pub async fn put_many(
        &mut self,
        pairs: Vec<(String, String)>,
    ) -> Result<Response, ClientError> {
        self.write(Request::PutMany { pairs }).await
    }

    pub async fn delete(&mut self, key: &str) -> Result<Response, ClientError> {
        self.write(Request::Delete {
            key: key.to_string(),
        })
        .await
    }

    /// Sets `key` to `new` (`None` deletes it) if its value is `expected` (`None`: absent).
    /// The response says whether it swapped, and if not, the value it found.
    pub async fn compare_and_swap(
        &mut self,
        key: &str,
        expected: Option<&str>,
        new: Option<&str>,
    ) -> Result<Response, ClientError> {
        self.write(Request::Cas {
            key: key.to_string(),
            expected: expected.map(str::to_string),
            new: new.map(str::to_string),
        })
        .await
    }

    /// A linearizable read, through the leader.
    pub async fn get(&mut self, key: &str) -> Result<Option<String>, ClientError> {
        let request = ClientRequest::Read {
            key: key.to_string(),
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
        key: &str,
    ) -> Result<Option<String>, ClientError> {
        let request = ClientRequest::Read {
            key: key.to_string(),
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
