//! The share coordinator's inter-broker APIs (KIP-932): ReadShareGroupState
//! v0, WriteShareGroupState v0, InitializeShareGroupState v0 (for offset
//! resets), DeleteShareGroupState v0 (for group deletion) and
//! ReadShareGroupStateSummary v0 (for describing offsets), which share
//! partition leaders and group coordinators send to the coordinator of each
//! share partition's state (`ottla_share_coordinator`); and the conversions
//! both sides use.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_share_group_state_response::{
    DeleteStateResult, PartitionResult as DeleteResult,
};
use kafka_protocol::messages::initialize_share_group_state_response::{
    InitializeStateResult, PartitionResult as InitializeResult,
};
use kafka_protocol::messages::read_share_group_state_response::{
    self as read_response, ReadStateResult,
};
use kafka_protocol::messages::read_share_group_state_summary_response::{
    PartitionResult as SummaryResult, ReadStateSummaryResult,
};
use kafka_protocol::messages::write_share_group_state_request as write_request;
use kafka_protocol::messages::write_share_group_state_response::{
    PartitionResult as WriteResult, WriteStateResult,
};
use kafka_protocol::messages::{
    DeleteShareGroupStateRequest, DeleteShareGroupStateResponse, InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse, ReadShareGroupStateRequest, ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use ottla_share_coordinator::{ShareCoordinator, ShareState, StateBatch, StateKey, StateWrite};
use ottla_storage::manager::TopicPartition;
use uuid::Uuid;

use crate::blocking::blocking;
use crate::broker::Broker;

/// A batch as the requests carry it.
pub(crate) fn to_write_batch(b: &StateBatch) -> write_request::StateBatch {
    write_request::StateBatch::default()
        .with_first_offset(b.first_offset)
        .with_last_offset(b.last_offset)
        .with_delivery_state(b.delivery_state)
        .with_delivery_count(b.delivery_count)
}

/// A read answer's batch, as the state holds it.
pub(crate) fn from_read_batch(b: &read_response::StateBatch) -> StateBatch {
    StateBatch {
        first_offset: b.first_offset,
        last_offset: b.last_offset,
        delivery_state: b.delivery_state,
        delivery_count: b.delivery_count,
    }
}

/// A read answer for one partition; no state is answered with start
/// offset -1, as Kafka answers a share partition never initialized.
pub(crate) fn read_result(
    partition: i32,
    state: Result<Option<ShareState>, ResponseError>,
) -> read_response::PartitionResult {
    let r = read_response::PartitionResult::default().with_partition(partition);
    match state {
        Ok(Some(s)) => r
            .with_state_epoch(s.state_epoch)
            .with_start_offset(s.start_offset)
            .with_state_batches(
                s.batches
                    .iter()
                    .map(|b| {
                        read_response::StateBatch::default()
                            .with_first_offset(b.first_offset)
                            .with_last_offset(b.last_offset)
                            .with_delivery_state(b.delivery_state)
                            .with_delivery_count(b.delivery_count)
                    })
                    .collect(),
            ),
        Ok(None) => r.with_state_epoch(-1).with_start_offset(-1),
        Err(e) => r.with_error_code(e.code()),
    }
}

/// Every partition of a read, answered with `error`.
pub(crate) fn failed_reads(
    req: &ReadShareGroupStateRequest,
    error: ResponseError,
) -> Vec<ReadStateResult> {
    req.topics
        .iter()
        .map(|t| {
            ReadStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| read_result(p.partition, Err(error)))
                        .collect(),
                )
        })
        .collect()
}

fn key(group: &str, topic_id: Uuid, partition: i32) -> StateKey {
    StateKey {
        group: group.to_string(),
        topic_id,
        partition,
    }
}

