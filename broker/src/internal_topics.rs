//! Creation of the compacted internal topics coordinators keep their state
//! in (`__mirror_state`; the group and transaction logs have their own
//! settings), with the configs Kafka enforces on such logs.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use ottla_controller::{Controller, MetadataImage, NewTopic};
use tracing::{info, warn};

/// How an internal topic is laid out.
#[derive(Debug, Clone, Copy)]
pub struct InternalTopic {
    pub name: &'static str,
    pub partitions: i32,
    /// Capped at the number of live brokers.
    pub replication_factor: i16,
    pub min_insync_replicas: i32,
    pub segment_bytes: i64,
}

impl InternalTopic {
    /// Creates the topic (a no-op if someone else just did); errors are
    /// logged, and callers answer COORDINATOR_NOT_AVAILABLE until it exists.
    pub fn create(&self, controller: &Controller, image: &MetadataImage) {
        let live = image.live_brokers().count().max(1);
        let replication_factor = (self.replication_factor.max(1) as usize).min(live) as i16;
        let config = |v: String| Some(v);
        let topic = NewTopic {
            name: self.name.to_string(),
            num_partitions: self.partitions,
            replication_factor,
            configs: BTreeMap::from([
                ("cleanup.policy".to_string(), config("compact".into())),
                (
                    "compression.type".to_string(),
                    config("uncompressed".into()),
                ),
                (
                    "unclean.leader.election.enable".to_string(),
                    config("false".into()),
                ),
                (
                    "min.insync.replicas".to_string(),
                    config(
                        self.min_insync_replicas
                            .min(replication_factor as i32)
                            .to_string(),
                    ),
                ),
                (
                    "segment.bytes".to_string(),
                    config(self.segment_bytes.to_string()),
                ),
            ]),
            ..NewTopic::default()
        };
        for (name, result) in controller.create_topics(vec![topic], false) {
            match result {
                Ok(t) => info!(
                    topic = name,
                    partitions = t.num_partitions,
                    replication_factor = t.replication_factor,
                    "created an internal topic"
                ),
                Err(e) if e.code == ResponseError::TopicAlreadyExists.code() => {}
                Err(e) => warn!(topic = name, error = %e, "could not create an internal topic"),
            }
        }
    }
}
