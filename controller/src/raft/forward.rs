//! The client side of calls to the active controller: one connection,
//! reopened whenever the leader changes or an exchange fails.

use std::time::Duration;

use ottla_protocol::client_security::ClientSecurity;
use tokio::sync::Mutex;

use super::channel::Channel;
use super::rpc::{Request, Response};
use super::Node;
use crate::service::{ControllerRequest, ControllerResponse};

pub(crate) struct Forwarder {
    channel: Mutex<Option<(u64, Channel)>>,
    security: ClientSecurity,
}

impl Forwarder {
    pub fn new(security: ClientSecurity) -> Self {
        Self {
            channel: Mutex::default(),
            security,
        }
    }

    /// Sends `request` to controller `target` at `node`. Calls through one
    /// forwarder are serialized: keep heartbeats and writes on separate ones.
    pub async fn call(
        &self,
        target: u64,
        node: &Node,
        request: ControllerRequest,
        ttl: Duration,
    ) -> Result<ControllerResponse, String> {
        let mut slot = self.channel.lock().await;
        if !matches!(&*slot, Some((id, ch)) if *id == target && ch.node() == node) {
            *slot = Some((target, Channel::new(node.clone(), self.security.clone())));
        }
        let (_, channel) = slot.as_mut().expect("just set");
        let result = channel
            .call(Request::Controller(request).encode(), ttl)
            .await;
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
