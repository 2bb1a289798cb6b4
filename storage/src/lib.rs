//! Kafka-format partition logs: segments, indexes, leader epochs, producer
//! state, recovery, retention and compaction. No networking lives here.

pub mod error;

pub use error::{Result, StorageError};
