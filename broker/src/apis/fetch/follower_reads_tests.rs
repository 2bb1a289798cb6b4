//! Fetch from follower (KIP-392): a rack-aware leader sends a consumer to an
//! in-sync replica in its rack, a follower serves consumers up to its own
//! high watermark, and a follower's fetch is answered as soon as the
//! leader's high watermark moves, so that it can serve them without delay.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::records::Endpoint;
use ottla_controller::MetadataRecord;
use ottla_protocol::batch::BatchBuilder;
use ottla_storage::manager::TopicPartition;

use super::{handle, Fetched};
use crate::apis::test_support::{
    append, change_partition, create_topic, open_broker, test_settings, wait_for,
};
use crate::broker::Broker;

const TOPIC: &str = "racked";

fn tp() -> TopicPartition {
    TopicPartition::new(TOPIC, 0)
}

/// Who fetches: a consumer (its rack, if any) or replica `n`, saying
/// which high watermark it has (Fetch v18) or not.
#[derive(Clone, Copy)]
enum Fetcher {
    Consumer(&'static str),
    Replica(i32, Option<i64>),
}

/// One fetch of [`TOPIC`]-0 at `offset`, in session `session` (id, epoch;
/// epoch -1 for none), waiting up to `max_wait_ms` for a byte.
fn fetch(
    broker: &Arc<Broker>,
    version: i16,
    who: Fetcher,
    offset: i64,
    session: (i32, i32),
    max_wait_ms: i32,
) -> tokio::task::JoinHandle<Fetched> {
    let mut partition = FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20);
    if let Fetcher::Replica(_, Some(stated)) = who {
        partition.high_watermark = stated;
    }
    // Topics are named by id from v13.
    let topic_id = broker.controller.image().topic_by_name(TOPIC).unwrap().id;
    let topic = FetchTopic::default()
        .with_topic(TopicName(StrBytes::from_static_str(TOPIC)))
        .with_topic_id(topic_id)
        .with_partitions(vec![partition]);
    let mut request = FetchRequest::default()
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_session_id(session.0)
        .with_session_epoch(session.1)
        .with_topics(vec![topic]);
    match who {
        Fetcher::Consumer(rack) => request.rack_id = StrBytes::from_static_str(rack),
        Fetcher::Replica(id, _) => {
            request.replica_id = BrokerId(id);
            request.replica_state = ReplicaState::default().with_replica_id(BrokerId(id));
        }
    }
    let broker = broker.clone();
    tokio::spawn(async move { handle(&broker, version, "PLAINTEXT", request, None).await })
}

async fn answer(fetch: tokio::task::JoinHandle<Fetched>) -> Fetched {
    tokio::time::timeout(Duration::from_secs(5), fetch)
        .await
        .expect("the fetch was not answered")
        .expect("the fetch panicked")
}

fn partition(fetched: &Fetched) -> &PartitionData {
    &fetched.response.responses[0].partitions[0]
}

/// The partition's record bytes (a stand-in for a set sent from its file
/// is as long as the set).
fn record_bytes(fetched: &Fetched) -> usize {
    partition(fetched).records.as_ref().map_or(0, |r| r.len())
}

/// Registers brokers 1-3 in racks a, b and c, reachable on PLAINTEXT.
fn register_racks(broker: &Broker) {
    let records = [(1, "a"), (2, "b"), (3, "c")]
        .into_iter()
        .flat_map(|(id, rack)| {
            [
                MetadataRecord::RegisterBroker {
                    broker_id: id,
                    incarnation_id: uuid::Uuid::new_v4(),
                    endpoints: vec![Endpoint {
                        listener: "PLAINTEXT".to_string(),
                        host: "127.0.0.1".to_string(),
                        port: 9000 + id as u16,
                        security_protocol: "PLAINTEXT".to_string(),
                    }],
                    rack: Some(rack.to_string()),
                },
                MetadataRecord::BrokerFence {
                    broker_id: id,
                    fenced: false,
                },
            ]
        })
        .collect();
    wait_for(
        &broker.controller,
        broker.controller.commit_records(records),
    )
    .unwrap();
    broker.replicas.apply_image(&broker.controller.image());
}

