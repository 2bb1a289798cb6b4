//! Mirror life cycle and inspection: CreateMirror (106), DeleteMirror (104),
//! ListMirrors (98) and DescribeMirrors (99), sent by an admin client to any
//! destination broker.
//!
//! ```json
//! {
//!   "apiKey": 106,
//!   "type": "request",
//!   "listeners": ["broker"],
//!   "name": "CreateMirrorRequest",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "MirrorName", "type": "string", "versions": "0+",
//!       "about": "The new mirror's name: topic-name characters, not ending in .removed or .paused." },
//!     { "name": "Configs", "type": "[]MirrorConfig", "versions": "0+",
//!       "about": "The mirror's configuration: source bootstrap servers, client security settings, filters, sync intervals.", "fields": [
//!       { "name": "Name", "type": "string", "versions": "0+", "about": "The config key." },
//!       { "name": "Value", "type": "string", "versions": "0+", "nullableVersions": "0+",
//!         "about": "The value; null takes the default." }
//!     ]},
//!     { "name": "ValidateOnly", "type": "bool", "versions": "0+", "default": "false",
//!       "about": "Check the mirror and its configuration without creating it." }
//!   ]
//! }
//! {
//!   "apiKey": 106,
//!   "type": "response",
//!   "name": "CreateMirrorResponse",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//!       "about": "The duration in milliseconds for which the request was throttled, or zero." },
//!     { "name": "ErrorCode", "type": "int16", "versions": "0+",
//!       "about": "0, MIRROR_ALREADY_EXISTS, INVALID_CONFIG (the message names the key), INVALID_REQUEST (bad name), ..." },
//!     { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//!       "about": "The error message, or null." }
//!   ]
//! }
//! ```
//!
//! ```json
//! {
//!   "apiKey": 104,
//!   "type": "request",
//!   "listeners": ["broker"],
//!   "name": "DeleteMirrorRequest",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "MirrorName", "type": "string", "versions": "0+",
//!       "about": "The mirror to delete. Refused with MIRROR_NOT_EMPTY while any of its topics is not STOPPED." }
//!   ]
//! }
//! {
//!   "apiKey": 104,
//!   "type": "response",
//!   "name": "DeleteMirrorResponse",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//!       "about": "The duration in milliseconds for which the request was throttled, or zero." },
//!     { "name": "ErrorCode", "type": "int16", "versions": "0+",
//!       "about": "0, UNKNOWN_MIRROR, MIRROR_NOT_EMPTY, ..." },
//!     { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//!       "about": "The error message, or null." }
//!   ]
//! }
//! ```
//!
//! ```json
//! {
//!   "apiKey": 98,
//!   "type": "request",
//!   "listeners": ["broker"],
//!   "name": "ListMirrorsRequest",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": []
//! }
//! {
//!   "apiKey": 98,
//!   "type": "response",
//!   "name": "ListMirrorsResponse",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//!       "about": "The duration in milliseconds for which the request was throttled, or zero." },
//!     { "name": "ErrorCode", "type": "int16", "versions": "0+",
//!       "about": "The error code, or 0." },
//!     { "name": "Mirrors", "type": "[]ListedMirror", "versions": "0+",
//!       "about": "The mirrors the caller may describe.", "fields": [
//!       { "name": "MirrorName", "type": "string", "versions": "0+", "about": "The mirror's name." },
//!       { "name": "SourceBootstrapServers", "type": "string", "versions": "0+",
//!         "about": "The source cluster's bootstrap.servers." },
//!       { "name": "SourceClusterId", "type": "string", "versions": "0+", "nullableVersions": "0+",
//!         "about": "The source's cluster id, or null until the source has been reached." },
//!       { "name": "TopicNames", "type": "[]string", "versions": "0+", "entityType": "topicName",
//!         "about": "The topics bound to the mirror (in any state, STOPPED included)." }
//!     ]}
//!   ]
//! }
//! ```
//!
//! ```json
//! {
//!   "apiKey": 99,
//!   "type": "request",
//!   "listeners": ["broker"],
//!   "name": "DescribeMirrorsRequest",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "MirrorNames", "type": "[]string", "versions": "0+", "nullableVersions": "0+",
//!       "about": "The mirrors to describe; null for all." },
//!     { "name": "LeaderOnly", "type": "bool", "versions": "0+", "taggedVersions": "0+", "tag": 0,
//!       "default": "false", "about": "Describe only the partitions the answering broker leads: the request a broker sends each leader when it gathers a describe." },
//!     { "name": "FailoverPlan", "type": "bool", "versions": "0+", "taggedVersions": "0+", "tag": 1,
//!       "default": "false", "about": "Answer each partition's Failover as --remove would do it now (ottla mirrors --remove --dry-run)." }
//!   ]
//! }
//! {
//!   "apiKey": 99,
//!   "type": "response",
//!   "name": "DescribeMirrorsResponse",
//!   "validVersions": "0",
//!   "flexibleVersions": "0+",
//!   "fields": [
//!     { "name": "ThrottleTimeMs", "type": "int32", "versions": "0+",
//!       "about": "The duration in milliseconds for which the request was throttled, or zero." },
//!     { "name": "Mirrors", "type": "[]DescribedMirror", "versions": "0+", "fields": [
//!       { "name": "MirrorName", "type": "string", "versions": "0+", "about": "The mirror's name." },
//!       { "name": "ErrorCode", "type": "int16", "versions": "0+",
//!         "about": "UNKNOWN_MIRROR, MIRROR_AUTHORIZATION_FAILED, or 0." },
//!       { "name": "ErrorMessage", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//!         "about": "The error message, or null." },
//!       { "name": "Topics", "type": "[]DescribedMirrorTopic", "versions": "0+", "fields": [
//!         { "name": "Name", "type": "string", "versions": "0+", "entityType": "topicName", "about": "The topic name." },
//!         { "name": "TopicId", "type": "uuid", "versions": "0+", "about": "The topic id." },
//!         { "name": "Partitions", "type": "[]DescribedMirrorPartition", "versions": "0+", "fields": [
//!           { "name": "PartitionIndex", "type": "int32", "versions": "0+", "about": "The partition index." },
//!           { "name": "State", "type": "int8", "versions": "0+",
//!             "about": "The mirror partition state (table in the module docs of protocol::mirror)." },
//!           { "name": "SourceOffset", "type": "int64", "versions": "0+",
//!             "about": "The source's high watermark (asked of the source when the describe was served, else as last fetched), or -1 if not known." },
//!           { "name": "DestinationOffset", "type": "int64", "versions": "0+",
//!             "about": "The destination's log end offset, or -1 if not known." },
//!           { "name": "LagRecords", "type": "int64", "versions": "0+",
//!             "about": "SourceOffset minus DestinationOffset, or -1 if either is unknown." },
//!           { "name": "LagMs", "type": "int64", "versions": "0+",
//!             "about": "How long the partition has been behind the source (0 when caught up), or -1." },
//!           { "name": "BytesPerSecond", "type": "int64", "versions": "0+",
//!             "about": "The recent mirrored byte rate of the partition." },
//!           { "name": "FetchErrors", "type": "int64", "versions": "0+",
//!             "about": "Fetch errors since this broker became the partition's leader." },
//!           { "name": "LastMirroredEpoch", "type": "int32", "versions": "0+",
//!             "about": "The last mirrored leader epoch stored for the partition, or -1." },
//!           { "name": "LastError", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
//!             "about": "The last error (for FAILED partitions: why), or null." },
//!           { "name": "SourceOffsetAgeMs", "type": "int64", "versions": "0+", "taggedVersions": "0+", "tag": 0,
//!             "default": "-1", "about": "How old SourceOffset is: milliseconds since the source said it, or -1 if not known." },
//!           { "name": "Failover", "type": "FailoverSummary", "versions": "0+", "taggedVersions": "0+", "tag": 1,
//!             "nullableVersions": "0+", "default": "null",
//!             "about": "What failover did (STOPPED partitions) or, with FailoverPlan, would do now.", "fields": [
//!             { "name": "OpenTransactionsPolicy", "type": "string", "versions": "0+", "about": "mirror.stop.open.transactions: abort or truncate." },
//!             { "name": "OpenTransactions", "type": "[]OpenTransactionSummary", "versions": "0+", "fields": [
//!               { "name": "ProducerId", "type": "int64", "versions": "0+", "about": "The producer of the open transaction." },
//!               { "name": "FirstOffset", "type": "int64", "versions": "0+", "about": "The transaction's first offset." },
//!               { "name": "IdleMs", "type": "int64", "versions": "0+", "about": "Milliseconds since the producer last wrote." }
//!             ]},
//!             { "name": "TruncatedRecords", "type": "int64", "versions": "0+", "about": "Records cut off by truncating to the last stable offset." },
//!             { "name": "LastMirroredEpoch", "type": "int32", "versions": "0+", "about": "The last mirrored epoch failover records." },
//!             { "name": "WritableAtMs", "type": "int64", "versions": "0+", "about": "When the partition became writable, or -1 in a plan." }
//!           ]}
//!         ]}
//!       ]}
//!     ]}
//!   ]
//! }
//! ```
//!
//! The per-partition figures come from the partition's leader: the broker
//! asked gathers them from every leader (DescribeMirrors with LeaderOnly),
//! and answers a partition whose leader is unknown or silent from its
//! stored state (state and last mirrored epoch, the other figures -1).

