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
//! The request handlers are in `crate::apis::txn`.

mod config;
mod coordinator;
mod markers;
mod records;
mod shard;
mod state;

#[cfg(test)]
mod marker_tests;
#[cfg(test)]
mod tests;

pub use config::{TxnConfig, TRANSACTION_STATE_TOPIC};
pub use coordinator::TxnCoordinator;
pub use markers::{Marker, Services};
pub use state::{TxnMetadata, TxnState};

use crate::broker::Broker;

/// The services a coordinator operation borrows from `broker`.
pub fn services(broker: &Broker) -> Services<'_> {
    Services {
        replicas: &broker.replicas,
        groups: &broker.groups,
        producer_ids: &broker.producer_ids,
        brokers: &broker.brokers,
        controller: &broker.controller,
        timeout: broker.txns.config().request_timeout,
    }
}
