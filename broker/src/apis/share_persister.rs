//! The share partition leader's side of the share coordinator (Kafka's
//! DefaultStatePersister): a share partition's state is read when this
//! leader first delivers from it, and written, whole, before
//! acknowledgements are answered; writes go to each state's coordinator,
//! one request per coordinator broker (directly when it is this one).

use std::collections::BTreeMap;
use std::sync::Arc;

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
use kafka_protocol::messages::read_share_group_state_summary_request::{
    PartitionData as SummaryPartition, ReadStateSummaryData,
};
use kafka_protocol::messages::write_share_group_state_request::{
    PartitionData as WritePartition, WriteStateData,
};
use kafka_protocol::messages::{
    DeleteShareGroupStateRequest, InitializeShareGroupStateRequest, ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest, WriteShareGroupStateRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};
use ottla_share::registry::Entry;
use ottla_share::SharePartitionKey;
use ottla_share_coordinator::{ShareState, StateKey, StateWrite};

use crate::apis::share_state::{
    delete_local, from_read_batch, initialize_local, to_write_batch, write_local,
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
    let mut outcomes = Vec::with_capacity(partitions.len());
    let mut by_node: BTreeMap<i32, Vec<ToPersist>> = BTreeMap::new();
    for p in partitions {
        match coordinator_of(broker, &p.key).await {
            Ok(node) => by_node.entry(node).or_default().push(p),
            Err(e) => outcomes.push((p.key, Err(e))),
        }
    }
    for (node, mut group) in by_node {
        group.sort_by(|a, b| a.key.cmp(&b.key));
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

/// Starts `key`'s persisted state over at `start_offset`
/// (InitializeShareGroupState), at its coordinator.
pub(crate) async fn initialize(
    broker: &Arc<Broker>,
    key: &StateKey,
    start_offset: i64,
) -> Result<(), ResponseError> {
    let node = coordinator_of(broker, key).await?;
    if node == broker.node_id() {
        return initialize_local(broker, key.clone(), start_offset).await;
    }
    let req = InitializeShareGroupStateRequest::default()
        .with_group_id(StrBytes::from_string(key.group.clone()))
        .with_topics(vec![InitializeStateData::default()
            .with_topic_id(key.topic_id)
            .with_partitions(vec![InitializePartition::default()
                .with_partition(key.partition)
                .with_start_offset(start_offset)])]);
    let r = ask(broker, node, &req).await?;
    one_outcome(
        r.results
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code),
    )
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

/// The outcome of the one partition a coordinator was asked about.
fn one_outcome(mut codes: impl Iterator<Item = i16>) -> Result<(), ResponseError> {
    match codes.next() {
        Some(0) => Ok(()),
        Some(c) => {
            Err(ResponseError::try_from_code(c).unwrap_or(ResponseError::CoordinatorNotAvailable))
        }
        None => Err(ResponseError::CoordinatorNotAvailable),
    }
}

/// Forgets the persisted state of `keys`, all of `group`
/// (DeleteShareGroupState): one request per coordinator broker, directly
/// when it is this one. The first failure, if any.
pub(crate) async fn delete(
    broker: &Arc<Broker>,
    group: &str,
    keys: Vec<StateKey>,
) -> Result<(), ResponseError> {
    // Every key's coordinator, in one trip to the blocking pool.
    let located = blocking(broker, move |b| {
        keys.into_iter()
            .map(|k| b.share_coordinator.coordinator_of(&k).map(|node| (node, k)))
            .collect::<Result<Vec<_>, _>>()
    })
    .await
    .map_err(|_| ResponseError::UnknownServerError)??;
    let mut by_node: BTreeMap<i32, Vec<StateKey>> = BTreeMap::new();
    for (node, key) in located {
        by_node.entry(node).or_default().push(key);
    }
    for (node, mut keys) in by_node {
        if node == broker.node_id() {
            for (_, outcome) in delete_local(broker, keys).await {
                outcome?;
            }
            continue;
        }
        keys.sort();
        let mut topics: Vec<DeleteStateData> = Vec::new();
        for k in &keys {
            let p = DeletePartition::default().with_partition(k.partition);
            match topics.last_mut() {
                Some(t) if t.topic_id == k.topic_id => t.partitions.push(p),
                _ => topics.push(
                    DeleteStateData::default()
                        .with_topic_id(k.topic_id)
                        .with_partitions(vec![p]),
                ),
            }
        }
        let req = DeleteShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(group.to_string()))
            .with_topics(topics);
        let r = ask(broker, node, &req).await?;
        let codes: Vec<i16> = r
            .results
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .collect();
        if codes.len() != keys.len() {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        for code in codes {
            one_outcome(std::iter::once(code))?;
        }
    }
    Ok(())
}

/// `key`'s start offset (ReadShareGroupStateSummary), -1 where unset or
/// never initialized.
pub(crate) async fn start_offset(
    broker: &Arc<Broker>,
    key: &StateKey,
) -> Result<i64, ResponseError> {
    let node = coordinator_of(broker, key).await?;
    if node == broker.node_id() {
        let key = key.clone();
        let state = blocking(broker, move |b| b.share_coordinator.read(&key))
            .await
            .map_err(|_| ResponseError::UnknownServerError)??;
        return Ok(state.map_or(-1, |s| s.start_offset));
    }
    let req = ReadShareGroupStateSummaryRequest::default()
        .with_group_id(StrBytes::from_string(key.group.clone()))
        .with_topics(vec![ReadStateSummaryData::default()
            .with_topic_id(key.topic_id)
            .with_partitions(vec![
                SummaryPartition::default().with_partition(key.partition)
            ])]);
    let r = ask(broker, node, &req).await?;
    let p = r.results.iter().flat_map(|t| &t.partitions).next();
    one_outcome(p.map(|p| p.error_code).into_iter())?;
    Ok(p.map_or(-1, |p| p.start_offset))
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
        let mut topics: Vec<WriteStateData> = Vec::new();
        for (k, w) in &writes {
            let p = WritePartition::default()
                .with_partition(k.partition)
                .with_state_epoch(w.state_epoch)
                .with_leader_epoch(w.leader_epoch)
                .with_start_offset(w.start_offset)
                .with_state_batches(w.batches.iter().map(to_write_batch).collect());
            match topics.last_mut() {
                Some(t) if t.topic_id == k.topic_id => t.partitions.push(p),
                _ => topics.push(
                    WriteStateData::default()
                        .with_topic_id(k.topic_id)
                        .with_partitions(vec![p]),
                ),
            }
        }
        let req = WriteShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_string(group))
            .with_topics(topics);
        match broker.brokers.send(node, 0, &req).await {
            Ok(r) => {
                let codes: BTreeMap<(uuid::Uuid, i32), i16> = r
                    .results
                    .iter()
                    .flat_map(|t| {
                        t.partitions
                            .iter()
                            .map(move |p| ((t.topic_id, p.partition), p.error_code))
                    })
                    .collect();
                for (k, _) in writes {
                    let code = codes.get(&(k.topic_id, k.partition)).copied();
                    let outcome = match code {
                        Some(0) => Ok(()),
                        Some(c) => Err(ResponseError::try_from_code(c)
                            .unwrap_or(ResponseError::CoordinatorNotAvailable)),
                        None => Err(ResponseError::CoordinatorNotAvailable),
                    };
                    out.push((k, outcome));
                }
            }
            Err(_) => out.extend(
                writes
                    .into_iter()
                    .map(|(k, _)| (k, Err(ResponseError::CoordinatorNotAvailable))),
            ),
        }
    }
    out
}
