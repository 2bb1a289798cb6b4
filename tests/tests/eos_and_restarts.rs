//! Exactly-once and restarts on a live `ottla`:
//!
//! - Java's transactional kafka-producer-perf-test.sh, and a confluent-kafka
//!   transaction aborted after committed ones, read at both isolation levels;
//! - librdkafka's consume-transform-produce loop with one aborted batch
//!   re-processed from the committed offsets: every input once in the output;
//! - kafka-python commits offsets with metadata and a second member of the
//!   group resumes from them;
//! - a transaction left open across a SIGTERM or SIGKILL restart is fenced
//!   by the next `init_transactions` and the LSO catches up with the log end;
//! - the broker restarts while a third member joins a group: the members
//!   converge and consume everything, re-consuming only uncommitted records.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, DescribeGroupsRequest, GroupId, ListOffsetsRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use ottla_tests::console_consumer::{every_offset_read, ConsoleConsumer, Record};
use ottla_tests::groups::committed;
use ottla_tests::ottla::Ottla;
use ottla_tests::tools::{kafka_tool, ok, python_script};
use ottla_tests::topics::create_topic;
use ottla_tests::wire::WireClient;

const OVERRIDES: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "0"),
    ("offsets.topic.num.partitions", "3"),
    ("transaction.state.log.num.partitions", "3"),
];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
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

/// argv: bootstrap, topic, partitions, isolation level. Prints the values of
/// every partition up to its end (for read_committed: the LSO), in
/// partition and offset order.
const READ_ALL: &str = r#"
import sys
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, partitions, isolation = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "reader",
    "isolation.level": isolation,
    "enable.auto.commit": False,
    "enable.partition.eof": True,
})
c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
seen = {p: [] for p in range(partitions)}
eof = set()
import time
deadline = time.time() + 30
while len(eof) < partitions:
    assert time.time() < deadline, "no EOF within 30 s"
    m = c.poll(0.5)
    if m is None:
        continue
    if m.error():
        eof.add(m.partition())
        continue
    seen[m.partition()].append((m.offset(), m.value().decode()))
c.close()
for p in range(partitions):
    for _, v in sorted(seen[p]):
        print(v)
"#;

