//! openraft's network: one client per peer (openraft creates one per
//! replication stream and per election), each with a lazily opened TCP
//! connection that is dropped on any failure and reopened by the next call.

use std::collections::BTreeMap;
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
use parking_lot::Mutex;
use tokio::net::TcpStream;

use super::batches::now_ms;
use super::rpc::{read_frame, write_frame, Request, Response, MAX_FRAME};
use super::{Node, TypeConfig};

/// When each peer last answered an AppendEntries or InstallSnapshot (wall
/// clock ms): the leader-side stand-in for KRaft's "last fetch time".
pub(crate) type Contacts = Arc<Mutex<BTreeMap<u64, i64>>>;

pub(crate) struct Network {
    id: u64,
    contacts: Contacts,
}

impl Network {
    pub fn new(id: u64, contacts: Contacts) -> Self {
        Self { id, contacts }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &Node) -> Peer {
        Peer {
            id: self.id,
            target,
            node: node.clone(),
            conn: None,
            contacts: self.contacts.clone(),
        }
    }
}

pub(crate) struct Peer {
    id: u64,
    target: u64,
    node: Node,
    conn: Option<TcpStream>,
    contacts: Contacts,
}

enum CallError {
    Connect(io::Error),
    Io(io::Error),
    Timeout,
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<u64, Node, RaftError<u64, E>>>;

impl Peer {
    /// One request/response exchange within `ttl`. The connection is taken
    /// out for the exchange, so a call abandoned half way (timeout, or
    /// openraft dropping the future) never leaves a response in the pipe.
    async fn call(&mut self, body: Vec<u8>, ttl: Duration) -> Result<Response, CallError> {
        let exchange = async {
            let mut conn = match self.conn.take() {
                Some(conn) => conn,
                None => {
                    let conn = TcpStream::connect((self.node.host.as_str(), self.node.port))
                        .await
                        .map_err(CallError::Connect)?;
                    let _ = conn.set_nodelay(true);
                    conn
                }
            };
            write_frame(&mut conn, &body).await.map_err(CallError::Io)?;
            let reply = read_frame(&mut conn)
                .await
                .and_then(|r| r.ok_or_else(|| io::ErrorKind::UnexpectedEof.into()))
                .and_then(|body| Response::decode(&body))
                .map_err(CallError::Io)?;
            self.conn = Some(conn);
            Ok(reply)
        };
        tokio::time::timeout(ttl, exchange)
            .await
            .unwrap_or(Err(CallError::Timeout))
    }

    fn failure<E: std::error::Error>(
        &self,
        e: CallError,
        action: RPCTypes,
        ttl: Duration,
    ) -> RPCError<u64, Node, RaftError<u64, E>> {
        match e {
            CallError::Connect(e) => RPCError::Unreachable(Unreachable::new(&e)),
            CallError::Io(e) => RPCError::Network(NetworkError::new(&e)),
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
        let body = Request::Append(rpc).encode();
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
        match self.call(Request::Snapshot(rpc).encode(), ttl).await {
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
        match self.call(Request::Vote(rpc).encode(), ttl).await {
            Ok(Response::Vote(Ok(r))) => Ok(r),
            Ok(Response::Vote(Err(e))) => Err(self.remote(e)),
            Ok(_) => Err(self.mismatch()),
            Err(e) => Err(self.failure(e, RPCTypes::Vote, ttl)),
        }
    }
}
