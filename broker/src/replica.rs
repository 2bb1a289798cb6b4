//! The replica manager: which partitions this broker hosts, in which role,
//! and the produce and fetch paths over their logs.
//!
//! It follows the metadata image: partitions that list this broker as a
//! replica get a log; removed topics lose theirs; leader epochs come from
//! the image. The high watermark is the smallest log end offset among the
//! ISR; while the ISR is this broker alone (a single node), that is the log
//! end itself.

pub mod progress;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use ottla_protocol::mirror::errors::READ_ONLY_TOPIC;
use ottla_storage::config::LogConfig;
use ottla_storage::log::{AppendInfo, FetchIsolation, PartitionLog, ReadInfo};
use ottla_storage::manager::{LogManager, SharedLog, TopicPartition};
use ottla_storage::producer_state::AppendOrigin;
use ottla_storage::segment::FileSlice;
use ottla_storage::StorageError;
use parking_lot::{Mutex, RwLock};
use tokio::sync::mpsc;
use tracing::{info, warn};
use uuid::Uuid;

pub use ottla_coordinator_common::partition_writer::{now_ms, PartitionState, ProduceOutcome};
use ottla_coordinator_common::partition_writer::{HostedPartition, PartitionWriter, Replicated};

use self::progress::Followers;
use crate::log_config::TopicConfigResolver;
use crate::metrics::PartitionStats;
use crate::purgatory::{Waiter, Watchers};

pub struct Partition {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub log: SharedLog,
    state: RwLock<PartitionState>,
    /// This partition's share of its topic's traffic metrics.
    pub stats: PartitionStats,
    /// While leading: what each follower fetched.
    followers: Mutex<Followers>,
    /// An ISR change asked of the controller and not yet in the metadata.
    isr_pending: Mutex<Option<Vec<i32>>>,
    /// The topic's `mirror.name` binding, from the metadata.
    mirror_binding: RwLock<Option<String>>,
    /// Set by the mirror manager once this partition's mirroring is STOPPED
    /// (failed over): clients may write again.
    mirror_stopped: AtomicBool,
    /// Fetches and acks=all produces waiting for this partition to change.
    pub watchers: Watchers,
}

impl Partition {
    pub fn state(&self) -> PartitionState {
        self.state.read().clone()
    }

    /// While leading: what each follower fetched.
    pub(crate) fn followers(&self) -> parking_lot::MutexGuard<'_, Followers> {
        self.followers.lock()
    }

    pub fn mirror_binding(&self) -> Option<String> {
        self.mirror_binding.read().clone()
    }

    /// Whether this partition holds a source cluster's log: clients may
    /// not write, and its leader epochs are the source's.
    pub fn is_mirror_log(&self) -> bool {
        self.mirror_binding.read().is_some() && !self.mirror_stopped.load(Ordering::Acquire)
    }

    pub fn set_mirror_stopped(&self, stopped: bool) {
        self.mirror_stopped.store(stopped, Ordering::Release);
    }

    /// Why a client may not produce here, if it may not: mirror topics are
    /// read-only (non-retriable, naming the mirror) until their failover
    /// completes (retriable while it is under way).
    fn mirror_write_refusal(&self) -> Option<(ResponseError, String)> {
        if !self.is_mirror_log() {
            return None;
        }
        let binding = self.mirror_binding()?;
        Some(match binding.strip_suffix(".removed") {
            Some(mirror) => (
                ResponseError::NotEnoughReplicas,
                format!(
                    "{} is being removed from mirror '{mirror}' (failover in progress); retry shortly",
                    self.tp
                ),
            ),
            None => {
                let mirror = binding.strip_suffix(".paused").unwrap_or(&binding);
                (
                    ResponseError::Unknown(READ_ONLY_TOPIC.code),
                    format!(
                        "Topic {} is mirrored from another cluster by mirror '{mirror}' and is read-only; \
                         remove it from the mirror (ottla mirrors --remove) to write to it",
                        self.tp.topic
                    ),
                )
            }
        })
    }
}

/// What one partition read asks for.
#[derive(Debug, Clone, Copy)]
pub struct ReadSpec {
    pub offset: i64,
    pub max_bytes: usize,
    pub isolation: FetchIsolation,
    /// -1 when the client does not know the epoch.
    pub current_leader_epoch: i32,
    /// Whether only the leader may answer: replica fetches, and consumers
    /// before Fetch v11; newer consumers may read from a follower (KIP-392).
    pub leader_only: bool,
    /// Return a first batch larger than `max_bytes` rather than nothing.
    pub min_one_batch: bool,
}

