//! Metadata: brokers, topics (by name or id), partitions with leaders and
//! epochs, and topic auto-creation.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequest;
use kafka_protocol::messages::metadata_response::{
    MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::{MetadataImage, NewTopic, TopicImage};
use uuid::Uuid;

use crate::broker::Broker;

/// Kafka's "not requested" value for authorized-operations fields.
pub const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;
/// Every operation a topic supports, as Kafka reports it without an
/// authorizer (AclEntry.supportedOperations(TOPIC)): READ (3), WRITE (4),
/// CREATE (5), DELETE (6), ALTER (7), DESCRIBE (8), DESCRIBE_CONFIGS (10)
/// and ALTER_CONFIGS (11). No ACLs are enforced yet.
pub const ALL_TOPIC_OPERATIONS: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);
/// Every operation the cluster supports (AclEntry.supportedOperations(CLUSTER)):
/// CREATE (5), ALTER (7), DESCRIBE (8), CLUSTER_ACTION (9),
/// DESCRIBE_CONFIGS (10), ALTER_CONFIGS (11) and IDEMPOTENT_WRITE (12).
pub const ALL_CLUSTER_OPERATIONS: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);

pub fn handle(
    broker: &Broker,
    version: i16,
    listener: &str,
    req: MetadataRequest,
) -> MetadataResponse {
    let mut image = broker.controller.image();
    let mut topics = Vec::new();
    match &req.topics {
        None => {
            let mut names: Vec<&String> = image.topic_ids.keys().collect();
            names.sort();
            for name in names {
                let t = image.topic_by_name(name).expect("listed");
                topics.push(topic_response(
                    version,
                    t,
                    req.include_topic_authorized_operations,
                ));
            }
        }
        Some(requested) => {
            // Auto-create first so the answer can include the new topics.
            let auto_create = req.allow_auto_topic_creation && broker.settings.auto_create_topics;
            let missing: Vec<NewTopic> = requested
                .iter()
                .filter_map(|t| t.name.as_ref())
                .filter(|n| image.topic_by_name(n).is_none())
                .filter(|n| ottla_controller::controller::validate_topic_name(n).is_ok())
                .map(|n| NewTopic {
                    name: n.to_string(),
                    num_partitions: -1,
                    replication_factor: -1,
                    ..Default::default()
                })
                .collect();
            if auto_create && !missing.is_empty() {
                broker
                    .controller
                    .block_on(broker.controller.create_topics(missing, false));
                image = broker.controller.image();
            }
            for t in requested {
                topics.push(requested_topic(
                    version,
                    &image,
                    t.name.as_ref().map(|n| n.as_str()),
                    t.topic_id,
                    req.include_topic_authorized_operations,
                ));
            }
        }
    }
    let brokers: Vec<MetadataResponseBroker> = image
        .live_brokers()
        .filter_map(|b| {
            let e = b
                .endpoints
                .iter()
                .find(|e| e.listener == listener)
                .or_else(|| b.endpoints.first())?;
            let mut r = MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(e.host.clone()))
                .with_port(e.port as i32);
            if version >= 1 {
                r = r.with_rack(b.rack.clone().map(StrBytes::from_string));
            }
            Some(r)
        })
        .collect();
    // Admin clients send controller requests to this id and look it up in
    // the broker list, which leaves this node out while it is fenced (in
    // controlled shutdown, or before its copy of the metadata shows it
    // unfenced): name a listed broker then (Kafka names a random live one).
    let listed = |id: i32| brokers.iter().any(|b| b.node_id.0 == id);
    let controller_id = match broker.node_id() {
        me if listed(me) => me,
        _ => brokers.first().map_or(-1, |b| b.node_id.0),
    };
    let mut r = MetadataResponse::default()
        .with_brokers(brokers)
        .with_topics(topics);
    if version >= 1 {
        r = r.with_controller_id(BrokerId(controller_id));
    }
    if version >= 2 {
        r = r.with_cluster_id(Some(StrBytes::from_string(broker.cluster_id.clone())));
    }
    if (8..=10).contains(&version) && req.include_cluster_authorized_operations {
        r = r.with_cluster_authorized_operations(ALL_CLUSTER_OPERATIONS);
    }
    r
}

fn requested_topic(
    version: i16,
    image: &MetadataImage,
    name: Option<&str>,
    id: Uuid,
    include_ops: bool,
) -> MetadataResponseTopic {
    let found = match name {
        Some(n) => image.topic_by_name(n),
        None => image.topic_by_id(&id),
    };
    if let Some(t) = found {
        return topic_response(version, t, include_ops);
    }
    let error = match name {
        Some(n) if ottla_controller::controller::validate_topic_name(n).is_err() => {
            ResponseError::InvalidTopicException
        }
        Some(_) => ResponseError::UnknownTopicOrPartition,
        None => ResponseError::UnknownTopicId,
    };
    let mut r = MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(name.map(|n| TopicName(StrBytes::from_string(n.to_string()))));
    if version >= 10 {
        r = r.with_topic_id(id);
    }
    r
}

fn topic_response(version: i16, t: &TopicImage, include_ops: bool) -> MetadataResponseTopic {
    let partitions = t
        .partitions
        .iter()
        .map(|(p, part)| {
            let mut r = MetadataResponsePartition::default()
                .with_partition_index(*p)
                .with_leader_id(BrokerId(part.leader))
                .with_replica_nodes(part.replicas.iter().map(|b| BrokerId(*b)).collect())
                .with_isr_nodes(part.isr.iter().map(|b| BrokerId(*b)).collect());
            if part.leader < 0 {
                r = r.with_error_code(ResponseError::LeaderNotAvailable.code());
            }
            if version >= 7 {
                r = r.with_leader_epoch(part.leader_epoch);
            }
            r
        })
        .collect();
    let mut r = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(t.name.clone()))))
        .with_partitions(partitions);
    if version >= 1 {
        r = r.with_is_internal(is_internal_topic(&t.name));
    }
    if version >= 10 {
        r = r.with_topic_id(t.id);
    }
    if version >= 8 && include_ops {
        r = r.with_topic_authorized_operations(ALL_TOPIC_OPERATIONS);
    }
    r
}

/// Topics Kafka marks internal.
pub fn is_internal_topic(name: &str) -> bool {
    matches!(
        name,
        "__consumer_offsets" | "__transaction_state" | "__mirror_state" | "__share_group_state"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorized_operations_are_kafkas_supported_ones() {
        // AclEntry.supportedOperations(TOPIC / CLUSTER) as 32-bit fields.
        assert_eq!(ALL_TOPIC_OPERATIONS, 3576);
        assert_eq!(ALL_CLUSTER_OPERATIONS, 8096);
    }
}
