//! Mirror state writes, batched per `__mirror_state` coordinator: every
//! write asked while one to the same coordinator is in flight goes into the
//! next, as one WriteMirrorStates (or, when this broker is the
//! coordinator, one local append per `__mirror_state` partition). A
//! failover stores three states per partition; one at a time, 10,000
//! partitions were 30,000 round trips and ISR waits.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

use kafka_protocol::error::ResponseError;
use ottla_protocol::mirror::admin::FailoverSummary;
use ottla_protocol::mirror::states::{
    WriteMirrorStatesPartition, WriteMirrorStatesRequest, WriteMirrorStatesTopic, NO_EPOCH,
};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::manager::MirrorServices;
use crate::records::{
    LastMirroredEpochValue, MirrorPartitionKey, MirrorStateValue, PartitionStateValue,
};
use crate::state::MirrorPartitionState as State;

/// At most this many partitions' writes go in one request.
const MAX_BATCH: usize = 5_000;

/// One mirror partition's state (and last mirrored epoch) as of its leader
/// epoch `leader_epoch`.
#[derive(Debug, Clone)]
pub struct StateWrite {
    pub key: MirrorPartitionKey,
    pub leader_epoch: i32,
    pub state: State,
    pub previous: State,
    pub error: Option<String>,
    pub lme: Option<i32>,
    /// With STOPPED: what failover did.
    pub failover: Option<FailoverSummary>,
}

impl StateWrite {
    /// The values the coordinator stores.
    pub fn values(&self) -> Vec<MirrorStateValue> {
        let state = PartitionStateValue {
            state: self.state,
            previous_state: self.previous,
            leader_epoch: self.leader_epoch,
            error_message: self.error.clone(),
            unknown_tagged_fields: Default::default(),
        };
        let state = state.with_failover(self.failover.as_ref());
        let mut values = vec![MirrorStateValue::PartitionState(state)];
        if let Some(lme) = self.lme {
            values.push(MirrorStateValue::LastMirroredEpoch(
                LastMirroredEpochValue {
                    leader_epoch: self.leader_epoch,
                    last_mirrored_epoch: lme,
                    unknown_tagged_fields: Default::default(),
                },
            ));
        }
        values
    }

    fn wire(&self) -> WriteMirrorStatesPartition {
        WriteMirrorStatesPartition {
            partition_index: self.key.partition,
            leader_epoch: self.leader_epoch,
            state: self.state.wire_value(),
            last_mirrored_epoch: self.lme.unwrap_or(NO_EPOCH),
            error_message: self.error.clone(),
            ..Default::default()
        }
        .with_failover(self.failover.as_ref())
    }
}

/// Why a mirror partition's state was not stored.
#[derive(Debug)]
pub enum StateWriteError {
    /// A newer leader of the mirror partition wrote: this driver must stop.
    Fenced,
    /// Worth trying again (coordinator moving or unreachable, ISR behind).
    Retriable(String),
}

impl From<ResponseError> for StateWriteError {
    fn from(e: ResponseError) -> Self {
        match e {
            ResponseError::FencedLeaderEpoch => Self::Fenced,
            other => Self::Retriable(format!("{other:?}")),
        }
    }
}

impl std::fmt::Display for StateWriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fenced => f.write_str("fenced by a newer leader of the mirror partition"),
            Self::Retriable(why) => f.write_str(why),
        }
    }
}

type Written = Result<(), StateWriteError>;
type Asked = (StateWrite, oneshot::Sender<Written>);

/// One batching task per coordinator, started on its first write.
#[derive(Default)]
pub struct StateWrites {
    queues: Mutex<HashMap<i32, mpsc::UnboundedSender<Asked>>>,
}

impl StateWrites {
    /// Stores `write` through `coordinator`, with whatever else is asked of
    /// it meanwhile.
    pub async fn write(
        &self,
        services: &Arc<MirrorServices>,
        coordinator: i32,
        write: StateWrite,
    ) -> Written {
        let (reply, answer) = oneshot::channel();
        let queue = self
            .queues
            .lock()
            .entry(coordinator)
            .or_insert_with(|| {
                let (queue, asked) = mpsc::unbounded_channel();
                tokio::spawn(write_batches(Arc::downgrade(services), coordinator, asked));
                queue
            })
            .clone();
        let stopped = || StateWriteError::Retriable("the broker is stopping".into());
        queue.send((write, reply)).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn write_batches(
    services: Weak<MirrorServices>,
    coordinator: i32,
    mut queue: mpsc::UnboundedReceiver<Asked>,
) {
    let mut batch = Vec::new();
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        // Drivers woken together (a failover wakes every partition's) ask
        // within one turn of the scheduler: let them, then take theirs too.
        tokio::task::yield_now().await;
        while batch.len() < MAX_BATCH {
            let Ok(asked) = queue.try_recv() else { break };
            batch.push(asked);
        }
        let Some(services) = services.upgrade() else {
            return;
        };
        let (writes, replies): (Vec<StateWrite>, Vec<_>) = batch.drain(..).unzip();
        let results = if coordinator == services.node_id {
            let values = writes.iter().map(|w| (w.key.clone(), w.values())).collect();
            let written = services.states.write_many(values).await;
            written.into_iter().map(|r| r.map_err(Into::into)).collect()
        } else {
            write_remote(&services, coordinator, &writes).await
        };
        for (reply, result) in replies.into_iter().zip(results) {
            let _ = reply.send(result);
        }
    }
}

/// `writes` through WriteMirrorStates, one request per mirror; results in
/// the order of `writes`.
async fn write_remote(
    services: &MirrorServices,
    coordinator: i32,
    writes: &[StateWrite],
) -> Vec<Written> {
    let mut by_mirror: BTreeMap<&str, BTreeMap<Uuid, Vec<WriteMirrorStatesPartition>>> =
        BTreeMap::new();
    for w in writes {
        by_mirror
            .entry(w.key.mirror_name.as_str())
            .or_default()
            .entry(w.key.topic_id)
            .or_default()
            .push(w.wire());
    }
    let mut codes: HashMap<(String, Uuid, i32), Result<i16, String>> = HashMap::new();
    for (mirror, topics) in by_mirror {
        let request = WriteMirrorStatesRequest {
            mirror_name: mirror.to_string(),
            topics: topics
                .into_iter()
                .map(|(topic_id, partitions)| WriteMirrorStatesTopic {
                    topic_id,
                    partitions,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        match services.brokers.send_mirror(coordinator, &request).await {
            Ok(response) => {
                for t in response.topics {
                    for p in t.partitions {
                        let key = (mirror.to_string(), t.topic_id, p.partition_index);
                        codes.insert(key, Ok(p.error_code));
                    }
                }
            }
            Err(e) => {
                for t in &request.topics {
                    for p in &t.partitions {
                        let key = (mirror.to_string(), t.topic_id, p.partition_index);
                        codes.insert(key, Err(e.clone()));
                    }
                }
            }
        }
    }
    writes
        .iter()
        .map(|w| {
            let key = (w.key.mirror_name.clone(), w.key.topic_id, w.key.partition);
            match codes.remove(&key) {
                Some(Ok(code)) => match ResponseError::try_from_code(code) {
                    None => Ok(()),
                    Some(e) => Err(e.into()),
                },
                Some(Err(e)) => Err(StateWriteError::Retriable(e)),
                None => Err(ResponseError::UnknownServerError.into()),
            }
        })
        .collect()
}
