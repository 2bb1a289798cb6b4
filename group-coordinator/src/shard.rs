//! One `__consumer_offsets` partition's coordinator: the groups and offsets
//! it owns, loaded from the partition's log, and every operation on them.
//! Operations run under one lock and append their records before they
//! answer, so the log order is the order of decisions; nothing awaits while
//! holding the lock (parked requests wait on oneshot receivers instead).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tracing::info;
use uuid::Uuid;

use super::admin::{self, GroupDescription, ListedGroup};
use super::answer::GatedAnswer;
use super::classic::ClassicGroup;
use super::config::GroupConfig;
use super::consumer_groups::ConsumerGroups;
use super::member::{JoinResult, SyncResult};
use super::membership::{self, JoinRequest, LeavingMember, Reply, SyncRequest};
use super::offsets::{self, CommitRequest, FetchedOffset, OffsetStore, PartitionCodes};
use super::records::CoordinatorRecord;
use super::share_config;
use super::share_group::ShareGroups;
use super::share_log;
use super::streams_config::StreamsGroupSettings;
use super::streams_group::StreamsGroups;
use super::txn_offsets::{self, PendingTxnOffsets, TxnCommitRequest};
use super::writer::{Ctx, LogWriter};
use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use ottla_coordinator_common::partition_writer::{HostedPartition, PartitionWriter};
use ottla_coordinator_common::shards::{replay_batch_records, replay_batches, Unload};

#[derive(Default)]
pub(super) struct ShardState {
    pub(super) groups: HashMap<String, ClassicGroup>,
    pub(super) offsets: OffsetStore,
    pub(super) txn_offsets: PendingTxnOffsets,
    /// Consumer-protocol groups (`consumer_shard`); a group id is in at most
    /// one of `groups` and `consumer`.
    pub(super) consumer: ConsumerGroups,
    /// Share groups (`share_shard`).
    pub(super) share: ShareGroups,
    /// Streams groups (`streams_shard`).
    pub(super) streams: StreamsGroups,
}

impl ShardState {
    /// Replays a stored record: the latest record of a key wins, and a
    /// tombstone deletes.
    pub(super) fn replay(&mut self, record: CoordinatorRecord, now: i64) {
        // The offsets of a consumer group create no classic group.
        let mut no_classic = HashMap::new();
        match record {
            CoordinatorRecord::OffsetCommit {
                group,
                topic,
                partition,
                value,
            } => offsets::apply(
                if self.consumer.contains(&group) || self.streams.contains(&group) {
                    &mut no_classic
                } else {
                    &mut self.groups
                },
                &mut self.offsets,
                &group,
                &topic,
                partition,
                value,
                now,
            ),
            CoordinatorRecord::GroupMetadata {
                group,
                value: Some(v),
            } => {
                self.groups
                    .insert(group.clone(), ClassicGroup::from_record(&group, v, now));
            }
            CoordinatorRecord::GroupMetadata { group, value: None } => {
                self.groups.remove(&group);
            }
            CoordinatorRecord::Consumer(r) => self.consumer.replay(r, &mut self.groups),
            CoordinatorRecord::Streams(r) => self.streams.replay(r),
            CoordinatorRecord::Share(r) => share_log::replay(&mut self.share, r),
        }
    }
}

pub struct Shard {
    writer: LogWriter,
    config: Arc<GroupConfig>,
    pub(super) state: Mutex<ShardState>,
}

