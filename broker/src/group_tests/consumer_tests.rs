//! End-to-end tests of the consumer group protocol (KIP-848) through the
//! request handlers, on a real broker in a temporary directory. Members are
//! simulated as Kafka's consumer behaves: they report what they own and
//! give partitions up before acknowledging.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::apis::consumer_group::{describe, heartbeat};
use crate::apis::group::{
    delete_groups, describe_groups, join_group, list_groups, offset_commit, offset_delete,
    offset_fetch,
};
use crate::apis::test_support::{assert_encodes, create_topic, test_settings};
use crate::broker::Broker;
use crate::replica::now_ms;
use ottla_group_coordinator::HeartbeatRequest;

const NONE: i16 = 0;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn gid(v: &str) -> GroupId {
    GroupId(s(v))
}

/// A broker whose coordinator for `groups` is loaded, with `topics`
/// created and small consumer-group timeouts.
pub(super) fn open(dir: &Path, topics: &[(&str, i32)], groups: &[&str]) -> Arc<Broker> {
    let mut settings = test_settings(dir);
    for (k, v) in [
        ("offsets.topic.num.partitions", "3"),
        ("group.consumer.session.timeout.ms", "6000"),
        ("group.consumer.min.session.timeout.ms", "1000"),
        ("group.consumer.heartbeat.interval.ms", "1000"),
        ("group.consumer.min.heartbeat.interval.ms", "500"),
    ] {
        settings.static_configs.insert(k.to_string(), v.to_string());
    }
    let broker = crate::apis::test_support::open_broker(settings).expect("opening the broker");
    for &(name, partitions) in topics {
        create_topic(&broker, name, partitions);
    }
    // The first lookup has the offsets topic created, in the background.
    for g in groups {
        let mut attempts = 0;
        while broker.groups.find(g, "PLAINTEXT").is_err()
            || broker.groups.shard_blocking(g).is_err()
        {
            attempts += 1;
            assert!(attempts < 250, "coordinator of {g} not ready");
            std::thread::sleep(std::time::Duration::from_millis(20));
            broker.replicas.apply_image(&broker.controller.image());
        }
    }
    broker
}

pub(super) fn reopen(broker: Arc<Broker>, dir: &Path, groups: &[&str]) -> Arc<Broker> {
    broker.shutdown().unwrap();
    drop(broker);
    open(dir, &[], groups)
}

fn topic_id(broker: &Broker, topic: &str) -> Uuid {
    broker.controller.image().topic_by_name(topic).unwrap().id
}

type Owned = BTreeMap<Uuid, BTreeSet<i32>>;

/// A consumer-protocol member as Kafka's consumer drives it.
struct Member {
    group: String,
    id: String,
    instance: Option<String>,
    epoch: i32,
    owned: Owned,
    /// Whether the next heartbeat must report `owned` (it changed).
    report: bool,
}

impl Member {
    fn new(group: &str, id: &str) -> Self {
        Self {
            group: group.to_string(),
            id: id.to_string(),
            instance: None,
            epoch: 0,
            owned: Owned::new(),
            report: false,
        }
    }

    fn request(&self) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(gid(&self.group))
            .with_member_id(s(&self.id))
            .with_member_epoch(self.epoch)
            .with_instance_id(self.instance.as_deref().map(s))
    }

    fn join(&mut self, broker: &Broker, topics: &[&str], assignor: Option<&str>) -> i16 {
        let req = self
            .request()
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(topics.iter().map(|t| TopicName(s(t))).collect()))
            .with_server_assignor(assignor.map(s))
            .with_topic_partitions(Some(Vec::new()));
        self.epoch = 0;
        self.owned.clear();
        self.send(broker, 1, req)
    }

    fn beat(&mut self, broker: &Broker) -> i16 {
        let mut req = self.request();
        if self.report {
            req = req.with_topic_partitions(Some(owned_list(&self.owned)));
        }
        self.send(broker, 1, req)
    }

    fn send(&mut self, broker: &Broker, version: i16, req: ConsumerGroupHeartbeatRequest) -> i16 {
        let r = send(broker, version, req);
        self.report = false;
        if r.error_code != NONE {
            return r.error_code;
        }
        self.epoch = r.member_epoch;
        if let Some(a) = r.assignment {
            let assigned: Owned = a
                .topic_partitions
                .into_iter()
                .map(|tp| (tp.topic_id, tp.partitions.into_iter().collect()))
                .collect();
            // Revoke first, then take the new partitions; report either way.
            self.report = assigned != self.owned;
            self.owned = assigned;
        }
        NONE
    }

    fn count(&self) -> usize {
        self.owned.values().map(BTreeSet::len).sum()
    }
}

