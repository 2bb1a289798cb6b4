//! ConsumerGroupHeartbeat (KIP-848), Kafka's GroupMetadataManager consumer
//! paths. A heartbeat is decided on the current state without changing it:
//! the decision is a list of records plus the answer, and the shard appends
//! the records and replays them. The steps:
//!
//! 1. find or create the member (static members by instance id) and check
//!    its epoch; update its subscription; resolve regexes and hash the
//!    subscribed topics' metadata; bump the group epoch on any change;
//! 2. when the group epoch is ahead of the target assignment, run the
//!    group's assignor for a new target;
//! 3. reconcile the member towards its target (`consumer_reconcile`).
//!
//! Leaving and fencing are in `consumer_leave`; a static member that left
//! temporarily (epoch -2) comes back under a new member id with its
//! assignment. Topic regexes are in `consumer_regex`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use tracing::info;
use uuid::Uuid;

use super::classic::ClassicGroup;
use super::consumer_assignor::{assign, MemberSpec};
use super::consumer_config::ConsumerGroupConfig;
use super::consumer_group::{
    member_tombstones, metadata_hash, topic_ids, topics_of, ConsumerGroup, MemberTimers,
};
use super::consumer_groups::ConsumerGroups;
use super::consumer_leave;
use super::consumer_member::{
    is_subset, Assignment, ConsumerMember, CurrentAssignment, MemberState, MemberSubscription,
    LEAVE_STATIC_EPOCH,
};
use super::consumer_migration::{self, Migration};
use super::consumer_reconcile::{reconcile, Target};
use super::consumer_records::ConsumerRecord;
use super::consumer_regex;
use super::records::CoordinatorRecord;
use super::writer::Ctx;

/// The request, version-independent. `None` fields did not change since the
/// member's last heartbeat.
#[derive(Debug, Clone, Default)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    pub topic_names: Option<Vec<String>>,
    pub topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Assignment>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Set on full requests and when the assignment changed.
    pub assignment: Option<Assignment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatError {
    pub error: ResponseError,
    pub message: Option<String>,
}

impl From<ResponseError> for HeartbeatError {
    fn from(error: ResponseError) -> Self {
        Self {
            error,
            message: None,
        }
    }
}

pub(super) fn fail(error: ResponseError, message: String) -> HeartbeatError {
    HeartbeatError {
        error,
        message: Some(message),
    }
}

/// What a request to a consumer group decided: the records to append, the
/// answer, and the soft state to set once the records are applied.
#[derive(Debug)]
pub struct Decision<A = HeartbeatAnswer> {
    pub records: Vec<CoordinatorRecord>,
    pub answer: A,
    /// Members' timers once the records are applied.
    pub timers: Vec<(String, MemberTimers)>,
    /// The metadata image offset the decision checked the group against.
    pub image_checked: Option<i64>,
    /// Whether the records move the group to the other protocol.
    pub migration: Option<Migration>,
}

impl<A> Decision<A> {
    pub fn answer(answer: A) -> Self {
        Self {
            records: Vec::new(),
            answer,
            timers: Vec::new(),
            image_checked: None,
            migration: None,
        }
    }
}

