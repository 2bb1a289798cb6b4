//! Follower side of replication: `num.replica.fetchers` fetch loops per
//! leader broker, each sending Fetch requests with this broker's replica id
//! for its share of the partitions followed from that leader, appending what
//! comes back byte for byte and truncating where the leader says this log
//! diverged.

use std::collections::{BTreeMap, BTreeSet, HashSet};
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
use crate::config::keys;
use crate::dynamic_broker_config::dynamic_or;
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

impl LoopId {
    /// Whether this loop fetches `tp`. Kafka's assignment: the topic's
    /// Java hash code and the partition, modulo the fetcher count.
    fn fetches(&self, tp: &TopicPartition) -> bool {
        let hash = 31i32
            .wrapping_mul(java_string_hash(&tp.topic))
            .wrapping_add(tp.partition);
        // Kafka's Utils.abs: i32::MIN counts as 0.
        let hash = if hash == i32::MIN {
            0
        } else {
            hash.unsigned_abs()
        };
        hash as usize % self.count == self.id
    }
}

/// `String.hashCode()`: what Kafka's fetcher assignment hashes.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The running fetch loops.
pub struct ReplicaFetchers {
    settings: FetchSettings,
    replicas: Arc<ReplicaManager>,
    throttle: Arc<ReplicationThrottle>,
    image: Mutex<Arc<MetadataImage>>,
    loops: Mutex<BTreeMap<LoopId, JoinHandle<()>>>,
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

    /// Starts the loops of every leader this broker now follows and stops
    /// the loops of leaders it no longer does. A new `num.replica.fetchers`
    /// restarts every loop, since partitions move between them (as Kafka's
    /// resizeFetcherThreadPool does). Call after the replica manager
    /// applied `image`.
    pub fn sync(self: &Arc<Self>, image: Arc<MetadataImage>) {
        let count = self.fetchers_per_leader(&image);
        *self.image.lock() = image;
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

    fn leader_address(&self, leader: i32) -> Option<(String, u16)> {
        endpoint_of(&self.image.lock(), leader, &self.settings.listener)
    }

    async fn run(self: Arc<Self>, id: LoopId) {
        let leader = id.leader;
        let mut client: Option<KafkaClient> = None;
        loop {
            let mut partitions = self.replicas.followed_from(leader);
            partitions.retain(|p| id.fetches(&p.tp));
            if partitions.is_empty() {
                tokio::time::sleep(self.settings.backoff).await;
                continue;
            }
            if client.is_none() {
                client = self.connect(id).await;
                if client.is_none() {
                    tokio::time::sleep(self.settings.backoff).await;
                    continue;
                }
            }
            let c = client.as_mut().expect("connected");
            if let Err(e) = self.fetch_once(c, &partitions).await {
                crate::log_limited!(
                    tracing::Level::WARN,
                    key: &leader,
                    leader,
                    error = %e,
                    "replica fetch failed; reconnecting"
                );
                client = None;
                tokio::time::sleep(self.settings.backoff).await;
            }
        }
    }

    async fn connect(&self, id: LoopId) -> Option<KafkaClient> {
        let leader = id.leader;
        let (host, port) = self.leader_address(leader)?;
        // Kafka's fetcher thread name, ReplicaFetcherThread-<id>-<leader>.
        let client_id = format!(
            "replica-fetcher-{}-{}-{leader}",
            self.replicas.node_id(),
            id.id
        );
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
                crate::log_limited!(
                    tracing::Level::WARN,
                    key: &leader,
                    leader,
                    error = %e,
                    "cannot reach the leader to replicate from it"
                );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_codes() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("foo"), 101_574);
        // Overflows wrap as in Java.
        assert_eq!(java_string_hash("replicated-topic"), -887_126_723);
    }

    /// The ids of the loops, out of `count`, that fetch `tp`.
    fn owners(tp: &TopicPartition, count: usize) -> Vec<usize> {
        (0..count)
            .filter(|&id| {
                LoopId {
                    leader: 2,
                    id,
                    count,
                }
                .fetches(tp)
            })
            .collect()
    }

    #[test]
    fn every_partition_has_exactly_one_loop() {
        for count in 1..=5 {
            for partition in 0..50 {
                let tp = TopicPartition::new(format!("t{}", partition % 7), partition);
                let owners = owners(&tp, count).len();
                assert_eq!(owners, 1, "{tp} with {count} fetchers");
            }
        }
    }

    #[test]
    fn partitions_spread_over_the_loops() {
        let count = 3;
        let mut per_loop = [0; 3];
        for partition in 0..30 {
            let tp = TopicPartition::new("events".to_string(), partition);
            per_loop[owners(&tp, count)[0]] += 1;
        }
        // Consecutive partitions of one topic go round the loops.
        assert_eq!(per_loop, [10, 10, 10]);
    }
}
