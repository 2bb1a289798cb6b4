//! Transaction markers and the ISR: a marker counts only once every ISR
//! member of its partition has it (acks=all), and one that does not is sent
//! again, to whichever broker leads the partition by then. The group
//! coordinator's writes (offsets, transactional or not) are answered once
//! the offsets partition's ISR has them. Followers are played by the test
//! (`follower_fetched`), another leader by a small fake broker answering
//! WriteTxnMarkers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, GroupId, OffsetCommitRequest, ProducerId, RequestHeader,
    ResponseHeader, TopicName, TransactionalId, TxnOffsetCommitRequest, WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use ottla_controller::records::Endpoint;
use ottla_controller::MetadataRecord;
use ottla_storage::manager::TopicPartition;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use super::services;
use super::tests::{
    add, coordinator_ready, describe, end, new_producer, open_with, produce, read_committed, s, tp,
    NONE, TOPIC,
};
use crate::apis::{group, test_support, txn};
use crate::broker::Broker;
use crate::replica::now_ms;
use ottla_group_coordinator::OFFSETS_TOPIC;

/// How long markers and offsets wait for their ISR in these tests.
const TIMEOUT_MS: u64 = 200;

fn open_broker(dir: &std::path::Path) -> Arc<Broker> {
    let timeout = TIMEOUT_MS.to_string();
    open_with(
        dir,
        &[
            ("request.timeout.ms", &timeout),
            ("offsets.commit.timeout.ms", &timeout),
        ],
    )
}

/// Commits a leader/ISR/replica change of `tp` and applies it here.
fn change_partition(
    broker: &Broker,
    tp: &TopicPartition,
    leader: Option<i32>,
    isr: &[i32],
    replicas: &[i32],
) {
    test_support::change_partition(broker, tp, leader, Some(isr), Some(replicas));
}

fn log_end(broker: &Broker, tp: &TopicPartition) -> i64 {
    broker.replicas.offsets(tp).unwrap().log_end
}

/// Broker 2 joins `tp`'s ISR, having fetched everything written so far.
fn add_follower(broker: &Broker, tp: &TopicPartition) {
    change_partition(broker, tp, None, &[1, 2], &[1, 2]);
    let end = log_end(broker, tp);
    assert_eq!(broker.replicas.follower_fetched(tp, 2, end, -1), None);
}

/// Runs `f` on the blocking pool (as the broker runs coordinator work)
/// while follower 2 keeps fetching `tp` up to its log end.
async fn with_follower_fetching<T: Send + 'static>(
    broker: &Arc<Broker>,
    tp: &TopicPartition,
    f: impl FnOnce(&Broker) -> T + Send + 'static,
) -> T {
    let b = broker.clone();
    let task = tokio::task::spawn_blocking(move || f(b.as_ref()));
    while !task.is_finished() {
        broker
            .replicas
            .follower_fetched(tp, 2, log_end(broker, tp), -1);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    task.await.unwrap()
}

/// A marker appended to the leader's log but not yet on its ISR does not
/// complete the transaction: EndTxn answers (the commit is decided and
/// stored) after `request.timeout.ms`, the transaction stays
/// PrepareCommit, nothing is visible to read_committed, and the tick
/// completes it once the follower has the marker.
#[tokio::test]
async fn a_marker_the_isr_lacks_does_not_complete_the_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path());
    let id = "tx-isr";
    coordinator_ready(&broker, 1, id).await;
    let producer = new_producer(&broker, id);
    assert_eq!(add(&broker, 3, id, producer, &[(TOPIC, 0)]), vec![NONE]);
    assert_eq!(
        produce(&broker, 9, Some(id), producer, 0, 0, &["a", "b"]),
        NONE
    );
    add_follower(&broker, &tp(0));

    let started = Instant::now();
    assert_eq!(end(&broker, 3, id, producer, true).error_code, NONE);
    assert!(
        started.elapsed() >= Duration::from_millis(TIMEOUT_MS),
        "EndTxn waited {:?} for the ISR",
        started.elapsed()
    );
    assert_eq!(
        describe(&broker, id).transaction_state.as_str(),
        "PrepareCommit"
    );
    assert!(read_committed(&broker, 0).values.is_empty());
    // The producer's next transaction waits for this one.
    assert_eq!(
        add(&broker, 3, id, producer, &[(TOPIC, 1)]),
        vec![ResponseError::ConcurrentTransactions.code()]
    );
    // Still lagging: the tick's retry does not complete it either.
    broker.txns.tick(&services(&broker), now_ms());
    assert_eq!(
        describe(&broker, id).transaction_state.as_str(),
        "PrepareCommit"
    );

    with_follower_fetching(&broker, &tp(0), |b| b.txns.tick(&services(b), now_ms())).await;
    assert_eq!(
        describe(&broker, id).transaction_state.as_str(),
        "CompleteCommit"
    );
    let c = read_committed(&broker, 0);
    assert_eq!(c.values, vec!["a", "b"]);
    assert_eq!(c.lso, c.log_end);
}

