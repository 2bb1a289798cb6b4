//! End-to-end tests of the transaction coordinator through its request
//! handlers, on a real broker in a temporary directory.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use ottla_protocol::batch::{BatchBuilder, BatchIter, ControlType, SimpleRecord};
use ottla_protocol::records::{records_section, walk_records};
use ottla_storage::log::FetchIsolation;
use ottla_storage::manager::TopicPartition;
use ottla_storage::producer_state::AppendOrigin;

use super::services;
use crate::apis::group::{find_coordinator, offset_fetch};
use crate::apis::test_support::{
    assert_encodes, change_leader, create_topic, off_runtime, test_settings,
};
use crate::apis::{init_producer_id, produce, txn};
use crate::broker::Broker;
use crate::replica::{now_ms, ReadSpec};
use ottla_txn_coordinator::records::{encode_key, encode_value};
use ottla_txn_coordinator::{TxnMetadata, TxnState, TRANSACTION_STATE_TOPIC};

pub(super) const NONE: i16 = 0;
pub(super) const TOPIC: &str = "t";

pub(super) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tid(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

pub(super) fn tp(p: i32) -> TopicPartition {
    TopicPartition::new(TOPIC, p)
}

/// A broker with 2 transaction log and 2 offsets partitions, and topic `t`
/// with 2 partitions.
pub(super) fn open(dir: &Path) -> Arc<Broker> {
    open_with(dir, &[])
}

/// [`open`] with more static configs.
pub(super) fn open_with(dir: &Path, configs: &[(&str, &str)]) -> Arc<Broker> {
    let mut settings = test_settings(dir);
    let defaults = [
        ("transaction.state.log.num.partitions", "2"),
        ("offsets.topic.num.partitions", "2"),
    ];
    for &(k, v) in defaults.iter().chain(configs) {
        settings.static_configs.insert(k.to_string(), v.to_string());
    }
    let broker = crate::apis::test_support::open_broker(settings).expect("opening the broker");
    if broker.controller.image().topic_by_name(TOPIC).is_none() {
        create_topic(&broker, TOPIC, 2);
    }
    broker
}

/// FindCoordinator for `key` (creating the internal topic on first use),
/// then hosts its partitions as the background loop would.
pub(super) async fn coordinator_ready(broker: &Broker, key_type: i8, key: &str) {
    // The internal topic is created in the background: ask until it leads.
    for _ in 0..250 {
        let r = find_coordinator(
            broker,
            4,
            "PLAINTEXT",
            FindCoordinatorRequest::default()
                .with_key_type(key_type)
                .with_coordinator_keys(vec![s(key)]),
        );
        assert_encodes(&r, 4);
        if r.coordinators[0].error_code == NONE {
            assert_eq!(r.coordinators[0].node_id.0, 1);
            broker.replicas.apply_image(&broker.controller.image());
            return;
        }
        broker.replicas.apply_image(&broker.controller.image());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no coordinator for {key}");
}

fn init(
    broker: &Broker,
    version: i16,
    id: &str,
    timeout_ms: i32,
    current: (i64, i16),
) -> (i16, i64, i16) {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(tid(id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(current.0))
        .with_producer_epoch(current.1);
    let r = off_runtime(|| init_producer_id::handle(broker, version, req));
    assert_encodes(&r, version);
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// A new transactional producer: (id, epoch).
pub(super) fn new_producer(broker: &Broker, id: &str) -> (i64, i16) {
    let (error, pid, epoch) = init(broker, 4, id, 60_000, (-1, -1));
    assert_eq!(error, NONE);
    (pid, epoch)
}

/// AddPartitionsToTxn v3 (as librdkafka sends it): the partitions' codes.
pub(super) fn add(
    broker: &Broker,
    version: i16,
    id: &str,
    producer: (i64, i16),
    partitions: &[(&str, i32)],
) -> Vec<i16> {
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for &(t, p) in partitions {
        match topics.iter_mut().find(|x| x.name.as_str() == t) {
            Some(x) => x.partitions.push(p),
            None => topics.push(
                AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s(t)))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(tid(id))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(topics);
    let r = txn::add_partitions_to_txn(broker, version, req);
    assert_encodes(&r, version);
    r.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
        })
        .collect()
}

/// Produces `values` in one transactional batch: the partition's code.
pub(super) fn produce(
    broker: &Broker,
    version: i16,
    id: Option<&str>,
    producer: (i64, i16),
    sequence: i32,
    partition: i32,
    values: &[&str],
) -> i16 {
    let records: Vec<SimpleRecord> = values
        .iter()
        .map(|v| SimpleRecord {
            timestamp: now_ms(),
            value: Some(v.as_bytes().to_vec()),
            ..SimpleRecord::default()
        })
        .collect();
    let batch = BatchBuilder {
        producer_id: producer.0,
        producer_epoch: producer.1,
        base_sequence: sequence,
        transactional: true,
        ..BatchBuilder::default()
    }
    .build(&records);
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_transactional_id(id.map(tid))
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(Bytes::from(batch)))])]);
    let r = produce::handle(broker, version, "PLAINTEXT", req)
        .into_response()
        .expect("acks=all answers");
    assert_encodes(&r, version);
    r.responses[0].partition_responses[0].error_code
}

