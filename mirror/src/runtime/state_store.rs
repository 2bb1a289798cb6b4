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
use ottla_coordinator_common::internal_topics::InternalTopic;
use ottla_coordinator_common::partition_writer::{now_ms, HostedPartition};
use ottla_coordinator_common::shards::{replay_records, LedShards};
use ottla_protocol::batch::{BatchBuilder, SimpleRecord};
use ottla_protocol::mirror::states::{ReadMirrorStatesPartitionResult, NO_EPOCH, UNKNOWN_STATE};
use ottla_storage::producer_state::AppendOrigin;
use parking_lot::Mutex;
use tracing::info;

use super::MirrorReplicas;
use crate::records::{
    LastMirroredEpochValue, MirrorPartitionKey, MirrorStateKey, MirrorStateValue,
    PartitionStateValue,
};
use crate::state::MirrorPartitionState;

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
    partition: Arc<dyn HostedPartition>,
    entries: Mutex<HashMap<MirrorStateKey, MirrorStateValue>>,
}

/// Mirror state reads and writes never wait on the shard.
impl ottla_coordinator_common::shards::Unload for StateShard {}

impl StateShard {
    fn load(partition: Arc<dyn HostedPartition>) -> anyhow::Result<Self> {
        let mut entries = HashMap::new();
        replay_records(&*partition, |key, value| {
            let key = MirrorStateKey::decode(key)?;
            match key.decode_value(value)? {
                Some(value) => entries.insert(key, value),
                None => entries.remove(&key),
            };
            Ok(())
        })?;
        info!(partition = %partition.tp(), entries = entries.len(), "mirror state coordinator loaded");
        Ok(Self {
            partition,
            entries: Mutex::new(entries),
        })
    }
}

pub struct MirrorStateStore {
    topic: InternalTopic,
    controller: Arc<Controller>,
    replicas: Arc<dyn MirrorReplicas>,
    shards: Arc<LedShards<StateShard>>,
}

impl MirrorStateStore {
    pub fn new(
        node_id: i32,
        static_configs: &BTreeMap<String, String>,
        controller: Arc<Controller>,
        replicas: Arc<dyn MirrorReplicas>,
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
            shards: Arc::new(LedShards::new(node_id, MIRROR_STATE_TOPIC)),
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
        self.shards.get(
            &image,
            p,
            |tp| self.replicas.hosted_partition(tp),
            StateShard::load,
        )
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
        let mut results = self.write_many(vec![(key.clone(), values)]).await;
        results
            .pop()
            .unwrap_or(Err(ResponseError::UnknownServerError))
    }

    /// Shard `p`, loaded on the blocking pool on its first use: a load
    /// reads the partition's whole log, which must not hold up a runtime
    /// worker.
    async fn loaded_shard(
        &self,
        image: &MetadataImage,
        p: i32,
    ) -> Result<Arc<StateShard>, ResponseError> {
        match self.shards.get_loaded(image, p) {
            Err(ResponseError::CoordinatorLoadInProgress) => {
                let shards = self.shards.clone();
                let replicas = self.replicas.clone();
                tokio::task::spawn_blocking(move || {
                    shards.load(p, |tp| replicas.hosted_partition(tp), StateShard::load)
                })
                .await
                .unwrap_or(Err(ResponseError::CoordinatorNotAvailable))
            }
            other => other,
        }
    }

