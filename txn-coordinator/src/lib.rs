//! The transaction coordinator (Kafka's TransactionCoordinator and
//! TransactionStateManager), storing transactional ids in
//! `__transaction_state` with Kafka's record formats.
//!
//! - `coordinator`: the shards, one per transaction log partition led here,
//!   and the operations (InitProducerId, AddPartitions, EndTxn, timeouts);
//! - `shard`: one partition's transactional ids, loaded from its log;
//! - `state`: one id's metadata and its state transitions;
//! - `markers`: COMMIT/ABORT markers written into the transaction's partitions;
//! - `records`, `config`: the stored format, the settings.
//!
//! It writes through coordinator-common's `PartitionWriter`, not through
//! the broker, which holds the request handlers (`apis/txn.rs`), reads
//! its settings (`txn_config.rs`) and drives it in `txn_tests/`.

mod config;
mod coordinator;
mod markers;
mod producer_ids;
pub mod records;
mod shard;
mod state;

pub use config::{TxnConfig, TRANSACTION_STATE_TOPIC};
pub use coordinator::TxnCoordinator;
pub use markers::{Marker, Services};
pub use producer_ids::ProducerIdManager;
pub use state::{TxnMetadata, TxnState};
