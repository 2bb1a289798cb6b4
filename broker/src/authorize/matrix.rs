//! The ACL matrix: for every API that names a resource, alice without the
//! ACL Kafka asks for is refused with Kafka's error; with it she passes; a
//! DENY of the same operation beats the ALLOW; and a PREFIXED ACL matching
//! the resource's name works as a literal one.
//!
//! Not in the table, because Kafka refuses them to nobody: DescribeCluster
//! (only its authorized operations depend on ACLs), and ListGroups and
//! ListTransactions, which list only what the caller may describe (see
//! `listings_show_only_what_the_caller_may_describe`).
//!
//! Outcomes are read through the `Debug` text of the gate's answer (or of
//! the passed request and the patched empty response), so that one table
//! covers every request type: a refusal shows as `error_code: <code>`, a
//! pass keeps the resource's name in the request.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use ottla_controller::acls::{operation, pattern, permission, resource, Acl};

use super::tests::access;
use super::{gate, Gate};
use crate::security::authorizer::access::CLUSTER_NAME;

const TOPIC: &str = "orders-eu";
const GROUP: &str = "billing-eu";
const TXN: &str = "txn-eu";

/// One row: an API's request naming the resources above, what alice needs,
/// and the error she gets without the first of those ACLs.
struct Case {
    name: &'static str,
    version: i16,
    request: RequestKind,
    /// An empty response of the API, for the gate's patch to fill in.
    response: ResponseKind,
    /// Operation, resource type and name of each ACL needed.
    needs: Vec<(i8, i8, &'static str)>,
    refused: ResponseError,
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn acl(op: i8, rt: i8, name: &str, pattern_type: i8, perm: i8) -> Acl {
    Acl {
        resource_type: rt,
        resource_name: name.into(),
        pattern_type,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: op,
        permission: perm,
    }
}

/// The gate's outcome as text, and whether the request went on to the
/// handler.
fn outcome(case: &Case, acls: &[Acl]) -> (String, bool) {
    match gate(&access(acls), false, case.version, case.request.clone()) {
        Gate::Answer(response) => (format!("{response:?}"), false),
        Gate::Pass(request, patch) => {
            let mut response = case.response.clone();
            if let Some(patch) = patch {
                patch(&mut response);
            }
            (format!("{request:?} {response:?}"), true)
        }
        Gate::NoRule => panic!("{}: no rule", case.name),
    }
}

fn check(case: &Case) {
    let code = format!("error_code: {}", case.refused.code());
    let literal: Vec<Acl> = case
        .needs
        .iter()
        .map(|&(op, rt, name)| acl(op, rt, name, pattern::LITERAL, permission::ALLOW))
        .collect();
    // The first ACL is the one under test; the others are granted.
    let (without, _) = outcome(case, &literal[1..]);
    assert!(
        without.contains(&code),
        "{}: not refused with {code}: {without}",
        case.name
    );

    let (with, passed) = outcome(case, &literal);
    assert!(
        !with.contains(&code),
        "{}: refused with the ACLs: {with}",
        case.name
    );
    // A cluster operation passes the request whole; a named resource must
    // still be in it.
    if passed && case.needs[0].1 != resource::CLUSTER {
        let resource = case.needs[0].2;
        assert!(
            with.contains(resource),
            "{}: {resource} was taken out: {with}",
            case.name
        );
    }

    // A DENY of the first operation beats every ALLOW.
    let (op, rt, name) = case.needs[0];
    let mut denied = literal.clone();
    denied.push(acl(op, rt, name, pattern::LITERAL, permission::DENY));
    let (text, _) = outcome(case, &denied);
    assert!(
        text.contains(&code),
        "{}: the DENY did not win: {text}",
        case.name
    );

    // PREFIXED ACLs on the names' first half grant the same.
    let prefixed: Vec<Acl> = case
        .needs
        .iter()
        .map(|&(op, rt, name)| {
            let prefix = if rt == resource::CLUSTER {
                name
            } else {
                &name[..name.len() - 3]
            };
            let pattern_type = if rt == resource::CLUSTER {
                pattern::LITERAL
            } else {
                pattern::PREFIXED
            };
            acl(op, rt, prefix, pattern_type, permission::ALLOW)
        })
        .collect();
    let (text, _) = outcome(case, &prefixed);
    assert!(
        !text.contains(&code),
        "{}: the PREFIXED ACLs did not grant: {text}",
        case.name
    );
}

fn topic_name() -> TopicName {
    TopicName(s(TOPIC))
}

fn group_id() -> GroupId {
    GroupId(s(GROUP))
}

fn txn_id() -> TransactionalId {
    TransactionalId(s(TXN))
}

const READ_TOPIC: (i8, i8, &str) = (operation::READ, resource::TOPIC, TOPIC);
const READ_GROUP: (i8, i8, &str) = (operation::READ, resource::GROUP, GROUP);
const WRITE_TXN: (i8, i8, &str) = (operation::WRITE, resource::TRANSACTIONAL_ID, TXN);
const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;
const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;
const TXN_DENIED: ResponseError = ResponseError::TransactionalIdAuthorizationFailed;
const CLUSTER_DENIED: ResponseError = ResponseError::ClusterAuthorizationFailed;

fn topic_cases() -> Vec<Case> {
    use kafka_protocol::messages::{
        create_partitions_request as cp, create_topics_request as ct, delete_records_request as dr,
        delete_topics_request as dt, describe_configs_request as dc,
        describe_producers_request as dp, fetch_request as f,
        incremental_alter_configs_request as iac, list_offsets_request as lo,
        metadata_request as m, offset_for_leader_epoch_request as ofle, produce_request as p,
    };
    vec![
        Case {
            name: "Produce",
            version: 9,
            request: ProduceRequest::default()
                .with_topic_data(vec![p::TopicProduceData::default()
                    .with_name(topic_name())
                    .with_partition_data(vec![p::PartitionProduceData::default()])])
                .into(),
            response: ResponseKind::Produce(Default::default()),
            needs: vec![(operation::WRITE, resource::TOPIC, TOPIC)],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "Fetch",
            version: 12,
            request: FetchRequest::default()
                .with_topics(vec![f::FetchTopic::default()
                    .with_topic(topic_name())
                    .with_partitions(vec![f::FetchPartition::default()])])
                .into(),
            response: ResponseKind::Fetch(Default::default()),
            needs: vec![READ_TOPIC],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "ListOffsets",
            version: 7,
            request: ListOffsetsRequest::default()
                .with_topics(vec![lo::ListOffsetsTopic::default()
                    .with_name(topic_name())
                    .with_partitions(vec![lo::ListOffsetsPartition::default()])])
                .into(),
            response: ResponseKind::ListOffsets(Default::default()),
            needs: vec![(operation::DESCRIBE, resource::TOPIC, TOPIC)],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "OffsetForLeaderEpoch",
            version: 4,
            request: OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![ofle::OffsetForLeaderTopic::default()
                    .with_topic(topic_name())
                    .with_partitions(vec![ofle::OffsetForLeaderPartition::default()])])
                .into(),
            response: ResponseKind::OffsetForLeaderEpoch(Default::default()),
            needs: vec![(operation::DESCRIBE, resource::TOPIC, TOPIC)],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "DeleteRecords",
            version: 2,
            request: DeleteRecordsRequest::default()
                .with_topics(vec![dr::DeleteRecordsTopic::default()
                    .with_name(topic_name())
                    .with_partitions(vec![dr::DeleteRecordsPartition::default()])])
                .into(),
            response: ResponseKind::DeleteRecords(Default::default()),
            needs: vec![(operation::DELETE, resource::TOPIC, TOPIC)],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "Metadata",
            version: 12,
            request: MetadataRequest::default()
                .with_topics(Some(vec![
                    m::MetadataRequestTopic::default().with_name(Some(topic_name()))
                ]))
                .into(),
            response: ResponseKind::Metadata(Default::default()),
            needs: vec![(operation::DESCRIBE, resource::TOPIC, TOPIC)],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "CreateTopics",
            version: 7,
            request: CreateTopicsRequest::default()
                .with_topics(vec![ct::CreatableTopic::default().with_name(topic_name())])
                .into(),
            response: ResponseKind::CreateTopics(Default::default()),
            needs: vec![(operation::CREATE, resource::TOPIC, TOPIC)],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "DeleteTopics",
            version: 6,
            request: DeleteTopicsRequest::default()
                .with_topics(vec![
                    dt::DeleteTopicState::default().with_name(Some(topic_name()))
                ])
                .into(),
            response: ResponseKind::DeleteTopics(Default::default()),
            needs: vec![(operation::DELETE, resource::TOPIC, TOPIC)],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "CreatePartitions",
            version: 3,
            request: CreatePartitionsRequest::default()
                .with_topics(vec![
                    cp::CreatePartitionsTopic::default().with_name(topic_name())
                ])
                .into(),
            response: ResponseKind::CreatePartitions(Default::default()),
            needs: vec![(operation::ALTER, resource::TOPIC, TOPIC)],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "DescribeConfigs",
            version: 4,
            request: DescribeConfigsRequest::default()
                .with_resources(vec![dc::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(TOPIC))])
                .into(),
            response: ResponseKind::DescribeConfigs(Default::default()),
            needs: vec![(operation::DESCRIBE_CONFIGS, resource::TOPIC, TOPIC)],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "IncrementalAlterConfigs",
            version: 1,
            request: IncrementalAlterConfigsRequest::default()
                .with_resources(vec![iac::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(TOPIC))])
                .into(),
            response: ResponseKind::IncrementalAlterConfigs(Default::default()),
            needs: vec![(operation::ALTER_CONFIGS, resource::TOPIC, TOPIC)],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "DescribeProducers",
            version: 0,
            request: DescribeProducersRequest::default()
                .with_topics(vec![dp::TopicRequest::default()
                    .with_name(topic_name())
                    .with_partition_indexes(vec![0])])
                .into(),
            response: ResponseKind::DescribeProducers(Default::default()),
            needs: vec![READ_TOPIC],
            refused: TOPIC_DENIED,
        },
    ]
}

