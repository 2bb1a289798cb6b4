//! Gates of the producer and transaction APIs: WRITE on the transactional
//! id (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
//! TxnOffsetCommit) with WRITE on the added topics and READ on the group
//! and committed topics; idempotent producers need IDEMPOTENT_WRITE on the
//! cluster or WRITE on some topic; WriteTxnMarkers and AddPartitionsToTxn
//! v4+ come from brokers and need CLUSTER_ACTION.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_offsets_to_txn_request::AddOffsetsToTxnRequest;
use kafka_protocol::messages::add_offsets_to_txn_response::AddOffsetsToTxnResponse;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnRequest;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResponse, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_producers_request::DescribeProducersRequest;
use kafka_protocol::messages::describe_producers_response::{
    DescribeProducersResponse, PartitionResponse, TopicResponse,
};
use kafka_protocol::messages::describe_transactions_request::DescribeTransactionsRequest;
use kafka_protocol::messages::describe_transactions_response::{
    DescribeTransactionsResponse, TransactionState,
};
use kafka_protocol::messages::end_txn_request::EndTxnRequest;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::messages::init_producer_id_request::InitProducerIdRequest;
use kafka_protocol::messages::init_producer_id_response::InitProducerIdResponse;
use kafka_protocol::messages::list_transactions_request::ListTransactionsRequest;
use kafka_protocol::messages::list_transactions_response::ListTransactionsResponse;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequest, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::write_txn_markers_request::WriteTxnMarkersRequest;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
};
use kafka_protocol::messages::{ProducerId, RequestKind, ResponseKind};
use ottla_controller::acls::{operation, resource};

use super::{patch, split, Gate};
use crate::security::authorizer::Access;

const TXN_DENIED: ResponseError = ResponseError::TransactionalIdAuthorizationFailed;
const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;
const CLUSTER_DENIED: ResponseError = ResponseError::ClusterAuthorizationFailed;

pub fn init_producer_id(access: &Access, req: InitProducerIdRequest) -> Gate {
    let error = match req.transactional_id.as_deref() {
        Some(t) if !access.transactional_id(operation::WRITE, t) => Some(TXN_DENIED),
        Some(_) => None,
        None if access.cluster(operation::IDEMPOTENT_WRITE)
            || access.any_of_type(operation::WRITE, resource::TOPIC) =>
        {
            None
        }
        None => Some(CLUSTER_DENIED),
    };
    match error {
        None => Gate::Pass(RequestKind::InitProducerId(req), None),
        Some(e) => Gate::Answer(ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(e.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )),
    }
}

fn partition_results(
    partitions: &[i32],
    error: ResponseError,
) -> Vec<AddPartitionsToTxnPartitionResult> {
    partitions
        .iter()
        .map(|p| {
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(*p)
                .with_partition_error_code(error.code())
        })
        .collect()
}

pub fn add_partitions_to_txn(
    access: &Access,
    version: i16,
    req: AddPartitionsToTxnRequest,
) -> Gate {
    if version >= 4 {
        // Only brokers send v4+ (verification before a transactional append).
        return if access.cluster(operation::CLUSTER_ACTION) {
            Gate::Pass(RequestKind::AddPartitionsToTxn(req), None)
        } else {
            Gate::Answer(ResponseKind::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default().with_error_code(CLUSTER_DENIED.code()),
            ))
        };
    }
    let txn_allowed = access.transactional_id(operation::WRITE, &req.v3_and_below_transactional_id);
    let topic_allowed = |name: &str| txn_allowed && access.topic(operation::WRITE, name);
    if req
        .v3_and_below_topics
        .iter()
        .all(|t| topic_allowed(&t.name))
    {
        return Gate::Pass(RequestKind::AddPartitionsToTxn(req), None);
    }
    // As Kafka: nothing is added when anything is refused.
    let results = req
        .v3_and_below_topics
        .iter()
        .map(|t| {
            let error = match (txn_allowed, topic_allowed(&t.name)) {
                (false, _) => TXN_DENIED,
                (true, false) => TOPIC_DENIED,
                (true, true) => ResponseError::OperationNotAttempted,
            };
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(partition_results(&t.partitions, error))
        })
        .collect();
    Gate::Answer(ResponseKind::AddPartitionsToTxn(
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
    ))
}

pub fn add_offsets_to_txn(access: &Access, req: AddOffsetsToTxnRequest) -> Gate {
    let error = if !access.transactional_id(operation::WRITE, &req.transactional_id) {
        TXN_DENIED
    } else if !access.group(operation::READ, &req.group_id) {
        ResponseError::GroupAuthorizationFailed
    } else {
        return Gate::Pass(RequestKind::AddOffsetsToTxn(req), None);
    };
    Gate::Answer(ResponseKind::AddOffsetsToTxn(
        AddOffsetsToTxnResponse::default().with_error_code(error.code()),
    ))
}

