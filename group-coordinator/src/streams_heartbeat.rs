//! StreamsGroupHeartbeat (KIP-1071) as Kafka 4.x's group coordinator serves
//! it: join with the topology, the group epoch bumped on any change of
//! members, topology or topics, a new target assignment per group epoch,
//! and each member reconciled towards its target. Every change is a record,
//! applied to a copy of the group as it is made, so the copy is what
//! replaying the records gives; the shard appends them, then keeps the
//! copy.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use ottla_protocol::streams::heartbeat::{
    EndpointToPartitions, Status, StatusCode, StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse, TopicPartition,
};
use ottla_protocol::streams::records::{
    StreamsGroupMemberMetadataValue, StreamsGroupMetadataValue,
};
use ottla_protocol::streams::Topology;
use tracing::info;

use super::consumer_group::metadata_hash;
use super::consumer_member::LEAVE_STATIC_EPOCH;
use super::streams_assignor::{assign, AssignorMember};
use super::streams_config::StreamsGroupSettings;
use super::streams_group::StreamsGroup;
use super::streams_member::{
    intersect, task_ids, tasks_of, CurrentAssignment, MemberState, StreamsMember, TaskOffsets,
    TaskRoles,
};
use super::streams_reconcile::{reconcile, Holdings};
use super::streams_records::StreamsRecord;
use super::streams_topology::{configure, ConfiguredTopology, InternalTopic};

/// How often members report their task offsets when they change (Kafka's
/// default for its internal `group.streams.task.offset.interval.ms`).
const TASK_OFFSET_INTERVAL_MS: i32 = 60_000;

pub struct StreamsHeartbeat {
    pub request: StreamsGroupHeartbeatRequest,
    /// The request's version: v1 members also hear MISSING_CLIENT_TAGS.
    pub api_version: i16,
    pub client_id: String,
    pub client_host: String,
    pub settings: StreamsGroupSettings,
}

/// An error code and the message Kafka gives with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsError {
    pub error: ResponseError,
    pub message: Option<String>,
}

impl StreamsError {
    fn new(error: ResponseError, message: impl Into<String>) -> Self {
        Self {
            error,
            message: Some(message.into()),
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::new(ResponseError::InvalidRequest, message)
    }
}

impl From<ResponseError> for StreamsError {
    fn from(error: ResponseError) -> Self {
        Self {
            error,
            message: None,
        }
    }
}

/// What a heartbeat changes and answers.
pub struct StreamsDecision {
    pub group: StreamsGroup,
    pub records: Vec<StreamsRecord>,
    pub response: StreamsGroupHeartbeatResponse,
    /// Internal topics to ask the controller for.
    pub to_create: Vec<InternalTopic>,
}

/// The request checks Kafka makes before the coordinator sees it.
pub fn validate(req: &StreamsGroupHeartbeatRequest) -> Result<(), StreamsError> {
    let blank = |s: &str| s.trim().is_empty();
    if let Some(t) = &req.topology {
        if t.subtopologies
            .iter()
            .any(|s| !s.source_topic_regex.is_empty())
        {
            return Err(StreamsError::invalid(
                "Regular expressions for source topics are not supported yet.",
            ));
        }
    }
    if blank(&req.member_id) {
        return Err(StreamsError::invalid("MemberId can't be empty."));
    }
    if blank(&req.group_id) {
        return Err(StreamsError::invalid("GroupId can't be empty."));
    }
    if req.instance_id.as_deref().is_some_and(blank) {
        return Err(StreamsError::invalid("InstanceId can't be empty."));
    }
    if req.rack_id.as_deref().is_some_and(blank) {
        return Err(StreamsError::invalid("RackId can't be empty."));
    }
    match req.member_epoch {
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return Err(StreamsError::invalid(
                    "RebalanceTimeoutMs must be provided in first request.",
                ));
            }
            for (name, tasks) in [
                ("ActiveTasks", &req.active_tasks),
                ("StandbyTasks", &req.standby_tasks),
                ("WarmupTasks", &req.warmup_tasks),
            ] {
                if tasks.as_ref().is_none_or(|t| !t.is_empty()) {
                    return Err(StreamsError::invalid(format!(
                        "{name} must be empty when (re-)joining."
                    )));
                }
            }
            let Some(topology) = &req.topology else {
                return Err(StreamsError::invalid(
                    "Topology must be non-null when (re-)joining.",
                ));
            };
            for t in topology
                .subtopologies
                .iter()
                .flat_map(|s| &s.state_changelog_topics)
            {
                if t.partitions != 0 {
                    return Err(StreamsError::new(
                        ResponseError::StreamsInvalidTopology,
                        format!(
                            "Changelog topic {} must have an undefined partition count, but it is set to {}.",
                            t.name, t.partitions
                        ),
                    ));
                }
            }
        }
        LEAVE_STATIC_EPOCH if req.instance_id.is_none() => {
            return Err(StreamsError::invalid("InstanceId can't be null."))
        }
        e if e < LEAVE_STATIC_EPOCH => {
            return Err(StreamsError::invalid(format!(
                "MemberEpoch is {e}, but must be greater than or equal to -2."
            )))
        }
        _ => {}
    }
    let lists = [&req.active_tasks, &req.standby_tasks, &req.warmup_tasks];
    if lists.iter().any(|l| l.is_some()) && lists.iter().any(|l| l.is_none()) {
        return Err(StreamsError::invalid(
            "If one task-type is non-null, all must be non-null.",
        ));
    }
    if req.member_epoch != 0 && req.topology.is_some() {
        return Err(StreamsError::invalid(
            "Topology can only be provided when (re-)joining.",
        ));
    }
    Ok(())
}

/// Records and the group copy they were applied to.
struct Changes {
    group: StreamsGroup,
    group_id: String,
    records: Vec<StreamsRecord>,
}

impl Changes {
    fn emit(&mut self, record: StreamsRecord) {
        self.group.apply(&record);
        self.records.push(record);
    }

    fn bump(&mut self, hash: i64, validated_epoch: i32) {
        let mut metadata = StreamsGroupMetadataValue {
            epoch: self.group.epoch() + 1,
            metadata_hash: hash,
            ..self.group.metadata.clone()
        };
        metadata.set_validated_topology_epoch(validated_epoch);
        self.emit(StreamsRecord::GroupMetadata {
            group: self.group_id.clone(),
            value: Some(metadata),
        });
    }

    /// A member's records removed and the group epoch bumped (a leave, or
    /// a fence by a timer).
    fn remove_member(&mut self, member: &str) {
        self.remove_member_records(member);
        let (hash, validated) = (
            self.group.metadata.metadata_hash,
            self.group.metadata.validated_topology_epoch(),
        );
        self.bump(hash, validated);
    }

