//! Share groups' delivery state on a partition leader (KIP-932): which
//! records each share group has handed to which member, under what lock,
//! how often, and which are settled; and the share sessions members fetch
//! in. The group membership itself is the group coordinator's
//! (`ottla-group-coordinator`'s `share_*`); the broker wires ShareFetch and
//! ShareAcknowledge to this crate.
//!
//! - `partition`: one share partition's state machine;
//! - `dead_letter`: what goes to a group's dead-letter queue (KIP-1191);
//! - `persisted`: the state as the share coordinator keeps it;
//! - `sessions`: share sessions (epochs, partitions per member);
//! - `registry`: the share partitions led here.

pub mod dead_letter;
pub mod partition;
pub mod persisted;
pub mod registry;
pub mod sessions;

pub use partition::{
    AckType, AcquireMode, Acquired, DeadLetters, DeliveryLimits, FetchedBatch, SharePartition,
    Window,
};
pub use registry::{SharePartitionKey, SharePartitions};
pub use sessions::{
    SessionChanges, SessionUse, ShareSessions, TopicIdPartition, FINAL_EPOCH, INITIAL_EPOCH,
};
