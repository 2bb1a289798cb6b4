//! A consumer-protocol group (Kafka's ConsumerGroup): the group epoch, the
//! target assignment and its epoch, the members, resolved regexes, and who
//! owns each partition. Its state changes only by replaying records, the
//! same way at load time and after an append, so both paths agree.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use tracing::warn;
use uuid::Uuid;

use super::consumer_member::{
    Assignment, ConsumerMember, CurrentAssignment, MemberState, MemberSubscription, LEAVE_EPOCH,
};
use super::consumer_records::{ConsumerRecord, ResolvedRegex};
use super::subscription::CONSUMER_PROTOCOL_TYPE;

/// ListGroups v5's type of consumer-protocol groups.
pub const CONSUMER_GROUP_TYPE: &str = "consumer";

/// Kafka's ConsumerGroupState, as ListGroups and describe calls name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    /// The group epoch is ahead of the target assignment.
    Assigning,
    /// Some member is not at the target assignment yet.
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Assigning => "Assigning",
            Self::Reconciling => "Reconciling",
            Self::Stable => "Stable",
        }
    }
}

/// A member's timers; soft state, rebuilt when a partition is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemberTimers {
    pub session_deadline: i64,
    /// While the member must revoke: when it is fenced unless it has moved
    /// past the epoch it had then.
    pub revocation_deadline: Option<(i64, i32)>,
    /// A classic member told to rejoin must send JoinGroup by then.
    pub join_deadline: Option<i64>,
    /// A classic member answered JoinGroup must send SyncGroup by then.
    pub sync_deadline: Option<i64>,
}

#[derive(Debug)]
pub struct ConsumerGroup {
    pub id: String,
    pub epoch: i32,
    /// Hash of the metadata of every subscribed topic: a change (new
    /// partitions, a topic created or deleted) bumps the epoch.
    pub metadata_hash: i64,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    pub targets: BTreeMap<String, Assignment>,
    pub regexes: BTreeMap<String, ResolvedRegex>,
    static_members: HashMap<String, String>,
    /// (topic, partition) -> epoch of the member owning it (assigned or
    /// pending revocation).
    owners: HashMap<(Uuid, i32), i32>,
    pub(super) timers: HashMap<String, MemberTimers>,
    /// The metadata image offset the hash and regexes were last checked at.
    pub(super) image_checked: i64,
}

