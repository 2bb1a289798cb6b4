//! Share groups' membership (KIP-932, ShareGroupHeartbeat): members join
//! with the topics they subscribe to and get partitions to fetch from.
//! Unlike a consumer group, a partition may go to several members at once
//! and an assignment is never revoked first: delivery to exactly one member
//! is the partition leader's job (acquisition locks, `ottla-share`), so
//! every member takes the group's latest assignment at once.
//!
//! The assignment is the simple assignor's: a topic's partitions are dealt
//! round-robin among the members subscribing to it; with more members
//! than partitions, each member gets one partition and partitions are
//! shared.
//!
//! Groups change on a copy that the shard keeps once the records of the
//! change (`share_log`) are appended.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use uuid::Uuid;

use super::consumer_group::metadata_hash;
pub use super::share_records::ShareAssignment;
use super::share_records::StatePartitions;

pub const SHARE_GROUP_TYPE: &str = "share";

pub struct ShareHeartbeat {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// Set when joining or when the subscription changes.
    pub topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's partitions, when they changed (or it just joined).
    pub assignment: Option<ShareAssignment>,
}

/// A share group's timing and size, from its config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareLimits {
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i32,
    /// `group.share.max.size`: joins beyond it are refused.
    pub max_size: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareMember {
    pub member_id: String,
    pub epoch: i32,
    /// The epoch before the last answer: a member whose answer was lost
    /// heartbeats with it and is answered again.
    pub previous_epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: BTreeSet<String>,
    pub assignment: ShareAssignment,
    /// Not persisted: a loaded member has a session from the load on.
    pub(super) session_deadline: i64,
}

/// A share group's state, as ShareGroupDescribe and ListGroups name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareGroupState {
    Empty,
    Stable,
}

impl ShareGroupState {
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShareGroup {
    pub epoch: i32,
    /// The subscribed topics' hash (names, ids, partition counts) that the
    /// assignment was computed from.
    pub metadata_hash: i64,
    pub members: BTreeMap<String, ShareMember>,
    /// The epoch the members' assignment was computed at.
    pub(super) assignment_epoch: i32,
    /// The share partitions the share coordinator may hold state of for
    /// this group: every partition ever assigned, and those an offset
    /// reset named. Deleting the group deletes their state.
    pub state_partitions: StatePartitions,
}

impl ShareGroup {
    pub fn state(&self) -> ShareGroupState {
        if self.members.is_empty() {
            ShareGroupState::Empty
        } else {
            ShareGroupState::Stable
        }
    }

    pub fn assignment_epoch(&self) -> i32 {
        self.assignment_epoch
    }

    fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed.iter().cloned())
            .collect()
    }

    /// Records that `topic`'s `partitions` may hold share state.
    pub fn add_state_partitions(
        &mut self,
        topic_id: Uuid,
        name: &str,
        partitions: impl IntoIterator<Item = i32>,
    ) {
        let topic = self.state_partitions.entry(topic_id).or_default();
        topic.name = name.to_string();
        topic.partitions.extend(partitions);
    }

    /// Computes every member's assignment at the group epoch, if the
    /// members or their topics changed since the last computation.
    fn refresh_assignment(&mut self, image: &MetadataImage) {
        let names = self.subscribed_topics();
        let hash = metadata_hash(&names, image);
        // A change of the topics is a new epoch, unless one is pending.
        if hash != self.metadata_hash && self.assignment_epoch == self.epoch {
            self.epoch += 1;
        }
        if self.assignment_epoch == self.epoch {
            return;
        }
        let topics: Vec<(String, Uuid, usize)> = names
            .into_iter()
            .filter_map(|name| {
                let t = image.topic_by_name(&name)?;
                Some((name, t.id, t.partitions.len()))
            })
            .collect();
        let assignments = assign(&self.members, &topics);
        for (id, member) in self.members.iter_mut() {
            member.assignment = assignments.get(id).cloned().unwrap_or_default();
        }
        for (name, id, _) in &topics {
            let assigned: BTreeSet<i32> = self
                .members
                .values()
                .filter_map(|m| m.assignment.get(id))
                .flatten()
                .copied()
                .collect();
            if !assigned.is_empty() {
                self.add_state_partitions(*id, name, assigned);
            }
        }
        self.metadata_hash = hash;
        self.assignment_epoch = self.epoch;
    }

    /// ShareGroupHeartbeat on this group: joins (epoch 0), heartbeats and
    /// leaves (-1).
    pub fn heartbeat(
        &mut self,
        req: &ShareHeartbeat,
        limits: ShareLimits,
        image: &MetadataImage,
        now: i64,
    ) -> Result<ShareHeartbeatAnswer, ResponseError> {
        validate(req)?;
        let deadline = now + limits.session_timeout_ms;
        match req.member_epoch {
            LEAVE_EPOCH => {
                self.remove_member(&req.member_id, image);
                return Ok(ShareHeartbeatAnswer {
                    member_id: req.member_id.clone(),
                    member_epoch: LEAVE_EPOCH,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                });
            }
            0 => {
                if self.members.len() >= limits.max_size
                    && !self.members.contains_key(&req.member_id)
                {
                    return Err(ResponseError::GroupMaxSizeReached);
                }
                let subscribed: BTreeSet<String> =
                    req.topic_names.iter().flatten().cloned().collect();
                self.members.insert(
                    req.member_id.clone(),
                    ShareMember {
                        member_id: req.member_id.clone(),
                        rack_id: req.rack_id.clone(),
                        client_id: req.client_id.clone(),
                        client_host: req.client_host.clone(),
                        subscribed,
                        session_deadline: deadline,
                        ..Default::default()
                    },
                );
                self.epoch += 1;
            }
            epoch => {
                let member = self
                    .members
                    .get_mut(&req.member_id)
                    .ok_or(ResponseError::UnknownMemberId)?;
                if epoch != member.epoch && epoch != member.previous_epoch {
                    return Err(ResponseError::FencedMemberEpoch);
                }
                member.session_deadline = deadline;
                if let Some(names) = &req.topic_names {
                    let subscribed: BTreeSet<String> = names.iter().cloned().collect();
                    if subscribed != member.subscribed {
                        member.subscribed = subscribed;
                        self.epoch += 1;
                    }
                }
            }
        }
        self.refresh_assignment(image);
        let assignment_epoch = self.assignment_epoch;
        let member = self
            .members
            .get_mut(&req.member_id)
            .expect("joined or checked above");
        if member.epoch != assignment_epoch {
            member.previous_epoch = member.epoch;
            member.epoch = assignment_epoch;
        }
        Ok(ShareHeartbeatAnswer {
            member_id: member.member_id.clone(),
            member_epoch: member.epoch,
            heartbeat_interval_ms: limits.heartbeat_interval_ms,
            // Sent whenever the member's epoch was not the answer's: it
            // joined, the assignment changed, or the last answer was lost.
            assignment: (req.member_epoch != member.epoch).then(|| member.assignment.clone()),
        })
    }

    /// Removes a member (it left or its session ended); the others take
    /// its partitions at a new epoch.
    pub fn remove_member(&mut self, member_id: &str, image: &MetadataImage) {
        if self.members.remove(member_id).is_some() {
            self.epoch += 1;
            self.refresh_assignment(image);
        }
    }
}

/// The simple assignor: see the module comment.
fn assign(
    members: &BTreeMap<String, ShareMember>,
    topics: &[(String, Uuid, usize)],
) -> HashMap<String, ShareAssignment> {
    let mut out: HashMap<String, ShareAssignment> = HashMap::new();
    for (name, id, partitions) in topics {
        let subscribers: Vec<&String> = members
            .iter()
            .filter(|(_, m)| m.subscribed.contains(name))
            .map(|(id, _)| id)
            .collect();
        let (n, p) = (subscribers.len(), *partitions);
        if n == 0 || p == 0 {
            continue;
        }
        let pairs: Vec<(usize, usize)> = if n <= p {
            (0..p).map(|partition| (partition % n, partition)).collect()
        } else {
            (0..n).map(|member| (member, member % p)).collect()
        };
        for (member, partition) in pairs {
            out.entry(subscribers[member].clone())
                .or_default()
                .entry(*id)
                .or_default()
                .insert(partition as i32);
        }
    }
    out
}

/// The share groups of a shard.
#[derive(Default)]
pub struct ShareGroups {
    groups: HashMap<String, ShareGroup>,
}

