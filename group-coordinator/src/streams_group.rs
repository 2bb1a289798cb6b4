//! A streams group (KIP-1071) as its records build it, and a shard's
//! streams groups. Replaying a record is the only way persisted state
//! changes, on load and after each append alike.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;

use ottla_protocol::streams::records::StreamsGroupMetadataValue;
use ottla_protocol::streams::Topology;

use super::streams_member::{MemberState, StreamsMember, TaskRoles};
use super::streams_records::StreamsRecord;

/// ListGroups' and DescribeGroups' type name of streams groups.
pub const STREAMS_GROUP_TYPE: &str = "streams";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsGroup {
    pub metadata: StreamsGroupMetadataValue,
    pub topology: Option<Topology>,
    /// The epoch of the current target assignment; -1 before the first.
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, StreamsMember>,
    /// Instance id → member id of the static members.
    static_members: BTreeMap<String, String>,
    pub targets: BTreeMap<String, TaskRoles>,
    /// The member that asked the whole application to stop (soft state,
    /// cleared once the group is empty).
    pub shutdown_requested_by: Option<String>,
    /// The version of the endpoint-to-partitions map Interactive Queries
    /// read (soft state, as Kafka's).
    pub endpoint_epoch: i32,
    /// A group that was empty gets empty targets until then, waiting for
    /// more members before its first real assignment
    /// (`streams.initial.rebalance.delay.ms`; soft state: a reloaded group
    /// assigns at once).
    pub assignment_delayed_until: Option<i64>,
}

impl Default for StreamsGroup {
    fn default() -> Self {
        Self {
            metadata: StreamsGroupMetadataValue::default(),
            topology: None,
            assignment_epoch: -1,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            targets: BTreeMap::new(),
            shutdown_requested_by: None,
            endpoint_epoch: -1,
            assignment_delayed_until: None,
        }
    }
}

/// A streams group's state, as Kafka names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamsGroupState {
    Empty,
    /// No topology, or its topics are not ready (missing or wrongly
    /// partitioned).
    NotReady,
    /// The group epoch moved past the target assignment's.
    Assigning,
    /// Members are still moving to their targets.
    Reconciling,
    Stable,
}

impl StreamsGroupState {
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::NotReady => "NotReady",
            Self::Assigning => "Assigning",
            Self::Reconciling => "Reconciling",
            Self::Stable => "Stable",
        }
    }
}

impl StreamsGroup {
    pub fn epoch(&self) -> i32 {
        self.metadata.epoch
    }

    /// OffsetFetch v9's member check, as Kafka's: an admin fetch (no
    /// member, negative epoch) passes; a member must be known and at its
    /// current epoch.
    pub fn validate_offset_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        super::offsets::check_fetching_member(&self.members, member_id, member_epoch, |m, epoch| {
            if m.current.epoch == epoch {
                Ok(())
            } else {
                Err(ResponseError::StaleMemberEpoch)
            }
        })
    }

    pub fn state(&self) -> StreamsGroupState {
        let validated = self.metadata.validated_topology_epoch();
        if self.members.is_empty() {
            StreamsGroupState::Empty
        } else if self.topology.as_ref().is_none_or(|t| t.epoch != validated) {
            StreamsGroupState::NotReady
        } else if self.epoch() > self.assignment_epoch {
            StreamsGroupState::Assigning
        } else if self.members.values().any(|m| {
            m.current.state != MemberState::Stable || m.current.epoch != self.assignment_epoch
        }) {
            StreamsGroupState::Reconciling
        } else {
            StreamsGroupState::Stable
        }
    }

    /// Applies one record of this group.
    pub fn apply(&mut self, record: &StreamsRecord) {
        match record {
            StreamsRecord::GroupMetadata { value, .. } => {
                if let Some(v) = value {
                    self.metadata = v.clone();
                }
            }
            StreamsRecord::MemberMetadata { member, value, .. } => {
                let held = self.members.get(member).map(|m| &m.metadata.instance_id);
                if let Some(Some(instance)) = held {
                    if self.static_members.get(instance) == Some(member) {
                        self.static_members.remove(instance);
                    }
                }
                match value {
                    Some(v) => {
                        if let Some(instance) = &v.instance_id {
                            self.static_members.insert(instance.clone(), member.clone());
                        }
                        self.members.entry(member.clone()).or_default().metadata = v.clone();
                    }
                    None => {
                        self.members.remove(member);
                        if self.members.is_empty() {
                            self.shutdown_requested_by = None;
                        }
                    }
                }
            }
            StreamsRecord::TargetAssignmentMetadata { value, .. } => {
                self.assignment_epoch = value.unwrap_or(-1);
            }
            StreamsRecord::TargetAssignmentMember { member, value, .. } => match value {
                Some(v) => {
                    self.targets.insert(member.clone(), v.clone());
                }
                None => {
                    self.targets.remove(member);
                }
            },
            StreamsRecord::CurrentAssignment { member, value, .. } => {
                if let (Some(v), Some(m)) = (value, self.members.get_mut(member)) {
                    m.current = v.clone();
                }
            }
            StreamsRecord::Topology { value, .. } => self.topology = value.clone(),
        }
    }

    /// The member holding `instance_id`, with its member id.
    pub fn static_member(&self, instance_id: &str) -> Option<(&String, &StreamsMember)> {
        let id = self.static_members.get(instance_id)?;
        Some((id, self.members.get(id)?))
    }

    /// The target of `member` (empty when none was computed).
    pub fn target(&self, member: &str) -> TaskRoles {
        self.targets.get(member).cloned().unwrap_or_default()
    }
}

/// A shard's streams groups.
#[derive(Debug, Default)]
pub struct StreamsGroups {
    groups: BTreeMap<String, StreamsGroup>,
}

impl StreamsGroups {
    pub fn contains(&self, id: &str) -> bool {
        self.groups.contains_key(id)
    }

    pub fn get(&self, id: &str) -> Option<&StreamsGroup> {
        self.groups.get(id)
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn list(&self) -> impl Iterator<Item = (&String, &StreamsGroup)> {
        self.groups.iter()
    }

    /// Puts back a group whose records were appended (`apply`'d to it).
    pub fn insert(&mut self, id: String, group: StreamsGroup) {
        self.groups.insert(id, group);
    }

    /// Replays a stored record. Any record but a tombstone creates its
    /// group (Kafka writes a new group's member record first); the metadata
    /// tombstone deletes it.
    pub fn replay(&mut self, record: StreamsRecord) {
        if let StreamsRecord::GroupMetadata { group, value: None } = &record {
            self.groups.remove(group);
            return;
        }
        match self.groups.get_mut(record.group()) {
            Some(group) => group.apply(&record),
            None if record.is_tombstone() => {}
            None => {
                let mut group = StreamsGroup::default();
                group.apply(&record);
                self.groups.insert(record.group().to_string(), group);
            }
        }
    }

    /// Starts every loaded member's session timer at `now + session_ms`. A
    /// group whose members all have empty targets may have been waiting out
    /// its initial rebalance delay (soft state, lost with the old
    /// coordinator): its next heartbeat assigns for real.
    pub fn on_loaded(&mut self, now: i64, session_ms: i64) {
        for group in self.groups.values_mut() {
            for member in group.members.values_mut() {
                member.session_deadline = now + session_ms;
            }
            let unassigned = group.targets.values().all(TaskRoles::is_empty);
            if !group.members.is_empty() && unassigned {
                group.assignment_delayed_until = Some(now);
            }
        }
    }
}
