//! The values of the share-group records in `__consumer_offsets` (Kafka's
//! `ShareGroup*Value.json`, all `"validVersions": "0"`, `"flexibleVersions":
//! "0+"`). The record's `int16` value version precedes these bytes; keys
//! are not flexible and are the group coordinator's.
//!
//! | type | value |
//! |-----:|-------|
//! | 10 | [`ShareGroupMemberMetadataValue`] |
//! | 11 | [`ShareGroupMetadataValue`]: Epoch, MetadataHash |
//! | 12 | [`ShareGroupTargetAssignmentMetadataValue`]: AssignmentEpoch (tag 0, AssignmentTimestamp, kept as read) |
//! | 13 | [`ShareGroupTargetAssignmentMemberValue`] |
//! | 14 | [`ShareGroupCurrentMemberAssignmentValue`] |
//! | 15 | [`ShareGroupStatePartitionMetadataValue`] |

use uuid::Uuid;

wire_struct! {
    pub struct ShareGroupMemberMetadataValue {
        pub rack_id: Option<String>,
        pub client_id: String,
        pub client_host: String,
        pub subscribed_topic_names: Vec<String>,
    }
}

wire_struct! {
    pub struct ShareGroupMetadataValue {
        pub epoch: i32,
        pub metadata_hash: i64,
    }
}

wire_struct! {
    pub struct ShareGroupTargetAssignmentMetadataValue {
        pub assignment_epoch: i32,
    }
}

wire_struct! {
    /// A topic's partitions (types 13 and 14).
    pub struct TopicPartitions {
        pub topic_id: Uuid,
        pub partitions: Vec<i32>,
    }
}

wire_struct! {
    pub struct ShareGroupTargetAssignmentMemberValue {
        pub topic_partitions: Vec<TopicPartitions>,
    }
}

wire_struct! {
    pub struct ShareGroupCurrentMemberAssignmentValue {
        pub member_epoch: i32,
        pub previous_member_epoch: i32,
        /// Kafka's MemberState; a share member is always STABLE (1).
        pub state: i8,
        pub assigned_partitions: Vec<TopicPartitions>,
    }
}

wire_struct! {
    pub struct TopicPartitionsInfo {
        pub topic_id: Uuid,
        pub topic_name: String,
        pub partitions: Vec<i32>,
    }
}

wire_struct! {
    pub struct TopicInfo {
        pub topic_id: Uuid,
        pub topic_name: String,
    }
}

wire_struct! {
    /// The share partitions whose state the share coordinator holds for the
    /// group.
    pub struct ShareGroupStatePartitionMetadataValue {
        pub initializing_topics: Vec<TopicPartitionsInfo>,
        pub initialized_topics: Vec<TopicPartitionsInfo>,
        pub deleting_topics: Vec<TopicInfo>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::testing::{check_round_trip, Arbitrary};
    use proptest::prelude::*;

    round_trips! {
        member_metadata_value: ShareGroupMemberMetadataValue,
        group_metadata_value: ShareGroupMetadataValue,
        target_metadata_value: ShareGroupTargetAssignmentMetadataValue,
        target_member_value: ShareGroupTargetAssignmentMemberValue,
        current_assignment_value: ShareGroupCurrentMemberAssignmentValue,
        state_partitions_value: ShareGroupStatePartitionMetadataValue,
    }
}
