//! Creation of the compacted internal topics coordinators keep their state
//! in (`__consumer_offsets`, `__transaction_state`, `__mirror_state`), with
//! the configs Kafka enforces on such logs.
//!
//! As in Kafka, an internal topic gets the replication factor it is
//! configured with or is not created: while fewer brokers are live, the
//! coordinators answer COORDINATOR_NOT_AVAILABLE (clients retry) and the
//! topic is created once enough brokers are up. Capping the factor at the
//! brokers live at that moment would leave a cluster whose first client
//! came early with an internal topic of one replica for good.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use ottla_controller::{Controller, MetadataImage, NewTopic};
use tracing::{debug, info};

/// How an internal topic is laid out.
#[derive(Debug, Clone, Copy)]
pub struct InternalTopic {
    pub name: &'static str,
    pub partitions: i32,
    pub replication_factor: i16,
    /// The broker key setting `replication_factor`, for the operator.
    pub replication_factor_key: &'static str,
    /// Capped at the replication factor.
    pub min_insync_replicas: i32,
    pub segment_bytes: i64,
    /// Kafka's: `producer` for the offsets topic, `uncompressed` for the
    /// transaction log.
    pub compression_type: &'static str,
    /// Whether `unclean.leader.election.enable=false` is set on the topic
    /// (Kafka sets it on the transaction log only; the default is false
    /// anyway, but a cluster-wide true must not reach a coordinator log).
    pub forbid_unclean_election: bool,
}

impl InternalTopic {
    /// The topic's configs.
    pub fn configs(&self) -> BTreeMap<String, Option<String>> {
        let min_isr = self
            .min_insync_replicas
            .clamp(1, i32::from(self.replication_factor.max(1)));
        let mut configs = BTreeMap::from([
            ("cleanup.policy".to_string(), "compact".to_string()),
            (
                "compression.type".to_string(),
                self.compression_type.to_string(),
            ),
            ("min.insync.replicas".to_string(), min_isr.to_string()),
            ("segment.bytes".to_string(), self.segment_bytes.to_string()),
        ]);
        if self.forbid_unclean_election {
            configs.insert(
                "unclean.leader.election.enable".to_string(),
                "false".to_string(),
            );
        }
        configs.into_iter().map(|(k, v)| (k, Some(v))).collect()
    }

    /// Why the topic cannot be created on `image` yet, if it cannot.
    pub fn not_yet(&self, image: &MetadataImage) -> Option<String> {
        let live = image.live_brokers().count();
        let wanted = self.replication_factor.max(1) as usize;
        (live < wanted).then(|| {
            format!(
                "{} needs {wanted} live brokers ({}={wanted}) and {live} are live: it is created, \
                 and its coordinators become available, once enough brokers are up \
                 (or lower {} for a smaller cluster)",
                self.name, self.replication_factor_key, self.replication_factor_key
            )
        })
    }

    /// Asks the controller to create the topic and returns at once: callers
    /// answer COORDINATOR_NOT_AVAILABLE until it exists, as Kafka's do, and
    /// never wait for the metadata quorum, whatever thread they run on (a
    /// handler on the blocking pool, or an async task). A racing request
    /// that asked too is refused with TOPIC_ALREADY_EXISTS, logged at debug.
    pub fn create(&self, controller: &Arc<Controller>, image: &MetadataImage) {
        if let Some(why) = self.not_yet(image) {
            // Asked again by every FindCoordinator until it can be done.
            crate::log_limited!(
                tracing::Level::WARN,
                key: self.name,
                topic = self.name,
                "cannot create an internal topic yet: {why}"
            );
            return;
        }
        let topic = NewTopic {
            name: self.name.to_string(),
            num_partitions: self.partitions,
            replication_factor: self.replication_factor.max(1),
            configs: self.configs(),
            ..NewTopic::default()
        };
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
                    Err(e) => crate::log_limited!(
                        tracing::Level::WARN,
                        key: &name,
                        topic = name,
                        error = %e,
                        "could not create an internal topic"
                    ),
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(replication_factor: i16) -> InternalTopic {
        InternalTopic {
            name: "__consumer_offsets",
            partitions: 50,
            replication_factor,
            replication_factor_key: "offsets.topic.replication.factor",
            min_insync_replicas: 2,
            segment_bytes: 100 << 20,
            compression_type: "producer",
            forbid_unclean_election: false,
        }
    }

    #[test]
    fn a_topic_waits_for_as_many_live_brokers_as_replicas() {
        use ottla_controller::image::BrokerImage;
        let mut image = MetadataImage::empty();
        for (id, fenced) in [(1, false), (2, false), (3, true)] {
            image.brokers.insert(
                id,
                BrokerImage {
                    id,
                    incarnation_id: uuid::Uuid::nil(),
                    endpoints: Vec::new(),
                    rack: None,
                    fenced,
                },
            );
        }
        let why = offsets(3)
            .not_yet(&image)
            .expect("a fenced broker does not count");
        assert!(
            why.contains("needs 3 live brokers")
                && why.contains("2 are live")
                && why.contains("offsets.topic.replication.factor"),
            "{why}"
        );
        assert_eq!(offsets(2).not_yet(&image), None);
        image.brokers.get_mut(&3).unwrap().fenced = false;
        assert_eq!(offsets(3).not_yet(&image), None);
    }

    #[test]
    fn min_insync_replicas_never_exceeds_the_replication_factor() {
        let config = |t: InternalTopic| t.configs()["min.insync.replicas"].clone().unwrap();
        assert_eq!(config(offsets(3)), "2");
        assert_eq!(config(offsets(1)), "1");
        let configs = offsets(3).configs();
        assert_eq!(configs["cleanup.policy"].as_deref(), Some("compact"));
        assert_eq!(configs["compression.type"].as_deref(), Some("producer"));
        assert!(!configs.contains_key("unclean.leader.election.enable"));
        let txn = InternalTopic {
            forbid_unclean_election: true,
            ..offsets(3)
        };
        assert_eq!(
            txn.configs()["unclean.leader.election.enable"].as_deref(),
            Some("false")
        );
    }
}