fn owned_list(owned: &Owned) -> Vec<TopicPartitions> {
    owned
        .iter()
        .map(|(t, ps)| {
            TopicPartitions::default()
                .with_topic_id(*t)
                .with_partitions(ps.iter().copied().collect())
        })
        .collect()
}

fn send(
    broker: &Broker,
    version: i16,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let r = heartbeat(
        broker,
        version,
        "client",
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        req,
    );
    assert_encodes(&r, version);
    r
}

/// Heartbeats every member until the group is stable; checks after each
/// step that no partition has two owners.
fn settle(broker: &Broker, members: &mut [&mut Member]) {
    for _ in 0..20 {
        for i in 0..members.len() {
            let m = &mut members[i];
            assert_eq!(m.beat(broker), NONE, "member {}", m.id);
            let mut seen = BTreeSet::new();
            for o in members.iter() {
                for (t, ps) in &o.owned {
                    for p in ps {
                        assert!(seen.insert((*t, *p)), "{t}-{p} owned twice");
                    }
                }
            }
        }
        let group = &members[0].group;
        if describe_one(broker, 1, group).group_state.as_str() == "Stable"
            && members.iter().all(|m| !m.report)
        {
            return;
        }
    }
    panic!("the group did not stabilize");
}

fn describe_one(
    broker: &Broker,
    version: i16,
    group: &str,
) -> consumer_group_describe_response::DescribedGroup {
    let req = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![gid(group)])
        .with_include_authorized_operations(true);
    let r = describe(broker, version, req);
    assert_encodes(&r, version);
    r.groups.into_iter().next().unwrap()
}

#[test]
fn members_share_partitions_revoking_before_reassigning() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("t", 6)], &["g"]);
    let t = topic_id(&broker, "t");
    let mut a = Member::new("g", "member-a");
    assert_eq!(a.join(&broker, &["t"], None), NONE);
    assert_eq!((a.epoch, a.count()), (1, 6));

    let mut b = Member::new("g", "member-b");
    assert_eq!(b.join(&broker, &["t"], None), NONE);
    // b waits for partitions a still owns; a must give 3 up first.
    assert_eq!((b.epoch, b.count()), (2, 0));
    assert_eq!(a.beat(&broker), NONE);
    assert_eq!((a.epoch, a.count()), (1, 3), "a revokes at its old epoch");
    let d = describe_one(&broker, 1, "g");
    assert_eq!(d.group_state.as_str(), "Reconciling");
    assert_eq!((d.group_epoch, d.assignment_epoch), (2, 2));
    assert_eq!(d.assignor_name.as_str(), "uniform");
    settle(&broker, &mut [&mut a, &mut b]);
    assert_eq!((a.epoch, a.count(), b.epoch, b.count()), (2, 3, 2, 3));
    let all: BTreeSet<i32> = a.owned[&t].union(&b.owned[&t]).copied().collect();
    assert_eq!(all.len(), 6);

    // a leaves: b gets everything at the next epoch.
    let r = send(&broker, 1, a.request().with_member_epoch(-1));
    assert_eq!((r.error_code, r.member_epoch), (NONE, -1));
    settle(&broker, &mut [&mut b]);
    assert_eq!((b.epoch, b.count()), (3, 6));
    let d = describe_one(&broker, 0, "g");
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].member_epoch, 3);
    assert_eq!(
        d.members[0].assignment.topic_partitions[0]
            .topic_name
            .as_str(),
        "t"
    );
    assert_eq!(d.members[0].member_type, -1, "v0 has no member type");
    assert_eq!(describe_one(&broker, 1, "g").members[0].member_type, 1);
}

