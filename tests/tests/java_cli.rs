//! Apache Kafka's own CLI tools (4.x, from Maven Central) against a live
//! `ottla` process.

use ottla_tests::ottla::Ottla;
use ottla_tests::tools::{kafka_tool, ok};

fn topics(node: &Ottla, args: &[&str]) -> String {
    let bs = node.bootstrap();
    let mut all = vec!["--bootstrap-server", bs.as_str()];
    all.extend_from_slice(args);
    ok(kafka_tool("kafka-topics.sh", &all, None))
}

#[test]
fn api_versions_tool_lists_produce_from_v0() {
    let node = Ottla::start(&[]);
    let out = ok(kafka_tool(
        "kafka-broker-api-versions.sh",
        &["--bootstrap-server", &node.bootstrap()],
        None,
    ));
    assert!(out.contains("Produce(0): 0 to"), "{out}");
    assert!(out.contains("Fetch(1): 4 to"), "{out}");
    assert!(out.contains("Metadata(3):"), "{out}");
}

#[test]
fn kafka_topics_create_list_describe_alter_delete() {
    let node = Ottla::start(&[]);
    let created = topics(
        &node,
        &[
            "--create",
            "--topic",
            "orders",
            "--partitions",
            "3",
            "--replication-factor",
            "1",
        ],
    );
    assert!(created.contains("Created topic orders"), "{created}");
    let dup = kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--create",
            "--topic",
            "orders",
        ],
        None,
    );
    assert!(!dup.status.success());
    assert!(
        String::from_utf8_lossy(&dup.stderr).contains("already exists")
            || String::from_utf8_lossy(&dup.stdout).contains("already exists")
    );
    assert!(topics(&node, &["--list"]).lines().any(|l| l == "orders"));
    let described = topics(&node, &["--describe", "--topic", "orders"]);
    assert!(described.contains("PartitionCount: 3"), "{described}");
    assert!(described.contains("Leader: 1"), "{described}");
    topics(
        &node,
        &["--alter", "--topic", "orders", "--partitions", "5"],
    );
    let described = topics(&node, &["--describe", "--topic", "orders"]);
    assert!(described.contains("PartitionCount: 5"), "{described}");
    topics(&node, &["--delete", "--topic", "orders"]);
    assert!(!topics(&node, &["--list"]).lines().any(|l| l == "orders"));
    let bad = kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--create",
            "--topic",
            "bad name!",
        ],
        None,
    );
    assert!(!bad.status.success());
}

#[test]
fn kafka_configs_describe_alter_delete_topic_config() {
    let node = Ottla::start(&[]);
    topics(&node, &["--create", "--topic", "cfg", "--partitions", "1"]);
    let bs = node.bootstrap();
    let base = [
        "--bootstrap-server",
        bs.as_str(),
        "--entity-type",
        "topics",
        "--entity-name",
        "cfg",
    ];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        ok(kafka_tool("kafka-configs.sh", &args, None))
    };
    run(&[
        "--alter",
        "--add-config",
        "retention.ms=12345,cleanup.policy=compact",
    ]);
    let described = run(&["--describe"]);
    assert!(described.contains("retention.ms=12345"), "{described}");
    assert!(described.contains("cleanup.policy=compact"), "{described}");
    let all = run(&["--describe", "--all"]);
    assert!(all.contains("segment.bytes=1073741824"), "{all}");
    run(&["--alter", "--delete-config", "retention.ms"]);
    assert!(!run(&["--describe"]).contains("retention.ms=12345"));
    let mut bad = base.to_vec();
    bad.extend_from_slice(&["--alter", "--add-config", "retention.ms=soon"]);
    assert!(!kafka_tool("kafka-configs.sh", &bad, None).status.success());
}

