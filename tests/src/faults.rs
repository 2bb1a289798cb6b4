//! Fault-test tooling: a three-node cluster with one replicated topic, an
//! acks=all idempotent producer (librdkafka) running in the background that
//! records every acknowledged record, a consumer reading alongside it, and
//! the checks that every acknowledged record was read exactly once, in
//! order, by that consumer and is in the log files of every replica.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::describe_quorum_request::{
    DescribeQuorumRequest, PartitionData, TopicData,
};
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_protocol::batch::BatchIter;
use ottla_protocol::records::{records_section, walk_records};

use crate::netns::NodeNetwork;
use crate::ottla::Ottla;
use crate::tools::python;
use crate::wire::WireClient;

pub const TOPIC: &str = "faults";
pub const PARTITIONS: i32 = 3;

/// Short timeouts, so faults are detected within seconds.
pub const FAULT_SETTINGS: &[(&str, &str)] = &[
    ("broker.heartbeat.interval.ms", "300"),
    ("broker.session.timeout.ms", "2500"),
    ("replica.lag.time.max.ms", "4000"),
    ("replica.fetch.backoff.ms", "200"),
];

/// Produces `<partition>:<seq>` values round-robin over the partitions until
/// the stop file appears, then flushes and prints, as one line each: the
/// acknowledged records (`partition offset value delivered_at`, offset -1
/// when librdkafka acknowledged without one), then `failed N` and `sent N`.
const PRODUCER: &str = r#"
import os, sys, time
from confluent_kafka import Producer

bootstrap, topic, stop_file, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
config = {
    "bootstrap.servers": bootstrap,
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "message.timeout.ms": 120000,
}
# OTTLA_FAULT_CLIENT_LOG=FILE: librdkafka's debug log, to see what a pause
# was spent on from the client's side.
log_file = os.environ.get("OTTLA_FAULT_CLIENT_LOG")
if log_file:
    import logging
    logging.basicConfig(filename=log_file, level=logging.DEBUG, format="%(created).3f %(message)s")
    config["debug"] = "broker,topic,msg,eos,metadata,protocol"
    config["logger"] = logging.getLogger()
p = Producer(config)
acked, failed = [], [0]
def delivered(err, msg):
    if err is not None:
        failed[0] += 1
        print(f"delivery failed: {err}", file=sys.stderr)
        return
    # librdkafka acknowledges with no offset (None) a message it knows was
    # persisted without knowing where: a request whose outcome was uncertain
    # (timeout, dropped connection) followed by a later one that succeeded
    # (its implicit ack). Printed as -1.
    offset = msg.offset() if msg.offset() is not None else -1
    acked.append(f"{msg.partition()} {offset} {msg.value().decode()} {time.time():.3f}")
seq = [0] * partitions
while not os.path.exists(stop_file):
    for part in range(partitions):
        while True:
            try:
                p.produce(topic, value=f"{part}:{seq[part]}", partition=part, on_delivery=delivered)
                break
            except BufferError:
                p.poll(0.1)
        seq[part] += 1
    p.poll(0)
    time.sleep(0.005)
remaining = p.flush(120)
for line in acked:
    print(line)
print(f"failed {failed[0] + remaining}")
print(f"sent {sum(seq)}")
"#;

/// Reads every partition from the beginning while the fault happens, and
/// writes `partition offset value` per record to the output file. Once the
/// drain file names each partition's end offset (`end0,end1,...`), reads
/// up to those ends and stops.
const CONSUMER: &str = r#"
import os, sys, time
from confluent_kafka import Consumer, TopicPartition

bootstrap, topic, partitions, drain_file, out_file = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
c = Consumer({
    "bootstrap.servers": bootstrap,
    "group.id": "fault-check",
    "enable.auto.commit": False,
})
c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
position = [0] * partitions
ends, deadline = None, None
with open(out_file, "w") as out:
    while ends is None or any(position[i] < ends[i] for i in range(partitions)):
        if ends is None and os.path.exists(drain_file):
            ends = [int(e) for e in open(drain_file).read().split(",")]
            deadline = time.time() + 120
        if deadline is not None and time.time() > deadline:
            sys.exit(f"did not reach the ends {ends}: at {position}")
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        position[m.partition()] = m.offset() + 1
        out.write(f"{m.partition()} {m.offset()} {m.value().decode()}\n")