/// A fetch outcome for one partition.
#[derive(Debug, Clone)]
pub struct FetchOutcome {
    pub error: Option<ResponseError>,
    /// The records, still in their segment file: the Fetch response sends
    /// them from there (or reads them when it assembles the answer).
    pub records: Option<FileSlice>,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub aborted: Option<Vec<ottla_storage::txn_index::AbortedTxn>>,
    /// For a follower whose log diverged: the epoch and end offset to
    /// truncate to (no records are returned then).
    pub diverging_epoch: Option<(i32, i64)>,
    /// For a consumer the leader sends to a replica in its rack (KIP-392):
    /// that replica (no records are returned then).
    pub preferred_read_replica: Option<i32>,
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
            diverging_epoch: None,
            preferred_read_replica: None,
        }
    }

    /// An answer with `log`'s offsets and no records, to be told why.
    pub fn offsets_only(log: &PartitionLog) -> Self {
        Self {
            error: None,
            records: None,
            high_watermark: log.high_watermark(),
            last_stable_offset: log.last_stable_offset(),
            log_start_offset: log.log_start_offset(),
            aborted: None,
            diverging_epoch: None,
            preferred_read_replica: None,
        }
    }

    /// Whether this answer goes out at once, and in an incremental session
    /// even when nothing else changed (as Kafka's): an error, a divergence
    /// to truncate at, or a replica to read from instead.
    pub fn must_answer(&self) -> bool {
        self.error.is_some()
            || self.diverging_epoch.is_some()
            || self.preferred_read_replica.is_some()
    }
}

/// An ISR change a partition leader asks of the controller (Kafka's
/// AlterPartition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
}

pub struct ReplicaManager {
    node_id: i32,
    logs: Arc<LogManager>,
    configs: Arc<TopicConfigResolver>,
    partitions: RwLock<HashMap<TopicPartition, Arc<Partition>>>,
    /// `replica.lag.time.max.ms`.
    replica_lag_max: Duration,
    isr_changes: mpsc::UnboundedSender<IsrChange>,
    /// ISR shrinks and expansions asked of the controller (metrics).
    isr_shrinks: AtomicU64,
    isr_expands: AtomicU64,
}

