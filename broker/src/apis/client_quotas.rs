//! DescribeClientQuotas (v0-1). `kafka-configs.sh --describe --entity-type
//! users` asks for quotas before SCRAM credentials, so the filter is
//! checked as Kafka checks it and answered from the quotas Ottla stores.
//! Ottla stores none yet (AlterClientQuotas is not served), so a valid
//! filter matches no entry.

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_request::{
    ComponentData, DescribeClientQuotasRequest,
};
use kafka_protocol::messages::describe_client_quotas_response::DescribeClientQuotasResponse;
use kafka_protocol::protocol::StrBytes;

const ENTITY_TYPES: &[&str] = &["user", "client-id", "ip"];
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

pub fn describe(_version: i16, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse {
    match check_filter(&req.components) {
        Ok(()) => DescribeClientQuotasResponse::default().with_entries(Some(Vec::new())),
        Err(message) => DescribeClientQuotasResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code())
            .with_error_message(Some(StrBytes::from_string(message)))
            .with_entries(None),
    }
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
                1,
                DescribeClientQuotasRequest::default().with_components(bad),
            );
            assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
            assert_eq!(r.entries, None);
        }
    }
}
