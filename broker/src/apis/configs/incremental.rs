//! IncrementalAlterConfigs (v0-1): SET, DELETE, APPEND and SUBTRACT on
//! topic, broker and group resources, as Kafka's ConfigAdminManager and
//! controller check them.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response::{
    AlterConfigsResourceResponse, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::{AlterOp, ControllerError};
use ottla_storage::config::{topic_config_key, ConfigType};

use super::{
    alter_each, apply_list_op, broker_resource, check_no_nulls, check_topic_name,
    check_unique_keys, group_resource, invalid_request, unsupported_type, RESOURCE_BROKER,
    RESOURCE_GROUP, RESOURCE_TOPIC,
};
use crate::broker::Broker;

pub fn handle(
    broker: &Broker,
    _version: i16,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let outcomes = alter_each(
        &req.resources,
        |r| (r.resource_type, r.resource_name.as_str()),
        |r| alter(broker, r, req.validate_only),
    );
    let responses = req
        .resources
        .iter()
        .zip(outcomes)
        .map(|(r, outcome)| {
            let response = AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            match outcome {
                Ok(()) => response.with_error_message(None),
                Err(e) => response
                    .with_error_code(e.code)
                    .with_error_message(Some(StrBytes::from_string(e.message))),
            }
        })
        .collect();
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

fn alter(
    broker: &Broker,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ControllerError> {
    check_unique_keys(r.configs.iter().map(|c| c.name.as_str()))?;
    check_no_nulls(
        r.configs
            .iter()
            .filter(|c| c.config_operation != 1 && c.value.is_none())
            .map(|c| c.name.as_str())
            .collect(),
    )?;
    let ops = r
        .configs
        .iter()
        .map(|c| {
            let op = match c.config_operation {
                0 => AlterOp::Set,
                1 => AlterOp::Delete,
                2 => AlterOp::Append,
                3 => AlterOp::Subtract,
                other => return Err(invalid_request(format!("Unknown operations type {other}"))),
            };
            Ok((
                c.name.to_string(),
                op,
                c.value.as_ref().map(|v| v.to_string()),
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let name = r.resource_name.as_str();
    match r.resource_type {
        RESOURCE_TOPIC => alter_topic(broker, name, ops, validate_only),
        RESOURCE_BROKER => broker_resource::alter(broker, name, ops, false, validate_only),
        RESOURCE_GROUP => group_resource::alter(broker, name, ops, false, validate_only),
        other => Err(unsupported_type(other)),
    }
}

fn alter_topic(
    broker: &Broker,
    topic: &str,
    ops: Vec<(String, AlterOp, Option<String>)>,
    validate_only: bool,
) -> Result<(), ControllerError> {
    check_topic_name(topic)?;
    let image = broker.controller.image();
    let overrides = image.configs_of(RESOURCE_TOPIC, topic);
    // APPEND and SUBTRACT become SETs of the resulting list, which starts
    // from the key's default when the topic has no override (as in Kafka).
    let changes = ops
        .into_iter()
        .map(|(key, op, value)| {
            let list_op = matches!(op, AlterOp::Append | AlterOp::Subtract);
            let Some(def) = topic_config_key(&key).filter(|_| list_op) else {
                // The controller refuses unknown keys.
                return Ok((key, op, value));
            };
            if def.config_type != ConfigType::List {
                let verb = if op == AlterOp::Append {
                    "APPEND"
                } else {
                    "SUBTRACT"
                };
                return Err(ControllerError::new(
                    ResponseError::InvalidConfig,
                    format!("Can't {verb} to key {key} because its type is not LIST."),
                ));
            }
            let current = overrides
                .and_then(|o| o.get(&key))
                .map_or(def.default, String::as_str);
            let updated = apply_list_op(current, op, value.as_deref().unwrap_or(""));
            Ok((key, AlterOp::Set, Some(updated)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    broker.controller.block_on(broker.controller.alter_configs(
        RESOURCE_TOPIC,
        topic,
        &changes,
        false,
        validate_only,
    ))
}
