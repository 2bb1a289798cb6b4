//! The transaction coordinator's settings, read from the broker's static
//! configs by their Kafka names; unset keys take the defaults of the broker
//! key table.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

use ottla_txn_coordinator::TxnConfig;

use crate::config::{default_of, keys, Key};

/// The transaction coordinator's settings from the broker's static
/// configs, by their Kafka names; unset keys take the key table's defaults.
pub fn txn_config(configs: &BTreeMap<String, String>) -> TxnConfig {
    TxnConfig {
        topic_partitions: get(configs, keys::TRANSACTION_STATE_LOG_NUM_PARTITIONS).max(1),
        topic_replication_factor: get(configs, keys::TRANSACTION_STATE_LOG_REPLICATION_FACTOR)
            .max(1),
        topic_min_isr: get(configs, keys::TRANSACTION_STATE_LOG_MIN_ISR),
        topic_segment_bytes: get(configs, keys::TRANSACTION_STATE_LOG_SEGMENT_BYTES),
        max_timeout_ms: get(configs, keys::TRANSACTION_MAX_TIMEOUT_MS),
        id_expiration_ms: get::<i32>(configs, keys::TRANSACTIONAL_ID_EXPIRATION_MS).into(),
        abort_timed_out_interval_ms: get::<i32>(
            configs,
            keys::TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS,
        )
        .into(),
        remove_expired_interval_ms: get::<i32>(
            configs,
            keys::TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS,
        )
        .into(),
        partition_verification: get(configs, keys::TRANSACTION_PARTITION_VERIFICATION_ENABLE),
        request_timeout: Duration::from_millis(
            get::<i32>(configs, keys::REQUEST_TIMEOUT_MS).max(0) as u64,
        ),
    }
}

/// The key's static value, else its default. The config layer has validated
/// both, so a parse failure can only be a table bug: it falls back to the
/// type's default rather than crashing the broker.
fn get<T: FromStr + Default>(configs: &BTreeMap<String, String>, key: Key<T>) -> T {
    configs
        .get(key.name)
        .map(String::as_str)
        .or_else(|| default_of(key.name).flatten())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let d = txn_config(&BTreeMap::new());
        assert_eq!(d.topic_partitions, 50);
        // Kafka's: three replicas, two in sync.
        assert_eq!((d.topic_replication_factor, d.topic_min_isr), (3, 2));
        assert_eq!(d.max_timeout_ms, 900_000);
        assert_eq!(d.abort_timed_out_interval_ms, 10_000);
        assert!(d.partition_verification);
        assert_eq!(d.request_timeout, Duration::from_secs(30));
        let c = txn_config(&BTreeMap::from([
            (
                "transaction.state.log.num.partitions".to_string(),
                "3".to_string(),
            ),
            (
                "transaction.partition.verification.enable".to_string(),
                "false".to_string(),
            ),
        ]));
        assert_eq!(c.topic_partitions, 3);
        assert!(!c.partition_verification);
    }
}