impl Shard {
    /// Reads the partition's log from its start to its end and rebuilds the
    /// groups and offsets. Blocking I/O.
    pub fn load(
        partition: Arc<dyn HostedPartition>,
        replicas: Arc<dyn PartitionWriter>,
        config: Arc<GroupConfig>,
        now: i64,
    ) -> anyhow::Result<Self> {
        let mut state = ShardState::default();
        let mut records = 0usize;
        replay_batches(&*partition, |batch| {
            if batch.is_control() {
                txn_offsets::replay_marker(
                    &mut state.groups,
                    &mut state.offsets,
                    &mut state.txn_offsets,
                    batch,
                    now,
                );
                state.drop_shadowed_classic_groups();
                return Ok(());
            }
            // Offsets of a transaction wait for its marker.
            let txn_producer = batch.is_transactional().then(|| batch.producer_id());
            replay_batch_records(batch, |key, value| {
                let Some(record) = CoordinatorRecord::decode(key, value)? else {
                    return Ok(());
                };
                let record = match txn_producer {
                    Some(producer) => state.txn_offsets.stage(producer, record),
                    None => Some(record),
                };
                if let Some(record) = record {
                    state.replay(record, now);
                }
                records += 1;
                Ok(())
            })
        })?;
        state.consumer.on_loaded(now, &config.consumer);
        // Members get the default session to heartbeat again in; their
        // group's own setting applies from their next heartbeat.
        state
            .streams
            .on_loaded(now, StreamsGroupSettings::default().session_timeout_ms);
        state
            .share
            .on_loaded(now, share_config::DEFAULT_SESSION_TIMEOUT_MS);
        info!(partition = %partition.tp(), records, groups = state.groups.len(), consumer_groups = state.consumer.len(), streams_groups = state.streams.len(), share_groups = state.share.len(), "group coordinator loaded");
        let shard = Self {
            writer: LogWriter::new(partition, replicas),
            config,
            state: Mutex::new(state),
        };
        shard.with_state(now, |st, ctx| {
            for g in st.groups.values_mut() {
                // `group.max.size` may have been lowered since the group formed.
                if g.members().count() > ctx.config.max_group_size {
                    g.prepare_rebalance(ctx, "loaded group is over capacity");
                }
            }
        });
        Ok(shard)
    }

