//! Writes share groups' dead letters (KIP-1191). Records a group with a
//! dead-letter queue rejects, or delivers as often as it allows, are
//! archiving in their share partition (persisted so, so that a new leader
//! writes them again); the lock tick hands the share partitions holding
//! them to a round here, which reads the records, writes one dead letter
//! per offset to the group's queue topic (acks=all, one Produce per leader
//! broker and round), then archives them and persists that. As in Kafka,
//! the records are archived once the write is over, whether it worked or
//! not (a queue that is misconfigured or gone loses nothing else).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::controller::NewTopic;
use ottla_controller::MetadataImage;
use ottla_group_coordinator::ShareGroupSettings;
use ottla_protocol::batch::{BatchView, SimpleRecord};
use ottla_share::dead_letter::{self, QueueTopic, Source};
use ottla_share::registry::Entry;
use ottla_share::{DeadLetters, SharePartitionKey};
use ottla_storage::log::FetchIsolation;
use ottla_storage::manager::TopicPartition;
use ottla_storage::producer_state::AppendOrigin;
use tracing::{debug, warn};

use super::partitions::led_partition;
use super::state_key;
use crate::apis::share_group::settings;
use crate::apis::share_persister as persister;
use crate::blocking::blocking;
use crate::broker::Broker;
use crate::replica::{now_ms, ReadSpec};

/// How long a round keeps trying a queue partition whose leader moves or
/// is not there yet (a topic it just created, a leader election).
const WRITE_FOR: Duration = Duration::from_secs(10);
/// How long a leader waits for its followers to have a dead-letter batch.
const REPLICATION_TIMEOUT: Duration = Duration::from_secs(30);
/// The Produce version sent to other brokers' queue partitions.
const PRODUCE_VERSION: i16 = 9;
/// A source read for copies takes at most this much past its first offset.
const COPY_READ_BYTES: usize = 8 << 20;

/// The topic config that lets a topic be a share group's queue.
pub const GROUP_ENABLE_CONFIG: &str = "errors.deadletterqueue.group.enable";

/// Starts a round for the share partitions holding dead letters, if any
/// do (called from the lock tick, on the blocking pool).
pub(super) fn start_round(broker: &Arc<Broker>) {
    if !broker.share_partitions.has_dead_letters() {
        return;
    }
    let keys = broker.share_partitions.take_dead_letters();
    let broker = broker.clone();
    tokio::runtime::Handle::current().spawn(async move { round(&broker, keys).await });
}

/// One share partition's dead letters taken in a round.
struct Taken {
    entry: Arc<Entry>,
    letters: Vec<DeadLetters>,
}

/// What a round writes: dead letters by queue topic, by source partition.
#[derive(Default)]
struct Plan {
    taken: Vec<Taken>,
    writes: BTreeMap<String, BTreeMap<i32, Vec<SimpleRecord>>>,
    /// Queue topics to create first (`errors.deadletterqueue.auto.create.topics.enable`).
    create: BTreeSet<String>,
    /// Dead letters archived without a write: their group's queue was
    /// unset meanwhile, or cannot be written.
    unwritten: u64,
}

async fn round(broker: &Arc<Broker>, keys: Vec<SharePartitionKey>) {
    let planned = blocking(broker, move |b| plan(b, keys)).await;
    let Ok(plan) = planned else {
        return;
    };
    for topic in &plan.create {
        create_queue(broker, topic).await;
    }
    let mut unwritten = plan.unwritten;
    let mut written = 0;
    for (topic, by_source) in plan.writes {
        let total: u64 = by_source.values().map(|r| r.len() as u64).sum();
        let (done, outcome) = write_queue(broker, &topic, by_source).await;
        written += done;
        unwritten += total - done;
        if let Err(why) = outcome {
            warn!(topic, error = %why, "dead letters not written to the share group's dead-letter queue; the records are archived");
        }
    }
    broker
        .share_partitions
        .count_dead_letters(written, unwritten);
    archive(broker, plan.taken).await;
}