fn read_all(node: &Ottla, topic: &str, partitions: u32, isolation: &str) -> Vec<String> {
    python_ok(
        node,
        READ_ALL,
        &[&node.bootstrap(), topic, &partitions.to_string(), isolation],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

/// Latest offsets of partitions 0..`partitions` (ListOffsets v2+): the log
/// end offset with isolation 0, the last stable offset with isolation 1.
fn latest_offsets(node: &Ottla, topic: &str, partitions: i32, isolation: i8) -> BTreeMap<i32, i64> {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
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
    let r = WireClient::connect(&node.bootstrap()).send(5, &req);
    r.topics[0]
        .partitions
        .iter()
        .map(|p| {
            assert_eq!(
                p.error_code, 0,
                "ListOffsets of {topic}-{}",
                p.partition_index
            );
            (p.partition_index, p.offset)
        })
        .collect()
}

/// Runs a console consumer on partition 0 from the beginning and returns
/// the values it printed.
fn console_consume(node: &Ottla, topic: &str, max: usize, props: &[&str]) -> Vec<String> {
    let bootstrap = node.bootstrap();
    let max = max.to_string();
    let mut args = vec![
        "--bootstrap-server",
        &bootstrap,
        "--topic",
        topic,
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--max-messages",
        &max,
        "--timeout-ms",
        "30000",
    ];
    for p in props {
        args.extend(["--consumer-property", p]);
    }
    let out = ok(kafka_tool("kafka-console-consumer.sh", &args, None));
    out.lines().map(str::to_string).collect()
}

/// argv: bootstrap, topic, transactional id, committed count, aborted count.
const COMMIT_THEN_ABORT: &str = r#"
import sys
from confluent_kafka import Producer
bootstrap, topic, txn_id, n_commit, n_abort = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
p.init_transactions(30)
p.begin_transaction()
for i in range(n_commit):
    p.produce(topic, value=f"committed-{i}", partition=0)
p.commit_transaction(30)
p.begin_transaction()
for i in range(n_abort):
    p.produce(topic, value=f"aborted-{i}", partition=0)
assert p.flush(30) == 0
p.abort_transaction(30)
"#;

#[test]
fn java_transactional_perf_test_and_an_aborted_python_transaction() {
    const N: usize = 2000;
    let node = Ottla::start(OVERRIDES);
    create_topic(&node, "tx-perf", 1, &[]);
    let out = ok(kafka_tool(
        "kafka-producer-perf-test.sh",
        &[
            "--topic",
            "tx-perf",
            "--num-records",
            &N.to_string(),
            "--record-size",
            "50",
            "--throughput",
            "-1",
            "--transactional-id",
            "tx-perf",
            "--transaction-duration-ms",
            "200",
            "--bootstrap-server",
            &node.bootstrap(),
            "--command-property",
            "linger.ms=5",
        ],
        None,
    ));
    assert!(out.contains(&format!("{N} records sent")), "{out}");
    // The perf test's payloads are 50 random capital letters.
    let payloads = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.len() == 50 && l.bytes().all(|b| b.is_ascii_uppercase()))
            .count()
    };
    let committed_view = console_consume(&node, "tx-perf", N, &["isolation.level=read_committed"]);
    assert_eq!(payloads(&committed_view), N);
    let uncommitted_view = console_consume(&node, "tx-perf", N, &[]);
    assert_eq!(payloads(&uncommitted_view), N);
    // Exactly N, nothing more, at either level; every transaction ended.
    assert_eq!(read_all(&node, "tx-perf", 1, "read_committed").len(), N);
    assert_eq!(read_all(&node, "tx-perf", 1, "read_uncommitted").len(), N);
    let end = latest_offsets(&node, "tx-perf", 1, 0);
    assert!(end[&0] > N as i64, "no transaction markers: {end:?}");
    assert_eq!(latest_offsets(&node, "tx-perf", 1, 1), end);
    // The Java producer uses transaction version 2, which the cluster
    // finalizes: its markers carry an epoch bumped past its data's.
    let segment = node
        .data_dir
        .join("logs/tx-perf-0/00000000000000000000.log");
    let dump = ok(kafka_tool(
        "kafka-dump-log.sh",
        &["--files", &segment.to_string_lossy()],
        None,
    ));
    let epochs: BTreeSet<&str> = dump
        .split("producerEpoch: ")
        .skip(1)
        .filter_map(|rest| rest.split_whitespace().next())
        .collect();
    assert!(
        epochs.len() >= 2,
        "one producer epoch throughout: {epochs:?}"
    );

    create_topic(&node, "tx-mixed", 1, &[]);
    python_ok(
        &node,
        COMMIT_THEN_ABORT,
        &[&node.bootstrap(), "tx-mixed", "py-abort", "12", "7"],
    );
    let committed: Vec<String> = (0..12).map(|i| format!("committed-{i}")).collect();
    let aborted: Vec<String> = (0..7).map(|i| format!("aborted-{i}")).collect();
    assert_eq!(read_all(&node, "tx-mixed", 1, "read_committed"), committed);
    assert_eq!(
        read_all(&node, "tx-mixed", 1, "read_uncommitted"),
        [committed.clone(), aborted.clone()].concat()
    );
    // 12 + 7 records and two markers; the LSO is past the abort marker.
    let end = latest_offsets(&node, "tx-mixed", 1, 0);
    assert_eq!(end[&0], 21);
    assert_eq!(latest_offsets(&node, "tx-mixed", 1, 1), end);
    // Kafka's console consumer agrees.
    let java = console_consume(&node, "tx-mixed", 19, &[]);
    assert_eq!(
        java.iter()
            .filter(|l| l.starts_with("committed-") || l.starts_with("aborted-"))
            .cloned()
            .collect::<Vec<_>>(),
        [committed, aborted].concat()
    );
}

