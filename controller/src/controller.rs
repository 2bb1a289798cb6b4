//! The controller: validates metadata changes, turns them into records,
//! commits them to the metadata log and publishes the new image.
//!
//! The metadata log is a Kafka-format partition log (`__cluster_metadata-0`)
//! from the storage crate, as KRaft keeps its own; each commit is one record
//! batch, fsynced before the change is acknowledged. This single-voter
//! controller is the seam where the openraft quorum plugs in: `commit` is the
//! only place records are made durable.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use ottla_protocol::batch::{BatchBuilder, BatchIter, SimpleRecord};
use ottla_protocol::records::{records_section, walk_records};
use ottla_storage::config::{validate_topic_config, LogConfig};
use ottla_storage::log::{FetchIsolation, LogOpenOptions, PartitionLog};
use ottla_storage::producer_state::AppendOrigin;
use parking_lot::Mutex;
use tokio::sync::watch;
use tracing::info;
use uuid::Uuid;

use crate::image::MetadataImage;
use crate::records::{MetadataRecord, CONFIG_RESOURCE_TOPIC};

/// Producer ids handed to a broker per ProducerIds record.
pub const PRODUCER_ID_BLOCK: i64 = 1000;
/// Kafka's limit on topic name length.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

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

fn storage_error(e: ottla_storage::StorageError) -> ControllerError {
    ControllerError::new(
        ResponseError::KafkaStorageError,
        format!("metadata log write failed: {e}"),
    )
}

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

pub struct Controller {
    node_id: i32,
    log: Mutex<PartitionLog>,
    image: watch::Sender<Arc<MetadataImage>>,
    defaults: TopicDefaults,
    /// Serializes read-validate-commit operations so each one validates
    /// against the image the previous one produced.
    serial: Mutex<()>,
}

