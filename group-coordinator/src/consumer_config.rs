//! Consumer-protocol (KIP-848) group settings, by their Kafka names. Kafka
//! refuses to start when a timeout lies outside its min/max bounds; Ottla
//! clamps it into them and warns.

use std::borrow::Cow;
use std::collections::BTreeMap;

use ottla_controller::MetadataImage;
use tracing::warn;

use super::config::get;
use super::consumer_assignor::{RANGE, UNIFORM};
use super::consumer_member::MemberSubscription;
use super::consumer_migration::MigrationPolicy;
use super::resource_configs::group_overrides;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupConfig {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
    /// Server-side assignor names, the first being the default.
    pub assignors: Vec<String>,
    /// Whether groups may move between the classic and consumer protocols.
    pub migration_policy: MigrationPolicy,
    /// Whether `group.coordinator.rebalance.protocols` lists `consumer`.
    pub enabled: bool,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        Self {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: i32::MAX as usize,
            assignors: vec![UNIFORM.to_string(), RANGE.to_string()],
            migration_policy: MigrationPolicy::Bidirectional,
            enabled: true,
        }
    }
}

impl ConsumerGroupConfig {
    pub fn from_static(configs: &BTreeMap<String, String>) -> Self {
        let d = Self::default();
        let bounded =
            |key: &str, default: i32, min_key: &str, min: i32, max_key: &str, max: i32| {
                let (lo, hi) = (get(configs, min_key, min), get(configs, max_key, max));
                let v = get(configs, key, default);
                if v < lo || v > hi {
                    warn!(key, value = v, min = lo, max = hi, "out of bounds; clamped");
                }
                v.clamp(lo, hi.max(lo))
            };
        Self {
            session_timeout_ms: bounded(
                "group.consumer.session.timeout.ms",
                d.session_timeout_ms,
                "group.consumer.min.session.timeout.ms",
                45_000,
                "group.consumer.max.session.timeout.ms",
                60_000,
            ),
            heartbeat_interval_ms: bounded(
                "group.consumer.heartbeat.interval.ms",
                d.heartbeat_interval_ms,
                "group.consumer.min.heartbeat.interval.ms",
                5_000,
                "group.consumer.max.heartbeat.interval.ms",
                15_000,
            ),
            max_size: get(configs, "group.consumer.max.size", d.max_size),
            assignors: configs
                .get("group.consumer.assignors")
                .map(|v| parse_assignors(v))
                .filter(|a| !a.is_empty())
                .unwrap_or(d.assignors),
            // Validated with the broker's configuration.
            migration_policy: configs
                .get("group.consumer.migration.policy")
                .and_then(|v| MigrationPolicy::parse(v).ok())
                .unwrap_or(d.migration_policy),
            enabled: configs
                .get("group.coordinator.rebalance.protocols")
                .is_none_or(|v| v.split(',').any(|p| p.trim() == "consumer")),
        }
    }

    /// This config with `group`'s own session timeout and heartbeat
    /// interval, where its GROUP config resource sets them (checked against
    /// the broker's bounds when they were set).
    pub fn for_group(&self, image: &MetadataImage, group: &str) -> Cow<'_, Self> {
        let Some(overrides) = group_overrides(image, group) else {
            return Cow::Borrowed(self);
        };
        let overridden = |key: &str| {
            overrides
                .get(key)
                .and_then(|v| v.trim().parse::<i32>().ok())
        };
        let session = overridden("consumer.session.timeout.ms");
        let heartbeat = overridden("consumer.heartbeat.interval.ms");
        if session.is_none() && heartbeat.is_none() {
            return Cow::Borrowed(self);
        }
        let mut config = self.clone();
        config.session_timeout_ms = session.unwrap_or(config.session_timeout_ms);
        config.heartbeat_interval_ms = heartbeat.unwrap_or(config.heartbeat_interval_ms);
        Cow::Owned(config)
    }

    pub fn supports_assignor(&self, name: &str) -> bool {
        self.assignors.iter().any(|a| a == name)
    }

    /// The assignor most members ask for (ties: the first configured), or
    /// the default when none asks.
    pub fn preferred_assignor<'a>(
        &'a self,
        subs: impl Iterator<Item = &'a MemberSubscription>,
    ) -> &'a str {
        let mut votes = vec![0usize; self.assignors.len()];
        for name in subs.filter_map(|s| s.server_assignor.as_deref()) {
            if let Some(i) = self.assignors.iter().position(|a| a == name) {
                votes[i] += 1;
            }
        }
        let best = votes.iter().copied().max().unwrap_or(0);
        let i = votes.iter().position(|&v| v == best).unwrap_or(0);
        &self.assignors[i]
    }
}

/// Short names, or Kafka's assignor class names mapped to them.
fn parse_assignors(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter_map(|s| {
            let name = match s.rsplit('.').next().unwrap_or(s) {
                "UniformAssignor" => UNIFORM,
                "RangeAssignor" => RANGE,
                other => other,
            };
            if name == UNIFORM || name == RANGE {
                Some(name.to_string())
            } else {
                warn!(assignor = s, "ignoring an unknown consumer group assignor");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(assignor: Option<&str>) -> MemberSubscription {
        MemberSubscription {
            server_assignor: assignor.map(str::to_string),
            ..MemberSubscription::default()
        }
    }

    #[test]
    fn reads_bounds_assignors_and_votes() {
        let configs = BTreeMap::from([
            (
                "group.consumer.session.timeout.ms".to_string(),
                "6000".to_string(),
            ),
            (
                "group.consumer.min.session.timeout.ms".to_string(),
                "1000".to_string(),
            ),
            (
                "group.consumer.heartbeat.interval.ms".to_string(),
                "100".to_string(),
            ),
            (
                "group.consumer.assignors".to_string(),
                "org.apache.kafka.coordinator.group.assignor.RangeAssignor, uniform".to_string(),
            ),
        ]);
        let c = ConsumerGroupConfig::from_static(&configs);
        assert_eq!(c.session_timeout_ms, 6000);
        // Below group.consumer.min.heartbeat.interval.ms (5000).
        assert_eq!(c.heartbeat_interval_ms, 5000);
        assert_eq!(c.assignors, ["range", "uniform"]);
        assert_eq!(c.migration_policy, MigrationPolicy::Bidirectional);
        assert!(c.enabled);
        assert_eq!(c.preferred_assignor([].into_iter()), "range");
        let subs = [
            sub(Some("uniform")),
            sub(None),
            sub(Some("uniform")),
            sub(Some("range")),
        ];
        assert_eq!(c.preferred_assignor(subs.iter()), "uniform");
        assert_eq!(
            ConsumerGroupConfig::default().preferred_assignor([].into_iter()),
            "uniform"
        );
        let classic_only = BTreeMap::from([
            (
                "group.coordinator.rebalance.protocols".to_string(),
                "classic".to_string(),
            ),
            (
                "group.consumer.migration.policy".to_string(),
                "UPGRADE".to_string(),
            ),
        ]);
        let c = ConsumerGroupConfig::from_static(&classic_only);
        assert!(!c.enabled);
        assert_eq!(c.migration_policy, MigrationPolicy::Upgrade);
    }
}
