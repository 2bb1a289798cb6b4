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

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use uuid::Uuid;

pub const SHARE_GROUP_TYPE: &str = "share";

/// Topic id -> partitions.
pub type ShareAssignment = BTreeMap<Uuid, BTreeSet<i32>>;

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

/// A share group's timing, from its config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareTimeouts {
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i32,
}

#[derive(Debug, Clone)]
pub struct ShareMember {
    pub member_id: String,
    pub epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: BTreeSet<String>,
    pub assignment: ShareAssignment,
    session_deadline: i64,
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

#[derive(Debug, Clone, Default)]
pub struct ShareGroup {
    pub epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    /// The epoch the members' assignment was computed at, and the subscribed
    /// topics' (name, id, partition count) it was computed from.
    assignment_epoch: i32,
    assigned_from: Vec<(String, Uuid, usize)>,
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

    fn subscribed_topics(&self) -> BTreeSet<&str> {
        self.members
            .values()
            .flat_map(|m| m.subscribed.iter().map(String::as_str))
            .collect()
    }

    /// The subscribed topics as `image` has them.
    fn topics_in(&self, image: &MetadataImage) -> Vec<(String, Uuid, usize)> {
        self.subscribed_topics()
            .into_iter()
            .filter_map(|name| {
                let t = image.topic_by_name(name)?;
                Some((name.to_string(), t.id, t.partitions.len()))
            })
            .collect()
    }