impl ReplicaManager {
    /// Also returns the stream of ISR changes this broker's leaders ask for,
    /// for the broker to send to the controller.
    pub fn new(
        node_id: i32,
        logs: Arc<LogManager>,
        configs: Arc<TopicConfigResolver>,
        replica_lag_max: Duration,
    ) -> (Self, mpsc::UnboundedReceiver<IsrChange>) {
        let (isr_changes, requests) = mpsc::unbounded_channel();
        let manager = Self {
            node_id,
            logs,
            configs,
            partitions: RwLock::new(HashMap::new()),
            replica_lag_max,
            isr_changes,
            isr_shrinks: AtomicU64::new(0),
            isr_expands: AtomicU64::new(0),
        };
        (manager, requests)
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn logs(&self) -> &Arc<LogManager> {
        &self.logs
    }

    /// Whether `replica` is in `tp`'s ISR here.
    pub fn in_isr(&self, tp: &TopicPartition, replica: i32) -> bool {
        self.partition(tp)
            .is_some_and(|p| p.state().isr.contains(&replica))
    }

    pub fn partition(&self, tp: &TopicPartition) -> Option<Arc<Partition>> {
        self.partitions.read().get(tp).cloned()
    }

    pub fn hosted(&self) -> Vec<Arc<Partition>> {
        self.partitions.read().values().cloned().collect()
    }

    /// Brings hosted partitions in line with a new metadata image.
    pub fn apply_image(&self, image: &Arc<MetadataImage>) {
        self.configs.set_image(image.clone());
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
            if let Some(removed) = self.partitions.write().remove(tp) {
                // Its waiting requests answer NOT_LEADER_OR_FOLLOWER now.
                removed.watchers.wake();
            }
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
        // Resolved once per topic: a topic's partitions share its config.
        let mut configs: HashMap<String, LogConfig> = HashMap::new();
        for (tp, (topic_id, state)) in wanted {
            let config = match configs.get(&tp.topic) {
                Some(config) => config.clone(),
                None => {
                    let config = self.configs.resolve(&tp.topic);
                    configs.insert(tp.topic.clone(), config.clone());
                    config
                }
            };
            match self.partition(&tp) {
                Some(p) if p.topic_id == topic_id => {
                    if *p.log.read().config() != config {
                        self.logs.configure(&tp, config);
                    }
                    *p.mirror_binding.write() = image.mirror_binding(&tp.topic).map(String::from);
                    let previous = p.state();
                    if previous != state {
                        self.change_state(&p, &previous, state);
                    }
                }
                _ => {
                    let binding = image.mirror_binding(&tp.topic).map(String::from);
                    self.host(tp, topic_id, state, binding, config)
                }
            }
        }
    }

    fn host(
        &self,
        tp: TopicPartition,
        topic_id: Uuid,
        state: PartitionState,
        mirror_binding: Option<String>,
        config: LogConfig,
    ) {
        let id = ottla_protocol::names::uuid_text(&topic_id);
        match self.logs.get_or_create(&tp, &id, config) {
            Ok(log) => {
                info!(partition = %tp, leader = state.leader, epoch = state.leader_epoch, "hosting partition");
                let partition = Arc::new(Partition {
                    tp: tp.clone(),
                    topic_id,
                    log,
                    state: RwLock::new(PartitionState {
                        leader: -1,
                        leader_epoch: -1,
                        isr: Vec::new(),
                        replicas: Vec::new(),
                    }),
                    stats: PartitionStats::default(),
                    followers: Mutex::default(),
                    isr_pending: Mutex::default(),
                    mirror_binding: RwLock::new(mirror_binding),
                    mirror_stopped: AtomicBool::new(false),
                    watchers: Watchers::default(),
                });
                let previous = partition.state();
                self.change_state(&partition, &previous, state);
                if let Some(replaced) = self.partitions.write().insert(tp, partition) {
                    // A deleted topic's partition, replaced by the new
                    // topic's: its waiting requests answer now.
                    replaced.watchers.wake();
                }
            }
            Err(e) => warn!(partition = %tp, error = %e, "could not open the partition's log"),
        }
    }

    /// Applies a new leader/ISR state from the metadata. A leader of a new
    /// epoch records it in the log's epoch cache and starts tracking its
    /// followers afresh; the high watermark is then re-evaluated, since an
    /// ISR change can move it.
    fn change_state(&self, p: &Partition, previous: &PartitionState, state: PartitionState) {
        let leads = state.leader == self.node_id;
        if leads && (previous.leader != self.node_id || previous.leader_epoch != state.leader_epoch)
        {
            // A mirror log's epochs are the source's: the destination's own
            // epoch enters it only with the first write after failover.
            if !p.is_mirror_log() {
                if let Err(e) = p.log.write().assign_leader_epoch(state.leader_epoch) {
                    warn!(partition = %p.tp, error = %e, "could not record the new leader epoch");
                }
            }
            p.followers
                .lock()
                .reset(&state.replicas, self.node_id, Instant::now());
            info!(partition = %p.tp, epoch = state.leader_epoch, isr = ?state.isr, "leading partition");
        } else if !leads && previous.leader != state.leader && state.leader >= 0 {
            info!(partition = %p.tp, leader = state.leader, epoch = state.leader_epoch, "following partition");
        }
        // Any new ISR settles the pending change: applied, or overtaken by
        // another (the controller fencing a broker changes the ISR without a
        // new leader epoch). Kept pending, it would block every later change
        // of this partition, and a follower would never rejoin the ISR.
        let mut pending = p.isr_pending.lock();
        if pending.is_some()
            && (!leads || previous.leader_epoch != state.leader_epoch || previous.isr != state.isr)
        {
            *pending = None;
        }
        drop(pending);
        let moved = previous.leader != state.leader || previous.leader_epoch != state.leader_epoch;
        *p.state.write() = state;
        if leads {
            self.maybe_advance_high_watermark(p);
        }
        if moved {
            // acks=all waits re-check now: one whose leadership moved away
            // answers NOT_LEADER_OR_FOLLOWER at once instead of sleeping to
            // its timeout (past the client's, which then bumps its epoch and
            // re-sends what may already be committed: duplicates).
            p.watchers.wake();
        }
    }

    /// After a leader append: followers' fetches wait for the log end,
    /// consumers' and acks=all produces for the high watermark. One wakeup
    /// serves both when the high watermark moved with the append (an ISR of
    /// this leader alone).
    fn wake_after_append(&self, p: &Partition) {
        if !self.maybe_advance_high_watermark(p) {
            p.watchers.wake();
        }
    }

    /// Moves the high watermark up to what every ISR member has, and wakes
    /// the partition's watchers if it moved; returns whether it did. As in
    /// Kafka 4 (KIP-966), it stands still while the ISR is below the
    /// partition's min ISR: a replica that leaves such an ISR then misses
    /// no committed record, which is what keeps it eligible to lead.
    fn maybe_advance_high_watermark(&self, p: &Partition) -> bool {
        let state = p.state();
        let advanced = {
            let mut log = p.log.write();
            if state.isr.len() < effective_min_isr(log.config().min_insync_replicas, &state) {
                return false;
            }
            let leader_end = log.log_end_offset();
            let hw = p
                .followers
                .lock()
                .isr_log_end(&state.isr, self.node_id, leader_end)
                .min(leader_end);
            let moved = hw > log.high_watermark();
            if moved {
                log.set_high_watermark(hw);
            }
            moved
        };
        if advanced {
            p.watchers.wake();
        }
        advanced
    }

    /// A follower fetched `fetch_offset` having last fetched data of
    /// `last_fetched_epoch` (-1: unknown). Returns the diverging epoch and
    /// its end offset when the follower's log has gone past where this
    /// leader's history of that epoch ends (it must truncate there first);
    /// otherwise records its progress, moving the high watermark and
    /// asking for its return to the ISR as it catches up. (Fetches go
    /// through [`ReplicaManager::fetch`]; tests play followers with this.)
    #[cfg(test)]
    pub(crate) fn follower_fetched(
        &self,
        tp: &TopicPartition,
        replica: i32,
        fetch_offset: i64,
        last_fetched_epoch: i32,
    ) -> Option<(i32, i64)> {
        let p = self.partition(tp)?;
        self.follower_progress(&p, replica, fetch_offset, last_fetched_epoch)
    }

    /// [`ReplicaManager::follower_fetched`] on a partition already looked up.
    fn follower_progress(
        &self,
        p: &Partition,
        replica: i32,
        fetch_offset: i64,
        last_fetched_epoch: i32,
    ) -> Option<(i32, i64)> {
        let state = p.state();
        if state.leader != self.node_id || !state.replicas.contains(&replica) {
            return None;
        }
        let leader_end = {
            let log = p.log.read();
            if let Some(diverged) = divergence(&log, fetch_offset, last_fetched_epoch) {
                return Some(diverged);
            }
            log.log_end_offset()
        };
        p.followers
            .lock()
            .fetched(replica, fetch_offset, leader_end, Instant::now());
        self.maybe_advance_high_watermark(p);
        if !state.isr.contains(&replica) {
            let hw = p.log.read().high_watermark();
            let epoch_start = p
                .log
                .read()
                .epoch_cache()
                .entries()
                .iter()
                .find(|e| e.epoch == state.leader_epoch)
                .map(|e| e.start_offset);
            if fetch_offset >= hw
                && epoch_start.is_none_or(|start| fetch_offset >= start)
                && self.isr_eligible(replica)
            {
                let mut isr = state.isr.clone();
                isr.push(replica);
                self.ask_isr_change(p, &state, isr);
            }
        }
        None
    }

    /// Whether every ISR member (every replica with `all_replicas`) other
    /// than this leader has fetched since `since` without being past
    /// `end`: after a leader cut its log at `end`, the followers did too.
    pub fn followers_within(
        &self,
        p: &Partition,
        end: i64,
        since: Instant,
        all_replicas: bool,
    ) -> bool {
        let state = p.state();
        let members = if all_replicas {
            &state.replicas
        } else {
            &state.isr
        };
        let followers = p.followers.lock();
        members
            .iter()
            .filter(|r| **r != self.node_id)
            .all(|r| followers.within_since(*r, end, since))
    }

    /// For a consumer fetch that says which epoch its data was last of (a
    /// mirror fetcher does; Kafka checks any fetch v12+ that does): where
    /// this replica's history of that epoch ends, if the fetcher's log went
    /// past it. A leader-only read checks on the leader alone.
    fn consumer_divergence(
        &self,
        p: &Partition,
        spec: &ReadSpec,
        last_fetched_epoch: i32,
    ) -> Option<(i32, i64)> {
        if spec.leader_only && p.state.read().leader != self.node_id {
            return None;
        }
        let fetch_offset = spec.offset;
        let log = p.log.read();
        divergence(&log, fetch_offset, last_fetched_epoch)
    }

    /// The answer to a follower whose log diverged at `epoch_end`.
    fn diverged(p: &Partition, epoch_end: (i32, i64)) -> FetchOutcome {
        FetchOutcome {
            diverging_epoch: Some(epoch_end),
            ..FetchOutcome::offsets_only(&p.log.read())
        }
    }

    /// Removes followers that stopped catching up from the ISR of every
    /// partition this broker leads.
    pub fn shrink_lagging_isrs(&self) {
        let now = Instant::now();
        for p in self.hosted() {
            let state = p.state();
            if state.leader != self.node_id || state.isr.len() <= 1 {
                continue;
            }
            let lagging =
                p.followers
                    .lock()
                    .lagging(&state.isr, self.node_id, self.replica_lag_max, now);
            if !lagging.is_empty() {
                info!(partition = %p.tp, lagging = ?lagging, "shrinking the ISR");
                let isr = state
                    .isr
                    .iter()
                    .copied()
                    .filter(|r| !lagging.contains(r))
                    .collect();
                self.ask_isr_change(&p, &state, isr);
            }
        }
    }

    /// The error for a partition this broker does not host: as Kafka's
    /// getPartitionOrError, NOT_LEADER_OR_FOLLOWER when the partition
    /// exists elsewhere (the client's metadata is stale: it refreshes, and
    /// the answer names the leader), UNKNOWN_TOPIC_OR_PARTITION when it
    /// does not exist at all.
    fn not_hosted(&self, tp: &TopicPartition) -> ResponseError {
        let image = self.configs.image();
        let exists = image
            .topic_by_name(&tp.topic)
            .is_some_and(|t| t.partitions.contains_key(&tp.partition));
        if exists {
            ResponseError::NotLeaderOrFollower
        } else {
            ResponseError::UnknownTopicOrPartition
        }
    }

    /// Kafka's isReplicaIsrEligible (KIP-841): a broker the metadata has
    /// fenced (or never registered) is not asked back into an ISR. The
    /// controller would refuse it, and the leader would ask again at the
    /// follower's next fetch, a refusal per fetch for as long as it lasts.
    fn isr_eligible(&self, replica: i32) -> bool {
        self.configs
            .image()
            .brokers
            .get(&replica)
            .is_some_and(|b| !b.fenced)
    }

    fn ask_isr_change(&self, p: &Partition, state: &PartitionState, isr: Vec<i32>) {
        let mut pending = p.isr_pending.lock();
        if pending.is_some() {
            return;
        }
        *pending = Some(isr.clone());
        let counter = if isr.len() < state.isr.len() {
            &self.isr_shrinks
        } else {
            &self.isr_expands
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let _ = self.isr_changes.send(IsrChange {
            tp: p.tp.clone(),
            topic_id: p.topic_id,
            leader_epoch: state.leader_epoch,
            isr,
        });
    }

    /// ISR shrinks and expansions asked so far.
    pub fn isr_change_counts(&self) -> (u64, u64) {
        (
            self.isr_shrinks.load(Ordering::Relaxed),
            self.isr_expands.load(Ordering::Relaxed),
        )
    }

    /// The controller refused or lost an ISR change: allow asking again.
    pub fn isr_change_failed(&self, tp: &TopicPartition) {
        if let Some(p) = self.partition(tp) {
            *p.isr_pending.lock() = None;
        }
    }

    /// Partitions this broker follows from `leader`.
    pub fn followed_from(&self, leader: i32) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .values()
            .filter(|p| {
                let st = p.state.read();
                st.leader == leader && leader != self.node_id
            })
            .cloned()
            .collect()
    }

    /// The brokers this broker fetches from.
    pub fn leaders_followed(&self) -> BTreeSet<i32> {
        self.partitions
            .read()
            .values()
            .map(|p| p.state.read().leader)
            .filter(|l| *l >= 0 && *l != self.node_id)
            .collect()
    }

    /// Appends batches fetched from the leader as they are, then takes the
    /// leader's high watermark (bounded by what this log has) and log start.
    pub fn append_replicated(
        &self,
        p: &Partition,
        records: &[u8],
        leader_high_watermark: i64,
        leader_log_start: i64,
    ) -> Result<(), StorageError> {
        let mut log = p.log.write();
        if !records.is_empty() {
            log.append_verbatim(records, now_ms())?;
        }
        if leader_log_start > log.log_start_offset() && leader_log_start <= log.log_end_offset() {
            log.delete_records_before(leader_log_start)?;
        }
        let hw = leader_high_watermark.min(log.log_end_offset());
        if hw > log.high_watermark() {
            log.set_high_watermark(hw);
        }
        drop(log);
        p.watchers.wake();
        Ok(())
    }

    /// Leader append of batches mirrored from a source cluster, stored byte
    /// for byte (offsets, epochs and producer ids are the source's). The
    /// destination's followers then replicate them as usual.
    pub fn append_mirrored(
        &self,
        p: &Partition,
        records: &[u8],
    ) -> Result<AppendInfo, StorageError> {
        let info = p.log.write().append_verbatim(records, now_ms())?;
        self.wake_after_append(p);
        p.stats.produced(records.len(), info.record_count);
        Ok(info)
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
        let fail = ProduceOutcome::failed;
        let Some(partition) = self.partition(tp) else {
            return fail(self.not_hosted(tp), None);
        };
        let state = partition.state();
        if state.leader != self.node_id {
            partition.stats.produce_failed();
            return fail(ResponseError::NotLeaderOrFollower, None);
        }
        if origin == AppendOrigin::Client {
            if let Some((error, message)) = partition.mirror_write_refusal() {
                partition.stats.produce_failed();
                return fail(error, Some(message));
            }
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
            log.append_as_leader(&mut buf, state.leader_epoch, origin, now)
        };
        match result {
            Ok(info) => {
                self.wake_after_append(&partition);
                partition.stats.produced(records.len(), info.record_count);
                ProduceOutcome {
                    error: None,
                    message: None,
                    base_offset: info.first_offset,
                    log_append_time: info.log_append_time,
                    log_start_offset: info.log_start_offset,
                    end_offset: info.last_offset + 1,
                    record_errors: Vec::new(),
                }
            }
            Err(StorageError::KeylessRecords { indexes }) => {
                partition.stats.produce_failed();
                let log_start_offset = partition.log.read().log_start_offset();
                refused_records(tp, &indexes, log_start_offset)
            }
            Err(e) => {
                partition.stats.produce_failed();
                let (code, message) = storage_error_code(&e);
                fail(code, Some(message))
            }
        }
    }

    /// Reads from a partition this broker leads (or follows, for replica
    /// fetches), checking the client's view of the leader epoch. (Fetches
    /// go through [`ReplicaManager::fetch`]; tests read with this.)
    #[cfg(test)]
    pub(crate) fn read(&self, tp: &TopicPartition, spec: &ReadSpec) -> FetchOutcome {
        let Some(partition) = self.partition(tp) else {
            return FetchOutcome::error(self.not_hosted(tp));
        };
        self.read_partition(&partition, spec)
    }

    /// One partition of a Fetch, looked up beforehand (None: not hosted
    /// here): a replica's (`follower`) progress or a fetcher's divergence
    /// (from `last_fetched_epoch`), then the read.
    pub fn fetch(
        &self,
        tp: &TopicPartition,
        partition: Option<&Partition>,
        follower: Option<i32>,
        last_fetched_epoch: i32,
        spec: &ReadSpec,
    ) -> FetchOutcome {
        let Some(p) = partition else {
            return FetchOutcome::error(self.not_hosted(tp));
        };
        let diverging = match follower {
            Some(replica) => self.follower_progress(p, replica, spec.offset, last_fetched_epoch),
            None => self.consumer_divergence(p, spec, last_fetched_epoch),
        };
        match diverging {
            Some(epoch_end) => Self::diverged(p, epoch_end),
            None => self.read_partition(p, spec),
        }
    }

    fn read_partition(&self, partition: &Partition, spec: &ReadSpec) -> FetchOutcome {
        let ReadSpec {
            offset,
            max_bytes,
            isolation,
            current_leader_epoch,
            leader_only,
            min_one_batch,
        } = *spec;
        {
            let state = partition.state.read();
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
            }) => FetchOutcome {
                error: None,
                records: slice,
                high_watermark,
                last_stable_offset,
                log_start_offset,
                aborted,
                diverging_epoch: None,
                preferred_read_replica: None,
            },
            Err(StorageError::OffsetOutOfRange { .. }) => FetchOutcome {
                error: Some(ResponseError::OffsetOutOfRange),
                ..FetchOutcome::offsets_only(&log)
            },
            Err(e) => {
                warn!(partition = %partition.tp, error = %e, "read failed");
                FetchOutcome::error(storage_error_code(&e).0)
            }
        }
    }

    /// Waits until the high watermark of `tp` reaches `end_offset` (every
    /// ISR member has the batch), for up to `timeout`. The error is what
    /// the producer is told when that does not happen.
    pub async fn wait_replicated(
        &self,
        tp: &TopicPartition,
        end_offset: i64,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let Some(p) = self.partition(tp) else {
            return Err(ResponseError::NotLeaderOrFollower);
        };
        let waiter = Waiter::new();
        loop {
            let version = p.watchers.version();
            if let Some(outcome) = self.replication_outcome(&p, end_offset) {
                return outcome;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ResponseError::RequestTimedOut);
            }
            waiter.watch(&p.watchers, 0, version);
            waiter.changed(deadline).await;
        }
    }

    /// [`ReplicaManager::wait_replicated`] for synchronous code on the
    /// blocking pool (the coordinators' acks=all writes: transaction
    /// markers, `__transaction_state`, transactional offsets). Returns at
    /// once when the ISR already has the batch.
    pub fn wait_replicated_blocking(
        &self,
        tp: &TopicPartition,
        end_offset: i64,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        let deadline = Instant::now() + timeout;
        let Some(p) = self.partition(tp) else {
            return Err(ResponseError::NotLeaderOrFollower);
        };
        let waiter = Waiter::new();
        loop {
            let version = p.watchers.version();
            if let Some(outcome) = self.replication_outcome(&p, end_offset) {
                return outcome;
            }
            if Instant::now() >= deadline {
                return Err(ResponseError::RequestTimedOut);
            }
            waiter.watch(&p.watchers, 0, version);
            waiter.changed_blocking(deadline);
        }
    }

    /// Whether a leader's batch ending at `end_offset` is decided: Ok once
    /// the high watermark passed it with at least `min.insync.replicas` in
    /// the ISR, an error once this broker no longer leads `p` (or no longer
    /// hosts it); None meanwhile.
    fn replication_outcome(
        &self,
        p: &Arc<Partition>,
        end_offset: i64,
    ) -> Option<Result<(), ResponseError>> {
        let still_hosted = self
            .partition(&p.tp)
            .is_some_and(|hosted| Arc::ptr_eq(&hosted, p));
        let state = p.state();
        if !still_hosted || state.leader != self.node_id {
            return Some(Err(ResponseError::NotLeaderOrFollower));
        }
        let log = p.log.read();
        if log.high_watermark() < end_offset {
            return None;
        }
        let min_isr = log.config().min_insync_replicas;
        Some(if (state.isr.len() as i32) < min_isr {
            Err(ResponseError::NotEnoughReplicasAfterAppend)
        } else {
            Ok(())
        })
    }

    /// The offsets of hosted partition `tp`'s log.
    pub fn offsets(&self, tp: &TopicPartition) -> Option<LogOffsets> {
        let p = self.partition(tp)?;
        let log = p.log.read();
        Some(LogOffsets {
            log_start: log.log_start_offset(),
            log_end: log.log_end_offset(),
            high_watermark: log.high_watermark(),
            last_stable: log.last_stable_offset(),
        })
    }

    /// Counts a consumer fetch's answer for one partition in its topic's
    /// traffic metrics.
    pub fn record_fetch(p: &Partition, outcome: &FetchOutcome) {
        let bytes = outcome.records.as_ref().map_or(0, |r| r.range.len);
        p.stats.fetched(bytes, outcome.error.is_some());
    }

    /// Records the outcome of an append done by another path (coordinators).
    pub fn notify_append(&self, p: &Partition) {
        self.wake_after_append(p);
    }
}

