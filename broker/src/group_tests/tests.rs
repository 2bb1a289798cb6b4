//! End-to-end tests of the group coordinator through its request handlers,
//! on a real broker in a temporary directory.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::apis::group::*;
use crate::apis::test_support::{assert_encodes, create_topic, test_settings};
use crate::broker::Broker;
use crate::replica::now_ms;
use ottla_group_coordinator::codec::Writer;
use ottla_protocol::java_hash::java_string_hash;

pub(super) const NONE: i16 = 0;
const LISTENER: &str = "PLAINTEXT";

pub(super) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

pub(super) fn gid(v: &str) -> GroupId {
    GroupId(s(v))
}

pub(super) fn localhost() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}

/// A running broker: opened with a 0 ms initial rebalance delay and 5
/// offsets partitions, with its background loop (which drives group
/// timers and hosts new partitions).
pub(super) struct Running {
    pub(super) broker: Arc<Broker>,
    stop: watch::Sender<bool>,
    background: JoinHandle<()>,
}

impl Running {
    /// `topics` are created before the background loop starts, so that
    /// two image applications never race.
    pub(super) async fn start(dir: &Path, topics: &[(&str, i32)]) -> Self {
        Self::start_with(dir, topics, &[]).await
    }

    /// As `start`, with more broker configs.
    pub(super) async fn start_with(
        dir: &Path,
        topics: &[(&str, i32)],
        configs: &[(&str, &str)],
    ) -> Self {
        let mut settings = test_settings(dir);
        // Joins sent back to back land in the same first generation.
        let defaults = [
            ("group.initial.rebalance.delay.ms", "100"),
            ("offsets.topic.num.partitions", "5"),
        ];
        for (k, v) in defaults.iter().chain(configs) {
            settings.static_configs.insert(k.to_string(), v.to_string());
        }
        let broker = crate::apis::test_support::open_broker(settings).expect("opening the broker");
        for &(name, partitions) in topics {
            create_topic(&broker, name, partitions);
        }
        let (stop, rx) = watch::channel(false);
        let background = tokio::spawn(
            broker
                .clone()
                .run_background(rx, crate::handlers::background_jobs()),
        );
        // The loop follows image changes made after its first poll only:
        // let it start before anything changes.
        tokio::time::sleep(Duration::from_millis(10)).await;
        Self {
            broker,
            stop,
            background,
        }
    }

    pub(super) async fn shutdown(self) {
        self.stop.send_replace(true);
        self.background.await.unwrap();
        self.broker.shutdown().unwrap();
    }
}

/// FindCoordinator until the offsets topic exists and the group's shard is
/// loaded (the first lookup creates the topic).
pub(super) async fn coordinator_ready(broker: &Broker, group: &str) {
    for _ in 0..250 {
        let r = find_coordinator(
            broker,
            3,
            LISTENER,
            FindCoordinatorRequest::default().with_key(s(group)),
        );
        if r.error_code == NONE && broker.groups.shard_blocking(group).is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the coordinator of {group} never became ready");
}

/// ConsumerProtocolSubscription v0 for `topics`.
fn subscription(topics: &[&str]) -> Bytes {
    let mut w = Writer::default();
    w.i16(0).i32(topics.len() as i32);
    for t in topics {
        w.string(t);
    }
    w.i32(-1);
    Bytes::from(w.finish().unwrap())
}

pub(super) fn join_request(
    group: &str,
    member_id: &str,
    instance: Option<&str>,
    topics: &[&str],
) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(gid(group))
        .with_member_id(s(member_id))
        .with_group_instance_id(instance.map(s))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(5_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(s("range"))
                .with_metadata(subscription(topics)),
            JoinGroupRequestProtocol::default()
                .with_name(s("roundrobin"))
                .with_metadata(subscription(topics)),
        ])
}

pub(super) fn spawn_join(
    broker: &Arc<Broker>,
    version: i16,
    req: JoinGroupRequest,
) -> JoinHandle<JoinGroupResponse> {
    let broker = broker.clone();
    tokio::spawn(async move {
        let r = join_group(&broker, version, "client", localhost(), req).await;
        assert_encodes(&r, version);
        r
    })
}

pub(super) fn spawn_sync(
    broker: &Arc<Broker>,
    version: i16,
    req: SyncGroupRequest,
) -> JoinHandle<SyncGroupResponse> {
    let broker = broker.clone();
    tokio::spawn(async move {
        let r = sync_group(&broker, version, req).await;
        assert_encodes(&r, version);
        r
    })
}

/// A dynamic member's two-step join (v4+): MEMBER_ID_REQUIRED, then the
/// real join, which parks until the rebalance completes.
pub(super) async fn join_dynamic(
    broker: &Arc<Broker>,
    group: &str,
    topics: &[&str],
) -> JoinHandle<JoinGroupResponse> {
    let first = join_group(
        broker,
        9,
        "client",
        localhost(),
        join_request(group, "", None, topics),
    )
    .await;
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    assert!(first.member_id.starts_with("client-"));
    spawn_join(
        broker,
        9,
        join_request(group, &first.member_id, None, topics),
    )
}

