//! The KRaft-like metadata quorum, built on openraft.
//!
//! Controllers replicate the metadata log with Raft: a leader elected among
//! the voters appends batches of metadata records, and every voter applies
//! committed batches to its [`MetadataImage`](crate::image::MetadataImage).
//! [`Quorum`] is the façade the broker uses. Broker-only nodes are
//! [`Observer`]s: they fetch committed metadata from the active controller
//! instead of voting (see `observer`).
//!
//! # Log layout
//!
//! The Raft log *is* the metadata log: a storage-crate `PartitionLog`
//! (`__cluster_metadata-0`). Raft log index `i` is Kafka offset `i`
//! (openraft's first entry, the initial membership, has index 0). Every
//! entry is one record batch holding one record:
//!
//! - `baseOffset` = the log index;
//! - `partitionLeaderEpoch` = the Raft term (saturated to `i32::MAX`), so the
//!   leader-epoch cache and OffsetForLeaderEpoch work on this log as on any;
//! - the record value = format byte 0 + postcard of the openraft `Entry`
//!   (log id with term and leader node, and the payload). A normal payload is
//!   the list of [`MetadataRecord`](crate::records::MetadataRecord)s of one
//!   write, each in records.rs's own encoding.
//!
//! One entry per batch keeps Raft truncation exact: `PartitionLog` truncates
//! whole batches. An entry's records share its offset, which is also what a
//! write returns and what `MetadataImage::offset` holds once it is applied.
//!
//! # Files, in the log's directory
//!
//! - the `PartitionLog` files (`*.log`, indexes, `leader-epoch-checkpoint`);
//! - `quorum-state`: the vote, the committed log id and the last purged log
//!   id, rewritten atomically (tmp + fsync + rename + directory fsync);
//! - `quorum-snapshot`: the latest snapshot, in record-batch form (a batch
//!   with the snapshot metadata, then batches of records that rebuild the
//!   image), also replaced atomically.

mod batches;
mod channel;
mod cluster_id;
mod departures;
mod feed;
mod forward;
mod join;
mod log_store;
mod member;
mod network;
mod observer;
mod quorum;
mod recent;
mod rpc;
mod snapshot;
#[cfg(test)]
mod snapshot_props;
mod state_file;
mod state_machine;

use std::collections::BTreeMap;
use std::io::Cursor;

pub(crate) use departures::refuses_connections;
pub use member::QuorumMember;
pub use observer::Observer;
pub use quorum::{Quorum, QuorumConfig, QuorumError, VoterChangeError, MAX_WRITE_BYTES};
pub use rpc::{RpcHandler, RPC_KEY};

pub use crate::service::{Node, QuorumSummary, VoterSummary};

/// How a node finds the voters of the metadata quorum.
#[derive(Debug, Clone)]
pub enum QuorumVoters {
    /// `controller.quorum.voters`: a fixed voter set (KRaft's
    /// `kraft.version` 0).
    Static(BTreeMap<u64, Node>),
    /// `controller.quorum.bootstrap.servers` (KIP-853, `kraft.version` 1):
    /// the voters live in the log and change with AddRaftVoter and
    /// RemoveRaftVoter.
    Dynamic(DynamicQuorum),
}

#[derive(Debug, Clone)]
pub struct DynamicQuorum {
    /// Where to find the quorum before this node knows its voters.
    pub bootstrap: Vec<Node>,
    /// This controller's own controller listener (unused on an observer).
    pub own: Node,
    /// The `directory.id` of this node's metadata log directory.
    pub directory_id: uuid::Uuid,
    /// The voters a new quorum starts with, when this controller's log is
    /// empty: this controller alone (Kafka's `kafka-storage.sh format
    /// --standalone`), the initial controllers (`--initial-controllers`),
    /// or none: it joins the quorum the bootstrap servers lead, following
    /// the log until it is added as a voter (`--no-initial-controllers`).
    pub initial_voters: BTreeMap<u64, Node>,
    /// `controller.quorum.auto.join.enable`: once it follows the log, this
    /// controller makes itself a voter (AddRaftVoter for itself).
    pub auto_join: bool,
}

impl QuorumVoters {
    /// KRaft's `kraft.version` feature level: 1 when the voter set can change.
    pub fn kraft_version(&self) -> i16 {
        match self {
            Self::Static(_) => 0,
            Self::Dynamic(_) => 1,
        }
    }
}

openraft::declare_raft_types!(
    /// openraft types of the metadata quorum: node ids are Kafka `node.id`s,
    /// a normal entry carries encoded metadata records, and applying one
    /// answers with its offset.
    pub TypeConfig:
        D = Vec<Vec<u8>>,
        R = i64,
        NodeId = u64,
        Node = Node,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

type LogId = openraft::LogId<u64>;
type StorageError = openraft::StorageError<u64>;
type Entry = openraft::Entry<TypeConfig>;

/// The voters of the membership `metrics` shows, with their addresses.
fn voters_of(metrics: &openraft::RaftMetrics<u64, Node>) -> BTreeMap<u64, Node> {
    let membership = metrics.membership_config.membership();
    membership
        .voter_ids()
        .filter_map(|id| Some((id, membership.get_node(&id)?.clone())))
        .collect()
}

/// The Kafka offset of a log index.
fn offset_of(index: u64) -> i64 {
    index as i64
}

/// The leader epoch stored for a term: terms never get near `i32::MAX` in
/// practice, and the entry itself keeps the exact term anyway.
fn epoch_of(term: u64) -> i32 {
    i32::try_from(term).unwrap_or(i32::MAX)
}

/// Runs blocking disk work (writes, fsyncs) off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(f).await {
        Ok(v) => v,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}
