//! Per-topic traffic, Kafka's `BrokerTopicMetrics`. Each hosted partition
//! carries its own atomics, found through the partition the request path has
//! already looked up, so counting costs no lookup or allocation; a scrape
//! sums them by topic. A deleted topic's series disappear with its
//! partitions.

use std::ops::AddAssign;
use std::sync::atomic::{AtomicU64, Ordering};

use super::Field;

#[derive(Debug, Default)]
pub struct PartitionStats {
    bytes_in: AtomicU64,
    messages_in: AtomicU64,
    produce_requests: AtomicU64,
    failed_produce_requests: AtomicU64,
    bytes_out: AtomicU64,
    fetch_requests: AtomicU64,
    failed_fetch_requests: AtomicU64,
}

/// Counter values, summed over a topic's partitions.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Traffic {
    pub bytes_in: u64,
    pub messages_in: u64,
    pub produce_requests: u64,
    pub failed_produce_requests: u64,
    pub bytes_out: u64,
    pub fetch_requests: u64,
    pub failed_fetch_requests: u64,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl PartitionStats {
    /// A produce to this partition was appended (or was a duplicate retry).
    pub fn produced(&self, bytes: usize, messages: usize) {
        add(&self.produce_requests, 1);
        add(&self.bytes_in, bytes as u64);
        add(&self.messages_in, messages as u64);
    }

    pub fn produce_failed(&self) {
        add(&self.produce_requests, 1);
        add(&self.failed_produce_requests, 1);
    }

    /// A consumer fetch answered this partition with `bytes` of records.
    pub fn fetched(&self, bytes: usize, failed: bool) {
        add(&self.fetch_requests, 1);
        add(&self.bytes_out, bytes as u64);
        if failed {
            add(&self.failed_fetch_requests, 1);
        }
    }

    pub fn traffic(&self) -> Traffic {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Traffic {
            bytes_in: load(&self.bytes_in),
            messages_in: load(&self.messages_in),
            produce_requests: load(&self.produce_requests),
            failed_produce_requests: load(&self.failed_produce_requests),
            bytes_out: load(&self.bytes_out),
            fetch_requests: load(&self.fetch_requests),
            failed_fetch_requests: load(&self.failed_fetch_requests),
        }
    }
}

impl AddAssign for Traffic {
    fn add_assign(&mut self, o: Self) {
        self.bytes_in += o.bytes_in;
        self.messages_in += o.messages_in;
        self.produce_requests += o.produce_requests;
        self.failed_produce_requests += o.failed_produce_requests;
        self.bytes_out += o.bytes_out;
        self.fetch_requests += o.fetch_requests;
        self.failed_fetch_requests += o.failed_fetch_requests;
    }
}

/// The metric name, help and value of each counter, for encoding.
pub const COUNTERS: [Field<Traffic, u64>; 7] = [
    (
        "kafka_server_brokertopic_bytes_in",
        "Bytes of record batches appended by produce requests (Kafka BytesInPerSec).",
        |t| t.bytes_in,
    ),
    (
        "kafka_server_brokertopic_messages_in",
        "Records appended (Kafka MessagesInPerSec).",
        |t| t.messages_in,
    ),
    (
        "kafka_server_brokertopic_bytes_out",
        "Bytes of records returned to consumer fetches (Kafka BytesOutPerSec).",
        |t| t.bytes_out,
    ),
    (
        "kafka_server_brokertopic_produce_requests",
        "Partition appends requested by produce requests (Kafka TotalProduceRequestsPerSec).",
        |t| t.produce_requests,
    ),
    (
        "kafka_server_brokertopic_failed_produce_requests",
        "Partition appends that failed (Kafka FailedProduceRequestsPerSec).",
        |t| t.failed_produce_requests,
    ),
    (
        "kafka_server_brokertopic_fetch_requests",
        "Partitions answered to consumer fetches (Kafka TotalFetchRequestsPerSec).",
        |t| t.fetch_requests,
    ),
    (
        "kafka_server_brokertopic_failed_fetch_requests",
        "Partitions answered to consumer fetches with an error (Kafka FailedFetchRequestsPerSec).",
        |t| t.failed_fetch_requests,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_by_topic() {
        let (a, b) = (PartitionStats::default(), PartitionStats::default());
        a.produced(100, 3);
        b.produced(50, 1);
        b.produce_failed();
        a.fetched(70, false);
        a.fetched(0, true);
        let mut sum = a.traffic();
        sum += b.traffic();
        assert_eq!(
            sum,
            Traffic {
                bytes_in: 150,
                messages_in: 4,
                produce_requests: 3,
                failed_produce_requests: 1,
                bytes_out: 70,
                fetch_requests: 2,
                failed_fetch_requests: 1,
            }
        );
    }
}
