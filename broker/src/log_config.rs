//! Effective topic configuration: topic overrides from the metadata image,
//! then the broker's `log.*` settings (each topic key's broker synonym: this
//! node's dynamic value, the cluster-wide dynamic default, the static
//! value), then Kafka's defaults. DescribeConfigs reports the same
//! resolution with sources.

use std::collections::BTreeMap;
use std::sync::Arc;

use ottla_controller::records::{CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};
use ottla_controller::MetadataImage;
use ottla_storage::config::{LogConfig, TopicConfigKey, TOPIC_CONFIG_KEYS};
use ottla_storage::manager::LogConfigSource;
use parking_lot::RwLock;

/// Where an effective value came from (Kafka's DescribeConfigs sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    TopicOverride,
    DynamicBroker,
    DynamicBrokerDefault,
    StaticBroker,
    Default,
}

impl ConfigSource {
    /// DescribeConfigs `config_source` codes.
    pub fn code(self) -> i8 {
        match self {
            Self::TopicOverride => 1,
            Self::DynamicBroker => 2,
            Self::DynamicBrokerDefault => 3,
            Self::StaticBroker => 4,
            Self::Default => 5,
        }
    }
}

/// One resolved topic config entry, with the synonyms Kafka lists.
#[derive(Debug, Clone)]
pub struct ResolvedConfig {
    pub key: &'static TopicConfigKey,
    pub value: String,
    pub source: ConfigSource,
    /// (name, value, source) from most to least specific.
    pub synonyms: Vec<(String, String, ConfigSource)>,
}

pub struct TopicConfigResolver {
    /// Per-broker dynamic configs are stored under this node's id.
    node_id: String,
    /// Broker settings from server.properties (static).
    static_broker: BTreeMap<String, String>,
    image: RwLock<Arc<MetadataImage>>,
}

impl TopicConfigResolver {
    pub fn new(
        node_id: i32,
        static_broker: BTreeMap<String, String>,
        image: Arc<MetadataImage>,
    ) -> Self {
        Self {
            node_id: node_id.to_string(),
            static_broker,
            image: RwLock::new(image),
        }
    }

    pub fn set_image(&self, image: Arc<MetadataImage>) {
        *self.image.write() = image;
    }

    /// Every topic key, resolved for `topic`.
    pub fn describe(&self, topic: &str) -> Vec<ResolvedConfig> {
        let image = self.image.read().clone();
        self.describe_in(&image, topic)
    }

    /// Every topic key, resolved for `topic` against `image` rather than the
    /// image the logs follow: request handlers answer from the controller's
    /// newest image, or from a candidate one when validating only.
    pub fn describe_in(&self, image: &MetadataImage, topic: &str) -> Vec<ResolvedConfig> {
        let overrides = image.configs_of(CONFIG_RESOURCE_TOPIC, topic);
        let dynamic_node = image.configs_of(CONFIG_RESOURCE_BROKER, &self.node_id);
        let dynamic_defaults = image.configs_of(CONFIG_RESOURCE_BROKER, "");
        TOPIC_CONFIG_KEYS
            .iter()
            .map(|key| {
                let mut synonyms = Vec::new();
                if let Some(v) = overrides.and_then(|o| o.get(key.name)) {
                    synonyms.push((key.name.to_string(), v.clone(), ConfigSource::TopicOverride));
                }
                if let Some(syn) = key.broker_synonym {
                    if let Some(v) = dynamic_node.and_then(|d| d.get(syn)) {
                        synonyms.push((syn.to_string(), v.clone(), ConfigSource::DynamicBroker));
                    }
                    if let Some(v) = dynamic_defaults.and_then(|d| d.get(syn)) {
                        synonyms.push((
                            syn.to_string(),
                            v.clone(),
                            ConfigSource::DynamicBrokerDefault,
                        ));
                    }
                    if let Some(v) = self.broker_static_value(syn) {
                        synonyms.push((syn.to_string(), v, ConfigSource::StaticBroker));
                    }
                    synonyms.push((
                        syn.to_string(),
                        key.default.to_string(),
                        ConfigSource::Default,
                    ));
                }
                let (value, source) = synonyms
                    .first()
                    .map(|(_, v, s)| (v.clone(), *s))
                    .unwrap_or_else(|| (key.default.to_string(), ConfigSource::Default));
                ResolvedConfig {
                    key,
                    value,
                    source,
                    synonyms,
                }
            })
            .collect()
    }

    /// Broker-level value for a `log.*` key, honouring Kafka's unit
    /// variants (`log.retention.hours` / `.minutes` / `.ms`, `log.roll.hours`).
    fn broker_static_value(&self, synonym: &str) -> Option<String> {
        let get = |k: &str| self.static_broker.get(k).cloned();
        let scaled = |k: &str, factor: i64| {
            get(k)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .map(|v| (v * factor).to_string())
        };
        match synonym {
            "log.retention.ms" => get("log.retention.ms")
                .or_else(|| scaled("log.retention.minutes", 60_000))
                .or_else(|| scaled("log.retention.hours", 3_600_000)),
            "log.roll.ms" => get("log.roll.ms").or_else(|| scaled("log.roll.hours", 3_600_000)),
            "log.roll.jitter.ms" => {
                get("log.roll.jitter.ms").or_else(|| scaled("log.roll.jitter.hours", 3_600_000))
            }
            "log.flush.interval.ms" => get("log.flush.interval.ms"),
            other => get(other),
        }
    }

    pub fn resolve(&self, topic: &str) -> LogConfig {
        let values: BTreeMap<String, String> = self
            .describe(topic)
            .into_iter()
            .map(|r| (r.key.name.to_string(), r.value))
            .collect();
        // Values were validated when set; fall back to defaults rather than
        // refusing to open a log.
        LogConfig::from_values(&values).unwrap_or_default()
    }
}

impl LogConfigSource for TopicConfigResolver {
    fn log_config(&self, topic: &str) -> LogConfig {
        self.resolve(topic)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ottla_controller::MetadataRecord;

    #[test]
    fn topic_overrides_beat_broker_settings_which_beat_defaults() {
        let mut broker = BTreeMap::new();
        broker.insert("log.retention.hours".to_string(), "2".to_string());
        broker.insert("log.segment.bytes".to_string(), "1048576".to_string());
        let mut image = MetadataImage::empty();
        image.apply(
            0,
            &MetadataRecord::Config {
                resource_type: CONFIG_RESOURCE_TOPIC,
                resource_name: "t".into(),
                name: "segment.bytes".into(),
                value: Some("2097152".into()),
            },
        );
        let r = TopicConfigResolver::new(1, broker, Arc::new(image));
        let t = r.resolve("t");
        assert_eq!(t.segment_bytes, 2 << 20);
        assert_eq!(t.retention_ms, 7_200_000);
        let other = r.resolve("other");
        assert_eq!(other.segment_bytes, 1 << 20);
        let seg = r
            .describe("t")
            .into_iter()
            .find(|c| c.key.name == "segment.bytes")
            .unwrap();
        assert_eq!(seg.source, ConfigSource::TopicOverride);
        assert_eq!(seg.synonyms.len(), 3);
        let ret = r
            .describe("t")
            .into_iter()
            .find(|c| c.key.name == "retention.ms")
            .unwrap();
        assert_eq!(ret.source, ConfigSource::StaticBroker);
    }
}
