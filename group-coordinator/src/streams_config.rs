//! A streams group's settings (KIP-1071): each is the group's own override
//! (`kafka-configs.sh --entity-type groups`), else the broker's
//! `group.streams.*` setting, else Kafka's default.

use std::collections::BTreeMap;

use ottla_controller::MetadataImage;

use super::resource_configs::{broker_default, group_config_key, group_overrides};
use super::share_config::broker_max_size;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsGroupSettings {
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i32,
    pub num_standby_replicas: usize,
    /// How long a group that was empty waits for more members before its
    /// first assignment.
    pub initial_rebalance_delay_ms: i64,
    /// `group.streams.max.size` (the broker's only).
    pub max_size: usize,
    /// `streams.acceptable.recovery.lag`, which heartbeats tell members.
    pub acceptable_recovery_lag: i64,
    /// `streams.rack.aware.assignment.tags`: client tags every member must
    /// have (MISSING_CLIENT_TAGS otherwise, to v1 heartbeats).
    pub rack_aware_assignment_tags: Vec<String>,
    /// `streams.assignor.name`: the task assignor of the next assignment.
    pub assignor_name: String,
}

impl Default for StreamsGroupSettings {
    fn default() -> Self {
        Self {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            num_standby_replicas: 0,
            initial_rebalance_delay_ms: 3_000,
            max_size: i32::MAX as usize,
            acceptable_recovery_lag: 10_000,
            rack_aware_assignment_tags: Vec::new(),
            assignor_name: "sticky".to_string(),
        }
    }
}

impl StreamsGroupSettings {
    pub fn resolve(image: &MetadataImage, broker: &BTreeMap<String, String>, group: &str) -> Self {
        let overrides = group_overrides(image, group);
        let value = |name: &str| -> String {
            overrides
                .and_then(|o| o.get(name).cloned())
                .unwrap_or_else(|| {
                    broker_default(group_config_key(name).expect("a streams group key"), broker)
                })
        };
        let int =
            |name: &str, default: i64| -> i64 { value(name).trim().parse().unwrap_or(default) };
        let tags = value("streams.rack.aware.assignment.tags");
        let d = Self::default();
        Self {
            session_timeout_ms: int("streams.session.timeout.ms", d.session_timeout_ms),
            heartbeat_interval_ms: int(
                "streams.heartbeat.interval.ms",
                i64::from(d.heartbeat_interval_ms),
            ) as i32,
            num_standby_replicas: int("streams.num.standby.replicas", 0).clamp(0, 2) as usize,
            initial_rebalance_delay_ms: int(
                "streams.initial.rebalance.delay.ms",
                d.initial_rebalance_delay_ms,
            )
            .max(0),
            max_size: broker_max_size(broker, "group.streams.max.size", d.max_size),
            acceptable_recovery_lag: int(
                "streams.acceptable.recovery.lag",
                d.acceptable_recovery_lag,
            ),
            rack_aware_assignment_tags: tags
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
            assignor_name: value("streams.assignor.name").trim().to_string(),
        }
    }
}
