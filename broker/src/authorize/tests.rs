//! Gate tests: every served API has a rule, and refused resources come
//! back as errors beside the allowed ones.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{ProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, RequestKind, ResponseKind, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use ottla_controller::acls::{operation, pattern, permission, resource, Acl};
use ottla_controller::{MetadataImage, MetadataRecord};
use uuid::Uuid;

use super::{gate, Gate};
use crate::handlers::broker_apis::SERVED;
use crate::security::authorizer::{Access, Authorizer};
use crate::security::KafkaPrincipal;

/// alice's access to an image holding `acls`.
pub(super) fn access(acls: &[Acl]) -> Arc<Access> {
    let mut image = MetadataImage::empty();
    for (i, acl) in acls.iter().enumerate() {
        let record = MetadataRecord::AccessControlEntry {
            id: Uuid::from_u128(i as u128 + 1),
            acl: acl.clone(),
        };
        image.apply(i as i64, &record);
    }
    Arc::new(Access::new(
        Some(Arc::new(Authorizer::default())),
        Arc::new(image),
        &KafkaPrincipal::user("alice"),
        IpAddr::V4(Ipv4Addr::LOCALHOST),
    ))
}

#[test]
fn every_served_api_has_a_rule() {
    let kinds: Vec<(ApiKey, RequestKind)> = vec![
        (ApiKey::Produce, RequestKind::Produce(Default::default())),
        (ApiKey::Fetch, RequestKind::Fetch(Default::default())),
        (
            ApiKey::ListOffsets,
            RequestKind::ListOffsets(Default::default()),
        ),
        (ApiKey::Metadata, RequestKind::Metadata(Default::default())),
        (
            ApiKey::OffsetCommit,
            RequestKind::OffsetCommit(Default::default()),
        ),
        (
            ApiKey::OffsetFetch,
            RequestKind::OffsetFetch(Default::default()),
        ),
        (
            ApiKey::FindCoordinator,
            RequestKind::FindCoordinator(Default::default()),
        ),
        (
            ApiKey::JoinGroup,
            RequestKind::JoinGroup(Default::default()),
        ),
        (
            ApiKey::Heartbeat,
            RequestKind::Heartbeat(Default::default()),
        ),
        (
            ApiKey::LeaveGroup,
            RequestKind::LeaveGroup(Default::default()),
        ),
        (
            ApiKey::SyncGroup,
            RequestKind::SyncGroup(Default::default()),
        ),
        (
            ApiKey::DescribeGroups,
            RequestKind::DescribeGroups(Default::default()),
        ),
        (
            ApiKey::ListGroups,
            RequestKind::ListGroups(Default::default()),
        ),
        (
            ApiKey::CreateTopics,
            RequestKind::CreateTopics(Default::default()),
        ),
        (
            ApiKey::DeleteTopics,
            RequestKind::DeleteTopics(Default::default()),
        ),
        (
            ApiKey::DeleteRecords,
            RequestKind::DeleteRecords(Default::default()),
        ),
        (
            ApiKey::InitProducerId,
            RequestKind::InitProducerId(Default::default()),
        ),
        (
            ApiKey::OffsetForLeaderEpoch,
            RequestKind::OffsetForLeaderEpoch(Default::default()),
        ),
        (
            ApiKey::DescribeConfigs,
            RequestKind::DescribeConfigs(Default::default()),
        ),
        (
            ApiKey::AlterConfigs,
            RequestKind::AlterConfigs(Default::default()),
        ),
        (
            ApiKey::DescribeLogDirs,
            RequestKind::DescribeLogDirs(Default::default()),
        ),
        (
            ApiKey::CreatePartitions,
            RequestKind::CreatePartitions(Default::default()),
        ),
        (
            ApiKey::DeleteGroups,
            RequestKind::DeleteGroups(Default::default()),
        ),
        (
            ApiKey::IncrementalAlterConfigs,
            RequestKind::IncrementalAlterConfigs(Default::default()),
        ),
        (
            ApiKey::OffsetDelete,
            RequestKind::OffsetDelete(Default::default()),
        ),
        (
            ApiKey::DescribeCluster,
            RequestKind::DescribeCluster(Default::default()),
        ),
        (
            ApiKey::DescribeTopicPartitions,
            RequestKind::DescribeTopicPartitions(Default::default()),
        ),
        (
            ApiKey::DescribeQuorum,
            RequestKind::DescribeQuorum(Default::default()),
        ),
        (
            ApiKey::ElectLeaders,
            RequestKind::ElectLeaders(Default::default()),
        ),
        (
            ApiKey::AlterPartitionReassignments,
            RequestKind::AlterPartitionReassignments(Default::default()),
        ),
        (
            ApiKey::UpdateFeatures,
            RequestKind::UpdateFeatures(Default::default()),
        ),
        (
            ApiKey::ListPartitionReassignments,
            RequestKind::ListPartitionReassignments(Default::default()),
        ),
        (
            ApiKey::UnregisterBroker,
            RequestKind::UnregisterBroker(Default::default()),
        ),
        (
            ApiKey::AddRaftVoter,
            RequestKind::AddRaftVoter(Default::default()),
        ),
        (
            ApiKey::RemoveRaftVoter,
            RequestKind::RemoveRaftVoter(Default::default()),
        ),
        (
            ApiKey::ConsumerGroupHeartbeat,
            RequestKind::ConsumerGroupHeartbeat(Default::default()),
        ),
        (
            ApiKey::ConsumerGroupDescribe,
            RequestKind::ConsumerGroupDescribe(Default::default()),
        ),
        (
            ApiKey::AddPartitionsToTxn,
            RequestKind::AddPartitionsToTxn(Default::default()),
        ),
        (
            ApiKey::AddOffsetsToTxn,
            RequestKind::AddOffsetsToTxn(Default::default()),
        ),
        (ApiKey::EndTxn, RequestKind::EndTxn(Default::default())),
        (
            ApiKey::WriteTxnMarkers,
            RequestKind::WriteTxnMarkers(Default::default()),
        ),
        (
            ApiKey::TxnOffsetCommit,
            RequestKind::TxnOffsetCommit(Default::default()),
        ),
        (
            ApiKey::DescribeProducers,
            RequestKind::DescribeProducers(Default::default()),
        ),
        (
            ApiKey::DescribeTransactions,
            RequestKind::DescribeTransactions(Default::default()),
        ),
        (
            ApiKey::ListTransactions,
            RequestKind::ListTransactions(Default::default()),
        ),
        (
            ApiKey::DescribeUserScramCredentials,
            RequestKind::DescribeUserScramCredentials(Default::default()),
        ),
        (
            ApiKey::AlterUserScramCredentials,
            RequestKind::AlterUserScramCredentials(Default::default()),
        ),
        (
            ApiKey::DescribeClientQuotas,
            RequestKind::DescribeClientQuotas(Default::default()),
        ),
        (
            ApiKey::AlterClientQuotas,
            RequestKind::AlterClientQuotas(Default::default()),
        ),
        (
            ApiKey::ListConfigResources,
            RequestKind::ListConfigResources(Default::default()),
        ),
        (
            ApiKey::DescribeAcls,
            RequestKind::DescribeAcls(Default::default()),
        ),
        (
            ApiKey::CreateAcls,
            RequestKind::CreateAcls(Default::default()),
        ),
        (
            ApiKey::DeleteAcls,
            RequestKind::DeleteAcls(Default::default()),
        ),
        (
            ApiKey::ShareGroupHeartbeat,
            RequestKind::ShareGroupHeartbeat(Default::default()),
        ),
        (
            ApiKey::ShareGroupDescribe,
            RequestKind::ShareGroupDescribe(Default::default()),
        ),
        (
            ApiKey::ShareFetch,
            RequestKind::ShareFetch(Default::default()),
        ),
        (
            ApiKey::ShareAcknowledge,
            RequestKind::ShareAcknowledge(Default::default()),
        ),
        (
            ApiKey::DescribeShareGroupOffsets,
            RequestKind::DescribeShareGroupOffsets(Default::default()),
        ),
        (
            ApiKey::AlterShareGroupOffsets,
            RequestKind::AlterShareGroupOffsets(Default::default()),
        ),
        (
            ApiKey::DeleteShareGroupOffsets,
            RequestKind::DeleteShareGroupOffsets(Default::default()),
        ),
        (
            ApiKey::InitializeShareGroupState,
            RequestKind::InitializeShareGroupState(Default::default()),
        ),
        (
            ApiKey::ReadShareGroupState,
            RequestKind::ReadShareGroupState(Default::default()),
        ),
        (
            ApiKey::WriteShareGroupState,
            RequestKind::WriteShareGroupState(Default::default()),
        ),
        (
            ApiKey::DeleteShareGroupState,
            RequestKind::DeleteShareGroupState(Default::default()),
        ),
        (
            ApiKey::ReadShareGroupStateSummary,
            RequestKind::ReadShareGroupStateSummary(Default::default()),
        ),
    ];
    let nobody = access(&[]);
    for &(key, min, _) in SERVED {
        let (_, body) = kinds
            .iter()
            .find(|(k, _)| *k == key)
            .unwrap_or_else(|| panic!("{key:?} is served: list it here and give it a gate"));
        assert!(
            !matches!(gate(&nobody, true, min, body.clone()), Gate::NoRule),
            "{key:?} has no authorization rule"
        );
    }
}

