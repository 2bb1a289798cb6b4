//! AddRaftVoter and RemoveRaftVoter (KIP-853): `kafka-metadata-quorum.sh
//! add-controller / remove-controller` change the voters of a dynamic
//! quorum; the active controller runs the change
//! (`ottla_controller::voters`), whichever node took the request.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_raft_voter_request::Listener;
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::controller::{ControllerError, ControllerResult};

use crate::apis::describe_quorum::QuorumContext;

pub fn add(
    quorum: &QuorumContext<'_>,
    _version: i16,
    req: AddRaftVoterRequest,
) -> AddRaftVoterResponse {
    let controller = quorum.controller;
    let result = same_cluster(quorum, req.cluster_id.as_deref())
        .and_then(|()| names_the_controller_listener(quorum, &req.listeners))
        .and_then(|()| {
            controller.block_on(controller.add_voter(req.voter_id, req.voter_directory_id))
        });
    let (code, message) = outcome(result);
    AddRaftVoterResponse::default()
        .with_error_code(code)
        .with_error_message(message)
}

pub fn remove(
    quorum: &QuorumContext<'_>,
    _version: i16,
    req: RemoveRaftVoterRequest,
) -> RemoveRaftVoterResponse {
    let controller = quorum.controller;
    let result = same_cluster(quorum, req.cluster_id.as_deref()).and_then(|()| {
        controller.block_on(controller.remove_voter(req.voter_id, req.voter_directory_id))
    });
    let (code, message) = outcome(result);
    RemoveRaftVoterResponse::default()
        .with_error_code(code)
        .with_error_message(message)
}

fn same_cluster(quorum: &QuorumContext<'_>, cluster_id: Option<&str>) -> ControllerResult<()> {
    match cluster_id {
        Some(id) if id != quorum.cluster_id => Err(ControllerError::new(
            ResponseError::InconsistentClusterId,
            format!(
                "the request is for cluster {id}, this is cluster {}",
                quorum.cluster_id
            ),
        )),
        _ => Ok(()),
    }
}

/// Peers reach a voter on the first controller listener, so the new voter
/// must have one by that name. The address used is the one the controller
/// announced when it joined.
fn names_the_controller_listener(
    quorum: &QuorumContext<'_>,
    listeners: &[Listener],
) -> ControllerResult<()> {
    let name = quorum.controller_listener;
    if listeners.iter().any(|l| l.name.as_str() == name) {
        return Ok(());
    }
    Err(ControllerError::new(
        ResponseError::InvalidRequest,
        format!("the new voter's listeners do not include the controller listener {name}"),
    ))
}

fn outcome(result: ControllerResult<()>) -> (i16, Option<StrBytes>) {
    match result {
        Ok(()) => (0, None),
        Err(e) => (e.code, Some(StrBytes::from_string(e.message))),
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::apis::test_support::{off_runtime, test_broker};

    #[test]
    fn a_static_quorum_refuses_voter_changes_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let broker = test_broker(dir.path());
        let quorum = QuorumContext {
            controller: &broker.controller,
            cluster_id: &broker.cluster_id,
            controller_listener: &broker.settings.controller_listener,
        };
        let listener = Listener::default()
            .with_name(StrBytes::from_string(
                broker.settings.controller_listener.clone(),
            ))
            .with_host(StrBytes::from_static_str("127.0.0.1"))
            .with_port(9093);
        // The admin client names no cluster unless asked to.
        let add = AddRaftVoterRequest::default()
            .with_cluster_id(None)
            .with_voter_id(2)
            .with_voter_directory_id(Uuid::new_v4())
            .with_listeners(vec![listener]);
        let added = off_runtime(|| super::add(&quorum, 0, add.clone()));
        assert_eq!(added.error_code, ResponseError::UnsupportedVersion.code());
        assert!(
            added
                .error_message
                .as_deref()
                .is_some_and(|m| m.contains("controller.quorum.bootstrap.servers")),
            "{added:?}"
        );
        let other_cluster = off_runtime(|| {
            super::add(
                &quorum,
                0,
                add.clone()
                    .with_cluster_id(Some(StrBytes::from_static_str("other"))),
            )
        });
        assert_eq!(
            other_cluster.error_code,
            ResponseError::InconsistentClusterId.code()
        );
        let no_listener = off_runtime(|| super::add(&quorum, 0, add.with_listeners(Vec::new())));
        assert_eq!(no_listener.error_code, ResponseError::InvalidRequest.code());
        let removed = off_runtime(|| {
            super::remove(
                &quorum,
                0,
                RemoveRaftVoterRequest::default()
                    .with_cluster_id(None)
                    .with_voter_id(1)
                    .with_voter_directory_id(Uuid::new_v4()),
            )
        });
        assert_eq!(removed.error_code, ResponseError::UnsupportedVersion.code());
    }
}
