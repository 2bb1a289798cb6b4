//! [`Observer`]: a broker-only node's view of the metadata quorum.
//!
//! Like a KRaft broker, an observer takes no part in elections or commits:
//! it fetches the committed metadata from the active controller, applies it
//! to its own image, and sends its writes and heartbeats there. Nothing is
//! kept on disk; a restarted observer fetches the whole image again (one
//! response), which also spares it a second copy of the metadata log.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::forward::ToLeader;
use super::quorum::{QuorumConfig, QuorumError};
use super::snapshot::image_from;
use super::state_machine::apply_records;
use super::{Node, QuorumVoters};
use crate::image::MetadataImage;
use crate::service::{ControllerRequest, ControllerResponse, MetadataFetch, MetadataUpdate};

/// How long the leader may hold a fetch while nothing is newer: the
/// latency of an idle observer noticing a change is the leader's, not this.
const FETCH_WAIT_MS: u32 = 500;
/// Pause before asking the next voter after a failed fetch.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// How often a run of failed fetches is logged.
const WARN_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, Default)]
struct LeaderView {
    leader: Option<u64>,
    term: u64,
}

/// A running observer; dropping it stops the fetching.
pub struct Observer {
    kraft_version: i16,
    voters: Arc<Mutex<BTreeMap<u64, Node>>>,
    image: Arc<watch::Sender<Arc<MetadataImage>>>,
    view: Arc<Mutex<LeaderView>>,
    to_leader: Arc<ToLeader>,
    follower: JoinHandle<()>,
}

impl Observer {
    /// Starts following the quorum (on the current runtime): the fixed
    /// voters, or the voters the bootstrap servers' leader names. The
    /// image stays empty (offset -1) until the first fetch is answered.
    pub fn start(
        node_id: u64,
        voters: &QuorumVoters,
        config: &QuorumConfig,
    ) -> Result<Self, QuorumError> {
        let (known, bootstrap) = match voters {
            QuorumVoters::Static(voters) => (voters.clone(), Vec::new()),
            QuorumVoters::Dynamic(d) => (BTreeMap::new(), d.bootstrap.clone()),
        };
        if known.is_empty() && bootstrap.is_empty() {
            return Err(QuorumError::Config("no voters to follow".into()));
        }
        if known.contains_key(&node_id) {
            return Err(QuorumError::Config(format!(
                "node {node_id} is a voter, not an observer"
            )));
        }
        let (image, _) = watch::channel(Arc::new(MetadataImage::empty()));
        let image = Arc::new(image);
        let view = Arc::new(Mutex::new(LeaderView::default()));
        let voters_config = voters;
        let voters = Arc::new(Mutex::new(known));
        let cluster_id = config.checked_cluster_id()?;
        let to_leader = Arc::new(ToLeader::new(
            &config.peer_security,
            &cluster_id,
            config.write_timeout,
        ));
        let follower = tokio::spawn(
            Follower {
                id: node_id,
                voters: voters.clone(),
                bootstrap,
                image: image.clone(),
                view: view.clone(),
                to_leader: to_leader.clone(),
            }
            .run(),
        );
        Ok(Self {
            kraft_version: voters_config.kraft_version(),
            voters,
            image,
            view,
            to_leader,
            follower,
        })
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.image.subscribe()
    }

    pub fn voters(&self) -> BTreeMap<u64, Node> {
        self.voters.lock().clone()
    }

    pub fn kraft_version(&self) -> i16 {
        self.kraft_version
    }

    /// The active controller that answered the last fetch.
    pub fn leader(&self) -> Option<u64> {
        self.view.lock().leader
    }

    pub fn term(&self) -> u64 {
        self.view.lock().term
    }

    /// Sends a call to the active controller.
    pub async fn forward(
        &self,
        request: ControllerRequest,
    ) -> Result<ControllerResponse, QuorumError> {
        let leader = self.leader();
        let (target, node) = leader
            .and_then(|id| Some((id, self.voters.lock().get(&id)?.clone())))
            .ok_or(QuorumError::NotLeader { leader })?;
        self.to_leader
            .call(Some(target), &node, request)
            .await
            .map_err(QuorumError::Unreachable)
    }

