//! One shard's consumer-protocol groups: record replay (creating and
//! deleting groups), the timers that fence members, and the views that
//! ListGroups and ConsumerGroupDescribe report.

use std::collections::HashMap;

use tracing::warn;

use super::classic::ClassicGroup;
use super::consumer_config::ConsumerGroupConfig;
use super::consumer_group::{ConsumerGroup, ConsumerGroupState, MemberTimers};
use super::consumer_member::{Assignment, ConsumerMember, MemberState};
use super::consumer_records::ConsumerRecord;

#[derive(Debug, Default)]
pub struct ConsumerGroups {
    groups: HashMap<String, ConsumerGroup>,
}

/// Why a member is fenced by a timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    Session,
    Revocation,
    Join,
    Sync,
}

impl Expiry {
    pub fn reason(self) -> &'static str {
        match self {
            Self::Session => "the member session expired",
            Self::Revocation => {
                "the member failed to revoke its partitions within the rebalance timeout"
            }
            Self::Join => "the classic member failed to join within the rebalance timeout",
            Self::Sync => "the classic member failed to sync within the rebalance timeout",
        }
    }
}

/// A group as ConsumerGroupDescribe reports it.
#[derive(Debug, Clone)]
pub struct DescribedConsumerGroup {
    pub state: ConsumerGroupState,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    /// Each member with its target assignment.
    pub members: Vec<(ConsumerMember, Assignment)>,
}

impl ConsumerGroups {
    pub fn get(&self, id: &str) -> Option<&ConsumerGroup> {
        self.groups.get(id)
    }

    pub fn contains(&self, id: &str) -> bool {
        self.groups.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn ids(&self) -> impl Iterator<Item = &String> {
        self.groups.keys()
    }

    /// Applies a stored record. A group record creates the group, replacing
    /// a classic group of the same id: Kafka only allows that for the empty
    /// ("simple") group an offset commit creates, which no record backs.
    pub fn replay(&mut self, record: ConsumerRecord, classic: &mut HashMap<String, ClassicGroup>) {
        let id = record.group().to_string();
        match record {
            ConsumerRecord::GroupMetadata { value: None, .. } => {
                self.groups.remove(&id);
            }
            ConsumerRecord::GroupMetadata {
                value: Some((epoch, hash)),
                ..
            } => {
                let group = self.get_or_create(&id, classic);
                group.epoch = epoch;
                group.metadata_hash = hash;
            }
            r if r.is_tombstone() => {
                if let Some(group) = self.groups.get_mut(&id) {
                    group.replay(r);
                }
            }
            r => self.get_or_create(&id, classic).replay(r),
        }
    }

    fn get_or_create(
        &mut self,
        id: &str,
        classic: &mut HashMap<String, ClassicGroup>,
    ) -> &mut ConsumerGroup {
        self.groups.entry(id.to_string()).or_insert_with(|| {
            if let Some(old) = classic.remove(id) {
                if !old.is_empty() || old.protocol_type().is_some() {
                    warn!(group = %id, "a consumer group record replaces a classic group");
                }
            }
            ConsumerGroup::new(id)
        })
    }

    /// After loading: every member gets a full session to heartbeat again,
    /// and members that were revoking a full rebalance timeout.
    pub fn on_loaded(&mut self, now: i64, config: &ConsumerGroupConfig) {
        for g in self.groups.values_mut() {
            let timers = g
                .members
                .values()
                .map(|m| {
                    let revocation =
                        (m.current.state == MemberState::UnrevokedPartitions).then(|| {
                            (
                                now + i64::from(m.sub.rebalance_timeout_ms.max(0)),
                                m.current.epoch,
                            )
                        });
                    let session = m.session_timeout_ms(config.session_timeout_ms);
                    (
                        m.id.clone(),
                        MemberTimers {
                            session_deadline: now + i64::from(session),
                            revocation_deadline: revocation,
                            ..MemberTimers::default()
                        },
                    )
                })
                .collect();
            g.timers = timers;
        }
    }

    pub fn set_timers(&mut self, group: &str, member: &str, timers: MemberTimers) {
        // A timer set for a member whose records were not applied (gone, or
        // its group converted) would fence a stranger.
        if let Some(g) = self.groups.get_mut(group) {
            if g.members.contains_key(member) {
                g.timers.insert(member.to_string(), timers);
            }
        }
    }

    pub fn set_image_checked(&mut self, group: &str, offset: i64) {
        if let Some(g) = self.groups.get_mut(group) {
            g.image_checked = offset;
        }
    }

    /// Members whose session or revocation deadline has passed.
    pub fn expired(&self, now: i64) -> Vec<(String, String, Expiry)> {
        let mut due = Vec::new();
        for g in self.groups.values() {
            for (member, t) in &g.timers {
                let Some(m) = g.members.get(member) else {
                    continue;
                };
                let passed = |deadline: Option<i64>| deadline.is_some_and(|d| d <= now);
                if t.session_deadline <= now {
                    due.push((g.id.clone(), member.clone(), Expiry::Session));
                } else if passed(t.join_deadline) {
                    due.push((g.id.clone(), member.clone(), Expiry::Join));
                } else if passed(t.sync_deadline) {
                    due.push((g.id.clone(), member.clone(), Expiry::Sync));
                } else if let Some((deadline, epoch)) = t.revocation_deadline {
                    if deadline <= now
                        && m.current.state == MemberState::UnrevokedPartitions
                        && m.current.epoch == epoch
                    {
                        due.push((g.id.clone(), member.clone(), Expiry::Revocation));
                    }
                }
            }
        }
        due
    }

    /// Groups matching the state filter (lower-case names; empty matches all).
    pub fn list(&self, states: &[String]) -> Vec<(String, ConsumerGroupState)> {
        self.groups
            .values()
            .map(|g| (g.id.clone(), g.state()))
            .filter(|(_, s)| states.is_empty() || states.contains(&s.name().to_lowercase()))
            .collect()
    }

    pub fn describe(
        &self,
        id: &str,
        config: &ConsumerGroupConfig,
    ) -> Option<DescribedConsumerGroup> {
        let g = self.groups.get(id)?;
        Some(DescribedConsumerGroup {
            state: g.state(),
            epoch: g.epoch,
            assignment_epoch: g.assignment_epoch,
            assignor: config
                .preferred_assignor(g.members.values().map(|m| &m.sub))
                .to_string(),
            members: g
                .members
                .values()
                .map(|m| (m.clone(), g.targets.get(&m.id).cloned().unwrap_or_default()))
                .collect(),
        })
    }
}
