//! AlterConfigs (v0-2), the legacy API: the given keys become the
//! resource's whole set of overrides; keys not given are removed.

use kafka_protocol::messages::alter_configs_request::{AlterConfigsRequest, AlterConfigsResource};
use kafka_protocol::messages::alter_configs_response::{
    AlterConfigsResourceResponse, AlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::{AlterOp, ControllerError};

use super::{
    alter_each, broker_resource, check_no_nulls, check_topic_name, check_unique_keys,
    group_resource, unsupported_type, RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC,
};
use crate::broker::Broker;

pub fn handle(broker: &Broker, _version: i16, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let outcomes = alter_each(
        &req.resources,
        |r| (r.resource_type, r.resource_name.as_str()),
        |r| replace(broker, r, req.validate_only),
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
    AlterConfigsResponse::default().with_responses(responses)
}

fn replace(
    broker: &Broker,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ControllerError> {
    check_unique_keys(r.configs.iter().map(|c| c.name.as_str()))?;
    check_no_nulls(
        r.configs
            .iter()
            .filter(|c| c.value.is_none())
            .map(|c| c.name.as_str())
            .collect(),
    )?;
    let sets: Vec<(String, AlterOp, Option<String>)> = r
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                AlterOp::Set,
                c.value.as_ref().map(|v| v.to_string()),
            )
        })
        .collect();
    let name = r.resource_name.as_str();
    match r.resource_type {
        RESOURCE_TOPIC => {
            check_topic_name(name)?;
            broker.controller.block_on(broker.controller.alter_configs(
                RESOURCE_TOPIC,
                name,
                &sets,
                true,
                validate_only,
            ))
        }
        RESOURCE_BROKER => broker_resource::alter(broker, name, sets, true, validate_only),
        RESOURCE_GROUP => group_resource::alter(broker, name, sets, true, validate_only),
        other => Err(unsupported_type(other)),
    }
}
