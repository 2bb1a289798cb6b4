//! Random faults against a [`FaultCluster`]: kill -9 of a partition leader,
//! of the active controller or of any node, SIGSTOP, SIGTERM, two nodes
//! killed at once, and a node cut off from the others by the network. Each fault is held for a random time, healed (restart or
//! SIGCONT), and the cluster must then refill every ISR by itself before the
//! next one. The seed is printed, so a failing sequence can be replayed.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use crate::faults::{unix_now, FaultCluster, PARTITIONS};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    KillLeader,
    KillController,
    KillNode,
    KillTwoNodes,
    Freeze,
    Terminate,
    Partition,
}

impl FaultKind {
    pub const ALL: [FaultKind; 7] = [
        FaultKind::KillLeader,
        FaultKind::KillController,
        FaultKind::KillNode,
        FaultKind::KillTwoNodes,
        FaultKind::Freeze,
        FaultKind::Terminate,
        FaultKind::Partition,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            FaultKind::KillLeader => "kill -9 of a partition leader",
            FaultKind::KillController => "kill -9 of the active controller",
            FaultKind::KillNode => "kill -9 of a random node",
            FaultKind::KillTwoNodes => "kill -9 of two nodes at once",
            FaultKind::Freeze => "SIGSTOP of a random node",
            FaultKind::Terminate => "SIGTERM of a random node",
            FaultKind::Partition => "a random node cut off from the others",
        }
    }
}

/// One fault as it happened; times are seconds since the Unix epoch, the
/// clock the producers stamp their acknowledgements with.
#[derive(Debug, Clone)]
pub struct FaultRecord {
    pub kind: FaultKind,
    /// Node ids.
    pub victims: Vec<i32>,
    pub injected_at: f64,
    /// When the victims were out of every leadership and ISR of the
    /// produced topic, as a spared node saw it, if before the heal.
    pub victims_out_at: Option<f64>,
    /// When the restart or SIGCONT began.
    pub heal_began_at: f64,
    /// When every ISR was full again.
    pub recovered_at: f64,
}

impl FaultRecord {
    /// The longest stretch without an acknowledgement that began during the
    /// fault (from its injection until the ISRs were full again), measured
    /// until the next acknowledgement, however late; `ack_times` is sorted.
    pub fn unavailable(&self, ack_times: &[f64]) -> Duration {
        self.longest_pause(ack_times).0
    }

    /// [`unavailable`](Self::unavailable), and when that stretch began, in
    /// seconds after the injection: whether a pause came with the fault or
    /// with its healing (a restart, a rejoin) tells where to look.
    pub fn longest_pause(&self, ack_times: &[f64]) -> (Duration, f64) {
        let first = ack_times.partition_point(|&t| t <= self.injected_at);
        let mut previous = self.injected_at;
        let (mut longest, mut began): (f64, f64) = (0.0, 0.0);
        for &t in &ack_times[first..] {
            if t - previous > longest {
                (longest, began) = (t - previous, previous - self.injected_at);
            }
            if t > self.recovered_at {
                break;
            }
            previous = t;
        }
        (Duration::from_secs_f64(longest), began)
    }

    /// Acknowledgements that arrived while two replicas of three were down,
    /// past a grace second for responses already on their way: with
    /// min.insync.replicas=2 there must be none.
    pub fn acks_without_quorum(&self, ack_times: &[f64]) -> usize {
        if self.kind != FaultKind::KillTwoNodes {
            return 0;
        }
        ack_times
            .iter()
            .filter(|&&t| t > self.injected_at + 1.0 && t < self.heal_began_at)
            .count()
    }
}

/// The value of environment variable `name`, or `default` when unset.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v} is not valid"))
        })
        .unwrap_or(default)
}

