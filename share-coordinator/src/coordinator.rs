//! The share coordinator: one shard per `__share_group_state` partition
//! this broker leads, found by the hash of the share partition's key
//! (group:topic id:partition), as Kafka's ShareCoordinatorService. Share
//! partition leaders read a share partition's state when they first deliver
//! from it and write it as records are acknowledged, released or time out
//! (ReadShareGroupState / WriteShareGroupState, or directly when the
//! coordinator is local).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use ottla_controller::{Controller, DeletedTopics, MetadataImage};
use ottla_coordinator_common::internal_topics::InternalTopic;
use ottla_coordinator_common::lookup::{
    find_coordinator, partition_count, partition_for, CoordinatorNode,
};
use ottla_coordinator_common::partition_writer::{now_ms, HostedPartition, PartitionWriter};
use ottla_coordinator_common::shards::LedShards;
use ottla_storage::manager::TopicPartition;
use tracing::{info, warn};

use crate::shard::{StateShard, StateWrite};
use crate::state::{ShareState, StateKey};

pub const SHARE_STATE_TOPIC: &str = "__share_group_state";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareCoordinatorConfig {
    pub topic_partitions: i32,
    pub topic_replication_factor: i16,
    pub topic_min_isr: i32,
    pub topic_segment_bytes: i64,
    /// How long a write waits for the partition's ISR.
    pub write_timeout: Duration,
}

impl ShareCoordinatorConfig {
    /// From the broker's settings by their Kafka names, with Kafka's
    /// defaults.
    pub fn from_static(configs: &BTreeMap<String, String>) -> Self {
        fn get<T: std::str::FromStr>(
            configs: &BTreeMap<String, String>,
            key: &str,
            default: T,
        ) -> T {
            configs
                .get(key)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        }
        Self {
            topic_partitions: get(configs, "share.coordinator.state.topic.num.partitions", 50),
            topic_replication_factor: get(
                configs,
                "share.coordinator.state.topic.replication.factor",
                3,
            ),
            topic_min_isr: get(configs, "share.coordinator.state.topic.min.isr", 2),
            topic_segment_bytes: get(
                configs,
                "share.coordinator.state.topic.segment.bytes",
                100 << 20,
            ),
            write_timeout: Duration::from_millis(get(
                configs,
                "share.coordinator.write.timeout.ms",
                5_000,
            )),
        }
    }
}

pub struct ShareCoordinator {
    config: ShareCoordinatorConfig,
    controller: Arc<Controller>,
    replicas: Arc<dyn PartitionWriter>,
    shards: LedShards<StateShard>,
}

impl ShareCoordinator {
    /// Loads the state partitions this broker leads. Blocking I/O.
    pub fn open(
        node_id: i32,
        config: ShareCoordinatorConfig,
        controller: Arc<Controller>,
        replicas: Arc<dyn PartitionWriter>,
    ) -> Self {
        let coordinator = Self {
            config,
            controller,
            replicas,
            shards: LedShards::new(node_id, SHARE_STATE_TOPIC),
        };
        coordinator.follow_leadership(&coordinator.controller.image());
        coordinator
    }

    fn topic(&self) -> InternalTopic {
        InternalTopic {
            name: SHARE_STATE_TOPIC,
            partitions: self.config.topic_partitions,
            replication_factor: self.config.topic_replication_factor,
            replication_factor_key: "share.coordinator.state.topic.replication.factor",
            min_insync_replicas: self.config.topic_min_isr,
            segment_bytes: self.config.topic_segment_bytes,
            compression_type: "producer",
            forbid_unclean_election: false,
        }
    }

    /// The node coordinating `key`'s state, creating the state topic on
    /// first use (COORDINATOR_NOT_AVAILABLE until it has a leader). May
    /// ask the controller: blocking.
    /// FindCoordinator's answer for a share-partition key
    /// (`group:topic id:partition`, KIP-932), as `listener` reaches it; the
    /// state topic is created on first use. Blocking.
    pub fn find(&self, key: &str, listener: &str) -> Result<CoordinatorNode, ResponseError> {
        let mut parts = key.rsplitn(3, ':');
        let well_formed = matches!(
            (parts.next(), parts.next(), parts.next()),
            (Some(p), Some(t), Some(g))
                if p.parse::<i32>().is_ok_and(|p| p >= 0)
                    && ottla_protocol::names::uuid_from_text(t).is_some()
                    && !g.is_empty()
        );
        if !well_formed {
            return Err(ResponseError::InvalidRequest);
        }
        find_coordinator(&self.controller, &self.topic(), key, listener)
    }