/// The checks Kafka makes before a heartbeat reaches the coordinator.
pub fn validate(
    req: &HeartbeatRequest,
    version: i16,
    config: &ConsumerGroupConfig,
) -> Result<(), HeartbeatError> {
    let invalid = |m: &str| Err(fail(ResponseError::InvalidRequest, m.to_string()));
    let blank = |s: &Option<String>| s.as_deref().is_some_and(|s| s.trim().is_empty());
    // From v1 (KIP-1082) the client generates its member id.
    if (version >= 1 || req.member_epoch > 0 || req.member_epoch == -1)
        && req.member_id.trim().is_empty()
    {
        return invalid("MemberId can't be empty.");
    }
    if req.group_id.trim().is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if blank(&req.instance_id) {
        return invalid("InstanceId can't be empty.");
    }
    if blank(&req.rack_id) {
        return invalid("RackId can't be empty.");
    }
    match req.member_epoch {
        0 => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if req.topic_names.is_none() && req.topic_regex.is_none() {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        }
        LEAVE_STATIC_EPOCH if req.instance_id.is_none() => {
            return invalid("InstanceId can't be null.")
        }
        e if e < LEAVE_STATIC_EPOCH => return invalid("MemberEpoch is invalid."),
        _ => {}
    }
    if let Some(assignor) = req.server_assignor.as_deref() {
        if !config.supports_assignor(assignor) {
            return Err(fail(
                ResponseError::UnsupportedAssignor,
                format!(
                    "ServerAssignor {assignor} is not supported. Supported assignors: {}.",
                    config.assignors.join(", ")
                ),
            ));
        }
    }
    if let Some(regex) = req.topic_regex.as_deref().filter(|r| !r.is_empty()) {
        if let Err(e) = consumer_regex::compile(regex) {
            return Err(fail(
                ResponseError::InvalidRegularExpression,
                format!("SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}."),
            ));
        }
    }
    Ok(())
}

pub(super) fn consumer(r: ConsumerRecord) -> CoordinatorRecord {
    CoordinatorRecord::Consumer(r)
}

/// A heartbeat, or a leave for epochs -1 and -2.
pub fn heartbeat(
    groups: &ConsumerGroups,
    classic: &HashMap<String, ClassicGroup>,
    req: &HeartbeatRequest,
    image: &MetadataImage,
    ctx: &Ctx<'_>,
) -> Result<Decision, HeartbeatError> {
    if req.member_epoch < 0 {
        return consumer_leave::leave(groups, req, image, ctx);
    }
    let config = &*ctx.config.consumer.for_group(image, &req.group_id);
    let id = &req.group_id;
    let mut records = Vec::new();
    let mut migration = None;
    let mut timers = Vec::new();
    let fresh;
    let group = match groups.get(id) {
        Some(g) => g,
        None if req.member_epoch != 0 => {
            return Err(fail(
                ResponseError::GroupIdNotFound,
                format!("Consumer group {id} not found."),
            ))
        }
        None => {
            fresh = match classic.get(id) {
                Some(c) if !c.is_empty() => {
                    let upgraded = consumer_migration::upgrade(c, config, image, ctx.now)?;
                    records = upgraded.records;
                    timers = upgraded.timers;
                    migration = Some(Migration::Upgraded);
                    upgraded.group
                }
                existing => {
                    if existing.is_some() {
                        // An empty classic group becomes a consumer group;
                        // committed offsets belong to the group id and stay.
                        records.push(CoordinatorRecord::GroupMetadata {
                            group: id.clone(),
                            value: None,
                        });
                    }
                    ConsumerGroup::new(id)
                }
            };
            &fresh
        }
    };
    check_capacity(group, &req.member_id, config)?;
    let (member, replaced) = find_member(group, req)?;
    let sub = updated_subscription(&member.sub, req);
    let change = Change {
        group,
        member: &member,
        replaced,
        sub: &sub,
    };
    let current = change.apply(req.owned.as_ref(), image, ctx, &mut records)?;
    let changed = current != member.current;
    // A full request (joining, or resending everything after an error) gets
    // the assignment whether it changed or not.
    let full = req.member_epoch == 0
        || (req.rebalance_timeout_ms != -1
            && (req.topic_names.is_some() || req.topic_regex.is_some())
            && req.owned.is_some());
    let assignment =
        (full || current.assigned != member.current.assigned).then(|| current.assigned.clone());
    timers.push((
        member.id.clone(),
        MemberTimers {
            session_deadline: ctx.now + i64::from(config.session_timeout_ms),
            revocation_deadline: revocation_deadline(
                group, &member.id, &current, changed, &sub, ctx,
            ),
            ..MemberTimers::default()
        },
    ));
    Ok(Decision {
        records,
        answer: HeartbeatAnswer {
            member_id: member.id.clone(),
            member_epoch: current.epoch,
            heartbeat_interval_ms: config.heartbeat_interval_ms,
            assignment,
        },
        timers,
        image_checked: Some(image.offset),
        migration,
    })
}

