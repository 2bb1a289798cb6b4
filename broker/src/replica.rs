//! The replica manager: which partitions this broker hosts, in which role,
//! and the produce and fetch paths over their logs.
//!
//! It follows the metadata image: partitions that list this broker as a
//! replica get a log; removed topics lose theirs; leader epochs come from
//! the image. The high watermark is the smallest log end offset among the
//! ISR; while the ISR is this broker alone (a single node), that is the log
//! end itself.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use ottla_storage::log::{AppendInfo, FetchIsolation, ReadInfo};
use ottla_storage::manager::{LogManager, SharedLog, TopicPartition};
use ottla_storage::producer_state::AppendOrigin;
use ottla_storage::StorageError;
use parking_lot::RwLock;
use tokio::sync::watch;
use tracing::{info, warn};
use uuid::Uuid;

use crate::log_config::TopicConfigResolver;
use crate::metrics::PartitionStats;

/// Leadership state of a hosted partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub replicas: Vec<i32>,
}

pub struct Partition {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub log: SharedLog,
    state: RwLock<PartitionState>,
    /// This partition's share of its topic's traffic metrics.
    pub stats: PartitionStats,
}

impl Partition {
    pub fn state(&self) -> PartitionState {
        self.state.read().clone()
    }
}

/// A produce outcome for one partition, in Kafka terms.
#[derive(Debug, Clone)]
pub struct ProduceOutcome {
    pub error: ResponseError,
    pub message: Option<String>,
    pub base_offset: i64,
    pub log_append_time: i64,
    pub log_start_offset: i64,
}

/// What one partition read asks for.
#[derive(Debug, Clone, Copy)]
pub struct ReadSpec {
    pub offset: i64,
    pub max_bytes: usize,
    pub isolation: FetchIsolation,
    /// -1 when the client does not know the epoch.
    pub current_leader_epoch: i32,
    /// Consumers must read from the leader; replicas need not.
    pub leader_only: bool,
    /// Return a first batch larger than `max_bytes` rather than nothing.
    pub min_one_batch: bool,
}

/// A fetch outcome for one partition.
#[derive(Debug, Clone)]
pub struct FetchOutcome {
    pub error: Option<ResponseError>,
    pub records: Option<Bytes>,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub aborted: Option<Vec<ottla_storage::txn_index::AbortedTxn>>,
}

impl FetchOutcome {
    fn error(e: ResponseError) -> Self {
        Self {
            error: Some(e),
            records: None,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted: None,
        }
    }
}

pub struct ReplicaManager {
    node_id: i32,
    logs: Arc<LogManager>,
    configs: Arc<TopicConfigResolver>,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
    /// Bumped on every append, to wake long-polling fetches.
    appends: watch::Sender<u64>,
}

impl ReplicaManager {
    pub fn new(node_id: i32, logs: Arc<LogManager>, configs: Arc<TopicConfigResolver>) -> Self {
        Self {
            node_id,
            logs,
            configs,
            partitions: RwLock::new(HashMap::new()),
            appends: watch::channel(0).0,
        }
    }

    pub fn logs(&self) -> &Arc<LogManager> {
        &self.logs
    }

    pub fn partition(&self, tp: &TopicPartition) -> Option<Arc<Partition>> {
        self.partitions.read().get(tp).cloned()
    }

    pub fn hosted(&self) -> Vec<Arc<Partition>> {
        self.partitions.read().values().cloned().collect()
    }

