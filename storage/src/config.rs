//! Per-log (topic-level) configuration with Kafka's names, defaults and
//! broker-level synonyms. The broker resolves a topic's effective values from
//! topic overrides, then broker `log.*` settings, then these defaults.

use std::collections::BTreeMap;
use std::fmt;

use ottla_protocol::batch::TimestampType;

/// `cleanup.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanupPolicy {
    pub delete: bool,
    pub compact: bool,
}

impl CleanupPolicy {
    pub const DELETE: Self = Self {
        delete: true,
        compact: false,
    };
}

impl fmt::Display for CleanupPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.delete, self.compact) {
            (true, true) => f.write_str("compact,delete"),
            (false, true) => f.write_str("compact"),
            (true, false) => f.write_str("delete"),
            (false, false) => f.write_str(""),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub segment_index_bytes: usize,
    pub index_interval_bytes: usize,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub cleanup_policy: CleanupPolicy,
    pub delete_retention_ms: i64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub max_message_bytes: usize,
    pub message_timestamp_type: TimestampType,
    pub message_timestamp_before_max_ms: i64,
    pub message_timestamp_after_max_ms: i64,
    pub file_delete_delay_ms: i64,
    /// Replication, not storage, but a topic-level key the produce path reads
    /// with the rest of the log's settings.
    pub min_insync_replicas: i32,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            cleanup_policy: CleanupPolicy::DELETE,
            delete_retention_ms: 24 * 3600 * 1000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            max_message_bytes: 1_048_588,
            message_timestamp_type: TimestampType::CreateTime,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 3_600_000,
            file_delete_delay_ms: 60_000,
            min_insync_replicas: 1,
        }
    }
}

/// How a topic-level key is typed and validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Long,
    Int,
    Double,
    Boolean,
    String,
    List,
}

impl ConfigType {
    /// Kafka's DescribeConfigs `config_type` codes.
    pub fn describe_code(self) -> i8 {
        match self {
            Self::Boolean => 1,
            Self::String => 2,
            Self::Int => 3,
            Self::Long => 5,
            Self::Double => 6,
            Self::List => 7,
        }
    }
}

/// One topic-level config key.
#[derive(Debug, Clone, Copy)]
pub struct TopicConfigKey {
    pub name: &'static str,
    pub config_type: ConfigType,
    /// Default value in Kafka's textual form.
    pub default: &'static str,
    /// The broker-level key that supplies the default, if any.
    pub broker_synonym: Option<&'static str>,
    pub doc: &'static str,
    /// Inclusive lower bound for numeric keys.
    pub min: Option<f64>,
    /// Allowed values for enumerated string keys.
    pub allowed: &'static [&'static str],
}

const fn key(
    name: &'static str,
    config_type: ConfigType,
    default: &'static str,
    broker_synonym: Option<&'static str>,
    min: Option<f64>,
    doc: &'static str,
) -> TopicConfigKey {
    TopicConfigKey {
        name,
        config_type,
        default,
        broker_synonym,
        doc,
        min,
        allowed: &[],
    }
}