fn group_cases() -> Vec<Case> {
    use kafka_protocol::messages::{
        offset_commit_request as oc, offset_delete_request as od, txn_offset_commit_request as toc,
    };
    let commit_topic = || {
        vec![oc::OffsetCommitRequestTopic::default()
            .with_name(topic_name())
            .with_partitions(vec![oc::OffsetCommitRequestPartition::default()])]
    };
    vec![
        Case {
            name: "FindCoordinator (group)",
            version: 4,
            request: FindCoordinatorRequest::default()
                .with_key_type(0)
                .with_coordinator_keys(vec![s(GROUP)])
                .into(),
            response: ResponseKind::FindCoordinator(Default::default()),
            needs: vec![(operation::DESCRIBE, resource::GROUP, GROUP)],
            refused: GROUP_DENIED,
        },
        Case {
            name: "FindCoordinator (transaction)",
            version: 4,
            request: FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![s(TXN)])
                .into(),
            response: ResponseKind::FindCoordinator(Default::default()),
            needs: vec![(operation::DESCRIBE, resource::TRANSACTIONAL_ID, TXN)],
            refused: TXN_DENIED,
        },
        Case {
            name: "JoinGroup",
            version: 9,
            request: JoinGroupRequest::default().with_group_id(group_id()).into(),
            response: ResponseKind::JoinGroup(Default::default()),
            needs: vec![READ_GROUP],
            refused: GROUP_DENIED,
        },
        Case {
            name: "SyncGroup",
            version: 5,
            request: SyncGroupRequest::default().with_group_id(group_id()).into(),
            response: ResponseKind::SyncGroup(Default::default()),
            needs: vec![READ_GROUP],
            refused: GROUP_DENIED,
        },
        Case {
            name: "Heartbeat",
            version: 4,
            request: HeartbeatRequest::default().with_group_id(group_id()).into(),
            response: ResponseKind::Heartbeat(Default::default()),
            needs: vec![READ_GROUP],
            refused: GROUP_DENIED,
        },
        Case {
            name: "LeaveGroup",
            version: 5,
            request: LeaveGroupRequest::default()
                .with_group_id(group_id())
                .into(),
            response: ResponseKind::LeaveGroup(Default::default()),
            needs: vec![READ_GROUP],
            refused: GROUP_DENIED,
        },
        Case {
            name: "OffsetCommit (group)",
            version: 9,
            request: OffsetCommitRequest::default()
                .with_group_id(group_id())
                .with_topics(commit_topic())
                .into(),
            response: ResponseKind::OffsetCommit(Default::default()),
            needs: vec![READ_GROUP, READ_TOPIC],
            refused: GROUP_DENIED,
        },
        Case {
            name: "OffsetCommit (topic)",
            version: 9,
            request: OffsetCommitRequest::default()
                .with_group_id(group_id())
                .with_topics(commit_topic())
                .into(),
            response: ResponseKind::OffsetCommit(Default::default()),
            needs: vec![READ_TOPIC, READ_GROUP],
            refused: TOPIC_DENIED,
        },
        Case {
            name: "OffsetFetch",
            version: 7,
            request: OffsetFetchRequest::default()
                .with_group_id(group_id())
                .into(),
            response: ResponseKind::OffsetFetch(Default::default()),
            needs: vec![(operation::DESCRIBE, resource::GROUP, GROUP)],
            refused: GROUP_DENIED,
        },
        Case {
            name: "OffsetDelete",
            version: 0,
            request: OffsetDeleteRequest::default()
                .with_group_id(group_id())
                .with_topics(vec![od::OffsetDeleteRequestTopic::default()
                    .with_name(topic_name())
                    .with_partitions(vec![od::OffsetDeleteRequestPartition::default()])])
                .into(),
            response: ResponseKind::OffsetDelete(Default::default()),
            needs: vec![(operation::DELETE, resource::GROUP, GROUP), READ_TOPIC],
            refused: GROUP_DENIED,
        },
        Case {
            name: "DescribeGroups",
            version: 5,
            request: DescribeGroupsRequest::default()
                .with_groups(vec![group_id()])
                .into(),
            // The handler's answer, which the gate filters.
            response: ResponseKind::DescribeGroups(
                DescribeGroupsResponse::default()
                    .with_groups(vec![describe_groups_response::DescribedGroup::default()
                        .with_group_id(s(GROUP).into())]),
            ),
            needs: vec![(operation::DESCRIBE, resource::GROUP, GROUP)],
            refused: GROUP_DENIED,
        },
        Case {
            name: "DeleteGroups",
            version: 2,
            request: DeleteGroupsRequest::default()
                .with_groups_names(vec![group_id()])
                .into(),
            response: ResponseKind::DeleteGroups(Default::default()),
            needs: vec![(operation::DELETE, resource::GROUP, GROUP)],
            refused: GROUP_DENIED,
        },
        Case {
            name: "ConsumerGroupHeartbeat",
            version: 0,
            request: ConsumerGroupHeartbeatRequest::default()
                .with_group_id(group_id())
                .into(),
            response: ResponseKind::ConsumerGroupHeartbeat(Default::default()),
            needs: vec![READ_GROUP],
            refused: GROUP_DENIED,
        },
        Case {
            name: "ConsumerGroupDescribe",
            version: 0,
            request: ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![group_id()])
                .into(),
            response: ResponseKind::ConsumerGroupDescribe(
                ConsumerGroupDescribeResponse::default().with_groups(vec![
                    consumer_group_describe_response::DescribedGroup::default()
                        .with_group_id(group_id()),
                ]),
            ),
            needs: vec![(operation::DESCRIBE, resource::GROUP, GROUP)],
            refused: GROUP_DENIED,
        },
        Case {
            name: "TxnOffsetCommit",
            version: 3,
            request: TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id())
                .with_group_id(group_id())
                .with_topics(vec![toc::TxnOffsetCommitRequestTopic::default()
                    .with_name(topic_name())
                    .with_partitions(vec![
                        toc::TxnOffsetCommitRequestPartition::default(),
                    ])])
                .into(),
            response: ResponseKind::TxnOffsetCommit(Default::default()),
            needs: vec![WRITE_TXN, READ_GROUP, READ_TOPIC],
            refused: TXN_DENIED,
        },
    ]
}

