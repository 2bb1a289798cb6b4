//! OffsetForLeaderEpoch (v2-4): the end offset of a leader epoch, which
//! followers use to find where to truncate and consumers (KIP-320) to
//! detect truncation after a leader change.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderEpochRequest;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult,
};
use ottla_controller::MetadataImage;
use ottla_storage::manager::TopicPartition;

use super::partition_access::local_partition;
use crate::broker::Broker;

pub fn handle(
    broker: &Broker,
    _version: i16,
    req: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let image = broker.controller.image();
    // `replica_id` (v3+) only decides authorization in Kafka: consumers and
    // followers alike must ask the leader.
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let tp = TopicPartition::new(t.topic.to_string(), p.partition);
                    let r = EpochEndOffset::default().with_partition(p.partition);
                    match end_offset(broker, &image, &tp, p.current_leader_epoch, p.leader_epoch) {
                        Ok((epoch, offset)) => r.with_leader_epoch(epoch).with_end_offset(offset),
                        Err(e) => r.with_error_code(e.code()),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

/// `(epoch, end offset)` of the largest epoch <= `leader_epoch`; (-1, -1)
/// without an error when the epoch is undefined or newer than any known.
fn end_offset(
    broker: &Broker,
    image: &MetadataImage,
    tp: &TopicPartition,
    current_leader_epoch: i32,
    leader_epoch: i32,
) -> Result<(i32, i64), ResponseError> {
    let (partition, state) = local_partition(broker, image, tp, current_leader_epoch, true)?;
    let log = partition.log.read();
    let cached = log.end_offset_for_epoch(leader_epoch);
    Ok(with_leader_epoch_started(
        cached,
        log.latest_epoch(),
        state.leader_epoch,
        leader_epoch,
        log.log_end_offset(),
    ))
}

/// Kafka writes a new leader's epoch into the epoch cache, at the log end,
/// when it takes over; Ottla's log learns an epoch with its first append.
/// Until then, answer as if that entry were there.
fn with_leader_epoch_started(
    cached: (i32, i64),
    latest_cached: Option<i32>,
    current: i32,
    requested: i32,
    log_end: i64,
) -> (i32, i64) {
    let pending = latest_cached.is_none_or(|c| c < current);
    if !pending
        || requested < 0
        || requested > current
        || latest_cached.is_some_and(|c| requested <= c)
    {
        return cached;
    }
    // Between the last cached epoch and the current one, the floor is the
    // last cached epoch; below an empty cache, the requested one (KIP-279).
    let epoch = if requested == current {
        current
    } else {
        latest_cached.unwrap_or(requested)
    };
    (epoch, log_end)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use ottla_protocol::batch::BatchBuilder;

    use super::*;
    use crate::apis::test_support::{
        append, assert_encodes, change_leader, create_topic, test_broker,
    };

    const T: i64 = 1_700_000_000_000;

    /// (error, leader epoch, end offset) for one partition, after checking
    /// the response encodes at `version`.
    fn ask(
        broker: &Broker,
        version: i16,
        replica_id: i32,
        topic: &str,
        current_leader_epoch: i32,
        leader_epoch: i32,
    ) -> (i16, i32, i64) {
        let req = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(replica_id))
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(current_leader_epoch)
                    .with_leader_epoch(leader_epoch)])]);
        let r = handle(broker, version, req);
        assert_encodes(&r, version);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.leader_epoch, p.end_offset)
    }

    fn epoch_end(broker: &Broker, leader_epoch: i32) -> (i16, i32, i64) {
        ask(broker, 4, -1, "t", -1, leader_epoch)
    }

    #[test]
    fn end_offsets_of_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "t", 1);
        let tp = TopicPartition::new("t", 0);
        append(&broker, &tp, &BatchBuilder::default(), &[T, T]); // 0, 1 at epoch 0
        change_leader(&broker, &tp, 1);
        append(&broker, &tp, &BatchBuilder::default(), &[T, T, T]); // 2..=4 at epoch 1

        assert_eq!(epoch_end(&broker, 0), (0, 0, 2));
        assert_eq!(epoch_end(&broker, 1), (0, 1, 5));
        assert_eq!(epoch_end(&broker, -1), (0, -1, -1));
        assert_eq!(epoch_end(&broker, 2), (0, -1, -1));

        // A new epoch with nothing written yet starts at the log end.
        change_leader(&broker, &tp, 1);
        assert_eq!(epoch_end(&broker, 2), (0, 2, 5));
        assert_eq!(epoch_end(&broker, 1), (0, 1, 5));
        assert_eq!(epoch_end(&broker, 3), (0, -1, -1));

        // Below the earliest cached epoch: the requested epoch, ending where
        // the known history starts (KIP-279).
        broker
            .replicas
            .partition(&tp)
            .unwrap()
            .log
            .write()
            .delete_records_before(3)
            .unwrap();
        assert_eq!(epoch_end(&broker, 0), (0, 0, 3));
        assert_eq!(ask(&broker, 2, 1, "t", -1, 1), (0, 1, 5));
    }

    #[test]
    fn epoch_of_an_empty_partition_after_a_leader_change() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "t", 1);
        assert_eq!(epoch_end(&broker, 0), (0, 0, 0));
        change_leader(&broker, &TopicPartition::new("t", 0), 1);
        assert_eq!(epoch_end(&broker, 1), (0, 1, 0));
        assert_eq!(epoch_end(&broker, 0), (0, 0, 0));
    }

    #[test]
    fn fencing_and_partition_errors() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        create_topic(&broker, "t", 1);
        let tp = TopicPartition::new("t", 0);
        append(&broker, &tp, &BatchBuilder::default(), &[T]);
        change_leader(&broker, &tp, 1);

        assert_eq!(ask(&broker, 4, -1, "t", 1, 0), (0, 0, 1));
        assert_eq!(
            ask(&broker, 4, -1, "t", 0, 0).0,
            ResponseError::FencedLeaderEpoch.code()
        );
        assert_eq!(
            ask(&broker, 3, 2, "t", 2, 0).0,
            ResponseError::UnknownLeaderEpoch.code()
        );
        assert_eq!(
            ask(&broker, 2, -1, "nope", -1, 0),
            (ResponseError::UnknownTopicOrPartition.code(), -1, -1)
        );

        // Consumers and followers alike must ask the leader.
        change_leader(&broker, &tp, -1);
        let not_leader = ResponseError::NotLeaderOrFollower.code();
        assert_eq!(ask(&broker, 4, -1, "t", -1, 0), (not_leader, -1, -1));
        assert_eq!(ask(&broker, 4, 2, "t", -1, 0), (not_leader, -1, -1));
        // The epoch check comes first.
        assert_eq!(
            ask(&broker, 4, -1, "t", 1, 0).0,
            ResponseError::FencedLeaderEpoch.code()
        );
    }
}
