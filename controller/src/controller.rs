//! The controller: validates metadata changes, turns them into records,
//! commits them to the metadata log and publishes the new image.
//!
//! Every node with the controller role is a voter of the metadata quorum
//! (`crate::raft`); a single node is a quorum of one. A broker-only node
//! runs a controller too, as an observer: it follows the log and forwards
//! everything it commits. Any node plans a change against its own image;
//! the active controller commits it only if that image was current (see
//! `crate::service`), so requests can land on any node.

mod active;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use ottla_storage::config::validate_topic_config;
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tracing::info;
use uuid::Uuid;

use crate::elections::{align_partitions, elect, usable_in, ElectionType, NoElection};
use crate::features;
use crate::image::MetadataImage;
use crate::partition_change::{MinIsr, PartitionChange, MIN_INSYNC_REPLICAS};
use crate::raft::{
    Observer, Quorum, QuorumConfig, QuorumError, QuorumMember, QuorumVoters, RpcHandler,
};
use crate::reassignment::{self, ReassignmentError};
use crate::records::{
    is_mirror_binding_config, MetadataRecord, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC,
};
use active::{ActiveService, CommitError, Liveness, LivenessLoop, QuietScans};

/// Producer ids handed to a broker per ProducerIds record.
pub const PRODUCER_ID_BLOCK: i64 = 1000;
/// Kafka's limit on topic name length.
pub const MAX_TOPIC_NAME_LEN: usize = 249;
/// How often a change is planned again because the image moved on.
const MAX_PLAN_ATTEMPTS: usize = 20;

/// A refused metadata change: the Kafka error code and a message for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerError {
    pub code: i16,
    pub message: String,
}

impl ControllerError {
    pub fn new(error: ResponseError, message: impl Into<String>) -> Self {
        Self {
            code: error.code(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ControllerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (error {})", self.message, self.code)
    }
}

impl std::error::Error for ControllerError {}

pub type ControllerResult<T> = Result<T, ControllerError>;

/// A topic to create.
#[derive(Debug, Clone, Default)]
pub struct NewTopic {
    pub name: String,
    /// -1: the broker default (`num.partitions`).
    pub num_partitions: i32,
    /// -1: the broker default (`default.replication.factor`).
    pub replication_factor: i16,
    /// Manual assignment: partition -> replicas.
    pub assignments: BTreeMap<i32, Vec<i32>>,
    pub configs: BTreeMap<String, Option<String>>,
    /// A fixed topic id (mirroring keeps the source's); random when None.
    pub topic_id: Option<Uuid>,
}

/// Broker defaults the controller applies to topic creation.
#[derive(Debug, Clone)]
pub struct TopicDefaults {
    pub num_partitions: i32,
    pub replication_factor: i16,
    /// This node's static `min.insync.replicas`: what the ELR follows when
    /// neither the topic nor the cluster-level dynamic config sets one.
    pub min_insync_replicas: i32,
}

/// A topic the controller created (or would create, when validating only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreatedTopic {
    pub topic_id: Uuid,
    pub num_partitions: i32,
    pub replication_factor: i16,
}

/// How an IncrementalAlterConfigs entry changes a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlterOp {
    Set,
    Delete,
    Append,
    Subtract,
}

/// A partition by topic name and index, as admin requests name them.
pub type PartitionKey = (String, i32);

/// What a controller node needs to start.
#[derive(Debug, Clone)]
pub struct ControllerSettings {
    pub node_id: i32,
    /// The metadata log's directory (`__cluster_metadata-0`).
    pub dir: PathBuf,
    /// `controller.quorum.voters`, or the bootstrap servers of a dynamic
    /// quorum.
    pub voters: QuorumVoters,
    /// Whether this node is one of the voters (has the controller role) or
    /// only observes the quorum (a broker-only node).
    pub voter: bool,
    pub quorum: QuorumConfig,
    pub defaults: TopicDefaults,
    /// `broker.session.timeout.ms`: brokers silent this long are fenced.
    pub session_timeout: Duration,
    /// `leader.imbalance.check.interval.seconds` when
    /// `auto.leader.rebalance.enable`: how often leadership goes back to
    /// preferred replicas.
    pub leader_rebalance_interval: Option<Duration>,
}

pub struct Controller {
    pub(crate) node_id: i32,
    pub(crate) quorum: QuorumMember,
    defaults: TopicDefaults,
    /// Serializes check-and-write on the active controller, so each write
    /// is validated against the image the previous one produced.
    pub(crate) leader_serial: tokio::sync::Mutex<()>,
    pub(crate) liveness: Liveness,
    pub(crate) quiet_scans: QuietScans,
    /// The quorum's own runtime: metadata work never waits behind client
    /// traffic, and synchronous callers can wait on it from any thread.
    runtime: Option<Runtime>,
    pub(crate) me: Weak<Controller>,
}

