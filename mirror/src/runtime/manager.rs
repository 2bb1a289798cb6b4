//! The mirror metadata manager: on every metadata change it starts a driver
//! for each mirror partition this broker leads and stops the drivers of
//! partitions it no longer leads. A driver loads the partition's state from
//! the `__mirror_state` coordinator and walks the state machine of the
//! seeds towards what `mirror.name` asks (mirror, pause, remove), persisting
//! every state it enters; an invalid transition is refused and logged,
//! never applied.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use kafka_protocol::error::ResponseError;
use ottla_controller::records::{CONFIG_RESOURCE_TOPIC, MIRROR_DISCARD_LOCAL_WRITES_CONFIG};
use ottla_controller::{Controller, MetadataImage};
use ottla_coordinator_common::inter_broker::BrokerClients;
use ottla_coordinator_common::partition_writer::{now_ms, HostedPartition};
use ottla_protocol::batch::{BatchBuilder, ControlType};
use ottla_protocol::mirror::admin::FailoverSummary;
use ottla_protocol::mirror::states::{ReadMirrorStatesRequest, ReadMirrorStatesTopic, NO_EPOCH};
use ottla_storage::manager::TopicPartition;
use ottla_storage::producer_state::AppendOrigin;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};
use uuid::Uuid;

use super::configs::ParsedConfigs;
use super::epoch_bumps::{EpochBump, EpochBumps};
use super::failover;
use super::fetcher::{FetchedFrom, MirrorFetchers};
use super::source::SourceCluster;
use super::state_store::{MirrorStateStore, StoredState};
use super::state_writes::{StateWrite, StateWriteError, StateWrites};
use super::stats::MirrorStats;
use super::MirrorReplicas;
use crate::config::MirrorConfig;
use crate::discard::{unconfirmed_discard, DiscardRefusal};
use crate::name::{MirrorBinding, RequestedMirroring};
use crate::records::MirrorPartitionKey;
use crate::state::{next_step, MirrorPartitionState as State, NextStep};
use crate::truncation::{lme_truncation, LocalLog, Truncation};

/// A stored state read for one mirror partition (topic id, partition).
type StoredAnswer = ((Uuid, i32), Result<StoredState, String>);

const RETRY: Duration = Duration::from_millis(500);
/// How long failover waits for the ISR to have its markers before trying
/// the STOPPING step again.
const MARKERS_REPLICATED_TIMEOUT: Duration = Duration::from_secs(30);

/// A mirror partition this broker leads, while its driver runs.
pub struct MirrorPartition {
    pub key: MirrorPartitionKey,
    pub state: Mutex<State>,
    pub last_mirrored_epoch: Mutex<i32>,
    /// What failover did, while STOPPED.
    pub failover: Mutex<Option<FailoverSummary>>,
    pub stats: Arc<MirrorStats>,
    started: std::time::Instant,
    stop: CancellationToken,
}

impl MirrorPartition {
    /// The average mirrored byte rate since this broker began driving it.
    pub fn bytes_per_second(&self) -> i64 {
        let seconds = self.started.elapsed().as_secs_f64().max(1.0);
        (self.stats.bytes.load(std::sync::atomic::Ordering::Relaxed) as f64 / seconds) as i64
    }
}

/// What a driver works with.
pub struct MirrorServices {
    pub node_id: i32,
    /// `mirror.support.unclean.leader.election`: PREPARING waits for every
    /// replica to truncate, not only the ISR, so any of them may lead.
    pub wait_for_all_replicas: bool,
    pub controller: Arc<Controller>,
    pub replicas: Arc<dyn MirrorReplicas>,
    pub brokers: Arc<BrokerClients>,
    /// Where the group sync commits the source's offsets.
    pub groups: Arc<dyn super::GroupCoordinators>,
    pub states: MirrorStateStore,
    /// Leader-epoch bumps, batched across partitions.
    pub epoch_bumps: EpochBumps,
    /// State writes, batched per coordinator.
    pub state_writes: StateWrites,
    /// Counts the images this broker's partitions have taken on: drivers
    /// waiting for a new leader epoch wake on it, all at once.
    pub images_applied: tokio::sync::watch::Sender<u64>,
    /// The fetch loops, per mirror and source broker.
    pub fetchers: MirrorFetchers,
    /// Each mirror's config, parsed once per change.
    pub configs: ParsedConfigs,
}

