//! Consumer groups on a live `ottla`, driven by Apache Kafka 4.4's CLI and
//! the Python clients:
//!
//! - console consumers in a group (classic protocol, and KIP-848's consumer
//!   protocol) survive a member killed with SIGKILL: no record is lost, and
//!   only records the dead member had consumed past its last commit are
//!   consumed again;
//! - a group of classic console consumers migrates to the consumer protocol
//!   as consumer-protocol members join, and back as they leave, with no
//!   record lost;
//! - kafka-consumer-groups.sh lists, describes (offsets and lag), resets
//!   (earliest, latest, datetime, shift) and deletes groups and offsets;
//! - idempotent producers (Java and confluent-kafka) write exact counts,
//!   and producer ids keep growing across a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, ConsumerGroupDescribeRequest, DescribeGroupsRequest, GroupId, ListOffsetsRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use ottla_tests::console_consumer::{every_offset_read, ConsoleConsumer, Record};
use ottla_tests::groups::committed;
use ottla_tests::ottla::Ottla;
use ottla_tests::tools::{kafka_tool, ok, python_script};
use ottla_tests::topics::{create_topic, produce_keyed};
use ottla_tests::wire::WireClient;

/// Quick group timings: no initial rebalance delay, 6 s sessions, 1 s
/// heartbeats for consumer-protocol members.
const GROUP_OVERRIDES: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "0"),
    ("offsets.topic.num.partitions", "5"),
    ("group.consumer.session.timeout.ms", "6000"),
    ("group.consumer.min.session.timeout.ms", "1000"),
    ("group.consumer.heartbeat.interval.ms", "1000"),
    ("group.consumer.min.heartbeat.interval.ms", "500"),
];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// Produces `key-i:value-i` for every i in `range`, keyed.
fn produce(node: &Ottla, topic: &str, range: std::ops::Range<usize>) {
    let input: String = range.map(|i| format!("key-{i}:value-{i}\n")).collect();
    produce_keyed(node, topic, &input);
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Log end offsets of partitions 0..`partitions` of `topic`.
fn end_offsets(node: &Ottla, topic: &str, partitions: i32) -> BTreeMap<i32, i64> {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(
                (0..partitions)
                    .map(|p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_timestamp(-1)
                    })
                    .collect(),
            )]);
    let r = WireClient::connect(&node.bootstrap()).send(1, &req);
    r.topics[0]
        .partitions
        .iter()
        .map(|p| {
            assert_eq!(p.error_code, 0);
            (p.partition_index, p.offset)
        })
        .collect()
}

/// A classic group's state and member count (DescribeGroups v5).
fn classic_group(node: &Ottla, group: &str) -> (String, usize) {
    let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
    let r = WireClient::connect(&node.bootstrap()).send(5, &req);
    let g = &r.groups[0];
    (g.group_state.to_string(), g.members.len())
}

/// A consumer-protocol group as ConsumerGroupDescribe v1 shows it.
#[derive(Debug, PartialEq, Eq)]
struct ConsumerGroupView {
    state: String,
    epoch: i32,
    /// (member id, member epoch, partition count, member type: 0 classic,
    /// 1 consumer protocol), by member id.
    members: Vec<(String, i32, usize, i8)>,
}

fn consumer_group(node: &Ottla, group: &str) -> ConsumerGroupView {
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(group))]);
    let r = WireClient::connect(&node.bootstrap()).send(1, &req);
    let g = &r.groups[0];
    let mut members: Vec<(String, i32, usize, i8)> = g
        .members
        .iter()
        .map(|m| {
            let count = m
                .assignment
                .topic_partitions
                .iter()
                .map(|t| t.partitions.len())
                .sum();
            (
                m.member_id.to_string(),
                m.member_epoch,
                count,
                m.member_type,
            )
        })
        .collect();
    members.sort();
    ConsumerGroupView {
        state: g.group_state.to_string(),
        epoch: g.group_epoch,
        members,
    }
}

