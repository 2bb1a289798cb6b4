//! Three `ottla` processes forming one cluster: replicated topics, acks=all,
//! a leader killed with SIGKILL, a controlled shutdown, and a replica that
//! comes back and catches up, driven with the stock Java tools.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ottla_tests::ottla::Ottla;
use ottla_tests::tools::{kafka_tool, ok};

/// Short timeouts so failures are detected within seconds.
const CLUSTER_SETTINGS: &[(&str, &str)] = &[
    ("broker.heartbeat.interval.ms", "300"),
    ("broker.session.timeout.ms", "2500"),
    ("replica.lag.time.max.ms", "4000"),
    ("replica.fetch.backoff.ms", "200"),
    ("offsets.topic.replication.factor", "3"),
];

#[derive(Debug, Clone, PartialEq, Eq)]
struct PartitionView {
    leader: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
}

fn ids(s: &str) -> Vec<i32> {
    s.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

/// `kafka-topics.sh --describe`, parsed: partition -> leader, replicas, ISR.
fn describe(node: &Ottla, topic: &str) -> BTreeMap<i32, PartitionView> {
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
            (
                field("Partition:").parse().unwrap(),
                PartitionView {
                    leader: field("Leader:").parse().unwrap(),
                    replicas: ids(&field("Replicas:")),
                    isr: ids(&field("Isr:")),
                },
            )
        })
        .collect()
}

/// Waits until `check` holds for the topic's description as `node` sees it.
fn wait_for(
    node: &Ottla,
    topic: &str,
    what: &str,
    check: impl Fn(&BTreeMap<i32, PartitionView>) -> bool,
) -> BTreeMap<i32, PartitionView> {
    let start = Instant::now();
    loop {
        let view = describe(node, topic);
        if check(&view) {
            return view;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what} never happened: {view:?}\nlog:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn produce(node: &Ottla, topic: &str, records: usize) -> String {
    ok(kafka_tool(
        "kafka-producer-perf-test.sh",
        &[
            "--topic",
            topic,
            "--num-records",
            &records.to_string(),
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            &format!("bootstrap.servers={}", node.bootstrap()),
            "acks=all",
            "linger.ms=5",
        ],
        None,
    ))
}

/// Sum of the partitions' latest offsets.
fn total_offsets(node: &Ottla, topic: &str) -> i64 {
    ok(kafka_tool(
        "kafka-get-offsets.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--topic",
            topic,
            "--time",
            "-1",
        ],
        None,
    ))
    .lines()
    .filter_map(|l| l.rsplit(':').next()?.trim().parse::<i64>().ok())
    .sum()
}

fn consume_count(node: &Ottla, topic: &str, expected: usize) -> usize {
    let out = ok(kafka_tool(
        "kafka-console-consumer.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            &expected.to_string(),
            "--timeout-ms",
            "30000",
        ],
        None,
    ));
    out.lines().count()
}

#[test]
fn replicated_topic_survives_a_killed_leader_and_catches_up_again() {
    let mut nodes = Ottla::cluster(3, CLUSTER_SETTINGS);
    let created = ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &nodes[0].bootstrap(),
            "--create",
            "--topic",
            "replicated",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=2",
        ],
        None,
    ));
    assert!(created.contains("Created topic replicated"), "{created}");
    let view = wait_for(&nodes[1], "replicated", "full ISRs", |v| {
        v.len() == 3 && v.values().all(|p| p.isr.len() == 3 && p.leader > 0)
    });
    let leaders: Vec<i32> = view.values().map(|p| p.leader).collect();
    let mut distinct = leaders.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        3,
        "leadership spread over the brokers: {view:?}"
    );

    let out = produce(&nodes[1], "replicated", 20_000);
    assert!(out.contains("20000 records sent"), "{out}");
    assert_eq!(total_offsets(&nodes[2], "replicated"), 20_000);

    // SIGKILL the leader of partition 0: its partitions move to the
    // other ISR members and acks=all writes go on with min.insync.replicas=2.
    let victim = view[&0].leader;
    nodes[(victim - 1) as usize].kill9();
    let victim_at = (victim - 1) as usize;
    let survivor_at = (victim % 3) as usize;
    let survivor = &nodes[survivor_at];
    let moved = wait_for(
        survivor,
        "replicated",
        "leadership leaving the killed broker",
        |v| {
            v.values()
                .all(|p| p.leader > 0 && p.leader != victim && !p.isr.contains(&victim))
        },
    );
    assert!(moved.values().all(|p| p.isr.len() == 2), "{moved:?}");
    let out = produce(survivor, "replicated", 10_000);
    assert!(out.contains("10000 records sent"), "{out}");
    assert_eq!(total_offsets(survivor, "replicated"), 30_000);
    assert_eq!(consume_count(survivor, "replicated", 30_000), 30_000);

    // The killed broker comes back, catches up and rejoins every ISR.
    nodes[victim_at].restart();
    let survivor = &nodes[survivor_at];
    wait_for(
        survivor,
        "replicated",
        "the restarted broker back in every ISR",
        |v| v.values().all(|p| p.isr.len() == 3),
    );
    let back = &nodes[victim_at];
    // Its own log has every record: read it back through it once it leads.
    assert_eq!(total_offsets(back, "replicated"), 30_000);
}

