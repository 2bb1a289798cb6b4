//! The transaction coordinator's APIs (AddPartitionsToTxn, AddOffsetsToTxn,
//! EndTxn, TxnOffsetCommit, WriteTxnMarkers), the transaction admin APIs
//! (DescribeTransactions, ListTransactions, DescribeProducers), and the
//! check that transactional Produce batches belong to an open transaction.
//! These functions translate between wire versions and `ottla_txn_coordinator`, which
//! holds the protocol logic. InitProducerId is in `init_producer_id`.

use std::collections::{BTreeSet, HashSet};
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::describe_transactions_response::{
    TopicData, TransactionState as DescribedTransaction,
};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedTransaction;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeProducersRequest, DescribeProducersResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse,
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TopicName, TransactionalId,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse, WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;
use ottla_storage::manager::TopicPartition;
use ottla_storage::producer_state::AppendOrigin;
use regex::Regex;

use crate::apis::group::{merge_codes, partition_exists};
use crate::broker::Broker;
use crate::config::keys;
use crate::replica::{now_ms, ProduceOutcome};
use ottla_group_coordinator::{PartitionCodes, PartitionCommit, TxnCommitRequest, OFFSETS_TOPIC};
use ottla_txn_coordinator::{Marker, TxnState};

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// KIP-588: clients before these versions know INVALID_PRODUCER_EPOCH only.
fn fenced_for(version: i16, first_with_fenced: i16, e: ResponseError) -> ResponseError {
    if version < first_with_fenced && e == ResponseError::ProducerFenced {
        ResponseError::InvalidProducerEpoch
    } else {
        e
    }
}

fn code(r: Result<(), ResponseError>) -> i16 {
    r.err().map_or(0, |e| e.code())
}

/// AddPartitionsToTxn: v0-3 from producers (one transaction), v4+ batched
/// from brokers, which may only ask whether partitions are in a
/// transaction (`verify_only`).
pub fn add_partitions_to_txn(
    broker: &Broker,
    version: i16,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if version < 4 {
        let result = add_partitions_for(
            broker,
            version,
            &req.v3_and_below_transactional_id,
            (
                req.v3_and_below_producer_id.0,
                req.v3_and_below_producer_epoch,
            ),
            false,
            &req.v3_and_below_topics,
        );
        return AddPartitionsToTxnResponse::default()
            .with_results_by_topic_v3_and_below(result.topic_results);
    }
    let results = req
        .transactions
        .iter()
        .map(|t| {
            add_partitions_for(
                broker,
                version,
                &t.transactional_id,
                (t.producer_id.0, t.producer_epoch),
                t.verify_only,
                &t.topics,
            )
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

fn add_partitions_for(
    broker: &Broker,
    version: i16,
    transactional_id: &TransactionalId,
    producer: (i64, i16),
    verify_only: bool,
    topics: &[AddPartitionsToTxnTopic],
) -> AddPartitionsToTxnResult {
    let requested: Vec<TopicPartition> = topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|&p| TopicPartition::new(t.name.to_string(), p))
        })
        .collect();
    let image = broker.controller.image();
    let unknown: HashSet<&TopicPartition> = requested
        .iter()
        .filter(|tp| !partition_exists(&image, &tp.topic, tp.partition))
        .collect();
    let codes: Vec<i16> = if transactional_id.is_empty() {
        vec![ResponseError::InvalidRequest.code(); requested.len()]
    } else if !unknown.is_empty() {
        // As Kafka: one unknown partition fails the request; the others are
        // reported as not attempted.
        requested
            .iter()
            .map(|tp| match unknown.contains(tp) {
                true => ResponseError::UnknownTopicOrPartition.code(),
                false => ResponseError::OperationNotAttempted.code(),
            })
            .collect()
    } else if verify_only {
        match broker
            .txns
            .verify_partitions(transactional_id, producer, &requested)
        {
            Ok(found) => found
                .into_iter()
                .map(|added| match added {
                    true => 0,
                    false => ResponseError::TransactionAbortable.code(),
                })
                .collect(),
            Err(e) => vec![e.code(); requested.len()],
        }
    } else {
        let partitions: BTreeSet<TopicPartition> = requested.iter().cloned().collect();
        // v4+ adds come from brokers serving KIP-890 part 2 producers.
        let r = broker
            .txns
            .add_partitions(
                transactional_id,
                producer,
                &partitions,
                version >= 4,
                now_ms(),
            )
            .map_err(|e| fenced_for(version, 2, e));
        vec![code(r); requested.len()]
    };
    let mut topic_results: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (tp, code) in requested.iter().zip(codes) {
        if topic_results
            .last()
            .is_none_or(|t| t.name.as_str() != tp.topic)
        {
            topic_results.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(TopicName(text(tp.topic.clone()))),
            );
        }
        let last = topic_results.last_mut().expect("just pushed");
        last.results_by_partition.push(
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(tp.partition)
                .with_partition_error_code(code),
        );
    }
    AddPartitionsToTxnResult::default()
        .with_transactional_id(transactional_id.clone())
        .with_topic_results(topic_results)
}

