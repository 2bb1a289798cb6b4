//! A share partition's state as the share coordinator persists it (Kafka's
//! PersisterStateBatch): runs of offsets with their delivery state and
//! count. Acquired records are persisted as available, so that a new
//! leader delivers them again.

/// The persisted delivery states (Kafka's RecordState ids).
pub const AVAILABLE: i8 = 0;
pub const ACKNOWLEDGED: i8 = 2;
/// Bound for the group's dead-letter queue, not yet written there
/// (KIP-1191): a new leader writes them again.
pub const ARCHIVING: i8 = 3;
pub const ARCHIVED: i8 = 4;

/// Offsets `first_offset..=last_offset` in one delivery state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_state: i8,
    pub delivery_count: i16,
}