fn marker_request(producer_id: i64, partitions: Vec<i32>) -> WriteTxnMarkersRequest {
    WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(0)
        .with_transaction_result(true)
        .with_coordinator_epoch(0)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partition_indexes(partitions)])])
}

fn marker_codes(r: &WriteTxnMarkersResponse) -> Vec<i16> {
    r.markers[0].topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect()
}

/// WriteTxnMarkers answers a partition once its ISR has the marker
/// (Kafka's acks=-1 append), REQUEST_TIMED_OUT when that takes longer than
/// `request.timeout.ms`, and NOT_LEADER_OR_FOLLOWER where this broker no
/// longer leads: the coordinator then retries.
#[tokio::test]
async fn write_txn_markers_answers_once_the_isr_has_the_marker() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path());
    add_follower(&broker, &tp(0));
    add_follower(&broker, &tp(1));

    let started = Instant::now();
    let r = txn::write_txn_markers(&broker, 1, marker_request(77, vec![0, 1]));
    let timed_out = ResponseError::RequestTimedOut.code();
    assert_eq!(marker_codes(&r), vec![timed_out, timed_out]);
    // One deadline for the whole request, not one per partition.
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(TIMEOUT_MS)
            && waited < Duration::from_millis(3 * TIMEOUT_MS),
        "waited {waited:?}"
    );

    let r = with_follower_fetching(&broker, &tp(0), |b| {
        txn::write_txn_markers(b, 1, marker_request(77, vec![0]))
    })
    .await;
    assert_eq!(marker_codes(&r), vec![NONE]);
    let o = broker.replicas.offsets(&tp(0)).unwrap();
    assert_eq!(
        o.high_watermark, o.log_end,
        "answered once the high watermark passed the marker"
    );

    change_partition(&broker, &tp(1), Some(2), &[1, 2], &[1, 2]);
    let r = txn::write_txn_markers(&broker, 1, marker_request(77, vec![1]));
    assert_eq!(
        marker_codes(&r),
        vec![ResponseError::NotLeaderOrFollower.code()]
    );
}

/// What the fake broker was asked: (producer id, commit, partitions).
type Asked = Arc<Mutex<Vec<(i64, bool, Vec<i32>)>>>;

/// A broker that answers WriteTxnMarkers v1 with `codes`, one per request
/// in turn (then NONE), recording each request. Returns its port.
async fn fake_leader(codes: Vec<i16>, asked: Asked) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut codes = codes.into_iter();
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            loop {
                let mut len = [0u8; 4];
                if conn.read_exact(&mut len).await.is_err() {
                    break;
                }
                let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
                conn.read_exact(&mut frame).await.unwrap();
                let mut buf = Bytes::from(frame);
                let header =
                    RequestHeader::decode(&mut buf, WriteTxnMarkersRequest::header_version(1))
                        .unwrap();
                assert_eq!(header.request_api_key, 27, "WriteTxnMarkers");
                let req = WriteTxnMarkersRequest::decode(&mut buf, 1).unwrap();
                assert!(!buf.has_remaining());
                let code = codes.next().unwrap_or(NONE);
                let m = &req.markers[0];
                let partitions = m.topics[0].partition_indexes.clone();
                asked
                    .lock()
                    .push((m.producer_id.0, m.transaction_result, partitions.clone()));
                let response = WriteTxnMarkersResponse::default().with_markers(vec![
                    WritableTxnMarkerResult::default()
                        .with_producer_id(m.producer_id)
                        .with_topics(vec![WritableTxnMarkerTopicResult::default()
                            .with_name(m.topics[0].name.clone())
                            .with_partitions(
                                partitions
                                    .iter()
                                    .map(|&p| {
                                        WritableTxnMarkerPartitionResult::default()
                                            .with_partition_index(p)
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )]),
                ]);
                let mut out = BytesMut::new();
                out.put_i32(0);
                ResponseHeader::default()
                    .with_correlation_id(header.correlation_id)
                    .encode(&mut out, WriteTxnMarkersResponse::header_version(1))
                    .unwrap();
                response.encode(&mut out, 1).unwrap();
                let n = (out.len() - 4) as i32;
                out[..4].copy_from_slice(&n.to_be_bytes());
                conn.write_all(&out).await.unwrap();
            }
        }
    });
    port
}