/// GROUP_MAX_SIZE_REACHED for a new member of a full group.
pub(super) fn check_capacity(
    group: &ConsumerGroup,
    member: &str,
    config: &ConsumerGroupConfig,
) -> Result<(), HeartbeatError> {
    if group.members.len() >= config.max_size && !group.members.contains_key(member) {
        return Err(fail(
            ResponseError::GroupMaxSizeReached,
            format!(
                "The consumer group has reached its maximum capacity of {} members.",
                config.max_size
            ),
        ));
    }
    Ok(())
}

/// One member's request as the group sees it: the member before it (with
/// its new id, if it replaces a static member), and its new subscription.
pub(super) struct Change<'g> {
    pub group: &'g ConsumerGroup,
    pub member: &'g ConsumerMember,
    pub replaced: Option<&'g ConsumerMember>,
    pub sub: &'g MemberSubscription,
}

impl Change<'_> {
    /// Kafka's three steps for a member's request, as records: update the
    /// member and bump the group epoch if anything it depends on changed,
    /// compute a new target assignment if the epoch moved, and reconcile
    /// the member towards its target given what it reports it `owned`.
    /// Returns the member's new current assignment.
    pub fn apply(
        &self,
        owned: Option<&Assignment>,
        image: &MetadataImage,
        ctx: &Ctx<'_>,
        records: &mut Vec<CoordinatorRecord>,
    ) -> Result<CurrentAssignment, HeartbeatError> {
        let (group, member, sub) = (self.group, self.member, self.sub);
        let id = &group.id;
        if let Some(old) = self.replaced {
            records.extend(member_tombstones(id, &old.id).map(consumer));
            records.push(consumer(ConsumerRecord::MemberMetadata {
                group: id.clone(),
                member: member.id.clone(),
                value: Some(member.sub.clone()),
            }));
            records.push(consumer(ConsumerRecord::TargetAssignmentMember {
                group: id.clone(),
                member: member.id.clone(),
                value: Some(group.targets.get(&old.id).cloned().unwrap_or_default()),
            }));
            records.push(consumer(ConsumerRecord::CurrentAssignment {
                group: id.clone(),
                member: member.id.clone(),
                value: Some(member.current.clone()),
            }));
            info!(group = %id, member = %member.id, replaced = %old.id, "static member rejoined under a new member id");
        } else if !group.members.contains_key(&member.id) {
            info!(group = %id, member = %member.id, instance = ?sub.instance_id, classic = sub.classic.is_some(), "member joins the consumer group");
        }

        // 1. The member's subscription, the group's regexes and metadata hash.
        let subscription_changed =
            sub.topic_names != member.sub.topic_names || sub.topic_regex != member.sub.topic_regex;
        if *sub != member.sub {
            records.push(consumer(ConsumerRecord::MemberMetadata {
                group: id.clone(),
                member: member.id.clone(),
                value: Some(sub.clone()),
            }));
        }
        let mut subs: BTreeMap<&str, &MemberSubscription> = group
            .members
            .iter()
            .map(|(m, member)| (m.as_str(), &member.sub))
            .collect();
        if let Some(old) = self.replaced {
            subs.remove(old.id.as_str());
        }
        subs.insert(&member.id, sub);
        let mut bump = group.epoch == 0 || subscription_changed;
        let mut regexes = group.regexes.clone();
        let image_changed = group.image_checked != image.offset;
        let mut hash = group.metadata_hash;
        if image_changed || bump || self.replaced.is_some() {
            bump |= consumer_regex::refresh(group, &subs, &mut regexes, image, ctx.now, records);
            let names: BTreeSet<String> =
                subs.values().flat_map(|s| topics_of(s, &regexes)).collect();
            hash = metadata_hash(&names, image);
            bump |= hash != group.metadata_hash;
        }
        let epoch = group.epoch + i32::from(bump);
        if bump {
            records.push(consumer(ConsumerRecord::GroupMetadata {
                group: id.clone(),
                value: Some((epoch, hash)),
            }));
            info!(group = %id, epoch, "bumped the group epoch");
        }

        // 2. The target assignment.
        let empty = Assignment::new();
        let previous_target = |m: &str| -> &Assignment {
            let key = match self.replaced {
                Some(old) if m == member.id => old.id.as_str(),
                _ => m,
            };
            group.targets.get(key).unwrap_or(&empty)
        };
        let config = &ctx.config.consumer;
        let (target_epoch, target) = if epoch > group.assignment_epoch {
            let assignor = config.preferred_assignor(subs.values().copied());
            let specs: Vec<MemberSpec<'_>> = subs
                .iter()
                .map(|(m, s)| MemberSpec {
                    id: m,
                    subscribed: topic_ids(&topics_of(s, &regexes), image),
                    current: previous_target(m),
                })
                .collect();
            let topics: BTreeMap<Uuid, i32> = specs
                .iter()
                .flat_map(|s| s.subscribed.iter())
                .filter_map(|t| Some((*t, image.topic_by_id(t)?.partitions.len() as i32)))
                .collect();
            let mut targets = assign(assignor, &specs, &topics);
            for (m, a) in &targets {
                if a != previous_target(m) {
                    records.push(consumer(ConsumerRecord::TargetAssignmentMember {
                        group: id.clone(),
                        member: m.clone(),
                        value: Some(a.clone()),
                    }));
                }
            }
            records.push(consumer(ConsumerRecord::TargetAssignmentMetadata {
                group: id.clone(),
                value: Some(epoch),
            }));
            info!(group = %id, epoch, assignor, members = specs.len(), "computed a new target assignment");
            (epoch, targets.remove(&member.id).unwrap_or_default())
        } else {
            (group.assignment_epoch, previous_target(&member.id).clone())
        };

        // 3. Reconciliation.
        let current = if member.current.is_reconciled_to(target_epoch) {
            member.current.clone()
        } else {
            let subscribed = topic_ids(&topics_of(sub, &regexes), image);
            let owner = |t: &Uuid, p: i32| group.owner_epoch(t, p);
            reconcile(
                &member.current,
                &Target {
                    epoch: target_epoch,
                    partitions: &target,
                    subscribed: &subscribed,
                    owned,
                    owner_epoch: &owner,
                },
            )
            .map_err(|e| {
                fail(
                    e,
                    "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.".to_string(),
                )
            })?
        };
        if current != member.current {
            records.push(consumer(ConsumerRecord::CurrentAssignment {
                group: id.clone(),
                member: member.id.clone(),
                value: Some(current.clone()),
            }));
        }
        Ok(current)
    }
}

