//! The `__mirror_state` coordinator: each mirror partition's state and last
//! mirrored epoch, kept in the compacted `__mirror_state` topic. The
//! records of one mirror partition live in the partition
//! hash(mirror, topic id, partition) % partitions; the broker leading that
//! partition answers for them (locally, or through Read/WriteMirrorStates).
//! Writes carry the mirror partition's leader epoch, and a write older than
//! the stored one is fenced.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use ottla_controller::{Controller, MetadataImage};
use ottla_mirror::records::{
    LastMirroredEpochValue, MirrorPartitionKey, MirrorStateKey, MirrorStateValue,
    PartitionStateValue,
};
use ottla_protocol::batch::{BatchBuilder, SimpleRecord};
use ottla_storage::producer_state::AppendOrigin;
use parking_lot::Mutex;
use tracing::info;

use crate::coordinator_shards::{replay_records, LedShards};
use crate::internal_topics::InternalTopic;
use crate::replica::{now_ms, Partition, ReplicaManager};

pub const MIRROR_STATE_TOPIC: &str = "__mirror_state";

/// How long a state write waits for the `__mirror_state` ISR.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// What is stored for one mirror partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredState {
    pub state: Option<PartitionStateValue>,
    pub last_mirrored_epoch: Option<LastMirroredEpochValue>,
}

struct StateShard {
    partition: Arc<Partition>,
    entries: Mutex<HashMap<MirrorStateKey, MirrorStateValue>>,
}

/// Mirror state reads and writes never wait on the shard.
impl crate::coordinator_shards::Unload for StateShard {}

impl StateShard {
    fn load(partition: Arc<Partition>) -> anyhow::Result<Self> {
        let mut entries = HashMap::new();
        replay_records(&partition, |key, value| {
            let key = MirrorStateKey::decode(key)?;
            match key.decode_value(value)? {
                Some(value) => entries.insert(key, value),
                None => entries.remove(&key),
            };
            Ok(())
        })?;
        info!(partition = %partition.tp, entries = entries.len(), "mirror state coordinator loaded");
        Ok(Self {
            partition,
            entries: Mutex::new(entries),
        })
    }
}

pub struct MirrorStateStore {
    topic: InternalTopic,
    controller: Arc<Controller>,
    replicas: Arc<ReplicaManager>,
    shards: LedShards<StateShard>,
}

impl MirrorStateStore {
    pub fn new(
        node_id: i32,
        static_configs: &BTreeMap<String, String>,
        controller: Arc<Controller>,
        replicas: Arc<ReplicaManager>,
    ) -> Self {
        let get = |key: &str, default: i64| {
            static_configs
                .get(key)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(default)
        };
        Self {
            topic: InternalTopic {
                name: MIRROR_STATE_TOPIC,
                partitions: get("mirror.state.topic.num.partitions", 16) as i32,
                replication_factor: get("mirror.state.topic.replication.factor", 3) as i16,
                replication_factor_key: "mirror.state.topic.replication.factor",
                min_insync_replicas: get("mirror.state.topic.min.isr", 2) as i32,
                segment_bytes: get("mirror.state.topic.segment.bytes", 100 << 20),
                compression_type: "uncompressed",
                forbid_unclean_election: true,
            },
            controller,
            replicas,
            shards: LedShards::new(node_id, MIRROR_STATE_TOPIC),
        }
    }

    /// The `__mirror_state` partition holding `key` and the broker leading
    /// it. Creates the topic the first time; COORDINATOR_NOT_AVAILABLE
    /// until it has a leader.
    pub fn coordinator_of(&self, key: &MirrorPartitionKey) -> Result<(i32, i32), ResponseError> {
        let image = self.controller.image();
        let Some(topic) = image.topic_by_name(MIRROR_STATE_TOPIC) else {
            self.topic.create(&self.controller, &image);
            return Err(ResponseError::CoordinatorNotAvailable);
        };
        let count = NonZeroU32::new(topic.partitions.len() as u32)
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        let p = key.state_partition(count);
        match topic.partitions.get(&p).map(|part| part.leader) {
            Some(leader) if leader >= 0 => Ok((p, leader)),
            _ => Err(ResponseError::CoordinatorNotAvailable),
        }
    }

