//! The quorum's private RPC: AppendEntries, Vote and InstallSnapshot
//! between controllers, and calls forwarded to the active controller.
//!
//! Framing, big-endian, one request then one response at a time per
//! connection:
//! ```text
//! request  := length u32, key i16 (= RPC_KEY), version i16, postcard(Request)
//! response := length u32, postcard(Response)
//! ```
//! `RPC_KEY` is far outside Kafka's API keys, so the broker can tell these
//! connections from Kafka clients by the first frame once it mounts the
//! quorum on the controller listener.

use std::future::Future;
use std::io;
use std::sync::Arc;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::Raft;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tracing::{debug, warn};

use super::feed::ObserverFeed;
use super::TypeConfig;
use crate::service::{ControllerRequest, ControllerResponse, MetadataFetch, ServiceSlot};

/// The API key that marks a quorum RPC frame.
pub const RPC_KEY: i16 = 30_000;
const VERSION: i16 = 0;
/// Largest frame either side accepts. Writes are capped well below it, and
/// AppendEntries batches above it are split (see `network`).
pub(crate) const MAX_FRAME: usize = 16 << 20;

#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Request {
    Append(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<u64>),
    Snapshot(InstallSnapshotRequest<TypeConfig>),
    /// A call for the active controller (see `crate::service`).
    Controller(ControllerRequest),
}

/// Errors travel as openraft's own, so the sender reacts to them as it
/// would locally (a snapshot mismatch restarts the transfer, for one).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Response {
    Append(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    Snapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
    Controller(ControllerResponse),
}

impl Request {
    /// The node that sent the request (the leader or the candidate).
    fn sender(&self) -> Option<u64> {
        let vote = match self {
            Self::Append(r) => &r.vote,
            Self::Vote(r) => &r.vote,
            Self::Snapshot(r) => &r.vote,
            Self::Controller(_) => return None,
        };
        vote.leader_id.voted_for()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(&RPC_KEY.to_be_bytes());
        out.extend_from_slice(&VERSION.to_be_bytes());
        postcard::to_extend(self, out).expect("in-memory serialization cannot fail")
    }

    fn decode(body: &[u8]) -> io::Result<Self> {
        match body {
            [k0, k1, v0, v1, rest @ ..]
                if i16::from_be_bytes([*k0, *k1]) == RPC_KEY
                    && i16::from_be_bytes([*v0, *v1]) == VERSION =>
            {
                postcard::from_bytes(rest).map_err(invalid)
            }
            _ => Err(invalid("not a quorum RPC request")),
        }
    }
}

impl Response {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("in-memory serialization cannot fail")
    }

    pub fn decode(body: &[u8]) -> io::Result<Self> {
        postcard::from_bytes(body).map_err(invalid)
    }
}

fn invalid(e: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

pub(crate) async fn write_frame(w: &mut (impl AsyncWrite + Unpin), body: &[u8]) -> io::Result<()> {
    if body.len() > MAX_FRAME {
        return Err(invalid(format!(
            "frame of {} bytes is too large",
            body.len()
        )));
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(body);
    w.write_all(&frame).await?;
    w.flush().await
}

/// The next frame's body, or None when the peer closed the connection
/// between frames.
pub(crate) async fn read_frame(r: &mut (impl AsyncRead + Unpin)) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(invalid(format!("frame of {len} bytes is too large")));
    }
    // Memory follows the bytes received, not the length a peer claims.
    let mut body = Vec::new();
    r.take(len as u64).read_to_end(&mut body).await?;
    if body.len() < len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(Some(body))
}

/// Answers quorum RPCs, observers' fetches, and calls for the active
/// controller, for one node.
#[derive(Clone)]
pub struct RpcHandler {
    id: u64,
    raft: Raft<TypeConfig>,
    service: ServiceSlot,
    feed: Arc<ObserverFeed>,
}

impl RpcHandler {
    pub(crate) fn new(
        id: u64,
        raft: Raft<TypeConfig>,
        service: ServiceSlot,
        feed: Arc<ObserverFeed>,
    ) -> Self {
        Self {
            id,
            raft,
            service,
            feed,
        }
    }

    /// Serves requests on one connection until the peer closes it, sends
    /// something that is not a quorum request, or `stop` completes (the
    /// listener is shutting down): a request being answered then is
    /// answered first, a connection waiting for its next request closes at
    /// once. `first` is a request frame already read from the connection
    /// (by the listener that recognised the peer as a controller).
    pub async fn serve_connection<R, W>(
        self,
        first: Option<Vec<u8>>,
        mut read: R,
        mut write: W,
        stop: impl Future<Output = ()>,
    ) where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let stop = std::pin::pin!(stop);
        if let Err(e) = self.serve_frames(first, &mut read, &mut write, stop).await {
            debug!(error = %e, "quorum RPC connection closed");
        }
    }

    async fn serve_frames<R, W>(
        &self,
        mut first: Option<Vec<u8>>,
        read: &mut R,
        write: &mut W,
        mut stop: std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        loop {
            let body = match first.take() {
                Some(body) => body,
                None => {
                    let next = tokio::select! {
                        () = &mut stop => return Ok(()),
                        next = read_frame(read) => next?,
                    };
                    match next {
                        Some(body) => body,
                        None => return Ok(()),
                    }
                }
            };
            let request = Request::decode(&body)?;
            if request.sender() == Some(self.id) {
                // Another process claims our id, or a voter's address points
                // at us: answering would corrupt openraft's state.
                warn!(
                    node = self.id,
                    "refusing a quorum RPC sent under this node's own id"
                );
                return Err(invalid("request from our own node id"));
            }
            let response = match request {
                Request::Append(r) => Response::Append(self.raft.append_entries(r).await),
                Request::Vote(r) => Response::Vote(self.raft.vote(r).await),
                Request::Snapshot(r) => Response::Snapshot(self.raft.install_snapshot(r).await),
                Request::Controller(ControllerRequest::FetchMetadata(fetch)) => {
                    Response::Controller(self.serve_fetch(fetch).await)
                }
                Request::Controller(r) => Response::Controller(match self.service.get() {
                    Some(service) => service.call(r).await,
                    None => ControllerResponse::NotLeader,
                }),
            };
            write_frame(write, &response.encode()).await?;
        }
    }
}

impl RpcHandler {
    /// Observers fetch from the leader, as KRaft's do.
    async fn serve_fetch(&self, fetch: MetadataFetch) -> ControllerResponse {
        let (leader, term) = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            (m.current_leader, m.current_term)
        };
        if leader != Some(self.id) {
            return ControllerResponse::NotLeader;
        }
        self.feed.serve(fetch, term).await
    }
}

/// Accepts connections on `listener` and serves each on its own task.
/// Dropping (aborting) the returned future closes them all.
pub(crate) async fn serve(listener: TcpListener, handler: RpcHandler) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    debug!(%peer, "quorum RPC connection");
                    let _ = stream.set_nodelay(true);
                    let (read, write) = stream.into_split();
                    // Dropping this future closes the connections instead.
                    let stop = std::future::pending();
                    connections.spawn(handler.clone().serve_connection(None, read, write, stop));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off a little.
                    warn!(error = %e, "accepting a quorum RPC connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
            Some(_) = connections.join_next() => {}
        }
    }
}
