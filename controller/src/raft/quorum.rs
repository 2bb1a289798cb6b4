//! [`Quorum`]: one controller's membership in the metadata quorum.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ChangeMembershipError, CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::{ChangeMembers, Config, Raft, SnapshotPolicy};
use ottla_client::ClientSecurity;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::info;

use super::batches::now_ms;
use super::cluster_id::{LogLimiter, MAX_LEN};
use super::departures;
use super::feed::ObserverFeed;
use super::forward::ToLeader;
use super::join::Joining;
use super::log_store::LogStore;
use super::network::{Contacts, Network};
use super::rpc::{serve, RpcHandler};
use super::state_machine::{ImageSender, StateMachine};
use super::{offset_of, voters_of, Node, QuorumSummary, QuorumVoters, TypeConfig, VoterSummary};
use crate::image::MetadataImage;
use crate::records::MetadataRecord;
use crate::service::{ControllerRequest, ControllerResponse, ControllerService, ServiceSlot};

/// Largest write, in encoded record bytes. KRaft caps a metadata batch at
/// 8 MiB as well; it keeps every entry well inside one RPC frame.
pub const MAX_WRITE_BYTES: usize = 8 << 20;

#[derive(Debug, Clone)]
pub struct QuorumConfig {
    /// How often the leader sends heartbeats; also the AppendEntries RPC timeout.
    pub heartbeat: Duration,
    /// A follower that hears nothing for the leader lease (the top of this
    /// range) and then a random time in it starts an election; voters
    /// refuse to vote while their lease on the leader runs.
    pub election_timeout: (Duration, Duration),
    /// A snapshot is taken every this many applied entries.
    pub snapshot_every: u64,
    /// Entries kept in the log behind the latest snapshot, so briefly
    /// lagging voters catch up from the log rather than by snapshot.
    pub logs_kept_after_snapshot: u64,
    /// How long `write` waits for its entry to be committed and applied.
    pub write_timeout: Duration,
    /// Segment size of the metadata log.
    pub segment_bytes: u64,
    /// How connections to other controllers are secured: as the
    /// controller listener asks (Kafka's `sasl.mechanism.controller.protocol`).
    pub peer_security: ClientSecurity,
    /// The cluster this node belongs to (`cluster.id`): every quorum RPC
    /// carries it, and peers of another cluster are refused.
    pub cluster_id: String,
}

impl Default for QuorumConfig {
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_millis(100),
            election_timeout: (Duration::from_millis(500), Duration::from_millis(1000)),
            snapshot_every: 1000,
            logs_kept_after_snapshot: 1000,
            write_timeout: Duration::from_secs(5),
            segment_bytes: 16 << 20,
            peer_security: ClientSecurity::default(),
            cluster_id: String::new(),
        }
    }
}

impl QuorumConfig {
    /// The cluster id, once checked to fit a quorum RPC frame.
    pub(crate) fn checked_cluster_id(&self) -> Result<Arc<str>, QuorumError> {
        if self.cluster_id.len() > MAX_LEN {
            return Err(QuorumError::Config(format!(
                "cluster.id is {} bytes long, more than {MAX_LEN}: use a Kafka-style id \
                 (22 characters of base64)",
                self.cluster_id.len()
            )));
        }
        Ok(self.cluster_id.as_str().into())
    }

    fn raft_config(&self) -> Result<Config, QuorumError> {
        let ms = |d: Duration| d.as_millis() as u64;
        Config {
            cluster_name: "ottla-metadata".into(),
            heartbeat_interval: ms(self.heartbeat),
            election_timeout_min: ms(self.election_timeout.0),
            election_timeout_max: ms(self.election_timeout.1),
            // Per snapshot chunk; generous for slow disks.
            install_snapshot_timeout: ms(self.election_timeout.1),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            max_in_snapshot_log_to_keep: self.logs_kept_after_snapshot,
            snapshot_max_chunk_size: 1 << 20,
            ..Config::default()
        }
        .validate()
        .map_err(|e| QuorumError::Config(e.to_string()))
    }
}