    /// Brings hosted partitions in line with a new metadata image.
    pub fn apply_image(&self, image: &MetadataImage) {
        self.configs.set_image(Arc::new(image.clone()));
        let mut wanted: HashMap<TopicPartition, (Uuid, PartitionState)> = HashMap::new();
        for topic in image.topics.values() {
            for (p, part) in &topic.partitions {
                if part.replicas.contains(&self.node_id) {
                    wanted.insert(
                        TopicPartition::new(topic.name.clone(), *p),
                        (
                            topic.id,
                            PartitionState {
                                leader: part.leader,
                                leader_epoch: part.leader_epoch,
                                isr: part.isr.clone(),
                                replicas: part.replicas.clone(),
                            },
                        ),
                    );
                }
            }
        }
        let current: Vec<TopicPartition> = self.partitions.read().keys().cloned().collect();
        for tp in current.iter().filter(|tp| !wanted.contains_key(*tp)) {
            self.partitions.write().remove(tp);
            if let Err(e) = self.logs.delete(tp) {
                warn!(partition = %tp, error = %e, "could not delete the log of a removed partition");
            }
        }
        // Logs on disk for partitions the image no longer has (a topic
        // deleted while this broker was down) go too.
        for tp in self.logs.partitions() {
            if !wanted.contains_key(&tp) {
                if let Err(e) = self.logs.delete(&tp) {
                    warn!(partition = %tp, error = %e, "could not delete a stray log");
                }
            }
        }
        for (tp, (topic_id, state)) in wanted {
            let existing = self.partition(&tp);
            match existing {
                Some(p) if p.topic_id == topic_id => {
                    let config = self.configs.resolve(&tp.topic);
                    let mut log = p.log.write();
                    log.set_config(config);
                    self.note_leadership(&tp, &mut log, &state);
                    drop(log);
                    *p.state.write() = state;
                }
                _ => self.host(tp, topic_id, state),
            }
        }
    }

    fn host(&self, tp: TopicPartition, topic_id: Uuid, state: PartitionState) {
        let config = self.configs.resolve(&tp.topic);
        let id = base64_topic_id(&topic_id);
        match self.logs.get_or_create(&tp, &id, config) {
            Ok(log) => {
                info!(partition = %tp, leader = state.leader, epoch = state.leader_epoch, "hosting partition");
                self.note_leadership(&tp, &mut log.write(), &state);
                self.partitions.write().insert(
                    tp.clone(),
                    Arc::new(Partition {
                        tp,
                        topic_id,
                        log,
                        state: RwLock::new(state),
                        stats: PartitionStats::default(),
                    }),
                );
            }
            Err(e) => warn!(partition = %tp, error = %e, "could not open the partition's log"),
        }
    }

    fn note_leadership(
        &self,
        tp: &TopicPartition,
        log: &mut ottla_storage::log::PartitionLog,
        state: &PartitionState,
    ) {
        if state.leader == self.node_id {
            if let Err(e) = log.assign_leader_epoch(state.leader_epoch) {
                warn!(partition = %tp, error = %e, "could not record the new leader epoch");
            }
        }
    }

    /// Leader append of client batches. `records` is copied once so the
    /// batch headers can be stamped in place.
    pub fn append(
        &self,
        tp: &TopicPartition,
        records: &Bytes,
        required_acks: i16,
        origin: AppendOrigin,
    ) -> ProduceOutcome {
        let fail = |error: ResponseError, message: Option<String>| ProduceOutcome {
            error,
            message,
            base_offset: -1,
            log_append_time: -1,
            log_start_offset: -1,
        };
        let Some(partition) = self.partition(tp) else {
            return fail(ResponseError::UnknownTopicOrPartition, None);
        };
        let state = partition.state();
        if state.leader != self.node_id {
            partition.stats.produce_failed();
            return fail(ResponseError::NotLeaderOrFollower, None);
        }
        let min_isr = partition.log.read().config().min_insync_replicas;
        if required_acks == -1 && (state.isr.len() as i32) < min_isr {
            partition.stats.produce_failed();
            return fail(
                ResponseError::NotEnoughReplicas,
                Some(format!("The size of the current ISR {} is insufficient to satisfy the min.isr requirement of {min_isr}", state.isr.len())),
            );
        }
        let mut buf = records.to_vec();
        let now = now_ms();
        let result = {
            let mut log = partition.log.write();
            let r = log.append_as_leader(&mut buf, state.leader_epoch, origin, now);
            if r.is_ok() && state.isr == [self.node_id] {
                let end = log.log_end_offset();
                log.set_high_watermark(end);
            }
            r
        };
        match result {
            Ok(info) => {
                partition.stats.produced(records.len(), info.record_count);
                self.appends.send_modify(|n| *n += 1);
                ProduceOutcome {
                    error: ResponseError::Unknown(0),
                    message: None,
                    base_offset: info.first_offset,
                    log_append_time: info.log_append_time,
                    log_start_offset: info.log_start_offset,
                }
            }
            Err(e) => {
                partition.stats.produce_failed();
                let (code, message) = storage_error_code(&e);
                fail(code, Some(message))
            }
        }
    }