    pub(super) fn with_state<T>(
        &self,
        now: i64,
        f: impl FnOnce(&mut ShardState, &Ctx<'_>) -> T,
    ) -> T {
        let ctx = Ctx {
            now,
            config: &self.config,
            writer: &self.writer,
        };
        f(&mut self.state.lock(), &ctx)
    }

    /// `answer`, once the offsets partition's ISR has everything this
    /// shard wrote (see [`LogWriter::replicated`]); every answer to an
    /// operation on the shard goes through here. After
    /// `offsets.commit.timeout.ms` its successes become the error instead.
    pub async fn once_replicated<A: GatedAnswer>(&self, mut answer: A) -> A {
        if let Err(e) = self.writer.replicated(self.commit_timeout()).await {
            answer.fail(e);
        }
        answer
    }

    /// [`Shard::once_replicated`] for handlers on the blocking pool.
    pub fn once_replicated_blocking<A: GatedAnswer>(&self, mut answer: A) -> A {
        if let Err(e) = self.writer.replicated_blocking(self.commit_timeout()) {
            answer.fail(e);
        }
        answer
    }

    fn commit_timeout(&self) -> Duration {
        Duration::from_millis(self.config.offsets_commit_timeout_ms as u64)
    }

    /// JoinGroup; `image` maps the topics of a consumer group's classic
    /// members between names and ids.
    pub fn join(&self, req: JoinRequest, image: &MetadataImage, now: i64) -> Reply<JoinResult> {
        self.with_state(now, |st, ctx| {
            if st.share.contains(&req.group_id) || st.streams.contains(&req.group_id) {
                let refused = ResponseError::InconsistentGroupProtocol;
                return Reply::Ready(JoinResult::error(&req.member_id, refused));
            }
            if let Some(result) = st.classic_join_consumer_group(&req, image, ctx) {
                return Reply::Ready(result);
            }
            if let Err(e) = st.make_way_for_classic(&req.group_id, ctx) {
                return Reply::Ready(JoinResult::error(&req.member_id, e));
            }
            membership::join(&mut st.groups, req, ctx)
        })
    }

    pub fn sync(&self, req: SyncRequest, image: &MetadataImage, now: i64) -> Reply<SyncResult> {
        self.with_state(now, |st, ctx| {
            if let Some(result) = st.classic_sync_consumer_group(&req, image, ctx) {
                return Reply::Ready(result);
            }
            membership::sync(&mut st.groups, req, ctx)
        })
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: i64,
    ) -> Result<(), ResponseError> {
        self.with_state(now, |st, ctx| {
            if let Some(result) = st.classic_heartbeat_consumer_group(
                group_id,
                member_id,
                instance_id,
                generation,
                ctx,
            ) {
                return result;
            }
            membership::heartbeat(
                &mut st.groups,
                group_id,
                member_id,
                instance_id,
                generation,
                now,
            )
        })
    }

    pub fn leave(
        &self,
        group_id: &str,
        members: &[LeavingMember],
        image: &MetadataImage,
        now: i64,
    ) -> Vec<i16> {
        self.with_state(now, |st, ctx| {
            if let Some(codes) = st.classic_leave_consumer_group(group_id, members, image, ctx) {
                return codes;
            }
            membership::leave(&mut st.groups, group_id, members, ctx)
        })
    }

    pub fn commit_offsets(&self, req: CommitRequest, now: i64) -> PartitionCodes {
        self.with_state(now, |st, ctx| {
            if st.share.contains(&req.group_id) {
                // A share group commits no offsets (the mirror's offset
                // sync, for one, must not turn it into a classic group).
                return req.codes(ResponseError::GroupIdNotFound.code());
            }
            if let Some(codes) = st.commit_consumer_offsets(&req, ctx) {
                return codes;
            }
            let streams =
                st.check_streams_commit(&req.group_id, &req.member_id, req.generation_id, false);
            match streams {
                Some(Err(e)) => return req.codes(e.code()),
                // The offsets of a streams group create no classic group.
                Some(Ok(())) => {
                    return offsets::store_commit(&mut HashMap::new(), &mut st.offsets, &req, ctx)
                }
                None => {}
            }
            offsets::commit(&mut st.groups, &mut st.offsets, req, ctx)
        })
    }

    pub fn commit_txn_offsets(&self, req: TxnCommitRequest, now: i64) -> PartitionCodes {
        self.with_state(now, |st, ctx| match st.consumer.get(&req.group_id) {
            Some(group) => {
                let validated = group.validate_txn_offset_commit(&req.member_id, req.generation_id);
                txn_offsets::stage(&mut st.txn_offsets, &req, validated, ctx)
            }
            None => {
                let streams =
                    st.check_streams_commit(&req.group_id, &req.member_id, req.generation_id, true);
                match streams {
                    Some(validated) => {
                        // TxnOffsetCommit knows no STALE_MEMBER_EPOCH (as
                        // for consumer groups).
                        let validated = validated.map_err(|e| match e {
                            ResponseError::StaleMemberEpoch => ResponseError::IllegalGeneration,
                            other => other,
                        });
                        txn_offsets::stage(&mut st.txn_offsets, &req, validated, ctx)
                    }
                    None => txn_offsets::commit(&st.groups, &mut st.txn_offsets, req, ctx),
                }
            }
        })
    }

    /// Writes a transaction marker (from the transaction coordinator) and
    /// applies or drops the producer's pending offsets.
    pub fn write_txn_marker(&self, marker: Vec<u8>, now: i64) -> Result<(), ResponseError> {
        self.with_state(now, |st, ctx| {
            let written = txn_offsets::write_marker(
                &mut st.groups,
                &mut st.offsets,
                &mut st.txn_offsets,
                marker,
                ctx,
            );
            st.drop_shadowed_classic_groups();
            written
        })
    }

    /// With `require_stable`, partitions an open transaction holds an
    /// offset for answer UNSTABLE_OFFSET_COMMIT (KIP-447).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<&[(String, Vec<i32>)]>,
        require_stable: bool,
    ) -> Vec<(String, Vec<FetchedOffset>)> {
        let st = self.state.lock();
        let mut fetched = offsets::fetch(&st.offsets, group_id, topics);
        if require_stable {
            txn_offsets::mark_unstable(&st.txn_offsets, group_id, &mut fetched);
        }
        fetched
    }

