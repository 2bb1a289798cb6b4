//! Transaction coordinator settings; the broker reads them from its
//! static configs (`txn_config.rs` there), with its key table's defaults.

use std::time::Duration;

pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnConfig {
    pub topic_partitions: i32,
    pub topic_replication_factor: i16,
    pub topic_min_isr: i32,
    pub topic_segment_bytes: i32,
    pub max_timeout_ms: i32,
    pub id_expiration_ms: i64,
    pub abort_timed_out_interval_ms: i64,
    pub remove_expired_interval_ms: i64,
    pub partition_verification: bool,
    /// How long markers and `__transaction_state` records wait for their
    /// ISR (`request.timeout.ms`, as Kafka's coordinator).
    pub request_timeout: Duration,
}