c.close()
"#;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Acked {
    pub partition: i32,
    /// -1: acknowledged without an offset (librdkafka knew the message was
    /// persisted, not where); its value must then be in the log once.
    pub offset: i64,
    pub value: String,
}

pub struct LoadReport {
    pub acked: Vec<Acked>,
    /// What the consumer read while the producer ran, and after.
    pub consumed: Vec<Acked>,
    pub failed: usize,
    pub sent: usize,
    /// The longest time the producer went without any acknowledgement.
    pub unavailable: Duration,
    /// When each acknowledgement arrived (seconds since the Unix epoch), sorted.
    pub ack_times: Vec<f64>,
}

/// The background producer and consumer.
pub struct Load {
    producer: Child,
    consumer: Child,
    dir: tempfile::TempDir,
}

impl Load {
    pub fn start(bootstrap: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str| dir.path().join(name).display().to_string();
        let producer = Command::new(python())
            .arg("-c")
            .arg(PRODUCER)
            .args([bootstrap, TOPIC, &file("stop"), &PARTITIONS.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting the producer");
        let consumer = Command::new(python())
            .arg("-c")
            .arg(CONSUMER)
            .args([
                bootstrap,
                TOPIC,
                &PARTITIONS.to_string(),
                &file("drain"),
                &file("consumed"),
            ])
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting the consumer");
        Self {
            producer,
            consumer,
            dir,
        }
    }

    /// Tells the consumer where each partition ends (past the last
    /// acknowledged record), waits for it, and returns what it read.
    fn drain_consumer(consumer: Child, dir: &Path, acked: &[Acked]) -> Vec<Acked> {
        let ends: Vec<String> = (0..PARTITIONS)
            .map(|p| {
                let last = acked
                    .iter()
                    .filter(|a| a.partition == p)
                    .map(|a| a.offset)
                    .max();
                last.map_or(0, |o| o + 1).to_string()
            })
            .collect();
        let drain = dir.join("drain");
        let staged = dir.join("drain.tmp");
        std::fs::write(&staged, ends.join(",")).unwrap();
        std::fs::rename(&staged, &drain).unwrap();
        let out = consumer.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "consumer failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(dir.join("consumed"))
            .unwrap()
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                Acked {
                    partition: f[0].parse().unwrap(),
                    offset: f[1].parse().unwrap(),
                    value: f[2].to_string(),
                }
            })
            .collect()
    }

    pub fn stop(self) -> LoadReport {
        let Load {
            producer,
            consumer,
            dir,
        } = self;
        std::fs::write(dir.path().join("stop"), b"").unwrap();
        let out = producer.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "producer failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let mut acked = Vec::new();
        let mut times = Vec::new();
        let (mut failed, mut sent) = (usize::MAX, 0);
        for line in stdout.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            match f.as_slice() {
                ["failed", n] => failed = n.parse().unwrap(),
                ["sent", n] => sent = n.parse().unwrap(),
                [p, o, v, t] => {
                    acked.push(Acked {
                        partition: p.parse().unwrap(),
                        offset: o.parse().unwrap(),
                        value: v.to_string(),
                    });
                    times.push(t.parse::<f64>().unwrap());
                }
                _ => panic!("unexpected producer output: {line}"),
            }
        }
        times.sort_by(f64::total_cmp);
        let gap = times.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
        let consumed = Self::drain_consumer(consumer, dir.path(), &acked);
        LoadReport {
            consumed,
            acked,
            failed,
            sent,
            unavailable: Duration::from_secs_f64(gap),
            ack_times: times,
        }
    }
}

/// Creates `topic` with 3 replicas, 2 of them required in sync, as the
/// fault tests' topics are.
pub fn create_replicated_topic(bootstrap: &str, topic: &str, partitions: i32) {
    let replicated = [
        "--replication-factor",
        "3",
        "--config",
        "min.insync.replicas=2",
    ];
    let out = crate::topics::create_topic_at(bootstrap, topic, partitions as u32, &replicated);
    assert!(out.contains("Created topic"), "{out}");
}

