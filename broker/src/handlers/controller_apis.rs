//! The Kafka APIs a controller listener serves besides SASL, as Kafka's
//! ControllerApis serves admin clients given `--bootstrap-controller`
//! (`kafka-metadata-quorum.sh`): DescribeCluster (this controller),
//! DescribeQuorum, AddRaftVoter and RemoveRaftVoter, authorized on the
//! cluster as on a broker listener. They run on controller-only nodes too,
//! which have no broker; the voter changes go to the active controller.

use std::sync::{Arc, OnceLock};

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, RequestHeader, RequestKind};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::acls::operation::{ALTER, DESCRIBE};
use ottla_controller::Controller;
use ottla_protocol::api_versions::ApiTableError;

use crate::apis::describe_cluster::{self, CONTROLLERS};
use crate::apis::describe_quorum::{self, QuorumContext};
use crate::apis::raft_voters;
use crate::authorize::{cluster, gate_on_controller, Gate};
use crate::blocking::blocking;
use crate::handlers::served::served_apis;
use crate::handlers::HandlerRegistry;
use crate::network::{HandlerFuture, RequestContext, RequestHandler, Response};
use crate::security::authorizer::Authorizer;

served_apis! {
    with (node: &Arc<ControllerNode>, ctx: &RequestContext, v, listener, r; access, args);

    DescribeCluster 0..=2,
        gate cluster::describe_cluster(access, r),
        run describe_cluster::answer(v, r, CONTROLLERS, &node.cluster_id, node.node_id, || {
            node.described(&listener)
        });
    DescribeQuorum 0..=2,
        gate cluster::require(access, v, DESCRIBE, r.into()),
        run blocking(node, move |n| describe_quorum::handle(&n.quorum(), v, r)).await?;
    AddRaftVoter 0..=0,
        gate cluster::require(access, v, ALTER, r.into()),
        run blocking(node, move |n| raft_voters::add(&n.quorum(), v, r)).await?;
    RemoveRaftVoter 0..=0,
        gate cluster::require(access, v, ALTER, r.into()),
        run blocking(node, move |n| raft_voters::remove(&n.quorum(), v, r)).await?;
}

/// This node as its controller listeners' APIs see it.
pub struct ControllerNode {
    pub node_id: i32,
    pub cluster_id: String,
    pub controller: Arc<Controller>,
    /// The first controller listener's name, the one voters are reached on.
    pub controller_listener: String,
    /// Where each controller listener is advertised: (name, host, port).
    pub endpoints: Vec<(String, String, u16)>,
    pub rack: Option<String>,
    pub authorizer: Option<Arc<Authorizer>>,
}

impl ControllerNode {
    fn quorum(&self) -> QuorumContext<'_> {
        QuorumContext {
            controller: &self.controller,
            cluster_id: &self.cluster_id,
            controller_listener: &self.controller_listener,
        }
    }

    /// This controller at its endpoint on `listener`: an admin client sends
    /// it everything, and it forwards what the active controller must do.
    fn described(&self, listener: &str) -> Vec<DescribeClusterBroker> {
        self.endpoints
            .iter()
            .filter(|(name, _, _)| name == listener)
            .map(|(_, host, port)| {
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(self.node_id))
                    .with_host(StrBytes::from_string(host.clone()))
                    .with_port(i32::from(*port))
                    .with_rack(self.rack.clone().map(StrBytes::from_string))
            })
            .collect()
    }
}

/// Filled in once the controller has started.
pub type ControllerSlot = Arc<OnceLock<Arc<ControllerNode>>>;

pub fn register(registry: &mut HandlerRegistry, slot: ControllerSlot) -> Result<(), ApiTableError> {
    registry.register_all(SERVED, Arc::new(ControllerApis { node: slot }))
}

struct ControllerApis {
    node: ControllerSlot,
}

impl RequestHandler for ControllerApis {
    fn handle<'a>(
        &'a self,
        ctx: &'a RequestContext,
        _header: RequestHeader,
        body: RequestKind,
    ) -> HandlerFuture<'a> {
        Box::pin(async move {
            let node = self
                .node
                .get()
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("request before the controller was started"))?;
            let image = node.controller.image();
            let gated = gate_on_controller(node.authorizer.clone(), image, ctx, body, gate);
            let (body, patch) = match gated {
                Gate::Pass(body, patch) => (body, patch),
                Gate::Answer(response) => return Ok(Response::Message(response)),
                Gate::NoRule => anyhow::bail!("{:?} has no authorization rule", ctx.api),
            };
            let listener = ctx.listener.to_string();
            let Some(mut response) = run(&node, ctx, ctx.api_version, listener, body).await? else {
                anyhow::bail!("{:?} gave no response", ctx.api);
            };
            if let Some(patch) = patch {
                patch(&mut response);
            }
            Ok(Response::Message(response))
        })
    }
}
