//! Follower side of replication: `num.replica.fetchers` fetch loops per
//! leader broker, each sending Fetch requests with this broker's replica id
//! for its share of the partitions followed from that leader, appending what
//! comes back byte for byte and truncating where the leader says this log
//! diverged.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_client::ClientSecurity;
use ottla_client::KafkaClient;
use ottla_controller::MetadataImage;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use ottla_storage::manager::TopicPartition;

use super::throttle::{is_throttled, ReplicationThrottle, Side};
use crate::config::keys;
use crate::dynamic_broker_config::dynamic_or;
use crate::replica::{Partition, ReplicaManager};
use ottla_coordinator_common::inter_broker::endpoint_of;
use ottla_fetcher::{
    fetch_loop, fetcher_of, FetchPosition, FetchedPartition, Followup, LeaderEndpoint,
};

const LIST_OFFSETS_VERSION: i16 = 1;
const EARLIEST_TIMESTAMP: i64 = -2;

/// Replica fetch settings (`replica.fetch.*`).
#[derive(Debug, Clone)]
pub struct FetchSettings {
    pub max_wait: Duration,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub response_max_bytes: i32,
    pub backoff: Duration,
    pub socket_timeout: Duration,
    /// The listener brokers replicate over, and how to connect to it.
    pub listener: String,
    pub security: ClientSecurity,
    /// `num.replica.fetchers` of the static configuration; a dynamic value
    /// in the metadata image takes its place.
    pub fetchers_per_leader: usize,
}

/// One fetch loop: the leader it fetches from, and which share of that
/// leader's partitions it has (`id` of `count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct LoopId {
    leader: i32,
    id: usize,
    count: usize,
}

/// The running fetch loops.
pub struct ReplicaFetchers {
    settings: FetchSettings,
    replicas: Arc<ReplicaManager>,
    throttle: Arc<ReplicationThrottle>,
    image: Mutex<Arc<MetadataImage>>,
    loops: Mutex<BTreeMap<LoopId, JoinHandle<()>>>,
    /// Ticks after each image: the partitions a loop follows may have
    /// changed (see `LeaderEndpoint::partitions_changed`).
    followed_changed: tokio::sync::watch::Sender<()>,
}

impl ReplicaFetchers {
    pub fn new(
        settings: FetchSettings,
        replicas: Arc<ReplicaManager>,
        throttle: Arc<ReplicationThrottle>,
    ) -> Arc<Self> {
        Arc::new(Self {
            settings,
            replicas,
            throttle,
            image: Mutex::new(Arc::new(MetadataImage::empty())),
            loops: Mutex::default(),
            followed_changed: tokio::sync::watch::Sender::new(()),
        })
    }

    /// Starts the loops of every leader this broker now follows and stops
    /// the loops of leaders it no longer does. A new `num.replica.fetchers`
    /// restarts every loop, since partitions move between them (as Kafka's
    /// resizeFetcherThreadPool does). Call after the replica manager
    /// applied `image`.
    pub fn sync(self: &Arc<Self>, image: Arc<MetadataImage>) {
        let count = self.fetchers_per_leader(&image);
        *self.image.lock() = image;
        self.followed_changed.send_replace(());
        let wanted: BTreeSet<LoopId> = self
            .replicas
            .leaders_followed()
            .into_iter()
            .flat_map(|leader| (0..count).map(move |id| LoopId { leader, id, count }))
            .collect();
        let mut loops = self.loops.lock();
        loops.retain(|id, task| {
            let keep = wanted.contains(id) && !task.is_finished();
            if !keep {
                task.abort();
            }
            keep
        });
        for id in wanted {
            loops.entry(id).or_insert_with(|| {
                info!(
                    leader = id.leader,
                    fetcher = id.id,
                    fetchers = id.count,
                    "starting replica fetcher"
                );
                tokio::spawn(self.clone().run(id))
            });
        }
    }

    /// `num.replica.fetchers` as `image` has it (at least 1, as in Kafka).
    fn fetchers_per_leader(&self, image: &MetadataImage) -> usize {
        dynamic_or(
            image,
            self.replicas.node_id(),
            keys::NUM_REPLICA_FETCHERS.name,
            self.settings.fetchers_per_leader,
        )
        .max(1)
    }