#[derive(Debug, Error)]
pub enum QuorumError {
    /// Writes go to the leader; `leader` is None during an election.
    #[error("not the metadata quorum leader (leader: {leader:?})")]
    NotLeader { leader: Option<u64> },
    #[error("metadata write of {size} bytes exceeds {MAX_WRITE_BYTES}")]
    TooLarge { size: usize },
    /// The write may still commit later, as with Kafka's REQUEST_TIMED_OUT.
    #[error("metadata write not committed within the timeout")]
    Timeout,
    #[error("the active controller is unreachable: {0}")]
    Unreachable(String),
    #[error("metadata quorum is stopped: {0}")]
    Stopped(String),
    #[error("invalid metadata quorum configuration: {0}")]
    Config(String),
    #[error("metadata quorum storage: {0}")]
    Storage(#[from] ottla_storage::StorageError),
}

/// Why a change of the voters did not happen.
#[derive(Debug, Error)]
pub enum VoterChangeError {
    #[error("not the metadata quorum leader")]
    NotLeader,
    /// Another change is being committed (Kafka allows one at a time).
    #[error("another change of the voters is in progress")]
    InProgress,
    #[error("controller {0} does not follow the metadata log: start it with controller.quorum.bootstrap.servers first")]
    NotFollowing(u64),
    #[error("{0}")]
    Stopped(String),
}

impl From<RaftError<u64, ClientWriteError<u64, Node>>> for VoterChangeError {
    fn from(e: RaftError<u64, ClientWriteError<u64, Node>>) -> Self {
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(_)) => Self::NotLeader,
            RaftError::APIError(ClientWriteError::ChangeMembershipError(
                ChangeMembershipError::InProgress(_),
            )) => Self::InProgress,
            RaftError::APIError(ClientWriteError::ChangeMembershipError(
                ChangeMembershipError::LearnerNotFound(l),
            )) => Self::NotFollowing(l.node_id),
            other => Self::Stopped(other.to_string()),
        }
    }
}

/// A running member of the metadata quorum.
pub struct Quorum {
    id: u64,
    kraft_version: i16,
    raft: Raft<TypeConfig>,
    image: ImageSender,
    contacts: Contacts,
    server: Option<JoinHandle<()>>,
    write_timeout: Duration,
    service: ServiceSlot,
    to_leader: ToLeader,
    feed: Arc<ObserverFeed>,
    cluster_id: Arc<str>,
    /// Whether this node grants votes (see `RpcHandler`).
    voting: Arc<AtomicBool>,
    /// What serves this node's quorum connections.
    rpc: RpcHandler,
    /// Brokers whose connection to this node closed, for the liveness
    /// checks; taken once by the controller.
    departed_brokers: parking_lot::Mutex<Option<mpsc::UnboundedReceiver<i32>>>,
}

