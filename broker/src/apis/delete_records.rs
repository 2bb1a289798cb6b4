//! DeleteRecords (v0-2): moves a partition's log start offset forward, as
//! Kafka's ReplicaManager.deleteRecords does on the leader. With a single
//! replica the low watermark is the leader's log start, so nothing waits.

use std::collections::HashMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_request::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::MetadataImage;
use ottla_storage::manager::TopicPartition;
use tracing::warn;

use super::metadata::is_internal_topic;
use super::partition_access::{hosted, in_metadata};
use crate::broker::Broker;
use crate::replica::storage_error_code;

/// The requested `offset` meaning "up to the high watermark".
pub const HIGH_WATERMARK: i64 = -1;

pub fn handle(broker: &Broker, _version: i16, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let image = broker.controller.image();
    // Kafka keys the request by partition: a repeated partition is answered
    // once, for the last offset given.
    let mut requested: Vec<(TopicPartition, i64)> = Vec::new();
    let mut seen: HashMap<TopicPartition, usize> = HashMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
            match seen.get(&tp) {
                Some(&i) => requested[i].1 = p.offset,
                None => {
                    seen.insert(tp.clone(), requested.len());
                    requested.push((tp, p.offset));
                }
            }
        }
    }
    let mut results: Vec<(TopicPartition, Result<i64, ResponseError>)> = requested
        .into_iter()
        .map(|(tp, offset)| {
            let r = delete(broker, &image, &tp, offset);
            (tp, r)
        })
        .collect();
    // The new log start must survive a restart, so it is checkpointed now
    // rather than at the next periodic checkpoint.
    if results.iter().any(|(_, r)| r.is_ok()) {
        if let Err(e) = broker.replicas.logs().checkpoint() {
            warn!(error = %e, "could not checkpoint the log start offsets after DeleteRecords");
            for (_, r) in results.iter_mut().filter(|(_, r)| r.is_ok()) {
                *r = Err(ResponseError::KafkaStorageError);
            }
        }
    }
    let mut topics: Vec<DeleteRecordsTopicResult> = Vec::new();
    let mut topic_index: HashMap<String, usize> = HashMap::new();
    for (tp, r) in results {
        let mut p = DeleteRecordsPartitionResult::default().with_partition_index(tp.partition);
        p = match r {
            Ok(low_watermark) => p.with_low_watermark(low_watermark),
            Err(e) => p.with_low_watermark(-1).with_error_code(e.code()),
        };
        let i = *topic_index.entry(tp.topic).or_insert_with_key(|name| {
            topics.push(
                DeleteRecordsTopicResult::default()
                    .with_name(StrBytes::from_string(name.clone()).into()),
            );
            topics.len() - 1
        });
        topics[i].partitions.push(p);
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// Kafka's Partition.deleteRecordsOnLeader; returns the new low watermark.
fn delete(
    broker: &Broker,
    image: &MetadataImage,
    tp: &TopicPartition,
    offset: i64,
) -> Result<i64, ResponseError> {
    if is_internal_topic(&tp.topic) && in_metadata(image, tp) {
        return Err(ResponseError::InvalidTopicException);
    }
    let partition = hosted(broker, image, tp)?;
    if partition.state().leader != broker.node_id() {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    let mut log = partition.log.write();
    if !log.config().cleanup_policy.delete {
        return Err(ResponseError::PolicyViolation);
    }
    let offset = if offset == HIGH_WATERMARK {
        log.high_watermark()
    } else {
        offset
    };
    if offset < 0 {
        return Err(ResponseError::OffsetOutOfRange);
    }
    // Offsets above the high watermark are refused by the log.
    log.delete_records_before(offset)
        .map_err(|e| storage_error_code(&e).0)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::TopicName;
    use ottla_controller::NewTopic;
    use ottla_protocol::batch::BatchBuilder;

    use super::*;
    use crate::apis::test_support::{
        append, assert_encodes, change_leader, create_topic, test_broker,
    };

    const T: i64 = 1_700_000_000_000;

    /// (topic, partition, low watermark, error) for every answer.
    fn delete_records(
        broker: &Broker,
        version: i16,
        parts: &[(&str, i32, i64)],
    ) -> Vec<(String, i32, i64, i16)> {
        let topics = parts
            .iter()
            .map(|&(topic, partition_index, offset)| {
                DeleteRecordsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(vec![DeleteRecordsPartition::default()
                        .with_partition_index(partition_index)
                        .with_offset(offset)])
            })
            .collect();
        let r = handle(
            broker,
            version,
            DeleteRecordsRequest::default().with_topics(topics),
        );
        assert_encodes(&r, version);
        r.topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (
                        t.name.to_string(),
                        p.partition_index,
                        p.low_watermark,
                        p.error_code,
                    )
                })
            })
            .collect()
    }

    fn log_start(broker: &Broker) -> i64 {
        broker
            .replicas
            .offsets(&TopicPartition::new("t", 0))
            .expect("hosted")
            .log_start
    }

    #[test]
    fn deletes_up_to_an_offset_or_the_high_watermark_and_survives_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "t", 1);
        let tp = TopicPartition::new("t", 0);
        for i in 0..3 {
            append(&broker, &tp, &BatchBuilder::default(), &[T + i, T + i]);
        }
        let out_of_range = ResponseError::OffsetOutOfRange.code();

        assert_eq!(
            delete_records(&broker, 0, &[("t", 0, 3)]),
            vec![("t".into(), 0, 3, 0)]
        );
        assert_eq!(log_start(&broker), 3);
        // Below the log start: nothing to do, the low watermark is reported.
        assert_eq!(
            delete_records(&broker, 2, &[("t", 0, 1)]),
            vec![("t".into(), 0, 3, 0)]
        );
        assert_eq!(
            delete_records(&broker, 2, &[("t", 0, 7)]),
            vec![("t".into(), 0, -1, out_of_range)]
        );
        assert_eq!(
            delete_records(&broker, 2, &[("t", 0, -2)]),
            vec![("t".into(), 0, -1, out_of_range)]
        );

        // No clean shutdown: the handler's checkpoint alone keeps the new start.
        drop(broker);
        let broker = test_broker(dir.path());
        assert_eq!(log_start(&broker), 3);

        assert_eq!(
            delete_records(&broker, 1, &[("t", 0, HIGH_WATERMARK)]),
            vec![("t".into(), 0, 6, 0)]
        );
        broker.shutdown().unwrap();
        drop(broker);
        let broker = test_broker(dir.path());
        let o = broker.replicas.offsets(&tp).unwrap();
        assert_eq!(
            (o.log_start, o.log_end, o.high_watermark, o.last_stable),
            (6, 6, 6, 6)
        );
        // The log goes on from there.
        assert_eq!(append(&broker, &tp, &BatchBuilder::default(), &[T]), 6);
    }

    #[test]
    fn refusals() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "t", 2);
        let compacted = NewTopic {
            name: "c".into(),
            num_partitions: 1,
            replication_factor: -1,
            configs: BTreeMap::from([("cleanup.policy".to_string(), Some("compact".to_string()))]),
            ..Default::default()
        };
        for (_, r) in broker
            .controller
            .block_on(broker.controller.create_topics(vec![compacted], false))
        {
            r.unwrap();
        }
        broker.replicas.apply_image(&broker.controller.image());
        let tp1 = TopicPartition::new("t", 1);
        append(&broker, &tp1, &BatchBuilder::default(), &[T, T]);

        let answers = delete_records(&broker, 2, &[("nope", 0, 0), ("t", 7, 0), ("c", 0, 0)]);
        let codes: Vec<i16> = answers.iter().map(|a| a.3).collect();
        assert_eq!(
            codes,
            vec![
                ResponseError::UnknownTopicOrPartition.code(),
                ResponseError::UnknownTopicOrPartition.code(),
                ResponseError::PolicyViolation.code()
            ]
        );
        assert!(answers.iter().all(|a| a.2 == -1));

        // A repeated partition is answered once, for the last offset given.
        let answers = delete_records(&broker, 2, &[("t", 1, 2), ("t", 0, 0), ("t", 1, 1)]);
        assert_eq!(answers, vec![("t".into(), 1, 1, 0), ("t".into(), 0, 0, 0)]);

        change_leader(&broker, &tp1, -1);
        let not_leader = ResponseError::NotLeaderOrFollower.code();
        assert_eq!(
            delete_records(&broker, 0, &[("t", 1, 2)]),
            vec![("t".into(), 1, -1, not_leader)]
        );
    }
}
