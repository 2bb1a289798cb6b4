//! Which broker coordinates a key (a group id, a transactional id): the
//! leader of the key's partition of the coordinator's internal topic,
//! found the way clients and tools compute it.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use ottla_controller::{Controller, MetadataImage};
use ottla_protocol::java_hash::{java_string_hash, kafka_abs};

use crate::internal_topics::InternalTopic;

/// Where a coordinator is reachable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorNode {
    pub node_id: i32,
    pub host: String,
    pub port: i32,
}

/// Kafka's `Utils.abs(key.hashCode()) % partitionCount`.
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    kafka_abs(java_string_hash(key)) % partitions.max(1)
}

/// The internal topic's real partition count once it exists (Kafka reads
/// it from metadata), else the configured one.
pub fn partition_count(image: &MetadataImage, topic: &str, configured: i32) -> i32 {
    image
        .topic_by_name(topic)
        .map_or(configured, |t| t.partitions.len() as i32)
}

/// The broker coordinating `key`, as seen on `listener`. Creates `topic`
/// on first use and answers COORDINATOR_NOT_AVAILABLE until the key's
/// partition has a live leader, as Kafka does.
pub fn find_coordinator(
    controller: &Arc<Controller>,
    topic: &InternalTopic,
    key: &str,
    listener: &str,
) -> Result<CoordinatorNode, ResponseError> {
    let image = controller.image();
    let Some(existing) = image.topic_by_name(topic.name) else {
        topic.create(controller, &image);
        return Err(ResponseError::CoordinatorNotAvailable);
    };
    let p = partition_for(key, existing.partitions.len() as i32);
    let leader = existing
        .partitions
        .get(&p)
        .map(|part| part.leader)
        .ok_or(ResponseError::CoordinatorNotAvailable)?;
    coordinator_node(&image, leader, listener)
}

/// Where `leader` is reachable on `listener` (as Metadata does: that
/// listener's endpoint, else the first one).
pub fn coordinator_node(
    image: &MetadataImage,
    leader: i32,
    listener: &str,
) -> Result<CoordinatorNode, ResponseError> {
    let broker = image
        .live_brokers()
        .find(|b| b.id == leader)
        .ok_or(ResponseError::CoordinatorNotAvailable)?;
    let endpoint = broker
        .endpoints
        .iter()
        .find(|e| e.listener == listener)
        .or_else(|| broker.endpoints.first())
        .ok_or(ResponseError::CoordinatorNotAvailable)?;
    Ok(CoordinatorNode {
        node_id: leader,
        host: endpoint.host.clone(),
        port: i32::from(endpoint.port),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_follow_the_java_hash() {
        let group = "console-consumer-1";
        let hash = java_string_hash(group);
        let expected = if hash == i32::MIN { 0 } else { hash.abs() } % 50;
        assert_eq!(partition_for(group, 50), expected);
        // Integer.MIN_VALUE's absolute value counts as 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
    }
}