/// A log's offsets, read together under its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOffsets {
    pub log_start: i64,
    pub log_end: i64,
    pub high_watermark: i64,
    /// The last stable offset: read_committed consumers read up to it.
    pub last_stable: i64,
}

/// Where a fetcher's log diverged from `log`: it last fetched data of
/// `last_fetched_epoch` (-1: it does not say) and now asks for
/// `fetch_offset`, but this log's history of that epoch ends earlier (or the
/// epoch is unknown here).
fn divergence(
    log: &PartitionLog,
    fetch_offset: i64,
    last_fetched_epoch: i32,
) -> Option<(i32, i64)> {
    if last_fetched_epoch < 0 {
        return None;
    }
    let (epoch, end) = log.end_offset_for_epoch(last_fetched_epoch);
    (end < fetch_offset || epoch < last_fetched_epoch).then_some((epoch, end))
}

/// Kafka's answer to keyless records on a compacted topic: INVALID_RECORD,
/// every such record named, the first three in the message, and the log
/// start offset.
fn refused_records(tp: &TopicPartition, indexes: &[i32], log_start_offset: i64) -> ProduceOutcome {
    let why = format!("Compacted topic cannot accept message without key in topic partition {tp}");
    let record_errors: Vec<(i32, String)> = indexes.iter().map(|i| (*i, why.clone())).collect();
    let shown: Vec<String> = record_errors
        .iter()
        .take(3)
        .map(|(i, m)| format!("RecordError(batchIndex={i}, message='{m}')"))
        .collect();
    let message = format!(
        "One or more records have been rejected due to {} record errors in total, and only \
         showing the first three errors at most: [{}]",
        record_errors.len(),
        shown.join(", ")
    );
    ProduceOutcome {
        record_errors,
        log_start_offset,
        ..ProduceOutcome::failed(ResponseError::InvalidRecord, Some(message))
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
        StorageError::KeylessRecords { .. } => ResponseError::InvalidRecord,
        StorageError::CorruptFile { .. } | StorageError::Offline { .. } | StorageError::Io(_) => {
            ResponseError::KafkaStorageError
        }
        // Only the cleaner meets the first, only start-up the second; no
        // request does.
        StorageError::KeyMapTooSmall { .. } | StorageError::DirLocked { .. } => {
            ResponseError::UnknownServerError
        }
    };
    (code, e.to_string())
}

