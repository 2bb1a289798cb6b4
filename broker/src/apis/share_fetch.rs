//! ShareFetch v1 and ShareAcknowledge v1 (KIP-932): a share-group member
//! fetches from the leaders of its assigned partitions in a share session,
//! acknowledging what it was delivered on the same requests or on
//! ShareAcknowledge. Records are acquired for the member under a time lock
//! (`partitions`); a fetch that finds nothing waits, as a long-polling
//! Fetch does, until one of its partitions changes (an append, records
//! released or their lock expiring) or `max_wait_ms` passes.

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_acknowledge_response::{
    self as ack_response, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{
    BrokerId, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest,
    ShareFetchResponse,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::MetadataImage;
use ottla_group_coordinator::ShareGroupSettings;
use ottla_share::{SessionChanges, SessionUse, TopicIdPartition};

mod partitions;

use crate::apis::leader_hints;
use crate::apis::share_group::{disabled, settings};
use crate::broker::Broker;
use crate::purgatory::Waiter;
use crate::replica::now_ms;
use partitions::{AckBatch, Budget, Delivery};

/// Kafka's default `max.poll.records`, for a request that sets no limit.
const DEFAULT_MAX_RECORDS: i64 = 500;

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// One partition's part of an answer.
#[derive(Default)]
struct PartitionAnswer {
    error: Option<ResponseError>,
    /// How its acknowledgements went, if it had any.
    acked: Option<Result<(), ResponseError>>,
    delivery: Option<Delivery>,
}

/// The group and member a share request comes from; INVALID_REQUEST
/// without them.
fn identity(group: Option<&str>, member: Option<&str>) -> Result<(String, String), ResponseError> {
    match (group, member) {
        (Some(g), Some(m)) if !g.trim().is_empty() && !m.trim().is_empty() => {
            Ok((g.to_string(), m.to_string()))
        }
        _ => Err(ResponseError::InvalidRequest),
    }
}

/// Settles every partition's acknowledgements; the outcome of each.
fn acknowledge_all(
    broker: &Broker,
    image: &MetadataImage,
    group: &str,
    member: &str,
    acks: Vec<(TopicIdPartition, Option<Vec<AckBatch>>)>,
    answers: &mut BTreeMap<TopicIdPartition, PartitionAnswer>,
) {
    for (tp, batches) in acks {
        let outcome = match batches {
            Some(batches) => partitions::acknowledge(broker, image, group, member, tp, &batches),
            None => Err(ResponseError::InvalidRequest),
        };
        answers.entry(tp).or_default().acked = Some(outcome);
    }
}

/// Gives back what `member` holds on `partitions` (its session closed).
fn release(
    broker: &Broker,
    image: &MetadataImage,
    group: &str,
    member: &str,
    tps: &[TopicIdPartition],
) {
    let released = broker.share_partitions.release_member(group, member, tps);
    wake(broker, image, &released);
}

/// Wakes the fetches waiting on `tps`: records there can be delivered again.
fn wake(broker: &Broker, image: &MetadataImage, tps: &[TopicIdPartition]) {
    for tp in tps {
        if let Ok(p) = partitions::led_partition(broker, image, *tp) {
            p.watchers.wake();
        }
    }
}

/// The share partitions' timers: records whose acquisition lock expired
/// are given back, and so is what members hold whose share session went
/// unused for their group's session timeout (they left without closing
/// it). The broker calls this periodically.
pub fn tick(broker: &Broker, now: i64) {
    let image = broker.controller.image();
    let expired = broker.share_partitions.expire_locks(now);
    wake(broker, &image, &expired);
    let left = broker.share_sessions.close_idle(|group, last_used| {
        last_used + settings(broker, &image, group).session_timeout_ms <= now
    });
    for (group, member, tps) in left {
        release(broker, &image, &group, &member, &tps);
    }
}

/// Forgets the share partitions of partitions no longer led here: their
/// new leader delivers them.
pub fn follow_leadership(broker: &Broker, image: &MetadataImage) {
    let node = broker.node_id();
    broker.share_partitions.retain(|(topic_id, partition)| {
        image
            .topic_by_id(topic_id)
            .and_then(|t| t.partitions.get(partition))
            .is_some_and(|p| p.leader == node)
    });
}

pub async fn fetch(
    broker: &Broker,
    listener: &str,
    req: ShareFetchRequest,
) -> (ShareFetchResponse, Duration) {
    let image = broker.controller.image();
    let failed = |e: ResponseError, message: Option<String>| {
        ShareFetchResponse::default()
            .with_error_code(e.code())
            .with_error_message(message.map(text))
    };
    if let Some(why) = disabled(&image) {
        return (
            failed(ResponseError::UnsupportedVersion, Some(why)),
            Duration::ZERO,
        );
    }
    let (group, member) = match identity(
        req.group_id.as_ref().map(|g| g.as_str()),
        req.member_id.as_ref().map(|m| m.as_str()),
    ) {
        Ok(id) => id,
        Err(e) => return (failed(e, None), Duration::ZERO),
    };
    let mut added = Vec::new();
    let mut acks = Vec::new();
    for topic in &req.topics {
        for p in &topic.partitions {
            let tp = (topic.topic_id, p.partition_index);
            added.push(tp);
            if !p.acknowledgement_batches.is_empty() {
                let batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| AckBatch::parse(b.first_offset, b.last_offset, &b.acknowledge_types))
                    .collect::<Option<Vec<_>>>();
                acks.push((tp, batches));
            }
        }
    }
    let forgotten: Vec<TopicIdPartition> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    let now = now_ms();
    let changes = SessionChanges {
        added: &added,
        forgotten: &forgotten,
        acknowledges: !acks.is_empty(),
    };
    let session =
        broker
            .share_sessions
            .fetch(&group, &member, req.share_session_epoch, changes, now);
    let session = match session {
        Ok(s) => s,
        Err(e) => return (failed(e, None), Duration::ZERO),
    };
    let settings = settings(broker, &image, &group);
    let mut answers: BTreeMap<TopicIdPartition, PartitionAnswer> = BTreeMap::new();
    acknowledge_all(broker, &image, &group, &member, acks, &mut answers);
    let mut waited = Duration::ZERO;
    let order = match session {
        SessionUse::Closed { partitions } => {
            release(broker, &image, &group, &member, &partitions);
            Vec::new()
        }
        SessionUse::Open { partitions, full } => {
            let max_wait = Duration::from_millis(req.max_wait_ms.max(0) as u64);
            let started = tokio::time::Instant::now();
            let budget = Budget {
                records: if req.max_records > 0 {
                    i64::from(req.max_records)
                } else {
                    DEFAULT_MAX_RECORDS
                },
                bytes: req.max_bytes.max(0) as usize,
            };
            deliver_until(
                broker,
                &image,
                &settings,
                (&group, &member),
                &partitions,
                budget,
                started + max_wait,
                &mut answers,
            )
            .await;
            waited = started.elapsed();
            if full {
                for tp in &partitions {
                    answers.entry(*tp).or_default();
                }
            }
            partitions
        }
    };
    let response = fetch_response(&image, listener, &settings, order, answers);
    (response, waited)
}

/// Delivers from the session's partitions; while nothing is delivered and
/// no error shows, waits for a change until `deadline`.
#[allow(clippy::too_many_arguments)]
async fn deliver_until(
    broker: &Broker,
    image: &MetadataImage,
    settings: &ShareGroupSettings,
    (group, member): (&str, &str),
    tps: &[TopicIdPartition],
    mut budget: Budget,
    deadline: tokio::time::Instant,
    answers: &mut BTreeMap<TopicIdPartition, PartitionAnswer>,
) {
    loop {
        let waiter = Waiter::new();
        let mut answered = false;
        for (index, tp) in tps.iter().enumerate() {
            match partitions::led_partition(broker, image, *tp) {
                Ok(p) => {
                    let version = p.watchers.version();
                    let d = partitions::deliver(
                        broker,
                        settings,
                        (group, member),
                        *tp,
                        &p,
                        &mut budget,
                        now_ms(),
                    );
                    if d.error.is_some() || !d.acquired.is_empty() {
                        answered = true;
                        let a = answers.entry(*tp).or_default();
                        a.error = d.error;
                        a.delivery = Some(d);
                    }
                    waiter.watch(&p.watchers, index as u32, version);
                }
                Err(e) => {
                    answered = true;
                    answers.entry(*tp).or_default().error = Some(e);
                }
            }
        }
        if answered || tokio::time::Instant::now() >= deadline || tps.is_empty() {
            return;
        }
        if waiter.changed(deadline).await.is_empty() {
            return;
        }
    }
}

fn fetch_response(
    image: &MetadataImage,
    listener: &str,
    settings: &ShareGroupSettings,
    order: Vec<TopicIdPartition>,
    mut answers: BTreeMap<TopicIdPartition, PartitionAnswer>,
) -> ShareFetchResponse {
    // Session order first, then partitions only acknowledged.
    let mut ordered: Vec<(TopicIdPartition, PartitionAnswer)> = order
        .into_iter()
        .filter_map(|tp| answers.remove(&tp).map(|a| (tp, a)))
        .collect();
    ordered.extend(answers);
    let mut topics: Vec<ShareFetchableTopicResponse> = Vec::new();
    let mut leaders = Vec::new();
    for ((topic_id, partition), mut a) in ordered {
        let delivery = a.delivery.take().unwrap_or_default();
        let mut data = PartitionData::default()
            .with_partition_index(partition)
            .with_error_code(a.error.map_or(0, |e| e.code()))
            .with_acknowledge_error_code(ack_error_code(&a))
            .with_records(Some(delivery.records))
            .with_acquired_records(
                delivery
                    .acquired
                    .iter()
                    .map(|r| {
                        AcquiredRecords::default()
                            .with_first_offset(r.first)
                            .with_last_offset(r.last)
                            .with_delivery_count(r.delivery_count)
                    })
                    .collect(),
            );
        if let Some((leader, epoch)) = current_leader(image, topic_id, partition) {
            data.current_leader = LeaderIdAndEpoch::default()
                .with_leader_id(leader)
                .with_leader_epoch(epoch);
            if a.error
                .is_some_and(|e| leader_hints::is_leadership_error(e.code()))
            {
                leaders.push(leader);
            }
        }
        match topics.last_mut() {
            Some(t) if t.topic_id == topic_id => t.partitions.push(data),
            _ => topics.push(
                ShareFetchableTopicResponse::default()
                    .with_topic_id(topic_id)
                    .with_partitions(vec![data]),
            ),
        }
    }
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(
            settings.record_lock_duration_ms.min(i64::from(i32::MAX)) as i32
        )
        .with_responses(topics)
        .with_node_endpoints(
            leader_hints::endpoints(image, leaders, listener)
                .into_iter()
                .map(|e| {
                    NodeEndpoint::default()
                        .with_node_id(BrokerId(e.node_id))
                        .with_host(text(e.host))
                        .with_port(i32::from(e.port))
                        .with_rack(e.rack.map(text))
                })
                .collect(),
        )
}

fn ack_error_code(a: &PartitionAnswer) -> i16 {
    a.acked.and_then(Result::err).map_or(0, |e| e.code())
}

fn current_leader(
    image: &MetadataImage,
    topic_id: uuid::Uuid,
    partition: i32,
) -> Option<(i32, i32)> {
    let p = image.topic_by_id(&topic_id)?.partitions.get(&partition)?;
    (p.leader >= 0).then_some((p.leader, p.leader_epoch))
}

pub fn acknowledge(
    broker: &Broker,
    listener: &str,
    req: ShareAcknowledgeRequest,
) -> ShareAcknowledgeResponse {
    let image = broker.controller.image();
    let failed = |e: ResponseError, message: Option<String>| {
        ShareAcknowledgeResponse::default()
            .with_error_code(e.code())
            .with_error_message(message.map(text))
    };
    if let Some(why) = disabled(&image) {
        return failed(ResponseError::UnsupportedVersion, Some(why));
    }
    let (group, member) = match identity(
        req.group_id.as_ref().map(|g| g.as_str()),
        req.member_id.as_ref().map(|m| m.as_str()),
    ) {
        Ok(id) => id,
        Err(e) => return failed(e, None),
    };
    let session =
        match broker
            .share_sessions
            .acknowledge(&group, &member, req.share_session_epoch, now_ms())
        {
            Ok(s) => s,
            Err(e) => return failed(e, None),
        };
    let acks: Vec<(TopicIdPartition, Option<Vec<AckBatch>>)> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                let batches = p
                    .acknowledgement_batches
                    .iter()
                    .map(|b| AckBatch::parse(b.first_offset, b.last_offset, &b.acknowledge_types))
                    .collect::<Option<Vec<_>>>();
                ((t.topic_id, p.partition_index), batches)
            })
        })
        .collect();
    let mut answers = BTreeMap::new();
    acknowledge_all(broker, &image, &group, &member, acks, &mut answers);
    if let SessionUse::Closed { partitions } = session {
        release(broker, &image, &group, &member, &partitions);
    }
    let mut topics: Vec<ShareAcknowledgeTopicResponse> = Vec::new();
    let mut leaders = Vec::new();
    for ((topic_id, partition), a) in answers {
        let error = a.acked.and_then(Result::err);
        let mut data = ack_response::PartitionData::default()
            .with_partition_index(partition)
            .with_error_code(error.map_or(0, |e| e.code()));
        if let Some((leader, epoch)) = current_leader(&image, topic_id, partition) {
            data.current_leader = ack_response::LeaderIdAndEpoch::default()
                .with_leader_id(leader)
                .with_leader_epoch(epoch);
            if error.is_some_and(|e| leader_hints::is_leadership_error(e.code())) {
                leaders.push(leader);
            }
        }
        match topics.last_mut() {
            Some(t) if t.topic_id == topic_id => t.partitions.push(data),
            _ => topics.push(
                ShareAcknowledgeTopicResponse::default()
                    .with_topic_id(topic_id)
                    .with_partitions(vec![data]),
            ),
        }
    }
    ShareAcknowledgeResponse::default()
        .with_responses(topics)
        .with_node_endpoints(
            leader_hints::endpoints(&image, leaders, listener)
                .into_iter()
                .map(|e| {
                    ack_response::NodeEndpoint::default()
                        .with_node_id(BrokerId(e.node_id))
                        .with_host(text(e.host))
                        .with_port(i32::from(e.port))
                        .with_rack(e.rack.map(text))
                })
                .collect(),
        )
}