impl ConsumerGroup {
    pub fn new(id: &str) -> Self {
        Self {
            id: id.to_string(),
            epoch: 0,
            metadata_hash: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            targets: BTreeMap::new(),
            regexes: BTreeMap::new(),
            static_members: HashMap::new(),
            owners: HashMap::new(),
            timers: HashMap::new(),
            image_checked: -1,
        }
    }

    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| !m.current.is_reconciled_to(self.assignment_epoch))
        {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    pub fn static_member(&self, instance_id: &str) -> Option<&ConsumerMember> {
        self.members.get(self.static_members.get(instance_id)?)
    }

    pub fn owner_epoch(&self, topic: &Uuid, partition: i32) -> Option<i32> {
        self.owners.get(&(*topic, partition)).copied()
    }

    /// The member's timers, or none running.
    pub fn timers_of(&self, member: &str) -> MemberTimers {
        self.timers.get(member).copied().unwrap_or_default()
    }

    /// Whether a member at UNRELEASED_PARTITIONS still waits for a
    /// partition of its target that another member owns.
    pub fn waits_on_unreleased_partition(&self, member: &ConsumerMember) -> bool {
        if member.current.state != MemberState::UnreleasedPartitions {
            return false;
        }
        let Some(target) = self.targets.get(&member.id) else {
            return false;
        };
        target.iter().any(|(topic, ps)| {
            ps.iter().any(|&p| {
                !member
                    .current
                    .assigned
                    .get(topic)
                    .is_some_and(|a| a.contains(&p))
                    && self.owners.contains_key(&(*topic, p))
            })
        })
    }

    pub fn classic_members(&self) -> impl Iterator<Item = &ConsumerMember> {
        self.members.values().filter(|m| m.uses_classic_protocol())
    }

    /// Whether a classic member with these protocols can join: the type is
    /// the consumer protocol's, and one protocol is one every classic
    /// member supports (any protocol, while there is none).
    pub fn supports_classic_protocols(&self, protocol_type: &str, names: &[&str]) -> bool {
        if protocol_type != CONSUMER_PROTOCOL_TYPE {
            return false;
        }
        names.iter().any(|name| {
            self.classic_members()
                .all(|m| m.sub.classic.as_ref().is_some_and(|c| c.supports(name)))
        })
    }

    /// Whether every member but `member` uses the classic protocol, and
    /// `member` itself does not (its leaving could end the consumer protocol).
    pub fn only_classic_members_besides(&self, member: &str) -> bool {
        self.members
            .get(member)
            .is_some_and(|m| !m.uses_classic_protocol())
            && self
                .members
                .values()
                .all(|m| m.id == member || m.uses_classic_protocol())
    }

    /// Whether any member consumes `topic` (OffsetDelete refuses those).
    pub fn is_subscribed_to(&self, topic: &str) -> bool {
        self.members
            .values()
            .any(|m| topics_of(&m.sub, &self.regexes).contains(topic))
    }

    /// OffsetCommit by a member (member epoch instead of generation), or by
    /// an admin / manual-assignment client (negative epoch) while empty.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        api_version: i16,
    ) -> Result<(), ResponseError> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let member = self
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        // Consumer-protocol members commit with v9+, which carries the
        // epoch; classic members commit with their generation.
        if api_version < 9 && !member.uses_classic_protocol() {
            return Err(ResponseError::UnsupportedVersion);
        }
        check_member_epoch(member, member_epoch)
    }

    /// TxnOffsetCommit: as OffsetCommit without the version check; a stale
    /// epoch is ILLEGAL_GENERATION, which that API knows (as Kafka).
    pub fn validate_txn_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        match self.validate_offset_commit(member_id, member_epoch, 9) {
            Err(ResponseError::StaleMemberEpoch) => Err(ResponseError::IllegalGeneration),
            other => other,
        }
    }

    /// OffsetFetch v9 may name the member and its epoch; without them (admin
    /// tools) any fetch is allowed.
    pub fn validate_offset_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        super::offsets::check_fetching_member(
            &self.members,
            member_id,
            member_epoch,
            check_member_epoch,
        )
    }

    /// The tombstones that delete this group, as Kafka writes them;
    /// NON_EMPTY_GROUP while it has members.
    pub fn deletion_records(&self) -> Result<Vec<ConsumerRecord>, ResponseError> {
        if self.state() != ConsumerGroupState::Empty {
            return Err(ResponseError::NonEmptyGroup);
        }
        Ok(self.tombstones())
    }

    /// The tombstones of every member and of the group itself (when the
    /// group turns into a classic group).
    pub fn tombstones(&self) -> Vec<ConsumerRecord> {
        let group = || self.id.clone();
        let mut records: Vec<ConsumerRecord> = self
            .members
            .keys()
            .flat_map(|m| member_tombstones(&self.id, m))
            .collect();
        records.extend(
            self.targets
                .keys()
                .filter(|m| !self.members.contains_key(*m))
                .map(|member| ConsumerRecord::TargetAssignmentMember {
                    group: group(),
                    member: member.clone(),
                    value: None,
                }),
        );
        records.push(ConsumerRecord::TargetAssignmentMetadata {
            group: group(),
            value: None,
        });
        records.extend(
            self.regexes
                .keys()
                .map(|regex| ConsumerRecord::RegularExpression {
                    group: group(),
                    regex: regex.clone(),
                    value: None,
                }),
        );
        records.push(ConsumerRecord::PartitionMetadataTombstone { group: group() });
        records.push(ConsumerRecord::GroupMetadata {
            group: group(),
            value: None,
        });
        records
    }

    /// Applies a member-, assignment- or regex-level record (group records
    /// are handled by the container).
    pub fn replay(&mut self, record: ConsumerRecord) {
        match record {
            ConsumerRecord::MemberMetadata {
                member,
                value: Some(sub),
                ..
            } => {
                let m = self
                    .members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerMember::new(&member));
                if let Some(old) = m.sub.instance_id.take() {
                    if self.static_members.get(&old) == Some(&member) {
                        self.static_members.remove(&old);
                    }
                }
                if let Some(instance) = &sub.instance_id {
                    self.static_members.insert(instance.clone(), member.clone());
                }
                m.sub = sub;
            }
            ConsumerRecord::MemberMetadata {
                member,
                value: None,
                ..
            } => {
                if let Some(m) = self.members.remove(&member) {
                    self.release(&m.id, &m.current);
                    if let Some(instance) = &m.sub.instance_id {
                        if self.static_members.get(instance) == Some(&member) {
                            self.static_members.remove(instance);
                        }
                    }
                }
                self.timers.remove(&member);
            }
            ConsumerRecord::CurrentAssignment { member, value, .. } => {
                let current = value.unwrap_or(CurrentAssignment {
                    epoch: LEAVE_EPOCH,
                    previous_epoch: LEAVE_EPOCH,
                    state: MemberState::Stable,
                    ..CurrentAssignment::default()
                });
                let old = self
                    .members
                    .entry(member.clone())
                    .or_insert_with(|| ConsumerMember::new(&member))
                    .current
                    .clone();
                self.release(&member, &old);
                self.claim(&member, &current);
                if let Some(m) = self.members.get_mut(&member) {
                    m.current = current;
                }
            }
            ConsumerRecord::TargetAssignmentMetadata { value, .. } => {
                self.assignment_epoch = value.unwrap_or(-1);
            }
            ConsumerRecord::TargetAssignmentMember {
                member,
                value: Some(a),
                ..
            } => {
                self.targets.insert(member, a);
            }
            ConsumerRecord::TargetAssignmentMember {
                member,
                value: None,
                ..
            } => {
                self.targets.remove(&member);
            }
            ConsumerRecord::RegularExpression {
                regex,
                value: Some(r),
                ..
            } => {
                self.regexes.insert(regex, r);
            }
            ConsumerRecord::RegularExpression {
                regex, value: None, ..
            } => {
                self.regexes.remove(&regex);
            }
            ConsumerRecord::GroupMetadata { .. }
            | ConsumerRecord::PartitionMetadataTombstone { .. } => {}
        }
    }

    fn claim(&mut self, member: &str, current: &CurrentAssignment) {
        for (topic, p) in
            partitions(&current.assigned).chain(partitions(&current.pending_revocation))
        {
            if let Some(other) = self.owners.insert((topic, p), current.epoch) {
                warn!(group = %self.id, member, %topic, partition = p, other_epoch = other, "partition claimed while owned");
            }
        }
    }

    fn release(&mut self, member: &str, current: &CurrentAssignment) {
        for tp in partitions(&current.assigned).chain(partitions(&current.pending_revocation)) {
            match self.owners.get(&tp) {
                Some(&epoch) if epoch == current.epoch => {
                    self.owners.remove(&tp);
                }
                Some(&epoch) => {
                    warn!(group = %self.id, member, topic = %tp.0, partition = tp.1, epoch, "partition owned at another epoch; left in place")
                }
                None => {}
            }
        }
    }
}

