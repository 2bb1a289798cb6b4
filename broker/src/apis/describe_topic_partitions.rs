//! DescribeTopicPartitions (v0, KIP-966): the partitions of the named topics,
//! or of every topic when none is named, in name order and paged by a
//! partition limit and a cursor. `kafka-topics.sh --describe` uses it.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_request::DescribeTopicPartitionsRequest;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponse, DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::image::BrokerImage;
use ottla_controller::{MetadataImage, PartitionImage, TopicImage};

use crate::apis::metadata::{is_internal_topic, ALL_TOPIC_OPERATIONS};
use crate::broker::Broker;

/// Kafka's `max.request.partition.size.limit` default: the most partitions
/// one response carries, whatever the client asks for.
const MAX_PARTITIONS_PER_RESPONSE: i32 = 2000;

pub fn handle(
    broker: &Broker,
    _version: i16,
    listener: &str,
    req: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let image = broker.controller.image();
    let fetch_all = req.topics.is_empty();
    let (cursor_topic, cursor_partition) = req
        .cursor
        .as_ref()
        .map_or(("", 0), |c| (c.topic_name.as_str(), c.partition_index));
    // Names sort before the cursor's are on earlier pages.
    let topics: BTreeSet<&str> = if fetch_all {
        image
            .topic_ids
            .keys()
            .map(String::as_str)
            .filter(|n| *n >= cursor_topic)
            .collect()
    } else {
        req.topics
            .iter()
            .map(|t| t.name.as_str())
            .filter(|n| *n >= cursor_topic)
            .collect()
    };
    let cursor_missing = req.cursor.is_some() && !fetch_all && !topics.contains(cursor_topic);
    if cursor_missing || cursor_partition < 0 {
        return invalid_request(&req);
    }
    let mut remaining = req
        .response_partition_limit
        .clamp(1, MAX_PARTITIONS_PER_RESPONSE) as usize;
    let mut response = DescribeTopicPartitionsResponse::default();
    for name in topics {
        if remaining == 0 {
            response.next_cursor = Some(cursor(name, 0));
            break;
        }
        let Some(topic) = image.topic_by_name(name) else {
            // Listing every topic never names a missing one.
            if !fetch_all {
                response.topics.push(missing_topic(name));
            }
            continue;
        };
        let start = if name == cursor_topic {
            cursor_partition
        } else {
            0
        };
        let end = topic.partitions.len().min(start as usize + remaining);
        let partitions: Vec<_> = (start..end as i32)
            .filter_map(|p| {
                topic
                    .partitions
                    .get(&p)
                    .map(|part| partition(&image, listener, p, part))
            })
            .collect();
        remaining -= partitions.len();
        response.topics.push(topic_response(topic, partitions));
        if end < topic.partitions.len() {
            response.next_cursor = Some(cursor(name, end as i32));
            break;
        }
    }
    response
}

fn cursor(topic: &str, partition: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(topic_name(topic))
        .with_partition_index(partition)
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

fn topic_response(
    topic: &TopicImage,
    partitions: Vec<DescribeTopicPartitionsResponsePartition>,
) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(&topic.name)))
        .with_topic_id(topic.id)
        .with_is_internal(is_internal_topic(&topic.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(ALL_TOPIC_OPERATIONS)
}

fn missing_topic(name: &str) -> DescribeTopicPartitionsResponseTopic {
    let error = if ottla_controller::controller::validate_topic_name(name).is_err() {
        ResponseError::InvalidTopicException
    } else {
        ResponseError::UnknownTopicOrPartition
    };
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(error.code())
        .with_name(Some(topic_name(name)))
        .with_is_internal(is_internal_topic(name))
        .with_topic_authorized_operations(ALL_TOPIC_OPERATIONS)
}

/// Kafka's answer to a request it refuses as a whole.
fn invalid_request(req: &DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_name(Some(t.name.clone()))
        })
        .collect();
    DescribeTopicPartitionsResponse::default().with_topics(topics)
}

fn partition(
    image: &MetadataImage,
    listener: &str,
    index: i32,
    p: &PartitionImage,
) -> DescribeTopicPartitionsResponsePartition {
    let reachable = |id: i32| image.brokers.get(&id).is_some_and(|b| serves(b, listener));
    let leader = if reachable(p.leader) { p.leader } else { -1 };
    let ids = |ids: &[i32]| ids.iter().map(|b| BrokerId(*b)).collect::<Vec<_>>();
    let offline: Vec<i32> = p
        .replicas
        .iter()
        .copied()
        .filter(|b| !reachable(*b))
        .collect();
    DescribeTopicPartitionsResponsePartition::default()
        .with_partition_index(index)
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(p.leader_epoch)
        .with_replica_nodes(ids(&p.replicas))
        .with_isr_nodes(ids(&p.isr))
        .with_eligible_leader_replicas(Some(ids(&p.elr)))
        .with_last_known_elr(Some(ids(&p.last_known_elr)))
        .with_offline_replicas(ids(&offline))
}