impl MirrorServices {
    /// What the coordinator stores for `key`, locally or through
    /// ReadMirrorStates.
    pub async fn read_stored(
        self: &Arc<Self>,
        key: &MirrorPartitionKey,
    ) -> Result<StoredState, String> {
        let wanted = (key.topic_id, key.partition);
        self.read_stored_many(&key.mirror_name, &[wanted])
            .await
            .remove(&wanted)
            .unwrap_or_else(|| Err("the coordinator's answer lacks the partition".into()))
    }

    /// What the coordinators store for the partitions `keys` (topic id,
    /// partition) of `mirror`: one read per `__mirror_state` coordinator,
    /// all at once. Each key has its state, or why it has none.
    pub async fn read_stored_many(
        self: &Arc<Self>,
        mirror: &str,
        keys: &[(Uuid, i32)],
    ) -> HashMap<(Uuid, i32), Result<StoredState, String>> {
        let mut answers = HashMap::new();
        let mut by_coordinator: BTreeMap<i32, Vec<(Uuid, i32)>> = BTreeMap::new();
        for &(topic_id, partition) in keys {
            let key = MirrorPartitionKey {
                mirror_name: mirror.to_string(),
                topic_id,
                partition,
            };
            match self.states.coordinator_of(&key) {
                Ok((_, coordinator)) => by_coordinator
                    .entry(coordinator)
                    .or_default()
                    .push((topic_id, partition)),
                Err(e) => {
                    answers.insert((topic_id, partition), Err(format!("{e:?}")));
                }
            }
        }
        let mut reading = tokio::task::JoinSet::new();
        for (coordinator, keys) in by_coordinator {
            let services = self.clone();
            let mirror = mirror.to_string();
            reading.spawn(async move {
                let read = services.read_from(coordinator, mirror, keys.clone()).await;
                (keys, read)
            });
        }
        while let Some(done) = reading.join_next().await {
            let Ok((keys, read)) = done else { continue };
            match read {
                Ok(found) => answers.extend(found),
                Err(e) => answers.extend(keys.into_iter().map(|k| (k, Err(e.clone())))),
            }
        }
        answers
    }

    /// Reads `keys` of `mirror` from the store of `coordinator`: this
    /// broker's (on the blocking pool: a coordinator partition's first read
    /// loads it from its log) or another's, in one ReadMirrorStates.
    async fn read_from(
        self: Arc<Self>,
        coordinator: i32,
        mirror: String,
        keys: Vec<(Uuid, i32)>,
    ) -> Result<Vec<StoredAnswer>, String> {
        if coordinator == self.node_id {
            return tokio::task::spawn_blocking(move || {
                keys.into_iter()
                    .map(|(topic_id, partition)| {
                        let key = MirrorPartitionKey {
                            mirror_name: mirror.clone(),
                            topic_id,
                            partition,
                        };
                        let read = self.states.read(&key).map_err(|e| format!("{e:?}"));
                        ((topic_id, partition), read)
                    })
                    .collect()
            })
            .await
            .map_err(|e| e.to_string());
        }
        let mut topics: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
        for (topic_id, partition) in keys {
            topics.entry(topic_id).or_default().push(partition);
        }
        let request = ReadMirrorStatesRequest {
            mirror_name: mirror,
            topics: topics
                .into_iter()
                .map(|(topic_id, partitions)| ReadMirrorStatesTopic {
                    topic_id,
                    partitions,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let response = self.brokers.send_mirror(coordinator, &request).await?;
        Ok(response
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| {
                    let read = super::state_store::stored_from_read(p).map_err(|e| e.to_string());
                    ((t.topic_id, p.partition_index), read)
                })
            })
            .collect())
    }

    /// Stores a mirror partition's state (and last mirrored epoch) through
    /// its coordinator (this broker or another), batched with the other
    /// partitions' writes.
    pub async fn write_stored(self: &Arc<Self>, write: StateWrite) -> Result<(), StateWriteError> {
        let (_, coordinator) = self.states.coordinator_of(&write.key)?;
        self.state_writes.write(self, coordinator, write).await
    }
}

pub struct MirrorManager {
    services: Arc<MirrorServices>,
    running: Mutex<HashMap<TopicPartition, Arc<MirrorPartition>>>,
}

