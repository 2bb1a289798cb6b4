//! Transaction markers (Kafka's TransactionMarkerChannelManager, on one
//! node): COMMIT/ABORT control batches written straight into each partition
//! of a transaction. `__consumer_offsets` partitions go through the group
//! coordinator, which applies or drops the pending transactional offsets.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest,
};
use kafka_protocol::messages::{ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::{Controller, MetadataImage};
use ottla_protocol::batch::{txn_marker_value, BatchBuilder, ControlType};
use ottla_storage::manager::TopicPartition;
use ottla_storage::producer_state::AppendOrigin;

use crate::group::{GroupCoordinator, OFFSETS_TOPIC};
use crate::inter_broker::BrokerClients;
use crate::producer_ids::ProducerIdManager;
use crate::replica::ReplicaManager;

const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// What coordinator operations borrow from the rest of the broker.
pub struct Services<'a> {
    pub replicas: &'a ReplicaManager,
    pub groups: &'a GroupCoordinator,
    pub producer_ids: &'a ProducerIdManager,
    pub brokers: &'a BrokerClients,
    pub controller: &'a Controller,
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
    /// Writes `marker` into `tp` on the partition's leader, this broker or
    /// another (through WriteTxnMarkers): Ok once it is in the log.
    pub fn write_marker(
        &self,
        tp: &TopicPartition,
        marker: &Marker,
        now: i64,
    ) -> Result<(), ResponseError> {
        let leader = self
            .controller
            .image()
            .topic_by_name(&tp.topic)
            .and_then(|t| t.partitions.get(&tp.partition))
            .map_or(-1, |p| p.leader);
        if leader == self.replicas.node_id() {
            return self.write_local_marker(tp, marker, now);
        }
        if leader < 0 {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        let request =
            WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
                .with_producer_id(ProducerId(marker.producer_id))
                .with_producer_epoch(marker.producer_epoch)
                .with_transaction_result(marker.commit)
                .with_coordinator_epoch(marker.coordinator_epoch)
                .with_topics(vec![WritableTxnMarkerTopic::default()
                    .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                    .with_partition_indexes(vec![tp.partition])])]);
        let response = self
            .brokers
            .send_blocking(leader, WRITE_TXN_MARKERS_VERSION, &request)
            .map_err(|e| {
                crate::log_limited!(
                    tracing::Level::WARN,
                    key: &leader,
                    partition = %tp,
                    leader,
                    error = %e,
                    "cannot send a transaction marker"
                );
                ResponseError::CoordinatorNotAvailable
            })?;
        let code = response
            .markers
            .iter()
            .flat_map(|m| m.topics.iter())
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == tp.partition)
            .map_or(ResponseError::UnknownServerError.code(), |p| p.error_code);
        match ResponseError::try_from_code(code) {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }

    /// Writes `marker` into `tp`, a partition this broker leads.
    pub fn write_local_marker(
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
        crate::log_limited!(
            tracing::Level::WARN,
            key: &tp,
            partition = %tp,
            producer_id = marker.producer_id,
            commit = marker.commit,
            ?error,
            retry,
            "could not write a transaction marker"
        );
        retry
    }
}
