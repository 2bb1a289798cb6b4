//! Transactions against a live `ottla`: librdkafka's (confluent-kafka)
//! transactional producer commits and aborts, sends offsets to a
//! transaction, and a read_committed consumer sees only committed records;
//! then Kafka's `kafka-transactions.sh` lists and describes what the
//! coordinator and the partitions know, and aborts a transaction left open.

use ottla_tests::ottla::Ottla;
use ottla_tests::tools::{kafka_tool, ok, python_script};

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