fn txn_cases() -> Vec<Case> {
    use kafka_protocol::messages::add_partitions_to_txn_request as ap;
    vec![
        Case {
            name: "InitProducerId",
            version: 4,
            request: InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id()))
                .into(),
            response: ResponseKind::InitProducerId(Default::default()),
            needs: vec![WRITE_TXN],
            refused: TXN_DENIED,
        },
        Case {
            name: "AddPartitionsToTxn (v3)",
            version: 3,
            request: AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(txn_id())
                .with_v3_and_below_topics(vec![ap::AddPartitionsToTxnTopic::default()
                    .with_name(topic_name())
                    .with_partitions(vec![0])])
                .into(),
            response: ResponseKind::AddPartitionsToTxn(Default::default()),
            needs: vec![WRITE_TXN, (operation::WRITE, resource::TOPIC, TOPIC)],
            refused: TXN_DENIED,
        },
        Case {
            name: "AddOffsetsToTxn",
            version: 3,
            request: AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn_id())
                .with_group_id(group_id())
                .into(),
            response: ResponseKind::AddOffsetsToTxn(Default::default()),
            needs: vec![WRITE_TXN, READ_GROUP],
            refused: TXN_DENIED,
        },
        Case {
            name: "EndTxn",
            version: 3,
            request: EndTxnRequest::default()
                .with_transactional_id(txn_id())
                .into(),
            response: ResponseKind::EndTxn(Default::default()),
            needs: vec![WRITE_TXN],
            refused: TXN_DENIED,
        },
        Case {
            name: "DescribeTransactions",
            version: 0,
            request: DescribeTransactionsRequest::default()
                .with_transactional_ids(vec![txn_id()])
                .into(),
            response: ResponseKind::DescribeTransactions(Default::default()),
            needs: vec![(operation::DESCRIBE, resource::TRANSACTIONAL_ID, TXN)],
            refused: TXN_DENIED,
        },
    ]
}

