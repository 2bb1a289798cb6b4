//! Classic-protocol members of a consumer group (KIP-848's online
//! migration): JoinGroup, SyncGroup, Heartbeat and LeaveGroup from
//! consumers still on the classic protocol, translated into the consumer
//! protocol's steps, as Kafka's group coordinator does:
//!
//! - JoinGroup updates the member from its embedded subscription, bumps the
//!   group epoch if that changed anything, and reconciles it against its
//!   target given the partitions it reports owning. It is answered at once,
//!   with the member epoch as generation, as a follower (no leader).
//! - SyncGroup answers the member's current assignment in the embedded
//!   protocol, after the usual generation and protocol checks.
//! - Heartbeat answers REBALANCE_IN_PROGRESS when the member should rejoin:
//!   the group epoch moved past it, it must revoke partitions, or
//!   partitions it waited for are free now.
//! - LeaveGroup removes classic members and bumps the epoch.
//!
//! A member told to rejoin must do so within its rebalance timeout, and a
//! joined member must sync within it; otherwise it is fenced.

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use uuid::Uuid;

use super::consumer_group::{ConsumerGroup, MemberTimers};
use super::consumer_heartbeat::{check_capacity, revocation_deadline, Change, Decision};
use super::consumer_leave::remove_members;
use super::consumer_member::{ClassicMetadata, ConsumerMember, MemberState, MemberSubscription};
use super::consumer_migration::{self, by_id, by_name, Migration};
use super::member::{JoinResult, SyncResult};
use super::membership::{JoinRequest, LeavingMember, SyncRequest};
use super::records::CoordinatorRecord;
use super::subscription::{
    encode_assignment, parse_subscription, protocol_version, CONSUMER_PROTOCOL_TYPE,
};
use super::writer::Ctx;
use ottla_protocol::names::uuid_text as base64_topic_id;

/// JoinGroup from a classic member.
pub fn join(
    group: &ConsumerGroup,
    req: &JoinRequest,
    image: &MetadataImage,
    ctx: &Ctx<'_>,
) -> Result<Decision<JoinResult>, ResponseError> {
    let unknown = req.member_id.is_empty();
    let member_id = if unknown {
        base64_topic_id(&Uuid::new_v4())
    } else {
        req.member_id.clone()
    };
    check_capacity(group, &member_id, &ctx.config.consumer).map_err(|e| e.error)?;
    let names: Vec<&str> = req.protocols.iter().map(|p| p.name.as_str()).collect();
    if !group.supports_classic_protocols(&req.protocol_type, &names) {
        return Err(ResponseError::InconsistentGroupProtocol);
    }
    if unknown && req.require_known_member_id && req.group_instance_id.is_none() {
        // The client rejoins with this id (nothing is stored until then).
        return Ok(Decision::answer(JoinResult::error(
            &member_id,
            ResponseError::MemberIdRequired,
        )));
    }
    // Every protocol carries the same subscription; Kafka reads the first.
    let subscription = req
        .protocols
        .first()
        .and_then(|p| parse_subscription(&p.metadata).ok())
        .ok_or(ResponseError::InconsistentGroupProtocol)?;
    let (member, replaced) = find_member(group, req, &member_id, unknown)?;
    let mut sub = member.sub.clone();
    if req.group_instance_id.is_some() {
        sub.instance_id.clone_from(&req.group_instance_id);
    }
    if subscription.rack.is_some() {
        sub.rack_id = subscription.rack;
    }
    if req.rebalance_timeout_ms != -1 {
        sub.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    sub.topic_names = subscription.topics.into_iter().collect();
    sub.client_id.clone_from(&req.client_id);
    sub.client_host.clone_from(&req.client_host);
    sub.classic = Some(ClassicMetadata {
        session_timeout_ms: req.session_timeout_ms,
        protocols: req.protocols.clone(),
    });
    if let Some(old) = replaced {
        if consumer_migration::downgrade_allowed(group, &old.id, true, ctx.config) {
            return Ok(downgrade_in_place(
                group, &old.id, member.id, sub, image, ctx,
            ));
        }
    }
    let mut records = Vec::new();
    let change = Change {
        group,
        member: &member,
        replaced,
        sub: &sub,
    };
    let owned = by_id(&subscription.owned, image);
    let current = change
        .apply(Some(&owned), image, ctx, &mut records)
        .map_err(|e| e.error)?;
    let timers = MemberTimers {
        session_deadline: ctx.now + i64::from(req.session_timeout_ms),
        revocation_deadline: revocation_deadline(
            group,
            &member.id,
            &current,
            current != member.current,
            &sub,
            ctx,
        ),
        join_deadline: None,
        sync_deadline: Some(ctx.now + i64::from(sub.rebalance_timeout_ms.max(0))),
    };
    let protocol = names.first().map(|n| n.to_string());
    Ok(Decision {
        records,
        answer: JoinResult {
            error: 0,
            generation_id: current.epoch,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
            protocol_name: protocol,
            leader: String::new(),
            member_id: member.id.clone(),
            skip_assignment: false,
            members: Vec::new(),
        },
        timers: vec![(member.id, timers)],
        image_checked: Some(image.offset),
        migration: None,
    })
}

/// The member a JoinGroup is for, and the static member it replaces (a
/// restarted static member rejoins without its old member id).
fn find_member<'g>(
    group: &'g ConsumerGroup,
    req: &JoinRequest,
    member_id: &str,
    unknown: bool,
) -> Result<(ConsumerMember, Option<&'g ConsumerMember>), ResponseError> {
    let Some(instance) = req.group_instance_id.as_deref() else {
        let member = group.members.get(member_id).cloned();
        return Ok((
            member.unwrap_or_else(|| ConsumerMember::new(member_id)),
            None,
        ));
    };
    match group.static_member(instance) {
        None if unknown => Ok((ConsumerMember::new(member_id), None)),
        None => Err(ResponseError::UnknownMemberId),
        Some(existing) if unknown => {
            let mut member = existing.clone();
            member.id = member_id.to_string();
            member.current.epoch = 0;
            member.current.previous_epoch = 0;
            Ok((member, Some(existing)))
        }
        Some(existing) if existing.id != member_id => Err(ResponseError::FencedInstanceId),
        Some(existing) => Ok((existing.clone(), None)),
    }
}