use uuid::Uuid;

use super::states::{NO_EPOCH, UNKNOWN_STATE};
use super::MirrorApiKey;

wire_struct! {
    /// One config entry of a new mirror.
    pub struct MirrorConfigEntry {
        pub name: String,
        /// Null takes the default.
        pub value: Option<String>,
    }
}

wire_struct! {
    /// Creates a mirror: a named link to a source cluster.
    pub struct CreateMirrorRequest {
        pub mirror_name: String,
        pub configs: Vec<MirrorConfigEntry>,
        /// Check everything, create nothing.
        pub validate_only: bool,
    }
}

wire_struct! {
    /// The answer to [`CreateMirrorRequest`].
    pub struct CreateMirrorResponse {
        pub throttle_time_ms: i32,
        pub error_code: i16,
        pub error_message: Option<String>,
    }
}

mirror_api!(MirrorApiKey::CreateMirror, CreateMirrorRequest => CreateMirrorResponse);

wire_struct! {
    /// Deletes a mirror whose topics are all stopped.
    pub struct DeleteMirrorRequest {
        pub mirror_name: String,
    }
}

wire_struct! {
    /// The answer to [`DeleteMirrorRequest`].
    pub struct DeleteMirrorResponse {
        pub throttle_time_ms: i32,
        pub error_code: i16,
        pub error_message: Option<String>,
    }
}

