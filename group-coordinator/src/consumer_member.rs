//! A consumer-protocol (KIP-848) member: its subscription (the
//! ConsumerGroupMemberMetadata record) and its current assignment (the
//! ConsumerGroupCurrentMemberAssignment record), each replaced whole by its
//! record.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::member::Protocol;

/// Topic id -> partitions.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// The epoch a static member takes when it leaves temporarily (KIP-848).
pub const LEAVE_STATIC_EPOCH: i32 = -2;
/// The epoch of a member leaving for good.
pub const LEAVE_EPOCH: i32 = -1;

/// Kafka's MemberState, with its stored byte values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MemberState {
    /// Reconciled with its target assignment.
    #[default]
    Stable,
    /// Must revoke partitions before moving to the next epoch.
    UnrevokedPartitions,
    /// At the target epoch, waiting for partitions others still own.
    UnreleasedPartitions,
    /// A state a newer version wrote.
    Unknown,
}

impl MemberState {
    pub fn from_byte(b: i8) -> Self {
        match b {
            0 => Self::Stable,
            1 => Self::UnrevokedPartitions,
            2 => Self::UnreleasedPartitions,
            _ => Self::Unknown,
        }
    }

    pub fn byte(self) -> i8 {
        match self {
            Self::Stable => 0,
            Self::UnrevokedPartitions => 1,
            Self::UnreleasedPartitions => 2,
            Self::Unknown => 127,
        }
    }
}

/// What the member asked for; ConsumerGroupMemberMetadataValue.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberSubscription {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub topic_names: BTreeSet<String>,
    pub topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    /// Set for a member that joined with the classic protocol (JoinGroup)
    /// while the group uses the consumer protocol (online migration).
    pub classic: Option<ClassicMetadata>,
}

/// A classic member's JoinGroup settings (Kafka's ClassicMemberMetadata).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClassicMetadata {
    pub session_timeout_ms: i32,
    /// Its protocols (client-side assignors) in order of preference, each
    /// with its embedded subscription.
    pub protocols: Vec<Protocol>,
}

impl ClassicMetadata {
    /// The protocol its JoinGroup and SyncGroup answers name: its first.
    pub fn protocol_name(&self) -> &str {
        self.protocols.first().map_or("", |p| p.name.as_str())
    }

    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|p| p.name == protocol)
    }
}

impl MemberSubscription {
    /// The regex, unless unset or empty (an empty one subscribes to nothing).
    pub fn regex(&self) -> Option<&str> {
        self.topic_regex.as_deref().filter(|r| !r.is_empty())
    }
}

/// Where the member is in its reconciliation;
/// ConsumerGroupCurrentMemberAssignmentValue.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CurrentAssignment {
    pub epoch: i32,
    /// The epoch before the last bump: a member whose answer was lost may
    /// still heartbeat with it.
    pub previous_epoch: i32,
    pub state: MemberState,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
}

impl CurrentAssignment {
    pub fn is_reconciled_to(&self, target_epoch: i32) -> bool {
        self.epoch == target_epoch && self.state == MemberState::Stable
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerMember {
    pub id: String,
    pub sub: MemberSubscription,
    pub current: CurrentAssignment,
}

impl ConsumerMember {
    pub fn new(id: &str) -> Self {
        Self {
            id: id.to_string(),
            ..Self::default()
        }
    }

    pub fn uses_classic_protocol(&self) -> bool {
        self.sub.classic.is_some()
    }

    /// Its session timeout: its own for a classic member, the group's
    /// for consumer-protocol members.
    pub fn session_timeout_ms(&self, group_session_timeout_ms: i32) -> i32 {
        self.sub
            .classic
            .as_ref()
            .map_or(group_session_timeout_ms, |c| c.session_timeout_ms)
    }
}

/// Whether every partition in `owned` is in `assignment` (a member coming
/// back with its previous epoch must own no more than it is assigned).
pub fn is_subset(owned: Option<&Assignment>, assignment: &Assignment) -> bool {
    let Some(owned) = owned else {
        return false;
    };
    owned.iter().all(|(topic, partitions)| {
        assignment
            .get(topic)
            .is_some_and(|assigned| partitions.is_subset(assigned))
    })
}

/// Whether `owned` (None: not reported) may still hold any of `partitions`.
pub fn owns_any(owned: Option<&Assignment>, partitions: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(topic, ps)| {
        partitions
            .get(topic)
            .is_some_and(|pending| !ps.is_disjoint(pending))
    })
}
