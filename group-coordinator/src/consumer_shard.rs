//! The consumer-protocol side of a shard: ConsumerGroupHeartbeat, the
//! timers that fence members, ConsumerGroupDescribe, the consumer-group
//! cases of offset commits, offset and group deletion, and the classic
//! requests of members still on the classic protocol (`consumer_classic`).
//! Every change is a list of records, appended and then replayed.

use std::collections::{HashMap, HashSet};

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use tracing::{info, warn};

use super::admin;
use super::consumer_classic;
use super::consumer_config::ConsumerGroupConfig;
use super::consumer_group::{ConsumerGroup, ConsumerGroupState};
use super::consumer_groups::DescribedConsumerGroup;
use super::consumer_heartbeat::{
    self, Decision, HeartbeatAnswer, HeartbeatError, HeartbeatRequest,
};
use super::consumer_leave;
use super::consumer_migration::Migration;
use super::member::{JoinResult, SyncResult};
use super::membership::{JoinRequest, LeavingMember, SyncRequest};
use super::offsets::{self, CommitRequest, PartitionCodes};
use super::records::CoordinatorRecord;
use super::shard::{Shard, ShardState};
use super::writer::Ctx;

impl ShardState {
    /// Appends `records` as one batch, then applies them.
    fn write(
        &mut self,
        records: Vec<CoordinatorRecord>,
        ctx: &Ctx<'_>,
    ) -> Result<(), ResponseError> {
        ctx.writer.append(&records)?;
        for r in records {
            self.replay(r, ctx.now);
        }
        Ok(())
    }

    /// Appends a decision's records, applies them and the soft state they
    /// come with; the answer once they are stored.
    fn apply<A>(
        &mut self,
        group_id: &str,
        decision: Decision<A>,
        ctx: &Ctx<'_>,
    ) -> Result<A, ResponseError> {
        if decision.migration == Some(Migration::Upgraded) {
            if let Some(classic) = self.groups.get_mut(group_id) {
                // Parked members rejoin the consumer group.
                classic.abort_pending_requests(ResponseError::RebalanceInProgress);
            }
        }
        self.write(decision.records, ctx)?;
        for (member, timers) in decision.timers {
            self.consumer.set_timers(group_id, &member, timers);
        }
        if let Some(offset) = decision.image_checked {
            self.consumer.set_image_checked(group_id, offset);
        }
        if decision.migration == Some(Migration::Downgraded) {
            if let Some(classic) = self.groups.get_mut(group_id) {
                classic.prepare_rebalance(ctx, "the group was downgraded to the classic protocol");
            }
        }
        Ok(decision.answer)
    }

    fn consumer_heartbeat(
        &mut self,
        req: &HeartbeatRequest,
        image: &MetadataImage,
        ctx: &Ctx<'_>,
    ) -> Result<HeartbeatAnswer, HeartbeatError> {
        if self.share.contains(&req.group_id) || self.streams.contains(&req.group_id) {
            // As Kafka: "Group X is not a consumer group."
            return Err(ResponseError::GroupIdNotFound.into());
        }
        let decision =
            consumer_heartbeat::heartbeat(&self.consumer, &self.groups, req, image, ctx)?;
        Ok(self.apply(&req.group_id, decision, ctx)?)
    }

    /// A consumer group with members, which classic requests then go to.
    fn populated_consumer_group(&self, id: &str) -> Option<&ConsumerGroup> {
        self.consumer.get(id).filter(|g| !g.members.is_empty())
    }

    /// JoinGroup to a consumer group with members (None for other groups).
    pub(super) fn classic_join_consumer_group(
        &mut self,
        req: &JoinRequest,
        image: &MetadataImage,
        ctx: &Ctx<'_>,
    ) -> Option<JoinResult> {
        let group = self.populated_consumer_group(&req.group_id)?;
        let result = consumer_classic::join(group, req, image, ctx)
            .and_then(|decision| self.apply(&req.group_id, decision, ctx));
        Some(result.unwrap_or_else(|e| JoinResult::error(&req.member_id, e)))
    }

