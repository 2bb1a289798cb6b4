//! Three `ottla` processes forming one cluster: replicated topics, acks=all,
//! a leader killed with SIGKILL, a controlled shutdown, and a replica that
//! comes back and catches up, driven with the stock Java tools.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ottla_tests::broker_configs::try_alter_broker_configs;
use ottla_tests::console_consumer::{every_offset_read, ConsoleConsumer};
use ottla_tests::metrics::{self, sample};
use ottla_tests::ottla::{free_port, ottla_binary, Ottla, Role};
use ottla_tests::tools::{kafka_tool, ok};
use ottla_tests::topics::{
    consume_from_beginning, create_assigned_topic, create_topic, describe, PartitionView,
};
use ottla_tests::wire::WireClient;

/// Short timeouts so failures are detected within seconds.
const CLUSTER_SETTINGS: &[(&str, &str)] = &[
    ("broker.heartbeat.interval.ms", "300"),
    ("broker.session.timeout.ms", "2500"),
    ("replica.lag.time.max.ms", "4000"),
    ("replica.fetch.backoff.ms", "200"),
    ("offsets.topic.replication.factor", "3"),
];

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
    consume_from_beginning(node, topic, expected, &[])
        .lines()
        .count()
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
    // The first consumer group creates __consumer_offsets, which needs its
    // three replicas live, as in Kafka: before a broker is lost.
    assert_eq!(consume_count(&nodes[2], "replicated", 20_000), 20_000);

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
    // Preferred replicas lead again after an operator's election, the
    // returned broker included, and serve every record.
    let elected = ok(kafka_tool(
        "kafka-leader-election.sh",
        &[
            "--bootstrap-server",
            &back.bootstrap(),
            "--election-type",
            "preferred",
            "--all-topic-partitions",
        ],
        None,
    ));
    assert!(
        elected.contains("Successfully completed leader election"),
        "{elected}"
    );
    let balanced = wait_for(back, "replicated", "preferred leaders", |v| {
        v.values().all(|p| p.leader == p.replicas[0])
    });
    assert!(
        balanced.values().any(|p| p.leader == victim),
        "{balanced:?}"
    );
    assert_eq!(total_offsets(back, "replicated"), 30_000);
    assert_eq!(consume_count(back, "replicated", 30_000), 30_000);
}

#[test]
fn controlled_shutdown_moves_leadership_before_stopping() {
    let mut nodes = Ottla::cluster(3, CLUSTER_SETTINGS);
    create_topic(&nodes[0], "moving", 6, &["--replication-factor", "3"]);
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

    // Feature levels: finalized through one node, reported by every node.
    let features = |node: &Ottla, args: &[&str]| {
        let mut all = vec!["--bootstrap-server", node.bootstrap().leak() as &str];
        all.extend_from_slice(args);
        kafka_tool("kafka-features.sh", &all, None)
    };
    let upgraded = ok(features(
        &nodes[0],
        &["upgrade", "--feature", "metadata.version=27"],
    ));
    assert!(
        upgraded.contains("metadata.version was upgraded to 27"),
        "{upgraded}"
    );
    let downgrade = features(
        &nodes[0],
        &["downgrade", "--feature", "metadata.version=20", "--unsafe"],
    );
    assert!(!downgrade.status.success(), "downgrades are refused");
    let start = Instant::now();
    loop {
        let described = ok(features(&nodes[2], &["describe"]));
        let epoch: i64 = described
            .split("Epoch:")
            .nth(1)
            .and_then(|e| e.split_whitespace().next())
            .and_then(|e| e.parse().ok())
            .unwrap_or_else(|| panic!("{described}"));
        if described.contains("FinalizedVersionLevel: 4.1-IV1") && epoch > 0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{described}");
        std::thread::sleep(Duration::from_millis(200));
    }

    let before = describe(&nodes[0], "moving");
    assert!(before.values().any(|p| p.leader == 2), "{before:?}");
    // The other controllers keep quorum connections to this one open; they
    // must not hold its shutdown (they held it 10 s, the grace period).
    let stopping = Instant::now();
    assert_eq!(nodes[1].stop(), Some(0), "clean exit");
    let took = stopping.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "SIGTERM took {took:?}; log:\n{}",
        nodes[1].log()
    );
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

/// argv: bootstrap, topic, transactional id. Commits 30 records spread over
/// three partitions (led by different brokers, so markers cross brokers),
/// aborts 12, and prints what a read_committed consumer then sees, one
/// value per line.
const TRANSACTIONS_ACROSS_BROKERS: &str = r#"
import sys, time
from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, topic, txn_id = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
p.init_transactions(60)
p.begin_transaction()
for i in range(30):
    p.produce(topic, value=f"committed-{i}", partition=i % 3)
p.commit_transaction(60)
p.begin_transaction()
for i in range(12):
    p.produce(topic, value=f"aborted-{i}", partition=i % 3)
p.flush(60)
p.abort_transaction(60)

c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "cluster-read-committed",
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "enable.partition.eof": True,
})
c.assign([TopicPartition(topic, i, 0) for i in range(3)])
seen, eof = [], set()
deadline = time.time() + 60
while time.time() < deadline and len(eof) < 3:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        eof.add(m.partition())
        continue
    seen.append(m.value().decode())
c.close()
for v in sorted(seen):
    print(v)
"#;

fn create_replicated(node: &Ottla, topic: &str, partitions: u32) {
    // Two cores shared with JVM tools can delay a heartbeat past the short
    // session timeout these tests use; a broker fenced for a moment is
    // unfenced by its next heartbeat, so wait for all three first.
    node.wait_for_brokers(3, Duration::from_secs(30));
    let out = create_replicated_by(node, topic, partitions, 3);
    assert!(out.contains("Created topic"), "{out}");
}

/// The group's coordinator id and the sum of its committed offsets on `topic`.
fn group_state(node: &Ottla, group: &str) -> (i32, i64) {
    let groups = |args: &[&str]| {
        let mut all = vec!["--bootstrap-server", node.bootstrap().leak() as &str];
        all.extend_from_slice(args);
        ok(kafka_tool("kafka-consumer-groups.sh", &all, None))
    };
    let state = groups(&["--describe", "--group", group, "--state"]);
    let coordinator = state
        .lines()
        .filter(|l| l.starts_with(group))
        .find_map(|l| {
            let open = l.find('(')?;
            let close = l[open..].find(')')? + open;
            l[open + 1..close].parse().ok()
        })
        .unwrap_or_else(|| panic!("no coordinator in {state}"));
    let offsets = groups(&["--describe", "--group", group, "--offsets"]);
    let committed = offsets
        .lines()
        .filter(|l| l.starts_with(group))
        .filter_map(|l| l.split_whitespace().nth(3)?.parse::<i64>().ok())
        .sum();
    (coordinator, committed)
}

fn console_consume(node: &Ottla, topic: &str, group: &str, extra: &[&str]) -> usize {
    let mut args = vec![
        "--bootstrap-server",
        node.bootstrap().leak() as &str,
        "--topic",
        topic,
        "--group",
        group,
        "--from-beginning",
        "--timeout-ms",
        "15000",
    ];
    args.extend_from_slice(extra);
    ok(kafka_tool("kafka-console-consumer.sh", &args, None))
        .lines()
        .count()
}