/// The marker of a partition whose leader changed before its ISR had it
/// goes to the new leader (as Kafka's marker channel re-resolves the
/// leader), and is sent again after each retriable answer until the new
/// leader acknowledges it; only then is the transaction complete.
#[tokio::test]
async fn markers_are_retried_to_the_new_leader() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path());
    let asked: Asked = Arc::default();
    let port = fake_leader(
        vec![
            ResponseError::NotLeaderOrFollower.code(),
            ResponseError::NotEnoughReplicas.code(),
        ],
        asked.clone(),
    )
    .await;
    test_support::wait_for(
        &broker.controller,
        broker
            .controller
            .commit_records(vec![MetadataRecord::RegisterBroker {
                broker_id: 2,
                incarnation_id: Uuid::new_v4(),
                endpoints: vec![Endpoint {
                    listener: "PLAINTEXT".to_string(),
                    host: "127.0.0.1".to_string(),
                    port,
                    security_protocol: "PLAINTEXT".to_string(),
                }],
                rack: None,
            }]),
    )
    .expect("registering broker 2");

    let id = "tx-moved";
    coordinator_ready(&broker, 1, id).await;
    let producer = new_producer(&broker, id);
    assert_eq!(add(&broker, 3, id, producer, &[(TOPIC, 0)]), vec![NONE]);
    assert_eq!(produce(&broker, 9, Some(id), producer, 0, 0, &["m"]), NONE);
    add_follower(&broker, &tp(0));
    // The marker reaches this leader's log only: not acknowledged.
    assert_eq!(end(&broker, 3, id, producer, true).error_code, NONE);
    assert_eq!(
        describe(&broker, id).transaction_state.as_str(),
        "PrepareCommit"
    );

    // Broker 2 takes over (this broker's marker would be truncated).
    change_partition(&broker, &tp(0), Some(2), &[2], &[1, 2]);
    let tick = |broker: &Arc<Broker>| {
        let b = broker.clone();
        tokio::task::spawn_blocking(move || b.txns.tick(&services(&b), now_ms()))
    };
    for answer in ["NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS"] {
        tick(&broker).await.unwrap();
        assert_eq!(
            describe(&broker, id).transaction_state.as_str(),
            "PrepareCommit",
            "after {answer}"
        );
    }
    tick(&broker).await.unwrap();
    assert_eq!(
        describe(&broker, id).transaction_state.as_str(),
        "CompleteCommit"
    );
    let expected = (producer.0, true, vec![0]);
    assert_eq!(
        *asked.lock(),
        vec![expected.clone(), expected.clone(), expected]
    );
}

/// TxnOffsetCommit with `producer` for group `g`: the code of partition 0.
fn commit_offset(broker: &Broker, id: &str, producer: (i64, i16)) -> i16 {
    let req = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_group_id(GroupId(s("g")))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(42)])]);
    txn::txn_offset_commit(broker, 3, req).topics[0].partitions[0].error_code
}

/// Transactional offsets are acknowledged once the offsets partition's ISR
/// has them (COORDINATOR_NOT_AVAILABLE, which producers retry, when it
/// does not within `offsets.commit.timeout.ms`), and their commit marker, written
/// through the group coordinator, counts only once that ISR has it too.
#[tokio::test]
async fn transactional_offsets_and_their_marker_wait_for_the_offsets_isr() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path());
    let id = "tx-offsets-isr";
    coordinator_ready(&broker, 1, id).await;
    coordinator_ready(&broker, 0, "g").await;
    let producer = new_producer(&broker, id);
    let req = AddOffsetsToTxnRequest::default()
        .with_transactional_id(TransactionalId(s(id)))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_group_id(GroupId(s("g")));
    assert_eq!(txn::add_offsets_to_txn(&broker, 3, req).error_code, NONE);
    let offsets = TopicPartition::new(OFFSETS_TOPIC, broker.groups.partition_for("g"));
    add_follower(&broker, &offsets);

    assert_eq!(
        commit_offset(&broker, id, producer),
        ResponseError::CoordinatorNotAvailable.code()
    );
    let retried =
        with_follower_fetching(&broker, &offsets, move |b| commit_offset(b, id, producer)).await;
    assert_eq!(retried, NONE);

    assert_eq!(end(&broker, 3, id, producer, true).error_code, NONE);
    assert_eq!(
        describe(&broker, id).transaction_state.as_str(),
        "PrepareCommit"
    );
    with_follower_fetching(&broker, &offsets, |b| b.txns.tick(&services(b), now_ms())).await;
    assert_eq!(
        describe(&broker, id).transaction_state.as_str(),
        "CompleteCommit"
    );
}