pub fn end_txn(access: &Access, req: EndTxnRequest) -> Gate {
    if access.transactional_id(operation::WRITE, &req.transactional_id) {
        return Gate::Pass(RequestKind::EndTxn(req), None);
    }
    Gate::Answer(ResponseKind::EndTxn(
        EndTxnResponse::default()
            .with_error_code(TXN_DENIED.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    ))
}

fn txn_commit_error(
    t: TxnOffsetCommitRequestTopic,
    error: ResponseError,
) -> TxnOffsetCommitResponseTopic {
    TxnOffsetCommitResponseTopic::default()
        .with_name(t.name)
        .with_partitions(
            t.partitions
                .iter()
                .map(|p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error.code())
                })
                .collect(),
        )
}

pub fn txn_offset_commit(access: &Access, mut req: TxnOffsetCommitRequest) -> Gate {
    let whole = if !access.transactional_id(operation::WRITE, &req.transactional_id) {
        Some(TXN_DENIED)
    } else if !access.group(operation::READ, &req.group_id) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    if let Some(error) = whole {
        return Gate::Answer(ResponseKind::TxnOffsetCommit(
            TxnOffsetCommitResponse::default().with_topics(
                req.topics
                    .into_iter()
                    .map(|t| txn_commit_error(t, error))
                    .collect(),
            ),
        ));
    }
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        access.topic(operation::READ, &t.name)
    });
    req.topics = kept;
    let p = if refused.is_empty() {
        None
    } else {
        patch!(TxnOffsetCommit, move |r: &mut TxnOffsetCommitResponse| {
            r.topics.extend(
                refused
                    .into_iter()
                    .map(|t| txn_commit_error(t, TOPIC_DENIED)),
            );
        })
    };
    Gate::Pass(RequestKind::TxnOffsetCommit(req), p)
}

pub fn write_txn_markers(access: &Access, req: WriteTxnMarkersRequest) -> Gate {
    if access.cluster(operation::CLUSTER_ACTION) {
        return Gate::Pass(RequestKind::WriteTxnMarkers(req), None);
    }
    let markers = req
        .markers
        .iter()
        .map(|m| {
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(
                    m.topics
                        .iter()
                        .map(|t| {
                            WritableTxnMarkerTopicResult::default()
                                .with_name(t.name.clone())
                                .with_partitions(
                                    t.partition_indexes
                                        .iter()
                                        .map(|p| {
                                            WritableTxnMarkerPartitionResult::default()
                                                .with_partition_index(*p)
                                                .with_error_code(CLUSTER_DENIED.code())
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                )
        })
        .collect();
    Gate::Answer(ResponseKind::WriteTxnMarkers(
        WriteTxnMarkersResponse::default().with_markers(markers),
    ))
}

pub fn describe_producers(access: &Access, mut req: DescribeProducersRequest) -> Gate {
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        access.topic(operation::READ, &t.name)
    });
    req.topics = kept;
    let p = if refused.is_empty() {
        None
    } else {
        patch!(
            DescribeProducers,
            move |r: &mut DescribeProducersResponse| {
                r.topics.extend(refused.into_iter().map(|t| {
                    TopicResponse::default().with_name(t.name).with_partitions(
                        t.partition_indexes
                            .iter()
                            .map(|p| {
                                PartitionResponse::default()
                                    .with_partition_index(*p)
                                    .with_error_code(TOPIC_DENIED.code())
                            })
                            .collect(),
                    )
                }));
            }
        )
    };
    Gate::Pass(RequestKind::DescribeProducers(req), p)
}

/// DESCRIBE on each transactional id; a described transaction lists only
/// the topics the principal may DESCRIBE.
pub fn describe_transactions(access: &Arc<Access>, mut req: DescribeTransactionsRequest) -> Gate {
    let (kept, refused) = split(std::mem::take(&mut req.transactional_ids), |t| {
        access.transactional_id(operation::DESCRIBE, t)
    });
    req.transactional_ids = kept;
    let access = access.clone();
    let p = patch!(
        DescribeTransactions,
        move |r: &mut DescribeTransactionsResponse| {
            for state in &mut r.transaction_states {
                state
                    .topics
                    .retain(|t| access.topic(operation::DESCRIBE, &t.topic));
            }
            r.transaction_states.extend(refused.into_iter().map(|t| {
                TransactionState::default()
                    .with_transactional_id(t)
                    .with_error_code(TXN_DENIED.code())
            }));
        }
    );
    Gate::Pass(RequestKind::DescribeTransactions(req), p)
}

pub fn list_transactions(access: &Arc<Access>, req: ListTransactionsRequest) -> Gate {
    let access = access.clone();
    let p = patch!(ListTransactions, move |r: &mut ListTransactionsResponse| {
        r.transaction_states
            .retain(|t| access.transactional_id(operation::DESCRIBE, &t.transactional_id));
    });
    Gate::Pass(RequestKind::ListTransactions(req), p)
}
