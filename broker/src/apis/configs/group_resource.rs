//! Alters of GROUP resources (per-group overrides), checked here against
//! the group key table and the broker's bounds, then stored by the
//! controller like any config resource.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use ottla_controller::{AlterOp, ControllerError};

use super::{invalid_request, RESOURCE_GROUP};
use crate::broker::Broker;
use ottla_group_coordinator::resource_configs::{group_overrides, validate};

/// Applies `ops` to the overrides of `group` (all of them replaced with
/// `replace_all`, the legacy AlterConfigs), refusing the whole change when
/// the overrides it leaves would not be valid.
pub(super) fn alter(
    broker: &Broker,
    group: &str,
    ops: Vec<(String, AlterOp, Option<String>)>,
    replace_all: bool,
    validate_only: bool,
) -> Result<(), ControllerError> {
    if group.is_empty() {
        return Err(invalid_request("Default group resources are not allowed."));
    }
    let statics = &broker.settings.static_configs;
    let image = broker.controller.image();
    let mut next = match group_overrides(&image, group) {
        Some(current) if !replace_all => current.clone(),
        _ => BTreeMap::new(),
    };
    let invalid = |message: String| ControllerError::new(ResponseError::InvalidConfig, message);
    for (key, op, value) in &ops {
        match op {
            AlterOp::Set => {
                next.insert(key.clone(), value.clone().unwrap_or_default());
            }
            AlterOp::Delete => {
                next.remove(key);
            }
            // Kafka refuses these for every group key, its one LIST key too.
            AlterOp::Append | AlterOp::Subtract => {
                let verb = if *op == AlterOp::Append {
                    "APPEND"
                } else {
                    "SUBTRACT"
                };
                return Err(invalid(format!(
                    "Can't {verb} to key {key} because its type is not LIST."
                )));
            }
        }
    }
    validate(&next, statics).map_err(invalid)?;
    broker.controller.block_on(broker.controller.alter_configs(
        RESOURCE_GROUP,
        group,
        &ops,
        replace_all,
        validate_only,
    ))
}
