//! The group coordinator's APIs: FindCoordinator, JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
//! DescribeGroups, DeleteGroups and OffsetDelete, at the versions Kafka 4.x
//! serves ([`GROUP_API_VERSIONS`]). These functions translate between wire
//! versions and `ottla_group_coordinator`, which holds the protocol logic; fields a
//! version lacks are left at their defaults so the response encodes.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
    DescribeGroupsResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
    LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use ottla_controller::MetadataImage;
use ottla_coordinator_common::lookup::CoordinatorNode;

use super::share_group;
use crate::broker::Broker;
use crate::replica::now_ms;
use ottla_group_coordinator::{
    CommitRequest, FetchedOffset, JoinRequest, JoinResult, LeavingMember, PartitionCodes,
    PartitionCommit, Protocol, Reply, Shard, SyncRequest, SyncResult, CLASSIC_GROUP_TYPE,
    CONSUMER_GROUP_TYPE, DEAD, SHARE_GROUP_TYPE, STREAMS_GROUP_TYPE,
};

/// What these handlers serve: Kafka 4.x's ranges, within what kafka-protocol
/// 0.18 decodes (OffsetCommit and OffsetFetch stop at v9 there).
pub const GROUP_API_VERSIONS: [(ApiKey, VersionRange); 11] = [
    (ApiKey::FindCoordinator, VersionRange { min: 0, max: 6 }),
    (ApiKey::JoinGroup, VersionRange { min: 0, max: 9 }),
    (ApiKey::SyncGroup, VersionRange { min: 0, max: 5 }),
    (ApiKey::Heartbeat, VersionRange { min: 0, max: 4 }),
    (ApiKey::LeaveGroup, VersionRange { min: 0, max: 5 }),
    (ApiKey::OffsetCommit, VersionRange { min: 2, max: 9 }),
    (ApiKey::OffsetFetch, VersionRange { min: 1, max: 9 }),
    (ApiKey::ListGroups, VersionRange { min: 0, max: 5 }),
    (ApiKey::DescribeGroups, VersionRange { min: 0, max: 6 }),
    (ApiKey::DeleteGroups, VersionRange { min: 0, max: 2 }),
    (ApiKey::OffsetDelete, VersionRange { min: 0, max: 0 }),
];

/// FindCoordinator key types.
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;
const KEY_TYPE_SHARE: i8 = 2;
/// Every group ACL operation (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
/// ALTER_CONFIGS) as a bit set; no ACLs are enforced yet.
pub(crate) const ALL_GROUP_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11);

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Kafka's `clientHost`: Java's `InetAddress.toString()`, `/` then the
/// address, IPv6 in full uncompressed hex groups.
pub fn client_host(addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(v4) => format!("/{v4}"),
        IpAddr::V6(v6) => {
            let groups: Vec<String> = v6.segments().iter().map(|s| format!("{s:x}")).collect();
            format!("/{}", groups.join(":"))
        }
    }
}

/// Waits for a parked answer; a dropped sender means the coordinator went
/// away (shutdown), which clients handle by finding it again.
async fn settle<T>(reply: Reply<T>, gone: impl FnOnce() -> T) -> T {
    match reply {
        Reply::Ready(r) => r,
        Reply::Parked(rx) => rx.await.unwrap_or_else(|_| gone()),
    }
}

pub fn find_coordinator(
    broker: &Broker,
    version: i16,
    listener: &str,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let key_type = if version >= 1 {
        req.key_type
    } else {
        KEY_TYPE_GROUP
    };
    let locate = |key: &str| match key_type {
        KEY_TYPE_GROUP => broker.groups.find(key, listener),
        KEY_TYPE_TRANSACTION => broker.txns.find(key, listener),
        // Share partitions' coordinators (KIP-932), while share groups are on.
        KEY_TYPE_SHARE if share_group::disabled(&broker.controller.image()).is_none() => {
            broker.share_coordinator.find(key, listener)
        }
        _ => Err(ResponseError::InvalidRequest),
    };
    let no_node = CoordinatorNode {
        node_id: -1,
        host: String::new(),
        port: -1,
    };
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|key| {
                let (node, error) = match locate(key) {
                    Ok(node) => (node, 0),
                    Err(e) => (no_node.clone(), e.code()),
                };
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(node.node_id))
                    .with_host(text(node.host))
                    .with_port(node.port)
                    .with_error_code(error)
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (node, error) = match locate(&req.key) {
        Ok(node) => (node, None),
        Err(e) => (no_node, Some(e)),
    };
    let mut r = FindCoordinatorResponse::default()
        .with_error_code(error.map_or(0, |e| e.code()))
        .with_node_id(BrokerId(node.node_id))
        .with_host(text(node.host))
        .with_port(node.port);
    if version >= 1 {
        r = r.with_error_message(error.map(|e| text(kafka_message(e))));
    }
    r
}