    pub fn delete_offsets(
        &self,
        group_id: &str,
        topics: &[(String, Vec<i32>)],
        now: i64,
    ) -> Result<PartitionCodes, ResponseError> {
        self.with_state(now, |st, ctx| {
            if let Some(result) = st.delete_consumer_offsets(group_id, topics, ctx) {
                return result;
            }
            if let Some(result) = st.delete_streams_offsets(group_id, topics, ctx) {
                return result;
            }
            offsets::delete(&mut st.groups, &mut st.offsets, group_id, topics, ctx)
        })
    }

    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        admin::describe(&self.state.lock().groups, group_id)
    }

    pub fn list(&self, states: &[String], types: &[String]) -> Vec<ListedGroup> {
        admin::list(&self.state.lock().groups, states, types)
    }

    /// DeleteGroups. The groups' due timers fire first, so a member whose
    /// session ended a moment ago (before the next tick) no longer keeps
    /// its group from being deleted, as Kafka's timers fire on time.
    pub fn delete_groups(&self, ids: &[String], now: i64, image: &MetadataImage) -> Vec<i16> {
        self.with_state(now, |st, ctx| {
            for id in ids {
                if let Some(group) = st.groups.get_mut(id) {
                    group.on_tick(ctx);
                }
            }
            st.expire_consumer_members(image, ctx);
            st.expire_share_members(image, ctx);
            st.expire_streams_members(ctx);
            // Share and streams groups first; the rest are consumer or
            // classic groups.
            let share_codes: Vec<Option<i16>> = ids
                .iter()
                .map(|id| {
                    let deleted = match st.delete_share_group(id, ctx) {
                        Some(r) => Some(r),
                        None => st.delete_streams_group(id, ctx),
                    };
                    deleted.map(|r| r.err().map_or(0, |e| e.code()))
                })
                .collect();
            let others: Vec<String> = ids
                .iter()
                .zip(&share_codes)
                .filter(|(_, c)| c.is_none())
                .map(|(id, _)| id.clone())
                .collect();
            let mut other_codes = st.delete_groups(&others, ctx).into_iter();
            share_codes
                .into_iter()
                .map(|c| c.unwrap_or_else(|| other_codes.next().expect("one code per group")))
                .collect()
        })
    }

    /// Removes offsets older than `retention_ms` and the groups they leave.
    /// Forgets the topics deleted since the last image: `names` for the
    /// committed offsets, `ids` for the share partitions.
    pub fn forget_deleted_topics(&self, names: &BTreeSet<String>, ids: &BTreeSet<Uuid>, now: i64) {
        self.with_state(now, |st, ctx| st.forget_deleted_topics(names, ids, ctx));
    }

    pub fn expire_offsets(&self, retention_ms: i64, now: i64) {
        self.with_state(now, |st, ctx| st.expire_offsets(retention_ms, ctx));
    }

    /// Fires due timers: session expiries, rebalance and sync timeouts;
    /// fenced consumer members leave with `image`'s view of their topics.
    pub fn tick(&self, now: i64, image: &MetadataImage) {
        self.with_state(now, |st, ctx| {
            for g in st.groups.values_mut() {
                g.on_tick(ctx);
            }
            st.expire_consumer_members(image, ctx);
            st.expire_streams_members(ctx);
            st.expire_share_members(image, ctx);
        });
    }
}

/// As Kafka's onUnloaded: members waiting in JoinGroup or SyncGroup are
/// told NOT_COORDINATOR, so they look for the new coordinator at once.
impl Unload for Shard {
    fn on_unloaded(&self) {
        let mut st = self.state.lock();
        for group in st.groups.values_mut() {
            group.abort_pending_requests(ResponseError::NotCoordinator);
        }
    }
}
