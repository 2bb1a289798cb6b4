//! The transactional half of the fault workload: a librdkafka transactional
//! producer that writes one record to every partition of its topic per
//! transaction, commits two transactions out of three and aborts the third,
//! and appends each outcome to an fsync'd ledger as soon as it is known. The
//! check reads the topic back with read_committed: a committed transaction
//! is visible whole, an aborted one not at all, and one whose outcome the
//! producer could not learn (its commit timed out, say) is all or nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::faults::create_replicated_topic;
use crate::tools::{python, python_script};

pub const TXN_TOPIC: &str = "faults-txn";
pub const TXN_PARTITIONS: i32 = 3;

/// Ledger lines: `commit N`, `abort N` or `unknown N`.
const TXN_PRODUCER: &str = r#"
import os, sys, time
from confluent_kafka import Producer, KafkaException

bootstrap, topic, stop_file, ledger_path, partitions = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
ledger = open(ledger_path, "a")

def note(outcome, n):
    ledger.write(f"{outcome} {n}\n")
    ledger.flush()
    os.fsync(ledger.fileno())

def start():
    deadline = time.time() + 120
    while True:
        p = Producer({
            "bootstrap.servers": bootstrap,
            "transactional.id": "fault-txn",
            "transaction.timeout.ms": 30000,
            "message.timeout.ms": 30000,
            "linger.ms": 5,
        })
        try:
            p.init_transactions(30)
            return p
        except KafkaException as e:
            print(f"init_transactions: {e}", file=sys.stderr)
            if time.time() > deadline:
                raise
            time.sleep(0.5)

def finish(p, commit):
    # (outcome, producer to go on with). A new producer aborts whatever its
    # predecessor left open, unless the coordinator already had the commit.
    op = p.commit_transaction if commit else p.abort_transaction
    deadline = time.time() + 60
    while True:
        try:
            op(30)
            return ("commit" if commit else "abort"), p
        except KafkaException as e:
            err = e.args[0]
            print(f"{'commit' if commit else 'abort'}: {err}", file=sys.stderr)
            if err.retriable() and time.time() < deadline:
                continue
            if err.txn_requires_abort():
                try:
                    p.abort_transaction(30)
                    return "abort", p
                except KafkaException as e2:
                    print(f"abort: {e2}", file=sys.stderr)
            return ("unknown" if commit else "abort"), start()

p = start()
n = 0
while not os.path.exists(stop_file):
    commit = n % 3 != 2
    try:
        p.begin_transaction()
        for i in range(partitions):
            p.produce(topic, value=f"{n}:{i}", partition=i)
    except (KafkaException, BufferError) as e:
        print(f"transaction {n}: {e}", file=sys.stderr)
        commit = False
    outcome, p = finish(p, commit)
    note(outcome, n)
    n += 1
    time.sleep(0.02)
print(f"transactions {n}")
"#;

/// Reads every partition with read_committed up to its end (where every
/// transaction is complete, the last stable offset is the high watermark)
/// and writes `partition offset value` per record.
const COMMITTED_READER: &str = r#"
import sys, time
from confluent_kafka import Consumer, KafkaError, TopicPartition

bootstrap, topic, partitions, out_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "fault-txn-check",
    "isolation.level": "read_committed",
    "enable.partition.eof": True,
    "enable.auto.commit": False,
})
ends = [c.get_watermark_offsets(TopicPartition(topic, i), timeout=30)[1] for i in range(partitions)]
c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
position = [0] * partitions
deadline = time.time() + 120
with open(out_file, "w") as out:
    while any(position[i] < ends[i] for i in range(partitions)):
        if time.time() > deadline:
            sys.exit(f"read_committed did not reach the ends {ends}: at {position}")
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                position[m.partition()] = max(position[m.partition()], m.offset())
            continue
        position[m.partition()] = m.offset() + 1
        out.write(f"{m.partition()} {m.offset()} {m.value().decode()}\n")
c.close()
"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Commit,
    Abort,
    Unknown,
}

/// What the transactional producer did, and what read_committed saw.
#[derive(Debug, Default)]
pub struct TxnReport {
    /// Transaction number -> outcome, from the ledger.
    pub outcomes: BTreeMap<u64, Outcome>,
    /// `(partition, offset, transaction, record)` read back with read_committed.
    pub visible: Vec<(i32, i64, u64, i32)>,
}

impl TxnReport {
    pub fn count(&self, outcome: Outcome) -> usize {
        self.outcomes.values().filter(|&&o| o == outcome).count()
    }

