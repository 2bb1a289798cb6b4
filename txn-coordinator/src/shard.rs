//! One `__transaction_state` partition's coordinator: the transactional ids
//! it owns, loaded from the partition's log, and the appends of their new
//! states. Each id's metadata has its own lock (Kafka's `inLock`); every
//! decision is written to the log before it takes effect, under that lock,
//! so the log order of one id's records is the order of its decisions.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_protocol::batch::{BatchBuilder, SimpleRecord};
use ottla_storage::producer_state::AppendOrigin;
use parking_lot::{Mutex, RwLock};
use tracing::{info, warn};

use super::records::{decode_key, decode_value, encode_key, encode_value};
use super::state::TxnMetadata;
use ottla_coordinator_common::partition_writer::{HostedPartition, PartitionWriter};
use ottla_coordinator_common::shards::replay_records;

pub type SharedTxn = Arc<Mutex<TxnMetadata>>;

pub struct TxnShard {
    partition: Arc<dyn HostedPartition>,
    replicas: Arc<dyn PartitionWriter>,
    /// How long an append waits for the ISR (`request.timeout.ms`).
    timeout: Duration,
    /// The partition's leader epoch when it was loaded: the coordinator
    /// epoch every marker of this shard carries.
    coordinator_epoch: i32,
    txns: RwLock<HashMap<String, SharedTxn>>,
}

/// Transaction requests never wait on the shard.
impl ottla_coordinator_common::shards::Unload for TxnShard {}

impl TxnShard {
    /// Reads the partition's log from its start to its end: the latest
    /// record of an id wins, a tombstone forgets it. Blocking I/O.
    pub fn load(
        partition: Arc<dyn HostedPartition>,
        replicas: Arc<dyn PartitionWriter>,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let mut txns: HashMap<String, TxnMetadata> = HashMap::new();
        replay_records(&*partition, |key, value| {
            let Some(id) = decode_key(key)? else {
                return Ok(());
            };
            match value {
                None => {
                    txns.remove(&id);
                }
                Some(v) => {
                    let meta = TxnMetadata::from_log(id.clone(), decode_value(v)?);
                    txns.insert(id, meta);
                }
            }
            Ok(())
        })?;
        let coordinator_epoch = partition.state().leader_epoch;
        info!(partition = %partition.tp(), transactional_ids = txns.len(), coordinator_epoch, "transaction coordinator loaded");
        Ok(Self {
            partition,
            replicas,
            timeout,
            coordinator_epoch,
            txns: RwLock::new(
                txns.into_iter()
                    .map(|(id, m)| (id, Arc::new(Mutex::new(m))))
                    .collect(),
            ),
        })
    }

    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    pub fn get(&self, transactional_id: &str) -> Option<SharedTxn> {
        self.txns.read().get(transactional_id).cloned()
    }

    /// The id's metadata, created by `make` (in memory only, as Kafka) when
    /// the id is new.
    pub fn get_or_insert(
        &self,
        transactional_id: &str,
        make: impl FnOnce() -> Result<TxnMetadata, ResponseError>,
    ) -> Result<SharedTxn, ResponseError> {
        if let Some(t) = self.get(transactional_id) {
            return Ok(t);
        }
        let created = make()?;
        Ok(self
            .txns
            .write()
            .entry(transactional_id.to_string())
            .or_insert_with(|| Arc::new(Mutex::new(created)))
            .clone())
    }

    pub fn all(&self) -> Vec<SharedTxn> {
        self.txns.read().values().cloned().collect()
    }

    pub fn remove(&self, transactional_id: &str) {
        self.txns.write().remove(transactional_id);
    }

    /// Writes `next` and makes it the id's state. The caller holds the id's lock.
    pub fn persist(
        &self,
        meta: &mut TxnMetadata,
        next: TxnMetadata,
        now: i64,
    ) -> Result<(), ResponseError> {
        let value = encode_value(&next.to_log()).ok_or(ResponseError::UnknownServerError)?;
        self.append(&next.transactional_id, Some(value), now)?;
        *meta = next;
        Ok(())
    }

    /// Writes a tombstone for an expired id.
    pub fn write_tombstone(&self, transactional_id: &str, now: i64) -> Result<(), ResponseError> {
        self.append(transactional_id, None, now)
    }

    fn append(
        &self,
        transactional_id: &str,
        value: Option<Vec<u8>>,
        now: i64,
    ) -> Result<(), ResponseError> {
        let key = encode_key(transactional_id).ok_or(ResponseError::UnknownServerError)?;
        let batch = BatchBuilder::default().build(&[SimpleRecord {
            timestamp: now,
            key: Some(key),
            value,
            headers: Vec::new(),
        }]);
        let o = self.replicas.append_as_leader(
            self.partition.tp(),
            &Bytes::from(batch),
            -1,
            AppendOrigin::Coordinator,
        );
        if let Some(error) = o.error {
            ottla_coordinator_common::log_limited!(
                tracing::Level::WARN,
                key: self.partition.tp(),
                partition = %self.partition.tp(),
                ?error,
                message = ?o.message,
                "transaction log append failed"
            );
            return Err(coordinator_error(error));
        }
        // acks=all: a state the ISR lacks could vanish with a leader change.
        self.replicas
            .wait_replicated_blocking(self.partition.tp(), o.end_offset, self.timeout)
            .map_err(|e| {
                warn!(partition = %self.partition.tp(), error = ?e, "transaction log record not replicated to the ISR in time");
                coordinator_error(e)
            })
    }
}

/// Kafka's mapping of transaction log append errors to what producers
/// understand (TransactionStateManager.appendTransactionToLog).
fn coordinator_error(e: ResponseError) -> ResponseError {
    match e {
        ResponseError::UnknownTopicOrPartition
        | ResponseError::NotEnoughReplicas
        | ResponseError::NotEnoughReplicasAfterAppend
        | ResponseError::RequestTimedOut => ResponseError::CoordinatorNotAvailable,
        ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError => {
            ResponseError::NotCoordinator
        }
        _ => ResponseError::UnknownServerError,
    }
}
