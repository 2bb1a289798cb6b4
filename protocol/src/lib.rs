//! Kafka wire protocol pieces shared by the broker, the mirror fetcher and the CLI.

pub mod api_versions;
pub mod batch;
pub mod frame;
pub mod java_hash;
#[macro_use]
pub mod schema;
pub mod mirror;
pub mod names;
pub mod own_api;
pub mod properties;
pub mod records;
pub mod request;
pub mod share_group_records;
pub mod share_lag;
pub mod share_v2;
pub mod streams;
