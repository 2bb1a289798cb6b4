//! Transaction markers (Kafka's TransactionMarkerChannelManager): COMMIT/ABORT
//! control batches written into each partition of a transaction by its
//! current leader, this broker or another (WriteTxnMarkers). A marker counts
//! as written only once the partition's ISR has it (acks=all); until then
//! the transaction stays prepared and the coordinator's tick sends it again,
//! to whichever broker leads the partition by then. `__consumer_offsets`
//! partitions go through the group coordinator, which applies or drops the
//! pending transactional offsets.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

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
use tracing::warn;

use crate::producer_ids::ProducerIdManager;
use ottla_coordinator_common::inter_broker::{BrokerClients, Lane};
use ottla_coordinator_common::partition_writer::PartitionWriter;
use ottla_group_coordinator::{GroupCoordinator, OFFSETS_TOPIC};

const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// What coordinator operations borrow from the rest of the broker.
pub struct Services<'a> {
    pub replicas: &'a dyn PartitionWriter,
    pub groups: &'a GroupCoordinator,
    pub producer_ids: &'a ProducerIdManager,
    pub brokers: &'a BrokerClients,
    pub controller: &'a Controller,
    /// How long a marker waits for its ISR (`request.timeout.ms`).
    pub timeout: Duration,
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
    /// Writes `marker` into each of `partitions` on its current leader
    /// (this broker, or another through WriteTxnMarkers, one request per
    /// leader) and reports each partition's outcome: Ok only once the
    /// marker is on the partition's whole ISR (acks=all), so a transaction
    /// never completes on a marker that a leader change could truncate.
    pub fn write_markers(
        &self,
        partitions: &[TopicPartition],
        marker: &Marker,
        now: i64,
    ) -> Vec<(TopicPartition, Result<(), ResponseError>)> {
        let image = self.controller.image();
        let mut by_leader: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
        for tp in partitions {
            let leader = image
                .topic_by_name(&tp.topic)
                .and_then(|t| t.partitions.get(&tp.partition))
                .map_or(-1, |p| p.leader);
            by_leader.entry(leader).or_default().push(tp.clone());
        }
        let mut outcomes = Vec::with_capacity(partitions.len());
        for (leader, tps) in by_leader {
            let results = if leader == self.replicas.node_id() {
                let deadline = Instant::now() + self.timeout;
                let appended: Vec<_> = tps
                    .iter()
                    .map(|tp| self.append_local_marker(tp, marker, now))
                    .collect();
                tps.iter()
                    .zip(appended)
                    .map(|(tp, end)| self.await_marker(tp, end, deadline))
                    .collect()
            } else if leader < 0 {
                vec![Err(ResponseError::NotLeaderOrFollower); tps.len()]
            } else {
                self.send_markers(leader, &tps, marker)
            };
            outcomes.extend(tps.into_iter().zip(results));
        }
        outcomes
    }

    /// One WriteTxnMarkers request to `leader` for `tps`: each partition's
    /// answer (the leader waits for its ISR before answering).
    fn send_markers(
        &self,
        leader: i32,
        tps: &[TopicPartition],
        marker: &Marker,
    ) -> Vec<Result<(), ResponseError>> {
        let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
        for tp in tps {
            match topics.iter_mut().find(|t| t.name.as_str() == tp.topic) {
                Some(t) => t.partition_indexes.push(tp.partition),
                None => topics.push(
                    WritableTxnMarkerTopic::default()
                        .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                        .with_partition_indexes(vec![tp.partition]),
                ),
            }
        }
        let request =
            WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
                .with_producer_id(ProducerId(marker.producer_id))
                .with_producer_epoch(marker.producer_epoch)
                .with_transaction_result(marker.commit)
                .with_coordinator_epoch(marker.coordinator_epoch)
                .with_topics(topics)]);
        let response = match self.brokers.send_blocking_on(
            Lane::Markers,
            leader,
            WRITE_TXN_MARKERS_VERSION,
            &request,
        ) {
            Ok(r) => r,
            Err(e) => {
                ottla_coordinator_common::log_limited!(
                    tracing::Level::WARN,
                    key: &leader,
                    leader,
                    partitions = tps.len(),
                    error = %e,
                    "cannot send transaction markers; retrying later"
                );
                return vec![Err(ResponseError::CoordinatorNotAvailable); tps.len()];
            }
        };
        tps.iter()
            .map(|tp| {
                let code = response
                    .markers
                    .iter()
                    .flat_map(|m| m.topics.iter())
                    .filter(|t| t.name.as_str() == tp.topic)
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == tp.partition)
                    .map_or(ResponseError::UnknownServerError.code(), |p| p.error_code);
                match ResponseError::try_from_code(code) {
                    None => Ok(()),
                    Some(e) => Err(e),
                }
            })
            .collect()
    }

    /// Appends `marker` to `tp`, a partition this broker leads, without
    /// waiting for the ISR: the offset after it, for [`Services::await_marker`].
    /// `__consumer_offsets` partitions go through the group coordinator,
    /// which applies or drops the producer's pending offsets.
    pub fn append_local_marker(
        &self,
        tp: &TopicPartition,
        marker: &Marker,
        now: i64,
    ) -> Result<i64, ResponseError> {
        let batch = marker.batch(now);
        if tp.topic == OFFSETS_TOPIC {
            let shard = self.groups.shard_at(tp.partition)?;
            shard.write_txn_marker(batch, now)?;
            // The log end now: the marker and whatever followed it.
            return self
                .replicas
                .hosted_partition(tp)
                .map(|p| p.log().read().log_end_offset())
                .ok_or(ResponseError::NotLeaderOrFollower);
        }
        let o =
            self.replicas
                .append_as_leader(tp, &Bytes::from(batch), -1, AppendOrigin::Coordinator);
        match o.error {
            None => Ok(o.end_offset),
            Some(e) => Err(e),
        }
    }

    /// Waits until the ISR of `tp` has the marker appended up to `end`, or
    /// `deadline` passes (REQUEST_TIMED_OUT), as Kafka's acks=-1 appends
    /// of markers; NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell below
    /// `min.insync.replicas`, NOT_LEADER_OR_FOLLOWER when leadership moved.
    pub fn await_marker(
        &self,
        tp: &TopicPartition,
        end: Result<i64, ResponseError>,
        deadline: Instant,
    ) -> Result<(), ResponseError> {
        let end = end?;
        let left = deadline.saturating_duration_since(Instant::now());
        self.replicas.wait_replicated_blocking(tp, end, left)
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
        if retry {
            ottla_coordinator_common::log_limited!(
                tracing::Level::WARN,
                key: &tp,
                partition = %tp,
                producer_id = marker.producer_id,
                commit = marker.commit,
                ?error,
                "transaction marker not on the partition's ISR yet: the transaction stays prepared and the marker is sent again to the partition's leader; if this persists, check that partition's leader and ISR (kafka-topics.sh --describe)"
            );
        } else {
            warn!(partition = %tp, producer_id = marker.producer_id, commit = marker.commit, ?error,
                "transaction marker given up: the partition is gone or refused it as stale");
        }
        retry
    }
}
