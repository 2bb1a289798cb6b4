//! Gates of the cluster-wide APIs: DESCRIBE on the cluster to describe it
//! (log dirs, quorum, ACLs, SCRAM users, reassignments), ALTER to change it
//! (ACLs, SCRAM credentials, elections, reassignments, feature levels),
//! DESCRIBE_CONFIGS and ALTER_CONFIGS for client quotas; the cluster's
//! authorized operations in DescribeCluster.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_response::{
    AlterClientQuotasResponse, EntryData as AlterClientQuotasEntry,
};
use kafka_protocol::messages::alter_partition_reassignments_response::AlterPartitionReassignmentsResponse;
use kafka_protocol::messages::alter_user_scram_credentials_response::{
    AlterUserScramCredentialsResponse, AlterUserScramCredentialsResult,
};
use kafka_protocol::messages::create_acls_response::{AclCreationResult, CreateAclsResponse};
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsResponse};
use kafka_protocol::messages::describe_acls_response::DescribeAclsResponse;
use kafka_protocol::messages::describe_client_quotas_response::DescribeClientQuotasResponse;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterResponse;
use kafka_protocol::messages::describe_log_dirs_response::DescribeLogDirsResponse;
use kafka_protocol::messages::describe_quorum_response::DescribeQuorumResponse;
use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResponse;
use kafka_protocol::messages::elect_leaders_response::{
    ElectLeadersResponse, PartitionResult, ReplicaElectionResult,
};
use kafka_protocol::messages::list_config_resources_response::ListConfigResourcesResponse;
use kafka_protocol::messages::list_partition_reassignments_response::ListPartitionReassignmentsResponse;
use kafka_protocol::messages::update_features_response::UpdateFeaturesResponse;
use kafka_protocol::messages::{
    AddRaftVoterResponse, RemoveRaftVoterResponse, UnregisterBrokerResponse,
};
use kafka_protocol::messages::{DescribeClusterRequest, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::acls::resource;

use super::{patch, Gate};
use crate::apis::metadata::ALL_CLUSTER_OPERATIONS;
use crate::security::authorizer::access::CLUSTER_NAME;
use crate::security::authorizer::Access;

const DENIED: ResponseError = ResponseError::ClusterAuthorizationFailed;

fn message() -> Option<StrBytes> {
    Some(StrBytes::from_static_str("Cluster authorization failed."))
}

/// A cluster-wide request that needs `operation` on the cluster.
pub fn require(access: &Arc<Access>, version: i16, operation: i8, body: RequestKind) -> Gate {
    if access.cluster(operation) {
        return Gate::Pass(body, None);
    }
    Gate::Answer(refusal(version, body))
}

/// The CLUSTER_AUTHORIZATION_FAILED answer to a cluster-wide request.
fn refusal(version: i16, body: RequestKind) -> ResponseKind {
    let code = DENIED.code();
    match body {
        RequestKind::DescribeLogDirs(_) => ResponseKind::DescribeLogDirs(if version >= 3 {
            DescribeLogDirsResponse::default().with_error_code(code)
        } else {
            DescribeLogDirsResponse::default()
        }),
        RequestKind::DescribeQuorum(_) => {
            let mut r = DescribeQuorumResponse::default().with_error_code(code);
            if version >= 2 {
                r = r.with_error_message(message());
            }
            ResponseKind::DescribeQuorum(r)
        }
        RequestKind::DescribeAcls(_) => ResponseKind::DescribeAcls(
            DescribeAclsResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::DescribeUserScramCredentials(_) => ResponseKind::DescribeUserScramCredentials(
            DescribeUserScramCredentialsResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::ListConfigResources(_) => ResponseKind::ListConfigResources(
            ListConfigResourcesResponse::default().with_error_code(code),
        ),
        RequestKind::DescribeClientQuotas(_) => ResponseKind::DescribeClientQuotas(
            DescribeClientQuotasResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::AlterClientQuotas(r) => ResponseKind::AlterClientQuotas(
            AlterClientQuotasResponse::default().with_entries(
                r.entries
                    .iter()
                    .map(|e| {
                        AlterClientQuotasEntry::default()
                            .with_error_code(code)
                            .with_error_message(message())
                            .with_entity(crate::apis::client_quotas::altered_entity(&e.entity))
                    })
                    .collect(),
            ),
        ),
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(
            CreateAclsResponse::default().with_results(
                r.creations
                    .iter()
                    .map(|_| {
                        AclCreationResult::default()
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(
            DeleteAclsResponse::default().with_filter_results(
                r.filters
                    .iter()
                    .map(|_| {
                        DeleteAclsFilterResult::default()
                            .with_error_code(code)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::AlterUserScramCredentials(r) => {
            let users = r
                .deletions
                .iter()
                .map(|d| &d.name)
                .chain(r.upsertions.iter().map(|u| &u.name));
            ResponseKind::AlterUserScramCredentials(
                AlterUserScramCredentialsResponse::default().with_results(
                    users
                        .map(|u| {
                            AlterUserScramCredentialsResult::default()
                                .with_user(u.clone())
                                .with_error_code(code)
                                .with_error_message(message())
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::UnregisterBroker(_) => ResponseKind::UnregisterBroker(
            UnregisterBrokerResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::AddRaftVoter(_) => ResponseKind::AddRaftVoter(
            AddRaftVoterResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::RemoveRaftVoter(_) => ResponseKind::RemoveRaftVoter(
            RemoveRaftVoterResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::UpdateFeatures(_) => ResponseKind::UpdateFeatures(
            UpdateFeaturesResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::ListPartitionReassignments(_) => ResponseKind::ListPartitionReassignments(
            ListPartitionReassignmentsResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::AlterPartitionReassignments(r) => {
            let mut out = AlterPartitionReassignmentsResponse::default()
                .with_error_code(code)
                .with_error_message(message());
            if version >= 1 {
                out = out.with_allow_replication_factor_change(r.allow_replication_factor_change);
            }
            ResponseKind::AlterPartitionReassignments(out)
        }
        RequestKind::ElectLeaders(r) => {
            let results = r
                .topic_partitions
                .unwrap_or_default()
                .into_iter()
                .map(|t| {
                    ReplicaElectionResult::default()
                        .with_topic(t.topic)
                        .with_partition_result(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    PartitionResult::default()
                                        .with_partition_id(*p)
                                        .with_error_code(code)
                                        .with_error_message(message())
                                })
                                .collect(),
                        )
                })
                .collect();
            let mut out = ElectLeadersResponse::default().with_replica_election_results(results);
            if version >= 1 {
                out = out.with_error_code(code);
            }
            ResponseKind::ElectLeaders(out)
        }
        other => unreachable!(
            "no cluster refusal for {:?}",
            std::mem::discriminant(&other)
        ),
    }
}

/// DescribeCluster is open to all (as in Kafka); the operations it reports
/// are the requester's.
pub fn describe_cluster(access: &Arc<Access>, r: DescribeClusterRequest) -> Gate {
    let requested = r.include_cluster_authorized_operations;
    let body = RequestKind::DescribeCluster(r);
    if !requested {
        return Gate::Pass(body, None);
    }
    let access = access.clone();
    let p = patch!(DescribeCluster, move |r: &mut DescribeClusterResponse| {
        r.cluster_authorized_operations =
            access.operations(ALL_CLUSTER_OPERATIONS, resource::CLUSTER, CLUSTER_NAME);
    });
    Gate::Pass(body, p)
}
