//! Prometheus metrics, served on `metrics.listener` (e.g.
//! `http://0.0.0.0:9308`; unset, nothing listens) as `GET /metrics` in the
//! Prometheus text format 0.0.4, encoded by `prometheus-client`.
//!
//! Names follow Kafka's JMX metrics as the Prometheus JMX exporter usually
//! renders them (`kafka_<domain>_<type>_<name>`, counters in `_total`,
//! durations in seconds), so Kafka dashboards and alerts carry over. The
//! request metrics cover every API, Ottla's own codec's too (the streams
//! groups' and the mirrors', under their names):
//!
//! | Ottla | Kafka (JMX) |
//! | --- | --- |
//! | `kafka_network_requests_total{request,version}` | `kafka.network:type=RequestMetrics,name=RequestsPerSec` |
//! | `kafka_network_request_errors_total{request,error}` | `kafka.network:type=RequestMetrics,name=ErrorsPerSec` (NONE not counted) |
//! | `kafka_network_request_duration_seconds{request}` (histogram) | `kafka.network:type=RequestMetrics,name=TotalTimeMs` |
//! | `kafka_server_kafkarequesthandlerpool_request_handler_threads` | `num.io.threads` (Kafka's pool size) |
//! | `kafka_server_kafkarequesthandlerpool_request_handler_busy_seconds_total` | `kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent` is `1 - rate / threads` |
//! | `kafka_network_connections{listener}` | `kafka.server:type=socket-server-metrics,name=connection-count` |
//! | `kafka_network_connection_creation_total{listener}`, `..._close_total` | `connection-creation-total`, `connection-close-total` |
//! | `kafka_network_connection_accept_throttle_ms_total{listener}` | `connection-accept-throttle-time` |
//! | `kafka_server_brokertopic_bytes_in_total{topic}` | `kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec` |
//! | `kafka_server_brokertopic_bytes_out_total{topic}` | `BytesOutPerSec` (consumer fetches; not replication) |
//! | `kafka_server_brokertopic_messages_in_total{topic}` | `MessagesInPerSec` |
//! | `kafka_server_brokertopic_{produce,fetch}_requests_total{topic}` | `TotalProduceRequestsPerSec`, `TotalFetchRequestsPerSec` |
//! | `kafka_server_brokertopic_failed_{produce,fetch}_requests_total{topic}` | `FailedProduceRequestsPerSec`, `FailedFetchRequestsPerSec` |
//! | `kafka_log_size_bytes{topic,partition}` | `kafka.log:type=Log,name=Size` |
//! | `kafka_log_segments{topic,partition}` | `kafka.log:type=Log,name=NumLogSegments` |
//! | `kafka_log_start_offset`, `kafka_log_end_offset` `{topic,partition}` | `LogStartOffset`, `LogEndOffset` |
//! | `kafka_log_offline_log_directories` | `kafka.log:type=LogManager,name=OfflineLogDirectoryCount` |
//! | `kafka_server_replicamanager_partitions` | `kafka.server:type=ReplicaManager,name=PartitionCount` |
//! | `kafka_server_replicamanager_leader_count` | `LeaderCount` |
//! | `kafka_server_replicamanager_under_replicated_partitions` | `UnderReplicatedPartitions` |
//! | `kafka_server_replicamanager_under_min_isr_partitions` | `UnderMinIsrPartitionCount` |
//! | `kafka_server_replicamanager_offline_replicas` | `OfflineReplicaCount` |
//! | `kafka_server_replicamanager_isr_{shrinks,expands}_total` | `IsrShrinksPerSec`, `IsrExpandsPerSec` |
//! | `kafka_controller_active_controller_count` | `kafka.controller:type=KafkaController,name=ActiveControllerCount` |
//! | `kafka_controller_last_applied_record_offset` | `LastAppliedRecordOffset` |
//! | `kafka_server_raft_metrics_current_{leader,epoch}` | `kafka.server:type=raft-metrics` `current-leader`, `current-epoch` |
//! | `kafka_controller_global_{topic,partition}_count` | `GlobalTopicCount`, `GlobalPartitionCount` |
//! | `kafka_controller_offline_partitions_count` | `OfflinePartitionsCount` |
//! | `kafka_controller_{active,fenced}_broker_count` | `ActiveBrokerCount`, `FencedBrokerCount` |
//! | `kafka_server_group_coordinator_groups{state}` | `group-coordinator-metrics` `classic-group-count{state}` |
//! | `kafka_server_group_coordinator_rebalances_total` | `classic-group-rebalance-count` |
//! | `kafka_server_raft_metrics_high_watermark`, `kafka_server_raft_metrics_voter_lag_records{voter}` | raft-metrics `high-watermark`; DescribeQuorum's per-voter lag (active controller only) |
//! | `kafka_server_replication_throttled_bytes_total{side}` | `kafka.server:type=LeaderReplication/FollowerReplication` `byte-rate` (throttled replicas only) |
//! | `kafka_server_quota_throttled_responses_total{quota}`, `kafka_server_quota_throttle_time_seconds_total{quota}` | `kafka.server:type=Produce/Fetch/Request` `throttle-time` (quota = produce, fetch, request) |
//! | `ottla_replica_fetchers{leader}` | Ottla's own: fetch loops per leader (`num.replica.fetchers`; Kafka names the threads `ReplicaFetcherThread-<id>-<leader>`) |
//! | `ottla_mirror_partition_state`, `ottla_mirror_lag_records`, `ottla_mirror_lag_ms`, `ottla_mirror_bytes_total`, `ottla_mirror_fetch_errors_total` `{mirror,topic,partition}` | Ottla's own: mirror partitions led here |
//! | `ottla_log_open_segment_files`, `ottla_log_max_open_segment_files` | Ottla's own: segment `.log` files open, and their budget (`log.segment.max.open.files`) |
//! | `ottla_mirror_fetchers{mirror,source_broker}` | Ottla's own: mirror fetch loops per source broker (`mirror.num.fetchers`) |
//! | `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`, `process_start_time_seconds`, `process_threads` | the Prometheus client convention (from `/proc/self`) |
//!
//! Cost on the data path: request, error and latency counters are atomics in
//! arrays indexed by API key, version and error code (`network`); per-topic
//! traffic lives on each hosted partition (`topic`). Everything else is
//! computed when scraped (`process` here; the broker's state in
//! `crate::broker_metrics`, which builds the registry), on the blocking pool.