pub(super) fn sync_request(
    group: &str,
    generation: i32,
    member: &str,
    assignments: &[(&str, &[u8])],
) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(gid(group))
        .with_generation_id(generation)
        .with_member_id(s(member))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(Bytes::copy_from_slice(a))
                })
                .collect(),
        )
}

pub(super) async fn beat(broker: &Broker, group: &str, member: &str, generation: i32) -> i16 {
    let req = HeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_member_id(s(member))
        .with_generation_id(generation);
    let r = heartbeat(broker, 4, req).await;
    assert_encodes(&r, 4);
    r.error_code
}

pub(super) async fn describe(
    broker: &Broker,
    version: i16,
    group: &str,
) -> describe_groups_response::DescribedGroup {
    let req = DescribeGroupsRequest::default()
        .with_groups(vec![gid(group)])
        .with_include_authorized_operations(version >= 3);
    let r = describe_groups(broker, version, req).await;
    assert_encodes(&r, version);
    r.groups.into_iter().next().unwrap()
}

/// With group.initial.rebalance.delay.ms=0 the first member's join
/// completes as it arrives, as in Kafka, not at the coordinator's next
/// tick: a second member arriving right after starts the next generation.
#[tokio::test]
async fn with_no_initial_delay_the_first_join_completes_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start_with(
        dir.path(),
        &[],
        &[("group.initial.rebalance.delay.ms", "0")],
    )
    .await;
    let broker = run.broker.clone();
    let group = "g-no-delay";
    coordinator_ready(&broker, group).await;

    let first = join_dynamic(&broker, group, &["t"]).await;
    let second = join_dynamic(&broker, group, &["t"]).await;
    let a = first.await.unwrap();
    assert_eq!((a.error_code, a.generation_id), (NONE, 1));
    assert_eq!(a.members.len(), 1, "the second member came after the join");
    // The second member's arrival rebalanced the group; the first rejoins.
    assert_eq!(
        beat(&broker, group, &a.member_id, 1).await,
        ResponseError::RebalanceInProgress.code()
    );
    let rejoined = spawn_join(&broker, 9, join_request(group, &a.member_id, None, &["t"]));
    let (a, b) = (rejoined.await.unwrap(), second.await.unwrap());
    assert_eq!((a.generation_id, b.generation_id), (2, 2));
    assert_eq!(a.members.len(), 2);
    run.shutdown().await;
}

/// Two members form a group, get the leader's assignment, heartbeat; one
/// leaves and the other rebalances alone.
#[tokio::test]
async fn two_members_join_sync_heartbeat_and_one_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start(dir.path(), &[]).await;
    let broker = run.broker.clone();
    let group = "g-lifecycle";
    coordinator_ready(&broker, group).await;

    // Both joins come within the initial delay: the first one parked
    // leads.
    let first = join_dynamic(&broker, group, &["t"]).await;
    let second = join_dynamic(&broker, group, &["t"]).await;
    let (a, b) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!((a.error_code, b.error_code), (NONE, NONE));
    assert_eq!((a.generation_id, b.generation_id), (1, 1));
    assert_eq!(a.leader, a.member_id);
    assert_eq!(b.leader, a.member_id);
    assert_eq!(a.protocol_name.as_deref(), Some("range"));
    assert_eq!(a.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(a.members.len(), 2, "the leader gets every member");
    assert!(b.members.is_empty());
    assert!(a.members.iter().all(|m| m.metadata == subscription(&["t"])));

    // The follower's SyncGroup waits for the leader's assignment.
    let follower_sync = spawn_sync(&broker, 5, sync_request(group, 1, &b.member_id, &[]));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!follower_sync.is_finished());
    let assignments: [(&str, &[u8]); 2] = [(&a.member_id, b"for-a"), (&b.member_id, b"for-b")];
    let leader_sync = spawn_sync(
        &broker,
        5,
        sync_request(group, 1, &a.member_id, &assignments),
    )
    .await
    .unwrap();
    assert_eq!(leader_sync.error_code, NONE);
    assert_eq!(&leader_sync.assignment[..], b"for-a");
    assert_eq!(leader_sync.protocol_name.as_deref(), Some("range"));
    let follower_sync = follower_sync.await.unwrap();
    assert_eq!(&follower_sync.assignment[..], b"for-b");
    assert_eq!(
        describe(&broker, 5, group).await.group_state.as_str(),
        "Stable"
    );

    assert_eq!(beat(&broker, group, &a.member_id, 1).await, NONE);
    assert_eq!(beat(&broker, group, &b.member_id, 1).await, NONE);
    assert_eq!(
        beat(&broker, group, &b.member_id, 7).await,
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(
        beat(&broker, group, "stranger", 1).await,
        ResponseError::UnknownMemberId.code()
    );

    // The follower leaves (batched LeaveGroup, v3+).
    let leave = LeaveGroupRequest::default()
        .with_group_id(gid(group))
        .with_members(vec![
            MemberIdentity::default().with_member_id(b.member_id.clone())
        ]);
    let left = leave_group(&broker, 5, leave).await;
    assert_encodes(&left, 5);
    assert_eq!(left.members.len(), 1);
    assert_eq!(left.members[0].error_code, NONE);
    assert_eq!(
        describe(&broker, 5, group).await.group_state.as_str(),
        "PreparingRebalance"
    );
    assert_eq!(
        beat(&broker, group, &a.member_id, 1).await,
        ResponseError::RebalanceInProgress.code()
    );

    // The leader rejoins; being the only member, the rebalance completes.
    let rejoin = spawn_join(&broker, 9, join_request(group, &a.member_id, None, &["t"]))
        .await
        .unwrap();
    assert_eq!(rejoin.error_code, NONE);
    assert_eq!(rejoin.generation_id, 2);
    assert_eq!(rejoin.members.len(), 1);
    let synced = spawn_sync(
        &broker,
        5,
        sync_request(group, 2, &a.member_id, &[(&a.member_id, b"all")]),
    )
    .await
    .unwrap();
    assert_eq!(&synced.assignment[..], b"all");
    let d = describe(&broker, 5, group).await;
    assert_eq!(d.group_state.as_str(), "Stable");
    assert_eq!(d.protocol_data.as_str(), "range");
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].client_host.as_str(), "/127.0.0.1");
    assert_eq!(&d.members[0].member_assignment[..], b"all");
    assert_eq!(d.members[0].member_metadata, subscription(&["t"]));
    run.shutdown().await;
}

