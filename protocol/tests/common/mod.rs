//! Request frames for the hostile-input and fuzz tests: a valid frame for
//! every API key and version kafka-protocol knows, plus populated seeds for
//! the APIs with nested arrays.
#![allow(dead_code)] // each test binary uses a different subset

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};

/// A request header followed by `body`, as the broker sees a frame.
pub fn frame_with_raw_body(key: i16, version: i16, header_version: i16, body: &[u8]) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(key)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("hostile")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, header_version).unwrap();
    buf.extend_from_slice(body);
    buf.freeze()
}

/// Like [`frame_with_raw_body`], with the header version the API needs.
pub fn frame(key: ApiKey, version: i16, body: &[u8]) -> Bytes {
    frame_with_raw_body(
        key as i16,
        version,
        key.request_header_version(version),
        body,
    )
}

/// Encodes `body` at `version` after a matching header; `None` if the body
/// holds fields that version cannot carry.
pub fn encoded(key: ApiKey, version: i16, body: &RequestKind) -> Option<Bytes> {
    let mut out = BytesMut::new();
    body.encode(&mut out, version).ok()?;
    Some(frame(key, version, &out))
}

/// Every (key, version) kafka-protocol can decode.
pub fn all_versions() -> Vec<(ApiKey, i16)> {
    ApiKey::iter()
        .flat_map(|key| {
            let range = key.valid_versions();
            (range.min..=range.max).map(move |v| (key, v))
        })
        .collect()
}

macro_rules! default_bodies {
    ($($key:ident => $ty:ident),* $(,)?) => {
        /// The all-defaults request body for `key`.
        pub fn default_body(key: ApiKey) -> RequestKind {
            match key {
                $(ApiKey::$key => RequestKind::$key($ty::default()),)*
            }
        }
    };
}

default_bodies! {
    Produce => ProduceRequest, Fetch => FetchRequest, ListOffsets => ListOffsetsRequest,
    Metadata => MetadataRequest, OffsetCommit => OffsetCommitRequest,
    OffsetFetch => OffsetFetchRequest, FindCoordinator => FindCoordinatorRequest,
    JoinGroup => JoinGroupRequest, Heartbeat => HeartbeatRequest, LeaveGroup => LeaveGroupRequest,
    SyncGroup => SyncGroupRequest, DescribeGroups => DescribeGroupsRequest,
    ListGroups => ListGroupsRequest, SaslHandshake => SaslHandshakeRequest,
    ApiVersions => ApiVersionsRequest, CreateTopics => CreateTopicsRequest,
    DeleteTopics => DeleteTopicsRequest, DeleteRecords => DeleteRecordsRequest,
    InitProducerId => InitProducerIdRequest, OffsetForLeaderEpoch => OffsetForLeaderEpochRequest,
    AddPartitionsToTxn => AddPartitionsToTxnRequest, AddOffsetsToTxn => AddOffsetsToTxnRequest,
    EndTxn => EndTxnRequest, WriteTxnMarkers => WriteTxnMarkersRequest,
    TxnOffsetCommit => TxnOffsetCommitRequest, DescribeAcls => DescribeAclsRequest,
    CreateAcls => CreateAclsRequest, DeleteAcls => DeleteAclsRequest,
    DescribeConfigs => DescribeConfigsRequest, AlterConfigs => AlterConfigsRequest,
    AlterReplicaLogDirs => AlterReplicaLogDirsRequest, DescribeLogDirs => DescribeLogDirsRequest,
    SaslAuthenticate => SaslAuthenticateRequest, CreatePartitions => CreatePartitionsRequest,
    CreateDelegationToken => CreateDelegationTokenRequest,
    RenewDelegationToken => RenewDelegationTokenRequest,
    ExpireDelegationToken => ExpireDelegationTokenRequest,
    DescribeDelegationToken => DescribeDelegationTokenRequest, DeleteGroups => DeleteGroupsRequest,
    ElectLeaders => ElectLeadersRequest, IncrementalAlterConfigs => IncrementalAlterConfigsRequest,
    AlterPartitionReassignments => AlterPartitionReassignmentsRequest,
    ListPartitionReassignments => ListPartitionReassignmentsRequest,
    OffsetDelete => OffsetDeleteRequest, DescribeClientQuotas => DescribeClientQuotasRequest,
    AlterClientQuotas => AlterClientQuotasRequest,
    DescribeUserScramCredentials => DescribeUserScramCredentialsRequest,
    AlterUserScramCredentials => AlterUserScramCredentialsRequest, Vote => VoteRequest,
    BeginQuorumEpoch => BeginQuorumEpochRequest, EndQuorumEpoch => EndQuorumEpochRequest,
    DescribeQuorum => DescribeQuorumRequest, AlterPartition => AlterPartitionRequest,
    UpdateFeatures => UpdateFeaturesRequest, Envelope => EnvelopeRequest,
    FetchSnapshot => FetchSnapshotRequest, DescribeCluster => DescribeClusterRequest,
    DescribeProducers => DescribeProducersRequest, BrokerRegistration => BrokerRegistrationRequest,
    BrokerHeartbeat => BrokerHeartbeatRequest, UnregisterBroker => UnregisterBrokerRequest,
    DescribeTransactions => DescribeTransactionsRequest,
    ListTransactions => ListTransactionsRequest, AllocateProducerIds => AllocateProducerIdsRequest,
    ConsumerGroupHeartbeat => ConsumerGroupHeartbeatRequest,
    ConsumerGroupDescribe => ConsumerGroupDescribeRequest,
    ControllerRegistration => ControllerRegistrationRequest,
    GetTelemetrySubscriptions => GetTelemetrySubscriptionsRequest,
    PushTelemetry => PushTelemetryRequest, AssignReplicasToDirs => AssignReplicasToDirsRequest,
    ListConfigResources => ListConfigResourcesRequest,
    DescribeTopicPartitions => DescribeTopicPartitionsRequest,
    ShareGroupHeartbeat => ShareGroupHeartbeatRequest,
    ShareGroupDescribe => ShareGroupDescribeRequest, ShareFetch => ShareFetchRequest,
    ShareAcknowledge => ShareAcknowledgeRequest, AddRaftVoter => AddRaftVoterRequest,
    RemoveRaftVoter => RemoveRaftVoterRequest, UpdateRaftVoter => UpdateRaftVoterRequest,
    InitializeShareGroupState => InitializeShareGroupStateRequest,
    ReadShareGroupState => ReadShareGroupStateRequest,
    WriteShareGroupState => WriteShareGroupStateRequest,
    DeleteShareGroupState => DeleteShareGroupStateRequest,
    ReadShareGroupStateSummary => ReadShareGroupStateSummaryRequest,
    DescribeShareGroupOffsets => DescribeShareGroupOffsetsRequest,
    AlterShareGroupOffsets => AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsets => DeleteShareGroupOffsetsRequest,
}

