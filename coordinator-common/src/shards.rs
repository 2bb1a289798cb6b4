//! The shards of a coordinator (groups, transactions): one per partition of
//! its internal topic that this broker leads, loaded from that partition's
//! log on first use and dropped as soon as leadership moves to another
//! broker, so two brokers never answer for the same partition.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use ottla_protocol::batch::BatchIter;
use ottla_protocol::records::{records_section, walk_records};
use ottla_storage::log::FetchIsolation;
use ottla_storage::manager::TopicPartition;
use parking_lot::RwLock;
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
    /// Set at shutdown: no shard is loaded any more.
    closed: AtomicBool,
}

impl<S: Unload> LedShards<S> {
    pub fn new(node_id: i32, topic: &'static str) -> Self {
        Self {
            node_id,
            topic,
            shards: RwLock::default(),
            closed: AtomicBool::new(false),
        }
    }

    /// Partitions of the topic this broker leads.
    pub fn led(&self, image: &MetadataImage) -> Vec<i32> {
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

    /// Shard `p`: NOT_COORDINATOR unless this broker leads the partition,
    /// COORDINATOR_LOAD_IN_PROGRESS while `find` does not host it yet;
    /// built by `load` from the partition on first use.
    pub fn get<P>(
        &self,
        image: &MetadataImage,
        p: i32,
        find: impl FnOnce(&TopicPartition) -> Option<P>,
        load: impl FnOnce(P) -> anyhow::Result<S>,
    ) -> Result<Arc<S>, ResponseError> {
        if !self.leads(image, p) || self.closed.load(Ordering::Acquire) {
            self.unload(p, "leadership moved");
            return Err(ResponseError::NotCoordinator);
        }
        if let Some(shard) = self.shards.read().get(&p) {
            return Ok(shard.clone());
        }
        self.load(p, find, load)
    }

    /// Loads shard `p` unless it is loaded already.
    pub fn load<P>(
        &self,
        p: i32,
        find: impl FnOnce(&TopicPartition) -> Option<P>,
        load: impl FnOnce(P) -> anyhow::Result<S>,
    ) -> Result<Arc<S>, ResponseError> {
        let mut shards = self.shards.write();
        if self.closed.load(Ordering::Acquire) {
            return Err(ResponseError::NotCoordinator);
        }
        if let Some(shard) = shards.get(&p) {
            return Ok(shard.clone());
        }
        let partition = find(&TopicPartition::new(self.topic, p))
            .ok_or(ResponseError::CoordinatorLoadInProgress)?;
        let shard = Arc::new(load(partition).map_err(|e| {
            error!(topic = self.topic, partition = p, error = %e, "could not load a coordinator partition");
            ResponseError::CoordinatorNotAvailable
        })?);
        shards.insert(p, shard.clone());
        Ok(shard)
    }

    pub fn loaded(&self) -> Vec<Arc<S>> {
        self.shards.read().values().cloned().collect()
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

/// How much of the log one replay step reads.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// Reads a coordinator partition's log from its start to its end, handing
/// every data record's key and value (None: tombstone) to `apply` in log
/// order; control batches are skipped. Blocking I/O.
pub fn replay_records(
    partition: &dyn HostedPartition,
    mut apply: impl FnMut(&[u8], Option<&[u8]>) -> anyhow::Result<()>,
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
            if batch.is_control() {
                continue;
            }
            let section = records_section(&batch)?;
            let mut failure = None;
            walk_records(&section, |r| {
                if failure.is_none() {
                    if let Some(key) = r.key {
                        failure = apply(key, r.value).err();
                    }
                }
            })?;
            if let Some(e) = failure {
                return Err(e).with_context(|| {
                    format!("{} near offset {}", partition.tp(), batch.base_offset())
                });
            }
        }
        if offset == before {
            break;
        }
    }
    Ok(())
}