/// Joins one dynamic member to `group` and syncs it (generation 1);
/// returns its member id.
async fn one_synced_member(broker: &Arc<Broker>, group: &str) -> String {
    coordinator_ready(broker, group).await;
    let joined = join_dynamic(broker, group, &["t"]).await.await.unwrap();
    let synced = spawn_sync(
        broker,
        5,
        sync_request(group, 1, &joined.member_id, &[(&joined.member_id, b"x")]),
    )
    .await
    .unwrap();
    assert_eq!(synced.error_code, NONE);
    joined.member_id.to_string()
}

/// A member whose session runs out is removed, and the emptied group is
/// stored as Empty with a new generation.
#[tokio::test]
async fn expired_session_removes_the_member() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start(dir.path(), &[]).await;
    let broker = run.broker.clone();
    let group = "g-expiry";
    let member_id = one_synced_member(&broker, group).await;

    // Ten seconds of silence (the session timeout) later.
    broker.groups.tick(now_ms() + 10_001);
    let d = describe(&broker, 5, group).await;
    assert_eq!(d.group_state.as_str(), "Empty");
    assert!(d.members.is_empty());
    assert_eq!(
        beat(&broker, group, &member_id, 1).await,
        ResponseError::UnknownMemberId.code()
    );
    run.shutdown().await;
}

/// DeleteGroups just after a member's session ended, before the
/// coordinator's next tick, finds the group empty (issue 26 defect 4).
#[tokio::test]
async fn deleting_a_group_just_after_its_last_session_ended_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start(dir.path(), &[]).await;
    let broker = run.broker.clone();
    let group = "g-delete-on-time";
    one_synced_member(&broker, group).await;
    let shard = broker.groups.shard(group).unwrap();
    let image = broker.controller.image();
    let ids = [group.to_string()];
    assert_eq!(
        shard.delete_groups(&ids, now_ms(), &image),
        [ResponseError::NonEmptyGroup.code()],
        "the member's session runs"
    );
    // The session timeout (ten seconds) has just passed; no tick ran.
    assert_eq!(shard.delete_groups(&ids, now_ms() + 10_001, &image), [NONE]);
    run.shutdown().await;
}