/// The last consumer-protocol member was a static member, and a classic
/// member of its instance replaces it: the group becomes classic, the new
/// member takes over its predecessor's assignment, nobody rebalances.
fn downgrade_in_place(
    group: &ConsumerGroup,
    replaced: &str,
    member_id: String,
    sub: MemberSubscription,
    image: &MetadataImage,
    ctx: &Ctx<'_>,
) -> Decision<JoinResult> {
    let joining = ConsumerMember {
        id: member_id,
        sub,
        ..ConsumerMember::default()
    };
    let downgraded = consumer_migration::downgrade(group, replaced, Some(&joining), image, ctx.now);
    Decision {
        records: downgraded.records,
        answer: JoinResult {
            error: 0,
            generation_id: group.epoch,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
            protocol_name: Some(downgraded.protocol),
            leader: String::new(),
            member_id: joining.id,
            skip_assignment: false,
            members: Vec::new(),
        },
        timers: Vec::new(),
        image_checked: None,
        migration: Some(Migration::DowngradedInPlace),
    }
}

/// SyncGroup from a classic member: its current assignment.
pub fn sync(
    group: &ConsumerGroup,
    req: &SyncRequest,
    image: &MetadataImage,
    ctx: &Ctx<'_>,
) -> Decision<Result<SyncResult, ResponseError>> {
    let member = match validate_member(group, &req.member_id, req.group_instance_id.as_deref())
        .and_then(|m| check_generation(m, req.generation_id))
    {
        Ok(m) => m,
        Err(e) => return Decision::answer(Err(e)),
    };
    let classic = member
        .sub
        .classic
        .as_ref()
        .expect("validated classic member");
    let protocol = classic.protocol_name();
    if req
        .protocol_type
        .as_deref()
        .is_some_and(|t| t != CONSUMER_PROTOCOL_TYPE)
        || req.protocol_name.as_deref().is_some_and(|n| n != protocol)
    {
        return Decision::answer(Err(ResponseError::InconsistentGroupProtocol));
    }
    let mut timers = group.timers_of(&member.id);
    // A member that has not revoked yet syncs first; others must rejoin.
    if group.epoch > member.current.epoch
        && member.current.state != MemberState::UnrevokedPartitions
    {
        timers
            .join_deadline
            .get_or_insert(rejoin_deadline(member, ctx));
        return rejoin(member, timers);
    }
    timers.sync_deadline = None;
    timers.session_deadline = ctx.now + i64::from(classic.session_timeout_ms);
    let version = classic
        .protocols
        .first()
        .and_then(|p| protocol_version(&p.metadata).ok())
        .unwrap_or(0);
    let assignment = encode_assignment(version, &by_name(&member.current.assigned, image));
    Decision {
        timers: vec![(member.id.clone(), timers)],
        ..Decision::answer(Ok(SyncResult {
            error: 0,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
            protocol_name: Some(protocol.to_string()),
            assignment,
        }))
    }
}

