//! The transaction coordinator: one shard per `__transaction_state`
//! partition this broker leads, found by the transactional id's hash. It
//! creates the topic when a client first looks for a coordinator, loads
//! shards (at start-up, or on first use of a partition hosted later),
//! finishes transactions a restart left prepared, and drives timeouts.
//!
//! The state machine follows Kafka's TransactionCoordinator. Every record it
//! writes to `__transaction_state` is on the partition's ISR before it
//! takes effect. EndTxn writes the markers before it answers, each
//! acknowledged once its partition's ISR has it (for up to
//! `request.timeout.ms`); a marker not acknowledged by then (a partition
//! offline, an ISR lagging, a leader gone) leaves the transaction prepared,
//! EndTxn still answers (the outcome is decided and stored), and the tick
//! sends the marker again to the partition's current leader.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use ottla_controller::{Controller, MetadataImage};
use ottla_storage::manager::TopicPartition;
use parking_lot::Mutex;
use tracing::{info, warn};

use super::config::{TxnConfig, TRANSACTION_STATE_TOPIC};
use super::markers::{Marker, Services};
use super::shard::TxnShard;
use super::state::{is_epoch_exhausted, TxnMetadata, TxnState, NO_PRODUCER_EPOCH};
use ottla_coordinator_common::internal_topics::InternalTopic;
use ottla_coordinator_common::lookup::{
    find_coordinator, partition_count, partition_for, CoordinatorNode,
};
use ottla_coordinator_common::partition_writer::{now_ms, PartitionWriter};
use ottla_coordinator_common::shards::LedShards;

pub struct TxnCoordinator {
    config: TxnConfig,
    controller: Arc<Controller>,
    replicas: Arc<dyn PartitionWriter>,
    shards: LedShards<TxnShard>,
    /// When idle transactional ids are next checked for expiration.
    next_expiration: Mutex<i64>,
}

impl TxnCoordinator {
    /// Loads every transaction log partition this broker hosts and leads.
    /// Blocking I/O; a partition that fails to load is retried on first
    /// use. The transactions they left prepared are completed by the tick:
    /// their markers wait for other brokers, which cannot reach this one
    /// before it serves.
    pub fn open(
        node_id: i32,
        config: TxnConfig,
        controller: Arc<Controller>,
        replicas: Arc<dyn PartitionWriter>,
    ) -> Self {
        let now = now_ms();
        let coordinator = Self {
            next_expiration: Mutex::new(now + config.remove_expired_interval_ms),
            config,
            controller,
            replicas,
            shards: LedShards::new(node_id, TRANSACTION_STATE_TOPIC),
        };
        coordinator.follow_leadership(&coordinator.controller.image());
        coordinator
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// How often the broker should call [`TxnCoordinator::tick`]: the
    /// precision of transaction timeouts and the retry period of markers.
    pub fn tick_interval(&self) -> Duration {
        Duration::from_millis(self.config.abort_timed_out_interval_ms.clamp(1, 1000) as u64)
    }

    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        partition_for(
            transactional_id,
            self.partition_count(&self.controller.image()),
        )
    }

    fn partition_count(&self, image: &MetadataImage) -> i32 {
        partition_count(image, TRANSACTION_STATE_TOPIC, self.config.topic_partitions)
    }

    /// The broker leading the transaction log partition of `transactional_id`.
    pub fn coordinator_id(&self, transactional_id: &str) -> Option<i32> {
        let image = self.controller.image();
        let topic = image.topic_by_name(TRANSACTION_STATE_TOPIC)?;
        let p = partition_for(transactional_id, topic.partitions.len() as i32);
        topic
            .partitions
            .get(&p)
            .map(|part| part.leader)
            .filter(|l| *l >= 0)
    }

    /// The broker coordinating `transactional_id`, as seen on `listener`
    /// (creating the transaction log on first use).
    pub fn find(
        &self,
        transactional_id: &str,
        listener: &str,
    ) -> Result<CoordinatorNode, ResponseError> {
        find_coordinator(
            &self.controller,
            &self.transaction_log(),
            transactional_id,
            listener,
        )
    }

    /// What Kafka enforces on the transaction log.
    fn transaction_log(&self) -> InternalTopic {
        InternalTopic {
            name: TRANSACTION_STATE_TOPIC,
            partitions: self.config.topic_partitions,
            replication_factor: self.config.topic_replication_factor,
            replication_factor_key: "transaction.state.log.replication.factor",
            min_insync_replicas: self.config.topic_min_isr,
            segment_bytes: i64::from(self.config.topic_segment_bytes),
            compression_type: "uncompressed",
            forbid_unclean_election: true,
        }
    }

