//! Leader-epoch RPCs: LastMirroredEpochs (97), asked of the *source* cluster
//! when a partition prepares (failback), and BumpLeaderEpochs (105), sent by a
//! destination leader to its controller when a partition stops.
//!
//! LastMirroredEpochs is answered by a cluster that once mirrored the topic
//! itself: its `__mirror_state` holds the last leader epoch it mirrored
//! (LME) from the cluster now asking. The answering broker finds the mirror
//! from the topic's own binding (`mirror.name`), so the request names topics
//! by id only. A source that does not know the API (Apache Kafka, or an older
//! Ottla) is treated as "no LME": the asking partition truncates everything.
//!
//! ```json
//! {
//!   "apiKey": 97,
//!   "type": "request",
//!   "listeners": ["broker"],
//!   "name": "LastMirroredEpochsRequest",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "Topics", "type": "[]LastMirroredEpochsTopic", "versions": "0+", "fields": [
//!       { "name": "TopicId", "type": "uuid", "versions": "0+", "about": "The topic id (shared by both clusters)." },
//!       { "name": "Partitions", "type": "[]int32", "versions": "0+", "about": "The partition indexes." }
//!     ]}
//!   ]
//! }
//! {
//!   "apiKey": 97,
//!   "type": "response",
//!   "name": "LastMirroredEpochsResponse",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//!       "about": "The duration in milliseconds for which the request was throttled, or zero." },
//!     { "name": "Topics", "type": "[]LastMirroredEpochsTopicResult", "versions": "0+", "fields": [
//!       { "name": "TopicId", "type": "uuid", "versions": "0+", "about": "The topic id." },
//!       { "name": "Partitions", "type": "[]LastMirroredEpochsPartitionResult", "versions": "0+", "fields": [
//!         { "name": "PartitionIndex", "type": "int32", "versions": "0+", "about": "The partition index." },
//!         { "name": "ErrorCode", "type": "int16", "versions": "0+",
//!           "about": "0, UNKNOWN_TOPIC_ID, COORDINATOR_LOAD_IN_PROGRESS, ..." },
//!         { "name": "LastMirroredEpoch", "type": "int32", "versions": "0+", "default": "-1",
//!           "about": "The last leader epoch this cluster mirrored into the partition, or -1 if it never mirrored it." }
//!       ]}
//!     ]}
//!   ]
//! }
//! ```
//!
//! BumpLeaderEpochs enforces the leader epoch invariant at failover: batches
//! mirrored from the source keep the source's epochs, so before the topic
//! becomes writable the destination's leader epoch must exceed every epoch
//! in its log. After a successful bump the partition's leader epoch is
//! greater than both its previous epoch and `MinLeaderEpoch` (the controller
//! sets `max(current + 1, MinLeaderEpoch + 1)`), with the same leader and ISR.
//!
//! ```json
//! {
//!   "apiKey": 105,
//!   "type": "request",
//!   "listeners": ["controller"],
//!   "name": "BumpLeaderEpochsRequest",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "BrokerId", "type": "int32", "versions": "0+", "entityType": "brokerId",
//!       "about": "The requesting broker (the partitions' leader)." },
//!     { "name": "BrokerEpoch", "type": "int64", "versions": "0+", "default": "-1",
//!       "about": "The requesting broker's epoch; a stale one is STALE_BROKER_EPOCH." },
//!     { "name": "Topics", "type": "[]BumpLeaderEpochsTopic", "versions": "0+", "fields": [
//!       { "name": "TopicId", "type": "uuid", "versions": "0+", "about": "The topic id." },
//!       { "name": "Partitions", "type": "[]BumpLeaderEpochsPartition", "versions": "0+", "fields": [
//!         { "name": "PartitionIndex", "type": "int32", "versions": "0+", "about": "The partition index." },
//!         { "name": "LeaderEpoch", "type": "int32", "versions": "0+",
//!           "about": "The requester's current leader epoch; another is FENCED_LEADER_EPOCH (or NOT_LEADER_OR_FOLLOWER if it no longer leads)." },
//!         { "name": "MinLeaderEpoch", "type": "int32", "versions": "0+",
//!           "about": "The latest epoch in the partition's log: the new leader epoch will be greater." }
//!       ]}
//!     ]}
//!   ]
//! }
//! {
//!   "apiKey": 105,
//!   "type": "response",
//!   "name": "BumpLeaderEpochsResponse",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//!       "about": "The duration in milliseconds for which the request was throttled, or zero." },
//!     { "name": "ErrorCode", "type": "int16", "versions": "0+",
//!       "about": "A request-level error (STALE_BROKER_EPOCH, NOT_CONTROLLER, ...), or 0." },
//!     { "name": "Topics", "type": "[]BumpLeaderEpochsTopicResult", "versions": "0+", "fields": [
//!       { "name": "TopicId", "type": "uuid", "versions": "0+", "about": "The topic id." },
//!       { "name": "Partitions", "type": "[]BumpLeaderEpochsPartitionResult", "versions": "0+", "fields": [
//!         { "name": "PartitionIndex", "type": "int32", "versions": "0+", "about": "The partition index." },
//!         { "name": "ErrorCode", "type": "int16", "versions": "0+", "about": "The partition's error, or 0." },
//!         { "name": "LeaderEpoch", "type": "int32", "versions": "0+", "default": "-1",
//!           "about": "The partition's leader epoch after the bump, or -1 on error." }
//!       ]}
//!     ]}
//!   ]
//! }
//! ```

