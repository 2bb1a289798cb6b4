//! Transactions against a live `ottla`: librdkafka's (confluent-kafka)
//! transactional producer commits and aborts, sends offsets to a
//! transaction, and a read_committed consumer sees only committed records;
//! then Kafka's `kafka-transactions.sh` lists and describes what the
//! coordinator and the partitions know, and aborts a transaction left open.
//! On three nodes: a commit whose marker only the partition leader had when
//! it was cut off stays complete and visible (issue 27).

use std::time::{Duration, Instant};

use kafka_protocol::protocol::StrBytes;
use ottla_tests::groups::{committed, coordinator_of, GROUP_KEY, TRANSACTION_KEY};
use ottla_tests::ottla::Ottla;
use ottla_tests::tools::{kafka_tool, kafka_tool_command, ok, python_script};
use ottla_tests::wire::WireClient;

const TOPIC: &str = "txn-topic";
const TRANSACTIONAL_ID: &str = "py-txn";

/// argv: bootstrap, topic, transactional id. Prints the values a
/// read_committed consumer saw, one per line, then the offset committed
/// through the transaction.
const PRODUCE_AND_CONSUME: &str = r#"
import sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, txn_id = sys.argv[1:4]
admin = AdminClient({"bootstrap.servers": bootstrap})
for f in admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)]).values():
    f.result()

p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
p.init_transactions(30)

p.begin_transaction()
for i in range(10):
    p.produce(topic, value=f"committed-{i}", partition=i % 2)
p.commit_transaction(30)

p.begin_transaction()
for i in range(6):
    p.produce(topic, value=f"aborted-{i}", partition=i % 2)
p.flush(30)
p.abort_transaction(30)

# Consume-transform-produce: offsets committed with the transaction.
group = Consumer({"bootstrap.servers": bootstrap, "group.id": "py-eos"})
p.begin_transaction()
p.produce(topic, value="committed-last", partition=0)
p.send_offsets_to_transaction([TopicPartition(topic, 0, 5)], group.consumer_group_metadata(), 30)
p.commit_transaction(30)

c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "py-read-committed",
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "enable.partition.eof": True,
})
c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
seen, eof = [], set()
deadline = time.time() + 30
while time.time() < deadline and len(eof) < 2:
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
committed = group.committed([TopicPartition(topic, 0)], 30)
print(f"offset={committed[0].offset}")
group.close()
"#;

/// argv: bootstrap, topic, transactional id. Leaves a transaction open on
/// partition 1 (the producer exits without ending it).
const LEAVE_OPEN: &str = r#"
import os, sys
from confluent_kafka import Producer

bootstrap, topic, txn_id = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
p.init_transactions(30)
p.begin_transaction()
p.produce(topic, value="hanging", partition=1)
p.flush(30)
os._exit(0)
"#;

fn transactions_tool(node: &Ottla, args: &[&str]) -> String {
    let bootstrap = node.bootstrap();
    let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
    all.extend_from_slice(args);
    ok(kafka_tool("kafka-transactions.sh", &all, None))
}

/// The columns of the first row of a tool's table whose column `at` is `key`.
fn row<'a>(table: &'a str, at: usize, key: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|cols| cols.get(at) == Some(&key))
        .unwrap_or_else(|| panic!("no row with {key}:\n{table}"))
}

fn python_ok(node: &Ottla, code: &str, args: &[&str]) -> String {
    let out = python_script(code, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "python failed:\n{stdout}\n{}\nbroker log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        node.log()
    );
    stdout
}