    /// How many fetch loops run for each leader, by leader id.
    pub fn running(&self) -> BTreeMap<i32, usize> {
        let mut running = BTreeMap::new();
        for (id, task) in self.loops.lock().iter() {
            if !task.is_finished() {
                *running.entry(id.leader).or_default() += 1;
            }
        }
        running
    }

    pub fn stop(&self) {
        for (_, task) in std::mem::take(&mut *self.loops.lock()) {
            task.abort();
        }
    }

    /// The partitions whose follower-side traffic is throttled (named in
    /// their topic's throttle list while this replica is out of the ISR),
    /// and whether the follower throttle is exceeded now.
    fn throttled(&self, partitions: &[Arc<Partition>]) -> (HashSet<TopicPartition>, bool) {
        let image = self.image.lock().clone();
        let Some(limit) = self.throttle.limit(&image, Side::Follower) else {
            return (HashSet::new(), false);
        };
        let me = self.replicas.node_id();
        let throttled = partitions
            .iter()
            .filter(|p| !p.state().isr.contains(&me))
            .filter(|p| is_throttled(&image, Side::Follower, &p.tp.topic, p.tp.partition, me))
            .map(|p| p.tp.clone())
            .collect();
        (throttled, self.throttle.exceeded(Side::Follower, limit))
    }

    fn leader_address(&self, leader: i32) -> Option<(String, u16)> {
        endpoint_of(&self.image.lock(), leader, &self.settings.listener)
    }

    async fn run(self: Arc<Self>, id: LoopId) {
        let endpoint = Arc::new(LeaderOfThisCluster {
            fetchers: self,
            id,
            throttled: Mutex::default(),
        });
        // Aborted through the task handle, never cancelled.
        fetch_loop::run(endpoint, CancellationToken::new()).await
    }
}

/// A fetch loop's leader: a broker of this cluster, fetched from with this
/// broker's replica id.
struct LeaderOfThisCluster {
    fetchers: Arc<ReplicaFetchers>,
    id: LoopId,
    /// The partitions of the last fetch whose traffic the follower
    /// throttle counts.
    throttled: Mutex<HashSet<TopicPartition>>,
}

impl FetchedPartition for Partition {
    fn leader_tp(&self) -> &TopicPartition {
        &self.tp
    }
}

impl LeaderEndpoint for LeaderOfThisCluster {
    type Partition = Partition;

    fn wanted(&self) -> Vec<(Arc<Partition>, FetchPosition)> {
        let mut partitions = self.fetchers.replicas.followed_from(self.id.leader);
        partitions.retain(|p| fetcher_of(&p.tp, self.id.count) == self.id.id);
        let (throttled, over_quota) = self.fetchers.throttled(&partitions);
        let max_bytes = self.fetchers.settings.max_bytes;
        let wanted = partitions
            .into_iter()
            .filter(|p| !(over_quota && throttled.contains(&p.tp)))
            .map(|p| {
                let position = {
                    let log = p.log.read();
                    FetchPosition {
                        fetch_offset: log.log_end_offset(),
                        last_fetched_epoch: log.latest_epoch().unwrap_or(-1),
                        log_start_offset: log.log_start_offset(),
                        current_leader_epoch: p.state().leader_epoch,
                        max_bytes,
                    }
                };
                (p, position)
            })
            .collect();
        *self.throttled.lock() = throttled;
        wanted
    }

    fn request(&self) -> FetchRequest {
        let settings = &self.fetchers.settings;
        FetchRequest::default()
            .with_replica_id(BrokerId(self.fetchers.replicas.node_id()))
            .with_max_wait_ms(settings.max_wait.as_millis() as i32)
            .with_min_bytes(settings.min_bytes)
            .with_max_bytes(settings.response_max_bytes)
    }

    fn timeout(&self) -> Duration {
        self.fetchers.settings.socket_timeout + self.fetchers.settings.max_wait
    }

    fn backoff(&self) -> Duration {
        self.fetchers.settings.backoff
    }

    fn partitions_changed(&self) -> Option<tokio::sync::watch::Receiver<()>> {
        Some(self.fetchers.followed_changed.subscribe())
    }

