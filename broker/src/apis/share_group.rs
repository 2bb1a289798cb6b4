//! Share groups' coordinator APIs (KIP-932): ShareGroupHeartbeat v1,
//! ShareGroupDescribe v1, DescribeShareGroupOffsets v0-v1 (v1 with each
//! partition's lag, `share_lag`) and
//! AlterShareGroupOffsets v0. The membership is
//! `ottla_group_coordinator::share_group`; delivery is `apis::share_fetch`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::share_group_describe_response::{
    Assignment as DescribedAssignment, DescribedGroup, Member,
    TopicPartitions as DescribedPartitions,
};
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse, GroupId, ShareGroupDescribeRequest,
    ShareGroupDescribeResponse, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::features::{self, SHARE_VERSION};
use ottla_controller::{MetadataImage, TopicImage};
use ottla_group_coordinator::{ShareAssignment, ShareGroupSettings, ShareHeartbeat};
use ottla_share_coordinator::{StateKey, UNSET_START};

use super::group::{client_host, ALL_GROUP_OPERATIONS};
use super::share_lag::{self, Lags};
use super::share_persister::{self, Summary};
use crate::blocking::blocking;
use crate::broker::Broker;
use crate::replica::now_ms;
use ottla_storage::manager::TopicPartition;

/// The only assignor share groups have.
const SIMPLE_ASSIGNOR: &str = "simple";

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Why share groups are off, if they are: Kafka then answers their APIs
/// UNSUPPORTED_VERSION.
pub fn disabled(image: &MetadataImage) -> Option<String> {
    (features::level(image, SHARE_VERSION) < 1).then(|| {
        format!(
            "Share groups are disabled: {SHARE_VERSION} is 0 (kafka-features.sh upgrade --feature {SHARE_VERSION}=1 enables them)."
        )
    })
}

pub fn settings(broker: &Broker, image: &MetadataImage, group: &str) -> ShareGroupSettings {
    ShareGroupSettings::resolve(image, &broker.settings.static_configs, group)
}

pub fn heartbeat(
    broker: &Broker,
    client_id: &str,
    client_addr: IpAddr,
    req: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let image = broker.controller.image();
    let failed = |e: ResponseError, message: Option<String>| {
        ShareGroupHeartbeatResponse::default()
            .with_error_code(e.code())
            .with_error_message(message.map(text))
    };
    if let Some(why) = disabled(&image) {
        return failed(ResponseError::UnsupportedVersion, Some(why));
    }
    let request = ShareHeartbeat {
        group_id: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.map(|s| s.to_string()),
        topic_names: req
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|n| n.to_string()).collect()),
        client_id: client_id.to_string(),
        client_host: client_host(client_addr),
    };
    let limits = settings(broker, &image, &request.group_id).limits();
    let answer = broker
        .groups
        .shard_blocking(&request.group_id)
        .and_then(|shard| {
            let answer = shard.share_heartbeat(&request, limits, &image, now_ms());
            shard.once_replicated_blocking(answer)
        });
    match answer {
        Ok(a) => ShareGroupHeartbeatResponse::default()
            .with_member_id(Some(text(a.member_id)))
            .with_member_epoch(a.member_epoch)
            .with_heartbeat_interval_ms(a.heartbeat_interval_ms)
            .with_assignment(a.assignment.map(|asg| {
                Assignment::default().with_topic_partitions(
                    asg.into_iter()
                        .map(|(topic, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(topic)
                                .with_partitions(ps.into_iter().collect())
                        })
                        .collect(),
                )
            })),
        Err(ResponseError::GroupIdNotFound) => failed(
            ResponseError::GroupIdNotFound,
            Some(format!("Group {} is not a share group.", request.group_id)),
        ),
        Err(e) => failed(e, None),
    }
}