    /// The shard owning `transactional_id`: NOT_COORDINATOR unless this
    /// broker leads its partition, COORDINATOR_LOAD_IN_PROGRESS while the
    /// partition's log is not open here yet.
    fn shard(&self, transactional_id: &str) -> Result<Arc<TxnShard>, ResponseError> {
        let image = self.controller.image();
        let p = partition_for(transactional_id, self.partition_count(&image));
        let replicas = self.replicas.clone();
        let timeout = self.config.request_timeout;
        self.shards.get(
            &image,
            p,
            |tp| self.replicas.hosted_partition(tp),
            move |partition| TxnShard::load(partition, replicas, timeout),
        )
    }

    /// Loads the transaction state partitions this broker now leads and
    /// drops those led elsewhere now (see [`LedShards::follow_leadership`]);
    /// transactions a loaded partition left prepared are completed by the
    /// next tick. The broker calls this on the blocking pool after each
    /// metadata change.
    pub fn follow_leadership(&self, image: &MetadataImage) {
        self.shards.follow_leadership(
            image,
            |tp| self.replicas.hosted_partition(tp),
            |partition| {
                TxnShard::load(
                    partition,
                    self.replicas.clone(),
                    self.config.request_timeout,
                )
            },
        );
    }

    fn shards(&self) -> Vec<Arc<TxnShard>> {
        self.shards.loaded()
    }

    /// InitProducerId with a transactional id: a new producer id the first
    /// time, then an epoch bump that fences older producers. An open
    /// transaction is aborted first and the client told to retry.
    pub fn init_producer_id(
        &self,
        services: &Services<'_>,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        now: i64,
    ) -> Result<(i64, i16), ResponseError> {
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(ResponseError::InvalidTransactionTimeout);
        }
        let shard = self.shard(transactional_id)?;
        let txn = shard.get_or_insert(transactional_id, || {
            let id = next_producer_id(services)?;
            Ok(TxnMetadata::new(transactional_id, id, timeout_ms, now))
        })?;
        let mut meta = txn.lock();
        if let Some((producer_id, epoch)) = expected {
            // KIP-360: a producer may name its id while it is current, or
            // the previous one right after a rotation it did not see.
            let known = meta.producer_epoch == NO_PRODUCER_EPOCH
                || producer_id == meta.producer_id
                || (producer_id == meta.previous_producer_id && is_epoch_exhausted(epoch));
            if !known {
                return Err(ResponseError::ProducerFenced);
            }
        }
        match meta.state {
            s if s.is_idle() => {
                let next = meta.prepare_init(
                    timeout_ms,
                    expected.map(|(_, e)| e),
                    || next_producer_id(services),
                    now,
                )?;
                shard.persist(&mut meta, next, now)?;
                info!(
                    transactional_id,
                    producer_id = meta.producer_id,
                    epoch = meta.producer_epoch,
                    "initialized transactional producer"
                );
                Ok((meta.producer_id, meta.producer_epoch))
            }
            TxnState::Ongoing => {
                // The bumped epoch is never returned: the retry bumps again.
                let next = meta.prepare_fence(now);
                shard.persist(&mut meta, next, now)?;
                self.complete(services, &shard, &mut meta, now);
                Err(ResponseError::ConcurrentTransactions)
            }
            // Prepared (completing), or expiring.
            _ => Err(ResponseError::ConcurrentTransactions),
        }
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: the partitions join the
    /// transaction, which starts if none is open.
    pub fn add_partitions(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &BTreeSet<TopicPartition>,
        tv2: bool,
        now: i64,
    ) -> Result<(), ResponseError> {
        let shard = self.shard(transactional_id)?;
        let txn = shard
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        let mut meta = txn.lock();
        check_producer(&meta, producer)?;
        add_locked(&shard, &mut meta, partitions, tv2, now)
    }