    /// Tombstones for a member's records, in the order Kafka replays them.
    fn remove_member_records(&mut self, member: &str) {
        for record in [
            StreamsRecord::CurrentAssignment {
                group: self.group_id.clone(),
                member: member.to_string(),
                value: None,
            },
            StreamsRecord::TargetAssignmentMember {
                group: self.group_id.clone(),
                member: member.to_string(),
                value: None,
            },
            StreamsRecord::MemberMetadata {
                group: self.group_id.clone(),
                member: member.to_string(),
                value: None,
            },
        ] {
            self.emit(record);
        }
    }
}

impl Changes {
    /// A static member rejoining under a new member id takes the place of
    /// the one that left temporarily: the old id's records go, and the new
    /// id gets its metadata, target and tasks (at epoch 0, reconciled next).
    fn replace_member(&mut self, old: &str, new: &str, member: &StreamsMember) {
        let target = self.group.target(old);
        self.remove_member_records(old);
        let group = &self.group_id;
        for record in [
            StreamsRecord::MemberMetadata {
                group: group.clone(),
                member: new.to_string(),
                value: Some(member.metadata.clone()),
            },
            StreamsRecord::TargetAssignmentMember {
                group: group.clone(),
                member: new.to_string(),
                value: Some(target),
            },
            StreamsRecord::CurrentAssignment {
                group: group.clone(),
                member: new.to_string(),
                value: Some(member.current.clone()),
            },
        ] {
            self.emit(record);
        }
        info!(group = %self.group_id, member = %new, replaced = %old, "static member rejoined the streams group under a new member id");
    }
}

/// The records that remove `member` from `group` (leave or fence), and the
/// group after them.
pub fn remove_member(
    group: &StreamsGroup,
    group_id: &str,
    member: &str,
) -> (StreamsGroup, Vec<StreamsRecord>) {
    let mut changes = Changes {
        group: group.clone(),
        group_id: group_id.to_string(),
        records: Vec::new(),
    };
    changes.remove_member(member);
    (changes.group, changes.records)
}

pub fn heartbeat(
    existing: Option<&StreamsGroup>,
    hb: &StreamsHeartbeat,
    image: &MetadataImage,
    now: i64,
) -> Result<StreamsDecision, StreamsError> {
    let req = &hb.request;
    let group_id = req.group_id.clone();
    let joining = req.member_epoch == 0;
    let group = match existing {
        Some(g) => g.clone(),
        None if joining => StreamsGroup::default(),
        None => {
            return Err(StreamsError::new(
                ResponseError::GroupIdNotFound,
                format!("Streams group {group_id} not found."),
            ))
        }
    };
    if req.member_epoch < 0 {
        return leave(group, req);
    }
    let Found {
        mut member,
        known,
        replaced,
    } = find_member(&group, req)?;
    let max_size = hb.settings.max_size;
    if !known && group.members.len() >= max_size {
        return Err(StreamsError::new(
            ResponseError::GroupMaxSizeReached,
            format!("The streams group has reached its maximum capacity of {max_size} members."),
        ));
    }
    let owned = owned_tasks(req);
    if !joining {
        check_epoch(&member.current, req.member_epoch, owned.as_ref())?;
    }
    // A replaced member's reports stay with its old id, as Kafka's.
    let mut task_offsets = match replaced {
        Some(_) => TaskOffsets::default(),
        None => member.task_offsets.clone(),
    };
    task_offsets
        .update(req.task_offsets.as_deref(), req.task_end_offsets.as_deref())
        .map_err(StreamsError::invalid)?;
    let group_was_empty = group.members.is_empty();
    let mut changes = Changes {
        group,
        group_id: group_id.clone(),
        records: Vec::new(),
    };
    if let Some(old) = &replaced {
        changes.replace_member(old, &req.member_id, &member);
    }

    // The member's metadata; the group epoch moves only for what the
    // assignment depends on.
    let metadata = updated_metadata(&member.metadata, hb);
    let mut bump = !known || assignment_inputs_changed(&member.metadata, &metadata);
    if !known || metadata != member.metadata {
        changes.emit(StreamsRecord::MemberMetadata {
            group: group_id.clone(),
            member: req.member_id.clone(),
            value: Some(metadata.clone()),
        });
        member.metadata = metadata;
    }

    // The topology: set once, by the first member to join.
    if let Some(topology) = req.topology.as_ref().filter(|_| joining) {
        match &changes.group.topology {
            None => {
                changes.emit(StreamsRecord::Topology {
                    group: group_id.clone(),
                    value: Some(topology.clone()),
                });
                bump = true;
            }
            Some(current) if same_topology(current, topology) => {}
            Some(current) if topology.epoch < current.epoch => {}
            Some(_) => {
                return Err(StreamsError::invalid(
                    "Topology updates are not supported yet.",
                ))
            }
        }
    }
    let Some(topology) = changes.group.topology.clone() else {
        return Err(StreamsError::invalid(
            "The group has no topology: rejoin with one.",
        ));
    };
    let configured = configure(&topology, image)
        .map_err(|e| StreamsError::new(ResponseError::StreamsInvalidTopology, e.0))?;
    if configured.is_ready() {
        check_owned_tasks(req, &configured.tasks)?;
    }
    // The assignor reads what the member reports in this very heartbeat.
    if let Some(m) = changes.group.members.get_mut(&req.member_id) {
        m.task_offsets = task_offsets;
    }
    let hash = metadata_hash(&configured.required_topics, image);
    let validated = if configured.is_ready() {
        topology.epoch
    } else {
        -1
    };
    if hash != changes.group.metadata.metadata_hash
        || validated != changes.group.metadata.validated_topology_epoch()
    {
        bump = true;
    }
    // A group forming waits for more members before its first real
    // assignment (Kafka's initial rebalance delay): until then its targets
    // are empty, at the group's epoch, so members have an epoch to
    // heartbeat with. The first heartbeat after the delay bumps the epoch
    // for the real one.
    let delay = hb.settings.initial_rebalance_delay_ms;
    if bump && group_was_empty && delay > 0 && changes.group.assignment_delayed_until.is_none() {
        changes.group.assignment_delayed_until = Some(now + delay);
    }
    let delayed = match changes.group.assignment_delayed_until {
        Some(until) if now < until => true,
        Some(_) => {
            changes.group.assignment_delayed_until = None;
            bump = true;
            false
        }
        None => false,
    };
    if bump {
        changes.bump(hash, validated);
    }

    // A new target assignment for the new group epoch.
    if changes.group.epoch() > changes.group.assignment_epoch {
        new_targets(
            &mut changes,
            &configured,
            hb.settings.num_standby_replicas,
            delayed,
        );
    }

    // The member towards its target.
    let group = &changes.group;
    let target = group.target(&req.member_id);
    // A joining member owns nothing.
    let owned = if joining {
        Some(TaskRoles::default())
    } else {
        owned
    };
    let next = reconcile(
        &member.current,
        &target,
        group.assignment_epoch,
        owned.as_ref(),
        || Holdings::of(&group.members, &req.member_id, &member.metadata.process_id),
    );
    let tasks_changed = next.assigned != member.current.assigned;
    if next != member.current || !known {
        changes.emit(StreamsRecord::CurrentAssignment {
            group: group_id.clone(),
            member: req.member_id.clone(),
            value: Some(next.clone()),
        });
    }
    let mut group = changes.group;
    let m = group
        .members
        .get_mut(&req.member_id)
        .expect("the member was written");
    m.session_deadline = now + hb.settings.session_timeout_ms;
    m.rebalance_deadline = (next.state == MemberState::UnrevokedTasks).then(|| {
        m.rebalance_deadline
            .unwrap_or(now + i64::from(m.metadata.rebalance_timeout_ms.max(0)))
    });
    if req.shutdown_application {
        group.shutdown_requested_by = Some(req.member_id.clone());
    }
    let send_tasks = joining || tasks_changed;
    if send_tasks && m.metadata.user_endpoint.is_some() {
        group.endpoint_epoch += 1;
    }
    let mut status = statuses(&group, &configured, &topology, &member, delayed);
    if hb.api_version >= 1 {
        status.extend(missing_client_tags(
            &member,
            &hb.settings.rack_aware_assignment_tags,
        ));
    }
    let endpoints = (req.endpoint_information_epoch != group.endpoint_epoch)
        .then(|| endpoint_partitions(&group, &topology, image, &req.member_id));
    let response = response(&group, hb, &next, send_tasks, status, endpoints);
    Ok(StreamsDecision {
        to_create: configured.to_create.clone(),
        group,
        records: changes.records,
        response,
    })
}