pub(super) fn end(
    broker: &Broker,
    version: i16,
    id: &str,
    producer: (i64, i16),
    commit: bool,
) -> EndTxnResponse {
    let req = EndTxnRequest::default()
        .with_transactional_id(tid(id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    let r = txn::end_txn(broker, version, req);
    assert_encodes(&r, version);
    r
}

pub(super) fn describe(
    broker: &Broker,
    id: &str,
) -> describe_transactions_response::TransactionState {
    let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![tid(id)]);
    let r = txn::describe_transactions(broker, 0, req);
    assert_encodes(&r, 0);
    r.transaction_states.into_iter().next().unwrap()
}

/// What a read_committed consumer sees of a partition: the values of
/// committed records below the LSO, with the LSO and the aborted list.
pub(super) struct Committed {
    pub(super) values: Vec<String>,
    pub(super) lso: i64,
    pub(super) log_end: i64,
    pub(super) aborted: Vec<(i64, i64)>,
}

pub(super) fn read_committed(broker: &Broker, p: i32) -> Committed {
    let spec = ReadSpec {
        offset: 0,
        max_bytes: 1 << 20,
        isolation: FetchIsolation::TxnCommitted,
        current_leader_epoch: -1,
        leader_only: true,
        min_one_batch: true,
    };
    let o = broker.replicas.read(&tp(p), &spec);
    assert!(o.error.is_none(), "{:?}", o.error);
    let aborted: Vec<(i64, i64)> = o
        .aborted
        .unwrap_or_default()
        .iter()
        .map(|a| (a.producer_id, a.first_offset))
        .collect();
    // The client side of read_committed: skip batches of aborted
    // transactions, from their first offset to their ABORT marker.
    let mut skipping: HashMap<i64, bool> = HashMap::new();
    let mut values = Vec::new();
    let bytes = o.records.map(|s| s.read().unwrap()).unwrap_or_default();
    for batch in BatchIter::new(&bytes) {
        let batch = batch.unwrap();
        let pid = batch.producer_id();
        if aborted.contains(&(pid, batch.base_offset())) {
            skipping.insert(pid, true);
        }
        if batch.is_control() {
            if batch.control_type() == Some(ControlType::Abort) {
                skipping.remove(&pid);
            }
            continue;
        }
        if skipping.get(&pid).copied().unwrap_or(false) {
            continue;
        }
        walk_records(&records_section(&batch).unwrap(), |r| {
            values.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        })
        .unwrap();
    }
    let log_end = broker.replicas.offsets(&tp(p)).unwrap().log_end;
    Committed {
        values,
        lso: o.last_stable_offset,
        log_end,
        aborted,
    }
}

#[tokio::test]
async fn init_bumps_the_epoch_and_fences_older_producers() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    coordinator_ready(&broker, 1, "tx-fence").await;

    assert_eq!(
        init(&broker, 4, "tx-fence", 900_001, (-1, -1)).0,
        ResponseError::InvalidTransactionTimeout.code()
    );
    let old = new_producer(&broker, "tx-fence");
    assert_eq!(old.1, 0);
    let new = new_producer(&broker, "tx-fence");
    assert_eq!(new, (old.0, 1), "same id, next epoch");

    // The old producer is fenced, in each version's words (KIP-588).
    let fenced = ResponseError::ProducerFenced.code();
    let invalid_epoch = ResponseError::InvalidProducerEpoch.code();
    assert_eq!(
        add(&broker, 3, "tx-fence", old, &[(TOPIC, 0)]),
        vec![fenced]
    );
    assert_eq!(
        add(&broker, 1, "tx-fence", old, &[(TOPIC, 0)]),
        vec![invalid_epoch]
    );
    assert_eq!(end(&broker, 3, "tx-fence", old, true).error_code, fenced);
    assert_eq!(
        end(&broker, 1, "tx-fence", old, true).error_code,
        invalid_epoch
    );
    // KIP-360: naming an epoch that is neither the current nor the previous one.
    assert_eq!(init(&broker, 4, "tx-fence", 60_000, old).0, fenced);
    assert_eq!(init(&broker, 3, "tx-fence", 60_000, old).0, invalid_epoch);
    // A wrong producer id for the transactional id.
    assert_eq!(
        add(&broker, 3, "tx-fence", (old.0 + 100, 1), &[(TOPIC, 0)]),
        vec![ResponseError::InvalidProducerIdMapping.code()]
    );

    // A new producer while a transaction is open: the transaction is
    // aborted, the client told to retry, and the retry bumps again.
    assert_eq!(add(&broker, 3, "tx-fence", new, &[(TOPIC, 0)]), vec![NONE]);
    assert_eq!(
        produce(&broker, 9, Some("tx-fence"), new, 0, 0, &["doomed"]),
        NONE
    );
    assert_eq!(
        init(&broker, 4, "tx-fence", 60_000, (-1, -1)).0,
        ResponseError::ConcurrentTransactions.code()
    );
    let d = describe(&broker, "tx-fence");
    assert_eq!(
        (d.transaction_state.as_str(), d.producer_epoch),
        ("CompleteAbort", 2)
    );
    let third = new_producer(&broker, "tx-fence");
    assert_eq!(third, (old.0, 3));
    let c = read_committed(&broker, 0);
    assert!(c.values.is_empty());
    assert_eq!(c.lso, c.log_end);
    assert_eq!(c.aborted, vec![(old.0, 0)]);
    // The fenced producer's late data is refused by the check and the log.
    assert_eq!(
        produce(&broker, 9, Some("tx-fence"), new, 1, 0, &["late"]),
        invalid_epoch
    );
}