#[test]
fn groups_and_transactions_span_brokers_and_survive_a_coordinator_loss() {
    let mut settings = CLUSTER_SETTINGS.to_vec();
    settings.extend_from_slice(&[
        ("transaction.state.log.replication.factor", "3"),
        ("transaction.state.log.min.isr", "2"),
    ]);
    let mut nodes = Ottla::cluster(3, &settings);
    create_replicated(&nodes[0], "txn-out", 3);
    wait_for(&nodes[0], "txn-out", "full ISRs", |v| {
        v.values().all(|p| p.isr.len() == 3)
    });
    let seen = ok(ottla_tests::tools::python_script(
        TRANSACTIONS_ACROSS_BROKERS,
        &[&nodes[0].bootstrap(), "txn-out", "cluster-txn"],
    ));
    let values: Vec<&str> = seen.lines().collect();
    assert_eq!(values.len(), 30, "{seen}");
    assert!(values.iter().all(|v| v.starts_with("committed-")), "{seen}");

    create_replicated(&nodes[1], "events", 3);
    let out = produce(&nodes[1], "events", 3_000);
    assert!(out.contains("3000 records sent"), "{out}");
    let first = console_consume(&nodes[2], "events", "g1", &["--max-messages", "600"]);
    assert_eq!(first, 600);
    let (coordinator, committed) = group_state(&nodes[2], "g1");
    assert!((600..=3_000).contains(&committed), "committed {committed}");

    // The coordinator dies: another broker leads its offsets partition,
    // loads the group from the replicated log and answers with the same
    // committed offsets; the group resumes where it was.
    nodes[(coordinator - 1) as usize].kill9();
    let survivor = &nodes[(coordinator % 3) as usize];
    let start = Instant::now();
    let (moved_to, after) = loop {
        let state = std::panic::catch_unwind(|| group_state(survivor, "g1"));
        match state {
            Ok((c, offsets)) if c != coordinator => break (c, offsets),
            _ if start.elapsed() > Duration::from_secs(60) => {
                panic!(
                    "the group never moved off broker {coordinator}:\n{}",
                    survivor.log()
                )
            }
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    };
    assert_ne!(moved_to, coordinator);
    assert_eq!(
        after, committed,
        "committed offsets survive the coordinator"
    );
    let rest = console_consume(survivor, "events", "g1", &[]);
    assert_eq!(
        rest as i64,
        3_000 - committed,
        "the group resumed at its commits"
    );
}

#[test]
fn reassignment_grows_the_replication_factor_and_moves_a_partition() {
    let nodes = Ottla::cluster(3, CLUSTER_SETTINGS);
    let out = create_assigned_topic(&nodes[0], "moves", "1,2");
    assert!(out.contains("Created topic moves"), "{out}");
    let sent = produce(&nodes[0], "moves", 5_000);
    assert!(sent.contains("5000 records sent"), "{sent}");

    let dir = tempfile::tempdir().unwrap();
    let topics_json = dir.path().join("topics.json");
    std::fs::write(
        &topics_json,
        r#"{"version":1,"topics":[{"topic":"moves"}]}"#,
    )
    .unwrap();
    let proposed = ok(kafka_tool(
        "kafka-reassign-partitions.sh",
        &[
            "--bootstrap-server",
            &nodes[1].bootstrap(),
            "--topics-to-move-json-file",
            topics_json.to_str().unwrap(),
            "--broker-list",
            "1,2,3",
            "--generate",
        ],
        None,
    ));
    assert!(
        proposed.contains("Proposed partition reassignment configuration"),
        "{proposed}"
    );

    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"version":1,"partitions":[
            {"topic":"moves","partition":0,"replicas":[1,2,3]},
            {"topic":"moves","partition":1,"replicas":[3]}]}"#,
    )
    .unwrap();
    let reassign = |action: &str| {
        ok(kafka_tool(
            "kafka-reassign-partitions.sh",
            &[
                "--bootstrap-server",
                &nodes[1].bootstrap(),
                "--reassignment-json-file",
                plan.to_str().unwrap(),
                action,
            ],
            None,
        ))
    };
    let started = reassign("--execute");
    assert!(
        started.contains("Successfully started partition reassignment"),
        "{started}"
    );
    let start = Instant::now();
    loop {
        let verified = reassign("--verify");
        if verified.contains("Reassignment of partition moves-0 is completed")
            && verified.contains("Reassignment of partition moves-1 is completed")
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "reassignment never completed: {verified}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let view = describe(&nodes[2], "moves");
    assert_eq!(view[&0].replicas, vec![1, 2, 3]);
    assert_eq!(view[&0].isr.len(), 3, "{view:?}");
    assert_eq!(
        view[&1],
        PartitionView {
            leader: 3,
            replicas: vec![3],
            isr: vec![3],
            elr: vec![],
            last_known_elr: vec![],
        }
    );
    assert_eq!(total_offsets(&nodes[2], "moves"), 5_000);
    assert_eq!(consume_count(&nodes[2], "moves", 5_000), 5_000);
}

/// The node's `/metrics`, from the metrics listener its log names (bound
/// to port 0).
fn scrape(node: &Ottla) -> String {
    let log = node.log();
    let marker = "metrics listening on http://127.0.0.1:";
    let start = log.find(marker).expect("the metrics listener is logged") + marker.len();
    let port = log[start..start + log[start..].find('/').unwrap()]
        .parse()
        .unwrap();
    metrics::scrape(port)
}