pub fn describe(broker: &Broker, req: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse {
    let image = broker.controller.image();
    let groups = req
        .group_ids
        .into_iter()
        .map(|id| {
            let mut d = describe_one(broker, &image, &id);
            if req.include_authorized_operations && d.error_code == 0 {
                d = d.with_authorized_operations(ALL_GROUP_OPERATIONS);
            }
            d.with_group_id(id)
        })
        .collect();
    ShareGroupDescribeResponse::default().with_groups(groups)
}

fn describe_one(broker: &Broker, image: &MetadataImage, id: &GroupId) -> DescribedGroup {
    let failed = |e: ResponseError, message: String| {
        DescribedGroup::default()
            .with_error_code(e.code())
            .with_error_message(Some(text(message)))
    };
    if let Some(why) = disabled(image) {
        return failed(ResponseError::UnsupportedVersion, why);
    }
    let shard = match broker.groups.shard_blocking(id) {
        Ok(s) => s,
        Err(e) => return DescribedGroup::default().with_error_code(e.code()),
    };
    let group = match shard.describe_share_group(id) {
        Ok(g) => g,
        Err(other_type) => {
            let why = if other_type {
                format!("Group {} is not a share group.", id.as_str())
            } else {
                format!("Group {} not found.", id.as_str())
            };
            return failed(ResponseError::GroupIdNotFound, why);
        }
    };
    let members = group
        .members
        .values()
        .map(|m| {
            Member::default()
                .with_member_id(text(m.member_id.clone()))
                .with_rack_id(m.rack_id.clone().map(text))
                .with_member_epoch(m.epoch)
                .with_client_id(text(m.client_id.clone()))
                .with_client_host(text(m.client_host.clone()))
                .with_subscribed_topic_names(
                    m.subscribed
                        .iter()
                        .map(|t| TopicName(text(t.clone())))
                        .collect(),
                )
                .with_assignment(described_assignment(image, &m.assignment))
        })
        .collect();
    DescribedGroup::default()
        .with_group_state(text(group.state().name()))
        .with_group_epoch(group.epoch)
        .with_assignment_epoch(group.assignment_epoch())
        .with_assignor_name(text(SIMPLE_ASSIGNOR))
        .with_members(members)
}

fn described_assignment(image: &MetadataImage, a: &ShareAssignment) -> DescribedAssignment {
    DescribedAssignment::default().with_topic_partitions(
        a.iter()
            .map(|(id, ps)| {
                let name = image
                    .topic_by_id(id)
                    .map_or(String::new(), |t| t.name.clone());
                DescribedPartitions::default()
                    .with_topic_id(*id)
                    .with_topic_name(TopicName(text(name)))
                    .with_partitions(ps.iter().copied().collect())
            })
            .collect(),
    )
}

/// DescribeShareGroupOffsets v0: each share partition's start offset, as
/// its state's coordinator has it (-1 where the group has none). With no
/// topics named, the partitions the group has share state in, as Kafka
/// lists its initialized ones.
/// The groups' start offsets, and each partition's lag for v1 (which
/// kafka-protocol's response has no field for).
pub async fn describe_offsets(
    broker: &Arc<Broker>,
    req: DescribeShareGroupOffsetsRequest,
) -> (DescribeShareGroupOffsetsResponse, Lags) {
    let image = broker.controller.image();
    let mut groups = Vec::with_capacity(req.groups.len());
    let mut lags = Lags::new();
    for g in req.groups {
        groups.push(describe_group_offsets(broker, &image, g, &mut lags).await);
    }
    (
        DescribeShareGroupOffsetsResponse::default().with_groups(groups),
        lags,
    )
}

async fn describe_group_offsets(
    broker: &Arc<Broker>,
    image: &MetadataImage,
    g: DescribeShareGroupOffsetsRequestGroup,
    lags: &mut Lags,
) -> DescribeShareGroupOffsetsResponseGroup {
    let answer =
        DescribeShareGroupOffsetsResponseGroup::default().with_group_id(g.group_id.clone());
    if let Some(why) = disabled(image) {
        return answer
            .with_error_code(ResponseError::UnsupportedVersion.code())
            .with_error_message(Some(text(why)));
    }
    let group = g.group_id.to_string();
    let wanted: Vec<(String, Option<Vec<i32>>)> = match g.topics {
        Some(topics) => topics
            .into_iter()
            .map(|t| (t.topic_name.to_string(), Some(t.partitions)))
            .collect(),
        None => {
            let id = group.clone();
            let described = blocking(broker, move |b| {
                b.groups
                    .shard_blocking(&id)
                    .map(|s| s.describe_share_group(&id))
            })
            .await;
            match described {
                Ok(Ok(Ok(g))) => g
                    .state_partitions
                    .iter()
                    .filter_map(|(id, t)| {
                        let name = &image.topic_by_id(id)?.name;
                        Some((name.clone(), Some(t.partitions.iter().copied().collect())))
                    })
                    .collect(),
                Ok(Ok(Err(_))) => {
                    return answer
                        .with_error_code(ResponseError::GroupIdNotFound.code())
                        .with_error_message(Some(text(format!("Group {group} not found."))))
                }
                Ok(Err(e)) => return answer.with_error_code(e.code()),
                Err(_) => return answer.with_error_code(ResponseError::UnknownServerError.code()),
            }
        }
    };
    // Every partition's start in one summary request per coordinator.
    let named: Vec<(String, Option<&TopicImage>, Vec<i32>)> = wanted
        .into_iter()
        .map(|(name, partitions)| {
            let topic = image.topic_by_name(&name);
            let ids = partitions.unwrap_or_else(|| {
                topic.map_or_else(Vec::new, |t| t.partitions.keys().copied().collect())
            });
            (name, topic, ids)
        })
        .collect();
    let keys: Vec<StateKey> = named
        .iter()
        .filter_map(|(_, topic, ids)| Some((topic.as_ref()?, ids)))
        .flat_map(|(t, ids)| {
            ids.iter()
                .filter(|p| t.partitions.contains_key(p))
                .map(|&partition| StateKey {
                    group: group.clone(),
                    topic_id: t.id,
                    partition,
                })
        })
        .collect();
    let ends = share_lag::high_watermarks(
        broker,
        image,
        keys.iter()
            .filter_map(|k| {
                let name = &image.topic_by_id(&k.topic_id)?.name;
                Some(TopicPartition::new(name.clone(), k.partition))
            })
            .collect(),
    )
    .await;
    let summaries: BTreeMap<(uuid::Uuid, i32), Result<Summary, ResponseError>> =
        share_persister::summaries(broker, &group, keys)
            .await
            .into_iter()
            .map(|(k, summary)| ((k.topic_id, k.partition), summary))
            .collect();
    let mut topics = Vec::with_capacity(named.len());
    for (name, topic, ids) in named {
        let described = ids
            .into_iter()
            .map(|partition| {
                let p = DescribeShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(partition)
                    .with_leader_epoch(-1);
                let Some(t) = topic else {
                    return p.with_error_code(ResponseError::UnknownTopicOrPartition.code());
                };
                let summary = match summaries.get(&(t.id, partition)) {
                    None => {
                        return p.with_error_code(ResponseError::UnknownTopicOrPartition.code())
                    }
                    Some(Err(e)) => return p.with_start_offset(-1).with_error_code(e.code()),
                    Some(Ok(summary)) => *summary,
                };
                let end = ends
                    .get(&TopicPartition::new(name.clone(), partition))
                    .copied();
                lags.insert(
                    (group.clone(), t.id, partition),
                    share_lag::lag(Some(summary), end),
                );
                p.with_start_offset(summary.start_offset)
            })
            .collect();
        topics.push(
            DescribeShareGroupOffsetsResponseTopic::default()
                .with_topic_name(TopicName(text(name)))
                .with_topic_id(topic.map_or(uuid::Uuid::nil(), |t| t.id))
                .with_partitions(described),
        );
    }
    answer.with_topics(topics)
}

/// Whether `group` may have its offsets changed: an empty share group, or
/// an unknown one where the change creates it (`Unknown::Allowed`), as in
/// Kafka; `doing` says what, for the message.
async fn check_empty(
    broker: &Arc<Broker>,
    group: &str,
    doing: &str,
    unknown: Unknown,
) -> Result<(), (ResponseError, Option<String>)> {
    let id = group.to_string();
    let found = blocking(broker, move |b| {
        b.groups
            .shard_blocking(&id)
            .map(|s| s.describe_share_group(&id))
    })
    .await;
    match found {
        Ok(Ok(Ok(g))) if !g.members.is_empty() => Err((
            ResponseError::NonEmptyGroup,
            Some(format!(
                "Share group {group} has members: stop them before {doing} its offsets."
            )),
        )),
        Ok(Ok(Err(true))) => Err((
            ResponseError::GroupIdNotFound,
            Some(format!("Group {group} is not a share group.")),
        )),
        Ok(Ok(Err(false))) if unknown == Unknown::Refused => Err((
            ResponseError::GroupIdNotFound,
            Some(format!("Group {group} not found.")),
        )),
        Ok(Err(e)) => Err((e, None)),
        Err(_) => Err((ResponseError::UnknownServerError, None)),
        Ok(Ok(_)) => Ok(()),
    }
}

/// What an offsets change does with a group id nobody uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unknown {
    /// The change creates the group (AlterShareGroupOffsets).
    Allowed,
    /// GROUP_ID_NOT_FOUND (DeleteShareGroupOffsets).
    Refused,
}

