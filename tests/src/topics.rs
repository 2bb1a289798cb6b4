//! Topics through the stock Java tools: creating them, producing keyed
//! lines, and views for tests that check leadership and ISRs.

use std::collections::BTreeMap;

use crate::ottla::Ottla;
use crate::tools::{kafka_tool, ok};

/// `kafka-topics.sh --create` through `node`, with `extra` arguments
/// (`--replication-factor`, `--config`, ...); the tool's output.
pub fn create_topic(node: &Ottla, topic: &str, partitions: u32, extra: &[&str]) -> String {
    create_topic_at(&node.bootstrap(), topic, partitions, extra)
}

/// [`create_topic`] through any cluster's `bootstrap` (an Apache Kafka
/// source, several nodes).
pub fn create_topic_at(bootstrap: &str, topic: &str, partitions: u32, extra: &[&str]) -> String {
    let partitions = partitions.to_string();
    let mut layout = vec!["--partitions", &partitions];
    layout.extend_from_slice(extra);
    create_with(bootstrap, topic, &layout)
}

/// `kafka-topics.sh --create` through `node` with a manual
/// `--replica-assignment` (`"1:2,2:1"`: two partitions, led by 1 and 2);
/// the tool's output.
pub fn create_assigned_topic(node: &Ottla, topic: &str, assignment: &str) -> String {
    create_with(
        &node.bootstrap(),
        topic,
        &["--replica-assignment", assignment],
    )
}

fn create_with(bootstrap: &str, topic: &str, layout: &[&str]) -> String {
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--topic",
        topic,
    ];
    args.extend_from_slice(layout);
    ok(kafka_tool("kafka-topics.sh", &args, None))
}

/// `kafka-console-consumer.sh` through `node`: up to `max` records of
/// `topic` from the beginning (30 s at most), with `extra` arguments
/// (`--formatter-property print.key=true`, ...); the tool's output.
pub fn consume_from_beginning(node: &Ottla, topic: &str, max: usize, extra: &[&str]) -> String {
    let bootstrap = node.bootstrap();
    let max = max.to_string();
    let mut args = vec![
        "--bootstrap-server",
        bootstrap.as_str(),
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        max.as_str(),
        "--timeout-ms",
        "30000",
    ];
    args.extend_from_slice(extra);
    ok(kafka_tool("kafka-console-consumer.sh", &args, None))
}

/// `kafka-console-producer.sh` through `node`, one record per line of
/// `lines`, each `key:value`.
pub fn produce_keyed(node: &Ottla, topic: &str, lines: &str) {
    ok(kafka_tool(
        "kafka-console-producer.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--topic",
            topic,
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ],
        Some(lines),
    ));
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionView {
    /// -1 for none.
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// Eligible leader replicas (KIP-966).
    pub elr: Vec<i32>,
    pub last_known_elr: Vec<i32>,
}

fn ids(s: &str) -> Vec<i32> {
    s.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

/// `kafka-topics.sh --describe`, parsed: partition -> leader, replicas,
/// ISR, ELR.
pub fn describe(node: &Ottla, topic: &str) -> BTreeMap<i32, PartitionView> {
    let out = ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--describe",
            "--topic",
            topic,
        ],
        None,
    ));
    out.lines()
        .filter(|l| l.contains("Partition: "))
        .map(|l| {
            let field = |name: &str| {
                l.split('\t')
                    .find_map(|f| f.trim().strip_prefix(name))
                    .unwrap_or_else(|| panic!("no {name} in {l}"))
                    .trim()
                    .to_string()
            };
            let leader = field("Leader:");
            (
                field("Partition:").parse().unwrap(),
                PartitionView {
                    leader: if leader == "none" {
                        -1
                    } else {
                        leader.parse().unwrap()
                    },
                    replicas: ids(&field("Replicas:")),
                    isr: ids(&field("Isr:")),
                    elr: ids(&field("Elr:")),
                    last_known_elr: ids(&field("LastKnownElr:")),
                },
            )
        })
        .collect()
}

/// A topic's id as kafka-topics.sh --describe prints it (base64).
pub fn topic_id(bootstrap: &str, topic: &str) -> String {
    let described = ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--topic",
            topic,
        ],
        None,
    ));
    described
        .split_whitespace()
        .skip_while(|w| *w != "TopicId:")
        .nth(1)
        .unwrap_or_else(|| panic!("no topic id in {described}"))
        .to_string()
}

/// A topic's id, as requests carry it.
pub fn topic_uuid(bootstrap: &str, topic: &str) -> uuid::Uuid {
    let text = topic_id(bootstrap, topic);
    ottla_protocol::names::uuid_from_text(&text)
        .unwrap_or_else(|| panic!("{text} is not a topic id"))
}
