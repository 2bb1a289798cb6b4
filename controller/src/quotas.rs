//! Client quotas as KRaft stores them: per-entity byte rates and request
//! percentages in ClientQuota records, altered through AlterClientQuotas
//! with Kafka's validation rules and messages.
//!
//! An entity names a user, a client id, both, or an IP; a missing name is
//! the type's default (`--entity-default`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use kafka_protocol::error::ResponseError;

use crate::controller::{Controller, ControllerError};
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

pub use crate::records::quota::*;

/// One entity's requested changes: `None` removes the key.
#[derive(Debug, Clone)]
pub struct QuotaAlteration {
    pub entity: Vec<(String, Option<String>)>,
    pub ops: Vec<(String, Option<f64>)>,
}

/// The type of a quota key's value, which bounds what it may be set to.
#[derive(Clone, Copy)]
enum KeyType {
    Long,
    Int,
    Double,
}

fn key_type(entity: &QuotaEntity, key: &str) -> Option<KeyType> {
    if entity.contains_key(IP) {
        return (key == CONNECTION_CREATION_RATE).then_some(KeyType::Int);
    }
    match key {
        PRODUCER_BYTE_RATE | CONSUMER_BYTE_RATE => Some(KeyType::Long),
        REQUEST_PERCENTAGE | CONTROLLER_MUTATION_RATE => Some(KeyType::Double),
        _ => None,
    }
}

fn invalid(message: impl Into<String>) -> ControllerError {
    ControllerError::new(ResponseError::InvalidRequest, message)
}

/// Kafka's rules for an entity: known types, each at most once, no empty
/// name, IP alone and a valid address.
fn check_entity(entity: &[(String, Option<String>)]) -> Result<QuotaEntity, ControllerError> {
    if entity.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    let mut checked = QuotaEntity::new();
    for (entity_type, name) in entity {
        if checked.contains_key(entity_type) {
            return Err(invalid(format!(
                "Invalid client quota entity, duplicate entity entry {entity_type}"
            )));
        }
        if ![USER, CLIENT_ID, IP].contains(&entity_type.as_str()) {
            return Err(invalid(format!(
                "Unhandled client quota entity type: {entity_type}"
            )));
        }
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {entity_type} not supported")));
        }
        checked.insert(entity_type.clone(), name.clone());
    }
    if let Some(ip) = checked.get(IP) {
        if checked.len() > 1 {
            return Err(invalid(
                "Invalid quota entity combination, IP entity should not be combined with User or ClientId",
            ));
        }
        if let Some(ip) = ip.as_deref().filter(|ip| ip.parse::<IpAddr>().is_err()) {
            return Err(invalid(format!(
                "{ip} is not a valid IP or resolvable host."
            )));
        }
    }
    Ok(checked)
}

