//! Share groups (KIP-932) through the group coordinator's shards on a real
//! broker: a group's records bring it back after a restart, sessions start
//! over, and only a join creates a group.

use kafka_protocol::error::ResponseError;
use ottla_group_coordinator::{ShareGroupState, ShareHeartbeat, ShareLimits};

use super::consumer_tests::{open, reopen};
use crate::replica::now_ms;

const GROUP: &str = "queue";

const LIMITS: ShareLimits = ShareLimits {
    session_timeout_ms: 45_000,
    heartbeat_interval_ms: 5_000,
    max_size: 200,
};

fn beat(member: &str, epoch: i32, topics: Option<&[&str]>) -> ShareHeartbeat {
    ShareHeartbeat {
        group_id: GROUP.into(),
        member_id: member.into(),
        member_epoch: epoch,
        rack_id: None,
        topic_names: topics.map(|t| t.iter().map(|s| s.to_string()).collect()),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
    }
}

#[test]
fn a_share_group_comes_back_from_its_records() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("jobs", 4)], &[GROUP]);
    let image = broker.controller.image();
    let shard = broker.groups.shard_blocking(GROUP).unwrap();

    // Neither a leave nor a heartbeat of an unknown member creates a group.
    let left = shard
        .share_heartbeat(&beat("ghost", -1, None), LIMITS, &image, now_ms())
        .unwrap();
    assert_eq!(left.member_epoch, -1);
    assert_eq!(
        shard.share_heartbeat(&beat("ghost", 3, None), LIMITS, &image, now_ms()),
        Err(ResponseError::UnknownMemberId)
    );
    assert!(!shard.is_share_group(GROUP));

    for m in ["a", "b"] {
        shard
            .share_heartbeat(&beat(m, 0, Some(&["jobs"])), LIMITS, &image, now_ms())
            .unwrap();
    }
    let a = shard
        .share_heartbeat(&beat("a", 1, None), LIMITS, &image, now_ms())
        .unwrap();
    assert_eq!(a.member_epoch, 2);
    let before = shard.describe_share_group(GROUP).unwrap();
    assert_eq!(before.state_partitions.len(), 1, "jobs was assigned");
    drop(shard);

    let broker = reopen(broker, dir.path(), &[GROUP]);
    let shard = broker.groups.shard_blocking(GROUP).unwrap();
    let after = shard.describe_share_group(GROUP).unwrap();
    assert_eq!(after.epoch, before.epoch);
    assert_eq!(after.metadata_hash, before.metadata_hash);
    assert_eq!(after.assignment_epoch(), before.assignment_epoch());
    assert_eq!(after.state_partitions, before.state_partitions);
    for (id, m) in &before.members {
        let loaded = &after.members[id];
        assert_eq!(
            (loaded.epoch, &loaded.assignment, &loaded.subscribed),
            (m.epoch, &m.assignment, &m.subscribed)
        );
    }
    // The loaded member carries on at its epoch, with nothing new to learn.
    let a = shard
        .share_heartbeat(&beat("a", 2, None), LIMITS, &image, now_ms())
        .unwrap();
    assert_eq!((a.member_epoch, a.assignment), (2, None));

    // Sessions start over at the load: they end a session timeout later.
    shard.tick(now_ms() + 46_000, &image);
    let expired = shard.describe_share_group(GROUP).unwrap();
    assert_eq!(expired.state(), ShareGroupState::Empty);
    drop(shard);
    let broker = reopen(broker, dir.path(), &[GROUP]);
    let shard = broker.groups.shard_blocking(GROUP).unwrap();
    let reloaded = shard.describe_share_group(GROUP).unwrap();
    assert_eq!(
        reloaded.state(),
        ShareGroupState::Empty,
        "the removals were written"
    );
    assert_eq!(reloaded.state_partitions, before.state_partitions);
    drop(shard);
    broker.shutdown().unwrap();
}
