//! Which broker keys may change at runtime, and the checks a dynamic broker
//! config change must pass (Kafka's DynamicBrokerConfig.validate).

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::error::ResponseError;
use ottla_controller::{ControllerError, MetadataImage};
use ottla_storage::config::TOPIC_CONFIG_KEYS;

use super::{invalid_request, static_config, with_overrides, RESOURCE_BROKER};
use crate::broker::Broker;
use crate::config::{
    is_listener_scoped, is_reloadable_tls_key, BrokerConfig, ConfigEntry, ConfigError, Listener,
};
use crate::dynamic_broker_config::{dynamic_value, layered_for_node};
use crate::security::tls_reload::check_tls_listeners;

/// The broker keys Ottla applies at runtime besides the `log.*` defaults
/// of topic keys (read through the topic config resolver): the replication
/// throttles, the connection limits, the cleaner's pacing, threads and
/// buffers, the open segment files, the thread counts, the listeners.
const DYNAMIC: &[&str] = &[
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "max.connection.creation.rate",
    "producer.id.expiration.ms",
    "transaction.partition.verification.enable",
    "log.cleaner.backoff.ms",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.segment.max.open.files",
    "num.replica.fetchers",
    "num.recovery.threads.per.data.dir",
    "num.network.threads",
    "num.io.threads",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
];

/// Thread counts Kafka lets change at runtime, each step at most halving or
/// doubling the current value (DynamicThreadPool.validateReconfiguration).
const THREAD_COUNTS: &[&str] = &[
    "num.replica.fetchers",
    "num.recovery.threads.per.data.dir",
    "num.network.threads",
    "num.io.threads",
];

/// The listener set, dynamic per broker within the bounds
/// [`check_listener_change`] sets.
const LISTENER_KEYS: &[&str] = &[
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
];

/// Whether Kafka lets `name` change without a restart. The broker-level
/// default of every topic key is dynamic (DynamicLogConfig).
pub(super) fn is_dynamic(name: &str) -> bool {
    DYNAMIC.contains(&name)
        || TOPIC_CONFIG_KEYS
            .iter()
            .any(|k| k.broker_synonym == Some(name))
}

/// Checks the dynamic configs broker resource `level` (`""` or this node's
/// id) would hold after a change.
pub(super) fn validate(
    broker: &Broker,
    level: &str,
    next: &BTreeMap<String, String>,
) -> Result<(), ControllerError> {
    let static_entries = static_config(broker)
        .map_err(broken_static_config)?
        .describe();
    let known: HashSet<&str> = static_entries.iter().map(|e| e.name).collect();
    // Keys the broker does not know (a plugin's, say) are stored unchecked,
    // as Kafka's DynamicBrokerConfig.validateConfigs does. Per-listener
    // settings are checked below, against the listeners they are for.
    let fixed: Vec<&str> = next
        .keys()
        .map(String::as_str)
        .filter(|k| known.contains(k) && !is_dynamic(k))
        .collect();
    if !fixed.is_empty() {
        return Err(invalid_request(format!(
            "Cannot update these configs dynamically: {}",
            java_set(fixed)
        )));
    }
    let tls_stores: Vec<&str> = next
        .keys()
        .map(String::as_str)
        .filter(|k| is_reloadable_tls_key(k))
        .collect();
    let per_broker: Vec<&str> = next
        .keys()
        .map(String::as_str)
        .filter(|k| is_listener_scoped(k) || LISTENER_KEYS.contains(k))
        .collect();
    if level.is_empty() && !per_broker.is_empty() {
        // As in Kafka: certificates and listeners are per broker.
        return Err(invalid_request(format!(
            "Cannot update these configs at default cluster level, broker id must be specified: {}",
            java_set(per_broker)
        )));
    }
    // Values are type-checked as the configuration they would produce:
    // static values, then the cluster-wide defaults, then this node's own.
    let image = broker.controller.image();
    let node = broker.node_id().to_string();
    let stored = |name: &str| {
        image
            .configs_of(RESOURCE_BROKER, name)
            .cloned()
            .unwrap_or_default()
    };
    let mut layered = if level.is_empty() {
        next.clone()
    } else {
        stored("")
    };
    layered.extend(if level.is_empty() {
        stored(&node)
    } else {
        next.clone()
    });
    let checkable = |k: &String| known.contains(k.as_str()) || is_listener_scoped(k);
    layered.retain(|k, _| checkable(k));
    let load = |values: &BTreeMap<String, String>| {
        with_overrides(broker, values).map_err(|e| match e {
            ConfigError::InvalidValue {
                key, value, reason, ..
            } => invalid_request(format!(
                "Invalid value {value} for configuration {key}: {reason}"
            )),
            other => invalid_request(other.to_string()),
        })
    };
    // The new values on their own first: this node's value of a key would
    // hide a bad cluster-wide one in the layered configuration.
    let mut own = next.clone();
    own.retain(|k, _| checkable(k));
    load(&own)?;
    let config = load(&layered)?;
    check_thread_counts(broker, &image, &static_entries, next)?;
    if level == node {
        let current = layered_for_node(&image, broker.node_id(), &broker.settings.static_configs)
            .map_err(broken_static_config)?;
        check_listener_change(&current, &config).map_err(invalid_request)?;
    }
    // The stores are files on this node: checked when it is the target.
    if !tls_stores.is_empty() && level == node {
        check_tls_listeners(&config).map_err(|e| {
            invalid_request(format!(
                "Validation of dynamic config update of the TLS key store or trust store \
                 failed: {e}"
            ))
        })?;
    }
    Ok(())
}

