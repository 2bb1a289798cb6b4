//! Authorization of every client-facing API, in one place per API and in
//! front of the handlers, which stay unaware of ACLs.
//!
//! A gate looks at a request with the requester's [`Access`] and either
//! answers it outright (nothing in it is allowed: a group the principal may
//! not read, a cluster operation it may not perform), or lets the allowed
//! part through: resources that fail their check are taken out of the
//! request and a [`Patch`] adds their errors (TOPIC_AUTHORIZATION_FAILED,
//! ...) to the handler's response, as Kafka answers them. The patch also
//! fills in authorized-operations fields. With the authorizer off every
//! request passes unchanged.
//!
//! Each API names its gate where it is registered (`crate::handlers`'s
//! `served_apis!`); the gates live here, one module per kind of resource.

pub mod cluster;
pub mod configs;
pub mod groups;
#[cfg(test)]
mod matrix;
pub mod metadata;
pub mod share;
#[cfg(test)]
mod tests;
pub mod topics;
pub mod txn;

use std::sync::Arc;

use kafka_protocol::messages::{RequestKind, ResponseKind};

use crate::broker::Broker;
use crate::network::RequestContext;
use ottla_controller::MetadataImage;

use crate::security::authorizer::{Access, Authorizer};

/// Adds the refused resources' errors to the handler's response.
pub type Patch = Box<dyn FnOnce(&mut ResponseKind) + Send>;

pub enum Gate {
    /// Run the handler on this (possibly reduced) request, then patch.
    Pass(RequestKind, Option<Patch>),
    /// Nothing to run: the answer.
    Answer(ResponseKind),
    /// No authorization rule exists for this API: refuse to serve it.
    NoRule,
}

/// A patch for responses of one kind.
macro_rules! patch {
    ($kind:ident, $f:expr) => {
        Some(
            Box::new(move |resp: &mut ::kafka_protocol::messages::ResponseKind| {
                if let ::kafka_protocol::messages::ResponseKind::$kind(r) = resp {
                    #[allow(clippy::redundant_closure_call)]
                    ($f)(r)
                }
            }) as $crate::authorize::Patch,
        )
    };
}
pub(crate) use patch;

/// Splits `items` into the allowed ones and the refused ones.
fn split<T>(items: Vec<T>, allowed: impl Fn(&T) -> bool) -> (Vec<T>, Vec<T>) {
    items.into_iter().partition(|i| allowed(i))
}

/// What a gate needs of a request besides the request itself.
pub struct GateArgs {
    pub version: i16,
    /// Whether Metadata may create the topics it names.
    pub auto_create_topics: bool,
}

/// A listener's gate (generated with its registrations).
pub type GateFn = fn(&Arc<Access>, &GateArgs, RequestKind) -> Gate;

/// The gate of one request from `ctx`'s principal and host.
pub fn gate_request(
    broker: &Broker,
    ctx: &RequestContext,
    body: RequestKind,
    gate: GateFn,
) -> Gate {
    if broker.settings.authorizer.is_none() {
        return Gate::Pass(body, None);
    }
    let access = Arc::new(broker.access(&ctx.principal, ctx.peer.ip()));
    let args = GateArgs {
        version: ctx.api_version,
        auto_create_topics: broker.settings.auto_create_topics,
    };
    gate(&access, &args, body)
}

/// The gate of one request taken by a controller listener, on a node that
/// may run no broker: checked against `image`'s ACLs.
pub fn gate_on_controller(
    authorizer: Option<Arc<Authorizer>>,
    image: Arc<MetadataImage>,
    ctx: &RequestContext,
    body: RequestKind,
    gate: GateFn,
) -> Gate {
    if authorizer.is_none() {
        return Gate::Pass(body, None);
    }
    let access = Arc::new(Access::new(
        authorizer,
        image,
        &ctx.principal,
        ctx.peer.ip(),
    ));
    let args = GateArgs {
        version: ctx.api_version,
        auto_create_topics: false,
    };
    gate(&access, &args, body)
}

/// The broker listeners' gate, as the tests call it.
#[cfg(test)]
fn gate(access: &Arc<Access>, auto_create_topics: bool, version: i16, body: RequestKind) -> Gate {
    let args = GateArgs {
        version,
        auto_create_topics,
    };
    crate::handlers::broker_apis::gate(access, &args, body)
}