    /// Every committed transaction visible whole and exactly once, every
    /// aborted one invisible, every unknown one all or nothing, nothing
    /// visible that the ledger does not know, and transactions in order
    /// within each partition.
    pub fn check(&self) {
        let mut seen: BTreeMap<u64, BTreeSet<i32>> = BTreeMap::new();
        for &(partition, offset, txn, record) in &self.visible {
            assert_eq!(
                record, partition,
                "transaction {txn}'s record {record} found in partition {partition}"
            );
            assert!(
                seen.entry(txn).or_default().insert(record),
                "transaction {txn}'s record {record} is visible twice (partition {partition}, offset {offset})"
            );
        }
        let whole: BTreeSet<i32> = (0..TXN_PARTITIONS).collect();
        for (&txn, &outcome) in &self.outcomes {
            let visible = seen.remove(&txn).unwrap_or_default();
            match outcome {
                Outcome::Commit => assert_eq!(
                    visible, whole,
                    "committed transaction {txn} is not visible whole to read_committed"
                ),
                Outcome::Abort => assert!(
                    visible.is_empty(),
                    "aborted transaction {txn} is visible to read_committed: records {visible:?}"
                ),
                Outcome::Unknown => assert!(
                    visible.is_empty() || visible == whole,
                    "transaction {txn} (outcome unknown to the producer) is visible in part: {visible:?}"
                ),
            }
        }
        assert!(
            seen.is_empty(),
            "read_committed shows transactions the ledger does not list: {:?}",
            seen.keys().take(5).collect::<Vec<_>>()
        );
        let mut last: BTreeMap<i32, (i64, u64)> = BTreeMap::new();
        let mut ordered = self.visible.clone();
        ordered.sort_unstable();
        for (partition, offset, txn, _) in ordered {
            if let Some((at, previous)) = last.insert(partition, (offset, txn)) {
                assert!(
                    previous < txn,
                    "partition {partition}: transaction {txn} at offset {offset} follows {previous} at {at}"
                );
            }
        }
    }
}

/// The running transactional producer.
pub struct TxnLoad {
    producer: Child,
    bootstrap: String,
    dir: tempfile::TempDir,
}

impl TxnLoad {
    /// Creates the topic (3 replicas, 2 in sync) and starts the producer.
    pub fn start(bootstrap: &str) -> Self {
        create_replicated_topic(bootstrap, TXN_TOPIC, TXN_PARTITIONS);
        let dir = tempfile::tempdir().unwrap();
        let producer = Command::new(python())
            .arg("-c")
            .arg(TXN_PRODUCER)
            .args([
                bootstrap,
                TXN_TOPIC,
                &dir.path().join("stop").display().to_string(),
                &Self::ledger(&dir).display().to_string(),
                &TXN_PARTITIONS.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting the transactional producer");
        Self {
            producer,
            bootstrap: bootstrap.to_string(),
            dir,
        }
    }

    fn ledger(dir: &tempfile::TempDir) -> PathBuf {
        dir.path().join("ledger")
    }

    /// Stops the producer after its current transaction and reads the topic
    /// back with read_committed.
    pub fn stop(self) -> TxnReport {
        std::fs::write(self.dir.path().join("stop"), b"").unwrap();
        let out = self.producer.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "transactional producer failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let outcomes: BTreeMap<u64, Outcome> = std::fs::read_to_string(Self::ledger(&self.dir))
            .unwrap()
            .lines()
            .map(|line| {
                let (outcome, txn) = line.split_once(' ').expect("a ledger line");
                let outcome = match outcome {
                    "commit" => Outcome::Commit,
                    "abort" => Outcome::Abort,
                    "unknown" => Outcome::Unknown,
                    other => panic!("unexpected ledger outcome {other}"),
                };
                (txn.parse().unwrap(), outcome)
            })
            .collect();
        let read = self.dir.path().join("read");
        let reader = python_script(
            COMMITTED_READER,
            &[
                &self.bootstrap,
                TXN_TOPIC,
                &TXN_PARTITIONS.to_string(),
                &read.display().to_string(),
            ],
        );
        assert!(
            reader.status.success(),
            "read_committed reader failed: {}",
            String::from_utf8_lossy(&reader.stderr)
        );
        let visible = std::fs::read_to_string(read)
            .unwrap()
            .lines()
            .map(|line| {
                let f: Vec<&str> = line.split(' ').collect();
                let (txn, record) = f[2].split_once(':').expect("txn:record");
                (
                    f[0].parse().unwrap(),
                    f[1].parse().unwrap(),
                    txn.parse().unwrap(),
                    record.parse().unwrap(),
                )
            })
            .collect();
        TxnReport { outcomes, visible }
    }
}
