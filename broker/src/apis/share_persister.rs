//! The share partition leader's side of the share coordinator (Kafka's
//! DefaultStatePersister): a share partition's state is read when this
//! leader first delivers from it, and written, whole, before
//! acknowledgements are answered; writes go to each state's coordinator,
//! one request per coordinator broker (directly when it is this one).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_share_group_state_request::{
    DeleteStateData, PartitionData as DeletePartition,
};
use kafka_protocol::messages::initialize_share_group_state_request::{
    InitializeStateData, PartitionData as InitializePartition,
};
use kafka_protocol::messages::read_share_group_state_request::{
    PartitionData as ReadPartition, ReadStateData,
};
use kafka_protocol::messages::write_share_group_state_request::{
    PartitionData as WritePartition, WriteStateData,
};
use kafka_protocol::messages::{
    DeleteShareGroupStateRequest, InitializeShareGroupStateRequest, ReadShareGroupStateRequest,
    WriteShareGroupStateRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};
use ottla_share::registry::Entry;
use ottla_share::SharePartitionKey;
use ottla_share_coordinator::{ShareState, StateKey, StateWrite};

use crate::apis::share_state::{
    by_topic, delete_local, from_read_batch, initialize_local, to_write_batch, write_local,
};
use crate::blocking::blocking;
use crate::broker::Broker;

/// The node coordinating `key`'s state (the state topic is created on
/// first use).
async fn coordinator_of(broker: &Arc<Broker>, key: &StateKey) -> Result<i32, ResponseError> {
    let key = key.clone();
    blocking(broker, move |b| b.share_coordinator.coordinator_of(&key))
        .await
        .map_err(|_| ResponseError::UnknownServerError)?
}

/// How long an admin call waits out a share coordinator that is not ready:
/// the state topic being created on first use or loaded, or its leadership
/// moving. Kafka's persister retries these too, with backoff.
const RETRY_FOR: Duration = Duration::from_secs(10);

fn retriable(e: ResponseError) -> bool {
    matches!(
        e,
        ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
            | ResponseError::NotCoordinator
    )
}

/// Runs `attempt` on `items`, then again, backing off, on those that
/// failed with a retriable error, for at most [`RETRY_FOR`]; each item's
/// last outcome.
async fn retrying<T: Clone, V, Fut>(
    items: Vec<(StateKey, T)>,
    mut attempt: impl FnMut(Vec<(StateKey, T)>) -> Fut,
) -> Vec<(StateKey, Result<V, ResponseError>)>
where
    Fut: Future<Output = Vec<(StateKey, Result<V, ResponseError>)>>,
{
    let deadline = Instant::now() + RETRY_FOR;
    let mut backoff = Duration::from_millis(50);
    let mut pending = items;
    let mut done = Vec::with_capacity(pending.len());
    loop {
        let inputs: BTreeMap<StateKey, T> = pending.iter().cloned().collect();
        let mut again = Vec::new();
        for (k, outcome) in attempt(pending).await {
            let retry = match &outcome {
                Err(e) if retriable(*e) && Instant::now() + backoff < deadline => inputs.get(&k),
                _ => None,
            };
            match retry {
                Some(input) => again.push((k, input.clone())),
                None => done.push((k, outcome)),
            }
        }
        if again.is_empty() {
            return done;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
        pending = again;
    }
}

/// Each item's coordinator broker, all found in one trip to the blocking
/// pool; the items whose coordinator could not be found, with why.
async fn by_coordinator<T: Send + 'static>(
    broker: &Arc<Broker>,
    items: Vec<(StateKey, T)>,
) -> (
    BTreeMap<i32, Vec<(StateKey, T)>>,
    Vec<(StateKey, ResponseError)>,
) {
    let keys: Vec<StateKey> = items.iter().map(|(k, _)| k.clone()).collect();
    let located = blocking(broker, move |b| {
        items
            .into_iter()
            .map(|(k, item)| (b.share_coordinator.coordinator_of(&k), k, item))
            .collect::<Vec<_>>()
    })
    .await;
    let mut by_node: BTreeMap<i32, Vec<(StateKey, T)>> = BTreeMap::new();
    let mut failed = Vec::new();
    match located {
        Ok(located) => {
            for (node, k, item) in located {
                match node {
                    Ok(node) => by_node.entry(node).or_default().push((k, item)),
                    Err(e) => failed.push((k, e)),
                }
            }
        }
        Err(_) => failed.extend(
            keys.into_iter()
                .map(|k| (k, ResponseError::UnknownServerError)),
        ),
    }
    for items in by_node.values_mut() {
        items.sort_by(|a, b| a.0.cmp(&b.0));
    }
    (by_node, failed)
}