/// An unfenced broker with an endpoint on the client's listener.
fn serves(b: &BrokerImage, listener: &str) -> bool {
    !b.fenced && b.endpoints.iter().any(|e| e.listener == listener)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::describe_topic_partitions_request::{
        Cursor as RequestCursor, TopicRequest,
    };

    use uuid::Uuid;

    use super::*;

    /// Creates a topic and returns its id.
    fn created(broker: &Broker, name: &str, partitions: i32) -> Uuid {
        create_topic(broker, name, partitions);
        broker.controller.image().topic_by_name(name).unwrap().id
    }
    use crate::apis::test_support::{assert_encodes, create_topic, test_broker};

    fn request(
        names: &[&str],
        limit: i32,
        cursor: Option<(&str, i32)>,
    ) -> DescribeTopicPartitionsRequest {
        DescribeTopicPartitionsRequest::default()
            .with_topics(
                names
                    .iter()
                    .map(|n| TopicRequest::default().with_name(topic_name(n)))
                    .collect(),
            )
            .with_response_partition_limit(limit)
            .with_cursor(cursor.map(|(t, p)| {
                RequestCursor::default()
                    .with_topic_name(topic_name(t))
                    .with_partition_index(p)
            }))
    }

    /// (topic, partition) pairs of a response, in order.
    fn listed(r: &DescribeTopicPartitionsResponse) -> Vec<(String, i32)> {
        r.topics
            .iter()
            .flat_map(|t| {
                let name = t.name.as_ref().unwrap().to_string();
                t.partitions
                    .iter()
                    .map(move |p| (name.clone(), p.partition_index))
            })
            .collect()
    }

    #[test]
    fn pages_through_every_topic_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "b", 3);
        create_topic(&broker, "a", 2);
        create_topic(&broker, "__consumer_offsets", 1);
        let mut seen = Vec::new();
        let mut cursor: Option<(String, i32)> = None;
        let mut pages = 0;
        loop {
            let c = cursor.as_ref().map(|(t, p)| (t.as_str(), *p));
            let r = handle(&broker, 0, "PLAINTEXT", request(&[], 2, c));
            assert_encodes(&r, 0);
            assert!(listed(&r).len() <= 2);
            seen.extend(listed(&r));
            pages += 1;
            match r.next_cursor {
                Some(next) => cursor = Some((next.topic_name.to_string(), next.partition_index)),
                None => break,
            }
        }
        let expected: Vec<(String, i32)> = [
            ("__consumer_offsets", 0),
            ("a", 0),
            ("a", 1),
            ("b", 0),
            ("b", 1),
            ("b", 2),
        ]
        .iter()
        .map(|(t, p)| (t.to_string(), *p))
        .collect();
        assert_eq!(seen, expected);
        assert_eq!(pages, 3);
    }

    #[test]
    fn describes_named_topics_with_errors_for_missing_ones() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        let id = created(&broker, "orders", 2);
        create_topic(&broker, "__consumer_offsets", 1);
        let r = handle(
            &broker,
            0,
            "PLAINTEXT",
            request(
                &["orders", "nope", "bad name", "__consumer_offsets"],
                100,
                None,
            ),
        );
        assert_encodes(&r, 0);
        assert!(r.next_cursor.is_none());
        let names: Vec<&str> = r
            .topics
            .iter()
            .map(|t| t.name.as_ref().unwrap().as_str())
            .collect();
        assert_eq!(names, ["__consumer_offsets", "bad name", "nope", "orders"]);
        let orders = &r.topics[3];
        assert_eq!(
            (orders.error_code, orders.topic_id, orders.is_internal),
            (0, id, false)
        );
        assert_eq!(orders.topic_authorized_operations, ALL_TOPIC_OPERATIONS);
        let p = &orders.partitions[1];
        assert_eq!(
            (p.partition_index, p.leader_id, p.leader_epoch),
            (1, BrokerId(1), 0)
        );
        assert_eq!(p.replica_nodes, vec![BrokerId(1)]);
        assert_eq!(p.isr_nodes, vec![BrokerId(1)]);
        assert_eq!(p.eligible_leader_replicas, Some(Vec::new()));
        assert!(p.offline_replicas.is_empty());
        assert!(r.topics[0].is_internal);
        assert_eq!(
            r.topics[1].error_code,
            ResponseError::InvalidTopicException.code()
        );
        assert_eq!(
            r.topics[2].error_code,
            ResponseError::UnknownTopicOrPartition.code()
        );
        // On a listener this broker does not serve, the leader is unreachable.
        let r = handle(&broker, 0, "OTHER", request(&["orders"], 100, None));
        assert_eq!(r.topics[0].partitions[0].leader_id, BrokerId(-1));
        assert_eq!(
            r.topics[0].partitions[0].offline_replicas,
            vec![BrokerId(1)]
        );
    }

    #[test]
    fn a_cursor_resumes_inside_a_topic_and_must_be_valid() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "t", 5);
        create_topic(&broker, "u", 1);
        let r = handle(
            &broker,
            0,
            "PLAINTEXT",
            request(&["t", "u"], 2, Some(("t", 2))),
        );
        assert_eq!(listed(&r), [("t".to_string(), 2), ("t".to_string(), 3)]);
        let next = r.next_cursor.unwrap();
        assert_eq!((next.topic_name.as_str(), next.partition_index), ("t", 4));
        let r = handle(
            &broker,
            0,
            "PLAINTEXT",
            request(&["t", "u"], 1, Some(("t", 4))),
        );
        assert_eq!(listed(&r), [("t".to_string(), 4)]);
        let next = r.next_cursor.unwrap();
        assert_eq!((next.topic_name.as_str(), next.partition_index), ("u", 0));
        let r = handle(&broker, 0, "PLAINTEXT", request(&["u"], 10, Some(("t", 0))));
        assert_eq!(r.topics[0].error_code, ResponseError::InvalidRequest.code());
        let r = handle(
            &broker,
            0,
            "PLAINTEXT",
            request(&["t"], 10, Some(("t", -1))),
        );
        assert_eq!(r.topics[0].error_code, ResponseError::InvalidRequest.code());
        assert_encodes(&r, 0);
    }
}