    /// AddPartitionsToTxn v4+ with `verify_only`: which of `partitions` are
    /// in the producer's transaction, without changing anything.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[TopicPartition],
    ) -> Result<Vec<bool>, ResponseError> {
        let shard = self.shard(transactional_id)?;
        let txn = shard
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        let meta = txn.lock();
        check_producer(&meta, producer)?;
        if meta.state.is_prepared() {
            return Err(ResponseError::ConcurrentTransactions);
        }
        Ok(partitions
            .iter()
            .map(|tp| meta.partitions.contains(tp))
            .collect())
    }

    /// Runs `write` if `tp` belongs to the producer's open transaction,
    /// holding the transaction's lock so that it cannot complete meanwhile
    /// (a batch landing after its marker would open a transaction nobody
    /// ends). With `add` (KIP-890 part 2 clients) a partition not in the
    /// transaction joins it first; without, that is TRANSACTION_ABORTABLE.
    #[allow(clippy::too_many_arguments)]
    pub fn in_transaction<T>(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        tp: &TopicPartition,
        add: bool,
        now: i64,
        write: impl FnOnce() -> T,
    ) -> Result<T, ResponseError> {
        let shard = self.shard(transactional_id)?;
        let txn = shard
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        let mut meta = txn.lock();
        check_producer(&meta, producer)?;
        if meta.state.is_prepared() {
            return Err(ResponseError::ConcurrentTransactions);
        }
        if meta.state != TxnState::Ongoing || !meta.partitions.contains(tp) {
            if !add {
                return Err(ResponseError::TransactionAbortable);
            }
            add_locked(&shard, &mut meta, &BTreeSet::from([tp.clone()]), true, now)?;
        }
        Ok(write())
    }

    /// EndTxn: commit or abort, answered with the producer id and epoch the
    /// client continues with (they change with transaction version 2,
    /// `tv2`, where every completion bumps the epoch).
    pub fn end_txn(
        &self,
        services: &Services<'_>,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
        tv2: bool,
        now: i64,
    ) -> Result<(i64, i16), ResponseError> {
        let shard = self.shard(transactional_id)?;
        let txn = shard
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        let mut meta = txn.lock();
        if meta.state == TxnState::Dead {
            return Err(ResponseError::ConcurrentTransactions);
        }
        let prepare = if tv2 {
            end_decision_v2(&meta, producer, commit)?
        } else {
            end_decision_v1(&meta, producer, commit)?
        };
        let Some(target) = prepare else {
            // A retry of a completed request.
            return Ok((meta.producer_id, meta.producer_epoch));
        };
        let mut next = meta.transition(target, now);
        if tv2 {
            next.client_tv2 = true;
            if meta.state != TxnState::Ongoing {
                // An abort without partitions, to bump the epoch.
                next.start_timestamp = now;
            }
            // Broken already at the maximum: abort without bumping.
            if meta.producer_epoch < i16::MAX {
                next.producer_epoch += 1;
            }
            next.last_producer_epoch = meta.producer_epoch;
            if is_epoch_exhausted(meta.producer_epoch) {
                next.next_producer_id = next_producer_id(services)?;
            }
        }
        shard.persist(&mut meta, next, now)?;
        let after = meta.producer_after_completion();
        self.complete(services, &shard, &mut meta, now);
        Ok(after)
    }

    /// Writes the markers of a prepared transaction, then its Complete
    /// state. A partition leaves `meta.partitions` once its ISR has the
    /// marker (or the partition is gone); the others stay for the next
    /// tick, which sends them again to whichever broker leads them then,
    /// as Kafka's marker channel retries until every partition answers.
    fn complete(
        &self,
        services: &Services<'_>,
        shard: &TxnShard,
        meta: &mut TxnMetadata,
        now: i64,
    ) {
        let marker = Marker {
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            coordinator_epoch: shard.coordinator_epoch(),
            commit: meta.state == TxnState::PrepareCommit,
        };
        let pending: Vec<TopicPartition> = meta.partitions.iter().cloned().collect();
        let written = services.write_markers(&pending, &marker, now);
        let image = self.controller.image();
        for (tp, outcome) in written {
            let done = match outcome {
                Ok(()) => true,
                Err(e) => !services.should_retry(&image, &tp, &marker, e),
            };
            if done {
                meta.partitions.remove(&tp);
            }
        }
        if !meta.partitions.is_empty() {
            return;
        }
        let next = meta.prepare_complete(now);
        if let Err(e) = shard.persist(meta, next, now) {
            ottla_coordinator_common::log_limited!(
                tracing::Level::WARN,
                key: &(),
                transactional_id = %meta.transactional_id,
                error = ?e,
                "could not write a transaction's completion; retrying later"
            );
        }
    }

    /// The state of `transactional_id` (DescribeTransactions).
    pub fn describe(&self, transactional_id: &str) -> Result<TxnMetadata, ResponseError> {
        let shard = self.shard(transactional_id)?;
        let meta = shard
            .get(transactional_id)
            .map(|t| t.lock().clone())
            .filter(|m| m.state != TxnState::Dead);
        meta.ok_or(ResponseError::TransactionalIdNotFound)
    }

    /// Every transactional id this broker coordinates (ListTransactions).
    pub fn list(&self) -> Vec<TxnMetadata> {
        self.shards()
            .iter()
            .flat_map(|s| s.all())
            .map(|t| t.lock().clone())
            .filter(|m| m.state != TxnState::Dead)
            .collect()
    }

    /// Aborts transactions open longer than their timeout (fencing their
    /// producer, as Kafka does), retries unfinished completions, and now and
    /// then forgets transactional ids idle longer than
    /// `transactional.id.expiration.ms`.
    pub fn tick(&self, services: &Services<'_>, now: i64) {
        let expire = {
            let mut next = self.next_expiration.lock();
            let due = now >= *next;
            if due {
                *next = now + self.config.remove_expired_interval_ms;
            }
            due
        };
        for shard in self.shards() {
            for txn in shard.all() {
                let mut meta = txn.lock();
                if meta.state.is_prepared() {
                    self.complete(services, &shard, &mut meta, now);
                } else if meta.state == TxnState::Ongoing
                    && meta.start_timestamp + i64::from(meta.timeout_ms) < now
                {
                    info!(transactional_id = %meta.transactional_id, producer_id = meta.producer_id, "aborting a timed-out transaction");
                    let next = meta.prepare_fence(now);
                    if shard.persist(&mut meta, next, now).is_ok() {
                        self.complete(services, &shard, &mut meta, now);
                    }
                } else if expire
                    && meta.state.is_idle()
                    && meta.last_update_timestamp <= now - self.config.id_expiration_ms
                    && shard.write_tombstone(&meta.transactional_id, now).is_ok()
                {
                    info!(transactional_id = %meta.transactional_id, "expired an idle transactional id");
                    meta.state = TxnState::Dead;
                    shard.remove(&meta.transactional_id);
                }
            }
        }
    }
}