#[test]
fn confluent_kafka_transactions_and_kafka_transactions_tool() {
    let node = Ottla::start(&[
        ("group.initial.rebalance.delay.ms", "0"),
        ("transaction.state.log.num.partitions", "5"),
        ("offsets.topic.num.partitions", "5"),
    ]);
    let bootstrap = node.bootstrap();
    let stdout = python_ok(
        &node,
        PRODUCE_AND_CONSUME,
        &[&bootstrap, TOPIC, TRANSACTIONAL_ID],
    );
    let mut expected: Vec<String> = (0..10).map(|i| format!("committed-{i}")).collect();
    expected.push("committed-last".to_string());
    expected.sort();
    expected.push("offset=5".to_string());
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines, expected, "broker log:\n{}", node.log());

    // TransactionalId Coordinator ProducerId TransactionState
    let listed = transactions_tool(&node, &["list"]);
    let committed = row(&listed, 0, TRANSACTIONAL_ID);
    assert_eq!(committed[3], "CompleteCommit", "{listed}");
    let producer_id = committed[2];

    // CoordinatorId TransactionalId ProducerId ProducerEpoch TransactionState ...
    let described = transactions_tool(&node, &["describe", "--transactional-id", TRANSACTIONAL_ID]);
    let d = row(&described, 1, TRANSACTIONAL_ID);
    assert_eq!(
        (d[0], d[2], d[4]),
        ("1", producer_id, "CompleteCommit"),
        "{described}"
    );

    // ProducerId ProducerEpoch LatestCoordinatorEpoch LastSequence
    // LastTimestamp CurrentTransactionStartOffset
    let producers = transactions_tool(
        &node,
        &["describe-producers", "--topic", TOPIC, "--partition", "0"],
    );
    let p = row(&producers, 0, producer_id);
    assert_eq!(p[5], "None", "no transaction open: {producers}");

    // A transaction left open shows up as Ongoing, with its start offset in
    // the partition; `abort` ends it there with WriteTxnMarkers.
    python_ok(&node, LEAVE_OPEN, &[&bootstrap, TOPIC, "py-open"]);
    let listed = transactions_tool(&node, &["list"]);
    let open = row(&listed, 0, "py-open");
    assert_eq!(open[3], "Ongoing", "{listed}");
    let producers = transactions_tool(
        &node,
        &["describe-producers", "--topic", TOPIC, "--partition", "1"],
    );
    let start = row(&producers, 0, open[2])[5].to_string();
    assert_ne!(start, "None", "{producers}");
    transactions_tool(
        &node,
        &[
            "abort",
            "--topic",
            TOPIC,
            "--partition",
            "1",
            "--start-offset",
            &start,
        ],
    );
    let producers = transactions_tool(
        &node,
        &["describe-producers", "--topic", TOPIC, "--partition", "1"],
    );
    assert_eq!(row(&producers, 0, open[2])[5], "None", "{producers}");
}

/// Issue 27 phase one. argv: bootstrap, topic, transactional id. Writes
/// six records to partition 0 in one transaction, prints `produced`, then
/// commits when a line arrives on stdin and prints `committed`.
const PRODUCE_THEN_COMMIT: &str = r#"
import os, sys
from confluent_kafka import Producer

bootstrap, topic, txn_id = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
p.init_transactions(30)
p.begin_transaction()
for i in range(6):
    p.produce(topic, value=f"committed-{i}", partition=0)
p.flush(30)
print("produced", flush=True)
sys.stdin.readline()
p.commit_transaction(60)
print("committed", flush=True)
os._exit(0)
"#;

/// Issue 27 phase two. argv: bootstrap, topic, transactional id. The same
/// transactional id's next transaction writes to partition 0 and aborts;
/// then a read_committed consumer prints what partition 0 holds.
const ABORT_NEXT_THEN_READ: &str = r#"
import os, sys, time
from confluent_kafka import Consumer, Producer, TopicPartition

bootstrap, topic, txn_id = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
p.init_transactions(60)
p.begin_transaction()
p.produce(topic, value="aborted-next", partition=0)
p.flush(30)
p.abort_transaction(30)

c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "issue-27",
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "enable.partition.eof": True,
})
c.assign([TopicPartition(topic, 0, 0)])
deadline = time.time() + 30
while time.time() < deadline:
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        break
    print(m.value().decode(), flush=True)
os._exit(0)
"#;

