//! ListConfigResources (v0-1, KIP-1142; v0 was ListClientMetricsResources):
//! which config resources exist, by type. `kafka-configs.sh --describe
//! --entity-type groups` lists the groups with configs this way. Version 0
//! asks for client-metrics subscriptions only, which Ottla has none of.
//! BROKER_LOGGER resources are not listed: Ottla does not serve them.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_config_resources_request::ListConfigResourcesRequest;
use kafka_protocol::messages::list_config_resources_response::{
    ConfigResource, ListConfigResourcesResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::configs::{RESOURCE_BROKER, RESOURCE_CLIENT_METRICS, RESOURCE_GROUP, RESOURCE_TOPIC};
use crate::broker::Broker;

/// What an empty type list lists, in Kafka's order.
const ALL_TYPES: [i8; 3] = [RESOURCE_GROUP, RESOURCE_BROKER, RESOURCE_TOPIC];

pub fn handle(
    broker: &Broker,
    version: i16,
    req: ListConfigResourcesRequest,
) -> ListConfigResourcesResponse {
    if version == 0 {
        return ListConfigResourcesResponse::default();
    }
    let image = broker.controller.image();
    // Each type once, in the order asked: a request naming a type many
    // times must not multiply the answer.
    let mut types: Vec<i8> = Vec::new();
    let asked = if req.resource_types.is_empty() {
        &ALL_TYPES[..]
    } else {
        &req.resource_types[..]
    };
    for &kind in asked {
        if !types.contains(&kind) {
            types.push(kind);
        }
    }
    let mut listed = Vec::new();
    for kind in types {
        let names: Vec<String> = match kind {
            RESOURCE_GROUP | RESOURCE_CLIENT_METRICS => image
                .config_resource_names(kind)
                .into_iter()
                .map(String::from)
                .collect(),
            RESOURCE_BROKER => vec![broker.node_id().to_string()],
            RESOURCE_TOPIC => image.topic_ids.keys().cloned().collect(),
            _ => {
                return ListConfigResourcesResponse::default()
                    .with_error_code(ResponseError::UnsupportedVersion.code());
            }
        };
        listed.extend(names.into_iter().map(|name| {
            ConfigResource::default()
                .with_resource_name(StrBytes::from_string(name))
                .with_resource_type(kind)
        }));
    }
    ListConfigResourcesResponse::default().with_config_resources(listed)
}