/// Console consumers in one group share a 6-partition topic; the last one
/// is killed with SIGKILL between two halves of the records. Checks that
/// the others consume every record, and that a record is consumed twice
/// only if the dead member had it and its commit did not cover it.
/// `formed` runs once the group is stable, before any record exists.
fn survive_a_killed_member(
    node: &mut Ottla,
    group: &str,
    members: usize,
    props: &[&str],
    group_stable: impl Fn(&Ottla) -> bool,
    formed: impl FnOnce(&mut Ottla),
) {
    const N: usize = 3000;
    let topic = format!("{group}-orders");
    create_topic(node, &topic, 6, &[]);
    let mut consumers: Vec<ConsoleConsumer> = (0..members)
        .map(|i| ConsoleConsumer::start(node, &format!("{group}-{i}"), &topic, group, props))
        .collect();
    wait_for("the group to form", Duration::from_secs(90), || {
        group_stable(node).then_some(())
    });
    formed(node);
    let distinct = |consumers: &[ConsoleConsumer]| -> usize {
        let all: BTreeSet<(i32, i64)> = consumers
            .iter()
            .flat_map(|c| c.records())
            .map(|(p, o, _)| (p, o))
            .collect();
        all.len()
    };

    produce(node, &topic, 0..N / 2);
    wait_for(
        "the first half to be consumed",
        Duration::from_secs(60),
        || (distinct(&consumers) >= N / 2).then_some(()),
    );
    let victim = consumers.last_mut().unwrap();
    let victim_partitions: BTreeSet<i32> = victim.records().iter().map(|r| r.0).collect();
    assert!(!victim_partitions.is_empty(), "the victim consumed nothing");
    victim.kill9();
    // What the dead member committed last: the others resume from there.
    let at_kill = committed(node, group, &topic);

    produce(node, &topic, N / 2..N);
    wait_for(
        "every record to be consumed",
        Duration::from_secs(120),
        || (distinct(&consumers) >= N).then_some(()),
    );
    let mut records: Vec<Record> = Vec::new();
    for c in &mut consumers {
        c.stop();
        records.extend(c.records());
    }

    // Nothing lost: every offset of every partition, every value.
    let ends = end_offsets(node, &topic, 6);
    assert_eq!(ends.values().sum::<i64>(), N as i64);
    let seen = every_offset_read(&ends, &records);
    let values: BTreeSet<&str> = seen.values().map(|(v, _)| v.as_str()).collect();
    assert_eq!(values.len(), N);
    // Duplicates only past the dead member's last commit.
    let mut duplicates = 0;
    for (&(p, o), (_, n)) in &seen {
        if *n > 1 {
            duplicates += n - 1;
            assert!(
                victim_partitions.contains(&p),
                "partition {p} offset {o} consumed {n} times but the dead member never had it"
            );
            let from = at_kill.get(&p).copied().unwrap_or(0);
            assert!(
                o >= from,
                "partition {p} offset {o} consumed {n} times though {from} was committed"
            );
        }
    }
    eprintln!(
        "{group}: {} records, {duplicates} re-consumed after the kill",
        records.len()
    );
    // The survivors committed everything when they stopped.
    assert_eq!(committed(node, group, &topic), ends);
}

#[test]
fn classic_console_consumers_survive_a_killed_member() {
    let mut node = Ottla::start(GROUP_OVERRIDES);
    survive_a_killed_member(
        &mut node,
        "classic",
        3,
        &[
            "enable.auto.commit=true",
            "auto.commit.interval.ms=1000",
            "session.timeout.ms=6000",
            "heartbeat.interval.ms=1000",
        ],
        |node| classic_group(node, "classic") == ("Stable".to_string(), 3),
        |_| {},
    );
    assert_eq!(classic_group(&node, "classic").0, "Empty");
}

