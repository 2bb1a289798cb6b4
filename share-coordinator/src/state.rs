//! A share partition's persisted delivery state, as the share coordinator
//! keeps it and as ReadShareGroupState / WriteShareGroupState carry it.

pub use ottla_share::persisted::StateBatch;
use uuid::Uuid;

/// Which share partition: (share group, topic, partition).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateKey {
    pub group: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

impl StateKey {
    /// Kafka's `SharePartitionKey.asCoordinatorKey()`, whose hash picks the
    /// `__share_group_state` partition.
    pub fn coordinator_key(&self) -> String {
        format!(
            "{}:{}:{}",
            self.group,
            ottla_protocol::names::uuid_text(&self.topic_id),
            self.partition
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShareState {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    /// The share-partition start offset.
    pub start_offset: i64,
    /// The offsets in flight past the start whose state is not plain
    /// "available, never delivered".
    pub batches: Vec<StateBatch>,
}