/// DeleteShareGroupOffsets v0 (`kafka-share-groups.sh --delete-offsets`):
/// each partition of the named topics forgets where the group was; the
/// next leader starts it by `share.auto.offset.reset`. Only an empty share
/// group, as in Kafka (an unknown one is GROUP_ID_NOT_FOUND); leaders
/// holding the old state are fenced by its new state epoch.
pub async fn delete_offsets(
    broker: &Arc<Broker>,
    req: DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let image = broker.controller.image();
    let failed = |e: ResponseError, message: Option<String>| {
        DeleteShareGroupOffsetsResponse::default()
            .with_error_code(e.code())
            .with_error_message(message.map(text))
    };
    if let Some(why) = disabled(&image) {
        return failed(ResponseError::UnsupportedVersion, Some(why));
    }
    let group = req.group_id.to_string();
    if let Err((error, message)) = check_empty(broker, &group, "deleting", Unknown::Refused).await {
        return failed(error, message);
    }
    // Every named topic's partitions start over unset, in one request per
    // coordinator; a topic whose partitions all did is forgotten by the group.
    let starts: Vec<(StateKey, i64)> = req
        .topics
        .iter()
        .filter_map(|t| image.topic_by_name(&t.topic_name))
        .flat_map(|tp| {
            tp.partitions.keys().map(|&partition| {
                let key = StateKey {
                    group: group.clone(),
                    topic_id: tp.id,
                    partition,
                };
                (key, UNSET_START)
            })
        })
        .collect();
    let mut by_topic: BTreeMap<uuid::Uuid, Result<(), ResponseError>> = BTreeMap::new();
    for (k, outcome) in share_persister::initialize(broker, &group, starts).await {
        let topic = by_topic.entry(k.topic_id).or_insert(Ok(()));
        *topic = topic.and(outcome);
    }
    let reset: Vec<uuid::Uuid> = by_topic
        .iter()
        .filter(|(_, outcome)| outcome.is_ok())
        .map(|(id, _)| *id)
        .collect();
    if let Err(e) = forget_state_topics(broker, &group, reset.clone()).await {
        for id in reset {
            by_topic.insert(id, Err(e));
        }
    }
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let topic = image.topic_by_name(&t.topic_name);
        let outcome = match topic {
            None => Err(ResponseError::UnknownTopicOrPartition),
            Some(tp) => by_topic.get(&tp.id).copied().unwrap_or(Ok(())),
        };
        topics.push(
            DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_name(t.topic_name)
                .with_topic_id(topic.map_or(uuid::Uuid::nil(), |tp| tp.id))
                .with_error_code(outcome.err().map_or(0, |e| e.code())),
        );
    }
    DeleteShareGroupOffsetsResponse::default().with_responses(topics)
}