    /// Reads from a partition this broker leads (or follows, for replica
    /// fetches), checking the client's view of the leader epoch.
    pub fn read(&self, tp: &TopicPartition, spec: &ReadSpec) -> FetchOutcome {
        let ReadSpec {
            offset,
            max_bytes,
            isolation,
            current_leader_epoch,
            leader_only,
            min_one_batch,
        } = *spec;
        let Some(partition) = self.partition(tp) else {
            return FetchOutcome::error(ResponseError::UnknownTopicOrPartition);
        };
        let state = partition.state();
        if leader_only && state.leader != self.node_id {
            return FetchOutcome::error(ResponseError::NotLeaderOrFollower);
        }
        if current_leader_epoch >= 0 {
            if current_leader_epoch < state.leader_epoch {
                return FetchOutcome::error(ResponseError::FencedLeaderEpoch);
            }
            if current_leader_epoch > state.leader_epoch {
                return FetchOutcome::error(ResponseError::UnknownLeaderEpoch);
            }
        }
        let log = partition.log.read();
        match log.read(offset, max_bytes, isolation, min_one_batch) {
            Ok(ReadInfo {
                slice,
                high_watermark,
                last_stable_offset,
                log_start_offset,
                aborted,
                ..
            }) => {
                drop(log);
                let records = match slice.map(|s| s.read()).transpose() {
                    Ok(r) => r,
                    Err(e) => {
                        warn!(partition = %tp, error = %e, "read failed");
                        return FetchOutcome::error(ResponseError::KafkaStorageError);
                    }
                };
                FetchOutcome {
                    error: None,
                    records,
                    high_watermark,
                    last_stable_offset,
                    log_start_offset,
                    aborted,
                }
            }
            Err(StorageError::OffsetOutOfRange { .. }) => FetchOutcome {
                error: Some(ResponseError::OffsetOutOfRange),
                records: None,
                high_watermark: log.high_watermark(),
                last_stable_offset: log.last_stable_offset(),
                log_start_offset: log.log_start_offset(),
                aborted: None,
            },
            Err(e) => {
                warn!(partition = %tp, error = %e, "read failed");
                FetchOutcome::error(storage_error_code(&e).0)
            }
        }
    }

    /// Waits until something is appended anywhere, or `timeout` passes.
    pub async fn wait_for_appends(&self, seen: u64, timeout: Duration) {
        let mut rx = self.appends.subscribe();
        if *rx.borrow() != seen {
            return;
        }
        let _ = tokio::time::timeout(timeout, rx.changed()).await;
    }

    /// Current append counter (taken before a read, passed to `wait_for_appends`).
    pub fn append_counter(&self) -> u64 {
        *self.appends.borrow()
    }

    /// Leader-side offsets: `(log start, log end, high watermark, lso)`.
    pub fn offsets(&self, tp: &TopicPartition) -> Option<(i64, i64, i64, i64)> {
        let p = self.partition(tp)?;
        let log = p.log.read();
        Some((
            log.log_start_offset(),
            log.log_end_offset(),
            log.high_watermark(),
            log.last_stable_offset(),
        ))
    }

    /// Counts a consumer fetch's answer for one partition in its topic's
    /// traffic metrics.
    pub fn record_fetch(&self, tp: &TopicPartition, outcome: &FetchOutcome) {
        if let Some(p) = self.partition(tp) {
            let bytes = outcome.records.as_ref().map_or(0, |r| r.len());
            p.stats.fetched(bytes, outcome.error.is_some());
        }
    }

    /// Records the outcome of an append done by another path (coordinators).
    pub fn notify_append(&self, _info: &AppendInfo) {
        self.appends.send_modify(|n| *n += 1);
    }
}

/// Maps storage errors to Kafka error codes and operator-facing messages.
pub fn storage_error_code(e: &StorageError) -> (ResponseError, String) {
    let code = match e {
        StorageError::Corrupt(_) => ResponseError::CorruptMessage,
        StorageError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
        StorageError::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
        StorageError::NonContiguousOffsets { .. } => ResponseError::InvalidRecord,
        StorageError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        StorageError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        StorageError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        StorageError::InvalidTxnState(_) => ResponseError::InvalidTxnState,
        StorageError::CorruptFile { .. } | StorageError::Offline { .. } | StorageError::Io(_) => {
            ResponseError::KafkaStorageError
        }
    };
    (code, e.to_string())
}

/// Kafka's text form of a UUID: URL-safe base64 without padding.
pub fn base64_topic_id(id: &Uuid) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