/// Takes each share partition's dead letters and builds their records
/// (reading the source records to copy from the log: blocking I/O).
fn plan(broker: &Broker, keys: Vec<SharePartitionKey>) -> Plan {
    let image = broker.controller.image();
    let now = now_ms();
    let mut plan = Plan::default();
    let mut groups: BTreeMap<String, ShareGroupSettings> = BTreeMap::new();
    for key in keys {
        let Some(entry) = broker.share_partitions.get(&key) else {
            continue;
        };
        let letters = entry.state.lock().take_dead_letters();
        if letters.is_empty() {
            continue;
        }
        let settings = groups
            .entry(key.group.clone())
            .or_insert_with(|| settings(broker, &image, &key.group));
        match queue_of(broker, &image, &key.group, settings) {
            Ok(Some((queue, exists))) => {
                let records = letter_records(broker, &image, &key, settings, &letters, now);
                if !exists {
                    plan.create.insert(queue.clone());
                }
                plan.writes
                    .entry(queue)
                    .or_default()
                    .entry(key.partition)
                    .or_default()
                    .extend(records);
            }
            // The group's queue was unset meanwhile: archived as they are.
            Ok(None) => plan.unwritten += offsets(&letters),
            Err(why) => {
                plan.unwritten += offsets(&letters);
                ottla_coordinator_common::log_limited!(
                    tracing::Level::WARN,
                    key: &key.group,
                    group = key.group,
                    error = %why,
                    "share group's dead-letter queue cannot be written; rejected and undeliverable records are archived without it"
                );
            }
        }
        plan.taken.push(Taken { entry, letters });
    }
    plan
}

fn offsets(letters: &[DeadLetters]) -> u64 {
    letters.iter().map(|l| (l.last - l.first + 1) as u64).sum()
}

/// The group's queue topic and whether it exists, if the group has one
/// that may be written; why not, in Kafka's words, if it has one that may
/// not.
fn queue_of(
    broker: &Broker,
    image: &MetadataImage,
    group: &str,
    settings: &ShareGroupSettings,
) -> Result<Option<(String, bool)>, String> {
    let Some(name) = &settings.dead_letter_topic else {
        return Ok(None);
    };
    let exists = image.topic_by_name(name).is_some();
    let topic = QueueTopic {
        name,
        exists,
        group_enabled: image
            .topic_config(name, GROUP_ENABLE_CONFIG)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
    };
    let (prefix, auto_create) = queue_rules(broker);
    dead_letter::check_queue(group, &topic, &prefix, auto_create)?;
    Ok(Some((name.clone(), exists)))
}

/// The broker's `errors.deadletterqueue.topic.name.prefix` and
/// `errors.deadletterqueue.auto.create.topics.enable`.
fn queue_rules(broker: &Broker) -> (String, bool) {
    let configs = &broker.settings.static_configs;
    let prefix = configs
        .get("errors.deadletterqueue.topic.name.prefix")
        .cloned()
        .unwrap_or_else(|| "dlq.".to_string());
    let auto_create = configs
        .get("errors.deadletterqueue.auto.create.topics.enable")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    (prefix, auto_create)
}

/// The dead-letter records of one share partition's `letters`.
fn letter_records(
    broker: &Broker,
    image: &MetadataImage,
    key: &SharePartitionKey,
    settings: &ShareGroupSettings,
    letters: &[DeadLetters],
    now: i64,
) -> Vec<SimpleRecord> {
    let topic = image
        .topic_by_id(&key.topic_id)
        .map_or_else(|| key.topic_id.to_string(), |t| t.name.clone());
    let source = Source {
        topic: &topic,
        partition: key.partition,
        group: &key.group,
    };
    let mut out = Vec::new();
    for l in letters {
        let copied = if settings.copy_dead_letter_records {
            source_records(broker, image, key, l)
        } else {
            BTreeMap::new()
        };
        let cause = dead_letter::cause(l.delivery_count, settings.delivery_count_limit);
        out.extend(dead_letter::dead_letter_records(
            &source, l, cause, &copied, now,
        ));
    }
    out
}

