//! Share groups' APIs (KIP-932), as Kafka authorizes them: READ on the
//! group for the heartbeat, fetches and acknowledgements, DESCRIBE on the
//! subscribed topics for the heartbeat and READ on the fetched ones;
//! DESCRIBE on each described group; CLUSTER_ACTION for the share
//! coordinator's state requests, which only brokers send.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup;
use kafka_protocol::messages::initialize_share_group_state_response::{
    InitializeStateResult, PartitionResult as InitializeResult,
};
use kafka_protocol::messages::share_acknowledge_response::{
    self as ack_response, ShareAcknowledgeResponse, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::share_fetch_response::{
    PartitionData, ShareFetchResponse, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::share_group_describe_response::{
    DescribedGroup, ShareGroupDescribeResponse,
};
use kafka_protocol::messages::write_share_group_state_response::{
    PartitionResult as WriteResult, WriteStateResult,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DeleteShareGroupStateRequest, DeleteShareGroupStateResponse,
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
    InitializeShareGroupStateRequest, InitializeShareGroupStateResponse,
    ReadShareGroupStateRequest, ReadShareGroupStateResponse, ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse, RequestKind, ResponseKind, ShareAcknowledgeRequest,
    ShareFetchRequest, ShareGroupDescribeRequest, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse, WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::acls::{operation, resource};
use uuid::Uuid;

use super::{patch, split, Gate};
use crate::apis::group::ALL_GROUP_OPERATIONS;
use crate::security::authorizer::Access;

const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;
const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;

fn text(s: &'static str) -> Option<StrBytes> {
    Some(StrBytes::from_static_str(s))
}

/// READ on a topic named by id; an unknown id passes (the handler answers
/// UNKNOWN_TOPIC_ID).
fn topic_readable(access: &Access, id: &Uuid) -> bool {
    match access.image().topic_by_id(id) {
        Some(t) => access.topic(operation::READ, &t.name),
        None => true,
    }
}

fn group_readable(access: &Access, group: Option<&str>) -> bool {
    access.group(operation::READ, group.unwrap_or_default())
}

pub fn heartbeat(access: &Access, req: ShareGroupHeartbeatRequest) -> Gate {
    let refuse = |error: ResponseError, message: &'static str| {
        Gate::Answer(ResponseKind::ShareGroupHeartbeat(
            ShareGroupHeartbeatResponse::default()
                .with_error_code(error.code())
                .with_error_message(text(message)),
        ))
    };
    if !access.group(operation::READ, &req.group_id) {
        return refuse(GROUP_DENIED, "Group authorization failed.");
    }
    let mut subscribed = req.subscribed_topic_names.iter().flatten();
    if subscribed.any(|t| !access.topic(operation::DESCRIBE, t)) {
        return refuse(
            TOPIC_DENIED,
            "Topic authorization failed for a subscribed topic.",
        );
    }
    Gate::Pass(RequestKind::ShareGroupHeartbeat(req), None)
}

pub fn describe(access: &Arc<Access>, req: ShareGroupDescribeRequest) -> Gate {
    let access = access.clone();
    let p = patch!(
        ShareGroupDescribe,
        move |r: &mut ShareGroupDescribeResponse| {
            for g in &mut r.groups {
                if !access.group(operation::DESCRIBE, &g.group_id) {
                    *g = DescribedGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(GROUP_DENIED.code())
                        .with_error_message(text("Group authorization failed."));
                } else if g.authorized_operations != i32::MIN {
                    g.authorized_operations =
                        access.operations(ALL_GROUP_OPERATIONS, resource::GROUP, &g.group_id);
                }
            }
        }
    );
    Gate::Pass(RequestKind::ShareGroupDescribe(req), p)
}

pub fn fetch(access: &Arc<Access>, mut req: ShareFetchRequest) -> Gate {
    if !group_readable(access, req.group_id.as_ref().map(|g| g.as_str())) {
        return Gate::Answer(ResponseKind::ShareFetch(
            ShareFetchResponse::default().with_error_code(GROUP_DENIED.code()),
        ));
    }
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        topic_readable(access, &t.topic_id)
    });
    req.topics = kept;
    let access = access.clone();
    let p = patch!(ShareFetch, move |r: &mut ShareFetchResponse| {
        // A session also answers for partitions added earlier: READ may
        // have been taken away since.
        for t in &mut r.responses {
            if !topic_readable(&access, &t.topic_id) {
                for p in &mut t.partitions {
                    *p = refused_fetch(p.partition_index);
                }
            }
        }
        r.responses.extend(refused.into_iter().map(|t| {
            ShareFetchableTopicResponse::default()
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| refused_fetch(p.partition_index))
                        .collect(),
                )
        }));
    });
    Gate::Pass(RequestKind::ShareFetch(req), p)
}