/// A static member that restarts takes over its membership under a new
/// member id without a rebalance; the old id is fenced.
#[tokio::test]
async fn static_member_rejoins_without_rebalance() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start(dir.path(), &[]).await;
    let broker = run.broker.clone();
    let group = "g-static";
    coordinator_ready(&broker, group).await;
    let first = spawn_join(
        &broker,
        5,
        join_request(group, "", Some("instance-1"), &["t"]),
    )
    .await
    .unwrap();
    assert_eq!(first.error_code, NONE);
    assert!(first.member_id.starts_with("instance-1-"));
    let synced = spawn_sync(
        &broker,
        3,
        sync_request(group, 1, &first.member_id, &[(&first.member_id, b"p0")]),
    )
    .await
    .unwrap();
    assert_eq!(synced.error_code, NONE);

    let again = spawn_join(
        &broker,
        9,
        join_request(group, "", Some("instance-1"), &["t"]),
    )
    .await
    .unwrap();
    assert_eq!(again.error_code, NONE);
    assert_ne!(again.member_id, first.member_id);
    assert_eq!(again.generation_id, 1, "no rebalance");
    assert!(
        again.skip_assignment,
        "the leader keeps the current assignment"
    );
    assert_eq!(
        describe(&broker, 5, group).await.group_state.as_str(),
        "Stable"
    );
    let req = HeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_member_id(first.member_id.clone())
        .with_group_instance_id(Some(s("instance-1")))
        .with_generation_id(1);
    assert_eq!(
        heartbeat(&broker, 3, req).await.error_code,
        ResponseError::FencedInstanceId.code()
    );
    // Its assignment moved with it.
    let synced = spawn_sync(&broker, 5, sync_request(group, 1, &again.member_id, &[]))
        .await
        .unwrap();
    assert_eq!(&synced.assignment[..], b"p0");
    run.shutdown().await;
}

pub(super) fn commit_request(group: &str, topics: &[(&str, &[(i32, i64)])]) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(
            topics
                .iter()
                .map(|(t, ps)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(
                            ps.iter()
                                .map(|&(p, o)| {
                                    OffsetCommitRequestPartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(o)
                                        .with_committed_metadata(Some(s("meta")))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

pub(super) async fn fetch_v8(
    broker: &Broker,
    group: &str,
    topics: Option<&[(&str, &[i32])]>,
) -> Vec<(String, i32, i64, String)> {
    let topics = topics.map(|ts| {
        ts.iter()
            .map(|(t, ps)| {
                OffsetFetchRequestTopics::default()
                    .with_name(TopicName(s(t)))
                    .with_partition_indexes(ps.to_vec())
            })
            .collect()
    });
    let req = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(gid(group))
        .with_topics(topics)]);
    let r = offset_fetch(broker, 8, req).await;
    assert_encodes(&r, 8);
    let g = &r.groups[0];
    assert_eq!(g.error_code, NONE);
    g.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.metadata.as_deref().unwrap_or_default().to_string(),
                )
            })
        })
        .collect()
}

/// Simple (generation -1) commits and a stable group are stored in
/// `__consumer_offsets` and read back after the broker restarts.
#[tokio::test]
async fn offsets_and_groups_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let group = "g-offsets";
    let stable = "g-stable";
    let run = Running::start(dir.path(), &[("t", 3)]).await;
    let broker = run.broker.clone();
    coordinator_ready(&broker, group).await;
    coordinator_ready(&broker, stable).await;
    let member = join_dynamic(&broker, stable, &["t"]).await.await.unwrap();
    let assignment: [(&str, &[u8]); 1] = [(&member.member_id, b"mine")];
    spawn_sync(
        &broker,
        5,
        sync_request(stable, 1, &member.member_id, &assignment),
    )
    .await
    .unwrap();

    let req = commit_request(
        group,
        &[("t", &[(0, 10), (1, 20), (7, 1)]), ("nope", &[(0, 5)])],
    );
    let r = offset_commit(&broker, 8, req).await;
    assert_encodes(&r, 8);
    let codes: Vec<(String, i32, i16)> = r
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        codes,
        [
            ("t".into(), 0, NONE),
            ("t".into(), 1, NONE),
            ("t".into(), 7, unknown),
            ("nope".into(), 0, unknown)
        ]
    );

    let expected = vec![
        ("t".to_string(), 0, 10, "meta".to_string()),
        ("t".to_string(), 1, 20, "meta".to_string()),
    ];
    assert_eq!(fetch_v8(&broker, group, None).await, expected);
    drop(broker);
    run.shutdown().await;

    let run = Running::start(dir.path(), &[]).await;
    let broker = run.broker.clone();
    assert_eq!(fetch_v8(&broker, group, None).await, expected);
    // The stable group is back with its member, which keeps heartbeating.
    let d = describe(&broker, 5, stable).await;
    assert_eq!(
        (d.group_state.as_str(), d.protocol_data.as_str()),
        ("Stable", "range")
    );
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].member_id, member.member_id);
    assert_eq!(&d.members[0].member_assignment[..], b"mine");
    assert_eq!(beat(&broker, stable, &member.member_id, 1).await, NONE);
    let some = fetch_v8(&broker, group, Some(&[("t", &[1, 2])])).await;
    assert_eq!(
        some,
        [
            ("t".to_string(), 1, 20, "meta".to_string()),
            ("t".to_string(), 2, -1, String::new())
        ]
    );
    // v1: one group, named partitions; v5 adds the leader epoch.
    for version in [1, 5, 7] {
        let req = OffsetFetchRequest::default()
            .with_group_id(gid(group))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partition_indexes(vec![0])]));
        let r = offset_fetch(&broker, version, req).await;
        assert_encodes(&r, version);
        assert_eq!(r.topics[0].partitions[0].committed_offset, 10);
    }
    // The group is a "simple" group: Empty, without protocol type.
    let listed = list_groups(&broker, 5, ListGroupsRequest::default()).await;
    assert_encodes(&listed, 5);
    let g = listed
        .groups
        .iter()
        .find(|g| g.group_id.as_str() == group)
        .expect("listed");
    assert_eq!(
        (
            g.group_state.as_str(),
            g.protocol_type.as_str(),
            g.group_type.as_str()
        ),
        ("Empty", "", "classic")
    );
    drop(broker);
    run.shutdown().await;
}

