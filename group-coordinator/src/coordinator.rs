//! The group coordinator: one shard per `__consumer_offsets` partition this
//! broker leads, found by the group id's hash. It creates the offsets topic
//! when a client first looks for a coordinator, loads shards (at start-up,
//! or on first use of a partition hosted later) and drives their timers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use ottla_controller::{Controller, DeletedTopics, MetadataImage};

use super::config::{GroupConfig, OFFSETS_TOPIC};
use super::shard::Shard;
use ottla_coordinator_common::internal_topics::InternalTopic;
use ottla_coordinator_common::lookup::{
    find_coordinator, partition_count, partition_for, CoordinatorNode,
};
use ottla_coordinator_common::partition_writer::{now_ms, HostedPartition, PartitionWriter};
use ottla_coordinator_common::shards::LedShards;

/// min.insync.replicas of `__consumer_offsets` (capped at its replication
/// factor).
const OFFSETS_TOPIC_MIN_ISR: i32 = 2;

pub struct GroupCoordinator {
    config: Arc<GroupConfig>,
    controller: Arc<Controller>,
    replicas: Arc<dyn PartitionWriter>,
    shards: LedShards<Shard>,
    /// When offsets are next checked for expiry (0 before the first tick).
    next_retention_check: AtomicI64,
}

impl GroupCoordinator {
    /// How often the broker should call [`GroupCoordinator::tick`]: the
    /// precision of session, rebalance and sync timeouts.
    pub const TICK_INTERVAL: Duration = Duration::from_millis(100);

    /// Loads every offsets partition this broker hosts and leads. Blocking
    /// I/O; a partition that fails to load is retried on first use.
    pub fn open(
        node_id: i32,
        static_configs: &BTreeMap<String, String>,
        controller: Arc<Controller>,
        replicas: Arc<dyn PartitionWriter>,
    ) -> Self {
        let coordinator = Self {
            config: Arc::new(GroupConfig::from_static(static_configs)),
            controller,
            replicas,
            shards: LedShards::new(node_id, OFFSETS_TOPIC),
            next_retention_check: AtomicI64::new(0),
        };
        coordinator.follow_leadership(&coordinator.controller.image());
        coordinator
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub fn partition_for(&self, group_id: &str) -> i32 {
        let image = self.controller.image();
        let count = partition_count(&image, OFFSETS_TOPIC, self.config.offsets_topic_partitions);
        partition_for(group_id, count)
    }

    /// The broker coordinating `group_id`, as seen on `listener` (creating
    /// the offsets topic on first use).
    pub fn find(&self, group_id: &str, listener: &str) -> Result<CoordinatorNode, ResponseError> {
        find_coordinator(&self.controller, &self.offsets_topic(), group_id, listener)
    }

    fn offsets_topic(&self) -> InternalTopic {
        InternalTopic {
            name: OFFSETS_TOPIC,
            partitions: self.config.offsets_topic_partitions,
            replication_factor: self.config.offsets_topic_replication_factor,
            replication_factor_key: "offsets.topic.replication.factor",
            // Kafka leaves this topic at the broker's min.insync.replicas
            // (1 by default); Ottla asks a second copy of every commit, as
            // of the transaction log (alter the topic to change it).
            min_insync_replicas: OFFSETS_TOPIC_MIN_ISR,
            segment_bytes: i64::from(self.config.offsets_topic_segment_bytes),
            compression_type: "producer",
            forbid_unclean_election: false,
        }
    }

    /// The shard owning `group_id`, without blocking: NOT_COORDINATOR
    /// unless this broker leads the group's partition,
    /// COORDINATOR_LOAD_IN_PROGRESS until the shard is loaded (handlers on
    /// the runtime call [`GroupCoordinator::load_shard_of`] first).
    pub fn shard(&self, group_id: &str) -> Result<Arc<Shard>, ResponseError> {
        let image = self.controller.image();
        self.shards.get_loaded(&image, self.partition_for(group_id))
    }

    /// Loads the shard owning `group_id` on the blocking pool, if this
    /// broker leads its partition and it is not loaded yet: a partition's
    /// first use reads its whole log, which must not hold up a runtime
    /// worker. What went wrong, if anything, [`GroupCoordinator::shard`]
    /// reports next.
    pub async fn load_shard_of(self: &Arc<Self>, group_id: &str) {
        let p = self.partition_for(group_id);
        let image = self.controller.image();
        if let Err(ResponseError::CoordinatorLoadInProgress) = self.shards.get_loaded(&image, p) {
            let me = self.clone();
            let _ = tokio::task::spawn_blocking(move || me.shard_at(p)).await;
        }
    }

    /// [`GroupCoordinator::shard`], loading the shard first if needed:
    /// blocking I/O, for handlers on the blocking pool.
    pub fn shard_blocking(&self, group_id: &str) -> Result<Arc<Shard>, ResponseError> {
        self.shard_at(self.partition_for(group_id))
    }

    /// The shard of offsets partition `p` (transaction markers name the
    /// partition, not a group), loading it first if needed: blocking I/O.
    pub fn shard_at(&self, p: i32) -> Result<Arc<Shard>, ResponseError> {
        let image = self.controller.image();
        self.shards.get(
            &image,
            p,
            |tp| self.replicas.hosted_partition(tp),
            |partition| self.load_shard(partition),
        )
    }

    /// Loads the offsets partitions this broker now leads and drops those
    /// led elsewhere now (see [`LedShards::follow_leadership`]): the broker
    /// calls this on the blocking pool after each metadata change.
    pub fn follow_leadership(&self, image: &MetadataImage) {
        self.shards.follow_leadership(
            image,
            |tp| self.replicas.hosted_partition(tp),
            |partition| self.load_shard(partition),
        );
    }

    fn load_shard(&self, partition: Arc<dyn HostedPartition>) -> anyhow::Result<Shard> {
        Shard::load(
            partition,
            self.replicas.clone(),
            self.config.clone(),
            now_ms(),
        )
    }

    /// Every shard this broker leads forgets `deleted` topics: their
    /// committed offsets and share partitions.
    pub fn forget_deleted_topics(&self, deleted: &DeletedTopics, now: i64) {
        for shard in self.shards() {
            shard.forget_deleted_topics(&deleted.names, &deleted.ids, now);
        }
    }

    /// Every loaded shard (ListGroups asks them all).
    pub fn shards(&self) -> Vec<Arc<Shard>> {
        self.shards.loaded()
    }

    /// Stops coordinating (shutdown): waiting JoinGroup and SyncGroup
    /// requests are answered NOT_COORDINATOR, and later ones too.
    pub fn close(&self) {
        self.shards.close();
    }

    /// Fires due group timers; the broker calls this periodically.
    pub fn tick(&self, now: i64) {
        let image = self.controller.image();
        for shard in self.shards() {
            shard.tick(now, &image);
        }
        if self.retention_check_due(now) {
            for shard in self.shards() {
                shard.expire_offsets(self.config.offsets_retention_ms, now);
            }
        }
    }

    /// Whether offsets are due for an expiry check, every
    /// `offsets.retention.check.interval.ms` from the first tick on.
    fn retention_check_due(&self, now: i64) -> bool {
        let next = now + self.config.offsets_retention_check_interval_ms;
        let due = self.next_retention_check.load(Ordering::Relaxed);
        if due != 0 && now < due {
            return false;
        }
        self.next_retention_check.store(next, Ordering::Relaxed);
        due != 0
    }
}
