//! The broker's shared state and its life cycle: open the logs and the
//! metadata, register this node, follow metadata changes, run the periodic
//! log work, and shut down cleanly.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use ottla_controller::records::Endpoint;
use ottla_controller::{Controller, MetadataRecord, TopicDefaults};
use ottla_storage::manager::LogManager;
use tokio::sync::watch;
use tracing::{error, info};
use uuid::Uuid;

use crate::fetch_session::FetchSessionCache;
use crate::group::GroupCoordinator;
use crate::log_config::TopicConfigResolver;
use crate::producer_ids::ProducerIdManager;
use crate::replica::{now_ms, ReplicaManager};
use crate::txn::{Services, TxnCoordinator};

/// The settings the broker's request handling needs, taken from the broker
/// configuration at start-up.
#[derive(Debug, Clone)]
pub struct BrokerSettings {
    pub node_id: i32,
    pub log_dirs: Vec<PathBuf>,
    /// Where the metadata log lives (`metadata.log.dir`, else the first log dir).
    pub metadata_dir: PathBuf,
    pub advertised: Vec<Endpoint>,
    pub rack: Option<String>,
    pub auto_create_topics: bool,
    pub delete_topic_enable: bool,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub fetch_session_slots: usize,
    pub retention_check_interval: Duration,
    pub flush_check_interval: Duration,
    pub checkpoint_interval: Duration,
    pub cleaner_backoff: Duration,
    /// Every key set in server.properties / --override, by Kafka name.
    pub static_configs: BTreeMap<String, String>,
}

pub struct Broker {
    pub settings: BrokerSettings,
    pub cluster_id: String,
    pub controller: Arc<Controller>,
    pub replicas: Arc<ReplicaManager>,
    pub configs: Arc<TopicConfigResolver>,
    pub fetch_sessions: FetchSessionCache,
    pub producer_ids: ProducerIdManager,
    pub groups: GroupCoordinator,
    pub txns: TxnCoordinator,
}

impl Broker {
    /// Opens storage and metadata and registers this node. Blocking I/O:
    /// call before serving requests.
    pub fn open(settings: BrokerSettings) -> anyhow::Result<Arc<Self>> {
        let cluster_id = crate::meta_properties::ensure(
            &settings.log_dirs,
            &settings.metadata_dir,
            settings.node_id,
        )?;
        let controller = Arc::new(
            Controller::open(
                &settings.metadata_dir.join("__cluster_metadata-0"),
                settings.node_id,
                TopicDefaults {
                    num_partitions: settings.num_partitions,
                    replication_factor: settings.default_replication_factor,
                },
            )
            .context("opening the metadata log")?,
        );
        let configs = Arc::new(TopicConfigResolver::new(
            settings.node_id,
            settings.static_configs.clone(),
            controller.image(),
        ));
        let logs = Arc::new(
            LogManager::open(settings.log_dirs.clone(), configs.as_ref())
                .context("opening the log dirs")?,
        );
        let replicas = Arc::new(ReplicaManager::new(settings.node_id, logs, configs.clone()));
        let registration = MetadataRecord::RegisterBroker {
            broker_id: settings.node_id,
            incarnation_id: Uuid::new_v4(),
            endpoints: settings.advertised.clone(),
            rack: settings.rack.clone(),
        };
        controller
            .register_broker(registration)
            .map_err(|e| anyhow::anyhow!("registering the broker: {e}"))?;
        replicas.apply_image(&controller.image());
        let groups = GroupCoordinator::open(
            settings.node_id,
            &settings.static_configs,
            controller.clone(),
            replicas.clone(),
        );
        let producer_ids = ProducerIdManager::new(controller.clone(), settings.node_id);
        let txns = TxnCoordinator::open(
            settings.node_id,
            &settings.static_configs,
            controller.clone(),
            replicas.clone(),
            &Services {
                replicas: &replicas,
                groups: &groups,
                producer_ids: &producer_ids,
            },
        );
        let broker = Arc::new(Self {
            fetch_sessions: FetchSessionCache::new(
                settings.fetch_session_slots,
                Duration::from_secs(120),
            ),
            producer_ids,
            txns,
            settings,
            cluster_id,
            controller,
            replicas,
            configs,
            groups,
        });
        info!(node_id = broker.settings.node_id, cluster_id = %broker.cluster_id, "broker started");
        Ok(broker)
    }

    pub fn node_id(&self) -> i32 {
        self.settings.node_id
    }

    /// Follows metadata changes and runs the periodic log work until
    /// `shutdown` flips to true.
    pub async fn run_background(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let mut image_rx = self.controller.subscribe();
        // Changes committed between `open` and this first poll still count.
        image_rx.mark_changed();
        let mut retention = tokio::time::interval(self.settings.retention_check_interval);
        let mut flush = tokio::time::interval(self.settings.flush_check_interval);
        let mut checkpoint = tokio::time::interval(self.settings.checkpoint_interval);
        let mut cleaner = tokio::time::interval(self.settings.cleaner_backoff);
        let mut group_timers = tokio::time::interval(GroupCoordinator::TICK_INTERVAL);
        let mut txn_timers = tokio::time::interval(self.txns.tick_interval());
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                changed = image_rx.changed() => {
                    if changed.is_err() { break; }
                    let image = image_rx.borrow_and_update().clone();
                    let replicas = self.replicas.clone();
                    // Creating and deleting logs is file I/O.
                    let _ = tokio::task::spawn_blocking(move || replicas.apply_image(&image)).await;
                }
                _ = retention.tick() => self.blocking(|b| { b.replicas.logs().run_retention(now_ms()); }).await,
                _ = flush.tick() => self.blocking(|b| b.replicas.logs().run_time_flush(now_ms())).await,
                _ = cleaner.tick() => self.blocking(|b| b.replicas.logs().run_compaction(now_ms())).await,
                _ = group_timers.tick() => self.blocking(|b| b.groups.tick(now_ms())).await,
                _ = txn_timers.tick() => self.blocking(|b| b.txns.tick(&crate::txn::services(b), now_ms())).await,
                _ = checkpoint.tick() => self.blocking(|b| {
                    if let Err(e) = b.replicas.logs().checkpoint() {
                        error!(error = %e, "writing the log checkpoints failed");
                    }
                }).await,
            }
        }
    }

    async fn blocking(self: &Arc<Self>, f: impl FnOnce(&Broker) + Send + 'static) {
        let me = self.clone();
        let _ = tokio::task::spawn_blocking(move || f(&me)).await;
    }

    /// Flushes every log, writes the checkpoints and the clean-shutdown
    /// marker, and closes the metadata log.
    pub fn shutdown(&self) -> anyhow::Result<()> {
        self.replicas
            .logs()
            .shutdown()
            .context("closing the logs")?;
        self.controller
            .close()
            .context("closing the metadata log")?;
        info!("broker shut down cleanly");
        Ok(())
    }
}
