//! One `__share_group_state` partition's share states, loaded from its log;
//! each write appends the share partition's new snapshot before it counts.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_coordinator_common::codec::FieldTooLong;
use ottla_coordinator_common::partition_writer::{HostedPartition, PartitionWriter};
use ottla_coordinator_common::shards::{replay_records, Unload};
use ottla_protocol::batch::{BatchBuilder, SimpleRecord};
use ottla_storage::manager::TopicPartition;
use ottla_storage::producer_state::AppendOrigin;
use parking_lot::Mutex;
use tracing::info;
use uuid::Uuid;

use crate::records::{
    apply_update, decode, encode_snapshot, snapshot_key, SnapshotMeta, StateRecord,
};
use crate::state::{ShareState, StateBatch, StateKey};
use ottla_share::persisted::{ACKNOWLEDGED, ARCHIVED, ARCHIVING, AVAILABLE};

/// A start offset not set yet (the state of deleted offsets).
pub const UNSET_START: i64 = -1;

struct Stored {
    meta: SnapshotMeta,
    state: ShareState,
}

pub struct StateShard {
    partition: Arc<dyn HostedPartition>,
    replicas: Arc<dyn PartitionWriter>,
    states: Mutex<HashMap<StateKey, Stored>>,
}

/// A write to a share partition's state (WriteShareGroupState's).
#[derive(Debug, Clone)]
pub struct StateWrite {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    /// -1: unchanged.
    pub start_offset: i64,
    pub batches: Vec<StateBatch>,
}

impl StateWrite {
    /// Offsets in order and within the log's range, and known states: a
    /// write is refused whole otherwise, before it can reach the log.
    fn is_well_formed(&self) -> bool {
        self.start_offset >= -1
            && self.batches.iter().all(|b| {
                0 <= b.first_offset
                    && b.first_offset <= b.last_offset
                    && b.last_offset < i64::MAX
                    && b.delivery_count >= 0
                    && [AVAILABLE, ACKNOWLEDGED, ARCHIVING, ARCHIVED].contains(&b.delivery_state)
            })
    }
}

impl StateShard {
    /// Replays the partition's log. Blocking I/O.
    pub fn load(
        partition: Arc<dyn HostedPartition>,
        replicas: Arc<dyn PartitionWriter>,
    ) -> anyhow::Result<Self> {
        let mut states: HashMap<StateKey, Stored> = HashMap::new();
        replay_records(&*partition, |key, value| {
            match decode(key, value)? {
                Some(StateRecord::Snapshot(k, Some((meta, state)))) => {
                    states.insert(k, Stored { meta, state });
                }
                Some(StateRecord::Snapshot(k, None) | StateRecord::Update(k, None)) => {
                    states.remove(&k);
                }
                Some(StateRecord::Update(k, Some((start, batches)))) => {
                    if let Some(stored) = states.get_mut(&k) {
                        apply_update(&mut stored.state, start, &batches);
                    }
                }
                None => {}
            }
            Ok(())
        })?;
        info!(partition = %partition.tp(), share_partitions = states.len(), "share coordinator loaded");
        Ok(Self {
            partition,
            replicas,
            states: Mutex::new(states),
        })
    }

    pub fn tp(&self) -> &TopicPartition {
        self.partition.tp()
    }

    pub fn read(&self, key: &StateKey) -> Option<ShareState> {
        self.states.lock().get(key).map(|s| s.state.clone())
    }

    /// Applies `write` to `key`'s state and appends the result as its new
    /// snapshot; the log end the caller waits to see replicated. A write
    /// from an older leader epoch than the state's is refused
    /// (FENCED_LEADER_EPOCH): a deposed leader must not undo its successor's
    /// acknowledgements. Blocking I/O.
    pub fn write(
        &self,
        key: &StateKey,
        write: &StateWrite,
        now: i64,
    ) -> Result<i64, ResponseError> {
        if !write.is_well_formed() {
            return Err(ResponseError::InvalidRequest);
        }
        let mut states = self.states.lock();
        let (mut state, meta) = match states.get(key) {
            Some(s) => {
                if write.leader_epoch < s.state.leader_epoch {
                    return Err(ResponseError::FencedLeaderEpoch);
                }
                // The state was initialized again (AlterShareGroupOffsets)
                // since this writer read it.
                if write.state_epoch < s.state.state_epoch {
                    return Err(ResponseError::FencedStateEpoch);
                }
                let meta = SnapshotMeta {
                    snapshot_epoch: s.meta.snapshot_epoch.wrapping_add(1),
                    create_timestamp: s.meta.create_timestamp,
                    write_timestamp: now,
                };
                (s.state.clone(), meta)
            }
            None => {
                let meta = SnapshotMeta {
                    snapshot_epoch: 0,
                    create_timestamp: now,
                    write_timestamp: now,
                };
                (ShareState::default(), meta)
            }
        };
        state.state_epoch = write.state_epoch;
        state.leader_epoch = write.leader_epoch;
        apply_update(&mut state, write.start_offset, &write.batches);
        let (k, v) =
            encode_snapshot(key, meta, &state).map_err(|_| ResponseError::InvalidRequest)?;
        let end = self.append(now, k, Some(v))?;
        states.insert(key.clone(), Stored { meta, state });
        Ok(end)
    }

