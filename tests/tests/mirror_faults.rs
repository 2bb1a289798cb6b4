//! A mirror under random faults: a three-node destination mirrors the
//! fault topic of a three-node source (every node in a network namespace of
//! its own, on one network) while the idempotent acks=all producer writes to
//! the source and a seeded nemesis strikes the two clusters in turns. The
//! mirror must end byte-identical to the source on every destination
//! replica, and after failover hold every acknowledged record at its source
//! offset and take new writes right after them.

use std::process::Command;
use std::time::Duration;

use ottla_protocol::batch::BatchIter;
use ottla_tests::faults::{read_batches, read_log_dir, FaultCluster, Load, PARTITIONS, TOPIC};
use ottla_tests::fences;
use ottla_tests::mirror::{create_mirror, topics_op, wait_for_state, TopicOp};
use ottla_tests::nemesis::{env_or, seed_from_env, Nemesis};
use ottla_tests::tools::python;

const MIRROR: &str = "east";
/// DescribeMirrors' partition states.
const MIRRORING: i8 = 2;
const STOPPED: i8 = 6;

/// Writes `partition=value` arguments to the topic with acks=all, and
/// prints `partition offset value` for each, once all are acknowledged.
const WRITER: &str = r#"
import sys
from confluent_kafka import Producer

bootstrap, topic = sys.argv[1], sys.argv[2]
p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
written, failed = [], []
def delivered(err, msg):
    if err is not None:
        failed.append(str(err))
    else:
        written.append(f"{msg.partition()} {msg.offset()} {msg.value().decode()}")
for arg in sys.argv[3:]:
    partition, value = arg.split("=", 1)
    p.produce(topic, value=value, partition=int(partition), on_delivery=delivered)
if p.flush(60) != 0 or failed:
    sys.exit(f"writes failed: {failed}")
print("\n".join(written))
"#;

/// The offset after the last batch of a partition's batches.
fn end_offset(batches: &[u8]) -> i64 {
    BatchIter::new(batches)
        .map(|b| b.expect("whole batches").next_offset())
        .last()
        .unwrap_or(0)
}

/// `OTTLA_MIRROR_FAULTS` faults (6 here), alternately in the source and
/// the destination; `OTTLA_FAULT_SEED` replays a sequence.
#[test]
fn a_mirror_under_random_faults_in_both_clusters_fails_over_losing_nothing() {
    let faults = env_or("OTTLA_MIRROR_FAULTS", 6usize);
    let seed = seed_from_env(faults);
    let (mut source, mut destination) = FaultCluster::mirrored_pair();
    let (src, dst) = (source.bootstrap(), destination.bootstrap());
    // The mirror requests go to one node (node 1, up again before each is sent).
    let admin = destination.nodes[0].bootstrap();
    create_mirror(&admin, MIRROR, &src);
    let added = topics_op(&admin, TopicOp::Add, MIRROR, &[TOPIC]);
    assert!(added.iter().all(|t| t.error_code == 0), "{added:?}");
    wait_for_state(&admin, MIRROR, TOPIC, PARTITIONS as usize, MIRRORING);
    destination.wait_full_isr();

    let load = Load::start(&src);
    std::thread::sleep(Duration::from_secs(3));
    let injected = Nemesis::new(seed).run_in_turns(
        &mut [
            (" in the source", &mut source),
            (" in the destination", &mut destination),
        ],
        faults,
    );
    std::thread::sleep(Duration::from_secs(2));
    let load = load.stop();
    println!(
        "{} records acknowledged by the source, the producer without an acknowledgement for at most {} ms",
        load.acked.len(),
        load.unavailable.as_millis()
    );

    source.wait_replicas_agree(&[(TOPIC, PARTITIONS)]);
    destination.wait_mirror_of(&source);
    for (cluster, faults) in [(&source, &injected[0]), (&destination, &injected[1])] {
        cluster.assert_no_panics();
        let fences = fences::fences_of(cluster);
        let unexplained = fences::unexplained(&fences, faults);
        assert!(
            unexplained.is_empty(),
            "brokers fenced while no fault of their cluster touched them: {unexplained:?}"
        );
    }

    // Failover: the topic stops mirroring, and takes writes that continue
    // the source's offsets, on every destination replica.
    let removed = topics_op(&admin, TopicOp::Remove, MIRROR, &[TOPIC]);
    assert!(removed.iter().all(|t| t.error_code == 0), "{removed:?}");
    wait_for_state(&admin, MIRROR, TOPIC, PARTITIONS as usize, STOPPED);
    let source_logs: Vec<Vec<u8>> = (0..PARTITIONS)
        .map(|p| read_batches(&source.partition_dir(0, p)))
        .collect();
    // Values as the producer's (`partition:seq`), past any of its sequences.
    let values: Vec<String> = (0..PARTITIONS)
        .map(|p| format!("{p}={p}:{}", 1_000_000_000 + p))
        .collect();
    let out = Command::new(python())
        .arg("-c")
        .arg(WRITER)
        .args([dst.as_str(), TOPIC])
        .args(&values)
        .output()
        .expect("running the writer");
    assert!(
        out.status.success(),
        "writing after failover failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = String::from_utf8_lossy(&out.stdout).into_owned();
    destination.wait_replicas_agree(&[(TOPIC, PARTITIONS)]);
    for line in written.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (partition, offset): (i32, i64) =
            (fields[0].parse().unwrap(), fields[1].parse().unwrap());
        let source_log = &source_logs[partition as usize];
        for node in 0..destination.nodes.len() {
            let log = read_batches(&destination.partition_dir(node, partition));
            assert!(
                log.starts_with(source_log),
                "replica {} of {TOPIC}-{partition} does not begin with the source's log",
                node + 1
            );
            // Between the source's end and the write, only the failover's
            // control batch (KIP-1279's MIRROR_PID_RESET).
            let after_source: Vec<_> = BatchIter::new(&log[source_log.len()..])
                .map(|b| b.expect("whole batches"))
                .collect();
            let (first_write, before) = after_source
                .iter()
                .position(|b| !b.is_control())
                .map(|i| (after_source[i].base_offset(), i))
                .expect("the write after failover");
            assert_eq!(
                (first_write, before > 0),
                (offset, true),
                "replica {} of {TOPIC}-{partition}: the write after failover follows the source's log and the failover's control batch",
                node + 1
            );
            assert_eq!(after_source[0].base_offset(), end_offset(source_log));
            let on_disk = read_log_dir(&destination.partition_dir(node, partition));
            assert!(on_disk.contains(&(offset, fields[2].to_string())));
        }
    }
    assert_eq!(written.lines().count(), PARTITIONS as usize, "{written}");

    source.verify(&load);
    // Every record the source acknowledged is at its source offset on every
    // destination replica, once, in order.
    destination.verify(&load);
}
