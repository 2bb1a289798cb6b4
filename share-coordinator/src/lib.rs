//! The share coordinator (KIP-932, Kafka's `share-coordinator` module):
//! share partitions' delivery state, persisted in `__share_group_state`
//! with Kafka's record formats, so that what share-group members
//! acknowledged survives a broker restart and a partition leader change.
//! It writes through the partition-writer trait of `ottla-coordinator-common`;
//! the broker serves its APIs and calls it from the share partition leaders.
//!
//! - `state`: a share partition's persisted state;
//! - `records`: the ShareSnapshot and ShareUpdate records;
//! - `shard`: one state partition's states, loaded from its log;
//! - `coordinator`: the shards this broker leads, by key hash.

mod coordinator;
mod records;
mod shard;
pub mod state;

pub use coordinator::{ShareCoordinator, ShareCoordinatorConfig, SHARE_STATE_TOPIC};
pub use shard::{StateWrite, UNSET_START};
pub use state::{ShareState, StateBatch, StateKey};