/// OffsetCommit of `offset` to partition 0 for the simple group `g`: the
/// partition's code.
async fn commit_plain_offset(broker: &Broker, offset: i64) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    group::offset_commit(broker, 8, req).await.topics[0].partitions[0].error_code
}

/// An offset commit is answered once the offsets partition's ISR has it,
/// as Kafka's coordinator runtime waits for the high watermark: one the
/// ISR lacks after `offsets.commit.timeout.ms` is answered
/// COORDINATOR_NOT_AVAILABLE (a leader change could still take it back),
/// and a retry succeeds once the follower fetches.
#[tokio::test]
async fn an_offset_commit_is_answered_once_the_offsets_isr_has_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path());
    coordinator_ready(&broker, 0, "g").await;
    let offsets = TopicPartition::new(OFFSETS_TOPIC, broker.groups.partition_for("g"));
    assert_eq!(commit_plain_offset(&broker, 41).await, NONE);
    add_follower(&broker, &offsets);

    let started = Instant::now();
    assert_eq!(
        commit_plain_offset(&broker, 42).await,
        ResponseError::CoordinatorNotAvailable.code()
    );
    assert!(
        started.elapsed() >= Duration::from_millis(TIMEOUT_MS),
        "answered after {:?}, before the ISR had the commit",
        started.elapsed()
    );

    let b = broker.clone();
    let retry = tokio::spawn(async move { commit_plain_offset(&b, 43).await });
    while !retry.is_finished() {
        broker
            .replicas
            .follower_fetched(&offsets, 2, log_end(&broker, &offsets), -1);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(retry.await.unwrap(), NONE);
    let o = broker.replicas.offsets(&offsets).unwrap();
    assert_eq!(
        o.high_watermark, o.log_end,
        "answered before the ISR had it"
    );
}

/// An acks=all wait ends with NOT_LEADER_OR_FOLLOWER as soon as leadership
/// moves away, not at its timeout: a producer left unanswered past its own
/// request timeout bumps its epoch and re-sends, duplicating what the new
/// leader may already have (defect 3).
#[tokio::test]
async fn an_acks_all_wait_ends_when_leadership_moves() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path());
    coordinator_ready(&broker, 1, "tx-moves").await;
    add_follower(&broker, &tp(0));
    let beyond = log_end(&broker, &tp(0)) + 1;
    let b = broker.clone();
    let wait = tokio::spawn(async move {
        b.replicas
            .wait_replicated(&tp(0), beyond, Duration::from_secs(60))
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !wait.is_finished(),
        "the wait ended before leadership moved"
    );
    change_partition(&broker, &tp(0), Some(2), &[1, 2], &[1, 2]);
    let outcome = tokio::time::timeout(Duration::from_secs(5), wait)
        .await
        .expect("the acks=all wait still sleeps after leadership moved")
        .unwrap();
    assert_eq!(outcome, Err(ResponseError::NotLeaderOrFollower));
}

/// An ISR change the leader asked for, overtaken by a different ISR in the
/// metadata (the controller fenced a broker meanwhile, with no new leader
/// epoch), is settled: the leader asks again when it must. Left pending, it
/// blocked every later change of the partition, and a restarted follower
/// never rejoined the ISR (found by the random-fault test).
#[tokio::test]
async fn an_isr_change_overtaken_by_another_is_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = test_support::test_settings(dir.path());
    settings.replica_lag_max = Duration::from_millis(50);
    let broker = test_support::open_broker(settings).expect("opening the broker");
    test_support::create_topic(&broker, TOPIC, 1);
    change_partition(&broker, &tp(0), Some(1), &[1, 2, 3], &[1, 2, 3]);
    let shrinks = || broker.replicas.isr_change_counts().0;
    tokio::time::sleep(Duration::from_millis(100)).await;
    broker.replicas.shrink_lagging_isrs();
    assert_eq!(
        shrinks(),
        1,
        "followers 2 and 3 lag: the leader asks for [1]"
    );
    change_partition(&broker, &tp(0), None, &[1, 2], &[1, 2, 3]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    broker.replicas.shrink_lagging_isrs();
    assert_eq!(shrinks(), 2, "follower 2 still lags: the leader asks again");
}
