//! The Ottla broker: configuration, network server, request handlers, the
//! replica manager and the coordinators. `main.rs` is the `ottla` binary.

pub mod apis;
pub mod authorize;
mod blocking;
pub mod broker;
pub mod broker_metrics;
pub mod config;
pub mod dynamic_broker_config;
pub mod dynamic_listeners;
pub mod features;
pub mod fetch_session;
#[cfg(test)]
mod group_tests;
pub mod handlers;
pub mod log_config;
pub mod meta_properties;
pub mod metrics;
pub mod mirroring;
pub mod network;
pub mod purgatory;
pub mod quotas;
pub mod replica;
pub mod replication;
pub mod sampled_rate;
pub mod security;
pub mod txn_config;
#[cfg(test)]
mod txn_tests;
