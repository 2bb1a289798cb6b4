//! Transaction markers (Kafka's TransactionMarkerChannelManager, on one
//! node): COMMIT/ABORT control batches written straight into each partition
//! of a transaction. `__consumer_offsets` partitions go through the group
//! coordinator, which applies or drops the pending transactional offsets.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use ottla_protocol::batch::{txn_marker_value, BatchBuilder, ControlType};
use ottla_storage::manager::TopicPartition;
use ottla_storage::producer_state::AppendOrigin;
use tracing::warn;

use crate::group::{GroupCoordinator, OFFSETS_TOPIC};
use crate::producer_ids::ProducerIdManager;
use crate::replica::ReplicaManager;

/// What coordinator operations borrow from the rest of the broker.
pub struct Services<'a> {
    pub replicas: &'a ReplicaManager,
    pub groups: &'a GroupCoordinator,
    pub producer_ids: &'a ProducerIdManager,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub commit: bool,
}

impl Marker {
    /// The control batch: transactional, one record with the control key
    /// and the coordinator epoch in its value.
    pub fn batch(&self, now: i64) -> Vec<u8> {
        let control = if self.commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        };
        BatchBuilder {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            transactional: true,
            ..BatchBuilder::default()
        }
        .build_control(control, now, txn_marker_value(self.coordinator_epoch))
    }
}

impl Services<'_> {
    /// Writes `marker` into `tp`: Ok once it is in the log, else the error.
    pub fn write_marker(
        &self,
        tp: &TopicPartition,
        marker: &Marker,
        now: i64,
    ) -> Result<(), ResponseError> {
        let batch = marker.batch(now);
        if tp.topic == OFFSETS_TOPIC {
            let shard = self.groups.shard_at(tp.partition)?;
            return shard.write_txn_marker(batch, now);
        }
        let o = self
            .replicas
            .append(tp, &Bytes::from(batch), -1, AppendOrigin::Coordinator);
        match o.error.code() {
            0 => Ok(()),
            _ => Err(o.error),
        }
    }

    /// Whether a failed marker write is worth retrying. Partitions that no
    /// longer exist and markers the partition refuses as stale (a newer
    /// producer epoch or coordinator wrote there) are given up, as Kafka
    /// stops sending them.
    pub fn should_retry(
        &self,
        image: &MetadataImage,
        tp: &TopicPartition,
        marker: &Marker,
        error: ResponseError,
    ) -> bool {
        let exists = image
            .topic_by_name(&tp.topic)
            .is_some_and(|t| t.partitions.contains_key(&tp.partition));
        let retry = exists
            && !matches!(
                error,
                ResponseError::InvalidProducerEpoch
                    | ResponseError::InvalidTxnState
                    | ResponseError::TransactionCoordinatorFenced
                    | ResponseError::CorruptMessage
            );
        warn!(partition = %tp, producer_id = marker.producer_id, commit = marker.commit, ?error, retry, "could not write a transaction marker");
        retry
    }
}
