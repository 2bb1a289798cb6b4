//! The broker's shared state and its life cycle: open the logs and the
//! metadata, register this node, follow metadata changes, run the periodic
//! log work, and shut down cleanly.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use ottla_controller::records::Endpoint;
use ottla_controller::service::Heartbeat;
use ottla_controller::{Controller, MetadataImage, MetadataRecord};
use ottla_protocol::api_versions::FinalizedFeatures;
use ottla_storage::dir_lock::DirLocks;
use ottla_storage::log_file::OpenLogFiles;
use ottla_storage::manager::{CleanerConfig, LogManager};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tracing::{debug, error, info, warn};
use uuid::Uuid;

use crate::config::keys;
use crate::dynamic_broker_config::dynamic_or;
use crate::features;
use crate::fetch_session::FetchSessionCache;
use crate::log_config::TopicConfigResolver;
use ottla_group_coordinator::GroupCoordinator;
use ottla_mirror::runtime::epoch_bumps::EpochBumps;
use ottla_mirror::runtime::fetcher::MirrorFetchers;
use ottla_mirror::runtime::state_store::MirrorStateStore;
use ottla_mirror::runtime::{sync as mirror_sync, MirrorManager, MirrorServices};
use ottla_share::{SharePartitions, ShareSessions};
use ottla_share_coordinator::{ShareCoordinator, ShareCoordinatorConfig};

use crate::mirroring::GroupsOnListener;
use crate::quotas::ClientQuotaManager;
use crate::replica::{now_ms, IsrChange, ReplicaManager};
use crate::replication::fetcher::{FetchSettings, ReplicaFetchers};
use crate::replication::throttle::ReplicationThrottle;
use crate::security::authorizer::{Access, Authorizer};
use crate::security::KafkaPrincipal;
use crate::txn_config::txn_config;
use ottla_coordinator_common::inter_broker::BrokerClients;
use ottla_txn_coordinator::{ProducerIdManager, Services as TxnServices, TxnCoordinator};

/// How often segment files beyond `log.segment.max.open.files` are looked
/// at: one idle for a whole period is closed.
const LOG_FILE_SWEEP_INTERVAL: Duration = Duration::from_secs(5);

/// `log.segment.max.open.files` as configured at start-up (it changes at
/// runtime), and what its -1 means in this process: a quarter of the
/// open-file limit, leaving the rest to connections.
#[derive(Debug, Clone, Copy)]
pub struct OpenLogFilesBudget {
    pub configured: i64,
    pub automatic: usize,
}

impl OpenLogFilesBudget {
    /// The number of files a value of the key allows.
    pub fn resolve(&self, value: i64) -> usize {
        usize::try_from(value).unwrap_or(self.automatic)
    }

    /// The budget the logs load under, before any dynamic value is known.
    pub fn at_start(&self) -> usize {
        self.resolve(self.configured)
    }
}

/// The settings the broker's request handling needs, taken from the broker
/// configuration at start-up.
#[derive(Debug, Clone)]
pub struct BrokerSettings {
    pub node_id: i32,
    pub log_dirs: Vec<PathBuf>,
    /// Where the metadata log lives (`metadata.log.dir`, else the first log dir).
    pub metadata_dir: PathBuf,
    /// `cluster.id`: every node of a cluster must be given the same one
    /// (generated on first start when unset, which suits a single node).
    pub cluster_id: Option<String>,
    pub advertised: Vec<Endpoint>,
    /// The finalized feature levels ApiVersions reports, kept in line with
    /// the metadata.
    pub finalized_features: Arc<FinalizedFeatures>,
    /// The controller listener's name (DescribeQuorum lists voters under it).
    pub controller_listener: String,
    pub rack: Option<String>,
    /// `replica.selector.class` is Kafka's RackAwareReplicaSelector: leaders
    /// send consumers that name their rack to a replica in it (KIP-392).
    pub rack_aware_reads: bool,
    pub auto_create_topics: bool,
    pub delete_topic_enable: bool,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub fetch_session_slots: usize,
    pub retention_check_interval: Duration,
    pub flush_check_interval: Duration,
    /// The budget of open segment `.log` files (`log.segment.max.open.files`).
    pub max_open_log_files: OpenLogFilesBudget,
    pub checkpoint_interval: Duration,
    pub cleaner_backoff: Duration,
    /// The `log.cleaner.*` settings as configured at start-up (all of them
    /// change at runtime, as in Kafka).
    pub cleaner: CleanerConfig,
    /// `num.recovery.threads.per.data.dir` as configured at start-up: the
    /// threads per log dir that load the logs and close them (dynamic).
    pub recovery_threads_per_dir: usize,
    /// producer.id.expiration.check.interval.ms.
    pub producer_expiration_check_interval: Duration,
    /// producer.id.expiration.ms as configured at start-up (it is dynamic).
    pub producer_id_expiration: Duration,
    /// Every key set in server.properties / --override, by Kafka name.
    pub static_configs: BTreeMap<String, String>,
    /// `broker.heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_max: Duration,
    pub replica_fetch: FetchSettings,
    /// How long SIGTERM waits for leadership to move away.
    pub controlled_shutdown_timeout: Duration,
    /// The ACL authorizer, when `authorizer.class.name` enables it.
    pub authorizer: Option<Arc<Authorizer>>,
    /// The log dirs' locks when the process took them at start-up (the
    /// `ottla` binary does, before the controller reads the metadata dir);
    /// None: `open` takes them.
    pub dir_locks: Option<Arc<DirLocks>>,
}

