//! Changes to broker resources: the cluster-wide dynamic defaults (`""`)
//! or this node's dynamic configs. The broker checks them (the controller
//! does not know broker keys), then the controller stores them.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use ottla_controller::{AlterOp, ControllerError};

use super::dynamic::{broken_static_config, validate};
use super::{apply_list_op, check_broker_name, static_config, RESOURCE_BROKER};
use crate::broker::Broker;
use crate::config::{ConfigSource, ConfigType};

/// Applies `ops` to broker resource `name`; with `replace_all` (legacy
/// AlterConfigs) the keys not set by `ops` are removed.
pub(super) fn alter(
    broker: &Broker,
    name: &str,
    ops: Vec<(String, AlterOp, Option<String>)>,
    replace_all: bool,
    validate_only: bool,
) -> Result<(), ControllerError> {
    check_broker_name(broker, name)?;
    let config = static_config(broker).map_err(broken_static_config)?;
    let entries = config.describe();
    let image = broker.controller.image();
    let mut next: BTreeMap<String, String> = if replace_all {
        BTreeMap::new()
    } else {
        image
            .configs_of(RESOURCE_BROKER, name)
            .cloned()
            .unwrap_or_default()
    };
    let mut touched = BTreeSet::new();
    for (key, op, value) in ops {
        touched.insert(key.clone());
        match op {
            AlterOp::Set => {
                next.insert(key, value.unwrap_or_default());
            }
            AlterOp::Delete => {
                next.remove(&key);
            }
            AlterOp::Append | AlterOp::Subtract => {
                let entry = entries
                    .iter()
                    .find(|e| e.name == key && e.config_type == ConfigType::List)
                    .ok_or_else(|| {
                        let verb = if op == AlterOp::Append {
                            "append"
                        } else {
                            "subtract"
                        };
                        ControllerError::new(
                            ResponseError::InvalidConfig,
                            format!("Config value {verb} is not allowed for config key: {key}"),
                        )
                    })?;
                // Without a dynamic value, Kafka starts from the key's default.
                let default = entry
                    .synonyms
                    .iter()
                    .find(|s| s.name == key && s.source == ConfigSource::Default)
                    .and_then(|s| s.value.clone());
                let current = next.get(&key).cloned().or(default).unwrap_or_default();
                let updated = apply_list_op(&current, op, value.as_deref().unwrap_or(""));
                next.insert(key, updated);
            }
        }
    }
    validate(broker, name, &next)?;
    let changes: Vec<(String, AlterOp, Option<String>)> = if replace_all {
        next.into_iter()
            .map(|(k, v)| (k, AlterOp::Set, Some(v)))
            .collect()
    } else {
        touched
            .into_iter()
            .map(|k| match next.remove(&k) {
                Some(v) => (k, AlterOp::Set, Some(v)),
                None => (k, AlterOp::Delete, None),
            })
            .collect()
    };
    broker.controller.block_on(broker.controller.alter_configs(
        RESOURCE_BROKER,
        name,
        &changes,
        replace_all,
        validate_only,
    ))
}