use uuid::Uuid;

use super::states::NO_EPOCH;
use super::MirrorApiKey;

wire_struct! {
    /// The partitions of one topic whose LME is asked for.
    pub struct LastMirroredEpochsTopic {
        pub topic_id: Uuid,
        pub partitions: Vec<i32>,
    }
}

wire_struct! {
    /// Asks a cluster for the last epochs it mirrored.
    pub struct LastMirroredEpochsRequest {
        pub topics: Vec<LastMirroredEpochsTopic>,
    }
}

wire_struct! {
    /// One partition's LME.
    pub struct LastMirroredEpochsPartitionResult {
        pub partition_index: i32,
        pub error_code: i16,
        /// [`NO_EPOCH`] if this cluster never mirrored the partition.
        pub last_mirrored_epoch: i32 = NO_EPOCH,
    }
}

wire_struct! {
    /// One topic's LMEs.
    pub struct LastMirroredEpochsTopicResult {
        pub topic_id: Uuid,
        pub partitions: Vec<LastMirroredEpochsPartitionResult>,
    }
}

wire_struct! {
    /// The answer to [`LastMirroredEpochsRequest`].
    pub struct LastMirroredEpochsResponse {
        pub throttle_time_ms: i32,
        pub topics: Vec<LastMirroredEpochsTopicResult>,
    }
}

mirror_api!(MirrorApiKey::LastMirroredEpochs, LastMirroredEpochsRequest => LastMirroredEpochsResponse);

wire_struct! {
    /// One partition whose leader epoch must be raised.
    pub struct BumpLeaderEpochsPartition {
        pub partition_index: i32,
        /// The requester's current leader epoch, for fencing.
        pub leader_epoch: i32,
        /// The new leader epoch will be greater than this.
        pub min_leader_epoch: i32,
    }
}

wire_struct! {
    /// The partitions of one topic.
    pub struct BumpLeaderEpochsTopic {
        pub topic_id: Uuid,
        pub partitions: Vec<BumpLeaderEpochsPartition>,
    }
}

wire_struct! {
    /// Asks the controller to raise partition leader epochs.
    pub struct BumpLeaderEpochsRequest {
        pub broker_id: i32,
        pub broker_epoch: i64 = -1,
        pub topics: Vec<BumpLeaderEpochsTopic>,
    }
}

wire_struct! {
    /// The outcome for one partition.
    pub struct BumpLeaderEpochsPartitionResult {
        pub partition_index: i32,
        pub error_code: i16,
        /// The leader epoch after the bump, or [`NO_EPOCH`] on error.
        pub leader_epoch: i32 = NO_EPOCH,
    }
}

wire_struct! {
    /// The outcome for one topic.
    pub struct BumpLeaderEpochsTopicResult {
        pub topic_id: Uuid,
        pub partitions: Vec<BumpLeaderEpochsPartitionResult>,
    }
}

wire_struct! {
    /// The answer to [`BumpLeaderEpochsRequest`].
    pub struct BumpLeaderEpochsResponse {
        pub throttle_time_ms: i32,
        pub error_code: i16,
        pub topics: Vec<BumpLeaderEpochsTopicResult>,
    }
}

mirror_api!(MirrorApiKey::BumpLeaderEpochs, BumpLeaderEpochsRequest => BumpLeaderEpochsResponse);