pub struct Broker {
    pub settings: BrokerSettings,
    /// This process's registration with the controller.
    pub incarnation: Uuid,
    /// The incarnation whose clean shutdown the log dirs recorded at start.
    previous_incarnation: Option<Uuid>,
    /// Set once a controlled shutdown began: heartbeats then ask to stay fenced.
    shutting_down: AtomicBool,
    pub fetchers: Arc<ReplicaFetchers>,
    /// Connections to other brokers (transaction markers, mirror states).
    pub brokers: Arc<BrokerClients>,
    isr_changes: Mutex<Option<mpsc::UnboundedReceiver<IsrChange>>>,
    pub cluster_id: String,
    pub controller: Arc<Controller>,
    pub replicas: Arc<ReplicaManager>,
    pub configs: Arc<TopicConfigResolver>,
    pub fetch_sessions: FetchSessionCache,
    /// Share groups' delivery state on the partitions led here, and their
    /// members' share sessions (KIP-932).
    pub share_partitions: SharePartitions,
    pub share_sessions: ShareSessions,
    /// The share partitions' persisted state (`__share_group_state`).
    pub share_coordinator: ShareCoordinator,
    pub producer_ids: ProducerIdManager,
    pub groups: Arc<GroupCoordinator>,
    pub txns: TxnCoordinator,
    pub mirrors: MirrorManager,
    pub client_quotas: ClientQuotaManager,
    pub replication_throttle: Arc<ReplicationThrottle>,
}

/// A periodic job, run on the blocking pool; it may spawn async work on
/// the runtime with the broker it is given.
pub type PeriodicJob = dyn Fn(&Arc<Broker>) + Send + Sync;

/// Work an API's handlers need run every `period` (on the blocking pool, as
/// the broker's own periodic jobs): the wiring hands it to
/// [`Broker::run_background`], so the broker names no API.
pub struct BackgroundJob {
    pub period: Duration,
    pub job: Box<PeriodicJob>,
}

/// The broker the APIs serve, filled in once it is open. Listeners are
/// bound first (so ports chosen by the OS can be advertised) and start
/// accepting only after the broker is set.
pub type BrokerSlot = Arc<OnceLock<Arc<Broker>>>;