#[test]
fn epochs_and_member_ids_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("t", 2)], &["g"]);
    let mut a = Member::new("g", "a");
    assert_eq!(a.join(&broker, &["t"], None), NONE);
    let ahead = send(&broker, 1, a.request().with_member_epoch(a.epoch + 1));
    assert_eq!(ahead.error_code, ResponseError::FencedMemberEpoch.code());
    assert!(ahead
        .error_message
        .unwrap()
        .contains("greater member epoch"));
    let stranger = send(
        &broker,
        1,
        Member::new("g", "nobody").request().with_member_epoch(1),
    );
    assert_eq!(stranger.error_code, ResponseError::UnknownMemberId.code());
    let lost = send(
        &broker,
        1,
        Member::new("lost", "x").request().with_member_epoch(3),
    );
    assert_eq!(lost.error_code, ResponseError::GroupIdNotFound.code());
    // Request validation.
    let no_id = send(&broker, 1, Member::new("g", "").request());
    assert_eq!(no_id.error_code, ResponseError::InvalidRequest.code());
    assert_eq!(
        no_id.error_message.as_deref(),
        Some("MemberId can't be empty.")
    );
    let bad_assignor = Member::new("g", "c")
        .request()
        .with_rebalance_timeout_ms(1000)
        .with_subscribed_topic_names(Some(vec![]))
        .with_topic_partitions(Some(vec![]))
        .with_server_assignor(Some(s("sticky")));
    assert_eq!(
        send(&broker, 1, bad_assignor).error_code,
        ResponseError::UnsupportedAssignor.code()
    );
    let bad_regex = Member::new("g", "c")
        .request()
        .with_rebalance_timeout_ms(1000)
        .with_subscribed_topic_regex(Some(s("(")))
        .with_topic_partitions(Some(vec![]));
    assert_eq!(
        send(&broker, 1, bad_regex).error_code,
        ResponseError::InvalidRegularExpression.code()
    );
    // The previous epoch is accepted with a subset of the assignment (the
    // answer that bumped the epoch may have been lost), not with more.
    let mut b = Member::new("g", "b");
    b.join(&broker, &["t"], None);
    a.beat(&broker);
    assert_eq!((a.epoch, a.count()), (1, 1), "a revoked one partition");
    a.beat(&broker);
    assert_eq!(a.epoch, 2);
    let previous = a.request().with_member_epoch(1);
    let r = send(
        &broker,
        1,
        previous
            .clone()
            .with_topic_partitions(Some(owned_list(&a.owned))),
    );
    assert_eq!((r.error_code, r.member_epoch), (NONE, 2));
    let mut more = a.owned.clone();
    more.entry(topic_id(&broker, "t"))
        .or_default()
        .extend([0, 1]);
    let r = send(
        &broker,
        1,
        previous.with_topic_partitions(Some(owned_list(&more))),
    );
    assert_eq!(r.error_code, ResponseError::FencedMemberEpoch.code());
}

#[test]
fn session_expiry_fences_and_the_others_take_over() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("t", 4)], &["g"]);
    let mut a = Member::new("g", "a");
    let mut b = Member::new("g", "b");
    a.join(&broker, &["t"], None);
    b.join(&broker, &["t"], None);
    settle(&broker, &mut [&mut a, &mut b]);
    assert_eq!((a.count(), b.count()), (2, 2));
    // b heartbeats 5 s from now, a stops.
    let now = now_ms();
    let later = HeartbeatRequest {
        group_id: "g".into(),
        member_id: "b".into(),
        member_epoch: b.epoch,
        rebalance_timeout_ms: -1,
        ..HeartbeatRequest::default()
    };
    let shard = broker.groups.shard("g").unwrap();
    shard
        .consumer_heartbeat(&later, &broker.controller.image(), now + 5_000)
        .unwrap();
    broker.groups.tick(now + 6_500);
    assert_eq!(a.beat(&broker), ResponseError::UnknownMemberId.code());
    settle(&broker, &mut [&mut b]);
    assert_eq!(b.count(), 4);
    // The fenced member rejoins with the same id as a new member.
    assert_eq!(a.join(&broker, &["t"], None), NONE);
    settle(&broker, &mut [&mut a, &mut b]);
    assert_eq!((a.count(), b.count()), (2, 2));
}

