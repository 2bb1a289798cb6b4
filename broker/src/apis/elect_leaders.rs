//! ElectLeaders: preferred or unclean leader elections asked by an operator
//! (`kafka-leader-election.sh --election-type preferred|unclean`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_request::ElectLeadersRequest;
use kafka_protocol::messages::elect_leaders_response::{
    ElectLeadersResponse, PartitionResult, ReplicaElectionResult,
};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use ottla_controller::elections::ElectionType;

use crate::broker::Broker;

const UNCLEAN: i8 = 1;

pub fn handle(broker: &Broker, version: i16, req: ElectLeadersRequest) -> ElectLeadersResponse {
    let kind = if version >= 1 && req.election_type == UNCLEAN {
        ElectionType::Unclean
    } else {
        ElectionType::Preferred
    };
    let partitions = req.topic_partitions.map(|topics| {
        topics
            .into_iter()
            .flat_map(|t| {
                let name = t.topic.to_string();
                t.partitions.into_iter().map(move |p| (name.clone(), p))
            })
            .collect()
    });
    let asked_for_all = partitions.is_none();
    let mut results: Vec<ReplicaElectionResult> = Vec::new();
    for ((topic, p), outcome) in broker
        .controller
        .block_on(broker.controller.elect_leaders(kind, partitions))
    {
        // Kafka leaves partitions that needed nothing out of an
        // all-partitions answer.
        let not_needed = ResponseError::ElectionNotNeeded.code();
        if asked_for_all && outcome.as_ref().is_err_and(|e| e.code == not_needed) {
            continue;
        }
        let (code, message) = match outcome {
            Ok(()) => (0, None),
            Err(e) => (e.code, Some(StrBytes::from_string(e.message))),
        };
        let result = PartitionResult::default()
            .with_partition_id(p)
            .with_error_code(code)
            .with_error_message(message);
        match results.iter_mut().find(|r| r.topic.as_str() == topic) {
            Some(r) => r.partition_result.push(result),
            None => results.push(
                ReplicaElectionResult::default()
                    .with_topic(TopicName(StrBytes::from_string(topic)))
                    .with_partition_result(vec![result]),
            ),
        }
    }
    ElectLeadersResponse::default().with_replica_election_results(results)
}
