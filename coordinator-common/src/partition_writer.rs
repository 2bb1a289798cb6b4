//! The narrow view of the replica manager that coordinators and the mirror
//! runtime write through (Kafka's coordinator-common `PartitionWriter`):
//! find a hosted partition, append to it as its leader, wait for its ISR.
//! The broker's replica manager implements it; nothing above this trait
//! knows how replication works.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_storage::manager::{SharedLog, TopicPartition};
use ottla_storage::producer_state::AppendOrigin;
use uuid::Uuid;

/// Leadership state of a hosted partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionState {
    pub leader: i32,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
    pub replicas: Vec<i32>,
}

/// A partition this broker hosts: its log and its leadership.
pub trait HostedPartition: Send + Sync {
    fn tp(&self) -> &TopicPartition;
    fn topic_id(&self) -> Uuid;
    fn log(&self) -> &SharedLog;
    fn state(&self) -> PartitionState;
}

/// A produce outcome for one partition, in Kafka terms.
#[derive(Debug, Clone)]
pub struct ProduceOutcome {
    /// Why the append was refused; None when it was appended.
    pub error: Option<ResponseError>,
    pub message: Option<String>,
    pub base_offset: i64,
    pub log_append_time: i64,
    pub log_start_offset: i64,
    /// The offset after the appended batch (-1 on failure): acks=all waits
    /// for the high watermark to reach it.
    pub end_offset: i64,
    /// Records refused one by one (INVALID_RECORD): index in the request
    /// and why, as Produce v8+ reports them.
    pub record_errors: Vec<(i32, String)>,
}

impl ProduceOutcome {
    /// A refused append.
    pub fn failed(error: ResponseError, message: Option<String>) -> Self {
        Self {
            error: Some(error),
            message,
            base_offset: -1,
            log_append_time: -1,
            log_start_offset: -1,
            end_offset: -1,
            record_errors: Vec::new(),
        }
    }
}

/// What [`PartitionWriter::await_replicated`] returns.
pub type Replicated<'a> = Pin<Box<dyn Future<Output = Result<(), ResponseError>> + Send + 'a>>;

pub trait PartitionWriter: Send + Sync {
    /// This broker's node id.
    fn node_id(&self) -> i32;

    /// Partition `tp`, if this broker hosts it (as leader or follower).
    fn hosted_partition(&self, tp: &TopicPartition) -> Option<Arc<dyn HostedPartition>>;

    /// Every partition this broker hosts.
    fn hosted_partitions(&self) -> Vec<Arc<dyn HostedPartition>>;

    /// Appends `records` to `tp` as its leader. Blocking I/O: call from the
    /// blocking pool.
    fn append_as_leader(
        &self,
        tp: &TopicPartition,
        records: &Bytes,
        required_acks: i16,
        origin: AppendOrigin,
    ) -> ProduceOutcome;

    /// Waits until every ISR member has `tp` up to `end_offset` (with at
    /// least `min.insync.replicas` in the ISR), for up to `timeout`. The
    /// error is what a producer would be told.
    fn await_replicated<'a>(
        &'a self,
        tp: &'a TopicPartition,
        end_offset: i64,
        timeout: Duration,
    ) -> Replicated<'a>;

    /// [`PartitionWriter::await_replicated`] for synchronous code on the
    /// blocking pool.
    fn wait_replicated_blocking(
        &self,
        tp: &TopicPartition,
        end_offset: i64,
        timeout: Duration,
    ) -> Result<(), ResponseError>;
}

/// Milliseconds since the Unix epoch, as Kafka's timestamps count.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