/// Also the cluster metrics scrape: the active controller's quorum figures,
/// throttled replication bytes on both sides, the ISR expansion and the new
/// replica's log size.
#[test]
fn a_throttled_reassignment_is_held_to_its_rate() {
    let mut settings = CLUSTER_SETTINGS.to_vec();
    settings.push(("metrics.listener", "http://127.0.0.1:0"));
    let nodes = Ottla::cluster(3, &settings);
    create_assigned_topic(&nodes[0], "slow", "1");
    // About 2.4 MB: the first ~1 MB (10 s of the quota) goes at once, the
    // rest at 100 kB/s.
    let sent = produce(&nodes[0], "slow", 20_000);
    assert!(sent.contains("20000 records sent"), "{sent}");
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"version":1,"partitions":[{"topic":"slow","partition":0,"replicas":[1,2]}]}"#,
    )
    .unwrap();
    let bootstrap = nodes[1].bootstrap();
    let reassign = |args: &[&str]| {
        let mut all = vec![
            "--bootstrap-server",
            bootstrap.as_str(),
            "--reassignment-json-file",
            plan.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        ok(kafka_tool("kafka-reassign-partitions.sh", &all, None))
    };
    let started_at = Instant::now();
    let started = reassign(&["--execute", "--throttle", "100000"]);
    assert!(
        started.contains("The inter-broker throttle limit was set to 100000 B/s"),
        "{started}"
    );
    let verified = loop {
        let verified = reassign(&["--verify"]);
        if verified.contains("Reassignment of partition slow-0 is completed") {
            break verified;
        }
        assert!(
            started_at.elapsed() < Duration::from_secs(120),
            "reassignment never completed: {verified}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let took = started_at.elapsed();
    assert!(
        took > Duration::from_secs(6),
        "2.4 MB moved in {took:?} under a 100 kB/s throttle"
    );
    // --verify of a finished reassignment lifts the throttle.
    assert!(
        verified.contains("Clearing broker-level throttles")
            && verified.contains("Clearing topic-level throttles"),
        "{verified}"
    );
    eprintln!("throttled reassignment took {took:?}");
    let configs = ok(kafka_tool(
        "kafka-configs.sh",
        &[
            "--bootstrap-server",
            &nodes[0].bootstrap(),
            "--describe",
            "--entity-type",
            "topics",
            "--entity-name",
            "slow",
        ],
        None,
    ));
    assert!(
        !configs.contains("replication.throttled.replicas"),
        "{configs}"
    );
    let view = describe(&nodes[2], "slow");
    assert_eq!(view[&0].isr.len(), 2, "{view:?}");
    assert_eq!(total_offsets(&nodes[2], "slow"), 20_000);

    let texts: Vec<String> = nodes.iter().map(scrape).collect();
    let active: Vec<&String> = texts
        .iter()
        .filter(|t| sample(t, "kafka_controller_active_controller_count") == Some(1.0))
        .collect();
    assert_eq!(active.len(), 1, "exactly one active controller");
    for voter in 1..=3 {
        let lag = sample(
            active[0],
            &format!("kafka_server_raft_metrics_voter_lag_records{{voter=\"{voter}\"}}"),
        );
        assert!(
            lag.is_some_and(|l| (0.0..1000.0).contains(&l)),
            "voter {voter}: {lag:?}"
        );
    }
    let throttled = |node: usize, side: &str| {
        sample(
            &texts[node],
            &format!("kafka_server_replication_throttled_bytes_total{{side=\"{side}\"}}"),
        )
        .unwrap_or(0.0)
    };
    assert!(throttled(0, "leader") > 1e6, "{}", texts[0]);
    assert!(throttled(1, "follower") > 1e6, "{}", texts[1]);
    assert!(
        sample(&texts[0], "kafka_server_replicamanager_isr_expands_total")
            .is_some_and(|n| n >= 1.0)
    );
    let size = sample(
        &texts[1],
        "kafka_log_size_bytes{topic=\"slow\",partition=\"0\"}",
    );
    assert!(size.is_some_and(|s| s > 2e6), "{size:?}");
}

/// `kafka-metadata-quorum.sh describe --status` through `node`: the
/// leader's id and the output.
fn quorum_status(node: &Ottla) -> (i32, String) {
    let status = ok(kafka_tool(
        "kafka-metadata-quorum.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "describe",
            "--status",
        ],
        None,
    ));
    let leader = status
        .lines()
        .find_map(|l| l.strip_prefix("LeaderId:"))
        .unwrap_or_else(|| panic!("{status}"))
        .trim()
        .parse()
        .unwrap();
    (leader, status)
}

fn create_replicated_by(node: &Ottla, topic: &str, partitions: u32, rf: u32) -> String {
    create_topic(
        node,
        topic,
        partitions,
        &["--replication-factor", &rf.to_string()],
    )
}

/// The production layout: three controller-only nodes form the quorum and
/// two broker-only nodes follow it as observers. Only the brokers are
/// listed to clients; the quorum survives losing its leader; a restarted
/// broker fetches the metadata again and serves its partitions.
#[test]
fn broker_only_nodes_follow_a_controller_only_quorum() {
    use kafka_protocol::messages::MetadataRequest;
    let mut settings = CLUSTER_SETTINGS.to_vec();
    settings.retain(|(k, _)| *k != "offsets.topic.replication.factor");
    settings.push(("offsets.topic.replication.factor", "2"));
    let mut nodes = Ottla::split_cluster(3, 2, &settings);
    let (b4, b5) = (3, 4);
    let listed = |node: &Ottla| -> Vec<i32> {
        let mut client = ottla_tests::wire::WireClient::connect(&node.bootstrap());
        let metadata = client.send(12, &MetadataRequest::default());
        let mut ids: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id.0).collect();
        ids.sort_unstable();
        ids
    };
    assert_eq!(listed(&nodes[b4]), [4, 5], "controllers are not brokers");

    let created = create_replicated_by(&nodes[b4], "split", 4, 2);
    assert!(created.contains("Created topic split"), "{created}");
    wait_for(
        &nodes[b5],
        "split",
        "full ISRs seen by the other broker",
        |v| v.len() == 4 && v.values().all(|p| p.isr.len() == 2),
    );
    produce(&nodes[b5], "split", 20_000);
    assert_eq!(total_offsets(&nodes[b4], "split"), 20_000);

    let (leader, status) = quorum_status(&nodes[b4]);
    assert!((1..=3).contains(&leader), "{status}");
    // A controller-only node answers admin clients on its controller
    // listener (`--bootstrap-controller`), as Kafka's controllers do.
    let direct = quorum_command(&nodes[0], true, &["describe", "--status"]);
    assert!(
        direct.contains(&format!("LeaderId:               {leader}")),
        "{direct}"
    );
    let observers = status
        .lines()
        .find(|l| l.starts_with("CurrentObservers:"))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(
        observers.contains("\"id\": 4") && observers.contains("\"id\": 5"),
        "{status}"
    );
    let replication = ok(kafka_tool(
        "kafka-metadata-quorum.sh",
        &[
            "--bootstrap-server",
            &nodes[b5].bootstrap(),
            "describe",
            "--replication",
        ],
        None,
    ));
    let observer_rows = replication
        .lines()
        .filter(|l| l.contains("Observer"))
        .count();
    assert_eq!(observer_rows, 2, "{replication}");

    // The active controller dies: the others elect a leader, and the
    // brokers find it for their writes and their metadata.
    nodes[leader as usize - 1].kill9();
    let created = create_replicated_by(&nodes[b5], "after-failover", 2, 2);
    assert!(
        created.contains("Created topic after-failover"),
        "{created}"
    );
    wait_for(
        &nodes[b4],
        "after-failover",
        "the new topic at the other broker",
        |v| v.len() == 2 && v.values().all(|p| p.isr.len() == 2),
    );
    let (new_leader, status) = quorum_status(&nodes[b4]);
    assert!(
        new_leader != leader && (1..=3).contains(&new_leader),
        "{status}"
    );

    // A broker killed and restarted loads the metadata from the quorum
    // again (it keeps none) and serves everything.
    produce(&nodes[b4], "split", 5_000);
    nodes[b4].kill9();
    nodes[b4].restart();
    nodes[b4].wait_for_brokers(2, Duration::from_secs(60));
    wait_for(
        &nodes[b4],
        "split",
        "the restarted broker back in every ISR",
        |v| v.len() == 4 && v.values().all(|p| p.isr.len() == 2),
    );
    assert_eq!(consume_count(&nodes[b4], "split", 25_000), 25_000);
    assert!(
        nodes[b4].log().contains("following the active controller"),
        "{}",
        nodes[b4].log()
    );
}

