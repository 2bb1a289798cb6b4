//! Fetch from follower (KIP-392). With `replica.selector.class` set to
//! Kafka's `RackAwareReplicaSelector`, a leader sends a consumer that names
//! its rack (Fetch v11+ `rack_id`) to an in-sync replica in that rack: the
//! partition's answer carries no records, only `preferred_read_replica`.
//! The consumer then fetches from that replica until its metadata is next
//! refreshed, and the replica serves it up to its own high watermark.

use std::time::{Duration, Instant};

use ottla_controller::MetadataImage;

use crate::replica::Partition;

/// A replica a consumer could be sent to.
#[derive(Debug, Clone, Copy)]
pub struct ReplicaView<'a> {
    pub id: i32,
    pub rack: Option<&'a str>,
    pub log_end: i64,
    pub since_caught_up: Duration,
}

/// Kafka's `RackAwareReplicaSelector`: the leader when it is in the
/// client's rack or no replica is; otherwise the most caught-up replica in
/// the client's rack (the largest log end, then the most recently caught
/// up, then the lowest id). `None` means the leader.
pub fn select(
    client_rack: &str,
    leader_rack: Option<&str>,
    followers: &[ReplicaView],
) -> Option<i32> {
    if client_rack.is_empty() || leader_rack == Some(client_rack) {
        return None;
    }
    followers
        .iter()
        .filter(|f| f.rack == Some(client_rack))
        .max_by(|a, b| {
            a.log_end
                .cmp(&b.log_end)
                .then(b.since_caught_up.cmp(&a.since_caught_up))
                .then(b.id.cmp(&a.id))
        })
        .map(|f| f.id)
}

/// Where the leader of `p` (this broker, `node_id`) sends a consumer in
/// `client_rack` that fetches `fetch_offset` through `listener`; `None` to
/// read here. As Kafka, only in-sync followers that already have the offset
/// are candidates; so are only brokers that are registered, unfenced and
/// reachable on the consumer's listener.
pub fn preferred_read_replica(
    p: &Partition,
    node_id: i32,
    image: &MetadataImage,
    listener: &str,
    client_rack: &str,
    fetch_offset: i64,
) -> Option<i32> {
    let state = p.state();
    if state.leader != node_id {
        return None;
    }
    let reachable = |id: i32| {
        image
            .brokers
            .get(&id)
            .filter(|b| !b.fenced && b.endpoints.iter().any(|e| e.listener == listener))
    };
    let leader_rack = image.brokers.get(&node_id).and_then(|b| b.rack.as_deref());
    if fetch_offset < p.log.read().log_start_offset() {
        return None;
    }
    let now = Instant::now();
    let followers = p.followers();
    let candidates: Vec<ReplicaView> = state
        .isr
        .iter()
        .filter(|id| **id != node_id)
        .filter_map(|id| {
            let broker = reachable(*id)?;
            let (log_end, last_caught_up) = followers.caught_up(*id)?;
            (log_end >= fetch_offset).then(|| ReplicaView {
                id: *id,
                rack: broker.rack.as_deref(),
                log_end,
                since_caught_up: now.saturating_duration_since(last_caught_up),
            })
        })
        .collect();
    select(client_rack, leader_rack, &candidates)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(id: i32, rack: &'static str, log_end: i64, since_ms: u64) -> ReplicaView<'static> {
        ReplicaView {
            id,
            rack: Some(rack),
            log_end,
            since_caught_up: Duration::from_millis(since_ms),
        }
    }

    #[test]
    fn a_consumer_reads_in_its_own_rack() {
        let followers = [view(2, "b", 10, 0), view(3, "c", 10, 0)];
        assert_eq!(select("b", Some("a"), &followers), Some(2));
        assert_eq!(select("c", Some("a"), &followers), Some(3));
    }

    #[test]
    fn the_leader_serves_its_rack_and_racks_with_no_replica() {
        let followers = [view(2, "a", 10, 0), view(3, "c", 10, 0)];
        assert_eq!(select("a", Some("a"), &followers), None, "leader in rack");
        assert_eq!(
            select("z", Some("a"), &followers),
            None,
            "no replica in rack"
        );
        assert_eq!(select("", Some("a"), &followers), None, "no rack named");
        assert_eq!(select("c", None, &followers), Some(3));
        let unracked = [ReplicaView {
            rack: None,
            ..view(2, "", 10, 0)
        }];
        assert_eq!(select("c", None, &unracked), None);
    }

    #[test]
    fn the_most_caught_up_replica_of_the_rack_wins() {
        let followers = [
            view(2, "b", 9, 0),
            view(3, "b", 10, 50),
            view(4, "b", 10, 5),
        ];
        assert_eq!(select("b", Some("a"), &followers), Some(4));
        let tied = [view(5, "b", 10, 5), view(4, "b", 10, 5)];
        assert_eq!(select("b", Some("a"), &tied), Some(4), "lowest id on a tie");
    }
}