impl Quorum {
    /// Opens (or creates) this voter's state in `dir`, starts Raft and
    /// serves quorum RPCs on `listener` (or nowhere: the broker serves them
    /// on its controller listener through [`Quorum::rpc_handler`]).
    ///
    /// A new static quorum is bootstrapped by the lowest-id voter alone,
    /// with the full voter set, and only while its log and vote are empty.
    /// That is safe: exactly one node can ever propose the initial
    /// membership, it does so once (afterwards its log holds it), and every
    /// node starts from the same configuration anyway. The other voters
    /// stay empty until that node, elected, replicates the membership to
    /// them. A static voter whose directory is wiped should not rejoin
    /// under its old id: it forgot the votes it gave (the leader catches
    /// its log up again). A new dynamic quorum is bootstrapped the same
    /// way from its initial voters ([`DynamicQuorum`](super::DynamicQuorum));
    /// other controllers join it (see `join`), and one with an empty log
    /// votes only once the quorum knows it with its own directory, so a
    /// wiped voter cannot vote twice.
    pub async fn start(
        node_id: u64,
        dir: &Path,
        voters: QuorumVoters,
        listener: Option<TcpListener>,
        config: QuorumConfig,
    ) -> Result<Self, QuorumError> {
        let initial = match &voters {
            QuorumVoters::Static(voters) => {
                check_static_voters(node_id, voters)?;
                voters.clone()
            }
            QuorumVoters::Dynamic(d) => {
                check_addresses(&d.initial_voters)?;
                d.initial_voters.clone()
            }
        };
        let raft_config = Arc::new(config.raft_config()?);
        let cluster_id = config.checked_cluster_id()?;
        let refusals = Arc::new(LogLimiter::default());
        let log = LogStore::open(dir, config.segment_bytes)?;
        let (state_machine, image, recent) = StateMachine::open(dir)?;
        let contacts = Contacts::default();
        let network = Network::new(
            node_id,
            cluster_id.clone(),
            contacts.clone(),
            config.peer_security.clone(),
            refusals.clone(),
        );
        let raft = Raft::new(node_id, raft_config, network, log, state_machine)
            .await
            .map_err(stopped)?;
        let service = ServiceSlot::default();
        let feed = Arc::new(ObserverFeed::new(image.clone(), recent));
        let (departures, departed) = mpsc::unbounded_channel();
        let (brokers_tx, departed_brokers) = mpsc::unbounded_channel();
        tokio::spawn(departures::watch(
            node_id,
            raft.clone(),
            departed,
            brokers_tx,
        ));
        // A controller joining a dynamic quorum with an empty log votes only
        // once it is known there (see `join`).
        let joining = matches!(&voters, QuorumVoters::Dynamic(d) if !d.initial_voters.contains_key(&node_id))
            && !raft.is_initialized().await.map_err(stopped)?;
        let voting = Arc::new(AtomicBool::new(!joining));
        let rpc = RpcHandler {
            id: node_id,
            cluster_id: cluster_id.clone(),
            raft: raft.clone(),
            service: service.clone(),
            feed: feed.clone(),
            refusals,
            departures,
            voting: voting.clone(),
        };
        let server = listener.map(|listener| tokio::spawn(serve(listener, rpc.clone())));
        let quorum = Self {
            id: node_id,
            kraft_version: voters.kraft_version(),
            raft,
            image,
            contacts,
            server,
            write_timeout: config.write_timeout,
            service,
            to_leader: ToLeader::new(&config.peer_security, &cluster_id, config.write_timeout),
            feed,
            cluster_id,
            voting,
            rpc,
            departed_brokers: parking_lot::Mutex::new(Some(departed_brokers)),
        };
        let lowest = initial.keys().next() == Some(&node_id);
        if lowest && !quorum.raft.is_initialized().await.map_err(stopped)? {
            info!(node = node_id, voters = ?initial.keys(), "bootstrapping the metadata quorum");
            quorum
                .raft
                .initialize(initial.clone())
                .await
                .map_err(stopped)?;
        } else if quorum.sole_voter().await? {
            // A lone voter need not wait out an election timeout to lead.
            let _ = quorum.raft.trigger().elect().await;
        }
        if let QuorumVoters::Dynamic(dynamic) = voters {
            tokio::spawn(
                Joining {
                    id: node_id,
                    quorum: dynamic,
                    raft: quorum.raft.clone(),
                    image: quorum.subscribe(),
                    service: quorum.service.clone(),
                    voting: quorum.voting.clone(),
                    to_leader: ToLeader::new(
                        &config.peer_security,
                        &quorum.cluster_id,
                        config.write_timeout,
                    ),
                }
                .run(),
            );
        }
        Ok(quorum)
    }

    /// Whether this node is the only voter of the membership its log holds
    /// (read from Raft's state: the metrics may not show it yet at start).
    async fn sole_voter(&self) -> Result<bool, QuorumError> {
        let id = self.id;
        self.raft
            .with_raft_state(move |st| {
                st.membership_state
                    .effective()
                    .voter_ids()
                    .eq(std::iter::once(id))
            })
            .await
            .map_err(stopped)
    }

    /// KRaft's `kraft.version` feature level: 1 when the voters can change.
    pub fn kraft_version(&self) -> i16 {
        self.kraft_version
    }

    pub fn node_id(&self) -> u64 {
        self.id
    }

    /// Commits `records` as one entry and waits until this node applied it.
    /// Returns the entry's offset.
    pub async fn write(&self, records: Vec<MetadataRecord>) -> Result<i64, QuorumError> {
        self.write_encoded(records.iter().map(MetadataRecord::encode).collect())
            .await
    }