#[test]
fn consumer_protocol_console_consumers_survive_a_killed_member_and_a_restart() {
    let mut node = Ottla::start(GROUP_OVERRIDES);
    let stable = |node: &Ottla| {
        let g = consumer_group(node, "kip848");
        g.state == "Stable" && g.members.iter().map(|m| m.2).collect::<Vec<_>>() == [3, 3]
    };
    survive_a_killed_member(
        &mut node,
        "kip848",
        2,
        &[
            "group.protocol=consumer",
            "enable.auto.commit=true",
            "auto.commit.interval.ms=1000",
        ],
        stable,
        |node| {
            // The group comes back from __consumer_offsets as it was: the
            // members carry on with their epochs, nothing rebalances.
            let before = consumer_group(node, "kip848");
            assert_eq!(node.stop(), Some(0));
            node.restart();
            std::thread::sleep(Duration::from_secs(3));
            assert_eq!(consumer_group(node, "kip848"), before);
        },
    );
    // The dead member was fenced when its session expired, the others left.
    assert_eq!(consumer_group(&node, "kip848").state, "Empty");
    // Kafka's own decoder reads the group's records.
    let mut segments = Vec::new();
    for dir in std::fs::read_dir(node.data_dir.join("logs")).unwrap() {
        let dir = dir.unwrap().path();
        if dir.to_string_lossy().contains("__consumer_offsets-") {
            for f in std::fs::read_dir(&dir).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "log") {
                    segments.push(f.to_string_lossy().into_owned());
                }
            }
        }
    }
    let dump = ok(kafka_tool(
        "kafka-dump-log.sh",
        &["--offsets-decoder", "--files", &segments.join(",")],
        None,
    ));
    for record_type in [3, 5, 6, 7, 8] {
        let key = format!("\"type\":\"{record_type}\",\"data\":{{\"groupId\":\"kip848\"");
        assert!(dump.contains(&key), "no type {record_type} record:\n{dump}");
    }
    // Fenced and departed members left tombstones.
    assert!(
        dump.lines()
            .any(|l| l.contains("\"type\":\"5\"") && l.contains("<DELETE>")),
        "{dump}"
    );
    let lower = dump.to_lowercase();
    assert!(
        !lower.contains("exception") && !lower.contains("error"),
        "{dump}"
    );
}