/// While a member must revoke, the time by which it must have done so: a
/// rebalance timeout from when it was first asked.
pub(super) fn revocation_deadline(
    group: &ConsumerGroup,
    member: &str,
    current: &CurrentAssignment,
    changed: bool,
    sub: &MemberSubscription,
    ctx: &Ctx<'_>,
) -> Option<(i64, i32)> {
    match current.state {
        MemberState::UnrevokedPartitions if changed => Some((
            ctx.now + i64::from(sub.rebalance_timeout_ms.max(0)),
            current.epoch,
        )),
        MemberState::UnrevokedPartitions => group.timers_of(member).revocation_deadline,
        _ => None,
    }
}

/// The member the request is for, and the static member it replaces.
fn find_member<'g>(
    group: &'g ConsumerGroup,
    req: &HeartbeatRequest,
) -> Result<(ConsumerMember, Option<&'g ConsumerMember>), HeartbeatError> {
    let joining = req.member_epoch == 0;
    let known = group.members.get(&req.member_id);
    let Some(instance) = req.instance_id.as_deref() else {
        let member = match known {
            Some(m) => m.clone(),
            None if joining => ConsumerMember::new(&req.member_id),
            None => return Err(unknown_member(group, &req.member_id)),
        };
        check_epoch(&member, req)?;
        return Ok((member, None));
    };
    match group.static_member(instance) {
        None if joining => Ok((
            known
                .cloned()
                .unwrap_or_else(|| ConsumerMember::new(&req.member_id)),
            None,
        )),
        None => Err(fail(
            ResponseError::UnknownMemberId,
            format!("Instance id {instance} is unknown."),
        )),
        Some(existing) if joining => {
            // Only a static member that left temporarily can be replaced,
            // or a classic one (its instance restarted with the consumer
            // protocol: classic static members do not leave on close).
            if existing.current.epoch != LEAVE_STATIC_EPOCH && !existing.uses_classic_protocol() {
                return Err(fail(
                    ResponseError::UnreleasedInstanceId,
                    format!(
                        "Static member {} with instance id {instance} cannot join the group because the instance id is owned by {} member.",
                        req.member_id, existing.id
                    ),
                ));
            }
            let mut member = existing.clone();
            member.id.clone_from(&req.member_id);
            member.current.epoch = 0;
            member.current.previous_epoch = 0;
            Ok((member, Some(existing)))
        }
        Some(existing) => {
            if existing.id != req.member_id {
                return Err(fenced_instance(req, instance, existing));
            }
            check_epoch(existing, req)?;
            Ok((existing.clone(), None))
        }
    }
}

