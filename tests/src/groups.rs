//! Consumer-group state read over the wire, from any node of a cluster.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{FindCoordinatorRequest, GroupId, OffsetFetchRequest};
use kafka_protocol::protocol::StrBytes;

use crate::ottla::Ottla;
use crate::wire::WireClient;

/// FindCoordinator's key types.
pub const GROUP_KEY: i8 = 0;
pub const TRANSACTION_KEY: i8 = 1;
/// Share partitions (`group:topic id:partition`), KIP-932: FindCoordinator
/// v6 on.
pub const SHARE_KEY: i8 = 2;

/// The node id coordinating `key` (a group or a transactional id, by
/// `key_type`), asked of `node` until its log exists and has a leader.
pub fn coordinator_of(node: &Ottla, key_type: i8, key: &str) -> i32 {
    let request = FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_coordinator_keys(vec![StrBytes::from_string(key.to_string())]);
    let start = Instant::now();
    loop {
        let version = if key_type == SHARE_KEY { 6 } else { 4 };
        let r = WireClient::connect(&node.bootstrap()).send(version, &request);
        let c = &r.coordinators[0];
        if c.error_code == 0 {
            return c.node_id.0;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no coordinator for {key}: error {}",
            c.error_code
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The group's committed offsets of `topic` (OffsetFetch v8, no member),
/// asked of `coordinator`, the group's coordinator.
pub fn committed(coordinator: &Ottla, group: &str, topic: &str) -> BTreeMap<i32, i64> {
    let req = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(None)]);
    let r = WireClient::connect(&coordinator.bootstrap()).send(8, &req);
    let g = &r.groups[0];
    assert_eq!(g.error_code, 0, "OffsetFetch of {group}");
    g.topics
        .iter()
        .filter(|t| t.name.as_str() == topic)
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.committed_offset))
        .collect()
}
