//! The active controller's side of the controller: committing records
//! (locally when this node leads the quorum, else forwarded to the leader),
//! answering forwarded calls, and tracking broker liveness from heartbeats.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Weak;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tracing::{info, warn};
use uuid::Uuid;

use super::{Controller, ControllerError};
use crate::elections::{align_partitions, leaderships, preferred_leader_moves, usable_in};
use crate::image::BrokerImage;
use crate::raft::{refuses_connections, Node, QuorumError, QuorumSummary};
use crate::reassignment;
use crate::records::MetadataRecord;
use crate::service::{
    ControllerRequest, ControllerResponse, ControllerService, Heartbeat, HeartbeatReply,
};

/// How long a commit keeps retrying while there is no reachable leader.
const COMMIT_DEADLINE: Duration = Duration::from_secs(15);
const RETRY_BACKOFF: Duration = Duration::from_millis(50);
/// How often the active controller looks for brokers that stopped heartbeating.
const LIVENESS_CHECK_INTERVAL: Duration = Duration::from_millis(250);
/// How often a request forwarded to the active controller looks whether
/// another node became active meanwhile.
const LEADER_POLL_INTERVAL: Duration = Duration::from_millis(20);

pub(crate) enum CommitError {
    /// The image changed since the records were planned.
    Stale,
    Failed(ControllerError),
}

/// Why a request forwarded to the active controller got no answer.
enum Forwarding {
    /// Another node became the active controller while it was in flight.
    LeaderMoved,
    Failed(String),
}

/// Who may commit a change.
#[derive(Debug, Clone, Copy)]
enum Committer {
    /// Whichever controller is active: this node, or the one it forwards to.
    ActiveController,
    /// This node, and only while it is the active controller of this term.
    ThisNodeIn(u64),
}

enum Attempt {
    Done(Result<i64, CommitError>),
    Retry(String),
}

/// When each broker incarnation last heartbeated, as the active controller
/// saw it. A controller that becomes active starts everyone's clock afresh,
/// as KRaft does, since it cannot know what its predecessor saw, with one
/// exception: the broker of the node that led before it, which this node
/// had stopped hearing from (see [`Liveness::silent_since`]).
pub(crate) struct Liveness {
    session_timeout: Duration,
    state: Mutex<LivenessState>,
    rebalance_interval: Option<Duration>,
    last_rebalance: Mutex<Instant>,
}

/// The image offsets at which the whole-image scans that run on every
/// heartbeat and liveness tick last found nothing to do: a scan of the
/// same image finds nothing either, so idle partitions cost nothing
/// between metadata changes however many there are.
pub(crate) struct QuietScans {
    alignment: AtomicI64,
    completions: AtomicI64,
}

impl Default for QuietScans {
    fn default() -> Self {
        Self {
            alignment: AtomicI64::new(-1),
            completions: AtomicI64::new(-1),
        }
    }
}

impl QuietScans {
    /// Runs `scan` unless it found nothing at this `offset` already.
    fn run<T>(last_quiet: &AtomicI64, offset: i64, scan: impl FnOnce() -> Vec<T>) -> Vec<T> {
        if last_quiet.load(Ordering::Acquire) == offset {
            return Vec::new();
        }
        let found = scan();
        if found.is_empty() {
            last_quiet.store(offset, Ordering::Release);
        }
        found
    }
}

#[derive(Default)]
struct LivenessState {
    /// The quorum term these observations belong to.
    term: u64,
    last_seen: HashMap<i32, Instant>,
}

impl Liveness {
    pub fn new(session_timeout: Duration, rebalance_interval: Option<Duration>) -> Self {
        Self {
            session_timeout,
            state: Mutex::default(),
            rebalance_interval,
            last_rebalance: Mutex::new(Instant::now()),
        }
    }

    /// Whether preferred-leader balancing is due now.
    fn rebalance_due(&self) -> bool {
        let Some(interval) = self.rebalance_interval else {
            return false;
        };
        let mut last = self.last_rebalance.lock();
        let due = last.elapsed() >= interval;
        if due {
            *last = Instant::now();
        }
        due
    }

