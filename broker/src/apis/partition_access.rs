//! Partition checks shared by the offset APIs (ListOffsets, DeleteRecords,
//! OffsetForLeaderEpoch), in Kafka's order: hosted here, then the client's
//! leader epoch, then leadership.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use ottla_storage::manager::TopicPartition;

use crate::broker::Broker;
use crate::replica::{Partition, PartitionState};

/// Kafka's "no epoch given" value for `current_leader_epoch`.
pub const NO_LEADER_EPOCH: i32 = -1;

/// The `replica_id` of operator tools allowed to read any replica.
pub const DEBUGGING_REPLICA_ID: i32 = -2;

/// Whether the metadata has this partition.
pub fn in_metadata(image: &MetadataImage, tp: &TopicPartition) -> bool {
    image
        .topic_by_name(&tp.topic)
        .is_some_and(|t| t.partitions.contains_key(&tp.partition))
}

/// The partition if this broker hosts it. One the metadata knows but that is
/// not here answers NOT_LEADER_OR_FOLLOWER, so the client refreshes its
/// metadata; an unknown one answers UNKNOWN_TOPIC_OR_PARTITION.
pub fn hosted(
    broker: &Broker,
    image: &MetadataImage,
    tp: &TopicPartition,
) -> Result<Arc<Partition>, ResponseError> {
    if let Some(p) = broker.replicas.partition(tp) {
        return Ok(p);
    }
    Err(if in_metadata(image, tp) {
        ResponseError::NotLeaderOrFollower
    } else {
        ResponseError::UnknownTopicOrPartition
    })
}

/// Kafka's checkCurrentLeaderEpoch: an older epoch than ours is fenced, a
/// newer one means this broker has not seen the change yet.
pub fn check_leader_epoch(current: i32, local: i32) -> Result<(), ResponseError> {
    if current == NO_LEADER_EPOCH || current == local {
        Ok(())
    } else if current < local {
        Err(ResponseError::FencedLeaderEpoch)
    } else {
        Err(ResponseError::UnknownLeaderEpoch)
    }
}

/// Kafka's Partition.getLocalLog: the hosted partition after the epoch
/// check and, when `leader_only`, the leadership check. An offline log
/// answers KAFKA_STORAGE_ERROR.
pub fn local_partition(
    broker: &Broker,
    image: &MetadataImage,
    tp: &TopicPartition,
    current_leader_epoch: i32,
    leader_only: bool,
) -> Result<(Arc<Partition>, PartitionState), ResponseError> {
    let partition = hosted(broker, image, tp)?;
    let state = partition.state();
    check_leader_epoch(current_leader_epoch, state.leader_epoch)?;
    if leader_only && state.leader != broker.node_id() {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    if partition.log.read().is_offline() {
        return Err(ResponseError::KafkaStorageError);
    }
    Ok((partition, state))
}
