//! Connections, plain or over TLS (rustls), and who is on the other end.
//!
//! With TLS, every node holds a certificate signed by the cluster's node CA, and nodes verify
//! each other's (mutual TLS): a node's port takes Raft's RPCs only from a peer whose
//! certificate the node CA signed. Clients verify the node's certificate; they may present
//! one of their own, signed by the client CA (a CA of its own, so that no client certificate
//! passes for a node's), or a token the nodes are configured with, and without either may
//! read but not write or change the membership (`docs/replication.md`, "Security").

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tonic::transport::server::Connected;
use tonic::transport::{Channel, Endpoint, Uri};

/// A connection, plain or TLS, either side.
pub enum Stream {
    Plain(TcpStream),
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// A connection a node accepted over TLS, and who presented what.
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>, Peer),
}

/// What a request's handler learns of its connection (in the request's extensions): who is on
/// the other end.
impl Connected for Stream {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        match self {
            Stream::Server(_, peer) => *peer,
            Stream::Plain(_) | Stream::Client(_) => Peer::Anonymous,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Server(s, _) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Server(s, _) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Server(s, _) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Client(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Server(s, _) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// PEM files of a CA, and optionally of a certificate and its key.
fn certificates(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let pem = std::fs::read(path).map_err(|e| in_file(path, e))?;
    let certs = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| in_file(path, e))?;
    if certs.is_empty() {
        return Err(in_file(path, "no certificate in it"));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> io::Result<PrivateKeyDer<'static>> {
    let pem = std::fs::read(path).map_err(|e| in_file(path, e))?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| in_file(path, e))?
        .ok_or_else(|| in_file(path, "no private key in it"))
}

fn in_file(path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}: {e}", path.display()),
    )
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn tls_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}

/// The CA's roots.
fn roots(ca: &[CertificateDer<'static>]) -> io::Result<Arc<rustls::RootCertStore>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in ca {
        roots.add(cert.clone()).map_err(tls_error)?;
    }
    Ok(Arc::new(roots))
}

/// Who is on the other end of a connection a node accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// No certificate: may read, or write with a token.
    Anonymous,
    /// A certificate the client CA signed: may read and write.
    Client,
    /// A certificate the node CA signed: a node of the cluster, which may send Raft's RPCs.
    Node,
}

/// A node's TLS: the node CA, the client CA if clients hold certificates, and the node's own
/// certificate and key.
#[derive(Clone)]
pub struct NodeTls {
    acceptor: tokio_rustls::TlsAcceptor,
    connector: tokio_rustls::TlsConnector,
    /// Checks a presented certificate against the node CA alone.
    nodes: Arc<dyn rustls::server::danger::ClientCertVerifier>,
}

impl NodeTls {
    /// From PEM files: the node CA's certificate, the client CA's (if clients present
    /// certificates), the node's certificate (chain) and its key.
    pub fn from_pem_files(
        ca: &Path,
        client_ca: Option<&Path>,
        cert: &Path,
        key: &Path,
    ) -> io::Result<NodeTls> {
        let node_ca = certificates(ca)?;
        let (chain, key) = (certificates(cert)?, private_key(key)?);
        let node_roots = roots(&node_ca)?;
        let mut either = node_ca;
        if let Some(client_ca) = client_ca {
            either.extend(certificates(client_ca)?);
        }
        // Clients may come without a certificate (reads, or a token); one they present
        // must be one of the two CAs'.
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots(&either)?,
            provider(),
        )
        .allow_unauthenticated()
        .build()
        .map_err(tls_error)?;
        let nodes = rustls::server::WebPkiClientVerifier::builder_with_provider(
            node_roots.clone(),
            provider(),
        )
        .build()
        .map_err(tls_error)?;
        let roots = node_roots;
        let mut server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(tls_error)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(tls_error)?;
        server.alpn_protocols = vec![H2.to_vec()];
        let mut client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(tls_error)?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(tls_error)?;
        client.alpn_protocols = vec![H2.to_vec()];
        Ok(NodeTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
            connector: tokio_rustls::TlsConnector::from(Arc::new(client)),
            nodes,
        })
    }

    /// Accepts a connection: the TLS stream, and who presented what (a certificate neither
    /// CA signed fails the handshake).
    pub async fn accept(&self, stream: TcpStream) -> io::Result<Stream> {
        let tls = self.acceptor.accept(stream).await?;
        let peer = match tls.get_ref().1.peer_certificates() {
            Some([end, intermediates @ ..]) => {
                let now = rustls::pki_types::UnixTime::now();
                match self.nodes.verify_client_cert(end, intermediates, now) {
                    Ok(_) => Peer::Node,
                    Err(_) => Peer::Client,
                }
            }
            _ => Peer::Anonymous,
        };
        Ok(Stream::Server(Box::new(tls), peer))
    }

    /// What connects to peers, with this node's certificate.
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        self.connector.clone()
    }
}