/// `OTTLA_FAULT_SEED`, or the clock; printed with the fault count, so a
/// failing sequence can be replayed.
pub fn seed_from_env(faults: usize) -> u64 {
    let seed = env_or(
        "OTTLA_FAULT_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    );
    println!("{faults} random faults, seed {seed} (OTTLA_FAULT_SEED={seed} replays them)");
    seed
}

/// How long the cluster must look recovered (every ISR full, a controller
/// active) before the next fault.
const RECOVERY_STEADY: Duration = Duration::from_secs(1);

pub struct Nemesis {
    rng: StdRng,
}

impl Nemesis {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// Injects `count` random faults one after the other.
    pub fn run(&mut self, cluster: &mut FaultCluster, count: usize) -> Vec<FaultRecord> {
        self.run_in_turns(&mut [("", cluster)], count).remove(0)
    }

    /// Injects `count` random faults one after the other, fault `i` into
    /// cluster `i % clusters.len()` (each named for the output); returns
    /// each cluster's faults.
    pub fn run_in_turns(
        &mut self,
        clusters: &mut [(&str, &mut FaultCluster)],
        count: usize,
    ) -> Vec<Vec<FaultRecord>> {
        let turns = clusters.len();
        let mut records = vec![Vec::new(); turns];
        for i in 0..count {
            let (name, cluster) = &mut clusters[i % turns];
            records[i % turns].push(self.inject_one(cluster, name, i, count));
        }
        records
    }

    fn inject_one(
        &mut self,
        cluster: &mut FaultCluster,
        name: &str,
        i: usize,
        count: usize,
    ) -> FaultRecord {
        let kind = *FaultKind::ALL.choose(&mut self.rng).unwrap();
        print!("fault {}/{count}: {}{name}", i + 1, kind.describe());
        let record = self.inject(cluster, kind);
        println!(
            " on {:?}, healed after {:.1} s, ISRs full {:.1} s later",
            record.victims,
            record.heal_began_at - record.injected_at,
            record.recovered_at - record.heal_began_at
        );
        std::thread::sleep(Duration::from_millis(self.rng.random_range(500..2000)));
        record
    }

    fn inject(&mut self, cluster: &mut FaultCluster, kind: FaultKind) -> FaultRecord {
        let hold = Duration::from_millis(self.rng.random_range(500..4000));
        let random_node = |rng: &mut StdRng| rng.random_range(1..=3);
        let victims = match kind {
            FaultKind::KillLeader => vec![cluster.leader_of(self.rng.random_range(0..PARTITIONS))],
            FaultKind::KillController => {
                let live = &cluster.nodes[0];
                vec![FaultCluster::active_controller(live)
                    .unwrap_or_else(|| random_node(&mut self.rng))]
            }
            FaultKind::KillNode
            | FaultKind::Freeze
            | FaultKind::Terminate
            | FaultKind::Partition => {
                vec![random_node(&mut self.rng)]
            }
            FaultKind::KillTwoNodes => {
                let spared = random_node(&mut self.rng);
                (1..=3).filter(|&n| n != spared).collect()
            }
        };
        let node = |id: i32| (id - 1) as usize;
        // Asked of a node the fault spared: a node just thawed or restarted
        // may still serve its old view of the ISRs.
        let witness = (1..=3).find(|n| !victims.contains(n)).unwrap_or(1);
        let victims_out_at;
        let injected_at = unix_now();
        let heal_began_at = match kind {
            FaultKind::Freeze => {
                let pid = cluster.nodes[node(victims[0])].pid() as i32;
                // SAFETY: signals to our own child process.
                unsafe { libc::kill(pid, libc::SIGSTOP) };
                victims_out_at = cluster.watch_failover(&victims, witness, hold);
                let at = unix_now();
                unsafe { libc::kill(pid, libc::SIGCONT) };
                at
            }
            FaultKind::Partition => {
                cluster.cut_off(victims[0]);
                victims_out_at = cluster.watch_failover(&victims, witness, hold);
                let at = unix_now();
                cluster.heal(victims[0]);
                at
            }
            FaultKind::Terminate => {
                let code = cluster.nodes[node(victims[0])].stop();
                assert_eq!(
                    code,
                    Some(0),
                    "node {} exits cleanly on SIGTERM",
                    victims[0]
                );
                victims_out_at = cluster.watch_failover(&victims, witness, hold);
                let at = unix_now();
                cluster.nodes[node(victims[0])].restart();
                at
            }
            _ => {
                for &v in &victims {
                    cluster.nodes[node(v)].kill9();
                }
                victims_out_at = cluster.watch_failover(&victims, witness, hold);
                let at = unix_now();
                for &v in &victims {
                    cluster.nodes[node(v)].restart();
                }
                at
            }
        };
        let recovered_at = cluster.wait_full_isr_seen_by(witness, RECOVERY_STEADY);
        FaultRecord {
            kind,
            victims,
            injected_at,
            victims_out_at,
            heal_began_at,
            recovered_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(injected_at: f64, recovered_at: f64) -> FaultRecord {
        FaultRecord {
            kind: FaultKind::KillTwoNodes,
            victims: vec![1, 2],
            injected_at,
            victims_out_at: None,
            heal_began_at: (injected_at + recovered_at) / 2.0,
            recovered_at,
        }
    }

    fn seconds(d: Duration) -> f64 {
        (d.as_secs_f64() * 1000.0).round() / 1000.0
    }

    #[test]
    fn unavailability_runs_until_the_next_acknowledgement() {
        let acks = [9.0, 10.2, 10.4, 14.0, 17.5, 18.0];
        assert_eq!(seconds(fault(10.0, 15.0).unavailable(&acks)), 3.6);
        // The gap that starts inside the fault ends at 14.0, after recovery.
        assert_eq!(seconds(fault(10.0, 11.0).unavailable(&acks)), 3.6);
        // From the injection to 9.0, then from 9.0 to 10.2, past recovery.
        assert_eq!(seconds(fault(8.5, 9.5).unavailable(&acks)), 1.2);
        assert_eq!(seconds(fault(20.0, 21.0).unavailable(&acks)), 0.0);
        let (pause, began) = fault(10.0, 15.0).longest_pause(&acks);
        assert_eq!(
            (seconds(pause), seconds(Duration::from_secs_f64(began))),
            (3.6, 0.4)
        );
    }

    #[test]
    fn acknowledgements_with_two_nodes_down_are_counted_past_a_grace_second() {
        let acks = [10.5, 11.5, 12.4, 13.0];
        // Injected at 10, healing began at 12.5.
        assert_eq!(fault(10.0, 15.0).acks_without_quorum(&acks), 2);
    }
}
