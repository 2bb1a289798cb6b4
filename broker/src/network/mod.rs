//! The Kafka-protocol TCP server: one tokio listener per configured listener,
//! framed requests decoded and dispatched to a [`RequestHandler`], responses
//! written in request order. ApiVersions is answered here, from the
//! listener's [`ApiVersionsTable`](ottla_protocol::api_versions::ApiVersionsTable).

mod connection;
pub mod file_records;
mod handler;
mod handler_pool;
mod limits;
mod memory;
mod quorum;
pub mod response;
pub mod response_frame;
mod server;
mod transport;

pub use handler::{
    Api, ConnectionThrottle, HandlerError, HandlerFuture, OwnHandlerFuture, RequestContext,
    RequestHandler, Response,
};
pub use handler_pool::RequestHandlerPool;
pub use limits::{ConnectionLimitSource, ConnectionRateQuotas, Limits, StaticLimits};
pub use memory::RequestMemory;
pub use quorum::{QuorumAdmission, QuorumEndpoint, QuorumSlot};
pub use server::{
    bind_address, connection_limits, ListenerControl, ListenerSpec, Server, ServerSettings,
};