/// A group's own `consumer.heartbeat.interval.ms` and
/// `consumer.session.timeout.ms` (GROUP config resource, as
/// `kafka-configs.sh --entity-type groups` sets them) are what its members
/// are told and held to; other groups keep the broker's.
#[test]
fn a_groups_config_overrides_its_heartbeat_interval_and_session_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("t", 2)], &["g", "other"]);
    let set = |key: &str, value: &str| {
        AlterConfigsResource::default()
            .with_resource_type(crate::apis::configs::RESOURCE_GROUP)
            .with_resource_name(s("g"))
            .with_configs(vec![AlterableConfig::default()
                .with_name(s(key))
                .with_config_operation(0)
                .with_value(Some(s(value)))])
    };
    let alter = |resources| {
        let req = IncrementalAlterConfigsRequest::default().with_resources(resources);
        crate::apis::configs::incremental::handle(&broker, 1, req).responses[0].clone()
    };
    // Outside the broker's bounds (min 500, max 15000): refused.
    let refused = alter(vec![set("consumer.heartbeat.interval.ms", "20000")]);
    assert_eq!(refused.error_code, ResponseError::InvalidConfig.code());
    assert_eq!(
        refused.error_message.as_deref(),
        Some("consumer.heartbeat.interval.ms must be in the range 500 to 15000 inclusive.")
    );
    for (key, value) in [
        ("consumer.heartbeat.interval.ms", "2500"),
        ("consumer.session.timeout.ms", "20000"),
    ] {
        assert_eq!(alter(vec![set(key, value)]).error_code, NONE, "{key}");
    }
    let join = |group: &str| {
        let req = Member::new(group, "m")
            .request()
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(s("t"))]))
            .with_topic_partitions(Some(Vec::new()));
        send(&broker, 1, req)
    };
    assert_eq!(join("g").heartbeat_interval_ms, 2500);
    assert_eq!(join("other").heartbeat_interval_ms, 1000);
    // The broker's session (6 s) has long passed; the group's (20 s) has not.
    broker.groups.tick(now_ms() + 10_000);
    let described = describe_one(&broker, 1, "g");
    assert_eq!(described.members.len(), 1, "{described:?}");
    assert!(describe_one(&broker, 1, "other").members.is_empty());
    broker.groups.tick(now_ms() + 21_000);
    assert!(describe_one(&broker, 1, "g").members.is_empty());
}

#[test]
fn static_members_leave_temporarily_and_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("t", 4)], &["g"]);
    let mut a = Member::new("g", "a1");
    a.instance = Some("instance-a".into());
    let mut b = Member::new("g", "b");
    a.join(&broker, &["t"], None);
    b.join(&broker, &["t"], None);
    settle(&broker, &mut [&mut a, &mut b]);
    let kept = a.owned.clone();
    let epoch = describe_one(&broker, 1, "g").group_epoch;
    let r = send(&broker, 1, a.request().with_member_epoch(-2));
    assert_eq!((r.error_code, r.member_epoch), (NONE, -2));
    // Another process with the same instance id takes over, with the same
    // partitions and no rebalance.
    let mut a2 = Member::new("g", "a2");
    a2.instance = a.instance.clone();
    assert_eq!(a2.join(&broker, &["t"], None), NONE);
    assert_eq!(a2.owned, kept);
    assert_eq!(describe_one(&broker, 1, "g").group_epoch, epoch);
    // While a2 is active, the instance id is not free.
    let mut a3 = Member::new("g", "a3");
    a3.instance = a.instance.clone();
    assert_eq!(
        a3.join(&broker, &["t"], None),
        ResponseError::UnreleasedInstanceId.code()
    );
    // The old member id is fenced.
    assert_eq!(a.beat(&broker), ResponseError::FencedInstanceId.code());
}