/// Describe, list and delete groups; OffsetDelete refuses topics a
/// consumer group subscribes to.
#[tokio::test]
async fn describe_list_and_delete_groups() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start(dir.path(), &[("t", 1), ("u", 1)]).await;
    let broker = run.broker.clone();
    let group = "g-admin";
    coordinator_ready(&broker, group).await;
    let m = join_dynamic(&broker, group, &["t"]).await.await.unwrap();
    spawn_sync(
        &broker,
        5,
        sync_request(group, 1, &m.member_id, &[(&m.member_id, b"a")]),
    )
    .await
    .unwrap();
    // A member commits with its generation.
    let mut req = commit_request(group, &[("t", &[(0, 3)]), ("u", &[(0, 4)])]);
    req.generation_id_or_member_epoch = 1;
    req.member_id = m.member_id.clone();
    let r = offset_commit(&broker, 9, req.clone()).await;
    assert!(r.topics.iter().all(|t| t.partitions[0].error_code == NONE));
    req.generation_id_or_member_epoch = 5;
    let r = offset_commit(&broker, 9, req).await;
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        ResponseError::IllegalGeneration.code()
    );

    let d = describe(&broker, 5, group).await;
    assert_eq!(
        (d.error_code, d.protocol_type.as_str(), d.members.len()),
        (NONE, "consumer", 1)
    );
    assert_ne!(d.authorized_operations, i32::MIN);
    let missing = describe(&broker, 5, "no-such-group").await;
    assert_eq!(
        (missing.error_code, missing.group_state.as_str()),
        (NONE, "Dead")
    );
    let missing = describe(&broker, 6, "no-such-group").await;
    assert_eq!(missing.error_code, ResponseError::GroupIdNotFound.code());

    let filter = |states: &[&str]| {
        ListGroupsRequest::default().with_states_filter(states.iter().map(|x| s(x)).collect())
    };
    let stable = list_groups(&broker, 4, filter(&["stable"])).await;
    assert_encodes(&stable, 4);
    assert!(stable.groups.iter().any(|g| g.group_id.as_str() == group));
    let empty = list_groups(&broker, 4, filter(&["Empty"])).await;
    assert!(empty.groups.iter().all(|g| g.group_id.as_str() != group));
    let consumer_type = list_groups(
        &broker,
        5,
        ListGroupsRequest::default().with_types_filter(vec![s("consumer")]),
    )
    .await;
    assert!(
        consumer_type.groups.is_empty(),
        "classic groups are not of type consumer"
    );

    let offset_delete_req = OffsetDeleteRequest::default()
        .with_group_id(gid(group))
        .with_topics(
            ["t", "u"]
                .iter()
                .map(|t| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(vec![
                            OffsetDeleteRequestPartition::default().with_partition_index(0)
                        ])
                })
                .collect(),
        );
    let deleted = offset_delete(&broker, 0, offset_delete_req).await;
    assert_encodes(&deleted, 0);
    assert_eq!(deleted.error_code, NONE);
    assert_eq!(
        deleted.topics[0].partitions[0].error_code,
        ResponseError::GroupSubscribedToTopic.code()
    );
    assert_eq!(deleted.topics[1].partitions[0].error_code, NONE);
    assert_eq!(
        fetch_v8(&broker, group, None).await,
        [("t".to_string(), 0, 3, "meta".to_string())]
    );

    let delete = |ids: &[&str]| {
        DeleteGroupsRequest::default().with_groups_names(ids.iter().map(|i| gid(i)).collect())
    };
    let r = delete_groups(&broker, 2, delete(&[group, "no-such-group"])).await;
    assert_encodes(&r, 2);
    let codes: Vec<i16> = r.results.iter().map(|g| g.error_code).collect();
    assert_eq!(
        codes,
        [
            ResponseError::NonEmptyGroup.code(),
            ResponseError::GroupIdNotFound.code()
        ]
    );

    let leave = LeaveGroupRequest::default()
        .with_group_id(gid(group))
        .with_member_id(m.member_id.clone());
    let left = leave_group(&broker, 0, leave).await;
    assert_encodes(&left, 0);
    assert_eq!(left.error_code, NONE);
    assert_eq!(
        describe(&broker, 5, group).await.group_state.as_str(),
        "Empty"
    );
    let r = delete_groups(&broker, 0, delete(&[group])).await;
    assert_encodes(&r, 0);
    assert_eq!(r.results[0].error_code, NONE);
    assert_eq!(
        describe(&broker, 5, group).await.group_state.as_str(),
        "Dead"
    );
    assert!(fetch_v8(&broker, group, None).await.is_empty());
    run.shutdown().await;
}

