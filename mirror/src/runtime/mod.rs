//! The mirror runtime on a destination broker: the manager that drives each
//! led mirror partition through its states, the fetchers that copy source
//! partitions byte for byte, the `__mirror_state` coordinator, describe,
//! and the periodic syncs of topics, configs, groups and ACLs.
//!
//! It reaches the broker only through [`MirrorReplicas`] (the replica
//! manager, as the coordinators' [`PartitionWriter`] plus the two
//! mirror-only operations) and [`GroupCoordinators`]; the controller and
//! other brokers through their own crates' APIs.

pub mod configs;
pub mod describe;
pub mod epoch_bumps;
pub mod failover;
pub mod fetcher;
pub mod manager;
pub mod readd;
pub mod source;
pub mod state_store;
pub mod state_writes;
pub mod stats;
pub mod sync;

pub use manager::{MirrorManager, MirrorServices};

use std::time::Instant;

use ottla_controller::MetadataImage;
use ottla_coordinator_common::partition_writer::PartitionWriter;
use ottla_storage::log::AppendInfo;
use ottla_storage::manager::TopicPartition;

use crate::name::{MirrorBinding, RequestedMirroring};

/// What the runtime needs of the broker's replica manager.
pub trait MirrorReplicas: PartitionWriter {
    /// Appends batches fetched from the source to the led partition `tp` as
    /// they are (offsets, epochs and producer ids are the source's). The
    /// error says why the log refused them, or that `tp` is no longer here.
    fn append_mirrored(&self, tp: &TopicPartition, records: &[u8]) -> Result<AppendInfo, String>;

    /// Marks `tp` failed over (clients may write) or mirrored again.
    fn set_mirror_stopped(&self, tp: &TopicPartition, stopped: bool);

    /// Whether every ISR member of the led `tp` (every replica with
    /// `all_replicas`) has fetched since `since` without being past `end`:
    /// after the leader cut its log at `end`, the followers did too.
    fn followers_within(
        &self,
        tp: &TopicPartition,
        end: i64,
        since: Instant,
        all_replicas: bool,
    ) -> bool;
}

/// Where consumer groups are coordinated: the group sync commits the
/// source's offsets there.
pub trait GroupCoordinators: Send + Sync {
    /// The broker coordinating `group`, or why none does now.
    fn coordinator_of(&self, group: &str) -> Result<i32, String>;
}

/// The topics bound to `mirror` (in any state), with what was last asked
/// of each, in name order.
pub fn topics_of(image: &MetadataImage, mirror: &str) -> Vec<(String, RequestedMirroring)> {
    image
        .topic_ids
        .keys()
        .filter_map(|t| {
            let binding = MirrorBinding::parse(image.mirror_binding(t)?).ok()?;
            (binding.mirror.as_str() == mirror).then(|| (t.clone(), binding.requested))
        })
        .collect()
}