/// The member a heartbeat is for.
struct Found {
    /// As it stands (a new member: defaults; a replacement: the member it
    /// replaces, under the new id at epoch 0).
    member: StreamsMember,
    /// Whether the group has it already (under this or a replaced id).
    known: bool,
    /// The id of the static member it replaces.
    replaced: Option<String>,
}

impl Found {
    fn new_member() -> Self {
        Self {
            member: StreamsMember {
                metadata: StreamsGroupMemberMetadataValue {
                    topology_epoch: -1,
                    ..Default::default()
                },
                ..Default::default()
            },
            known: false,
            replaced: None,
        }
    }

    fn existing(member: &StreamsMember) -> Self {
        Self {
            member: member.clone(),
            known: true,
            replaced: None,
        }
    }
}

/// Finds the member by its instance id (static members) or member id. A
/// static member joining takes the place of the member holding its
/// instance id if that one left temporarily (epoch -2); while the holder
/// is still in the group the instance id is not released.
fn find_member(
    group: &StreamsGroup,
    req: &StreamsGroupHeartbeatRequest,
) -> Result<Found, StreamsError> {
    let joining = req.member_epoch == 0;
    let by_member_id = || match group.members.get(&req.member_id) {
        Some(m) => Ok(Found::existing(m)),
        None if joining => Ok(Found::new_member()),
        None => Err(unknown_member(req)),
    };
    let Some(instance) = req.instance_id.as_deref() else {
        return by_member_id();
    };
    match group.static_member(instance) {
        None if joining => by_member_id(),
        None => Err(unknown_instance(instance)),
        Some((owner, holder)) if joining => {
            if holder.current.epoch != LEAVE_STATIC_EPOCH {
                return Err(StreamsError::new(
                    ResponseError::UnreleasedInstanceId,
                    format!(
                        "Static member {} with instance id {instance} cannot join the group because the instance id is owned by {owner} member.",
                        req.member_id
                    ),
                ));
            }
            let mut member = holder.clone();
            member.current.epoch = 0;
            member.current.previous_epoch = 0;
            member.current.revoking = TaskRoles::default();
            Ok(Found {
                member,
                known: true,
                replaced: Some(owner.clone()),
            })
        }
        Some((owner, _)) if *owner != req.member_id => Err(fenced_instance(req, instance, owner)),
        Some((_, holder)) => Ok(Found::existing(holder)),
    }
}

fn unknown_member(req: &StreamsGroupHeartbeatRequest) -> StreamsError {
    StreamsError::new(
        ResponseError::UnknownMemberId,
        format!(
            "Member {} is not a member of group {}.",
            req.member_id, req.group_id
        ),
    )
}

fn unknown_instance(instance: &str) -> StreamsError {
    StreamsError::new(
        ResponseError::UnknownMemberId,
        format!("Instance id {instance} is unknown."),
    )
}

fn fenced_instance(
    req: &StreamsGroupHeartbeatRequest,
    instance: &str,
    owner: &str,
) -> StreamsError {
    StreamsError::new(
        ResponseError::FencedInstanceId,
        format!(
            "Static member {} with instance id {instance} was fenced by member {owner}.",
            req.member_id
        ),
    )
}

/// Leaving: epoch -1 removes the member and bumps the group epoch, so the
/// others take over its tasks; -2 (a static member restarting) keeps its
/// tasks for its instance id until its session runs out.
fn leave(
    group: StreamsGroup,
    req: &StreamsGroupHeartbeatRequest,
) -> Result<StreamsDecision, StreamsError> {
    let member_id = match req.instance_id.as_deref() {
        None if group.members.contains_key(&req.member_id) => req.member_id.clone(),
        None => return Err(unknown_member(req)),
        Some(instance) => match group.static_member(instance) {
            None => return Err(unknown_instance(instance)),
            Some((owner, _)) if *owner != req.member_id => {
                return Err(fenced_instance(req, instance, owner))
            }
            Some((owner, _)) => owner.clone(),
        },
    };
    let mut changes = Changes {
        group,
        group_id: req.group_id.clone(),
        records: Vec::new(),
    };
    if req.shutdown_application {
        changes.group.shutdown_requested_by = Some(member_id.clone());
    }
    if req.member_epoch == LEAVE_STATIC_EPOCH {
        let current = CurrentAssignment {
            epoch: LEAVE_STATIC_EPOCH,
            revoking: TaskRoles::default(),
            ..changes.group.members[&member_id].current.clone()
        };
        changes.emit(StreamsRecord::CurrentAssignment {
            group: req.group_id.clone(),
            member: member_id.clone(),
            value: Some(current),
        });
        // Its session timer still runs; it has nothing left to revoke.
        if let Some(m) = changes.group.members.get_mut(&member_id) {
            m.rebalance_deadline = None;
        }
        info!(group = %req.group_id, member = %member_id, "static member temporarily left the streams group");
    } else {
        changes.remove_member(&member_id);
        info!(group = %req.group_id, member = %member_id, "member left the streams group");
    }
    Ok(StreamsDecision {
        group: changes.group,
        records: changes.records,
        response: StreamsGroupHeartbeatResponse {
            member_id: req.member_id.clone(),
            member_epoch: req.member_epoch,
            status: Some(Vec::new()),
            ..Default::default()
        },
        to_create: Vec::new(),
    })
}