/// The states of `req_topics`' partitions (topic id, partitions), read on
/// the blocking pool, answered per partition by `answer` and per topic by
/// `topic`; None if the pool failed.
async fn read_each<P: Send + 'static, T: Send + 'static>(
    broker: &Arc<Broker>,
    group: String,
    req_topics: Vec<(Uuid, Vec<i32>)>,
    answer: fn(i32, Result<Option<ShareState>, ResponseError>) -> P,
    topic: fn(Uuid, Vec<P>) -> T,
) -> Option<Vec<T>> {
    blocking(broker, move |b| {
        req_topics
            .into_iter()
            .map(|(topic_id, partitions)| {
                let answers = partitions
                    .into_iter()
                    .map(|p| answer(p, b.share_coordinator.read(&key(&group, topic_id, p))))
                    .collect();
                topic(topic_id, answers)
            })
            .collect()
    })
    .await
    .ok()
}

pub async fn read(
    broker: &Arc<Broker>,
    req: ReadShareGroupStateRequest,
) -> ReadShareGroupStateResponse {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            (
                t.topic_id,
                t.partitions.iter().map(|p| p.partition).collect(),
            )
        })
        .collect();
    let topic = |id, partitions| {
        ReadStateResult::default()
            .with_topic_id(id)
            .with_partitions(partitions)
    };
    let group = req.group_id.to_string();
    let results = read_each(broker, group, topics, read_result, topic)
        .await
        .unwrap_or_else(|| failed_reads(&req, ResponseError::UnknownServerError));
    ReadShareGroupStateResponse::default().with_results(results)
}

pub async fn write(
    broker: &Arc<Broker>,
    req: WriteShareGroupStateRequest,
) -> WriteShareGroupStateResponse {
    let group = req.group_id.to_string();
    let writes: Vec<(StateKey, StateWrite)> = req
        .topics
        .iter()
        .flat_map(|t| {
            let group = &group;
            t.partitions.iter().map(move |p| {
                let write = StateWrite {
                    state_epoch: p.state_epoch,
                    leader_epoch: p.leader_epoch,
                    start_offset: p.start_offset,
                    batches: p
                        .state_batches
                        .iter()
                        .map(|b| StateBatch {
                            first_offset: b.first_offset,
                            last_offset: b.last_offset,
                            delivery_state: b.delivery_state,
                            delivery_count: b.delivery_count,
                        })
                        .collect(),
                };
                (key(group, t.topic_id, p.partition), write)
            })
        })
        .collect();
    let outcomes = write_local(broker, writes).await;
    let mut results: Vec<WriteStateResult> = Vec::new();
    for (key, outcome) in outcomes {
        let r = WriteResult::default()
            .with_partition(key.partition)
            .with_error_code(outcome.err().map_or(0, |e| e.code()));
        match results.last_mut() {
            Some(t) if t.topic_id == key.topic_id => t.partitions.push(r),
            _ => results.push(
                WriteStateResult::default()
                    .with_topic_id(key.topic_id)
                    .with_partitions(vec![r]),
            ),
        }
    }
    WriteShareGroupStateResponse::default().with_results(results)
}

/// Keys' partitions grouped into their topics, as share state requests and
/// responses list them (keys of a topic come together, as a request lists
/// them or a sort puts them); `topic` builds one from its id and partitions.
pub(crate) fn by_topic<'k, P, T>(
    parts: impl IntoIterator<Item = (&'k StateKey, P)>,
    topic: impl Fn(Uuid, Vec<P>) -> T,
) -> Vec<T> {
    let mut topics: Vec<(Uuid, Vec<P>)> = Vec::new();
    for (k, p) in parts {
        match topics.last_mut() {
            Some((id, partitions)) if *id == k.topic_id => partitions.push(p),
            _ => topics.push((k.topic_id, vec![p])),
        }
    }
    topics.into_iter().map(|(id, ps)| topic(id, ps)).collect()
}

/// A change of one key's state on its coordinator: where it was appended
/// (None: nothing to append).
type StateOp<T> =
    fn(&ShareCoordinator, &StateKey, T) -> Result<Option<(TopicPartition, i64)>, ResponseError>;