/// What a dynamic listener change may do (Kafka's
/// DynamicListenerConfig.validateReconfiguration under KRaft): add and
/// remove broker listeners, with their own `listener.name.<l>.` TLS and
/// SASL settings, and move those not advertised. Advertised listeners are
/// part of the broker's registration and stay; so do the controller
/// listeners, and each existing listener's security protocol and settings
/// (only its key and trust stores are reloaded).
fn check_listener_change(current: &BrokerConfig, next: &BrokerConfig) -> Result<(), String> {
    for listener in &next.listeners {
        if let Some(old) = current.listeners.iter().find(|l| l.name == listener.name) {
            if old.protocol != listener.protocol {
                return Err(format!(
                    "Security protocol cannot be updated for existing listener {}",
                    listener.name
                ));
            }
            if current.listener_bind_settings(&old.name) != next.listener_bind_settings(&old.name) {
                return Err(format!(
                    "Configs cannot be updated dynamically for existing listener {}, restart \
                     broker or create a new listener for update",
                    listener.name
                ));
            }
        }
    }
    let sorted = |listeners: &[Listener]| {
        let mut listeners = listeners.to_vec();
        listeners.sort_by(|a, b| a.name.cmp(&b.name));
        listeners
    };
    if sorted(&current.advertised_listeners) != sorted(&next.advertised_listeners) {
        return Err(
            "Advertised listeners cannot be altered when using a Raft-based metadata quorum \
             (they are the broker's registration: change advertised.listeners, or listeners \
             when advertised.listeners is not set, in server.properties and restart the broker)"
                .to_string(),
        );
    }
    let controller = |config: &BrokerConfig| {
        let listeners: Vec<Listener> = config.controller_listeners().cloned().collect();
        sorted(&listeners)
    };
    if controller(current) != controller(next) {
        return Err(format!(
            "Controller listeners cannot change at runtime: keep {} in listeners as they are \
             (set them in server.properties and restart the node)",
            current
                .controller_listeners()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ));
    }
    Ok(())
}

/// Kafka's bounds on a thread count change, against this node's value now.
fn check_thread_counts(
    broker: &Broker,
    image: &MetadataImage,
    static_entries: &[ConfigEntry],
    next: &BTreeMap<String, String>,
) -> Result<(), ControllerError> {
    let static_value = |key: &str| {
        static_entries
            .iter()
            .find(|e| e.name == key)
            .and_then(|e| e.value.clone())
    };
    let node = broker.node_id().to_string();
    for &key in THREAD_COUNTS {
        let Some(new) = next.get(key).and_then(|v| v.parse::<i64>().ok()) else {
            continue;
        };
        let current = dynamic_value(image, &node, key)
            .map(str::to_owned)
            .or_else(|| static_value(key))
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(1);
        if new == current {
            continue;
        }
        let failed = format!("Dynamic thread count update validation failed for {key}={new}");
        let reason = if new <= 0 {
            "value should be at least 1".to_string()
        } else if new < current / 2 {
            format!("value should be at least half the current value {current}")
        } else if new > current * 2 {
            format!("value should not be greater than double the current value {current}")
        } else {
            continue;
        };
        return Err(invalid_request(format!("{failed}, {reason}")));
    }
    Ok(())
}

pub(super) fn broken_static_config(e: ConfigError) -> ControllerError {
    ControllerError::new(
        ResponseError::UnknownServerError,
        format!("the broker's static configuration no longer loads: {e}"),
    )
}

/// Renders names as Kafka 4.x's messages do (a Java `Set`).
fn java_set(mut names: Vec<&str>) -> String {
    names.sort_unstable();
    format!("[{}]", names.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_keys_follow_kafka() {
        assert!(is_dynamic("log.retention.ms"));
        assert!(is_dynamic("log.cleanup.policy"));
        assert!(is_dynamic("message.max.bytes"));
        assert!(
            !is_dynamic("log.retention.hours"),
            "only the first synonym is dynamic in Kafka"
        );
        assert!(!is_dynamic("log.dirs"));
        assert!(!is_dynamic("num.partitions"));
        assert!(
            is_dynamic("listeners"),
            "within check_listener_change's bounds"
        );
        assert!(is_dynamic("num.io.threads"));
        assert!(is_dynamic("max.connections.per.ip.overrides"));
    }
}