/// FindCoordinator names this node for groups, in every version's shape.
/// Offset retention, with the clock moved on: simple commits expire by
/// commit time and take their group along; a stable consumer group keeps
/// the offsets of topics it subscribes to and loses the others; once
/// empty, its offsets expire a retention period after it emptied (not
/// after the commit), and the group goes.
#[tokio::test]
async fn offsets_expire_after_the_retention_and_empty_groups_go() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start(dir.path(), &[("t", 1), ("u", 1)]).await;
    let broker = run.broker.clone();
    let retention = broker.groups.config().offsets_retention_ms;
    let (simple, stable) = ("g-simple", "g-retained");
    coordinator_ready(&broker, simple).await;
    coordinator_ready(&broker, stable).await;
    let committed = now_ms();
    let r = offset_commit(&broker, 9, commit_request(simple, &[("t", &[(0, 5)])])).await;
    assert_eq!(r.topics[0].partitions[0].error_code, NONE);
    let m = join_dynamic(&broker, stable, &["t"]).await.await.unwrap();
    spawn_sync(
        &broker,
        5,
        sync_request(stable, 1, &m.member_id, &[(&m.member_id, b"a")]),
    )
    .await
    .unwrap();
    let mut req = commit_request(stable, &[("t", &[(0, 3)]), ("u", &[(0, 4)])]);
    req.generation_id_or_member_epoch = 1;
    req.member_id = m.member_id.clone();
    let r = offset_commit(&broker, 9, req).await;
    assert!(r.topics.iter().all(|t| t.partitions[0].error_code == NONE));
    let expire_at = |now: i64| {
        for group in [simple, stable] {
            broker
                .groups
                .shard(group)
                .unwrap()
                .expire_offsets(retention, now);
        }
    };

    expire_at(committed + retention - 60_000);
    assert_eq!(fetch_v8(&broker, simple, None).await.len(), 1);
    assert_eq!(fetch_v8(&broker, stable, None).await.len(), 2);

    expire_at(now_ms() + retention + 100);
    assert!(fetch_v8(&broker, simple, None).await.is_empty());
    assert_eq!(
        describe(&broker, 5, simple).await.group_state.as_str(),
        "Dead"
    );
    assert_eq!(
        fetch_v8(&broker, stable, None).await,
        vec![("t".to_string(), 0, 3, "meta".to_string())],
        "the subscribed topic's offset stays"
    );

    // Far enough from the commit that commit-based expiry would tell, with
    // margins that a slow machine cannot eat.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    let leave = LeaveGroupRequest::default()
        .with_group_id(gid(stable))
        .with_member_id(m.member_id.clone());
    assert_eq!(leave_group(&broker, 0, leave).await.error_code, NONE);
    let emptied = now_ms();
    expire_at(emptied + retention - 1500);
    assert_eq!(fetch_v8(&broker, stable, None).await.len(), 1);
    assert_eq!(
        describe(&broker, 5, stable).await.group_state.as_str(),
        "Empty"
    );
    expire_at(emptied + retention + 500);
    assert!(fetch_v8(&broker, stable, None).await.is_empty());
    assert_eq!(
        describe(&broker, 5, stable).await.group_state.as_str(),
        "Dead"
    );

    // Both stay gone after a restart: the tombstones are in the log.
    run.shutdown().await;
    let run = Running::start(dir.path(), &[]).await;
    coordinator_ready(&run.broker, stable).await;
    assert!(fetch_v8(&run.broker, stable, None).await.is_empty());
    assert!(fetch_v8(&run.broker, simple, None).await.is_empty());
    assert_eq!(
        describe(&run.broker, 5, stable).await.group_state.as_str(),
        "Dead"
    );
    run.shutdown().await;
}

/// A deleted topic's committed offsets go (Kafka's onPartitionsDeleted):
/// a topic created again under its name starts with none, where a consumer
/// would otherwise resume at an offset of the old log. The other topics'
/// offsets stay, and the tombstones outlive a restart.
#[tokio::test]
async fn a_deleted_topics_committed_offsets_go_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start(dir.path(), &[("t", 2), ("u", 1)]).await;
    let broker = run.broker.clone();
    let group = "g-deleted";
    coordinator_ready(&broker, group).await;
    let commit = commit_request(group, &[("t", &[(0, 5), (1, 6)]), ("u", &[(0, 7)])]);
    let r = offset_commit(&broker, 9, commit).await;
    assert!(r
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .all(|p| p.error_code == NONE));
    assert_eq!(fetch_v8(&broker, group, None).await.len(), 3);

    let deleted = broker.controller.delete_topics(&["t".to_string()]).await;
    assert!(deleted[0].1.is_ok(), "{deleted:?}");
    let start = std::time::Instant::now();
    while fetch_v8(&broker, group, None).await.len() != 1 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the deleted topic's offsets stayed: {:?}",
            fetch_v8(&broker, group, None).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        fetch_v8(&broker, group, None).await,
        vec![("u".to_string(), 0, 7, "meta".to_string())]
    );

    run.shutdown().await;
    let run = Running::start(dir.path(), &[]).await;
    coordinator_ready(&run.broker, group).await;
    assert_eq!(fetch_v8(&run.broker, group, None).await.len(), 1);
    run.shutdown().await;
}

