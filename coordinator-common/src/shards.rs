//! The shards of a coordinator (groups, transactions): one per partition of
//! its internal topic that this broker leads, loaded from that partition's
//! log on first use and dropped as soon as leadership moves to another
//! broker, so two brokers never answer for the same partition.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use ottla_protocol::batch::{BatchIter, BatchView};
use ottla_protocol::records::{records_section, walk_records};
use ottla_storage::log::FetchIsolation;
use ottla_storage::manager::TopicPartition;
use parking_lot::{Condvar, Mutex, RwLock};
use tracing::{error, info};

use crate::partition_writer::HostedPartition;

/// What a shard does when this broker stops coordinating its partition.
pub trait Unload {
    /// Answers requests still waiting on the shard (NOT_COORDINATOR, so
    /// clients find the new coordinator at once).
    fn on_unloaded(&self) {}
}

pub struct LedShards<S: Unload> {
    node_id: i32,
    topic: &'static str,
    shards: RwLock<HashMap<i32, Arc<S>>>,
    /// Partitions being loaded. A load reads a whole log, so it runs
    /// outside `shards`' lock: the other shards keep answering meanwhile.
    loading: Mutex<HashSet<i32>>,
    /// Signalled when a load ends, for callers waiting on the same one.
    load_ended: Condvar,
    /// Set at shutdown: no shard is loaded any more.
    closed: AtomicBool,
}

impl<S: Unload> LedShards<S> {
    pub fn new(node_id: i32, topic: &'static str) -> Self {
        Self {
            node_id,
            topic,
            shards: RwLock::default(),
            loading: Mutex::default(),
            load_ended: Condvar::new(),
            closed: AtomicBool::new(false),
        }
    }

    /// Partitions of the topic this broker leads.
    fn led(&self, image: &MetadataImage) -> Vec<i32> {
        image.topic_by_name(self.topic).map_or_else(Vec::new, |t| {
            t.partitions
                .iter()
                .filter(|(_, p)| p.leader == self.node_id)
                .map(|(p, _)| *p)
                .collect()
        })
    }

    fn leads(&self, image: &MetadataImage, p: i32) -> bool {
        image
            .topic_by_name(self.topic)
            .and_then(|t| t.partitions.get(&p))
            .is_some_and(|part| part.leader == self.node_id)
    }

    /// Shard `p` if it is loaded, without blocking: NOT_COORDINATOR unless
    /// this broker leads the partition, COORDINATOR_LOAD_IN_PROGRESS while
    /// it is not loaded yet.
    pub fn get_loaded(&self, image: &MetadataImage, p: i32) -> Result<Arc<S>, ResponseError> {
        if !self.leads(image, p) || self.closed.load(Ordering::Acquire) {
            self.unload(p, "leadership moved");
            return Err(ResponseError::NotCoordinator);
        }
        self.shards
            .read()
            .get(&p)
            .cloned()
            .ok_or(ResponseError::CoordinatorLoadInProgress)
    }

    /// As [`LedShards::get_loaded`], but a shard not loaded yet is built by
    /// `load` from the partition `find` returns (COORDINATOR_LOAD_IN_PROGRESS
    /// while it is not hosted here yet). Blocking I/O: the blocking pool's.
    pub fn get<P>(
        &self,
        image: &MetadataImage,
        p: i32,
        find: impl FnOnce(&TopicPartition) -> Option<P>,
        load: impl FnOnce(P) -> anyhow::Result<S>,
    ) -> Result<Arc<S>, ResponseError> {
        match self.get_loaded(image, p) {
            Err(ResponseError::CoordinatorLoadInProgress) => self.load(p, find, load),
            other => other,
        }
    }

    /// Loads shard `p` unless it is loaded already; a caller that finds it
    /// being loaded waits for that load. Blocking I/O.
    pub fn load<P>(
        &self,
        p: i32,
        find: impl FnOnce(&TopicPartition) -> Option<P>,
        load: impl FnOnce(P) -> anyhow::Result<S>,
    ) -> Result<Arc<S>, ResponseError> {
        let _loading = {
            let mut loading = self.loading.lock();
            loop {
                if self.closed.load(Ordering::Acquire) {
                    return Err(ResponseError::NotCoordinator);
                }
                if let Some(shard) = self.shards.read().get(&p) {
                    return Ok(shard.clone());
                }
                if loading.insert(p) {
                    break LoadingGuard { shards: self, p };
                }
                self.load_ended.wait(&mut loading);
            }
        };
        let partition = find(&TopicPartition::new(self.topic, p))
            .ok_or(ResponseError::CoordinatorLoadInProgress)?;
        let shard = Arc::new(load(partition).map_err(|e| {
            error!(topic = self.topic, partition = p, error = %e, "could not load a coordinator partition");
            ResponseError::CoordinatorNotAvailable
        })?);
        let mut shards = self.shards.write();
        // `close` sets the flag before it unloads what it finds in the map.
        if self.closed.load(Ordering::Acquire) {
            return Err(ResponseError::NotCoordinator);
        }
        shards.insert(p, shard.clone());
        Ok(shard)
    }

