//! ShareFetch and ShareAcknowledge v1-v2 (KIP-932): a share-group member
//! fetches from the leaders of its assigned partitions in a share session,
//! acknowledging what it was delivered on the same requests or on
//! ShareAcknowledge. Records are acquired for the member under a time lock
//! (`partitions`); a fetch that finds nothing waits, as a long-polling
//! Fetch does, until one of its partitions changes (an append, records
//! released or their lock expiring) or `max_wait_ms` passes.
//!
//! v2 adds the acquire mode (KIP-1206: whole batches, or MaxRecords
//! exactly) and renewals (KIP-1222): a member keeps records it is still
//! working on by acknowledging them with RENEW, which restarts their lock;
//! a ShareFetch carrying renewals fetches nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
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
use ottla_protocol::share_v2::{self, ShareRequestV2};
use ottla_share::{AcquireMode, SessionChanges, SessionUse, SharePartitionKey, TopicIdPartition};
use ottla_share_coordinator::StateKey;
use tracing::{debug, warn};

mod dead_letters;
mod partitions;

use crate::apis::leader_hints;
use crate::apis::share_group::{disabled, settings};
use crate::apis::share_persister as persister;
use crate::broker::Broker;
use crate::purgatory::Waiter;
use crate::replica::now_ms;
use partitions::{AckBatch, Budget, Delivery};

/// Kafka's default `max.poll.records`, for a v1 request that sets no limit.
const DEFAULT_MAX_RECORDS: i64 = 500;
/// How soon a long poll tries again to read a share partition's state.
const LOAD_RETRY: Duration = Duration::from_millis(100);

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

fn state_key(group: &str, (topic_id, partition): TopicIdPartition) -> StateKey {
    StateKey {
        group: group.to_string(),
        topic_id,
        partition,
    }
}

/// Settles every partition's acknowledgements, and persists the share
/// partitions they changed before they are answered: an acknowledged
/// record is not delivered again after a restart or a leader change.
async fn settle_acknowledgements(
    broker: &Arc<Broker>,
    image: &MetadataImage,
    settings: &ShareGroupSettings,
    (group, member): (&str, &str),
    acks: Vec<(TopicIdPartition, Option<Vec<AckBatch>>)>,
    answers: &mut BTreeMap<TopicIdPartition, PartitionAnswer>,
) {
    let mut to_persist = Vec::new();
    for (tp, batches) in acks {
        let outcome = match batches {
            Some(batches) => partitions::acknowledge(
                broker,
                image,
                (group, member),
                tp,
                &batches,
                settings.renew_acknowledge_enabled,
            ),
            None => Err(ResponseError::InvalidRequest),
        };
        let acked = outcome.and_then(|settled| {
            if settled.changed {
                to_persist.push(persister::ToPersist {
                    key: state_key(group, tp),
                    entry: settled.entry,
                    leader_epoch: settled.partition.state().leader_epoch,
                });
            }
            settled.first_error.map_or(Ok(()), Err)
        });
        if let Err(e) = acked {
            debug!(group, member, topic_id = %tp.0, partition = tp.1, error = ?e, "acknowledgements refused");
        }
        answers.entry(tp).or_default().acked = Some(acked);
    }
    for (key, outcome) in persister::write(broker, to_persist).await {
        if let Err(e) = outcome {
            warn!(group, topic_id = %key.topic_id, partition = key.partition, error = ?e, "acknowledgements not persisted");
            let a = answers.entry((key.topic_id, key.partition)).or_default();
            if matches!(a.acked, Some(Ok(()))) {
                a.acked = Some(Err(e));
            }
        }
    }
}