/// A client's TLS: the cluster's CA, and optionally a certificate of the client's own.
#[derive(Clone)]
pub struct ClientTls {
    connector: tokio_rustls::TlsConnector,
}

impl ClientTls {
    /// From PEM files: the CA's certificate, and the client's certificate and key if it has
    /// them.
    pub fn from_pem_files(ca: &Path, identity: Option<(&Path, &Path)>) -> io::Result<ClientTls> {
        let roots = roots(&certificates(ca)?)?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(tls_error)?
            .with_root_certificates(roots);
        let mut config = match identity {
            Some((cert, key)) => builder
                .with_client_auth_cert(certificates(cert)?, private_key(key)?)
                .map_err(tls_error)?,
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![H2.to_vec()];
        Ok(ClientTls {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    /// What connects to nodes, with the client's certificate if it has one.
    pub fn connector(&self) -> tokio_rustls::TlsConnector {
        self.connector.clone()
    }
}

/// The ALPN name of HTTP/2, which gRPC runs on: other gRPC implementations ask for it.
const H2: &[u8] = b"h2";

/// A connection that could not be made: no request went out on it. Found in the error chain
/// of a failed call, it tells "not sent" apart from "sent, and no reply".
#[derive(Debug)]
pub(crate) struct NotConnected(pub io::Error);

impl std::fmt::Display for NotConnected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no connection: {}", self.0)
    }
}

impl std::error::Error for NotConnected {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Whether `error`, or any error under it, is a [`NotConnected`].
pub(crate) fn never_connected(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.is::<NotConnected>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// How a gRPC channel reaches a node: from which local address, over TLS with which
/// identity, and how long a connection may take.
#[derive(Clone)]
pub struct Dial {
    pub source: Option<std::net::IpAddr>,
    pub tls: Option<tokio_rustls::TlsConnector>,
    pub timeout: Duration,
}

impl Dial {
    /// A gRPC channel to `addr`. It connects at its first call, and again at the next call
    /// after its connection failed; calls share the connection (HTTP/2 streams).
    pub fn channel(&self, addr: &str) -> io::Result<Channel> {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{addr}: {e}")))?
            .http2_keep_alive_interval(crate::server::KEEPALIVE_INTERVAL)
            .keep_alive_timeout(crate::server::KEEPALIVE_TIMEOUT);
        let (dial, addr) = (self.clone(), addr.to_string());
        let connector = tower::service_fn(move |_: Uri| {
            let (dial, addr) = (dial.clone(), addr.clone());
            async move {
                let connecting = tokio::time::timeout(dial.timeout, dial.connect(&addr));
                match connecting.await {
                    Ok(Ok(stream)) => Ok(hyper_util::rt::TokioIo::new(stream)),
                    Ok(Err(e)) => Err(NotConnected(e)),
                    Err(_) => Err(NotConnected(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("{addr}: no connection in {:?}", dial.timeout),
                    ))),
                }
            }
        });
        Ok(endpoint.connect_with_connector_lazy(connector))
    }

    /// A connection to `addr`: TCP from the source address, then TLS if configured.
    async fn connect(&self, addr: &str) -> io::Result<Stream> {
        let stream = match self.source {
            None => TcpStream::connect(addr).await?,
            Some(ip) => {
                let target = tokio::net::lookup_host(addr)
                    .await?
                    .find(|a| a.is_ipv4() == ip.is_ipv4())
                    .ok_or_else(|| io::Error::other(format!("{addr}: no address to reach")))?;
                let socket = match ip {
                    std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
                    std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
                };
                socket.bind(std::net::SocketAddr::new(ip, 0))?;
                socket.connect(target).await?
            }
        };
        stream.set_nodelay(true)?;
        let Some(connector) = &self.tls else {
            return Ok(Stream::Plain(stream));
        };
        // The server's certificate must name the host (a name or an IP address).
        let host = match addr.rsplit_once(':') {
            Some((host, _)) => host.trim_start_matches('[').trim_end_matches(']'),
            None => addr,
        };
        let name = ServerName::try_from(host.to_string()).map_err(tls_error)?;
        let tls = connector.connect(name, stream).await?;
        Ok(Stream::Client(Box::new(tls)))
    }
}

/// Whether `given` is one of `tokens`, compared in time independent of where they differ.
pub fn token_matches(tokens: &[String], given: &str) -> bool {
    tokens.iter().any(|t| {
        t.len() == given.len()
            && t.bytes()
                .zip(given.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    })
}