/// A coordinator's answer by partition: its error code, and what else
/// `read` reads of it.
fn answered<T, P, V>(
    topics: &[T],
    partitions: impl Fn(&T) -> (uuid::Uuid, &Vec<P>),
    read: impl Fn(&P) -> (i32, i16, V),
) -> BTreeMap<(uuid::Uuid, i32), (i16, V)> {
    let mut by_partition = BTreeMap::new();
    for t in topics {
        let (topic_id, ps) = partitions(t);
        for p in ps {
            let (partition, code, value) = read(p);
            by_partition.insert((topic_id, partition), (code, value));
        }
    }
    by_partition
}

/// Each key's outcome from a coordinator's answer (its error code per
/// partition, and what else was read of it); a partition it did not
/// answer for failed.
fn outcomes<T, V: Copy>(
    asked: Vec<(StateKey, T)>,
    answered: &BTreeMap<(uuid::Uuid, i32), (i16, V)>,
) -> Vec<(StateKey, Result<V, ResponseError>)> {
    asked
        .into_iter()
        .map(|(k, _)| {
            let outcome = match answered.get(&(k.topic_id, k.partition)) {
                Some(&(0, v)) => Ok(v),
                Some(&(c, _)) => Err(ResponseError::try_from_code(c)
                    .unwrap_or(ResponseError::CoordinatorNotAvailable)),
                None => Err(ResponseError::CoordinatorNotAvailable),
            };
            (k, outcome)
        })
        .collect()
}

/// `key`'s persisted state; None for a share partition never initialized.
pub(crate) async fn read(
    broker: &Arc<Broker>,
    key: &StateKey,
) -> Result<Option<ShareState>, ResponseError> {
    let node = coordinator_of(broker, key).await?;
    if node == broker.node_id() {
        let key = key.clone();
        return blocking(broker, move |b| b.share_coordinator.read(&key))
            .await
            .map_err(|_| ResponseError::UnknownServerError)?;
    }
    let req = ReadShareGroupStateRequest::default()
        .with_group_id(StrBytes::from_string(key.group.clone()))
        .with_topics(vec![ReadStateData::default()
            .with_topic_id(key.topic_id)
            .with_partitions(vec![
                ReadPartition::default().with_partition(key.partition)
            ])]);
    let r = ask(broker, node, &req).await?;
    let p = r
        .results
        .iter()
        .flat_map(|t| &t.partitions)
        .next()
        .ok_or(ResponseError::CoordinatorNotAvailable)?;
    if p.error_code != 0 {
        return Err(ResponseError::try_from_code(p.error_code)
            .unwrap_or(ResponseError::CoordinatorNotAvailable));
    }
    // No state is start -1 at state epoch -1; deleted offsets keep their
    // state epoch (which fences older leaders) with the start unset.
    Ok(
        (p.start_offset >= 0 || p.state_epoch > 0).then(|| ShareState {
            state_epoch: p.state_epoch,
            leader_epoch: -1,
            start_offset: p.start_offset,
            batches: p.state_batches.iter().map(from_read_batch).collect(),
        }),
    )
}

/// One share partition's state to persist.
pub(crate) struct ToPersist {
    pub key: StateKey,
    pub entry: Arc<Entry>,
    pub leader_epoch: i32,
}

/// Persists the current state of each share partition; the outcome of
/// each. Each partition's write is taken under its `persisting` lock, so
/// that writes reach the coordinator in the order their states were.
pub(crate) async fn write(
    broker: &Arc<Broker>,
    partitions: Vec<ToPersist>,
) -> Vec<(StateKey, Result<(), ResponseError>)> {
    let items = partitions.into_iter().map(|p| (p.key.clone(), p)).collect();
    let (by_node, failed) = by_coordinator(broker, items).await;
    let mut outcomes: Vec<(StateKey, Result<(), ResponseError>)> =
        failed.into_iter().map(|(k, e)| (k, Err(e))).collect();
    for (node, group) in by_node {
        let group: Vec<ToPersist> = group.into_iter().map(|(_, p)| p).collect();
        let mut guards = Vec::with_capacity(group.len());
        for p in &group {
            guards.push(p.entry.persisting.lock().await);
        }
        let writes: Vec<(StateKey, StateWrite)> = group
            .iter()
            .map(|p| {
                let (start_offset, batches) = p.entry.state.lock().persisted();
                let write = StateWrite {
                    state_epoch: p.entry.state_epoch,
                    leader_epoch: p.leader_epoch,
                    start_offset,
                    batches,
                };
                (p.key.clone(), write)
            })
            .collect();
        if node == broker.node_id() {
            outcomes.extend(write_local(broker, writes).await);
        } else {
            outcomes.extend(write_remote(broker, node, writes).await);
        }
        drop(guards);
    }
    // The state was initialized again under these leaders' feet (an offset
    // reset): read it again on the next fetch.
    for (key, outcome) in &outcomes {
        if matches!(outcome, Err(ResponseError::FencedStateEpoch)) {
            broker.share_partitions.remove(&SharePartitionKey::new(
                &key.group,
                (key.topic_id, key.partition),
            ));
        }
    }
    outcomes
}

