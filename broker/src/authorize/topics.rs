//! Gates of the partition data APIs: Produce (WRITE, and WRITE on the
//! transactional id), Fetch (READ; CLUSTER_ACTION for replicas),
//! ListOffsets and OffsetForLeaderEpoch (DESCRIBE), DeleteRecords (DELETE).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_request::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsResponse, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::fetch_request::{FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::{
    FetchResponse, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::list_offsets_request::ListOffsetsRequest;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderEpochRequest;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderEpochResponse, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::produce_request::{ProduceRequest, TopicProduceData};
use kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::RequestKind;
use ottla_controller::acls::operation;
use uuid::Uuid;

use super::{patch, split, Gate};
use crate::security::authorizer::Access;

const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;

/// The name of a topic given by name, or by id from v13 of Produce/Fetch.
/// Unknown ids pass: the handler answers UNKNOWN_TOPIC_ID.
fn topic_allowed(access: &Access, op: i8, name: &str, id: Uuid, by_id: bool) -> bool {
    if !by_id {
        return access.topic(op, name);
    }
    match access.image().topic_by_id(&id) {
        Some(t) => access.topic(op, &t.name),
        None => true,
    }
}

pub fn produce(access: &Access, version: i16, mut req: ProduceRequest) -> Gate {
    let by_id = version >= 13;
    // A transactional producer must be allowed its transactional id first.
    let (error, refused) = match req.transactional_id.as_deref() {
        Some(t) if !access.transactional_id(operation::WRITE, t) => (
            ResponseError::TransactionalIdAuthorizationFailed,
            std::mem::take(&mut req.topic_data),
        ),
        _ => {
            let (kept, refused) = split(std::mem::take(&mut req.topic_data), |t| {
                topic_allowed(access, operation::WRITE, &t.name, t.topic_id, by_id)
            });
            req.topic_data = kept;
            (TOPIC_DENIED, refused)
        }
    };
    let p = (!refused.is_empty()).then(|| {
        patch!(Produce, move |r: &mut ProduceResponse| {
            r.responses
                .extend(refused.into_iter().map(|t| refused_produce(t, error)));
        })
    });
    Gate::Pass(RequestKind::Produce(req), p.flatten())
}

fn refused_produce(t: TopicProduceData, error: ResponseError) -> TopicProduceResponse {
    TopicProduceResponse::default()
        .with_name(t.name)
        .with_topic_id(t.topic_id)
        .with_partition_responses(
            t.partition_data
                .iter()
                .map(|p| {
                    PartitionProduceResponse::default()
                        .with_index(p.index)
                        .with_error_code(error.code())
                        .with_base_offset(-1)
                        .with_log_append_time_ms(-1)
                        .with_log_start_offset(-1)
                })
                .collect(),
        )
}

pub fn fetch(access: &Arc<Access>, version: i16, mut req: FetchRequest) -> Gate {
    let replica_id = if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    };
    let by_id = version >= 13;
    if replica_id >= 0 {
        // Followers replicate: a broker's right, not a consumer's.
        if access.cluster(operation::CLUSTER_ACTION) {
            return Gate::Pass(RequestKind::Fetch(req), None);
        }
        let refused = std::mem::take(&mut req.topics);
        // The partitions an incremental session holds would be answered
        // without being listed: close the session instead (the follower's
        // next fetch is a full one, refused partition by partition).
        req.session_epoch = crate::fetch_session::FINAL_EPOCH;
        let p = patch!(Fetch, move |r: &mut FetchResponse| {
            r.responses.extend(refused.into_iter().map(refused_fetch));
        });
        return Gate::Pass(RequestKind::Fetch(req), p);
    }
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        topic_allowed(access, operation::READ, &t.topic, t.topic_id, by_id)
    });
    req.topics = kept;
    let access = access.clone();
    let p = patch!(Fetch, move |r: &mut FetchResponse| {
        // An incremental session also answers for partitions added to it
        // earlier: READ may have been taken away since.
        for t in &mut r.responses {
            if !topic_allowed(&access, operation::READ, &t.topic, t.topic_id, by_id) {
                for p in &mut t.partitions {
                    *p = PartitionData::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(TOPIC_DENIED.code())
                        .with_high_watermark(-1);
                }
            }
        }
        r.responses.extend(refused.into_iter().map(refused_fetch));
    });
    Gate::Pass(RequestKind::Fetch(req), p)
}

fn refused_fetch(t: FetchTopic) -> FetchableTopicResponse {
    FetchableTopicResponse::default()
        .with_topic(t.topic)
        .with_topic_id(t.topic_id)
        .with_partitions(
            t.partitions
                .iter()
                .map(|p| {
                    PartitionData::default()
                        .with_partition_index(p.partition)
                        .with_error_code(TOPIC_DENIED.code())
                        .with_high_watermark(-1)
                })
                .collect(),
        )
}

pub fn list_offsets(access: &Access, mut req: ListOffsetsRequest) -> Gate {
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        access.topic(operation::DESCRIBE, &t.name)
    });
    req.topics = kept;
    let p = (!refused.is_empty()).then(|| {
        patch!(ListOffsets, move |r: &mut ListOffsetsResponse| {
            r.topics.extend(refused.into_iter().map(|t| {
                ListOffsetsTopicResponse::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                ListOffsetsPartitionResponse::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(TOPIC_DENIED.code())
                                    .with_timestamp(-1)
                                    .with_offset(-1)
                                    .with_leader_epoch(-1)
                            })
                            .collect(),
                    )
            }));
        })
    });
    Gate::Pass(RequestKind::ListOffsets(req), p.flatten())
}

pub fn offset_for_leader_epoch(access: &Access, mut req: OffsetForLeaderEpochRequest) -> Gate {
    let (kept, refused) = if req.replica_id.0 >= 0 {
        if access.cluster(operation::CLUSTER_ACTION) {
            (std::mem::take(&mut req.topics), Vec::new())
        } else {
            (Vec::new(), std::mem::take(&mut req.topics))
        }
    } else {
        split(std::mem::take(&mut req.topics), |t| {
            access.topic(operation::DESCRIBE, &t.topic)
        })
    };
    req.topics = kept;
    let p = (!refused.is_empty()).then(|| {
        patch!(
            OffsetForLeaderEpoch,
            move |r: &mut OffsetForLeaderEpochResponse| {
                r.topics.extend(refused.into_iter().map(|t| {
                    OffsetForLeaderTopicResult::default()
                        .with_topic(t.topic)
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    EpochEndOffset::default()
                                        .with_partition(p.partition)
                                        .with_error_code(TOPIC_DENIED.code())
                                        .with_leader_epoch(-1)
                                        .with_end_offset(-1)
                                })
                                .collect(),
                        )
                }));
            }
        )
    });
    Gate::Pass(RequestKind::OffsetForLeaderEpoch(req), p.flatten())
}

pub fn delete_records(access: &Access, mut req: DeleteRecordsRequest) -> Gate {
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        access.topic(operation::DELETE, &t.name)
    });
    req.topics = kept;
    let p = (!refused.is_empty()).then(|| {
        patch!(DeleteRecords, move |r: &mut DeleteRecordsResponse| {
            r.topics.extend(refused.into_iter().map(|t| {
                DeleteRecordsTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                DeleteRecordsPartitionResult::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(TOPIC_DENIED.code())
                                    .with_low_watermark(-1)
                            })
                            .collect(),
                    )
            }));
        })
    });
    Gate::Pass(RequestKind::DeleteRecords(req), p.flatten())
}