    fn seen(&self, term: u64, broker: i32) {
        let mut st = self.state.lock();
        st.reset_if_new(term);
        st.last_seen.insert(broker, Instant::now());
    }

    /// Starts the clock of `broker`, the previous active controller's
    /// broker, at `heard`: the last time this node heard from that
    /// controller, so a node that stopped answering (stopped, cut off) is
    /// fenced a session after it went quiet, not a session after the
    /// election. A broker that heartbeats restarts its clock as usual; the
    /// clock goes back at most half a session, so a live broker whose
    /// controller merely stepped down keeps ample time to heartbeat here.
    fn silent_since(&self, term: u64, broker: i32, heard: Instant) {
        let mut st = self.state.lock();
        st.reset_if_new(term);
        let earliest = Instant::now()
            .checked_sub(self.session_timeout / 2)
            .unwrap_or(heard);
        st.last_seen.entry(broker).or_insert(heard.max(earliest));
    }

    /// Unfenced brokers silent for longer than the session timeout.
    fn expired(&self, term: u64, unfenced: impl Iterator<Item = i32>) -> Vec<i32> {
        let mut st = self.state.lock();
        st.reset_if_new(term);
        let now = Instant::now();
        unfenced
            .filter(|b| {
                let seen = *st.last_seen.entry(*b).or_insert(now);
                now.duration_since(seen) > self.session_timeout
            })
            .collect()
    }
}

impl LivenessState {
    fn reset_if_new(&mut self, term: u64) {
        if self.term != term {
            self.term = term;
            self.last_seen.clear();
        }
    }
}

impl Controller {
    fn leads(&self) -> bool {
        self.quorum.leader() == Some(self.node_id as u64)
    }

    /// Whether this node is the active controller (metrics).
    pub fn is_active(&self) -> bool {
        self.leads()
    }

    /// The quorum leader as this node knows it, and the current epoch (metrics).
    pub fn quorum_view(&self) -> (Option<u64>, u64) {
        (self.quorum.leader(), self.quorum.term())
    }

    /// Commits `records`, planned against the image at `expected`, through
    /// whichever controller is active; returns the offset once this node
    /// has applied it, so callers read their own writes.
    pub(crate) async fn commit(
        &self,
        expected: i64,
        records: Vec<MetadataRecord>,
    ) -> Result<i64, CommitError> {
        self.commit_via(Committer::ActiveController, expected, records)
            .await
    }

    /// As [`Controller::commit`], but only while this node is the active
    /// controller of `term`: for decisions drawn from what this node saw
    /// while active, such as which brokers stopped heartbeating to it. A
    /// successor must not inherit them: an active controller cut off from
    /// the others sees every broker go quiet, and its fences, handed to the
    /// new active controller once the network heals, would fence healthy
    /// brokers and move their leadership to the node that was cut off.
    async fn commit_in_term(
        &self,
        term: u64,
        expected: i64,
        records: Vec<MetadataRecord>,
    ) -> Result<i64, CommitError> {
        self.commit_via(Committer::ThisNodeIn(term), expected, records)
            .await
    }

