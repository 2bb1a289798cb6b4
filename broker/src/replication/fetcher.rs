//! Follower side of replication: one fetch loop per leader broker, sending
//! Fetch requests with this broker's replica id for every partition it
//! follows from that leader, appending what comes back byte for byte and
//! truncating where the leader says this log diverged.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::MetadataImage;
use ottla_protocol::client::KafkaClient;
use ottla_protocol::client_security::ClientSecurity;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use ottla_storage::manager::TopicPartition;

use super::throttle::{is_throttled, ReplicationThrottle, Side};
use crate::inter_broker::endpoint_of;
use crate::replica::{Partition, ReplicaManager};

/// Fetch v12: the first with the diverging-epoch field, still by topic name.
const FETCH_VERSION: i16 = 12;
const LIST_OFFSETS_VERSION: i16 = 1;
const EARLIEST_TIMESTAMP: i64 = -2;
/// How long a fetch loop waits when the follower throttle holds back every
/// partition it follows from a leader.
const THROTTLED_BACKOFF: Duration = Duration::from_millis(100);

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
}

/// The running fetch loops, by leader broker id.
pub struct ReplicaFetchers {
    settings: FetchSettings,
    replicas: Arc<ReplicaManager>,
    throttle: Arc<ReplicationThrottle>,
    image: Mutex<Arc<MetadataImage>>,
    loops: Mutex<BTreeMap<i32, JoinHandle<()>>>,
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
        })
    }

    /// Starts a loop for every leader this broker now follows and stops
    /// the loops of leaders it no longer does. Call after the replica
    /// manager applied `image`.
    pub fn sync(self: &Arc<Self>, image: Arc<MetadataImage>) {
        *self.image.lock() = image;
        let wanted = self.replicas.leaders_followed();
        let mut loops = self.loops.lock();
        loops.retain(|leader, task| {
            let keep = wanted.contains(leader) && !task.is_finished();
            if !keep {
                task.abort();
            }
            keep
        });
        for leader in wanted {
            loops.entry(leader).or_insert_with(|| {
                info!(leader, "starting replica fetcher");
                tokio::spawn(self.clone().run(leader))
            });
        }
    }

    pub fn stop(&self) {
        for (_, task) in std::mem::take(&mut *self.loops.lock()) {
            task.abort();
        }
    }

    fn leader_address(&self, leader: i32) -> Option<(String, u16)> {
        endpoint_of(&self.image.lock(), leader, &self.settings.listener)
    }

    async fn run(self: Arc<Self>, leader: i32) {
        let mut client: Option<KafkaClient> = None;
        loop {
            let partitions = self.replicas.followed_from(leader);
            if partitions.is_empty() {
                tokio::time::sleep(self.settings.backoff).await;
                continue;
            }
            if client.is_none() {
                client = self.connect(leader).await;
                if client.is_none() {
                    tokio::time::sleep(self.settings.backoff).await;
                    continue;
                }
            }
            let c = client.as_mut().expect("connected");
            if let Err(e) = self.fetch_once(c, &partitions).await {
                debug!(leader, error = %e, "replica fetch failed; reconnecting");
                client = None;
                tokio::time::sleep(self.settings.backoff).await;
            }
        }
    }

    async fn connect(&self, leader: i32) -> Option<KafkaClient> {
        let (host, port) = self.leader_address(leader)?;
        let client_id = format!("replica-fetcher-{}", self.replicas.node_id());
        match KafkaClient::connect_with(
            &host,
            port,
            &client_id,
            self.settings.response_max_bytes.max(1 << 20) as usize + (1 << 20),
            self.settings.socket_timeout,
            &self.settings.security,
        )
        .await
        {
            Ok(c) => Some(c),
            Err(e) => {
                debug!(leader, error = %e, "cannot reach the leader");
                None
            }
        }
    }

    async fn fetch_once(
        &self,
        client: &mut KafkaClient,
        partitions: &[Arc<Partition>],
    ) -> anyhow::Result<()> {
        let (throttled, over_quota) = self.throttled(partitions);
        let mut topics: BTreeMap<String, Vec<FetchPartition>> = BTreeMap::new();
        for p in partitions {
            if over_quota && throttled.contains(&p.tp) {
                continue;
            }
            let (log_end, log_start, last_epoch) = {
                let log = p.log.read();
                (
                    log.log_end_offset(),
                    log.log_start_offset(),
                    log.latest_epoch().unwrap_or(-1),
                )
            };
            topics.entry(p.tp.topic.clone()).or_default().push(
                FetchPartition::default()
                    .with_partition(p.tp.partition)
                    .with_current_leader_epoch(p.state().leader_epoch)
                    .with_fetch_offset(log_end)
                    .with_last_fetched_epoch(last_epoch)
                    .with_log_start_offset(log_start)
                    .with_partition_max_bytes(self.settings.max_bytes),
            );
        }
        if topics.is_empty() {
            // Every partition waits for the follower throttle.
            tokio::time::sleep(THROTTLED_BACKOFF).await;
            return Ok(());
        }
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(self.replicas.node_id()))
            .with_max_wait_ms(self.settings.max_wait.as_millis() as i32)
            .with_min_bytes(self.settings.min_bytes)
            .with_max_bytes(self.settings.response_max_bytes)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        FetchTopic::default()
                            .with_topic(TopicName(StrBytes::from_string(name)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let timeout = self.settings.socket_timeout + self.settings.max_wait;
        let response = client.send(FETCH_VERSION, &request, timeout).await?;
        if response.error_code != 0 {
            anyhow::bail!("fetch refused with error {}", response.error_code);
        }
        for topic in response.responses {
            for data in topic.partitions {
                let Some(p) = partitions.iter().find(|p| {
                    p.tp.topic == topic.topic.as_str() && p.tp.partition == data.partition_index
                }) else {
                    continue;
                };
                if throttled.contains(&p.tp) {
                    let bytes = data.records.as_ref().map_or(0, |r| r.len());
                    self.throttle.record(Side::Follower, bytes);
                }
                self.apply(client, p, data).await?;
            }
        }
        Ok(())
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

    /// Applies one partition's answer.
    async fn apply(
        &self,
        client: &mut KafkaClient,
        p: &Arc<Partition>,
        data: kafka_protocol::messages::fetch_response::PartitionData,
    ) -> anyhow::Result<()> {
        let replicas = self.replicas.clone();
        match ResponseError::try_from_code(data.error_code) {
            None if data.diverging_epoch.epoch >= 0 => {
                let p = p.clone();
                let end = data.diverging_epoch.end_offset;
                info!(partition = %p.tp, epoch = data.diverging_epoch.epoch, end, "truncating the diverging tail");
                blocking(move || {
                    let offset = end.min(p.log.read().log_end_offset());
                    p.log.write().truncate_to(offset)
                })
                .await?;
            }
            None => {
                let p = p.clone();
                let records = data.records.unwrap_or_default();
                blocking(move || {
                    replicas.append_replicated(
                        &p,
                        &records,
                        data.high_watermark,
                        data.log_start_offset,
                    )
                })
                .await?;
            }
            Some(ResponseError::OffsetOutOfRange) => {
                self.reset_to_leader_start(client, p).await?;
            }
            Some(e) => {
                // Leadership moved or the topic is going: the metadata will
                // say what to do next.
                debug!(partition = %p.tp, error = ?e, "replica fetch error");
            }
        }
        Ok(())
    }

    /// The fetch offset is outside the leader's log: below its start
    /// (retention moved on while this replica was away) this log restarts
    /// at the leader's log start; above its end it truncates to it.
    async fn reset_to_leader_start(
        &self,
        client: &mut KafkaClient,
        p: &Arc<Partition>,
    ) -> anyhow::Result<()> {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(self.replicas.node_id()))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(p.tp.topic.clone())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(p.tp.partition)
                    .with_timestamp(EARLIEST_TIMESTAMP)])]);
        let response = client
            .send(LIST_OFFSETS_VERSION, &request, self.settings.socket_timeout)
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
        blocking(move || {
            let mut log = p.log.write();
            if start > log.log_end_offset() {
                warn!(partition = %p.tp, start, "restarting the replica at the leader's log start");
                log.truncate_fully_and_start_at(start)
            } else {
                Ok(())
            }
        })
        .await?;
        Ok(())
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ottla_storage::StorageError> + Send + 'static,
) -> anyhow::Result<T> {
    Ok(tokio::task::spawn_blocking(f).await??)
}