fn refused_fetch(partition: i32) -> PartitionData {
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(TOPIC_DENIED.code())
}

pub fn acknowledge(access: &Access, mut req: ShareAcknowledgeRequest) -> Gate {
    if !group_readable(access, req.group_id.as_ref().map(|g| g.as_str())) {
        return Gate::Answer(ResponseKind::ShareAcknowledge(
            ShareAcknowledgeResponse::default().with_error_code(GROUP_DENIED.code()),
        ));
    }
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        topic_readable(access, &t.topic_id)
    });
    req.topics = kept;
    let p = (!refused.is_empty()).then(|| {
        patch!(ShareAcknowledge, move |r: &mut ShareAcknowledgeResponse| {
            r.responses.extend(refused.into_iter().map(|t| {
                ShareAcknowledgeTopicResponse::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                ack_response::PartitionData::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(TOPIC_DENIED.code())
                            })
                            .collect(),
                    )
            }));
        })
    });
    Gate::Pass(RequestKind::ShareAcknowledge(req), p.flatten())
}

const CLUSTER_DENIED: ResponseError = ResponseError::ClusterAuthorizationFailed;

pub fn read_state(access: &Access, req: ReadShareGroupStateRequest) -> Gate {
    if access.cluster(operation::CLUSTER_ACTION) {
        return Gate::Pass(RequestKind::ReadShareGroupState(req), None);
    }
    let results = crate::apis::share_state::failed_reads(&req, CLUSTER_DENIED);
    Gate::Answer(ResponseKind::ReadShareGroupState(
        ReadShareGroupStateResponse::default().with_results(results),
    ))
}

pub fn delete_state(access: &Access, req: DeleteShareGroupStateRequest) -> Gate {
    if access.cluster(operation::CLUSTER_ACTION) {
        return Gate::Pass(RequestKind::DeleteShareGroupState(req), None);
    }
    let results = crate::apis::share_state::failed_deletes(&req, CLUSTER_DENIED);
    Gate::Answer(ResponseKind::DeleteShareGroupState(
        DeleteShareGroupStateResponse::default().with_results(results),
    ))
}

pub fn read_state_summary(access: &Access, req: ReadShareGroupStateSummaryRequest) -> Gate {
    if access.cluster(operation::CLUSTER_ACTION) {
        return Gate::Pass(RequestKind::ReadShareGroupStateSummary(req), None);
    }
    let results = crate::apis::share_state::failed_summaries(&req, CLUSTER_DENIED);
    Gate::Answer(ResponseKind::ReadShareGroupStateSummary(
        ReadShareGroupStateSummaryResponse::default().with_results(results),
    ))
}

pub fn write_state(access: &Access, req: WriteShareGroupStateRequest) -> Gate {
    if access.cluster(operation::CLUSTER_ACTION) {
        return Gate::Pass(RequestKind::WriteShareGroupState(req), None);
    }
    let results = req
        .topics
        .iter()
        .map(|t| {
            WriteStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            WriteResult::default()
                                .with_partition(p.partition)
                                .with_error_code(CLUSTER_DENIED.code())
                        })
                        .collect(),
                )
        })
        .collect();
    Gate::Answer(ResponseKind::WriteShareGroupState(
        WriteShareGroupStateResponse::default().with_results(results),
    ))
}

