//! A controller of a dynamic quorum (KIP-853) makes itself known to the
//! active controller: its metadata log directory goes into the metadata (a
//! voter is the pair of id and directory), and a controller in no
//! membership yet becomes an openraft learner, to which the leader
//! replicates the log. That is KRaft's new controller fetching as an
//! observer until `kafka-metadata-quorum.sh add-controller` makes it a
//! voter, or, with `controller.quorum.auto.join.enable`, until it asks for
//! that itself.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::Raft;
use tokio::sync::watch;
use tracing::{info, warn};

use super::forward::ToLeader;
use super::{DynamicQuorum, Node, TypeConfig};
use crate::image::MetadataImage;
use crate::service::{
    ControllerJoin, ControllerRequest, ControllerResponse, ServiceSlot, VoterKey,
};

/// Pause between attempts, and while the leader's answer replicates here.
const RETRY: Duration = Duration::from_millis(300);
/// Pause after a refusal (not caught up yet, or a replaced directory that
/// waits for the operator).
const REFUSED_RETRY: Duration = Duration::from_secs(1);
/// How often a run of failed attempts is logged.
const WARN_EVERY: Duration = Duration::from_secs(10);

pub(crate) struct Joining {
    pub id: u64,
    pub quorum: DynamicQuorum,
    pub raft: Raft<TypeConfig>,
    pub image: watch::Receiver<Arc<MetadataImage>>,
    pub service: ServiceSlot,
    /// Set once this node is known: it may vote from then on.
    pub voting: Arc<AtomicBool>,
    pub to_leader: ToLeader,
}

impl Joining {
    /// Whether this node's log shows it in the membership, at its address
    /// and with its directory.
    fn known(&self) -> bool {
        let listed = self
            .raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&self.id)
            .is_some_and(|at| *at == self.quorum.own);
        let directory = i32::try_from(self.id)
            .ok()
            .and_then(|id| self.image.borrow().controller_directories.get(&id).copied());
        listed && directory == Some(self.quorum.directory_id)
    }

    /// Where to send the join: the leader this node knows (None: itself),
    /// else the `attempt`th bootstrap server.
    fn target(&self, attempt: usize) -> Option<(Option<u64>, Node)> {
        let metrics = self.raft.metrics().borrow().clone();
        match metrics.current_leader {
            Some(leader) if leader == self.id => None,
            Some(leader) => {
                let node = metrics.membership_config.membership().get_node(&leader)?;
                Some((Some(leader), node.clone()))
            }
            None => {
                let servers = &self.quorum.bootstrap;
                Some((None, servers[attempt % servers.len()].clone()))
            }
        }
    }

    /// Whether this node's log shows it among the voters.
    fn voter(&self) -> bool {
        self.raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .any(|id| id == self.id)
    }

    pub async fn run(self) {
        let join = ControllerRequest::JoinQuorum(ControllerJoin {
            id: self.id,
            node: self.quorum.own.clone(),
            directory_id: self.quorum.directory_id.as_u128(),
        });
        self.send_until(Self::known, join, "join the metadata quorum")
            .await;
        self.voting.store(true, Ordering::Release);
        info!(
            directory_id = %self.quorum.directory_id,
            "this controller is known to the metadata quorum"
        );
        if self.quorum.auto_join && !self.voter() {
            let add = ControllerRequest::AddVoter(VoterKey {
                id: self.id,
                directory_id: self.quorum.directory_id.as_u128(),
            });
            // Refused until this node has caught up with the log.
            self.send_until(
                Self::voter,
                add,
                "become a voter (controller.quorum.auto.join.enable)",
            )
            .await;
            info!("this controller is a voter of the metadata quorum");
        }
    }

    /// Sends `request` to the active controller until `done`.
    async fn send_until(&self, done: fn(&Self) -> bool, request: ControllerRequest, what: &str) {
        let started = Instant::now();
        let mut warned = started;
        let mut refusal_logged: Option<Instant> = None;
        let mut attempt = 0;
        while !done(self) {
            let answer = match self.target(attempt) {
                None => match self.service.get() {
                    Some(service) => Ok(service.call(request.clone()).await),
                    None => Err("this controller is not serving yet".to_string()),
                },
                Some((id, node)) => self.to_leader.call(id, &node, request.clone()).await,
            };
            let pause = match &answer {
                Ok(ControllerResponse::Failed { .. }) => REFUSED_RETRY,
                _ => RETRY,
            };
            match answer {
                Ok(ControllerResponse::Written { .. }) => {}
                // A refusal is news at once (a replaced directory waits
                // for the operator); being unreachable a while at start
                // is not.
                Ok(ControllerResponse::Failed { code, message })
                    if refusal_logged.is_none_or(|at| at.elapsed() >= WARN_EVERY) =>
                {
                    warn!("cannot {what}: the active controller refused (error {code}): {message}");
                    refusal_logged = Some(Instant::now());
                }
                Ok(other) if warned.elapsed() >= WARN_EVERY => {
                    warn!("trying to {what}: the active controller answered {other:?}");
                    warned = Instant::now();
                }
                Err(e) if warned.elapsed() >= WARN_EVERY => {
                    warn!(
                        "cannot {what} for {:?} (last: {e}); check controller.quorum.bootstrap.servers",
                        started.elapsed()
                    );
                    warned = Instant::now();
                }
                Ok(_) | Err(_) => {}
            }
            attempt += 1;
            tokio::time::sleep(pause).await;
        }
    }
}
