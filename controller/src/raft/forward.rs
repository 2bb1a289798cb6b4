//! The client side of calls to the active controller: one connection per
//! kind of call, each reopened whenever the leader changes or an exchange
//! fails.

use std::sync::Arc;
use std::time::Duration;

use ottla_protocol::client_security::ClientSecurity;
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

    /// Sends `request` to controller `target` at `node`.
    pub async fn call(
        &self,
        target: u64,
        node: &Node,
        request: ControllerRequest,
    ) -> Result<ControllerResponse, String> {
        let (forwarder, ttl) = match &request {
            ControllerRequest::Heartbeat(_) => (&self.heartbeats, self.timeout),
            ControllerRequest::FetchMetadata(f) => (
                &self.fetches,
                self.timeout + Duration::from_millis(f.max_wait_ms.into()),
            ),
            ControllerRequest::Write { .. } | ControllerRequest::DescribeQuorum => {
                (&self.writes, self.timeout)
            }
        };
        forwarder.call(target, node, request, ttl).await
    }
}

struct Forwarder {
    channel: Mutex<Option<(u64, Channel)>>,
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
        target: u64,
        node: &Node,
        request: ControllerRequest,
        ttl: Duration,
    ) -> Result<ControllerResponse, String> {
        let mut slot = self.channel.lock().await;
        if !matches!(&*slot, Some((id, ch)) if *id == target && ch.node() == node) {
            let channel =
                Channel::new(node.clone(), self.security.clone(), self.cluster_id.clone());
            *slot = Some((target, channel));
        }
        let (_, channel) = slot.as_mut().expect("just set");
        let body = channel.encode(&Request::Controller(request));
        let result = channel.call(body, ttl).await;
        match result {
            Ok(Response::Controller(r)) => Ok(r),
            Ok(_) => {
                *slot = None;
                Err(format!("controller {target} answered with another RPC"))
            }
            Err(e) => {
                *slot = None;
                Err(format!("controller {target} at {node}: {e}"))
            }
        }
    }
}
