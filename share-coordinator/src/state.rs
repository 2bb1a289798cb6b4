//! A share partition's persisted delivery state, as the share coordinator
//! keeps it and as ReadShareGroupState / WriteShareGroupState carry it.

pub use ottla_share::persisted::StateBatch;
use ottla_share::persisted::{ACKNOWLEDGED, ARCHIVED};
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

impl ShareState {
    /// The records past the start that are done with (acknowledged or
    /// archived): KIP-1226's delivery complete count, which the lag
    /// subtracts.
    pub fn delivery_complete_count(&self) -> i64 {
        self.batches
            .iter()
            .filter(|b| matches!(b.delivery_state, ACKNOWLEDGED | ARCHIVED))
            .map(|b| (b.last_offset - b.first_offset.max(self.start_offset) + 1).max(0))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ottla_share::persisted::{ARCHIVING, AVAILABLE};

    #[test]
    fn the_delivery_complete_count_is_what_is_done_with_past_the_start() {
        let batch = |first, last, delivery_state| StateBatch {
            first_offset: first,
            last_offset: last,
            delivery_state,
            delivery_count: 1,
        };
        let state = ShareState {
            start_offset: 12,
            batches: vec![
                batch(10, 14, ACKNOWLEDGED),
                batch(15, 16, AVAILABLE),
                batch(17, 17, ARCHIVING),
                batch(18, 20, ARCHIVED),
            ],
            ..ShareState::default()
        };
        assert_eq!(state.delivery_complete_count(), 3 + 3);
    }
}