impl Broker {
    /// Opens storage, registers this node with the controller and waits
    /// until it is unfenced. Blocking: call before serving client requests
    /// (the controller listener must already serve the quorum).
    pub fn open(
        settings: BrokerSettings,
        controller: Arc<Controller>,
    ) -> anyhow::Result<Arc<Self>> {
        let cluster_id = crate::meta_properties::ensure(
            &settings.log_dirs,
            &settings.metadata_dir,
            settings.node_id,
            settings.cluster_id.as_deref(),
            // `ottla server` formatted the dirs before the quorum started.
            crate::meta_properties::Unformatted::Generate,
        )?;
        let configs = Arc::new(TopicConfigResolver::new(
            settings.node_id,
            settings.static_configs.clone(),
            controller.image(),
        ));
        let threads = recovery_threads_per_dir(&controller.image(), &settings);
        let locks = match &settings.dir_locks {
            Some(locks) => locks.clone(),
            None => Arc::new(DirLocks::acquire(
                settings.log_dirs.iter().map(PathBuf::as_path),
            )?),
        };
        let logs = LogManager::open_locked(
            settings.log_dirs.clone(),
            locks,
            configs.as_ref(),
            threads,
            OpenLogFiles::new(settings.max_open_log_files.at_start()),
        );
        let logs = Arc::new(logs.context("opening the log dirs")?);
        let (replicas, isr_changes) = ReplicaManager::new(
            settings.node_id,
            logs,
            configs.clone(),
            settings.replica_lag_max,
        );
        let replicas = Arc::new(replicas);
        let incarnation = Uuid::new_v4();
        let previous_incarnation = replicas.logs().clean_shutdown_marker().and_then(|m| {
            std::str::from_utf8(m)
                .ok()
                .and_then(|m| Uuid::parse_str(m).ok())
        });
        let registration = Registration {
            incarnation,
            previous_incarnation,
        };
        controller.block_on(register(&controller, &settings, registration));
        replicas.apply_image(&controller.image());
        features::publish(
            &settings.finalized_features,
            &controller.image(),
            controller.kraft_version(),
        );
        let groups = Arc::new(GroupCoordinator::open(
            settings.node_id,
            &settings.static_configs,
            controller.clone(),
            replicas.clone(),
        ));
        let producer_ids = ProducerIdManager::new(controller.clone(), settings.node_id);
        let replication_throttle = Arc::new(ReplicationThrottle::new(
            settings.node_id,
            &settings.static_configs,
        ));
        let brokers = Arc::new(BrokerClients::new(
            settings.node_id,
            settings.replica_fetch.listener.clone(),
            settings.replica_fetch.security.clone(),
            controller.clone(),
            settings.replica_fetch.socket_timeout,
        ));
        let mirrors = MirrorManager::new(MirrorServices {
            node_id: settings.node_id,
            wait_for_all_replicas: settings
                .static_configs
                .get("mirror.support.unclean.leader.election")
                .is_some_and(|v| v.trim() == "true"),
            controller: controller.clone(),
            replicas: replicas.clone(),
            brokers: brokers.clone(),
            groups: Arc::new(GroupsOnListener {
                groups: groups.clone(),
                listener: settings.replica_fetch.listener.clone(),
            }),
            epoch_bumps: EpochBumps::start(controller.clone(), settings.node_id),
            state_writes: Default::default(),
            images_applied: tokio::sync::watch::channel(0).0,
            fetchers: MirrorFetchers::new(replicas.clone()),
            configs: Default::default(),
            states: MirrorStateStore::new(
                settings.node_id,
                &settings.static_configs,
                controller.clone(),
                replicas.clone(),
            ),
        });
        let txns = TxnCoordinator::open(
            settings.node_id,
            txn_config(&settings.static_configs),
            controller.clone(),
            replicas.clone(),
        );
        let share_coordinator = ShareCoordinator::open(
            settings.node_id,
            ShareCoordinatorConfig::from_static(&settings.static_configs),
            controller.clone(),
            replicas.clone(),
        );
        let broker = Arc::new(Self {
            share_coordinator,
            fetch_sessions: FetchSessionCache::new(
                settings.fetch_session_slots,
                Duration::from_secs(120),
            ),
            share_partitions: SharePartitions::default(),
            share_sessions: ShareSessions::default(),
            fetchers: ReplicaFetchers::new(
                settings.replica_fetch.clone(),
                replicas.clone(),
                replication_throttle.clone(),
            ),
            incarnation,
            previous_incarnation,
            brokers,
            shutting_down: AtomicBool::new(false),
            isr_changes: Mutex::new(Some(isr_changes)),
            producer_ids,
            txns,
            settings,
            cluster_id,
            controller,
            replicas,
            configs,
            groups,
            mirrors,
            client_quotas: ClientQuotaManager::default(),
            replication_throttle,
        });
        info!(node_id = broker.settings.node_id, cluster_id = %broker.cluster_id, "broker started");
        Ok(broker)
    }

    pub fn node_id(&self) -> i32 {
        self.settings.node_id
    }