/// KIP-848's online migration with the stock Java consumer: a classic
/// group of two console consumers is upgraded when two consumers with
/// `group.protocol=consumer` join it, the four share the topic (the
/// classic ones as classic members of a consumer group), and when the two
/// new ones stop, the group is downgraded and the classic ones carry on.
/// No record is lost across either conversion.
#[test]
fn a_group_migrates_to_the_consumer_protocol_and_back_under_load() {
    const N: usize = 3000;
    let node = Ottla::start(GROUP_OVERRIDES);
    let (group, topic) = ("migrating", "migrating-orders");
    create_topic(&node, topic, 6, &[]);
    let classic_props = [
        "enable.auto.commit=true",
        "auto.commit.interval.ms=500",
        "session.timeout.ms=6000",
        "heartbeat.interval.ms=500",
    ];
    let mut consumers: Vec<ConsoleConsumer> = (0..2)
        .map(|i| {
            ConsoleConsumer::start(&node, &format!("classic-{i}"), topic, group, &classic_props)
        })
        .collect();
    let stable_classic = |node: &Ottla| classic_group(node, group) == ("Stable".to_string(), 2);
    wait_for("the classic group", Duration::from_secs(60), || {
        stable_classic(&node).then_some(())
    });
    let consumed = |consumers: &[ConsoleConsumer]| -> usize {
        let all: BTreeSet<(i32, i64)> = consumers
            .iter()
            .flat_map(|c| c.records())
            .map(|(p, o, _)| (p, o))
            .collect();
        all.len()
    };
    produce(&node, topic, 0..N / 3);
    wait_for("the first third", Duration::from_secs(60), || {
        (consumed(&consumers) >= N / 3).then_some(())
    });

    // Upgrade: two consumer-protocol members join the classic group.
    for i in 0..2 {
        consumers.push(ConsoleConsumer::start(
            &node,
            &format!("modern-{i}"),
            topic,
            group,
            &["group.protocol=consumer", "auto.commit.interval.ms=500"],
        ));
    }
    let mixed = wait_for("the mixed group to settle", Duration::from_secs(90), || {
        let g = consumer_group(&node, group);
        let types: Vec<i8> = g.members.iter().map(|m| m.3).collect();
        let mut sorted = types.clone();
        sorted.sort();
        (g.state == "Stable" && sorted == [0, 0, 1, 1] && g.members.iter().all(|m| m.2 > 0))
            .then_some(g)
    });
    assert_eq!(mixed.members.iter().map(|m| m.2).sum::<usize>(), 6);
    // Classic members of a consumer group are invisible to DescribeGroups.
    assert_eq!(classic_group(&node, group).0, "Dead");
    produce(&node, topic, N / 3..2 * N / 3);
    wait_for("the second third", Duration::from_secs(60), || {
        (consumed(&consumers) >= 2 * N / 3).then_some(())
    });

    // Downgrade: the consumer-protocol members leave.
    for c in &mut consumers[2..] {
        c.stop();
    }
    wait_for("the classic group again", Duration::from_secs(90), || {
        stable_classic(&node).then_some(())
    });
    assert_eq!(
        consumer_group(&node, group).members,
        Vec::new(),
        "no consumer group remains"
    );
    produce(&node, topic, 2 * N / 3..N);
    wait_for("every record", Duration::from_secs(60), || {
        (consumed(&consumers) >= N).then_some(())
    });
    for c in &mut consumers[..2] {
        c.stop();
    }
    let records: Vec<Record> = consumers.iter().flat_map(|c| c.records()).collect();
    let seen = every_offset_read(&end_offsets(&node, topic, 6), &records);
    assert_eq!(seen.len(), N);
    let again = seen.values().filter(|(_, n)| *n > 1).count();
    eprintln!("{group}: {N} records, {again} consumed more than once");
    assert_eq!(committed(&node, group, topic), end_offsets(&node, topic, 6));
}

/// `group.version` turns the consumer protocol off and on, through the
/// stock kafka-features.sh; a Java consumer with `group.protocol=consumer`
/// is told to fall back to the classic protocol while it is off.
#[test]
fn group_version_switches_the_consumer_protocol() {
    let node = Ottla::start(GROUP_OVERRIDES);
    let bootstrap = node.bootstrap();
    let features = |args: &[&str]| {
        let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
        all.extend_from_slice(args);
        ok(kafka_tool("kafka-features.sh", &all, None))
    };
    let level = |described: &str| -> String {
        let line = described
            .lines()
            .find(|l| l.starts_with("Feature: group.version"))
            .unwrap_or_else(|| panic!("{described}"));
        assert!(line.contains("SupportedMinVersion: 0"), "{line}");
        assert!(line.contains("SupportedMaxVersion: 1"), "{line}");
        let level = line.split("FinalizedVersionLevel:").nth(1).unwrap();
        level.split_whitespace().next().unwrap().to_string()
    };
    assert_eq!(level(&features(&["describe"])), "1");
    create_topic(&node, "gv", 1, &[]);
    produce(&node, "gv", 0..1);
    let consume = |group: &str| {
        kafka_tool(
            "kafka-console-consumer.sh",
            &[
                "--bootstrap-server",
                &bootstrap,
                "--topic",
                "gv",
                "--group",
                group,
                "--from-beginning",
                "--max-messages",
                "1",
                "--timeout-ms",
                "20000",
                "--consumer-property",
                "group.protocol=consumer",
            ],
            None,
        )
    };

    let out = features(&["downgrade", "--feature", "group.version=0"]);
    assert!(out.contains("group.version was downgraded to 0"), "{out}");
    assert_eq!(level(&features(&["describe"])), "0");
    let refused = consume("gv-off");
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(
        text.contains("does not support the new CONSUMER group protocol"),
        "{text}"
    );
    assert!(!String::from_utf8_lossy(&refused.stdout).contains("value-0"));

    let out = features(&["upgrade", "--feature", "group.version=1"]);
    assert!(out.contains("group.version was upgraded to 1"), "{out}");
    let consumed = ok(consume("gv-on"));
    assert!(consumed.contains("value-0"), "{consumed}");
    assert_eq!(consumer_group(&node, "gv-on").state, "Empty");
}