/// Kafka's message for the errors FindCoordinator v1-3 reports
/// (kafka-protocol's `Display` gives the variant name instead).
fn kafka_message(e: ResponseError) -> String {
    match e {
        ResponseError::CoordinatorNotAvailable => "The coordinator is not available.".to_string(),
        ResponseError::InvalidRequest => "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.".to_string(),
        other => other.to_string(),
    }
}

/// JoinGroup. `client_id` comes from the request header and `client_addr`
/// from the connection; DescribeGroups reports both.
pub async fn join_group(
    broker: &Broker,
    version: i16,
    client_id: &str,
    client_addr: IpAddr,
    req: JoinGroupRequest,
) -> JoinGroupResponse {
    join_response(
        version,
        join(broker, version, client_id, client_addr, req).await,
    )
}

async fn join(
    broker: &Broker,
    version: i16,
    client_id: &str,
    client_addr: IpAddr,
    req: JoinGroupRequest,
) -> JoinResult {
    let member_id = req.member_id.to_string();
    if req.group_id.is_empty() {
        return JoinResult::error(&member_id, ResponseError::InvalidGroupId);
    }
    let config = broker.groups.config();
    if !(config.min_session_timeout_ms..=config.max_session_timeout_ms)
        .contains(&req.session_timeout_ms)
    {
        return JoinResult::error(&member_id, ResponseError::InvalidSessionTimeout);
    }
    broker.groups.load_shard_of(&req.group_id).await;
    let shard = match broker.groups.shard(&req.group_id) {
        Ok(shard) => shard,
        Err(e) => return JoinResult::error("", e),
    };
    let request = JoinRequest {
        group_id: req.group_id.to_string(),
        member_id,
        group_instance_id: if version >= 5 {
            req.group_instance_id.map(|i| i.to_string())
        } else {
            None
        },
        client_id: client_id.to_string(),
        client_host: client_host(client_addr),
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .into_iter()
            .map(|p| Protocol {
                name: p.name.to_string(),
                metadata: p.metadata,
            })
            .collect(),
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
    };
    let joined = settle(
        shard.join(request, &broker.controller.image(), now_ms()),
        || JoinResult::error("", ResponseError::NotCoordinator),
    )
    .await;
    shard.once_replicated(joined).await
}

fn join_response(version: i16, r: JoinResult) -> JoinGroupResponse {
    let members = r
        .members
        .into_iter()
        .map(|m| {
            let mut member = JoinGroupResponseMember::default()
                .with_member_id(text(m.member_id))
                .with_metadata(m.metadata);
            if version >= 5 {
                member = member.with_group_instance_id(m.group_instance_id.map(text));
            }
            member
        })
        .collect();
    // As Kafka: "" stands for no protocol before v7, null from v7.
    let protocol_name = r.protocol_name.filter(|n| !n.is_empty());
    let mut resp = JoinGroupResponse::default()
        .with_error_code(r.error)
        .with_generation_id(r.generation_id)
        .with_leader(text(r.leader))
        .with_member_id(text(r.member_id))
        .with_members(members);
    if version >= 7 {
        resp = resp
            .with_protocol_type(r.protocol_type.map(text))
            .with_protocol_name(protocol_name.map(text));
    } else {
        resp = resp.with_protocol_name(Some(text(protocol_name.unwrap_or_default())));
    }
    if version >= 9 {
        resp = resp.with_skip_assignment(r.skip_assignment);
    }
    resp
}

