//! Gates of the group APIs: READ on the group to join, sync, heartbeat,
//! leave and commit (plus READ on the committed topics, DESCRIBE on the
//! topics a KIP-848 member subscribes to), DESCRIBE to find
//! its coordinator, fetch its offsets (DESCRIBE on the topics) or describe
//! it, DELETE to delete it or its offsets. ListGroups shows every group to
//! cluster DESCRIBE, else the groups the principal may DESCRIBE.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_request::ConsumerGroupDescribeRequest;
use kafka_protocol::messages::consumer_group_describe_response::ConsumerGroupDescribeResponse;
use kafka_protocol::messages::consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest;
use kafka_protocol::messages::consumer_group_heartbeat_response::ConsumerGroupHeartbeatResponse;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::delete_groups_response::{
    DeletableGroupResult, DeleteGroupsResponse,
};
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::describe_groups_response::{DescribeGroupsResponse, DescribedGroup};
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::find_coordinator_response::{Coordinator, FindCoordinatorResponse};
use kafka_protocol::messages::heartbeat_request::HeartbeatRequest;
use kafka_protocol::messages::heartbeat_response::HeartbeatResponse;
use kafka_protocol::messages::join_group_request::JoinGroupRequest;
use kafka_protocol::messages::join_group_response::JoinGroupResponse;
use kafka_protocol::messages::leave_group_request::LeaveGroupRequest;
use kafka_protocol::messages::leave_group_response::LeaveGroupResponse;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_groups_response::ListGroupsResponse;
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequest;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponse, OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_request::OffsetDeleteRequest;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponse, OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequest;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponse, OffsetFetchResponseGroup, OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequest;
use kafka_protocol::messages::sync_group_response::SyncGroupResponse;
use kafka_protocol::messages::{BrokerId, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::acls::{operation, resource};

use super::{patch, split, Gate};
use crate::apis::group::ALL_GROUP_OPERATIONS;
use crate::security::authorizer::Access;

const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;
const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;
/// FindCoordinator key types.
const KEY_TYPE_TRANSACTION: i8 = 1;
/// Share partitions (`group:topic id:partition`), KIP-932.
const KEY_TYPE_SHARE: i8 = 2;

fn text(s: &'static str) -> Option<StrBytes> {
    Some(StrBytes::from_static_str(s))
}

/// Kafka's CoordinatorType: a group or a transactional id, each needing DESCRIBE.
fn coordinator_check(access: &Access, key_type: i8, key: &str) -> Result<(), ResponseError> {
    if key_type == KEY_TYPE_SHARE {
        // Share coordinators are for brokers' persisters, as in Kafka.
        access
            .cluster(operation::CLUSTER_ACTION)
            .then_some(())
            .ok_or(ResponseError::ClusterAuthorizationFailed)
    } else if key_type == KEY_TYPE_TRANSACTION {
        access
            .transactional_id(operation::DESCRIBE, key)
            .then_some(())
            .ok_or(ResponseError::TransactionalIdAuthorizationFailed)
    } else {
        access
            .group(operation::DESCRIBE, key)
            .then_some(())
            .ok_or(GROUP_DENIED)
    }
}

pub fn find_coordinator(access: &Access, version: i16, mut req: FindCoordinatorRequest) -> Gate {
    if version < 4 {
        return match coordinator_check(access, req.key_type, &req.key) {
            Ok(()) => Gate::Pass(RequestKind::FindCoordinator(req), None),
            Err(e) => {
                let mut r = FindCoordinatorResponse::default()
                    .with_error_code(e.code())
                    .with_node_id(BrokerId(-1))
                    .with_port(-1);
                if version >= 1 {
                    r = r.with_error_message(Some(StrBytes::from_string(e.to_string())));
                }
                Gate::Answer(ResponseKind::FindCoordinator(r))
            }
        };
    }
    let key_type = req.key_type;
    let mut refused = Vec::new();
    req.coordinator_keys
        .retain(|k| match coordinator_check(access, key_type, k) {
            Ok(()) => true,
            Err(e) => {
                refused.push(
                    Coordinator::default()
                        .with_key(k.clone())
                        .with_node_id(BrokerId(-1))
                        .with_port(-1)
                        .with_error_code(e.code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                );
                false
            }
        });
    let p = if refused.is_empty() {
        None
    } else {
        patch!(FindCoordinator, move |r: &mut FindCoordinatorResponse| {
            r.coordinators.extend(refused);
        })
    };
    Gate::Pass(RequestKind::FindCoordinator(req), p)
}

/// A request on one group that needs READ on it, or its error answer.
fn group_read(
    access: &Access,
    group: &str,
    body: RequestKind,
    refuse: impl FnOnce() -> ResponseKind,
) -> Gate {
    if access.group(operation::READ, group) {
        Gate::Pass(body, None)
    } else {
        Gate::Answer(refuse())
    }
}

pub fn join_group(access: &Access, req: JoinGroupRequest) -> Gate {
    let group = req.group_id.to_string();
    group_read(access, &group, RequestKind::JoinGroup(req), || {
        ResponseKind::JoinGroup(JoinGroupResponse::default().with_error_code(GROUP_DENIED.code()))
    })
}

pub fn sync_group(access: &Access, req: SyncGroupRequest) -> Gate {
    let group = req.group_id.to_string();
    group_read(access, &group, RequestKind::SyncGroup(req), || {
        ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(GROUP_DENIED.code()))
    })
}

pub fn heartbeat(access: &Access, req: HeartbeatRequest) -> Gate {
    let group = req.group_id.to_string();
    group_read(access, &group, RequestKind::Heartbeat(req), || {
        ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(GROUP_DENIED.code()))
    })
}

