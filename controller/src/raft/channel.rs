//! One lazily opened connection to a controller, for request/response
//! exchanges over the quorum RPC framing. The connection is secured as the
//! controller listener asks (TLS, SASL) before its first quorum frame.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use ottla_client::ClientSecurity;
use ottla_client::{ClientError, KafkaClient};
use tokio::io::{AsyncRead, AsyncWrite};

use super::cluster_id::ADVICE;
use super::rpc::{read_frame, write_frame, Request, Response, MAX_FRAME};
use super::Node;

/// The client id quorum connections log in with.
const CLIENT_ID: &str = "ottla-quorum";

pub(crate) enum CallError {
    Connect(io::Error),
    /// TLS handshake or SASL login refused: retrying soon will not help.
    Security(String),
    Io(io::Error),
    Timeout,
    /// The peer belongs to another cluster (`theirs`).
    WrongCluster {
        ours: Arc<str>,
        theirs: String,
    },
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Connect(e) => write!(f, "cannot connect: {e}"),
            Self::Security(e) => write!(f, "{e}"),
            Self::Io(e) => write!(f, "{e}"),
            Self::Timeout => write!(f, "timed out"),
            Self::WrongCluster { ours, theirs } => write!(
                f,
                "it belongs to cluster {theirs}, this node to cluster {ours}; {ADVICE}"
            ),
        }
    }
}

type Reader = Box<dyn AsyncRead + Send + Sync + Unpin>;
type Writer = Box<dyn AsyncWrite + Send + Sync + Unpin>;

pub(crate) struct Channel {
    node: Node,
    security: ClientSecurity,
    cluster_id: Arc<str>,
    conn: Option<(Reader, Writer)>,
}

impl Channel {
    pub fn new(node: Node, security: ClientSecurity, cluster_id: Arc<str>) -> Self {
        Self {
            node,
            security,
            cluster_id,
            conn: None,
        }
    }

    /// `request` as this node's frame (it carries the cluster id).
    pub fn encode(&self, request: &Request) -> Vec<u8> {
        request.encode(&self.cluster_id)
    }

    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Whether the channel holds a connection that has served its last
    /// exchange completely.
    pub fn is_open(&self) -> bool {
        self.conn.is_some()
    }

    /// Whether an idle connection is still up: the peer has not closed it
    /// (a restarted peer closed all of them) nor sent anything unasked.
    /// Drops it if not.
    pub fn still_connected(&mut self) -> bool {
        let Some((read, _)) = &mut self.conn else {
            return false;
        };
        let mut byte = [0u8; 1];
        let mut buf = tokio::io::ReadBuf::new(&mut byte);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let idle = std::pin::Pin::new(read)
            .poll_read(&mut cx, &mut buf)
            .is_pending();
        if !idle {
            self.conn = None;
        }
        idle
    }

    /// Takes the open connection, leaving this channel to connect afresh.
    pub fn take_open(&mut self) -> Channel {
        Channel {
            node: self.node.clone(),
            security: self.security.clone(),
            cluster_id: self.cluster_id.clone(),
            conn: self.conn.take(),
        }
    }

    /// One request/response exchange within `ttl`. The connection is taken
    /// out for the exchange, so a call abandoned half way (timeout, or the
    /// caller dropping the future) never leaves a response in the pipe.
    pub async fn call(&mut self, body: Vec<u8>, ttl: Duration) -> Result<Response, CallError> {
        let exchange = async {
            let (mut read, mut write) = match self.conn.take() {
                Some(conn) => conn,
                None => self.connect(ttl).await?,
            };
            write_frame(&mut write, &body)
                .await
                .map_err(CallError::Io)?;
            let reply = read_frame(&mut read)
                .await
                .and_then(|r| r.ok_or_else(|| io::ErrorKind::UnexpectedEof.into()))
                .and_then(|body| Response::decode(&body))
                .map_err(CallError::Io)?;
            if let Response::WrongCluster { cluster_id } = reply {
                // The peer closes the connection after this answer.
                return Err(CallError::WrongCluster {
                    ours: self.cluster_id.clone(),
                    theirs: cluster_id,
                });
            }
            self.conn = Some((read, write));
            Ok(reply)
        };
        tokio::time::timeout(ttl, exchange)
            .await
            .unwrap_or(Err(CallError::Timeout))
    }

    /// Connects, then does the TLS handshake and SASL login if asked: the
    /// same steps as a Kafka client's, so the controller listener serves
    /// both on one port.
    async fn connect(&self, ttl: Duration) -> Result<(Reader, Writer), CallError> {
        let client = KafkaClient::connect_with(
            &self.node.host,
            self.node.port,
            CLIENT_ID,
            MAX_FRAME,
            ttl,
            &self.security,
        )
        .await
        .map_err(|e| match e {
            ClientError::Connect { source, .. } => CallError::Connect(source),
            ClientError::Timeout { .. } => CallError::Timeout,
            ClientError::Security { .. } => CallError::Security(e.to_string()),
            other => CallError::Io(io::Error::other(other.to_string())),
        })?;
        let (read, write) = client.into_stream();
        Ok((Box::new(read), write))
    }
}
