//! ListOffsets (v1-10): the offset for a timestamp, or for one of the
//! special timestamps, answered as Kafka's ReplicaManager.fetchOffset does.

use std::collections::HashMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::ListOffsetsRequest;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use ottla_controller::MetadataImage;
use ottla_storage::log::TimestampOffset;
use ottla_storage::manager::TopicPartition;

use super::partition_access::{local_partition, DEBUGGING_REPLICA_ID};
use crate::broker::Broker;
use crate::replica::storage_error_code;

pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;
pub const EARLIEST_LOCAL_TIMESTAMP: i64 = -4;
pub const LATEST_TIERED_TIMESTAMP: i64 = -5;

/// `replica_id` of consumers.
const CONSUMER_REPLICA_ID: i32 = -1;
const READ_COMMITTED: i8 = 1;

/// The first version that may ask for a special timestamp. Kafka answers
/// UNSUPPORTED_VERSION for unknown negative timestamps and for known ones
/// below their version.
fn min_version(timestamp: i64) -> Option<i16> {
    match timestamp {
        LATEST_TIMESTAMP | EARLIEST_TIMESTAMP => Some(1),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL_TIMESTAMP => Some(8),
        LATEST_TIERED_TIMESTAMP => Some(9),
        _ => None,
    }
}

pub fn handle(broker: &Broker, version: i16, req: ListOffsetsRequest) -> ListOffsetsResponse {
    let image = broker.controller.image();
    let mut counts: HashMap<TopicPartition, usize> = HashMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            *counts
                .entry(TopicPartition::new(t.name.to_string(), p.partition_index))
                .or_default() += 1;
        }
    }
    let mut topics: Vec<ListOffsetsTopicResponse> = Vec::new();
    let mut topic_index: HashMap<String, usize> = HashMap::new();
    for t in &req.topics {
        for p in &t.partitions {
            let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
            // Kafka answers a repeated partition once, with INVALID_REQUEST.
            let Some(count) = counts.remove(&tp) else {
                continue;
            };
            let result = if count > 1 {
                Err(ResponseError::InvalidRequest)
            } else if p.timestamp < 0 && min_version(p.timestamp).is_none_or(|v| version < v) {
                Err(ResponseError::UnsupportedVersion)
            } else {
                lookup(
                    broker,
                    &image,
                    &tp,
                    p.timestamp,
                    p.current_leader_epoch,
                    req.replica_id.0,
                    req.isolation_level,
                )
            };
            let mut r =
                ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
            match result {
                Ok(Some(found)) => {
                    r = r.with_timestamp(found.timestamp).with_offset(found.offset);
                    if let (true, Some(epoch)) = (version >= 4, found.leader_epoch) {
                        r = r.with_leader_epoch(epoch);
                    }
                }
                // Nothing matched: offset and timestamp stay -1, without an error.
                Ok(None) => {}
                Err(e) => r = r.with_error_code(e.code()),
            }
            let i = *topic_index.entry(tp.topic).or_insert_with(|| {
                topics.push(ListOffsetsTopicResponse::default().with_name(t.name.clone()));
                topics.len() - 1
            });
            topics[i].partitions.push(r);
        }
    }
    ListOffsetsResponse::default().with_topics(topics)
}