#[tokio::test]
async fn transactional_produce_needs_an_added_partition() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    coordinator_ready(&broker, 1, "tx-add").await;
    let producer = new_producer(&broker, "tx-add");

    // Not added: INVALID_TXN_STATE before Produce v11, TRANSACTION_ABORTABLE from v11.
    assert_eq!(
        produce(&broker, 9, Some("tx-add"), producer, 0, 0, &["a"]),
        ResponseError::InvalidTxnState.code()
    );
    assert_eq!(
        produce(&broker, 11, Some("tx-add"), producer, 0, 0, &["a"]),
        ResponseError::TransactionAbortable.code()
    );
    // Transactional records without a transactional id.
    assert_eq!(
        produce(&broker, 9, None, producer, 0, 0, &["a"]),
        ResponseError::TransactionalIdAuthorizationFailed.code()
    );
    // One unknown partition fails the whole AddPartitionsToTxn.
    assert_eq!(
        add(&broker, 3, "tx-add", producer, &[(TOPIC, 0), (TOPIC, 7)]),
        vec![
            ResponseError::OperationNotAttempted.code(),
            ResponseError::UnknownTopicOrPartition.code()
        ]
    );
    assert_eq!(
        describe(&broker, "tx-add").transaction_state.as_str(),
        "Empty"
    );

    assert_eq!(
        add(&broker, 3, "tx-add", producer, &[(TOPIC, 0)]),
        vec![NONE]
    );
    assert_eq!(
        produce(&broker, 9, Some("tx-add"), producer, 0, 0, &["a"]),
        NONE
    );
    // Still not partition 1.
    assert_eq!(
        produce(&broker, 9, Some("tx-add"), producer, 0, 1, &["b"]),
        ResponseError::InvalidTxnState.code()
    );
    // Produce v12 (KIP-890 part 2) adds the partition itself.
    assert_eq!(
        produce(&broker, 12, Some("tx-add"), producer, 0, 1, &["b"]),
        NONE
    );
    let d = describe(&broker, "tx-add");
    assert_eq!(d.transaction_state.as_str(), "Ongoing");
    assert_eq!(d.topics.len(), 1);
    assert_eq!(d.topics[0].partitions, vec![0, 1]);

    // Brokers verify with AddPartitionsToTxn v4+ `verify_only`.
    let verify = |partitions: Vec<i32>| {
        let req = AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(tid("tx-add"))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_verify_only(true)
                .with_topics(vec![AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(s(TOPIC)))
                    .with_partitions(partitions)]),
        ]);
        let r = txn::add_partitions_to_txn(&broker, 5, req);
        assert_encodes(&r, 5);
        r.results_by_transaction[0].topic_results[0]
            .results_by_partition
            .iter()
            .map(|p| p.partition_error_code)
            .collect::<Vec<_>>()
    };
    assert_eq!(verify(vec![0, 1]), vec![NONE, NONE]);
    assert_eq!(describe(&broker, "tx-add").topics[0].partitions, vec![0, 1]);

    // Data of an open transaction is not visible and holds the LSO back.
    let c = read_committed(&broker, 0);
    assert!(c.values.is_empty());
    assert_eq!(c.lso, 0);
}