    pub fn loaded(&self) -> Vec<Arc<S>> {
        self.shards.read().values().cloned().collect()
    }

    /// Drops the shards of partitions led elsewhere now and loads those
    /// this broker now leads, as Kafka loads a coordinator partition when
    /// its leadership arrives: the first request after a failover finds the
    /// shard loaded, and the transaction coordinator completes what its
    /// predecessor left prepared without waiting for a client to ask. A
    /// partition that fails to load is retried on first use. Blocking I/O.
    pub fn follow_leadership<P>(
        &self,
        image: &MetadataImage,
        find: impl Fn(&TopicPartition) -> Option<P>,
        load: impl Fn(P) -> anyhow::Result<S>,
    ) {
        self.unload_unled(image);
        for p in self.led(image) {
            if !self.shards.read().contains_key(&p) {
                let _ = self.load(p, &find, &load);
            }
        }
    }

    /// Drops the shards of partitions this broker no longer leads.
    pub fn unload_unled(&self, image: &MetadataImage) {
        let gone: Vec<i32> = self
            .shards
            .read()
            .keys()
            .copied()
            .filter(|p| !self.leads(image, *p))
            .collect();
        for p in gone {
            self.unload(p, "leadership moved");
        }
    }

    /// Unloads every shard for good (broker shutdown): waiting requests are
    /// answered NOT_COORDINATOR instead of holding the shutdown up.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let loaded: Vec<i32> = self.shards.read().keys().copied().collect();
        for p in loaded {
            self.unload(p, "shutting down");
        }
    }

    fn unload(&self, p: i32, why: &str) {
        let removed = self.shards.write().remove(&p);
        if let Some(shard) = removed {
            shard.on_unloaded();
            info!(
                topic = self.topic,
                partition = p,
                "{why}: coordinator partition unloaded"
            );
        }
    }
}

/// Ends a load however it ends (an error, a panic): the partition may be
/// loaded again, and callers waiting on it look again.
struct LoadingGuard<'a, S: Unload> {
    shards: &'a LedShards<S>,
    p: i32,
}

impl<S: Unload> Drop for LoadingGuard<'_, S> {
    fn drop(&mut self) {
        self.shards.loading.lock().remove(&self.p);
        self.shards.load_ended.notify_all();
    }
}

