//! Transactional offset commits (Kafka's OffsetMetadataManager,
//! transactional part). TxnOffsetCommit writes the offsets in a
//! transactional batch of the producer; they stay pending, invisible to
//! OffsetFetch, until the transaction's marker reaches this partition:
//! COMMIT applies them, ABORT drops them. Loading replays both the same way.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::error::ResponseError;
use ottla_protocol::batch::{BatchBuilder, BatchView, ControlType};

use super::classic::{ClassicGroup, GroupState};
use super::offsets::{self, FetchedOffset, OffsetStore, PartitionCodes, PartitionCommit};
use super::records::{CoordinatorRecord, OffsetCommitValue};
use super::writer::Ctx;

/// (group, topic, partition)
type OffsetKey = (String, String, i32);

/// Offsets committed inside transactions not yet ended, by producer id.
#[derive(Debug, Default)]
pub struct PendingTxnOffsets {
    by_producer: HashMap<i64, BTreeMap<OffsetKey, OffsetCommitValue>>,
}

impl PendingTxnOffsets {
    /// Holds an offset record of `producer_id`'s transaction; other records
    /// are handed back (they do not wait for a marker).
    pub fn stage(
        &mut self,
        producer_id: i64,
        record: CoordinatorRecord,
    ) -> Option<CoordinatorRecord> {
        match record {
            CoordinatorRecord::OffsetCommit {
                group,
                topic,
                partition,
                value: Some(value),
            } => {
                self.by_producer
                    .entry(producer_id)
                    .or_default()
                    .insert((group, topic, partition), value);
                None
            }
            other => Some(other),
        }
    }

    /// Whether an open transaction holds an offset for the partition.
    pub(super) fn is_pending(&self, group: &str, topic: &str, partition: i32) -> bool {
        let key = (group.to_string(), topic.to_string(), partition);
        self.by_producer.values().any(|o| o.contains_key(&key))
    }

    /// Whether an open transaction holds an offset of `group`.
    pub(super) fn holds_group(&self, group: &str) -> bool {
        self.by_producer
            .values()
            .any(|o| o.keys().any(|(g, _, _)| g == group))
    }
}

/// Kafka's answer to an OffsetFetch asking for stable offsets: partitions
/// with a pending transactional offset report UNSTABLE_OFFSET_COMMIT and no
/// offset, so the consumer retries once the transaction ended.
pub fn mark_unstable(
    pending: &PendingTxnOffsets,
    group: &str,
    fetched: &mut [(String, Vec<FetchedOffset>)],
) {
    if pending.by_producer.is_empty() {
        return;
    }
    for (topic, offsets) in fetched.iter_mut() {
        for o in offsets
            .iter_mut()
            .filter(|o| pending.is_pending(group, topic, o.partition))
        {
            *o = FetchedOffset {
                partition: o.partition,
                offset: -1,
                leader_epoch: -1,
                metadata: String::new(),
                error: ResponseError::UnstableOffsetCommit.code(),
            };
        }
    }
}

/// A TxnOffsetCommit for one group.
#[derive(Debug, Clone)]
pub struct TxnCommitRequest {
    pub group_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// -1 (with an empty member id) from producers outside the group
    /// protocol (TxnOffsetCommit v0-2).
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub topics: Vec<(String, Vec<PartitionCommit>)>,
}

/// Kafka's ClassicGroup.validateOffsetCommit for transactional commits: as
/// for plain commits, but members need not name themselves and a rebalance
/// in progress does not refuse them.
fn validate(
    groups: &HashMap<String, ClassicGroup>,
    req: &TxnCommitRequest,
) -> Result<(), ResponseError> {
    let Some(group) = groups.get(&req.group_id) else {
        // A producer outside the group protocol: the group is created with
        // its first offset.
        return if req.generation_id < 0 {
            Ok(())
        } else {
            Err(ResponseError::IllegalGeneration)
        };
    };
    if req.generation_id < 0 && group.state() == GroupState::Empty {
        return Ok(());
    }
    if req.generation_id >= 0 || !req.member_id.is_empty() || req.group_instance_id.is_some() {
        group.validate_member(&req.member_id, req.group_instance_id.as_deref())?;
        if req.generation_id != group.generation_id() {
            return Err(ResponseError::IllegalGeneration);
        }
    }
    Ok(())
}