#[test]
fn regex_subscriptions_follow_new_topics_and_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("orders-1", 2), ("other", 2)], &["g"]);
    let mut a = Member::new("g", "a");
    let req = a
        .request()
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_regex(Some(s("orders-.*")))
        .with_topic_partitions(Some(Vec::new()));
    assert_eq!(a.send(&broker, 1, req), NONE);
    assert_eq!(a.count(), 2);
    assert!(a.owned.contains_key(&topic_id(&broker, "orders-1")));
    create_topic(&broker, "orders-2", 3);
    settle(&broker, &mut [&mut a]);
    assert_eq!(a.count(), 5);
    let d = describe_one(&broker, 1, "g");
    assert_eq!(
        d.members[0].subscribed_topic_regex.as_deref(),
        Some("orders-.*")
    );
    // New partitions of a subscribed topic.
    crate::apis::test_support::wait_for(
        &broker.controller,
        broker
            .controller
            .create_partitions("orders-1", 4, None, false),
    )
    .unwrap();
    broker.replicas.apply_image(&broker.controller.image());
    settle(&broker, &mut [&mut a]);
    assert_eq!(a.count(), 7);
    // v0 has no regex field, and names members that join without an id.
    let v0 = Member::new("g", "")
        .request()
        .with_rebalance_timeout_ms(1000)
        .with_subscribed_topic_names(Some(vec![TopicName(s("other"))]))
        .with_topic_partitions(Some(vec![]));
    let r = send(&broker, 0, v0);
    assert_eq!(r.error_code, NONE);
    assert_eq!(r.member_id.unwrap().len(), 22);
    let v0 = Member::new("g", "b")
        .request()
        .with_rebalance_timeout_ms(1000)
        .with_topic_partitions(Some(vec![]));
    assert_eq!(
        send(&broker, 0, v0).error_code,
        ResponseError::InvalidRequest.code()
    );
}

#[test]
fn range_assignor_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("x", 3), ("y", 3)], &["g"]);
    let (x, y) = (topic_id(&broker, "x"), topic_id(&broker, "y"));
    let mut a = Member::new("g", "a");
    let mut b = Member::new("g", "b");
    a.join(&broker, &["x", "y"], Some("range"));
    b.join(&broker, &["x", "y"], Some("range"));
    settle(&broker, &mut [&mut a, &mut b]);
    assert_eq!(
        describe_one(&broker, 1, "g").assignor_name.as_str(),
        "range"
    );
    assert_eq!(a.owned[&x], BTreeSet::from([0, 1]));
    assert_eq!(a.owned[&y], BTreeSet::from([0, 1]));
    assert_eq!(b.owned[&x], BTreeSet::from([2]));
}

fn commit(broker: &Broker, version: i16, group: &str, member: &str, epoch: i32) -> i16 {
    let req = OffsetCommitRequest::default()
        .with_group_id(gid(group))
        .with_member_id(s(member))
        .with_generation_id_or_member_epoch(epoch)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s("t")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(42)])]);
    let r = tokio_run(offset_commit(broker, version, req));
    r.topics[0].partitions[0].error_code
}

fn fetch(broker: &Broker, group: &str, member: Option<&str>, epoch: i32) -> (i16, Option<i64>) {
    let req = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(gid(group))
        .with_member_id(member.map(s))
        .with_member_epoch(epoch)
        .with_topics(None)]);
    let r = tokio_run(offset_fetch(broker, 9, req));
    let g = &r.groups[0];
    let offset = g
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.committed_offset);
    (g.error_code, offset)
}