    async fn connect(&self) -> Result<KafkaClient, String> {
        let leader = self.id.leader;
        let (host, port) = self.fetchers.leader_address(leader).ok_or_else(|| {
            format!(
                "broker {leader} has no {} endpoint",
                self.fetchers.settings.listener
            )
        })?;
        // Kafka's fetcher thread name, ReplicaFetcherThread-<id>-<leader>.
        let client_id = format!(
            "replica-fetcher-{}-{}-{leader}",
            self.fetchers.replicas.node_id(),
            self.id.id
        );
        let settings = &self.fetchers.settings;
        KafkaClient::connect_with(
            &host,
            port,
            &client_id,
            settings.response_max_bytes.max(1 << 20) as usize + (1 << 20),
            settings.socket_timeout,
            &settings.security,
        )
        .await
        .map_err(|e| e.to_string())
    }

    async fn apply(
        &self,
        fetched: Vec<(Arc<Partition>, PartitionData)>,
    ) -> Vec<(Arc<Partition>, Followup)> {
        {
            let throttled = self.throttled.lock();
            for (p, data) in &fetched {
                if throttled.contains(&p.tp) {
                    let bytes = data.records.as_ref().map_or(0, |r| r.len());
                    self.fetchers.throttle.record(Side::Follower, bytes);
                }
            }
        }
        let replicas = self.fetchers.replicas.clone();
        fetch_loop::apply_on_blocking_pool(fetched, move |p, data| {
            apply_replicated(&replicas, p, data)
        })
        .await
    }

    async fn reset_offset(&self, client: &mut KafkaClient, p: &Arc<Partition>) {
        if let Err(e) = self.reset_to_leader_start(client, p).await {
            warn!(partition = %p.tp, error = %e, "cannot restart the replica at the leader's log start");
        }
    }

    fn fetch_failed(&self, error: &str) {
        let leader = self.id.leader;
        ottla_coordinator_common::log_limited!(
            tracing::Level::WARN,
            key: &leader,
            leader,
            error,
            "replica fetch failed"
        );
    }
}

/// Applies one partition's answer on the blocking pool; what the loop must
/// do next, if anything.
fn apply_replicated(
    replicas: &ReplicaManager,
    p: &Partition,
    data: PartitionData,
) -> Option<Followup> {
    let result = match ResponseError::try_from_code(data.error_code) {
        None if data.diverging_epoch.epoch >= 0 => {
            let end = data.diverging_epoch.end_offset;
            info!(partition = %p.tp, epoch = data.diverging_epoch.epoch, end, "truncating the diverging tail");
            let offset = end.min(p.log.read().log_end_offset());
            p.log.write().truncate_to(offset)
        }
        None => replicas.append_replicated(
            p,
            &data.records.unwrap_or_default(),
            data.high_watermark,
            data.log_start_offset,
        ),
        Some(ResponseError::OffsetOutOfRange) => return Some(Followup::ResetOffset),
        Some(ResponseError::UnknownLeaderEpoch) => return Some(Followup::RetrySoon),
        Some(e) => {
            // Leadership moved or the topic is going: the metadata will
            // say what to do next.
            debug!(partition = %p.tp, error = ?e, "replica fetch error");
            return Some(Followup::Retry);
        }
    };
    match result {
        Ok(()) => None,
        Err(e) => {
            ottla_coordinator_common::log_limited!(
                tracing::Level::WARN,
                key: &p.tp,
                partition = %p.tp,
                error = %e,
                "cannot write what the leader sent"
            );
            Some(Followup::Retry)
        }
    }
}

impl LeaderOfThisCluster {
    /// The fetch offset is outside the leader's log: below its start
    /// (retention moved on while this replica was away) this log restarts
    /// at the leader's log start; above its end it truncates to it.
    async fn reset_to_leader_start(
        &self,
        client: &mut KafkaClient,
        p: &Arc<Partition>,
    ) -> anyhow::Result<()> {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(self.fetchers.replicas.node_id()))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(p.tp.topic.clone())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(p.tp.partition)
                    .with_timestamp(EARLIEST_TIMESTAMP)])]);
        let response = client
            .send(
                LIST_OFFSETS_VERSION,
                &request,
                self.fetchers.settings.socket_timeout,
            )
            .await?;
        let Some(start) = response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|r| r.error_code == 0)
            .map(|r| r.offset)
        else {
            return Ok(());
        };
        let p = p.clone();
        tokio::task::spawn_blocking(move || {
            let mut log = p.log.write();
            if start > log.log_end_offset() {
                warn!(partition = %p.tp, start, "restarting the replica at the leader's log start");
                log.truncate_fully_and_start_at(start)
            } else {
                Ok(())
            }
        })
        .await??;
        Ok(())
    }
}