/// AddOffsetsToTxn: the group's offsets partition joins the transaction.
pub fn add_offsets_to_txn(
    broker: &Broker,
    version: i16,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let r = if req.transactional_id.is_empty() {
        Err(ResponseError::InvalidRequest)
    } else {
        let tp = TopicPartition::new(OFFSETS_TOPIC, broker.groups.partition_for(&req.group_id));
        broker
            .txns
            .add_partitions(
                &req.transactional_id,
                (req.producer_id.0, req.producer_epoch),
                &BTreeSet::from([tp]),
                false,
                now_ms(),
            )
            .map_err(|e| fenced_for(version, 2, e))
    };
    AddOffsetsToTxnResponse::default().with_error_code(code(r))
}

/// EndTxn. v5 is transaction version 2: the epoch is bumped at every
/// completion and the answer carries the producer id and epoch to go on with.
pub fn end_txn(broker: &Broker, version: i16, req: EndTxnRequest) -> EndTxnResponse {
    let r = if req.transactional_id.is_empty() {
        Err(ResponseError::InvalidRequest)
    } else {
        broker.txns.end_txn(
            &broker.txn_services(),
            &req.transactional_id,
            (req.producer_id.0, req.producer_epoch),
            req.committed,
            version >= 5,
            now_ms(),
        )
    };
    let resp = EndTxnResponse::default();
    match r {
        Ok((id, epoch)) if version >= 5 => resp
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Ok(_) => resp,
        Err(e) => {
            let resp = resp.with_error_code(fenced_for(version, 2, e).code());
            if version >= 5 {
                resp.with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
            } else {
                resp
            }
        }
    }
}

