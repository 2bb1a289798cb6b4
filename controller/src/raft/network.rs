//! openraft's network: one client per peer (openraft creates one per
//! replication stream, per election and per linearizable read), each with
//! a lazily opened TCP connection that is dropped on any failure and
//! reopened by the next call. A client's healthy connection goes back to a
//! small pool when openraft drops the client, so a commit does not open
//! (and log in on) a connection per voter, and a leader's connection
//! closing means something to the follower (see `departures`).

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Timeout,
    Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::RPCTypes;
use ottla_client::ClientSecurity;
use parking_lot::Mutex;
use tracing::{error, warn};

use super::batches::now_ms;
use super::channel::{CallError, Channel};
use super::cluster_id::LogLimiter;
use super::rpc::{Request, Response, MAX_FRAME};
use super::{Node, TypeConfig};

/// When each peer last answered an AppendEntries or InstallSnapshot (wall
/// clock ms): the leader-side stand-in for KRaft's "last fetch time".
pub(crate) type Contacts = Arc<Mutex<BTreeMap<u64, i64>>>;

/// Open connections no client is using, by peer.
type IdleChannels = Arc<Mutex<HashMap<u64, Vec<Channel>>>>;

/// Idle connections kept per peer: openraft runs a replication stream, a
/// read check and an election's vote at once at most.
const IDLE_PER_PEER: usize = 4;

pub(crate) struct Network {
    id: u64,
    cluster_id: Arc<str>,
    contacts: Contacts,
    security: ClientSecurity,
    refusals: Arc<LogLimiter>,
    idle: IdleChannels,
}

impl Network {
    pub fn new(
        id: u64,
        cluster_id: Arc<str>,
        contacts: Contacts,
        security: ClientSecurity,
        refusals: Arc<LogLimiter>,
    ) -> Self {
        Self {
            id,
            cluster_id,
            contacts,
            security,
            refusals,
            idle: IdleChannels::default(),
        }
    }

    /// An idle open connection to `target` at `node`, or a new one.
    fn channel_to(&self, target: u64, node: &Node) -> Channel {
        let mut idle = self.idle.lock();
        let pooled = idle.get_mut(&target).and_then(|channels| {
            // A peer whose address changed gets new connections only.
            channels.retain_mut(|c| c.node() == node && c.still_connected());
            channels.pop()
        });
        pooled.unwrap_or_else(|| {
            Channel::new(node.clone(), self.security.clone(), self.cluster_id.clone())
        })
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &Node) -> Peer {
        Peer {
            id: self.id,
            target,
            channel: self.channel_to(target, node),
            contacts: self.contacts.clone(),
            refusals: self.refusals.clone(),
            idle: self.idle.clone(),
        }
    }
}

pub(crate) struct Peer {
    id: u64,
    target: u64,
    channel: Channel,
    contacts: Contacts,
    refusals: Arc<LogLimiter>,
    idle: IdleChannels,
}

impl Drop for Peer {
    fn drop(&mut self) {
        if !self.channel.is_open() {
            return;
        }
        let mut idle = self.idle.lock();
        let channels = idle.entry(self.target).or_default();
        if channels.len() < IDLE_PER_PEER {
            channels.push(self.channel.take_open());
        }
    }
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<u64, Node, RaftError<u64, E>>>;

impl Peer {
    async fn call(&mut self, body: Vec<u8>, ttl: Duration) -> Result<Response, CallError> {
        self.channel.call(body, ttl).await
    }

    fn failure<E: std::error::Error>(
        &self,
        e: CallError,
        action: RPCTypes,
        ttl: Duration,
    ) -> RPCError<u64, Node, RaftError<u64, E>> {
        match e {
            CallError::Connect(e) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Security(e) => {
                warn!(peer = self.target, "cannot log in to the controller: {e}");
                RPCError::Unreachable(Unreachable::new(&io::Error::other(e)))
            }
            CallError::Io(e) => RPCError::Network(NetworkError::new(&e)),
            e @ CallError::WrongCluster { .. } => {
                let peer = self.target;
                if self.refusals.allows(&format!("peer {peer}")) {
                    error!(peer, "controller {peer} refuses this node: {e}");
                }
                RPCError::Unreachable(Unreachable::new(&io::Error::other(e.to_string())))
            }
            CallError::Timeout => RPCError::Timeout(Timeout {
                action,
                id: self.id,
                target: self.target,
                timeout: ttl,
            }),
        }
    }

    fn remote<E: std::error::Error>(
        &self,
        e: RaftError<u64, E>,
    ) -> RPCError<u64, Node, RaftError<u64, E>> {
        RPCError::RemoteError(RemoteError::new(self.target, e))
    }

    fn mismatch<E: std::error::Error>(&self) -> RPCError<u64, Node, RaftError<u64, E>> {
        RPCError::Network(NetworkError::new(&io::Error::new(
            io::ErrorKind::InvalidData,
            "response does not match the request",
        )))
    }

    fn contacted(&self) {
        self.contacts.lock().insert(self.target, now_ms());
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>> {
        let entries = rpc.entries.len() as u64;
        let body = self.channel.encode(&Request::Append(rpc));
        if body.len() > MAX_FRAME && entries > 1 {
            // openraft retries at once with fewer entries.
            let fitting = entries * MAX_FRAME as u64 / body.len() as u64;
            return Err(PayloadTooLarge::new_entries_hint(fitting.max(1)).into());
        }
        let ttl = option.hard_ttl();
        match self.call(body, ttl).await {
            Ok(Response::Append(Ok(r))) => {
                self.contacted();
                Ok(r)
            }
            Ok(Response::Append(Err(e))) => Err(self.remote(e)),
            Ok(_) => Err(self.mismatch()),
            Err(e) => Err(self.failure(e, RPCTypes::AppendEntries, ttl)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, InstallSnapshotError> {
        let ttl = option.hard_ttl();
        let body = self.channel.encode(&Request::Snapshot(rpc));
        match self.call(body, ttl).await {
            Ok(Response::Snapshot(Ok(r))) => {
                self.contacted();
                Ok(r)
            }
            Ok(Response::Snapshot(Err(e))) => Err(self.remote(e)),
            Ok(_) => Err(self.mismatch()),
            Err(e) => Err(self.failure(e, RPCTypes::InstallSnapshot, ttl)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<u64>> {
        let ttl = option.hard_ttl();
        let body = self.channel.encode(&Request::Vote(rpc));
        match self.call(body, ttl).await {
            Ok(Response::Vote(Ok(r))) => Ok(r),
            Ok(Response::Vote(Err(e))) => Err(self.remote(e)),
            Ok(_) => Err(self.mismatch()),
            Err(e) => Err(self.failure(e, RPCTypes::Vote, ttl)),
        }
    }
}