/// AlterShareGroupOffsets v0 (`kafka-share-groups.sh --reset-offsets`):
/// each named partition's share state starts over at the given offset.
/// Only an empty (or unknown) group may be altered, as in Kafka; leaders
/// holding the old state are fenced by its new state epoch.
pub async fn alter_offsets(
    broker: &Arc<Broker>,
    req: AlterShareGroupOffsetsRequest,
) -> AlterShareGroupOffsetsResponse {
    let image = broker.controller.image();
    let failed = |e: ResponseError, message: Option<String>| {
        AlterShareGroupOffsetsResponse::default()
            .with_error_code(e.code())
            .with_error_message(message.map(text))
    };
    if let Some(why) = disabled(&image) {
        return failed(ResponseError::UnsupportedVersion, Some(why));
    }
    let group = req.group_id.to_string();
    if let Err((error, message)) = check_empty(broker, &group, "altering", Unknown::Allowed).await {
        return failed(error, message);
    }
    // Every valid partition starts over in one request per coordinator,
    // then the group records them all at once.
    let starts: Vec<(StateKey, i64)> = req
        .topics
        .iter()
        .filter_map(|t| Some((image.topic_by_name(&t.topic_name)?, t)))
        .flat_map(|(tp, t)| {
            t.partitions
                .iter()
                .filter(|p| tp.partitions.contains_key(&p.partition_index) && p.start_offset >= 0)
                .map(|p| {
                    let key = StateKey {
                        group: group.clone(),
                        topic_id: tp.id,
                        partition: p.partition_index,
                    };
                    (key, p.start_offset)
                })
        })
        .collect();
    let mut outcomes: BTreeMap<(uuid::Uuid, i32), Result<(), ResponseError>> =
        share_persister::initialize(broker, &group, starts)
            .await
            .into_iter()
            .map(|(k, outcome)| ((k.topic_id, k.partition), outcome))
            .collect();
    let mut started: BTreeMap<uuid::Uuid, Vec<i32>> = BTreeMap::new();
    for ((id, partition), outcome) in &outcomes {
        if outcome.is_ok() {
            started.entry(*id).or_default().push(*partition);
        }
    }
    let recorded: Vec<(uuid::Uuid, String, Vec<i32>)> = started
        .into_iter()
        .filter_map(|(id, ps)| Some((id, image.topic_by_id(&id)?.name.clone(), ps)))
        .collect();
    if let Err(e) = add_state_partitions(broker, &group, recorded.clone()).await {
        for (id, _, ps) in recorded {
            for p in ps {
                outcomes.insert((id, p), Err(e));
            }
        }
    }
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let topic = image.topic_by_name(&t.topic_name);
        let partitions = t
            .partitions
            .into_iter()
            .map(|p| {
                let outcome =
                    match topic.filter(|tp| tp.partitions.contains_key(&p.partition_index)) {
                        None => Err(ResponseError::UnknownTopicOrPartition),
                        Some(_) if p.start_offset < 0 => Err(ResponseError::InvalidRequest),
                        Some(tp) => outcomes
                            .get(&(tp.id, p.partition_index))
                            .copied()
                            .unwrap_or(Err(ResponseError::UnknownServerError)),
                    };
                AlterShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(outcome.err().map_or(0, |e| e.code()))
            })
            .collect();
        topics.push(
            AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_name(t.topic_name)
                .with_topic_id(topic.map_or(uuid::Uuid::nil(), |tp| tp.id))
                .with_partitions(partitions),
        );
    }
    AlterShareGroupOffsetsResponse::default().with_responses(topics)
}

