//! The voters of a dynamic metadata quorum (KIP-853), as the active
//! controller changes them: a controller joining (its log directory
//! recorded, the log replicated to it), AddRaftVoter and RemoveRaftVoter
//! (`kafka-metadata-quorum.sh add-controller / remove-controller`).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use openraft::ChangeMembers;
use tracing::info;
use uuid::Uuid;

use crate::controller::{Controller, ControllerError, ControllerResult};
use crate::raft::{Node, Quorum, VoterChangeError};
use crate::records::MetadataRecord;
use crate::service::{ControllerJoin, ControllerRequest, ControllerResponse, VoterKey};

impl Controller {
    /// AddRaftVoter: controller `id`, which follows the log from directory
    /// `directory_id`, becomes a voter. Returns once the change is
    /// committed.
    pub async fn add_voter(&self, id: i32, directory_id: Uuid) -> ControllerResult<()> {
        self.change_voters(ControllerRequest::AddVoter(voter_key(id, directory_id)?))
            .await
    }

    /// RemoveRaftVoter: voter `id` of directory `directory_id` stops voting
    /// and goes on following the log.
    pub async fn remove_voter(&self, id: i32, directory_id: Uuid) -> ControllerResult<()> {
        self.change_voters(ControllerRequest::RemoveVoter(voter_key(id, directory_id)?))
            .await
    }

    /// Runs a change of the voters here if this node leads, else on the
    /// active controller.
    async fn change_voters(&self, request: ControllerRequest) -> ControllerResult<()> {
        let me = self.me.upgrade().expect("controller alive");
        let response = self
            .on_runtime(async move {
                match (me.is_active(), request) {
                    (true, ControllerRequest::AddVoter(key)) => me.add_voter_as_leader(key).await,
                    (true, ControllerRequest::RemoveVoter(key)) => {
                        me.remove_voter_as_leader(key).await
                    }
                    (_, request) => me
                        .quorum
                        .forward(request)
                        .await
                        .unwrap_or(ControllerResponse::NotLeader),
                }
            })
            .await;
        match response {
            ControllerResponse::Written { .. } => Ok(()),
            ControllerResponse::Failed { code, message } => Err(ControllerError { code, message }),
            ControllerResponse::NotLeader => Err(not_active()),
            other => Err(ControllerError::new(
                ResponseError::UnknownServerError,
                format!("the active controller answered {other:?}"),
            )),
        }
    }

    /// The quorum if it is dynamic and this node leads it.
    fn dynamic_quorum(&self) -> Result<&Quorum, ControllerResponse> {
        let quorum = self
            .quorum
            .voter()
            .filter(|_| self.is_active())
            .ok_or(ControllerResponse::NotLeader)?;
        if quorum.kraft_version() == 0 {
            return Err(failed(ControllerError::new(
                ResponseError::UnsupportedVersion,
                "the metadata quorum's voters are fixed by controller.quorum.voters \
                 (kraft.version 0); configure controller.quorum.bootstrap.servers \
                 instead to change them",
            )));
        }
        Ok(quorum)
    }

    /// A controller makes itself known: its directory goes into the
    /// metadata, and the leader starts replicating to it if it is new.
    pub(crate) async fn join_as_leader(&self, join: ControllerJoin) -> ControllerResponse {
        let quorum = match self.dynamic_quorum() {
            Ok(q) => q,
            Err(answer) => return answer,
        };
        let Ok(controller_id) = i32::try_from(join.id) else {
            return failed(ControllerError::new(
                ResponseError::InvalidRequest,
                format!("controller id {} is out of range", join.id),
            ));
        };
        let directory_id = Uuid::from_u128(join.directory_id);
        let recorded = self
            .image()
            .controller_directories
            .get(&controller_id)
            .copied();
        if recorded != Some(directory_id) {
            if let Some(old) = recorded.filter(|_| quorum.voters().contains_key(&join.id)) {
                // A voter is the pair (id, directory): a voter whose disk
                // was replaced lost its votes and its log, and must not
                // pass for the old one. The joining node logs this answer.
                return failed(ControllerError::new(
                    ResponseError::InvalidVoterKey,
                    format!(
                        "voter {} runs on metadata log directory {old}, not {directory_id}: \
                         remove the old voter with kafka-metadata-quorum.sh remove-controller \
                         --controller-id {} --controller-directory-id {}, then add this one",
                        join.id,
                        join.id,
                        ottla_protocol::names::uuid_text(&old)
                    ),
                ));
            }
            let record = MetadataRecord::ControllerDirectory {
                controller_id,
                directory_id,
            };
            if let Err(e) = self.commit_records(vec![record]).await {
                return failed(e);
            }
        }
        let known_at = quorum
            .voters()
            .get(&join.id)
            .or(quorum.learners().get(&join.id))
            .cloned();
        if known_at.as_ref().is_some_and(|at| *at != join.node) {
            // Kafka's UpdateRaftVoter: the controller restarted with another
            // controller listener address.
            if let Err(e) = quorum
                .change_voters(ChangeMembers::SetNodes(BTreeMap::from([(
                    join.id,
                    join.node.clone(),
                )])))
                .await
            {
                return change_failed(e);
            }
            info!(controller = join.id, node = %join.node, "a controller's address changed");
        }
        if known_at.is_none() {
            if let Err(e) = quorum.add_learner(join.id, join.node.clone()).await {
                return change_failed(e);
            }
            info!(
                controller = join.id,
                node = %join.node,
                "a controller joined the metadata quorum; it follows the log until it is added as a voter"
            );
        }
        ControllerResponse::Written {
            offset: self.image().offset,
        }
    }

