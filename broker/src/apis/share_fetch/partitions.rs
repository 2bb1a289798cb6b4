//! What ShareFetch and ShareAcknowledge do to one share partition on its
//! leader: settle a member's acknowledgements, and acquire records for it
//! from the log (`ottla_share::SharePartition` keeps the state).

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use ottla_group_coordinator::{ShareGroupSettings, ShareStart};
use ottla_protocol::batch::BatchIter;
use ottla_share::registry::Entry;
use ottla_share::{
    AckType, AcquireMode, Acquired, DeliveryLimits, FetchedBatch, SharePartition,
    SharePartitionKey, TopicIdPartition,
};
use ottla_storage::log::FetchIsolation;
use ottla_storage::manager::TopicPartition;
use ottla_storage::txn_index::AbortedTxn;

use crate::broker::Broker;
use crate::replica::{Partition, ReadSpec};

/// One acknowledgement batch of a request.
pub(super) struct AckBatch {
    pub first: i64,
    pub last: i64,
    pub types: Vec<AckType>,
}

/// One partition's acknowledgement batches as sent (first, last, types),
/// checked as Kafka checks them: in order, each range the right way round
/// with one type or one per offset, every type known, and renewals only on
/// a request that says it renews. None makes the partition's answer
/// INVALID_REQUEST.
pub(super) fn parse_acks<'a>(
    batches: impl IntoIterator<Item = (i64, i64, &'a [i8])>,
    renews: bool,
) -> Option<Vec<AckBatch>> {
    let mut previous_last = -1;
    let mut out = Vec::new();
    for (first, last, codes) in batches {
        let count = last.checked_sub(first)?.checked_add(1)?;
        let sized = codes.len() == 1 || codes.len() as i64 == count;
        if first > last || first < previous_last || codes.is_empty() || !sized {
            return None;
        }
        let types = codes
            .iter()
            .map(|&c| AckType::from_code(c).filter(|t| renews || *t != AckType::Renew))
            .collect::<Option<Vec<_>>>()?;
        previous_last = last;
        out.push(AckBatch { first, last, types });
    }
    Some(out)
}

pub(super) fn limits(settings: &ShareGroupSettings) -> DeliveryLimits {
    DeliveryLimits {
        record_lock_duration_ms: settings.record_lock_duration_ms,
        delivery_count_limit: settings.delivery_count_limit,
        max_in_flight: settings.partition_max_record_locks,
        dead_letter_queue: settings.dead_letter_topic.is_some(),
    }
}