/// Every topic-level key Ottla accepts, in Kafka's names. Keys Ottla stores
/// but does not act on (e.g. `preallocate`) are still accepted so that
/// existing tooling and mirrored configs round-trip.
pub static TOPIC_CONFIG_KEYS: &[TopicConfigKey] = &[
    TopicConfigKey {
        allowed: &["compact", "delete"],
        ..key(
            "cleanup.policy",
            ConfigType::List,
            "delete",
            Some("log.cleanup.policy"),
            None,
            "delete and/or compact old segments",
        )
    },
    TopicConfigKey {
        allowed: &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"],
        ..key(
            "compression.type",
            ConfigType::String,
            "producer",
            Some("compression.type"),
            None,
            "final compression type; producer keeps the producer's codec",
        )
    },
    key(
        "compression.gzip.level",
        ConfigType::Int,
        "-1",
        Some("compression.gzip.level"),
        Some(-1.0),
        "gzip level when the broker compresses",
    ),
    key(
        "compression.lz4.level",
        ConfigType::Int,
        "9",
        Some("compression.lz4.level"),
        Some(1.0),
        "lz4 level when the broker compresses",
    ),
    key(
        "compression.zstd.level",
        ConfigType::Int,
        "3",
        Some("compression.zstd.level"),
        Some(-131072.0),
        "zstd level when the broker compresses",
    ),
    key(
        "delete.retention.ms",
        ConfigType::Long,
        "86400000",
        Some("log.cleaner.delete.retention.ms"),
        Some(0.0),
        "how long tombstones are kept on compacted topics",
    ),
    key(
        "errors.deadletterqueue.group.enable",
        ConfigType::Boolean,
        "false",
        None,
        None,
        "whether share groups may use this topic as their dead-letter queue",
    ),
    key(
        "file.delete.delay.ms",
        ConfigType::Long,
        "60000",
        Some("log.segment.delete.delay.ms"),
        Some(0.0),
        "delay before a deleted segment's files are removed",
    ),
    key(
        "flush.messages",
        ConfigType::Long,
        "9223372036854775807",
        Some("log.flush.interval.messages"),
        Some(1.0),
        "fsync after this many messages",
    ),
    key(
        "flush.ms",
        ConfigType::Long,
        "9223372036854775807",
        Some("log.flush.interval.ms"),
        Some(0.0),
        "fsync after this much time",
    ),
    key(
        "follower.replication.throttled.replicas",
        ConfigType::List,
        "",
        // No broker-level key sets it (Kafka's ServerTopicConfigSynonyms).
        None,
        None,
        "replicas throttled on the follower side",
    ),
    key(
        "index.interval.bytes",
        ConfigType::Int,
        "4096",
        Some("log.index.interval.bytes"),
        Some(0.0),
        "bytes between offset index entries",
    ),
    key(
        "leader.replication.throttled.replicas",
        ConfigType::List,
        "",
        // No broker-level key sets it (Kafka's ServerTopicConfigSynonyms).
        None,
        None,
        "replicas throttled on the leader side",
    ),
    key(
        "local.retention.bytes",
        ConfigType::Long,
        "-2",
        Some("log.local.retention.bytes"),
        Some(-2.0),
        "tiered storage local retention (accepted, not used)",
    ),
    key(
        "local.retention.ms",
        ConfigType::Long,
        "-2",
        Some("log.local.retention.ms"),
        Some(-2.0),
        "tiered storage local retention (accepted, not used)",
    ),
    key(
        "max.compaction.lag.ms",
        ConfigType::Long,
        "9223372036854775807",
        Some("log.cleaner.max.compaction.lag.ms"),
        Some(1.0),
        "max time a record stays uncompacted",
    ),
    key(
        "max.message.bytes",
        ConfigType::Int,
        "1048588",
        Some("message.max.bytes"),
        Some(0.0),
        "largest record batch size allowed",
    ),
    key(
        "message.timestamp.after.max.ms",
        ConfigType::Long,
        "3600000",
        Some("log.message.timestamp.after.max.ms"),
        Some(0.0),
        "how far in the future a CreateTime timestamp may be",
    ),
    key(
        "message.timestamp.before.max.ms",
        ConfigType::Long,
        "9223372036854775807",
        Some("log.message.timestamp.before.max.ms"),
        Some(0.0),
        "how far in the past a CreateTime timestamp may be",
    ),
    TopicConfigKey {
        allowed: &["CreateTime", "LogAppendTime"],
        ..key(
            "message.timestamp.type",
            ConfigType::String,
            "CreateTime",
            Some("log.message.timestamp.type"),
            None,
            "CreateTime or LogAppendTime",
        )
    },
    key(
        "min.cleanable.dirty.ratio",
        ConfigType::Double,
        "0.5",
        Some("log.cleaner.min.cleanable.ratio"),
        Some(0.0),
        "dirty ratio that triggers compaction",
    ),
    key(
        "min.compaction.lag.ms",
        ConfigType::Long,
        "0",
        Some("log.cleaner.min.compaction.lag.ms"),
        Some(0.0),
        "min time a record stays uncompacted",
    ),
    key(
        "min.insync.replicas",
        ConfigType::Int,
        "1",
        Some("min.insync.replicas"),
        Some(1.0),
        "replicas that must acknowledge an acks=all write",
    ),
    key(
        "preallocate",
        ConfigType::Boolean,
        "false",
        Some("log.preallocate"),
        None,
        "preallocate segment files (accepted, not used)",
    ),
    key(
        "remote.storage.enable",
        ConfigType::Boolean,
        "false",
        None,
        None,
        "tiered storage (not supported; must stay false)",
    ),
    key(
        "retention.bytes",
        ConfigType::Long,
        "-1",
        Some("log.retention.bytes"),
        Some(-1.0),
        "max partition size before old segments are deleted",
    ),
    key(
        "retention.ms",
        ConfigType::Long,
        "604800000",
        Some("log.retention.ms"),
        Some(-1.0),
        "max age before old segments are deleted",
    ),
    key(
        "segment.bytes",
        ConfigType::Int,
        "1073741824",
        Some("log.segment.bytes"),
        Some(1048576.0),
        "segment file size (at least 1 MiB, as Kafka 4 requires)",
    ),
    key(
        "segment.index.bytes",
        ConfigType::Int,
        "10485760",
        Some("log.index.size.max.bytes"),
        Some(4.0),
        "max offset index size per segment",
    ),
    key(
        "segment.jitter.ms",
        ConfigType::Long,
        "0",
        Some("log.roll.jitter.ms"),
        Some(0.0),
        "random jitter subtracted from segment.ms",
    ),
    key(
        "segment.ms",
        ConfigType::Long,
        "604800000",
        Some("log.roll.ms"),
        Some(1.0),
        "time after which a segment rolls",
    ),
    key(
        "unclean.leader.election.enable",
        ConfigType::Boolean,
        "false",
        Some("unclean.leader.election.enable"),
        None,
        "allow out-of-sync replicas to become leader",
    ),
    key(
        "message.downconversion.enable",
        ConfigType::Boolean,
        "true",
        Some("log.message.downconversion.enable"),
        None,
        "accepted for compatibility; Ottla never down-converts",
    ),
];

