//! Config APIs: DescribeConfigs (v1-4), legacy AlterConfigs (v0-2, which
//! replaces a resource's whole set of overrides) and IncrementalAlterConfigs
//! (v0-1), for topic resources, broker resources (`""`, the cluster-wide
//! dynamic defaults, or this node's id) and group resources (per-group
//! overrides, `group/resource_configs.rs`). Topic changes are validated and
//! stored by the controller; broker changes are checked here first, against
//! the broker config module's key table and Kafka's rules for dynamic keys.

pub mod alter;
mod broker_resource;
pub mod describe;
mod dynamic;
mod group_resource;
pub mod incremental;

use std::collections::{BTreeMap, HashMap, HashSet};

use kafka_protocol::error::ResponseError;
use ottla_controller::{AlterOp, ControllerError};

use crate::broker::Broker;
use crate::config::{BrokerConfig, ConfigError};

/// Kafka's ConfigResource.Type codes.
pub const RESOURCE_TOPIC: i8 = ottla_controller::records::CONFIG_RESOURCE_TOPIC;
pub const RESOURCE_BROKER: i8 = ottla_controller::records::CONFIG_RESOURCE_BROKER;
const RESOURCE_BROKER_LOGGER: i8 = 8;
pub const RESOURCE_CLIENT_METRICS: i8 = 16;
pub const RESOURCE_GROUP: i8 = ottla_controller::records::CONFIG_RESOURCE_GROUP;

/// The broker's static configuration, rebuilt from the keys it was started
/// with (the broker keeps those, not the parsed configuration).
pub(crate) fn static_config(broker: &Broker) -> Result<BrokerConfig, ConfigError> {
    with_overrides(broker, &BTreeMap::new())
}

/// The static configuration with `extra` settings applied on top, which is
/// how dynamic values are type-checked.
fn with_overrides(
    broker: &Broker,
    extra: &BTreeMap<String, String>,
) -> Result<BrokerConfig, ConfigError> {
    BrokerConfig::layered(&broker.settings.static_configs, extra)
}

fn invalid_request(message: impl Into<String>) -> ControllerError {
    ControllerError::new(ResponseError::InvalidRequest, message)
}

/// The refusal for resource types Kafka knows but Ottla does not serve,
/// and for codes that are no resource type at all.
fn unsupported_type(resource_type: i8) -> ControllerError {
    let name = match resource_type {
        RESOURCE_BROKER_LOGGER => "BROKER_LOGGER",
        RESOURCE_CLIENT_METRICS => "CLIENT_METRICS",
        other => return invalid_request(format!("Unknown resource type {other}")),
    };
    invalid_request(format!("Ottla does not support {name} config resources"))
}

/// Resources named more than once in one request: Kafka refuses every copy.
fn repeated<'a>(resources: impl Iterator<Item = (i8, &'a str)>) -> HashMap<(i8, &'a str), usize> {
    let mut counts = HashMap::new();
    for r in resources {
        *counts.entry(r).or_insert(0) += 1;
    }
    counts.retain(|_, n| *n > 1);
    counts
}

/// Applies `alter` to each resource in order, refusing every copy of a
/// resource that appears more than once in the request, as Kafka does.
/// Shared by AlterConfigs and IncrementalAlterConfigs.
fn alter_each<R>(
    resources: &[R],
    key: fn(&R) -> (i8, &str),
    alter: impl Fn(&R) -> Result<(), ControllerError>,
) -> Vec<Result<(), ControllerError>> {
    let repeated = repeated(resources.iter().map(key));
    resources
        .iter()
        .map(|r| {
            if repeated.contains_key(&key(r)) {
                Err(invalid_request("Each resource must appear at most once."))
            } else {
                alter(r)
            }
        })
        .collect()
}

/// Kafka's checks on the name of a topic resource being altered.
fn check_topic_name(name: &str) -> Result<(), ControllerError> {
    if name.is_empty() {
        return Err(invalid_request("Default topic resources are not allowed."));
    }
    ottla_controller::controller::validate_topic_name(name)
}

/// Kafka's checks on the name of a broker resource being altered: empty
/// (cluster-wide defaults) or this node's id.
fn check_broker_name(broker: &Broker, name: &str) -> Result<(), ControllerError> {
    if name.is_empty() {
        return Ok(());
    }
    let id: i32 = name
        .parse()
        .map_err(|_| invalid_request(format!("Node id must be an integer, but it is: {name}")))?;
    if id != broker.node_id() {
        return Err(invalid_request(format!(
            "Unexpected broker id, expected {}, but received {name}",
            broker.node_id()
        )));
    }
    Ok(())
}

/// Kafka's refusal of a key given twice for one resource.
fn check_unique_keys<'a>(keys: impl Iterator<Item = &'a str>) -> Result<(), ControllerError> {
    let mut seen = HashSet::new();
    for k in keys {
        if !seen.insert(k) {
            return Err(invalid_request("Error due to duplicate config keys"));
        }
    }
    Ok(())
}

/// Kafka's refusal of keys set to null.
fn check_no_nulls(null_keys: Vec<&str>) -> Result<(), ControllerError> {
    if null_keys.is_empty() {
        Ok(())
    } else {
        Err(invalid_request(format!(
            "Null value not supported for : {}",
            null_keys.join(", ")
        )))
    }
}

/// APPEND or SUBTRACT `items` (comma-separated) on a list value, as
/// Kafka does: appended items that are present already are not repeated.
fn apply_list_op(current: &str, op: AlterOp, items: &str) -> String {
    let split = |s: &str| -> Vec<String> {
        s.split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .map(String::from)
            .collect()
    };
    let mut list = split(current);
    for item in split(items) {
        if op == AlterOp::Append {
            if !list.contains(&item) {
                list.push(item);
            }
        } else {
            list.retain(|i| *i != item);
        }
    }
    list.join(",")
}

#[cfg(test)]
mod tests;