/// The partition `tp` names, if this broker leads it.
pub(super) fn led_partition(
    broker: &Broker,
    image: &MetadataImage,
    tp: TopicIdPartition,
) -> Result<Arc<Partition>, ResponseError> {
    let topic = image
        .topic_by_id(&tp.0)
        .ok_or(ResponseError::UnknownTopicId)?;
    if !topic.partitions.contains_key(&tp.1) {
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    let partition = broker
        .replicas
        .partition(&TopicPartition::new(topic.name.clone(), tp.1))
        .ok_or(ResponseError::NotLeaderOrFollower)?;
    if partition.state().leader != broker.node_id() {
        return Err(ResponseError::NotLeaderOrFollower);
    }
    Ok(partition)
}

/// What settling one partition's acknowledgements did.
pub(super) struct Settled {
    /// The share partition, to persist.
    pub entry: Arc<Entry>,
    pub partition: Arc<Partition>,
    /// The first error, if a batch was refused.
    pub first_error: Option<ResponseError>,
    /// Whether a record's state changed (renewals only restart locks,
    /// which are not persisted).
    pub changed: bool,
}

/// Settles a member's acknowledgements on one partition. Records given
/// back wake waiting fetches. Renewals are refused (INVALID_RECORD_STATE)
/// where the group disabled them.
pub(super) fn acknowledge(
    broker: &Broker,
    image: &MetadataImage,
    (group, member): (&str, &str),
    tp: TopicIdPartition,
    batches: &[AckBatch],
    renew_enabled: bool,
) -> Result<Settled, ResponseError> {
    let partition = led_partition(broker, image, tp)?;
    let entry = broker
        .share_partitions
        .get(&SharePartitionKey::new(group, tp))
        .ok_or(ResponseError::InvalidRecordState)?;
    let limits = *entry.limits.lock();
    let now = crate::replica::now_ms();
    let mut first_error = None;
    let mut released = false;
    let mut changed = false;
    {
        let mut state = entry.state.lock();
        for b in batches {
            let renews = b.types.contains(&AckType::Renew);
            let settled = if renews && !renew_enabled {
                Err(ResponseError::InvalidRecordState)
            } else {
                state.acknowledge(member, b.first, b.last, &b.types, &limits, now)
            };
            match settled {
                Ok(()) => {
                    released |= b.types.contains(&AckType::Release);
                    changed |= b.types.iter().any(|t| *t != AckType::Renew);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if state.has_unsent_dead_letters() {
            broker.share_partitions.note_dead_letters(&entry.key);
        }
    }
    if released {
        partition.watchers.wake();
    }
    Ok(Settled {
        entry,
        partition,
        first_error,
        changed,
    })
}

/// What one partition of a ShareFetch delivers.
#[derive(Default)]
pub(super) struct Delivery {
    pub error: Option<ResponseError>,
    pub records: Bytes,
    pub acquired: Vec<Acquired>,
}

/// The request-wide limits an acquisition draws on.
pub(super) struct Budget {
    pub records: i64,
    pub bytes: usize,
    pub mode: AcquireMode,
}

/// A share partition with nothing persisted yet starts at the group's
/// `share.auto.offset.reset`.
pub(super) fn fresh(
    partition: &Partition,
    settings: &ShareGroupSettings,
    now: i64,
) -> SharePartition {
    SharePartition::new(start_offset(partition, settings.auto_offset_reset, now))
}

/// Acquires records of `partition` for `member`, within `budget`.
pub(super) fn deliver(
    broker: &Broker,
    settings: &ShareGroupSettings,
    member: &str,
    partition: &Partition,
    entry: &Entry,
    budget: &mut Budget,
    now: i64,
) -> Delivery {
    match acquire(broker, settings, entry, member, partition, budget, now) {
        Ok(d) => d,
        Err(e) => Delivery {
            error: Some(e),
            ..Delivery::default()
        },
    }
}

fn acquire(
    broker: &Broker,
    settings: &ShareGroupSettings,
    entry: &Entry,
    member: &str,
    partition: &Partition,
    budget: &mut Budget,
    now: i64,
) -> Result<Delivery, ResponseError> {
    let limits = *entry.limits.lock();
    let mut state = entry.state.lock();
    let (log_start, readable_end) = {
        let log = partition.log.read();
        let end = if settings.read_committed {
            log.last_stable_offset()
        } else {
            log.high_watermark()
        };
        (log.log_start_offset(), end)
    };
    state.follow_log_start(log_start);
    if budget.records <= 0 || budget.bytes == 0 || !state.has_deliverable(readable_end, &limits) {
        return Ok(Delivery::default());
    }
    let isolation = if settings.read_committed {
        FetchIsolation::TxnCommitted
    } else {
        FetchIsolation::HighWatermark
    };
    let spec = ReadSpec {
        offset: state.next_fetch_offset(),
        max_bytes: budget.bytes,
        isolation,
        current_leader_epoch: -1,
        leader_only: true,
        min_one_batch: true,
    };
    let outcome = broker
        .replicas
        .fetch(&partition.tp, Some(partition), None, -1, &spec);
    if let Some(e) = outcome.error {
        return Err(e);
    }
    let Some(slice) = outcome.records else {
        return Ok(Delivery::default());
    };
    // Only the batches the record budget can take: the slice may span the
    // request's whole byte budget (50 MiB by default).
    let records = slice
        .read_records(budget.records)
        .map_err(|_| ResponseError::KafkaStorageError)?;
    let batches = fetched_batches(&records, outcome.aborted.as_deref().unwrap_or_default());
    let acquired = state.acquire(member, &batches, budget.records, budget.mode, &limits, now);
    let (Some(first), Some(last)) = (acquired.first(), acquired.last()) else {
        return Ok(Delivery::default());
    };
    broker.share_partitions.note_acquired(&entry.key);
    let records = batches_spanning(records, first.first, last.last);
    budget.records -= acquired.iter().map(|a| a.last - a.first + 1).sum::<i64>();
    budget.bytes = budget.bytes.saturating_sub(records.len());
    Ok(Delivery {
        error: None,
        records,
        acquired,
    })
}

/// The whole batches of `records` that hold offsets `first..=last`: what
/// was read past the acquired records is not sent, as Kafka slices it.
fn batches_spanning(records: Bytes, first: i64, last: i64) -> Bytes {
    let (mut from, mut to, mut at) = (None, 0, 0);
    for batch in BatchIter::new(&records).map_while(Result::ok) {
        let end = at + batch.size();
        if batch.last_offset() >= first && batch.base_offset() <= last {
            from.get_or_insert(at);
            to = end;
        }
        at = end;
    }
    match from {
        Some(from) => records.slice(from..to),
        None => records,
    }
}

/// The batches of `records`, those of aborted transactions (listed in
/// `aborted`, under read_committed) and markers marked never delivered, as
/// a read_committed consumer skips them.
fn fetched_batches(records: &[u8], aborted: &[AbortedTxn]) -> Vec<FetchedBatch> {
    let mut pending: Vec<&AbortedTxn> = aborted.iter().collect();
    pending.sort_by_key(|a| a.first_offset);
    let mut pending = pending.into_iter().peekable();
    // Producers whose aborted transaction has begun and not yet ended.
    let mut aborting: Vec<i64> = Vec::new();
    let mut out = Vec::new();
    for batch in BatchIter::new(records).map_while(Result::ok) {
        while let Some(a) = pending.next_if(|a| a.first_offset <= batch.last_offset()) {
            aborting.push(a.producer_id);
        }
        let producer = batch.producer_id();
        let in_aborted = batch.is_transactional() && aborting.contains(&producer);
        if batch.is_control() {
            aborting.retain(|&p| p != producer);
        }
        out.push(FetchedBatch {
            base_offset: batch.base_offset(),
            last_offset: batch.last_offset(),
            skip: batch.is_control() || in_aborted,
        });
    }
    out
}

/// Where a group starts on a partition it has not read before.
fn start_offset(partition: &Partition, start: ShareStart, now: i64) -> i64 {
    let log = partition.log.read();
    match start {
        ShareStart::Earliest => log.log_start_offset(),
        ShareStart::Latest => log.high_watermark(),
        ShareStart::ByDuration(ms) => log
            .offset_for_timestamp(now - ms)
            .ok()
            .flatten()
            .map_or_else(|| log.high_watermark(), |t| t.offset),
    }
}
