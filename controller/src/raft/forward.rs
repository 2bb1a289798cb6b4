//! The client side of calls to the active controller: one connection per
//! kind of call, each reopened whenever the leader changes or an exchange
//! fails.

use std::sync::Arc;
use std::time::Duration;

use ottla_client::ClientSecurity;
use tokio::sync::Mutex;

use super::channel::Channel;
use super::rpc::{Request, Response};
use super::Node;
use crate::service::{ControllerRequest, ControllerResponse};

/// Calls to the active controller. Writes, heartbeats and metadata fetches
/// travel on separate connections, so a slow write never delays a
/// heartbeat and a fetch the leader holds delays neither.
pub(crate) struct ToLeader {
    writes: Forwarder,
    heartbeats: Forwarder,
    fetches: Forwarder,
    timeout: Duration,
}

impl ToLeader {
    pub fn new(security: &ClientSecurity, cluster_id: &Arc<str>, timeout: Duration) -> Self {
        let forwarder = || Forwarder::new(security.clone(), cluster_id.clone());
        Self {
            writes: forwarder(),
            heartbeats: forwarder(),
            fetches: forwarder(),
            timeout,
        }
    }

    /// Sends `request` to controller `target` at `node` (None: a bootstrap
    /// server, whose id is not known yet).
    pub async fn call(
        &self,
        target: Option<u64>,
        node: &Node,
        request: ControllerRequest,
    ) -> Result<ControllerResponse, String> {
        let (forwarder, ttl) = match &request {
            ControllerRequest::Heartbeat(_) => (&self.heartbeats, self.timeout),
            ControllerRequest::FetchMetadata(f) => (
                &self.fetches,
                self.timeout + Duration::from_millis(f.max_wait_ms.into()),
            ),
            ControllerRequest::Write { .. }
            | ControllerRequest::DescribeQuorum
            | ControllerRequest::JoinQuorum(_) => (&self.writes, self.timeout),
            // Two membership entries commit, and the new voter may first
            // have to catch up.
            ControllerRequest::AddVoter(_) | ControllerRequest::RemoveVoter(_) => {
                (&self.writes, self.timeout * 2)
            }
        };
        forwarder.call(target, node, request, ttl).await
    }
}

struct Forwarder {
    channel: Mutex<Option<Channel>>,
    security: ClientSecurity,
    cluster_id: Arc<str>,
}

impl Forwarder {
    fn new(security: ClientSecurity, cluster_id: Arc<str>) -> Self {
        Self {
            channel: Mutex::default(),
            security,
            cluster_id,
        }
    }

    /// Sends `request` to controller `target` at `node`. Calls through one
    /// forwarder are serialized.
    async fn call(
        &self,
        target: Option<u64>,
        node: &Node,
        request: ControllerRequest,
        ttl: Duration,
    ) -> Result<ControllerResponse, String> {
        let target = target.map_or_else(
            || "bootstrap server".into(),
            |id| format!("controller {id}"),
        );
        let mut slot = self.channel.lock().await;
        if !matches!(&*slot, Some(ch) if ch.node() == node) {
            let channel =
                Channel::new(node.clone(), self.security.clone(), self.cluster_id.clone());
            *slot = Some(channel);
        }
        let channel = slot.as_mut().expect("just set");
        let body = channel.encode(&Request::Controller(request));
        let result = channel.call(body, ttl).await;
        match result {
            Ok(Response::Controller(r)) => Ok(r),
            Ok(_) => {
                *slot = None;
                Err(format!("{target} answered with another RPC"))
            }
            Err(e) => {
                *slot = None;
                Err(format!("{target} at {node}: {e}"))
            }
        }
    }
}