    /// [`Self::write`] of many mirror partitions at once: one batch per
    /// `__mirror_state` partition, then one wait for its ISR. A failover
    /// stores three states per partition, so at 10,000 partitions this is
    /// the difference between a handful of appends and 30,000. The results
    /// are in the order of `writes`.
    pub async fn write_many(
        &self,
        writes: Vec<(MirrorPartitionKey, Vec<MirrorStateValue>)>,
    ) -> Vec<Result<(), ResponseError>> {
        let mut results = vec![Ok(()); writes.len()];
        let mut by_shard: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
        for (i, (key, _)) in writes.iter().enumerate() {
            match self.coordinator_of(key) {
                Ok((p, _)) => by_shard.entry(p).or_default().push(i),
                Err(e) => results[i] = Err(e),
            }
        }
        let image = self.controller.image();
        let mut appended = Vec::new();
        for (p, indices) in by_shard {
            let shard = match self.loaded_shard(&image, p).await {
                Ok(shard) => shard,
                Err(e) => {
                    indices.iter().for_each(|&i| results[i] = Err(e));
                    continue;
                }
            };
            // The fencing check and the append under one lock, so no
            // other write slips between them.
            let entries = shard.entries.lock();
            let mut records = Vec::new();
            let mut written = Vec::new();
            for i in indices {
                let (key, values) = &writes[i];
                match records_of(&entries, key, values) {
                    Ok((keyed, mut encoded)) => {
                        records.append(&mut encoded);
                        written.push((i, keyed));
                    }
                    Err(e) => results[i] = Err(e),
                }
            }
            if records.is_empty() {
                continue;
            }
            let batch = BatchBuilder::default().build(&records);
            let outcome = self.replicas.append_as_leader(
                shard.partition.tp(),
                &batch.into(),
                -1,
                AppendOrigin::Coordinator,
            );
            drop(entries);
            if let Some(error) = outcome.error {
                let e = match error {
                    ResponseError::NotLeaderOrFollower => ResponseError::NotCoordinator,
                    other => other,
                };
                written.iter().for_each(|&(i, _)| results[i] = Err(e));
                continue;
            }
            appended.push((shard, outcome.end_offset, written));
        }
        for (shard, end_offset, written) in appended {
            let replicated = self
                .replicas
                .await_replicated(shard.partition.tp(), end_offset, WRITE_TIMEOUT)
                .await;
            match replicated {
                Ok(()) => {
                    let mut entries = shard.entries.lock();
                    for (_, keyed) in written {
                        entries.extend(keyed);
                    }
                }
                Err(e) => written.iter().for_each(|&(i, _)| results[i] = Err(e)),
            }
        }
        results
    }

    /// Loads every led partition and drops the partitions led elsewhere
    /// now (see [`LedShards::follow_leadership`]). Blocking I/O: the broker
    /// calls this on the blocking pool after each metadata change.
    pub fn follow_leadership(&self, image: &MetadataImage) {
        self.shards.follow_leadership(
            image,
            |tp| self.replicas.hosted_partition(tp),
            StateShard::load,
        );
    }
}

/// A mirror partition's values with their record keys.
type Keyed = Vec<(MirrorStateKey, MirrorStateValue)>;

/// `key`'s `values` as stored entries and as records, unless a newer
/// leader of the mirror partition already wrote (FENCED_LEADER_EPOCH).
fn records_of(
    entries: &HashMap<MirrorStateKey, MirrorStateValue>,
    key: &MirrorPartitionKey,
    values: &[MirrorStateValue],
) -> Result<(Keyed, Vec<SimpleRecord>), ResponseError> {
    let mut keyed = Vec::with_capacity(values.len());
    let mut records = Vec::with_capacity(values.len());
    for value in values {
        let record_key = match value {
            MirrorStateValue::PartitionState(_) => MirrorStateKey::PartitionState(key.clone()),
            MirrorStateValue::LastMirroredEpoch(_) => {
                MirrorStateKey::LastMirroredEpoch(key.clone())
            }
        };
        if let Some(stored) = entries.get(&record_key) {
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
        keyed.push((record_key, value.clone()));
    }
    Ok((keyed, records))
}

fn writer_epoch(value: &MirrorStateValue) -> i32 {
    match value {
        MirrorStateValue::PartitionState(v) => v.leader_epoch,
        MirrorStateValue::LastMirroredEpoch(v) => v.leader_epoch,
    }
}

/// A Read/WriteMirrorStates answer from the coordinator's store, as the
/// driver of a partition reads it.
pub fn stored_from_read(p: &ReadMirrorStatesPartitionResult) -> Result<StoredState, String> {
    if p.error_code != 0 {
        return Err(format!(
            "ReadMirrorStates answered error code {}",
            p.error_code
        ));
    }
    let state = if p.state == UNKNOWN_STATE {
        None
    } else {
        Some(
            PartitionStateValue {
                state: MirrorPartitionState::from_wire_value(p.state).map_err(|e| e.to_string())?,
                previous_state: MirrorPartitionState::from_wire_value(p.previous_state)
                    .map_err(|e| e.to_string())?,
                leader_epoch: p.leader_epoch,
                error_message: p.error_message.clone(),
                unknown_tagged_fields: Default::default(),
            }
            .with_failover(p.failover().as_ref()),
        )
    };
    let last_mirrored_epoch = (p.last_mirrored_epoch != NO_EPOCH).then(|| LastMirroredEpochValue {
        leader_epoch: p.leader_epoch,
        last_mirrored_epoch: p.last_mirrored_epoch,
        unknown_tagged_fields: Default::default(),
    });
    Ok(StoredState {
        state,
        last_mirrored_epoch,
    })
}