pub fn topic_config_key(name: &str) -> Option<&'static TopicConfigKey> {
    TOPIC_CONFIG_KEYS.iter().find(|k| k.name == name)
}

/// Checks one topic config value, returning a message an operator can act on.
pub fn validate_topic_config(name: &str, value: &str) -> Result<(), String> {
    let key = topic_config_key(name).ok_or_else(|| format!("unknown topic config '{name}'"))?;
    let bad = |expected: &str| format!("invalid value '{value}' for '{name}': expected {expected}");
    match key.config_type {
        ConfigType::Long | ConfigType::Int => {
            let v: i64 = value.trim().parse().map_err(|_| bad("an integer"))?;
            if key.config_type == ConfigType::Int && i32::try_from(v).is_err() {
                return Err(bad("a 32-bit integer"));
            }
            if let Some(min) = key.min {
                if (v as f64) < min {
                    return Err(bad(&format!("a value >= {min}")));
                }
            }
        }
        ConfigType::Double => {
            let v: f64 = value.trim().parse().map_err(|_| bad("a number"))?;
            if !(0.0..=1.0).contains(&v) && name == "min.cleanable.dirty.ratio" {
                return Err(bad("a ratio between 0 and 1"));
            }
        }
        ConfigType::Boolean => {
            if !matches!(value.trim(), "true" | "false") {
                return Err(bad("true or false"));
            }
            if name == "remote.storage.enable" && value.trim() == "true" {
                return Err(
                    "tiered storage is not supported by Ottla: remote.storage.enable must be false"
                        .into(),
                );
            }
        }
        ConfigType::String => {
            if !key.allowed.is_empty() && !key.allowed.contains(&value.trim()) {
                return Err(bad(&format!("one of {}", key.allowed.join(", "))));
            }
        }
        ConfigType::List => {
            if !key.allowed.is_empty() {
                for item in value.split(',').map(str::trim) {
                    if !key.allowed.contains(&item) {
                        return Err(bad(&format!("a list of {}", key.allowed.join(", "))));
                    }
                }
            }
        }
    }
    Ok(())
}

