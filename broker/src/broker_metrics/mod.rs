//! The metrics read from the broker's state when `/metrics` is scraped
//! (cluster, replication, groups, mirrors, request handlers), and the
//! registry that serves them with those `crate::metrics` records. It reads
//! the whole broker and only the binary reads it, so the recording side
//! (`crate::metrics`) stays below everything that records.

mod cluster;
mod mirror;
mod request_handlers;

use std::sync::Arc;

use prometheus_client::registry::Registry;

use crate::broker::Broker;
use crate::metrics::{network, NetworkCollector, ProcessCollector};
use crate::network::RequestHandlerPool;

/// Everything `/metrics` serves, for the broker `broker` and its request
/// handler pool.
pub fn registry(broker: Arc<Broker>, handler_pool: Arc<RequestHandlerPool>) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(NetworkCollector(network())));
    registry.register_collector(Box::new(request_handlers::RequestHandlerCollector(
        handler_pool,
    )));
    registry.register_collector(Box::new(cluster::BrokerCollector(broker.clone())));
    registry.register_collector(Box::new(mirror::MirrorCollector(broker)));
    registry.register_collector(Box::new(ProcessCollector));
    registry
}

#[cfg(test)]
mod tests;