/// At shutdown the coordinator answers a member waiting in a rebalance
/// with NOT_COORDINATOR at once (as Kafka's unload does) rather than
/// holding the shutdown up until the rebalance times out, and refuses
/// later requests the same way.
#[tokio::test]
async fn closing_the_coordinator_answers_waiting_joins_not_coordinator() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start(dir.path(), &[("t", 2)]).await;
    let broker = run.broker.clone();
    let group = "g-closing";
    coordinator_ready(&broker, group).await;
    let first = join_dynamic(&broker, group, &["t"]).await.await.unwrap();
    spawn_sync(
        &broker,
        5,
        sync_request(group, 1, &first.member_id, &[(&first.member_id, b"a")]),
    )
    .await
    .unwrap();
    // A second member's join waits for the first to rejoin (up to the
    // 5 s rebalance timeout).
    let waiting = join_dynamic(&broker, group, &["t"]).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished());
    broker.groups.close();
    let answered = tokio::time::timeout(Duration::from_secs(1), waiting)
        .await
        .expect("answered at once")
        .unwrap();
    assert_eq!(answered.error_code, ResponseError::NotCoordinator.code());
    let later = join_group(
        &broker,
        9,
        "client",
        localhost(),
        join_request(group, "", None, &["t"]),
    )
    .await;
    assert_eq!(later.error_code, ResponseError::NotCoordinator.code());
    run.shutdown().await;
}

#[tokio::test]
async fn find_coordinator_returns_this_node() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start(dir.path(), &[]).await;
    let broker = run.broker.clone();
    // The first lookup creates the offsets topic and is told to retry.
    let first = find_coordinator(
        &broker,
        0,
        LISTENER,
        FindCoordinatorRequest::default().with_key(s("g")),
    );
    assert_encodes(&first, 0);
    assert_eq!(
        first.error_code,
        ResponseError::CoordinatorNotAvailable.code()
    );
    coordinator_ready(&broker, "g").await;
    for version in 0..=3 {
        let r = find_coordinator(
            &broker,
            version,
            LISTENER,
            FindCoordinatorRequest::default().with_key(s("g")),
        );
        assert_encodes(&r, version);
        assert_eq!(
            (r.error_code, r.node_id, r.host.as_str(), r.port),
            (NONE, BrokerId(1), "localhost", 9092)
        );
    }
    for version in [4, 6] {
        let req = FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g"), s("h")]);
        let r = find_coordinator(&broker, version, LISTENER, req);
        assert_encodes(&r, version);
        assert_eq!(r.coordinators.len(), 2);
        assert!(r
            .coordinators
            .iter()
            .all(|c| c.error_code == NONE && c.node_id == BrokerId(1) && c.port == 9092));
    }
    let txn = FindCoordinatorRequest::default()
        .with_key_type(1)
        .with_coordinator_keys(vec![s("txn")]);
    let r = find_coordinator(&broker, 4, LISTENER, txn);
    assert_eq!(
        r.coordinators[0].error_code,
        ResponseError::CoordinatorNotAvailable.code()
    );
    let bad = FindCoordinatorRequest::default()
        .with_key_type(7)
        .with_key(s("x"));
    let r = find_coordinator(&broker, 3, LISTENER, bad);
    assert_encodes(&r, 3);
    assert_eq!(
        (r.error_code, r.node_id),
        (ResponseError::InvalidRequest.code(), BrokerId(-1))
    );
    // The topic is compacted, with 5 partitions as configured.
    let image = broker.controller.image();
    let topic = image
        .topic_by_name(ottla_group_coordinator::OFFSETS_TOPIC)
        .unwrap();
    assert_eq!(topic.partitions.len(), 5);
    let configs = image
        .configs_of(
            ottla_controller::records::CONFIG_RESOURCE_TOPIC,
            ottla_group_coordinator::OFFSETS_TOPIC,
        )
        .unwrap();
    assert_eq!(
        configs.get("cleanup.policy").map(String::as_str),
        Some("compact")
    );
    assert_eq!(
        configs.get("segment.bytes").map(String::as_str),
        Some("104857600")
    );
    drop(image);
    run.shutdown().await;
}