/// argv: bootstrap, input topic, output topic, group, transactional id,
/// input count, batch number to abort. Prints "aborted <n>" (records
/// written in the aborted batch) and "batches <n>".
const EOS_LOOP: &str = r#"
import sys, time
from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING
bootstrap, src, dst, group, txn_id = sys.argv[1:6]
total, abort_at = int(sys.argv[6]), int(sys.argv[7])
c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": group,
    "isolation.level": "read_committed",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
})
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
p.init_transactions(30)
c.subscribe([src])
done, batch_no, aborted = 0, 0, 0
deadline = time.time() + 60
while done < total:
    assert time.time() < deadline, f"only {done} of {total} processed"
    msgs = [m for m in c.consume(25, timeout=1) if m.error() is None]
    if not msgs:
        continue
    batch_no += 1
    p.begin_transaction()
    for m in msgs:
        p.produce(dst, key=m.key(), value=b"out-" + m.value(), partition=0)
    if batch_no == abort_at:
        assert p.flush(30) == 0
        p.abort_transaction(30)
        aborted = len(msgs)
        # Back to what the group committed: the aborted batch comes again.
        assignment = c.assignment()
        for tp in c.committed(assignment, 30):
            off = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            c.seek(TopicPartition(tp.topic, tp.partition, off))
        continue
    positions = [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
    p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    done += len(msgs)
c.close()
print(f"aborted {aborted}")
print(f"batches {batch_no}")
"#;

#[test]
fn librdkafka_consume_transform_produce_is_exactly_once_across_an_abort() {
    const K: usize = 300;
    let node = Ottla::start(OVERRIDES);
    create_topic(&node, "eos-in", 2, &[]);
    create_topic(&node, "eos-out", 1, &[]);
    let produce = r#"
import sys
from confluent_kafka import Producer
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
for i in range(n):
    p.produce(topic, key=str(i), value=f"in-{i}", partition=i % 2)
assert p.flush(30) == 0
"#;
    python_ok(
        &node,
        produce,
        &[&node.bootstrap(), "eos-in", &K.to_string()],
    );
    let out = python_ok(
        &node,
        EOS_LOOP,
        &[
            &node.bootstrap(),
            "eos-in",
            "eos-out",
            "eos-group",
            "eos-loop",
            &K.to_string(),
            "3",
        ],
    );
    let aborted: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("aborted "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(aborted > 0, "nothing was aborted: {out}");

    let mut expected: Vec<String> = (0..K).map(|i| format!("out-in-{i}")).collect();
    expected.sort();
    let mut seen = read_all(&node, "eos-out", 1, "read_committed");
    seen.sort();
    assert_eq!(seen, expected, "{out}");
    // The aborted batch is in the log, hidden from read_committed only.
    let raw = read_all(&node, "eos-out", 1, "read_uncommitted");
    assert_eq!(raw.len(), K + aborted, "{out}");
    let raw: BTreeSet<String> = raw.into_iter().collect();
    assert_eq!(raw.len(), K);
    // The group's offsets were committed through the transactions.
    assert_eq!(
        committed(&node, "eos-group", "eos-in"),
        BTreeMap::from([(0, (K / 2) as i64), (1, (K / 2) as i64)])
    );
    let end = latest_offsets(&node, "eos-out", 1, 0);
    assert_eq!(latest_offsets(&node, "eos-out", 1, 1), end);
}

/// argv: bootstrap, topic. kafka-python: one member commits offsets with
/// metadata, a second member of the group resumes from them.
const KAFKA_PYTHON_COMMITS: &str = r#"
import sys, time
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
bootstrap, topic = sys.argv[1], sys.argv[2]
prod = KafkaProducer(bootstrap_servers=bootstrap)
for i in range(20):
    prod.send(topic, value=f"v{i}".encode(), partition=i % 2)
prod.flush()
prod.close()
tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

def member():
    return KafkaConsumer(
        bootstrap_servers=bootstrap, group_id="kp-group", enable_auto_commit=False,
        auto_offset_reset="earliest", consumer_timeout_ms=20000,
    )

def drain(c, n):
    got = []
    deadline = time.time() + 30
    while len(got) < n and time.time() < deadline:
        for tp, records in c.poll(timeout_ms=500).items():
            got.extend((tp.partition, r.offset, r.value.decode()) for r in records)
    return sorted(got)

a = member()
a.subscribe([topic])
first = drain(a, 20)
assert len(first) == 20, first
assert a.committed(tp0) is None, a.committed(tp0)
a.commit({tp0: OffsetAndMetadata(4, "meta-0", -1), tp1: OffsetAndMetadata(7, "meta-1", -1)})
c0, c1 = a.committed(tp0, metadata=True), a.committed(tp1, metadata=True)
print("a", c0.offset, c0.metadata, c1.offset, c1.metadata)
a.close()

b = member()
b.subscribe([topic])
rest = drain(b, 9)
print("b", " ".join(f"{p}:{o}:{v}" for p, o, v in rest))
c0, c1 = b.committed(tp0, metadata=True), b.committed(tp1, metadata=True)
print("b-committed", c0.offset, c0.metadata, c1.offset, c1.metadata, b.committed(tp0))
b.commit()
c0, c1 = b.committed(tp0, metadata=True), b.committed(tp1, metadata=True)
print("b-after", c0.offset, repr(c0.metadata), c1.offset, repr(c1.metadata))
b.close()
"#;

#[test]
fn kafka_python_commits_offsets_with_metadata_and_a_new_member_resumes() {
    let node = Ottla::start(OVERRIDES);
    create_topic(&node, "kp", 2, &[]);
    let out = python_ok(&node, KAFKA_PYTHON_COMMITS, &[&node.bootstrap(), "kp"]);
    let lines: Vec<&str> = out.lines().collect();
    // p0 holds v0, v2, ..., v18 at offsets 0..10; p1 v1, v3, ..., v19.
    let rest: Vec<String> = (4..10)
        .map(|o| format!("0:{o}:v{}", 2 * o))
        .chain((7..10).map(|o| format!("1:{o}:v{}", 2 * o + 1)))
        .collect();
    assert_eq!(
        lines,
        [
            "a 4 meta-0 7 meta-1".to_string(),
            format!("b {}", rest.join(" ")),
            "b-committed 4 meta-0 7 meta-1 4".to_string(),
            "b-after 10 '' 10 ''".to_string(),
        ],
        "broker log:\n{}",
        node.log()
    );
    assert_eq!(
        committed(&node, "kp-group", "kp"),
        BTreeMap::from([(0, 10), (1, 10)])
    );
}

/// argv: bootstrap, topic, transactional id, prefix, count, "commit" or
/// "leave-open". The open variant exits without ending the transaction.
const TXN_PHASE: &str = r#"
import os, sys
from confluent_kafka import Producer
bootstrap, topic, txn_id, prefix, n, how = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
p.init_transactions(60)
p.begin_transaction()
for i in range(n):
    p.produce(topic, value=f"{prefix}-{i}", partition=i % 2)
assert p.flush(30) == 0
if how == "commit":
    p.commit_transaction(30)
else:
    os._exit(0)
"#;

fn restart_mid_transaction(kill9: bool) {
    let mut node = Ottla::start(OVERRIDES);
    let topic = if kill9 {
        "mid-txn-kill9"
    } else {
        "mid-txn-term"
    };
    let txn_id = format!("{topic}-producer");
    create_topic(&node, topic, 2, &[]);
    let bootstrap = node.bootstrap();
    python_ok(
        &node,
        TXN_PHASE,
        &[&bootstrap, topic, &txn_id, "open", "6", "leave-open"],
    );
    let end = latest_offsets(&node, topic, 2, 0);
    assert_eq!(end, BTreeMap::from([(0, 3), (1, 3)]));
    // The open transaction holds the LSO back at its first offset.
    assert_eq!(
        latest_offsets(&node, topic, 2, 1),
        BTreeMap::from([(0, 0), (1, 0)])
    );
    if kill9 {
        node.kill9();
    } else {
        assert_eq!(node.stop(), Some(0));
    }
    node.restart();
    // Still open after the restart.
    assert_eq!(
        latest_offsets(&node, topic, 2, 1),
        BTreeMap::from([(0, 0), (1, 0)]),
        "broker log:\n{}",
        node.log()
    );
    python_ok(
        &node,
        TXN_PHASE,
        &[&bootstrap, topic, &txn_id, "new", "6", "commit"],
    );
    let mut new: Vec<String> = (0..6).map(|i| format!("new-{i}")).collect();
    new.sort();
    let mut seen = read_all(&node, topic, 2, "read_committed");
    seen.sort();
    assert_eq!(seen, new, "broker log:\n{}", node.log());
    let mut raw = read_all(&node, topic, 2, "read_uncommitted");
    raw.sort();
    let mut all: Vec<String> = (0..6)
        .map(|i| format!("open-{i}"))
        .chain(new.iter().cloned())
        .collect();
    all.sort();
    assert_eq!(raw, all);
    // Per partition: 3 open records, the abort marker, 3 new, the commit
    // marker; nothing holds the LSO back.
    let end = latest_offsets(&node, topic, 2, 0);
    assert_eq!(end, BTreeMap::from([(0, 8), (1, 8)]));
    assert_eq!(latest_offsets(&node, topic, 2, 1), end);
    let listed = ok(kafka_tool(
        "kafka-transactions.sh",
        &["--bootstrap-server", &bootstrap, "list"],
        None,
    ));
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(txn_id.as_str()) && l.contains("CompleteCommit")),
        "{listed}"
    );
}

