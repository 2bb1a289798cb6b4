//! ListOffsets as a consumer asks it (replica id -1): the request for some
//! partitions at one timestamp, and the offsets its answer gives.

use std::collections::BTreeMap;

use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::{BrokerId, ListOffsetsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

/// Version 1: one offset per partition, LATEST the high watermark.
pub const LIST_OFFSETS_VERSION: i16 = 1;
/// The high watermark, as a read_uncommitted consumer sees it.
pub const LATEST_TIMESTAMP: i64 = -1;
/// The log start.
pub const EARLIEST_TIMESTAMP: i64 = -2;

/// ListOffsets for `partitions` (topic, partition) at `timestamp`.
pub fn list_offsets_request(partitions: &[(String, i32)], timestamp: i64) -> ListOffsetsRequest {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, p) in partitions {
        by_topic.entry(topic).or_default().push(*p);
    }
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(
            by_topic
                .into_iter()
                .map(|(topic, ps)| {
                    ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                        .with_partitions(
                            ps.into_iter()
                                .map(|p| {
                                    ListOffsetsPartition::default()
                                        .with_partition_index(p)
                                        .with_timestamp(timestamp)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// The offsets `response` gives, by (topic, partition); partitions it
/// answered with an error or no offset are left out.
pub fn listed_offsets(response: &ListOffsetsResponse) -> Vec<((String, i32), i64)> {
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.error_code == 0 && p.offset >= 0)
                .map(|p| ((t.name.to_string(), p.partition_index), p.offset))
        })
        .collect()
}