/// Validates and writes a transactional commit; the offsets wait for the
/// transaction's marker.
pub fn commit(
    groups: &HashMap<String, ClassicGroup>,
    pending: &mut PendingTxnOffsets,
    req: TxnCommitRequest,
    ctx: &Ctx<'_>,
) -> PartitionCodes {
    let validated = validate(groups, &req);
    stage(pending, &req, validated, ctx)
}

/// Writes a transactional commit the group has `validated` (every
/// partition fails with its error otherwise).
pub fn stage(
    pending: &mut PendingTxnOffsets,
    req: &TxnCommitRequest,
    validated: Result<(), ResponseError>,
    ctx: &Ctx<'_>,
) -> PartitionCodes {
    let mut codes: PartitionCodes = req
        .topics
        .iter()
        .map(|(t, ps)| (t.clone(), ps.iter().map(|p| (p.partition, 0)).collect()))
        .collect();
    let fail_all = |codes: &mut PartitionCodes, e: ResponseError| {
        for (_, ps) in codes.iter_mut() {
            for (_, code) in ps.iter_mut().filter(|(_, c)| *c == 0) {
                *code = e.code();
            }
        }
    };
    if let Err(e) = validated {
        fail_all(&mut codes, e);
        return codes;
    }
    let mut records = Vec::new();
    for ((topic, partitions), (_, topic_codes)) in req.topics.iter().zip(codes.iter_mut()) {
        for (p, (_, code)) in partitions.iter().zip(topic_codes.iter_mut()) {
            let metadata = p.metadata.clone().unwrap_or_default();
            if metadata.encode_utf16().count() > ctx.config.offset_metadata_max_bytes {
                *code = ResponseError::OffsetMetadataTooLarge.code();
                continue;
            }
            records.push(CoordinatorRecord::OffsetCommit {
                group: req.group_id.clone(),
                topic: topic.clone(),
                partition: p.partition,
                value: Some(OffsetCommitValue {
                    offset: p.offset,
                    leader_epoch: p.leader_epoch,
                    metadata,
                    commit_timestamp: ctx.now,
                    expire_timestamp: None,
                }),
            });
        }
    }
    let builder = BatchBuilder {
        producer_id: req.producer_id,
        producer_epoch: req.producer_epoch,
        transactional: true,
        ..BatchBuilder::default()
    };
    if let Err(e) = ctx.writer.append_with(&builder, &records) {
        fail_all(&mut codes, e);
        return codes;
    }
    for r in records {
        pending.stage(req.producer_id, r);
    }
    codes
}

/// The producer and outcome of a COMMIT/ABORT marker; None for other batches.
fn marker_outcome(batch: &BatchView<'_>) -> Option<(i64, bool)> {
    match batch.control_type()? {
        ControlType::Commit => Some((batch.producer_id(), true)),
        ControlType::Abort => Some((batch.producer_id(), false)),
        _ => None,
    }
}

/// Applies a marker found in the log (on load).
pub fn replay_marker(
    groups: &mut HashMap<String, ClassicGroup>,
    store: &mut OffsetStore,
    pending: &mut PendingTxnOffsets,
    batch: &BatchView<'_>,
    now: i64,
) {
    if let Some((producer_id, commit)) = marker_outcome(batch) {
        complete(groups, store, pending, producer_id, commit, now);
    }
}

/// Writes a marker from the transaction coordinator into this partition,
/// then applies it.
pub fn write_marker(
    groups: &mut HashMap<String, ClassicGroup>,
    store: &mut OffsetStore,
    pending: &mut PendingTxnOffsets,
    batch: Vec<u8>,
    ctx: &Ctx<'_>,
) -> Result<(), ResponseError> {
    let outcome = BatchView::parse(&batch)
        .ok()
        .and_then(|view| marker_outcome(&view));
    let Some((producer_id, commit)) = outcome else {
        return Err(ResponseError::CorruptMessage);
    };
    ctx.writer.append_batch(batch)?;
    complete(groups, store, pending, producer_id, commit, ctx.now);
    Ok(())
}

/// The producer's pending offsets become committed, or are dropped.
fn complete(
    groups: &mut HashMap<String, ClassicGroup>,
    store: &mut OffsetStore,
    pending: &mut PendingTxnOffsets,
    producer_id: i64,
    commit: bool,
    now: i64,
) {
    let Some(offsets) = pending.by_producer.remove(&producer_id) else {
        return;
    };
    if commit {
        for ((group, topic, partition), value) in offsets {
            offsets::apply(groups, store, &group, &topic, partition, Some(value), now);
        }
    }
}