/// Starts each key's persisted state over at its start offset
/// (InitializeShareGroupState), all of `group`: one request per coordinator
/// broker, directly when it is this one.
pub(crate) async fn initialize(
    broker: &Arc<Broker>,
    group: &str,
    starts: Vec<(StateKey, i64)>,
) -> Vec<(StateKey, Result<(), ResponseError>)> {
    retrying(starts, |starts| initialize_once(broker, group, starts)).await
}

async fn initialize_once(
    broker: &Arc<Broker>,
    group: &str,
    starts: Vec<(StateKey, i64)>,
) -> Vec<(StateKey, Result<(), ResponseError>)> {
    let (by_node, failed) = by_coordinator(broker, starts).await;
    let mut out: Vec<_> = failed.into_iter().map(|(k, e)| (k, Err(e))).collect();
    for (node, starts) in by_node {
        if node == broker.node_id() {
            out.extend(initialize_local(broker, starts).await);
            continue;
        }
        let topics = by_topic(
            starts.iter().map(|(k, start)| {
                let p = InitializePartition::default()
                    .with_partition(k.partition)
                    .with_start_offset(*start);
                (k, p)
            }),
            |id, ps| {
                InitializeStateData::default()
                    .with_topic_id(id)
                    .with_partitions(ps)
            },
        );
        let req = InitializeShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(group.to_string()))
            .with_topics(topics);
        let answered = match ask(broker, node, &req).await {
            Ok(r) => answered(
                &r.results,
                |t| (t.topic_id, &t.partitions),
                |p| (p.partition, p.error_code, ()),
            ),
            Err(_) => BTreeMap::new(),
        };
        out.extend(outcomes(starts, &answered));
    }
    out
}

/// Asks share coordinator `node` (version 0 of each API);
/// COORDINATOR_NOT_AVAILABLE when it cannot be reached.
async fn ask<R: Request>(
    broker: &Broker,
    node: i32,
    req: &R,
) -> Result<R::Response, ResponseError> {
    broker
        .brokers
        .send(node, 0, req)
        .await
        .map_err(|_| ResponseError::CoordinatorNotAvailable)
}

/// Forgets the persisted state of `keys`, all of `group`
/// (DeleteShareGroupState): one request per coordinator broker, directly
/// when it is this one. The first failure, if any.
pub(crate) async fn delete(
    broker: &Arc<Broker>,
    group: &str,
    keys: Vec<StateKey>,
) -> Result<(), ResponseError> {
    let keys = keys.into_iter().map(|k| (k, ())).collect();
    let done = retrying(keys, |keys| delete_once(broker, group, keys)).await;
    done.into_iter().try_for_each(|(_, outcome)| outcome)
}

async fn delete_once(
    broker: &Arc<Broker>,
    group: &str,
    keys: Vec<(StateKey, ())>,
) -> Vec<(StateKey, Result<(), ResponseError>)> {
    let (by_node, failed) = by_coordinator(broker, keys).await;
    let mut out: Vec<_> = failed.into_iter().map(|(k, e)| (k, Err(e))).collect();
    for (node, keys) in by_node {
        if node == broker.node_id() {
            out.extend(delete_local(broker, keys.into_iter().map(|(k, ())| k).collect()).await);
            continue;
        }
        let topics = by_topic(
            keys.iter()
                .map(|(k, ())| (k, DeletePartition::default().with_partition(k.partition))),
            |id, ps| {
                DeleteStateData::default()
                    .with_topic_id(id)
                    .with_partitions(ps)
            },
        );
        let req = DeleteShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(group.to_string()))
            .with_topics(topics);
        let answered = match ask(broker, node, &req).await {
            Ok(r) => answered(
                &r.results,
                |t| (t.topic_id, &t.partitions),
                |p| (p.partition, p.error_code, ()),
            ),
            Err(_) => BTreeMap::new(),
        };
        out.extend(outcomes(keys, &answered));
    }
    out
}

