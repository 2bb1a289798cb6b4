//! The `__mirror_state` coordinator's RPCs: ReadMirrorStates (100) and
//! WriteMirrorStates (101). A mirror partition's leader sends them to the
//! broker leading the `__mirror_state` partition that holds the state of
//! (mirror, topic id, partition) when it does not lead that partition itself
//! (`ottla-mirror` defines the partitioning). Topics are named by id only: the
//! state is keyed by topic id, which the destination topic shares with the
//! source.
//!
//! Writes are fenced by the mirror partition's leader epoch: the coordinator
//! stores the epoch with the state and refuses a write carrying an older one
//! with FENCED_LEADER_EPOCH, so a deposed leader cannot overwrite its
//! successor's state. It also refuses a state the stored one cannot move to
//! with INVALID_MIRROR_STATE.
//!
//! ```json
//! {
//!   "apiKey": 100,
//!   "type": "request",
//!   "listeners": ["broker"],
//!   "name": "ReadMirrorStatesRequest",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "MirrorName", "type": "string", "versions": "0+", "about": "The mirror." },
//!     { "name": "Topics", "type": "[]ReadMirrorStatesTopic", "versions": "0+", "fields": [
//!       { "name": "TopicId", "type": "uuid", "versions": "0+", "about": "The topic id." },
//!       { "name": "Partitions", "type": "[]int32", "versions": "0+", "about": "The partition indexes." }
//!     ]}
//!   ]
//! }
//! {
//!   "apiKey": 100,
//!   "type": "response",
//!   "name": "ReadMirrorStatesResponse",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//!       "about": "The duration in milliseconds for which the request was throttled, or zero." },
//!     { "name": "Topics", "type": "[]ReadMirrorStatesTopicResult", "versions": "0+", "fields": [
//!       { "name": "TopicId", "type": "uuid", "versions": "0+", "about": "The topic id." },
//!       { "name": "Partitions", "type": "[]ReadMirrorStatesPartitionResult", "versions": "0+", "fields": [
//!         { "name": "PartitionIndex", "type": "int32", "versions": "0+", "about": "The partition index." },
//!         { "name": "ErrorCode", "type": "int16", "versions": "0+",
//!           "about": "0, NOT_COORDINATOR (this broker does not lead the state partition), COORDINATOR_LOAD_IN_PROGRESS, ..." },
//!         { "name": "State", "type": "int8", "versions": "0+", "default": "16",
//!           "about": "The stored state, or 16 (UNKNOWN) if none is stored." },
//!         { "name": "PreviousState", "type": "int8", "versions": "0+", "default": "16",
//!           "about": "The state before it, or 16 (UNKNOWN)." },
//!         { "name": "LeaderEpoch", "type": "int32", "versions": "0+", "default": "-1",
//!           "about": "The mirror partition leader epoch the state was written with, or -1. The reader compares it with its own." },
//!         { "name": "LastMirroredEpoch", "type": "int32", "versions": "0+", "default": "-1",
//!           "about": "The stored last mirrored epoch, or -1 if none." },
//!         { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//!           "about": "The request error's message, or for a FAILED partition the stored reason; null otherwise." },
//!         { "name": "Failover", "type": "FailoverSummary", "versions": "0+", "taggedVersions": "0+", "tag": 0,
//!           "nullableVersions": "0+", "default": "null",
//!           "about": "What failover did, stored with STOPPED (the schema is DescribeMirrors')." }
//!       ]}
//!     ]}
//!   ]
//! }
//! ```
//!
//! ```json
//! {
//!   "apiKey": 101,
//!   "type": "request",
//!   "listeners": ["broker"],
//!   "name": "WriteMirrorStatesRequest",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "MirrorName", "type": "string", "versions": "0+", "about": "The mirror." },
//!     { "name": "Topics", "type": "[]WriteMirrorStatesTopic", "versions": "0+", "fields": [
//!       { "name": "TopicId", "type": "uuid", "versions": "0+", "about": "The topic id." },
//!       { "name": "Partitions", "type": "[]WriteMirrorStatesPartition", "versions": "0+", "fields": [
//!         { "name": "PartitionIndex", "type": "int32", "versions": "0+", "about": "The partition index." },
//!         { "name": "LeaderEpoch", "type": "int32", "versions": "0+",
//!           "about": "The writer's leader epoch for the mirror partition; older than the stored one is FENCED_LEADER_EPOCH." },
//!         { "name": "State", "type": "int8", "versions": "0+", "about": "The new state." },
//!         { "name": "LastMirroredEpoch", "type": "int32", "versions": "0+", "default": "-1",
//!           "about": "A last mirrored epoch to store with it (STOPPING), or -1 to leave the stored one unchanged." },
//!         { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//!           "about": "Why the partition FAILED; null for other states." },
//!         { "name": "Failover", "type": "FailoverSummary", "versions": "0+", "taggedVersions": "0+", "tag": 0,
//!           "nullableVersions": "0+", "default": "null",
//!           "about": "What failover did, to store with STOPPED (the schema is DescribeMirrors')." }
//!       ]}
//!     ]}
//!   ]
//! }
//! {
//!   "apiKey": 101,
//!   "type": "response",
//!   "name": "WriteMirrorStatesResponse",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//!       "about": "The duration in milliseconds for which the request was throttled, or zero." },
//!     { "name": "Topics", "type": "[]WriteMirrorStatesTopicResult", "versions": "0+", "fields": [
//!       { "name": "TopicId", "type": "uuid", "versions": "0+", "about": "The topic id." },
//!       { "name": "Partitions", "type": "[]WriteMirrorStatesPartitionResult", "versions": "0+", "fields": [
//!         { "name": "PartitionIndex", "type": "int32", "versions": "0+", "about": "The partition index." },
//!         { "name": "ErrorCode", "type": "int16", "versions": "0+",
//!           "about": "0, FENCED_LEADER_EPOCH, INVALID_MIRROR_STATE, NOT_COORDINATOR, ..." },
//!         { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//!           "about": "The error message, or null." }
//!       ]}
//!     ]}
//!   ]
//! }
//! ```

