//! The log cleaner beside the broker's other work: a compaction pass held
//! to a low `log.cleaner.io.max.bytes.per.second` takes tens of seconds,
//! and the broker goes on creating topics and serving them meanwhile; and
//! `log.cleaner.threads` and `log.cleaner.dedupe.buffer.size` changed at
//! runtime.

use std::time::{Duration, Instant};

use ottla_tests::broker_configs::alter_broker_config;
use ottla_tests::ottla::Ottla;
use ottla_tests::tools::{kafka_tool, ok};
use ottla_tests::topics::{create_topic, produce_keyed};

/// A one-partition topic with `configs` (`key=value`).
fn create(node: &Ottla, topic: &str, configs: &[&str]) {
    let args: Vec<&str> = configs.iter().flat_map(|c| ["--config", c]).collect();
    let out = create_topic(node, topic, 1, &args);
    assert!(out.contains("Created topic"), "{out}");
}

#[test]
fn a_slow_compaction_pass_does_not_hold_up_the_broker() {
    let node = Ottla::start(&[
        ("log.cleaner.io.max.bytes.per.second", "1000"),
        ("log.cleaner.backoff.ms", "100"),
    ]);
    create(
        &node,
        "compacted",
        &["cleanup.policy=compact", "segment.ms=1000"],
    );
    // ~10 KB over 10 keys, then, once the segment is old enough to roll,
    // one more record: the first segment becomes cleanable.
    let value = "v".repeat(120);
    let lines: String = (0..75)
        .map(|i| format!("k{}:{value}{i}\n", i % 10))
        .collect();
    produce_keyed(&node, "compacted", &lines);
    std::thread::sleep(Duration::from_millis(1200));
    produce_keyed(&node, "compacted", "k0:last\n");
    // The cleaner picks the log up within its 100 ms backoff; at 1000 B/s
    // its pass (reading the 10 KB segment twice, writing the rest) takes
    // about 20 s.
    std::thread::sleep(Duration::from_millis(500));

    let started = Instant::now();
    create(&node, "fresh", &[]);
    ok(kafka_tool(
        "kafka-console-producer.sh",
        &["--bootstrap-server", &node.bootstrap(), "--topic", "fresh"],
        Some("one\ntwo\nthree\n"),
    ));
    let consumed = ok(kafka_tool(
        "kafka-console-consumer.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--topic",
            "fresh",
            "--from-beginning",
            "--max-messages",
            "3",
            "--timeout-ms",
            "15000",
        ],
        None,
    ));
    assert_eq!(
        consumed.lines().collect::<Vec<_>>(),
        ["one", "two", "three"],
        "{}",
        node.log()
    );
    let served_in = started.elapsed();
    assert!(
        !node.log().contains("compacted log"),
        "the pass was over before the new topic was served ({served_in:?}), so this proves nothing:\n{}",
        node.log()
    );

    // The pass was running all along, and does finish.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !node.log().contains("compacted log") {
        assert!(
            Instant::now() < deadline,
            "no compaction in 120 s:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// One compacted topic whose first segment is sealed and full of
/// superseded values (the roll happens once `segment.ms` has passed).
fn write_cleanable(node: &Ottla, topic: &str) {
    create(node, topic, &["cleanup.policy=compact", "segment.ms=500"]);
    let lines: String = (0..40).map(|i| format!("k{}:value{i}\n", i % 4)).collect();
    produce_keyed(node, topic, &lines);
    std::thread::sleep(Duration::from_millis(700));
    produce_keyed(node, topic, "k0:last\n");
}

#[test]
fn cleaner_threads_change_at_runtime() {
    let node = Ottla::start(&[
        ("log.cleaner.threads", "0"),
        ("log.cleaner.backoff.ms", "100"),
    ]);
    write_cleanable(&node, "keyed");
    // No cleaner thread: the log stays as written.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!node.log().contains("compacted log"), "{}", node.log());

    alter_broker_config(&node, &["--entity-default"], "log.cleaner.threads=2");
    wait_for_log(&node, "compacted log");
}

/// A dedupe buffer too small for one batch's keys: the log says which key
/// to raise, and raising it for this broker compacts the log.
#[test]
fn a_too_small_dedupe_buffer_is_reported_and_raised_at_runtime() {
    let node = Ottla::start(&[
        // Room for no key at all.
        ("log.cleaner.dedupe.buffer.size", "24"),
        ("log.cleaner.backoff.ms", "100"),
    ]);
    write_cleanable(&node, "keyed");
    wait_for_log(&node, "raise log.cleaner.dedupe.buffer.size");
    assert!(!node.log().contains("compacted log"), "{}", node.log());
    alter_broker_config(
        &node,
        &["--entity-name", "1"],
        "log.cleaner.dedupe.buffer.size=1048576",
    );
    wait_for_log(&node, "compacted log");
}

/// Waits up to 30 s for `line` in the broker's log.
fn wait_for_log(node: &Ottla, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !node.log().contains(line) {
        assert!(
            Instant::now() < deadline,
            "no {line:?} in the log:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
