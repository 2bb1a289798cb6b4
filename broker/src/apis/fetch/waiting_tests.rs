//! Long-polling fetches wait on their own partitions (the purgatory): an
//! append elsewhere leaves them waiting, an append to one of theirs answers
//! them at once with its records, and a consumer's fetch waits for the
//! high watermark, not the leader's log end.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_protocol::batch::BatchBuilder;
use ottla_storage::manager::TopicPartition;
use tokio::task::JoinHandle;

use super::{handle, Fetched};
use crate::apis::test_support::{append, change_partition, create_topic, test_broker};
use crate::broker::Broker;

const TOPIC: &str = "watched";

/// A consumer's sessionless Fetch v12 of `partitions` of [`TOPIC`] from
/// offset 0, waiting up to `max_wait_ms` for one byte.
fn long_poll(broker: &Arc<Broker>, partitions: &[i32], max_wait_ms: i32) -> JoinHandle<Fetched> {
    let topic = FetchTopic::default()
        .with_topic(TopicName(StrBytes::from_static_str(TOPIC)))
        .with_partitions(
            partitions
                .iter()
                .map(|p| {
                    FetchPartition::default()
                        .with_partition(*p)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20)
                })
                .collect(),
        );
    let request = FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![topic]);
    let broker = broker.clone();
    tokio::spawn(async move { handle(&broker, 12, "PLAINTEXT", request, None).await })
}

/// The partitions of the answer that carry records.
fn with_records(fetched: &Fetched) -> Vec<i32> {
    fetched.response.responses[0]
        .partitions
        .iter()
        .filter(|p| p.records.as_ref().is_some_and(|r| !r.is_empty()))
        .map(|p| p.partition_index)
        .collect()
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

async fn still_waiting(fetch: &JoinHandle<Fetched>) -> bool {
    tokio::time::sleep(Duration::from_millis(150)).await;
    !fetch.is_finished()
}

async fn answer(fetch: JoinHandle<Fetched>) -> Fetched {
    tokio::time::timeout(Duration::from_secs(5), fetch)
        .await
        .expect("the fetch was not answered")
        .expect("the fetch panicked")
}

#[tokio::test]
async fn a_long_poll_is_answered_by_an_append_to_one_of_its_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    create_topic(&broker, TOPIC, 4);
    create_topic(&broker, "elsewhere", 1);
    let fetch = long_poll(&broker, &[0, 1, 2], 30_000);
    assert!(still_waiting(&fetch).await, "answered with nothing to read");

    append(&broker, &tp("elsewhere", 0), &BatchBuilder::default(), &[1]);
    append(&broker, &tp(TOPIC, 3), &BatchBuilder::default(), &[1]);
    assert!(
        still_waiting(&fetch).await,
        "answered by appends to partitions it does not read"
    );

    append(&broker, &tp(TOPIC, 1), &BatchBuilder::default(), &[1, 2]);
    let fetched = answer(fetch).await;
    assert_eq!(with_records(&fetched), vec![1]);
    assert!(fetched.waited < Duration::from_secs(5));
}

#[tokio::test]
async fn a_consumer_long_poll_waits_for_the_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    create_topic(&broker, TOPIC, 2);
    // Follower 2 in the ISR: the leader's appends are not committed until
    // it has fetched them.
    let p1 = tp(TOPIC, 1);
    change_partition(&broker, &p1, None, Some(&[1, 2]), Some(&[1, 2]));
    let fetch = long_poll(&broker, &[0, 1], 30_000);
    append(&broker, &p1, &BatchBuilder::default(), &[1, 2, 3]);
    assert!(
        still_waiting(&fetch).await,
        "answered before the high watermark moved"
    );

    let end = broker.replicas.offsets(&p1).expect("hosted").log_end;
    assert_eq!(broker.replicas.follower_fetched(&p1, 2, end, -1), None);
    let fetched = answer(fetch).await;
    assert_eq!(with_records(&fetched), vec![1]);
    let answered = &fetched.response.responses[0].partitions[1];
    assert_eq!(answered.high_watermark, end);
}
