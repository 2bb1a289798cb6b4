//! StreamsGroupDescribe (key 89), versions 0-1 (v1, KIP-1331, adds the
//! topology description and the group's assignor):
//!
//! ```json
//! { "apiKey": 89, "type": "request", "name": "StreamsGroupDescribeRequest",
//!   "validVersions": "0-1", "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "GroupIds", "type": "[]string", "versions": "0+" },
//!     { "name": "IncludeAuthorizedOperations", "type": "bool", "versions": "0+" },
//!     { "name": "IncludeTopologyDescription", "type": "bool", "versions": "1+", "default": "false" } ] }
//!
//! { "apiKey": 89, "type": "response", "name": "StreamsGroupDescribeResponse",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32" },
//!     { "name": "Groups", "type": "[]DescribedGroup", "fields": [
//!       { "name": "ErrorCode", "type": "int16" },
//!       { "name": "ErrorMessage", "type": "string", "nullableVersions": "0+", "default": "null" },
//!       { "name": "GroupId", "type": "string" },
//!       { "name": "GroupState", "type": "string" },
//!       { "name": "GroupEpoch", "type": "int32" },
//!       { "name": "AssignmentEpoch", "type": "int32" },
//!       { "name": "Topology", "type": "Topology", "nullableVersions": "0+", "default": "null",
//!         "fields": [
//!         { "name": "Epoch", "type": "int32" },
//!         { "name": "Subtopologies", "type": "[]Subtopology", "nullableVersions": "0+",
//!           "default": "null", "fields": [
//!           { "name": "SubtopologyId", "type": "string" },
//!           { "name": "SourceTopics", "type": "[]string" },
//!           { "name": "RepartitionSinkTopics", "type": "[]string" },
//!           { "name": "StateChangelogTopics", "type": "[]TopicInfo" },
//!           { "name": "RepartitionSourceTopics", "type": "[]TopicInfo" } ] } ] },
//!       { "name": "Members", "type": "[]Member", "fields": [
//!         { "name": "MemberId", "type": "string" },
//!         { "name": "MemberEpoch", "type": "int32" },
//!         { "name": "InstanceId", "type": "string", "nullableVersions": "0+", "default": "null" },
//!         { "name": "RackId", "type": "string", "nullableVersions": "0+", "default": "null" },
//!         { "name": "ClientId", "type": "string" },
//!         { "name": "ClientHost", "type": "string" },
//!         { "name": "TopologyEpoch", "type": "int32" },
//!         { "name": "ProcessId", "type": "string" },
//!         { "name": "UserEndpoint", "type": "Endpoint", "nullableVersions": "0+", "default": "null" },
//!         { "name": "ClientTags", "type": "[]KeyValue" },
//!         { "name": "TaskOffsets", "type": "[]TaskOffset" },
//!         { "name": "TaskEndOffsets", "type": "[]TaskOffset" },
//!         { "name": "Assignment", "type": "Assignment" },
//!         { "name": "TargetAssignment", "type": "Assignment" },
//!         { "name": "IsClassic", "type": "bool" } ] },
//!       { "name": "AuthorizedOperations", "type": "int32", "default": "-2147483648" },
//!       { "name": "TopologyDescription", "type": "TopologyDescription", "versions": "1+",
//!         "nullableVersions": "1+", "default": "null" },
//!       { "name": "TopologyDescriptionStatus", "type": "int8", "versions": "1+", "default": "0" },
//!       { "name": "AssignorName", "type": "string", "versions": "1+", "nullableVersions": "1+",
//!         "default": "null" } ] } ],
//!   "commonStructs": [
//!     { "name": "Assignment", "fields": [
//!       { "name": "ActiveTasks", "type": "[]TaskIds" },
//!       { "name": "StandbyTasks", "type": "[]TaskIds" },
//!       { "name": "WarmupTasks", "type": "[]TaskIds" } ] } ] }
//! ```
//! (every field `"versions": "0+"` unless shown; the shared structs,
//! TopologyDescription among them, are in the module above.)

use super::{Endpoint, KeyValue, TaskIds, TaskOffset, TopicInfo, TopologyDescription};

wire_struct! {
    pub struct StreamsGroupDescribeRequest {
        pub group_ids: Vec<String>,
        pub include_authorized_operations: bool,
        pub include_topology_description: bool; versions 1..=32767,
    }
}

wire_struct! {
    pub struct StreamsGroupDescribeResponse {
        pub throttle_time_ms: i32,
        pub groups: Vec<DescribedGroup>,
    }
}

wire_struct! {
    pub struct DescribedGroup {
        pub error_code: i16,
        pub error_message: Option<String>,
        pub group_id: String,
        pub group_state: String,
        pub group_epoch: i32,
        pub assignment_epoch: i32,
        pub topology: Option<DescribedTopology>,
        pub members: Vec<DescribedMember>,
        pub authorized_operations: i32 = i32::MIN,
        /// Non-null only with [`TopologyDescriptionStatus::Available`].
        pub topology_description: Option<TopologyDescription>; versions 1..=32767,
        pub topology_description_status: i8; versions 1..=32767,
        /// The task assignor the next assignment will use.
        pub assignor_name: Option<String>; versions 1..=32767,
    }
}

wire_struct! {
    pub struct DescribedTopology {
        pub epoch: i32,
        /// Null while the topology is not configured (source topics missing
        /// or wrongly partitioned).
        pub subtopologies: Option<Vec<DescribedSubtopology>>,
    }
}

wire_struct! {
    pub struct DescribedSubtopology {
        pub subtopology_id: String,
        pub source_topics: Vec<String>,
        pub repartition_sink_topics: Vec<String>,
        pub state_changelog_topics: Vec<TopicInfo>,
        pub repartition_source_topics: Vec<TopicInfo>,
    }
}

wire_struct! {
    pub struct Assignment {
        pub active_tasks: Vec<TaskIds>,
        pub standby_tasks: Vec<TaskIds>,
        pub warmup_tasks: Vec<TaskIds>,
    }
}

wire_struct! {
    pub struct DescribedMember {
        pub member_id: String,
        pub member_epoch: i32,
        pub instance_id: Option<String>,
        pub rack_id: Option<String>,
        pub client_id: String,
        pub client_host: String,
        pub topology_epoch: i32,
        pub process_id: String,
        pub user_endpoint: Option<Endpoint>,
        pub client_tags: Vec<KeyValue>,
        pub task_offsets: Vec<TaskOffset>,
        pub task_end_offsets: Vec<TaskOffset>,
        pub assignment: Assignment,
        pub target_assignment: Assignment,
        pub is_classic: bool,
    }
}

nullable_struct!(DescribedTopology);

streams_message!(
    super::StreamsApiKey::StreamsGroupDescribe,
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse
);

/// DescribedGroup's TopologyDescriptionStatus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum TopologyDescriptionStatus {
    /// The request did not ask for descriptions.
    NotRequested = 0,
    /// No description is stored for the group (Ottla, as Kafka without a
    /// topology description plugin, stores none).
    NotStored = 1,
    Error = 2,
    Available = 3,
}