/// The coordinator's state of `transactional_id` (DescribeTransactions).
fn transaction_state(coordinator: &Ottla, transactional_id: &str) -> String {
    use kafka_protocol::messages::{DescribeTransactionsRequest, TransactionalId};
    let request =
        DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(
            StrBytes::from_string(transactional_id.to_string()),
        )]);
    let r = WireClient::connect(&coordinator.bootstrap()).send(0, &request);
    let t = &r.transaction_states[0];
    assert_eq!(t.error_code, 0, "describing {transactional_id}");
    t.transaction_state.to_string()
}

/// The leader and ISR of `topic`'s partition 0, as `node` sees them.
fn leader_and_isr(node: &Ottla, topic: &str) -> Option<(i32, Vec<i32>)> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, TopicName};
    let request =
        MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.to_string()))))]));
    let r = WireClient::connect(&node.bootstrap()).send(12, &request);
    let p = r
        .topics
        .first()?
        .partitions
        .iter()
        .find(|p| p.partition_index == 0)?;
    Some((p.leader_id.0, p.isr_nodes.iter().map(|b| b.0).collect()))
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no {what} after 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn signal(node: &Ottla, signal: libc::c_int) {
    // SAFETY: a signal to our own child process.
    unsafe { libc::kill(node.pid() as i32, signal) };
}

/// Issue 27: a committed transaction must not lose a record when the leader
/// that appended its COMMIT marker is cut off before its ISR had the
/// marker. Partition 0 lives on L (leader) and F; the coordinator is on a
/// third node. F is frozen (SIGSTOP) while the producer commits, so the
/// marker reaches L's log only; the transaction must stay PrepareCommit
/// (not complete) meanwhile. Then L is frozen and F thawed: F takes over
/// without the marker, and the coordinator must send it again to F. The
/// producer's next transaction aborts on partition 0; a read_committed
/// consumer must still see all six committed records (before the fix the
/// next ABORT closed them as aborted).
#[test]
fn a_commit_survives_its_marker_leader_being_cut_off_before_the_isr_had_it() {
    let nodes = Ottla::cluster(
        3,
        &[
            ("broker.heartbeat.interval.ms", "300"),
            // F is frozen for about request.timeout.ms: not long enough to be
            // fenced (and dropped from the ISR); L is frozen until fenced.
            ("broker.session.timeout.ms", "8000"),
            ("request.timeout.ms", "1500"),
            ("replica.socket.timeout.ms", "2000"),
            ("replica.fetch.backoff.ms", "200"),
            ("replica.fetch.wait.max.ms", "200"),
            ("auto.leader.rebalance.enable", "false"),
            ("transaction.state.log.num.partitions", "1"),
            ("transaction.state.log.replication.factor", "1"),
        ],
    );
    let topic = "issue-27";
    let id = "issue-27-txn";
    let coordinator = coordinator_of(&nodes[0], TRANSACTION_KEY, id);
    let others: Vec<i32> = (1..=3).filter(|n| *n != coordinator).collect();
    let (l, f) = (others[0], others[1]);
    let node = |n: i32| &nodes[(n - 1) as usize];
    let c = node(coordinator);
    let out = ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &c.bootstrap(),
            "--create",
            "--topic",
            topic,
            "--replica-assignment",
            &format!("{l}:{f}"),
            "--config",
            "min.insync.replicas=1",
        ],
        None,
    ));
    assert!(out.contains("Created topic"), "{out}");
    wait_for("a full ISR", || {
        leader_and_isr(c, topic).filter(|(leader, isr)| *leader == l && isr.len() == 2)
    });

    let bootstrap = format!("{},{}", node(l).bootstrap(), c.bootstrap());
    let mut producer = std::process::Command::new(ottla_tests::tools::python())
        .arg("-c")
        .arg(PRODUCE_THEN_COMMIT)
        .args([bootstrap.as_str(), topic, id])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("starting python");
    let mut stdout = std::io::BufReader::new(producer.stdout.take().unwrap());
    let mut line = String::new();
    let mut next_line = |line: &mut String| {
        line.clear();
        std::io::BufRead::read_line(&mut stdout, line).unwrap();
        line.trim().to_string()
    };
    assert_eq!(next_line(&mut line), "produced");

    signal(node(f), libc::SIGSTOP);
    // F's last fetch, sent before it froze, is answered (empty) once the
    // leader's replica.fetch.wait.max.ms passes; only then is no fetch of
    // F's left in flight to carry the marker to F when it thaws.
    std::thread::sleep(Duration::from_millis(1000));
    std::io::Write::write_all(producer.stdin.as_mut().unwrap(), b"commit\n").unwrap();
    let started = Instant::now();
    assert_eq!(next_line(&mut line), "committed", "the commit is reported");
    let committed_after = started.elapsed();
    assert!(producer.wait().unwrap().success());
    // The marker is on L only: the transaction must not be complete.
    assert_eq!(
        transaction_state(c, id),
        "PrepareCommit",
        "completed on a marker its ISR lacks (commit answered after {committed_after:?})"
    );

    signal(node(l), libc::SIGSTOP);
    signal(node(f), libc::SIGCONT);
    let cut_off = Instant::now();
    wait_for("F leading partition 0", || {
        leader_and_isr(c, topic).filter(|(leader, _)| *leader == f)
    });
    let failover = cut_off.elapsed();
    wait_for("the transaction's completion", || {
        (transaction_state(c, id) == "CompleteCommit").then_some(())
    });
    let completed = cut_off.elapsed();

    let bootstrap = format!("{},{}", node(f).bootstrap(), c.bootstrap());
    let out = python_script(ABORT_NEXT_THEN_READ, &[&bootstrap, topic, id]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "python failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Vec<&str> = stdout.lines().collect();
    let expected: Vec<String> = (0..6).map(|i| format!("committed-{i}")).collect();
    assert_eq!(seen, expected, "read_committed on the new leader {f}");
    println!(
        "commit answered after {} ms with the follower frozen; new leader after {} ms, \
         transaction complete {} ms after the leader was cut off; 6 of 6 records visible",
        committed_after.as_millis(),
        failover.as_millis(),
        completed.as_millis()
    );
    signal(node(l), libc::SIGCONT);
}