/// Heartbeat from a classic member: REBALANCE_IN_PROGRESS when it should
/// rejoin (its epoch is behind the group's, it must revoke partitions, or
/// the partitions it waited for are free now).
pub fn heartbeat(
    group: &ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
    generation: i32,
    ctx: &Ctx<'_>,
) -> Decision<Result<(), ResponseError>> {
    let member = match validate_member(group, member_id, instance_id)
        .and_then(|m| check_generation(m, generation))
    {
        Ok(m) => m,
        Err(e) => return Decision::answer(Err(e)),
    };
    let mut timers = group.timers_of(&member.id);
    let session = member.session_timeout_ms(ctx.config.consumer.session_timeout_ms);
    timers.session_deadline = ctx.now + i64::from(session);
    let must_rejoin = member.current.epoch < group.epoch
        || member.current.state == MemberState::UnrevokedPartitions
        || (member.current.state == MemberState::UnreleasedPartitions
            && !group.waits_on_unreleased_partition(member));
    if must_rejoin {
        timers
            .join_deadline
            .get_or_insert(rejoin_deadline(member, ctx));
        return rejoin(member, timers);
    }
    Decision {
        timers: vec![(member.id.clone(), timers)],
        ..Decision::answer(Ok(()))
    }
}

fn rejoin<T>(member: &ConsumerMember, timers: MemberTimers) -> Decision<Result<T, ResponseError>> {
    Decision {
        timers: vec![(member.id.clone(), timers)],
        ..Decision::answer(Err(ResponseError::RebalanceInProgress))
    }
}

fn rejoin_deadline(member: &ConsumerMember, ctx: &Ctx<'_>) -> i64 {
    ctx.now + i64::from(member.sub.rebalance_timeout_ms.max(0))
}

/// LeaveGroup from classic members (or an admin naming their instance
/// ids): one code per member, and the records that remove them.
pub fn leave(
    group: &ConsumerGroup,
    members: &[LeavingMember],
    image: &MetadataImage,
) -> (Vec<i16>, Vec<CoordinatorRecord>) {
    let mut removed: Vec<&str> = Vec::new();
    let codes = members
        .iter()
        .map(|m| {
            let found = match (m.group_instance_id.as_deref(), m.member_id.is_empty()) {
                // Admin tools remove static members by instance id alone.
                (Some(instance), true) => group
                    .static_member(instance)
                    .filter(|m| m.uses_classic_protocol())
                    .ok_or(ResponseError::UnknownMemberId),
                (instance, _) => validate_member(group, &m.member_id, instance),
            };
            match found {
                Ok(member) => {
                    if !removed.contains(&member.id.as_str()) {
                        removed.push(&member.id);
                    }
                    0
                }
                Err(e) => e.code(),
            }
        })
        .collect();
    let records = if removed.is_empty() {
        Vec::new()
    } else {
        remove_members(group, &removed, image)
    };
    (codes, records)
}

/// The classic member a request names: UNKNOWN_MEMBER_ID for strangers and
/// consumer-protocol members, FENCED_INSTANCE_ID when the instance id now
/// belongs to another member id.
fn validate_member<'g>(
    group: &'g ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<&'g ConsumerMember, ResponseError> {
    let member = match instance_id {
        None => group.members.get(member_id),
        Some(instance) => {
            let m = group.static_member(instance);
            if m.is_some_and(|m| m.id != member_id) {
                return Err(ResponseError::FencedInstanceId);
            }
            m
        }
    };
    member
        .filter(|m| m.uses_classic_protocol())
        .ok_or(ResponseError::UnknownMemberId)
}

/// A classic member's generation is its member epoch.
fn check_generation(
    member: &ConsumerMember,
    generation: i32,
) -> Result<&ConsumerMember, ResponseError> {
    if generation != member.current.epoch {
        return Err(ResponseError::IllegalGeneration);
    }
    Ok(member)
}