impl ShareGroups {
    pub fn contains(&self, group_id: &str) -> bool {
        self.groups.contains_key(group_id)
    }

    pub fn get(&self, group_id: &str) -> Option<&ShareGroup> {
        self.groups.get(group_id)
    }

    pub(super) fn get_mut_or_insert(&mut self, group_id: &str) -> &mut ShareGroup {
        self.groups.entry(group_id.to_string()).or_default()
    }

    pub fn list(&self) -> impl Iterator<Item = (&String, &ShareGroup)> {
        self.groups.iter()
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Keeps `group` as `group_id`'s (after its records were appended).
    pub(super) fn insert(&mut self, group_id: &str, group: ShareGroup) {
        self.groups.insert(group_id.to_string(), group);
    }

    pub(super) fn remove(&mut self, group_id: &str) {
        self.groups.remove(group_id);
    }

    /// The (group, member) pairs whose session ended by `now`.
    pub fn expired(&self, now: i64) -> Vec<(String, String)> {
        self.groups
            .iter()
            .flat_map(|(group_id, group)| {
                group
                    .members
                    .values()
                    .filter(move |m| m.session_deadline <= now)
                    .map(move |m| (group_id.clone(), m.member_id.clone()))
            })
            .collect()
    }

    /// After a load: every member gets a session from `now`.
    pub(super) fn on_loaded(&mut self, now: i64, session_timeout_ms: i64) {
        for group in self.groups.values_mut() {
            for member in group.members.values_mut() {
                member.session_deadline = now + session_timeout_ms;
            }
        }
    }
}

const LEAVE_EPOCH: i32 = -1;

/// Kafka's request checks (GroupCoordinatorService / throwIfShareGroupHeartbeatRequestIsInvalid).
fn validate(req: &ShareHeartbeat) -> Result<(), ResponseError> {
    if req.group_id.trim().is_empty() || req.member_id.trim().is_empty() {
        return Err(ResponseError::InvalidRequest);
    }
    if req.member_epoch == 0 && req.topic_names.as_ref().is_none_or(|t| t.is_empty()) {
        return Err(ResponseError::InvalidRequest);
    }
    if req.member_epoch < LEAVE_EPOCH {
        return Err(ResponseError::InvalidRequest);
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::test_images::image_with;

    pub(crate) const LIMITS: ShareLimits = ShareLimits {
        session_timeout_ms: 45_000,
        heartbeat_interval_ms: 5_000,
        max_size: 3,
    };

    pub(crate) fn beat(member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeat {
        ShareHeartbeat {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: epoch,
            rack_id: None,
            topic_names: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
        }
    }

    fn partitions(a: &ShareAssignment) -> Vec<i32> {
        a.values().flatten().copied().collect()
    }

    #[test]
    fn members_share_a_topic_and_take_new_assignments_at_once() {
        let image = image_with(&[("t", 1, 4)]);
        let mut group = ShareGroup::default();
        let a = group
            .heartbeat(&beat("a", 0, Some(&["t"])), LIMITS, &image, 0)
            .unwrap();
        assert_eq!(a.member_epoch, 1);
        assert_eq!(partitions(a.assignment.as_ref().unwrap()), vec![0, 1, 2, 3]);
        let b = group
            .heartbeat(&beat("b", 0, Some(&["t"])), LIMITS, &image, 0)
            .unwrap();
        assert_eq!(b.member_epoch, 2);
        assert_eq!(partitions(b.assignment.as_ref().unwrap()), vec![1, 3]);
        // a learns its smaller share on its next heartbeat, no revocation.
        let a = group
            .heartbeat(&beat("a", 1, None), LIMITS, &image, 0)
            .unwrap();
        assert_eq!(a.member_epoch, 2);
        assert_eq!(partitions(a.assignment.as_ref().unwrap()), vec![0, 2]);
        let a = group
            .heartbeat(&beat("a", 2, None), LIMITS, &image, 0)
            .unwrap();
        assert_eq!(a.assignment, None, "unchanged");
    }

    #[test]
    fn a_member_whose_answer_was_lost_is_answered_again() {
        let image = image_with(&[("t", 1, 2)]);
        let mut group = ShareGroup::default();
        group
            .heartbeat(&beat("a", 0, Some(&["t"])), LIMITS, &image, 0)
            .unwrap();
        group
            .heartbeat(&beat("b", 0, Some(&["t"])), LIMITS, &image, 0)
            .unwrap();
        let moved = group
            .heartbeat(&beat("a", 1, None), LIMITS, &image, 0)
            .unwrap();
        assert_eq!(moved.member_epoch, 2);
        // That answer never arrived: a heartbeats with epoch 1 again.
        let again = group
            .heartbeat(&beat("a", 1, None), LIMITS, &image, 0)
            .unwrap();
        assert_eq!(again.member_epoch, 2);
        assert_eq!(again.assignment, moved.assignment, "sent again");
        assert_eq!(
            group.heartbeat(&beat("a", 3, None), LIMITS, &image, 0),
            Err(ResponseError::FencedMemberEpoch),
            "neither the epoch nor the one before"
        );
    }

    #[test]
    fn joins_beyond_the_max_size_are_refused() {
        let image = image_with(&[("t", 1, 1)]);
        let mut group = ShareGroup::default();
        for m in ["a", "b", "c"] {
            group
                .heartbeat(&beat(m, 0, Some(&["t"])), LIMITS, &image, 0)
                .unwrap();
        }
        assert_eq!(
            group.heartbeat(&beat("d", 0, Some(&["t"])), LIMITS, &image, 0),
            Err(ResponseError::GroupMaxSizeReached)
        );
        // A member joining again (epoch 0 after losing its state) is not new.
        assert!(group
            .heartbeat(&beat("a", 0, Some(&["t"])), LIMITS, &image, 0)
            .is_ok());
    }

    #[test]
    fn more_members_than_partitions_share_partitions() {
        let image = image_with(&[("t", 1, 2)]);
        let mut group = ShareGroup::default();
        for m in ["a", "b", "c"] {
            group
                .heartbeat(&beat(m, 0, Some(&["t"])), LIMITS, &image, 0)
                .unwrap();
        }
        let got: Vec<Vec<i32>> = group
            .members
            .values()
            .map(|m| partitions(&m.assignment))
            .collect();
        assert_eq!(got, vec![vec![0], vec![1], vec![0]]);
    }

    #[test]
    fn stale_epochs_unknown_members_and_expired_sessions_are_refused() {
        let image = image_with(&[("t", 1, 1)]);
        let mut group = ShareGroup::default();
        group
            .heartbeat(&beat("a", 0, Some(&["t"])), LIMITS, &image, 0)
            .unwrap();
        assert_eq!(
            group.heartbeat(&beat("a", 7, None), LIMITS, &image, 0),
            Err(ResponseError::FencedMemberEpoch)
        );
        assert_eq!(
            group.heartbeat(&beat("x", 1, None), LIMITS, &image, 0),
            Err(ResponseError::UnknownMemberId)
        );
        assert_eq!(
            group.heartbeat(&beat("b", 0, None), LIMITS, &image, 0),
            Err(ResponseError::InvalidRequest),
            "a join names its topics"
        );
        let mut groups = ShareGroups::default();
        groups.insert("g", group);
        assert!(groups.expired(44_999).is_empty());
        assert_eq!(groups.expired(45_000), vec![("g".into(), "a".into())]);
    }

    #[test]
    fn new_partitions_of_a_subscribed_topic_are_assigned() {
        let mut group = ShareGroup::default();
        let before = image_with(&[("t", 1, 1)]);
        group
            .heartbeat(&beat("a", 0, Some(&["t"])), LIMITS, &before, 0)
            .unwrap();
        let after = image_with(&[("t", 1, 3)]);
        let a = group
            .heartbeat(&beat("a", 1, None), LIMITS, &after, 0)
            .unwrap();
        assert_eq!(a.member_epoch, 2);
        assert_eq!(partitions(a.assignment.as_ref().unwrap()), vec![0, 1, 2]);
        // A member leaving hands nothing back here: it is only removed.
        let left = group
            .heartbeat(&beat("a", -1, None), LIMITS, &after, 0)
            .unwrap();
        assert_eq!(left.member_epoch, -1);
        assert_eq!(group.state(), ShareGroupState::Empty);
    }
}