fn groups_tool(node: &Ottla, args: &[&str]) -> String {
    let bootstrap = node.bootstrap();
    let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
    all.extend_from_slice(args);
    ok(kafka_tool("kafka-consumer-groups.sh", &all, None))
}

/// `--describe` rows of `topic`: partition -> (current offset, log end
/// offset, lag); "-" (no commit) reads as -1.
fn describe_offsets(node: &Ottla, group: &str, topic: &str) -> BTreeMap<i32, (i64, i64, i64)> {
    let out = groups_tool(node, &["--describe", "--group", group]);
    let number = |s: &str| s.parse::<i64>().unwrap_or(-1);
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() >= 6 && f[0] == group && f[1] == topic)
        .map(|f| {
            (
                f[2].parse().unwrap(),
                (number(f[3]), number(f[4]), number(f[5])),
            )
        })
        .collect()
}

/// Produces `count` records to each partition of `topic` with the Python
/// client, at timestamp `timestamp_ms`.
fn produce_per_partition(node: &Ottla, topic: &str, counts: &[usize], timestamp_ms: i64) {
    let code = r#"
import sys
from confluent_kafka import Producer
bootstrap, topic, ts = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap})
for partition, count in enumerate(int(c) for c in sys.argv[4:]):
    for i in range(count):
        p.produce(topic, value=f"v{i}", partition=partition, timestamp=ts)