impl HostedPartition for Partition {
    fn tp(&self) -> &TopicPartition {
        &self.tp
    }

    fn topic_id(&self) -> Uuid {
        self.topic_id
    }

    fn log(&self) -> &SharedLog {
        &self.log
    }

    fn state(&self) -> PartitionState {
        Partition::state(self)
    }
}

impl PartitionWriter for ReplicaManager {
    fn node_id(&self) -> i32 {
        self.node_id
    }

    fn hosted_partition(&self, tp: &TopicPartition) -> Option<Arc<dyn HostedPartition>> {
        self.partition(tp).map(|p| p as Arc<dyn HostedPartition>)
    }

    fn hosted_partitions(&self) -> Vec<Arc<dyn HostedPartition>> {
        self.hosted()
            .into_iter()
            .map(|p| p as Arc<dyn HostedPartition>)
            .collect()
    }

    fn append_as_leader(
        &self,
        tp: &TopicPartition,
        records: &Bytes,
        required_acks: i16,
        origin: AppendOrigin,
    ) -> ProduceOutcome {
        self.append(tp, records, required_acks, origin)
    }

    fn await_replicated<'a>(
        &'a self,
        tp: &'a TopicPartition,
        end_offset: i64,
        timeout: Duration,
    ) -> Replicated<'a> {
        Box::pin(self.wait_replicated(tp, end_offset, timeout))
    }

    fn wait_replicated_blocking(
        &self,
        tp: &TopicPartition,
        end_offset: i64,
        timeout: Duration,
    ) -> Result<(), ResponseError> {
        ReplicaManager::wait_replicated_blocking(self, tp, end_offset, timeout)
    }
}

/// Kafka's `effectiveMinIsr`: `min.insync.replicas`, capped by the
/// replication factor (a topic of one replica is never under it).
fn effective_min_isr(min_insync_replicas: i32, state: &PartitionState) -> usize {
    (min_insync_replicas.max(1) as usize).min(state.replicas.len().max(1))
}