/// Polls `node`'s metrics until `check` holds for them (30 s at most).
fn wait_for_metrics(node: &Ottla, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = scrape(node);
        if check(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{what} never happened:\n{text}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Waits up to 30 s until `node` accepts connections on `address`
/// (`listening`) or refuses them.
fn wait_listening(node: &Ottla, address: &str, listening: bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(address).is_ok() != listening {
        assert!(
            Instant::now() < deadline,
            "{address} never went listening={listening}:\n{}",
            node.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Kafka's dynamic thread counts and listeners on a running cluster: more
/// replica fetch loops (every partition still replicates), a listener
/// added and removed, and the recovery threads a node closes and loads its
/// logs with.
#[test]
fn thread_counts_and_listeners_change_at_runtime() {
    let mut settings = CLUSTER_SETTINGS.to_vec();
    settings.retain(|(k, _)| *k != "offsets.topic.replication.factor");
    settings.push(("metrics.listener", "http://127.0.0.1:0"));
    let mut nodes = Ottla::cluster(2, &settings);
    nodes[0].wait_for_brokers(2, Duration::from_secs(30));
    let created = create_assigned_topic(&nodes[0], "spread", "1:2,1:2,1:2,1:2,1:2,1:2");
    assert!(created.contains("Created topic spread"), "{created}");
    let fetchers = "ottla_replica_fetchers{leader=\"1\"}";
    wait_for_metrics(&nodes[1], "one fetch loop", |t| {
        sample(t, fetchers) == Some(1.0)
    });

    // num.replica.fetchers, cluster-wide: node 2 runs two loops for node 1.
    let (done, out) = try_alter_broker_configs(
        &nodes[0],
        &["--entity-default", "--add-config", "num.replica.fetchers=2"],
    );
    assert!(done, "{out}");
    wait_for_metrics(&nodes[1], "two fetch loops", |t| {
        sample(t, fetchers) == Some(2.0)
    });
    let (done, out) = try_alter_broker_configs(
        &nodes[0],
        &["--entity-default", "--add-config", "num.replica.fetchers=5"],
    );
    assert!(
        !done && out.contains("value should not be greater than double the current value 2"),
        "{out}"
    );
    let sent = produce(&nodes[0], "spread", 6_000);
    assert!(sent.contains("6000 records sent"), "{sent}");
    let end = |text: &str, partition: i32| {
        sample(
            text,
            &format!("kafka_log_end_offset{{topic=\"spread\",partition=\"{partition}\"}}"),
        )
        .unwrap_or(0.0)
    };
    let leader = scrape(&nodes[0]);
    let total = |text: &str| (0..6).map(|p| end(text, p)).sum::<f64>();
    assert_eq!(total(&leader), 6_000.0, "{leader}");
    wait_for_metrics(&nodes[1], "the follower catching up", |t| {
        (0..6).all(|p| end(t, p) == end(&leader, p))
    });

    // A listener added to node 1 and removed again.
    let extra_port = ottla_tests::ottla::free_port();
    let extra = format!("127.0.0.1:{extra_port}");
    let listeners = format!(
        "listeners=[PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{},EXTRA://{extra}]",
        nodes[0].port, nodes[0].controller_port
    );
    let map =
        "listener.security.protocol.map=[PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,EXTRA:PLAINTEXT]";
    let (done, out) = try_alter_broker_configs(
        &nodes[0],
        &[
            "--entity-name",
            "1",
            "--add-config",
            &format!("{listeners},{map}"),
        ],
    );
    assert!(done, "{out}");
    wait_listening(&nodes[0], &extra, true);
    let listed = ok(kafka_tool(
        "kafka-topics.sh",
        &["--bootstrap-server", &extra, "--list"],
        None,
    ));
    assert!(listed.lines().any(|l| l == "spread"), "{listed}");
    // Advertising it would change the broker's registration.
    let (done, out) = try_alter_broker_configs(
        &nodes[0],
        &[
            "--entity-name",
            "1",
            "--add-config",
            &format!(
                "advertised.listeners=[PLAINTEXT://127.0.0.1:{},EXTRA://{extra}]",
                nodes[0].port
            ),
        ],
    );
    assert!(
        !done && out.contains("Advertised listeners cannot be altered"),
        "{out}"
    );
    let (done, out) = try_alter_broker_configs(
        &nodes[0],
        &[
            "--entity-name",
            "1",
            "--delete-config",
            "listeners,listener.security.protocol.map",
        ],
    );
    assert!(done, "{out}");
    wait_listening(&nodes[0], &extra, false);

    // num.recovery.threads.per.data.dir, for node 2: used to close its logs
    // and, read from the metadata at start-up, to load them again.
    let (done, out) = try_alter_broker_configs(
        &nodes[0],
        &[
            "--entity-name",
            "2",
            "--add-config",
            "num.recovery.threads.per.data.dir=4",
        ],
    );
    assert!(done, "{out}");
    // The change reaches node 2 through the metadata log; a restarted
    // node 2 reads it before it opens its logs.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(nodes[1].stop(), Some(0));
    let closed = nodes[1].log();
    assert!(
        closed
            .lines()
            .any(|l| l.contains("closed the logs") && l.contains("threads_per_dir=4")),
        "{closed}"
    );
    nodes[1].restart();
    nodes[0].wait_for_brokers(2, Duration::from_secs(30));
    let loaded = nodes[1].log();
    let reloads: Vec<&str> = loaded
        .lines()
        .filter(|l| l.contains("loaded log dir"))
        .collect();
    assert!(
        reloads.last().is_some_and(|l| l.contains("threads=4")),
        "{reloads:?}"
    );
}

/// Sets topic config `retention.ms` of `topic` to `value` through `node`
/// over the wire (one metadata entry per call, cheaper than a JVM tool).
fn set_retention(client: &mut WireClient, topic: &str, value: u64) {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_string(topic.to_string()))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(value.to_string())))]),
    ]);
    let response = client.send(1, &request);
    assert_eq!(response.responses[0].error_code, 0, "{response:?}");
}

/// Issue 27, defect 1: a node restarted from its metadata snapshot saw the
/// live brokers as fenced (the snapshot wrote them as only registered) and
/// nothing ever corrected it. 1,100 config changes make every node take a
/// snapshot (one every 1,000 entries); the restarted node must see the
/// others unfenced, rejoin every ISR and take acks=all idempotent writes.
#[test]
fn a_node_restarted_from_a_snapshot_sees_the_live_brokers() {
    let mut nodes = Ottla::cluster(3, CLUSTER_SETTINGS);
    create_topic(
        &nodes[0],
        "snapshotted",
        3,
        &[
            "--replication-factor",
            "3",
            "--config",
            "min.insync.replicas=3",
        ],
    );
    wait_for(&nodes[0], "snapshotted", "full ISRs", |v| {
        v.len() == 3 && v.values().all(|p| p.isr.len() == 3)
    });
    let mut client = WireClient::connect(&nodes[0].bootstrap());
    for i in 0..1_100 {
        set_retention(&mut client, "snapshotted", 3_600_000 + i);
    }
    let snapshot_of = |node: &Ottla| {
        node.data_dir
            .join("logs/__cluster_metadata-0/quorum-snapshot")
    };
    let start = Instant::now();
    while !nodes.iter().all(|n| snapshot_of(n).exists()) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "not every node took a snapshot"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A node that is not the active controller, as in the report.
    let (leader, _) = quorum_status(&nodes[0]);
    let restarted = (0..3).find(|&i| i as i32 + 1 != leader).unwrap();
    assert_eq!(nodes[restarted].stop(), Some(0), "clean exit");
    nodes[restarted].restart();

    let back = &nodes[restarted];
    back.wait_for_brokers(3, Duration::from_secs(20));
    wait_for(
        back,
        "snapshotted",
        "the restarted node in every ISR",
        |v| v.values().all(|p| p.isr.len() == 3 && p.leader > 0),
    );
    let out = ok(kafka_tool(
        "kafka-producer-perf-test.sh",
        &[
            "--topic",
            "snapshotted",
            "--num-records",
            "1000",
            "--record-size",
            "100",
            "--throughput",
            "-1",
            "--producer-props",
            &format!("bootstrap.servers={}", back.bootstrap()),
            "acks=all",
            "enable.idempotence=true",
        ],
        None,
    ));
    assert!(out.contains("1000 records sent"), "{out}");
    assert_eq!(total_offsets(back, "snapshotted"), 1_000);
}

/// Issue 27, defect 5: nodes configured with different cluster ids as the
/// voters of one quorum formed one cluster. They must not, and each says
/// why.
#[test]
fn nodes_of_different_clusters_do_not_form_one() {
    let (a, b) = ("MkU3OEVBNTcwNTJENDM2Qk", "Zm9yZWlnbkNsdXN0ZXIxMg");
    let nodes = Ottla::voters_of_clusters(&[a, b], CLUSTER_SETTINGS);
    // Node 1 bootstraps the quorum and asks node 2 for its vote.
    let refused = format!(
        "refusing quorum RPCs from node 1: it belongs to cluster {a}, this node to cluster {b}"
    );
    let refuses_us = format!("it belongs to cluster {b}, this node to cluster {a}");
    let start = Instant::now();
    while !(nodes[1].log().contains(&refused) && nodes[0].log().contains(&refuses_us)) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no refusal logged;\nnode 1:\n{}\nnode 2:\n{}",
            nodes[0].log(),
            nodes[1].log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        nodes[1]
            .log()
            .contains("every node of one cluster must have the same cluster.id"),
        "{}",
        nodes[1].log()
    );
    // Neither node has a quorum: no broker ever registered.
    std::thread::sleep(Duration::from_secs(3));
    for node in &nodes {
        assert!(
            !node.log().contains("broker unfenced") && !node.log().contains("broker started"),
            "{}",
            node.log()
        );
    }
}