/// Makes sure each partition of the session led here has its share
/// partition: as persisted by the share coordinator, else new at the
/// group's `share.auto.offset.reset`, whose start is persisted at once. A
/// partition whose state cannot be read yet is left for the next fetch.
async fn load_partitions(
    broker: &Arc<Broker>,
    image: &MetadataImage,
    settings: &ShareGroupSettings,
    group: &str,
    tps: &[TopicIdPartition],
) -> bool {
    let mut unloaded = false;
    for tp in tps {
        let key = SharePartitionKey::new(group, *tp);
        if broker.share_partitions.get(&key).is_some() {
            continue;
        }
        let Ok(partition) = partitions::led_partition(broker, image, *tp) else {
            continue;
        };
        let state_key = state_key(group, *tp);
        let (share_partition, state_epoch, is_new) = match persister::read(broker, &state_key).await
        {
            // Offsets deleted: a fresh start, in the state's epoch.
            Ok(Some(state)) if state.start_offset == ottla_share_coordinator::UNSET_START => (
                partitions::fresh(&partition, settings, now_ms()),
                state.state_epoch,
                true,
            ),
            Ok(Some(state)) => (
                ottla_share::SharePartition::restore(state.start_offset, &state.batches),
                state.state_epoch,
                false,
            ),
            Ok(None) => (partitions::fresh(&partition, settings, now_ms()), 0, true),
            Err(e) => {
                ottla_coordinator_common::log_limited!(
                    tracing::Level::WARN,
                    key: &state_key.coordinator_key(),
                    group,
                    topic_id = %tp.0,
                    partition = tp.1,
                    error = ?e,
                    "share partition state not readable yet"
                );
                unloaded = true;
                continue;
            }
        };
        let entry = broker.share_partitions.get_or_insert(
            &key,
            partitions::limits(settings),
            share_partition,
            state_epoch,
        );
        if is_new {
            let first = persister::ToPersist {
                key: state_key,
                entry,
                leader_epoch: partition.state().leader_epoch,
            };
            for (key, outcome) in persister::write(broker, vec![first]).await {
                if let Err(e) = outcome {
                    warn!(group, topic_id = %key.topic_id, partition = key.partition, error = ?e, "share partition start not persisted");
                }
            }
        }
    }
    unloaded
}