/// Records in the group that the share coordinator holds the state of
/// these partitions (an offset reset wrote it), topic by topic.
async fn add_state_partitions(
    broker: &Arc<Broker>,
    group: &str,
    partitions: Vec<(uuid::Uuid, String, Vec<i32>)>,
) -> Result<(), ResponseError> {
    if partitions.is_empty() {
        return Ok(());
    }
    let group = group.to_string();
    let answer = blocking(broker, move |b| {
        let shard = b.groups.shard_blocking(&group)?;
        let now = now_ms();
        let added = partitions.iter().try_for_each(|(id, name, ps)| {
            shard.add_share_state_partitions(&group, *id, name, ps, now)
        });
        shard.once_replicated_blocking(added)
    })
    .await;
    answer.map_err(|_| ResponseError::UnknownServerError)?
}

/// Forgets in the group the topics whose share state was deleted.
async fn forget_state_topics(
    broker: &Arc<Broker>,
    group: &str,
    topic_ids: Vec<uuid::Uuid>,
) -> Result<(), ResponseError> {
    if topic_ids.is_empty() {
        return Ok(());
    }
    let group = group.to_string();
    let answer = blocking(broker, move |b| {
        let shard = b.groups.shard_blocking(&group)?;
        let removed = shard.remove_share_state_topics(&group, &topic_ids, now_ms());
        shard.once_replicated_blocking(removed)
    })
    .await;
    answer.map_err(|_| ResponseError::UnknownServerError)?
}

/// Before DeleteGroups deletes share group `id`: the share state of every
/// partition it has state in is deleted at its coordinator, as Kafka's
/// group coordinator deletes it first. Ok without doing anything when the
/// id is no empty share group (DeleteGroups then answers for it).
pub async fn delete_state_before_deletion(
    broker: &Arc<Broker>,
    id: &str,
) -> Result<(), ResponseError> {
    let group = id.to_string();
    let described = blocking(broker, move |b| {
        b.groups
            .shard_blocking(&group)
            .map(|s| s.describe_share_group(&group))
    })
    .await
    .map_err(|_| ResponseError::UnknownServerError)?;
    let Ok(Ok(g)) = described else {
        return Ok(());
    };
    if !g.members.is_empty() {
        return Ok(());
    }
    let keys: Vec<StateKey> = g
        .state_partitions
        .iter()
        .flat_map(|(topic_id, t)| {
            t.partitions.iter().map(move |&partition| StateKey {
                group: id.to_string(),
                topic_id: *topic_id,
                partition,
            })
        })
        .collect();
    share_persister::delete(broker, id, keys).await
}
