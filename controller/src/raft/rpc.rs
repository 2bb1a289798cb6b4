//! The quorum's private RPC: AppendEntries, Vote and InstallSnapshot
//! between controllers, and calls forwarded to the active controller.
//!
//! Framing, big-endian, one request then one response at a time per
//! connection:
//! ```text
//! request  := length u32, key i16 (= RPC_KEY), version i16 (= 1),
//!             cluster_id (length u8, utf-8), postcard(Request)
//! response := length u32, postcard(Response)
//! ```
//! A request from another cluster is answered `WrongCluster` and its
//! connection closed (see `cluster_id`). Version 0, which carried no
//! cluster id, is refused.
//! `RPC_KEY` is far outside Kafka's API keys, so the broker can tell these
//! connections from Kafka clients by the first frame once it mounts the
//! quorum on the controller listener.

use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
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
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::{debug, error, warn};

use super::cluster_id::{LogLimiter, ADVICE, MAX_LEN};
use super::departures::{ConnectionPeer, Departure};
use super::feed::ObserverFeed;
use super::{voters_of, TypeConfig};
use crate::service::{ControllerRequest, ControllerResponse, MetadataFetch, ServiceSlot};

/// The API key that marks a quorum RPC frame.
pub const RPC_KEY: i16 = 30_000;
const VERSION: i16 = 1;
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
    /// The request came from another cluster: the receiver's cluster id.
    WrongCluster {
        cluster_id: String,
    },
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

    /// Who sent the request, for the operator.
    fn sender_name(&self) -> String {
        match self {
            Self::Controller(ControllerRequest::FetchMetadata(f)) => {
                format!("broker {}", f.observer)
            }
            Self::Controller(ControllerRequest::Heartbeat(h)) => format!("broker {}", h.broker_id),
            Self::Controller(ControllerRequest::JoinQuorum(j)) => format!("controller {}", j.id),
            Self::Controller(_) => "a node".to_string(),
            _ => self
                .sender()
                .map_or_else(|| "a controller".to_string(), |id| format!("node {id}")),
        }
    }

    /// The request frame of a node of cluster `cluster_id` (at most
    /// [`MAX_LEN`] bytes, checked when the quorum starts).
    pub fn encode(&self, cluster_id: &str) -> Vec<u8> {
        let id = &cluster_id.as_bytes()[..cluster_id.len().min(MAX_LEN)];
        let mut out = Vec::with_capacity(64 + id.len());
        out.extend_from_slice(&RPC_KEY.to_be_bytes());
        out.extend_from_slice(&VERSION.to_be_bytes());
        out.push(id.len() as u8);
        out.extend_from_slice(id);
        postcard::to_extend(self, out).expect("in-memory serialization cannot fail")
    }

    /// The sender's cluster id and its request.
    fn decode(body: &[u8]) -> io::Result<(String, Self)> {
        let [k0, k1, v0, v1, rest @ ..] = body else {
            return Err(invalid("not a quorum RPC request"));
        };
        if i16::from_be_bytes([*k0, *k1]) != RPC_KEY {
            return Err(invalid("not a quorum RPC request"));
        }
        let version = i16::from_be_bytes([*v0, *v1]);
        if version != VERSION {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "quorum RPC version {version} from a peer, but this node speaks version \
                     {VERSION} (version 0 came from Ottla builds that sent no cluster id): run \
                     the same Ottla version on every node"
                ),
            ));
        }
        let (len, rest) = rest
            .split_first()
            .ok_or_else(|| invalid("quorum RPC request without a cluster id"))?;
        if rest.len() < usize::from(*len) {
            return Err(invalid("quorum RPC request truncated in its cluster id"));
        }
        let (id, request) = rest.split_at(usize::from(*len));
        let id = std::str::from_utf8(id).map_err(invalid)?.to_string();
        Ok((id, postcard::from_bytes(request).map_err(invalid)?))
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
    pub(super) id: u64,
    pub(super) cluster_id: Arc<str>,
    pub(super) raft: Raft<TypeConfig>,
    pub(super) service: ServiceSlot,
    pub(super) feed: Arc<ObserverFeed>,
    pub(super) refusals: Arc<LogLimiter>,
    /// Where a peer's closed connection is reported (see `departures`).
    pub(super) departures: mpsc::UnboundedSender<Departure>,
    /// Whether this node grants votes: a controller that joins a dynamic
    /// quorum with an empty log votes only once its log shows it with its
    /// own directory (see `join`). A voter whose disk was replaced lost the
    /// votes it gave, and must not give them again in the same terms.
    pub(super) voting: Arc<AtomicBool>,
}