/// The keys and values of the source records `letters` covers, as far as
/// the log still has them.
fn source_records(
    broker: &Broker,
    image: &MetadataImage,
    key: &SharePartitionKey,
    letters: &DeadLetters,
) -> BTreeMap<i64, dead_letter::KeyValue> {
    let Ok(partition) = led_partition(broker, image, (key.topic_id, key.partition)) else {
        return BTreeMap::new();
    };
    let mut out = BTreeMap::new();
    let mut offset = letters.first;
    while offset <= letters.last {
        let spec = ReadSpec {
            offset,
            max_bytes: COPY_READ_BYTES,
            isolation: FetchIsolation::HighWatermark,
            current_leader_epoch: -1,
            leader_only: true,
            min_one_batch: true,
        };
        let outcome = broker
            .replicas
            .fetch(&partition.tp, Some(&partition), None, -1, &spec);
        let Some(Ok(records)) = outcome.records.map(|s| s.read()) else {
            break;
        };
        let Some(next) = ottla_protocol::batch::BatchIter::new(&records)
            .map_while(Result::ok)
            .last()
            .map(|b| b.last_offset() + 1)
        else {
            break;
        };
        out.extend(dead_letter::copied_records(&records, offset, letters.last));
        offset = next.max(offset + 1);
    }
    out
}

/// Creates queue topic `name` with the broker's defaults, as Kafka does:
/// open to share groups, CreateTime stamped. A failure (a concurrent
/// create) shows when it is written.
async fn create_queue(broker: &Broker, name: &str) {
    let topic = NewTopic {
        name: name.to_string(),
        num_partitions: -1,
        replication_factor: -1,
        configs: BTreeMap::from([
            (GROUP_ENABLE_CONFIG.to_string(), Some("true".to_string())),
            (
                "message.timestamp.type".to_string(),
                Some("CreateTime".to_string()),
            ),
        ]),
        ..NewTopic::default()
    };
    for (name, outcome) in broker.controller.create_topics(vec![topic], false).await {
        match outcome {
            Ok(_) => debug!(topic = name, "share group dead-letter queue created"),
            Err(e) => debug!(topic = name, error = ?e, "share group dead-letter queue not created"),
        }
    }
}