/// Gives back what `member` holds on `tps` (its session closed). A share
/// partition no member fetches here any more is forgotten, so that an
/// offset reset made meanwhile is seen when one does; but only once its
/// state is persisted: releases and expired locks live in memory until
/// then, and a delivery count lost with them would let a record that
/// crashes its consumers come back for ever instead of being archived at
/// `share.delivery.count.limit`.
async fn release(
    broker: &Arc<Broker>,
    image: &MetadataImage,
    group: &str,
    member: &str,
    tps: &[TopicIdPartition],
) {
    let released = broker.share_partitions.release_member(group, member, tps);
    wake(broker, image, &released);
    let idle: Vec<TopicIdPartition> = tps
        .iter()
        .filter(|tp| !broker.share_sessions.includes(group, tp))
        .copied()
        .collect();
    let to_persist: Vec<persister::ToPersist> = released
        .iter()
        .chain(&idle)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter_map(|tp| {
            let entry = broker
                .share_partitions
                .get(&SharePartitionKey::new(group, *tp))?;
            let partition = partitions::led_partition(broker, image, *tp).ok()?;
            Some(persister::ToPersist {
                key: state_key(group, *tp),
                entry,
                leader_epoch: partition.state().leader_epoch,
            })
        })
        .collect();
    let mut unpersisted = std::collections::BTreeSet::new();
    for (key, outcome) in persister::write(broker, to_persist).await {
        if let Err(e) = outcome {
            warn!(group, topic_id = %key.topic_id, partition = key.partition, error = ?e, "released records not persisted; the share partition stays in memory");
            unpersisted.insert((key.topic_id, key.partition));
        }
    }
    for tp in idle {
        let still_idle = !broker.share_sessions.includes(group, &tp);
        if still_idle && !unpersisted.contains(&tp) {
            broker
                .share_partitions
                .remove_if_idle(&SharePartitionKey::new(group, tp));
        }
    }
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
/// it); records bound for a dead-letter queue are written there. The
/// broker calls this periodically.
pub fn tick(broker: &Arc<Broker>, now: i64) {
    let image = broker.controller.image();
    let expired = broker.share_partitions.expire_locks(now);
    wake(broker, &image, &expired);
    dead_letters::start_round(broker);
    let left = broker.share_sessions.close_idle(|group, last_used| {
        last_used + settings(broker, &image, group).session_timeout_ms <= now
    });
    if left.is_empty() {
        return;
    }
    // Persisting the released state awaits the share coordinators: not on
    // this (blocking-pool) tick.
    let broker = broker.clone();
    tokio::runtime::Handle::current().spawn(async move {
        for (group, member, tps) in left {
            release(&broker, &image, &group, &member, &tps).await;
        }
    });
}

pub async fn fetch(
    broker: &Arc<Broker>,
    listener: &str,
    version: i16,
    req: ShareFetchRequest,
    v2: ShareRequestV2,
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
    let budget = match fetch_budget(version, &req, v2) {
        Ok(budget) => budget,
        Err(why) => {
            return (
                failed(ResponseError::InvalidRequest, Some(why)),
                Duration::ZERO,
            )
        }
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
                    .map(|b| (b.first_offset, b.last_offset, &b.acknowledge_types[..]));
                acks.push((tp, partitions::parse_acks(batches, v2.is_renew_ack)));
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
    let identity = (group.as_str(), member.as_str());
    settle_acknowledgements(broker, &image, &settings, identity, acks, &mut answers).await;
    let mut waited = Duration::ZERO;
    let order = match session {
        SessionUse::Closed { partitions } => {
            release(broker, &image, &group, &member, &partitions).await;
            Vec::new()
        }
        // Renewing fetches nothing: only the acknowledgements are answered.
        SessionUse::Open { .. } if v2.is_renew_ack => Vec::new(),
        SessionUse::Open { partitions, full } => {
            let max_wait = Duration::from_millis(req.max_wait_ms.max(0) as u64);
            let started = tokio::time::Instant::now();
            let mut budget = budget;
            let deadline = started + max_wait;
            loop {
                // A partition whose state could not be read yet (the state
                // topic just created) is tried again within the long poll.
                let unloaded =
                    load_partitions(broker, &image, &settings, &group, &partitions).await;
                let pass_deadline = if unloaded {
                    deadline.min(tokio::time::Instant::now() + LOAD_RETRY)
                } else {
                    deadline
                };
                let answered = deliver_until(
                    broker,
                    &image,
                    &settings,
                    (&group, &member),
                    &partitions,
                    &mut budget,
                    pass_deadline,
                    &mut answers,
                )
                .await;
                if answered || !unloaded || tokio::time::Instant::now() >= deadline {
                    break;
                }
            }
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

/// What a fetch may acquire, or why the request is invalid: v2's acquire
/// mode must be known, and a renewing fetch must ask for nothing (Kafka's
/// messages). A v1 fetch without a record limit gets Kafka's default
/// `max.poll.records`; v2 takes MaxRecords as sent, 0 acquiring nothing
/// (a record-limit consumer fetches from one leader at a time).
fn fetch_budget(
    version: i16,
    req: &ShareFetchRequest,
    v2: ShareRequestV2,
) -> Result<Budget, String> {
    let mode = match v2.acquire_mode {
        share_v2::BATCH_OPTIMIZED => AcquireMode::BatchOptimized {
            batch_size: i64::from(req.batch_size),
        },
        share_v2::RECORD_LIMIT => AcquireMode::RecordLimit,
        other => return Err(format!("Unknown share acquire mode id: {other}")),
    };
    if v2.is_renew_ack {
        let nonzero: String = [
            ("maxBytes", req.max_bytes),
            ("minBytes", req.min_bytes),
            ("maxRecords", req.max_records),
            ("maxWaitMs", req.max_wait_ms),
        ]
        .iter()
        .filter(|(_, value)| *value != 0)
        .map(|(name, _)| format!("{name} must be set to 0, "))
        .collect();
        if !nonzero.is_empty() {
            return Err(format!("{nonzero}if isRenewAck is true."));
        }
    }
    let records = match req.max_records {
        n if n <= 0 && version < share_v2::V2 => DEFAULT_MAX_RECORDS,
        n => i64::from(n.max(0)),
    };
    Ok(Budget {
        records,
        bytes: req.max_bytes.max(0) as usize,
        mode,
    })
}

/// Delivers from the session's partitions; while nothing is delivered and
/// no error shows, waits for a change until `deadline`. Whether anything
/// was answered.
#[allow(clippy::too_many_arguments)]
async fn deliver_until(
    broker: &Broker,
    image: &MetadataImage,
    settings: &ShareGroupSettings,
    (group, member): (&str, &str),
    tps: &[TopicIdPartition],
    budget: &mut Budget,
    deadline: tokio::time::Instant,
    answers: &mut BTreeMap<TopicIdPartition, PartitionAnswer>,
) -> bool {
    loop {
        let waiter = Waiter::new();
        let mut answered = false;
        for (index, tp) in tps.iter().enumerate() {
            match partitions::led_partition(broker, image, *tp) {
                Ok(p) => {
                    let version = p.watchers.version();
                    // Not loaded: its state could not be read yet.
                    let Some(entry) = broker
                        .share_partitions
                        .get(&SharePartitionKey::new(group, *tp))
                    else {
                        waiter.watch(&p.watchers, index as u32, version);
                        continue;
                    };
                    let d =
                        partitions::deliver(broker, settings, member, &p, &entry, budget, now_ms());
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
            return answered;
        }
        if waiter.changed(deadline).await.is_empty() {
            return false;
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
        .with_acquisition_lock_timeout_ms(lock_timeout_ms(settings))
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

/// A ShareAcknowledge's answer, and the group's acquisition lock duration,
/// which v2 answers carry.
pub async fn acknowledge(
    broker: &Arc<Broker>,
    listener: &str,
    req: ShareAcknowledgeRequest,
    v2: ShareRequestV2,
) -> (ShareAcknowledgeResponse, i32) {
    let image = broker.controller.image();
    let group_id = req.group_id.as_ref().map_or("", |g| g.as_str());
    let settings = settings(broker, &image, group_id);
    let lock_timeout = lock_timeout_ms(&settings);
    let failed = |e: ResponseError, message: Option<String>| {
        let response = ShareAcknowledgeResponse::default()
            .with_error_code(e.code())
            .with_error_message(message.map(text));
        (response, lock_timeout)
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
                    .map(|b| (b.first_offset, b.last_offset, &b.acknowledge_types[..]));
                (
                    (t.topic_id, p.partition_index),
                    partitions::parse_acks(batches, v2.is_renew_ack),
                )
            })
        })
        .collect();
    let mut answers = BTreeMap::new();
    let identity = (group.as_str(), member.as_str());
    settle_acknowledgements(broker, &image, &settings, identity, acks, &mut answers).await;
    if let SessionUse::Closed { partitions } = session {
        release(broker, &image, &group, &member, &partitions).await;
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
    let response = ShareAcknowledgeResponse::default()
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
        );
    (response, lock_timeout)
}

/// The group's acquisition lock duration, as the answers carry it.
fn lock_timeout_ms(settings: &ShareGroupSettings) -> i32 {
    settings.record_lock_duration_ms.min(i64::from(i32::MAX)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(acquire_mode: i8, is_renew_ack: bool) -> ShareRequestV2 {
        ShareRequestV2 {
            acquire_mode,
            is_renew_ack,
        }
    }

    #[test]
    fn a_fetch_budget_follows_the_version_and_the_acquire_mode() {
        let req = ShareFetchRequest::default()
            .with_max_records(3)
            .with_max_bytes(1000);
        let b = fetch_budget(2, &req, v2(share_v2::RECORD_LIMIT, false)).unwrap();
        assert_eq!(
            (b.records, b.bytes, b.mode),
            (3, 1000, AcquireMode::RecordLimit)
        );
        let b = fetch_budget(
            1,
            &req.clone().with_batch_size(5),
            ShareRequestV2::default(),
        )
        .unwrap();
        assert_eq!(b.mode, AcquireMode::BatchOptimized { batch_size: 5 });
        // No limit: v1 gets max.poll.records' default, v2 nothing at all.
        let unlimited = req.clone().with_max_records(0);
        let v1 = fetch_budget(1, &unlimited, ShareRequestV2::default()).unwrap();
        assert_eq!(v1.records, DEFAULT_MAX_RECORDS);
        let v2_budget = fetch_budget(2, &unlimited, ShareRequestV2::default()).unwrap();
        assert_eq!(v2_budget.records, 0);
        assert_eq!(
            fetch_budget(2, &req, v2(7, false)).err().as_deref(),
            Some("Unknown share acquire mode id: 7")
        );
    }

    #[test]
    fn a_renewing_fetch_must_ask_for_nothing() {
        let nothing = ShareFetchRequest::default().with_max_bytes(0);
        let req = nothing.clone().with_max_records(3).with_max_wait_ms(500);
        assert_eq!(
            fetch_budget(2, &req, v2(0, true)).err().as_deref(),
            Some("maxRecords must be set to 0, maxWaitMs must be set to 0, if isRenewAck is true.")
        );
        assert!(fetch_budget(2, &nothing, v2(0, true)).is_ok());
    }
}