mod errors;
mod histogram;
mod http;
mod network;
mod process;
mod topic;

use std::fmt;

use prometheus_client::encoding::{
    prometheus_text, DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet,
    NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

pub use http::MetricsServer;
pub use network::{network, ConnectionCounters, NetworkCollector, NetworkMetrics};
pub use process::ProcessCollector;
pub use topic::PartitionStats;
pub(crate) use topic::{Traffic, COUNTERS};

/// The registry in the Prometheus text format.
pub fn render(registry: &Registry) -> Result<String, fmt::Error> {
    let mut out = String::with_capacity(16 * 1024);
    prometheus_text::encode(&mut out, registry)?;
    Ok(out)
}

/// The label set of a series without labels.
pub(crate) const NO_LABELS: [(&str, &str); 0] = [];

/// A metric's name, help text, and how to read its value from a `T`.
pub(crate) type Field<T, V> = (&'static str, &'static str, fn(&T) -> V);

/// A counter family; `name` without `_total`, which the encoder appends.
pub(crate) fn counter<L: EncodeLabelSet, V: EncodeCounterValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in series {
        metric
            .encode_family(&labels)?
            .encode_counter::<NoLabelSet, V, u64>(&value, None)?;
    }
    Ok(())
}

pub(crate) fn gauge<L: EncodeLabelSet, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, V)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        metric.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}