/// A member's epoch as its request states it: STALE_MEMBER_EPOCH for a
/// consumer-protocol member, ILLEGAL_GENERATION for a classic one (its
/// generation is its member epoch).
fn check_member_epoch(member: &ConsumerMember, epoch: i32) -> Result<(), ResponseError> {
    match (
        epoch == member.current.epoch,
        member.uses_classic_protocol(),
    ) {
        (true, _) => Ok(()),
        (false, true) => Err(ResponseError::IllegalGeneration),
        (false, false) => Err(ResponseError::StaleMemberEpoch),
    }
}

/// The records that remove a member from its group.
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

fn partitions(a: &Assignment) -> impl Iterator<Item = (Uuid, i32)> + '_ {
    a.iter()
        .flat_map(|(topic, ps)| ps.iter().map(move |&p| (*topic, p)))
}

/// The topics a subscription covers: its names and what its regex resolved
/// to (an unresolved regex covers nothing).
pub fn topics_of(
    sub: &MemberSubscription,
    regexes: &BTreeMap<String, ResolvedRegex>,
) -> BTreeSet<String> {
    let mut topics = sub.topic_names.clone();
    if let Some(resolved) = sub.regex().and_then(|r| regexes.get(r)) {
        topics.extend(resolved.topics.iter().cloned());
    }
    topics
}

/// The ids of the topics among `names` that exist.
pub fn topic_ids<'a>(
    names: impl IntoIterator<Item = &'a String>,
    image: &MetadataImage,
) -> BTreeSet<Uuid> {
    names
        .into_iter()
        .filter_map(|n| image.topic_ids.get(n).copied())
        .collect()
}

/// A hash of the subscribed topics' names, ids and partition counts (FNV-1a;
/// Kafka uses its own function, so a Kafka coordinator reading this log
/// would just rebalance once). 0 for no topics, as Kafka.
pub fn metadata_hash(names: &BTreeSet<String>, image: &MetadataImage) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut any = false;
    for name in names {
        let Some(topic) = image.topic_by_name(name) else {
            continue;
        };
        any = true;
        let count = topic.partitions.len() as u32;
        for b in name
            .bytes()
            .chain([0])
            .chain(topic.id.as_bytes().iter().copied())
            .chain(count.to_be_bytes())
        {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    if any {
        h as i64
    } else {
        0
    }
}
