//! Mirrors under faults: a three-node destination mirrors the fault topic
//! of a three-node source (every node in a network namespace of its own, on
//! one network) while the idempotent acks=all producer writes to the source.
//!
//! - Random faults strike the two clusters in turns; the mirror must end
//!   byte-identical to the source on every destination replica, and after
//!   failover hold every acknowledged record at its source offset.
//! - The source is lost mid-stream (cut off from the destination's site, or
//!   every node killed) and the destination fails over at once: every
//!   destination replica must hold a prefix of the source's log, whole
//!   batches byte for byte, and never take up mirroring again on its own.
//!
//! After each failover the destination takes writes, which must follow the
//! mirrored log and the failover's control batch (KIP-1279's
//! MIRROR_PID_RESET) on every replica.

use std::process::Command;
use std::time::{Duration, Instant};

use ottla_protocol::batch::{BatchIter, BatchView};
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

/// The source with the topic and the producer's load-to-be, the
/// destination mirroring it (every partition MIRRORING, every ISR full),
/// and the address the mirror requests go to (destination node 1).
fn start_mirrored() -> (FaultCluster, FaultCluster, String) {
    let (source, destination) = FaultCluster::mirrored_pair();
    let admin = destination.nodes[0].bootstrap();
    create_mirror(&admin, MIRROR, &source.bootstrap());
    let added = topics_op(&admin, TopicOp::Add, MIRROR, &[TOPIC]);
    assert!(added.iter().all(|t| t.error_code == 0), "{added:?}");
    wait_for_state(&admin, MIRROR, TOPIC, PARTITIONS as usize, MIRRORING);
    destination.wait_full_isr();
    (source, destination, admin)
}

/// Removes the topic from the mirror and waits until every partition is
/// STOPPED (writable).
fn fail_over(admin: &str) {
    let removed = topics_op(admin, TopicOp::Remove, MIRROR, &[TOPIC]);
    assert!(removed.iter().all(|t| t.error_code == 0), "{removed:?}");
    wait_for_state(admin, MIRROR, TOPIC, PARTITIONS as usize, STOPPED);
}

/// One acks=all write to each partition of the destination; returns the
/// offset each was written at (by partition) and its value. The values
/// look like the producer's (`partition:seq`), past any of its sequences.
fn write_after_failover(destination: &FaultCluster) -> Vec<(i64, String)> {
    let values: Vec<String> = (0..PARTITIONS)
        .map(|p| format!("{p}={p}:{}", 1_000_000_000 + p))
        .collect();
    let out = Command::new(python())
        .arg("-c")
        .arg(WRITER)
        .args([destination.bootstrap().as_str(), TOPIC])
        .args(&values)
        .output()
        .expect("running the writer");
    assert!(
        out.status.success(),
        "writing after failover failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut written = vec![(-1, String::new()); PARTITIONS as usize];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let partition: usize = fields[0].parse().unwrap();
        written[partition] = (fields[1].parse().unwrap(), fields[2].to_string());
    }
    assert!(written.iter().all(|(o, _)| *o >= 0), "{written:?}");
    written
}

fn batches(log: &[u8]) -> Vec<BatchView<'_>> {
    BatchIter::new(log)
        .map(|b| b.expect("whole batches"))
        .collect()
}

/// Checks every destination replica of each partition: the source's log
/// up to some batch (all of it when `whole`), byte for byte, then the
/// failover's control batch, then the write after failover in `written`,
/// which each replica must hold. Returns, per partition, the offset where
/// the mirrored part ends.
fn check_failed_over(
    source: &FaultCluster,
    destination: &FaultCluster,
    written: &[(i64, String)],
    whole: bool,
) -> Vec<i64> {
    destination.wait_replicas_agree(&[(TOPIC, PARTITIONS)]);
    let mut mirrored_ends = Vec::new();
    for partition in 0..PARTITIONS {
        let source_log = read_batches(&source.partition_dir(0, partition));
        let source_batches = batches(&source_log);
        let (offset, value) = &written[partition as usize];
        let mut first_end = None;
        for node in 0..destination.nodes.len() {
            let what = format!("replica {} of {TOPIC}-{partition}", node + 1);
            let dir = destination.partition_dir(node, partition);
            let log = read_batches(&dir);
            let log = batches(&log);
            let mirrored = log
                .iter()
                .zip(&source_batches)
                .take_while(|(d, s)| d.bytes() == s.bytes())
                .count();
            if whole {
                assert_eq!(
                    mirrored,
                    source_batches.len(),
                    "{what}: only {mirrored} of the source's {} batches",
                    source_batches.len()
                );
            }
            let mirrored_end = mirrored.checked_sub(1).map_or(0, |i| log[i].next_offset());
            let rest = &log[mirrored..];
            let markers = rest.iter().take_while(|b| b.is_control()).count();
            assert!(
                markers > 0 && rest[0].base_offset() == mirrored_end,
                "{what}: after the source's batches up to offset {mirrored_end} comes a batch that is not the source's nor the failover's control batch"
            );
            assert_eq!(
                rest.get(markers).map(BatchView::base_offset),
                Some(*offset),
                "{what}: the write after failover follows the failover's control batch"
            );
            assert!(
                read_log_dir(&dir).contains(&(*offset, value.clone())),
                "{what} lacks the write after failover"
            );
            first_end.get_or_insert(mirrored_end);
        }
        mirrored_ends.push(first_end.expect("three replicas"));
    }
    mirrored_ends
}

