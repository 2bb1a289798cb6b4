//! The streams-group side of a shard (KIP-1071): StreamsGroupHeartbeat,
//! StreamsGroupDescribe, the streams cases of ListGroups, DeleteGroups and
//! offset commits, and the timers that fence members. A group id names one
//! group of one type: streams requests for another type's group are
//! refused, as Kafka refuses them ("Group X is not a streams group").

use std::collections::{HashMap, HashSet};

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use ottla_protocol::streams::heartbeat::StreamsGroupHeartbeatResponse;
use tracing::info;

use super::offsets::{self, PartitionCodes};
use super::records::CoordinatorRecord;
use super::shard::{Shard, ShardState};
use super::streams_group::{StreamsGroup, StreamsGroupState};
use super::streams_heartbeat::{self, remove_member, StreamsError, StreamsHeartbeat};
use super::streams_records::StreamsRecord;
use super::streams_topology::InternalTopic;
use super::writer::Ctx;

/// A heartbeat's answer and the internal topics the group still needs.
pub type StreamsHeartbeatAnswer =
    Result<(StreamsGroupHeartbeatResponse, Vec<InternalTopic>), StreamsError>;

impl ShardState {
    /// Whether `group_id` is a group of another type than streams.
    pub(super) fn is_other_than_streams(&self, group_id: &str) -> bool {
        self.groups.contains_key(group_id)
            || self.consumer.contains(group_id)
            || self.share.contains(group_id)
    }

    /// Appends a streams group's records, then keeps `group` (which they
    /// were applied to). With `replacing_classic`, the empty classic group
    /// of that id is deleted first (its offsets stay, now the streams
    /// group's), as Kafka replaces one.
    fn write_streams(
        &mut self,
        group_id: &str,
        group: StreamsGroup,
        records: Vec<StreamsRecord>,
        replacing_classic: bool,
        ctx: &Ctx<'_>,
    ) -> Result<(), ResponseError> {
        let classic_tombstone = replacing_classic.then(|| CoordinatorRecord::GroupMetadata {
            group: group_id.to_string(),
            value: None,
        });
        let records: Vec<CoordinatorRecord> = classic_tombstone
            .into_iter()
            .chain(records.into_iter().map(CoordinatorRecord::Streams))
            .collect();
        ctx.writer.append(&records)?;
        if replacing_classic {
            self.groups.remove(group_id);
        }
        self.streams.insert(group_id.to_string(), group);
        Ok(())
    }

    /// Whether a streams member joining `group_id` takes the place of an
    /// empty classic group (one holding only committed offsets, as the
    /// offsets a mirror synced, or a classic-protocol application left).
    fn replaces_empty_classic(&self, group_id: &str, member_epoch: i32) -> bool {
        member_epoch == 0
            && !self.consumer.contains(group_id)
            && !self.share.contains(group_id)
            && self
                .groups
                .get(group_id)
                .is_some_and(|g| g.members().next().is_none())
    }

    /// Fences the members whose session or rebalance timeout passed.
    pub(super) fn expire_streams_members(&mut self, ctx: &Ctx<'_>) {
        let mut fenced = Vec::new();
        for (id, group) in self.streams.list() {
            for (member_id, m) in &group.members {
                let late = m.session_deadline <= ctx.now
                    || m.rebalance_deadline.is_some_and(|d| d <= ctx.now);
                if late {
                    fenced.push((id.clone(), member_id.clone()));
                }
            }
        }
        for (group_id, member) in fenced {
            let Some(group) = self.streams.get(&group_id) else {
                continue;
            };
            let (group, records) = remove_member(group, &group_id, &member);
            if self
                .write_streams(&group_id, group, records, false, ctx)
                .is_ok()
            {
                info!(group = %group_id, member = %member, "streams group member fenced: its session or rebalance timeout passed");
            }
        }
    }