    /// As [`Quorum::write`], with the records already encoded.
    pub async fn write_encoded(&self, payload: Vec<Vec<u8>>) -> Result<i64, QuorumError> {
        let size = payload.iter().map(Vec::len).sum();
        if size > MAX_WRITE_BYTES {
            return Err(QuorumError::TooLarge { size });
        }
        let written = tokio::time::timeout(self.write_timeout, self.raft.client_write(payload))
            .await
            .map_err(|_| QuorumError::Timeout)?;
        match written {
            Ok(response) => Ok(response.data),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                Err(QuorumError::NotLeader {
                    leader: f.leader_id,
                })
            }
            Err(e) => Err(stopped(e)),
        }
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// Metadata listeners; like `Controller::subscribe`.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.image.subscribe()
    }

    /// The voters and their controller listener addresses.
    pub fn voters(&self) -> BTreeMap<u64, Node> {
        voters_of(&self.raft.metrics().borrow())
    }

    /// Controllers that follow the log without voting (openraft learners:
    /// joined, or removed from the voters), with their addresses.
    pub fn learners(&self) -> BTreeMap<u64, Node> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let membership = metrics.membership_config.membership();
        membership
            .learner_ids()
            .filter_map(|id| Some((id, membership.get_node(&id)?.clone())))
            .collect()
    }

    /// Starts replicating the log to controller `id` at `node`, a learner
    /// until it is made a voter (the leader only).
    pub(crate) async fn add_learner(&self, id: u64, node: Node) -> Result<(), VoterChangeError> {
        self.raft
            .add_learner(id, node, false)
            .await
            .map(drop)
            .map_err(VoterChangeError::from)
    }

    /// Whether learner `id` has every entry this leader applied.
    pub(crate) fn caught_up(&self, id: u64) -> bool {
        let metrics = self.raft.metrics().borrow().clone();
        let matched = metrics
            .replication
            .as_ref()
            .and_then(|r| r.get(&id).copied().flatten());
        matched.map(|m| m.index) >= metrics.last_applied.map(|a| a.index)
    }

    /// Changes the voters (the leader only) and waits until the change is
    /// committed. A removed voter stays a learner, so it keeps following
    /// the log, as KRaft's removed voter goes on as an observer.
    pub(crate) async fn change_voters(
        &self,
        change: ChangeMembers<u64, Node>,
    ) -> Result<i64, VoterChangeError> {
        let written = self.raft.change_membership(change, true).await?;
        Ok(offset_of(written.log_id.index))
    }

    /// Raft's state as it changes (leader, term, log progress).
    pub(crate) fn metrics(&self) -> watch::Receiver<openraft::RaftMetrics<u64, Node>> {
        self.raft.metrics()
    }

    /// The current Raft term (KRaft's epoch).
    pub fn term(&self) -> u64 {
        self.raft.metrics().borrow().current_term
    }

    /// The leader this node follows and when it last heard from it (its
    /// last heartbeat or append), or None when it follows no other node.
    pub(crate) async fn leader_last_heard(&self) -> Option<(u64, std::time::Instant)> {
        let leader = self.leader().filter(|l| *l != self.id)?;
        // Only while the vote is still the leader's: once this node stands
        // for election its own vote changes, and its time is not the
        // leader's (a race with the metrics' view of the leader).
        let heard = self
            .raft
            .with_raft_state(move |st| {
                let vote = st.vote_ref();
                let leaders = vote.is_committed() && vote.leader_id().voted_for() == Some(leader);
                leaders.then(|| st.vote_last_modified()).flatten()
            })
            .await
            .ok()??;
        Some((leader, heard.into_std()))
    }

    /// The current leader, as far as this node knows.
    pub fn leader(&self) -> Option<u64> {
        // Cloned out at once: holding the metrics borrow can stall RaftCore.
        self.raft.metrics().borrow().current_leader
    }

    /// The quorum's state for DescribeQuorum. Per-voter progress is only
    /// known on the leader; elsewhere it is reported for this node alone.
    pub async fn summary(&self) -> Result<QuorumSummary, QuorumError> {
        let metrics = self.raft.metrics().borrow().clone();
        let committed = self
            .raft
            .with_raft_state(|st| st.committed)
            .await
            .map_err(stopped)?;
        let contacts = self.contacts.lock().clone();
        let end_of = |index: Option<u64>| index.map_or(0, |i| offset_of(i) + 1);
        let membership = metrics.membership_config.membership();
        if !membership.voter_ids().any(|v| v == self.id) {
            // A leader that removed itself leads until the removal is
            // committed, then steps down: it speaks for no voter set.
            return Err(QuorumError::NotLeader { leader: None });
        }
        let progress = |id: u64| {
            let matched = metrics.replication.as_ref().and_then(|r| r.get(&id));
            VoterSummary {
                id,
                log_end_offset: matched.map_or(-1, |m| end_of(m.map(|l| l.index))),
                last_fetch_ms: matched.and(contacts.get(&id).copied()),
            }
        };
        let voters = membership
            .voter_ids()
            .map(|id| {
                if id == self.id {
                    return VoterSummary {
                        id,
                        log_end_offset: end_of(metrics.last_log_index),
                        last_fetch_ms: Some(now_ms()),
                    };
                }
                progress(id)
            })
            .collect();
        // Controllers that follow without voting are observers, as in KRaft.
        let mut observers: Vec<VoterSummary> = membership.learner_ids().map(progress).collect();
        observers.extend(self.feed.observers());
        Ok(QuorumSummary {
            leader: metrics.current_leader,
            epoch: metrics.current_term,
            high_watermark: end_of(committed.map(|c| c.index)),
            voters,
            observers,
            voter_nodes: voters_of(&metrics),
        })
    }

    /// The RPC handler, for serving quorum connections accepted elsewhere
    /// (the broker's controller listener).
    pub fn rpc_handler(&self) -> RpcHandler {
        self.rpc.clone()
    }

    /// Brokers whose heartbeat or metadata-fetch connection to this node
    /// closed, one report per closed connection. Only the first caller
    /// gets them.
    pub(crate) fn take_departed_brokers(&self) -> Option<mpsc::UnboundedReceiver<i32>> {
        self.departed_brokers.lock().take()
    }

    /// Sets what answers calls forwarded to this node while it leads.
    pub fn set_service(&self, service: Arc<dyn ControllerService>) {
        let _ = self.service.set(service);
    }

    /// Waits until this node has applied everything committed before now,
    /// confirming with a quorum that it still leads.
    pub async fn linearize(&self) -> Result<(), QuorumError> {
        match self.raft.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                Err(QuorumError::NotLeader {
                    leader: f.leader_id,
                })
            }
            Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_))) => {
                Err(QuorumError::NotLeader { leader: None })
            }
            Err(e) => Err(stopped(e)),
        }
    }

    /// Sends a call to the current leader (which must be another node).
    pub async fn forward(
        &self,
        request: ControllerRequest,
    ) -> Result<ControllerResponse, QuorumError> {
        let leader = self.leader();
        let target = leader
            .filter(|l| *l != self.id)
            .ok_or(QuorumError::NotLeader { leader })?;
        let node = self
            .raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&target)
            .cloned()
            .ok_or(QuorumError::NotLeader { leader })?;
        self.to_leader
            .call(Some(target), &node, request)
            .await
            .map_err(QuorumError::Unreachable)
    }

    /// Stops Raft, waiting for it to finish; the quorum answers nothing after.
    pub async fn stop(&self) {
        let _ = self.raft.shutdown().await;
    }

    /// Stops serving (the listener is closed on return) and stops Raft,
    /// waiting for it to finish. Dropping a Quorum stops it too, without
    /// waiting.
    pub async fn shutdown(mut self) {
        if let Some(server) = self.server.take() {
            server.abort();
            let _ = server.await;
        }
        let _ = self.raft.shutdown().await;
    }
}

impl Drop for Quorum {
    fn drop(&mut self) {
        // Raft stops once its last handle (ours, and the server's) is gone.
        if let Some(server) = &self.server {
            server.abort();
        }
    }
}

/// A static voter set must name this node, each address once.
fn check_static_voters(node_id: u64, voters: &BTreeMap<u64, Node>) -> Result<(), QuorumError> {
    if !voters.contains_key(&node_id) {
        return Err(QuorumError::Config(format!(
            "node {node_id} is not a voter"
        )));
    }
    check_addresses(voters)
}

/// Two ids on one address would have a node send RPCs to itself.
fn check_addresses(voters: &BTreeMap<u64, Node>) -> Result<(), QuorumError> {
    let mut addresses = BTreeSet::new();
    if let Some(node) = voters
        .values()
        .find(|n| !addresses.insert((&n.host, n.port)))
    {
        return Err(QuorumError::Config(format!(
            "two voters share the address {node}"
        )));
    }
    Ok(())
}

fn stopped(e: impl std::fmt::Display) -> QuorumError {
    QuorumError::Stopped(e.to_string())
}
