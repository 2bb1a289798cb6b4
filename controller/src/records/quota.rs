//! Client quotas as the metadata records them: the entity and key names,
//! values, the image's quotas by entity, and how a ClientQuota record
//! changes them.

use std::collections::BTreeMap;

pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// Entity type -> name; `None` is the type's default entity.
pub type QuotaEntity = BTreeMap<String, Option<String>>;

/// A quota value; compared bit for bit so the image stays `Eq`.
#[derive(Debug, Clone, Copy)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// Every stored quota: entity -> key -> value.
pub type ClientQuotas = BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>;

/// Applies a ClientQuota record: `None` removes the key.
pub(crate) fn apply(
    quotas: &mut ClientQuotas,
    entity: &[(String, Option<String>)],
    key: &str,
    value: Option<QuotaValue>,
) {
    let entity: QuotaEntity = entity.iter().cloned().collect();
    match value {
        Some(v) => {
            quotas.entry(entity).or_default().insert(key.to_string(), v);
        }
        None => {
            if let Some(keys) = quotas.get_mut(&entity) {
                keys.remove(key);
                if keys.is_empty() {
                    quotas.remove(&entity);
                }
            }
        }
    }
}