/// One transaction per (transactional id, group) pair given as
/// `tid:group` arguments: a record, the group's offset sent to the
/// transaction (`offset` = its position in the list + 1), a commit, and the
/// group's committed offset read back. Prints one offset per pair.
const SEND_OFFSETS: &str = r#"
import sys
from confluent_kafka import Consumer, Producer, TopicPartition
bootstrap, topic = sys.argv[1], sys.argv[2]
for n, pair in enumerate(sys.argv[3:], start=1):
    tid, group = pair.split(":")
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    p.begin_transaction()
    p.produce(topic, value=b"v", partition=0)
    p.send_offsets_to_transaction([TopicPartition(topic, 0, n)], c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    print(c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset, flush=True)
    c.close()
"#;

/// Issue 26 defect 1: a transaction's offsets commit whichever brokers
/// coordinate the transaction and the group. The group's coordinator asks
/// the transaction's coordinator, when that is another broker, whether its
/// offsets partition is in the transaction, as the partition leaders do
/// for Produce. Every one of the nine pairings on three brokers is tried
/// with librdkafka's send_offsets_to_transaction, then with the Java
/// client's sendOffsetsToTransaction (Kafka's own transactional copier,
/// which copies the input to another topic and commits its consumed
/// offsets in each transaction).
#[test]
fn transactional_offsets_commit_whichever_brokers_coordinate_the_group_and_the_transaction() {
    let nodes = Ottla::cluster(3, &[("offsets.topic.replication.factor", "3")]);
    ottla_tests::topics::create_topic_at(&nodes[0].bootstrap(), "eos-in", 1, &[]);
    // The first transactional id and the first group each node coordinates.
    let mut tids = std::collections::BTreeMap::new();
    let mut groups = std::collections::BTreeMap::new();
    for i in 0.. {
        let (tid, group) = (format!("eos-tx-{i}"), format!("eos-group-{i}"));
        tids.entry(coordinator_of(&nodes[0], TRANSACTION_KEY, &tid))
            .or_insert(tid);
        groups
            .entry(coordinator_of(&nodes[0], GROUP_KEY, &group))
            .or_insert(group);
        if tids.len() == 3 && groups.len() == 3 {
            break;
        }
        assert!(i < 200, "coordinators never spread: {tids:?} {groups:?}");
    }
    let pairs: Vec<String> = tids
        .values()
        .flat_map(|tid| groups.values().map(move |group| format!("{tid}:{group}")))
        .collect();
    let bootstrap = nodes
        .iter()
        .map(Ottla::bootstrap)
        .collect::<Vec<_>>()
        .join(",");
    let mut args = vec![bootstrap.as_str(), "eos-in"];
    args.extend(pairs.iter().map(String::as_str));
    let out = ok(python_script(SEND_OFFSETS, &args));
    let sent: Vec<&str> = out.lines().collect();
    let expected: Vec<String> = (1..=pairs.len()).map(|n| n.to_string()).collect();
    assert_eq!(sent, expected, "pairs {pairs:?}");

    // The copier counts one offset per record, so its input holds no
    // transaction markers.
    ottla_tests::topics::create_topic_at(&bootstrap, "java-in", 1, &[]);
    ottla_tests::topics::create_topic_at(&bootstrap, "eos-out", 1, &[]);

    let tids: Vec<&String> = tids.values().collect();
    let groups: Vec<&String> = groups.values().collect();
    // Three rounds of three copiers, each round a different tid and group
    // per copier (a Latin square): copiers sharing a transactional id would
    // fence each other.
    // Each round adds 12 records, so each copier has three transactions of
    // its group's offsets to commit.
    for round in 0..3 {
        let lines: String = (0..12).map(|i| format!("k{i}:v{i}\n")).collect();
        ottla_tests::topics::produce_keyed(&nodes[0], "java-in", &lines);
        let copiers: Vec<_> = (0..3)
            .map(|i| {
                let (tid, group) = (tids[i], groups[(i + round) % 3]);
                (
                    format!("{tid}:{group}"),
                    group,
                    copy_transactionally(&bootstrap, tid, group),
                )
            })
            .collect();
        for (pair, group, copier) in copiers {
            let output = copier
                .and_then(|c| finish_within(c, Duration::from_secs(60)))
                .unwrap_or_else(|e| panic!("running the copier for {pair}: {e}"));
            let stdout = ok(output);
            assert!(stdout.contains(r#""remaining":0"#), "{pair}: {stdout}");
            let coordinator = coordinator_of(&nodes[0], GROUP_KEY, group);
            assert_eq!(
                committed(&nodes[coordinator as usize - 1], group, "java-in"),
                std::collections::BTreeMap::from([(0, 12 * (round as i64 + 1))]),
                "the Java copier's offsets for {pair}"
            );
        }
    }
}

/// Waits for `child` to exit, killing it after `limit`; its output.
fn finish_within(
    mut child: std::process::Child,
    limit: Duration,
) -> std::io::Result<std::process::Output> {
    let start = Instant::now();
    while child.try_wait()?.is_none() && start.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    child.wait_with_output()
}

/// Starts Kafka's transactional copier, which copies java-in's partition 0
/// to eos-out with transactional id `tid` (so the same broker coordinates
/// it), committing its consumed offsets for `group` in each transaction of
/// four records.
fn copy_transactionally(
    bootstrap: &str,
    tid: &str,
    group: &str,
) -> std::io::Result<std::process::Child> {
    kafka_tool_command("kafka-run-class.sh")
        .args([
            "org.apache.kafka.tools.TransactionalMessageCopier",
            "--broker-list",
            bootstrap,
            "--input-topic",
            "java-in",
            "--input-partition",
            "0",
            "--output-topic",
            "eos-out",
            "--consumer-group",
            group,
            "--transactional-id",
            tid,
            "--transaction-size",
            "4",
            "--use-group-metadata",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
}
