use std::time::{Duration, Instant};

use kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, ProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ResponseKind};
use ottla_protocol::batch::BatchBuilder;
use ottla_storage::manager::TopicPartition;

use prometheus_client::registry::Registry;

use super::*;
use crate::apis::test_support::{append, create_topic, test_broker};
use crate::metrics::{render, NetworkCollector, NetworkMetrics};

fn render_one(collector: impl prometheus_client::collector::Collector) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collector));
    render(&registry).unwrap()
}

/// The value of the series written exactly as `series` (name and labels).
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Every sample line is `name{labels} value`, every family has one HELP and
/// one TYPE before its samples, and no family appears twice.
fn assert_well_formed(text: &str) {
    let mut families = std::collections::HashSet::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            current = rest.split(' ').next().unwrap().to_string();
            assert!(families.insert(current.clone()), "{current} twice");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            assert!(rest.starts_with(&format!("{current} ")), "{line}");
        } else {
            let (series, v) = line.rsplit_once(' ').expect(line);
            assert!(v.parse::<f64>().is_ok() || v == "+Inf", "{line}");
            let name = series.split('{').next().unwrap();
            assert!(name.starts_with(&current), "{line} outside {current}");
            assert!(!series.contains('{') || series.ends_with('}'), "{line}");
        }
    }
}