fn name(s: &'static str) -> TopicName {
    TopicName(StrBytes::from_static_str(s))
}

/// Request bodies with nested arrays populated, so mutations can hit inner
/// length fields. Encoded at each version where the fields fit.
pub fn populated_bodies() -> Vec<(ApiKey, RequestKind)> {
    let produce = ProduceRequest::default()
        .with_acks(-1)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name("t"))
            .with_partition_data(vec![
                PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::from_static(&[0; 70]))),
                PartitionProduceData::default().with_index(1),
            ])]);
    let fetch = FetchRequest::default().with_topics(vec![FetchTopic::default()
        .with_topic(name("t"))
        .with_partitions(vec![
            FetchPartition::default().with_partition(0),
            FetchPartition::default().with_partition(1),
        ])]);
    let metadata = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name("a"))),
        MetadataRequestTopic::default().with_name(Some(name("b"))),
    ]));
    let create_topics = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name("t"))
        .with_assignments(vec![CreatableReplicaAssignment::default()
            .with_partition_index(0)
            .with_broker_ids(vec![BrokerId(1), BrokerId(2)])])
        .with_configs(vec![CreatableTopicConfig::default()
            .with_name(StrBytes::from_static_str("cleanup.policy"))
            .with_value(Some(StrBytes::from_static_str("compact")))])]);
    vec![
        (ApiKey::Produce, RequestKind::Produce(produce)),
        (ApiKey::Fetch, RequestKind::Fetch(fetch)),
        (ApiKey::Metadata, RequestKind::Metadata(metadata)),
        (
            ApiKey::CreateTopics,
            RequestKind::CreateTopics(create_topics),
        ),
    ]
}

/// Every seed frame: defaults for every key and version, populated bodies
/// wherever they encode.
pub fn seed_frames() -> Vec<Bytes> {
    let mut seeds: Vec<Bytes> = all_versions()
        .into_iter()
        .filter_map(|(key, v)| encoded(key, v, &default_body(key)))
        .collect();
    for (key, body) in populated_bodies() {
        let range = key.valid_versions();
        seeds.extend((range.min..=range.max).filter_map(|v| encoded(key, v, &body)));
    }
    seeds
}

/// The (key, version) pairs whose all-defaults body does not encode.
pub fn unencodable_defaults() -> Vec<(ApiKey, i16)> {
    all_versions()
        .into_iter()
        .filter(|&(key, v)| encoded(key, v, &default_body(key)).is_none())
        .collect()
}
