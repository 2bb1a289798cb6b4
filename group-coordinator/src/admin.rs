//! Group administration against one shard: DescribeGroups, ListGroups and
//! DeleteGroups.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tracing::info;

use super::classic::{ClassicGroup, GroupState};
use super::offsets::OffsetStore;
use super::records::CoordinatorRecord;
use super::writer::Ctx;

/// ListGroups v5's type of the (classic protocol) groups here.
pub const CLASSIC_GROUP_TYPE: &str = "classic";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// Only for Stable groups (the metadata of the selected protocol).
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: String,
    /// The selected protocol, for Stable groups only.
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

/// None when the group does not exist.
pub fn describe(
    groups: &HashMap<String, ClassicGroup>,
    group_id: &str,
) -> Option<GroupDescription> {
    let g = groups.get(group_id)?;
    let stable_protocol =
        (g.state() == GroupState::Stable).then(|| g.protocol_name().unwrap_or_default());
    let members = g
        .members()
        .map(|m| MemberDescription {
            member_id: m.id.clone(),
            group_instance_id: m.group_instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            metadata: stable_protocol
                .and_then(|p| m.metadata(p).cloned())
                .unwrap_or_default(),
            assignment: m.assignment.clone(),
        })
        .collect();
    Some(GroupDescription {
        state: g.state(),
        protocol_type: g.protocol_type().unwrap_or_default().to_string(),
        protocol: stable_protocol.unwrap_or_default().to_string(),
        members,
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: GroupState,
}

/// Groups matching both filters; an empty filter matches everything, and
/// matching ignores case (as Kafka does).
pub fn list(
    groups: &HashMap<String, ClassicGroup>,
    states: &[String],
    types: &[String],
) -> Vec<ListedGroup> {
    let states: Vec<String> = states.iter().map(|s| s.trim().to_lowercase()).collect();
    let type_ok = types.is_empty()
        || types
            .iter()
            .any(|t| t.trim().eq_ignore_ascii_case(CLASSIC_GROUP_TYPE));
    if !type_ok {
        return Vec::new();
    }
    groups
        .values()
        .filter(|g| states.is_empty() || states.contains(&g.state().name().to_lowercase()))
        .map(|g| ListedGroup {
            group_id: g.id.clone(),
            protocol_type: g.protocol_type().unwrap_or_default().to_string(),
            state: g.state(),
        })
        .collect()
}

/// Deletes empty groups with their offsets (tombstones in one batch).
/// Returns one error code per group id, in order.
pub fn delete(
    groups: &mut HashMap<String, ClassicGroup>,
    store: &mut OffsetStore,
    ids: &[String],
    ctx: &Ctx<'_>,
) -> Vec<i16> {
    let mut records = Vec::new();
    let mut deleted = Vec::new();
    let mut codes: Vec<i16> = ids
        .iter()
        .map(|id| match groups.get(id) {
            None => ResponseError::GroupIdNotFound.code(),
            Some(g) if !g.is_empty() => ResponseError::NonEmptyGroup.code(),
            Some(_) => {
                records.extend(store.tombstones(id));
                records.push(CoordinatorRecord::GroupMetadata {
                    group: id.clone(),
                    value: None,
                });
                deleted.push(id.clone());
                0
            }
        })
        .collect();
    if let Err(e) = ctx.writer.append(&records) {
        for code in codes.iter_mut().filter(|c| **c == 0) {
            *code = e.code();
        }
        return codes;
    }
    for r in records {
        match r {
            CoordinatorRecord::OffsetCommit {
                group,
                topic,
                partition,
                value,
            } => super::offsets::apply(groups, store, &group, &topic, partition, value, ctx.now),
            CoordinatorRecord::GroupMetadata { group, .. } => {
                groups.remove(&group);
            }
            // Consumer, streams and share groups are deleted by
            // `Shard::delete_groups`.
            CoordinatorRecord::Consumer(_)
            | CoordinatorRecord::Streams(_)
            | CoordinatorRecord::Share(_) => {}
        }
    }
    if !deleted.is_empty() {
        info!(groups = ?deleted, "deleted groups");
    }
    codes
}