/// TxnOffsetCommit: offsets stored in the producer's transaction, visible
/// once it commits. The group's offsets partition must be in the
/// transaction (AddOffsetsToTxn); v5 producers (KIP-890 part 2) skip that
/// call and the partition joins here.
pub fn txn_offset_commit(
    broker: &Broker,
    version: i16,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let image = broker.controller.image();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let mut codes: PartitionCodes = req
        .topics
        .iter()
        .map(|t| {
            let ps = t.partitions.iter().map(|p| (p.partition_index, unknown));
            (t.name.to_string(), ps.collect())
        })
        .collect();
    let topics: Vec<(String, Vec<PartitionCommit>)> = req
        .topics
        .iter()
        .map(|t| {
            let ps = t
                .partitions
                .iter()
                .filter(|p| partition_exists(&image, &t.name, p.partition_index))
                .map(|p| PartitionCommit {
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 2 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                });
            (t.name.to_string(), ps.collect::<Vec<_>>())
        })
        .filter(|(_, ps)| !ps.is_empty())
        .collect();
    if !topics.is_empty() {
        let all = |e: ResponseError| -> PartitionCodes {
            let code =
                |ps: &[PartitionCommit]| ps.iter().map(|p| (p.partition, e.code())).collect();
            topics.iter().map(|(t, ps)| (t.clone(), code(ps))).collect()
        };
        let request = TxnCommitRequest {
            group_id: req.group_id.to_string(),
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
            // v0-2 carry no group membership.
            generation_id: if version >= 3 { req.generation_id } else { -1 },
            member_id: if version >= 3 {
                req.member_id.to_string()
            } else {
                String::new()
            },
            group_instance_id: if version >= 3 {
                req.group_instance_id.as_ref().map(|i| i.to_string())
            } else {
                None
            },
            topics: topics.clone(),
        };
        let answered = if req.group_id.is_empty() {
            all(ResponseError::InvalidGroupId)
        } else {
            match broker.groups.shard_blocking(&req.group_id) {
                Err(e) => all(e),
                Ok(shard) => {
                    let tp = TopicPartition::new(
                        OFFSETS_TOPIC,
                        broker.groups.partition_for(&req.group_id),
                    );
                    let now = now_ms();
                    let producer = (req.producer_id.0, req.producer_epoch);
                    let add = version >= 5;
                    // Answered once the offsets partition's ISR has the
                    // pending offsets (Kafka appends them with acks=-1): a
                    // commit marker that reached the ISR must not find them
                    // truncated by a leader change.
                    let commit = || {
                        shard.once_replicated_blocking(
                            shard.commit_txn_offsets(request.clone(), now),
                        )
                    };
                    let local = broker.txns.in_transaction(
                        &req.transactional_id,
                        producer,
                        &tp,
                        add,
                        now,
                        commit,
                    );
                    // The transaction's coordinator may be another broker
                    // than the group's: ask it, as Produce does.
                    let verified = match local {
                        Err(ResponseError::NotCoordinator) => {
                            verify_remotely(broker, &req.transactional_id, producer, &tp, add)
                                .map(|()| commit())
                        }
                        other => other,
                    };
                    verified.unwrap_or_else(|e| all(offsets_verification_error(version, e)))
                }
            }
        };
        merge_codes(&mut codes, &image, answered);
    }
    let topics = codes
        .into_iter()
        .map(|(name, ps)| {
            let partitions = ps
                .into_iter()
                .map(|(p, code)| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(TopicName(text(name)))
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// What a TxnOffsetCommit answers when its transaction check fails, as
/// Kafka's group coordinator normalizes verification errors.
fn offsets_verification_error(version: i16, e: ResponseError) -> ResponseError {
    match e {
        ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        // TRANSACTION_ABORTABLE is known from v4 (KIP-890).
        ResponseError::TransactionAbortable if version < 4 => ResponseError::InvalidTxnState,
        ResponseError::ConcurrentTransactions
        | ResponseError::NotCoordinator
        | ResponseError::CoordinatorLoadInProgress => ResponseError::CoordinatorNotAvailable,
        other => other,
    }
}

/// A transactional Produce batch: appended only while its partition is in
/// the producer's open transaction (Kafka verifies through
/// AddPartitionsToTxn; here the coordinator is asked directly). Produce v12+
/// (KIP-890 part 2) adds the partition instead.
pub fn append_transactional(
    broker: &Broker,
    version: i16,
    transactional_id: Option<&str>,
    producer: (i64, i16),
    tp: &TopicPartition,
    records: &Bytes,
    acks: i16,
) -> ProduceOutcome {
    let append = || {
        broker
            .replicas
            .append(tp, records, acks, AppendOrigin::Client)
    };
    let Some(transactional_id) = transactional_id.filter(|t| !t.is_empty()) else {
        // Kafka's answer: transactional records need an authorized id.
        return refused(
            ResponseError::TransactionalIdAuthorizationFailed,
            "Transactional records require a transactional id".to_string(),
        );
    };
    if !partition_verification(broker) {
        return append();
    }
    let add = version >= 12;
    let local = broker
        .txns
        .in_transaction(transactional_id, producer, tp, add, now_ms(), append);
    let verified = match local {
        Err(ResponseError::NotCoordinator) => {
            verify_remotely(broker, transactional_id, producer, tp, add).map(|()| append())
        }
        other => other,
    };
    verified.unwrap_or_else(|e| {
        let (error, message) = produce_verification_error(version, e);
        refused(error, message)
    })
}

/// Asks the transaction's coordinator on another broker, as Kafka's
/// partition leaders do (AddPartitionsToTxn v4+, `verify_only` unless the
/// client lets the leader add the partition, Produce v12+).
fn verify_remotely(
    broker: &Broker,
    transactional_id: &str,
    producer: (i64, i16),
    tp: &TopicPartition,
    add: bool,
) -> Result<(), ResponseError> {
    let coordinator = broker
        .txns
        .coordinator_id(transactional_id)
        .ok_or(ResponseError::CoordinatorNotAvailable)?;
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_string(),
            )))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_verify_only(!add)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                .with_partitions(vec![tp.partition])]),
    ]);
    let response = broker
        .brokers
        .send_blocking(coordinator, VERIFY_VERSION, &request)
        .map_err(|_| ResponseError::CoordinatorNotAvailable)?;
    if response.error_code != 0 {
        return Err(ResponseError::try_from_code(response.error_code)
            .unwrap_or(ResponseError::UnknownServerError));
    }
    let code = response
        .results_by_transaction
        .iter()
        .flat_map(|t| t.topic_results.iter())
        .flat_map(|t| t.results_by_partition.iter())
        .find(|p| p.partition_index == tp.partition)
        .map_or(ResponseError::UnknownServerError.code(), |p| {
            p.partition_error_code
        });
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// AddPartitionsToTxn v4 is the first with broker-side verification.
const VERIFY_VERSION: i16 = 4;