#[tokio::test]
async fn commit_makes_data_visible_and_abort_hides_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    coordinator_ready(&broker, 1, "tx-commit").await;
    let producer = new_producer(&broker, "tx-commit");

    assert_eq!(
        add(&broker, 3, "tx-commit", producer, &[(TOPIC, 0), (TOPIC, 1)]),
        vec![NONE, NONE]
    );
    assert_eq!(
        produce(&broker, 9, Some("tx-commit"), producer, 0, 0, &["c1", "c2"]),
        NONE
    );
    assert_eq!(
        produce(&broker, 9, Some("tx-commit"), producer, 0, 1, &["c3"]),
        NONE
    );
    assert_eq!(read_committed(&broker, 0).lso, 0);
    // Committing twice: the retry of a completed commit succeeds.
    assert_eq!(
        end(&broker, 3, "tx-commit", producer, true).error_code,
        NONE
    );
    assert_eq!(
        end(&broker, 3, "tx-commit", producer, true).error_code,
        NONE
    );
    assert_eq!(
        end(&broker, 3, "tx-commit", producer, false).error_code,
        ResponseError::InvalidTxnState.code()
    );
    let c = read_committed(&broker, 0);
    assert_eq!(c.values, vec!["c1", "c2"]);
    assert_eq!((c.lso, c.log_end), (3, 3), "two records and the marker");
    assert!(c.aborted.is_empty());
    assert_eq!(read_committed(&broker, 1).values, vec!["c3"]);
    let d = describe(&broker, "tx-commit");
    assert_eq!(d.transaction_state.as_str(), "CompleteCommit");
    assert!(d.topics.is_empty());

    // The next transaction is aborted.
    assert_eq!(
        add(&broker, 3, "tx-commit", producer, &[(TOPIC, 0)]),
        vec![NONE]
    );
    assert_eq!(
        produce(&broker, 9, Some("tx-commit"), producer, 2, 0, &["a1"]),
        NONE
    );
    assert_eq!(
        end(&broker, 3, "tx-commit", producer, false).error_code,
        NONE
    );
    let c = read_committed(&broker, 0);
    assert_eq!(c.values, vec!["c1", "c2"]);
    assert_eq!((c.lso, c.log_end), (5, 5));
    assert_eq!(c.aborted, vec![(producer.0, 3)]);
    assert_eq!(
        describe(&broker, "tx-commit").transaction_state.as_str(),
        "CompleteAbort"
    );
    // An EndTxn without a transaction.
    let (_, pid, epoch) = init(&broker, 4, "tx-commit", 60_000, (-1, -1));
    assert_eq!(
        end(&broker, 3, "tx-commit", (pid, epoch), true).error_code,
        ResponseError::InvalidTxnState.code()
    );

    // ListTransactions and DescribeProducers see it all.
    let list = |states: &[&str], producers: &[i64]| {
        let req = ListTransactionsRequest::default()
            .with_state_filters(states.iter().map(|x| s(x)).collect())
            .with_producer_id_filters(producers.iter().map(|&p| ProducerId(p)).collect());
        let r = txn::list_transactions(&broker, 1, req);
        assert_encodes(&r, 1);
        r
    };
    let by_pattern = |pattern: &str| {
        let req =
            ListTransactionsRequest::default().with_transactional_id_pattern(Some(s(pattern)));
        let r = txn::list_transactions(&broker, 2, req);
        assert_encodes(&r, 2);
        (r.error_code, r.transaction_states.len())
    };
    assert_eq!(by_pattern("tx-.*"), (NONE, 1));
    assert_eq!(by_pattern("tx"), (NONE, 0), "the whole id must match");
    assert_eq!(
        by_pattern("("),
        (ResponseError::InvalidRegularExpression.code(), 0)
    );
    let r = list(&[], &[]);
    assert_eq!(r.transaction_states.len(), 1);
    assert_eq!(r.transaction_states[0].transaction_state.as_str(), "Empty");
    assert_eq!(list(&["Ongoing"], &[]).transaction_states.len(), 0);
    assert_eq!(list(&[], &[pid + 1]).transaction_states.len(), 0);
    assert_eq!(
        list(&["Bogus"], &[]).unknown_state_filters,
        vec![s("Bogus")]
    );
    let req = DescribeProducersRequest::default().with_topics(vec![TopicRequest::default()
        .with_name(TopicName(s(TOPIC)))
        .with_partition_indexes(vec![0, 9])]);
    let r = txn::describe_producers(&broker, 0, req);
    assert_encodes(&r, 0);
    let partitions = &r.topics[0].partitions;
    assert_eq!(partitions[0].error_code, NONE);
    let p = &partitions[0].active_producers[0];
    assert_eq!(
        (p.producer_id.0, p.producer_epoch, p.last_sequence),
        (producer.0, 0, 2)
    );
    assert_eq!(p.current_txn_start_offset, -1);
    assert_eq!(
        partitions[1].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

#[tokio::test]
async fn transactional_offsets_are_visible_only_after_commit() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    coordinator_ready(&broker, 1, "tx-offsets").await;
    coordinator_ready(&broker, 0, "g").await;
    let producer = new_producer(&broker, "tx-offsets");

    let commit_offset = |version: i16, offset: i64| {
        let req = TxnOffsetCommitRequest::default()
            .with_transactional_id(tid("tx-offsets"))
            .with_group_id(GroupId(s("g")))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_generation_id(-1)
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(s(TOPIC)))
                .with_partitions(vec![
                    TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset),
                    TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(5)
                        .with_committed_offset(offset),
                ])]);
        let r = txn::txn_offset_commit(&broker, version, req);
        assert_encodes(&r, version);
        r.topics[0]
            .partitions
            .iter()
            .map(|p| p.error_code)
            .collect::<Vec<_>>()
    };
    let fetch = |require_stable: bool| {
        let broker = broker.clone();
        async move {
            let req = OffsetFetchRequest::default()
                .with_require_stable(require_stable)
                .with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(s("g")))
                    .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                        .with_name(TopicName(s(TOPIC)))
                        .with_partition_indexes(vec![0])]))]);
            let r = offset_fetch(&broker, 8, req).await;
            assert_encodes(&r, 8);
            let p = &r.groups[0].topics[0].partitions[0];
            (p.committed_offset, p.error_code)
        }
    };
    let unknown = ResponseError::UnknownTopicOrPartition.code();

    // Without AddOffsetsToTxn the offsets partition is not in the transaction.
    assert_eq!(
        commit_offset(3, 10),
        vec![ResponseError::InvalidTxnState.code(), unknown]
    );
    let add_offsets = |version: i16| {
        let req = AddOffsetsToTxnRequest::default()
            .with_transactional_id(tid("tx-offsets"))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_group_id(GroupId(s("g")));
        let r = txn::add_offsets_to_txn(&broker, version, req);
        assert_encodes(&r, version);
        r.error_code
    };
    assert_eq!(add_offsets(3), NONE);
    assert_eq!(commit_offset(3, 10), vec![NONE, unknown]);
    assert_eq!(fetch(false).await, (-1, NONE));
    assert_eq!(
        fetch(true).await,
        (-1, ResponseError::UnstableOffsetCommit.code())
    );
    assert_eq!(
        end(&broker, 3, "tx-offsets", producer, true).error_code,
        NONE
    );
    assert_eq!(fetch(true).await, (10, NONE));

    // Aborted offsets are dropped.
    assert_eq!(add_offsets(3), NONE);
    assert_eq!(commit_offset(3, 20), vec![NONE, unknown]);
    assert_eq!(
        end(&broker, 3, "tx-offsets", producer, false).error_code,
        NONE
    );
    assert_eq!(fetch(true).await, (10, NONE));

    // A pending commit survives a restart and is applied by its marker.
    assert_eq!(add_offsets(3), NONE);
    assert_eq!(commit_offset(3, 30), vec![NONE, unknown]);
    broker.shutdown().unwrap();
    drop(broker);
    let broker = open(dir.path());
    let req = OffsetFetchRequest::default()
        .with_require_stable(true)
        .with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(None)]);
    let r = offset_fetch(&broker, 8, req).await;
    let p = &r.groups[0].topics[0].partitions[0];
    assert_eq!(p.error_code, ResponseError::UnstableOffsetCommit.code());
    assert_eq!(
        end(&broker, 3, "tx-offsets", producer, true).error_code,
        NONE
    );
    let req = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(s("g")))
        .with_topics(None)]);
    let r = offset_fetch(&broker, 8, req).await;
    assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, 30);
}

