//! The group coordinator for the classic consumer group protocol (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup) and committed offsets, stored in
//! `__consumer_offsets` with Kafka's record formats.
//!
//! - `coordinator`: the shards, one per offsets partition led here;
//! - `shard`: one partition's groups and offsets, loaded from its log;
//! - `membership`, `rebalance`: the classic protocol's requests and state machine;
//! - `classic`, `member`: group and member data;
//! - `offsets`, `admin`: offset commits/fetches/deletes; describe/list/delete groups;
//! - `records`, `codec`, `subscription`: the stored and embedded formats;
//! - `partitioner`, `config`, `writer`: group → partition, settings, log appends.
//!
//! The request handlers are in `crate::apis::group`.

mod admin;
mod classic;
mod codec;
mod config;
mod coordinator;
mod member;
mod membership;
mod offsets;
mod partitioner;
mod rebalance;
mod records;
mod shard;
mod subscription;
mod writer;

#[cfg(test)]
mod tests;

pub use admin::{GroupDescription, ListedGroup, MemberDescription, CLASSIC_GROUP_TYPE};
pub use classic::{GroupState, DEAD};
pub use config::{GroupConfig, OFFSETS_TOPIC};
pub use coordinator::{CoordinatorNode, GroupCoordinator};
pub use member::{JoinResult, JoinedMember, Protocol, SyncResult};
pub use membership::{JoinRequest, LeavingMember, Reply, SyncRequest};
pub use offsets::{CommitRequest, FetchedOffset, PartitionCodes, PartitionCommit};
pub use shard::Shard;