pub(super) fn unknown_member(group: &ConsumerGroup, member: &str) -> HeartbeatError {
    fail(
        ResponseError::UnknownMemberId,
        format!("Member {member} is not a member of group {}.", group.id),
    )
}

pub(super) fn fenced_instance(
    req: &HeartbeatRequest,
    instance: &str,
    existing: &ConsumerMember,
) -> HeartbeatError {
    fail(
        ResponseError::FencedInstanceId,
        format!(
            "Static member {} with instance id {instance} was fenced by member {}.",
            req.member_id, existing.id
        ),
    )
}

/// FENCED_MEMBER_EPOCH unless the epoch is the member's, or its previous one
/// with no partitions beyond its assignment (the answer that bumped it may
/// have been lost).
fn check_epoch(member: &ConsumerMember, req: &HeartbeatRequest) -> Result<(), HeartbeatError> {
    let known = member.current.epoch;
    let received = req.member_epoch;
    let fenced = |which: &str| {
        Err(fail(
            ResponseError::FencedMemberEpoch,
            format!(
                "The consumer group member has a {which} member epoch ({received}) than the one known by the group coordinator ({known}). The member must abandon all its partitions and rejoin."
            ),
        ))
    };
    if received > known {
        return fenced("greater");
    }
    if received < known
        && (received != member.current.previous_epoch
            || !is_subset(req.owned.as_ref(), &member.current.assigned))
    {
        return fenced("smaller");
    }
    Ok(())
}

fn updated_subscription(old: &MemberSubscription, req: &HeartbeatRequest) -> MemberSubscription {
    let mut sub = old.clone();
    if req.instance_id.is_some() {
        sub.instance_id.clone_from(&req.instance_id);
    }
    if req.rack_id.is_some() {
        sub.rack_id.clone_from(&req.rack_id);
    }
    if req.rebalance_timeout_ms != -1 {
        sub.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    if req.server_assignor.is_some() {
        sub.server_assignor.clone_from(&req.server_assignor);
    }
    if let Some(names) = &req.topic_names {
        sub.topic_names = names.iter().cloned().collect();
    }
    if req.topic_regex.is_some() {
        sub.topic_regex.clone_from(&req.topic_regex);
    }
    sub.client_id.clone_from(&req.client_id);
    sub.client_host.clone_from(&req.client_host);
    sub.classic = None;
    sub
}