use uuid::Uuid;

use super::admin::FailoverSummary;
use super::MirrorApiKey;

/// `State` when nothing is stored.
pub const UNKNOWN_STATE: i8 = 16;
/// `LeaderEpoch` and `LastMirroredEpoch` when there is none.
pub const NO_EPOCH: i32 = -1;

wire_struct! {
    /// The partitions of one topic whose state is asked for.
    pub struct ReadMirrorStatesTopic {
        pub topic_id: Uuid,
        pub partitions: Vec<i32>,
    }
}

wire_struct! {
    /// Reads stored mirror partition states.
    pub struct ReadMirrorStatesRequest {
        pub mirror_name: String,
        pub topics: Vec<ReadMirrorStatesTopic>,
    }
}

wire_struct! {
    /// One partition's stored state.
    pub struct ReadMirrorStatesPartitionResult {
        pub partition_index: i32,
        pub error_code: i16,
        /// [`UNKNOWN_STATE`] when nothing is stored.
        pub state: i8 = UNKNOWN_STATE,
        pub previous_state: i8 = UNKNOWN_STATE,
        /// The leader epoch the state was written with, or [`NO_EPOCH`].
        pub leader_epoch: i32 = NO_EPOCH,
        pub last_mirrored_epoch: i32 = NO_EPOCH,
        pub error_message: Option<String>,
    }
}

wire_struct! {
    /// One topic's stored states.
    pub struct ReadMirrorStatesTopicResult {
        pub topic_id: Uuid,
        pub partitions: Vec<ReadMirrorStatesPartitionResult>,
    }
}

wire_struct! {
    /// The answer to [`ReadMirrorStatesRequest`].
    pub struct ReadMirrorStatesResponse {
        pub throttle_time_ms: i32,
        pub topics: Vec<ReadMirrorStatesTopicResult>,
    }
}

mirror_api!(MirrorApiKey::ReadMirrorStates, ReadMirrorStatesRequest => ReadMirrorStatesResponse);

wire_struct! {
    /// One partition's new state.
    pub struct WriteMirrorStatesPartition {
        pub partition_index: i32,
        /// The writer's leader epoch, for fencing.
        pub leader_epoch: i32,
        pub state: i8,
        /// Stored as the partition's LME unless [`NO_EPOCH`].
        pub last_mirrored_epoch: i32 = NO_EPOCH,
        /// Why the partition failed (FAILED only).
        pub error_message: Option<String>,
    }
}

wire_struct! {
    /// The partitions of one topic to write.
    pub struct WriteMirrorStatesTopic {
        pub topic_id: Uuid,
        pub partitions: Vec<WriteMirrorStatesPartition>,
    }
}

wire_struct! {
    /// Persists mirror partition states.
    pub struct WriteMirrorStatesRequest {
        pub mirror_name: String,
        pub topics: Vec<WriteMirrorStatesTopic>,
    }
}

wire_struct! {
    /// The outcome for one partition.
    pub struct WriteMirrorStatesPartitionResult {
        pub partition_index: i32,
        pub error_code: i16,
        pub error_message: Option<String>,
    }
}

wire_struct! {
    /// The outcome for one topic.
    pub struct WriteMirrorStatesTopicResult {
        pub topic_id: Uuid,
        pub partitions: Vec<WriteMirrorStatesPartitionResult>,
    }
}

wire_struct! {
    /// The answer to [`WriteMirrorStatesRequest`].
    pub struct WriteMirrorStatesResponse {
        pub throttle_time_ms: i32,
        pub topics: Vec<WriteMirrorStatesTopicResult>,
    }
}

mirror_api!(MirrorApiKey::WriteMirrorStates, WriteMirrorStatesRequest => WriteMirrorStatesResponse);

/// The tagged field Failover of ReadMirrorStatesPartitionResult and
/// WriteMirrorStatesPartition: what failover did, kept with STOPPED.
const FAILOVER_TAG: u32 = 0;

impl ReadMirrorStatesPartitionResult {
    pub fn failover(&self) -> Option<FailoverSummary> {
        self.unknown_tagged_fields.get_field(FAILOVER_TAG)
    }

    pub fn with_failover(mut self, failover: Option<&FailoverSummary>) -> Self {
        let _ = self.unknown_tagged_fields.set_field(FAILOVER_TAG, failover);
        self
    }
}

impl WriteMirrorStatesPartition {
    pub fn failover(&self) -> Option<FailoverSummary> {
        self.unknown_tagged_fields.get_field(FAILOVER_TAG)
    }

    pub fn with_failover(mut self, failover: Option<&FailoverSummary>) -> Self {
        let _ = self.unknown_tagged_fields.set_field(FAILOVER_TAG, failover);
        self
    }
}