/// Seconds since the Unix epoch: the clock of acknowledgements, faults and
/// the nodes' log lines alike.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Three nodes, each in a network namespace of its own (so the network
/// between them can be cut), and the replicated topic, every ISR full.
pub struct FaultCluster {
    pub nodes: Vec<Ottla>,
    /// Dropped after the nodes, which run in it; shared by the two clusters
    /// of a [`mirrored_pair`](Self::mirrored_pair).
    network: Rc<RefCell<NodeNetwork>>,
    /// The network slot of node 1.
    first_slot: usize,
}

impl FaultCluster {
    pub fn start() -> Self {
        Self::start_with(FAULT_SETTINGS)
    }

    /// As [`start`](Self::start), the nodes with `settings`.
    pub fn start_with(settings: &[(&str, &str)]) -> Self {
        let network = Rc::new(RefCell::new(NodeNetwork::create(3)));
        let cluster = Self::start_in(network, 0, settings);
        cluster.create_topic();
        cluster
    }

    /// A source cluster with the replicated topic and a destination cluster
    /// without it (mirroring will create it, three replicas each), on one
    /// network: a node cut off is cut off from both clusters' nodes.
    pub fn mirrored_pair() -> (Self, Self) {
        let network = Rc::new(RefCell::new(NodeNetwork::create(6)));
        let source = Self::start_in(network.clone(), 0, FAULT_SETTINGS);
        source.create_topic();
        let mut settings = FAULT_SETTINGS.to_vec();
        settings.extend([
            ("default.replication.factor", "3"),
            ("min.insync.replicas", "2"),
        ]);
        let destination = Self::start_in(network, 3, &settings);
        (source, destination)
    }

    fn start_in(
        network: Rc<RefCell<NodeNetwork>>,
        first_slot: usize,
        settings: &[(&str, &str)],
    ) -> Self {
        let nodes = Ottla::cluster_in(&network.borrow(), first_slot, 3, settings);
        Self {
            nodes,
            network,
            first_slot,
        }
    }

    fn create_topic(&self) {
        create_replicated_topic(&self.nodes[0].bootstrap(), TOPIC, PARTITIONS);
        self.wait_full_isr();
    }

    /// Cuts node `id` off from every other node of the network (the
    /// clients on the host still reach it).
    pub fn cut_off(&self, id: i32) {
        self.network.borrow_mut().cut_off(self.slot(id));
    }

    /// Undoes [`cut_off`](Self::cut_off).
    pub fn heal(&self, id: i32) {
        self.network.borrow_mut().heal(self.slot(id));
    }

    /// Cuts every node here off from every node of `other` (which shares
    /// this network), as a partition between two sites.
    pub fn cut_from(&self, other: &FaultCluster) {
        let (mine, theirs) = (self.slots(), other.slots());
        self.network.borrow_mut().cut_between(&mine, &theirs);
    }

    /// Undoes [`cut_from`](Self::cut_from).
    pub fn heal_from(&self, other: &FaultCluster) {
        let (mine, theirs) = (self.slots(), other.slots());
        self.network.borrow_mut().heal_between(&mine, &theirs);
    }

    fn slots(&self) -> Vec<usize> {
        (1..=self.nodes.len() as i32)
            .map(|id| self.slot(id))
            .collect()
    }

    fn slot(&self, id: i32) -> usize {
        self.first_slot + (id - 1) as usize
    }

    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(Ottla::bootstrap)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A node that is running (not `but`), to ask.
    fn live(&self, but: &[i32]) -> &Ottla {
        self.nodes
            .iter()
            .enumerate()
            .find(|(i, n)| n.is_running() && !but.contains(&(*i as i32 + 1)))
            .map(|(_, n)| n)
            .expect("a running node")
    }