    /// SyncGroup to a consumer group (None for other groups); an empty one
    /// has no member to answer.
    pub(super) fn classic_sync_consumer_group(
        &mut self,
        req: &SyncRequest,
        image: &MetadataImage,
        ctx: &Ctx<'_>,
    ) -> Option<SyncResult> {
        let group = self.consumer.get(&req.group_id)?;
        let decision = consumer_classic::sync(group, req, image, ctx);
        let result = self.apply(&req.group_id, decision, ctx).and_then(|r| r);
        Some(result.unwrap_or_else(SyncResult::error))
    }

    /// Heartbeat to a consumer group (None for other groups).
    pub(super) fn classic_heartbeat_consumer_group(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        ctx: &Ctx<'_>,
    ) -> Option<Result<(), ResponseError>> {
        let group = self.consumer.get(group_id)?;
        let decision = consumer_classic::heartbeat(group, member_id, instance_id, generation, ctx);
        Some(self.apply(group_id, decision, ctx).and_then(|r| r))
    }

    /// LeaveGroup to a consumer group (None for other groups).
    pub(super) fn classic_leave_consumer_group(
        &mut self,
        group_id: &str,
        members: &[LeavingMember],
        image: &MetadataImage,
        ctx: &Ctx<'_>,
    ) -> Option<Vec<i16>> {
        let group = self.consumer.get(group_id)?;
        let (codes, records) = consumer_classic::leave(group, members, image);
        if !records.is_empty() {
            info!(group = group_id, "classic members left the consumer group");
        }
        Some(match self.write(records, ctx) {
            Ok(()) => codes,
            Err(e) => vec![e.code(); codes.len()],
        })
    }

    /// Before a classic JoinGroup: an empty consumer group gives way (its
    /// records are deleted, its offsets kept, as Kafka converts it).
    pub(super) fn make_way_for_classic(
        &mut self,
        group_id: &str,
        ctx: &Ctx<'_>,
    ) -> Result<(), ResponseError> {
        let Some(group) = self.consumer.get(group_id) else {
            return Ok(());
        };
        let records = group
            .deletion_records()
            .map_err(|_| ResponseError::InconsistentGroupProtocol)?;
        self.write(
            records
                .into_iter()
                .map(CoordinatorRecord::Consumer)
                .collect(),
            ctx,
        )
    }

    /// OffsetCommit to a consumer group (None for other groups): members
    /// commit with their member epoch (STALE_MEMBER_EPOCH otherwise).
    pub(super) fn commit_consumer_offsets(
        &mut self,
        req: &CommitRequest,
        ctx: &Ctx<'_>,
    ) -> Option<PartitionCodes> {
        let group = self.consumer.get(&req.group_id)?;
        if let Err(e) =
            group.validate_offset_commit(&req.member_id, req.generation_id, req.api_version)
        {
            return Some(req.codes(e.code()));
        }
        // The offsets of a consumer group create no classic group.
        Some(offsets::store_commit(
            &mut HashMap::new(),
            &mut self.offsets,
            req,
            ctx,
        ))
    }

    /// Committed transactional offsets may create a "simple" classic group
    /// for their group id; a consumer or streams group of that id owns its
    /// offsets.
    pub(super) fn drop_shadowed_classic_groups(&mut self) {
        for id in self.consumer.ids() {
            self.groups.remove(id);
        }
        for (id, _) in self.streams.list() {
            self.groups.remove(id);
        }
    }

