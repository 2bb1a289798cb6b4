//! StreamsGroupHeartbeat (key 88), versions 0-1 (v1's request is v0's; its
//! response has the lag as an int64 and TopologyDescriptionRequired):
//!
//! ```json
//! { "apiKey": 88, "type": "request", "name": "StreamsGroupHeartbeatRequest",
//!   "validVersions": "0-1", "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "GroupId", "type": "string", "versions": "0+" },
//!     { "name": "MemberId", "type": "string", "versions": "0+" },
//!     { "name": "MemberEpoch", "type": "int32", "versions": "0+" },
//!     { "name": "EndpointInformationEpoch", "type": "int32", "versions": "0+" },
//!     { "name": "InstanceId", "type": "string", "nullableVersions": "0+", "default": "null" },
//!     { "name": "RackId", "type": "string", "nullableVersions": "0+", "default": "null" },
//!     { "name": "RebalanceTimeoutMs", "type": "int32", "default": -1 },
//!     { "name": "Topology", "type": "Topology", "nullableVersions": "0+", "default": "null" },
//!     { "name": "ActiveTasks", "type": "[]TaskIds", "nullableVersions": "0+", "default": "null" },
//!     { "name": "StandbyTasks", "type": "[]TaskIds", "nullableVersions": "0+", "default": "null" },
//!     { "name": "WarmupTasks", "type": "[]TaskIds", "nullableVersions": "0+", "default": "null" },
//!     { "name": "ProcessId", "type": "string", "nullableVersions": "0+", "default": "null" },
//!     { "name": "UserEndpoint", "type": "Endpoint", "nullableVersions": "0+", "default": "null" },
//!     { "name": "ClientTags", "type": "[]KeyValue", "nullableVersions": "0+", "default": "null" },
//!     { "name": "TaskOffsets", "type": "[]TaskOffset", "nullableVersions": "0+", "default": "null" },
//!     { "name": "TaskEndOffsets", "type": "[]TaskOffset", "nullableVersions": "0+", "default": "null" },
//!     { "name": "ShutdownApplication", "type": "bool", "default": false } ] }
//!
//! { "apiKey": 88, "type": "response", "name": "StreamsGroupHeartbeatResponse",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32" },
//!     { "name": "ErrorCode", "type": "int16" },
//!     { "name": "ErrorMessage", "type": "string", "nullableVersions": "0+", "default": "null" },
//!     { "name": "MemberId", "type": "string" },
//!     { "name": "MemberEpoch", "type": "int32" },
//!     { "name": "HeartbeatIntervalMs", "type": "int32" },
//!     { "name": "AcceptableRecoveryLagLegacy", "type": "int32", "versions": "0" },
//!     { "name": "TaskOffsetIntervalMs", "type": "int32" },
//!     { "name": "AcceptableRecoveryLag", "type": "int64", "versions": "1+", "default": "-1" },
//!     { "name": "Status", "type": "[]Status", "nullableVersions": "0+" },
//!     { "name": "ActiveTasks", "type": "[]TaskIds", "nullableVersions": "0+", "default": "null" },
//!     { "name": "StandbyTasks", "type": "[]TaskIds", "nullableVersions": "0+", "default": "null" },
//!     { "name": "WarmupTasks", "type": "[]TaskIds", "nullableVersions": "0+", "default": "null" },
//!     { "name": "TopologyDescriptionRequired", "type": "bool", "versions": "1+", "default": "false" },
//!     { "name": "EndpointInformationEpoch", "type": "int32" },
//!     { "name": "PartitionsByUserEndpoint", "type": "[]EndpointToPartitions",
//!       "nullableVersions": "0+", "default": "null", "fields": [
//!       { "name": "UserEndpoint", "type": "Endpoint" },
//!       { "name": "ActivePartitions", "type": "[]TopicPartition" },
//!       { "name": "StandbyPartitions", "type": "[]TopicPartition" } ] } ],
//!   "commonStructs": [
//!     { "name": "Status", "fields": [
//!       { "name": "StatusCode", "type": "int8" },
//!       { "name": "StatusDetail", "type": "string" } ] },
//!     { "name": "TopicPartition", "fields": [
//!       { "name": "Topic", "type": "string" },
//!       { "name": "Partitions", "type": "[]int32" } ] } ] }
//! ```
//! (every field `"versions": "0+"` unless shown; the shared structs are in
//! the module above.)

