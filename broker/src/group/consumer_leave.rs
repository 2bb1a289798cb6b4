//! Leaving a consumer group: a member leaving for good (epoch -1) or
//! fenced by a timer loses its records and the group epoch bumps, so the
//! others rebalance; a static member leaving temporarily (epoch -2) keeps
//! its assignment for its instance id until its session expires.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use tracing::info;

use super::consumer_group::{metadata_hash, topics_of, ConsumerGroup};
use super::consumer_groups::ConsumerGroups;
use super::consumer_heartbeat::{
    consumer, fail, fenced_instance, unknown_member, Decision, HeartbeatAnswer, HeartbeatError,
    HeartbeatRequest,
};
use super::consumer_member::{MemberSubscription, LEAVE_STATIC_EPOCH};
use super::consumer_records::ConsumerRecord;
use super::records::CoordinatorRecord;

pub fn member_tombstones(group: &str, member: &str) -> impl Iterator<Item = ConsumerRecord> {
    let (g, m) = (group.to_string(), member.to_string());
    [
        ConsumerRecord::CurrentAssignment {
            group: g.clone(),
            member: m.clone(),
            value: None,
        },
        ConsumerRecord::TargetAssignmentMember {
            group: g.clone(),
            member: m.clone(),
            value: None,
        },
        ConsumerRecord::MemberMetadata {
            group: g,
            member: m,
            value: None,
        },
    ]
    .into_iter()
}

/// Leaving: epoch -1 fences the member; -2 (static members) keeps its
/// assignment for its instance id until its session expires.
pub fn leave(
    groups: &ConsumerGroups,
    req: &HeartbeatRequest,
    image: &MetadataImage,
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
    let records = if req.instance_id.is_some() && req.member_epoch == LEAVE_STATIC_EPOCH {
        info!(group = %id, member = %member.id, "static member temporarily left the consumer group");
        let mut current = member.current.clone();
        current.epoch = LEAVE_STATIC_EPOCH;
        current.pending_revocation.clear();
        vec![consumer(ConsumerRecord::CurrentAssignment {
            group: id.clone(),
            member: member.id.clone(),
            value: Some(current),
        })]
    } else {
        info!(group = %id, member = %member.id, "member left the consumer group");
        fence(group, &member.id, image)
    };
    Ok(Decision {
        records,
        answer: HeartbeatAnswer {
            member_id: req.member_id.clone(),
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        },
        timers: None,
        image_checked: None,
    })
}

/// The records that remove `member` and bump the group epoch, with the
/// metadata hash of what the others subscribe to.
pub fn fence(group: &ConsumerGroup, member: &str, image: &MetadataImage) -> Vec<CoordinatorRecord> {
    let mut records: Vec<CoordinatorRecord> =
        member_tombstones(&group.id, member).map(consumer).collect();
    let others: Vec<&MemberSubscription> = group
        .members
        .values()
        .filter(|m| m.id != member)
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