/// A node of a multi-node quorum with no cluster.id configured and none in
/// its log dirs refuses to start, saying what to set.
#[test]
fn a_node_of_a_cluster_without_a_cluster_id_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let (p1, c1, c2) = (free_port(), free_port(), free_port());
    let out = std::process::Command::new(ottla_binary())
        .args(["server", "--override", "node.id=1"])
        .args([
            "--override".to_string(),
            format!("listeners=PLAINTEXT://127.0.0.1:{p1},CONTROLLER://127.0.0.1:{c1}"),
            "--override".to_string(),
            format!("advertised.listeners=PLAINTEXT://127.0.0.1:{p1}"),
            "--override".to_string(),
            format!("controller.quorum.voters=1@127.0.0.1:{c1},2@127.0.0.1:{c2}"),
            "--override".to_string(),
            format!("log.dirs={}", dir.path().join("logs").display()),
        ])
        .output()
        .expect("run ottla");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("cluster.id is not set")
            && stderr.contains("set the same cluster.id on every node"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("logs/meta.properties").exists(),
        "nothing was formatted"
    );
}

/// A cluster's internal topics get Kafka's defaults: three replicas and
/// two in sync, the transaction log and the offsets topic alike, so one
/// lost broker leaves every coordinator available and every acknowledged
/// write on two brokers.
#[test]
fn internal_topics_get_three_replicas_two_in_sync_by_default() {
    let mut settings = CLUSTER_SETTINGS.to_vec();
    settings.retain(|(k, _)| *k != "offsets.topic.replication.factor");
    settings.extend_from_slice(&[
        ("offsets.topic.num.partitions", "3"),
        ("transaction.state.log.num.partitions", "3"),
        ("group.initial.rebalance.delay.ms", "0"),
    ]);
    let nodes = Ottla::cluster(3, &settings);
    create_replicated(&nodes[0], "defaults", 1);
    let out = ok(kafka_tool(
        "kafka-producer-perf-test.sh",
        &[
            "--topic",
            "defaults",
            "--num-records",
            "100",
            "--record-size",
            "50",
            "--throughput",
            "-1",
            "--transactional-id",
            "defaults",
            "--transaction-duration-ms",
            "100",
            "--bootstrap-server",
            &nodes[0].bootstrap(),
        ],
        None,
    ));
    assert!(out.contains("100 records sent"), "{out}");
    let read = console_consume(
        &nodes[1],
        "defaults",
        "defaults",
        &["--max-messages", "100"],
    );
    assert_eq!(read, 100);
    for topic in ["__transaction_state", "__consumer_offsets"] {
        let described = ok(kafka_tool(
            "kafka-topics.sh",
            &[
                "--bootstrap-server",
                &nodes[2].bootstrap(),
                "--describe",
                "--topic",
                topic,
            ],
            None,
        ));
        let header = described
            .lines()
            .find(|l| l.contains("ReplicationFactor:"))
            .unwrap_or_else(|| panic!("{described}"));
        assert!(header.contains("ReplicationFactor: 3"), "{header}");
        assert!(header.contains("min.insync.replicas=2"), "{header}");
        let replica_counts: Vec<usize> = described
            .lines()
            .filter_map(|l| l.split("Replicas:").nth(1))
            .map(|r| r.split_whitespace().next().unwrap_or("").split(',').count())
            .collect();
        assert_eq!(replica_counts, [3, 3, 3], "{described}");
    }
}

/// KIP-951: a broker that does not lead a partition names the leader, its
/// epoch and its endpoint in the Produce answer, both when topics are named
/// by name (v12) and by id only (v13), so a client retries there without
/// refreshing its metadata first.
#[test]
fn produce_to_a_non_leader_names_the_leader() {
    use bytes::Bytes;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{MetadataRequest, ProduceRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use ottla_protocol::batch::{BatchBuilder, SimpleRecord};

    let nodes = Ottla::cluster(2, &[]);
    create_assigned_topic(&nodes[0], "hinted", "1");
    let mut client = WireClient::connect(&nodes[1].bootstrap());
    let start = Instant::now();
    let topic_id = loop {
        let metadata = client.send(12, &MetadataRequest::default().with_topics(None));
        let known = metadata
            .topics
            .iter()
            .find(|t| t.name.as_deref().map(|n| &**n) == Some("hinted"))
            .filter(|t| t.partitions.first().is_some_and(|p| p.leader_id.0 == 1));
        if let Some(t) = known {
            break t.topic_id;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "node 2 never saw the topic"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let batch = BatchBuilder::default().build(&[SimpleRecord {
        timestamp: 0,
        key: None,
        value: Some(b"v".to_vec()),
        headers: vec![],
    }]);
    for version in [12, 13] {
        let mut topic =
            TopicProduceData::default().with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(batch.clone())))]);
        topic = if version >= 13 {
            topic.with_topic_id(topic_id)
        } else {
            topic.with_name(TopicName(StrBytes::from_static_str("hinted")))
        };
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![topic]);
        let response = client.send(version, &request);
        let p = &response.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 6, "v{version}: NOT_LEADER_OR_FOLLOWER");
        assert_eq!(p.current_leader.leader_id.0, 1, "v{version}: {p:?}");
        assert!(p.current_leader.leader_epoch >= 0, "v{version}: {p:?}");
        let endpoints: Vec<(i32, i32)> = response
            .node_endpoints
            .iter()
            .map(|e| (e.node_id.0, e.port))
            .collect();
        assert_eq!(endpoints, [(1, i32::from(nodes[0].port))], "v{version}");
    }
}

/// A partition a follower gains from a leader it already fetches from is
/// fetched at once, not after the fetch that waits at that leader on idle
/// partitions (up to `replica.fetch.wait.max.ms`): acks=all writes to a
/// partition whose leadership moved go on without that wait.
#[test]
fn a_gained_partition_does_not_wait_out_the_followers_long_poll() {
    use bytes::Bytes;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use ottla_protocol::batch::{BatchBuilder, SimpleRecord};

    let mut nodes = Ottla::cluster(
        3,
        &[
            ("broker.heartbeat.interval.ms", "300"),
            ("broker.session.timeout.ms", "2500"),
            ("replica.fetch.wait.max.ms", "10000"),
            ("replica.lag.time.max.ms", "30000"),
        ],
    );
    // Node 2 follows `idle` from node 1: its fetches there wait 10 s.
    create_assigned_topic(&nodes[0], "idle", "1:2");
    create_assigned_topic(&nodes[0], "moving", "3:1:2");
    wait_for(&nodes[0], "idle", "idle's ISR", |v| {
        v.get(&0).is_some_and(|p| p.isr.len() == 2)
    });
    wait_for(&nodes[0], "moving", "moving's ISR", |v| {
        v.get(&0).is_some_and(|p| p.isr.len() == 3)
    });
    // Node 3's controlled shutdown hands `moving` to node 1, from which
    // node 2 now follows it too.
    assert_eq!(nodes[2].stop(), Some(0));
    wait_for(&nodes[0], "moving", "node 1 leading moving", |v| {
        v.get(&0).is_some_and(|p| p.leader == 1 && p.isr.len() == 2)
    });
    let batch = BatchBuilder::default().build(&[SimpleRecord {
        timestamp: 0,
        key: None,
        value: Some(b"v".to_vec()),
        headers: vec![],
    }]);
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("moving")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(batch)))])]);
    let mut client = WireClient::connect(&nodes[0].bootstrap());
    let started = Instant::now();
    let response = client.send(9, &request);
    let took = started.elapsed();
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "{p:?}");
    assert!(
        took < Duration::from_secs(3),
        "the acks=all write waited {took:?} for node 2's long poll"
    );
}