fn tokio_run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn offsets_use_member_epochs_and_everything_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("t", 2)], &["g"]);
    let mut a = Member::new("g", "a");
    a.join(&broker, &["t"], None);
    assert_eq!(commit(&broker, 9, "g", "a", a.epoch), NONE);
    assert_eq!(
        commit(&broker, 9, "g", "a", a.epoch - 1),
        ResponseError::StaleMemberEpoch.code()
    );
    assert_eq!(
        commit(&broker, 8, "g", "a", a.epoch),
        ResponseError::UnsupportedVersion.code()
    );
    assert_eq!(
        commit(&broker, 9, "g", "x", 1),
        ResponseError::UnknownMemberId.code()
    );
    // Admin commits (no member) need an empty group.
    assert_eq!(
        commit(&broker, 9, "g", "", -1),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(fetch(&broker, "g", Some("a"), a.epoch), (NONE, Some(42)));
    assert_eq!(fetch(&broker, "g", None, -1), (NONE, Some(42)));
    assert_eq!(
        fetch(&broker, "g", Some("a"), a.epoch + 1).0,
        ResponseError::StaleMemberEpoch.code()
    );
    let before = describe_one(&broker, 1, "g");

    let broker = reopen(broker, dir.path(), &["g"]);
    let after = describe_one(&broker, 1, "g");
    assert_eq!(after.group_epoch, before.group_epoch);
    assert_eq!(after.assignment_epoch, before.assignment_epoch);
    assert_eq!(after.group_state.as_str(), "Stable");
    assert_eq!(after.members[0].member_epoch, a.epoch);
    assert_eq!(after.members[0].assignment, before.members[0].assignment);
    assert_eq!(fetch(&broker, "g", Some("a"), a.epoch), (NONE, Some(42)));
    // The member carries on with its epoch and keeps its partitions.
    let owned = a.owned.clone();
    assert_eq!(a.beat(&broker), NONE);
    assert_eq!(a.owned, owned);
    assert_eq!(
        describe_one(&broker, 1, "g").group_epoch,
        before.group_epoch
    );
}

#[test]
fn admin_apis_see_consumer_groups() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("t", 2), ("u", 1)], &["g"]);
    let mut a = Member::new("g", "a");
    a.join(&broker, &["t"], None);
    settle(&broker, &mut [&mut a]);
    commit(&broker, 9, "g", "a", a.epoch);

    let listed = tokio_run(list_groups(&broker, 5, ListGroupsRequest::default()));
    assert_encodes(&listed, 5);
    let g = &listed.groups[0];
    assert_eq!(
        (
            g.group_id.as_str(),
            g.protocol_type.as_str(),
            g.group_state.as_str(),
            g.group_type.as_str()
        ),
        ("g", "consumer", "Stable", "consumer")
    );
    let classic_only = ListGroupsRequest::default().with_types_filter(vec![s("classic")]);
    assert!(tokio_run(list_groups(&broker, 5, classic_only))
        .groups
        .is_empty());

    let d = tokio_run(describe_groups(
        &broker,
        6,
        DescribeGroupsRequest::default().with_groups(vec![gid("g")]),
    ));
    let dg = &d.groups[0];
    assert_eq!(dg.error_code, ResponseError::GroupIdNotFound.code());
    assert_eq!(
        dg.error_message.as_deref(),
        Some("Group g is not a classic group.")
    );
    let d5 = tokio_run(describe_groups(
        &broker,
        5,
        DescribeGroupsRequest::default().with_groups(vec![gid("g")]),
    ));
    assert_eq!(d5.groups[0].group_state.as_str(), "Dead");

    // A classic member joins a consumer group only with a readable
    // embedded consumer protocol (here: none).
    let join = JoinGroupRequest::default()
        .with_group_id(gid("g"))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default().with_name(s("range"))
        ]);
    let send_join = |req: JoinGroupRequest| {
        tokio_run(join_group(
            &broker,
            9,
            "c",
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            req,
        ))
    };
    let first = send_join(join.clone());
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    let j = send_join(join.with_member_id(first.member_id));
    assert_eq!(
        j.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );

    let delete_offsets = |topic: &str| {
        let req = OffsetDeleteRequest::default()
            .with_group_id(gid("g"))
            .with_topics(vec![OffsetDeleteRequestTopic::default()
                .with_name(TopicName(s(topic)))
                .with_partitions(vec![
                    OffsetDeleteRequestPartition::default().with_partition_index(0)
                ])]);
        let r = tokio_run(offset_delete(&broker, 0, req));
        (r.error_code, r.topics[0].partitions[0].error_code)
    };
    assert_eq!(
        delete_offsets("t"),
        (NONE, ResponseError::GroupSubscribedToTopic.code())
    );
    assert_eq!(delete_offsets("u"), (NONE, NONE));

    let delete = || {
        let r = tokio_run(delete_groups(
            &broker,
            2,
            DeleteGroupsRequest::default().with_groups_names(vec![gid("g")]),
        ));
        r.results[0].error_code
    };
    assert_eq!(delete(), ResponseError::NonEmptyGroup.code());
    send(&broker, 1, a.request().with_member_epoch(-1));
    assert_eq!(describe_one(&broker, 1, "g").group_state.as_str(), "Empty");
    // Empty: admin commits are accepted again.
    assert_eq!(commit(&broker, 9, "g", "", -1), NONE);
    assert_eq!(delete(), NONE);
    assert_eq!(
        describe_one(&broker, 1, "g").error_code,
        ResponseError::GroupIdNotFound.code()
    );
    assert_eq!(fetch(&broker, "g", None, -1), (NONE, None));
    // The group id is free for either protocol again, and stays deleted
    // after a restart.
    let broker = reopen(broker, dir.path(), &["g"]);
    assert!(
        tokio_run(list_groups(&broker, 5, ListGroupsRequest::default()))
            .groups
            .is_empty()
    );
}

