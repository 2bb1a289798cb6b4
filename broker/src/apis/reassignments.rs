//! AlterPartitionReassignments and ListPartitionReassignments
//! (`kafka-reassign-partitions.sh --execute / --verify / --cancel`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::reassignment::in_progress;
use ottla_controller::{ControllerError, MetadataImage};

use crate::broker::Broker;

pub fn alter(
    broker: &Broker,
    version: i16,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let image = broker.controller.image();
    let allow_rf_change = version < 1 || req.allow_replication_factor_change;
    let mut refused = Vec::new();
    let mut moves = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let key = (t.name.to_string(), p.partition_index);
            let target: Option<Vec<i32>> =
                p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
            match target.as_deref().map(|t| changes_rf(&image, &key, t)) {
                Some(true) if !allow_rf_change => refused.push((
                    key,
                    Err(ControllerError::new(
                        ResponseError::InvalidReplicationFactor,
                        "The replication factor is changed but allowReplicationFactorChange is false.",
                    )),
                )),
                _ => moves.push((key, target)),
            }
        }
    }
    let mut results = broker
        .controller
        .block_on(broker.controller.reassign_partitions(moves));
    results.extend(refused);
    let mut responses: Vec<ReassignableTopicResponse> = Vec::new();
    for ((topic, partition), outcome) in results {
        let (code, message) = match outcome {
            Ok(()) => (0, None),
            Err(e) => (e.code, Some(StrBytes::from_string(e.message))),
        };
        let r = ReassignablePartitionResponse::default()
            .with_partition_index(partition)
            .with_error_code(code)
            .with_error_message(message);
        match responses.iter_mut().find(|t| t.name.as_str() == topic) {
            Some(t) => t.partitions.push(r),
            None => responses.push(
                ReassignableTopicResponse::default()
                    .with_name(StrBytes::from_string(topic).into())
                    .with_partitions(vec![r]),
            ),
        }
    }
    let mut response = AlterPartitionReassignmentsResponse::default().with_responses(responses);
    if version >= 1 {
        response = response.with_allow_replication_factor_change(allow_rf_change);
    }
    response
}

/// Whether moving `key` to `target` changes its replication factor.
fn changes_rf(image: &MetadataImage, key: &(String, i32), target: &[i32]) -> bool {
    image
        .topic_by_name(&key.0)
        .and_then(|t| t.partitions.get(&key.1))
        .is_some_and(|p| {
            let current = p.replicas.len() - p.adding_replicas.len();
            current != target.len()
        })
}

pub fn list(
    broker: &Broker,
    _version: i16,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let image = broker.controller.image();
    let wanted: Option<Vec<(String, Vec<i32>)>> = req.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.name.to_string(), t.partition_indexes))
            .collect()
    });
    let mut names: Vec<&String> = image.topic_ids.keys().collect();
    names.sort();
    let ids = |v: &[i32]| v.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    let topics = names
        .into_iter()
        .filter_map(|name| {
            let topic = image.topic_by_name(name)?;
            let partitions: Vec<OngoingPartitionReassignment> = topic
                .partitions
                .iter()
                .filter(|(p, part)| {
                    in_progress(part)
                        && wanted
                            .as_ref()
                            .is_none_or(|w| w.iter().any(|(n, ps)| n == name && ps.contains(p)))
                })
                .map(|(p, part)| {
                    OngoingPartitionReassignment::default()
                        .with_partition_index(*p)
                        .with_replicas(ids(&part.replicas))
                        .with_adding_replicas(ids(&part.adding_replicas))
                        .with_removing_replicas(ids(&part.removing_replicas))
                })
                .collect();
            (!partitions.is_empty()).then(|| {
                OngoingTopicReassignment::default()
                    .with_name(StrBytes::from_string(name.clone()).into())
                    .with_partitions(partitions)
            })
        })
        .collect();
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}