    fn shard(&self, key: &MirrorPartitionKey) -> Result<Arc<StateShard>, ResponseError> {
        let (p, _) = self.coordinator_of(key)?;
        let image = self.controller.image();
        self.shards.get(&image, p, &self.replicas, StateShard::load)
    }

    /// What this broker, as coordinator, has stored for `key`. Blocking I/O
    /// on the first use of a partition.
    pub fn read(&self, key: &MirrorPartitionKey) -> Result<StoredState, ResponseError> {
        let shard = self.shard(key)?;
        let entries = shard.entries.lock();
        let state = match entries.get(&MirrorStateKey::PartitionState(key.clone())) {
            Some(MirrorStateValue::PartitionState(v)) => Some(v.clone()),
            _ => None,
        };
        let last_mirrored_epoch = match entries.get(&MirrorStateKey::LastMirroredEpoch(key.clone()))
        {
            Some(MirrorStateValue::LastMirroredEpoch(v)) => Some(v.clone()),
            _ => None,
        };
        Ok(StoredState {
            state,
            last_mirrored_epoch,
        })
    }

    /// Stores `values` for `key` (in one batch) as this broker, the
    /// coordinator: fenced (FENCED_LEADER_EPOCH) if a newer leader of the
    /// mirror partition already wrote; acknowledged once the
    /// `__mirror_state` ISR has them.
    pub async fn write(
        &self,
        key: &MirrorPartitionKey,
        values: Vec<MirrorStateValue>,
    ) -> Result<(), ResponseError> {
        let shard = self.shard(key)?;
        let keyed: Vec<(MirrorStateKey, MirrorStateValue)> = values
            .into_iter()
            .map(|value| {
                let record_key = match value {
                    MirrorStateValue::PartitionState(_) => {
                        MirrorStateKey::PartitionState(key.clone())
                    }
                    MirrorStateValue::LastMirroredEpoch(_) => {
                        MirrorStateKey::LastMirroredEpoch(key.clone())
                    }
                };
                (record_key, value)
            })
            .collect();
        let end_offset = {
            let entries = shard.entries.lock();
            let mut records = Vec::with_capacity(keyed.len());
            for (record_key, value) in &keyed {
                if let Some(stored) = entries.get(record_key) {
                    if writer_epoch(stored) > writer_epoch(value) {
                        return Err(ResponseError::FencedLeaderEpoch);
                    }
                }
                let encode_error = |_| ResponseError::UnknownServerError;
                records.push(SimpleRecord {
                    timestamp: now_ms(),
                    key: Some(record_key.encode().map_err(encode_error)?),
                    value: Some(record_key.encode_value(value).map_err(encode_error)?),
                    headers: Vec::new(),
                });
            }
            let batch = BatchBuilder::default().build(&records);
            let outcome = self.replicas.append(
                &shard.partition.tp,
                &batch.into(),
                -1,
                AppendOrigin::Coordinator,
            );
            if outcome.end_offset < 0 {
                return Err(match outcome.error {
                    ResponseError::NotLeaderOrFollower => ResponseError::NotCoordinator,
                    other => other,
                });
            }
            outcome.end_offset
        };
        self.replicas
            .wait_replicated(&shard.partition.tp, end_offset, WRITE_TIMEOUT)
            .await?;
        shard.entries.lock().extend(keyed);
        Ok(())
    }

    /// Loads every led partition and drops the partitions led elsewhere now.
    pub fn sync(&self, image: &MetadataImage) {
        self.shards.unload_unled(image);
        for p in self.shards.led(image) {
            let _ = self.shards.load(p, &self.replicas, StateShard::load);
        }
    }
}

fn writer_epoch(value: &MirrorStateValue) -> i32 {
    match value {
        MirrorStateValue::PartitionState(v) => v.leader_epoch,
        MirrorStateValue::LastMirroredEpoch(v) => v.leader_epoch,
    }
}