impl MirrorManager {
    pub fn new(services: MirrorServices) -> Self {
        Self {
            services: Arc::new(services),
            running: Mutex::default(),
        }
    }

    pub fn services(&self) -> &Arc<MirrorServices> {
        &self.services
    }

    /// The running mirror partition `tp`, if this broker drives it.
    pub fn partition(&self, tp: &TopicPartition) -> Option<Arc<MirrorPartition>> {
        self.running.lock().get(tp).cloned()
    }

    /// Every mirror partition this broker drives.
    pub fn running(&self) -> Vec<(TopicPartition, Arc<MirrorPartition>)> {
        self.running
            .lock()
            .iter()
            .map(|(tp, run)| (tp.clone(), run.clone()))
            .collect()
    }

    /// Starts drivers for newly led mirror partitions and stops the ones
    /// whose leadership (or binding) is gone. Call on every image change.
    pub fn sync(&self, image: &MetadataImage) {
        self.services.images_applied.send_modify(|n| *n += 1);
        let mut wanted: HashMap<TopicPartition, (MirrorPartitionKey, Arc<dyn HostedPartition>)> =
            HashMap::new();
        for p in self.services.replicas.hosted_partitions() {
            if p.state().leader != self.services.node_id {
                continue;
            }
            let Some(binding) = image
                .mirror_binding(&p.tp().topic)
                .and_then(|b| MirrorBinding::parse(b).ok())
            else {
                continue;
            };
            let key = MirrorPartitionKey {
                mirror_name: binding.mirror.to_string(),
                topic_id: p.topic_id(),
                partition: p.tp().partition,
            };
            wanted.insert(p.tp().clone(), (key, p));
        }
        let mut running = self.running.lock();
        running.retain(|tp, run| {
            let keep = wanted.get(tp).is_some_and(|(key, _)| *key == run.key);
            if !keep {
                info!(partition = %tp, "no longer driving the mirror partition here");
                run.stop.cancel();
            }
            keep
        });
        for (tp, (key, partition)) in wanted {
            if running.contains_key(&tp) {
                continue;
            }
            let run = Arc::new(MirrorPartition {
                key,
                state: Mutex::new(State::Unknown),
                last_mirrored_epoch: Mutex::new(NO_EPOCH),
                failover: Mutex::default(),
                stats: Arc::new(MirrorStats::new()),
                started: std::time::Instant::now(),
                stop: CancellationToken::new(),
            });
            running.insert(tp, run.clone());
            let driver = Driver {
                services: self.services.clone(),
                run,
                partition,
            };
            tokio::spawn(driver.drive());
        }
    }

    pub fn stop_all(&self) {
        for run in self.running.lock().drain().map(|(_, run)| run) {
            run.stop.cancel();
        }
    }
}

struct Driver {
    services: Arc<MirrorServices>,
    run: Arc<MirrorPartition>,
    partition: Arc<dyn HostedPartition>,
}

/// Why a driver step did not complete.
enum Interrupted {
    /// Leadership moved or the broker is stopping.
    Stopped,
    /// The partition FAILED for this reason.
    Failed(String),
}

impl From<anyhow::Error> for Interrupted {
    fn from(e: anyhow::Error) -> Self {
        Self::Failed(format!("{e:#}"))
    }
}

impl Driver {
    async fn drive(self) {
        let tp = self.partition.tp().clone();
        loop {
            match self.steps().await {
                Ok(()) | Err(Interrupted::Stopped) => return,
                Err(Interrupted::Failed(reason)) => {
                    warn!(partition = %tp, reason, "mirror partition FAILED");
                    *self.run.stats.last_error.lock() = Some(reason.clone());
                    if self.enter(State::Failed, Some(reason), None).await.is_err() {
                        return;
                    }
                    // FAILED waits in `steps` for the topic's removal, the
                    // way out; the pause keeps a failing way out from spinning.
                    if self.pause(RETRY).await.is_err() {
                        return;
                    }
                }
            }
        }
    }

    fn stopped(&self) -> bool {
        self.run.stop.is_cancelled()
    }

    fn state(&self) -> State {
        *self.run.state.lock()
    }