#[test]
fn controlled_shutdown_moves_leadership_before_stopping() {
    let mut nodes = Ottla::cluster(3, CLUSTER_SETTINGS);
    ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &nodes[0].bootstrap(),
            "--create",
            "--topic",
            "moving",
            "--partitions",
            "6",
            "--replication-factor",
            "3",
        ],
        None,
    ));
    wait_for(&nodes[0], "moving", "full ISRs", |v| {
        v.len() == 6 && v.values().all(|p| p.isr.len() == 3)
    });
    // The quorum as kafka-metadata-quorum.sh sees it, through any node.
    let status = ok(kafka_tool(
        "kafka-metadata-quorum.sh",
        &[
            "--bootstrap-server",
            &nodes[2].bootstrap(),
            "describe",
            "--status",
        ],
        None,
    ));
    let leader: i32 = status
        .lines()
        .find_map(|l| l.strip_prefix("LeaderId:"))
        .unwrap_or_else(|| panic!("{status}"))
        .trim()
        .parse()
        .unwrap();
    assert!((1..=3).contains(&leader), "{status}");
    assert!(
        status.contains("\"id\": 1") && status.contains("\"id\": 3"),
        "{status}"
    );
    let replication = ok(kafka_tool(
        "kafka-metadata-quorum.sh",
        &[
            "--bootstrap-server",
            &nodes[0].bootstrap(),
            "describe",
            "--replication",
        ],
        None,
    ));
    let rows: Vec<&str> = replication
        .lines()
        .filter(|l| l.contains("Leader") || l.contains("Follower"))
        .collect();
    assert_eq!(rows.len(), 3, "{replication}");
    assert!(
        replication.lines().all(|l| !l.contains("-1 ")),
        "every voter's log end is known to the leader: {replication}"
    );
    // One cluster id everywhere: the nodes were given the same cluster.id.
    let ids: Vec<String> = nodes
        .iter()
        .map(|n| {
            ok(kafka_tool(
                "kafka-cluster.sh",
                &["cluster-id", "--bootstrap-server", &n.bootstrap()],
                None,
            ))
            .trim()
            .to_string()
        })
        .collect();
    assert!(ids.iter().all(|i| i == &ids[0]), "{ids:?}");

    let before = describe(&nodes[0], "moving");
    assert!(before.values().any(|p| p.leader == 2), "{before:?}");
    assert_eq!(nodes[1].stop(), Some(0), "clean exit");
    assert!(
        nodes[1]
            .log()
            .contains("controlled shutdown: no partition led here any more"),
        "{}",
        nodes[1].log()
    );
    let after = describe(&nodes[0], "moving");
    assert!(
        after.values().all(|p| p.leader != 2 && p.leader > 0),
        "leadership moved at once: {after:?}"
    );
    let out = produce(&nodes[0], "moving", 5_000);
    assert!(out.contains("5000 records sent"), "{out}");
}