pub async fn sync_group(broker: &Broker, version: i16, req: SyncGroupRequest) -> SyncGroupResponse {
    let r = sync(broker, version, req).await;
    let mut resp = SyncGroupResponse::default()
        .with_error_code(r.error)
        .with_assignment(r.assignment);
    if version >= 5 {
        resp = resp
            .with_protocol_type(r.protocol_type.map(text))
            .with_protocol_name(r.protocol_name.map(text));
    }
    resp
}

async fn sync(broker: &Broker, version: i16, req: SyncGroupRequest) -> SyncResult {
    if req.group_id.is_empty() {
        return SyncResult::error(ResponseError::InvalidGroupId);
    }
    // From v5 both fields are mandatory.
    if version >= 5 && (req.protocol_type.is_none() || req.protocol_name.is_none()) {
        return SyncResult::error(ResponseError::InconsistentGroupProtocol);
    }
    broker.groups.load_shard_of(&req.group_id).await;
    let shard = match broker.groups.shard(&req.group_id) {
        Ok(shard) => shard,
        Err(e) => return SyncResult::error(e),
    };
    let request = SyncRequest {
        group_id: req.group_id.to_string(),
        generation_id: req.generation_id,
        member_id: req.member_id.to_string(),
        group_instance_id: if version >= 3 {
            req.group_instance_id.map(|i| i.to_string())
        } else {
            None
        },
        protocol_type: if version >= 5 {
            req.protocol_type.map(|p| p.to_string())
        } else {
            None
        },
        protocol_name: if version >= 5 {
            req.protocol_name.map(|p| p.to_string())
        } else {
            None
        },
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    let synced = settle(
        shard.sync(request, &broker.controller.image(), now_ms()),
        || SyncResult::error(ResponseError::NotCoordinator),
    )
    .await;
    shard.once_replicated(synced).await
}

pub async fn heartbeat(broker: &Broker, version: i16, req: HeartbeatRequest) -> HeartbeatResponse {
    let result = if req.group_id.is_empty() {
        Err(ResponseError::InvalidGroupId)
    } else {
        let instance = if version >= 3 {
            req.group_instance_id.as_deref()
        } else {
            None
        };
        broker.groups.load_shard_of(&req.group_id).await;
        match broker.groups.shard(&req.group_id) {
            Ok(shard) => {
                let beat = shard.heartbeat(
                    &req.group_id,
                    &req.member_id,
                    instance,
                    req.generation_id,
                    now_ms(),
                );
                shard.once_replicated(beat).await
            }
            // As Kafka: a loading coordinator accepts heartbeats blindly.
            Err(ResponseError::CoordinatorLoadInProgress) => Ok(()),
            Err(e) => Err(e),
        }
    };
    HeartbeatResponse::default().with_error_code(result.err().map_or(0, |e| e.code()))
}

pub async fn leave_group(
    broker: &Broker,
    version: i16,
    req: LeaveGroupRequest,
) -> LeaveGroupResponse {
    // v0-2 name one member; v3+ a batch, possibly by instance id only.
    let members: Vec<LeavingMember> = if version >= 3 {
        req.members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: req.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let codes = if req.group_id.is_empty() {
        Err(ResponseError::InvalidGroupId)
    } else {
        broker.groups.load_shard_of(&req.group_id).await;
        match broker.groups.shard(&req.group_id) {
            Ok(shard) => {
                let image = broker.controller.image();
                let left = shard.leave(&req.group_id, &members, &image, now_ms());
                Ok(shard.once_replicated(left).await)
            }
            Err(e) => Err(e),
        }
    };
    match codes {
        Err(e) => LeaveGroupResponse::default().with_error_code(e.code()),
        Ok(codes) if version >= 3 => {
            let responses = members
                .into_iter()
                .zip(codes)
                .map(|(m, code)| {
                    MemberResponse::default()
                        .with_member_id(text(m.member_id))
                        .with_group_instance_id(m.group_instance_id.map(text))
                        .with_error_code(code)
                })
                .collect();
            LeaveGroupResponse::default().with_members(responses)
        }
        // Before v3 the member's error is the top-level error.
        Ok(codes) => LeaveGroupResponse::default()
            .with_error_code(codes.into_iter().find(|&c| c != 0).unwrap_or(0)),
    }
}

/// Loads the shards of `group_ids` (each once) on the blocking pool, for a
/// request that names several groups.
async fn load_shards_of<'a>(broker: &Broker, group_ids: impl IntoIterator<Item = &'a str>) {
    let mut partitions = HashMap::new();
    for id in group_ids {
        partitions
            .entry(broker.groups.partition_for(id))
            .or_insert(id);
    }
    for id in partitions.into_values() {
        broker.groups.load_shard_of(id).await;
    }
}

/// OffsetCommit and OffsetDelete answer UNKNOWN_TOPIC_OR_PARTITION for
/// partitions that do not exist, before asking the coordinator (as Kafka).
pub(crate) fn partition_exists(image: &MetadataImage, topic: &str, partition: i32) -> bool {
    image
        .topic_by_name(topic)
        .is_some_and(|t| t.partitions.contains_key(&partition))
}

/// Fills the codes of existing partitions, in request order, from what the
/// coordinator answered for them.
pub(crate) fn merge_codes(
    codes: &mut PartitionCodes,
    image: &MetadataImage,
    answered: PartitionCodes,
) {
    let mut answered = answered
        .into_iter()
        .flat_map(|(_, ps)| ps.into_iter().map(|(_, c)| c));
    for (topic, partitions) in codes.iter_mut() {
        for (p, code) in partitions.iter_mut() {
            if partition_exists(image, topic, *p) {
                *code = answered.next().unwrap_or(0);
            }
        }
    }
}

pub async fn offset_commit(
    broker: &Broker,
    version: i16,
    req: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let image = broker.controller.image();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let mut codes: PartitionCodes = req
        .topics
        .iter()
        .map(|t| {
            (
                t.name.to_string(),
                t.partitions
                    .iter()
                    .map(|p| (p.partition_index, unknown))
                    .collect(),
            )
        })
        .collect();
    let topics: Vec<(String, Vec<PartitionCommit>)> = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .filter(|p| partition_exists(&image, &t.name, p.partition_index))
                .map(|p| PartitionCommit {
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 6 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
                })
                .collect::<Vec<_>>();
            (t.name.to_string(), partitions)
        })
        .filter(|(_, ps)| !ps.is_empty())
        .collect();
    if !topics.is_empty() {
        let request = CommitRequest {
            group_id: req.group_id.to_string(),
            generation_id: req.generation_id_or_member_epoch,
            member_id: req.member_id.to_string(),
            group_instance_id: if version >= 7 {
                req.group_instance_id.map(|i| i.to_string())
            } else {
                None
            },
            retention_time_ms: if version <= 4 {
                req.retention_time_ms
            } else {
                -1
            },
            api_version: version,
            topics,
        };
        broker.groups.load_shard_of(&req.group_id).await;
        let answered = match broker.groups.shard(&req.group_id) {
            Ok(shard) => {
                let committed = shard.commit_offsets(request, now_ms());
                shard.once_replicated(committed).await
            }
            Err(e) => request
                .topics
                .iter()
                .map(|(t, ps)| {
                    (
                        t.clone(),
                        ps.iter().map(|p| (p.partition, e.code())).collect(),
                    )
                })
                .collect(),
        };
        merge_codes(&mut codes, &image, answered);
    }
    let topics = codes
        .into_iter()
        .map(|(name, partitions)| {
            OffsetCommitResponseTopic::default()
                .with_name(TopicName(text(name)))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(p, code)| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// One group's OffsetFetch outcome.
struct GroupOffsets {
    group_id: GroupId,
    error: i16,
    topics: Vec<(String, Vec<FetchedOffset>)>,
}

fn fetch_group(
    broker: &Broker,
    group_id: GroupId,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> GroupOffsets {
    match broker.groups.shard(&group_id) {
        Ok(shard) => GroupOffsets {
            topics: shard.fetch_offsets(&group_id, topics.as_deref(), require_stable),
            group_id,
            error: 0,
        },
        Err(e) => GroupOffsets {
            group_id,
            error: e.code(),
            // Kept for v1, which can only report errors per partition.
            topics: topics
                .unwrap_or_default()
                .into_iter()
                .map(|(t, ps)| {
                    let failed = ps
                        .into_iter()
                        .map(|partition| FetchedOffset {
                            partition,
                            offset: -1,
                            leader_epoch: -1,
                            metadata: String::new(),
                            error: 0,
                        })
                        .collect();
                    (t, failed)
                })
                .collect(),
        },
    }
}

pub async fn offset_fetch(
    broker: &Broker,
    version: i16,
    req: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let group_ids: Vec<&str> = if version >= 8 {
        req.groups.iter().map(|g| g.group_id.as_str()).collect()
    } else {
        vec![req.group_id.as_str()]
    };
    load_shards_of(broker, group_ids).await;
    if version >= 8 {
        let groups = req
            .groups
            .into_iter()
            .map(|g| {
                let topics = g.topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| (t.name.to_string(), t.partition_indexes))
                        .collect()
                });
                // v9: consumer-protocol members name themselves (KIP-848).
                let member_check = broker.groups.shard(&g.group_id).and_then(|s| {
                    s.validate_offset_fetch(&g.group_id, g.member_id.as_deref(), g.member_epoch)
                });
                let fetched = fetch_group(broker, g.group_id, topics, req.require_stable);
                let error = match member_check {
                    Err(e) if fetched.error == 0 => e.code(),
                    _ => fetched.error,
                };
                let topics = if error != 0 {
                    Vec::new()
                } else {
                    fetched.topics
                };
                OffsetFetchResponseGroup::default()
                    .with_group_id(fetched.group_id)
                    .with_error_code(error)
                    .with_topics(
                        topics
                            .into_iter()
                            .map(|(name, ps)| {
                                OffsetFetchResponseTopics::default()
                                    .with_name(TopicName(text(name)))
                                    .with_partitions(
                                        ps.into_iter()
                                            .map(|o| {
                                                OffsetFetchResponsePartitions::default()
                                                    .with_partition_index(o.partition)
                                                    .with_committed_offset(o.offset)
                                                    .with_committed_leader_epoch(o.leader_epoch)
                                                    .with_metadata(Some(text(o.metadata)))
                                                    .with_error_code(o.error)
                                            })
                                            .collect(),
                                    )
                            })
                            .collect(),
                    )
            })
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    // v1 has no "all partitions" form; v2-7 send null for it.
    let topics = req.topics.map(|ts| {
        ts.into_iter()
            .map(|t| (t.name.to_string(), t.partition_indexes))
            .collect()
    });
    // v7 adds require_stable (KIP-447).
    let fetched = fetch_group(
        broker,
        req.group_id,
        topics,
        version >= 7 && req.require_stable,
    );
    let error = fetched.error;
    // Before v2 there is no top-level error: every partition carries it.
    let topics = if error != 0 && version >= 2 {
        Vec::new()
    } else {
        fetched.topics
    };
    let topics = topics
        .into_iter()
        .map(|(name, ps)| {
            let partitions = ps
                .into_iter()
                .map(|o| {
                    let mut p = OffsetFetchResponsePartition::default()
                        .with_partition_index(o.partition)
                        .with_committed_offset(o.offset)
                        .with_metadata(Some(text(o.metadata)))
                        .with_error_code(if error != 0 { error } else { o.error });
                    if version >= 5 {
                        p = p.with_committed_leader_epoch(o.leader_epoch);
                    }
                    p
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(text(name)))
                .with_partitions(partitions)
        })
        .collect();
    let mut resp = OffsetFetchResponse::default().with_topics(topics);
    if version >= 2 {
        resp = resp.with_error_code(error);
    }
    resp
}

pub async fn list_groups(
    broker: &Broker,
    version: i16,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let states: Vec<String> = if version >= 4 {
        req.states_filter.iter().map(|s| s.to_string()).collect()
    } else {
        Vec::new()
    };
    let types: Vec<String> = if version >= 5 {
        req.types_filter.iter().map(|t| t.to_string()).collect()
    } else {
        Vec::new()
    };
    // Consumer-protocol groups are listed as type "consumer" (KIP-848),
    // share groups as "share" (KIP-932).
    let listed_type = |group_type: &str| {
        types.is_empty()
            || types
                .iter()
                .any(|t| t.trim().eq_ignore_ascii_case(group_type))
    };
    let with_consumer_groups = listed_type(CONSUMER_GROUP_TYPE);
    let with_share_groups = listed_type(SHARE_GROUP_TYPE);
    let with_streams_groups = listed_type(STREAMS_GROUP_TYPE);
    let lower_states: Vec<String> = states.iter().map(|s| s.trim().to_lowercase()).collect();
    let mut listed: Vec<(String, String, &str, &str)> = Vec::new();
    for s in broker.groups.shards() {
        listed.extend(s.list(&states, &types).into_iter().map(|g| {
            (
                g.group_id,
                g.protocol_type,
                g.state.name(),
                CLASSIC_GROUP_TYPE,
            )
        }));
        if with_consumer_groups {
            listed.extend(
                s.list_consumer_groups(&lower_states)
                    .into_iter()
                    .map(|(id, state)| {
                        (
                            id,
                            CONSUMER_GROUP_TYPE.to_string(),
                            state.name(),
                            CONSUMER_GROUP_TYPE,
                        )
                    }),
            );
        }
        if with_share_groups {
            listed.extend(
                s.list_share_groups(&lower_states)
                    .into_iter()
                    .map(|(id, state)| {
                        (
                            id,
                            SHARE_GROUP_TYPE.to_string(),
                            state.name(),
                            SHARE_GROUP_TYPE,
                        )
                    }),
            );
        }
        if with_streams_groups {
            listed.extend(
                s.list_streams_groups(&lower_states)
                    .into_iter()
                    .map(|(id, state)| {
                        (
                            id,
                            STREAMS_GROUP_TYPE.to_string(),
                            state.name(),
                            STREAMS_GROUP_TYPE,
                        )
                    }),
            );
        }
    }
    listed.sort();
    let groups = listed
        .into_iter()
        .map(|(id, protocol_type, state, group_type)| {
            let mut l = ListedGroup::default()
                .with_group_id(GroupId(text(id)))
                .with_protocol_type(text(protocol_type));
            if version >= 4 {
                l = l.with_group_state(text(state));
            }
            if version >= 5 {
                l = l.with_group_type(text(group_type));
            }
            l
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}

pub async fn describe_groups(
    broker: &Broker,
    version: i16,
    req: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    load_shards_of(broker, req.groups.iter().map(|g| g.as_str())).await;
    let groups = req
        .groups
        .into_iter()
        .map(|group_id| {
            let mut d = describe_group(broker, version, group_id);
            if version >= 3 && req.include_authorized_operations && d.error_code == 0 {
                d = d.with_authorized_operations(ALL_GROUP_OPERATIONS);
            }
            d
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}

fn describe_group(broker: &Broker, version: i16, group_id: GroupId) -> DescribedGroup {
    let shard = match broker.groups.shard(&group_id) {
        Ok(shard) => shard,
        Err(e) => {
            return DescribedGroup::default()
                .with_group_id(group_id)
                .with_error_code(e.code())
        }
    };
    let Some(g) = shard.describe(&group_id) else {
        // KIP-1043: from v6 a missing group is an error, before it is "Dead".
        // So is a consumer-protocol group, which only ConsumerGroupDescribe describes.
        let mut d = DescribedGroup::default().with_group_state(text(DEAD));
        if version >= 6 {
            let message = if shard.is_consumer_group(&group_id) {
                format!("Group {} is not a classic group.", group_id.as_str())
            } else {
                format!("Group {} not found.", group_id.as_str())
            };
            d = d
                .with_error_code(ResponseError::GroupIdNotFound.code())
                .with_error_message(Some(text(message)));
        }
        return d.with_group_id(group_id);
    };
    let members = g
        .members
        .into_iter()
        .map(|m| {
            let mut member = DescribedGroupMember::default()
                .with_member_id(text(m.member_id))
                .with_client_id(text(m.client_id))
                .with_client_host(text(m.client_host))
                .with_member_metadata(m.metadata)
                .with_member_assignment(m.assignment);
            if version >= 4 {
                member = member.with_group_instance_id(m.group_instance_id.map(text));
            }
            member
        })
        .collect();
    DescribedGroup::default()
        .with_group_id(group_id)
        .with_group_state(text(g.state.name()))
        .with_protocol_type(text(g.protocol_type))
        .with_protocol_data(text(g.protocol))
        .with_members(members)
}

pub async fn delete_groups(
    broker: &Arc<Broker>,
    _version: i16,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut ids: Vec<String> = Vec::new();
    for id in &req.groups_names {
        if !ids.iter().any(|i| i == id.as_str()) {
            ids.push(id.to_string());
        }
    }
    load_shards_of(broker, ids.iter().map(String::as_str)).await;
    let mut codes: HashMap<String, i16> = HashMap::new();
    // A share group's state goes first; a group whose state could not be
    // deleted stays.
    for id in &ids {
        if let Err(e) = share_group::delete_state_before_deletion(broker, id).await {
            codes.insert(id.clone(), e.code());
        }
    }
    // One batch of tombstones per shard.
    let mut by_shard: HashMap<i32, (Arc<Shard>, Vec<String>)> = HashMap::new();
    for id in &ids {
        if codes.contains_key(id) {
            continue;
        }
        match broker.groups.shard(id) {
            Ok(shard) => by_shard
                .entry(broker.groups.partition_for(id))
                .or_insert_with(|| (shard, Vec::new()))
                .1
                .push(id.clone()),
            Err(e) => {
                codes.insert(id.clone(), e.code());
            }
        }
    }
    let now = now_ms();
    let image = broker.controller.image();
    for (shard, group_ids) in by_shard.into_values() {
        let deleted = shard.delete_groups(&group_ids, now, &image);
        let deleted = shard.once_replicated(deleted).await;
        codes.extend(group_ids.iter().cloned().zip(deleted));
    }
    let results = ids
        .into_iter()
        .map(|id| {
            let code = codes.get(&id).copied().unwrap_or(0);
            DeletableGroupResult::default()
                .with_group_id(GroupId(text(id)))
                .with_error_code(code)
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}

pub async fn offset_delete(
    broker: &Broker,
    _version: i16,
    req: OffsetDeleteRequest,
) -> OffsetDeleteResponse {
    if req.group_id.is_empty() {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::InvalidGroupId.code());
    }
    let image = broker.controller.image();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let mut codes: PartitionCodes = req
        .topics
        .iter()
        .map(|t| {
            (
                t.name.to_string(),
                t.partitions
                    .iter()
                    .map(|p| (p.partition_index, unknown))
                    .collect(),
            )
        })
        .collect();
    let topics: Vec<(String, Vec<i32>)> = req
        .topics
        .iter()
        .map(|t| {
            let ps = t
                .partitions
                .iter()
                .map(|p| p.partition_index)
                .filter(|&p| partition_exists(&image, &t.name, p))
                .collect::<Vec<_>>();
            (t.name.to_string(), ps)
        })
        .filter(|(_, ps)| !ps.is_empty())
        .collect();
    // The group is checked even when no partition exists, as in Kafka.
    broker.groups.load_shard_of(&req.group_id).await;
    let answered = match broker.groups.shard(&req.group_id) {
        Ok(shard) => {
            let deleted = shard.delete_offsets(&req.group_id, &topics, now_ms());
            shard.once_replicated(deleted).await
        }
        Err(e) => Err(e),
    };
    let answered = match answered {
        Ok(answered) => answered,
        Err(e) => return OffsetDeleteResponse::default().with_error_code(e.code()),
    };
    merge_codes(&mut codes, &image, answered);
    let topics = codes
        .into_iter()
        .map(|(name, ps)| {
            OffsetDeleteResponseTopic::default()
                .with_name(TopicName(text(name)))
                .with_partitions(
                    ps.into_iter()
                        .map(|(p, code)| {
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
