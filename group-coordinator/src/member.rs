//! A classic group member and the answers its parked JoinGroup / SyncGroup
//! requests wait for.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

/// One protocol a member supports (e.g. an assignor) with its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protocol {
    pub name: String,
    pub metadata: Bytes,
}

/// A member of the group as the leader sees it in its JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// The JoinGroup answer, independent of the request version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResult {
    pub error: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub skip_assignment: bool,
    /// Only the leader gets the members.
    pub members: Vec<JoinedMember>,
}

impl JoinResult {
    pub fn error(member_id: &str, error: ResponseError) -> Self {
        Self {
            error: error.code(),
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            skip_assignment: false,
            members: Vec::new(),
        }
    }
}

/// The SyncGroup answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncResult {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    pub fn error(error: ResponseError) -> Self {
        Self {
            error: error.code(),
            ..Self::default()
        }
    }
}

#[derive(Debug)]
pub struct Member {
    pub id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub protocol_type: String,
    /// In the member's order of preference.
    pub protocols: Vec<Protocol>,
    pub assignment: Bytes,
    pub(super) join_waiter: Option<oneshot::Sender<JoinResult>>,
    pub(super) sync_waiter: Option<oneshot::Sender<SyncResult>>,
    /// Joined during the current rebalance and not yet answered.
    pub(super) is_new: bool,
    /// When the member's session expires without a heartbeat; None while no
    /// expiry is scheduled (it awaits a rebalance step that reschedules it).
    pub(super) heartbeat_deadline: Option<i64>,
}

impl Member {
    pub fn metadata(&self, protocol: &str) -> Option<&Bytes> {
        self.protocols
            .iter()
            .find(|p| p.name == protocol)
            .map(|p| &p.metadata)
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.metadata(protocol).is_some()
    }

    /// The member's preferred protocol among `candidates`.
    pub fn vote<'a>(&'a self, candidates: &[&str]) -> Option<&'a str> {
        self.protocols
            .iter()
            .map(|p| p.name.as_str())
            .find(|name| candidates.contains(name))
    }

    pub fn is_awaiting_join(&self) -> bool {
        self.join_waiter.is_some()
    }

    pub fn is_awaiting_sync(&self) -> bool {
        self.sync_waiter.is_some()
    }

    /// Members parked in a rebalance need not heartbeat, except new members,
    /// whose first JoinGroup may be abandoned by a disconnected client.
    pub fn has_satisfied_heartbeat(&self) -> bool {
        !self.is_new && (self.is_awaiting_join() || self.is_awaiting_sync())
    }

    /// Answers a parked JoinGroup; false if none was parked.
    pub fn complete_join(&mut self, result: JoinResult) -> bool {
        match self.join_waiter.take() {
            Some(tx) => {
                // The requester may have gone away; nothing to do then.
                let _ = tx.send(result);
                true
            }
            None => false,
        }
    }

    /// Answers a parked SyncGroup; false if none was parked.
    pub fn complete_sync(&mut self, result: SyncResult) -> bool {
        match self.sync_waiter.take() {
            Some(tx) => {
                let _ = tx.send(result);
                true
            }
            None => false,
        }
    }

    /// Parks a JoinGroup; the previous one, if any, is dropped (its client
    /// has retried).
    pub fn await_join(&mut self) -> oneshot::Receiver<JoinResult> {
        let (tx, rx) = oneshot::channel();
        self.join_waiter = Some(tx);
        rx
    }

    pub fn await_sync(&mut self) -> oneshot::Receiver<SyncResult> {
        let (tx, rx) = oneshot::channel();
        self.sync_waiter = Some(tx);
        rx
    }
}