use super::{Endpoint, KeyValue, TaskIds, TaskOffset, Topology};

wire_struct! {
    pub struct StreamsGroupHeartbeatRequest {
        pub group_id: String,
        pub member_id: String,
        pub member_epoch: i32,
        pub endpoint_information_epoch: i32,
        pub instance_id: Option<String>,
        pub rack_id: Option<String>,
        pub rebalance_timeout_ms: i32 = -1,
        pub topology: Option<Topology>,
        pub active_tasks: Option<Vec<TaskIds>>,
        pub standby_tasks: Option<Vec<TaskIds>>,
        pub warmup_tasks: Option<Vec<TaskIds>>,
        pub process_id: Option<String>,
        pub user_endpoint: Option<Endpoint>,
        pub client_tags: Option<Vec<KeyValue>>,
        pub task_offsets: Option<Vec<TaskOffset>>,
        pub task_end_offsets: Option<Vec<TaskOffset>>,
        pub shutdown_application: bool,
    }
}

wire_struct! {
    /// A condition of the group the member should know of (the codes are
    /// [`StatusCode`]'s).
    pub struct Status {
        pub status_code: i8,
        pub status_detail: String,
    }
}

wire_struct! {
    pub struct TopicPartition {
        pub topic: String,
        pub partitions: Vec<i32>,
    }
}

wire_struct! {
    /// Where one member's partitions can be queried (Interactive Queries).
    pub struct EndpointToPartitions {
        pub user_endpoint: Endpoint,
        pub active_partitions: Vec<TopicPartition>,
        pub standby_partitions: Vec<TopicPartition>,
    }
}

wire_struct! {
    pub struct StreamsGroupHeartbeatResponse {
        pub throttle_time_ms: i32,
        pub error_code: i16,
        pub error_message: Option<String>,
        pub member_id: String,
        pub member_epoch: i32,
        pub heartbeat_interval_ms: i32,
        /// v0's AcceptableRecoveryLagLegacy.
        pub acceptable_recovery_lag_legacy: i32; versions 0..=0,
        pub task_offset_interval_ms: i32,
        pub acceptable_recovery_lag: i64 = -1; versions 1..=32767,
        pub status: Option<Vec<Status>>,
        pub active_tasks: Option<Vec<TaskIds>>,
        pub standby_tasks: Option<Vec<TaskIds>>,
        pub warmup_tasks: Option<Vec<TaskIds>>,
        /// The member should send its topology's description
        /// (StreamsGroupTopologyDescriptionUpdate).
        pub topology_description_required: bool; versions 1..=32767,
        pub endpoint_information_epoch: i32,
        pub partitions_by_user_endpoint: Option<Vec<EndpointToPartitions>>,
    }
}

streams_message!(
    super::StreamsApiKey::StreamsGroupHeartbeat,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse
);

/// The response's status codes (StreamsGroupHeartbeatResponse.json).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i8)]
pub enum StatusCode {
    /// The member's topology epoch is older than the group's.
    StaleTopology = 0,
    /// Source topics are missing (named in the detail).
    MissingSourceTopics = 1,
    /// Copartitioned topics differ in partition count.
    IncorrectlyPartitionedTopics = 2,
    /// Internal topics are missing; the coordinator is creating them.
    MissingInternalTopics = 3,
    /// A member asked the whole application to shut down.
    ShutdownApplication = 4,
    /// No assignment yet: a new group waits for more members first.
    AssignmentDelayed = 5,
    /// The member lacks client tags the group's rack-aware standby
    /// assignment uses (v1 only).
    MissingClientTags = 6,
}

impl Status {
    pub fn new(code: StatusCode, detail: impl Into<String>) -> Self {
        Self {
            status_code: code as i8,
            status_detail: detail.into(),
            ..Default::default()
        }
    }
}
