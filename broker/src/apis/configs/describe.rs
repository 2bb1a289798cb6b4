//! DescribeConfigs (v1-4), as Kafka's ConfigHelper answers: a topic lists
//! every topic key, resolved with its source and broker synonyms; broker
//! `""` lists the cluster-wide dynamic defaults; this node's id lists every
//! broker key, dynamic values over static ones over defaults.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResponse, DescribeConfigsResult,
    DescribeConfigsSynonym,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::{ControllerError, MetadataImage};

use super::dynamic::{broken_static_config, is_dynamic};
use super::{
    invalid_request, static_config, unsupported_type, RESOURCE_BROKER, RESOURCE_GROUP,
    RESOURCE_TOPIC,
};
use crate::broker::Broker;
use crate::config::ConfigEntry;
use crate::log_config::ConfigSource;
use ottla_group_coordinator::resource_configs::{
    broker_default, group_overrides, GROUP_CONFIG_KEYS,
};

/// Kafka's DescribeConfigs source codes for dynamic broker and group values.
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT: i8 = 3;
const SOURCE_DYNAMIC_GROUP: i8 = 8;
/// Kafka's DescribeConfigs type code for a key it cannot type.
const CONFIG_TYPE_UNKNOWN: i8 = 0;

/// One config entry, before it is shaped for the request's version.
struct Entry {
    name: String,
    value: Option<String>,
    read_only: bool,
    source: i8,
    sensitive: bool,
    /// (name, value, source), highest precedence first.
    synonyms: Vec<(String, Option<String>, i8)>,
    config_type: i8,
    doc: &'static str,
}

