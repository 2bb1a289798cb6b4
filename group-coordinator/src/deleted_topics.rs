//! Deleted topics leave the groups (Kafka's onPartitionsDeleted and
//! share-state cleanup): every group's committed offsets of a deleted topic
//! are removed with tombstones, so a topic created again under the name
//! starts without them (a consumer would otherwise resume at an offset of
//! the old log, and with `auto.offset.reset=latest` skip the new one's
//! records); share groups forget the topic's share partitions.

use std::collections::BTreeSet;

use tracing::{info, warn};
use uuid::Uuid;

use super::offsets;
use super::records::CoordinatorRecord;
use super::shard::ShardState;
use super::writer::Ctx;

impl ShardState {
    /// Forgets `names` (committed offsets) and `ids` (share partitions),
    /// the topics deleted since the last image. A failed append is logged;
    /// the records are not written and the state is left as it was.
    pub(super) fn forget_deleted_topics(
        &mut self,
        names: &BTreeSet<String>,
        ids: &BTreeSet<Uuid>,
        ctx: &Ctx<'_>,
    ) {
        let tombstones = self.offsets.tombstones_of_topics(names);
        if !tombstones.is_empty() {
            if let Err(e) = ctx.writer.append(&tombstones) {
                warn!(error = %e, "could not remove the committed offsets of deleted topics");
                return;
            }
            info!(offsets = tombstones.len(), topics = ?names, "removed the committed offsets of deleted topics");
            self.apply_offset_tombstones(tombstones, ctx.now);
        }
        let holding: Vec<String> = self
            .share
            .list()
            .filter(|(_, g)| g.state_partitions.keys().any(|id| ids.contains(id)))
            .map(|(id, _)| id.clone())
            .collect();
        for group_id in holding {
            let Some(mut group) = self.share.get(&group_id).cloned() else {
                continue;
            };
            group.state_partitions.retain(|id, _| !ids.contains(id));
            if let Err(e) = self.write_share(&group_id, Some(group), ctx) {
                warn!(group = %group_id, error = ?e, "could not forget the share partitions of deleted topics");
            }
        }
    }

    /// Applies offset tombstones that were appended.
    pub(super) fn apply_offset_tombstones(&mut self, tombstones: Vec<CoordinatorRecord>, now: i64) {
        for record in tombstones {
            if let CoordinatorRecord::OffsetCommit {
                group,
                topic,
                partition,
                ..
            } = record
            {
                offsets::apply(
                    &mut self.groups,
                    &mut self.offsets,
                    &group,
                    &topic,
                    partition,
                    None,
                    now,
                );
            }
        }
    }
}