fn check_value(entity: &QuotaEntity, key: &str, value: f64) -> Result<(), ControllerError> {
    let Some(kind) = key_type(entity, key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    if value.is_nan() || value <= 0.0 {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    let (max, type_name) = match kind {
        KeyType::Double => return Ok(()),
        KeyType::Int => (i32::MAX as f64, "an INT"),
        KeyType::Long => (i64::MAX as f64, "a LONG"),
    };
    if value > max {
        return Err(invalid(format!(
            "Proposed value for {key} is too large for {type_name}."
        )));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(invalid(format!("{key} cannot be a fractional value.")));
    }
    Ok(())
}

/// One entity's records, or why it is refused.
fn entity_records(
    image: &MetadataImage,
    alteration: &QuotaAlteration,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let entity = check_entity(&alteration.entity)?;
    let mut seen = BTreeMap::new();
    for (key, value) in &alteration.ops {
        if seen.insert(key.as_str(), *value).is_some() {
            return Err(invalid(format!(
                "Duplicate quota key {key} not updating quota for this entity"
            )));
        }
    }
    let current = image.client_quotas.get(&entity);
    let mut records = Vec::new();
    for (key, value) in seen {
        let stored = current.and_then(|keys| keys.get(key));
        match value {
            None if stored.is_none() => {}
            Some(v) if stored == Some(&QuotaValue(v)) => {}
            Some(v) => check_value(&entity, key, v)?,
            None => {}
        }
        if value.map(QuotaValue).as_ref() != stored {
            records.push(MetadataRecord::ClientQuota {
                entity: entity.clone().into_iter().collect(),
                key: key.to_string(),
                value: value.map(QuotaValue),
            });
        }
    }
    Ok(records)
}

/// Validates an AlterClientQuotas request against `image`: the records to
/// commit and one result per alteration, in order. An entity named twice is
/// refused both times; refused entities change nothing.
pub fn alter_records(
    image: &MetadataImage,
    alterations: &[QuotaAlteration],
) -> (Vec<MetadataRecord>, Vec<Result<(), ControllerError>>) {
    let entity_of = |a: &QuotaAlteration| a.entity.iter().cloned().collect::<QuotaEntity>();
    let mut counts: BTreeMap<QuotaEntity, usize> = BTreeMap::new();
    for a in alterations {
        *counts.entry(entity_of(a)).or_default() += 1;
    }
    let mut records = Vec::new();
    let results = alterations
        .iter()
        .map(|a| {
            if counts[&entity_of(a)] > 1 {
                return Err(invalid("Ignoring duplicate entity"));
            }
            records.extend(entity_records(image, a)?);
            Ok(())
        })
        .collect();
    (records, results)
}

impl Controller {
    /// Validates and (unless `validate_only`) commits an AlterClientQuotas
    /// request; a failed commit fails every entity that had passed.
    pub async fn alter_client_quotas(
        &self,
        alterations: &[QuotaAlteration],
        validate_only: bool,
    ) -> Vec<Result<(), ControllerError>> {
        if validate_only {
            return alter_records(&self.image(), alterations).1;
        }
        let (results, error) = self.run(|image| alter_records(image, alterations)).await;
        match error {
            None => results,
            Some(e) => results.into_iter().map(|r| r.and(Err(e.clone()))).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alteration(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> QuotaAlteration {
        QuotaAlteration {
            entity: entity
                .iter()
                .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                .collect(),
            ops: ops.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        }
    }

    fn message(image: &MetadataImage, a: QuotaAlteration) -> String {
        let (records, results) = alter_records(image, &[a]);
        assert!(records.is_empty());
        results[0].clone().unwrap_err().message
    }

    #[test]
    fn alterations_follow_kafkas_rules() {
        let image = MetadataImage::default();
        let cases = [
            (alteration(&[], &[(PRODUCER_BYTE_RATE, Some(1.0))]), "Invalid empty client quota entity"),
            (alteration(&[("group", Some("g"))], &[]), "Unhandled client quota entity type: group"),
            (alteration(&[(USER, Some(""))], &[]), "Empty user not supported"),
            (
                alteration(&[(IP, Some("1.2.3.4")), (USER, None)], &[]),
                "Invalid quota entity combination, IP entity should not be combined with User or ClientId",
            ),
            (alteration(&[(IP, Some("nowhere..x"))], &[]), "nowhere..x is not a valid IP or resolvable host."),
            (alteration(&[(USER, Some("u"))], &[("bogus", Some(1.0))]), "Invalid configuration key bogus"),
            (alteration(&[(IP, None)], &[(PRODUCER_BYTE_RATE, Some(1.0))]), "Invalid configuration key producer_byte_rate"),
            (alteration(&[(USER, Some("u"))], &[(PRODUCER_BYTE_RATE, Some(0.0))]), "Quota producer_byte_rate must be greater than 0"),
            (alteration(&[(CLIENT_ID, Some("c"))], &[(CONSUMER_BYTE_RATE, Some(1.5))]), "consumer_byte_rate cannot be a fractional value."),
            (alteration(&[(IP, None)], &[(CONNECTION_CREATION_RATE, Some(3e9))]), "Proposed value for connection_creation_rate is too large for an INT."),
            (
                alteration(&[(USER, Some("u"))], &[(PRODUCER_BYTE_RATE, Some(1.0)), (PRODUCER_BYTE_RATE, None)]),
                "Duplicate quota key producer_byte_rate not updating quota for this entity",
            ),
        ];
        for (a, expected) in cases {
            assert_eq!(message(&image, a), expected);
        }
    }

    #[test]
    fn records_set_change_and_remove_keys() {
        let mut image = MetadataImage::default();
        let user_client = [(USER, Some("alice")), (CLIENT_ID, None)];
        let (records, results) = alter_records(
            &image,
            &[alteration(
                &user_client,
                &[
                    (PRODUCER_BYTE_RATE, Some(1024.0)),
                    (REQUEST_PERCENTAGE, Some(12.5)),
                ],
            )],
        );
        assert!(results[0].is_ok());
        assert_eq!(records.len(), 2);
        for r in &records {
            image.apply(0, r);
        }
        let entity: QuotaEntity = [
            (USER.to_string(), Some("alice".to_string())),
            (CLIENT_ID.to_string(), None),
        ]
        .into();
        assert_eq!(
            image.client_quotas[&entity][REQUEST_PERCENTAGE],
            QuotaValue(12.5)
        );
        // Unchanged values and absent removals write nothing.
        let (records, _) = alter_records(
            &image,
            &[alteration(
                &user_client,
                &[
                    (PRODUCER_BYTE_RATE, Some(1024.0)),
                    (CONSUMER_BYTE_RATE, None),
                ],
            )],
        );
        assert!(records.is_empty());
        let (records, _) = alter_records(
            &image,
            &[alteration(
                &user_client,
                &[(PRODUCER_BYTE_RATE, None), (REQUEST_PERCENTAGE, None)],
            )],
        );
        for r in &records {
            image.apply(0, r);
        }
        assert!(image.client_quotas.is_empty());
    }

    #[test]
    fn an_entity_named_twice_is_refused_both_times() {
        let a = alteration(
            &[(CLIENT_ID, Some("c"))],
            &[(PRODUCER_BYTE_RATE, Some(10.0))],
        );
        let (records, results) = alter_records(&MetadataImage::default(), &[a.clone(), a]);
        assert!(records.is_empty());
        assert!(results.iter().all(|r| r.is_err()));
    }
}
