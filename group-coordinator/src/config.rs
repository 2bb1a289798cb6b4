//! Group coordinator settings, read from the broker's static configs by their
//! Kafka names, with Kafka's defaults.

use std::collections::BTreeMap;
use std::str::FromStr;

use tracing::warn;

use super::consumer_config::ConsumerGroupConfig;

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's fixed timeout for a new member's first JoinGroup to complete.
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: i64 = 5 * 60 * 1000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupConfig {
    pub offsets_topic_partitions: i32,
    pub offsets_topic_replication_factor: i16,
    pub offsets_topic_segment_bytes: i32,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i32,
    pub max_group_size: usize,
    pub offset_metadata_max_bytes: usize,
    /// offsets.retention.minutes, in ms.
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: i64,
    /// How long an answer waits for the offsets partition's ISR to have
    /// what the coordinator wrote for it.
    pub offsets_commit_timeout_ms: i64,
    pub consumer: ConsumerGroupConfig,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            offsets_topic_partitions: 50,
            offsets_topic_replication_factor: 3,
            offsets_topic_segment_bytes: 100 << 20,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3000,
            max_group_size: i32::MAX as usize,
            offset_metadata_max_bytes: 4096,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
            offsets_commit_timeout_ms: 5000,
            consumer: ConsumerGroupConfig::default(),
        }
    }
}

impl GroupConfig {
    pub fn from_static(configs: &BTreeMap<String, String>) -> Self {
        let d = Self::default();
        Self {
            offsets_topic_partitions: get(
                configs,
                "offsets.topic.num.partitions",
                d.offsets_topic_partitions,
            )
            .max(1),
            offsets_topic_replication_factor: get(
                configs,
                "offsets.topic.replication.factor",
                d.offsets_topic_replication_factor,
            )
            .max(1),
            offsets_topic_segment_bytes: get(
                configs,
                "offsets.topic.segment.bytes",
                d.offsets_topic_segment_bytes,
            ),
            min_session_timeout_ms: get(
                configs,
                "group.min.session.timeout.ms",
                d.min_session_timeout_ms,
            ),
            max_session_timeout_ms: get(
                configs,
                "group.max.session.timeout.ms",
                d.max_session_timeout_ms,
            ),
            initial_rebalance_delay_ms: get(
                configs,
                "group.initial.rebalance.delay.ms",
                d.initial_rebalance_delay_ms,
            )
            .max(0),
            max_group_size: get(configs, "group.max.size", d.max_group_size),
            offset_metadata_max_bytes: get(
                configs,
                "offset.metadata.max.bytes",
                d.offset_metadata_max_bytes,
            ),
            offsets_retention_ms: get(
                configs,
                "offsets.retention.minutes",
                d.offsets_retention_ms / 60_000,
            )
            .max(1)
            .saturating_mul(60_000),
            offsets_retention_check_interval_ms: get(
                configs,
                "offsets.retention.check.interval.ms",
                d.offsets_retention_check_interval_ms,
            )
            .max(1),
            offsets_commit_timeout_ms: get(
                configs,
                "offsets.commit.timeout.ms",
                d.offsets_commit_timeout_ms,
            )
            .max(1),
            consumer: ConsumerGroupConfig::from_static(configs),
        }
    }
}

/// The key's value, or the default when unset or unparsable (the config
/// layer validates values; this only refuses to crash on a bad one).
pub(super) fn get<T: FromStr + Copy + std::fmt::Display>(
    configs: &BTreeMap<String, String>,
    key: &str,
    default: T,
) -> T {
    match configs.get(key) {
        None => default,
        Some(v) => v.trim().parse().unwrap_or_else(|_| {
            warn!(key, value = %v, "ignoring an invalid group coordinator setting; using {default}");
            default
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_overrides_and_falls_back() {
        let configs = BTreeMap::from([
            ("offsets.topic.num.partitions".to_string(), "7".to_string()),
            (
                "group.initial.rebalance.delay.ms".to_string(),
                "0".to_string(),
            ),
            ("group.max.size".to_string(), "nope".to_string()),
        ]);
        let c = GroupConfig::from_static(&configs);
        assert_eq!(c.offsets_topic_partitions, 7);
        assert_eq!(c.initial_rebalance_delay_ms, 0);
        assert_eq!(c.max_group_size, i32::MAX as usize);
        assert_eq!(c.offsets_topic_replication_factor, 3);
        assert_eq!(c.offsets_topic_segment_bytes, 104_857_600);
    }
}