#[test]
fn an_open_transaction_is_fenced_after_a_sigterm_restart() {
    restart_mid_transaction(false);
}

#[test]
fn an_open_transaction_is_fenced_after_a_sigkill_restart() {
    restart_mid_transaction(true);
}

/// The group members' settings: quick commits, sessions and reconnects.
const MEMBER_PROPS: &[&str] = &[
    "enable.auto.commit=true",
    "auto.commit.interval.ms=500",
    "session.timeout.ms=6000",
    "heartbeat.interval.ms=500",
    "reconnect.backoff.max.ms=500",
];

/// A classic group's state and member count (DescribeGroups v5).
fn classic_group(node: &Ottla, group: &str) -> (String, usize) {
    let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
    let r = WireClient::connect(&node.bootstrap()).send(5, &req);
    let g = &r.groups[0];
    (g.group_state.to_string(), g.members.len())
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How many distinct offsets the members read between them.
fn distinct_offsets(consumers: &[ConsoleConsumer]) -> usize {
    consumers
        .iter()
        .flat_map(|c| c.records())
        .map(|(p, o, _)| (p, o))
        .collect::<BTreeSet<_>>()
        .len()
}

/// Waits until the members together have read `total` offsets; else reports
/// what each read last, and what `state` says.
fn wait_for_every_offset(
    consumers: &[ConsoleConsumer],
    total: usize,
    timeout: Duration,
    state: impl Fn() -> String,
) -> bool {
    let start = Instant::now();
    while distinct_offsets(consumers) < total {
        if start.elapsed() > timeout {
            let mut report = String::new();
            for (i, c) in consumers.iter().enumerate() {
                let mut last: BTreeMap<i32, i64> = BTreeMap::new();
                for (p, o, _) in c.records() {
                    let e = last.entry(p).or_insert(o);
                    *e = (*e).max(o);
                }
                report += &format!(" member-{i} {last:?}");
            }
            eprintln!("stalled: {}, last offsets{report}", state());
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

fn produce_values(node: &Ottla, topic: &str, range: std::ops::Range<usize>) {
    let code = r#"
import sys
from confluent_kafka import Producer
bootstrap, topic, lo, hi = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
for i in range(lo, hi):
    p.produce(topic, key=str(i), value=f"value-{i}")
assert p.flush(30) == 0
"#;
    python_ok(
        node,
        code,
        &[
            &node.bootstrap(),
            topic,
            &range.start.to_string(),
            &range.end.to_string(),
        ],
    );
}

#[test]
fn a_group_converges_after_a_restart_during_a_rebalance() {
    const N: usize = 2000;
    const GROUP: &str = "rebalancing";
    const TOPIC: &str = "rebalancing-orders";
    let mut node = Ottla::start(OVERRIDES);
    create_topic(&node, TOPIC, 6, &[]);
    let mut consumers: Vec<ConsoleConsumer> = (0..2)
        .map(|i| ConsoleConsumer::start(&node, &format!("member-{i}"), TOPIC, GROUP, MEMBER_PROPS))
        .collect();
    wait_for("two members", Duration::from_secs(60), || {
        (classic_group(&node, GROUP) == ("Stable".to_string(), 2)).then_some(())
    });
    produce_values(&node, TOPIC, 0..N / 2);
    wait_for("the first half", Duration::from_secs(60), || {
        (distinct_offsets(&consumers) >= N / 2).then_some(())
    });

    // A third member joins; the broker goes down as soon as the group
    // starts rebalancing for it.
    consumers.push(ConsoleConsumer::start(
        &node,
        "member-2",
        TOPIC,
        GROUP,
        MEMBER_PROPS,
    ));
    let state_at_restart = wait_for("the third member's join", Duration::from_secs(60), || {
        let (state, members) = classic_group(&node, GROUP);
        (state != "Stable" || members == 3).then_some((state, members))
    });
    let before_restart = committed(&node, GROUP, TOPIC);
    assert_eq!(node.stop(), Some(0));
    node.restart();

    // All three converge on one generation, then share the second half.
    wait_for("three members", Duration::from_secs(60), || {
        (classic_group(&node, GROUP) == ("Stable".to_string(), 3)).then_some(())
    });
    produce_values(&node, TOPIC, N / 2..N);
    // Every record reaches a member. A member whose partitions were revoked
    // and assigned again throws away what it had fetched; its fetch session
    // must not have moved past those records (it once did, and the records
    // were skipped, or the partition parked at the log end).
    let reached = wait_for_every_offset(&consumers, N, Duration::from_secs(60), || {
        format!(
            "ends {:?}, committed {:?}",
            latest_offsets(&node, TOPIC, 6, 0),
            committed(&node, GROUP, TOPIC)
        )
    });
    let per_member: Vec<usize> = consumers.iter().map(|c| c.records().len()).collect();
    for c in &mut consumers {
        c.stop();
    }
    assert!(reached, "not every record reached a member");
    let mut records: Vec<Record> = Vec::new();
    for c in &consumers {
        records.extend(c.records());
    }

    let ends = latest_offsets(&node, TOPIC, 6, 0);
    assert_eq!(ends.values().sum::<i64>(), N as i64);
    let seen = every_offset_read(&ends, &records);
    let values: BTreeSet<&str> = seen.values().map(|(v, _)| v.as_str()).collect();
    assert_eq!(values.len(), N);
    let mut duplicates = 0;
    for (&(p, o), (_, n)) in &seen {
        if *n > 1 {
            duplicates += n - 1;
            let from = before_restart.get(&p).copied().unwrap_or(0);
            assert!(
                o >= from,
                "partition {p} offset {o} consumed {n} times though {from} was committed"
            );
        }
    }
    eprintln!(
        "restarted in {state_at_restart:?}; {} records, {duplicates} re-consumed, per member {per_member:?}",
        records.len()
    );
    assert_eq!(committed(&node, GROUP, TOPIC), ends);
    assert_eq!(classic_group(&node, GROUP).0, "Empty");
}