    /// What `mirror.name` asks now; None once the topic is unbound.
    fn requested(&self) -> Option<RequestedMirroring> {
        let image = self.services.controller.image();
        image
            .mirror_binding(&self.partition.tp().topic)
            .and_then(|b| MirrorBinding::parse(b).ok())
            .filter(|b| b.mirror.as_str() == self.run.key.mirror_name)
            .map(|b| b.requested)
    }

    async fn steps(&self) -> Result<(), Interrupted> {
        let stored = self.load().await?;
        if let Some(v) = stored.state {
            *self.run.failover.lock() = v.failover();
            *self.run.state.lock() = v.state;
            *self.run.stats.last_error.lock() = v.error_message;
        }
        if let Some(lme) = stored.last_mirrored_epoch {
            *self.run.last_mirrored_epoch.lock() = lme.last_mirrored_epoch;
        }
        self.services
            .replicas
            .set_mirror_stopped(self.partition.tp(), self.state() == State::Stopped);
        info!(partition = %self.partition.tp(), state = self.state().name(), "driving mirror partition");
        let mut changes = self.services.controller.subscribe();
        loop {
            if self.stopped() {
                return Err(Interrupted::Stopped);
            }
            let Some(requested) = self.requested() else {
                return Ok(());
            };
            let step = next_step(self.state(), requested);
            match step {
                NextStep::Fetch => self.mirror().await?,
                NextStep::Prepare => self.prepare().await?,
                NextStep::Stop => self.stop_mirroring().await?,
                NextStep::Pause | NextStep::Resume | NextStep::PassThrough => {
                    for &state in step.path(self.state()) {
                        self.enter(state, None, None).await?;
                    }
                }
                NextStep::Wait => {
                    tokio::select! {
                        _ = self.run.stop.cancelled() => return Err(Interrupted::Stopped),
                        changed = changes.changed() => if changed.is_err() { return Err(Interrupted::Stopped) },
                    }
                }
            }
        }
    }

    /// The stored state, asked of the coordinator until it answers.
    async fn load(&self) -> Result<StoredState, Interrupted> {
        loop {
            match self.services.read_stored(&self.run.key).await {
                Ok(stored) => return Ok(stored),
                // Every partition of the mirror waits on the same
                // coordinators: one line per mirror, not per partition.
                Err(e) => ottla_coordinator_common::log_limited!(
                    tracing::Level::INFO,
                    key: &self.run.key.mirror_name,
                    mirror = %self.run.key.mirror_name,
                    partition = %self.partition.tp(),
                    error = %e,
                    "mirror state not available yet"
                ),
            }
            self.pause(RETRY).await?;
        }
    }

    async fn pause(&self, how_long: Duration) -> Result<(), Interrupted> {
        tokio::select! {
            _ = self.run.stop.cancelled() => Err(Interrupted::Stopped),
            _ = tokio::time::sleep(how_long) => Ok(()),
        }
    }

    /// Moves to `target` if the state machine allows it, persisting it
    /// (and `lme`, when given) first.
    async fn enter(
        &self,
        target: State,
        error: Option<String>,
        lme: Option<i32>,
    ) -> Result<(), Interrupted> {
        let current = self.state();
        if let Err(e) = current.transition(target) {
            warn!(partition = %self.partition.tp(), error = %e, "refused mirror state change");
            return Err(Interrupted::Failed(e.to_string()));
        }
        self.persist((target, current), error, lme).await?;
        *self.run.state.lock() = target;
        if target != State::Stopped {
            *self.run.failover.lock() = None;
        }
        if current == State::Failed && target != State::Failed {
            *self.run.stats.last_error.lock() = None;
        }
        if let Some(lme) = lme {
            *self.run.last_mirrored_epoch.lock() = lme;
        }
        info!(partition = %self.partition.tp(), from = current.name(), to = target.name(), "mirror partition state changed");
        Ok(())
    }

    /// The mirror's configuration, as the current image holds it.
    fn config(&self) -> Result<Arc<MirrorConfig>, Interrupted> {
        self.services
            .configs
            .get(&self.services.controller.image(), &self.run.key.mirror_name)
            .map_err(Interrupted::Failed)
    }