/// Kafka's rack-aware replica selector (KIP-392).
const RACK_AWARE_READS: (&str, &str) = (
    "replica.selector.class",
    "org.apache.kafka.common.replica.RackAwareReplicaSelector",
);

/// argv: bootstrap, topic, rack. Reads the topic's partition 0 from the
/// start to its end with librdkafka naming `rack` as its own, and prints
/// how many records it read.
const READ_IN_RACK: &str = r#"
import sys, time
from confluent_kafka import Consumer, TopicPartition

bootstrap, topic, rack = sys.argv[1:4]
c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "in-" + rack,
    "client.rack": rack,
    "enable.auto.commit": False,
    "enable.partition.eof": True,
})
c.assign([TopicPartition(topic, 0, 0)])
read, deadline = 0, time.time() + 60
while time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        break
    read += 1
c.close()
print(read)
"#;

/// Fetch from follower with the stock clients: on a cluster in racks r1-r3
/// whose leaders pick read replicas by rack, the Java consumer in r2 and
/// librdkafka's in r3 read every record from the replica of their own
/// rack; the leader, in r1, sends them there and serves none of the bytes
/// until a consumer of its own rack reads.
#[test]
fn consumers_read_from_the_replica_of_their_rack() {
    let nodes = Ottla::cluster_in_racks(
        &["r1", "r2", "r3"],
        &[RACK_AWARE_READS, ("metrics.listener", "http://127.0.0.1:0")],
    );
    create_assigned_topic(&nodes[0], "racked", "1:2:3");
    let out = produce(&nodes[0], "racked", 2_000);
    assert!(out.contains("2000 records sent"), "{out}");
    let bytes_out = |node: &Ottla| {
        sample(
            &scrape(node),
            r#"kafka_server_brokertopic_bytes_out_total{topic="racked"}"#,
        )
        .unwrap_or(0.0)
    };
    let values = 2_000.0 * 100.0;

    let java = console_consume(
        &nodes[0],
        "racked",
        "java-in-r2",
        &[
            "--max-messages",
            "2000",
            "--command-property",
            "client.rack=r2",
        ],
    );
    assert_eq!(java, 2_000);
    let served = [
        bytes_out(&nodes[0]),
        bytes_out(&nodes[1]),
        bytes_out(&nodes[2]),
    ];
    assert!(served[1] > values, "the r2 replica served {served:?}");
    assert_eq!((served[0], served[2]), (0.0, 0.0), "{served:?}");

    let librdkafka = ok(ottla_tests::tools::python_script(
        READ_IN_RACK,
        &[&nodes[0].bootstrap(), "racked", "r3"],
    ));
    assert_eq!(librdkafka.trim(), "2000");
    assert!(bytes_out(&nodes[2]) > values, "the r3 replica served none");
    assert_eq!(bytes_out(&nodes[0]), 0.0);

    let local = console_consume(
        &nodes[0],
        "racked",
        "java-in-r1",
        &[
            "--max-messages",
            "2000",
            "--command-property",
            "client.rack=r1",
        ],
    );
    assert_eq!(local, 2_000);
    assert!(
        bytes_out(&nodes[0]) > values,
        "the leader serves its own rack"
    );
}

/// A consumer reading from the replica of its rack goes back to the
/// leader when that replica dies, and reads on without a gap: the Java
/// consumer in rack r2 reads 1,000 records from node 2, node 2 is killed,
/// and it reads the next 1,000 too.
#[test]
fn a_consumer_whose_rack_replica_dies_reads_on_from_the_leader() {
    let mut settings = CLUSTER_SETTINGS.to_vec();
    settings.extend([RACK_AWARE_READS, ("metrics.listener", "http://127.0.0.1:0")]);
    let mut nodes = Ottla::cluster_in_racks(&["r1", "r2", "r3"], &settings);
    create_assigned_topic(&nodes[0], "rack-dies", "1:2:3");
    let out = produce(&nodes[0], "rack-dies", 1_000);
    assert!(out.contains("1000 records sent"), "{out}");
    let consumer = ConsoleConsumer::start(
        &nodes[0],
        "rack-dies",
        "rack-dies",
        "in-r2",
        &["client.rack=r2"],
    );
    let read_by = |n: usize| {
        let start = Instant::now();
        while consumer.records().len() < n {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "read {} of {n}",
                consumer.records().len()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    read_by(1_000);
    let served = sample(
        &scrape(&nodes[1]),
        r#"kafka_server_brokertopic_bytes_out_total{topic="rack-dies"}"#,
    );
    assert!(served.is_some_and(|b| b > 0.0), "node 2 served {served:?}");
    nodes[1].kill9();
    let out = produce(&nodes[0], "rack-dies", 1_000);
    assert!(out.contains("1000 records sent"), "{out}");
    read_by(2_000);
    let seen = every_offset_read(&BTreeMap::from([(0, 2_000)]), &consumer.records());
    assert_eq!(seen.len(), 2_000);
}

/// Eligible leader replicas (KIP-966), on by default as in Kafka 4.4, with
/// min.insync.replicas=2 on three replicas: replicas that stop cleanly
/// while the ISR is below 2 stay eligible, so the first of them back leads
/// with every acknowledged record, where Kafka 3 waited for the last ISR
/// member; a replica back from kill -9 is no longer eligible. Node 1 is the
/// controller, node 2 a broker outside the replicas that answers the tools.
#[test]
fn a_cleanly_stopped_eligible_replica_leads_again_and_a_killed_one_does_not() {
    let mut nodes = Ottla::split_cluster(1, 4, CLUSTER_SETTINGS);
    let created = create_assigned_topic(&nodes[1], "elr", "3:4:5");
    assert!(created.contains("Created topic elr"), "{created}");
    ok(kafka_tool(
        "kafka-configs.sh",
        &[
            "--bootstrap-server",
            &nodes[1].bootstrap(),
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            "elr",
            "--add-config",
            "min.insync.replicas=2",
        ],
        None,
    ));
    let full = |v: &BTreeMap<i32, PartitionView>| v[&0].isr.len() == 3;
    wait_for(&nodes[1], "elr", "a full ISR", full);
    let out = produce(&nodes[1], "elr", 5_000);
    assert!(out.contains("5000 records sent"), "{out}");
    let at = |id: i32| (id - 1) as usize;

    // 5 stops: the ISR [3, 4] is still at min ISR, so 5 is not eligible.
    assert_eq!(nodes[at(5)].stop(), Some(0));
    let v = wait_for(&nodes[1], "elr", "5 out of the ISR", |v| {
        v[&0].isr == [3, 4]
    });
    assert_eq!(
        (v[&0].elr.as_slice(), v[&0].last_known_elr.as_slice()),
        (&[][..], &[][..])
    );
    // 4 stops: the ISR [3] is below 2, so 4 stays eligible.
    assert_eq!(nodes[at(4)].stop(), Some(0));
    let v = wait_for(&nodes[1], "elr", "4 in the ELR", |v| v[&0].isr == [3]);
    assert_eq!(v[&0].elr, [4]);
    // 3, the leader, stops: no ISR, no leader, both eligible, 3 the last
    // leader.
    assert_eq!(nodes[at(3)].stop(), Some(0));
    let v = wait_for(&nodes[1], "elr", "an empty ISR", |v| v[&0].isr.is_empty());
    assert_eq!(v[&0].leader, -1);
    assert_eq!(
        (v[&0].elr.as_slice(), v[&0].last_known_elr.as_slice()),
        (&[3, 4][..], &[3][..])
    );

    // 4 comes back first: it leads, from the ELR, with every record.
    nodes[at(4)].restart();
    let v = wait_for(&nodes[1], "elr", "4 leading", |v| v[&0].leader == 4);
    assert_eq!(
        (v[&0].isr.as_slice(), v[&0].elr.as_slice()),
        (&[4][..], &[3][..])
    );
    assert_eq!(total_offsets(&nodes[1], "elr"), 5_000);
    assert_eq!(read_partition_0(&nodes[1], "elr", 5_000), 5_000);

    // 4 is killed: fenced, it leaves the ISR for the ELR; back from kill -9
    // it may have lost an unflushed tail, so it is no longer eligible, and
    // the partition waits for 3.
    nodes[at(4)].kill9();
    wait_for(&nodes[1], "elr", "4 fenced", |v| v[&0].leader == -1);
    nodes[at(4)].restart();
    let v = wait_for(&nodes[1], "elr", "4 no longer eligible", |v| {
        v[&0].elr == [3]
    });
    assert_eq!(v[&0].leader, -1, "{v:?}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(describe(&nodes[1], "elr")[&0].leader, -1, "4 must not lead");
    assert!(
        nodes[at(4)]
            .log()
            .contains("broker registering after an unclean shutdown"),
        "the broker logs why"
    );
    // 3 comes back: it leads, 4 catches up and both make the ISR again.
    nodes[at(3)].restart();
    wait_for(&nodes[1], "elr", "3 leading with 4", |v| {
        v[&0].leader == 3 && v[&0].isr.len() == 2
    });
    assert_eq!(read_partition_0(&nodes[1], "elr", 5_000), 5_000);
}

/// Reads partition 0 from the start without a consumer group, so without
/// `__consumer_offsets`, whose replicas may be down.
fn read_partition_0(node: &Ottla, topic: &str, expected: usize) -> usize {
    ok(kafka_tool(
        "kafka-console-consumer.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--topic",
            topic,
            "--partition",
            "0",
            "--offset",
            "earliest",
            "--max-messages",
            &expected.to_string(),
            "--timeout-ms",
            "30000",
        ],
        None,
    ))
    .lines()
    .count()
}

/// `kafka-cluster.sh unregister`: a stopped broker taken out of service
/// leaves the metadata; an unknown id is refused with Kafka's message; the
/// broker, started again, registers anew.
#[test]
fn kafka_cluster_unregister_removes_a_broker_taken_out_of_service() {
    let mut nodes = Ottla::split_cluster(1, 3, CLUSTER_SETTINGS);
    let unregister = |node: &Ottla, id: &str| {
        kafka_tool(
            "kafka-cluster.sh",
            &[
                "unregister",
                "--bootstrap-server",
                &node.bootstrap(),
                "--id",
                id,
            ],
            None,
        )
    };
    let brokers = |node: &Ottla| -> Vec<i32> {
        let mut client = WireClient::connect(&node.bootstrap());
        let metadata: kafka_protocol::messages::MetadataResponse =
            client.send(12, &kafka_protocol::messages::MetadataRequest::default());
        let mut ids: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id.0).collect();
        ids.sort_unstable();
        ids
    };
    assert_eq!(nodes[3].stop(), Some(0));
    let out = ok(unregister(&nodes[1], "4"));
    assert!(out.contains("Broker 4 is no longer registered"), "{out}");
    assert_eq!(brokers(&nodes[1]), [2, 3]);
    let refused = unregister(&nodes[1], "9");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("Broker ID 9 is not currently registered"),
        "{stderr}"
    );
    nodes[3].restart();
    nodes[1].wait_for_brokers(3, Duration::from_secs(30));
    assert_eq!(brokers(&nodes[1]), [2, 3, 4]);
}

