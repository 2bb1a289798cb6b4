//! `log.segment.max.open.files` on a live `ottla`: beyond the budget, the
//! segment files nobody uses are closed, and every record is still read
//! back, written on and kept across kill -9 through reopened files; the
//! budget changes at runtime through `kafka-configs.sh`.

use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use ottla_tests::broker_configs::{alter_broker_config, try_alter_broker_configs};
use ottla_tests::loadgen::{field, report};
use ottla_tests::metrics::{sample, scrape};
use ottla_tests::ottla::{free_port, Ottla};
use ottla_tests::wire::WireClient;

const TOPIC: &str = "budgeted";
const PARTITIONS: i32 = 200;
const BUDGET: usize = 20;
/// One batch of 100 records to every partition.
const RECORDS: u64 = 20_000;

/// Runs `ottla-loadgen MODE` over the topic for `records`, with `extra`
/// arguments; returns its report line.
fn loadgen(node: &Ottla, mode: &str, records: u64, extra: &[&str]) -> String {
    let bootstrap = node.bootstrap();
    let records = records.to_string();
    let common = [
        mode,
        "--bootstrap",
        &bootstrap,
        "--topic",
        TOPIC,
        "--records",
        &records,
    ];
    report(
        env!("CARGO_BIN_EXE_ottla-loadgen"),
        &[&common[..], extra].concat(),
    )
}

fn produce(node: &Ottla) -> String {
    let extra = ["--record-size", "100", "--acks", "all"];
    loadgen(node, "produce", RECORDS, &extra)
}

/// Consumes `records` from offset 0 of every partition.
fn consume(node: &Ottla, records: u64) -> String {
    loadgen(node, "consume", records, &[])
}

fn consumed_records(report: &str) -> u64 {
    field(report, "records")
}

/// The topic's `.log` files the process holds open, from `/proc`.
fn open_topic_segments(node: &Ottla) -> usize {
    let marker = format!("/{TOPIC}-");
    std::fs::read_dir(format!("/proc/{}/fd", node.pid()))
        .expect("the broker's descriptors")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| {
            let t = target.to_string_lossy();
            t.contains(&marker) && t.ends_with(".log")
        })
        .count()
}

fn gauge(metrics_port: u16, name: &str) -> f64 {
    sample(&scrape(metrics_port), name).unwrap_or_else(|| panic!("no {name}"))
}

/// Waits until the topic's open segment files fit `budget`, both as the
/// broker counts them and as `/proc` shows them.
fn wait_within(budget: usize, node: &Ottla, metrics_port: u16) {
    let start = Instant::now();
    loop {
        let counted = gauge(metrics_port, "ottla_log_open_segment_files");
        let held = open_topic_segments(node);
        if counted <= budget as f64 && held <= budget {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{counted} segment files open as counted, {held} held, for a budget of {budget}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn wait_within_budget(node: &Ottla, metrics_port: u16) {
    wait_within(BUDGET, node, metrics_port);
}

/// Waits until the broker's budget gauge reads `budget` (a dynamic change
/// is applied by the next sweep, within 5 s).
fn wait_for_budget(metrics_port: u16, budget: f64) {
    let start = Instant::now();
    while gauge(metrics_port, "ottla_log_max_open_segment_files") != budget {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the budget never became {budget}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The process's soft open-file limit, from `/proc`.
fn soft_open_file_limit(node: &Ottla) -> f64 {
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", node.pid())).unwrap();
    limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .expect("the open-file limit")
}

/// Creates the topic of PARTITIONS partitions.
fn create_topic(node: &Ottla) {
    let mut client = WireClient::connect(&node.bootstrap());
    let answer = client.send(
        7,
        &CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_num_partitions(PARTITIONS)
                .with_replication_factor(1)]),
    );
    assert_eq!(answer.topics[0].error_code, 0, "{:?}", answer.topics[0]);
}

#[test]
fn files_beyond_the_budget_close_when_idle_and_every_record_stays_readable() {
    let metrics_port = free_port();
    let listener = format!("http://127.0.0.1:{metrics_port}");
    let budget = BUDGET.to_string();
    let mut node = Ottla::start(&[
        ("metrics.listener", listener.as_str()),
        ("log.segment.max.open.files", budget.as_str()),
    ]);
    create_topic(&node);
    assert_eq!(
        gauge(metrics_port, "ottla_log_max_open_segment_files"),
        BUDGET as f64
    );

    produce(&node);
    assert_eq!(open_topic_segments(&node), PARTITIONS as usize);
    wait_within_budget(&node, metrics_port);

    // Reading every partition reopens the closed files.
    assert_eq!(consumed_records(&consume(&node, RECORDS)), RECORDS);
    // Writing on appends to reopened files where the records ended.
    produce(&node);
    assert_eq!(consumed_records(&consume(&node, 2 * RECORDS)), 2 * RECORDS);
    wait_within_budget(&node, metrics_port);

    // Closed files lose nothing to kill -9, and a restart opens only what
    // it needs beyond the budget.
    node.kill9();
    node.restart();
    assert_eq!(consumed_records(&consume(&node, 2 * RECORDS)), 2 * RECORDS);
    wait_within_budget(&node, metrics_port);
}

#[test]
fn the_default_budget_is_a_quarter_of_the_open_file_limit() {
    let metrics_port = free_port();
    let listener = format!("http://127.0.0.1:{metrics_port}");
    let node = Ottla::start(&[("metrics.listener", listener.as_str())]);
    assert_eq!(
        gauge(metrics_port, "ottla_log_max_open_segment_files"),
        (soft_open_file_limit(&node) / 4.0).floor()
    );
}

#[test]
fn kafka_configs_changes_the_budget_at_runtime() {
    let metrics_port = free_port();
    let listener = format!("http://127.0.0.1:{metrics_port}");
    let node = Ottla::start(&[("metrics.listener", listener.as_str())]);
    let automatic = (soft_open_file_limit(&node) / 4.0).floor();
    create_topic(&node);
    produce(&node);
    assert_eq!(open_topic_segments(&node), PARTITIONS as usize);

    // Cluster-wide: every idle file beyond it closes.
    let key = "log.segment.max.open.files";
    alter_broker_config(&node, &["--entity-default"], &format!("{key}={BUDGET}"));
    wait_for_budget(metrics_port, BUDGET as f64);
    wait_within_budget(&node, metrics_port);
    // This broker's own value wins over the cluster-wide one.
    alter_broker_config(&node, &["--entity-name", "1"], &format!("{key}=50"));
    wait_for_budget(metrics_port, 50.0);
    // A value below -1 is refused and changes nothing.
    let (done, out) = try_alter_broker_configs(
        &node,
        &["--entity-default", "--add-config", &format!("{key}=-2")],
    );
    assert!(!done, "{out}");
    assert!(out.contains(key), "{out}");
    // Without either, -1 again: a quarter of the open-file limit.
    for entity in [["--entity-name", "1"].as_slice(), &["--entity-default"]] {
        let args = [entity, &["--delete-config", key]].concat();
        let (done, out) = try_alter_broker_configs(&node, &args);
        assert!(done, "{out}");
    }
    wait_for_budget(metrics_port, automatic);
    assert_eq!(consumed_records(&consume(&node, RECORDS)), RECORDS);
}