pub fn handle(
    broker: &Broker,
    version: i16,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let image = broker.controller.image();
    let results = req
        .resources
        .iter()
        .map(|resource| {
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            match describe(broker, &image, resource) {
                // Kafka leaves the message at its default, "", on success.
                Ok(entries) => result
                    .with_error_message(Some(StrBytes::from_static_str("")))
                    .with_configs(
                        entries
                            .into_iter()
                            .filter(|e| wanted(resource, &e.name))
                            .map(|e| render(version, &req, e))
                            .collect(),
                    ),
                Err(e) => result
                    .with_error_code(e.code)
                    .with_error_message(Some(StrBytes::from_string(e.message))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn describe(
    broker: &Broker,
    image: &MetadataImage,
    resource: &DescribeConfigsResource,
) -> Result<Vec<Entry>, ControllerError> {
    let name = resource.resource_name.as_str();
    match resource.resource_type {
        RESOURCE_TOPIC => topic_entries(broker, image, name),
        RESOURCE_BROKER if name.is_empty() => broker_default_entries(broker, image),
        RESOURCE_BROKER => {
            let id: i32 = name.parse().map_err(|_| {
                invalid_request(format!("Broker id must be an integer, but it is: {name}"))
            })?;
            if id != broker.node_id() {
                return Err(invalid_request(format!(
                    "Unexpected broker id, expected {} or empty string, but received {name}",
                    broker.node_id()
                )));
            }
            broker_entries(broker, image)
        }
        RESOURCE_GROUP => group_entries(broker, image, name),
        other => Err(unsupported_type(other)),
    }
}

/// No key filter (null or empty) means every key.
fn wanted(resource: &DescribeConfigsResource, name: &str) -> bool {
    match &resource.configuration_keys {
        Some(keys) if !keys.is_empty() => keys.iter().any(|k| k.as_str() == name),
        _ => true,
    }
}

fn render(version: i16, req: &DescribeConfigsRequest, e: Entry) -> DescribeConfigsResourceResult {
    let synonyms = if req.include_synonyms {
        e.synonyms
            .into_iter()
            .map(|(name, value, source)| {
                DescribeConfigsSynonym::default()
                    .with_name(StrBytes::from_string(name))
                    .with_value(value.map(StrBytes::from_string))
                    .with_source(source)
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut r = DescribeConfigsResourceResult::default()
        .with_name(StrBytes::from_string(e.name))
        .with_value(e.value.map(StrBytes::from_string))
        .with_read_only(e.read_only)
        .with_config_source(e.source)
        .with_is_sensitive(e.sensitive)
        .with_synonyms(synonyms);
    if version >= 3 {
        // Keys without documentation (unknown ones) have none, not "".
        r = r.with_config_type(e.config_type).with_documentation(
            req.include_documentation
                .then_some(e.doc)
                .filter(|d| !d.is_empty())
                .map(StrBytes::from_static_str),
        );
    }
    r
}

fn topic_entries(
    broker: &Broker,
    image: &MetadataImage,
    topic: &str,
) -> Result<Vec<Entry>, ControllerError> {
    ottla_controller::controller::validate_topic_name(topic)?;
    if image.topic_by_name(topic).is_none() {
        return Err(ControllerError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("Topic '{topic}' does not exist."),
        ));
    }
    let mut resolved = broker.configs.describe_in(image, topic);
    resolved.sort_by_key(|c| c.key.name);
    Ok(resolved
        .into_iter()
        .map(|c| Entry {
            name: c.key.name.to_string(),
            value: Some(c.value),
            read_only: false,
            // Kafka's DescribeConfigs takes the source from the synonyms it
            // lists (ConfigHelper.createTopicConfigEntry).
            source: c
                .synonyms
                .first()
                .map_or(ConfigSource::Default, |s| s.2)
                .code(),
            sensitive: false,
            synonyms: c
                .synonyms
                .into_iter()
                .map(|(name, value, source)| (name, Some(value), source.code()))
                .collect(),
            config_type: c.key.config_type.describe_code(),
            doc: c.key.doc,
        })
        .collect())
}

/// Every group key: the group's override, else the broker's setting of its
/// synonym, else Kafka's default. Any group name may be described, as in
/// Kafka: a group needs no members to have configs.
fn group_entries(
    broker: &Broker,
    image: &MetadataImage,
    group: &str,
) -> Result<Vec<Entry>, ControllerError> {
    if group.is_empty() {
        return Err(invalid_request("Group name must not be empty"));
    }
    let statics = &broker.settings.static_configs;
    let overrides = group_overrides(image, group);
    Ok(GROUP_CONFIG_KEYS
        .iter()
        .filter(|k| !k.internal)
        .map(|k| {
            let mut synonyms = Vec::new();
            let value = match overrides.and_then(|o| o.get(k.name)) {
                Some(v) => {
                    synonyms.push((k.name.to_string(), Some(v.clone()), SOURCE_DYNAMIC_GROUP));
                    v.clone()
                }
                None => broker_default(k, statics),
            };
            if let Some(v) = k.broker_value(statics) {
                let source = ConfigSource::StaticBroker.code();
                synonyms.push((k.synonym.to_string(), Some(v.to_string()), source));
            }
            let source = ConfigSource::Default.code();
            synonyms.push((k.synonym.to_string(), Some(k.default.to_string()), source));
            Entry {
                name: k.name.to_string(),
                value: Some(value),
                read_only: false,
                source: synonyms[0].2,
                sensitive: false,
                synonyms,
                config_type: k.type_code(),
                doc: k.doc,
            }
        })
        .collect())
}

/// Every broker key: this node's dynamic value, else the cluster-wide
/// dynamic default, else what the static configuration says.
fn broker_entries(broker: &Broker, image: &MetadataImage) -> Result<Vec<Entry>, ControllerError> {
    let config = static_config(broker).map_err(broken_static_config)?;
    let node = image.configs_of(RESOURCE_BROKER, &broker.node_id().to_string());
    let defaults = image.configs_of(RESOURCE_BROKER, "");
    Ok(config
        .describe()
        .into_iter()
        .map(|c| {
            let mut dynamic = Vec::new();
            for (level, source) in [
                (node, SOURCE_DYNAMIC_BROKER),
                (defaults, SOURCE_DYNAMIC_DEFAULT),
            ] {
                if let Some(v) = level.and_then(|l| l.get(c.name)) {
                    dynamic.push((c.name.to_string(), shown(c.is_sensitive, v), source));
                }
            }
            let mut entry = entry(&c, dynamic);
            if let Some((_, value, source)) = entry.synonyms.first() {
                entry.value = value.clone();
                entry.source = *source;
            }
            entry
        })
        .chain(unknown_entries(
            &config,
            &[
                (node, SOURCE_DYNAMIC_BROKER),
                (defaults, SOURCE_DYNAMIC_DEFAULT),
            ],
        ))
        .collect())
}

/// The cluster-wide dynamic defaults alone, as Kafka lists broker `""`.
fn broker_default_entries(
    broker: &Broker,
    image: &MetadataImage,
) -> Result<Vec<Entry>, ControllerError> {
    let config = static_config(broker).map_err(broken_static_config)?;
    let known: BTreeMap<&str, ConfigEntry> =
        config.describe().into_iter().map(|c| (c.name, c)).collect();
    let Some(defaults) = image.configs_of(RESOURCE_BROKER, "") else {
        return Ok(Vec::new());
    };
    let unknown = unknown_entries(&config, &[(Some(defaults), SOURCE_DYNAMIC_DEFAULT)]);
    Ok(defaults
        .iter()
        .filter_map(|(name, value)| {
            let c = known.get(name.as_str())?;
            let value = shown(c.is_sensitive, value);
            let mut entry = entry(
                c,
                vec![(name.clone(), value.clone(), SOURCE_DYNAMIC_DEFAULT)],
            );
            entry.synonyms.retain(|s| s.2 == SOURCE_DYNAMIC_DEFAULT);
            entry.value = value;
            entry.source = SOURCE_DYNAMIC_DEFAULT;
            Some(entry)
        })
        .chain(unknown)
        .collect())
}

/// Dynamic keys the broker does not know (stored unchecked), as Kafka lists
/// them: without a type, so treated as sensitive (no value), read-only, from
/// the most specific of `levels` that holds them.
fn unknown_entries(
    config: &crate::config::BrokerConfig,
    levels: &[(Option<&BTreeMap<String, String>>, i8)],
) -> Vec<Entry> {
    let known: std::collections::HashSet<&str> = config.describe().iter().map(|c| c.name).collect();
    let mut names: BTreeMap<&str, Vec<i8>> = BTreeMap::new();
    for &(level, source) in levels {
        for name in level.into_iter().flat_map(|l| l.keys()) {
            if !known.contains(name.as_str()) {
                names.entry(name.as_str()).or_default().push(source);
            }
        }
    }
    names
        .into_iter()
        .map(|(name, sources)| Entry {
            name: name.to_string(),
            value: None,
            read_only: true,
            source: sources[0],
            sensitive: true,
            synonyms: sources
                .iter()
                .map(|&s| (name.to_string(), None, s))
                .collect(),
            config_type: CONFIG_TYPE_UNKNOWN,
            doc: "",
        })
        .collect()
}

/// A broker key's entry with `dynamic` synonyms ahead of its static ones.
fn entry(c: &ConfigEntry, dynamic: Vec<(String, Option<String>, i8)>) -> Entry {
    let mut synonyms = dynamic;
    synonyms.extend(
        c.synonyms
            .iter()
            .map(|s| (s.name.to_string(), s.value.clone(), s.source.kafka_code())),
    );
    Entry {
        name: c.name.to_string(),
        value: c.value.clone(),
        read_only: !is_dynamic(c.name),
        source: c.source.kafka_code(),
        sensitive: c.is_sensitive,
        synonyms,
        config_type: c.config_type.kafka_code(),
        doc: c.documentation,
    }
}

/// Sensitive values are never sent.
fn shown(sensitive: bool, value: &str) -> Option<String> {
    (!sensitive).then(|| value.to_string())
}