/// How much of the log one replay step reads.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// Reads a coordinator partition's log from its start to its end, handing
/// every batch, control batches included, to `apply` in log order.
/// Blocking I/O.
pub fn replay_batches(
    partition: &dyn HostedPartition,
    mut apply: impl FnMut(&BatchView<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let (mut offset, end) = {
        let log = partition.log().read();
        (log.log_start_offset(), log.log_end_offset())
    };
    while offset < end {
        let slice = partition
            .log()
            .read()
            .read(offset, REPLAY_READ_BYTES, FetchIsolation::LogEnd, true)
            .with_context(|| format!("reading {} at offset {offset}", partition.tp()))?
            .slice;
        let Some(slice) = slice else { break };
        let bytes = slice
            .read()
            .with_context(|| format!("reading {}", partition.tp()))?;
        let before = offset;
        for batch in BatchIter::new(&bytes) {
            let batch = batch.with_context(|| format!("a batch of {}", partition.tp()))?;
            offset = offset.max(batch.next_offset());
            apply(&batch).with_context(|| {
                format!("{} near offset {}", partition.tp(), batch.base_offset())
            })?;
        }
        if offset == before {
            break;
        }
    }
    Ok(())
}

/// Hands every keyed record of a data batch to `apply`: its key and value
/// (None: a tombstone), in order.
pub fn replay_batch_records(
    batch: &BatchView<'_>,
    mut apply: impl FnMut(&[u8], Option<&[u8]>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let section = records_section(batch)?;
    let mut failure = None;
    walk_records(&section, |r| {
        if failure.is_none() {
            if let Some(key) = r.key {
                failure = apply(key, r.value).err();
            }
        }
    })?;
    failure.map_or(Ok(()), Err)
}

/// [`replay_batches`] for coordinators without transactions: every data
/// record's key and value, control batches skipped. Blocking I/O.
pub fn replay_records(
    partition: &dyn HostedPartition,
    mut apply: impl FnMut(&[u8], Option<&[u8]>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    replay_batches(partition, |batch| {
        if batch.is_control() {
            return Ok(());
        }
        replay_batch_records(batch, &mut apply)
    })
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use ottla_controller::records::MetadataRecord;
    use uuid::Uuid;

    use super::*;

    struct Loaded(i32);
    impl Unload for Loaded {}

    /// An image where node 1 leads partitions 0 and 1 of `topic`.
    fn image_leading(topic: &str) -> MetadataImage {
        let mut image = MetadataImage::empty();
        let topic_id = Uuid::from_u128(7);
        let name = topic.to_string();
        image.apply(1, &MetadataRecord::Topic { name, topic_id });
        for partition in 0..2 {
            let record = MetadataRecord::Partition {
                topic_id,
                partition,
                replicas: vec![1],
                isr: vec![1],
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                elr: Vec::new(),
                last_known_elr: Vec::new(),
            };
            image.apply(2 + i64::from(partition), &record);
        }
        image
    }

    /// A load in progress holds up neither another shard's requests nor
    /// a non-blocking lookup of its own shard, and a second caller of the
    /// same load waits for it and gets the shard it built.
    #[test]
    fn a_long_load_holds_up_only_those_who_wait_for_it() {
        let shards = Arc::new(LedShards::<Loaded>::new(1, "__offsets"));
        let image = image_leading("__offsets");
        shards.load(1, |_| Some(()), |()| Ok(Loaded(1))).unwrap();

        let (started_tx, started) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let slow = {
            let shards = shards.clone();
            std::thread::spawn(move || {
                shards.load(
                    0,
                    |_| Some(()),
                    move |()| {
                        started_tx.send(()).unwrap();
                        released.recv().unwrap();
                        Ok(Loaded(0))
                    },
                )
            })
        };
        started.recv().unwrap();
        assert_eq!(shards.get_loaded(&image, 1).unwrap().0, 1);
        assert_eq!(
            shards.get_loaded(&image, 0).err(),
            Some(ResponseError::CoordinatorLoadInProgress)
        );
        let waiting = {
            let shards = shards.clone();
            let image = image.clone();
            std::thread::spawn(move || shards.get(&image, 0, |_| Some(()), |()| Ok(Loaded(99))))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiting.is_finished(), "the second caller did not wait");
        release.send(()).unwrap();
        assert_eq!(slow.join().unwrap().unwrap().0, 0);
        assert_eq!(waiting.join().unwrap().unwrap().0, 0, "loaded twice");
    }

    /// A failed load leaves the partition free to be loaded again.
    #[test]
    fn a_failed_load_can_be_retried() {
        let shards = LedShards::<Loaded>::new(1, "__offsets");
        let failed = shards.load(0, |_| Some(()), |()| Err(anyhow::anyhow!("disk")));
        assert_eq!(failed.err(), Some(ResponseError::CoordinatorNotAvailable));
        assert_eq!(
            shards.load(0, |_| Some(()), |()| Ok(Loaded(0))).unwrap().0,
            0
        );
    }

    /// Leadership arriving loads the partition without a request asking
    /// for it, once; leadership moving away drops it.
    #[test]
    fn shards_follow_leadership_as_it_arrives_and_moves_away() {
        let shards = LedShards::<Loaded>::new(1, "__offsets");
        let mut image = image_leading("__offsets");
        let loads = std::sync::atomic::AtomicUsize::new(0);
        let follow = |image: &MetadataImage| {
            shards.follow_leadership(
                image,
                |tp| Some(tp.partition),
                |p| {
                    loads.fetch_add(1, Ordering::Relaxed);
                    Ok(Loaded(p))
                },
            )
        };
        follow(&image);
        assert_eq!(shards.get_loaded(&image, 0).unwrap().0, 0);
        assert_eq!(shards.get_loaded(&image, 1).unwrap().0, 1);
        follow(&image);
        assert_eq!(
            loads.load(Ordering::Relaxed),
            2,
            "a loaded shard was loaded again"
        );

        image.apply(
            9,
            &MetadataRecord::Partition {
                topic_id: Uuid::from_u128(7),
                partition: 1,
                replicas: vec![1, 2],
                isr: vec![1, 2],
                leader: 2,
                leader_epoch: 1,
                partition_epoch: 1,
                elr: Vec::new(),
                last_known_elr: Vec::new(),
            },
        );
        follow(&image);
        assert_eq!(shards.loaded().len(), 1, "the shard led elsewhere stayed");
        assert_eq!(
            shards.get_loaded(&image, 1).err(),
            Some(ResponseError::NotCoordinator)
        );
    }
}
