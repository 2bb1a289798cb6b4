//! The Prometheus endpoint (`metrics.listener`) of a live `ottla` process,
//! scraped while Apache Kafka's perf producer writes to it; the request
//! handler pool resized at runtime.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ottla_tests::broker_configs::alter_broker_config;
use ottla_tests::metrics::{get, scrape, sum};
use ottla_tests::ottla::{free_port, Ottla};
use ottla_tests::tools::{kafka_tool, ok};

/// TCP ports `pid` is listening on, from its socket inodes and the
/// kernel's socket tables.
fn listening_ports(pid: u32) -> BTreeSet<u16> {
    let inodes: BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| {
            let target = std::fs::read_link(e.ok()?.path()).ok()?;
            let t = target.to_str()?;
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let mut ports = BTreeSet::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is HEXIP:HEXPORT, st 0A is LISTEN, then the inode.
            if f.len() > 9 && f[3] == "0A" && inodes.contains(f[9]) {
                let port = f[1].rsplit(':').next().unwrap();
                ports.insert(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports
}

/// Waits for the process's listening ports to become `want`.
fn assert_listening(node: &Ottla, want: &[u16]) {
    let want: BTreeSet<u16> = want.iter().copied().collect();
    let start = Instant::now();
    loop {
        let ports = listening_ports(node.pid());
        if ports == want {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "listening on {ports:?}, expected {want:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn metrics_grow_while_producing_and_consuming() {
    let metrics_port = free_port();
    let listener = format!("http://127.0.0.1:{metrics_port}");
    let node = Ottla::start(&[
        ("metrics.listener", listener.as_str()),
        ("group.initial.rebalance.delay.ms", "0"),
        // Everything below is served with one request handler at a time.
        ("num.io.threads", "1"),
    ]);
    assert_listening(&node, &[node.port, node.controller_port, metrics_port]);
    let bs = node.bootstrap();
    ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &bs,
            "--create",
            "--topic",
            "metered",
            "--partitions",
            "3",
        ],
        None,
    ));

    // Scrape continuously while the producer runs: every scrape succeeds and
    // the Produce counter never goes backwards.
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut produce_counts = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let text = scrape(metrics_port);
                let produced = sum(
                    &text,
                    "kafka_network_requests_total",
                    &[r#"request="Produce""#],
                );
                produce_counts.push(produced.unwrap_or(0.0));
                std::thread::sleep(Duration::from_millis(100));
            }
            produce_counts
        })
    };
    let out = ok(kafka_tool(
        "kafka-producer-perf-test.sh",
        &[
            "--topic",
            "metered",
            "--num-records",
            "20000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--bootstrap-server",
            &bs,
        ],
        None,
    ));
    assert!(out.contains("20000 records sent"), "{out}");
    stop.store(true, Ordering::Relaxed);
    let produce_counts = scraper.join().unwrap();
    assert!(produce_counts.len() >= 2, "{produce_counts:?}");
    assert!(
        produce_counts.windows(2).all(|w| w[0] <= w[1]),
        "{produce_counts:?}"
    );

    // A consumer in a group: bytes out and a rebalance.
    ok(kafka_tool(
        "kafka-console-consumer.sh",
        &[
            "--bootstrap-server",
            &bs,
            "--topic",
            "metered",
            "--group",
            "metered-readers",
            "--from-beginning",
            "--max-messages",
            "100",
            "--timeout-ms",
            "30000",
        ],
        None,
    ));

    let text = scrape(metrics_port);
    let v = |name: &str, labels: &[&str]| sum(&text, name, labels).unwrap_or(0.0);
    let produce = [r#"request="Produce""#];
    assert!(
        v("kafka_network_requests_total", &produce) > produce_counts[0],
        "{text}"
    );
    assert!(
        v("kafka_network_request_duration_seconds_count", &produce) > 0.0,
        "{text}"
    );
    assert!(
        v(
            "kafka_network_requests_total",
            &[r#"request="ApiVersions""#]
        ) > 0.0
    );
    let metered = [r#"topic="metered""#];
    assert!(
        v("kafka_server_brokertopic_bytes_in_total", &metered) > 2_000_000.0,
        "{text}"
    );
    assert_eq!(
        v("kafka_server_brokertopic_messages_in_total", &metered),
        20000.0
    );
    assert!(
        v("kafka_server_brokertopic_bytes_out_total", &metered) > 0.0,
        "{text}"
    );
    assert_eq!(
        v(
            "kafka_server_brokertopic_failed_produce_requests_total",
            &metered
        ),
        0.0
    );
    for p in 0..3 {
        let labels = [r#"topic="metered""#, &format!("partition=\"{p}\"")];
        assert!(
            sum(&text, "kafka_log_size_bytes", &labels).is_some(),
            "partition {p}: {text}"
        );
        assert!(sum(&text, "kafka_log_segments", &labels).unwrap_or(0.0) >= 1.0);
    }
    assert!(v("kafka_log_size_bytes", &metered) > 2_000_000.0);
    assert_eq!(v("kafka_log_end_offset", &metered), 20000.0);
    assert!(v("kafka_server_replicamanager_partitions", &[]) >= 3.0);
    assert_eq!(
        v(
            "kafka_server_replicamanager_under_replicated_partitions",
            &[]
        ),
        0.0
    );
    assert_eq!(v("kafka_controller_active_controller_count", &[]), 1.0);
    assert!(v("kafka_server_group_coordinator_rebalances_total", &[]) >= 1.0);
    assert!(
        v(
            "kafka_network_connection_creation_total",
            &[r#"listener="PLAINTEXT""#]
        ) > 0.0
    );
    assert!(v("process_resident_memory_bytes", &[]) > 0.0, "{text}");
    assert!(v("process_open_fds", &[]) > 0.0);
    let handlers = "kafka_server_kafkarequesthandlerpool_request_handler_threads";
    assert_eq!(v(handlers, &[]), 1.0, "{text}");
    assert!(
        v(
            "kafka_server_kafkarequesthandlerpool_request_handler_busy_seconds_total",
            &[]
        ) > 0.0,
        "{text}"
    );

    // num.io.threads changes without a restart, as in Kafka.
    alter_broker_config(&node, &["--entity-name", "1"], "num.io.threads=2");
    let deadline = Instant::now() + Duration::from_secs(30);
    while sum(&scrape(metrics_port), handlers, &[]) != Some(2.0) {
        assert!(Instant::now() < deadline, "{}", node.log());
        std::thread::sleep(Duration::from_millis(200));
    }

    assert_eq!(get(metrics_port, "/").unwrap().0, 404);
    assert_eq!(get(metrics_port, "/metricsx").unwrap().0, 404);
}

#[test]
fn no_metrics_listener_means_nothing_listens() {
    let node = Ottla::start(&[]);
    assert_listening(&node, &[node.port, node.controller_port]);
}