    /// Stores `(state, previous)` (and `lme`) as of the partition's current
    /// leader epoch, trying again until the coordinator takes it; a newer
    /// leader's write stops this driver.
    async fn persist(
        &self,
        states: (State, State),
        error: Option<String>,
        lme: Option<i32>,
    ) -> Result<(), Interrupted> {
        let failover = match states.0 {
            State::Stopped => self.run.failover.lock().clone(),
            _ => None,
        };
        loop {
            let write = StateWrite {
                key: self.run.key.clone(),
                leader_epoch: self.partition.state().leader_epoch,
                state: states.0,
                previous: states.1,
                error: error.clone(),
                lme,
                failover: failover.clone(),
            };
            let written = self.services.write_stored(write).await;
            match written {
                Ok(()) => return Ok(()),
                Err(StateWriteError::Fenced) => return Err(Interrupted::Stopped),
                Err(e) => {
                    ottla_coordinator_common::log_limited!(
                        tracing::Level::INFO,
                        key: &self.run.key.mirror_name,
                        mirror = %self.run.key.mirror_name,
                        partition = %self.partition.tp(),
                        error = %e,
                        "cannot store the mirror state yet"
                    );
                    self.pause(RETRY).await?;
                }
            }
        }
    }

    fn source(&self) -> Result<SourceCluster, Interrupted> {
        let config = self.config()?;
        let client_id = format!("ottla-mirror-{}-{}", config.name, self.services.node_id);
        SourceCluster::new(&config, client_id).map_err(Interrupted::Failed)
    }

    /// PREPARING: Last Mirrored Epoch truncation, then MIRRORING.
    async fn prepare(&self) -> Result<(), Interrupted> {
        if self.state() != State::Preparing {
            self.enter(State::Preparing, None, None).await?;
        }
        self.services
            .replicas
            .set_mirror_stopped(self.partition.tp(), false);
        let source = self.source()?;
        let answer = loop {
            match source
                .last_mirrored_epoch(self.run.key.topic_id, self.run.key.partition)
                .await
            {
                Ok(answer) => break answer,
                Err(e) => {
                    self.run
                        .stats
                        .fetch_errors
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    *self.run.stats.last_error.lock() = Some(e);
                    self.pause(RETRY).await?;
                }
            }
        };
        let since = std::time::Instant::now();
        let confirmed = self.discard_confirmed();
        let p = self.partition.clone();
        let cut = blocking(move || {
            let mut log = p.log().write();
            let local = LocalLog {
                epochs: log.epoch_cache().entries(),
                log_start_offset: log.log_start_offset(),
                log_end_offset: log.log_end_offset(),
            };
            let lost = unconfirmed_discard(answer, local);
            if lost > 0 && !confirmed {
                return Ok(Err(DiscardRefusal {
                    topic: p.tp().topic.clone(),
                    source: answer,
                    partitions: vec![(p.tp().partition, lost)],
                }));
            }
            let truncation = lme_truncation(answer, local);
            match truncation {
                Truncation::Everything if log.log_end_offset() > 0 => {
                    log.truncate_fully_and_start_at(0)?
                }
                Truncation::From(offset) => log.truncate_to(offset)?,
                Truncation::Everything | Truncation::Nothing => {}
            }
            Ok(Ok(truncation))
        })
        .await?
        .map_err(|refusal| Interrupted::Failed(refusal.to_string()))?;
        info!(partition = %self.partition.tp(), ?answer, ?cut, "last mirrored epoch truncation done");
        self.wait_for_followers_to_truncate(since).await?;
        self.enter(State::Mirroring, None, None).await
    }

    /// Whether the operator re-added this topic with
    /// `--discard-local-writes` (a topic config the controller writes with
    /// the binding).
    fn discard_confirmed(&self) -> bool {
        self.services
            .controller
            .image()
            .configs_of(CONFIG_RESOURCE_TOPIC, &self.partition.tp().topic)
            .and_then(|c| c.get(MIRROR_DISCARD_LOCAL_WRITES_CONFIG))
            .is_some_and(|v| v == "true")
    }

    /// PREPARING ends once every ISR member (every replica, with
    /// `mirror.support.unclean.leader.election`) has fetched from this
    /// truncated log without being past its end: none can lead with a tail
    /// the source does not have.
    async fn wait_for_followers_to_truncate(
        &self,
        since: std::time::Instant,
    ) -> Result<(), Interrupted> {
        let end = self.partition.log().read().log_end_offset();
        let all = self.services.wait_for_all_replicas;
        while !self
            .services
            .replicas
            .followers_within(self.partition.tp(), end, since, all)
        {
            self.pause(Duration::from_millis(100)).await?;
        }
        Ok(())
    }

