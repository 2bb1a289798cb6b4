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
    /// Where the value comes from, as Kafka's controller resolves it for
    /// CreateTopics (KafkaConfigSchema.resolveEffectiveTopicConfigs).
    pub source: ConfigSource,
    /// (name, value, source) from most to least specific, as DescribeConfigs
    /// lists them; its source is the first one's (Default when empty), which
    /// may differ from `source` (see `broker_synonyms`).
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

    /// The image the logs follow.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.read().clone()
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
                let topic_value = overrides.and_then(|o| o.get(key.name));
                let broker_value = key.broker_synonym.and_then(|syn| {
                    let dynamic = |level: Option<&BTreeMap<String, String>>, source| {
                        level.and_then(|l| l.get(syn)).map(|v| (v.clone(), source))
                    };
                    dynamic(dynamic_node, ConfigSource::DynamicBroker)
                        .or_else(|| dynamic(dynamic_defaults, ConfigSource::DynamicBrokerDefault))
                        .or_else(|| {
                            self.broker_static_value(syn)
                                .map(|v| (v, ConfigSource::StaticBroker))
                        })
                });
                let (value, source) = topic_value
                    .map(|v| (v.clone(), ConfigSource::TopicOverride))
                    .or(broker_value)
                    .unwrap_or_else(|| (key.default.to_string(), ConfigSource::Default));
                let mut synonyms = Vec::new();
                if let Some(v) = topic_value {
                    synonyms.push((key.name.to_string(), v.clone(), ConfigSource::TopicOverride));
                }
                if let Some(syn) = key.broker_synonym {
                    synonyms.extend(self.broker_synonyms(syn, dynamic_node, dynamic_defaults));
                }
                ResolvedConfig {
                    key,
                    value,
                    source,
                    synonyms,
                }
            })
            .collect()
    }

    /// The broker-level synonyms Kafka lists for a topic key whose broker
    /// synonym is `syn` (ConfigHelper.configSynonyms): the values of every key
    /// in `syn`'s group, all dynamic per-node ones first, then the dynamic
    /// cluster defaults, the static values and the defaults that are not null,
    /// kept from the first one set under `syn` itself. A group set only under
    /// another name (`log.retention.hours`, or `log.roll.hours`' default)
    /// therefore lists nothing, and DescribeConfigs then reports the default
    /// source although the value comes from the broker.
    fn broker_synonyms(
        &self,
        syn: &'static str,
        dynamic_node: Option<&BTreeMap<String, String>>,
        dynamic_defaults: Option<&BTreeMap<String, String>>,
    ) -> Vec<(String, String, ConfigSource)> {
        let group = crate::config::synonym_group(syn).unwrap_or(std::slice::from_ref(&syn));
        let mut found = Vec::new();
        let levels = [
            (dynamic_node, ConfigSource::DynamicBroker),
            (dynamic_defaults, ConfigSource::DynamicBrokerDefault),
            (Some(&self.static_broker), ConfigSource::StaticBroker),
        ];
        for (level, source) in levels {
            for name in group {
                if let Some(v) = level.and_then(|l| l.get(*name)) {
                    found.push((name.to_string(), v.clone(), source));
                }
            }
        }
        for name in group {
            let default = match crate::config::default_of(name) {
                Some(default) => default,
                // Broker keys Ottla does not have (tiered storage): the topic
                // key's default stands in for Kafka's.
                None => topic_config_key_for_synonym(name).map(|k| k.default),
            };
            if let Some(d) = default {
                found.push((name.to_string(), d.to_string(), ConfigSource::Default));
            }
        }
        let first = found
            .iter()
            .position(|(name, _, _)| name == syn)
            .unwrap_or(found.len());
        found.split_off(first)
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
            "log.flush.interval.ms" => {
                get("log.flush.interval.ms").or_else(|| get("log.flush.scheduler.interval.ms"))
            }
            other => get(other),
        }
    }

    pub fn resolve(&self, topic: &str) -> LogConfig {
        let values: BTreeMap<String, String> = self
            .describe(topic)
            .into_iter()
            .map(|r| (r.key.name.to_string(), r.value))
            .collect();
        let (config, rejected) = LogConfig::from_values(&values);
        for key in rejected {
            tracing::warn!(
                topic,
                key,
                "stored config value is no longer valid; using the default for this key"
            );
        }
        config
    }
}

/// The topic key whose broker synonym is `name`.
fn topic_config_key_for_synonym(name: &str) -> Option<&'static TopicConfigKey> {
    TOPIC_CONFIG_KEYS
        .iter()
        .find(|k| k.broker_synonym == Some(name))
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
        assert_eq!(ret.value, "7200000");
        assert_eq!(ret.source, ConfigSource::StaticBroker);
        // Kafka lists no synonym set under another name than log.retention.ms.
        assert!(ret.synonyms.is_empty(), "{:?}", ret.synonyms);
    }

    #[test]
    fn synonyms_follow_kafka() {
        let mut broker = BTreeMap::new();
        broker.insert("log.retention.ms".to_string(), "5000".to_string());
        broker.insert("log.retention.hours".to_string(), "2".to_string());
        let r = TopicConfigResolver::new(1, broker, Arc::new(MetadataImage::empty()));
        let all = r.describe("t");
        let get = |name: &str| all.iter().find(|c| c.key.name == name).unwrap();
        let ret = get("retention.ms");
        assert_eq!(
            (ret.value.as_str(), ret.source),
            ("5000", ConfigSource::StaticBroker)
        );
        let names: Vec<(&str, &str, ConfigSource)> = ret
            .synonyms
            .iter()
            .map(|(n, v, s)| (n.as_str(), v.as_str(), *s))
            .collect();
        assert_eq!(
            names,
            [
                ("log.retention.ms", "5000", ConfigSource::StaticBroker),
                ("log.retention.hours", "2", ConfigSource::StaticBroker),
                ("log.retention.hours", "168", ConfigSource::Default),
            ]
        );
        // log.roll.ms has a null default: nothing under its name, nothing listed.
        assert!(get("segment.ms").synonyms.is_empty());
        assert_eq!(get("segment.ms").source, ConfigSource::Default);
        let seg = get("segment.bytes");
        assert_eq!(
            seg.synonyms,
            [(
                "log.segment.bytes".to_string(),
                "1073741824".to_string(),
                ConfigSource::Default
            )]
        );
        // No server synonym at all.
        assert!(get("leader.replication.throttled.replicas")
            .synonyms
            .is_empty());
        // A broker key Ottla does not have still lists the topic default.
        assert_eq!(get("local.retention.ms").synonyms.len(), 1);
    }
}