    async fn commit_via(
        &self,
        committer: Committer,
        expected: i64,
        records: Vec<MetadataRecord>,
    ) -> Result<i64, CommitError> {
        let encoded: Vec<Vec<u8>> = records.iter().map(MetadataRecord::encode).collect();
        let deadline = Instant::now() + COMMIT_DEADLINE;
        loop {
            let why = match self.try_commit(committer, expected, &encoded).await {
                Attempt::Done(result) => return result,
                Attempt::Retry(why) => why,
            };
            if Instant::now() >= deadline {
                return Err(CommitError::Failed(ControllerError::new(
                    ResponseError::RequestTimedOut,
                    format!("no active controller accepted the change in {COMMIT_DEADLINE:?} ({why}); check that a majority of controller.quorum.voters is running and reachable"),
                )));
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }

    async fn try_commit(
        &self,
        committer: Committer,
        expected: i64,
        encoded: &[Vec<u8>],
    ) -> Attempt {
        if let Committer::ThisNodeIn(term) = committer {
            if !self.leads() || self.quorum.term() != term {
                return Attempt::Done(Err(CommitError::Failed(ControllerError::new(
                    ResponseError::NotController,
                    format!("this node is no longer the active controller of term {term}"),
                ))));
            }
        }
        if self.leads() {
            return settle(
                self.commit_as_leader(committer, expected, encoded.to_vec())
                    .await,
            );
        }
        let request = ControllerRequest::Write {
            expected_offset: expected,
            records: encoded.to_vec(),
        };
        match self.forward(request).await {
            Ok(ControllerResponse::Written { offset }) => {
                let mut rx = self.subscribe();
                let _ = rx.wait_for(|image| image.offset >= offset).await;
                Attempt::Done(Ok(offset))
            }
            Ok(response) => settle(response),
            Err(Forwarding::LeaderMoved) => Attempt::Retry("leadership moved".into()),
            Err(Forwarding::Failed(e)) => Attempt::Retry(e),
        }
    }

    /// Commits on this node, the active controller, if its image is still
    /// the one the records were planned against.
    async fn commit_as_leader(
        &self,
        committer: Committer,
        expected: i64,
        encoded: Vec<Vec<u8>>,
    ) -> ControllerResponse {
        let Some(voter) = self.quorum.voter() else {
            return ControllerResponse::NotLeader;
        };
        let _serial = self.leader_serial.lock().await;
        if let Err(e) = voter.linearize().await {
            return quorum_failure(e);
        }
        if let Committer::ThisNodeIn(term) = committer {
            if self.quorum.term() != term {
                return ControllerResponse::NotLeader;
            }
        }
        if self.image().offset != expected {
            return ControllerResponse::Stale;
        }
        match voter.write_encoded(encoded).await {
            Ok(offset) => ControllerResponse::Written { offset },
            Err(e) => quorum_failure(e),
        }
    }

    /// Forwards `request` to the active controller, giving up as soon as
    /// another node becomes active. A request in flight to an active
    /// controller that was cut off would otherwise wait out the whole RPC
    /// timeout (5 s or more) while its successor waits for it: a broker's
    /// heartbeat stuck that way has it fenced by the new active controller,
    /// and an ISR change stuck that way holds up acknowledgements.
    async fn forward(&self, request: ControllerRequest) -> Result<ControllerResponse, Forwarding> {
        let leader = self.quorum.leader();
        tokio::select! {
            result = self.quorum.forward(request) => result.map_err(|e| Forwarding::Failed(e.to_string())),
            () = self.leader_moves_from(leader) => Err(Forwarding::LeaderMoved),
        }
    }

    /// Returns once the quorum leader this node knows is no longer `leader`.
    async fn leader_moves_from(&self, leader: Option<u64>) {
        let mut poll = tokio::time::interval(LEADER_POLL_INTERVAL);
        while self.quorum.leader() == leader {
            poll.tick().await;
        }
    }

    /// Sends a broker heartbeat to the active controller (which may be this node).
    pub async fn heartbeat(&self, heartbeat: Heartbeat) -> Result<HeartbeatReply, String> {
        let response = loop {
            if self.leads() {
                break self.heartbeat_as_leader(heartbeat).await;
            }
            match self.forward(ControllerRequest::Heartbeat(heartbeat)).await {
                Ok(response) => break response,
                // Sent again at once, to the new active controller.
                Err(Forwarding::LeaderMoved) => continue,
                Err(Forwarding::Failed(e)) => return Err(e),
            }
        };
        match response {
            ControllerResponse::Heartbeat(reply) => Ok(reply),
            ControllerResponse::Failed { message, .. } => Err(message),
            other => Err(format!("heartbeat not accepted: {other:?}")),
        }
    }

    /// The quorum's state as the active controller sees it (per-voter
    /// progress is only known there).
    pub async fn describe_quorum(&self) -> Result<QuorumSummary, String> {
        let me = self.me.upgrade().expect("controller alive");
        self.on_runtime(async move {
            if me.leads() {
                return me.summary_as_leader().await.map_err(|e| e.to_string());
            }
            match me.quorum.forward(ControllerRequest::DescribeQuorum).await {
                Ok(ControllerResponse::Quorum(summary)) => Ok(summary),
                Ok(other) => Err(format!("the active controller answered {other:?}")),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
    }

    async fn summary_as_leader(&self) -> Result<QuorumSummary, QuorumError> {
        match self.quorum.voter() {
            Some(voter) => voter.summary().await,
            None => Err(QuorumError::NotLeader {
                leader: self.quorum.leader(),
            }),
        }
    }

    /// The voters and their controller listener addresses.
    pub fn voters(&self) -> BTreeMap<u64, Node> {
        self.quorum.voters()
    }

    /// KRaft's `kraft.version`: 1 when the voters can change (KIP-853).
    pub fn kraft_version(&self) -> i16 {
        self.quorum.kraft_version()
    }

    /// Notes the heartbeat and fences or unfences the broker as asked.
    async fn heartbeat_as_leader(&self, hb: Heartbeat) -> ControllerResponse {
        let term = self.quorum.term();
        for _ in 0..MAX_HEARTBEAT_ATTEMPTS {
            let image = self.image();
            let Some(broker) = image.brokers.get(&hb.broker_id) else {
                return heartbeat_reply(true, true, 0);
            };
            if broker.incarnation_id.as_u128() != hb.incarnation {
                return heartbeat_reply(true, true, 0);
            }
            self.liveness.seen(term, hb.broker_id);
            let usable = !hb.want_shutdown;
            let mut records = Vec::new();
            if broker.fenced == usable {
                records.push(MetadataRecord::BrokerFence {
                    broker_id: hb.broker_id,
                    fenced: !usable,
                });
            }
            if records.is_empty() {
                // The broker's state stays: only a changed image can have
                // partitions to align.
                records = QuietScans::run(&self.quiet_scans.alignment, image.offset, || {
                    align_partitions(
                        &image,
                        self.min_isr(&image),
                        |b| usable_in(&image, b, &[]),
                        None,
                    )
                });
            } else {
                records.extend(align_partitions(
                    &image,
                    self.min_isr(&image),
                    |b| usable_in(&image, b, &[(hb.broker_id, usable)]),
                    None,
                ));
            }
            if records.is_empty() {
                return heartbeat_reply(false, broker.fenced, leaderships(&image, hb.broker_id));
            }
            match self.commit(image.offset, records).await {
                Ok(_) => {
                    if usable {
                        info!(broker = hb.broker_id, "broker unfenced");
                    } else {
                        info!(
                            broker = hb.broker_id,
                            "broker in controlled shutdown: fenced, leadership moved"
                        );
                    }
                }
                Err(CommitError::Stale) => continue,
                Err(CommitError::Failed(e)) => {
                    return ControllerResponse::Failed {
                        code: e.code,
                        message: e.message,
                    }
                }
            }
        }
        let image = self.image();
        let fenced = image.brokers.get(&hb.broker_id).is_none_or(|b| b.fenced);
        heartbeat_reply(false, fenced, leaderships(&image, hb.broker_id))
    }

    /// While this node is the active controller: fences brokers whose
    /// session expired, moving their leadership to other ISR members.
    async fn check_liveness(&self) {
        let term = self.quorum.term();
        if !self.leads() {
            return;
        }
        let image = self.image();
        let expired = self
            .liveness
            .expired(term, image.live_brokers().map(|b| b.id));
        if expired.is_empty() {
            return;
        }
        let incarnations = expired
            .iter()
            .filter_map(|id| image.brokers.get(id).map(|b| (*id, b.incarnation_id)))
            .collect();
        self.fence(term, incarnations, FenceReason::SessionExpired)
            .await;
    }

    /// While this node is the active controller: fences broker `id` if
    /// its listener refuses connections, which means its process is gone.
    /// Probed when a broker's connection to this node closes, and for
    /// every broker when this node becomes active (the old active
    /// controller's node may have died with it).
    async fn fence_if_gone(&self, id: i32) {
        let term = self.quorum.term();
        if !self.leads() || id == self.node_id {
            return;
        }
        let image = self.image();
        let Some(broker) = image.brokers.get(&id).filter(|b| !b.fenced) else {
            return;
        };
        if !refuses_connections(&probe_addresses(&self.voters(), broker)).await {
            return;
        }
        self.fence(
            term,
            vec![(id, broker.incarnation_id)],
            FenceReason::ProcessGone,
        )
        .await;
    }

    /// Fences `brokers` (id and incarnation) and moves their leadership and
    /// ISR places to the other brokers, in one commit. A broker that
    /// registered again meanwhile is a new process and is left alone.
    /// Committed only by this node as the active controller of `term`, in
    /// which it decided the fence (see [`Controller::commit_in_term`]).
    /// Logged once committed, with the reason: a fence of a healthy broker
    /// is a defect, and the fault test looks for such lines.
    async fn fence(&self, term: u64, brokers: Vec<(i32, Uuid)>, reason: FenceReason) {
        for _ in 0..MAX_FENCE_ATTEMPTS {
            let image = self.image();
            let fenced: Vec<i32> = brokers
                .iter()
                .filter(|(id, incarnation)| {
                    image
                        .brokers
                        .get(id)
                        .is_some_and(|b| b.incarnation_id == *incarnation && !b.fenced)
                })
                .map(|(id, _)| *id)
                .collect();
            if fenced.is_empty() {
                return;
            }
            let overrides: Vec<(i32, bool)> = fenced.iter().map(|b| (*b, false)).collect();
            let mut records: Vec<MetadataRecord> = fenced
                .iter()
                .map(|b| MetadataRecord::BrokerFence {
                    broker_id: *b,
                    fenced: true,
                })
                .collect();
            records.extend(align_partitions(
                &image,
                self.min_isr(&image),
                |b| usable_in(&image, b, &overrides),
                None,
            ));
            match self.commit_in_term(term, image.offset, records).await {
                Ok(_) => {
                    warn!(brokers = ?fenced, reason = %reason, "brokers fenced");
                    return;
                }
                Err(CommitError::Stale) => continue,
                Err(CommitError::Failed(e)) => {
                    warn!(error = %e, brokers = ?fenced, reason = %reason, "could not fence brokers");
                    return;
                }
            }
        }
    }

    /// While this node is the active controller: completes reassignments
    /// whose new replicas have all joined the ISR.
    async fn complete_reassignments(&self) {
        if !self.leads() {
            return;
        }
        let image = self.image();
        let records = QuietScans::run(&self.quiet_scans.completions, image.offset, || {
            reassignment::completions(&image)
        });
        if records.is_empty() {
            return;
        }
        info!(
            records = records.len(),
            "completing partition reassignments"
        );
        if let Err(CommitError::Failed(e)) = self.commit(image.offset, records).await {
            warn!(error = %e, "could not complete partition reassignments");
        }
    }

    /// While this node is the active controller: moves leadership back to
    /// preferred replicas that are live ISR members (a broker that came
    /// back leads its share again), every rebalance interval.
    async fn balance_leaders(&self) {
        if !self.leads() || !self.liveness.rebalance_due() {
            return;
        }
        let image = self.image();
        let moves = preferred_leader_moves(&image);
        if moves.is_empty() {
            return;
        }
        info!(
            partitions = moves.len(),
            "moving leadership back to preferred replicas"
        );
        if let Err(CommitError::Failed(e)) = self.commit(image.offset, moves).await {
            warn!(error = %e, "could not move leadership to preferred replicas");
        }
    }
}

const MAX_HEARTBEAT_ATTEMPTS: usize = 5;
/// Attempts at fencing when other changes keep committing first.
const MAX_FENCE_ATTEMPTS: usize = 5;

/// Why the active controller fences a broker, in its log line.
#[derive(Debug, Clone, Copy)]
enum FenceReason {
    SessionExpired,
    ProcessGone,
}

impl std::fmt::Display for FenceReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FenceReason::SessionExpired => {
                "no heartbeat within broker.session.timeout.ms (stopped, cut off or overloaded)"
            }
            FenceReason::ProcessGone => {
                "its connection closed and its listener refuses connections: the process is gone"
            }
        })
    }
}

/// Where to probe whether broker `broker`'s process is still there: its
/// controller listener when it is a voter (the address the quorum itself
/// uses, so it is reachable from here), else every listener it registered.
fn probe_addresses(voters: &BTreeMap<u64, Node>, broker: &BrokerImage) -> Vec<(String, u16)> {
    let voter = u64::try_from(broker.id).ok().and_then(|id| voters.get(&id));
    match voter {
        Some(node) => vec![(node.host.clone(), node.port)],
        None => broker
            .endpoints
            .iter()
            .map(|e| (e.host.clone(), e.port))
            .collect(),
    }
}

fn heartbeat_reply(unknown: bool, fenced: bool, leaderships: u32) -> ControllerResponse {
    ControllerResponse::Heartbeat(HeartbeatReply {
        unknown,
        fenced,
        leaderships,
    })
}

/// What a non-written answer means for a commit attempt.
fn settle(response: ControllerResponse) -> Attempt {
    match response {
        ControllerResponse::Written { offset } => Attempt::Done(Ok(offset)),
        ControllerResponse::Stale => Attempt::Done(Err(CommitError::Stale)),
        ControllerResponse::Failed { code, message } => {
            Attempt::Done(Err(CommitError::Failed(ControllerError { code, message })))
        }
        ControllerResponse::NotLeader => Attempt::Retry("leadership moved".into()),
        ControllerResponse::Heartbeat(_)
        | ControllerResponse::Quorum(_)
        | ControllerResponse::Metadata { .. } => Attempt::Retry("unexpected reply".into()),
    }
}

fn quorum_failure(e: QuorumError) -> ControllerResponse {
    let (error, message) = match e {
        QuorumError::NotLeader { .. } | QuorumError::Unreachable(_) => {
            return ControllerResponse::NotLeader
        }
        QuorumError::TooLarge { .. } => (ResponseError::PolicyViolation, e.to_string()),
        QuorumError::Timeout => (ResponseError::RequestTimedOut, e.to_string()),
        other => (ResponseError::KafkaStorageError, other.to_string()),
    };
    ControllerResponse::Failed {
        code: error.code(),
        message,
    }
}

/// Answers forwarded calls while this node is the active controller.
pub(crate) struct ActiveService(pub Weak<Controller>);

impl ControllerService for ActiveService {
    fn call(
        &self,
        request: ControllerRequest,
    ) -> Pin<Box<dyn Future<Output = ControllerResponse> + Send + 'static>> {
        let controller = self.0.upgrade();
        Box::pin(async move {
            let Some(controller) = controller else {
                return ControllerResponse::NotLeader;
            };
            if !controller.leads() {
                return ControllerResponse::NotLeader;
            }
            match request {
                ControllerRequest::Write {
                    expected_offset,
                    records,
                } => {
                    controller
                        .commit_as_leader(Committer::ActiveController, expected_offset, records)
                        .await
                }
                ControllerRequest::Heartbeat(hb) => controller.heartbeat_as_leader(hb).await,
                ControllerRequest::DescribeQuorum => match controller.summary_as_leader().await {
                    Ok(summary) => ControllerResponse::Quorum(summary),
                    Err(e) => quorum_failure(e),
                },
                // Answered by the quorum RPC before it reaches the service.
                ControllerRequest::FetchMetadata(_) => ControllerResponse::NotLeader,
                ControllerRequest::JoinQuorum(join) => controller.join_as_leader(join).await,
                ControllerRequest::AddVoter(key) => controller.add_voter_as_leader(key).await,
                ControllerRequest::RemoveVoter(key) => controller.remove_voter_as_leader(key).await,
            }
        })
    }
}