/// Appends to `id`'s transaction log partition the PrepareCommit of its
/// transaction over partition 0 of TOPIC, as a coordinator writes it before
/// any marker, behind the back of the loaded shard.
fn log_prepared_commit(broker: &Broker, id: &str, producer: (i64, i16)) {
    let mut prepared = TxnMetadata::new(id, producer.0, 60_000, now_ms());
    prepared.producer_epoch = producer.1;
    prepared.state = TxnState::PrepareCommit;
    prepared.partitions.insert(tp(0));
    prepared.start_timestamp = now_ms();
    let record = BatchBuilder::default().build(&[SimpleRecord {
        timestamp: now_ms(),
        key: encode_key(id),
        value: encode_value(&prepared.to_log()),
        headers: Vec::new(),
    }]);
    let log_tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, broker.txns.partition_for(id));
    let o = broker
        .replicas
        .append(&log_tp, &Bytes::from(record), -1, AppendOrigin::Coordinator);
    assert_eq!(o.error, None);
}

#[tokio::test]
async fn a_prepared_commit_is_completed_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let id = "tx-recover";
    coordinator_ready(&broker, 1, id).await;
    let producer = new_producer(&broker, id);
    assert_eq!(add(&broker, 3, id, producer, &[(TOPIC, 0)]), vec![NONE]);
    assert_eq!(produce(&broker, 9, Some(id), producer, 0, 0, &["r1"]), NONE);

    // The coordinator wrote PrepareCommit and stopped before any marker.
    log_prepared_commit(&broker, id, producer);
    assert_eq!(read_committed(&broker, 0).lso, 0);
    drop(broker);

    // Loading leaves it prepared; the tick writes its markers.
    let broker = open(dir.path());
    assert_eq!(
        describe(&broker, id).transaction_state.as_str(),
        "PrepareCommit"
    );
    broker.txns.tick(&services(&broker), now_ms());
    let c = read_committed(&broker, 0);
    assert_eq!(c.values, vec!["r1"]);
    assert_eq!((c.lso, c.log_end), (2, 2));
    let d = describe(&broker, id);
    assert_eq!(d.transaction_state.as_str(), "CompleteCommit");
    assert_eq!((d.producer_id.0, d.producer_epoch), producer);
}