impl Controller {
    /// Opens the metadata log in `dir` and replays it into an image.
    pub fn open(dir: &Path, node_id: i32, defaults: TopicDefaults) -> ottla_storage::Result<Self> {
        let config = LogConfig {
            segment_bytes: 64 << 20,
            retention_ms: -1,
            flush_messages: 1,
            message_timestamp_after_max_ms: i64::MAX,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(dir, config, LogOpenOptions::default())?;
        let mut image = MetadataImage::empty();
        replay(&log, &mut image)?;
        info!(
            records_offset = image.offset,
            topics = image.topics.len(),
            "metadata image loaded"
        );
        let (tx, _) = watch::channel(Arc::new(image));
        Ok(Self {
            node_id,
            log: Mutex::new(log),
            image: tx,
            defaults,
            serial: Mutex::new(()),
        })
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// Metadata listeners (replica manager, coordinators, mirror manager).
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.image.subscribe()
    }

    /// Makes `records` durable as one batch, applies them and publishes the
    /// new image. All or nothing.
    pub fn commit(&self, records: Vec<MetadataRecord>) -> ControllerResult<Arc<MetadataImage>> {
        if records.is_empty() {
            return Ok(self.image());
        }
        let mut log = self.log.lock();
        let now = now_ms();
        let encoded: Vec<SimpleRecord> = records
            .iter()
            .map(|r| SimpleRecord {
                timestamp: now,
                key: None,
                value: Some(r.encode()),
                headers: Vec::new(),
            })
            .collect();
        let mut batch = BatchBuilder::default().build(&encoded);
        let info = log
            .append_as_leader(&mut batch, 0, AppendOrigin::Coordinator, now)
            .map_err(storage_error)?;
        log.flush().map_err(storage_error)?;
        let end = log.log_end_offset();
        log.set_high_watermark(end);
        let mut image = (*self.image()).clone();
        for (i, r) in records.iter().enumerate() {
            image.apply(info.first_offset + i as i64, r);
        }
        let image = Arc::new(image);
        self.image.send_replace(image.clone());
        Ok(image)
    }

    /// Registers (or re-registers) a broker and its endpoints.
    pub fn register_broker(&self, record: MetadataRecord) -> ControllerResult<()> {
        self.commit(vec![record]).map(|_| ())
    }

    /// Validates and creates topics. With `validate_only`, nothing is
    /// written. Returns, per topic, its id and partition count, or an error.
    pub fn create_topics(
        &self,
        topics: Vec<NewTopic>,
        validate_only: bool,
    ) -> Vec<(String, ControllerResult<CreatedTopic>)> {
        let _serial = self.serial.lock();
        let image = self.image();
        let mut results = Vec::new();
        let mut records = Vec::new();
        let mut taken: Vec<String> = Vec::new();
        for topic in topics {
            let name = topic.name.clone();
            let r = self
                .plan_topic(&image, &taken, topic)
                .map(|(recs, created)| {
                    taken.push(name.clone());
                    if !validate_only {
                        records.extend(recs);
                    }
                    created
                });
            results.push((name, r));
        }
        if let Err(e) = self.commit(records) {
            for (_, r) in results.iter_mut() {
                if r.is_ok() {
                    *r = Err(e.clone());
                }
            }
        }
        results
    }

    fn plan_topic(
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
    pub fn delete_topics(&self, names: &[String]) -> Vec<(String, ControllerResult<Uuid>)> {
        let _serial = self.serial.lock();
        let image = self.image();
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
        self.finish(records, results)
    }

    /// Adds partitions to a topic (CreatePartitions).
    pub fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> ControllerResult<()> {
        let _serial = self.serial.lock();
        let image = self.image();
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
        let rf = t.partitions.values().next().map_or(1, |p| p.replicas.len());
        let brokers: Vec<i32> = image.live_brokers().map(|b| b.id).collect();
        let new: Vec<Vec<i32>> = match assignments {
            Some(a) => {
                if a.len() as i32 != count - current {
                    return Err(ControllerError::new(
                        ResponseError::InvalidReplicaAssignment,
                        format!("Increasing the number of partitions by {} but {} assignments provided.", count - current, a.len()),
                    ));
                }
                for (i, replicas) in a.iter().enumerate() {
                    validate_assignment(current + i as i32, replicas, &image)?;
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
            return Ok(());
        }
        let records = new
            .into_iter()
            .enumerate()
            .map(|(i, replicas)| partition_record(t.id, current + i as i32, replicas))
            .collect();
        self.commit(records).map(|_| ())
    }

    /// Applies config changes to one resource. Topic keys are validated here;
    /// broker keys must be validated by the caller (the broker owns them).
    pub fn alter_configs(
        &self,
        resource_type: i8,
        resource_name: &str,
        changes: &[(String, AlterOp, Option<String>)],
        replace_all: bool,
        validate_only: bool,
    ) -> ControllerResult<()> {
        let _serial = self.serial.lock();
        let image = self.image();
        if resource_type == CONFIG_RESOURCE_TOPIC && image.topic_by_name(resource_name).is_none() {
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
            BTreeMap::new()
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
                    let is_list = ottla_storage::config::topic_config_key(key)
                        .is_some_and(|k| k.config_type == ottla_storage::config::ConfigType::List);
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
            for (k, v) in &next {
                validate_topic_config(k, v)
                    .map_err(|m| ControllerError::new(ResponseError::InvalidConfig, m))?;
            }
        }
        if validate_only {
            return Ok(());
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
        self.commit(records).map(|_| ())
    }

    /// Reserves a block of producer ids for `broker_id`; returns its first id.
    pub fn allocate_producer_ids(&self, broker_id: i32) -> ControllerResult<(i64, i64)> {
        let _serial = self.serial.lock();
        let start = self.image().next_producer_id;
        self.commit(vec![MetadataRecord::ProducerIds {
            broker_id,
            next_producer_id: start + PRODUCER_ID_BLOCK,
        }])?;
        Ok((start, PRODUCER_ID_BLOCK))
    }

    fn finish<T>(
        &self,
        records: Vec<MetadataRecord>,
        mut results: Vec<(String, ControllerResult<T>)>,
    ) -> Vec<(String, ControllerResult<T>)> {
        if let Err(e) = self.commit(records) {
            for (_, r) in results.iter_mut() {
                if r.is_ok() {
                    *r = Err(e.clone());
                }
            }
        }
        results
    }

    /// Flushes the metadata log (clean shutdown).
    pub fn close(&self) -> ottla_storage::Result<()> {
        self.log.lock().close()
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
    }
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

fn replay(log: &PartitionLog, image: &mut MetadataImage) -> ottla_storage::Result<()> {
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let Some(slice) = log
            .read(offset, 1 << 20, FetchIsolation::LogEnd, true)?
            .slice
        else {
            break;
        };
        let bytes = slice.read()?;
        for batch in BatchIter::new(&bytes) {
            let batch = batch?;
            let section = records_section(&batch)?;
            let mut failure = None;
            walk_records(&section, |r| {
                if failure.is_some() {
                    return;
                }
                let at = batch.base_offset() + r.offset_delta as i64;
                match r.value.map(MetadataRecord::decode) {
                    Some(Ok(record)) => image.apply(at, &record),
                    Some(Err(e)) => {
                        failure = Some(ottla_storage::StorageError::corrupt_file(
                            log.dir(),
                            format!("metadata record at offset {at}: {e}"),
                        ))
                    }
                    None => {}
                }
            })?;
            if let Some(e) = failure {
                return Err(e);
            }
            offset = batch.next_offset();
        }
    }
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Endpoint;

    fn controller(dir: &Path) -> Controller {
        let c = Controller::open(
            dir,
            1,
            TopicDefaults {
                num_partitions: 1,
                replication_factor: 1,
            },
        )
        .unwrap();
        c.register_broker(MetadataRecord::RegisterBroker {
            broker_id: 1,
            incarnation_id: Uuid::new_v4(),
            endpoints: vec![Endpoint {
                listener: "PLAINTEXT".into(),
                host: "localhost".into(),
                port: 9092,
                security_protocol: "PLAINTEXT".into(),
            }],
            rack: None,
        })
        .unwrap();
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
        let r = c.create_topics(
            vec![topic("orders", 3), topic("bad name", 1), topic("orders", 1)],
            false,
        );
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
            c.create_topics(vec![rf3], false)[0]
                .1
                .as_ref()
                .unwrap_err()
                .code,
            ResponseError::InvalidReplicationFactor.code()
        );
        let v = c.create_topics(vec![topic("dry", 1)], true);
        assert!(v[0].1.is_ok());
        assert!(c.image().topic_by_name("dry").is_none());
        c.alter_configs(
            CONFIG_RESOURCE_TOPIC,
            "orders",
            &[("retention.ms".into(), AlterOp::Set, Some("1000".into()))],
            false,
            false,
        )
        .unwrap();
        assert!(c
            .alter_configs(
                CONFIG_RESOURCE_TOPIC,
                "orders",
                &[("retention.ms".into(), AlterOp::Set, Some("x".into()))],
                false,
                false
            )
            .is_err());
        c.create_partitions("orders", 5, None, false).unwrap();
        assert_eq!(
            c.create_partitions("orders", 2, None, false)
                .unwrap_err()
                .code,
            ResponseError::InvalidPartitions.code()
        );
        let (first, n) = c.allocate_producer_ids(1).unwrap();
        assert_eq!((first, n), (0, PRODUCER_ID_BLOCK));
        let id = c.image().topic_by_name("orders").unwrap().id;
        c.close().unwrap();
        drop(c);
        let c = Controller::open(
            dir.path(),
            1,
            TopicDefaults {
                num_partitions: 1,
                replication_factor: 1,
            },
        )
        .unwrap();
        let img = c.image();
        let t = img.topic_by_name("orders").unwrap();
        assert_eq!(t.id, id);
        assert_eq!(t.partitions.len(), 5);
        assert_eq!(
            img.configs_of(CONFIG_RESOURCE_TOPIC, "orders").unwrap()["retention.ms"],
            "1000"
        );
        assert_eq!(c.allocate_producer_ids(1).unwrap().0, PRODUCER_ID_BLOCK);
        let d = c.delete_topics(&["orders".into(), "nope".into()]);
        assert!(d[0].1.is_ok());
        assert!(d[1].1.is_err());
        assert!(c.image().topic_by_name("orders").is_none());
        assert!(c
            .image()
            .configs_of(CONFIG_RESOURCE_TOPIC, "orders")
            .is_none());
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