#[test]
fn an_empty_classic_group_becomes_a_consumer_group() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("t", 1)], &["g"]);
    // An admin commit creates a "simple" classic group holding offsets.
    assert_eq!(commit(&broker, 9, "g", "", -1), NONE);
    let mut a = Member::new("g", "a");
    assert_eq!(a.join(&broker, &["t"], None), NONE);
    assert_eq!(fetch(&broker, "g", Some("a"), a.epoch), (NONE, Some(42)));
    let listed = tokio_run(list_groups(&broker, 5, ListGroupsRequest::default()));
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_type.as_str(), "consumer");
    // The same after a restart, where the offset record comes first.
    let broker = reopen(broker, dir.path(), &["g"]);
    let listed = tokio_run(list_groups(&broker, 5, ListGroupsRequest::default()));
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_type.as_str(), "consumer");
}

#[test]
fn transactional_commits_check_member_epochs() {
    use ottla_protocol::batch::{txn_marker_value, BatchBuilder, ControlType};

    use ottla_group_coordinator::{PartitionCommit, TxnCommitRequest};

    let dir = tempfile::tempdir().unwrap();
    let broker = open(dir.path(), &[("t", 1)], &["g"]);
    let mut a = Member::new("g", "a");
    a.join(&broker, &["t"], None);
    let shard = broker.groups.shard("g").unwrap();
    let txn_commit = |member: &str, epoch: i32| {
        let req = TxnCommitRequest {
            group_id: "g".into(),
            producer_id: 7,
            producer_epoch: 0,
            generation_id: epoch,
            member_id: member.into(),
            group_instance_id: None,
            topics: vec![(
                "t".into(),
                vec![PartitionCommit {
                    partition: 0,
                    offset: 5,
                    leader_epoch: -1,
                    metadata: None,
                }],
            )],
        };
        shard.commit_txn_offsets(req, now_ms())[0].1[0].1
    };
    // A stale epoch is ILLEGAL_GENERATION in this API.
    assert_eq!(
        txn_commit("a", a.epoch + 1),
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(txn_commit("", -1), ResponseError::UnknownMemberId.code());
    assert_eq!(txn_commit("a", a.epoch), NONE);
    let marker = BatchBuilder {
        producer_id: 7,
        producer_epoch: 0,
        transactional: true,
        ..BatchBuilder::default()
    }
    .build_control(ControlType::Commit, now_ms(), txn_marker_value(0));
    shard.write_txn_marker(marker, now_ms()).unwrap();
    assert_eq!(fetch(&broker, "g", Some("a"), a.epoch), (NONE, Some(5)));
    // The committed offsets made no classic group of the same id.
    let listed = tokio_run(list_groups(&broker, 5, ListGroupsRequest::default()));
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_type.as_str(), "consumer");
    let broker = reopen(broker, dir.path(), &["g"]);
    let listed = tokio_run(list_groups(&broker, 5, ListGroupsRequest::default()));
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(fetch(&broker, "g", None, -1), (NONE, Some(5)));
}