/// Writes dead letters to queue topic `topic`: each source partition's to
/// queue partition `source % partitions`, in batches within the topic's
/// `max.message.bytes`, each batch acks=all on its leader. How many were
/// written, and whether all were.
async fn write_queue(
    broker: &Arc<Broker>,
    topic: &str,
    by_source: BTreeMap<i32, Vec<SimpleRecord>>,
) -> (u64, Result<(), String>) {
    let deadline = tokio::time::Instant::now() + WRITE_FOR;
    let image = loop {
        let image = broker.controller.image();
        let ready = image
            .topic_by_name(topic)
            .is_some_and(|t| t.partitions.values().all(|p| p.leader >= 0));
        if ready {
            break image;
        }
        if tokio::time::Instant::now() >= deadline {
            return (
                0,
                Err("the topic does not exist or has no leaders".to_string()),
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let partitions = image.topic_by_name(topic).map_or(1, |t| t.partitions.len()) as i32;
    let max_bytes = image
        .topic_config(topic, "max.message.bytes")
        .or_else(|| {
            broker
                .settings
                .static_configs
                .get("message.max.bytes")
                .map(String::as_str)
        })
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(1_048_588);
    let mut by_queue: BTreeMap<i32, Vec<SimpleRecord>> = BTreeMap::new();
    for (source, records) in by_source {
        by_queue
            .entry(dead_letter::queue_partition(source, partitions))
            .or_default()
            .extend(records);
    }
    // Round i sends each queue partition's batch i, one request per leader.
    let mut pending: BTreeMap<i32, VecDeque<(Bytes, u64)>> = by_queue
        .into_iter()
        .map(|(p, records)| {
            let batches = dead_letter::batches(&records, max_bytes);
            let counted = batches.into_iter().map(|b| {
                let count = BatchView::parse(&b).map_or(0, |v| v.record_count() as u64);
                (Bytes::from(b), count)
            });
            (p, counted.collect())
        })
        .collect();
    let mut errors = Vec::new();
    let mut written = 0;
    let mut backoff = Duration::from_millis(50);
    while !pending.is_empty() {
        let image = broker.controller.image();
        let mut by_leader: BTreeMap<i32, Vec<(i32, Bytes)>> = BTreeMap::new();
        for (p, batches) in &pending {
            let leader = image
                .topic_by_name(topic)
                .and_then(|t| t.partitions.get(p))
                .map_or(-1, |pi| pi.leader);
            if let Some((batch, _)) = batches.front() {
                by_leader
                    .entry(leader)
                    .or_default()
                    .push((*p, batch.clone()));
            }
        }
        let may_retry = tokio::time::Instant::now() + backoff < deadline;
        let mut retrying = false;
        for (leader, batches) in by_leader {
            for (p, outcome) in send_batches(broker, topic, leader, batches).await {
                match outcome {
                    Ok(()) => {
                        let done = pending.get_mut(&p).is_some_and(|q| {
                            written += q.pop_front().map_or(0, |(_, count)| count);
                            q.is_empty()
                        });
                        if done {
                            pending.remove(&p);
                        }
                    }
                    Err(e) if retriable(e) && may_retry => retrying = true,
                    Err(e) => {
                        pending.remove(&p);
                        errors.push(format!("partition {p}: {e:?}"));
                    }
                }
            }
        }
        if retrying {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
    }
    let outcome = if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join(", "))
    };
    (written, outcome)
}

fn retriable(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::NotLeaderOrFollower
            | ResponseError::LeaderNotAvailable
            | ResponseError::UnknownTopicOrPartition
            | ResponseError::NotEnoughReplicas
            | ResponseError::NotEnoughReplicasAfterAppend
            | ResponseError::RequestTimedOut
            | ResponseError::NetworkException
    )
}

/// Appends one batch to each of `batches`' partitions of `topic` on
/// `leader` (acks=all): here, or with one Produce to that broker.
async fn send_batches(
    broker: &Arc<Broker>,
    topic: &str,
    leader: i32,
    batches: Vec<(i32, Bytes)>,
) -> Vec<(i32, Result<(), ResponseError>)> {
    if leader < 0 {
        let e = ResponseError::LeaderNotAvailable;
        return batches.into_iter().map(|(p, _)| (p, Err(e))).collect();
    }
    if leader == broker.node_id() {
        let mut out = Vec::with_capacity(batches.len());
        for (p, batch) in batches {
            let tp = TopicPartition::new(topic.to_string(), p);
            let appending = tp.clone();
            let appended = blocking(broker, move |b| {
                b.replicas
                    .append(&appending, &batch, -1, AppendOrigin::Client)
            })
            .await;
            let outcome = match appended {
                Ok(o) => match o.error {
                    Some(e) => Err(e),
                    None => {
                        broker
                            .replicas
                            .wait_replicated(&tp, o.end_offset, REPLICATION_TIMEOUT)
                            .await
                    }
                },
                Err(_) => Err(ResponseError::UnknownServerError),
            };
            out.push((p, outcome));
        }
        return out;
    }
    let partition_data = batches
        .iter()
        .map(|(p, batch)| {
            PartitionProduceData::default()
                .with_index(*p)
                .with_records(Some(batch.clone()))
        })
        .collect();
    let req = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(REPLICATION_TIMEOUT.as_millis() as i32)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(partition_data)]);
    let answered = broker.brokers.send(leader, PRODUCE_VERSION, &req).await;
    let codes: BTreeMap<i32, i16> = match answered {
        Ok(r) => r
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .map(|p| (p.index, p.error_code))
            .collect(),
        Err(_) => BTreeMap::new(),
    };
    batches
        .into_iter()
        .map(|(p, _)| {
            let outcome =
                match codes.get(&p) {
                    Some(0) => Ok(()),
                    Some(&c) => Err(ResponseError::try_from_code(c)
                        .unwrap_or(ResponseError::UnknownServerError)),
                    None => Err(ResponseError::NetworkException),
                };
            (p, outcome)
        })
        .collect()
}

/// The round's dead letters are done with: archived, and persisted so.
/// The start may move past them, which makes room to deliver more.
async fn archive(broker: &Arc<Broker>, taken: Vec<Taken>) {
    let image = broker.controller.image();
    let mut to_persist = Vec::new();
    for t in taken {
        {
            let mut state = t.entry.state.lock();
            for l in &t.letters {
                state.dead_lettered(l.first, l.last);
            }
        }
        let tp = (t.entry.key.topic_id, t.entry.key.partition);
        if let Ok(partition) = led_partition(broker, &image, tp) {
            partition.watchers.wake();
            to_persist.push(persister::ToPersist {
                key: state_key(&t.entry.key.group, tp),
                entry: t.entry,
                leader_epoch: partition.state().leader_epoch,
            });
        }
    }
    for (key, outcome) in persister::write(broker, to_persist).await {
        if let Err(e) = outcome {
            warn!(group = key.group, topic_id = %key.topic_id, partition = key.partition, error = ?e, "dead-lettered records not persisted as archived; a new leader writes them again");
        }
    }
}