    /// DeleteGroups of a streams group (None for other ids).
    pub(super) fn delete_streams_group(
        &mut self,
        group_id: &str,
        ctx: &Ctx<'_>,
    ) -> Option<Result<(), ResponseError>> {
        let group = self.streams.get(group_id)?;
        if group.state() != StreamsGroupState::Empty {
            return Some(Err(ResponseError::NonEmptyGroup));
        }
        let g = group_id.to_string();
        let mut records: Vec<CoordinatorRecord> =
            self.offsets.tombstones(group_id).into_iter().collect();
        records.extend(
            [
                StreamsRecord::TargetAssignmentMetadata {
                    group: g.clone(),
                    value: None,
                },
                StreamsRecord::GroupMetadata {
                    group: g.clone(),
                    value: None,
                },
                StreamsRecord::Topology {
                    group: g,
                    value: None,
                },
            ]
            .into_iter()
            .map(CoordinatorRecord::Streams),
        );
        if let Err(e) = ctx.writer.append(&records) {
            return Some(Err(e));
        }
        for r in records {
            self.replay(r, ctx.now);
        }
        Some(Ok(()))
    }

    /// OffsetDelete on a streams group (None for other ids): refused per
    /// topic for the topics a group with members reads (its source and
    /// repartition topics), as Kafka refuses them.
    pub(super) fn delete_streams_offsets(
        &mut self,
        group_id: &str,
        topics: &[(String, Vec<i32>)],
        ctx: &Ctx<'_>,
    ) -> Option<Result<PartitionCodes, ResponseError>> {
        let group = self.streams.get(group_id)?;
        let read: HashSet<&str> = match &group.topology {
            Some(t) if !group.members.is_empty() => t
                .subtopologies
                .iter()
                .flat_map(|s| {
                    s.source_topics
                        .iter()
                        .chain(s.repartition_source_topics.iter().map(|t| &t.name))
                })
                .map(String::as_str)
                .collect(),
            _ => HashSet::new(),
        };
        let subscribed: HashSet<&str> = topics
            .iter()
            .map(|(t, _)| t.as_str())
            .filter(|t| read.contains(t))
            .collect();
        Some(offsets::delete_unsubscribed(
            &mut HashMap::new(),
            &mut self.offsets,
            group_id,
            topics,
            &subscribed,
            ctx,
        ))
    }

    /// An offset commit's check against a streams group (None for other
    /// ids): an empty group takes commits from anyone (the admin tools), a
    /// transactional producer's without a member too; otherwise the member
    /// must exist at its current epoch.
    pub(super) fn check_streams_commit(
        &self,
        group_id: &str,
        member_id: &str,
        epoch: i32,
        transactional: bool,
    ) -> Option<Result<(), ResponseError>> {
        let group = self.streams.get(group_id)?;
        let admin = epoch < 0 && group.members.is_empty();
        let memberless_producer = transactional && epoch < 0 && member_id.is_empty();
        if admin || memberless_producer {
            return Some(Ok(()));
        }
        Some(match group.members.get(member_id) {
            None => Err(ResponseError::UnknownMemberId),
            Some(m) if m.current.epoch != epoch => Err(ResponseError::StaleMemberEpoch),
            Some(_) => Ok(()),
        })
    }
}

impl Shard {
    pub fn streams_heartbeat(
        &self,
        hb: &StreamsHeartbeat,
        image: &MetadataImage,
        now: i64,
    ) -> StreamsHeartbeatAnswer {
        self.with_state(now, |st, ctx| {
            let id = &hb.request.group_id;
            let replacing_classic = st.replaces_empty_classic(id, hb.request.member_epoch);
            if st.is_other_than_streams(id) && !replacing_classic {
                return Err(StreamsError {
                    error: ResponseError::GroupIdNotFound,
                    message: Some(format!("Group {id} is not a streams group.")),
                });
            }
            let decision = streams_heartbeat::heartbeat(st.streams.get(id), hb, image, now)?;
            st.write_streams(id, decision.group, decision.records, replacing_classic, ctx)?;
            Ok((decision.response, decision.to_create))
        })
    }

    /// A streams group as it stands; Err(whether the id is a group of
    /// another type) when there is none.
    pub fn describe_streams_group(&self, group_id: &str) -> Result<StreamsGroup, bool> {
        let st = self.state.lock();
        st.streams
            .get(group_id)
            .cloned()
            .ok_or_else(|| st.is_other_than_streams(group_id))
    }

    /// Streams groups in one of `states` (any case; none: all).
    pub fn list_streams_groups(&self, states: &[String]) -> Vec<(String, StreamsGroupState)> {
        self.state
            .lock()
            .streams
            .list()
            .map(|(id, g)| (id.clone(), g.state()))
            .filter(|(_, s)| {
                states.is_empty() || states.iter().any(|f| f.eq_ignore_ascii_case(s.name()))
            })
            .collect()
    }
}