/// Applies `op` to each key's state on this broker, all in one trip to the
/// blocking pool, then waits once per state partition until its ISR has
/// its last append: each key is acknowledged only then (a key `op` left
/// unchanged at once).
async fn apply_locally<T: Send + 'static>(
    broker: &Arc<Broker>,
    items: Vec<(StateKey, T)>,
    op: StateOp<T>,
) -> Vec<(StateKey, Result<(), ResponseError>)> {
    let keys: Vec<StateKey> = items.iter().map(|(k, _)| k.clone()).collect();
    let Ok(applied) = blocking(broker, move |b| {
        items
            .into_iter()
            .map(|(key, item)| {
                let appended = op(&b.share_coordinator, &key, item);
                (key, appended)
            })
            .collect::<Vec<_>>()
    })
    .await
    else {
        return keys
            .into_iter()
            .map(|k| (k, Err(ResponseError::UnknownServerError)))
            .collect();
    };
    let mut ends: BTreeMap<TopicPartition, i64> = BTreeMap::new();
    for (_, a) in &applied {
        if let Ok(Some((tp, end))) = a {
            let last = ends.entry(tp.clone()).or_insert(*end);
            *last = (*last).max(*end);
        }
    }
    let mut replicated: BTreeMap<TopicPartition, Result<(), ResponseError>> = BTreeMap::new();
    for (tp, end) in ends {
        let outcome = broker.share_coordinator.replicated(&tp, end).await;
        replicated.insert(tp, outcome);
    }
    applied
        .into_iter()
        .map(|(k, a)| {
            let outcome = match a {
                Ok(Some((tp, _))) => replicated[&tp],
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            (k, outcome)
        })
        .collect()
}

/// Writes states this broker coordinates, acknowledged once each state
/// partition's ISR has them.
pub(crate) async fn write_local(
    broker: &Arc<Broker>,
    writes: Vec<(StateKey, StateWrite)>,
) -> Vec<(StateKey, Result<(), ResponseError>)> {
    apply_locally(broker, writes, |c, key, write| {
        c.write(key, &write).map(Some)
    })
    .await
}

/// InitializeShareGroupState v0: each named share partition's state starts
/// over at the given offset, in a new state epoch.
pub async fn initialize(
    broker: &Arc<Broker>,
    req: InitializeShareGroupStateRequest,
) -> InitializeShareGroupStateResponse {
    let group = req.group_id.to_string();
    let starts: Vec<(StateKey, i64)> = req
        .topics
        .iter()
        .flat_map(|t| {
            let group = &group;
            t.partitions
                .iter()
                .map(move |p| (key(group, t.topic_id, p.partition), p.start_offset))
        })
        .collect();
    let outcomes = initialize_local(broker, starts).await;
    let results = by_topic(
        outcomes.iter().map(|(k, outcome)| {
            let p = InitializeResult::default()
                .with_partition(k.partition)
                .with_error_code(outcome.err().map_or(0, |e| e.code()));
            (k, p)
        }),
        |id, ps| {
            InitializeStateResult::default()
                .with_topic_id(id)
                .with_partitions(ps)
        },
    );
    InitializeShareGroupStateResponse::default().with_results(results)
}

/// InitializeShareGroupState on this broker, each state acknowledged once
/// its state partition's ISR has it.
pub(crate) async fn initialize_local(
    broker: &Arc<Broker>,
    starts: Vec<(StateKey, i64)>,
) -> Vec<(StateKey, Result<(), ResponseError>)> {
    apply_locally(broker, starts, |c, key, start| {
        c.initialize(key, start).map(Some)
    })
    .await
}

/// DeleteShareGroupState v0: each named share partition's state is
/// forgotten (see `StateShard::delete`).
pub async fn delete(
    broker: &Arc<Broker>,
    req: DeleteShareGroupStateRequest,
) -> DeleteShareGroupStateResponse {
    let group = req.group_id.to_string();
    let keys: Vec<StateKey> = req
        .topics
        .iter()
        .flat_map(|t| {
            let group = &group;
            t.partitions
                .iter()
                .map(move |p| key(group, t.topic_id, p.partition))
        })
        .collect();
    let outcomes = delete_local(broker, keys).await;
    let results = by_topic(
        outcomes.iter().map(|(k, outcome)| {
            let r = DeleteResult::default()
                .with_partition(k.partition)
                .with_error_code(outcome.err().map_or(0, |e| e.code()));
            (k, r)
        }),
        |id, rs| {
            DeleteStateResult::default()
                .with_topic_id(id)
                .with_partitions(rs)
        },
    );
    DeleteShareGroupStateResponse::default().with_results(results)
}

/// Every partition of a delete, answered with `error`.
pub(crate) fn failed_deletes(
    req: &DeleteShareGroupStateRequest,
    error: ResponseError,
) -> Vec<DeleteStateResult> {
    req.topics
        .iter()
        .map(|t| {
            DeleteStateResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            DeleteResult::default()
                                .with_partition(p.partition)
                                .with_error_code(error.code())
                        })
                        .collect(),
                )
        })
        .collect()
}