/// The liveness loop; ends when the controller is gone.
pub(crate) trait LivenessLoop {
    fn run_liveness_checks(self) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>>;
}

impl LivenessLoop for Weak<Controller> {
    fn run_liveness_checks(self) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        Box::pin(async move {
            let (mut departed, mut leadership) = match self.upgrade() {
                Some(c) => match c.quorum.voter() {
                    Some(q) => (q.take_departed_brokers(), Some(q.metrics())),
                    None => (None, None),
                },
                None => return,
            };
            let mut tick = tokio::time::interval(LIVENESS_CHECK_INTERVAL);
            // The term in which this node, active, last probed every broker.
            let mut probed_term = None;
            // While following: the leader, and when this node last heard
            // from it, as of the last tick.
            let mut followed: Option<(u64, Instant)> = None;
            loop {
                let event = tokio::select! {
                    _ = tick.tick() => Event::Tick,
                    Some(broker) = recv(&mut departed) => Event::Departed(broker),
                    Ok(()) = changed(&mut leadership) => Event::LeadershipChanged,
                };
                let Some(controller) = self.upgrade() else {
                    return;
                };
                if controller.leads() && probed_term != Some(controller.quorum.term()) {
                    let term = controller.quorum.term();
                    probed_term = Some(term);
                    if let Some((leader, heard)) = followed.take() {
                        controller.liveness.silent_since(term, leader as i32, heard);
                    }
                    for broker in controller.image().brokers.keys().copied() {
                        let c = controller.clone();
                        tokio::spawn(async move { c.fence_if_gone(broker).await });
                    }
                }
                match event {
                    Event::Tick => {
                        // Kept through an election, when there is no leader.
                        if let Some(q) = controller.quorum.voter().filter(|_| !controller.leads()) {
                            followed = q.leader_last_heard().await.or(followed);
                        }
                        controller.check_liveness().await;
                        controller.complete_reassignments().await;
                        controller.balance_leaders().await;
                    }
                    Event::Departed(broker) => {
                        tokio::spawn(async move { controller.fence_if_gone(broker).await });
                    }
                    Event::LeadershipChanged => {}
                }
            }
        })
    }
}