pub fn leave_group(access: &Access, req: LeaveGroupRequest) -> Gate {
    let group = req.group_id.to_string();
    group_read(access, &group, RequestKind::LeaveGroup(req), || {
        ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(GROUP_DENIED.code()))
    })
}

/// READ on the group, and DESCRIBE on every subscribed topic name.
pub fn consumer_group_heartbeat(access: &Access, req: ConsumerGroupHeartbeatRequest) -> Gate {
    let refuse = |error: ResponseError, message: &'static str| {
        Gate::Answer(ResponseKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(error.code())
                .with_error_message(text(message)),
        ))
    };
    if !access.group(operation::READ, &req.group_id) {
        return refuse(GROUP_DENIED, "Group authorization failed.");
    }
    let subscribed = req.subscribed_topic_names.iter().flatten();
    if subscribed
        .clone()
        .any(|t| !access.topic(operation::DESCRIBE, t))
    {
        return refuse(
            TOPIC_DENIED,
            "Topic authorization failed for a subscribed topic.",
        );
    }
    Gate::Pass(RequestKind::ConsumerGroupHeartbeat(req), None)
}

pub fn offset_commit(access: &Access, mut req: OffsetCommitRequest) -> Gate {
    let every_topic_refused = !access.group(operation::READ, &req.group_id);
    let (error, refused) = if every_topic_refused {
        (GROUP_DENIED, std::mem::take(&mut req.topics))
    } else {
        let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
            access.topic(operation::READ, &t.name)
        });
        req.topics = kept;
        (TOPIC_DENIED, refused)
    };
    if every_topic_refused {
        return Gate::Answer(ResponseKind::OffsetCommit(
            OffsetCommitResponse::default().with_topics(
                refused
                    .into_iter()
                    .map(|t| commit_error(t, error))
                    .collect(),
            ),
        ));
    }
    let p = if refused.is_empty() {
        None
    } else {
        patch!(OffsetCommit, move |r: &mut OffsetCommitResponse| {
            r.topics
                .extend(refused.into_iter().map(|t| commit_error(t, error)));
        })
    };
    Gate::Pass(RequestKind::OffsetCommit(req), p)
}

fn commit_error(
    t: kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic,
    error: ResponseError,
) -> OffsetCommitResponseTopic {
    OffsetCommitResponseTopic::default()
        .with_name(t.name)
        .with_topic_id(t.topic_id)
        .with_partitions(
            t.partitions
                .iter()
                .map(|p| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(error.code())
                })
                .collect(),
        )
}