    pub fn stop(&self) {
        self.follower.abort();
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.follower.abort();
    }
}

/// The fetch loop: asks the leader it knows, or each voter (and bootstrap
/// server) in turn until one answers as leader.
struct Follower {
    id: u64,
    voters: Arc<Mutex<BTreeMap<u64, Node>>>,
    bootstrap: Vec<Node>,
    image: Arc<watch::Sender<Arc<MetadataImage>>>,
    view: Arc<Mutex<LeaderView>>,
    to_leader: Arc<ToLeader>,
}

impl Follower {
    /// The controller to fetch from: the leader, else the `attempt`th of
    /// the voters and bootstrap servers.
    fn target(&self, attempt: usize) -> (Option<u64>, Node) {
        let voters = self.voters.lock();
        if let Some((id, node)) = self
            .view
            .lock()
            .leader
            .and_then(|id| Some((id, voters.get(&id)?)))
        {
            return (Some(id), node.clone());
        }
        let candidates: Vec<(Option<u64>, &Node)> = voters
            .iter()
            .map(|(id, node)| (Some(*id), node))
            .chain(self.bootstrap.iter().map(|node| (None, node)))
            .collect();
        let (id, node) = candidates[attempt % candidates.len()];
        (id, node.clone())
    }

    async fn run(self) {
        let mut attempt = 0;
        let mut failing_since: Option<(Instant, Instant)> = None;
        loop {
            let (target, node) = self.target(attempt);
            let fetch = MetadataFetch {
                observer: self.id,
                after: self.image.borrow().offset,
                max_wait_ms: FETCH_WAIT_MS,
            };
            let answer = self
                .to_leader
                .call(target, &node, ControllerRequest::FetchMetadata(fetch))
                .await;
            let why = match answer {
                Ok(ControllerResponse::Metadata {
                    term,
                    leader,
                    voters,
                    update,
                }) => {
                    if failing_since.take().is_some() || self.view.lock().leader != Some(leader) {
                        info!(controller = leader, term, "following the active controller");
                    }
                    if !voters.is_empty() {
                        *self.voters.lock() = voters;
                    }
                    *self.view.lock() = LeaderView {
                        leader: Some(leader),
                        term,
                    };
                    if let Err(e) = self.apply(update) {
                        // As on a voter, a record this build cannot read
                        // stops the metadata here rather than be skipped.
                        error!("stopped following the metadata log: {e}; upgrade this node");
                        return;
                    }
                    continue;
                }
                Ok(ControllerResponse::NotLeader) => format!("{node} is not the active controller"),
                Ok(other) => format!("{node} answered {other:?}"),
                Err(e) => e,
            };
            self.view.lock().leader = None;
            attempt += 1;
            let now = Instant::now();
            match &mut failing_since {
                None => failing_since = Some((now, now)),
                Some((since, warned)) if now.duration_since(*warned) >= WARN_EVERY => {
                    warn!(
                        "no active controller answered metadata fetches for {:?} (last: {why}); check that a majority of the controller quorum's voters is running and reachable",
                        now.duration_since(*since)
                    );
                    *warned = now;
                }
                Some(_) => {}
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }

    fn apply(&self, update: MetadataUpdate) -> Result<(), String> {
        let image = match update {
            MetadataUpdate::Entries(entries) if entries.is_empty() => return Ok(()),
            MetadataUpdate::Entries(entries) => {
                let mut image = MetadataImage::clone(&self.image.borrow());
                for (offset, records) in entries {
                    apply_records(&mut image, offset, &records)?;
                }
                image
            }
            MetadataUpdate::Image { offset, records } => image_from(offset, &records)?,
        };
        self.image.send_replace(Arc::new(image));
        Ok(())
    }
}
