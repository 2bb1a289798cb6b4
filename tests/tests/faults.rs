//! Fault tests: three `ottla` processes, an acks=all idempotent producer
//! and a consumer running throughout, and one fault each. Every
//! acknowledged record must have been read exactly once and in order by
//! that consumer, and be in the log of every replica. Each test prints the
//! time to elect a new leader (or controller) and the longest time the
//! producer saw no acknowledgement.

use std::time::{Duration, Instant};

use ottla_tests::faults::{FaultCluster, Load};

const BEFORE_FAULT: Duration = Duration::from_secs(3);
const DURING_FAULT: Duration = Duration::from_secs(3);
const AFTER_HEALING: Duration = Duration::from_secs(2);

fn report(fault: &str, elected: Option<Duration>, load: &ottla_tests::faults::LoadReport) {
    println!(
        "{fault}: new leader after {}, producer unavailable for at most {} ms, {} records acknowledged, {} read by the consumer running throughout, 0 lost",
        elected.map_or("-".to_string(), |d| format!("{} ms", d.as_millis())),
        load.unavailable.as_millis(),
        load.acked.len(),
        load.consumed.len()
    );
}

#[test]
fn killed_partition_leader_then_restarted() {
    let mut cluster = FaultCluster::start();
    let load = Load::start(&cluster.bootstrap());
    std::thread::sleep(BEFORE_FAULT);
    let victim = cluster.leader_of(0);
    let killed = Instant::now();
    cluster.nodes[(victim - 1) as usize].kill9();
    let elected = cluster.wait_new_leader(0, victim, killed);
    std::thread::sleep(DURING_FAULT);
    cluster.nodes[(victim - 1) as usize].restart();
    cluster.wait_full_isr();
    std::thread::sleep(AFTER_HEALING);
    let load = load.stop();
    report("kill -9 of the partition leader", Some(elected), &load);
    cluster.verify(&load);
}

#[test]
fn killed_active_controller_then_restarted() {
    let mut cluster = FaultCluster::start();
    let load = Load::start(&cluster.bootstrap());
    std::thread::sleep(BEFORE_FAULT);
    let controller =
        FaultCluster::active_controller(&cluster.nodes[0]).expect("an active controller");
    let killed = Instant::now();
    cluster.nodes[(controller - 1) as usize].kill9();
    let survivor = &cluster.nodes[(controller % 3) as usize];
    let elected = loop {
        match FaultCluster::active_controller(survivor) {
            Some(c) if c != controller => break killed.elapsed(),
            _ => {
                assert!(
                    killed.elapsed() < Duration::from_secs(60),
                    "no new active controller"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    std::thread::sleep(DURING_FAULT);
    cluster.nodes[(controller - 1) as usize].restart();
    cluster.wait_full_isr();
    std::thread::sleep(AFTER_HEALING);
    let load = load.stop();
    report("kill -9 of the active controller", Some(elected), &load);
    cluster.verify(&load);
}

#[test]
fn frozen_leader_is_fenced_and_truncated_when_it_thaws() {
    let cluster = FaultCluster::start();
    let load = Load::start(&cluster.bootstrap());
    std::thread::sleep(BEFORE_FAULT);
    let victim = cluster.leader_of(0);
    let pid = cluster.nodes[(victim - 1) as usize].pid() as i32;
    let frozen = Instant::now();
    // SAFETY: signals to our own child process.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let elected = cluster.wait_new_leader(0, victim, frozen);
    std::thread::sleep(DURING_FAULT);
    unsafe { libc::kill(pid, libc::SIGCONT) };
    cluster.wait_full_isr();
    std::thread::sleep(AFTER_HEALING);
    let load = load.stop();
    report(
        "a leader cut off (SIGSTOP) and healed",
        Some(elected),
        &load,
    );
    cluster.verify(&load);
}

#[test]
fn rolling_restart_under_load() {
    let mut cluster = FaultCluster::start();
    let load = Load::start(&cluster.bootstrap());
    std::thread::sleep(BEFORE_FAULT);
    for i in 0..cluster.nodes.len() {
        assert_eq!(
            cluster.nodes[i].stop(),
            Some(0),
            "clean stop of node {}",
            i + 1
        );
        cluster.nodes[i].restart();
        cluster.wait_full_isr();
    }
    std::thread::sleep(AFTER_HEALING);
    let load = load.stop();
    report(
        "rolling restart (SIGTERM, controlled shutdown)",
        None,
        &load,
    );
    cluster.verify(&load);
}
