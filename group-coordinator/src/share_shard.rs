//! The share-group side of a shard: ShareGroupHeartbeat, ShareGroupDescribe,
//! ListGroups and DeleteGroups of share groups, the partitions whose share
//! state a group may hold, and the timer that removes members whose session
//! ended. A group id names one group of one type: share requests for a
//! classic, consumer or streams group are refused, as Kafka refuses them
//! ("Group X is not a share group").
//!
//! Every change is made to a copy of the group, whose records
//! (`share_log`) are appended before the shard keeps it: a reload rebuilds
//! what was served. Members of a loaded group have a session from the load
//! on; delivery state lives with the partition leaders and the share
//! coordinator, not here.

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use tracing::info;
use uuid::Uuid;

use super::records::CoordinatorRecord;
use super::shard::{Shard, ShardState};
use super::share_group::{
    ShareGroup, ShareGroupState, ShareHeartbeat, ShareHeartbeatAnswer, ShareLimits,
};
use super::share_log::records_between;
use super::writer::Ctx;

impl ShardState {
    /// Whether `group_id` is a classic, consumer or streams group.
    fn is_other_type(&self, group_id: &str) -> bool {
        self.groups.contains_key(group_id)
            || self.consumer.contains(group_id)
            || self.streams.contains(group_id)
    }

    /// Appends the records taking `group_id` to `after` (None: deleted),
    /// then keeps it.
    pub(super) fn write_share(
        &mut self,
        group_id: &str,
        after: Option<ShareGroup>,
        ctx: &Ctx<'_>,
    ) -> Result<(), ResponseError> {
        let records: Vec<CoordinatorRecord> =
            records_between(group_id, self.share.get(group_id), after.as_ref())
                .into_iter()
                .map(CoordinatorRecord::Share)
                .collect();
        ctx.writer.append(&records)?;
        match after {
            Some(group) => self.share.insert(group_id, group),
            None => self.share.remove(group_id),
        }
        Ok(())
    }

    /// Removes the members whose session ended; the others take their
    /// partitions.
    pub(super) fn expire_share_members(&mut self, image: &MetadataImage, ctx: &Ctx<'_>) {
        for (group_id, member) in self.share.expired(ctx.now) {
            let Some(mut group) = self.share.get(&group_id).cloned() else {
                continue;
            };
            group.remove_member(&member, image);
            match self.write_share(&group_id, Some(group), ctx) {
                Ok(()) => {
                    info!(group = %group_id, member = %member, "share group member's session ended")
                }
                Err(e) => {
                    tracing::warn!(group = %group_id, member = %member, error = %e, "could not remove the share member; will retry")
                }
            }
        }
    }

    /// DeleteGroups of a share group (None for other ids): only an empty
    /// one. Its share state must be deleted first (the broker does, from
    /// [`ShareGroup::state_partitions`]).
    pub(super) fn delete_share_group(
        &mut self,
        group_id: &str,
        ctx: &Ctx<'_>,
    ) -> Option<Result<(), ResponseError>> {
        let group = self.share.get(group_id)?;
        if !group.members.is_empty() {
            return Some(Err(ResponseError::NonEmptyGroup));
        }
        let deleted = self.write_share(group_id, None, ctx);
        if deleted.is_ok() {
            info!(group = %group_id, "deleted share group");
        }
        Some(deleted)
    }
}

impl Shard {
    pub fn share_heartbeat(
        &self,
        req: &ShareHeartbeat,
        limits: ShareLimits,
        image: &MetadataImage,
        now: i64,
    ) -> Result<ShareHeartbeatAnswer, ResponseError> {
        self.with_state(now, |st, ctx| {
            if st.is_other_type(&req.group_id) {
                return Err(ResponseError::GroupIdNotFound);
            }
            // Only a join creates a group; a leave from a group that is gone
            // is answered as done, writing nothing.
            let mut group = match st.share.get(&req.group_id) {
                Some(g) => g.clone(),
                None if req.member_epoch == 0 => ShareGroup::default(),
                None => {
                    let mut gone = ShareGroup::default();
                    return gone.heartbeat(req, limits, image, now);
                }
            };
            let answer = group.heartbeat(req, limits, image, now)?;
            st.write_share(&req.group_id, Some(group), ctx)?;
            Ok(answer)
        })
    }

    /// A share group as it stands; Err(GROUP_ID_NOT_FOUND) with whether
    /// the id is a group of another type.
    pub fn describe_share_group(&self, group_id: &str) -> Result<ShareGroup, bool> {
        let st = self.state.lock();
        st.share
            .get(group_id)
            .cloned()
            .ok_or_else(|| st.is_other_type(group_id))
    }

    pub fn is_share_group(&self, group_id: &str) -> bool {
        self.state.lock().share.contains(group_id)
    }

    /// Share groups in one of `states` (lower-case; none: all).
    pub fn list_share_groups(&self, states: &[String]) -> Vec<(String, ShareGroupState)> {
        self.state
            .lock()
            .share
            .list()
            .map(|(id, g)| (id.clone(), g.state()))
            .filter(|(_, s)| {
                states.is_empty() || states.iter().any(|f| f == &s.name().to_lowercase())
            })
            .collect()
    }

    /// Records that the share coordinator holds state of `group_id` for
    /// `partitions` of topic `topic_id` (an offset reset wrote it), as
    /// Kafka's AlterShareGroupOffsets does, creating the (empty) group if
    /// need be. GROUP_ID_NOT_FOUND for another type's group.
    pub fn add_share_state_partitions(
        &self,
        group_id: &str,
        topic_id: Uuid,
        topic_name: &str,
        partitions: &[i32],
        now: i64,
    ) -> Result<(), ResponseError> {
        self.with_state(now, |st, ctx| {
            if st.is_other_type(group_id) {
                return Err(ResponseError::GroupIdNotFound);
            }
            let mut group = st.share.get(group_id).cloned().unwrap_or_default();
            group.add_state_partitions(topic_id, topic_name, partitions.iter().copied());
            st.write_share(group_id, Some(group), ctx)
        })
    }

    /// Forgets the topics whose share state was deleted
    /// (DeleteShareGroupOffsets): they are no longer the group's.
    pub fn remove_share_state_topics(
        &self,
        group_id: &str,
        topic_ids: &[Uuid],
        now: i64,
    ) -> Result<(), ResponseError> {
        self.with_state(now, |st, ctx| {
            let Some(mut group) = st.share.get(group_id).cloned() else {
                return Ok(());
            };
            for id in topic_ids {
                group.state_partitions.remove(id);
            }
            st.write_share(group_id, Some(group), ctx)
        })
    }
}