#[test]
fn console_producer_and_consumer_round_trip_keys_and_headers() {
    let node = Ottla::start(&[]);
    topics(
        &node,
        &["--create", "--topic", "lines", "--partitions", "1"],
    );
    let input: String = (0..50)
        .map(|i| format!("h1:a{i},h1:b{i}\tkey{i}:value-{i}\n"))
        .collect();
    ok(kafka_tool(
        "kafka-console-producer.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--topic",
            "lines",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
            "--property",
            "parse.headers=true",
        ],
        Some(&input),
    ));
    let out = ok(kafka_tool(
        "kafka-console-consumer.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--topic",
            "lines",
            "--partition",
            "0",
            "--offset",
            "earliest",
            "--max-messages",
            "50",
            "--property",
            "print.key=true",
            "--property",
            "print.headers=true",
            "--timeout-ms",
            "20000",
        ],
        None,
    ));
    let lines: Vec<&str> = out.lines().filter(|l| l.contains("value-")).collect();
    assert_eq!(lines.len(), 50, "{out}");
    // Duplicate header keys survive, in order.
    assert!(lines[7].contains("h1:a7,h1:b7"), "{}", lines[7]);
    assert!(lines[7].contains("key7"), "{}", lines[7]);
    assert!(lines[7].ends_with("value-7"), "{}", lines[7]);
    let offsets = ok(kafka_tool(
        "kafka-get-offsets.sh",
        &["--bootstrap-server", &node.bootstrap(), "--topic", "lines"],
        None,
    ));
    assert!(offsets.contains("lines:0:50"), "{offsets}");
}

#[test]
fn delete_records_log_dirs_and_perf_producer() {
    let node = Ottla::start(&[]);
    topics(&node, &["--create", "--topic", "perf", "--partitions", "2"]);
    let out = ok(kafka_tool(
        "kafka-producer-perf-test.sh",
        &[
            "--topic",
            "perf",
            "--num-records",
            "20000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            &format!("bootstrap.servers={}", node.bootstrap()),
        ],
        None,
    ));
    assert!(out.contains("20000 records sent"), "{out}");
    let offsets = ok(kafka_tool(
        "kafka-get-offsets.sh",
        &["--bootstrap-server", &node.bootstrap(), "--topic", "perf"],
        None,
    ));
    let total: i64 = offsets
        .lines()
        .filter_map(|l| l.rsplit(':').next()?.trim().parse::<i64>().ok())
        .sum();
    assert_eq!(total, 20000, "{offsets}");
    let json = node.data_dir.join("delete.json");
    std::fs::write(
        &json,
        r#"{"partitions":[{"topic":"perf","partition":0,"offset":10}],"version":1}"#,
    )
    .unwrap();
    let deleted = ok(kafka_tool(
        "kafka-delete-records.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--offset-json-file",
            json.to_str().unwrap(),
        ],
        None,
    ));
    assert!(deleted.contains("low_watermark: 10"), "{deleted}");
    let earliest = ok(kafka_tool(
        "kafka-get-offsets.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--topic",
            "perf",
            "--time",
            "-2",
        ],
        None,
    ));
    assert!(earliest.contains("perf:0:10"), "{earliest}");
    let dirs = ok(kafka_tool(
        "kafka-log-dirs.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--describe",
            "--topic-list",
            "perf",
        ],
        None,
    ));
    assert!(dirs.contains("\"partition\":\"perf-0\""), "{dirs}");
}

#[test]
fn consumer_perf_test_reads_everything_through_a_group() {
    let node = Ottla::start(&[("group.initial.rebalance.delay.ms", "0")]);
    topics(
        &node,
        &["--create", "--topic", "cperf", "--partitions", "3"],
    );
    ok(kafka_tool(
        "kafka-producer-perf-test.sh",
        &[
            "--topic",
            "cperf",
            "--num-records",
            "30000",
            "--record-size",
            "200",
            "--throughput",
            "-1",
            "--bootstrap-server",
            &node.bootstrap(),
        ],
        None,
    ));
    let out = ok(kafka_tool(
        "kafka-consumer-perf-test.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--topic",
            "cperf",
            "--num-records",
            "30000",
            "--timeout",
            "60000",
            "--hide-header",
        ],
        None,
    ));
    // start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, ...
    let fields: Vec<&str> = out
        .trim()
        .lines()
        .last()
        .unwrap()
        .split(',')
        .map(str::trim)
        .collect();
    assert_eq!(fields[4], "30000", "{out}");
}