fn next_producer_id(services: &Services<'_>) -> Result<i64, ResponseError> {
    services.producer_ids.next().map_err(|e| {
        warn!(error = %e, "could not allocate producer ids");
        // Retriable for producers, as Kafka's answer while no id block is ready.
        ResponseError::CoordinatorLoadInProgress
    })
}

/// The request's producer must be the transactional id's current one.
fn check_producer(meta: &TxnMetadata, (id, epoch): (i64, i16)) -> Result<(), ResponseError> {
    if meta.state == TxnState::Dead {
        Err(ResponseError::ConcurrentTransactions)
    } else if meta.producer_id != id {
        Err(ResponseError::InvalidProducerIdMapping)
    } else if meta.producer_epoch != epoch {
        Err(ResponseError::ProducerFenced)
    } else {
        Ok(())
    }
}

/// Adds partitions to the transaction, starting it if none is open. The
/// caller holds the transaction's lock and checked the producer.
fn add_locked(
    shard: &TxnShard,
    meta: &mut TxnMetadata,
    partitions: &BTreeSet<TopicPartition>,
    tv2: bool,
    now: i64,
) -> Result<(), ResponseError> {
    if meta.state.is_prepared() {
        return Err(ResponseError::ConcurrentTransactions);
    }
    if meta.state == TxnState::Ongoing && partitions.is_subset(&meta.partitions) {
        return Ok(());
    }
    let mut next = meta.transition(TxnState::Ongoing, now);
    if meta.state.is_idle() {
        next.start_timestamp = now;
    }
    next.partitions.extend(partitions.iter().cloned());
    next.client_tv2 = tv2;
    shard.persist(meta, next, now)
}

/// EndTxn before KIP-890 part 2: the state to prepare, or None when the
/// request repeats one that completed.
fn end_decision_v1(
    meta: &TxnMetadata,
    producer: (i64, i16),
    commit: bool,
) -> Result<Option<TxnState>, ResponseError> {
    check_producer(meta, producer)?;
    let (prepare, complete) = outcome_states(commit);
    match meta.state {
        TxnState::Ongoing => Ok(Some(prepare)),
        s if s == complete => Ok(None),
        s if s == prepare => Err(ResponseError::ConcurrentTransactions),
        _ => Err(ResponseError::InvalidTxnState),
    }
}