/// What describing a share partition's offsets needs of its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Summary {
    /// -1 where unset or never initialized.
    pub start_offset: i64,
    /// The records past the start done with (KIP-1226), which the lag
    /// leaves out.
    pub delivery_complete: i64,
}

impl Summary {
    fn of(state: Option<&ShareState>) -> Self {
        match state {
            Some(s) => Self {
                start_offset: s.start_offset,
                delivery_complete: s.delivery_complete_count(),
            },
            None => Self {
                start_offset: -1,
                delivery_complete: 0,
            },
        }
    }
}

/// Each key's [`Summary`], all of `group`, one request per coordinator
/// broker. Other brokers are asked for the whole state
/// (ReadShareGroupState, which reads without side effects) and the count is
/// taken from its batches, as ReadShareGroupStateSummary v0 does not carry
/// it.
pub(crate) async fn summaries(
    broker: &Arc<Broker>,
    group: &str,
    keys: Vec<StateKey>,
) -> Vec<(StateKey, Result<Summary, ResponseError>)> {
    let keys = keys.into_iter().map(|k| (k, ())).collect();
    retrying(keys, |keys| summaries_once(broker, group, keys)).await
}

async fn summaries_once(
    broker: &Arc<Broker>,
    group: &str,
    keys: Vec<(StateKey, ())>,
) -> Vec<(StateKey, Result<Summary, ResponseError>)> {
    let (by_node, failed) = by_coordinator(broker, keys).await;
    let mut out: Vec<_> = failed.into_iter().map(|(k, e)| (k, Err(e))).collect();
    for (node, keys) in by_node {
        if node == broker.node_id() {
            let asked: Vec<StateKey> = keys.into_iter().map(|(k, ())| k).collect();
            let reading = asked.clone();
            let read = blocking(broker, move |b| {
                reading
                    .into_iter()
                    .map(|k| {
                        let state = b.share_coordinator.read(&k);
                        (k, state.map(|s| Summary::of(s.as_ref())))
                    })
                    .collect::<Vec<_>>()
            })
            .await;
            match read {
                Ok(read) => out.extend(read),
                Err(_) => out.extend(
                    asked
                        .into_iter()
                        .map(|k| (k, Err(ResponseError::UnknownServerError))),
                ),
            }
            continue;
        }
        let topics = by_topic(
            keys.iter()
                .map(|(k, ())| (k, ReadPartition::default().with_partition(k.partition))),
            |id, ps| {
                ReadStateData::default()
                    .with_topic_id(id)
                    .with_partitions(ps)
            },
        );
        let req = ReadShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(group.to_string()))
            .with_topics(topics);
        let answered = match ask(broker, node, &req).await {
            Ok(r) => answered(
                &r.results,
                |t| (t.topic_id, &t.partitions),
                |p| {
                    let state = (p.start_offset >= 0).then(|| ShareState {
                        start_offset: p.start_offset,
                        batches: p.state_batches.iter().map(from_read_batch).collect(),
                        ..ShareState::default()
                    });
                    (p.partition, p.error_code, Summary::of(state.as_ref()))
                },
            ),
            Err(_) => BTreeMap::new(),
        };
        out.extend(outcomes(keys, &answered));
    }
    out
}

async fn write_remote(
    broker: &Arc<Broker>,
    node: i32,
    writes: Vec<(StateKey, StateWrite)>,
) -> Vec<(StateKey, Result<(), ResponseError>)> {
    // One request per group (the request names one).
    let mut by_group: BTreeMap<String, Vec<(StateKey, StateWrite)>> = BTreeMap::new();
    for (k, w) in writes {
        by_group.entry(k.group.clone()).or_default().push((k, w));
    }
    let mut out = Vec::new();
    for (group, writes) in by_group {
        let topics = by_topic(
            writes.iter().map(|(k, w)| {
                let p = WritePartition::default()
                    .with_partition(k.partition)
                    .with_state_epoch(w.state_epoch)
                    .with_leader_epoch(w.leader_epoch)
                    .with_start_offset(w.start_offset)
                    .with_state_batches(w.batches.iter().map(to_write_batch).collect());
                (k, p)
            }),
            |id, ps| {
                WriteStateData::default()
                    .with_topic_id(id)
                    .with_partitions(ps)
            },
        );
        let req = WriteShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(group))
            .with_topics(topics);
        let answered = match ask(broker, node, &req).await {
            Ok(r) => answered(
                &r.results,
                |t| (t.topic_id, &t.partitions),
                |p| (p.partition, p.error_code, ()),
            ),
            Err(_) => BTreeMap::new(),
        };
        out.extend(outcomes(writes, &answered));
    }
    out
}
