//! Replication throttles, as Kafka's ReplicationQuotaManager applies them
//! (KIP-73): `leader.replication.throttled.rate` and
//! `follower.replication.throttled.rate` (bytes/s, dynamic broker configs)
//! bound the replication traffic of the partitions a topic names in
//! `leader.replication.throttled.replicas` (`partition:broker` entries for
//! the brokers serving them, or `*`) and
//! `follower.replication.throttled.replicas` (the brokers fetching them),
//! and only for followers out of the ISR: a reassignment catching a new
//! replica up is slowed, in-sync replication never is.
//! `kafka-reassign-partitions.sh --throttle` sets these configs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use ottla_controller::records::CONFIG_RESOURCE_TOPIC;
use ottla_controller::MetadataImage;
use parking_lot::Mutex;

use crate::dynamic_broker_config::dynamic_value;
use crate::sampled_rate::SampledRate;

pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Serving follower fetches.
    Leader,
    /// Fetching from leaders.
    Follower,
}

impl Side {
    pub const BOTH: [Side; 2] = [Side::Leader, Side::Follower];

    pub fn name(self) -> &'static str {
        match self {
            Side::Leader => "leader",
            Side::Follower => "follower",
        }
    }

    fn rate_key(self) -> &'static str {
        match self {
            Side::Leader => LEADER_RATE,
            Side::Follower => FOLLOWER_RATE,
        }
    }

    fn replicas_key(self) -> &'static str {
        match self {
            Side::Leader => LEADER_REPLICAS,
            Side::Follower => FOLLOWER_REPLICAS,
        }
    }
}

/// This broker's two replication quotas.
pub struct ReplicationThrottle {
    node_id: String,
    /// The rates from the static configuration, if set.
    static_rates: [Option<f64>; 2],
    measured: [Mutex<SampledRate>; 2],
    /// Throttled bytes moved, for the metrics.
    totals: [AtomicU64; 2],
}

impl ReplicationThrottle {
    pub fn new(node_id: i32, static_configs: &std::collections::BTreeMap<String, String>) -> Self {
        let rate = |side: Side| {
            static_configs
                .get(side.rate_key())
                .and_then(|v| v.parse().ok())
        };
        let now = Instant::now();
        Self {
            node_id: node_id.to_string(),
            static_rates: [rate(Side::Leader), rate(Side::Follower)],
            measured: [
                Mutex::new(SampledRate::new(now)),
                Mutex::new(SampledRate::new(now)),
            ],
            totals: Default::default(),
        }
    }

    /// The side's rate: this broker's dynamic value, the cluster-wide
    /// dynamic default, the static one; None when unlimited.
    pub fn limit(&self, image: &MetadataImage, side: Side) -> Option<f64> {
        dynamic_value(image, &self.node_id, side.rate_key())
            .and_then(|v| v.parse::<f64>().ok())
            .or(self.static_rates[side as usize])
            .filter(|rate| *rate < i64::MAX as f64)
    }

    /// Whether `side` is over `limit` now.
    pub fn exceeded(&self, side: Side, limit: f64) -> bool {
        self.measured[side as usize].lock().rate(Instant::now()).0 > limit
    }

    /// Counts throttled replication bytes.
    pub fn record(&self, side: Side, bytes: usize) {
        if bytes > 0 {
            self.measured[side as usize]
                .lock()
                .record(bytes as f64, Instant::now());
            self.totals[side as usize].fetch_add(bytes as u64, Ordering::Relaxed);
        }
    }

    /// Throttled bytes moved so far on `side`.
    pub fn throttled_bytes(&self, side: Side) -> u64 {
        self.totals[side as usize].load(Ordering::Relaxed)
    }
}

/// Whether the topic's `side` throttle list names `partition` on broker
/// `replica` (or is `*`); each broker asks about itself.
pub fn is_throttled(
    image: &MetadataImage,
    side: Side,
    topic: &str,
    partition: i32,
    replica: i32,
) -> bool {
    let Some(list) = image
        .configs_of(CONFIG_RESOURCE_TOPIC, topic)
        .and_then(|c| c.get(side.replicas_key()))
    else {
        return false;
    };
    list.split(',').map(str::trim).any(|entry| {
        entry == "*"
            || entry
                .split_once(':')
                .is_some_and(|(p, r)| p.parse() == Ok(partition) && r.parse() == Ok(replica))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ottla_controller::MetadataRecord;

    use super::*;
    use ottla_controller::records::CONFIG_RESOURCE_BROKER;

    fn config(image: &mut MetadataImage, resource_type: i8, name: &str, key: &str, value: &str) {
        image.apply(
            image.offset + 1,
            &MetadataRecord::Config {
                resource_type,
                resource_name: name.into(),
                name: key.into(),
                value: Some(value.into()),
            },
        );
    }

    #[test]
    fn throttled_replicas_and_rates_come_from_the_configs() {
        let mut image = MetadataImage::default();
        config(
            &mut image,
            CONFIG_RESOURCE_TOPIC,
            "t",
            LEADER_REPLICAS,
            "0:2, 1:3",
        );
        config(
            &mut image,
            CONFIG_RESOURCE_TOPIC,
            "all",
            FOLLOWER_REPLICAS,
            "*",
        );
        assert!(is_throttled(&image, Side::Leader, "t", 0, 2));
        assert!(is_throttled(&image, Side::Leader, "t", 1, 3));
        assert!(!is_throttled(&image, Side::Leader, "t", 0, 3));
        assert!(!is_throttled(&image, Side::Follower, "t", 0, 2));
        assert!(is_throttled(&image, Side::Follower, "all", 7, 1));

        let statics = BTreeMap::from([(FOLLOWER_RATE.to_string(), "500".to_string())]);
        let throttle = ReplicationThrottle::new(1, &statics);
        assert_eq!(throttle.limit(&image, Side::Leader), None);
        assert_eq!(throttle.limit(&image, Side::Follower), Some(500.0));
        config(&mut image, CONFIG_RESOURCE_BROKER, "", LEADER_RATE, "1000");
        assert_eq!(throttle.limit(&image, Side::Leader), Some(1000.0));
        config(&mut image, CONFIG_RESOURCE_BROKER, "1", LEADER_RATE, "2000");
        assert_eq!(throttle.limit(&image, Side::Leader), Some(2000.0));

        // 10 s of quota goes at once; more is over it.
        throttle.record(Side::Leader, 20_000);
        assert!(!throttle.exceeded(Side::Leader, 2000.0));
        throttle.record(Side::Leader, 1);
        assert!(throttle.exceeded(Side::Leader, 2000.0));
        assert_eq!(throttle.throttled_bytes(Side::Leader), 20_001);
        assert!(!throttle.exceeded(Side::Follower, 500.0));
    }
}