    pub(crate) async fn add_voter_as_leader(&self, key: VoterKey) -> ControllerResponse {
        let quorum = match self.dynamic_quorum() {
            Ok(q) => q,
            Err(answer) => return answer,
        };
        let directory_id = Uuid::from_u128(key.directory_id);
        if quorum.voters().contains_key(&key.id) {
            return failed(ControllerError::new(
                ResponseError::DuplicateVoter,
                format!("controller {} is already a voter", key.id),
            ));
        }
        if !quorum.learners().contains_key(&key.id)
            || self.directory_of(key.id) != Some(directory_id)
        {
            // Kafka's code for a replica it has not seen fetching.
            return failed(ControllerError::new(
                ResponseError::RequestTimedOut,
                format!(
                    "controller {} with directory {directory_id} does not follow the metadata log: \
                     start it with controller.quorum.bootstrap.servers naming this cluster's controllers",
                    key.id
                ),
            ));
        }
        if !quorum.caught_up(key.id) {
            return failed(ControllerError::new(
                ResponseError::RequestTimedOut,
                format!(
                    "controller {} has not caught up with the metadata log yet; retry shortly",
                    key.id
                ),
            ));
        }
        let added = ChangeMembers::AddVoterIds(BTreeSet::from([key.id]));
        commit_change(quorum, added, key, "added a voter to the metadata quorum").await
    }

    pub(crate) async fn remove_voter_as_leader(&self, key: VoterKey) -> ControllerResponse {
        let quorum = match self.dynamic_quorum() {
            Ok(q) => q,
            Err(answer) => return answer,
        };
        let directory_id = Uuid::from_u128(key.directory_id);
        let voters = quorum.voters();
        if !voters.contains_key(&key.id) || self.directory_of(key.id) != Some(directory_id) {
            return failed(ControllerError::new(
                ResponseError::VoterNotFound,
                format!(
                    "controller {} with directory {directory_id} is not a voter",
                    key.id
                ),
            ));
        }
        if voters.len() == 1 {
            return failed(ControllerError::new(
                ResponseError::VoterNotFound,
                format!(
                    "controller {} is the only voter: the set of voters cannot be empty",
                    key.id
                ),
            ));
        }
        let removed = ChangeMembers::RemoveVoters(BTreeSet::from([key.id]));
        commit_change(
            quorum,
            removed,
            key,
            "removed a voter from the metadata quorum",
        )
        .await
    }

    fn directory_of(&self, id: u64) -> Option<Uuid> {
        let id = i32::try_from(id).ok()?;
        self.image().controller_directories.get(&id).copied()
    }
}

/// Commits a change of the voters about `key` and answers; logs `what`
/// once it is committed.
async fn commit_change(
    quorum: &Quorum,
    change: ChangeMembers<u64, Node>,
    key: VoterKey,
    what: &str,
) -> ControllerResponse {
    match quorum.change_voters(change).await {
        Ok(offset) => {
            let directory_id = Uuid::from_u128(key.directory_id);
            info!(controller = key.id, %directory_id, "{what}");
            ControllerResponse::Written { offset }
        }
        Err(e) => change_failed(e),
    }
}

fn voter_key(id: i32, directory_id: Uuid) -> ControllerResult<VoterKey> {
    let id = u64::try_from(id).map_err(|_| {
        ControllerError::new(
            ResponseError::InvalidRequest,
            format!("voter id {id} is negative"),
        )
    })?;
    Ok(VoterKey {
        id,
        directory_id: directory_id.as_u128(),
    })
}

fn not_active() -> ControllerError {
    ControllerError::new(
        ResponseError::NotLeaderOrFollower,
        "no active controller answered; retry once the quorum has a leader",
    )
}

fn failed(e: ControllerError) -> ControllerResponse {
    ControllerResponse::Failed {
        code: e.code,
        message: e.message,
    }
}

fn change_failed(e: VoterChangeError) -> ControllerResponse {
    let code = match e {
        VoterChangeError::NotLeader => return ControllerResponse::NotLeader,
        VoterChangeError::InProgress => ResponseError::RequestTimedOut,
        VoterChangeError::NotFollowing(_) => ResponseError::RequestTimedOut,
        VoterChangeError::Stopped(_) => ResponseError::UnknownServerError,
    };
    failed(ControllerError::new(code, e.to_string()))
}