mirror_api!(MirrorApiKey::DeleteMirror, DeleteMirrorRequest => DeleteMirrorResponse);

wire_struct! {
    /// Lists every mirror.
    pub struct ListMirrorsRequest {}
}

wire_struct! {
    /// One mirror in a listing.
    pub struct ListedMirror {
        pub mirror_name: String,
        pub source_bootstrap_servers: String,
        /// Null until the source has been reached.
        pub source_cluster_id: Option<String>,
        pub topic_names: Vec<String>,
    }
}

wire_struct! {
    /// The answer to [`ListMirrorsRequest`].
    pub struct ListMirrorsResponse {
        pub throttle_time_ms: i32,
        pub error_code: i16,
        pub mirrors: Vec<ListedMirror>,
    }
}

mirror_api!(MirrorApiKey::ListMirrors, ListMirrorsRequest => ListMirrorsResponse);

wire_struct! {
    /// Describes mirrors down to their partitions.
    pub struct DescribeMirrorsRequest {
        /// Null describes every mirror.
        pub mirror_names: Option<Vec<String>>,
    }
}

wire_struct! {
    /// One mirror partition's state and progress.
    pub struct DescribedMirrorPartition {
        pub partition_index: i32,
        /// Wire value of the partition state (see the module docs).
        pub state: i8 = UNKNOWN_STATE,
        /// The source high watermark as last fetched, or -1.
        pub source_offset: i64 = -1,
        /// The destination log end offset, or -1.
        pub destination_offset: i64 = -1,
        pub lag_records: i64 = -1,
        pub lag_ms: i64 = -1,
        pub bytes_per_second: i64,
        pub fetch_errors: i64,
        pub last_mirrored_epoch: i32 = NO_EPOCH,
        pub last_error: Option<String>,
    }
}

