//! Appending coordinator records to the shard's `__consumer_offsets`
//! partition, and the context every state change runs with.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_coordinator_common::partition_writer::{now_ms, HostedPartition, PartitionWriter};
use ottla_protocol::batch::{BatchBuilder, SimpleRecord};
use ottla_storage::producer_state::AppendOrigin;

use super::codec::FieldTooLong;
use super::config::GroupConfig;
use super::records::CoordinatorRecord;

/// What a state change needs besides the group: the time, the settings and
/// the log to write to.
pub struct Ctx<'a> {
    pub now: i64,
    pub config: &'a GroupConfig,
    pub writer: &'a LogWriter,
}

pub struct LogWriter {
    partition: Arc<dyn HostedPartition>,
    replicas: Arc<dyn PartitionWriter>,
    /// The log end after this shard's last append (the loaded log's end
    /// before the first): answers wait until the ISR has it.
    written_end: AtomicI64,
}

impl LogWriter {
    pub(super) fn new(
        partition: Arc<dyn HostedPartition>,
        replicas: Arc<dyn PartitionWriter>,
    ) -> Self {
        let written_end = partition.log().read().log_end_offset();
        Self {
            partition,
            replicas,
            written_end: AtomicI64::new(written_end),
        }
    }

    /// Waits until the partition's ISR has everything this shard wrote,
    /// with at least `min.insync.replicas` in it, as Kafka's coordinator
    /// runtime completes a write once the high watermark passes it and a
    /// read once it passes the last write: no answer reports state that a
    /// leader change could take back. At once when the high watermark is
    /// already there. The error is one group clients retry.
    pub(super) async fn replicated(&self, timeout: Duration) -> Result<(), ResponseError> {
        let Some(end) = self.unreplicated_end() else {
            return Ok(());
        };
        self.replicas
            .await_replicated(self.partition.tp(), end, timeout)
            .await
            .map_err(|e| self.not_replicated(e))
    }

    /// [`LogWriter::replicated`] for handlers on the blocking pool.
    pub(super) fn replicated_blocking(&self, timeout: Duration) -> Result<(), ResponseError> {
        let Some(end) = self.unreplicated_end() else {
            return Ok(());
        };
        self.replicas
            .wait_replicated_blocking(self.partition.tp(), end, timeout)
            .map_err(|e| self.not_replicated(e))
    }

    fn not_replicated(&self, e: ResponseError) -> ResponseError {
        // Once per partition per interval: with the ISR short, every
        // answer of the shard would log it.
        ottla_coordinator_common::log_limited!(
            tracing::Level::WARN,
            key: self.partition.tp(),
            partition = %self.partition.tp(),
            error = ?e,
            "group coordinator records not replicated to the ISR in time"
        );
        coordinator_error(e)
    }

    /// The end of what this shard wrote, unless the high watermark passed it.
    fn unreplicated_end(&self) -> Option<i64> {
        let end = self.written_end.load(Ordering::Acquire);
        (self.partition.log().read().high_watermark() < end).then_some(end)
    }

    /// Appends `records` as one batch (all or nothing) as the partition
    /// leader. Callers hold the shard's lock, so the log order is the order
    /// in which state changes were decided.
    pub fn append(&self, records: &[CoordinatorRecord]) -> Result<(), ResponseError> {
        self.append_with(&BatchBuilder::default(), records)
    }

    /// As [`LogWriter::append`], in a batch from `builder` (transactional
    /// offset commits carry the producer's id and epoch). Records are
    /// stamped with the clock's time, which the log checks timestamps
    /// against, not the decision's `now` (the same outside tests).
    pub fn append_with(
        &self,
        builder: &BatchBuilder,
        records: &[CoordinatorRecord],
    ) -> Result<(), ResponseError> {
        if records.is_empty() {
            return Ok(());
        }
        let now = now_ms();
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
        self.append_batch(builder.build(&records))
    }

    /// Appends a batch built elsewhere (transaction markers) as the
    /// partition leader, with acks=all's check of `min.insync.replicas`
    /// as Kafka appends coordinator records.
    pub fn append_batch(&self, batch: Vec<u8>) -> Result<(), ResponseError> {
        let tp = self.partition.tp();
        let outcome =
            self.replicas
                .append_as_leader(tp, &Bytes::from(batch), -1, AppendOrigin::Coordinator);
        match outcome.error {
            None => {
                self.written_end
                    .store(outcome.end_offset, Ordering::Release);
                Ok(())
            }
            Some(e) => {
                ottla_coordinator_common::log_limited!(
                    tracing::Level::WARN,
                    key: tp,
                    partition = %tp,
                    error = ?e,
                    message = ?outcome.message,
                    "group coordinator append failed"
                );
                Err(coordinator_error(e))
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