fn cluster_cases() -> Vec<Case> {
    let case = |name, version, request: RequestKind, response, op| Case {
        name,
        version,
        request,
        response,
        needs: vec![(op, resource::CLUSTER, CLUSTER_NAME)],
        refused: CLUSTER_DENIED,
    };
    vec![
        case(
            "WriteTxnMarkers",
            1,
            WriteTxnMarkersRequest::default()
                .with_markers(vec![write_txn_markers_request::WritableTxnMarker::default(
                )
                .with_topics(vec![
                    write_txn_markers_request::WritableTxnMarkerTopic::default()
                        .with_name(topic_name())
                        .with_partition_indexes(vec![0]),
                ])])
                .into(),
            ResponseKind::WriteTxnMarkers(Default::default()),
            operation::CLUSTER_ACTION,
        ),
        case(
            "DescribeQuorum",
            2,
            DescribeQuorumRequest::default().into(),
            ResponseKind::DescribeQuorum(Default::default()),
            operation::DESCRIBE,
        ),
        case(
            "ElectLeaders",
            2,
            ElectLeadersRequest::default().into(),
            ResponseKind::ElectLeaders(Default::default()),
            operation::ALTER,
        ),
        case(
            "UnregisterBroker",
            0,
            UnregisterBrokerRequest::default().into(),
            ResponseKind::UnregisterBroker(Default::default()),
            operation::ALTER,
        ),
        case(
            "AddRaftVoter",
            0,
            AddRaftVoterRequest::default().into(),
            ResponseKind::AddRaftVoter(Default::default()),
            operation::ALTER,
        ),
        case(
            "RemoveRaftVoter",
            0,
            RemoveRaftVoterRequest::default().into(),
            ResponseKind::RemoveRaftVoter(Default::default()),
            operation::ALTER,
        ),
        case(
            "AlterPartitionReassignments",
            0,
            AlterPartitionReassignmentsRequest::default().into(),
            ResponseKind::AlterPartitionReassignments(Default::default()),
            operation::ALTER,
        ),
        case(
            "ListPartitionReassignments",
            0,
            ListPartitionReassignmentsRequest::default().into(),
            ResponseKind::ListPartitionReassignments(Default::default()),
            operation::DESCRIBE,
        ),
        case(
            "DescribeUserScramCredentials",
            0,
            DescribeUserScramCredentialsRequest::default().into(),
            ResponseKind::DescribeUserScramCredentials(Default::default()),
            operation::DESCRIBE,
        ),
        case(
            "AlterUserScramCredentials",
            0,
            AlterUserScramCredentialsRequest::default()
                .with_deletions(vec![Default::default()])
                .into(),
            ResponseKind::AlterUserScramCredentials(Default::default()),
            operation::ALTER,
        ),
        case(
            "DescribeClientQuotas",
            1,
            DescribeClientQuotasRequest::default().into(),
            ResponseKind::DescribeClientQuotas(Default::default()),
            operation::DESCRIBE_CONFIGS,
        ),
        case(
            "ListConfigResources",
            1,
            ListConfigResourcesRequest::default().into(),
            ResponseKind::ListConfigResources(Default::default()),
            operation::DESCRIBE_CONFIGS,
        ),
        case(
            "AlterClientQuotas",
            1,
            AlterClientQuotasRequest::default()
                .with_entries(vec![Default::default()])
                .into(),
            ResponseKind::AlterClientQuotas(Default::default()),
            operation::ALTER_CONFIGS,
        ),
        case(
            "DescribeAcls",
            3,
            DescribeAclsRequest::default().into(),
            ResponseKind::DescribeAcls(Default::default()),
            operation::DESCRIBE,
        ),
        case(
            "CreateAcls",
            3,
            CreateAclsRequest::default()
                .with_creations(vec![Default::default()])
                .into(),
            ResponseKind::CreateAcls(Default::default()),
            operation::ALTER,
        ),
        case(
            "DeleteAcls",
            3,
            DeleteAclsRequest::default()
                .with_filters(vec![Default::default()])
                .into(),
            ResponseKind::DeleteAcls(Default::default()),
            operation::ALTER,
        ),
        case(
            "UpdateFeatures",
            1,
            UpdateFeaturesRequest::default().into(),
            ResponseKind::UpdateFeatures(Default::default()),
            operation::ALTER,
        ),
    ]
}