/// DESCRIBE on the group, else the group is refused; topics the principal
/// may not describe are left out, as Kafka filters them.
pub fn describe_offsets(access: &Arc<Access>, mut req: DescribeShareGroupOffsetsRequest) -> Gate {
    let mut refused = Vec::new();
    req.groups.retain(|g| {
        let allowed = access.group(operation::DESCRIBE, &g.group_id);
        if !allowed {
            refused.push(g.group_id.clone());
        }
        allowed
    });
    for g in &mut req.groups {
        if let Some(topics) = &mut g.topics {
            topics.retain(|t| access.topic(operation::DESCRIBE, &t.topic_name));
        }
    }
    let access = access.clone();
    let p = patch!(
        DescribeShareGroupOffsets,
        move |r: &mut DescribeShareGroupOffsetsResponse| {
            for g in &mut r.groups {
                g.topics
                    .retain(|t| access.topic(operation::DESCRIBE, &t.topic_name));
            }
            r.groups.extend(refused.into_iter().map(|id| {
                DescribeShareGroupOffsetsResponseGroup::default()
                    .with_group_id(id)
                    .with_error_code(GROUP_DENIED.code())
                    .with_error_message(text("Group authorization failed."))
            }));
        }
    );
    Gate::Pass(RequestKind::DescribeShareGroupOffsets(req), p)
}

/// READ on the group, else the request is refused whole; READ on each
/// topic, else its partitions are refused (Kafka's rules for
/// AlterShareGroupOffsets).
pub fn alter_offsets(access: &Arc<Access>, mut req: AlterShareGroupOffsetsRequest) -> Gate {
    if !access.group(operation::READ, &req.group_id) {
        return Gate::Answer(ResponseKind::AlterShareGroupOffsets(
            AlterShareGroupOffsetsResponse::default()
                .with_error_code(GROUP_DENIED.code())
                .with_error_message(text("Group authorization failed.")),
        ));
    }
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        access.topic(operation::READ, &t.topic_name)
    });
    req.topics = kept;
    let p = (!refused.is_empty()).then(|| {
        patch!(
            AlterShareGroupOffsets,
            move |r: &mut AlterShareGroupOffsetsResponse| {
                r.responses.extend(refused.into_iter().map(|t| {
                    AlterShareGroupOffsetsResponseTopic::default()
                        .with_topic_name(t.topic_name)
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    AlterShareGroupOffsetsResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(TOPIC_DENIED.code())
                                })
                                .collect(),
                        )
                }));
            }
        )
    });
    Gate::Pass(RequestKind::AlterShareGroupOffsets(req), p.flatten())
}

/// DELETE on the group, else the request is refused whole; READ on each
/// topic, else that topic is refused (Kafka's rules for
/// DeleteShareGroupOffsets).
pub fn delete_offsets(access: &Arc<Access>, mut req: DeleteShareGroupOffsetsRequest) -> Gate {
    if !access.group(operation::DELETE, &req.group_id) {
        return Gate::Answer(ResponseKind::DeleteShareGroupOffsets(
            DeleteShareGroupOffsetsResponse::default()
                .with_error_code(GROUP_DENIED.code())
                .with_error_message(text("Group authorization failed.")),
        ));
    }
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        access.topic(operation::READ, &t.topic_name)
    });
    req.topics = kept;
    let p = (!refused.is_empty()).then(|| {
        patch!(
            DeleteShareGroupOffsets,
            move |r: &mut DeleteShareGroupOffsetsResponse| {
                r.responses.extend(refused.into_iter().map(|t| {
                    DeleteShareGroupOffsetsResponseTopic::default()
                        .with_topic_name(t.topic_name)
                        .with_error_code(TOPIC_DENIED.code())
                        .with_error_message(text("Topic authorization failed."))
                }));
            }
        )
    });
    Gate::Pass(RequestKind::DeleteShareGroupOffsets(req), p.flatten())
}

pub fn initialize_state(access: &Access, req: InitializeShareGroupStateRequest) -> Gate {
    if access.cluster(operation::CLUSTER_ACTION) {
        return Gate::Pass(RequestKind::InitializeShareGroupState(req), None);
    }
    let results = req
        .topics
        .iter()
        .map(|t| {
            InitializeStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            InitializeResult::default()
                                .with_partition(p.partition)
                                .with_error_code(CLUSTER_DENIED.code())
                        })
                        .collect(),
                )
        })
        .collect();
    Gate::Answer(ResponseKind::InitializeShareGroupState(
        InitializeShareGroupStateResponse::default().with_results(results),
    ))
}
