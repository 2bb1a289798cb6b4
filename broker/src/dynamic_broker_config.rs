//! Broker keys that change at runtime: their value is this node's dynamic
//! config, else the cluster-wide dynamic default, else the static one; read
//! from the metadata image where they are used.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ottla_controller::records::CONFIG_RESOURCE_BROKER;
use ottla_controller::{Controller, MetadataImage};

use crate::config::{default_of, is_listener_scoped, BrokerConfig, ConfigError};
use crate::network::{connection_limits, ConnectionLimitSource, Limits};
use tracing::warn;

/// The dynamic value of broker key `key` for node `node_id`: its own, then
/// the cluster-wide default; None when neither is set.
pub fn dynamic_value<'a>(image: &'a MetadataImage, node_id: &str, key: &str) -> Option<&'a str> {
    [node_id, ""].into_iter().find_map(|level| {
        image
            .configs_of(CONFIG_RESOURCE_BROKER, level)?
            .get(key)
            .map(String::as_str)
    })
}

/// The dynamic value of broker key `key` for node `node_id` parsed as a
/// `T`, else `fallback` (the static value).
pub fn dynamic_or<T: std::str::FromStr>(
    image: &MetadataImage,
    node_id: i32,
    key: &str,
    fallback: T,
) -> T {
    dynamic_value(image, &node_id.to_string(), key)
        .and_then(|v| v.parse().ok())
        .unwrap_or(fallback)
}

/// The configuration node `node_id` runs with under `image`: its static
/// values, then the cluster-wide dynamic configs, then its own. Keys Ottla
/// does not know (a plugin's, stored unchecked) are left out.
pub fn layered_for_node(
    image: &MetadataImage,
    node_id: i32,
    static_values: &BTreeMap<String, String>,
) -> Result<BrokerConfig, ConfigError> {
    let mut dynamic = BTreeMap::new();
    for level in [String::new(), node_id.to_string()] {
        if let Some(configs) = image.configs_of(CONFIG_RESOURCE_BROKER, &level) {
            dynamic.extend(
                configs
                    .iter()
                    .filter(|(k, _)| default_of(k).is_some() || is_listener_scoped(k))
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
        }
    }
    BrokerConfig::layered(static_values, &dynamic)
}

/// The connection limits (`max.connections`, the per-IP limits and the
/// connection creation rates, broker-wide and per listener) of this node's
/// configuration under the metadata image, recomputed when it changes.
pub struct DynamicConnectionLimits {
    controller: Arc<Controller>,
    node_id: i32,
    static_values: BTreeMap<String, String>,
    cached: Mutex<Option<(Arc<MetadataImage>, Arc<Limits>)>>,
}

impl DynamicConnectionLimits {
    pub fn new(
        controller: Arc<Controller>,
        node_id: i32,
        static_values: BTreeMap<String, String>,
    ) -> Self {
        Self {
            controller,
            node_id,
            static_values,
            cached: Mutex::new(None),
        }
    }

    fn resolve(&self, image: &MetadataImage) -> Limits {
        match layered_for_node(image, self.node_id, &self.static_values) {
            Ok(config) => connection_limits(&config),
            // Dynamic values were validated when stored, so this is a
            // static configuration that no longer loads: keep its limits.
            Err(e) => {
                warn!("cannot read the dynamic connection limits, keeping the static ones: {e}");
                BrokerConfig::layered(&self.static_values, &BTreeMap::new())
                    .map(|config| connection_limits(&config))
                    .unwrap_or_default()
            }
        }
    }
}

impl ConnectionLimitSource for DynamicConnectionLimits {
    fn limits(&self) -> Arc<Limits> {
        let image = self.controller.image();
        let mut cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        match &*cached {
            Some((seen, limits)) if Arc::ptr_eq(seen, &image) => Arc::clone(limits),
            _ => {
                let limits = Arc::new(self.resolve(&image));
                *cached = Some((image, Arc::clone(&limits)));
                limits
            }
        }
    }
}