/// Ottla's own APIs (streams groups, mirrors) are counted as Kafka's are,
/// under their names; their error codes come from every level of the answer.
#[test]
fn own_apis_are_counted_with_their_error_codes() {
    use ottla_protocol::mirror::topics::{AddTopicsToMirrorResponse, MirrorTopicResult};
    use ottla_protocol::mirror::MirrorApiKey;
    use ottla_protocol::own_api::OwnApiKey;
    use ottla_protocol::streams::StreamsApiKey;

    let m: &'static NetworkMetrics = Box::leak(Box::default());
    let update = OwnApiKey::Streams(StreamsApiKey::StreamsGroupTopologyDescriptionUpdate);
    let add = OwnApiKey::Mirror(MirrorApiKey::AddTopicsToMirror);
    m.received(update, 0);
    m.received(add, 0);
    m.received(add, 0);
    let response = AddTopicsToMirrorResponse {
        topics: [3, 0, 3]
            .map(|error_code| MirrorTopicResult {
                error_code,
                ..Default::default()
            })
            .to_vec(),
        ..Default::default()
    };
    m.own_response_errors(add, &response);
    m.error(update, 35); // UNSUPPORTED_VERSION
    m.completed(update, Instant::now());

    let text = render_one(NetworkCollector(m));
    assert_well_formed(&text);
    let v = |s: &str| value(&text, s);
    assert_eq!(
        v(r#"kafka_network_requests_total{request="AddTopicsToMirror",version="0"}"#),
        Some(2.0)
    );
    assert_eq!(
        v(
            r#"kafka_network_requests_total{request="StreamsGroupTopologyDescriptionUpdate",version="0"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        v(
            r#"kafka_network_request_errors_total{request="AddTopicsToMirror",error="UNKNOWN_TOPIC_OR_PARTITION"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        v(
            r#"kafka_network_request_errors_total{request="StreamsGroupTopologyDescriptionUpdate",error="UNSUPPORTED_VERSION"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        v(
            r#"kafka_network_request_duration_seconds_count{request="StreamsGroupTopologyDescriptionUpdate"}"#
        ),
        Some(1.0)
    );
}

#[test]
fn request_counters_errors_and_latency_histograms() {
    let m: &'static NetworkMetrics = Box::leak(Box::default());
    m.received(ApiKey::Produce, 9);
    m.received(ApiKey::Produce, 9);
    m.received(ApiKey::Fetch, 17);
    m.received(ApiKey::Fetch, 99); // no such version slot: ignored
    let partitions = [0, 6, 6]
        .map(|c| PartitionProduceResponse::default().with_error_code(c))
        .to_vec();
    let response = ResponseKind::Produce(ProduceResponse::default().with_responses(vec![
        TopicProduceResponse::default().with_partition_responses(partitions),
    ]));
    m.response_errors(ApiKey::Produce, &response);
    m.error(ApiKey::Fetch, -1);
    let started = Instant::now() - Duration::from_millis(3);
    m.completed(ApiKey::Produce, started);
    let plaintext = m.listener("PLAINTEXT");
    for _ in 0..3 {
        plaintext.opened();
    }
    m.listener("PLAINTEXT").closed();

    let text = render_one(NetworkCollector(m));
    assert_well_formed(&text);
    let v = |s: &str| value(&text, s);
    assert_eq!(
        v(r#"kafka_network_requests_total{request="Produce",version="9"}"#),
        Some(2.0)
    );
    assert_eq!(
        v(r#"kafka_network_requests_total{request="Fetch",version="17"}"#),
        Some(1.0)
    );
    assert!(!text.contains(r#"version="99""#));
    assert_eq!(
        v(
            r#"kafka_network_request_errors_total{request="Produce",error="NOT_LEADER_OR_FOLLOWER"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        v(r#"kafka_network_request_errors_total{request="Fetch",error="UNKNOWN_SERVER_ERROR"}"#),
        Some(1.0)
    );
    assert!(text.contains("# TYPE kafka_network_request_duration_seconds histogram\n"));
    // 3 ms: above the 2.5 ms bound, within 5 ms; buckets are cumulative.
    let bucket = |le: &str| {
        v(&format!(
            r#"kafka_network_request_duration_seconds_bucket{{request="Produce",le="{le}"}}"#
        ))
    };
    assert_eq!(bucket("0.0025"), Some(0.0));
    assert_eq!(bucket("0.005"), Some(1.0));
    assert_eq!(bucket("+Inf"), Some(1.0));
    assert_eq!(
        v(r#"kafka_network_request_duration_seconds_count{request="Produce"}"#),
        Some(1.0)
    );
    assert!(
        v(r#"kafka_network_request_duration_seconds_sum{request="Produce"}"#).unwrap() >= 0.003
    );
    // Fetch was never completed: no histogram series for it.
    assert!(!text.contains(r#"duration_seconds_count{request="Fetch"}"#));
    assert_eq!(
        v(r#"kafka_network_connections{listener="PLAINTEXT"}"#),
        Some(2.0)
    );
    assert_eq!(
        v(r#"kafka_network_connection_creation_total{listener="PLAINTEXT"}"#),
        Some(3.0)
    );
    assert_eq!(
        v(r#"kafka_network_connection_close_total{listener="PLAINTEXT"}"#),
        Some(1.0)
    );
}

#[test]
fn broker_state_and_topic_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    create_topic(&broker, "orders", 2);
    let tp = TopicPartition::new("orders", 1);
    append(&broker, &tp, &BatchBuilder::default(), &[1, 2, 3]);
    // Not a record batch: the append fails and counts as a failed produce.
    let garbage = bytes::Bytes::from_static(&[0; 70]);
    let failed = broker.replicas.append(
        &TopicPartition::new("orders", 0),
        &garbage,
        1,
        ottla_storage::producer_state::AppendOrigin::Client,
    );
    assert!(failed.error.is_some());
    ottla_group_coordinator::stats::rebalance_started();

    let text = render(&registry(broker.clone(), RequestHandlerPool::new(3))).unwrap();
    assert_well_formed(&text);
    let v = |s: &str| value(&text, s);
    assert_eq!(
        v("kafka_server_kafkarequesthandlerpool_request_handler_threads"),
        Some(3.0)
    );
    assert_eq!(
        v("kafka_server_kafkarequesthandlerpool_request_handler_busy_seconds_total"),
        Some(0.0)
    );
    assert!(v(r#"kafka_server_brokertopic_bytes_in_total{topic="orders"}"#).unwrap() > 0.0);
    assert_eq!(
        v(r#"kafka_server_brokertopic_messages_in_total{topic="orders"}"#),
        Some(3.0)
    );
    assert_eq!(
        v(r#"kafka_server_brokertopic_produce_requests_total{topic="orders"}"#),
        Some(2.0)
    );
    assert_eq!(
        v(r#"kafka_server_brokertopic_failed_produce_requests_total{topic="orders"}"#),
        Some(1.0)
    );
    assert_eq!(
        v(r#"kafka_log_end_offset{topic="orders",partition="1"}"#),
        Some(3.0)
    );
    assert_eq!(
        v(r#"kafka_log_end_offset{topic="orders",partition="0"}"#),
        Some(0.0)
    );
    assert_eq!(
        v(r#"kafka_log_start_offset{topic="orders",partition="1"}"#),
        Some(0.0)
    );
    assert!(v(r#"kafka_log_size_bytes{topic="orders",partition="1"}"#).unwrap() > 0.0);
    assert_eq!(
        v(r#"kafka_log_size_bytes{topic="orders",partition="0"}"#),
        Some(0.0)
    );
    assert_eq!(
        v(r#"kafka_log_segments{topic="orders",partition="0"}"#),
        Some(1.0)
    );
    assert_eq!(v("kafka_server_replicamanager_partitions"), Some(2.0));
    assert_eq!(v("kafka_server_replicamanager_leader_count"), Some(2.0));
    assert_eq!(
        v("kafka_server_replicamanager_under_replicated_partitions"),
        Some(0.0)
    );
    assert_eq!(
        v("kafka_server_replicamanager_under_min_isr_partitions"),
        Some(0.0)
    );
    assert_eq!(v("kafka_server_replicamanager_offline_replicas"), Some(0.0));
    assert_eq!(v("kafka_controller_active_controller_count"), Some(1.0));
    assert_eq!(v("kafka_controller_global_topic_count"), Some(1.0));
    assert_eq!(v("kafka_controller_global_partition_count"), Some(2.0));
    assert_eq!(v("kafka_controller_offline_partitions_count"), Some(0.0));
    assert_eq!(v("kafka_controller_active_broker_count"), Some(1.0));
    assert!(v("kafka_controller_last_applied_record_offset").unwrap() > 0.0);
    assert_eq!(
        v(r#"kafka_server_group_coordinator_groups{state="Stable"}"#),
        Some(0.0)
    );
    // Process-wide: other tests may rebalance too.
    assert!(v("kafka_server_group_coordinator_rebalances_total").unwrap() >= 1.0);
    assert!(v("process_resident_memory_bytes").unwrap() > 0.0);
    assert!(v("process_open_fds").unwrap() > 0.0);
    assert!(text.contains("\nprocess_cpu_seconds_total "));
}

/// Every metric the Grafana dashboard queries is one this broker exports.
#[test]
fn the_grafana_dashboard_queries_exported_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let pool = RequestHandlerPool::new(8);
    let text = render(&registry(test_broker(dir.path()), pool)).unwrap();
    let mut exported = std::collections::HashSet::new();
    for line in text.lines() {
        let Some((name, kind)) = line.strip_prefix("# TYPE ").and_then(|l| l.split_once(' '))
        else {
            continue;
        };
        if kind == "histogram" {
            exported.extend(["_bucket", "_sum", "_count"].map(|s| format!("{name}{s}")));
        }
        exported.insert(name.to_string());
    }
    let dashboard = include_str!("../../../docs/grafana/ottla-dashboard.json");
    let is_name_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    let mut queried = 0;
    for (i, _) in dashboard.match_indices(['k', 'p']) {
        let preceded = dashboard[..i].chars().next_back().is_some_and(is_name_char);
        let rest = &dashboard[i..];
        if preceded || !(rest.starts_with("kafka_") || rest.starts_with("process_")) {
            continue;
        }
        let name = &rest[..rest.find(|c| !is_name_char(c)).unwrap_or(rest.len())];
        assert!(
            exported.contains(name),
            "the dashboard queries {name}, which is not exported"
        );
        queried += 1;
    }
    assert!(queried > 30, "{queried}");
}