fn lookup(
    broker: &Broker,
    image: &MetadataImage,
    tp: &TopicPartition,
    timestamp: i64,
    current_leader_epoch: i32,
    replica_id: i32,
    isolation_level: i8,
) -> Result<Option<TimestampOffset>, ResponseError> {
    let leader_only = replica_id != DEBUGGING_REPLICA_ID;
    let (partition, state) = local_partition(broker, image, tp, current_leader_epoch, leader_only)?;
    let log = partition.log.read();
    // Consumers may see up to the high watermark (the LSO under
    // read_committed); followers and tools up to the log end.
    let last_fetchable = match (replica_id, isolation_level) {
        (CONSUMER_REPLICA_ID, READ_COMMITTED) => log.last_stable_offset(),
        (CONSUMER_REPLICA_ID, _) => log.high_watermark(),
        _ => log.log_end_offset(),
    };
    let start = log.log_start_offset();
    let at = |offset, leader_epoch| {
        Ok(Some(TimestampOffset {
            offset,
            timestamp: -1,
            leader_epoch,
        }))
    };
    let found = match timestamp {
        // Kafka reports the partition's current leader epoch here.
        LATEST_TIMESTAMP => return at(last_fetchable, Some(state.leader_epoch)),
        EARLIEST_TIMESTAMP => {
            let earliest = log.epoch_cache().earliest_entry();
            return at(
                start,
                earliest
                    .filter(|e| e.start_offset <= start)
                    .map(|e| e.epoch),
            );
        }
        // Nothing is tiered: the local log is the whole log.
        EARLIEST_LOCAL_TIMESTAMP => return at(start, log.epoch_cache().epoch_for_offset(start)),
        // Without tiered storage Kafka answers "no offset" (-1, no error).
        LATEST_TIERED_TIMESTAMP => return Ok(None),
        MAX_TIMESTAMP => log.offset_of_max_timestamp(),
        t => log.offset_for_timestamp(t),
    }
    .map_err(|e| storage_error_code(&e).0)?;
    // A lookup never points at records the asker may not read yet.
    Ok(found.filter(|f| f.offset < last_fetchable))
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use ottla_protocol::batch::{txn_marker_value, BatchBuilder, ControlType};
    use ottla_storage::producer_state::AppendOrigin;

    use super::*;
    use crate::apis::test_support::{
        append, assert_encodes, change_leader, create_topic, test_broker,
    };

    const T: i64 = 1_700_000_000_000;

    fn request(
        parts: &[(&str, i32, i64)],
        replica_id: i32,
        isolation_level: i8,
        current_leader_epoch: i32,
    ) -> ListOffsetsRequest {
        let topics = parts
            .iter()
            .map(|&(topic, partition_index, timestamp)| {
                ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(vec![ListOffsetsPartition::default()
                        .with_partition_index(partition_index)
                        .with_timestamp(timestamp)
                        .with_current_leader_epoch(current_leader_epoch)])
            })
            .collect();
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(replica_id))
            .with_isolation_level(isolation_level)
            .with_topics(topics)
    }

    /// (error, offset, timestamp, leader epoch) of one partition, after
    /// checking the response encodes at `version`.
    fn list_full(
        broker: &Broker,
        version: i16,
        timestamp: i64,
        replica_id: i32,
        isolation: i8,
        epoch: i32,
    ) -> (i16, i64, i64, i32) {
        let r = handle(
            broker,
            version,
            request(&[("t", 0, timestamp)], replica_id, isolation, epoch),
        );
        assert_encodes(&r, version);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.offset, p.timestamp, p.leader_epoch)
    }

    fn list(broker: &Broker, version: i16, timestamp: i64) -> (i16, i64, i64, i32) {
        list_full(broker, version, timestamp, CONSUMER_REPLICA_ID, 0, -1)
    }

    #[test]
    fn special_timestamps_and_lookups_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "t", 1);
        let tp = TopicPartition::new("t", 0);
        let b = BatchBuilder::default();
        append(&broker, &tp, &b, &[T, T + 5]); // offsets 0, 1
        append(&broker, &tp, &b, &[T + 3, T + 10]); // 2, 3
        append(&broker, &tp, &b, &[T + 2]); // 4
        let unsupported = ResponseError::UnsupportedVersion.code();

        assert_eq!(list(&broker, 10, LATEST_TIMESTAMP), (0, 5, -1, 0));
        assert_eq!(list(&broker, 10, EARLIEST_TIMESTAMP), (0, 0, -1, 0));
        assert_eq!(list(&broker, 10, MAX_TIMESTAMP), (0, 3, T + 10, 0));
        assert_eq!(list(&broker, 10, EARLIEST_LOCAL_TIMESTAMP), (0, 0, -1, 0));
        assert_eq!(list(&broker, 10, LATEST_TIERED_TIMESTAMP), (0, -1, -1, -1));
        // Special timestamps below their version, and unknown ones.
        assert_eq!(list(&broker, 6, MAX_TIMESTAMP).0, unsupported);
        assert_eq!(list(&broker, 7, EARLIEST_LOCAL_TIMESTAMP).0, unsupported);
        assert_eq!(list(&broker, 8, LATEST_TIERED_TIMESTAMP).0, unsupported);
        assert_eq!(list(&broker, 10, -6).0, unsupported);
        assert_eq!(list(&broker, 10, -100).0, unsupported);

        // The first record, in offset order, whose timestamp is >= the target.
        assert_eq!(list(&broker, 10, T), (0, 0, T, 0));
        assert_eq!(list(&broker, 10, T + 1), (0, 1, T + 5, 0));
        assert_eq!(list(&broker, 10, T + 6), (0, 3, T + 10, 0));
        assert_eq!(list(&broker, 10, T + 10), (0, 3, T + 10, 0));
        assert_eq!(list(&broker, 10, T + 11), (0, -1, -1, -1));
        // No leader epoch before v4.
        assert_eq!(list(&broker, 1, T + 6), (0, 3, T + 10, -1));
        assert_eq!(list(&broker, 3, LATEST_TIMESTAMP), (0, 5, -1, -1));
        assert_eq!(list(&broker, 4, LATEST_TIMESTAMP), (0, 5, -1, 0));
    }

    #[test]
    fn read_committed_stops_at_the_open_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "t", 1);
        let tp = TopicPartition::new("t", 0);
        append(&broker, &tp, &BatchBuilder::default(), &[T, T + 1]); // 0, 1
        let producer_id = broker.producer_ids.next().unwrap();
        let txn = BatchBuilder {
            producer_id,
            producer_epoch: 0,
            base_sequence: 0,
            transactional: true,
            ..BatchBuilder::default()
        };
        append(&broker, &tp, &txn, &[T + 2, T + 3]); // 2, 3
        let committed = |ts| list_full(&broker, 10, ts, CONSUMER_REPLICA_ID, READ_COMMITTED, -1);

        assert_eq!(list(&broker, 10, LATEST_TIMESTAMP).1, 4);
        assert_eq!(committed(LATEST_TIMESTAMP).1, 2);
        // Lookups never point past what the asker may read.
        assert_eq!(list(&broker, 10, T + 2).1, 2);
        assert_eq!(committed(T + 2), (0, -1, -1, -1));
        assert_eq!(committed(MAX_TIMESTAMP), (0, -1, -1, -1));
        assert_eq!(committed(T + 1).1, 1);
        // Followers and tools see the log end whatever the isolation level.
        assert_eq!(
            list_full(&broker, 10, LATEST_TIMESTAMP, 7, READ_COMMITTED, -1).1,
            4
        );

        let marker = txn.build_control(ControlType::Commit, T + 4, txn_marker_value(0));
        let o = broker
            .replicas
            .append(&tp, &marker.into(), -1, AppendOrigin::Coordinator);
        assert_eq!(o.error, None, "{:?}", o.message);
        assert_eq!(committed(LATEST_TIMESTAMP).1, 5);
        assert_eq!(committed(T + 2).1, 2);
    }

    #[test]
    fn leader_epochs_fencing_and_partition_errors() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "t", 2);
        let tp = TopicPartition::new("t", 0);
        append(&broker, &tp, &BatchBuilder::default(), &[T]); // 0 at epoch 0
        change_leader(&broker, &tp, 1);
        append(&broker, &tp, &BatchBuilder::default(), &[T + 1]); // 1 at epoch 1

        assert_eq!(list(&broker, 10, EARLIEST_TIMESTAMP), (0, 0, -1, 0));
        assert_eq!(list(&broker, 10, LATEST_TIMESTAMP), (0, 2, -1, 1));
        assert_eq!(list(&broker, 10, T + 1), (0, 1, T + 1, 1));
        assert_eq!(list(&broker, 10, T), (0, 0, T, 0));
        assert_eq!(list_full(&broker, 10, LATEST_TIMESTAMP, -1, 0, 1).1, 2);
        let fenced = list_full(&broker, 10, LATEST_TIMESTAMP, -1, 0, 0);
        assert_eq!(
            fenced,
            (ResponseError::FencedLeaderEpoch.code(), -1, -1, -1)
        );
        let unknown = list_full(&broker, 10, LATEST_TIMESTAMP, -1, 0, 2);
        assert_eq!(unknown.0, ResponseError::UnknownLeaderEpoch.code());

        // Unknown topics and partitions.
        let r = handle(
            &broker,
            10,
            request(&[("nope", 0, -1), ("t", 9, -1)], -1, 0, -1),
        );
        assert_encodes(&r, 10);
        let codes: Vec<i16> = r
            .topics
            .iter()
            .map(|t| t.partitions[0].error_code)
            .collect();
        assert_eq!(
            codes,
            vec![ResponseError::UnknownTopicOrPartition.code(); 2]
        );

        // A partition asked twice is answered once, with INVALID_REQUEST;
        // the other partitions of the topic are answered normally.
        let r = handle(
            &broker,
            10,
            request(&[("t", 0, -1), ("t", 1, -1), ("t", 0, -2)], -1, 0, -1),
        );
        assert_encodes(&r, 10);
        assert_eq!(r.topics.len(), 1);
        let answers: Vec<(i32, i16, i64)> = r.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.error_code, p.offset))
            .collect();
        assert_eq!(
            answers,
            vec![(0, ResponseError::InvalidRequest.code(), -1), (1, 0, 0)]
        );

        // Leadership moved away: only the debugging replica id may still ask.
        change_leader(&broker, &tp, -1);
        let not_leader = ResponseError::NotLeaderOrFollower.code();
        assert_eq!(list(&broker, 10, LATEST_TIMESTAMP).0, not_leader);
        assert_eq!(
            list_full(&broker, 10, LATEST_TIMESTAMP, 5, 0, -1).0,
            not_leader
        );
        assert_eq!(
            list_full(&broker, 10, LATEST_TIMESTAMP, DEBUGGING_REPLICA_ID, 0, -1),
            (0, 2, -1, 2)
        );
    }

    #[test]
    fn responses_encode_at_every_version() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "t", 1);
        append(
            &broker,
            &TopicPartition::new("t", 0),
            &BatchBuilder::default(),
            &[T],
        );
        for version in 1..=10 {
            for ts in [
                LATEST_TIMESTAMP,
                EARLIEST_TIMESTAMP,
                MAX_TIMESTAMP,
                EARLIEST_LOCAL_TIMESTAMP,
                LATEST_TIERED_TIMESTAMP,
                T,
            ] {
                let r = handle(
                    &broker,
                    version,
                    request(&[("t", 0, ts), ("t", 0, ts), ("u", 0, ts)], -1, 0, -1),
                );
                assert_encodes(&r, version);
            }
        }
    }
}