impl LogConfig {
    /// Builds the effective config from resolved `name -> value` pairs (topic
    /// overrides already merged over broker defaults). Values are validated
    /// when they are set; one that no longer validates (stored by an older
    /// version with looser rules) keeps the default for that key alone and
    /// is returned in the second element, so the caller can warn.
    pub fn from_values(values: &BTreeMap<String, String>) -> (Self, Vec<String>) {
        let mut c = Self::default();
        let mut rejected = Vec::new();
        for (name, value) in values {
            if topic_config_key(name).is_some() && validate_topic_config(name, value).is_err() {
                rejected.push(name.clone());
                continue;
            }
            let v = value.trim();
            let long = || v.parse::<i64>().unwrap_or(0);
            match name.as_str() {
                "segment.bytes" => c.segment_bytes = long() as u64,
                "segment.ms" => c.segment_ms = long(),
                "segment.index.bytes" => c.segment_index_bytes = long() as usize,
                "index.interval.bytes" => c.index_interval_bytes = long() as usize,
                "retention.ms" => c.retention_ms = long(),
                "retention.bytes" => c.retention_bytes = long(),
                "cleanup.policy" => {
                    c.cleanup_policy = CleanupPolicy {
                        delete: v.split(',').any(|p| p.trim() == "delete"),
                        compact: v.split(',').any(|p| p.trim() == "compact"),
                    }
                }
                "delete.retention.ms" => c.delete_retention_ms = long(),
                "min.compaction.lag.ms" => c.min_compaction_lag_ms = long(),
                "max.compaction.lag.ms" => c.max_compaction_lag_ms = long(),
                "min.cleanable.dirty.ratio" => {
                    c.min_cleanable_dirty_ratio = v.parse().unwrap_or(0.5)
                }
                "flush.messages" => c.flush_messages = long(),
                "flush.ms" => c.flush_ms = long(),
                "max.message.bytes" => c.max_message_bytes = long() as usize,
                "message.timestamp.type" => {
                    c.message_timestamp_type = if v == "LogAppendTime" {
                        TimestampType::LogAppendTime
                    } else {
                        TimestampType::CreateTime
                    }
                }
                "message.timestamp.before.max.ms" => c.message_timestamp_before_max_ms = long(),
                "message.timestamp.after.max.ms" => c.message_timestamp_after_max_ms = long(),
                "file.delete.delay.ms" => c.file_delete_delay_ms = long(),
                "min.insync.replicas" => c.min_insync_replicas = long() as i32,
                _ => {}
            }
        }
        (c, rejected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_key_table() {
        let c = LogConfig::default();
        let default_of = |n: &str| topic_config_key(n).unwrap().default;
        assert_eq!(default_of("segment.bytes"), c.segment_bytes.to_string());
        assert_eq!(default_of("retention.ms"), c.retention_ms.to_string());
        assert_eq!(
            default_of("max.message.bytes"),
            c.max_message_bytes.to_string()
        );
        assert_eq!(
            default_of("message.timestamp.after.max.ms"),
            c.message_timestamp_after_max_ms.to_string()
        );
        assert_eq!(default_of("cleanup.policy"), c.cleanup_policy.to_string());
    }

    #[test]
    fn validation_names_the_key() {
        assert!(validate_topic_config("retention.ms", "-1").is_ok());
        let e = validate_topic_config("retention.ms", "soon").unwrap_err();
        assert!(e.contains("retention.ms"), "{e}");
        assert!(validate_topic_config("segment.bytes", "10").is_err());
        assert!(validate_topic_config("cleanup.policy", "compact,delete").is_ok());
        assert!(validate_topic_config("cleanup.policy", "shred").is_err());
        assert!(validate_topic_config("no.such.key", "1").is_err());
        assert!(validate_topic_config("remote.storage.enable", "true").is_err());
    }

    #[test]
    fn values_resolve_into_the_typed_config() {
        let mut v = BTreeMap::new();
        v.insert("cleanup.policy".to_string(), "compact".to_string());
        v.insert("segment.bytes".to_string(), "1048576".to_string());
        v.insert(
            "message.timestamp.type".to_string(),
            "LogAppendTime".to_string(),
        );
        let (c, rejected) = LogConfig::from_values(&v);
        assert!(rejected.is_empty());
        assert!(c.cleanup_policy.compact && !c.cleanup_policy.delete);
        assert_eq!(c.segment_bytes, 1 << 20);
        assert_eq!(c.message_timestamp_type, TimestampType::LogAppendTime);
    }
}