/// Whether a member's change moves the group epoch: only what the task
/// assignment reads does (as Kafka's epoch-relevant member configs).
fn assignment_inputs_changed(
    old: &StreamsGroupMemberMetadataValue,
    new: &StreamsGroupMemberMetadataValue,
) -> bool {
    old.topology_epoch != new.topology_epoch
        || old.rack_id != new.rack_id
        || old.client_tags != new.client_tags
        || old.process_id != new.process_id
}

/// Tasks the member says it owns must be tasks of the topology.
fn check_owned_tasks(
    req: &StreamsGroupHeartbeatRequest,
    tasks: &BTreeMap<String, i32>,
) -> Result<(), StreamsError> {
    let lists = [&req.active_tasks, &req.standby_tasks, &req.warmup_tasks];
    for t in lists.into_iter().flatten().flatten() {
        let Some(&count) = tasks.get(&t.subtopology_id) else {
            return Err(StreamsError::invalid(format!(
                "Subtopology {} does not exist in the topology.",
                t.subtopology_id
            )));
        };
        if let Some(p) = t.partitions.iter().find(|&&p| p < 0 || p >= count) {
            return Err(StreamsError::invalid(format!(
                "Task {p} for subtopology {} is invalid. Number of tasks for this subtopology: {count}",
                t.subtopology_id
            )));
        }
    }
    Ok(())
}

/// The tasks the request says the member owns (None: unchanged).
fn owned_tasks(req: &StreamsGroupHeartbeatRequest) -> Option<TaskRoles> {
    Some(TaskRoles {
        active: tasks_of(req.active_tasks.as_ref()?),
        standby: tasks_of(req.standby_tasks.as_ref()?),
        warmup: tasks_of(req.warmup_tasks.as_ref()?),
    })
}

/// A member at another epoch is fenced, unless it missed the answer that
/// moved it on and owns nothing it was not given.
fn check_epoch(
    current: &CurrentAssignment,
    epoch: i32,
    owned: Option<&TaskRoles>,
) -> Result<(), StreamsError> {
    if epoch == current.epoch {
        return Ok(());
    }
    let lost_answer = epoch < current.epoch
        && epoch == current.previous_epoch
        && owned.is_some_and(|o| o.zip(&current.assigned, intersect) == *o);
    if lost_answer {
        Ok(())
    } else {
        Err(StreamsError::new(
            ResponseError::FencedMemberEpoch,
            format!(
                "The streams group member has a invalid member epoch {epoch}, the expected member epoch is {}.",
                current.epoch
            ),
        ))
    }
}

