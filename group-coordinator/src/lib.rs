//! The group coordinator for the classic consumer group protocol (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup), the consumer protocol (KIP-848,
//! ConsumerGroupHeartbeat) and committed offsets, stored in
//! `__consumer_offsets` with Kafka's record formats.
//!
//! - `coordinator`: the shards, one per offsets partition led here;
//! - `shard`: one partition's groups and offsets, loaded from its log;
//! - `membership`, `rebalance`: the classic protocol's requests and state machine;
//! - `classic`, `member`: group and member data;
//! - `offsets`, `admin`: offset commits/fetches/deletes; describe/list/delete groups;
//! - `txn_offsets`: transactional offset commits, applied or dropped by markers;
//! - `retention`: expiry of old offsets and removal of the groups they leave;
//! - `records`, `codec`, `subscription`: the stored and embedded formats
//!   (`subscription`: the consumer protocol inside JoinGroup and SyncGroup);
//! - `config`, `writer`: settings, log appends;
//! - `answer`: answers held back until the ISR has what was written for them;
//! - `resource_configs`: the GROUP config resource (per-group overrides);
//! - `consumer_*`: consumer-protocol groups: `consumer_heartbeat` (the
//!   protocol), `consumer_leave`, `consumer_regex`, `consumer_reconcile`
//!   (member reconciliation), `consumer_assignor` (uniform, range),
//!   `consumer_group(s)`, `consumer_member` (state), `consumer_records` and
//!   `consumer_codec` (formats), `consumer_shard` (shard operations),
//!   `consumer_config`; `consumer_classic` (classic members of a consumer
//!   group) and `consumer_migration` (a group's move between protocols);
//! - `share_*`: share groups' membership (KIP-932): `share_group` (the
//!   heartbeat and the simple assignor), `share_records` (formats; the
//!   value schemas are `ottla_protocol::share_group_records`), `share_log`
//!   (a change as records, and their replay), `share_shard` (shard
//!   operations), `share_config` (settings); delivery is `ottla-share`'s.
//! - `streams_*`: streams groups (KIP-1071): `streams_heartbeat` (the
//!   protocol), `streams_topology` (the topology against the cluster's
//!   topics: tasks, internal topics), `streams_assignor` (sticky),
//!   `streams_reconcile` (member reconciliation), `streams_group` and
//!   `streams_member` (state), `streams_records` (formats; the value
//!   schemas are `ottla_protocol::streams::records`), `streams_shard`
//!   (shard operations), `streams_config`.
//!
//! It writes through the narrow partition-writer trait of
//! `ottla-coordinator-common`, not through the broker: the broker crate
//! implements the trait and holds the request handlers
//! (`apis/group.rs`, `apis/consumer_group.rs`).

mod admin;
mod answer;
mod classic;
pub use ottla_coordinator_common::codec;
mod config;
mod consumer_assignor;
mod consumer_classic;
mod consumer_codec;
mod consumer_config;
mod consumer_group;
mod consumer_groups;
mod consumer_heartbeat;
mod consumer_leave;
mod consumer_member;
mod consumer_migration;
mod consumer_reconcile;
mod consumer_records;
mod consumer_regex;
mod consumer_shard;
mod coordinator;
mod deleted_topics;
mod member;
mod membership;
mod offsets;
mod rebalance;
mod records;
pub mod resource_configs;
mod retention;
mod shard;
mod share_config;
mod share_group;
mod share_log;
mod share_records;
mod share_shard;
pub mod stats;
mod streams_assignor;
mod streams_config;
mod streams_group;
mod streams_heartbeat;
mod streams_member;
mod streams_reconcile;
mod streams_records;
mod streams_shard;
mod streams_topology;
pub mod subscription;
#[cfg(test)]
mod test_images;
mod txn_offsets;
mod writer;

pub use admin::{GroupDescription, ListedGroup, MemberDescription, CLASSIC_GROUP_TYPE};
pub use classic::{GroupState, DEAD};
pub use config::{GroupConfig, OFFSETS_TOPIC};
pub use consumer_config::ConsumerGroupConfig;
pub use consumer_group::{ConsumerGroupState, CONSUMER_GROUP_TYPE};
pub use consumer_groups::DescribedConsumerGroup;
pub use consumer_heartbeat::{
    validate as validate_consumer_heartbeat, HeartbeatAnswer, HeartbeatError, HeartbeatRequest,
};
pub use consumer_member::{Assignment, ConsumerMember};
pub use consumer_migration::MigrationPolicy;
pub use coordinator::GroupCoordinator;
pub use member::{JoinResult, JoinedMember, Protocol, SyncResult};
pub use membership::{JoinRequest, LeavingMember, Reply, SyncRequest};
pub use offsets::{CommitRequest, FetchedOffset, PartitionCodes, PartitionCommit};
pub use shard::Shard;
pub use share_config::{ShareGroupSettings, ShareStart};
pub use share_group::{
    ShareAssignment, ShareGroup, ShareGroupState, ShareHeartbeat, ShareHeartbeatAnswer,
    ShareLimits, ShareMember, SHARE_GROUP_TYPE,
};
pub use streams_config::StreamsGroupSettings;
pub use streams_group::{StreamsGroup, StreamsGroupState, STREAMS_GROUP_TYPE};
pub use streams_heartbeat::{
    validate as validate_streams_heartbeat, StreamsError, StreamsHeartbeat,
};
pub use streams_member::{task_ids, task_offsets, StreamsMember, TaskRoles};
pub use streams_shard::StreamsHeartbeatAnswer;
pub use streams_topology::{configure as configure_streams_topology, InternalTopic};
pub use txn_offsets::TxnCommitRequest;
pub use writer::coordinator_error;