/// `OTTLA_MIRROR_FAULTS` faults (6 here), alternately in the source and
/// the destination; `OTTLA_FAULT_SEED` replays a sequence.
#[test]
fn a_mirror_under_random_faults_in_both_clusters_fails_over_losing_nothing() {
    let faults = env_or("OTTLA_MIRROR_FAULTS", 6usize);
    let seed = seed_from_env(faults);
    let (mut source, mut destination, admin) = start_mirrored();
    let load = Load::start(&source.bootstrap());
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

    fail_over(&admin);
    let written = write_after_failover(&destination);
    check_failed_over(&source, &destination, &written, true);
    source.verify(&load);
    // Every record the source acknowledged is at its source offset on every
    // destination replica, once, in order.
    destination.verify(&load);
}

/// How the destination loses its source.
#[derive(Debug, Clone, Copy)]
enum SourceLoss {
    /// The network between the two sites is cut; the source keeps running
    /// and taking writes.
    CutOff,
    /// Every source node is killed (kill -9) at once.
    Killed,
}

/// The source is lost while the producer writes to it; the destination
/// fails over at once, then takes writes. Once the source is back (healed,
/// or restarted) and has taken more writes, every destination replica must
/// hold a prefix of the source's log and the writes after failover, and
/// nothing else: a stopped mirror does not fetch again.
fn fail_over_from_a_lost_source(loss: SourceLoss) {
    let (mut source, destination, admin) = start_mirrored();
    let load = Load::start(&source.bootstrap());
    std::thread::sleep(Duration::from_secs(3));
    match loss {
        SourceLoss::CutOff => source.cut_from(&destination),
        SourceLoss::Killed => source.nodes.iter_mut().for_each(|n| n.kill9()),
    }
    let lost = Instant::now();
    fail_over(&admin);
    let stopped = lost.elapsed();
    let written = write_after_failover(&destination);
    println!(
        "source {loss:?}: every partition STOPPED {} ms after, the first writes acknowledged {} ms after",
        stopped.as_millis(),
        lost.elapsed().as_millis()
    );
    match loss {
        SourceLoss::CutOff => source.heal_from(&destination),
        SourceLoss::Killed => source.nodes.iter_mut().for_each(|n| n.restart()),
    }
    source.wait_full_isr();
    // The producer goes on writing to the source, which the destination
    // reaches again.
    std::thread::sleep(Duration::from_secs(3));
    let load = load.stop();
    source.wait_replicas_agree(&[(TOPIC, PARTITIONS)]);

    let mirrored_ends = check_failed_over(&source, &destination, &written, false);
    let source_ends: Vec<i64> = (0..PARTITIONS)
        .map(|p| {
            let log = read_batches(&source.partition_dir(0, p));
            batches(&log).last().map_or(0, BatchView::next_offset)
        })
        .collect();
    println!("mirrored up to {mirrored_ends:?}, the source ends at {source_ends:?}");
    assert!(
        mirrored_ends.iter().all(|&end| end > 0),
        "the mirror had copied records before the source was lost: {mirrored_ends:?}"
    );
    assert!(
        mirrored_ends.iter().zip(&source_ends).all(|(m, s)| m < s),
        "the source took writes the destination never mirrored: {mirrored_ends:?} against {source_ends:?}"
    );
    source.assert_no_panics();
    destination.assert_no_panics();
    source.verify(&load);
}

#[test]
fn failing_over_cut_off_from_the_source_keeps_a_prefix_of_its_log() {
    fail_over_from_a_lost_source(SourceLoss::CutOff);
}

#[test]
fn failing_over_from_a_killed_source_keeps_a_prefix_of_its_log() {
    fail_over_from_a_lost_source(SourceLoss::Killed);
}