    /// Starts `key`'s state over at `start_offset`, nothing in flight, in
    /// the next state epoch (InitializeShareGroupState, for
    /// AlterShareGroupOffsets; -1, for DeleteShareGroupOffsets, leaves the
    /// start unset: the next leader starts by `share.auto.offset.reset`):
    /// leaders holding the old state are fenced on their next write. The
    /// log end to wait for.
    pub fn initialize(
        &self,
        key: &StateKey,
        start_offset: i64,
        now: i64,
    ) -> Result<i64, ResponseError> {
        if start_offset < UNSET_START {
            return Err(ResponseError::InvalidRequest);
        }
        let mut states = self.states.lock();
        let (previous, meta) = match states.get(key) {
            Some(s) => (
                s.state.clone(),
                SnapshotMeta {
                    snapshot_epoch: s.meta.snapshot_epoch.wrapping_add(1),
                    create_timestamp: s.meta.create_timestamp,
                    write_timestamp: now,
                },
            ),
            None => (ShareState::default(), SnapshotMeta::default_at(now)),
        };
        let state = ShareState {
            state_epoch: previous.state_epoch.wrapping_add(1),
            leader_epoch: previous.leader_epoch,
            start_offset,
            batches: Vec::new(),
        };
        let (k, v) =
            encode_snapshot(key, meta, &state).map_err(|_| ResponseError::InvalidRequest)?;
        let end = self.append(now, k, Some(v))?;
        states.insert(key.clone(), Stored { meta, state });
        Ok(end)
    }

    /// DeleteShareGroupState: forgets `key`'s state. What stays is an
    /// unset start in the next state epoch, not a tombstone: a leader still
    /// holding the old state is fenced on its next write instead of writing
    /// it back, and a new group of the same id starts by
    /// `share.auto.offset.reset`. The log end to wait for; None when there
    /// was nothing to forget.
    pub fn delete(&self, key: &StateKey, now: i64) -> Result<Option<i64>, ResponseError> {
        let forgotten = self
            .states
            .lock()
            .get(key)
            .is_none_or(|s| s.state.start_offset == UNSET_START && s.state.batches.is_empty());
        if forgotten {
            return Ok(None);
        }
        self.initialize(key, UNSET_START, now).map(Some)
    }

    /// Removes the state of every share partition of the topics `ids`
    /// (deleted topics) with tombstones, in one batch; how many were
    /// removed.
    pub fn forget_topics(&self, ids: &BTreeSet<Uuid>, now: i64) -> Result<usize, ResponseError> {
        let mut states = self.states.lock();
        let doomed: Vec<StateKey> = states
            .keys()
            .filter(|k| ids.contains(&k.topic_id))
            .cloned()
            .collect();
        if doomed.is_empty() {
            return Ok(0);
        }
        let tombstones = doomed
            .iter()
            .map(|key| Ok((snapshot_key(key)?, None)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_: FieldTooLong| ResponseError::InvalidRequest)?;
        self.append_all(now, tombstones)?;
        for key in &doomed {
            states.remove(key);
        }
        Ok(doomed.len())
    }

    fn append(&self, now: i64, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<i64, ResponseError> {
        self.append_all(now, vec![(key, value)])
    }

    /// Appends records (key, value; no value: a tombstone) in one batch;
    /// the log end to wait for.
    fn append_all(
        &self,
        now: i64,
        records: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    ) -> Result<i64, ResponseError> {
        let records: Vec<SimpleRecord> = records
            .into_iter()
            .map(|(key, value)| SimpleRecord {
                timestamp: now,
                key: Some(key),
                value,
                headers: Vec::new(),
            })
            .collect();
        let batch = Bytes::from(BatchBuilder::default().build(&records));
        let outcome =
            self.replicas
                .append_as_leader(self.tp(), &batch, -1, AppendOrigin::Coordinator);
        match outcome.error {
            None => Ok(outcome.end_offset),
            Some(ResponseError::NotLeaderOrFollower | ResponseError::KafkaStorageError) => {
                Err(ResponseError::NotCoordinator)
            }
            Some(_) => Err(ResponseError::CoordinatorNotAvailable),
        }
    }
}

impl SnapshotMeta {
    fn default_at(now: i64) -> Self {
        Self {
            snapshot_epoch: 0,
            create_timestamp: now,
            write_timestamp: now,
        }
    }
}

impl Unload for StateShard {}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_of(first: i64, last: i64, state: i8) -> StateWrite {
        StateWrite {
            state_epoch: 0,
            leader_epoch: 0,
            start_offset: 0,
            batches: vec![StateBatch {
                first_offset: first,
                last_offset: last,
                delivery_state: state,
                delivery_count: 1,
            }],
        }
    }

    #[test]
    fn malformed_writes_are_refused_before_the_log() {
        assert!(write_of(0, 9, ACKNOWLEDGED).is_well_formed());
        assert!(!write_of(9, 0, ACKNOWLEDGED).is_well_formed(), "reversed");
        assert!(
            !write_of(-5, 0, ARCHIVED).is_well_formed(),
            "before any offset"
        );
        assert!(
            !write_of(0, i64::MAX, AVAILABLE).is_well_formed(),
            "no end after it"
        );
        assert!(
            !write_of(0, 9, 1).is_well_formed(),
            "acquired is not persisted"
        );
        assert!(
            write_of(0, 9, ARCHIVING).is_well_formed(),
            "bound for a dead-letter queue"
        );
        assert!(!write_of(0, 9, 5).is_well_formed(), "no such state");
    }
}