/// A broker (node 1, rack a) leading [`TOPIC`]-0 over replicas 1-3, with
/// `rack_aware` reads or not, holding three records (offset 0, then 1-2)
/// that follower 2 has fetched and follower 3 has fetched the first of.
fn leader_of_three(dir: &std::path::Path, rack_aware: bool) -> Arc<Broker> {
    let mut settings = test_settings(dir);
    settings.rack_aware_reads = rack_aware;
    let broker = open_broker(settings).expect("opening the broker");
    register_racks(&broker);
    create_topic(&broker, TOPIC, 1);
    change_partition(&broker, &tp(), None, Some(&[1, 2, 3]), Some(&[1, 2, 3]));
    append(&broker, &tp(), &BatchBuilder::default(), &[1]);
    append(&broker, &tp(), &BatchBuilder::default(), &[2, 3]);
    assert_eq!(broker.replicas.follower_fetched(&tp(), 2, 3, -1), None);
    assert_eq!(broker.replicas.follower_fetched(&tp(), 3, 1, -1), None);
    broker
}

/// A broker (node 1) leading [`TOPIC`]-0 over replicas 1 and 2, both in
/// sync, with nothing written yet.
fn leading_with_follower_2(dir: &std::path::Path) -> Arc<Broker> {
    let broker = open_broker(test_settings(dir)).expect("opening the broker");
    register_racks(&broker);
    create_topic(&broker, TOPIC, 1);
    change_partition(&broker, &tp(), None, Some(&[1, 2]), Some(&[1, 2]));
    broker
}

#[tokio::test]
async fn a_rack_aware_leader_sends_a_consumer_to_an_in_sync_replica_of_its_rack() {
    let dir = tempfile::tempdir().unwrap();
    let broker = leader_of_three(dir.path(), true);

    let sent = answer(fetch(&broker, 12, Fetcher::Consumer("b"), 0, (0, -1), 0)).await;
    let p = partition(&sent);
    assert_eq!(p.preferred_read_replica, BrokerId(2));
    assert_eq!((p.error_code, p.high_watermark), (0, 1));
    assert_eq!(record_bytes(&sent), 0, "sent elsewhere, so not read here");

    // Follower 3's log ends at 1: it can serve a read from 1, not from 2.
    let from_one = answer(fetch(&broker, 12, Fetcher::Consumer("c"), 1, (0, -1), 0)).await;
    assert_eq!(partition(&from_one).preferred_read_replica, BrokerId(3));
    let from_two = answer(fetch(&broker, 12, Fetcher::Consumer("c"), 2, (0, -1), 0)).await;
    assert_eq!(partition(&from_two).preferred_read_replica, BrokerId(-1));

    for rack in ["a", "z", ""] {
        let here = answer(fetch(&broker, 12, Fetcher::Consumer(rack), 0, (0, -1), 0)).await;
        assert_eq!(
            partition(&here).preferred_read_replica,
            BrokerId(-1),
            "rack {rack:?}"
        );
        assert!(record_bytes(&here) > 0, "the leader serves rack {rack:?}");
    }

    // An out-of-sync replica is no candidate, nor is a fenced one.
    change_partition(&broker, &tp(), None, Some(&[1, 3]), None);
    let out_of_sync = answer(fetch(&broker, 12, Fetcher::Consumer("b"), 0, (0, -1), 0)).await;
    assert_eq!(partition(&out_of_sync).preferred_read_replica, BrokerId(-1));
    let fence = MetadataRecord::BrokerFence {
        broker_id: 3,
        fenced: true,
    };
    wait_for(
        &broker.controller,
        broker.controller.commit_records(vec![fence]),
    )
    .unwrap();
    let fenced = answer(fetch(&broker, 12, Fetcher::Consumer("c"), 0, (0, -1), 0)).await;
    assert_eq!(partition(&fenced).preferred_read_replica, BrokerId(-1));
}

#[tokio::test]
async fn without_a_replica_selector_the_leader_serves_every_rack() {
    let dir = tempfile::tempdir().unwrap();
    let broker = leader_of_three(dir.path(), false);
    let here = answer(fetch(&broker, 12, Fetcher::Consumer("b"), 0, (0, -1), 0)).await;
    assert_eq!(partition(&here).preferred_read_replica, BrokerId(-1));
    assert!(record_bytes(&here) > 0);
}

