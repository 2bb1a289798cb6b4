//! What controllers ask of the active controller over the quorum RPC:
//! metadata writes validated against an image, and broker heartbeats.
//!
//! A write carries the offset of the image its records were validated
//! against; the active controller commits it only if its own image is at
//! that same offset, and answers `Stale` otherwise, so the sender re-reads
//! its image and validates again. That keeps every change validated against
//! the state it is applied to, whichever node took the request, without
//! shipping each admin operation to the active controller. Heartbeats go
//! there because broker liveness is its in-memory state, as in KRaft.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ControllerRequest {
    /// Encoded `MetadataRecord`s, validated against the image at `expected_offset`.
    Write {
        expected_offset: i64,
        records: Vec<Vec<u8>>,
    },
    Heartbeat(Heartbeat),
    /// The quorum's state as the leader sees it (DescribeQuorum).
    DescribeQuorum,
    /// A broker-only node (an observer) asks for what was committed after
    /// its image.
    FetchMetadata(MetadataFetch),
    /// A controller of a dynamic quorum makes itself known (`raft::join`).
    JoinQuorum(ControllerJoin),
    /// AddRaftVoter: a controller that follows the log becomes a voter.
    AddVoter(VoterKey),
    /// RemoveRaftVoter: a voter goes back to following the log.
    RemoveVoter(VoterKey),
}

/// A controller joining a dynamic quorum: where its controller listener is
/// and which metadata log directory it runs on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerJoin {
    pub id: u64,
    pub node: Node,
    /// A UUID as u128.
    pub directory_id: u128,
}

/// A voter as KIP-853 names it: the controller and its log directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoterKey {
    pub id: u64,
    /// A UUID as u128.
    pub directory_id: u128,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataFetch {
    pub observer: u64,
    /// The offset of the observer's image (-1 when it has none).
    pub after: i64,
    /// How long the leader may hold the fetch while nothing is newer.
    pub max_wait_ms: u32,
}

/// What an observer applies to catch up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataUpdate {
    /// The entries after the observer's image, in order: each one's offset
    /// and encoded records. Empty when nothing was newer in time.
    Entries(Vec<(i64, Vec<Vec<u8>>)>),
    /// The observer is too far behind: the leader's whole image, as
    /// records that rebuild it at `offset`.
    Image { offset: i64, records: Vec<Vec<u8>> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub broker_id: i32,
    /// The broker process's registration (a UUID as u128).
    pub incarnation: u128,
    /// Controlled shutdown: move leadership away and fence this broker.
    pub want_shutdown: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerResponse {
    /// Committed at this offset.
    Written {
        offset: i64,
    },
    /// The image moved on since the records were validated: read and retry.
    Stale,
    /// The receiver is not the active controller (any more).
    NotLeader,
    Failed {
        code: i16,
        message: String,
    },
    Heartbeat(HeartbeatReply),
    Quorum(QuorumSummary),
    /// The answer to a metadata fetch, with the leader's term, its id and
    /// the voters (an observer of a dynamic quorum learns them here).
    Metadata {
        term: u64,
        leader: u64,
        voters: BTreeMap<u64, Node>,
        update: MetadataUpdate,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// The controller does not know this incarnation: register again.
    pub unknown: bool,
    pub fenced: bool,
    /// Partitions this broker still leads (controlled shutdown waits for 0).
    pub leaderships: u32,
}

/// Answers forwarded calls on the active controller.
pub trait ControllerService: Send + Sync + 'static {
    fn call(
        &self,
        request: ControllerRequest,
    ) -> Pin<Box<dyn Future<Output = ControllerResponse> + Send + 'static>>;
}

/// Filled in once the controller exists (it owns the quorum that serves it).
pub type ServiceSlot = Arc<OnceLock<Arc<dyn ControllerService>>>;

/// Where a voter's controller listener is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Per-voter state for DescribeQuorum, as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoterSummary {
    pub id: u64,
    /// The offset after the voter's last replicated entry, -1 if unknown.
    pub log_end_offset: i64,
    /// When the voter last answered the leader (wall-clock ms), if ever.
    pub last_fetch_ms: Option<i64>,
}

/// What DescribeQuorum reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumSummary {
    pub leader: Option<u64>,
    /// The Raft term, Kafka's leader epoch.
    pub epoch: u64,
    /// The offset after the last committed entry.
    pub high_watermark: i64,
    pub voters: Vec<VoterSummary>,
    /// Controllers that do not vote and broker-only nodes following the
    /// log, as of their last fetch.
    pub observers: Vec<VoterSummary>,
    /// Every voter's controller listener.
    pub voter_nodes: BTreeMap<u64, Node>,
}
