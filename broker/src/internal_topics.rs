//! Creation of the compacted internal topics coordinators keep their state
//! in (`__consumer_offsets`, `__transaction_state`, `__mirror_state`), with
//! the configs Kafka enforces on such logs.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use ottla_controller::{Controller, MetadataImage, NewTopic};
use tracing::{debug, info, warn};

/// How an internal topic is laid out.
#[derive(Debug, Clone, Copy)]
pub struct InternalTopic {
    pub name: &'static str,
    pub partitions: i32,
    /// Capped at the number of live brokers.
    pub replication_factor: i16,
    /// None leaves the broker default (Kafka sets none on the offsets log).
    pub min_insync_replicas: Option<i32>,
    pub segment_bytes: i64,
    /// `producer` keeps what clients sent (the offsets log); the other
    /// logs are written by the broker itself, uncompressed.
    pub compression_type: &'static str,
}

impl InternalTopic {
    /// Asks the controller to create the topic and returns at once: callers
    /// answer COORDINATOR_NOT_AVAILABLE until it exists, as Kafka's do, and
    /// never wait for the metadata quorum, whatever thread they run on (a
    /// handler on the blocking pool, or an async task). A racing request
    /// that asked too is refused with TOPIC_ALREADY_EXISTS, logged at debug.
    pub fn create(&self, controller: &Arc<Controller>, image: &MetadataImage) {
        let topic = self.new_topic(image);
        let asker = controller.clone();
        controller.spawn(async move {
            for (name, result) in asker.create_topics(vec![topic], false).await {
                match result {
                    Ok(t) => info!(
                        topic = name,
                        partitions = t.num_partitions,
                        replication_factor = t.replication_factor,
                        "created an internal topic"
                    ),
                    Err(e) if e.code == ResponseError::TopicAlreadyExists.code() => {
                        debug!(topic = name, "internal topic created by another request")
                    }
                    Err(e) => warn!(topic = name, error = %e, "could not create an internal topic"),
                }
            }
        });
    }

    fn new_topic(&self, image: &MetadataImage) -> NewTopic {
        let live = image.live_brokers().count().max(1);
        let replication_factor = (self.replication_factor.max(1) as usize).min(live) as i16;
        let mut configs = BTreeMap::from([
            ("cleanup.policy".to_string(), "compact".to_string()),
            (
                "compression.type".to_string(),
                self.compression_type.to_string(),
            ),
            (
                "unclean.leader.election.enable".to_string(),
                "false".to_string(),
            ),
            ("segment.bytes".to_string(), self.segment_bytes.to_string()),
        ]);
        if let Some(min_isr) = self.min_insync_replicas {
            configs.insert(
                "min.insync.replicas".to_string(),
                min_isr.min(i32::from(replication_factor)).to_string(),
            );
        }
        NewTopic {
            name: self.name.to_string(),
            num_partitions: self.partitions,
            replication_factor,
            configs: configs.into_iter().map(|(k, v)| (k, Some(v))).collect(),
            ..NewTopic::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replication_factor_is_capped_at_live_brokers_and_min_isr_at_it() {
        let topic = InternalTopic {
            name: "__t",
            partitions: 5,
            replication_factor: 3,
            min_insync_replicas: Some(2),
            segment_bytes: 1 << 20,
            compression_type: "uncompressed",
        };
        let planned = topic.new_topic(&MetadataImage::default());
        assert_eq!(
            planned.replication_factor, 1,
            "an empty image counts one broker"
        );
        assert_eq!(planned.num_partitions, 5);
        assert_eq!(planned.configs["min.insync.replicas"].as_deref(), Some("1"));
        assert_eq!(
            planned.configs["cleanup.policy"].as_deref(),
            Some("compact")
        );
        let offsets_like = InternalTopic {
            min_insync_replicas: None,
            ..topic
        };
        assert!(!offsets_like
            .new_topic(&MetadataImage::default())
            .configs
            .contains_key("min.insync.replicas"));
    }
}