assert p.flush(30) == 0
"#;
    let mut args = vec![
        node.bootstrap(),
        topic.to_string(),
        timestamp_ms.to_string(),
    ];
    args.extend(counts.iter().map(|c| c.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(python_script(code, &args));
}

#[test]
fn kafka_consumer_groups_lists_describes_resets_and_deletes() {
    let node = Ottla::start(GROUP_OVERRIDES);
    create_topic(&node, "lag", 3, &[]);
    create_topic(&node, "side", 1, &[]);
    // 2020 timestamps, then 2023 ones below: --to-datetime falls between.
    produce_per_partition(&node, "lag", &[10, 20, 30], 1_600_000_000_000);
    produce_per_partition(&node, "side", &[4], 1_600_000_000_000);
    let consume = |group: &str, topic: &str, n: usize, extra: &[&str]| {
        let mut args = vec![
            "--bootstrap-server".to_string(),
            node.bootstrap(),
            "--topic".into(),
            topic.into(),
            "--group".into(),
            group.into(),
            "--from-beginning".into(),
            "--max-messages".into(),
            n.to_string(),
            "--timeout-ms".into(),
            "30000".into(),
        ];
        for p in extra {
            args.extend(["--consumer-property".to_string(), p.to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ok(kafka_tool("kafka-console-consumer.sh", &args, None));
        // Values are "v<i>"; other lines are the tool's notices.
        let values = out.lines().filter(|l| l.starts_with('v')).count();
        assert_eq!(values, n, "{out}");
    };
    // A classic group and a consumer-protocol one.
    consume("classic-cg", "lag", 60, &[]);
    consume("classic-cg", "side", 4, &[]);
    consume("kip848-cg", "lag", 60, &["group.protocol=consumer"]);

    let listed = groups_tool(&node, &["--list"]);
    let listed: BTreeSet<&str> = listed.lines().map(str::trim).collect();
    assert!(
        listed.contains("classic-cg") && listed.contains("kip848-cg"),
        "{listed:?}"
    );
    let types = groups_tool(&node, &["--list", "--type"]);
    assert!(
        types
            .lines()
            .any(|l| l.contains("kip848-cg") && l.to_lowercase().contains("consumer")),
        "{types}"
    );

    produce_per_partition(&node, "lag", &[5, 5, 5], 1_700_000_000_000);
    for group in ["classic-cg", "kip848-cg"] {
        assert_eq!(
            describe_offsets(&node, group, "lag"),
            BTreeMap::from([(0, (10, 15, 5)), (1, (20, 25, 5)), (2, (30, 35, 5))]),
            "{group}"
        );
    }

    // A live member: --describe names it, with its partitions and lag.
    let mut live = ConsoleConsumer::start(
        &node,
        "live",
        "lag",
        "live-cg",
        &["group.protocol=consumer", "auto.commit.interval.ms=500"],
    );
    let member = wait_for("the live member", Duration::from_secs(60), || {
        let g = consumer_group(&node, "live-cg");
        (g.state == "Stable" && g.members.len() == 1 && g.members[0].2 == 3)
            .then(|| g.members[0].0.clone())
    });
    let members = groups_tool(&node, &["--describe", "--group", "live-cg", "--members"]);
    assert!(
        members.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 5 && f[0] == "live-cg" && f[1] == member && f[4] == "3"
        }),
        "{members}"
    );
    wait_for("the live member's commits", Duration::from_secs(60), || {
        let rows = describe_offsets(&node, "live-cg", "lag");
        (rows.values().map(|r| (r.0, r.2)).collect::<Vec<_>>() == [(15, 0), (25, 0), (35, 0)])
            .then_some(())
    });
    let described = groups_tool(&node, &["--describe", "--group", "live-cg"]);
    assert_eq!(described.matches(member.as_str()).count(), 3, "{described}");
    live.stop();

    let reset = |how: &[&str]| {
        let mut args = vec![
            "--reset-offsets",
            "--group",
            "kip848-cg",
            "--topic",
            "lag",
            "--execute",
        ];
        args.extend_from_slice(how);
        groups_tool(&node, &args)
    };
    let lags = |group: &str| -> Vec<(i64, i64)> {
        describe_offsets(&node, group, "lag")
            .values()
            .map(|&(current, _, lag)| (current, lag))
            .collect()
    };
    reset(&["--to-earliest"]);
    assert_eq!(lags("kip848-cg"), [(0, 15), (0, 25), (0, 35)]);
    reset(&["--to-latest"]);
    assert_eq!(lags("kip848-cg"), [(15, 0), (25, 0), (35, 0)]);
    reset(&["--shift-by", "-3"]);
    assert_eq!(lags("kip848-cg"), [(12, 3), (22, 3), (32, 3)]);
    reset(&["--to-datetime", "2022-01-01T00:00:00.000"]);
    assert_eq!(lags("kip848-cg"), [(10, 5), (20, 5), (30, 5)]);
    // Without --execute nothing changes.
    groups_tool(
        &node,
        &[
            "--reset-offsets",
            "--group",
            "kip848-cg",
            "--topic",
            "lag",
            "--to-earliest",
            "--dry-run",
        ],
    );
    assert_eq!(lags("kip848-cg"), [(10, 5), (20, 5), (30, 5)]);

    // --delete-offsets drops one topic's offsets, --delete the group.
    groups_tool(
        &node,
        &[
            "--delete-offsets",
            "--group",
            "classic-cg",
            "--topic",
            "side",
        ],
    );
    assert!(describe_offsets(&node, "classic-cg", "side").is_empty());
    assert_eq!(describe_offsets(&node, "classic-cg", "lag").len(), 3);
    for group in ["classic-cg", "kip848-cg", "live-cg"] {
        let out = groups_tool(&node, &["--delete", "--group", group]);
        assert!(out.contains("successful"), "{out}");
    }
    let listed = groups_tool(&node, &["--list"]);
    assert!(
        !listed.contains("classic-cg") && !listed.contains("kip848-cg"),
        "{listed}"
    );
}

/// Record count of a topic (sum of log end offsets).
fn count(node: &Ottla, topic: &str, partitions: i32) -> i64 {
    end_offsets(node, topic, partitions).values().sum()
}

#[test]
fn idempotent_java_and_python_producers_write_exact_counts() {
    let node = Ottla::start(GROUP_OVERRIDES);
    create_topic(&node, "perf", 3, &[]);
    let out = ok(kafka_tool(
        "kafka-producer-perf-test.sh",
        &[
            "--topic",
            "perf",
            "--num-records",
            "30000",
            "--record-size",
            "200",
            "--throughput",
            "-1",
            "--producer-props",
            &format!("bootstrap.servers={}", node.bootstrap()),
            "enable.idempotence=true",
            "acks=all",
            "max.in.flight.requests.per.connection=5",
            "linger.ms=5",
        ],
        None,
    ));
    assert!(out.contains("30000 records sent"), "{out}");
    assert_eq!(count(&node, "perf", 3), 30_000);

    create_topic(&node, "lines", 2, &[]);
    produce(&node, "lines", 0..5000);
    assert_eq!(count(&node, "lines", 2), 5000);

    create_topic(&node, "py", 4, &[]);
    let code = r#"
import sys
from confluent_kafka import Consumer, Producer, TopicPartition
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
for i in range(n):
    p.produce(topic, key=str(i), value=f"value-{i}")
    p.poll(0)
assert p.flush(30) == 0
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-check", "enable.auto.commit": False})
c.assign([TopicPartition(topic, i, 0) for i in range(4)])
values = []
while len(values) < n:
    batch = c.consume(1000, timeout=10)
    if not batch:
        break
    values.extend(m.value().decode() for m in batch if m.error() is None)
c.close()
print(len(values), len(set(values)))
"#;
    let out = ok(python_script(code, &[&node.bootstrap(), "py", "20000"]));
    assert_eq!(out.trim(), "20000 20000");
    assert_eq!(count(&node, "py", 4), 20_000);
}

/// The producer ids kafka-transactions.sh reports for a partition.
fn producer_ids(node: &Ottla, topic: &str) -> BTreeSet<i64> {
    let out = ok(kafka_tool(
        "kafka-transactions.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "describe-producers",
            "--topic",
            topic,
            "--partition",
            "0",
        ],
        None,
    ));
    out.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn producer_ids_survive_a_restart() {
    let mut node = Ottla::start(GROUP_OVERRIDES);
    create_topic(&node, "ids", 1, &[]);
    produce(&node, "ids", 0..100);
    let first = producer_ids(&node, "ids");
    assert_eq!(node.stop(), Some(0));
    node.restart();
    produce(&node, "ids", 100..200);
    assert_eq!(count(&node, "ids", 1), 200);
    let after = producer_ids(&node, "ids");
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(after.len(), 2, "{after:?}");
    let (old, new) = (first.first().unwrap(), after.last().unwrap());
    assert!(after.contains(old));
    assert!(
        new > old,
        "the id allocated after the restart ({new}) is not new"
    );
}

/// Producer state is kept for `producer.id.expiration.ms` after a
/// producer's last batch; lowering it at runtime lets the next check
/// forget idle producers.
#[test]
fn idle_producer_ids_expire_once_their_expiration_is_lowered() {
    let mut overrides = GROUP_OVERRIDES.to_vec();
    overrides.push(("producer.id.expiration.check.interval.ms", "500"));
    let node = Ottla::start(&overrides);
    create_topic(&node, "idle", 1, &[]);
    produce(&node, "idle", 0..10);
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(
        producer_ids(&node, "idle").len(),
        1,
        "kept for a day by default"
    );
    ok(kafka_tool(
        "kafka-configs.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--alter",
            "--entity-type",
            "brokers",
            "--entity-default",
            "--add-config",
            "producer.id.expiration.ms=1000",
        ],
        None,
    ));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !producer_ids(&node, "idle").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle producer was not expired:\n{}",
            node.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert!(node.log().contains("expired idle producer ids"));
    // A new producer is not taken for a duplicate of the forgotten one.
    produce(&node, "idle", 10..20);
    assert_eq!(count(&node, "idle", 1), 20);
}
