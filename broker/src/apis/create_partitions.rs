//! CreatePartitions (v0-3): adds partitions to existing topics, with
//! placement by the controller or given replica assignments.

use std::collections::{HashMap, HashSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsRequest, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_partitions_response::{
    CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::ControllerError;

use crate::broker::Broker;

pub fn handle(
    broker: &Broker,
    _version: i16,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut occurrences: HashMap<&str, usize> = HashMap::new();
    for t in &req.topics {
        *occurrences.entry(t.name.as_str()).or_default() += 1;
    }
    let mut answered = HashSet::new();
    let mut results = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
        let name = t.name.as_str();
        if !answered.insert(name) {
            continue;
        }
        // Kafka changes neither copy of a topic given twice.
        let outcome = if occurrences[name] > 1 {
            Err(ControllerError::new(
                ResponseError::InvalidRequest,
                "Duplicate topic name.",
            ))
        } else {
            add_partitions(broker, t, req.validate_only)
        };
        let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
        results.push(match outcome {
            Ok(()) => result,
            Err(e) => result
                .with_error_code(e.code)
                .with_error_message(Some(StrBytes::from_string(e.message))),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

fn add_partitions(
    broker: &Broker,
    t: &CreatePartitionsTopic,
    validate_only: bool,
) -> Result<(), ControllerError> {
    let assignments = t.assignments.as_ref().map(|a| {
        a.iter()
            .map(|p| p.broker_ids.iter().map(|b| b.0).collect())
            .collect()
    });
    broker
        .controller
        .block_on(broker.controller.create_partitions(
            t.name.as_str(),
            t.count,
            assignments,
            validate_only,
        ))
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
    use kafka_protocol::messages::{BrokerId, TopicName};

    use super::*;
    use crate::apis::test_support::{assert_encodes, create_topic, test_broker};

    fn topic(name: &str, count: i32) -> CreatePartitionsTopic {
        CreatePartitionsTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_count(count)
            .with_assignments(None)
    }

    fn request(topics: Vec<CreatePartitionsTopic>, validate_only: bool) -> CreatePartitionsRequest {
        CreatePartitionsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(30_000)
            .with_validate_only(validate_only)
    }

    fn code(r: &CreatePartitionsResponse, name: &str) -> i16 {
        r.results
            .iter()
            .find(|t| t.name.as_str() == name)
            .unwrap()
            .error_code
    }

    fn partitions(broker: &Broker, name: &str) -> usize {
        broker
            .controller
            .image()
            .topic_by_name(name)
            .unwrap()
            .partitions
            .len()
    }

    #[test]
    fn adds_partitions_and_validates_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "grow", 1);
        create_topic(&broker, "dry", 1);
        create_topic(&broker, "manual", 1);
        let r = handle(&broker, 0, request(vec![topic("dry", 4)], true));
        assert_encodes(&r, 0);
        assert_eq!(code(&r, "dry"), 0);
        assert_eq!(partitions(&broker, "dry"), 1);
        let assigned = topic("manual", 3).with_assignments(Some(vec![
            CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(1)]),
            CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(1)]),
        ]));
        let r = handle(&broker, 3, request(vec![topic("grow", 3), assigned], false));
        assert_encodes(&r, 3);
        assert_eq!((code(&r, "grow"), code(&r, "manual")), (0, 0));
        assert_eq!(r.results[0].error_message, None);
        assert_eq!(
            (partitions(&broker, "grow"), partitions(&broker, "manual")),
            (3, 3)
        );
    }

    #[test]
    fn refusals_carry_kafka_error_codes() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "t", 2);
        let short = topic("t", 4).with_assignments(Some(vec![
            CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(1)]),
        ]));
        let r = handle(&broker, 3, request(vec![short], false));
        assert_eq!(
            code(&r, "t"),
            ResponseError::InvalidReplicaAssignment.code()
        );
        let unknown_broker = topic("t", 3).with_assignments(Some(vec![
            CreatePartitionsAssignment::default().with_broker_ids(vec![BrokerId(7)]),
        ]));
        let r = handle(&broker, 3, request(vec![unknown_broker], false));
        assert_eq!(
            code(&r, "t"),
            ResponseError::InvalidReplicaAssignment.code()
        );
        let r = handle(
            &broker,
            3,
            request(
                vec![
                    topic("t", 2),
                    topic("missing", 3),
                    topic("twice", 3),
                    topic("twice", 4),
                ],
                false,
            ),
        );
        assert_encodes(&r, 3);
        assert_eq!(code(&r, "t"), ResponseError::InvalidPartitions.code());
        assert_eq!(
            code(&r, "missing"),
            ResponseError::UnknownTopicOrPartition.code()
        );
        assert_eq!(code(&r, "twice"), ResponseError::InvalidRequest.code());
        assert_eq!(r.results.len(), 3);
        assert!(r.results[0].error_message.is_some());
        assert_eq!(partitions(&broker, "t"), 2);
    }
}