#[tokio::test]
async fn a_follower_serves_a_consumer_up_to_its_high_watermark() {
    let dir = tempfile::tempdir().unwrap();
    let broker = leading_with_follower_2(dir.path());
    append(&broker, &tp(), &BatchBuilder::default(), &[1, 2]);
    append(&broker, &tp(), &BatchBuilder::default(), &[3]);
    assert_eq!(broker.replicas.follower_fetched(&tp(), 2, 2, -1), None);
    // Node 2 takes over: this node follows with offsets 0-2, of which 0-1
    // are committed.
    change_partition(&broker, &tp(), Some(2), None, None);

    let read = answer(fetch(&broker, 12, Fetcher::Consumer("a"), 0, (0, -1), 0)).await;
    let p = partition(&read);
    assert_eq!((p.error_code, p.high_watermark), (0, 2));
    // Only the first batch, offsets 0-1, is committed: its size is its
    // header's length field plus the 12 bytes before it.
    let records = p.records.as_ref().expect("records");
    let first_batch = 12 + u32::from_be_bytes(records[8..12].try_into().unwrap()) as usize;
    assert_eq!(
        records.len(),
        first_batch,
        "the follower serves what is committed"
    );

    let uncommitted = answer(fetch(&broker, 12, Fetcher::Consumer("a"), 2, (0, -1), 0)).await;
    assert_eq!(partition(&uncommitted).error_code, 0);
    assert_eq!(
        record_bytes(&uncommitted),
        0,
        "nothing past the high watermark"
    );

    let past_the_end = answer(fetch(&broker, 12, Fetcher::Consumer("a"), 4, (0, -1), 0)).await;
    assert_eq!(
        partition(&past_the_end).error_code,
        ResponseError::OffsetOutOfRange.code()
    );

    // Before v11 a consumer reads from the leader only.
    let old = answer(fetch(&broker, 10, Fetcher::Consumer(""), 0, (0, -1), 0)).await;
    assert_eq!(
        partition(&old).error_code,
        ResponseError::NotLeaderOrFollower.code()
    );
}

#[tokio::test]
async fn a_followers_fetch_is_answered_when_the_high_watermark_moves() {
    let dir = tempfile::tempdir().unwrap();
    let broker = leading_with_follower_2(dir.path());
    append(&broker, &tp(), &BatchBuilder::default(), &[1, 2, 3]);

    // Follower 2 opens a session and takes the records; the high
    // watermark is still 0, as the leader has no sign it has them.
    let first = answer(fetch(
        &broker,
        12,
        Fetcher::Replica(2, None),
        0,
        (0, 0),
        10_000,
    ))
    .await;
    assert_eq!(partition(&first).high_watermark, 0);
    assert!(record_bytes(&first) > 0);
    let session = first.response.session_id;

    // Fetching from 3 tells the leader it has them: the high watermark
    // moves to 3, news the follower gets at once rather than after its
    // long poll.
    let moved = answer(fetch(
        &broker,
        12,
        Fetcher::Replica(2, None),
        3,
        (session, 1),
        10_000,
    ))
    .await;
    assert!(
        moved.waited < Duration::from_secs(1),
        "waited {:?}",
        moved.waited
    );
    assert_eq!(partition(&moved).high_watermark, 3);

    // With nothing new, the next fetch waits.
    let idle = fetch(
        &broker,
        12,
        Fetcher::Replica(2, None),
        3,
        (session, 2),
        10_000,
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!idle.is_finished(), "answered with nothing new");
    idle.abort();
}

#[tokio::test]
async fn a_replica_that_says_its_high_watermark_learns_a_newer_one_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let broker = leading_with_follower_2(dir.path());
    append(&broker, &tp(), &BatchBuilder::default(), &[1, 2, 3]);
    assert_eq!(broker.replicas.follower_fetched(&tp(), 2, 3, -1), None);

    // A new session knows nothing the replica was told: only a replica
    // that says it has high watermark 0 (v18) is answered at once.
    let stated = fetch(&broker, 18, Fetcher::Replica(2, Some(0)), 3, (0, 0), 10_000);
    let stated = answer(stated).await;
    assert!(
        stated.waited < Duration::from_secs(1),
        "waited {:?}",
        stated.waited
    );
    assert_eq!(partition(&stated).high_watermark, 3);

    let unsaid = fetch(&broker, 18, Fetcher::Replica(2, None), 3, (0, 0), 10_000);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!unsaid.is_finished(), "answered with nothing new");
    unsaid.abort();
    let up_to_date = fetch(&broker, 18, Fetcher::Replica(2, Some(3)), 3, (0, 0), 10_000);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!up_to_date.is_finished(), "answered a replica that has it");
    up_to_date.abort();
}