    /// partition -> (leader, isr), as `node` sees it.
    pub fn partitions(node: &Ottla) -> BTreeMap<i32, (i32, Vec<i32>)> {
        let request = MetadataRequest::default().with_topics(Some(vec![
            kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str(TOPIC)))),
        ]));
        let response =
            std::panic::catch_unwind(|| WireClient::connect(&node.bootstrap()).send(12, &request));
        let Ok(response) = response else {
            return BTreeMap::new();
        };
        response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| {
                (
                    p.partition_index,
                    (p.leader_id.0, p.isr_nodes.iter().map(|b| b.0).collect()),
                )
            })
            .collect()
    }

    /// Watches `witness`'s view for up to `hold` until no partition is led
    /// by one of `victims` or has one in its ISR; returns when that was
    /// seen (seconds since the Unix epoch), or None if not within `hold`
    /// (a session not over yet, two nodes down with no quorum left). Then
    /// waits out the rest of `hold`: the broker's own part of a failover,
    /// apart from when the clients find the new leaders.
    pub fn watch_failover(&self, victims: &[i32], witness: i32, hold: Duration) -> Option<f64> {
        let until = Instant::now() + hold;
        let witness = &self.nodes[(witness - 1) as usize];
        let mut out_at = None;
        while out_at.is_none() && Instant::now() < until {
            let view = Self::partitions(witness);
            if view.len() == PARTITIONS as usize
                && view.values().all(|(leader, isr)| {
                    !victims.contains(leader) && !isr.iter().any(|b| victims.contains(b))
                })
            {
                out_at = Some(unix_now());
            } else {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        std::thread::sleep(until.saturating_duration_since(Instant::now()));
        out_at
    }

    pub fn leader_of(&self, partition: i32) -> i32 {
        Self::partitions(self.live(&[]))[&partition].0
    }

    /// Waits until `partition` is led by a broker other than `old`; returns
    /// how long that took.
    pub fn wait_new_leader(&self, partition: i32, old: i32, since: Instant) -> Duration {
        let node = self.live(&[old]);
        loop {
            if let Some((leader, _)) = Self::partitions(node).get(&partition) {
                if *leader > 0 && *leader != old {
                    return since.elapsed();
                }
            }
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "no new leader for partition {partition}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_full_isr(&self) {
        self.wait_full_isr_seen_by(1, Duration::ZERO);
    }

    /// Waits until node `witness` (or, while it is down, any running node)
    /// sees an active controller and every partition led with all three
    /// replicas in sync, for `steady` on end; returns when that began
    /// (seconds since the Unix epoch). After two nodes were killed, the
    /// spared node's view is the one from before the fault (nothing could
    /// be committed without them) and shows full ISRs; the restarted brokers
    /// register again once a controller is elected, which takes them out of
    /// the ISRs until they catch up. Holding the view for a while sees that.
    pub fn wait_full_isr_seen_by(&self, witness: i32, steady: Duration) -> f64 {
        let start = Instant::now();
        let mut full_since: Option<(Instant, f64)> = None;
        loop {
            let node = &self.nodes[(witness - 1) as usize];
            let node = if node.is_running() {
                node
            } else {
                self.live(&[])
            };
            let view = Self::partitions(node);
            let full = view.len() == PARTITIONS as usize
                && view.values().all(|(l, isr)| *l > 0 && isr.len() == 3)
                && Self::active_controller(node).is_some();
            if !full {
                full_since = None;
            } else {
                let (since, at) = *full_since.get_or_insert((Instant::now(), unix_now()));
                if since.elapsed() >= steady {
                    return at;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "ISRs never refilled: {view:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until `witness` reports an active controller other than `old`;
    /// returns how long that took since `since`.
    pub fn wait_new_active_controller(witness: &Ottla, old: i32, since: Instant) -> Duration {
        loop {
            if Self::active_controller(witness).is_some_and(|c| c != old) {
                return since.elapsed();
            }
            assert!(
                since.elapsed() < Duration::from_secs(60),
                "no new active controller"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The active controller, as node `node` reports it (DescribeQuorum).
    pub fn active_controller(node: &Ottla) -> Option<i32> {
        let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
            .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
        let response =
            std::panic::catch_unwind(|| WireClient::connect(&node.bootstrap()).send(2, &request))
                .ok()?;
        let p = &response.topics.first()?.partitions.first()?;
        (p.error_code == 0 && p.leader_id.0 > 0).then_some(p.leader_id.0)
    }

    /// Waits until every replica of each `(topic, partitions)` holds the same
    /// batches, byte for byte (the load has stopped; followers may still be
    /// fetching the last ones).
    pub fn wait_replicas_agree(&self, topics: &[(&str, i32)]) {
        let start = Instant::now();
        loop {
            let differing: Vec<String> = topics
                .iter()
                .flat_map(|&(topic, partitions)| (0..partitions).map(move |p| (topic, p)))
                .filter(|(topic, p)| {
                    let copies: Vec<Vec<u8>> = self
                        .nodes
                        .iter()
                        .map(|n| {
                            read_batches(&n.data_dir.join("logs").join(format!("{topic}-{p}")))
                        })
                        .collect();
                    copies.windows(2).any(|w| w[0] != w[1])
                })
                .map(|(topic, p)| format!("{topic}-{p}"))
                .collect();
            if differing.is_empty() {
                return;
            }
            if start.elapsed() >= Duration::from_secs(60) {
                let kept: Vec<String> = differing.iter().map(|tp| self.keep_copies(tp)).collect();
                panic!("replicas still differ after 60 s: {}", kept.join("; "));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// A node's directory of a partition of the fault topic.
    pub fn partition_dir(&self, node: usize, partition: i32) -> PathBuf {
        self.nodes[node]
            .data_dir
            .join("logs")
            .join(format!("{TOPIC}-{partition}"))
    }

    /// Waits until every replica here holds, for each partition of the
    /// fault topic, exactly the batches of `source`'s node 1, byte for byte:
    /// where a mirror of `source` (its load stopped) must arrive.
    pub fn wait_mirror_of(&self, source: &FaultCluster) {
        let start = Instant::now();
        loop {
            let behind: Vec<String> = (0..PARTITIONS)
                .filter_map(|p| {
                    let wanted = read_batches(&source.partition_dir(0, p));
                    let held: Vec<Option<usize>> = (0..self.nodes.len())
                        .map(|n| read_batches(&self.partition_dir(n, p)))
                        .map(|b| (b != wanted).then_some(b.len()))
                        .collect();
                    held.iter().any(Option::is_some).then(|| {
                        format!(
                            "{TOPIC}-{p}: source {} bytes, replicas {held:?} (None: identical)",
                            wanted.len()
                        )
                    })
                })
                .collect();
            if behind.is_empty() {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "the mirror never matched its source: {}",
                behind.join("; ")
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Copies every node's directory of the partition `tp` ("topic-p") out
    /// of the test's temporary dirs, for a look after the test is gone;
    /// says where, with each copy's size and where the copies part.
    fn keep_copies(&self, tp: &str) -> String {
        let kept = std::env::temp_dir().join(format!(
            "ottla-diverged-{tp}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        ));
        let mut sizes = Vec::new();
        let mut copies = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let dir = n.data_dir.join("logs").join(tp);
            let into = kept.join(format!("node-{}", i + 1));
            let _ = std::fs::create_dir_all(&into);
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let _ = std::fs::copy(entry.path(), into.join(entry.file_name()));
            }
            let batches = read_batches(&dir);
            sizes.push(batches.len());
            copies.push(batches);
        }
        let parts_at = copies
            .windows(2)
            .filter_map(|w| w[0].iter().zip(&w[1]).position(|(a, b)| a != b))
            .min();
        format!(
            "{tp}: batch bytes per node {sizes:?}, first difference at byte {parts_at:?}, copies in {}",
            kept.display()
        )
    }

    /// No node's log (across its restarts) shows a panic.
    pub fn assert_no_panics(&self) {
        for (i, node) in self.nodes.iter().enumerate() {
            let log = node.log();
            if let Some(at) = log.find("panicked") {
                let from = log[..at].rfind('\n').map_or(0, |n| n + 1);
                let line = log[from..].lines().next().unwrap_or_default();
                panic!("node {} panicked: {line}", i + 1);
            }
        }
    }

    /// Checks that every acknowledged record is read back exactly once and
    /// in order by a consumer, and sits at its offset in the log of every
    /// replica. Stops the cluster (SIGKILL: the files are read as they are).
    pub fn verify(mut self, report: &LoadReport) {
        assert_eq!(report.failed, 0, "every send was acknowledged");
        assert_eq!(report.acked.len(), report.sent, "acknowledgements");
        self.wait_full_isr();
        check_log(
            "the consumer that ran through the fault",
            &report.consumed,
            &report.acked,
        );
        for node in &mut self.nodes {
            node.kill9();
        }
        for node in &self.nodes {
            let mut on_disk = Vec::new();
            for p in 0..PARTITIONS {
                let dir = node.data_dir.join("logs").join(format!("{TOPIC}-{p}"));
                on_disk.extend(read_log_dir(&dir).into_iter().map(|(offset, value)| Acked {
                    partition: p,
                    offset,
                    value,
                }));
            }
            check_log(
                &format!("the replica in {}", node.data_dir.display()),
                &on_disk,
                &report.acked,
            );
        }
    }
}

/// Every acknowledged record is at its offset in `log` (or, acknowledged
/// without one, somewhere in its partition), each value appears once, and
/// values are in sequence order per partition.
fn check_log(what: &str, log: &[Acked], acked: &[Acked]) {
    let at: HashMap<(i32, i64), &str> = log
        .iter()
        .map(|r| ((r.partition, r.offset), r.value.as_str()))
        .collect();
    let values: HashSet<(i32, &str)> = log
        .iter()
        .map(|r| (r.partition, r.value.as_str()))
        .collect();
    let missing: Vec<&Acked> = acked
        .iter()
        .filter(|a| match a.offset {
            -1 => !values.contains(&(a.partition, a.value.as_str())),
            offset => at.get(&(a.partition, offset)) != Some(&a.value.as_str()),
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{what} lacks {} of {} acknowledged records, e.g. {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(5)]
    );
    let mut seen = HashSet::new();
    let duplicates = log.iter().filter(|r| !seen.insert(&r.value)).count();
    assert_eq!(duplicates, 0, "{what} holds duplicated values");
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    let mut ordered: Vec<&Acked> = log.iter().collect();
    ordered.sort_by_key(|r| (r.partition, r.offset));
    for r in ordered {
        let seq: i64 = r
            .value
            .split(':')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a seq");
        let previous = last.insert(r.partition, seq);
        assert!(
            previous.is_none_or(|p| p < seq),
            "{what}: partition {} out of order at offset {}",
            r.partition,
            r.offset
        );
    }
}

/// A partition directory's `.log` files, in offset order.
fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    segments
}

/// Every whole batch of a partition directory, byte for byte and in order,
/// whatever segments they sit in: what replicas must agree on.
pub fn read_batches(dir: &Path) -> Vec<u8> {
    let mut batches = Vec::new();
    for segment in segment_files(dir) {
        let bytes = std::fs::read(&segment).unwrap();
        for batch in BatchIter::new(&bytes) {
            let Ok(batch) = batch else { break };
            batches.extend_from_slice(batch.bytes());
        }
    }
    batches
}

/// The (offset, value) of every data record in a partition directory's
/// segment files, read straight from disk.
pub fn read_log_dir(dir: &Path) -> Vec<(i64, String)> {
    let mut records = Vec::new();
    for segment in segment_files(dir) {
        let bytes = std::fs::read(&segment).unwrap();
        for batch in BatchIter::new(&bytes) {
            let Ok(batch) = batch else { break };
            if batch.is_control() {
                continue;
            }
            let section = records_section(&batch).expect("records");
            walk_records(&section, |r| {
                let value = String::from_utf8_lossy(r.value.unwrap_or_default()).into_owned();
                records.push((batch.base_offset() + i64::from(r.offset_delta), value));
            })
            .expect("well-formed records");
        }
    }
    records
}
