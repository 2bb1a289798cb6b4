//! The values of the streams-group records in `__consumer_offsets`
//! (Kafka's `StreamsGroup*Value.json`, all `"validVersions": "0"`,
//! `"flexibleVersions": "0+"`). The record's `int16` value version precedes
//! these bytes; keys are not flexible and are the group coordinator's.
//!
//! | type | value |
//! |-----:|-------|
//! | 17 | [`StreamsGroupMetadataValue`]: Epoch, MetadataHash, tag 0 ValidatedTopologyEpoch |
//! | 19 | [`StreamsGroupMemberMetadataValue`] |
//! | 20 | [`StreamsGroupTargetAssignmentMetadataValue`]: AssignmentEpoch |
//! | 21 | [`Assignment`](super::describe::Assignment): ActiveTasks, StandbyTasks, WarmupTasks |
//! | 22 | [`StreamsGroupCurrentMemberAssignmentValue`] |
//! | 23 | [`Topology`](super::Topology) |

use super::{Endpoint, KeyValue, TaskIds};

/// StreamsGroupMetadataValue's tagged ValidatedTopologyEpoch (default -1).
pub const VALIDATED_TOPOLOGY_EPOCH_TAG: u32 = 0;

wire_struct! {
    pub struct StreamsGroupMetadataValue {
        pub epoch: i32,
        pub metadata_hash: i64,
    }
}

impl StreamsGroupMetadataValue {
    /// The topology epoch the group's topics were last found ready for, or
    /// -1.
    pub fn validated_topology_epoch(&self) -> i32 {
        self.unknown_tagged_fields
            .get_field(VALIDATED_TOPOLOGY_EPOCH_TAG)
            .unwrap_or(-1)
    }

    pub fn set_validated_topology_epoch(&mut self, epoch: i32) {
        let value = (epoch != -1).then_some(&epoch);
        self.unknown_tagged_fields
            .set_field(VALIDATED_TOPOLOGY_EPOCH_TAG, value)
            .expect("an int32 always encodes");
    }
}

wire_struct! {
    pub struct StreamsGroupMemberMetadataValue {
        pub instance_id: Option<String>,
        pub rack_id: Option<String>,
        pub client_id: String,
        pub client_host: String,
        pub rebalance_timeout_ms: i32 = -1,
        pub topology_epoch: i32,
        pub process_id: String,
        pub user_endpoint: Option<Endpoint>,
        pub client_tags: Vec<KeyValue>,
    }
}

wire_struct! {
    pub struct StreamsGroupTargetAssignmentMetadataValue {
        pub assignment_epoch: i32,
    }
}

wire_struct! {
    pub struct StreamsGroupCurrentMemberAssignmentValue {
        pub member_epoch: i32,
        pub previous_member_epoch: i32,
        /// 1 STABLE, 2 UNREVOKED_TASKS, 3 UNRELEASED_TASKS.
        pub state: i8,
        pub active_tasks: Vec<TaskIds>,
        pub standby_tasks: Vec<TaskIds>,
        pub warmup_tasks: Vec<TaskIds>,
        pub active_tasks_pending_revocation: Vec<TaskIds>,
        pub standby_tasks_pending_revocation: Vec<TaskIds>,
        pub warmup_tasks_pending_revocation: Vec<TaskIds>,
    }
}
