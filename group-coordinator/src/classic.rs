//! A classic group's data: state, generation, protocol, leader, members
//! (static ones by instance id), members pending a join or a sync, and the
//! timers of the rebalance in progress. The steps that move a group between
//! states are in `rebalance.rs`.

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::member::{JoinResult, JoinedMember, Member, Protocol, SyncResult};
use super::records::{CoordinatorRecord, GroupMetadataValue, MemberMetadata};
use super::subscription::{subscribed_topics, CONSUMER_PROTOCOL_TYPE};

/// The state Kafka reports for a group that does not exist.
pub const DEAD: &str = "Dead";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl GroupState {
    /// Kafka's names, as DescribeGroups and ListGroups report them.
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::PreparingRebalance => "PreparingRebalance",
            Self::CompletingRebalance => "CompletingRebalance",
            Self::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinTimerKind {
    /// The first rebalance of an empty group waits
    /// `group.initial.rebalance.delay.ms`, extended while members keep
    /// arriving, up to the rebalance timeout.
    Initial { delay_ms: i64, remaining_ms: i64 },
    /// Members that have not rejoined by then are dropped.
    Rebalance,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JoinTimer {
    pub deadline: i64,
    pub kind: JoinTimerKind,
}

/// Members that got their JoinGroup answer must send SyncGroup by `deadline`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncTimer {
    pub deadline: i64,
    pub generation: i32,
}

#[derive(Debug)]
pub struct ClassicGroup {
    pub id: String,
    pub(super) state: GroupState,
    pub(super) previous_state: Option<GroupState>,
    pub(super) state_timestamp: Option<i64>,
    pub(super) protocol_type: Option<String>,
    pub(super) protocol_name: Option<String>,
    pub(super) generation_id: i32,
    pub(super) leader_id: Option<String>,
    pub(super) members: BTreeMap<String, Member>,
    /// group.instance.id -> member id.
    pub(super) static_members: HashMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED -> when they expire.
    pub(super) pending_join: HashMap<String, i64>,
    pub(super) pending_sync: HashSet<String>,
    /// None when unknown (not a consumer group, or unparsable metadata).
    pub(super) subscribed_topics: Option<HashSet<String>>,
    pub(super) new_member_added: bool,
    pub(super) join_timer: Option<JoinTimer>,
    pub(super) sync_timer: Option<SyncTimer>,
}

impl ClassicGroup {
    pub fn new(id: &str, now: i64) -> Self {
        Self {
            id: id.to_string(),
            state: GroupState::Empty,
            previous_state: None,
            state_timestamp: Some(now),
            protocol_type: None,
            protocol_name: None,
            generation_id: 0,
            leader_id: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_join: HashMap::new(),
            pending_sync: HashSet::new(),
            subscribed_topics: None,
            new_member_added: false,
            join_timer: None,
            sync_timer: None,
        }
    }

    /// A group as a GroupMetadata record describes it: Stable with its
    /// members, or Empty. Members must heartbeat again within their session.
    pub fn from_record(id: &str, v: GroupMetadataValue, now: i64) -> Self {
        let mut g = Self::new(id, now);
        g.state = if v.members.is_empty() {
            GroupState::Empty
        } else {
            GroupState::Stable
        };
        g.state_timestamp = (v.current_state_timestamp != -1).then_some(v.current_state_timestamp);
        g.generation_id = v.generation;
        g.protocol_name = v.protocol.clone();
        for m in v.members {
            let member = Member {
                id: m.member_id,
                group_instance_id: m.group_instance_id,
                client_id: m.client_id,
                client_host: m.client_host,
                rebalance_timeout_ms: m.rebalance_timeout,
                session_timeout_ms: m.session_timeout,
                protocol_type: v.protocol_type.clone(),
                protocols: vec![Protocol {
                    name: v.protocol.clone().unwrap_or_default(),
                    metadata: m.subscription,
                }],
                assignment: m.assignment,
                join_waiter: None,
                sync_waiter: None,
                is_new: false,
                heartbeat_deadline: Some(now + i64::from(m.session_timeout)),
            };
            g.add(member);
        }
        // `add` elects the first member and takes its protocol type; the
        // record names the real leader, and "" means no protocol type.
        g.leader_id = v.leader.or(g.leader_id);
        g.protocol_type = Some(v.protocol_type).filter(|t| !t.is_empty());
        g.subscribed_topics = g.compute_subscribed_topics();
        g
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    pub fn generation_id(&self) -> i32 {
        self.generation_id
    }

    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader_id.as_deref()
    }

    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    pub fn member(&self, id: &str) -> Option<&Member> {
        self.members.get(id)
    }

    pub fn is_leader(&self, id: &str) -> bool {
        self.leader_id.as_deref() == Some(id)
    }

    pub fn is_empty(&self) -> bool {
        self.state == GroupState::Empty
    }

    pub fn static_member_id(&self, instance_id: &str) -> Option<&str> {
        self.static_members.get(instance_id).map(String::as_str)
    }

    pub(super) fn transition(&mut self, to: GroupState, now: i64) {
        self.previous_state = Some(self.state);
        self.state = to;
        self.state_timestamp = Some(now);
    }

    /// PreparingRebalance may be entered from these states only.
    pub(super) fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            GroupState::Empty | GroupState::CompletingRebalance | GroupState::Stable
        )
    }

    pub(super) fn add(&mut self, member: Member) {
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(member.protocol_type.clone());
        }
        if self.leader_id.is_none() {
            self.leader_id = Some(member.id.clone());
        }
        self.pending_join.remove(&member.id);
        self.members.insert(member.id.clone(), member);
    }

    /// Removes a member (or a pending one). Parked requests are answered
    /// UNKNOWN_MEMBER_ID so a live client rejoins; a leaving leader is
    /// replaced by another member.
    pub(super) fn remove(&mut self, id: &str) {
        if let Some(mut m) = self.members.remove(id) {
            m.complete_join(JoinResult::error("", ResponseError::UnknownMemberId));
            m.complete_sync(SyncResult::error(ResponseError::UnknownMemberId));
            if let Some(instance) = &m.group_instance_id {
                self.static_members.remove(instance);
            }
        }
        if self.is_leader(id) {
            self.leader_id = self.members.keys().next().cloned();
        }
        self.pending_join.remove(id);
        self.pending_sync.remove(id);
    }

    /// Answers every parked JoinGroup and SyncGroup with `error`.
    pub(super) fn abort_pending_requests(&mut self, error: ResponseError) {
        for member in self.members.values_mut() {
            member.complete_join(JoinResult::error(&member.id, error));
            member.complete_sync(SyncResult::error(error));
        }
    }

    pub(super) fn has_all_members_joined(&self) -> bool {
        self.pending_join.is_empty() && self.members.values().all(Member::is_awaiting_join)
    }

    /// If the leader has not rejoined, hands leadership to a member that has.
    /// False when nobody has rejoined.
    pub(super) fn maybe_elect_new_joined_leader(&mut self) -> bool {
        let Some(leader) = self.leader_id.as_deref() else {
            return false;
        };
        if self
            .members
            .get(leader)
            .is_some_and(Member::is_awaiting_join)
        {
            return true;
        }
        match self.members.values().find(|m| m.is_awaiting_join()) {
            Some(m) => {
                self.leader_id = Some(m.id.clone());
                true
            }
            None => false,
        }
    }

    /// The longest rebalance timeout among members.
    pub(super) fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    /// Protocols every member supports.
    fn candidate_protocols(&self) -> Vec<&str> {
        let Some(first) = self.members.values().next() else {
            return Vec::new();
        };
        first
            .protocols
            .iter()
            .map(|p| p.name.as_str())
            .filter(|name| self.members.values().all(|m| m.supports(name)))
            .collect()
    }

    /// Each member votes for its preferred candidate; the most votes win.
    /// Kafka breaks ties arbitrarily; here the name that sorts first wins.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(choice) = m.vote(&candidates) {
                *votes.entry(choice).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        votes
            .into_iter()
            .find(|&(_, n)| n == best)
            .map(|(name, _)| name.to_string())
    }

    /// Whether a member with these protocols may join: an empty group takes
    /// any non-empty type and list; otherwise the type must match and one
    /// protocol must be supported by every current member.
    pub(super) fn supports_protocols(&self, protocol_type: &str, protocols: &[Protocol]) -> bool {
        if self.state == GroupState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|p| self.members.values().all(|m| m.supports(&p.name)))
    }

    /// UNKNOWN_MEMBER_ID for strangers; FENCED_INSTANCE_ID when the instance
    /// id now belongs to another member id.
    pub(super) fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), ResponseError> {
        if let Some(instance) = instance_id {
            match self.static_member_id(instance) {
                None => return Err(ResponseError::UnknownMemberId),
                Some(existing) if existing != member_id => {
                    return Err(ResponseError::FencedInstanceId)
                }
                Some(_) => {}
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(ResponseError::UnknownMemberId);
        }
        Ok(())
    }

    /// Kafka's ClassicGroup.validateOffsetCommit for non-transactional commits.
    pub(super) fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
    ) -> Result<(), ResponseError> {
        if generation < 0 && self.is_empty() {
            // The admin client, or a consumer that manages its own assignment.
            return Ok(());
        }
        if generation >= 0 || !member_id.is_empty() || instance_id.is_some() {
            self.validate_member(member_id, instance_id)?;
            if generation != self.generation_id {
                return Err(ResponseError::IllegalGeneration);
            }
        } else if !self.is_empty() {
            return Err(ResponseError::UnknownMemberId);
        }
        if self.state == GroupState::CompletingRebalance {
            // The member knows the new generation but has no assignment yet.
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    pub(super) fn uses_consumer_protocol(&self) -> bool {
        self.protocol_type.as_deref() == Some(CONSUMER_PROTOCOL_TYPE)
    }

    /// Union of the members' subscriptions for the selected protocol, when
    /// this is a consumer group whose metadata parses.
    pub(super) fn compute_subscribed_topics(&self) -> Option<HashSet<String>> {
        if !self.uses_consumer_protocol() {
            return None;
        }
        if self.members.is_empty() {
            return Some(HashSet::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut all = HashSet::new();
        for m in self.members.values() {
            all.extend(subscribed_topics(m.metadata(protocol)?).ok()?);
        }
        Some(all)
    }

    /// When the subscriptions are unknown, a consumer group is assumed to
    /// use every topic (so its offsets are not deleted under it).
    pub fn is_subscribed_to_topic(&self, topic: &str) -> bool {
        match &self.subscribed_topics {
            Some(topics) => topics.contains(topic),
            None => self.uses_consumer_protocol(),
        }
    }

    /// The members with their metadata for the selected protocol, for the
    /// leader's JoinGroup answer.
    pub(super) fn joined_members(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        self.members
            .values()
            .map(|m| JoinedMember {
                member_id: m.id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(protocol).cloned().unwrap_or_default(),
            })
            .collect()
    }

    /// The JoinGroup answer for the current generation.
    pub(super) fn join_result(&self, member_id: &str, members: Vec<JoinedMember>) -> JoinResult {
        JoinResult {
            error: 0,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader_id.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            skip_assignment: false,
            members,
        }
    }

    /// Moves a static member to a new member id, fencing requests parked
    /// under the old one. Returns false if `old_id` is not a member.
    pub(super) fn replace_static_member(
        &mut self,
        instance_id: &str,
        old_id: &str,
        new_id: &str,
    ) -> bool {
        let Some(mut member) = self.members.remove(old_id) else {
            return false;
        };
        member.complete_join(JoinResult::error(old_id, ResponseError::FencedInstanceId));
        member.complete_sync(SyncResult::error(ResponseError::FencedInstanceId));
        member.id = new_id.to_string();
        self.members.insert(new_id.to_string(), member);
        if self.is_leader(old_id) {
            self.leader_id = Some(new_id.to_string());
        }
        self.static_members
            .insert(instance_id.to_string(), new_id.to_string());
        true
    }

    pub(super) fn current_assignment(&self) -> HashMap<String, Bytes> {
        self.members
            .values()
            .map(|m| (m.id.clone(), m.assignment.clone()))
            .collect()
    }

    /// The GroupMetadata record for the current generation with
    /// `assignment` (members missing from it get an empty assignment).
    pub(super) fn metadata_record(&self, assignment: &HashMap<String, Bytes>) -> CoordinatorRecord {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        let members = self
            .members
            .values()
            .map(|m| MemberMetadata {
                member_id: m.id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                rebalance_timeout: m.rebalance_timeout_ms,
                session_timeout: m.session_timeout_ms,
                subscription: m.metadata(protocol).cloned().unwrap_or_default(),
                assignment: assignment.get(&m.id).cloned().unwrap_or_default(),
            })
            .collect();
        CoordinatorRecord::GroupMetadata {
            group: self.id.clone(),
            value: Some(GroupMetadataValue {
                protocol_type: self.protocol_type.clone().unwrap_or_default(),
                generation: self.generation_id,
                protocol: self.protocol_name.clone(),
                leader: self.leader_id.clone(),
                current_state_timestamp: self.state_timestamp.unwrap_or(-1),
                members,
            }),
        }
    }

    /// The record Kafka writes when a JoinGroup creates a group, so that the
    /// group exists in the log before any rebalance completes.
    pub(super) fn created_record(&self) -> CoordinatorRecord {
        CoordinatorRecord::GroupMetadata {
            group: self.id.clone(),
            value: Some(GroupMetadataValue {
                protocol_type: String::new(),
                generation: 0,
                protocol: None,
                leader: None,
                current_state_timestamp: self.state_timestamp.unwrap_or(-1),
                members: Vec::new(),
            }),
        }
    }
}
