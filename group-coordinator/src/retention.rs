//! Offset retention (Kafka's cleanupGroupMetadata): every
//! `offsets.retention.check.interval.ms`, committed offsets older than
//! `offsets.retention.minutes` are removed with tombstones, and a group
//! left with no members, no offsets and no open transaction is deleted.
//!
//! "Older" depends on the group, as in Kafka:
//! - an empty classic group with a protocol: since it became empty (or the
//!   commit, for groups stored without that time);
//! - a stable classic consumer group, a simple group (offsets only) and a
//!   consumer-protocol group: since the commit;
//! - other classic groups (rebalancing, or not a consumer group): never.
//!
//! Offsets of topics the members subscribe to never expire, nor offsets a
//! transaction is about to replace. A commit that set its own expiry
//! (OffsetCommit v1's expire timestamp) expires then.

use tracing::info;

use super::classic::{ClassicGroup, GroupState};
use super::offsets;
use super::records::{CoordinatorRecord, OffsetCommitValue};
use super::shard::ShardState;
use super::writer::Ctx;

/// What an offset's age is measured from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Since {
    Commit,
    /// The group became empty then (or, if unknown, the commit).
    EmptySince(Option<i64>),
}

impl Since {
    fn of_classic(group: &ClassicGroup) -> Option<Self> {
        match group.protocol_type() {
            None => Some(Self::Commit),
            Some(_) if group.state() == GroupState::Empty => {
                Some(Self::EmptySince(group.state_timestamp))
            }
            Some(_) if group.uses_consumer_protocol() && group.state() == GroupState::Stable => {
                group.subscribed_topics.as_ref().map(|_| Self::Commit)
            }
            Some(_) => None,
        }
    }

    fn is_expired(self, offset: &OffsetCommitValue, now: i64, retention_ms: i64) -> bool {
        if let Some(expire) = offset.expire_timestamp {
            return now >= expire;
        }
        let base = match self {
            Self::Commit | Self::EmptySince(None) => offset.commit_timestamp,
            Self::EmptySince(Some(since)) => since,
        };
        now.saturating_sub(base) >= retention_ms
    }
}

impl ShardState {
    /// Removes expired offsets, then deletes the groups they leave empty.
    pub(super) fn expire_offsets(&mut self, retention_ms: i64, ctx: &Ctx<'_>) {
        let ids: Vec<String> = self
            .groups
            .keys()
            .chain(self.consumer.ids())
            .cloned()
            .collect();
        let mut tombstones = Vec::new();
        let mut emptied = Vec::new();
        for id in ids {
            let Some(since) = self.expiry_base(&id) else {
                continue;
            };
            let (expired, all) = self.expired_offsets(&id, since, retention_ms, ctx.now);
            tombstones.extend(expired);
            if all && !self.txn_offsets.holds_group(&id) && self.has_no_members(&id) {
                emptied.push(id);
            }
        }
        if !tombstones.is_empty() {
            if let Err(e) = ctx.writer.append(&tombstones) {
                info!(error = %e, "could not write expired offsets; retrying at the next check");
                return;
            }
            info!(offsets = tombstones.len(), "expired committed offsets");
            self.apply_offset_tombstones(tombstones, ctx.now);
        }
        if !emptied.is_empty() {
            let codes = self.delete_groups(&emptied, ctx);
            let deleted: Vec<&String> = emptied
                .iter()
                .zip(codes)
                .filter(|(_, code)| *code == 0)
                .map(|(id, _)| id)
                .collect();
            if !deleted.is_empty() {
                info!(groups = ?deleted, "removed empty groups whose offsets expired");
            }
        }
    }

    fn expiry_base(&self, id: &str) -> Option<Since> {
        match self.consumer.get(id) {
            Some(_) => Some(Since::Commit),
            None => Since::of_classic(self.groups.get(id)?),
        }
    }

    fn is_subscribed(&self, id: &str, topic: &str) -> bool {
        match self.consumer.get(id) {
            Some(group) => group.is_subscribed_to(topic),
            None => self
                .groups
                .get(id)
                .is_some_and(|g| g.is_subscribed_to_topic(topic)),
        }
    }

    fn has_no_members(&self, id: &str) -> bool {
        match self.consumer.get(id) {
            Some(group) => group.state() == super::consumer_group::ConsumerGroupState::Empty,
            None => self.groups.get(id).is_some_and(ClassicGroup::is_empty),
        }
    }

    /// Tombstones for `id`'s expired offsets, and whether that is all of
    /// them.
    fn expired_offsets(
        &self,
        id: &str,
        since: Since,
        retention_ms: i64,
        now: i64,
    ) -> (Vec<CoordinatorRecord>, bool) {
        let Some(topics) = self.offsets.group(id) else {
            return (Vec::new(), true);
        };
        let mut expired = Vec::new();
        let mut all = true;
        for (topic, partitions) in topics {
            if self.is_subscribed(id, topic) {
                all = false;
                continue;
            }
            for (&partition, offset) in partitions {
                if since.is_expired(offset, now, retention_ms)
                    && !self.txn_offsets.is_pending(id, topic, partition)
                {
                    expired.push(offsets::tombstone(id, topic, partition));
                } else {
                    all = false;
                }
            }
        }
        (expired, all)
    }
}