    /// Computes every member's assignment at the group epoch, if the
    /// members or their topics changed since the last computation.
    fn refresh_assignment(&mut self, image: &MetadataImage) {
        let topics = self.topics_in(image);
        // A change of the topics is a new epoch, unless one is pending.
        if topics != self.assigned_from && self.assignment_epoch == self.epoch {
            self.epoch += 1;
        }
        if self.assignment_epoch == self.epoch {
            return;
        }
        let assignments = assign(&self.members, &topics);
        for (id, member) in self.members.iter_mut() {
            member.assignment = assignments.get(id).cloned().unwrap_or_default();
        }
        self.assigned_from = topics;
        self.assignment_epoch = self.epoch;
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

    pub fn list(&self) -> impl Iterator<Item = (&String, &ShareGroup)> {
        self.groups.iter()
    }

    /// ShareGroupHeartbeat: joins (epoch 0), heartbeats and leaves (-1).
    pub fn heartbeat(
        &mut self,
        req: &ShareHeartbeat,
        timeouts: ShareTimeouts,
        image: &MetadataImage,
        now: i64,
    ) -> Result<ShareHeartbeatAnswer, ResponseError> {
        validate(req)?;
        let group = self.groups.entry(req.group_id.clone()).or_default();
        let deadline = now + timeouts.session_timeout_ms;
        match req.member_epoch {
            LEAVE_EPOCH => {
                if group.members.remove(&req.member_id).is_some() {
                    group.epoch += 1;
                    group.refresh_assignment(image);
                }
                return Ok(ShareHeartbeatAnswer {
                    member_id: req.member_id.clone(),
                    member_epoch: LEAVE_EPOCH,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                });
            }
            0 => {
                let subscribed: BTreeSet<String> =
                    req.topic_names.iter().flatten().cloned().collect();
                group.members.insert(
                    req.member_id.clone(),
                    ShareMember {
                        member_id: req.member_id.clone(),
                        epoch: 0,
                        rack_id: req.rack_id.clone(),
                        client_id: req.client_id.clone(),
                        client_host: req.client_host.clone(),
                        subscribed,
                        assignment: ShareAssignment::new(),
                        session_deadline: deadline,
                    },
                );
                group.epoch += 1;
            }
            epoch => {
                let member = group
                    .members
                    .get_mut(&req.member_id)
                    .ok_or(ResponseError::UnknownMemberId)?;
                if epoch != member.epoch {
                    return Err(ResponseError::FencedMemberEpoch);
                }
                member.session_deadline = deadline;
                if let Some(names) = &req.topic_names {
                    let subscribed: BTreeSet<String> = names.iter().cloned().collect();
                    if subscribed != member.subscribed {
                        member.subscribed = subscribed;
                        group.epoch += 1;
                    }
                }
            }
        }
        group.refresh_assignment(image);
        let assignment_epoch = group.assignment_epoch;
        let member = group
            .members
            .get_mut(&req.member_id)
            .expect("joined or checked above");
        let changed = member.epoch != assignment_epoch;
        member.epoch = assignment_epoch;
        Ok(ShareHeartbeatAnswer {
            member_id: member.member_id.clone(),
            member_epoch: member.epoch,
            heartbeat_interval_ms: timeouts.heartbeat_interval_ms,
            assignment: (changed || req.member_epoch == 0).then(|| member.assignment.clone()),
        })
    }

    /// Removes the members whose session ended by `now`; the (group,
    /// member) pairs removed.
    pub fn expire_members(&mut self, now: i64, image: &MetadataImage) -> Vec<(String, String)> {
        let mut expired = Vec::new();
        for (group_id, group) in self.groups.iter_mut() {
            let before = group.members.len();
            group.members.retain(|id, m| {
                let alive = m.session_deadline > now;
                if !alive {
                    expired.push((group_id.clone(), id.clone()));
                }
                alive
            });
            if group.members.len() != before {
                group.epoch += 1;
                group.refresh_assignment(image);
            }
        }
        expired
    }

    /// DeleteGroups of a share group: only an empty one.
    pub fn delete(&mut self, group_id: &str) -> Option<Result<(), ResponseError>> {
        let group = self.groups.get(group_id)?;
        if !group.members.is_empty() {
            return Some(Err(ResponseError::NonEmptyGroup));
        }
        self.groups.remove(group_id);
        Some(Ok(()))
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
mod tests {
    use super::*;
    use crate::test_images::image_with;

    const TIMEOUTS: ShareTimeouts = ShareTimeouts {
        session_timeout_ms: 45_000,
        heartbeat_interval_ms: 5_000,
    };

    fn beat(member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeat {
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
        let mut groups = ShareGroups::default();
        let a = groups
            .heartbeat(&beat("a", 0, Some(&["t"])), TIMEOUTS, &image, 0)
            .unwrap();
        assert_eq!(a.member_epoch, 1);
        assert_eq!(partitions(a.assignment.as_ref().unwrap()), vec![0, 1, 2, 3]);
        let b = groups
            .heartbeat(&beat("b", 0, Some(&["t"])), TIMEOUTS, &image, 0)
            .unwrap();
        assert_eq!(b.member_epoch, 2);
        assert_eq!(partitions(b.assignment.as_ref().unwrap()), vec![1, 3]);
        // a learns its smaller share on its next heartbeat, no revocation.
        let a = groups
            .heartbeat(&beat("a", 1, None), TIMEOUTS, &image, 0)
            .unwrap();
        assert_eq!(a.member_epoch, 2);
        assert_eq!(partitions(a.assignment.as_ref().unwrap()), vec![0, 2]);
        let a = groups
            .heartbeat(&beat("a", 2, None), TIMEOUTS, &image, 0)
            .unwrap();
        assert_eq!(a.assignment, None, "unchanged");
    }

    #[test]
    fn more_members_than_partitions_share_partitions() {
        let image = image_with(&[("t", 1, 2)]);
        let mut groups = ShareGroups::default();
        for m in ["a", "b", "c"] {
            groups
                .heartbeat(&beat(m, 0, Some(&["t"])), TIMEOUTS, &image, 0)
                .unwrap();
        }
        let group = groups.get("g").unwrap();
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
        let mut groups = ShareGroups::default();
        groups
            .heartbeat(&beat("a", 0, Some(&["t"])), TIMEOUTS, &image, 0)
            .unwrap();
        assert_eq!(
            groups.heartbeat(&beat("a", 7, None), TIMEOUTS, &image, 0),
            Err(ResponseError::FencedMemberEpoch)
        );
        assert_eq!(
            groups.heartbeat(&beat("x", 1, None), TIMEOUTS, &image, 0),
            Err(ResponseError::UnknownMemberId)
        );
        assert_eq!(
            groups.heartbeat(&beat("b", 0, None), TIMEOUTS, &image, 0),
            Err(ResponseError::InvalidRequest),
            "a join names its topics"
        );
        assert!(groups.expire_members(44_999, &image).is_empty());
        assert_eq!(
            groups.expire_members(45_000, &image),
            vec![("g".into(), "a".into())]
        );
        assert_eq!(groups.get("g").unwrap().state(), ShareGroupState::Empty);
        assert_eq!(groups.delete("g"), Some(Ok(())));
    }

    #[test]
    fn new_partitions_of_a_subscribed_topic_are_assigned() {
        let mut groups = ShareGroups::default();
        let before = image_with(&[("t", 1, 1)]);
        groups
            .heartbeat(&beat("a", 0, Some(&["t"])), TIMEOUTS, &before, 0)
            .unwrap();
        let after = image_with(&[("t", 1, 3)]);
        let a = groups
            .heartbeat(&beat("a", 1, None), TIMEOUTS, &after, 0)
            .unwrap();
        assert_eq!(a.member_epoch, 2);
        assert_eq!(partitions(a.assignment.as_ref().unwrap()), vec![0, 1, 2]);
        // A member leaving hands nothing back here: it is only removed.
        let left = groups
            .heartbeat(&beat("a", -1, None), TIMEOUTS, &after, 0)
            .unwrap();
        assert_eq!(left.member_epoch, -1);
        assert_eq!(groups.delete("g"), Some(Ok(())));
    }
}