/// A coordinator partition is loaded when its leadership arrives, as
/// Kafka's are, not on the first request: a transaction its previous
/// coordinator left prepared is completed by the tick with no client asking
/// about it (read_committed consumers wait on its markers meanwhile).
#[tokio::test]
async fn a_prepared_commit_is_completed_once_leadership_of_its_log_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let id = "tx-elected";
    coordinator_ready(&broker, 1, id).await;
    let producer = new_producer(&broker, id);
    assert_eq!(add(&broker, 3, id, producer, &[(TOPIC, 0)]), vec![NONE]);
    assert_eq!(produce(&broker, 9, Some(id), producer, 0, 0, &["e1"]), NONE);

    // Another coordinator of this log wrote PrepareCommit, then lost it.
    let log_tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, broker.txns.partition_for(id));
    change_leader(&broker, &log_tp, -1);
    broker.txns.follow_leadership(&broker.controller.image());
    change_leader(&broker, &log_tp, 1);
    log_prepared_commit(&broker, id, producer);
    assert_eq!(read_committed(&broker, 0).lso, 0);

    broker.txns.follow_leadership(&broker.controller.image());
    broker.txns.tick(&services(&broker), now_ms());
    let c = read_committed(&broker, 0);
    assert_eq!(c.values, vec!["e1"]);
    assert_eq!(c.lso, c.log_end);
}

