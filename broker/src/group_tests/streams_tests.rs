//! Streams groups (KIP-1071) through the group coordinator's shards on a
//! real broker: a group's records bring it back whole after a restart, and
//! its id is refused to the other group types.

use std::net::{IpAddr, Ipv4Addr};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use ottla_group_coordinator::{
    ShareHeartbeat, ShareLimits, StreamsGroupSettings, StreamsHeartbeat,
};
use ottla_protocol::streams::heartbeat::StreamsGroupHeartbeatRequest;
use ottla_protocol::streams::{Subtopology, Topology};

use super::consumer_tests::{open, reopen};
use crate::apis::consumer_group::heartbeat as consumer_heartbeat;
use crate::replica::now_ms;

const GROUP: &str = "app";

fn join(member: &str) -> StreamsHeartbeat {
    let topology = Topology {
        epoch: 1,
        subtopologies: vec![Subtopology {
            subtopology_id: "0".into(),
            source_topics: vec!["words".into()],
            ..Default::default()
        }],
        ..Default::default()
    };
    StreamsHeartbeat {
        request: StreamsGroupHeartbeatRequest {
            group_id: GROUP.into(),
            member_id: member.into(),
            rebalance_timeout_ms: 30_000,
            topology: Some(topology),
            active_tasks: Some(Vec::new()),
            standby_tasks: Some(Vec::new()),
            warmup_tasks: Some(Vec::new()),
            process_id: Some("p1".into()),
            ..Default::default()
        },
        api_version: 1,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        // Assigned at once: this test is about the records.
        settings: StreamsGroupSettings {
            initial_rebalance_delay_ms: 0,
            ..Default::default()
        },
    }
}

#[test]
fn a_streams_group_comes_back_from_its_records_and_keeps_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("words", 4)], &[GROUP]);
    let image = broker.controller.image();
    let shard = broker.groups.shard_blocking(GROUP).unwrap();
    let (response, to_create) = shard
        .streams_heartbeat(&join("m1"), &image, now_ms())
        .expect("joined");
    assert!(to_create.is_empty(), "a stateless topology needs no topics");
    let tasks = response.active_tasks.expect("tasks on joining");
    assert_eq!(tasks[0].partitions, [0, 1, 2, 3]);

    // OffsetFetch v9 checks the member and its epoch, as for consumers.
    let epoch = response.member_epoch;
    assert_eq!(
        shard.validate_offset_fetch(GROUP, Some("m1"), epoch),
        Ok(())
    );
    assert_eq!(
        shard.validate_offset_fetch(GROUP, Some("m1"), epoch + 1),
        Err(ResponseError::StaleMemberEpoch)
    );
    assert_eq!(
        shard.validate_offset_fetch(GROUP, Some("nobody"), epoch),
        Err(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        shard.validate_offset_fetch(GROUP, None, -1),
        Ok(()),
        "an admin"
    );

    // ListGroups' state filter takes Kafka's names in any case.
    let listed = |state: &str| shard.list_streams_groups(&[state.to_string()]).len();
    assert_eq!(
        (listed("stable"), listed("Stable"), listed("empty")),
        (1, 1, 0)
    );

    // The id is a streams group's: consumer and share members are refused.
    let consumer = consumer_heartbeat(
        &broker,
        1,
        "client",
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
            .with_member_id(StrBytes::from_static_str("c1"))
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("words"))]))
            .with_topic_partitions(Some(Vec::new())),
    );
    assert_eq!(
        consumer.error_code,
        ResponseError::GroupIdNotFound.code(),
        "{:?}",
        consumer.error_message
    );
    let share = ShareHeartbeat {
        group_id: GROUP.into(),
        member_id: "s1".into(),
        member_epoch: 0,
        rack_id: None,
        topic_names: Some(vec!["words".into()]),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
    };
    let limits = ShareLimits {
        session_timeout_ms: 45_000,
        heartbeat_interval_ms: 5_000,
        max_size: 200,
    };
    assert_eq!(
        shard
            .share_heartbeat(&share, limits, &image, now_ms())
            .unwrap_err(),
        ResponseError::GroupIdNotFound
    );

    // A restart replays the records into the same group.
    let before = shard.describe_streams_group(GROUP).unwrap();
    drop(shard);
    let broker = reopen(broker, dir.path(), &[GROUP]);
    let after = broker
        .groups
        .shard_blocking(GROUP)
        .unwrap()
        .describe_streams_group(GROUP)
        .unwrap();
    assert_eq!(after.epoch(), before.epoch());
    assert_eq!(after.metadata, before.metadata);
    assert_eq!(after.topology, before.topology);
    assert_eq!(after.assignment_epoch, before.assignment_epoch);
    assert_eq!(after.targets, before.targets);
    assert_eq!(after.members["m1"].current, before.members["m1"].current);
    assert_eq!(after.members["m1"].metadata, before.members["m1"].metadata);
    broker.shutdown().unwrap();
}
