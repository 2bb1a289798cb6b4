//! Fast failure detection from closed connections.
//!
//! A process killed with kill -9 has its sockets closed by the kernel at
//! once: the quorum leader's connections to the followers and each broker's
//! heartbeat connection to the active controller end within milliseconds.
//! Timeouts (the Raft leader lease, `broker.session.timeout.ms`) take
//! seconds. A closed connection alone proves nothing (a peer drops a
//! connection after a slow answer, a node restarts), so it only triggers a
//! probe: a new connection to the peer's listener. A refused connection
//! means nothing listens on that port any more: the process is gone. A
//! stopped process (SIGSTOP) still accepts in the kernel, so it is left to
//! the timeouts, as is a host that does not answer at all.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::time::Duration;

use openraft::Raft;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::info;

use super::rpc::Request;
use super::{Node, TypeConfig};
use crate::service::ControllerRequest;

/// How long a probe waits for its connection to be accepted or refused.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// Probes of an address that accepts, and the first pause between them
/// (doubling): about 200 ms in all.
const PROBE_ATTEMPTS: u32 = 4;
const PROBE_PAUSE: Duration = Duration::from_millis(25);
/// How long after its first candidacy a survivor waits before the turns
/// begin: the other survivors saw the same connections close and stand
/// within milliseconds too.
const SETTLE: Duration = Duration::from_millis(50);
/// The gap between the surviving voters' turns to stand for election, so
/// two of them never split the vote: a vote round trip with room to spare.
const TURN: Duration = Duration::from_millis(100);
/// Rounds of turns before the election is left to openraft's own timer.
const ROUNDS: u32 = 3;

/// A peer that closed its connection to this node's quorum listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Departure {
    /// The connection carried the quorum leader's AppendEntries.
    Leader(u64),
    /// The connection carried a broker's heartbeats or metadata fetches.
    Broker(i32),
}

/// What a connection to this node's quorum listener has carried so far.
#[derive(Debug, Default)]
pub(crate) struct ConnectionPeer(Option<Departure>);

impl ConnectionPeer {
    /// Notes who sent `request`: the leader's appends, a broker's
    /// heartbeats and fetches identify their sender.
    pub fn carried(&mut self, request: &Request) {
        let who = match request {
            Request::Append(append) => append.vote.leader_id.voted_for().map(Departure::Leader),
            Request::Controller(ControllerRequest::Heartbeat(h)) => {
                Some(Departure::Broker(h.broker_id))
            }
            Request::Controller(ControllerRequest::FetchMetadata(f)) => {
                i32::try_from(f.observer).ok().map(Departure::Broker)
            }
            _ => None,
        };
        if who.is_some() {
            self.0 = who;
        }
    }

    /// What the connection's close means, if anything.
    pub fn departed(self) -> Option<Departure> {
        self.0
    }
}