/// DeleteShareGroupState on this broker, each deletion acknowledged once
/// its state partition's ISR has it.
pub(crate) async fn delete_local(
    broker: &Arc<Broker>,
    keys: Vec<StateKey>,
) -> Vec<(StateKey, Result<(), ResponseError>)> {
    let items = keys.into_iter().map(|k| (k, ())).collect();
    apply_locally(broker, items, |c, key, ()| c.delete(key)).await
}

/// A state summary for one partition: epochs and start, no batches; no
/// state is answered as a read answers it (epoch and start -1).
pub(crate) fn summary_result(
    partition: i32,
    state: Result<Option<ShareState>, ResponseError>,
) -> SummaryResult {
    let r = SummaryResult::default().with_partition(partition);
    match state {
        Ok(Some(s)) => r
            .with_state_epoch(s.state_epoch)
            .with_leader_epoch(s.leader_epoch)
            .with_start_offset(s.start_offset),
        Ok(None) => r
            .with_state_epoch(-1)
            .with_leader_epoch(-1)
            .with_start_offset(-1),
        Err(e) => r.with_error_code(e.code()),
    }
}

/// Every partition of a summary read, answered with `error`.
pub(crate) fn failed_summaries(
    req: &ReadShareGroupStateSummaryRequest,
    error: ResponseError,
) -> Vec<ReadStateSummaryResult> {
    req.topics
        .iter()
        .map(|t| {
            ReadStateSummaryResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| summary_result(p.partition, Err(error)))
                        .collect(),
                )
        })
        .collect()
}

/// Each share partition's delivery complete count (KIP-1226), by topic id
/// and partition, for ReadShareGroupStateSummary v1.
pub type DeliveryCounts = BTreeMap<(Uuid, i32), i32>;

/// ReadShareGroupStateSummary v0-v1: each named share partition's epochs
/// and start offset, and for v1 the records past it done with.
pub async fn read_summary(
    broker: &Arc<Broker>,
    req: ReadShareGroupStateSummaryRequest,
) -> (ReadShareGroupStateSummaryResponse, DeliveryCounts) {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            (
                t.topic_id,
                t.partitions.iter().map(|p| p.partition).collect(),
            )
        })
        .collect();
    let answer = |partition, state: Result<Option<ShareState>, ResponseError>| {
        let count = match &state {
            Ok(Some(s)) => Some(s.delivery_complete_count()),
            _ => None,
        };
        (summary_result(partition, state), count)
    };
    let topic = |id, answers| (id, answers);
    let group = req.group_id.to_string();
    let mut counts = DeliveryCounts::new();
    let results = match read_each(broker, group, topics, answer, topic).await {
        Some(read) => read
            .into_iter()
            .map(|(id, answers): (Uuid, Vec<(SummaryResult, Option<i64>)>)| {
                let partitions = answers
                    .into_iter()
                    .map(|(result, count)| {
                        if let Some(c) = count {
                            counts.insert(
                                (id, result.partition),
                                i32::try_from(c).unwrap_or(i32::MAX),
                            );
                        }
                        result
                    })
                    .collect();
                ReadStateSummaryResult::default()
                    .with_topic_id(id)
                    .with_partitions(partitions)
            })
            .collect(),
        None => failed_summaries(&req, ResponseError::UnknownServerError),
    };
    (
        ReadShareGroupStateSummaryResponse::default().with_results(results),
        counts,
    )
}