/// A group's partition is Kafka's: `Utils.abs(groupId.hashCode()) % 50`.
#[tokio::test]
async fn group_partition_matches_java_hash_code() {
    let dir = tempfile::tempdir().unwrap();
    let broker = crate::apis::test_support::open_broker(test_settings(dir.path())).unwrap();
    let group = "console-consumer-1";
    // Java's formula, spelled out: h = 31 * h + c over UTF-16 units.
    let mut h: i32 = 0;
    for c in group.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(i32::from(c));
    }
    assert_eq!(java_string_hash(group), h);
    let expected = if h == i32::MIN { 0 } else { h.abs() } % 50;
    assert_eq!(broker.groups.partition_for(group), expected);
    broker.shutdown().unwrap();
}

/// Every response, produced by its handler, encodes at the lowest and
/// highest version served.
#[tokio::test]
async fn responses_encode_at_min_and_max_versions() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start(dir.path(), &[("t", 1)]).await;
    let broker = run.broker.clone();
    let group = "g-versions";
    coordinator_ready(&broker, group).await;
    for (key, range) in GROUP_API_VERSIONS {
        assert!(ottla_protocol::api_versions::servable_range(key).min <= range.min);
        assert!(ottla_protocol::api_versions::servable_range(key).max >= range.max);
    }
    for version in [0, 9] {
        let r = if version >= 4 {
            join_dynamic(&broker, group, &["t"]).await
        } else {
            spawn_join(&broker, version, join_request(group, "", None, &["t"]))
        };
        let r = r.await.unwrap();
        assert_eq!(r.error_code, NONE, "v{version}");
        let sync = spawn_sync(
            &broker,
            if version == 0 { 0 } else { 5 },
            sync_request(
                group,
                r.generation_id,
                &r.member_id,
                &[(&r.member_id, b"a")],
            ),
        )
        .await
        .unwrap();
        assert_eq!(sync.error_code, NONE);
        for hb_version in [0, 4] {
            let req = HeartbeatRequest::default()
                .with_group_id(gid(group))
                .with_member_id(r.member_id.clone())
                .with_generation_id(r.generation_id);
            assert_encodes(&heartbeat(&broker, hb_version, req).await, hb_version);
        }
        for v in [2, 9] {
            let mut req = commit_request(group, &[("t", &[(0, 1)])]);
            req.generation_id_or_member_epoch = r.generation_id;
            req.member_id = r.member_id.clone();
            let c = offset_commit(&broker, v, req).await;
            assert_encodes(&c, v);
            assert_eq!(c.topics[0].partitions[0].error_code, NONE);
        }
        for v in [1, 9] {
            let req = if v >= 8 {
                OffsetFetchRequest::default().with_groups(vec![
                    OffsetFetchRequestGroup::default().with_group_id(gid(group))
                ])
            } else {
                OffsetFetchRequest::default()
                    .with_group_id(gid(group))
                    .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s("t")))
                        .with_partition_indexes(vec![0])]))
            };
            assert_encodes(&offset_fetch(&broker, v, req).await, v);
        }
        for v in [0, 5] {
            assert_encodes(
                &list_groups(&broker, v, ListGroupsRequest::default()).await,
                v,
            );
        }
        for v in [0, 6] {
            describe(&broker, v, group).await;
        }
        for v in [0, 2] {
            assert_encodes(
                &delete_groups(
                    &broker,
                    v,
                    DeleteGroupsRequest::default().with_groups_names(vec![gid(group)]),
                )
                .await,
                v,
            );
        }
        assert_encodes(
            &offset_delete(
                &broker,
                0,
                OffsetDeleteRequest::default().with_group_id(gid(group)),
            )
            .await,
            0,
        );
        for v in [0, 6] {
            assert_encodes(
                &find_coordinator(
                    &broker,
                    v,
                    LISTENER,
                    FindCoordinatorRequest::default()
                        .with_key(s(group))
                        .with_coordinator_keys(vec![s(group)]),
                ),
                v,
            );
        }
        let leave = if version == 0 {
            LeaveGroupRequest::default()
                .with_group_id(gid(group))
                .with_member_id(r.member_id.clone())
        } else {
            LeaveGroupRequest::default()
                .with_group_id(gid(group))
                .with_members(vec![
                    MemberIdentity::default().with_member_id(r.member_id.clone())
                ])
        };
        let v = if version == 0 { 0 } else { 5 };
        let left = leave_group(&broker, v, leave).await;
        assert_encodes(&left, v);
    }
    // Error answers encode too.
    let r = spawn_join(&broker, 0, join_request("", "", None, &["t"]))
        .await
        .unwrap();
    assert_eq!(r.error_code, ResponseError::InvalidGroupId.code());
    let r = spawn_sync(&broker, 0, sync_request("", 0, "m", &[]))
        .await
        .unwrap();
    assert_eq!(r.error_code, ResponseError::InvalidGroupId.code());
    drop(broker);
    run.shutdown().await;
}
