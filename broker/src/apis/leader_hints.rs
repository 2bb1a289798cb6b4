//! The new-leader hints Kafka adds to NOT_LEADER_OR_FOLLOWER and
//! FENCED_LEADER_EPOCH answers (KIP-951: Produce v10+, Fetch v12+ for the
//! leader, v16+ for endpoints): the partition's current leader and epoch,
//! and that leader's endpoint, so a client retries there at once instead of
//! refreshing its metadata first.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use ottla_controller::MetadataImage;
use uuid::Uuid;

use ottla_coordinator_common::inter_broker::endpoint_of;

/// Whether an answer with this error code carries a leader hint.
pub fn is_leadership_error(code: i16) -> bool {
    code == ResponseError::NotLeaderOrFollower.code()
        || code == ResponseError::FencedLeaderEpoch.code()
}

/// The topic a response entry names: by id in the versions that carry
/// ids only (Produce v13+, Fetch v13+), else by name.
pub fn topic_name(image: &MetadataImage, by_id: bool, name: &str, id: &Uuid) -> Option<String> {
    if by_id {
        image.topic_by_id(id).map(|t| t.name.clone())
    } else {
        Some(name.to_string())
    }
}

/// The partition's leader and leader epoch, if it has a leader.
pub fn current_leader(image: &MetadataImage, topic: &str, partition: i32) -> Option<(i32, i32)> {
    let p = image.topic_by_name(topic)?.partitions.get(&partition)?;
    (p.leader >= 0).then_some((p.leader, p.leader_epoch))
}

pub struct Endpoint {
    pub node_id: i32,
    pub host: String,
    pub port: u16,
    pub rack: Option<String>,
}

/// The endpoints of `leaders` on `listener` (the one the request came in on).
pub fn endpoints(
    image: &MetadataImage,
    leaders: impl IntoIterator<Item = i32>,
    listener: &str,
) -> Vec<Endpoint> {
    let leaders: BTreeSet<i32> = leaders.into_iter().collect();
    leaders
        .into_iter()
        .filter_map(|id| {
            let (host, port) = endpoint_of(image, id, listener)?;
            let rack = image.brokers.get(&id).and_then(|b| b.rack.clone());
            Some(Endpoint {
                node_id: id,
                host,
                port,
                rack,
            })
        })
        .collect()
}