/// Kafka's ReplicaManager answers to failed verifications: errors older
/// clients retry on, and INVALID_PRODUCER_EPOCH for fenced producers.
fn produce_verification_error(version: i16, e: ResponseError) -> (ResponseError, String) {
    match e {
        ResponseError::ProducerFenced => (
            ResponseError::InvalidProducerEpoch,
            "The producer's epoch is fenced by a newer producer".to_string(),
        ),
        ResponseError::TransactionAbortable if version < 11 => (
            ResponseError::InvalidTxnState,
            "Partition was not added to the transaction".to_string(),
        ),
        ResponseError::ConcurrentTransactions
        | ResponseError::NotCoordinator
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::CoordinatorLoadInProgress => (
            ResponseError::NotEnoughReplicas,
            format!("Unable to verify the partition has been added to the transaction. Underlying error: {e}"),
        ),
        other => (other, other.to_string()),
    }
}

fn refused(error: ResponseError, message: String) -> ProduceOutcome {
    ProduceOutcome::failed(error, Some(message))
}

/// A partition's marker appended by WriteTxnMarkers: the offset after it,
/// or why it was not appended.
type AppendedMarker = (i32, Result<i64, ResponseError>);

/// WriteTxnMarkers (v1): markers a coordinator asks this broker to write.
/// As Kafka (acks=-1, `request.timeout.ms`): every marker is appended
/// first, then each partition is answered once its ISR has the marker, so
/// the coordinator never completes a transaction on a marker that a leader
/// change could truncate; REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS(_AFTER_APPEND)
/// or NOT_LEADER_OR_FOLLOWER tell it to retry.
pub fn write_txn_markers(
    broker: &Broker,
    _version: i16,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let image = broker.controller.image();
    let services = broker.txn_services();
    let now = now_ms();
    let deadline = Instant::now() + services.timeout;
    // Appended markers, per request marker, per topic.
    let appended: Vec<Vec<Vec<AppendedMarker>>> = req
        .markers
        .iter()
        .map(|m| {
            let marker = Marker {
                producer_id: m.producer_id.0,
                producer_epoch: m.producer_epoch,
                coordinator_epoch: m.coordinator_epoch,
                commit: m.transaction_result,
            };
            m.topics
                .iter()
                .map(|t| {
                    t.partition_indexes
                        .iter()
                        .map(|&p| {
                            let end = if partition_exists(&image, &t.name, p) {
                                let tp = TopicPartition::new(t.name.to_string(), p);
                                services.append_local_marker(&tp, &marker, now)
                            } else {
                                Err(ResponseError::UnknownTopicOrPartition)
                            };
                            (p, end)
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let markers = req
        .markers
        .iter()
        .zip(appended)
        .map(|(m, topics)| {
            let topics = m
                .topics
                .iter()
                .zip(topics)
                .map(|(t, partitions)| {
                    let partitions = partitions
                        .into_iter()
                        .map(|(p, end)| {
                            let tp = TopicPartition::new(t.name.to_string(), p);
                            let r = services.await_marker(&tp, end, deadline);
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(p)
                                .with_error_code(code(r))
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}

pub fn describe_transactions(
    broker: &Broker,
    _version: i16,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let states = req
        .transactional_ids
        .into_iter()
        .map(|id| {
            let described = if id.is_empty() {
                Err(ResponseError::InvalidRequest)
            } else {
                broker.txns.describe(&id)
            };
            let d = DescribedTransaction::default().with_transactional_id(id);
            match described {
                Err(e) => d.with_error_code(e.code()),
                Ok(m) => {
                    let mut topics: Vec<TopicData> = Vec::new();
                    for tp in &m.partitions {
                        if topics.last().is_none_or(|t| t.topic.as_str() != tp.topic) {
                            topics.push(
                                TopicData::default().with_topic(TopicName(text(tp.topic.clone()))),
                            );
                        }
                        topics
                            .last_mut()
                            .expect("just pushed")
                            .partitions
                            .push(tp.partition);
                    }
                    d.with_transaction_state(text(m.state.name()))
                        .with_transaction_timeout_ms(m.timeout_ms)
                        .with_transaction_start_time_ms(m.start_timestamp)
                        .with_producer_id(ProducerId(m.producer_id))
                        .with_producer_epoch(m.producer_epoch)
                        .with_topics(topics)
                }
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

/// ListTransactions with its state and producer id filters (v0), the
/// minimum running time filter (v1) and the transactional id pattern (v2,
/// KIP-1152: a regular expression the whole id must match).
pub fn list_transactions(
    broker: &Broker,
    version: i16,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let pattern = match req.transactional_id_pattern.as_deref() {
        Some(p) if version >= 2 && !p.is_empty() => match Regex::new(&format!("^(?:{p})$")) {
            Ok(re) => Some(re),
            Err(_) => {
                return ListTransactionsResponse::default()
                    .with_error_code(ResponseError::InvalidRegularExpression.code())
            }
        },
        _ => None,
    };
    let mut unknown_states = Vec::new();
    let mut states = HashSet::new();
    for name in &req.state_filters {
        match TxnState::from_name(name) {
            Some(s) => {
                states.insert(s);
            }
            None => unknown_states.push(name.clone()),
        }
    }
    let producers: HashSet<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    let min_duration = if version >= 1 {
        req.duration_filter
    } else {
        -1
    };
    let now = now_ms();
    let mut listed: Vec<_> = broker
        .txns
        .list()
        .into_iter()
        .filter(|m| req.state_filters.is_empty() || states.contains(&m.state))
        .filter(|m| producers.is_empty() || producers.contains(&m.producer_id))
        .filter(|m| min_duration < 0 || now - m.start_timestamp > min_duration)
        .filter(|m| {
            pattern
                .as_ref()
                .is_none_or(|re| re.is_match(&m.transactional_id))
        })
        .collect();
    listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
    let transactions = listed
        .into_iter()
        .map(|m| {
            ListedTransaction::default()
                .with_transactional_id(TransactionalId(text(m.transactional_id)))
                .with_producer_id(ProducerId(m.producer_id))
                .with_transaction_state(text(m.state.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown_states)
        .with_transaction_states(transactions)
}

/// DescribeProducers: the active producers of partitions this broker leads,
/// from their logs' producer state.
pub fn describe_producers(
    broker: &Broker,
    _version: i16,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    let r = PartitionResponse::default().with_partition_index(p);
                    let tp = TopicPartition::new(t.name.to_string(), p);
                    let Some(partition) = broker.replicas.partition(&tp) else {
                        return r.with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    };
                    if partition.state().leader != broker.node_id() {
                        return r.with_error_code(ResponseError::NotLeaderOrFollower.code());
                    }
                    let log = partition.log.read();
                    let mut producers: Vec<ProducerState> = log
                        .producer_state()
                        .active_producers()
                        .map(|e| {
                            ProducerState::default()
                                .with_producer_id(ProducerId(e.producer_id))
                                .with_producer_epoch(i32::from(e.producer_epoch))
                                .with_last_sequence(e.last_seq())
                                .with_last_timestamp(e.last_timestamp)
                                .with_coordinator_epoch(e.coordinator_epoch)
                                .with_current_txn_start_offset(
                                    e.current_txn_first_offset.unwrap_or(-1),
                                )
                        })
                        .collect();
                    producers.sort_by_key(|s| s.producer_id.0);
                    r.with_active_producers(producers)
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

/// `transaction.partition.verification.enable`: dynamic, as in Kafka.
fn partition_verification(broker: &Broker) -> bool {
    broker.dynamic_or(
        keys::TRANSACTION_PARTITION_VERIFICATION_ENABLE.name,
        broker.txns.config().partition_verification,
    )
}