/// Null fields of the request mean "unchanged".
fn updated_metadata(
    stored: &StreamsGroupMemberMetadataValue,
    hb: &StreamsHeartbeat,
) -> StreamsGroupMemberMetadataValue {
    let req = &hb.request;
    let mut m = stored.clone();
    if req.instance_id.is_some() {
        m.instance_id.clone_from(&req.instance_id);
    }
    if req.rack_id.is_some() {
        m.rack_id = req.rack_id.clone();
    }
    if req.rebalance_timeout_ms != -1 {
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if let Some(t) = req.topology.as_ref().filter(|_| req.member_epoch == 0) {
        m.topology_epoch = t.epoch;
    }
    m.client_id = hb.client_id.clone();
    m.client_host = hb.client_host.clone();
    if let Some(p) = &req.process_id {
        m.process_id = p.clone();
    }
    if req.user_endpoint.is_some() {
        m.user_endpoint = req.user_endpoint.clone();
    }
    if let Some(tags) = &req.client_tags {
        let mut tags = tags.clone();
        tags.sort_by(|a, b| a.key.cmp(&b.key));
        m.client_tags = tags;
    }
    m
}

/// Topologies compared by content (unknown tagged fields aside).
fn same_topology(a: &Topology, b: &Topology) -> bool {
    a.epoch == b.epoch && a.subtopologies == b.subtopologies
}

/// The target assignment for the group epoch: empty while the topology is
/// not ready or the first assignment is `delayed`.
fn new_targets(
    changes: &mut Changes,
    configured: &ConfiguredTopology,
    standbys: usize,
    delayed: bool,
) {
    let group = &changes.group;
    let members: BTreeMap<String, AssignorMember> = group
        .members
        .iter()
        .map(|(id, m)| {
            let member = AssignorMember {
                process_id: &m.metadata.process_id,
                previous: group.target(id),
                state: &m.task_offsets.offsets,
            };
            (id.clone(), member)
        })
        .collect();
    let targets = if configured.is_ready() && !delayed {
        assign(&members, &configured.tasks, &configured.stateful, standbys)
    } else {
        members
            .keys()
            .map(|id| (id.clone(), TaskRoles::default()))
            .collect()
    };
    let changed: Vec<(String, TaskRoles)> = targets
        .into_iter()
        .filter(|(id, t)| group.targets.get(id) != Some(t))
        .collect();
    let epoch = group.epoch();
    for (member, target) in changed {
        changes.emit(StreamsRecord::TargetAssignmentMember {
            group: changes.group_id.clone(),
            member,
            value: Some(target),
        });
    }
    changes.emit(StreamsRecord::TargetAssignmentMetadata {
        group: changes.group_id.clone(),
        value: Some(epoch),
    });
}

/// The heartbeat's statuses: the member's stale topology, the topology's
/// own (missing or mispartitioned topics), a requested shutdown, a delayed
/// first assignment.
fn statuses(
    group: &StreamsGroup,
    configured: &ConfiguredTopology,
    topology: &Topology,
    member: &StreamsMember,
    delayed: bool,
) -> Vec<Status> {
    let mut status = Vec::new();
    if member.metadata.topology_epoch < topology.epoch {
        status.push(Status::new(
            StatusCode::StaleTopology,
            format!(
                "The member's topology epoch {} is behind the group's topology epoch {}.",
                member.metadata.topology_epoch, topology.epoch
            ),
        ));
    }
    status.extend(configured.statuses.iter().cloned());
    if let Some(asker) = &group.shutdown_requested_by {
        status.push(Status::new(
            StatusCode::ShutdownApplication,
            format!("Streams group member {asker} encountered a fatal error and requested a shutdown for the entire application."),
        ));
    }
    if delayed {
        status.push(Status::new(
            StatusCode::AssignmentDelayed,
            "Assignment delayed due to the configured initial rebalance delay.",
        ));
    }
    status
}

/// MISSING_CLIENT_TAGS, if the member lacks client tags the group's
/// rack-aware standby assignment spreads over (in Kafka's words).
fn missing_client_tags(member: &StreamsMember, required: &[String]) -> Option<Status> {
    let missing: Vec<&str> = required
        .iter()
        .filter(|tag| !member.metadata.client_tags.iter().any(|t| &t.key == *tag))
        .map(String::as_str)
        .collect();
    (!missing.is_empty()).then(|| {
        Status::new(
            StatusCode::MissingClientTags,
            format!(
                "Missing required client tags for rack-aware standby assignment: [{}]. Configure them via 'client.tag.<tagKey>' in your Streams config.",
                missing.join(", ")
            ),
        )
    })
}

fn response(
    group: &StreamsGroup,
    hb: &StreamsHeartbeat,
    next: &CurrentAssignment,
    send_tasks: bool,
    status: Vec<Status>,
    endpoints: Option<Vec<EndpointToPartitions>>,
) -> StreamsGroupHeartbeatResponse {
    let tasks = |f: fn(&TaskRoles) -> &super::streams_member::Tasks| {
        send_tasks.then(|| task_ids(f(&next.assigned)))
    };
    StreamsGroupHeartbeatResponse {
        member_id: hb.request.member_id.clone(),
        member_epoch: next.epoch,
        heartbeat_interval_ms: hb.settings.heartbeat_interval_ms,
        task_offset_interval_ms: TASK_OFFSET_INTERVAL_MS,
        acceptable_recovery_lag: hb.settings.acceptable_recovery_lag,
        acceptable_recovery_lag_legacy: hb.settings.acceptable_recovery_lag.min(i64::from(i32::MAX))
            as i32,
        status: Some(status),
        active_tasks: tasks(|r| &r.active),
        standby_tasks: tasks(|r| &r.standby),
        warmup_tasks: tasks(|r| &r.warmup),
        endpoint_information_epoch: group.endpoint_epoch,
        partitions_by_user_endpoint: endpoints,
        ..Default::default()
    }
}

/// For Interactive Queries: each member with an endpoint and the input
/// partitions of the tasks it holds (the asking member last, as Kafka).
fn endpoint_partitions(
    group: &StreamsGroup,
    topology: &Topology,
    image: &MetadataImage,
    asker: &str,
) -> Vec<EndpointToPartitions> {
    let partitions = |tasks: &super::streams_member::Tasks| -> Vec<TopicPartition> {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for s in &topology.subtopologies {
            let Some(ps) = tasks.get(&s.subtopology_id) else {
                continue;
            };
            let topics = s
                .source_topics
                .iter()
                .chain(s.repartition_source_topics.iter().map(|t| &t.name));
            for t in topics {
                // A task numbered past a topic's partitions reads nothing
                // of it (a subtopology's sources may differ in size).
                let count = image.topic_by_name(t).map_or(0, |t| t.partitions.len());
                let own = ps.iter().copied().filter(|&p| (p as usize) < count);
                by_topic.entry(t).or_default().extend(own);
            }
        }
        by_topic
            .into_iter()
            .map(|(topic, mut ps)| {
                ps.sort_unstable();
                ps.dedup();
                TopicPartition {
                    topic: topic.to_string(),
                    partitions: ps,
                    ..Default::default()
                }
            })
            .collect()
    };
    let mut members: Vec<(&String, &StreamsMember)> = group.members.iter().collect();
    members.sort_by_key(|(id, _)| id.as_str() == asker);
    members
        .into_iter()
        .filter_map(|(_, m)| {
            let endpoint = m.metadata.user_endpoint.clone()?;
            let assigned = &m.current.assigned;
            Some(EndpointToPartitions {
                user_endpoint: endpoint,
                active_partitions: partitions(&assigned.active),
                standby_partitions: partitions(&super::streams_member::union(
                    &assigned.standby,
                    &assigned.warmup,
                )),
                ..Default::default()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use ottla_protocol::streams::{Subtopology, TaskOffset, TopicInfo};

    use super::*;
    use crate::streams_group::{StreamsGroupState, StreamsGroups};
    use crate::streams_member::{contains, Tasks};
    use crate::test_images::image_with;

    const GROUP: &str = "app";

    fn topology() -> Topology {
        let info = |name: &str| TopicInfo {
            name: name.into(),
            ..Default::default()
        };
        Topology {
            epoch: 1,
            subtopologies: vec![
                Subtopology {
                    subtopology_id: "0".into(),
                    source_topics: vec!["in".into()],
                    repartition_sink_topics: vec!["app-rep".into()],
                    ..Default::default()
                },
                Subtopology {
                    subtopology_id: "1".into(),
                    repartition_source_topics: vec![info("app-rep")],
                    state_changelog_topics: vec![info("app-store-changelog")],
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    }

    fn join(member: &str, process: &str) -> StreamsHeartbeat {
        StreamsHeartbeat {
            request: StreamsGroupHeartbeatRequest {
                group_id: GROUP.into(),
                member_id: member.into(),
                member_epoch: 0,
                rebalance_timeout_ms: 30_000,
                topology: Some(topology()),
                active_tasks: Some(Vec::new()),
                standby_tasks: Some(Vec::new()),
                warmup_tasks: Some(Vec::new()),
                process_id: Some(process.into()),
                ..Default::default()
            },
            api_version: 1,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            // Assign at once; the delay has its own test.
            settings: StreamsGroupSettings {
                initial_rebalance_delay_ms: 0,
                ..Default::default()
            },
        }
    }

    /// A later heartbeat at `epoch`, owning `active`.
    fn beat(member: &str, epoch: i32, active: &Tasks) -> StreamsHeartbeat {
        let mut hb = join(member, "");
        hb.request.member_epoch = epoch;
        hb.request.topology = None;
        hb.request.process_id = None;
        hb.request.rebalance_timeout_ms = -1;
        hb.request.active_tasks = Some(task_ids(active));
        hb
    }

    struct Group {
        state: Option<StreamsGroup>,
        log: Vec<StreamsRecord>,
    }

    impl Group {
        fn beat(
            &mut self,
            hb: &StreamsHeartbeat,
            image: &MetadataImage,
        ) -> (StreamsGroupHeartbeatResponse, Vec<InternalTopic>) {
            let d = heartbeat(self.state.as_ref(), hb, image, 0).expect("an answer");
            self.log.extend(d.records);
            self.state = Some(d.group);
            self.check_no_task_held_twice();
            (d.response, d.to_create)
        }

        fn check_no_task_held_twice(&self) {
            let g = self.state.as_ref().unwrap();
            for s in ["0", "1"] {
                for p in 0..4 {
                    let holders = g
                        .members
                        .values()
                        .filter(|m| {
                            contains(&m.current.assigned.active, s, p)
                                || contains(&m.current.revoking.active, s, p)
                        })
                        .count();
                    assert!(holders <= 1, "task {s}_{p} held {holders} times");
                }
            }
        }
    }

    fn active(response: &StreamsGroupHeartbeatResponse) -> Tasks {
        tasks_of(response.active_tasks.as_deref().expect("tasks sent"))
    }

    fn count(tasks: &Tasks) -> usize {
        tasks.values().map(|p| p.len()).sum()
    }

    #[test]
    fn a_group_forms_asks_for_its_topics_shares_its_tasks_and_replays_the_same() {
        let mut group = Group {
            state: None,
            log: Vec::new(),
        };
        let bare = image_with(&[("in", 1, 4)]);
        let (r, to_create) = group.beat(&join("m1", "p1"), &bare);
        assert_eq!(r.error_code, 0);
        let asked: Vec<(&str, i32)> = to_create
            .iter()
            .map(|t| (t.name.as_str(), t.partitions))
            .collect();
        assert_eq!(asked, [("app-rep", 4), ("app-store-changelog", 4)]);
        let status = r.status.as_ref().unwrap();
        assert_eq!(
            status[0].status_code,
            StatusCode::MissingInternalTopics as i8
        );
        assert_eq!(count(&active(&r)), 0);

        // The topics exist: the one member gets all 8 tasks.
        let image = image_with(&[
            ("in", 1, 4),
            ("app-rep", 2, 4),
            ("app-store-changelog", 3, 4),
        ]);
        let (r, to_create) = group.beat(&beat("m1", r.member_epoch, &Tasks::new()), &image);
        assert!(to_create.is_empty() && r.status.as_ref().unwrap().is_empty());
        let m1_tasks = active(&r);
        assert_eq!(count(&m1_tasks), 8);
        let m1_epoch = r.member_epoch;

        // A second process joins: it waits until m1 gave up half.
        let (r2, _) = group.beat(&join("m2", "p2"), &image);
        assert_eq!(count(&active(&r2)), 0);
        let (r, _) = group.beat(&beat("m1", m1_epoch, &m1_tasks), &image);
        assert_eq!(r.member_epoch, m1_epoch, "revoking keeps the epoch");
        let kept = active(&r);
        assert_eq!(count(&kept), 4);
        let (r2b, _) = group.beat(&beat("m2", r2.member_epoch, &Tasks::new()), &image);
        assert!(
            r2b.active_tasks.is_none() || count(&active(&r2b)) == 0,
            "m2 got tasks m1 still holds"
        );
        let (r, _) = group.beat(&beat("m1", m1_epoch, &kept), &image);
        assert!(r.member_epoch > m1_epoch);
        let (r2c, _) = group.beat(&beat("m2", r2b.member_epoch, &Tasks::new()), &image);
        assert_eq!(count(&active(&r2c)), 4);
        let g = group.state.as_ref().unwrap();
        assert_eq!(g.state().name(), "Stable");

        // What the log holds is the group.
        let (again, kept_state) = replayed(&group);
        assert_eq!(again, kept_state);

        // m2 leaves: its records go and the epoch moves on.
        let before = kept_state.epoch();
        let mut leave = beat("m2", r2c.member_epoch, &Tasks::new());
        leave.request.member_epoch = -1;
        let (r, _) = group.beat(&leave, &image);
        assert_eq!(r.member_epoch, -1);
        let g = group.state.as_ref().unwrap();
        assert!(!g.members.contains_key("m2") && !g.targets.contains_key("m2"));
        assert_eq!(g.epoch(), before + 1);
    }

    /// The group as replaying its log gives it (timers are soft state).
    fn replayed(group: &Group) -> (StreamsGroup, StreamsGroup) {
        let mut replayed = StreamsGroups::default();
        for record in group.log.clone() {
            replayed.replay(record);
        }
        let mut again = replayed.get(GROUP).unwrap().clone();
        let mut kept = group.state.clone().unwrap();
        for m in again.members.values_mut().chain(kept.members.values_mut()) {
            m.session_deadline = 0;
            m.rebalance_deadline = None;
        }
        again.endpoint_epoch = kept.endpoint_epoch;
        (again, kept)
    }

    #[test]
    fn a_static_member_restarts_into_its_tasks_without_a_rebalance() {
        let image = image_with(&[
            ("in", 1, 4),
            ("app-rep", 2, 4),
            ("app-store-changelog", 3, 4),
        ]);
        let with_instance = |mut hb: StreamsHeartbeat| {
            hb.request.instance_id = Some("i1".into());
            hb
        };
        let mut group = Group {
            state: None,
            log: Vec::new(),
        };
        let (r, _) = group.beat(&with_instance(join("m1", "p1")), &image);
        let tasks = active(&r);
        assert_eq!(count(&tasks), 8);
        let epoch = r.member_epoch;
        let group_epoch = group.state.as_ref().unwrap().epoch();
        let error = |group: &Group, hb: StreamsHeartbeat| {
            heartbeat(group.state.as_ref(), &hb, &image, 0)
                .map(|_| ())
                .unwrap_err()
        };

        // The instance id is taken while its member is in the group.
        let e = error(&group, with_instance(join("m1b", "p1")));
        assert_eq!(e.error, ResponseError::UnreleasedInstanceId);
        assert_eq!(
            e.message.as_deref(),
            Some("Static member m1b with instance id i1 cannot join the group because the instance id is owned by m1 member.")
        );
        let e = error(&group, with_instance(beat("m9", epoch, &tasks)));
        assert_eq!(e.error, ResponseError::FencedInstanceId);
        let mut unknown = beat("m1", epoch, &tasks);
        unknown.request.instance_id = Some("i9".into());
        let e = error(&group, unknown);
        assert_eq!(e.error, ResponseError::UnknownMemberId);
        assert_eq!(e.message.as_deref(), Some("Instance id i9 is unknown."));

        // A temporary leave keeps the tasks and the group epoch.
        let mut leave = with_instance(beat("m1", epoch, &tasks));
        leave.request.member_epoch = LEAVE_STATIC_EPOCH;
        let (r, _) = group.beat(&leave, &image);
        assert_eq!(r.member_epoch, LEAVE_STATIC_EPOCH);
        let g = group.state.as_ref().unwrap();
        assert_eq!(g.epoch(), group_epoch);
        assert_eq!(g.members["m1"].current.epoch, LEAVE_STATIC_EPOCH);
        assert_eq!(g.members["m1"].current.assigned.active, tasks);
        assert_eq!(g.state(), StreamsGroupState::Reconciling);
        // Its old epoch no longer works.
        let e = error(&group, with_instance(beat("m1", epoch, &tasks)));
        assert_eq!(e.error, ResponseError::FencedMemberEpoch);

        // Restarted under a new member id: the same tasks, at once.
        let (r, _) = group.beat(&with_instance(join("m1b", "p1")), &image);
        assert_eq!(active(&r), tasks);
        assert_eq!(r.member_epoch, epoch);
        let g = group.state.as_ref().unwrap();
        assert_eq!(g.epoch(), group_epoch, "no rebalance");
        assert!(!g.members.contains_key("m1") && !g.targets.contains_key("m1"));
        assert_eq!(g.static_member("i1").unwrap().0, "m1b");
        assert_eq!(g.state(), StreamsGroupState::Stable);
        let (again, kept) = replayed(&group);
        assert_eq!(again, kept);

        // Leaving for good gives the tasks up and bumps the epoch.
        let mut leave = with_instance(beat("m1b", epoch, &tasks));
        leave.request.member_epoch = -1;
        let (r, _) = group.beat(&leave, &image);
        assert_eq!(r.member_epoch, -1);
        let g = group.state.as_ref().unwrap();
        assert!(g.static_member("i1").is_none() && g.members.is_empty());
        assert_eq!(g.epoch(), group_epoch + 1);
    }

    #[test]
    fn task_reports_are_checked_and_kept_for_the_assignor() {
        let image = image_with(&[
            ("in", 1, 4),
            ("app-rep", 2, 4),
            ("app-store-changelog", 3, 4),
        ]);
        let offset = |s: &str, p: i32, o: i64| TaskOffset {
            subtopology_id: s.into(),
            partition: p,
            offset: o,
            ..Default::default()
        };
        let mut first = join("m1", "p1");
        first.request.task_offsets = Some(vec![offset("1", 2, 100)]);
        first.request.task_end_offsets = Some(vec![offset("1", 2, 120)]);
        let d = heartbeat(None, &first, &image, 0).unwrap();
        assert_eq!(d.response.task_offset_interval_ms, 60_000);
        let reported = &d.group.members["m1"].task_offsets;
        assert_eq!(reported.offsets["1"][&2], 100);
        assert_eq!(reported.end_offsets["1"][&2], 120);
        let group = d.group;
        let epoch = group.members["m1"].current.epoch;
        let owned = group.members["m1"].current.assigned.active.clone();
        let error = |hb: &StreamsHeartbeat| {
            heartbeat(Some(&group), hb, &image, 0)
                .map(|_| ())
                .unwrap_err()
                .message
                .unwrap()
        };
        let mut twice = beat("m1", epoch, &owned);
        twice.request.task_offsets = Some(vec![offset("1", 2, 1), offset("1", 2, 2)]);
        assert_eq!(
            error(&twice),
            "Task offsets contain a duplicate entry for subtopology 1 and partition 2."
        );
        let mut unknown = beat("m1", epoch, &owned);
        unknown.request.warmup_tasks =
            Some(task_ids(&Tasks::from([("9".to_string(), [0].into())])));
        assert_eq!(
            error(&unknown),
            "Subtopology 9 does not exist in the topology."
        );
        let mut past = beat("m1", epoch, &owned);
        past.request.standby_tasks = Some(task_ids(&Tasks::from([("0".to_string(), [7].into())])));
        assert_eq!(
            error(&past),
            "Task 7 for subtopology 0 is invalid. Number of tasks for this subtopology: 4"
        );
        // Unreported lists are unchanged; a new report replaces the old.
        let mut again = beat("m1", epoch, &owned);
        again.request.task_offsets = Some(vec![offset("1", 3, 5)]);
        let d = heartbeat(Some(&group), &again, &image, 0).unwrap();
        let reported = &d.group.members["m1"].task_offsets;
        assert_eq!(reported.offsets["1"].keys().collect::<Vec<_>>(), [&3]);
        assert_eq!(reported.end_offsets["1"][&2], 120);
    }

    /// The records of two members joining within the initial delay.
    fn records_of_two_joins_within_the_delay(
        first: &StreamsHeartbeat,
        second: &StreamsHeartbeat,
        image: &MetadataImage,
    ) -> Vec<StreamsRecord> {
        let one = heartbeat(None, first, image, 1_000).unwrap();
        let two = heartbeat(Some(&one.group), second, image, 2_000).unwrap();
        one.records.into_iter().chain(two.records).collect()
    }

    #[test]
    fn a_forming_group_waits_out_the_initial_rebalance_delay() {
        let image = image_with(&[
            ("in", 1, 4),
            ("app-rep", 2, 4),
            ("app-store-changelog", 3, 4),
        ]);
        let delayed = |r: &StreamsGroupHeartbeatResponse| {
            r.status
                .iter()
                .flatten()
                .any(|s| s.status_code == StatusCode::AssignmentDelayed as i8)
        };
        let mut first = join("m1", "p1");
        first.settings.initial_rebalance_delay_ms = 3_000;
        let d = heartbeat(None, &first, &image, 1_000).unwrap();
        assert!(delayed(&d.response));
        assert_eq!(count(&active(&d.response)), 0, "nothing assigned yet");
        // An epoch to heartbeat with (0 would mean joining again).
        assert!(d.response.member_epoch > 0);
        // A second member joins within the delay: still waiting.
        let mut second = join("m2", "p2");
        second.settings = first.settings.clone();
        let d = heartbeat(Some(&d.group), &second, &image, 2_000).unwrap();
        assert!(delayed(&d.response));
        let group = d.group;
        // Once it is over, the first heartbeat assigns all 8 tasks at once.
        let mut later = beat("m1", group.members["m1"].current.epoch, &Tasks::new());
        later.settings = first.settings.clone();
        let d = heartbeat(Some(&group), &later, &image, 4_000).unwrap();
        assert!(!delayed(&d.response));
        assert_eq!(count(&d.group.targets["m1"].active), 4);
        assert_eq!(count(&d.group.targets["m2"].active), 4);
        assert_eq!(d.group.assignment_delayed_until, None);
        // A coordinator that loads a group still waiting out its delay
        // (the deadline is soft state) assigns on the next heartbeat.
        let mut reloaded = StreamsGroups::default();
        for record in records_of_two_joins_within_the_delay(&first, &second, &image) {
            reloaded.replay(record);
        }
        reloaded.on_loaded(2_500, 45_000);
        let loaded = reloaded.get(GROUP).unwrap();
        let mut after_load = beat("m1", loaded.members["m1"].current.epoch, &Tasks::new());
        after_load.settings = first.settings.clone();
        let d2 = heartbeat(Some(loaded), &after_load, &image, 2_600).unwrap();
        assert!(!delayed(&d2.response), "the reloaded group assigns");
        assert_eq!(count(&d2.group.targets["m1"].active), 4);
        // A group that already has members assigns a newcomer at once.
        let mut third = join("m3", "p3");
        third.settings = first.settings.clone();
        let d = heartbeat(Some(&d.group), &third, &image, 4_100).unwrap();
        assert!(!delayed(&d.response));
        assert!(d.group.assignment_epoch == d.group.epoch());
    }

    #[test]
    fn interactive_queries_see_only_partitions_a_topic_has() {
        let image = image_with(&[("big", 1, 4), ("small", 2, 2)]);
        let mut hb = join("m1", "p1");
        hb.request.topology = Some(Topology {
            epoch: 1,
            subtopologies: vec![Subtopology {
                subtopology_id: "0".into(),
                source_topics: vec!["big".into(), "small".into()],
                ..Default::default()
            }],
            ..Default::default()
        });
        hb.request.user_endpoint = Some(ottla_protocol::streams::Endpoint {
            host: "h".into(),
            port: 1,
            ..Default::default()
        });
        hb.request.endpoint_information_epoch = -1;
        let d = heartbeat(None, &hb, &image, 0).unwrap();
        assert_eq!(count(&active(&d.response)), 4, "as many tasks as big has");
        let endpoints = d.response.partitions_by_user_endpoint.expect("sent");
        let got: Vec<(String, Vec<i32>)> = endpoints[0]
            .active_partitions
            .iter()
            .map(|t| (t.topic.clone(), t.partitions.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("big".into(), vec![0, 1, 2, 3]),
                ("small".into(), vec![0, 1])
            ]
        );
    }

    #[test]
    fn bad_requests_get_kafkas_errors() {
        let image = image_with(&[("in", 1, 4)]);
        let error = |hb: &StreamsHeartbeat, existing: Option<&StreamsGroup>| {
            validate(&hb.request)
                .and_then(|()| heartbeat(existing, hb, &image, 0).map(|_| ()))
                .unwrap_err()
        };
        let mut no_topology = join("m", "p");
        no_topology.request.topology = None;
        assert_eq!(
            error(&no_topology, None).error,
            ResponseError::InvalidRequest
        );
        let mut sized_changelog = join("m", "p");
        sized_changelog
            .request
            .topology
            .as_mut()
            .unwrap()
            .subtopologies[1]
            .state_changelog_topics[0]
            .partitions = 3;
        assert_eq!(
            error(&sized_changelog, None).error,
            ResponseError::StreamsInvalidTopology
        );
        assert_eq!(
            error(&beat("m", 3, &Tasks::new()), None).error,
            ResponseError::GroupIdNotFound
        );
        let group = heartbeat(None, &join("m", "p"), &image, 0).unwrap().group;
        assert_eq!(
            error(&beat("other", 1, &Tasks::new()), Some(&group)).error,
            ResponseError::UnknownMemberId
        );
        assert_eq!(
            error(&beat("m", 7, &Tasks::new()), Some(&group)).error,
            ResponseError::FencedMemberEpoch
        );
        let mut changed = join("m2", "p");
        changed.request.topology.as_mut().unwrap().subtopologies[0].source_topics =
            vec!["elsewhere".into()];
        let e = error(&changed, Some(&group));
        assert_eq!(e.error, ResponseError::InvalidRequest);
        assert_eq!(
            e.message.as_deref(),
            Some("Topology updates are not supported yet.")
        );
        let mut half = beat("m", 1, &Tasks::new());
        half.request.standby_tasks = None;
        assert_eq!(
            error(&half, Some(&group)).error,
            ResponseError::InvalidRequest
        );
        // `group.streams.max.size`: a new member beyond it is refused.
        let mut full = join("m3", "p");
        full.settings.max_size = 1;
        let e = error(&full, Some(&group));
        assert_eq!(e.error, ResponseError::GroupMaxSizeReached);
        assert_eq!(
            e.message.as_deref(),
            Some("The streams group has reached its maximum capacity of 1 members.")
        );
    }

    /// Version 1 tells the acceptable recovery lag as configured, and a
    /// member without the client tags rack-aware standbys spread over hears
    /// MISSING_CLIENT_TAGS, in Kafka's words; a version 0 member does not.
    #[test]
    fn v1_members_hear_the_recovery_lag_and_their_missing_client_tags() {
        let image = image_with(&[
            ("in", 1, 4),
            ("app-rep", 2, 4),
            ("app-store-changelog", 3, 4),
        ]);
        let mut hb = join("m1", "p1");
        hb.settings.acceptable_recovery_lag = 5_000_000_000;
        hb.settings.rack_aware_assignment_tags = vec!["zone".into(), "cluster".into()];
        hb.request.client_tags = Some(vec![ottla_protocol::streams::KeyValue {
            key: "zone".into(),
            value: "a".into(),
            ..Default::default()
        }]);
        let mut group = Group {
            state: None,
            log: Vec::new(),
        };
        let (r, _) = group.beat(&hb, &image);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.acceptable_recovery_lag, 5_000_000_000);
        assert_eq!(
            r.acceptable_recovery_lag_legacy,
            i32::MAX,
            "v0's int32, capped"
        );
        let missing: Vec<&Status> = r
            .status
            .iter()
            .flatten()
            .filter(|s| s.status_code == StatusCode::MissingClientTags as i8)
            .collect();
        assert_eq!(missing.len(), 1, "{:?}", r.status);
        assert_eq!(
            missing[0].status_detail,
            "Missing required client tags for rack-aware standby assignment: [cluster]. Configure them via 'client.tag.<tagKey>' in your Streams config."
        );
        let mut v0 = beat("m1", r.member_epoch, &Tasks::default());
        v0.api_version = 0;
        v0.settings = hb.settings.clone();
        let (r, _) = group.beat(&v0, &image);
        assert!(
            !r.status
                .iter()
                .flatten()
                .any(|s| s.status_code == StatusCode::MissingClientTags as i8),
            "{:?}",
            r.status
        );
    }
}