/// What woke the liveness loop.
enum Event {
    Tick,
    /// A broker's connection to this node closed.
    Departed(i32),
    /// The quorum's leader or term may have changed.
    LeadershipChanged,
}

/// The next departed broker, or never on an observer.
async fn recv(departed: &mut Option<mpsc::UnboundedReceiver<i32>>) -> Option<i32> {
    match departed {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the quorum's state changes, or never on an observer.
async fn changed<T>(watch: &mut Option<watch::Receiver<T>>) -> Result<(), watch::error::RecvError> {
    match watch {
        Some(rx) => rx.changed().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The previous leader's broker is held to the time this node last
    /// heard from it (at most half a session back); every other broker
    /// gets a full session from the new term, and a heartbeat restarts
    /// anyone's clock.
    #[test]
    fn the_silent_previous_leader_is_fenced_first() {
        let session = Duration::from_millis(1000);
        let liveness = Liveness::new(session, None);
        let long_ago = Instant::now() - Duration::from_secs(10);
        liveness.silent_since(7, 1, long_ago);
        assert!(liveness.expired(7, [1, 2, 3].into_iter()).is_empty());
        liveness.seen(7, 3);
        std::thread::sleep(Duration::from_millis(600));
        // Half a session back plus 600 ms is past the session for broker 1.
        assert_eq!(liveness.expired(7, [1, 2, 3].into_iter()), vec![1]);
        // A heartbeat from it starts its clock again.
        liveness.seen(7, 1);
        assert!(liveness.expired(7, [1, 2, 3].into_iter()).is_empty());
        // A new term starts every clock afresh.
        liveness.silent_since(8, 2, Instant::now());
        std::thread::sleep(Duration::from_millis(600));
        assert!(liveness.expired(8, [1, 2, 3].into_iter()).is_empty());
    }
}