/// A marker that cannot be written (the partition has no leader) leaves the
/// transaction completing: the commit is decided, the producer is told to
/// wait, and the tick finishes once the partition is back.
#[tokio::test]
async fn a_transaction_completes_once_its_markers_can_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let id = "tx-stuck";
    coordinator_ready(&broker, 1, id).await;
    let producer = new_producer(&broker, id);
    assert_eq!(add(&broker, 3, id, producer, &[(TOPIC, 0)]), vec![NONE]);
    assert_eq!(produce(&broker, 9, Some(id), producer, 0, 0, &["s"]), NONE);

    change_leader(&broker, &tp(0), -1);
    assert_eq!(end(&broker, 3, id, producer, true).error_code, NONE);
    assert_eq!(
        describe(&broker, id).transaction_state.as_str(),
        "PrepareCommit"
    );
    let concurrent = ResponseError::ConcurrentTransactions.code();
    assert_eq!(init(&broker, 4, id, 60_000, (-1, -1)).0, concurrent);
    assert_eq!(
        add(&broker, 3, id, producer, &[(TOPIC, 1)]),
        vec![concurrent]
    );
    assert_eq!(end(&broker, 3, id, producer, true).error_code, concurrent);
    broker.txns.tick(&services(&broker), now_ms());
    assert_eq!(
        describe(&broker, id).transaction_state.as_str(),
        "PrepareCommit"
    );

    change_leader(&broker, &tp(0), 1);
    broker.txns.tick(&services(&broker), now_ms());
    assert_eq!(
        describe(&broker, id).transaction_state.as_str(),
        "CompleteCommit"
    );
    let c = read_committed(&broker, 0);
    assert_eq!(c.values, vec!["s"]);
    assert_eq!(c.lso, c.log_end);
}