    /// What the transaction coordinator's operations borrow from the broker.
    pub fn txn_services(&self) -> TxnServices<'_> {
        TxnServices {
            replicas: &*self.replicas,
            groups: &self.groups,
            producer_ids: &self.producer_ids,
            brokers: &self.brokers,
            controller: &self.controller,
            timeout: self.txns.config().request_timeout,
        }
    }

    /// What `principal` connecting from `host` may do, as of the current image.
    pub fn access(&self, principal: &KafkaPrincipal, host: std::net::IpAddr) -> Access {
        Access::new(
            self.settings.authorizer.clone(),
            self.controller.image(),
            principal,
            host,
        )
    }

    /// Forgets the share partitions of partitions no longer led here: their
    /// new leader delivers them.
    fn forget_share_partitions_led_elsewhere(&self, image: &MetadataImage) {
        let node = self.node_id();
        self.share_partitions.retain(|(topic_id, partition)| {
            image
                .topic_by_id(topic_id)
                .and_then(|t| t.partitions.get(partition))
                .is_some_and(|p| p.leader == node)
        });
    }

    /// Follows metadata changes, and starts the periodic work, until
    /// `shutdown` flips to true.
    pub async fn run_background(
        self: Arc<Self>,
        mut shutdown: watch::Receiver<bool>,
        api_jobs: Vec<BackgroundJob>,
    ) {
        tokio::spawn(self.clone().send_heartbeats(shutdown.clone()));
        tokio::spawn(self.clone().run_cleaner(shutdown.clone()));
        tokio::spawn(self.clone().run_txn_timers(shutdown.clone()));
        if let Some(changes) = self.take_isr_changes() {
            tokio::spawn(self.clone().send_isr_changes(changes));
        }
        let mut periodic = self.start_periodic_work(&shutdown, api_jobs);
        let (applied_tx, applied_rx) = watch::channel(self.controller.image());
        tokio::spawn(
            self.clone()
                .follow_coordinator_leadership(applied_rx, shutdown.clone()),
        );
        let mut image_rx = self.controller.subscribe();
        // Changes committed between `open` and this first poll still count.
        image_rx.mark_changed();
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                changed = image_rx.changed() => {
                    if changed.is_err() { break; }
                    let image = image_rx.borrow_and_update().clone();
                    let replicas = self.replicas.clone();
                    let applied = image.clone();
                    // Creating and deleting logs is file I/O.
                    let _ = tokio::task::spawn_blocking(move || replicas.apply_image(&applied)).await;
                    applied_tx.send_replace(image.clone());
                    features::publish(
                        &self.settings.finalized_features,
                        &image,
                        self.controller.kraft_version(),
                    );
                    self.mirrors.sync(&image);
                    self.fetchers.sync(image);
                }
            }
        }
        // Each job ends after its current run: none is left running when
        // the logs close.
        while periodic.join_next().await.is_some() {}
    }

    /// Loads the coordinator partitions (groups, transactions, mirror
    /// state) this broker comes to lead and drops those it no longer leads,
    /// after each image's logs are in place (`applied`), as Kafka loads a
    /// coordinator partition on election, and has the groups forget the
    /// topics deleted since the last image. A task of its own, on the
    /// blocking pool: a long load holds up neither metadata changes nor
    /// requests for other partitions. Images applied during a load are
    /// taken together, the latest only.
    async fn follow_coordinator_leadership(
        self: Arc<Self>,
        mut applied: watch::Receiver<Arc<MetadataImage>>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        // The image applied before this task started counts too.
        applied.mark_changed();
        let mut previous: Option<Arc<MetadataImage>> = None;
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                changed = applied.changed() => if changed.is_err() { return },
            }
            let image = applied.borrow_and_update().clone();
            let before = previous.replace(image.clone());
            self.blocking(move |b| {
                b.groups.follow_leadership(&image);
                let deleted = before.map(|before| image.topics_deleted_since(&before));
                if let Some(deleted) = deleted.filter(|d| !d.is_empty()) {
                    b.groups.forget_deleted_topics(&deleted, now_ms());
                    b.share_coordinator.forget_deleted_topics(&deleted);
                }
                b.forget_share_partitions_led_elsewhere(&image);
                b.share_coordinator.follow_leadership(&image);
                b.txns.follow_leadership(&image);
                b.mirrors.services().states.follow_leadership(&image);
            })
            .await;
        }
    }

    /// The periodic jobs, each in a task of its own on the blocking pool,
    /// as Kafka's scheduler threads run them: a long retention pass or
    /// group tick delays neither metadata changes nor the other jobs.
    fn start_periodic_work(
        self: &Arc<Self>,
        shutdown: &watch::Receiver<bool>,
        api_jobs: Vec<BackgroundJob>,
    ) -> JoinSet<()> {
        let mut jobs = JoinSet::new();
        let s = &self.settings;
        let mut every = |period: Duration, job: Box<PeriodicJob>| {
            let me = self.clone();
            let mut shutdown = shutdown.clone();
            let job: Arc<PeriodicJob> = job.into();
            jobs.spawn(async move {
                let mut tick = tokio::time::interval(period);
                // A run that overruns its period delays the next one
                // instead of bunching runs up.
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tokio::select! {
                        _ = shutdown.changed() => return,
                        _ = tick.tick() => {
                            let (job, me) = (job.clone(), me.clone());
                            let _ = tokio::task::spawn_blocking(move || job(&me)).await;
                        }
                    }
                }
            });
        };
        every(
            s.replica_lag_max / 2,
            Box::new(|b| b.replicas.shrink_lagging_isrs()),
        );
        every(
            s.retention_check_interval,
            Box::new(|b| {
                b.replicas.logs().run_retention(now_ms());
            }),
        );
        every(
            s.flush_check_interval,
            Box::new(|b| b.replicas.logs().run_time_flush(now_ms())),
        );
        every(
            LOG_FILE_SWEEP_INTERVAL,
            Box::new(|b| {
                let logs = b.replicas.logs();
                logs.open_files().set_max_open(b.open_log_files_budget());
                logs.close_idle_files();
            }),
        );
        every(
            s.producer_expiration_check_interval,
            Box::new(|b| b.expire_producers()),
        );
        let sync_schedule = Arc::new(mirror_sync::SyncSchedule::default());
        every(
            mirror_sync::TICK,
            Box::new(move |b| mirror_sync::run_due(b.mirrors.services(), &sync_schedule)),
        );
        every(
            GroupCoordinator::TICK_INTERVAL,
            Box::new(|b| b.groups.tick(now_ms())),
        );
        for BackgroundJob { period, job } in api_jobs {
            every(period, job);
        }
        every(
            s.checkpoint_interval,
            Box::new(|b| {
                if let Err(e) = b.replicas.logs().checkpoint() {
                    error!(error = %e, "writing the log checkpoints failed");
                }
            }),
        );
        jobs
    }

    /// The transaction coordinator's tick (timeouts, markers still to
    /// write), in a task of its own: a marker waits for its partition's
    /// ISR for up to `request.timeout.ms`, which must not hold back
    /// metadata changes or the ISR checks that end such a wait.
    async fn run_txn_timers(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            self.blocking(|b| b.txns.tick(&b.txn_services(), now_ms()))
                .await;
            tokio::select! {
                _ = shutdown.changed() => return,
                () = tokio::time::sleep(self.txns.tick_interval()) => {}
            }
        }
    }

    /// Compacts the logs whose cleanup policy says so, a pass every
    /// `log.cleaner.backoff.ms`. A task of its own, as Kafka's cleaner
    /// threads are: a long pass (a big log, or one held to
    /// `log.cleaner.io.max.bytes.per.second`) never delays metadata
    /// changes, ISR checks or the coordinators' timers.
    async fn run_cleaner(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            self.blocking(|b| {
                b.replicas
                    .logs()
                    .run_compaction(now_ms(), &b.cleaner_config())
            })
            .await;
            tokio::select! {
                _ = shutdown.changed() => return,
                () = tokio::time::sleep(self.cleaner_backoff()) => {}
            }
        }
    }

    /// Heartbeats to the active controller; re-registers when it no
    /// longer knows this incarnation (its session expired).
    async fn send_heartbeats(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.settings.heartbeat_interval);
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tick.tick() => {}
            }
            match self.controller.heartbeat(self.heartbeat()).await {
                Ok(reply) if reply.unknown => {
                    warn!("the controller no longer knows this broker; registering again");
                    let registration = Registration {
                        incarnation: self.incarnation,
                        previous_incarnation: self.previous_incarnation,
                    };
                    register(&self.controller, &self.settings, registration).await;
                }
                Ok(_) => {}
                Err(e) => {
                    ottla_coordinator_common::log_limited!(tracing::Level::WARN, key: &(), error = %e, "broker heartbeat failed")
                }
            }
        }
    }

    fn heartbeat(&self) -> Heartbeat {
        Heartbeat {
            broker_id: self.settings.node_id,
            incarnation: self.incarnation.as_u128(),
            want_shutdown: self.shutting_down.load(Ordering::Relaxed),
        }
    }

    /// The ISR changes this broker's leaders ask for; whoever takes them
    /// (the background loop) sends them to the controller.
    pub fn take_isr_changes(&self) -> Option<mpsc::UnboundedReceiver<IsrChange>> {
        self.isr_changes.lock().take()
    }

    /// Sends the ISR changes this broker's leaders ask for to the controller.
    async fn send_isr_changes(self: Arc<Self>, mut changes: mpsc::UnboundedReceiver<IsrChange>) {
        while let Some(change) = changes.recv().await {
            let result = self
                .controller
                .alter_isr(
                    change.topic_id,
                    change.tp.partition,
                    self.settings.node_id,
                    change.leader_epoch,
                    &change.isr,
                )
                .await;
            if let Err(e) = result {
                // Keyed by why: one refusal repeated for many partitions is
                // one line per interval.
                ottla_coordinator_common::log_limited!(
                    tracing::Level::INFO,
                    key: &e.code,
                    partition = %change.tp,
                    error = %e,
                    "ISR change refused"
                );
                self.replicas.isr_change_failed(&change.tp);
            }
        }
    }

    /// Controlled shutdown: asks the controller to move every leadership of
    /// this broker to other ISR members and waits until it has (or the
    /// timeout passes), so clients move on before this node stops; then
    /// closes the group coordinator.
    pub async fn controlled_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
        self.hand_over_leadership().await;
        // Members waiting in a rebalance would otherwise hold the
        // listeners' shutdown up; they move to the new coordinator.
        self.groups.close();
        self.share_coordinator.close();
    }

    async fn hand_over_leadership(&self) {
        let deadline = tokio::time::Instant::now() + self.settings.controlled_shutdown_timeout;
        loop {
            match self.controller.heartbeat(self.heartbeat()).await {
                Ok(reply) if reply.leaderships == 0 => {
                    info!("controlled shutdown: no partition led here any more");
                    return;
                }
                Ok(reply) => debug!(
                    leaderships = reply.leaderships,
                    "controlled shutdown in progress"
                ),
                Err(e) => warn!(error = %e, "controlled shutdown heartbeat failed"),
            }
            if tokio::time::Instant::now() >= deadline {
                warn!("controlled shutdown timed out; stopping anyway");
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The value of dynamic broker key `key`: this node's dynamic value,
    /// else the cluster-wide one, else `fallback` (the static value).
    pub fn dynamic_or<T: std::str::FromStr>(&self, key: &str, fallback: T) -> T {
        dynamic_or(&self.controller.image(), self.node_id(), key, fallback)
    }

    /// `log.segment.max.open.files` now (dynamic, per broker or
    /// cluster-wide, as the `log.cleaner.*` keys).
    fn open_log_files_budget(&self) -> usize {
        let budget = self.settings.max_open_log_files;
        budget.resolve(self.dynamic_or(keys::LOG_SEGMENT_MAX_OPEN_FILES.name, budget.configured))
    }

    /// `log.cleaner.backoff.ms`, dynamic as in Kafka.
    fn cleaner_backoff(&self) -> Duration {
        let static_ms =
            u64::try_from(self.settings.cleaner_backoff.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(self.dynamic_or(keys::LOG_CLEANER_BACKOFF_MS.name, static_ms))
    }

    /// The cleaner's settings for its next round: each dynamic value (per
    /// broker, then cluster-wide) over the static one, as in Kafka.
    fn cleaner_config(&self) -> CleanerConfig {
        let fixed = &self.settings.cleaner;
        let threads = self.dynamic_or(keys::LOG_CLEANER_THREADS.name, fixed.threads);
        CleanerConfig {
            threads,
            io_max_bytes_per_second: self.dynamic_or(
                keys::LOG_CLEANER_IO_MAX_BYTES_PER_SECOND.name,
                fixed.io_max_bytes_per_second,
            ),
            dedupe_buffer_size: self.dynamic_or(
                keys::LOG_CLEANER_DEDUPE_BUFFER_SIZE.name,
                fixed.dedupe_buffer_size,
            ),
            io_buffer_load_factor: self.dynamic_or(
                keys::LOG_CLEANER_IO_BUFFER_LOAD_FACTOR.name,
                fixed.io_buffer_load_factor,
            ),
            io_buffer_size: self
                .dynamic_or(keys::LOG_CLEANER_IO_BUFFER_SIZE.name, fixed.io_buffer_size),
        }
    }

    /// Forgets the producer ids idle for `producer.id.expiration.ms`.
    fn expire_producers(&self) {
        let static_ms =
            i64::try_from(self.settings.producer_id_expiration.as_millis()).unwrap_or(i64::MAX);
        let expiration_ms = self.dynamic_or(keys::PRODUCER_ID_EXPIRATION_MS.name, static_ms);
        let removed = self
            .replicas
            .logs()
            .expire_producers(now_ms(), expiration_ms);
        if removed > 0 {
            info!(removed, expiration_ms, "expired idle producer ids");
        }
    }

    async fn blocking(self: &Arc<Self>, f: impl FnOnce(&Broker) + Send + 'static) {
        let me = self.clone();
        let _ = tokio::task::spawn_blocking(move || f(&me)).await;
    }

    /// Flushes every log, writes the checkpoints and the clean-shutdown
    /// marker, and closes the metadata log.
    pub fn shutdown(&self) -> anyhow::Result<()> {
        self.mirrors.stop_all();
        self.fetchers.stop();
        self.replicas
            .logs()
            .shutdown(
                recovery_threads_per_dir(&self.controller.image(), &self.settings),
                self.incarnation.to_string().as_bytes(),
            )
            .context("closing the logs")?;
        info!("broker shut down cleanly");
        Ok(())
    }
}

/// `num.recovery.threads.per.data.dir`: the dynamic value `image` has for
/// this node (its own, then the cluster-wide one), else the static one.
fn recovery_threads_per_dir(image: &MetadataImage, settings: &BrokerSettings) -> usize {
    dynamic_or(
        image,
        settings.node_id,
        keys::NUM_RECOVERY_THREADS_PER_DATA_DIR.name,
        settings.recovery_threads_per_dir,
    )
}

/// Who registers: this process, and the one whose clean shutdown its log
/// dirs record, if any (the clean-shutdown marker holds its incarnation).
#[derive(Clone, Copy)]
struct Registration {
    incarnation: Uuid,
    previous_incarnation: Option<Uuid>,
}

/// Registers this incarnation and waits until the controller unfences it,
/// retrying for as long as it takes (the quorum may still be electing).
async fn register(controller: &Controller, settings: &BrokerSettings, who: Registration) {
    let Registration {
        incarnation,
        previous_incarnation,
    } = who;
    let registration = MetadataRecord::RegisterBroker {
        broker_id: settings.node_id,
        incarnation_id: incarnation,
        endpoints: settings.advertised.clone(),
        rack: settings.rack.clone(),
    };
    let mut waited = 0;
    while let Err(e) = controller
        .register_broker(registration.clone(), previous_incarnation)
        .await
    {
        waited += 1;
        ottla_coordinator_common::log_limited!(
            tracing::Level::WARN,
            key: &(),
            error = %e,
            attempt = waited,
            "registering with the controller failed; retrying"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let heartbeat = Heartbeat {
        broker_id: settings.node_id,
        incarnation: incarnation.as_u128(),
        want_shutdown: false,
    };
    loop {
        match controller.heartbeat(heartbeat).await {
            Ok(reply) if !reply.fenced && !reply.unknown => return,
            Ok(reply) => debug!(?reply, "waiting to be unfenced"),
            Err(e) => {
                ottla_coordinator_common::log_limited!(tracing::Level::WARN, key: &(), error = %e, "first heartbeat failed; retrying")
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
