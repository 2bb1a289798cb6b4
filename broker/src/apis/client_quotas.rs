//! DescribeClientQuotas (v0-1) and AlterClientQuotas (v0-1), so
//! `kafka-configs.sh --entity-type users/clients/ips` works: quotas live in
//! the metadata log (ClientQuota records) and are described from the image
//! with Kafka's filter rules and messages.

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::AlterClientQuotasRequest;
use kafka_protocol::messages::alter_client_quotas_response::{
    AlterClientQuotasResponse, EntityData as AlteredEntity, EntryData as AlteredEntry,
};
use kafka_protocol::messages::describe_client_quotas_request::{
    ComponentData, DescribeClientQuotasRequest,
};
use kafka_protocol::messages::describe_client_quotas_response::{
    DescribeClientQuotasResponse, EntityData, EntryData, ValueData,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::quotas::{QuotaAlteration, QuotaEntity};
use ottla_controller::MetadataImage;

use crate::broker::Broker;

const ENTITY_TYPES: &[&str] = &["user", "client-id", "ip"];
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

pub fn describe(
    image: &MetadataImage,
    _version: i16,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    if let Err(message) = check_filter(&req.components) {
        return DescribeClientQuotasResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(StrBytes::from_string(message)))
            .with_entries(None);
    }
    let entries = image
        .client_quotas
        .iter()
        .filter(|(entity, _)| matches(entity, &req.components, req.strict))
        .map(|(entity, values)| {
            EntryData::default()
                .with_entity(
                    entity
                        .iter()
                        .map(|(entity_type, name)| {
                            EntityData::default()
                                .with_entity_type(StrBytes::from_string(entity_type.clone()))
                                .with_entity_name(name.clone().map(StrBytes::from_string))
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .iter()
                        .map(|(key, value)| {
                            ValueData::default()
                                .with_key(StrBytes::from_string(key.clone()))
                                .with_value(value.0)
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeClientQuotasResponse::default().with_entries(Some(entries))
}

/// Whether a stored entity passes the (already checked) filter: every
/// component names one of its types (with that name, the default, or any),
/// and under `strict` it has no other types.
fn matches(entity: &QuotaEntity, components: &[ComponentData], strict: bool) -> bool {
    if strict && entity.len() != components.len() {
        return false;
    }
    components.iter().all(
        |c| match (entity.get(c.entity_type.as_str()), c.match_type) {
            (None, _) => false,
            (Some(name), MATCH_EXACT) => name.as_deref() == c._match.as_deref(),
            (Some(name), MATCH_DEFAULT) => name.is_none(),
            (Some(_), _) => true,
        },
    )
}

pub fn alter(
    broker: &Broker,
    _version: i16,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let alterations: Vec<QuotaAlteration> = req
        .entries
        .iter()
        .map(|e| QuotaAlteration {
            entity: e
                .entity
                .iter()
                .map(|d| {
                    (
                        d.entity_type.to_string(),
                        d.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect(),
            ops: e
                .ops
                .iter()
                .map(|op| (op.key.to_string(), (!op.remove).then_some(op.value)))
                .collect(),
        })
        .collect();
    let results = broker.controller.block_on(
        broker
            .controller
            .alter_client_quotas(&alterations, req.validate_only),
    );
    let entries = req
        .entries
        .into_iter()
        .zip(results)
        .map(|(e, result)| {
            let entry = AlteredEntry::default().with_entity(altered_entity(&e.entity));
            match result {
                Ok(()) => entry,
                Err(e) => entry
                    .with_error_code(e.code)
                    .with_error_message(Some(StrBytes::from_string(e.message))),
            }
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// The request's entity, echoed in its result.
pub fn altered_entity(
    entity: &[kafka_protocol::messages::alter_client_quotas_request::EntityData],
) -> Vec<AlteredEntity> {
    entity
        .iter()
        .map(|d| {
            AlteredEntity::default()
                .with_entity_type(d.entity_type.clone())
                .with_entity_name(d.entity_name.clone())
        })
        .collect()
}

/// Kafka's ClientQuotaFilter rules, with its messages.
fn check_filter(components: &[ComponentData]) -> Result<(), String> {
    let mut seen = HashSet::new();
    for c in components {
        let entity_type = c.entity_type.as_str();
        if !ENTITY_TYPES.contains(&entity_type) {
            return Err(format!("Custom entity type '{entity_type}' not supported"));
        }
        if !seen.insert(entity_type) {
            return Err(format!(
                "Duplicate filter component entity type '{entity_type}'"
            ));
        }
        match (c.match_type, &c._match) {
            (MATCH_EXACT, None) => {
                return Err(format!(
                    "Request specified a null match for an exact match on '{entity_type}'"
                ))
            }
            (MATCH_DEFAULT | MATCH_ANY, Some(_)) => {
                return Err(format!(
                "Request specified a non-null match for a default or any match on '{entity_type}'"
            ))
            }
            (MATCH_EXACT | MATCH_DEFAULT | MATCH_ANY, _) => {}
            (other, _) => return Err(format!("Unexpected match type: {other}")),
        }
    }
    if seen.contains("ip") && seen.len() > 1 {
        return Err(
            "Invalid entity filter component combination, IP filter component should \
                    not be used with user or clientId filter component."
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(
        entity_type: &'static str,
        match_type: i8,
        m: Option<&'static str>,
    ) -> ComponentData {
        ComponentData::default()
            .with_entity_type(StrBytes::from_static_str(entity_type))
            .with_match_type(match_type)
            .with_match(m.map(StrBytes::from_static_str))
    }

    #[test]
    fn filters_are_checked_as_kafka_does() {
        let ok = describe(
            &MetadataImage::default(),
            1,
            DescribeClientQuotasRequest::default()
                .with_components(vec![component("user", MATCH_ANY, None)]),
        );
        assert_eq!((ok.error_code, ok.entries), (0, Some(vec![])));
        for bad in [
            vec![component("group", MATCH_ANY, None)],
            vec![component("user", MATCH_EXACT, None)],
            vec![component("user", MATCH_DEFAULT, Some("x"))],
            vec![component("user", 7, None)],
            vec![
                component("user", MATCH_ANY, None),
                component("user", MATCH_ANY, None),
            ],
            vec![
                component("ip", MATCH_ANY, None),
                component("user", MATCH_ANY, None),
            ],
        ] {
            let r = describe(
                &MetadataImage::default(),
                1,
                DescribeClientQuotasRequest::default().with_components(bad),
            );
            assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
            assert_eq!(r.entries, None);
        }
    }

    #[test]
    fn altered_quotas_are_described_through_filters() {
        use kafka_protocol::messages::alter_client_quotas_request::{
            EntityData, EntryData, OpData,
        };
        let dir = tempfile::tempdir().unwrap();
        let broker = crate::apis::test_support::test_broker(dir.path());
        let entry =
            |entity: &[(&'static str, Option<&'static str>)], key: &'static str, value: f64| {
                EntryData::default()
                    .with_entity(
                        entity
                            .iter()
                            .map(|(t, n)| {
                                EntityData::default()
                                    .with_entity_type(StrBytes::from_static_str(t))
                                    .with_entity_name(n.map(StrBytes::from_static_str))
                            })
                            .collect(),
                    )
                    .with_ops(vec![OpData::default()
                        .with_key(StrBytes::from_static_str(key))
                        .with_value(value)])
            };
        let request = AlterClientQuotasRequest::default().with_entries(vec![
            entry(&[("user", Some("alice"))], "producer_byte_rate", 1024.0),
            entry(
                &[("user", Some("alice")), ("client-id", None)],
                "request_percentage",
                50.0,
            ),
            entry(&[("client-id", Some("app"))], "consumer_byte_rate", 2048.0),
            entry(&[("client-id", Some("bad"))], "consumer_byte_rate", -1.0),
        ]);
        let validated = alter(&broker, 1, request.clone().with_validate_only(true));
        assert_eq!(
            validated.entries[3].error_code,
            ResponseError::InvalidRequest.code()
        );
        assert!(broker.controller.image().client_quotas.is_empty());
        let altered = alter(&broker, 1, request);
        let codes: Vec<i16> = altered.entries.iter().map(|e| e.error_code).collect();
        assert_eq!(codes, [0, 0, 0, ResponseError::InvalidRequest.code()]);

        let image = broker.controller.image();
        let found = |components: Vec<ComponentData>, strict: bool| {
            describe(
                &image,
                1,
                DescribeClientQuotasRequest::default()
                    .with_components(components)
                    .with_strict(strict),
            )
            .entries
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e.entity.len(),
                    e.values[0].key.to_string(),
                    e.values[0].value,
                )
            })
            .collect::<Vec<_>>()
        };
        let alice = || component("user", MATCH_EXACT, Some("alice"));
        assert_eq!(found(vec![alice()], false).len(), 2);
        assert_eq!(
            found(vec![alice()], true),
            [(1, "producer_byte_rate".to_string(), 1024.0)]
        );
        assert_eq!(
            found(
                vec![alice(), component("client-id", MATCH_DEFAULT, None)],
                true
            ),
            [(2, "request_percentage".to_string(), 50.0)]
        );
        assert_eq!(
            found(vec![component("client-id", MATCH_ANY, None)], false).len(),
            2
        );
        assert_eq!(found(vec![], false).len(), 3);
    }
}