    /// MIRRORING: runs the fetcher until the request changes.
    async fn mirror(&self) -> Result<(), Interrupted> {
        let source = self.source()?;
        let fetchers_per_source_broker = self.config()?.fetchers_per_source_broker;
        let fetching = self.run.stop.child_token();
        let mut changes = self.services.controller.subscribe();
        let epoch_raised = Arc::new(Notify::new());
        // The log may hold a newer epoch than the partition from before.
        epoch_raised.notify_one();
        let from = FetchedFrom {
            mirror: &self.run.key.mirror_name,
            source: &source,
            fetchers_per_source_broker,
        };
        let fetcher = self.services.fetchers.mirror(
            from,
            &self.partition,
            &self.run.stats,
            &epoch_raised,
            &fetching,
        );
        tokio::pin!(fetcher);
        loop {
            tokio::select! {
                _ = epoch_raised.notified() => self.follow_source_epoch().await?,
                result = &mut fetcher => {
                    return match result {
                        Ok(()) => Err(Interrupted::Stopped),
                        Err(failed) => Err(Interrupted::Failed(failed.0)),
                    };
                }
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Err(Interrupted::Stopped);
                    }
                    if self.requested() != Some(RequestedMirroring::Mirror) {
                        // Stop the fetcher before the next state.
                        fetching.cancel();
                        let _ = (&mut fetcher).await;
                        return Ok(());
                    }
                }
            }
        }
    }

    /// STOPPING: raise the leader epoch above every mirrored epoch, settle
    /// the transactions the source left open (abort them, or cut the log
    /// back to the LSO: `mirror.stop.open.transactions`), record the last
    /// mirrored epoch, write the MIRROR_PID_RESET barrier, wait for the ISR
    /// to have all of it; then STOPPED and writable.
    async fn stop_mirroring(&self) -> Result<(), Interrupted> {
        if self.state() != State::Stopping {
            self.enter(State::Stopping, None, None).await?;
        }
        let policy = self.config()?.open_transactions_at_stop;
        self.bump_leader_epoch().await?;
        let p = self.partition.clone();
        let (mut summary, open) = blocking(move || {
            let mut log = p.log().write();
            let (summary, open) = failover::plan(&log, policy, now_ms());
            if summary.truncated_records > 0 {
                let lso = log.last_stable_offset();
                info!(partition = %p.tp(), lso, dropped = summary.truncated_records, "truncating the mirror to its last stable offset");
                log.truncate_to(lso)?;
                return Ok((summary, Vec::new()));
            }
            Ok((summary, open))
        })
        .await?;
        let lme = summary.last_mirrored_epoch;
        // Recorded while still STOPPING, for a later failback.
        self.enter_again(lme).await?;
        let now = now_ms();
        let mut batches: Vec<Vec<u8>> = open
            .iter()
            .map(|txn| {
                info!(partition = %self.partition.tp(), producer_id = txn.producer_id, first_offset = txn.first_offset, "aborting a transaction the source left open");
                failover::abort_marker(txn, now)
            })
            .collect();
        batches.push(BatchBuilder::default().build_control(
            ControlType::MirrorPidReset,
            now,
            Vec::new(),
        ));
        // On the blocking pool: the first batch of the new epoch fsyncs the
        // epoch checkpoint, and a failover does that for every partition.
        let (replicas, tp) = (self.services.replicas.clone(), self.partition.tp().clone());
        let end_offset = blocking(move || {
            let mut end_offset = -1;
            for batch in batches {
                let outcome =
                    replicas.append_as_leader(&tp, &batch.into(), -1, AppendOrigin::Coordinator);
                if let Some(error) = outcome.error {
                    return Ok(Err(match error {
                        ResponseError::NotLeaderOrFollower => Interrupted::Stopped,
                        e => Interrupted::Failed(format!(
                            "writing the failover markers failed: {e:?} {}",
                            outcome.message.unwrap_or_default()
                        )),
                    }));
                }
                end_offset = outcome.end_offset;
            }
            Ok(Ok(end_offset))
        })
        .await??;
        // Writable only once the ISR has the markers: a new leader must not
        // reopen what was aborted here.
        self.services
            .replicas
            .await_replicated(self.partition.tp(), end_offset, MARKERS_REPLICATED_TIMEOUT)
            .await
            .map_err(|e| match e {
                ResponseError::NotLeaderOrFollower => Interrupted::Stopped,
                e => {
                    Interrupted::Failed(format!("the failover markers were not replicated: {e:?}"))
                }
            })?;
        summary.writable_at_ms = now_ms();
        *self.run.failover.lock() = Some(summary);
        self.enter(State::Stopped, None, None).await?;
        self.services
            .replicas
            .set_mirror_stopped(self.partition.tp(), true);
        info!(partition = %self.partition.tp(), last_mirrored_epoch = lme, aborted_transactions = open.len(), "mirror partition stopped: writable");
        Ok(())
    }

    /// Persists the LME with the STOPPING state (STOPPING to STOPPING is not
    /// a transition, so this bypasses [`Driver::enter`]).
    async fn enter_again(&self, lme: i32) -> Result<(), Interrupted> {
        self.persist((State::Stopping, State::Stopping), None, Some(lme))
            .await?;
        *self.run.last_mirrored_epoch.lock() = lme;
        Ok(())
    }

    /// STOPPING's epoch bump: the new epoch exceeds every epoch in the log,
    /// so records written after failover never share an epoch with mirrored
    /// ones.
    async fn bump_leader_epoch(&self) -> Result<(), Interrupted> {
        let latest = self
            .partition
            .log()
            .read()
            .latest_epoch()
            .unwrap_or(NO_EPOCH);
        self.raise_leader_epoch(latest + 1).await
    }

    /// While mirroring: keeps this partition's leader epoch at or above the
    /// newest mirrored epoch, so clients that saw that epoch in a record
    /// batch (or a committed offset) still accept this cluster's metadata.
    async fn follow_source_epoch(&self) -> Result<(), Interrupted> {
        let latest = self
            .partition
            .log()
            .read()
            .latest_epoch()
            .unwrap_or(NO_EPOCH);
        if latest > self.partition.state().leader_epoch {
            info!(partition = %self.partition.tp(), epoch = latest, "raising the leader epoch to the mirrored one");
            self.raise_leader_epoch(latest).await?;
        }
        Ok(())
    }

    /// BumpLeaderEpochs through the controller until this broker's
    /// metadata has a leader epoch of at least `at_least`.
    async fn raise_leader_epoch(&self, at_least: i32) -> Result<(), Interrupted> {
        loop {
            let state = self.partition.state();
            if state.leader_epoch >= at_least {
                return Ok(());
            }
            let result = self
                .services
                .epoch_bumps
                .bump(EpochBump {
                    topic_id: self.partition.topic_id(),
                    partition: self.partition.tp().partition,
                    seen_epoch: state.leader_epoch,
                    at_least,
                })
                .await;
            match result {
                Ok(epoch) => self.wait_for_leader_epoch(epoch).await?,
                // This broker's metadata was behind: wait for it, try again.
                Err(e) if e.code == ResponseError::FencedLeaderEpoch.code() => {
                    self.pause(Duration::from_millis(100)).await?
                }
                Err(e) if e.code == ResponseError::NotLeaderOrFollower.code() => {
                    return Err(Interrupted::Stopped)
                }
                Err(e) => {
                    return Err(Interrupted::Failed(format!(
                        "leader epoch bump failed: {e}"
                    )))
                }
            }
        }
    }

    /// Until this broker's partition has taken on leader epoch `epoch`
    /// from the metadata (checked each time an image has been applied).
    async fn wait_for_leader_epoch(&self, epoch: i32) -> Result<(), Interrupted> {
        let mut applied = self.services.images_applied.subscribe();
        while self.partition.state().leader_epoch < epoch {
            tokio::select! {
                _ = self.run.stop.cancelled() => return Err(Interrupted::Stopped),
                changed = applied.changed() => if changed.is_err() { return Err(Interrupted::Stopped) },
            }
        }
        Ok(())
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ottla_storage::StorageError> + Send + 'static,
) -> Result<T, Interrupted> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Interrupted::Failed(format!("local log error: {e}"))),
        Err(e) => Err(anyhow!("local log task failed: {e}").into()),
    }
}