/// `kafka-configs.sh --entity-type groups` (KIP-848's per-group configs):
/// set, describe (one group, every group, `--all` with the broker's
/// defaults), refuse a value outside the broker's bounds, delete.
#[test]
fn kafka_configs_alter_describe_and_delete_group_configs() {
    let node = Ottla::start(&[]);
    let bs = node.bootstrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["--bootstrap-server", bs.as_str(), "--entity-type", "groups"];
        args.extend_from_slice(extra);
        kafka_tool("kafka-configs.sh", &args, None)
    };
    ok(run(&[
        "--entity-name",
        "billing",
        "--alter",
        "--add-config",
        "consumer.session.timeout.ms=50000,share.auto.offset.reset=earliest",
    ]));
    let described = ok(run(&["--entity-name", "billing", "--describe"]));
    assert!(
        described.contains("consumer.session.timeout.ms=50000 sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000, DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}"),
        "{described}"
    );
    assert!(
        described.contains("share.auto.offset.reset=earliest"),
        "{described}"
    );
    // Every group with configs, found through ListConfigResources.
    let every = ok(run(&["--describe"]));
    assert!(
        every.contains("Dynamic configs for group billing are:"),
        "{every}"
    );
    let all = ok(run(&["--entity-name", "other", "--describe", "--all"]));
    assert!(all.contains("consumer.heartbeat.interval.ms=5000"), "{all}");
    assert!(all.contains("streams.assignor.name=sticky"), "{all}");
    let refused = run(&[
        "--entity-name",
        "billing",
        "--alter",
        "--add-config",
        "consumer.session.timeout.ms=1000",
    ]);
    assert!(!refused.status.success());
    let text = String::from_utf8_lossy(&refused.stdout).to_string()
        + &String::from_utf8_lossy(&refused.stderr);
    assert!(
        text.contains("consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
        "{text}"
    );
    ok(run(&[
        "--entity-name",
        "billing",
        "--alter",
        "--delete-config",
        "consumer.session.timeout.ms",
    ]));
    let after = ok(run(&["--entity-name", "billing", "--describe"]));
    assert!(!after.contains("consumer.session.timeout.ms"), "{after}");
    assert!(
        after.contains("share.auto.offset.reset=earliest"),
        "{after}"
    );
}

#[test]
fn kafka_configs_alter_and_delete_broker_configs() {
    let node = Ottla::start(&[]);
    let bs = node.bootstrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--bootstrap-server",
            bs.as_str(),
            "--entity-type",
            "brokers",
        ];
        args.extend_from_slice(extra);
        kafka_tool("kafka-configs.sh", &args, None)
    };
    let all = ok(run(&["--entity-name", "1", "--describe", "--all"]));
    assert!(all.contains("log.retention.hours=168"), "{all}");
    assert!(all.contains("num.partitions=1"), "{all}");
    ok(run(&[
        "--entity-default",
        "--alter",
        "--add-config",
        "log.retention.ms=3600000",
    ]));
    let defaults = ok(run(&["--entity-default", "--describe"]));
    assert!(defaults.contains("log.retention.ms=3600000"), "{defaults}");
    // New topics inherit the cluster-wide default.
    topics(
        &node,
        &["--create", "--topic", "inherits", "--partitions", "1"],
    );
    let topic = ok(kafka_tool(
        "kafka-configs.sh",
        &[
            "--bootstrap-server",
            &bs,
            "--entity-type",
            "topics",
            "--entity-name",
            "inherits",
            "--describe",
            "--all",
        ],
        None,
    ));
    assert!(topic.contains("retention.ms=3600000"), "{topic}");
    ok(run(&[
        "--entity-default",
        "--alter",
        "--delete-config",
        "log.retention.ms",
    ]));
    assert!(!ok(run(&["--entity-default", "--describe"])).contains("log.retention.ms=3600000"));
    // Static-only keys cannot change at runtime.
    let refused = run(&[
        "--entity-name",
        "1",
        "--alter",
        "--add-config",
        "num.partitions=4",
    ]);
    assert!(!refused.status.success());
}