/// The members a `describe --status` line lists (`CurrentVoters:` or
/// `CurrentObservers:`): each one's id and directory id (a broker-only
/// observer, or a static quorum's voter, has none).
fn quorum_members(status: &str, line: &str) -> Vec<(i32, Option<String>)> {
    let listed = status
        .lines()
        .find_map(|l| l.strip_prefix(line))
        .unwrap_or_else(|| panic!("no {line} in {status}"));
    listed
        .split("{\"id\": ")
        .skip(1)
        .map(|member| {
            let end = member.find([',', '}']).unwrap();
            let directory = member
                .split("\"directoryId\": \"")
                .nth(1)
                .and_then(|d| d.split('"').next())
                .map(str::to_string);
            (member[..end].trim().parse().unwrap(), directory)
        })
        .collect()
}

/// Runs a `kafka-metadata-quorum.sh` command through `node`'s client
/// listener, or its controller listener if `to_controller`, until it
/// succeeds (a controller that is still catching up, or an election after
/// the leader removed itself, answers with an error to retry); returns its
/// output.
fn quorum_command(node: &Ottla, to_controller: bool, args: &[&str]) -> String {
    let start = Instant::now();
    let bootstrap = if to_controller {
        [
            "--bootstrap-controller".to_string(),
            format!("{}:{}", node.host, node.controller_port),
        ]
    } else {
        ["--bootstrap-server".to_string(), node.bootstrap()]
    };
    let mut all = vec![&bootstrap[0][..], &bootstrap[1][..]];
    all.extend_from_slice(args);
    loop {
        let out = kafka_tool("kafka-metadata-quorum.sh", &all, None);
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "kafka-metadata-quorum.sh {args:?} kept failing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A dynamic quorum (KIP-853) grows from one controller to three and back
/// with the stock `kafka-metadata-quorum.sh`, and no node restarts for it:
/// the controllers that join follow the log as observers, become voters
/// with `add-controller`, carry the quorum when the first controller is
/// killed, and go back to observing with `remove-controller`.
#[test]
fn a_dynamic_quorum_grows_to_three_controllers_and_shrinks_back() {
    let mut nodes = Ottla::dynamic_quorum(&[Role::Combined; 3], 1, CLUSTER_SETTINGS);
    let (leader, status) = quorum_status(&nodes[0]);
    assert_eq!(leader, 1, "{status}");
    let voters = |status: &str| -> Vec<i32> {
        quorum_members(status, "CurrentVoters:")
            .into_iter()
            .map(|(id, _)| id)
            .collect()
    };
    assert_eq!(voters(&status), [1], "{status}");
    let features = ok(kafka_tool(
        "kafka-features.sh",
        &["--bootstrap-server", &nodes[1].bootstrap(), "describe"],
        None,
    ));
    assert!(
        features
            .lines()
            .any(|l| l.contains("kraft.version") && l.contains("FinalizedVersionLevel: 1")),
        "{features}"
    );
    let observers = quorum_members(&status, "CurrentObservers:");
    assert!(
        [2, 3].iter().all(|id| observers
            .iter()
            .any(|(o, dir)| o == id && dir.as_ref().is_some_and(|d| d.len() == 22))),
        "the joined controllers observe with their directory ids: {status}"
    );

    for node in &nodes[1..] {
        let config = node.properties_file();
        let config = config.to_str().unwrap();
        // As Kafka's documentation runs it: through a controller listener.
        let added = quorum_command(
            &nodes[0],
            true,
            &["--command-config", config, "add-controller"],
        );
        assert!(added.contains("Added controller"), "{added}");
    }
    let again = kafka_tool(
        "kafka-metadata-quorum.sh",
        &[
            "--bootstrap-server",
            &nodes[0].bootstrap(),
            "--command-config",
            nodes[2].properties_file().to_str().unwrap(),
            "add-controller",
        ],
        None,
    );
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        !again.status.success() && stderr.contains("DuplicateVoterException"),
        "{stderr}"
    );
    let (_, status) = quorum_status(&nodes[2]);
    assert_eq!(voters(&status), [1, 2, 3], "{status}");
    let directories: BTreeMap<i32, String> = quorum_members(&status, "CurrentVoters:")
        .into_iter()
        .map(|(id, dir)| (id, dir.expect("a dynamic quorum's voters have directories")))
        .collect();

    let created = create_replicated_by(&nodes[1], "dynamic", 3, 3);
    assert!(created.contains("Created topic dynamic"), "{created}");
    produce(&nodes[1], "dynamic", 1_000);

    // The controller that started the quorum dies: the two it added are a
    // majority of three, elect a leader and take metadata changes.
    nodes[0].kill9();
    let created = create_replicated_by(&nodes[1], "after-loss", 2, 2);
    assert!(created.contains("Created topic after-loss"), "{created}");
    let (leader, status) = quorum_status(&nodes[2]);
    assert!([2, 3].contains(&leader), "{status}");
    nodes[0].restart();

    // Back to one voter: the removed controllers (the leader among them,
    // which steps down) go on as observers and brokers.
    for id in [2, 3] {
        let id_text = id.to_string();
        // `=` form: a directory id may start with '-', which argparse would
        // take for an option.
        let directory = format!("--controller-directory-id={}", directories[&id]);
        let removed = quorum_command(
            &nodes[0],
            false,
            &["remove-controller", "--controller-id", &id_text, &directory],
        );
        assert!(removed.contains("Removed KRaft controller"), "{removed}");
    }
    let status = quorum_command(&nodes[0], true, &["describe", "--status"]);
    assert_eq!(voters(&status), [1], "{status}");
    let observers = quorum_members(&status, "CurrentObservers:");
    assert!(
        observers.iter().any(|(id, _)| *id == 2) && observers.iter().any(|(id, _)| *id == 3),
        "{status}"
    );
    let created = create_replicated_by(&nodes[2], "after-shrink", 2, 3);
    assert!(created.contains("Created topic after-shrink"), "{created}");
    assert_eq!(total_offsets(&nodes[0], "dynamic"), 1_000);
}

/// A dynamic quorum started from initial voters (Kafka's `format
/// --initial-controllers`): controller-only nodes 1 and 2 vote from the
/// start; node 3, with `controller.quorum.auto.join.enable`, makes itself
/// a voter once it has caught up; when it comes back on another controller
/// port, the voters follow it there (Kafka's UpdateRaftVoter), and so does
/// broker-only node 4, which knows the quorum only by its bootstrap
/// servers.
#[test]
fn initial_voters_and_a_controller_that_joins_by_itself() {
    let mut settings = CLUSTER_SETTINGS.to_vec();
    settings.retain(|(k, _)| *k != "offsets.topic.replication.factor");
    settings.push(("offsets.topic.replication.factor", "2"));
    settings.push(("controller.quorum.auto.join.enable", "true"));
    let roles = [
        Role::Controller,
        Role::Controller,
        Role::Combined,
        Role::Broker,
    ];
    let mut nodes = Ottla::dynamic_quorum(&roles, 2, &settings);
    let (combined, broker) = (2, 3);
    let voters_with_endpoints = |node: &Ottla| -> (Vec<i32>, String) {
        let status = quorum_command(node, false, &["describe", "--status"]);
        let ids = quorum_members(&status, "CurrentVoters:")
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        (ids, status)
    };
    let start = Instant::now();
    loop {
        let (voters, status) = voters_with_endpoints(&nodes[broker]);
        if voters == [1, 2, 3] {
            assert!(
                quorum_members(&status, "CurrentObservers:")
                    .iter()
                    .any(|(id, _)| *id == 4),
                "{status}"
            );
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "node 3 never joined the voters by itself: {status}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let created = create_replicated_by(&nodes[broker], "initial", 3, 2);
    assert!(created.contains("Created topic initial"), "{created}");

    assert_eq!(nodes[combined].stop(), Some(0));
    nodes[combined].controller_port = free_port();
    let moved_to = format!("CONTROLLER://127.0.0.1:{}", nodes[combined].controller_port);
    nodes[combined].restart();
    let start = Instant::now();
    loop {
        let (voters, status) = voters_with_endpoints(&nodes[broker]);
        if voters == [1, 2, 3] && status.contains(&moved_to) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the voters never followed node 3 to {moved_to}: {status}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    // It votes from there: with both first voters gone but one, node 2 and
    // node 3 are a majority, and the broker finds their leader.
    nodes[0].kill9();
    let created = create_replicated_by(&nodes[broker], "moved", 2, 2);
    assert!(created.contains("Created topic moved"), "{created}");
    wait_for(
        &nodes[combined],
        "moved",
        "the new topic at the other broker",
        |v| v.len() == 2 && v.values().all(|p| p.isr.len() == 2),
    );
}

/// A voter whose disk is replaced comes back as a new replica (KIP-853's
/// voter key is the id and the directory): it does not pass for the old
/// voter, and says what to do; once the old voter is removed it joins, and
/// `add-controller` makes it a voter again.
#[test]
fn a_voter_with_a_replaced_disk_comes_back_as_a_new_replica() {
    let mut nodes = Ottla::dynamic_quorum(&[Role::Combined; 3], 1, CLUSTER_SETTINGS);
    let add = |via: &Ottla, node: &Ottla| {
        let config = node.properties_file();
        quorum_command(
            via,
            false,
            &[
                "--command-config",
                config.to_str().unwrap(),
                "add-controller",
            ],
        )
    };
    add(&nodes[0], &nodes[1]);
    add(&nodes[0], &nodes[2]);
    let status = quorum_command(&nodes[0], false, &["describe", "--status"]);
    let old_directory = quorum_members(&status, "CurrentVoters:")
        .into_iter()
        .find_map(|(id, dir)| dir.filter(|_| id == 3))
        .unwrap_or_else(|| panic!("{status}"));

    nodes[2].kill9();
    std::fs::remove_dir_all(nodes[2].data_dir.join("logs")).unwrap();
    nodes[2].restart();
    let start = Instant::now();
    while !nodes[2]
        .log()
        .contains("remove-controller --controller-id 3")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the replaced voter was never told what to do:\n{}",
            nodes[2].log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = quorum_command(&nodes[0], false, &["describe", "--status"]);
    assert!(
        status.contains(&old_directory),
        "still the old voter: {status}"
    );

    let removed = quorum_command(
        &nodes[0],
        false,
        &[
            "remove-controller",
            "--controller-id",
            "3",
            &format!("--controller-directory-id={old_directory}"),
        ],
    );
    assert!(removed.contains("Removed KRaft controller 3"), "{removed}");
    let added = add(&nodes[0], &nodes[2]);
    assert!(added.contains("Added controller 3"), "{added}");
    let status = quorum_command(&nodes[1], false, &["describe", "--status"]);
    let voters = quorum_members(&status, "CurrentVoters:");
    assert_eq!(voters.len(), 3, "{status}");
    assert!(
        voters
            .iter()
            .any(|(id, dir)| *id == 3 && dir.as_ref().is_some_and(|d| *d != old_directory)),
        "voter 3 runs on its new directory: {status}"
    );
    // And it counts: with node 1 gone, nodes 2 and 3 take metadata changes.
    nodes[0].kill9();
    let created = create_replicated_by(&nodes[1], "after-replacement", 2, 2);
    assert!(
        created.contains("Created topic after-replacement"),
        "{created}"
    );
    // The leader caught the emptied log up from scratch: before
    // openraft's loosen-follower-log-revert, that reversion panicked it.
    for node in &nodes {
        assert!(!node.log().contains("panicked"), "{}", node.log());
    }
}