/// DescribeMirrorsRequest's tagged field LeaderOnly.
const LEADER_ONLY_TAG: u32 = 0;
/// DescribeMirrorsRequest's tagged field FailoverPlan.
const FAILOVER_PLAN_TAG: u32 = 1;
/// DescribedMirrorPartition's tagged field SourceOffsetAgeMs.
const SOURCE_OFFSET_AGE_MS_TAG: u32 = 0;
/// DescribedMirrorPartition's tagged field Failover.
const FAILOVER_TAG: u32 = 1;

impl DescribeMirrorsRequest {
    /// Whether only the partitions the answering broker leads are asked
    /// for.
    pub fn leader_only(&self) -> bool {
        self.unknown_tagged_fields.flag(LEADER_ONLY_TAG)
    }

    pub fn with_leader_only(mut self, leader_only: bool) -> Self {
        self.unknown_tagged_fields
            .set_flag(LEADER_ONLY_TAG, leader_only);
        self
    }

    /// Whether each partition's failover plan is asked for (what
    /// `--remove` would do now).
    pub fn failover_plan(&self) -> bool {
        self.unknown_tagged_fields.flag(FAILOVER_PLAN_TAG)
    }

    pub fn with_failover_plan(mut self, plan: bool) -> Self {
        self.unknown_tagged_fields.set_flag(FAILOVER_PLAN_TAG, plan);
        self
    }
}

impl DescribedMirrorPartition {
    /// How old `source_offset` is, in milliseconds; -1 if not known.
    pub fn source_offset_age_ms(&self) -> i64 {
        self.unknown_tagged_fields
            .get_field(SOURCE_OFFSET_AGE_MS_TAG)
            .unwrap_or(-1)
    }

    pub fn with_source_offset_age_ms(mut self, age_ms: i64) -> Self {
        let value = (age_ms >= 0).then_some(&age_ms);
        let _ = self
            .unknown_tagged_fields
            .set_field(SOURCE_OFFSET_AGE_MS_TAG, value);
        self
    }

    /// What failover did to the partition (once STOPPED), or would do (in
    /// answer to a failover plan request).
    pub fn failover(&self) -> Option<FailoverSummary> {
        self.unknown_tagged_fields.get_field(FAILOVER_TAG)
    }

    pub fn with_failover(mut self, failover: Option<&FailoverSummary>) -> Self {
        // A summary's strings are short: its encoding cannot fail.
        let _ = self.unknown_tagged_fields.set_field(FAILOVER_TAG, failover);
        self
    }
}

wire_struct! {
    /// A transaction the source left open in a mirror partition.
    pub struct OpenTransactionSummary {
        pub producer_id: i64,
        pub first_offset: i64,
        /// Milliseconds since the producer last wrote to the partition.
        pub idle_ms: i64,
    }
}

wire_struct! {
    /// What failover does to a mirror partition: planned (`--remove
    /// --dry-run`), or done (kept with the STOPPED state).
    pub struct FailoverSummary {
        /// `mirror.stop.open.transactions`: "abort" or "truncate".
        pub open_transactions_policy: String,
        /// The transactions the source left open: aborted, or cut off.
        pub open_transactions: Vec<OpenTransactionSummary>,
        /// Records cut off by truncating to the last stable offset.
        pub truncated_records: i64,
        /// The last mirrored epoch failover records.
        pub last_mirrored_epoch: i32 = NO_EPOCH,
        /// When the partition became writable (ms since the Unix epoch);
        /// -1 in a plan.
        pub writable_at_ms: i64 = -1,
    }
}

wire_struct! {
    /// One topic of a described mirror.
    pub struct DescribedMirrorTopic {
        pub name: String,
        pub topic_id: Uuid,
        pub partitions: Vec<DescribedMirrorPartition>,
    }
}

wire_struct! {
    /// One described mirror, or why it could not be.
    pub struct DescribedMirror {
        pub mirror_name: String,
        pub error_code: i16,
        pub error_message: Option<String>,
        pub topics: Vec<DescribedMirrorTopic>,
    }
}

wire_struct! {
    /// The answer to [`DescribeMirrorsRequest`].
    pub struct DescribeMirrorsResponse {
        pub throttle_time_ms: i32,
        pub mirrors: Vec<DescribedMirror>,
    }
}

mirror_api!(MirrorApiKey::DescribeMirrors, DescribeMirrorsRequest => DescribeMirrorsResponse);