/// Whether every one of `addresses` refuses connections: nothing listens
/// there, so the process that did is gone. A dying process may close its
/// connections a moment before its listener, so an address that accepts
/// is tried again a few times. False when any keeps accepting, does not
/// answer in time or cannot be resolved.
pub(crate) async fn refuses_connections(addresses: &[(String, u16)]) -> bool {
    if addresses.is_empty() {
        return false;
    }
    let mut pause = PROBE_PAUSE;
    for attempt in 1..=PROBE_ATTEMPTS {
        if every_address_refuses(addresses).await {
            return true;
        }
        if attempt < PROBE_ATTEMPTS {
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
    }
    false
}

async fn every_address_refuses(addresses: &[(String, u16)]) -> bool {
    let mut probes = tokio::task::JoinSet::new();
    for (host, port) in addresses.iter().cloned() {
        probes.spawn(async move {
            let connect = tokio::net::TcpStream::connect((host.as_str(), port));
            matches!(
                tokio::time::timeout(PROBE_TIMEOUT, connect).await,
                Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused
            )
        });
    }
    while let Some(refused) = probes.join_next().await {
        if !matches!(refused, Ok(true)) {
            return false;
        }
    }
    true
}

/// Reacts to departures seen by this voter's quorum listener: stands for
/// election when the leader is gone, and passes brokers' departures on to
/// the liveness checks (which act on them while this node is the active
/// controller).
pub(crate) async fn watch(
    id: u64,
    raft: Raft<TypeConfig>,
    mut departures: mpsc::UnboundedReceiver<Departure>,
    brokers: mpsc::UnboundedSender<i32>,
) {
    // One reaction per departed leader at a time: its connections all
    // close together.
    let mut standing: HashMap<u64, JoinHandle<()>> = HashMap::new();
    while let Some(departure) = departures.recv().await {
        match departure {
            Departure::Broker(broker) => {
                let _ = brokers.send(broker);
            }
            Departure::Leader(leader) => {
                standing.retain(|_, task| !task.is_finished());
                if let Entry::Vacant(slot) = standing.entry(leader) {
                    slot.insert(tokio::spawn(stand_if_leader_gone(id, raft.clone(), leader)));
                }
            }
        }
    }
}

/// When `leader` still leads as far as this node knows and refuses
/// connections, stands for election at once and then in turns with the
/// other survivors, by node id.
///
/// A voter whose vote is committed to a leader refuses every candidate
/// until its lease on that leader (the top of the election range) runs
/// out: the lease keeps a node that is merely cut off from disrupting a
/// live leader. This leader is gone, so the lease only delays the next
/// one. A survivor's first candidacy gives its lease up (its vote becomes
/// its own, uncommitted); once every survivor has stood, whichever stands
/// next, at a higher term, wins the others' votes, provided its log is as
/// long as theirs (otherwise a later turn or round goes to a longer log).
async fn stand_if_leader_gone(id: u64, raft: Raft<TypeConfig>, leader: u64) {
    let (current, voters) = {
        let metrics = raft.metrics();
        let m = metrics.borrow();
        let voters: BTreeMap<u64, Node> = m
            .membership_config
            .membership()
            .nodes()
            .map(|(id, node)| (*id, node.clone()))
            .collect();
        (m.current_leader, voters)
    };
    if current != Some(leader) {
        return;
    }
    let Some(address) = voters.get(&leader) else {
        return;
    };
    if !refuses_connections(&[(address.host.clone(), address.port)]).await {
        return;
    }
    let survivors: Vec<u64> = voters.keys().copied().filter(|v| *v != leader).collect();
    let Some(turn) = election_turn(&survivors, id) else {
        return;
    };
    info!(
        leader,
        "the metadata quorum leader refuses connections: standing for election"
    );
    // At once, then at this node's turn in each round.
    let mut stand_at = Instant::now();
    let first_turn = stand_at + SETTLE + TURN * turn;
    let round = TURN * survivors.len() as u32;
    for r in 0..=ROUNDS {
        tokio::time::sleep_until(stand_at).await;
        let now = raft.metrics().borrow().current_leader;
        if now.is_some_and(|l| l != leader) {
            return;
        }
        if raft.trigger().elect().await.is_err() {
            return;
        }
        stand_at = first_turn + round * r;
    }
}

/// This node's place among the voters that survive the leader, or None
/// when it is not one of them.
fn election_turn(survivors: &[u64], id: u64) -> Option<u32> {
    survivors.iter().position(|v| *v == id).map(|p| p as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_port_refuses_and_a_listening_one_does_not() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listener.local_addr().unwrap().port();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let at = |port| ("127.0.0.1".to_string(), port);
        assert!(refuses_connections(&[at(closed)]).await);
        assert!(!refuses_connections(&[at(open)]).await);
        // Gone only when every address refuses.
        assert!(!refuses_connections(&[at(closed), at(open)]).await);
        assert!(!refuses_connections(&[]).await);
    }

    #[test]
    fn survivors_take_turns_by_node_id() {
        assert_eq!(election_turn(&[1, 3], 1), Some(0));
        assert_eq!(election_turn(&[1, 3], 3), Some(1));
        assert_eq!(election_turn(&[1, 3], 2), None);
    }

    #[test]
    fn a_connection_reports_the_broker_it_carried() {
        let mut peer = ConnectionPeer::default();
        peer.carried(&Request::Controller(ControllerRequest::DescribeQuorum));
        assert_eq!(peer.departed(), None);
        let mut peer = ConnectionPeer::default();
        peer.carried(&Request::Controller(ControllerRequest::Heartbeat(
            crate::service::Heartbeat {
                broker_id: 4,
                incarnation: 1,
                want_shutdown: false,
            },
        )));
        peer.carried(&Request::Controller(ControllerRequest::DescribeQuorum));
        assert_eq!(peer.departed(), Some(Departure::Broker(4)));
    }
}