impl Controller {
    /// Opens the metadata log, joins the quorum and starts the liveness
    /// checks. Blocks until the quorum has started (not until it has a
    /// leader). Quorum RPCs are served through [`Controller::rpc_handler`].
    /// An observer opens no log: its image is empty until its first fetch
    /// (see [`Controller::caught_up`]).
    pub fn start(settings: ControllerSettings) -> Result<Arc<Self>, QuorumError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ottla-controller")
            .enable_all()
            .build()
            .map_err(|e| {
                QuorumError::Config(format!("cannot start the controller runtime: {e}"))
            })?;
        let ControllerSettings {
            node_id,
            dir,
            voters,
            voter,
            quorum,
            defaults,
            session_timeout,
            leader_rebalance_interval,
        } = settings;
        let id = u64::try_from(node_id)
            .map_err(|_| QuorumError::Config(format!("node.id {node_id} is negative")))?;
        let quorum = runtime.block_on(async move {
            if voter {
                Quorum::start(id, &dir, voters, None, quorum)
                    .await
                    .map(|q| QuorumMember::Voter(Box::new(q)))
            } else {
                Observer::start(id, &voters, &quorum).map(QuorumMember::Observer)
            }
        })?;
        let image = quorum.image();
        info!(
            records_offset = image.offset,
            topics = image.topics.len(),
            "metadata image loaded"
        );
        let controller = Arc::new_cyclic(|me| Self {
            node_id,
            quorum,
            defaults,
            leader_serial: tokio::sync::Mutex::new(()),
            liveness: Liveness::new(session_timeout, leader_rebalance_interval),
            quiet_scans: QuietScans::default(),
            runtime: Some(runtime),
            me: me.clone(),
        });
        if let Some(voter) = controller.quorum.voter() {
            voter.set_service(Arc::new(ActiveService(Arc::downgrade(&controller))));
        }
        controller.spawn(Arc::downgrade(&controller).run_liveness_checks());
        Ok(controller)
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.quorum.image()
    }

    /// Metadata listeners (replica manager, coordinators, mirror manager).
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.quorum.subscribe()
    }

    /// Serves quorum RPC connections accepted by the broker's controller
    /// listener; None on an observer, which serves none.
    pub fn rpc_handler(&self) -> Option<RpcHandler> {
        self.quorum.voter().map(Quorum::rpc_handler)
    }

    /// Resolves once this node has metadata to serve from: at once on a
    /// voter (its image is loaded from disk), after the first fetch on an
    /// observer.
    pub async fn caught_up(&self) {
        let mut images = self.subscribe();
        if self.quorum.voter().is_none() {
            let _ = images.wait_for(|image| image.offset >= 0).await;
        }
    }

    /// Runs `future` on the controller's runtime and waits for it
    /// asynchronously: metadata work never queues behind client traffic.
    pub(crate) async fn on_runtime<T: Send + 'static>(
        &self,
        future: impl Future<Output = T> + Send + 'static,
    ) -> T {
        self.runtime
            .as_ref()
            .expect("running")
            .spawn(future)
            .await
            .expect("the controller runtime stopped")
    }

    /// Waits for an async controller call from a thread that may block: a
    /// handler on the blocking pool, a plain thread, a test. Tokio refuses
    /// (panics) on an async runtime's worker thread, where the wait could
    /// stall every worker of the broker and with them the quorum RPCs the
    /// call is waiting for; async code awaits the call instead.
    pub fn block_on<T>(&self, call: impl Future<Output = T>) -> T {
        self.runtime
            .as_ref()
            .expect("running")
            .handle()
            .block_on(call)
    }

    /// Runs background metadata work (an internal topic's creation, the
    /// liveness checks) on the controller's runtime, from any thread.
    pub fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) {
        self.runtime.as_ref().expect("running").spawn(future);
    }

    /// Plans records against the current image and commits them; a plan
    /// made on an image that moved on meanwhile is made again on the new
    /// one. Returns the plan's outcome and the commit's error, if any.
    pub(crate) async fn run<T>(
        &self,
        mut plan: impl FnMut(&MetadataImage) -> (Vec<MetadataRecord>, T) + Send,
    ) -> (T, Option<ControllerError>) {
        let mut attempts = 0;
        loop {
            let image = self.image();
            let (records, outcome) = plan(&image);
            if records.is_empty() {
                return (outcome, None);
            }
            let me = self.me.upgrade().expect("controller alive");
            let expected = image.offset;
            match self
                .on_runtime(async move { me.commit(expected, records).await })
                .await
            {
                Ok(_) => return (outcome, None),
                Err(CommitError::Stale) if attempts < MAX_PLAN_ATTEMPTS => {
                    attempts += 1;
                    self.wait_for_newer_image(expected).await;
                }
                Err(CommitError::Stale) => {
                    return (
                        outcome,
                        Some(ControllerError::new(
                            ResponseError::RequestTimedOut,
                            "the metadata kept changing while this request was applied; retry",
                        )),
                    )
                }
                Err(CommitError::Failed(e)) => return (outcome, Some(e)),
            }
        }
    }

    /// Waits briefly for this node's image to pass `offset`.
    async fn wait_for_newer_image(&self, offset: i64) {
        let mut rx = self.subscribe();
        self.on_runtime(async move {
            let _ = tokio::time::timeout(
                Duration::from_millis(200),
                rx.wait_for(|image| image.offset > offset),
            )
            .await;
        })
        .await;
    }

    /// Registers (or re-registers) a broker and its endpoints. It starts
    /// fenced; a new incarnation of a known broker first loses whatever it
    /// led. `previous_incarnation` is the incarnation whose clean shutdown
    /// its log dirs record (Kafka's previous broker epoch): when it is not
    /// the registered one, the broker stopped uncleanly, may have lost an
    /// unflushed tail, and leaves every ISR and ELR.
    pub async fn register_broker(
        &self,
        record: MetadataRecord,
        previous_incarnation: Option<Uuid>,
    ) -> ControllerResult<()> {
        let MetadataRecord::RegisterBroker {
            broker_id,
            incarnation_id,
            ..
        } = &record
        else {
            return Err(ControllerError::new(
                ResponseError::InvalidRequest,
                "not a broker registration",
            ));
        };
        let (broker_id, incarnation_id) = (*broker_id, *incarnation_id);
        let ((), error) = self
            .run(|image| {
                let unclean = image.brokers.get(&broker_id).is_some_and(|b| {
                    b.incarnation_id != incarnation_id
                        && Some(b.incarnation_id) != previous_incarnation
                });
                if unclean {
                    info!(
                        broker = broker_id,
                        "broker registering after an unclean shutdown: it leaves every ISR and ELR"
                    );
                }
                let mut records = vec![record.clone()];
                records.extend(align_partitions(
                    image,
                    self.min_isr(image),
                    |b| usable_in(image, b, &[(broker_id, false)]),
                    unclean.then_some(broker_id),
                ));
                (records, ())
            })
            .await;
        error.map_or(Ok(()), Err)
    }

    /// Removes broker `broker_id`'s registration (UnregisterBroker,
    /// `kafka-cluster.sh unregister`, for a broker taken out of service).
    /// It leaves every leadership, ISR and ELR first, as after an unclean
    /// shutdown: a broker that comes back registers anew. A broker still
    /// running re-registers at its next heartbeat, as in Kafka.
    pub async fn unregister_broker(&self, broker_id: i32) -> ControllerResult<()> {
        self.run_fallible(|image| {
            if !image.brokers.contains_key(&broker_id) {
                return Err(ControllerError::new(
                    ResponseError::BrokerIdNotRegistered,
                    format!("Broker ID {broker_id} is not currently registered"),
                ));
            }
            let mut records = align_partitions(
                image,
                self.min_isr(image),
                |b| usable_in(image, b, &[(broker_id, false)]),
                Some(broker_id),
            );
            records.push(MetadataRecord::UnregisterBroker { broker_id });
            Ok(records)
        })
        .await
    }

    /// The min ISR the ELR of `image`'s partitions follows.
    pub(crate) fn min_isr<'a>(&self, image: &'a MetadataImage) -> MinIsr<'a> {
        MinIsr::new(image, self.defaults.min_insync_replicas)
    }

    /// Validates and creates topics. With `validate_only`, nothing is
    /// written. Returns, per topic, its id and partition count, or an error.
    pub async fn create_topics(
        &self,
        topics: Vec<NewTopic>,
        validate_only: bool,
    ) -> Vec<(String, ControllerResult<CreatedTopic>)> {
        let requested: u64 = topics.iter().map(|t| self.records_to_create(t)).sum();
        if requested > MAX_RECORDS_PER_USER_OP {
            return topics
                .into_iter()
                .map(|t| (t.name, Err(excessively_large())))
                .collect();
        }
        let (mut results, error) = self
            .run(|image| {
                let mut results = Vec::new();
                let mut records = Vec::new();
                let mut taken: Vec<String> = Vec::new();
                for topic in topics.iter().cloned() {
                    let name = topic.name.clone();
                    let r = self
                        .plan_topic(image, &taken, topic)
                        .map(|(recs, created)| {
                            taken.push(name.clone());
                            if !validate_only {
                                records.extend(recs);
                            }
                            created
                        });
                    results.push((name, r));
                }
                (records, results)
            })
            .await;
        fail_all(&mut results, error);
        results
    }

    /// The metadata records creating `t` takes: its topic, its configs and
    /// its partitions, counted before any partition is placed.
    fn records_to_create(&self, t: &NewTopic) -> u64 {
        let partitions = match (t.assignments.len(), t.num_partitions) {
            (0, -1) => u64::try_from(self.defaults.num_partitions).unwrap_or(0),
            (0, n) => u64::try_from(n).unwrap_or(0),
            (n, _) => n as u64,
        };
        1 + t.configs.len() as u64 + partitions
    }

    pub(crate) fn plan_topic(
        &self,
        image: &MetadataImage,
        taken: &[String],
        t: NewTopic,
    ) -> ControllerResult<(Vec<MetadataRecord>, CreatedTopic)> {
        validate_topic_name(&t.name)?;
        if image.topic_by_name(&t.name).is_some() || taken.contains(&t.name) {
            return Err(ControllerError::new(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{}' already exists.", t.name),
            ));
        }
        let collides =
            |other: &str| other != t.name && other.replace('.', "_") == t.name.replace('.', "_");
        if let Some(other) = image.topic_ids.keys().find(|o| collides(o)) {
            return Err(ControllerError::new(
                ResponseError::InvalidTopicException,
                format!("Topic '{}' collides with existing topic: {other}", t.name),
            ));
        }
        for (key, value) in &t.configs {
            let value = value.as_deref().ok_or_else(|| {
                ControllerError::new(
                    ResponseError::InvalidConfig,
                    format!("Null value not supported for topic config '{key}'"),
                )
            })?;
            validate_topic_config(key, value)
                .map_err(|m| ControllerError::new(ResponseError::InvalidConfig, m))?;
        }
        let brokers: Vec<i32> = image.live_brokers().map(|b| b.id).collect();
        let assignments: BTreeMap<i32, Vec<i32>> = if !t.assignments.is_empty() {
            if t.num_partitions != -1 || t.replication_factor != -1 {
                return Err(ControllerError::new(
                    ResponseError::InvalidRequest,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
                ));
            }
            for (p, replicas) in &t.assignments {
                validate_assignment(*p, replicas, image)?;
            }
            let expected: Vec<i32> = (0..t.assignments.len() as i32).collect();
            if t.assignments.keys().copied().collect::<Vec<_>>() != expected {
                return Err(ControllerError::new(
                    ResponseError::InvalidReplicaAssignment,
                    "Partitions must be numbered consecutively from 0.",
                ));
            }
            t.assignments
        } else {
            let partitions = if t.num_partitions == -1 {
                self.defaults.num_partitions
            } else {
                t.num_partitions
            };
            let rf = if t.replication_factor == -1 {
                self.defaults.replication_factor
            } else {
                t.replication_factor
            };
            if partitions <= 0 {
                return Err(ControllerError::new(
                    ResponseError::InvalidPartitions,
                    "Number of partitions must be larger than 0.",
                ));
            }
            if rf <= 0 {
                return Err(ControllerError::new(
                    ResponseError::InvalidReplicationFactor,
                    "Replication factor must be larger than 0.",
                ));
            }
            if rf as usize > brokers.len() {
                return Err(ControllerError::new(
                    ResponseError::InvalidReplicationFactor,
                    format!("Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {} broker(s) are registered.", brokers.len()),
                ));
            }
            place_replicas(&brokers, partitions, rf as usize, image.topics.len())
        };
        let topic_id = t.topic_id.unwrap_or_else(Uuid::new_v4);
        if image.topics.contains_key(&topic_id) || topic_id.is_nil() {
            return Err(ControllerError::new(
                ResponseError::InvalidRequest,
                format!("Topic id {topic_id} is already in use or reserved."),
            ));
        }
        let rf = assignments.values().next().map_or(0, Vec::len) as i16;
        let n = assignments.len() as i32;
        let mut records = vec![MetadataRecord::Topic {
            name: t.name.clone(),
            topic_id,
        }];
        for (key, value) in t.configs {
            records.push(MetadataRecord::Config {
                resource_type: CONFIG_RESOURCE_TOPIC,
                resource_name: t.name.clone(),
                name: key,
                value,
            });
        }
        for (p, replicas) in assignments {
            records.push(partition_record(topic_id, p, replicas));
        }
        Ok((
            records,
            CreatedTopic {
                topic_id,
                num_partitions: n,
                replication_factor: rf,
            },
        ))
    }

    /// Deletes topics by name.
    pub async fn delete_topics(&self, names: &[String]) -> Vec<(String, ControllerResult<Uuid>)> {
        let (mut results, error) = self
            .run(|image| {
                let mut records = Vec::new();
                let results: Vec<_> = names
                    .iter()
                    .map(|name| {
                        let r = match image.topic_by_name(name) {
                            Some(t) => {
                                records.push(MetadataRecord::RemoveTopic { topic_id: t.id });
                                Ok(t.id)
                            }
                            None => Err(ControllerError::new(
                                ResponseError::UnknownTopicOrPartition,
                                format!("Topic '{name}' does not exist."),
                            )),
                        };
                        (name.clone(), r)
                    })
                    .collect();
                (records, results)
            })
            .await;
        fail_all(&mut results, error);
        results
    }

    /// Adds partitions to a topic (CreatePartitions).
    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> ControllerResult<()> {
        self.run_fallible(|image| {
    let t = image.topic_by_name(name).ok_or_else(|| {
                ControllerError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic '{name}' does not exist."),
                )
            })?;
            let current = t.partitions.len() as i32;
            if count <= current {
                let msg = if count == current {
                    format!("Topic already has {current} partitions.")
                } else {
                    format!("Topic currently has {current} partitions, which is higher than the requested {count}.")
                };
                return Err(ControllerError::new(ResponseError::InvalidPartitions, msg));
            }
            if (count - current) as u64 > MAX_RECORDS_PER_USER_OP {
                return Err(excessively_large());
            }
            let rf = t.partitions.values().next().map_or(1, |p| p.replicas.len());
            let brokers: Vec<i32> = image.live_brokers().map(|b| b.id).collect();
            let new: Vec<Vec<i32>> = match assignments.clone() {
                Some(a) => {
                    if a.len() as i32 != count - current {
                        return Err(ControllerError::new(
                            ResponseError::InvalidReplicaAssignment,
                            format!("Increasing the number of partitions by {} but {} assignments provided.", count - current, a.len()),
                        ));
                    }
                    for (i, replicas) in a.iter().enumerate() {
                        validate_assignment(current + i as i32, replicas, image)?;
                    }
                    a
                }
                None => {
                    if rf > brokers.len() {
                        return Err(ControllerError::new(
                            ResponseError::InvalidReplicationFactor,
                            "Not enough live brokers for the topic's replication factor.",
                        ));
                    }
                    let placed = place_replicas(&brokers, count, rf, image.topics.len());
                    placed
                        .into_iter()
                        .filter(|(p, _)| *p >= current)
                        .map(|(_, r)| r)
                        .collect()
                }
            };
            if validate_only {
                return Ok(Vec::new());
            }
            Ok(new
                .into_iter()
                .enumerate()
                .map(|(i, replicas)| partition_record(t.id, current + i as i32, replicas))
                .collect())
        }).await
    }

    /// Applies config changes to one resource. Topic keys are validated here;
    /// broker keys must be validated by the caller (the broker owns them).
    pub async fn alter_configs(
        &self,
        resource_type: i8,
        resource_name: &str,
        changes: &[(String, AlterOp, Option<String>)],
        replace_all: bool,
        validate_only: bool,
    ) -> ControllerResult<()> {
        self.run_fallible(|image| {
            if resource_type == CONFIG_RESOURCE_TOPIC
                && image.topic_by_name(resource_name).is_none()
            {
                return Err(ControllerError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic '{resource_name}' does not exist."),
                ));
            }
            let current = image
                .configs_of(resource_type, resource_name)
                .cloned()
                .unwrap_or_default();
            let mut next = if replace_all {
                // The mirror binding is not the client's to replace.
                current
                    .iter()
                    .filter(|(k, _)| is_mirror_binding_config(k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            } else {
                current.clone()
            };
            for (key, op, value) in changes {
                if resource_type == CONFIG_RESOURCE_TOPIC
                    && ottla_storage::config::topic_config_key(key).is_none()
                {
                    return Err(ControllerError::new(
                        ResponseError::InvalidConfig,
                        format!("Unknown topic config name: {key}"),
                    ));
                }
                match op {
                    AlterOp::Set => {
                        let v = value.clone().ok_or_else(|| {
                            ControllerError::new(
                                ResponseError::InvalidConfig,
                                format!("Null value not supported for '{key}'"),
                            )
                        })?;
                        next.insert(key.clone(), v);
                    }
                    AlterOp::Delete => {
                        next.remove(key);
                    }
                    AlterOp::Append | AlterOp::Subtract => {
                        let is_list =
                            ottla_storage::config::topic_config_key(key).is_some_and(|k| {
                                k.config_type == ottla_storage::config::ConfigType::List
                            });
                        if resource_type == CONFIG_RESOURCE_TOPIC && !is_list {
                            return Err(ControllerError::new(
                                ResponseError::InvalidConfig,
                                format!("Config value append is not allowed for config key: {key}"),
                            ));
                        }
                        let existing = next.get(key).cloned().unwrap_or_default();
                        let mut items: Vec<String> = existing
                            .split(',')
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .map(String::from)
                            .collect();
                        for item in value
                            .as_deref()
                            .unwrap_or("")
                            .split(',')
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                        {
                            if *op == AlterOp::Append {
                                if !items.iter().any(|i| i == item) {
                                    items.push(item.to_string());
                                }
                            } else {
                                items.retain(|i| i != item);
                            }
                        }
                        next.insert(key.clone(), items.join(","));
                    }
                }
            }
            if resource_type == CONFIG_RESOURCE_TOPIC {
                for (k, v) in next.iter().filter(|(k, _)| !is_mirror_binding_config(k)) {
                    validate_topic_config(k, v)
                        .map_err(|m| ControllerError::new(ResponseError::InvalidConfig, m))?;
                }
            }
            check_elr_min_isr_change(image, resource_type, resource_name, &current, &next)?;
            if validate_only {
                return Ok(Vec::new());
            }
            let mut records = Vec::new();
            for (k, v) in &next {
                if current.get(k) != Some(v) {
                    records.push(MetadataRecord::Config {
                        resource_type,
                        resource_name: resource_name.to_string(),
                        name: k.clone(),
                        value: Some(v.clone()),
                    });
                }
            }
            for k in current.keys().filter(|k| !next.contains_key(*k)) {
                records.push(MetadataRecord::Config {
                    resource_type,
                    resource_name: resource_name.to_string(),
                    name: k.clone(),
                    value: None,
                });
            }
            if current.get(MIN_INSYNC_REPLICAS) != next.get(MIN_INSYNC_REPLICAS) {
                records.extend(self.elr_after(image, &records));
            }
            Ok(records)
        })
        .await
    }

    /// The partition changes that bring every ELR in line with the min ISR
    /// and ELR feature `image` has once `changes` apply (a min.insync.replicas
    /// or feature change): a partition whose ISR reaches its new min ISR
    /// empties its ELR, and turning the feature off empties them all.
    fn elr_after(&self, image: &MetadataImage, changes: &[MetadataRecord]) -> Vec<MetadataRecord> {
        let mut next = image.clone();
        for record in changes {
            next.apply(image.offset, record);
        }
        align_partitions(
            &next,
            self.min_isr(&next),
            |b| usable_in(&next, b, &[]),
            None,
        )
    }

    /// An ISR change asked by the leader of a partition (Kafka's
    /// AlterPartition): refused unless it comes from the current leader and
    /// epoch, keeps the leader in the ISR, and adds only live replicas.
    pub async fn alter_isr(
        &self,
        topic_id: Uuid,
        partition: i32,
        leader: i32,
        leader_epoch: i32,
        isr: &[i32],
    ) -> ControllerResult<()> {
        self.run_fallible(|image| {
            let unknown = || {
                ControllerError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("partition {partition} of topic {topic_id} does not exist"),
                )
            };
            let topic = image.topic_by_id(&topic_id).ok_or_else(unknown)?;
            let p = topic.partitions.get(&partition).ok_or_else(unknown)?;
            if p.leader != leader || p.leader_epoch != leader_epoch {
                return Err(ControllerError::new(
                    ResponseError::FencedLeaderEpoch,
                    format!("broker {leader} at epoch {leader_epoch} no longer leads (leader {} epoch {})", p.leader, p.leader_epoch),
                ));
            }
            if !isr.contains(&leader) || isr.iter().any(|r| !p.replicas.contains(r)) {
                return Err(ControllerError::new(
                    ResponseError::InvalidRequest,
                    format!("ISR {isr:?} must hold the leader and replicas of {:?} only", p.replicas),
                ));
            }
            if let Some(r) = isr
                .iter()
                .find(|r| !p.isr.contains(r) && !usable_in(image, **r, &[]))
            {
                return Err(ControllerError::new(
                    ResponseError::IneligibleReplica,
                    format!("replica {r} is fenced or shutting down"),
                ));
            }
            if p.isr == isr {
                return Ok(Vec::new());
            }
            // Replicas leaving an ISR below min ISR join the ELR.
            Ok(PartitionChange::new(topic_id, partition, p, self.min_isr(image).of(topic, p))
                .isr(isr.to_vec())
                .build(|b| usable_in(image, b, &[]))
                .into_iter()
                .collect())
        }).await
    }

    /// ElectLeaders: elects `kind` leaders for `partitions` (every
    /// partition when None), each answered with its own outcome.
    pub async fn elect_leaders(
        &self,
        kind: ElectionType,
        partitions: Option<Vec<PartitionKey>>,
    ) -> Vec<(PartitionKey, ControllerResult<()>)> {
        let (mut results, error) = self
            .run(|image| {
                let wanted = partitions.clone().unwrap_or_else(|| {
                    image
                        .topics
                        .values()
                        .flat_map(|t| t.partitions.keys().map(|p| (t.name.clone(), *p)))
                        .collect()
                });
                let mut records = Vec::new();
                let results = wanted
                    .into_iter()
                    .map(|(topic, p)| {
                        let outcome = match image.topic_by_name(&topic) {
                            Some(t) if t.partitions.contains_key(&p) => {
                                elect(image, self.min_isr(image), t.id, p, kind)
                                    .map(|r| records.push(r))
                                    .map_err(|e| {
                                        let (code, message) = match e {
                                        NoElection::NotNeeded => (
                                            ResponseError::ElectionNotNeeded,
                                            "Leader election not needed for topic partition.",
                                        ),
                                        NoElection::PreferredUnavailable => (
                                            ResponseError::PreferredLeaderNotAvailable,
                                            "The preferred leader was not available.",
                                        ),
                                        NoElection::NoEligibleLeader => (
                                            ResponseError::EligibleLeadersNotAvailable,
                                            "Eligible topic partition leaders are not available.",
                                        ),
                                    };
                                        ControllerError::new(code, message)
                                    })
                            }
                            _ => Err(ControllerError::new(
                                ResponseError::UnknownTopicOrPartition,
                                format!("{topic}-{p} does not exist."),
                            )),
                        };
                        ((topic, p), outcome)
                    })
                    .collect::<Vec<_>>();
                (records, results)
            })
            .await;
        fail_all(&mut results, error);
        results
    }

    /// AlterPartitionReassignments: moves each partition to its target
    /// replicas (None cancels its ongoing reassignment). The move completes
    /// later, once the new replicas are in the ISR.
    pub async fn reassign_partitions(
        &self,
        moves: Vec<(PartitionKey, Option<Vec<i32>>)>,
    ) -> Vec<(PartitionKey, ControllerResult<()>)> {
        let (mut results, error) = self
            .run(|image| {
                let mut records = Vec::new();
                let results = moves
                    .iter()
                    .map(|((topic, p), target)| {
                        let partition = image
                            .topic_by_name(topic)
                            .and_then(|t| t.partitions.get(p).map(|part| (t.id, part)));
                        let outcome = match partition {
                            None => Err(ControllerError::new(
                                ResponseError::UnknownTopicOrPartition,
                                format!("{topic}-{p} does not exist."),
                            )),
                            Some((id, part)) => {
                                reassignment::plan(image, id, *p, part, target.as_deref())
                                    .map(|planned| records.extend(planned))
                                    .map_err(|e| match e {
                                        ReassignmentError::NoneInProgress => ControllerError::new(
                                            ResponseError::NoReassignmentInProgress,
                                            format!("No ongoing reassignment for {topic}-{p}."),
                                        ),
                                        ReassignmentError::InvalidTarget(m) => {
                                            ControllerError::new(
                                                ResponseError::InvalidReplicaAssignment,
                                                m,
                                            )
                                        }
                                    })
                            }
                        };
                        ((topic.clone(), *p), outcome)
                    })
                    .collect::<Vec<_>>();
                (records, results)
            })
            .await;
        fail_all(&mut results, error);
        results
    }

    /// Finalizes feature levels (UpdateFeatures; the broker checks them
    /// against what it supports).
    pub async fn set_feature_levels(&self, levels: Vec<(String, i16)>) -> ControllerResult<()> {
        let ((), error) = self
            .run(|image| {
                let mut records: Vec<MetadataRecord> = levels
                    .iter()
                    .filter(|(name, level)| image.features.get(name) != Some(level))
                    .map(|(name, level)| MetadataRecord::FeatureLevel {
                        name: name.clone(),
                        level: *level,
                    })
                    .collect();
                let elr_was = features::elr_enabled(image);
                let elr_will_be = levels
                    .iter()
                    .find(|(name, _)| name == features::ELR_VERSION)
                    .map_or(elr_was, |(_, level)| *level >= 1);
                if elr_will_be && !elr_was {
                    records.splice(0..0, self.elr_safety_records(image));
                }
                if elr_will_be != elr_was {
                    let changes = self.elr_after(image, &records);
                    records.extend(changes);
                }
                (records, ())
            })
            .await;
        error.map_or(Ok(()), Err)
    }

    /// Kafka's ELR safety records, written as the feature turns on: the
    /// cluster-level min.insync.replicas (this node's static value when
    /// none is set), and no per-broker one, which the controller cannot
    /// see when it decides which replicas are eligible.
    fn elr_safety_records(&self, image: &MetadataImage) -> Vec<MetadataRecord> {
        let config = |name: &str, value: Option<String>| MetadataRecord::Config {
            resource_type: CONFIG_RESOURCE_BROKER,
            resource_name: name.to_string(),
            name: MIN_INSYNC_REPLICAS.to_string(),
            value,
        };
        let mut records = Vec::new();
        let cluster_level = image
            .configs_of(CONFIG_RESOURCE_BROKER, "")
            .is_some_and(|c| c.contains_key(MIN_INSYNC_REPLICAS));
        if !cluster_level {
            records.push(config(
                "",
                Some(self.defaults.min_insync_replicas.to_string()),
            ));
        }
        for broker in image.config_resource_names(CONFIG_RESOURCE_BROKER) {
            let has_min_isr = image
                .configs_of(CONFIG_RESOURCE_BROKER, broker)
                .is_some_and(|c| c.contains_key(MIN_INSYNC_REPLICAS));
            if !broker.is_empty() && has_min_isr {
                records.push(config(broker, None));
            }
        }
        records
    }

    /// Commits `records` as they are, unvalidated: for tools and tests
    /// that set up a state the controller would not produce by itself.
    pub async fn commit_records(&self, records: Vec<MetadataRecord>) -> ControllerResult<()> {
        let ((), error) = self.run(|_| (records.clone(), ())).await;
        error.map_or(Ok(()), Err)
    }

    /// Reserves a block of producer ids for `broker_id`; returns its first id.
    pub async fn allocate_producer_ids(&self, broker_id: i32) -> ControllerResult<(i64, i64)> {
        let (start, error) = self
            .run(|image| {
                let start = image.next_producer_id;
                let record = MetadataRecord::ProducerIds {
                    broker_id,
                    next_producer_id: start + PRODUCER_ID_BLOCK,
                };
                (vec![record], start)
            })
            .await;
        error.map_or(Ok((start, PRODUCER_ID_BLOCK)), Err)
    }

    /// `run` for plans that either fail before writing anything or write.
    pub(crate) async fn run_fallible(
        &self,
        mut plan: impl FnMut(&MetadataImage) -> ControllerResult<Vec<MetadataRecord>> + Send,
    ) -> ControllerResult<()> {
        let (planned, error) = self
            .run(|image| match plan(image) {
                Ok(records) => (records, Ok(())),
                Err(e) => (Vec::new(), Err(e)),
            })
            .await;
        planned?;
        error.map_or(Ok(()), Err)
    }

    /// Stops the quorum (the metadata log is fsynced on every append, so
    /// there is nothing to flush).
    pub async fn close(&self) {
        let me = self.me.upgrade().expect("controller alive");
        self.on_runtime(async move { me.quorum.stop().await }).await;
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        // Dropping a runtime blocks; callers may be async.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Kafka's cap on the metadata records one request may write (its
/// controller's `MAX_RECORDS_PER_USER_OP`). Checked before any partition is
/// placed, so a hostile partition count cannot exhaust the controller's
/// memory; an operator creates more partitions in steps, as with Kafka.
pub const MAX_RECORDS_PER_USER_OP: u64 = 10_000;

/// Kafka's answer to a request over [`MAX_RECORDS_PER_USER_OP`].
fn excessively_large() -> ControllerError {
    ControllerError::new(
        ResponseError::PolicyViolation,
        "Unable to perform excessively large batch operation.",
    )
}

/// Marks every successful result as failed by `error` (the commit failed).
fn fail_all<K, T>(results: &mut [(K, ControllerResult<T>)], error: Option<ControllerError>) {
    if let Some(e) = error {
        for (_, r) in results.iter_mut().filter(|(_, r)| r.is_ok()) {
            *r = Err(e.clone());
        }
    }
}

fn partition_record(topic_id: Uuid, partition: i32, replicas: Vec<i32>) -> MetadataRecord {
    MetadataRecord::Partition {
        topic_id,
        partition,
        leader: replicas[0],
        isr: replicas.clone(),
        replicas,
        leader_epoch: 0,
        partition_epoch: 0,
        elr: Vec::new(),
        last_known_elr: Vec::new(),
    }
}

/// Kafka's rules for min.insync.replicas while the ELR is on: the
/// controller decides eligibility from the topic and cluster-level values,
/// so no broker may have its own, and the cluster-level one stays.
fn check_elr_min_isr_change(
    image: &MetadataImage,
    resource_type: i8,
    resource_name: &str,
    current: &BTreeMap<String, String>,
    next: &BTreeMap<String, String>,
) -> ControllerResult<()> {
    let (before, after) = (
        current.get(MIN_INSYNC_REPLICAS),
        next.get(MIN_INSYNC_REPLICAS),
    );
    if resource_type != CONFIG_RESOURCE_BROKER || before == after || !features::elr_enabled(image) {
        return Ok(());
    }
    let invalid = |m: &str| Err(ControllerError::new(ResponseError::InvalidConfig, m));
    if !resource_name.is_empty() {
        return invalid("Broker-level min.insync.replicas cannot be altered while ELR is enabled.");
    }
    if after.is_none() {
        return invalid(
            "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
        );
    }
    Ok(())
}

/// Round-robin placement with a per-topic starting offset, so leaders spread
/// across brokers (Kafka's rack-unaware assignment, simplified).
fn place_replicas(
    brokers: &[i32],
    partitions: i32,
    rf: usize,
    salt: usize,
) -> BTreeMap<i32, Vec<i32>> {
    let n = brokers.len().max(1);
    (0..partitions)
        .map(|p| {
            let first = (p as usize + salt) % n;
            let replicas = (0..rf).map(|r| brokers[(first + r) % n]).collect();
            (p, replicas)
        })
        .collect()
}

fn validate_assignment(
    partition: i32,
    replicas: &[i32],
    image: &MetadataImage,
) -> ControllerResult<()> {
    if replicas.is_empty() {
        return Err(ControllerError::new(
            ResponseError::InvalidReplicaAssignment,
            format!("Empty replica list for partition {partition}."),
        ));
    }
    let mut seen = replicas.to_vec();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() != replicas.len() {
        return Err(ControllerError::new(
            ResponseError::InvalidReplicaAssignment,
            format!("Duplicate brokers in the assignment of partition {partition}."),
        ));
    }
    if let Some(b) = replicas.iter().find(|b| !image.brokers.contains_key(b)) {
        return Err(ControllerError::new(
            ResponseError::InvalidReplicaAssignment,
            format!("Broker {b} in the assignment of partition {partition} is not registered."),
        ));
    }
    Ok(())
}

/// Kafka's topic name rules.
pub fn validate_topic_name(name: &str) -> ControllerResult<()> {
    let invalid = |m: String| {
        Err(ControllerError::new(
            ResponseError::InvalidTopicException,
            m,
        ))
    };
    if name.is_empty() {
        return invalid("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return invalid("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return invalid(format!("Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LEN} characters, topic name: {name}"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return invalid(format!("Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"));
    }
    Ok(())
}

pub fn is_internal(name: &str) -> bool {
    name.starts_with("__")
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use super::*;
    use crate::records::Endpoint;
    use crate::service::Heartbeat;

    fn open(dir: &Path) -> Arc<Controller> {
        Controller::start(ControllerSettings {
            node_id: 1,
            dir: dir.to_path_buf(),
            voter: true,
            voters: QuorumVoters::Static(BTreeMap::from([(
                1,
                crate::raft::Node {
                    host: "127.0.0.1".into(),
                    port: 1,
                },
            )])),
            quorum: QuorumConfig::default(),
            defaults: TopicDefaults {
                num_partitions: 1,
                replication_factor: 1,
                min_insync_replicas: 1,
            },
            session_timeout: Duration::from_secs(9),
            leader_rebalance_interval: None,
        })
        .unwrap()
    }

    /// A single-node controller with broker 1 registered and unfenced.
    pub(crate) fn controller(dir: &Path) -> Arc<Controller> {
        let c = open(dir);
        let incarnation = Uuid::new_v4();
        c.block_on(c.register_broker(
            MetadataRecord::RegisterBroker {
                broker_id: 1,
                incarnation_id: incarnation,
                endpoints: vec![Endpoint {
                    listener: "PLAINTEXT".into(),
                    host: "localhost".into(),
                    port: 9092,
                    security_protocol: "PLAINTEXT".into(),
                }],
                rack: None,
            },
            None,
        ))
        .unwrap();
        assert!(c.image().brokers[&1].fenced, "brokers register fenced");
        let heartbeat = Heartbeat {
            broker_id: 1,
            incarnation: incarnation.as_u128(),
            want_shutdown: false,
        };
        let reply = c.block_on(c.heartbeat(heartbeat)).unwrap();
        assert!(!reply.fenced && !reply.unknown);
        assert!(!c.image().brokers[&1].fenced, "a heartbeat unfences");
        c
    }

    fn topic(name: &str, partitions: i32) -> NewTopic {
        NewTopic {
            name: name.into(),
            num_partitions: partitions,
            replication_factor: -1,
            ..Default::default()
        }
    }

    #[test]
    fn topics_are_created_validated_and_survive_restart() {
        let dir = tempfile::tempdir().unwrap();
        let c = controller(dir.path());
        let r = c.block_on(c.create_topics(
            vec![topic("orders", 3), topic("bad name", 1), topic("orders", 1)],
            false,
        ));
        assert!(r[0].1.is_ok());
        assert_eq!(
            r[1].1.as_ref().unwrap_err().code,
            ResponseError::InvalidTopicException.code()
        );
        assert_eq!(
            r[2].1.as_ref().unwrap_err().code,
            ResponseError::TopicAlreadyExists.code()
        );
        let rf3 = NewTopic {
            replication_factor: 3,
            ..topic("x", 1)
        };
        assert_eq!(
            c.block_on(c.create_topics(vec![rf3], false))[0]
                .1
                .as_ref()
                .unwrap_err()
                .code,
            ResponseError::InvalidReplicationFactor.code()
        );
        // Kafka's 10,000 records per request: two topic records and 9,998
        // partitions pass; one partition more, or a hostile count, is
        // refused whole, before anything is placed.
        let policy = ResponseError::PolicyViolation.code();
        let r =
            c.block_on(c.create_topics(vec![topic("big", 5_000), topic("bigger", 4_998)], true));
        assert!(r.iter().all(|(_, r)| r.is_ok()), "{r:?}");
        for request in [
            vec![topic("big", 5_000), topic("bigger", 5_000)],
            vec![topic("hostile", i32::MAX)],
        ] {
            let r = c.block_on(c.create_topics(request, false));
            assert!(r
                .iter()
                .all(|(_, r)| r.as_ref().unwrap_err().code == policy));
        }
        assert!(c.image().topic_by_name("big").is_none());
        let added = c.block_on(c.create_partitions("orders", i32::MAX, None, false));
        assert_eq!(added.unwrap_err().code, policy);
        let v = c.block_on(c.create_topics(vec![topic("dry", 1)], true));
        assert!(v[0].1.is_ok());
        assert!(c.image().topic_by_name("dry").is_none());
        c.block_on(c.alter_configs(
            CONFIG_RESOURCE_TOPIC,
            "orders",
            &[("retention.ms".into(), AlterOp::Set, Some("1000".into()))],
            false,
            false,
        ))
        .unwrap();
        assert!(c
            .block_on(c.alter_configs(
                CONFIG_RESOURCE_TOPIC,
                "orders",
                &[("retention.ms".into(), AlterOp::Set, Some("x".into()))],
                false,
                false
            ))
            .is_err());
        c.block_on(c.create_partitions("orders", 5, None, false))
            .unwrap();
        assert_eq!(
            c.block_on(c.create_partitions("orders", 2, None, false))
                .unwrap_err()
                .code,
            ResponseError::InvalidPartitions.code()
        );
        let (first, n) = c.block_on(c.allocate_producer_ids(1)).unwrap();
        assert_eq!((first, n), (0, PRODUCER_ID_BLOCK));
        let id = c.image().topic_by_name("orders").unwrap().id;
        c.block_on(c.close());
        drop(c);
        let c = open(dir.path());
        let img = c.image();
        let t = img.topic_by_name("orders").unwrap();
        assert_eq!(t.id, id);
        assert_eq!(t.partitions.len(), 5);
        assert_eq!(
            img.configs_of(CONFIG_RESOURCE_TOPIC, "orders").unwrap()["retention.ms"],
            "1000"
        );
        assert_eq!(
            c.block_on(c.allocate_producer_ids(1)).unwrap().0,
            PRODUCER_ID_BLOCK
        );
        let d = c.block_on(c.delete_topics(&["orders".into(), "nope".into()]));
        assert!(d[0].1.is_ok());
        assert!(d[1].1.is_err());
        assert!(c.image().topic_by_name("orders").is_none());
        assert!(c
            .image()
            .configs_of(CONFIG_RESOURCE_TOPIC, "orders")
            .is_none());
    }

    #[test]
    fn min_isr_and_feature_changes_rewrite_the_elr_as_kafka_does() {
        let dir = tempfile::tempdir().unwrap();
        let c = controller(dir.path());
        let id = Uuid::from_u128(5);
        let configs = |c: &Controller, kind, name: &str| -> Option<String> {
            c.image()
                .configs_of(kind, name)
                .and_then(|m| m.get(MIN_INSYNC_REPLICAS).cloned())
        };
        let elr = |c: &Controller| {
            let p = c.image().topics[&id].partitions[&0].clone();
            (p.elr, p.last_known_elr)
        };
        let set = |c: &Controller, kind, name: &str, value: Option<&str>| {
            let op = if value.is_some() {
                AlterOp::Set
            } else {
                AlterOp::Delete
            };
            let change = [(MIN_INSYNC_REPLICAS.to_string(), op, value.map(String::from))];
            c.block_on(c.alter_configs(kind, name, &change, false, false))
        };
        let elr_level = |c: &Controller, level| {
            c.block_on(c.set_feature_levels(vec![(features::ELR_VERSION.into(), level)]))
                .unwrap()
        };
        c.block_on(c.commit_records(vec![
            MetadataRecord::Topic {
                name: "t".into(),
                topic_id: id,
            },
            MetadataRecord::Config {
                resource_type: CONFIG_RESOURCE_TOPIC,
                resource_name: "t".into(),
                name: MIN_INSYNC_REPLICAS.into(),
                value: Some("3".into()),
            },
            MetadataRecord::Partition {
                topic_id: id,
                partition: 0,
                replicas: vec![1, 2, 3],
                isr: vec![1],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                elr: vec![2, 3],
                last_known_elr: Vec::new(),
            },
        ]))
        .unwrap();
        // min ISR 3 -> 2: the ISR of one is still below it.
        set(&c, CONFIG_RESOURCE_TOPIC, "t", Some("2")).unwrap();
        assert_eq!(elr(&c).0, [2, 3]);
        // -> 1: the ISR reaches it, the ELR empties.
        set(&c, CONFIG_RESOURCE_TOPIC, "t", Some("1")).unwrap();
        assert_eq!(elr(&c).0, Vec::<i32>::new());
        // No broker of its own while the ELR is on.
        let refused = set(&c, CONFIG_RESOURCE_BROKER, "1", Some("2")).unwrap_err();
        assert_eq!(refused.code, ResponseError::InvalidConfig.code());
        assert!(
            refused.message.contains("Broker-level"),
            "{}",
            refused.message
        );
        // The feature off clears every ELR.
        c.block_on(c.commit_records(vec![MetadataRecord::PartitionChange {
            topic_id: id,
            partition: 0,
            leader: None,
            isr: None,
            replicas: None,
            elr: Some(vec![3]),
            last_known_elr: Some(vec![2]),
        }]))
        .unwrap();
        elr_level(&c, 0);
        assert_eq!(elr(&c), (Vec::new(), Vec::new()));
        set(&c, CONFIG_RESOURCE_BROKER, "1", Some("2")).unwrap();
        assert_eq!(configs(&c, CONFIG_RESOURCE_BROKER, ""), None);
        // On again: the safety records, a cluster-level value and no
        // broker-level one; which the cluster then keeps.
        elr_level(&c, 1);
        assert_eq!(configs(&c, CONFIG_RESOURCE_BROKER, "1"), None);
        assert_eq!(
            configs(&c, CONFIG_RESOURCE_BROKER, "").as_deref(),
            Some("1")
        );
        let refused = set(&c, CONFIG_RESOURCE_BROKER, "", None).unwrap_err();
        assert!(
            refused.message.contains("Cluster-level"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn topic_names_follow_kafka_rules() {
        assert!(validate_topic_name("a.b_c-1").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
        assert!(validate_topic_name("héllo").is_err());
    }
}