fn topic(name: &str) -> TopicProduceData {
    TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_string(name.into())))
        .with_partition_data(vec![PartitionProduceData::default().with_index(0)])
}

fn produce_gate(access: &Arc<Access>, req: ProduceRequest) -> (Vec<String>, ProduceResponse) {
    let Gate::Pass(RequestKind::Produce(passed), patch) = gate(access, true, 9, req.into()) else {
        panic!("produce is always passed on");
    };
    let kept = passed
        .topic_data
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    let mut response = ResponseKind::Produce(
        ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()]),
    );
    if let Some(patch) = patch {
        patch(&mut response);
    }
    let ResponseKind::Produce(r) = response else {
        unreachable!()
    };
    (kept, r)
}

#[test]
fn produce_keeps_allowed_topics_and_reports_the_others() {
    let write = |pt, name: &str, rt| Acl {
        resource_type: rt,
        resource_name: name.into(),
        pattern_type: pt,
        principal: "User:alice".into(),
        host: "*".into(),
        operation: operation::WRITE,
        permission: permission::ALLOW,
    };
    let a = access(&[write(pattern::PREFIXED, "app-", resource::TOPIC)]);
    let req = ProduceRequest::default().with_topic_data(vec![topic("app-1"), topic("other")]);
    let (kept, r) = produce_gate(&a, req);
    assert_eq!(kept, ["app-1"]);
    assert_eq!(r.responses.len(), 2, "the handler's answer and the refusal");
    assert_eq!(r.responses[1].name.as_str(), "other");
    assert_eq!(
        r.responses[1].partition_responses[0].error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );

    // A transactional producer must be allowed its id before any topic.
    let req = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))))
        .with_topic_data(vec![topic("app-1")]);
    let (kept, r) = produce_gate(&a, req);
    assert!(kept.is_empty());
    assert_eq!(
        r.responses[1].partition_responses[0].error_code,
        ResponseError::TransactionalIdAuthorizationFailed.code()
    );
    let a = access(&[
        write(pattern::PREFIXED, "app-", resource::TOPIC),
        write(pattern::LITERAL, "tx", resource::TRANSACTIONAL_ID),
    ]);
    let req = ProduceRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))))
        .with_topic_data(vec![topic("app-1")]);
    let (kept, r) = produce_gate(&a, req);
    assert_eq!(kept, ["app-1"]);
    assert_eq!(r.responses.len(), 1);
}
