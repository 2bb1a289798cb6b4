//! Leaving a consumer group: a member leaving for good (epoch -1) or
//! fenced by a timer loses its records and the group epoch bumps, so the
//! others rebalance; a static member leaving temporarily (epoch -2) keeps
//! its assignment for its instance id until its session expires. When the
//! last consumer-protocol member of a group of classic members goes, the
//! group may turn back into a classic group (`consumer_migration`).

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use tracing::info;

use super::consumer_group::{member_tombstones, metadata_hash, topics_of, ConsumerGroup};
use super::consumer_groups::ConsumerGroups;
use super::consumer_heartbeat::{
    consumer, fail, fenced_instance, unknown_member, Decision, HeartbeatAnswer, HeartbeatError,
    HeartbeatRequest,
};
use super::consumer_member::{MemberSubscription, LEAVE_STATIC_EPOCH};
use super::consumer_migration::{self, Migration};
use super::consumer_records::ConsumerRecord;
use super::records::CoordinatorRecord;
use super::writer::Ctx;

/// Leaving: epoch -1 fences the member; -2 (static members) keeps its
/// assignment for its instance id until its session expires.
pub fn leave(
    groups: &ConsumerGroups,
    req: &HeartbeatRequest,
    image: &MetadataImage,
    ctx: &Ctx<'_>,
) -> Result<Decision, HeartbeatError> {
    let id = &req.group_id;
    let group = groups.get(id).ok_or_else(|| {
        fail(
            ResponseError::GroupIdNotFound,
            format!("Group {id} not found."),
        )
    })?;
    let member = match req.instance_id.as_deref() {
        None => group
            .members
            .get(&req.member_id)
            .ok_or_else(|| unknown_member(group, &req.member_id))?,
        Some(instance) => {
            let m = group.static_member(instance).ok_or_else(|| {
                fail(
                    ResponseError::UnknownMemberId,
                    format!("Instance id {instance} is unknown."),
                )
            })?;
            if m.id != req.member_id {
                return Err(fenced_instance(req, instance, m));
            }
            m
        }
    };
    let answer = HeartbeatAnswer {
        member_id: req.member_id.clone(),
        member_epoch: req.member_epoch,
        heartbeat_interval_ms: 0,
        assignment: None,
    };
    if req.instance_id.is_some() && req.member_epoch == LEAVE_STATIC_EPOCH {
        info!(group = %id, member = %member.id, "static member temporarily left the consumer group");
        let mut current = member.current.clone();
        current.epoch = LEAVE_STATIC_EPOCH;
        current.pending_revocation.clear();
        let mut decision = Decision::answer(answer);
        decision.records = vec![consumer(ConsumerRecord::CurrentAssignment {
            group: id.clone(),
            member: member.id.clone(),
            value: Some(current),
        })];
        return Ok(decision);
    }
    info!(group = %id, member = %member.id, "member left the consumer group");
    Ok(fence(group, &member.id, image, ctx).with_answer(answer))
}

/// What removing a member takes: its records and an epoch bump, or, if it
/// was the last consumer-protocol member among classic ones, the group's
/// downgrade to a classic group.
pub struct Fenced {
    pub records: Vec<CoordinatorRecord>,
    pub migration: Option<Migration>,
}

impl Fenced {
    pub fn with_answer<A>(self, answer: A) -> Decision<A> {
        let mut decision = Decision::answer(answer);
        decision.records = self.records;
        decision.migration = self.migration;
        decision
    }
}

/// Removes `member` (leaving, or fenced by a timer).
pub fn fence(group: &ConsumerGroup, member: &str, image: &MetadataImage, ctx: &Ctx<'_>) -> Fenced {
    if consumer_migration::downgrade_allowed(group, member, false, ctx.config) {
        return Fenced {
            records: consumer_migration::downgrade(group, member, None, image, ctx.now).records,
            migration: Some(Migration::Downgraded),
        };
    }
    Fenced {
        records: remove_members(group, &[member], image),
        migration: None,
    }
}

/// The records that remove `members` and bump the group epoch once, with
/// the metadata hash of what the others subscribe to.
pub fn remove_members(
    group: &ConsumerGroup,
    members: &[&str],
    image: &MetadataImage,
) -> Vec<CoordinatorRecord> {
    let mut records: Vec<CoordinatorRecord> = members
        .iter()
        .flat_map(|m| member_tombstones(&group.id, m))
        .map(consumer)
        .collect();
    let others: Vec<&MemberSubscription> = group
        .members
        .values()
        .filter(|m| !members.contains(&m.id.as_str()))
        .map(|m| &m.sub)
        .collect();
    let in_use: BTreeSet<&str> = others.iter().filter_map(|s| s.regex()).collect();
    for regex in group
        .regexes
        .keys()
        .filter(|r| !in_use.contains(r.as_str()))
    {
        records.push(consumer(ConsumerRecord::RegularExpression {
            group: group.id.clone(),
            regex: regex.clone(),
            value: None,
        }));
    }
    let names: BTreeSet<String> = others
        .iter()
        .flat_map(|s| topics_of(s, &group.regexes))
        .collect();
    records.push(consumer(ConsumerRecord::GroupMetadata {
        group: group.id.clone(),
        value: Some((group.epoch + 1, metadata_hash(&names, image))),
    }));
    records
}
