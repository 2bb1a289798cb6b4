//! Shared helpers for Ottla's integration, interoperability and fault tests
//! (the tests themselves live under `tests/tests/`).

pub mod apache_kafka;
pub mod broker_configs;
pub mod certs;
pub mod console_consumer;
pub mod crash;
pub mod faults;
pub mod fences;
pub mod groups;
pub mod keytool;
pub mod loadgen;
pub mod metrics;
pub mod mirror;
pub mod nemesis;
pub mod netns;
pub mod ottla;
pub mod tools;
pub mod topics;
pub mod txn_load;
pub mod wire;
