//! Leader-epoch bumps of the mirror partitions this broker leads, batched:
//! every bump asked while a controller commit is in flight goes into the
//! next one, so a failover of N partitions costs a handful of commits
//! instead of N (as Kafka's controller batches its partition changes).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ottla_controller::{Controller, ControllerResult};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// One partition's bump: raise `partition` of `topic_id`, whose epoch this
/// broker last saw as `seen_epoch`, to at least `at_least`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochBump {
    pub topic_id: Uuid,
    pub partition: i32,
    pub seen_epoch: i32,
    pub at_least: i32,
}

type Asked = (EpochBump, oneshot::Sender<ControllerResult<i32>>);

/// Hands bumps to one task that commits them in batches.
pub struct EpochBumps {
    asks: mpsc::UnboundedSender<Asked>,
    commits: Arc<AtomicU64>,
}

impl EpochBumps {
    /// Starts the batching task on the controller's runtime (callable from
    /// any thread); it ends when this handle is dropped.
    pub fn start(controller: Arc<Controller>, node_id: i32) -> Self {
        let (asks, queue) = mpsc::unbounded_channel();
        let commits = Arc::new(AtomicU64::new(0));
        controller.spawn(commit_batches(
            controller.clone(),
            node_id,
            queue,
            commits.clone(),
        ));
        Self { asks, commits }
    }

    /// Controller calls made so far (each commits one batch of bumps).
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// The partition's new epoch, or why the controller refused it.
    pub async fn bump(&self, bump: EpochBump) -> ControllerResult<i32> {
        let (reply, answer) = oneshot::channel();
        let stopped = || {
            ottla_controller::ControllerError::new(
                kafka_protocol::error::ResponseError::BrokerNotAvailable,
                "the broker is stopping",
            )
        };
        self.asks.send((bump, reply)).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn commit_batches(
    controller: Arc<Controller>,
    node_id: i32,
    mut queue: mpsc::UnboundedReceiver<Asked>,
    commits: Arc<AtomicU64>,
) {
    let mut batch = Vec::new();
    while queue.recv_many(&mut batch, usize::MAX).await > 0 {
        let asked: Vec<(Uuid, i32, i32, i32)> = batch
            .iter()
            .map(|(b, _)| (b.topic_id, b.partition, b.seen_epoch, b.at_least))
            .collect();
        let results = controller.bump_leader_epochs(node_id, &asked).await;
        commits.fetch_add(1, Ordering::Relaxed);
        for ((_, reply), result) in batch.drain(..).zip(results) {
            let _ = reply.send(result);
        }
    }
}