/// OffsetFetch reads nothing it could change, so it runs as asked: the
/// patch then fails the groups the principal may not DESCRIBE, and the
/// topics it may not DESCRIBE (named ones fail, listed ones disappear).
pub fn offset_fetch(access: &Arc<Access>, version: i16, req: OffsetFetchRequest) -> Gate {
    let access = access.clone();
    if version >= 8 {
        let all_topics: Vec<bool> = req.groups.iter().map(|g| g.topics.is_none()).collect();
        let p = patch!(OffsetFetch, move |r: &mut OffsetFetchResponse| {
            for (g, all) in r.groups.iter_mut().zip(all_topics) {
                if !access.group(operation::DESCRIBE, &g.group_id) {
                    *g = OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(GROUP_DENIED.code());
                    continue;
                }
                if all {
                    g.topics
                        .retain(|t| access.topic(operation::DESCRIBE, &t.name));
                }
                for t in g
                    .topics
                    .iter_mut()
                    .filter(|t| !access.topic(operation::DESCRIBE, &t.name))
                {
                    for p in &mut t.partitions {
                        p.committed_offset = -1;
                        p.committed_leader_epoch = -1;
                        p.metadata = None;
                        p.error_code = TOPIC_DENIED.code();
                    }
                }
            }
        });
        return Gate::Pass(RequestKind::OffsetFetch(req), p);
    }
    if !access.group(operation::DESCRIBE, &req.group_id) {
        let r = if version >= 2 {
            OffsetFetchResponse::default().with_error_code(GROUP_DENIED.code())
        } else {
            OffsetFetchResponse::default().with_topics(
                req.topics
                    .unwrap_or_default()
                    .into_iter()
                    .map(|t| {
                        OffsetFetchResponseTopic::default()
                            .with_name(t.name)
                            .with_partitions(
                                t.partition_indexes
                                    .iter()
                                    .map(|i| {
                                        OffsetFetchResponsePartition::default()
                                            .with_partition_index(*i)
                                            .with_committed_offset(-1)
                                            .with_error_code(GROUP_DENIED.code())
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
        };
        return Gate::Answer(ResponseKind::OffsetFetch(r));
    }
    let all = req.topics.is_none();
    let p = patch!(OffsetFetch, move |r: &mut OffsetFetchResponse| {
        if all {
            r.topics
                .retain(|t| access.topic(operation::DESCRIBE, &t.name));
        }
        for t in r
            .topics
            .iter_mut()
            .filter(|t| !access.topic(operation::DESCRIBE, &t.name))
        {
            for p in &mut t.partitions {
                p.committed_offset = -1;
                p.committed_leader_epoch = -1;
                p.metadata = None;
                p.error_code = TOPIC_DENIED.code();
            }
        }
    });
    Gate::Pass(RequestKind::OffsetFetch(req), p)
}

pub fn offset_delete(access: &Access, mut req: OffsetDeleteRequest) -> Gate {
    if !access.group(operation::DELETE, &req.group_id) {
        return Gate::Answer(ResponseKind::OffsetDelete(
            OffsetDeleteResponse::default().with_error_code(GROUP_DENIED.code()),
        ));
    }
    let (kept, refused) = split(std::mem::take(&mut req.topics), |t| {
        access.topic(operation::READ, &t.name)
    });
    req.topics = kept;
    let p = if refused.is_empty() {
        None
    } else {
        patch!(OffsetDelete, move |r: &mut OffsetDeleteResponse| {
            r.topics.extend(refused.into_iter().map(|t| {
                OffsetDeleteResponseTopic::default()
                    .with_name(t.name)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetDeleteResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(TOPIC_DENIED.code())
                            })
                            .collect(),
                    )
            }));
        })
    };
    Gate::Pass(RequestKind::OffsetDelete(req), p)
}

/// Describing reads only: groups the principal may not DESCRIBE are
/// answered GROUP_AUTHORIZATION_FAILED, the others carry its operations.
pub fn describe_groups(access: &Arc<Access>, req: DescribeGroupsRequest) -> Gate {
    let access = access.clone();
    let p = patch!(DescribeGroups, move |r: &mut DescribeGroupsResponse| {
        for g in &mut r.groups {
            if !access.group(operation::DESCRIBE, &g.group_id) {
                *g = DescribedGroup::default()
                    .with_group_id(g.group_id.clone())
                    .with_error_code(GROUP_DENIED.code());
            } else if g.authorized_operations != i32::MIN {
                g.authorized_operations =
                    access.operations(ALL_GROUP_OPERATIONS, resource::GROUP, &g.group_id);
            }
        }
    });
    Gate::Pass(RequestKind::DescribeGroups(req), p)
}

pub fn consumer_group_describe(access: &Arc<Access>, req: ConsumerGroupDescribeRequest) -> Gate {
    let access = access.clone();
    let p = patch!(
        ConsumerGroupDescribe,
        move |r: &mut ConsumerGroupDescribeResponse| {
            for g in &mut r.groups {
                if !access.group(operation::DESCRIBE, &g.group_id) {
                    *g = kafka_protocol::messages::consumer_group_describe_response::DescribedGroup::default()
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
    Gate::Pass(RequestKind::ConsumerGroupDescribe(req), p)
}

pub fn list_groups(access: &Arc<Access>, req: ListGroupsRequest) -> Gate {
    if access.cluster(operation::DESCRIBE) {
        return Gate::Pass(RequestKind::ListGroups(req), None);
    }
    let access = access.clone();
    let p = patch!(ListGroups, move |r: &mut ListGroupsResponse| {
        r.groups
            .retain(|g| access.group(operation::DESCRIBE, &g.group_id));
    });
    Gate::Pass(RequestKind::ListGroups(req), p)
}

pub fn delete_groups(access: &Access, mut req: DeleteGroupsRequest) -> Gate {
    let (kept, refused) = split(std::mem::take(&mut req.groups_names), |g| {
        access.group(operation::DELETE, g)
    });
    req.groups_names = kept;
    let p = if refused.is_empty() {
        None
    } else {
        patch!(DeleteGroups, move |r: &mut DeleteGroupsResponse| {
            r.results.extend(refused.into_iter().map(|g| {
                DeletableGroupResult::default()
                    .with_group_id(g)
                    .with_error_code(GROUP_DENIED.code())
            }));
        })
    };
    Gate::Pass(RequestKind::DeleteGroups(req), p)
}