/// How serving a connection ended.
enum Ended {
    /// The peer closed it, or it failed.
    ByPeer,
    /// This side closed it: the listener is stopping, or the peer belongs
    /// to another cluster.
    ByUs,
}

impl RpcHandler {
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
        let mut peer = ConnectionPeer::default();
        let ended = self
            .serve_frames(first, &mut read, &mut write, stop, &mut peer)
            .await;
        if let Err(e) = &ended {
            if e.kind() == io::ErrorKind::Unsupported {
                if self.refusals.allows("version") {
                    warn!("refusing a quorum RPC connection: {e}");
                }
            } else {
                debug!(error = %e, "quorum RPC connection closed");
            }
        }
        if !matches!(ended, Ok(Ended::ByUs)) {
            if let Some(departure) = peer.departed() {
                let _ = self.departures.send(departure);
            }
        }
    }

    async fn serve_frames<R, W>(
        &self,
        mut first: Option<Vec<u8>>,
        read: &mut R,
        write: &mut W,
        mut stop: std::pin::Pin<&mut impl Future<Output = ()>>,
        peer: &mut ConnectionPeer,
    ) -> io::Result<Ended>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        loop {
            let body = match first.take() {
                Some(body) => body,
                None => {
                    let next = tokio::select! {
                        () = &mut stop => return Ok(Ended::ByUs),
                        next = read_frame(read) => next?,
                    };
                    match next {
                        Some(body) => body,
                        None => return Ok(Ended::ByPeer),
                    }
                }
            };
            let (cluster_id, request) = Request::decode(&body)?;
            if *cluster_id != *self.cluster_id {
                self.refuse(&cluster_id, &request, write).await?;
                return Ok(Ended::ByUs);
            }
            if request.sender() == Some(self.id) {
                // Another process claims our id, or a voter's address points
                // at us: answering would corrupt openraft's state.
                warn!(
                    node = self.id,
                    "refusing a quorum RPC sent under this node's own id"
                );
                return Err(invalid("request from our own node id"));
            }
            peer.carried(&request);
            let response = match request {
                Request::Append(r) => Response::Append(self.raft.append_entries(r).await),
                Request::Vote(r) if !self.voting.load(Ordering::Acquire) => {
                    if self.refusals.allows("vote") {
                        warn!("not voting until this controller is known to the metadata quorum with its own metadata log directory");
                    }
                    Response::Vote(Ok(VoteResponse {
                        vote: r.vote,
                        vote_granted: false,
                        last_log_id: None,
                    }))
                }
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
    /// Answers a request from another cluster with this node's cluster id,
    /// so the sender can say what is wrong too.
    async fn refuse<W: AsyncWrite + Unpin>(
        &self,
        theirs: &str,
        request: &Request,
        write: &mut W,
    ) -> io::Result<()> {
        let sender = request.sender_name();
        if self.refusals.allows(&format!("{sender} {theirs}")) {
            error!(
                node = self.id,
                cluster_id = %self.cluster_id,
                peer_cluster_id = theirs,
                "refusing quorum RPCs from {sender}: it belongs to cluster {theirs}, this node to \
                 cluster {}; {ADVICE}",
                self.cluster_id
            );
        }
        let answer = Response::WrongCluster {
            cluster_id: self.cluster_id.to_string(),
        };
        write_frame(write, &answer.encode()).await
    }

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
        let update = self.feed.serve(fetch).await;
        let voters = voters_of(&self.raft.metrics().borrow());
        ControllerResponse::Metadata {
            term,
            leader: self.id,
            voters,
            update,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_the_senders_cluster_id() {
        let request = Request::Controller(ControllerRequest::DescribeQuorum);
        let frame = request.encode("MkU3OEVBNTcwNTJENDM2Qk");
        let (cluster_id, decoded) = Request::decode(&frame).unwrap();
        assert_eq!(cluster_id, "MkU3OEVBNTcwNTJENDM2Qk");
        assert!(matches!(
            decoded,
            Request::Controller(ControllerRequest::DescribeQuorum)
        ));
        // Cut inside the cluster id.
        assert!(Request::decode(&frame[..10]).is_err());
    }

    #[test]
    fn version_0_frames_without_a_cluster_id_are_refused() {
        let mut frame = RPC_KEY.to_be_bytes().to_vec();
        frame.extend_from_slice(&0i16.to_be_bytes());
        frame.extend(
            postcard::to_allocvec(&Request::Controller(ControllerRequest::DescribeQuorum)).unwrap(),
        );
        let e = Request::decode(&frame).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Unsupported);
        assert!(e.to_string().contains("run the same Ottla version"), "{e}");
    }
}
