//! Appending coordinator records to the shard's `__consumer_offsets`
//! partition, and the context every state change runs with.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use ottla_protocol::batch::{BatchBuilder, SimpleRecord};
use ottla_storage::producer_state::AppendOrigin;

use super::codec::FieldTooLong;
use super::config::GroupConfig;
use super::records::CoordinatorRecord;
use crate::replica::{storage_error_code, Partition, ReplicaManager};

/// What a state change needs besides the group: the time, the settings and
/// the log to write to.
pub struct Ctx<'a> {
    pub now: i64,
    pub config: &'a GroupConfig,
    pub writer: &'a LogWriter,
}

pub struct LogWriter {
    pub(super) partition: Arc<Partition>,
    pub(super) replicas: Arc<ReplicaManager>,
    pub(super) node_id: i32,
}

impl LogWriter {
    /// Appends `records` as one batch (all or nothing) as the partition
    /// leader. Callers hold the shard's lock, so the log order is the order
    /// in which state changes were decided.
    pub fn append(&self, records: &[CoordinatorRecord], now: i64) -> Result<(), ResponseError> {
        self.append_with(&BatchBuilder::default(), records, now)
    }

    /// As [`LogWriter::append`], in a batch from `builder` (transactional
    /// offset commits carry the producer's id and epoch).
    pub fn append_with(
        &self,
        builder: &BatchBuilder,
        records: &[CoordinatorRecord],
        now: i64,
    ) -> Result<(), ResponseError> {
        if records.is_empty() {
            return Ok(());
        }
        let records = records
            .iter()
            .map(|r| {
                let (key, value) = r.encode()?;
                Ok(SimpleRecord {
                    timestamp: now,
                    key: Some(key),
                    value,
                    headers: Vec::new(),
                })
            })
            .collect::<Result<Vec<_>, FieldTooLong>>()
            // As Kafka, where serializing such a record throws.
            .map_err(|_| ResponseError::UnknownServerError)?;
        self.append_batch(builder.build(&records), now)
    }

    /// Appends a batch built elsewhere (transaction markers) as the
    /// partition leader.
    pub fn append_batch(&self, mut batch: Vec<u8>, now: i64) -> Result<(), ResponseError> {
        let state = self.partition.state();
        if state.leader != self.node_id {
            return Err(ResponseError::NotCoordinator);
        }
        let result = {
            let mut log = self.partition.log.write();
            let r = log.append_as_leader(
                &mut batch,
                state.leader_epoch,
                AppendOrigin::Coordinator,
                now,
            );
            // As ReplicaManager::append: alone in the ISR, the appended
            // records are committed at once.
            if r.is_ok() && state.isr == [self.node_id] {
                let end = log.log_end_offset();
                log.set_high_watermark(end);
            }
            r
        };
        match result {
            Ok(_) => {
                self.replicas.notify_append(&self.partition);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(partition = %self.partition.tp, error = %e, "group coordinator append failed");
                Err(coordinator_error(storage_error_code(&e).0))
            }
        }
    }
}

/// Kafka's mapping of append errors to what group clients understand.
pub fn coordinator_error(e: ResponseError) -> ResponseError {
    match e {
        ResponseError::UnknownTopicOrPartition
        | ResponseError::NotEnoughReplicas
        | ResponseError::NotEnoughReplicasAfterAppend
        | ResponseError::RequestTimedOut => ResponseError::CoordinatorNotAvailable,
        ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError => {
            ResponseError::NotCoordinator
        }
        ResponseError::MessageTooLarge
        | ResponseError::RecordListTooLarge
        | ResponseError::InvalidFetchSize => ResponseError::UnknownServerError,
        other => other,
    }
}