/// EndTxn v5 (transaction version 2): requests carry the epoch before the
/// bump, so a retry is recognized by the bumped epoch (or the rotated id),
/// and an abort may end an empty transaction just to bump the epoch.
fn end_decision_v2(
    meta: &TxnMetadata,
    (id, epoch): (i64, i16),
    commit: bool,
) -> Result<Option<TxnState>, ResponseError> {
    let retry_on_bump = i32::from(meta.producer_epoch) == i32::from(epoch) + 1;
    let retry_on_overflow =
        meta.previous_producer_id == id && epoch == i16::MAX - 1 && meta.producer_epoch == 0;
    if meta.producer_id != id && !retry_on_overflow {
        return Err(ResponseError::InvalidProducerIdMapping);
    }
    let valid_epoch = match meta.state {
        TxnState::Ongoing | TxnState::Empty => epoch == meta.producer_epoch,
        TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
        TxnState::CompleteCommit | TxnState::CompleteAbort => {
            retry_on_bump || retry_on_overflow || epoch == meta.producer_epoch
        }
        _ => false,
    };
    if !valid_epoch {
        return Err(ResponseError::ProducerFenced);
    }
    let retry = retry_on_bump || retry_on_overflow;
    let (prepare, complete) = outcome_states(commit);
    match meta.state {
        TxnState::Ongoing => Ok(Some(prepare)),
        s if s == prepare => Err(ResponseError::ConcurrentTransactions),
        s if s == complete && retry => Ok(None),
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
            if !commit && !retry =>
        {
            Ok(Some(TxnState::PrepareAbort))
        }
        _ => Err(ResponseError::InvalidTxnState),
    }
}

fn outcome_states(commit: bool) -> (TxnState, TxnState) {
    if commit {
        (TxnState::PrepareCommit, TxnState::CompleteCommit)
    } else {
        (TxnState::PrepareAbort, TxnState::CompleteAbort)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(state: TxnState, epoch: i16) -> TxnMetadata {
        TxnMetadata {
            state,
            producer_epoch: epoch,
            ..TxnMetadata::new("t", 7, 1000, 0)
        }
    }

    #[test]
    fn v1_end_decisions() {
        let ongoing = meta(TxnState::Ongoing, 2);
        assert_eq!(
            end_decision_v1(&ongoing, (7, 2), true),
            Ok(Some(TxnState::PrepareCommit))
        );
        assert_eq!(
            end_decision_v1(&ongoing, (7, 1), true),
            Err(ResponseError::ProducerFenced)
        );
        assert_eq!(
            end_decision_v1(&ongoing, (8, 2), true),
            Err(ResponseError::InvalidProducerIdMapping)
        );
        let committed = meta(TxnState::CompleteCommit, 2);
        assert_eq!(end_decision_v1(&committed, (7, 2), true), Ok(None));
        assert_eq!(
            end_decision_v1(&committed, (7, 2), false),
            Err(ResponseError::InvalidTxnState)
        );
        assert_eq!(
            end_decision_v1(&meta(TxnState::Empty, 2), (7, 2), false),
            Err(ResponseError::InvalidTxnState)
        );
        assert_eq!(
            end_decision_v1(&meta(TxnState::PrepareAbort, 2), (7, 2), false),
            Err(ResponseError::ConcurrentTransactions)
        );
    }

    /// Kafka's TV2 table: Retry = the epoch before the bump, Current = the
    /// stored epoch.
    #[test]
    fn v2_end_decisions() {
        let abort = Some(TxnState::PrepareAbort);
        let empty = meta(TxnState::Empty, 3);
        assert_eq!(end_decision_v2(&empty, (7, 3), false), Ok(abort));
        assert_eq!(
            end_decision_v2(&empty, (7, 2), false),
            Err(ResponseError::ProducerFenced)
        );
        assert_eq!(
            end_decision_v2(&empty, (7, 3), true),
            Err(ResponseError::InvalidTxnState)
        );
        let aborted = meta(TxnState::CompleteAbort, 3);
        assert_eq!(end_decision_v2(&aborted, (7, 2), false), Ok(None));
        assert_eq!(end_decision_v2(&aborted, (7, 3), false), Ok(abort));
        assert_eq!(
            end_decision_v2(&aborted, (7, 2), true),
            Err(ResponseError::InvalidTxnState)
        );
        let committed = meta(TxnState::CompleteCommit, 3);
        assert_eq!(end_decision_v2(&committed, (7, 2), true), Ok(None));
        assert_eq!(
            end_decision_v2(&committed, (7, 3), true),
            Err(ResponseError::InvalidTxnState)
        );
        assert_eq!(
            end_decision_v2(&committed, (7, 2), false),
            Err(ResponseError::InvalidTxnState)
        );
        assert_eq!(end_decision_v2(&committed, (7, 3), false), Ok(abort));
        // After a rotation the retry names the old id at the last epoch.
        let rotated = TxnMetadata {
            producer_id: 8,
            previous_producer_id: 7,
            ..meta(TxnState::CompleteCommit, 0)
        };
        assert_eq!(end_decision_v2(&rotated, (7, i16::MAX - 1), true), Ok(None));
    }
}