    /// OffsetDelete on a consumer group (None for other groups): allowed
    /// with members, except for topics they subscribe to.
    pub(super) fn delete_consumer_offsets(
        &mut self,
        group_id: &str,
        topics: &[(String, Vec<i32>)],
        ctx: &Ctx<'_>,
    ) -> Option<Result<PartitionCodes, ResponseError>> {
        let group = self.consumer.get(group_id)?;
        let subscribed: HashSet<&str> = topics
            .iter()
            .map(|(t, _)| t.as_str())
            .filter(|t| group.is_subscribed_to(t))
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

    /// DeleteGroups: consumer groups (empty ones only) with their offsets
    /// in one batch, classic groups by `admin::delete`. One code per id.
    pub(super) fn delete_groups(&mut self, ids: &[String], ctx: &Ctx<'_>) -> Vec<i16> {
        let mut codes: Vec<Option<i16>> = vec![None; ids.len()];
        let mut records = Vec::new();
        let mut deleted = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let Some(group) = self.consumer.get(id) else {
                continue;
            };
            match group.deletion_records() {
                Ok(tombstones) => {
                    records.extend(self.offsets.tombstones(id));
                    records.extend(tombstones.into_iter().map(CoordinatorRecord::Consumer));
                    deleted.push(i);
                    codes[i] = Some(0);
                }
                Err(e) => codes[i] = Some(e.code()),
            }
        }
        if let Err(e) = self.write(records, ctx) {
            for &i in &deleted {
                codes[i] = Some(e.code());
            }
        } else if !deleted.is_empty() {
            info!(groups = ?deleted.iter().map(|&i| &ids[i]).collect::<Vec<_>>(), "deleted consumer groups");
        }
        let classic: Vec<String> = ids
            .iter()
            .zip(&codes)
            .filter(|(_, c)| c.is_none())
            .map(|(id, _)| id.clone())
            .collect();
        let mut classic_codes =
            admin::delete(&mut self.groups, &mut self.offsets, &classic, ctx).into_iter();
        codes
            .into_iter()
            .map(|c| c.or_else(|| classic_codes.next()).unwrap_or(0))
            .collect()
    }

    /// Fences members whose session or revocation deadline passed.
    pub(super) fn expire_consumer_members(&mut self, image: &MetadataImage, ctx: &Ctx<'_>) {
        for (group_id, member, why) in self.consumer.expired(ctx.now) {
            let Some(group) = self.consumer.get(&group_id) else {
                continue;
            };
            if !group.members.contains_key(&member) {
                continue;
            }
            info!(group = %group_id, member = %member, reason = why.reason(), "fencing a consumer group member");
            let decision = consumer_leave::fence(group, &member, image, ctx).with_answer(());
            if let Err(e) = self.apply(&group_id, decision, ctx) {
                warn!(group = %group_id, member = %member, error = %e, "could not fence the member; will retry");
            }
        }
    }
}

impl Shard {
    /// ConsumerGroupHeartbeat (joins, heartbeats and leaves).
    pub fn consumer_heartbeat(
        &self,
        req: &HeartbeatRequest,
        image: &MetadataImage,
        now: i64,
    ) -> Result<HeartbeatAnswer, HeartbeatError> {
        self.with_state(now, |st, ctx| st.consumer_heartbeat(req, image, ctx))
    }

    pub fn is_consumer_group(&self, group_id: &str) -> bool {
        self.state.lock().consumer.contains(group_id)
    }

    pub fn describe_consumer_group(
        &self,
        group_id: &str,
        config: &ConsumerGroupConfig,
    ) -> Option<DescribedConsumerGroup> {
        self.state.lock().consumer.describe(group_id, config)
    }

    /// Consumer groups matching the (lower-case) state filter.
    pub fn list_consumer_groups(&self, states: &[String]) -> Vec<(String, ConsumerGroupState)> {
        self.state.lock().consumer.list(states)
    }

    /// OffsetFetch v9's member check for consumer and streams groups (other
    /// groups accept any fetch).
    pub fn validate_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        let st = self.state.lock();
        if let Some(g) = st.consumer.get(group_id) {
            return g.validate_offset_fetch(member_id, member_epoch);
        }
        if let Some(g) = st.streams.get(group_id) {
            return g.validate_offset_fetch(member_id, member_epoch);
        }
        Ok(())
    }
}