#[tokio::test]
async fn timed_out_transactions_are_aborted_and_their_producer_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let id = "tx-timeout";
    coordinator_ready(&broker, 1, id).await;
    let (error, pid, epoch) = init(&broker, 4, id, 1000, (-1, -1));
    assert_eq!(error, NONE);
    assert_eq!(add(&broker, 3, id, (pid, epoch), &[(TOPIC, 1)]), vec![NONE]);
    assert_eq!(
        produce(&broker, 9, Some(id), (pid, epoch), 0, 1, &["x"]),
        NONE
    );

    // Not yet due.
    broker.txns.tick(&services(&broker), now_ms());
    assert_eq!(describe(&broker, id).transaction_state.as_str(), "Ongoing");
    broker.txns.tick(&services(&broker), now_ms() + 2000);
    let d = describe(&broker, id);
    assert_eq!(
        (d.transaction_state.as_str(), d.producer_epoch),
        ("CompleteAbort", epoch + 1)
    );
    let c = read_committed(&broker, 1);
    assert!(c.values.is_empty());
    assert_eq!(c.aborted, vec![(pid, 0)]);
    assert_eq!((c.lso, c.log_end), (2, 2));
    // The producer learns it was fenced.
    assert_eq!(
        end(&broker, 4, id, (pid, epoch), true).error_code,
        ResponseError::ProducerFenced.code()
    );
    assert_eq!(
        produce(&broker, 9, Some(id), (pid, epoch), 1, 1, &["y"]),
        ResponseError::InvalidProducerEpoch.code()
    );
}

/// EndTxn v5 (transaction version 2) bumps the epoch at every completion
/// and recognizes retries by the bumped epoch.
#[tokio::test]
async fn end_txn_v5_bumps_the_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let id = "tx-v2";
    coordinator_ready(&broker, 1, id).await;
    let producer = new_producer(&broker, id);
    assert_eq!(produce(&broker, 12, Some(id), producer, 0, 0, &["v"]), NONE);
    let r = end(&broker, 5, id, producer, true);
    assert_eq!(r.error_code, NONE);
    assert_eq!(
        (r.producer_id.0, r.producer_epoch),
        (producer.0, producer.1 + 1)
    );
    // The marker carries the bumped epoch.
    let c = read_committed(&broker, 0);
    assert_eq!((c.values.len(), c.lso, c.log_end), (1, 2, 2));
    // A retry with the old epoch gets the same answer.
    let retry = end(&broker, 5, id, producer, true);
    assert_eq!(
        (retry.error_code, retry.producer_epoch),
        (NONE, producer.1 + 1)
    );
    // An abort without partitions only bumps.
    let bumped = (r.producer_id.0, r.producer_epoch);
    let r = end(&broker, 5, id, bumped, false);
    assert_eq!((r.error_code, r.producer_epoch), (NONE, bumped.1 + 1));
    // The next transaction's data goes in at the new epoch.
    let next = (r.producer_id.0, r.producer_epoch);
    assert_eq!(produce(&broker, 12, Some(id), next, 0, 0, &["w"]), NONE);
    assert_eq!(end(&broker, 5, id, next, true).error_code, NONE);
    assert_eq!(read_committed(&broker, 0).values, vec!["v", "w"]);
}

#[tokio::test]
async fn write_txn_markers_writes_markers_locally() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path());
    let pid = 4242;
    let batch = BatchBuilder {
        producer_id: pid,
        producer_epoch: 0,
        base_sequence: 0,
        transactional: true,
        ..BatchBuilder::default()
    }
    .build(&[SimpleRecord {
        timestamp: now_ms(),
        value: Some(b"m".to_vec()),
        ..SimpleRecord::default()
    }]);
    let o = broker
        .replicas
        .append(&tp(0), &Bytes::from(batch), -1, AppendOrigin::Client);
    assert_eq!(o.error, None);
    let req = WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(0)
        .with_transaction_result(true)
        .with_coordinator_epoch(0)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partition_indexes(vec![0, 3])])]);
    let r = txn::write_txn_markers(&broker, 1, req);
    assert_encodes(&r, 1);
    let codes: Vec<i16> = r.markers[0].topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(
        codes,
        vec![NONE, ResponseError::UnknownTopicOrPartition.code()]
    );
    assert_eq!(read_committed(&broker, 0).values, vec!["m"]);
}