    pub fn coordinator_of(&self, key: &StateKey) -> Result<i32, ResponseError> {
        find_coordinator(&self.controller, &self.topic(), &key.coordinator_key(), "")
            .map(|node| node.node_id)
    }

    fn partition_of(&self, image: &MetadataImage, key: &StateKey) -> i32 {
        let count = partition_count(image, SHARE_STATE_TOPIC, self.config.topic_partitions);
        partition_for(&key.coordinator_key(), count)
    }

    /// The shard holding `key`, loaded if need be (NOT_COORDINATOR unless
    /// this broker leads its partition). Blocking I/O.
    fn shard_of(&self, key: &StateKey) -> Result<Arc<StateShard>, ResponseError> {
        let image = self.controller.image();
        let p = self.partition_of(&image, key);
        self.shards.get(
            &image,
            p,
            |tp| self.replicas.hosted_partition(tp),
            |partition: Arc<dyn HostedPartition>| {
                StateShard::load(partition, self.replicas.clone())
            },
        )
    }

    /// ReadShareGroupState: `key`'s state, None if it has none. Blocking.
    pub fn read(&self, key: &StateKey) -> Result<Option<ShareState>, ResponseError> {
        Ok(self.shard_of(key)?.read(key))
    }

    /// WriteShareGroupState, appended: the log position to wait for with
    /// [`ShareCoordinator::replicated`]. Blocking I/O.
    pub fn write(
        &self,
        key: &StateKey,
        write: &StateWrite,
    ) -> Result<(TopicPartition, i64), ResponseError> {
        let shard = self.shard_of(key)?;
        let end = shard.write(key, write, now_ms())?;
        Ok((shard.tp().clone(), end))
    }

    /// InitializeShareGroupState, appended: `key`'s state starts over at
    /// `start_offset` in a new state epoch. Blocking I/O.
    pub fn initialize(
        &self,
        key: &StateKey,
        start_offset: i64,
    ) -> Result<(TopicPartition, i64), ResponseError> {
        let shard = self.shard_of(key)?;
        let end = shard.initialize(key, start_offset, now_ms())?;
        Ok((shard.tp().clone(), end))
    }

    /// DeleteShareGroupState, appended (see [`StateShard::delete`]): the
    /// log position to wait for, None if `key` had no state. Blocking I/O.
    pub fn delete(&self, key: &StateKey) -> Result<Option<(TopicPartition, i64)>, ResponseError> {
        let shard = self.shard_of(key)?;
        let end = shard.delete(key, now_ms())?;
        Ok(end.map(|end| (shard.tp().clone(), end)))
    }

    /// Waits until the ISR of the state partition has what was written up
    /// to `end`: only then is a write acknowledged.
    pub async fn replicated(&self, tp: &TopicPartition, end: i64) -> Result<(), ResponseError> {
        self.replicas
            .await_replicated(tp, end, self.config.write_timeout)
            .await
            .map_err(|_| ResponseError::CoordinatorNotAvailable)
    }

    /// The state partitions this broker leads drop the share-partition
    /// states of `deleted` topics, as Kafka's coordinator cleans up after
    /// a topic deletion. Blocking I/O; a failure is logged, and the states
    /// stay (keyed by topic id, no new topic reads them).
    pub fn forget_deleted_topics(&self, deleted: &DeletedTopics) {
        for shard in self.shards.loaded() {
            match shard.forget_topics(&deleted.ids, now_ms()) {
                Ok(0) => {}
                Ok(n) => {
                    info!(partition = %shard.tp(), states = n, "removed the share states of deleted topics")
                }
                Err(e) => {
                    warn!(partition = %shard.tp(), error = ?e, "could not remove the share states of deleted topics")
                }
            }
        }
    }

    /// Loads the state partitions this broker comes to lead and drops the
    /// others. Blocking I/O.
    pub fn follow_leadership(&self, image: &MetadataImage) {
        self.shards.follow_leadership(
            image,
            |tp| self.replicas.hosted_partition(tp),
            |partition: Arc<dyn HostedPartition>| {
                StateShard::load(partition, self.replicas.clone())
            },
        );
    }

    pub fn close(&self) {
        self.shards.close();
    }
}