#[test]
fn each_api_refuses_without_its_acl_and_serves_with_it() {
    let cases: Vec<Case> = [topic_cases(), group_cases(), txn_cases(), cluster_cases()]
        .into_iter()
        .flatten()
        .collect();
    for case in &cases {
        check(case);
    }
}

/// The groups and transactions a listing shows, as patched for `acls`.
fn listed(acls: &[Acl]) -> (Vec<String>, Vec<String>) {
    use kafka_protocol::messages::list_groups_response::ListedGroup;
    use kafka_protocol::messages::list_transactions_response::TransactionState;
    let groups = Case {
        name: "ListGroups",
        version: 4,
        request: ListGroupsRequest::default().into(),
        response: ResponseKind::ListGroups(
            ListGroupsResponse::default().with_groups(
                [GROUP, "payroll"]
                    .map(|g| ListedGroup::default().with_group_id(s(g).into()))
                    .to_vec(),
            ),
        ),
        needs: vec![],
        refused: GROUP_DENIED,
    };
    let txns = Case {
        name: "ListTransactions",
        version: 1,
        request: ListTransactionsRequest::default().into(),
        response: ResponseKind::ListTransactions(
            ListTransactionsResponse::default().with_transaction_states(
                [TXN, "txn-us"]
                    .map(|t| TransactionState::default().with_transactional_id(s(t).into()))
                    .to_vec(),
            ),
        ),
        needs: vec![],
        refused: TXN_DENIED,
    };
    let names = |case: &Case, field: &str| -> Vec<String> {
        let (text, _) = outcome(case, acls);
        [GROUP, "payroll", TXN, "txn-us"]
            .into_iter()
            .filter(|n| text.contains(&format!("{field}: \"{n}\"")))
            .map(str::to_string)
            .collect()
    };
    (names(&groups, "group_id"), names(&txns, "transactional_id"))
}

#[test]
fn listings_show_only_what_the_caller_may_describe() {
    let allow = |op, rt, name| acl(op, rt, name, pattern::LITERAL, permission::ALLOW);
    assert_eq!(listed(&[]), (vec![], vec![]));
    let (groups, txns) = listed(&[
        allow(operation::DESCRIBE, resource::GROUP, GROUP),
        allow(operation::DESCRIBE, resource::TRANSACTIONAL_ID, TXN),
    ]);
    assert_eq!(
        (groups, txns),
        (vec![GROUP.to_string()], vec![TXN.to_string()])
    );
    // DESCRIBE on the cluster lists every group (as Kafka does).
    let (groups, _) = listed(&[allow(operation::DESCRIBE, resource::CLUSTER, CLUSTER_NAME)]);
    assert_eq!(groups, [GROUP, "payroll"]);
}
