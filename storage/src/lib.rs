//! Kafka-format partition logs: segments, indexes, leader epochs, producer
//! state, recovery, retention and compaction. No networking lives here.

pub mod checkpoint;
pub mod cleaner;
pub mod cleaner_progress;
pub mod config;
pub mod dir_lock;
pub mod epoch_cache;
pub mod error;
pub mod file_range;
pub mod index;
pub mod io_throttle;
pub mod key_map;
pub mod log;
pub mod log_file;
pub mod manager;
pub mod parallel;
pub mod producer_state;
pub mod segment;
pub mod txn_index;

pub use error::{Result, StorageError};
