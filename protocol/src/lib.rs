//! Kafka wire protocol pieces shared by the broker, the mirror fetcher and the CLI.

pub mod batch;
pub mod records;
