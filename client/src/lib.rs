//! Ottla's Kafka client: one connection to one broker (`connection`), with
//! TLS and SASL (`security`, with Kafka's key and trust stores in `stores`), as the broker's inter-broker calls, the
//! mirror fetcher, the controller's forwarding and the CLI use it. The
//! codecs are `ottla-protocol`'s; this crate adds the sockets, and the
//! requests several callers build alike (`list_offsets`).

mod connection;
pub mod list_offsets;
mod security;
pub mod stores;

pub use connection::*;
pub use security::*;
