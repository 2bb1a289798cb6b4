//! Online migration between the classic and consumer group protocols,
//! through the request handlers on a real broker: classic members and a
//! consumer-protocol member share one group while it is upgraded and
//! downgraded, and no partition ever has two owners.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::*;
use uuid::Uuid;

use super::tests::{
    beat, coordinator_ready, describe, gid, join_dynamic, join_request, localhost, s, spawn_join,
    spawn_sync, sync_request, Running, NONE,
};
use crate::apis::consumer_group::{describe as consumer_describe, heartbeat};
use crate::apis::group::{join_group, list_groups, offset_commit, sync_group};
use crate::apis::test_support::assert_encodes;
use crate::broker::Broker;
use crate::replica::now_ms;
use ottla_controller::features::GROUP_VERSION;
use ottla_group_coordinator::codec::Writer;
use ottla_group_coordinator::subscription::{encode_assignment, parse_assignment};

const TOPIC: &str = "t";

/// ConsumerProtocolSubscription v1: the topic and the partitions owned.
fn subscription_v1(owned: &[i32]) -> Bytes {
    let mut w = Writer::default();
    w.i16(1).i32(1).string(TOPIC).i32(-1);
    if owned.is_empty() {
        w.i32(0);
    } else {
        w.i32(1).string(TOPIC).i32(owned.len() as i32);
        for &p in owned {
            w.i32(p);
        }
    }
    Bytes::from(w.finish().unwrap())
}

/// A classic member of the group, as the Java consumer drives it with the
/// eager range assignor: it gives up what it owns before it rejoins.
struct Classic {
    id: String,
    generation: i32,
    owned: BTreeSet<i32>,
}

impl Classic {
    /// JoinGroup (answered at once by a consumer group), then SyncGroup.
    async fn rejoin(&mut self, broker: &Broker, group: &str) -> i16 {
        self.owned.clear();
        let mut req = join_request(group, &self.id, None, &[TOPIC]);
        for p in &mut req.protocols {
            p.metadata = subscription_v1(&[]);
        }
        let joined = join_group(broker, 9, "client", localhost(), req).await;
        assert_encodes(&joined, 9);
        if joined.error_code != NONE {
            return joined.error_code;
        }
        assert_eq!(joined.protocol_name.as_deref(), Some("range"));
        assert_eq!(joined.protocol_type.as_deref(), Some("consumer"));
        assert!(
            joined.members.is_empty(),
            "nobody leads in a consumer group"
        );
        assert_ne!(joined.leader.as_str(), self.id);
        self.generation = joined.generation_id;
        let synced = sync_group(
            broker,
            5,
            sync_request(group, self.generation, &self.id, &[]),
        )
        .await;
        if synced.error_code == NONE {
            self.take(&synced.assignment);
        }
        synced.error_code
    }

    fn take(&mut self, assignment: &[u8]) {
        let parts = parse_assignment(assignment).unwrap();
        self.owned = parts
            .into_iter()
            .filter(|(t, _)| t == TOPIC)
            .flat_map(|(_, ps)| ps)
            .collect();
    }

    /// A heartbeat; on REBALANCE_IN_PROGRESS, a rejoin.
    async fn beat(&mut self, broker: &Broker, group: &str) -> i16 {
        match beat(broker, group, &self.id, self.generation).await {
            code if code == ResponseError::RebalanceInProgress.code() => {
                self.rejoin(broker, group).await
            }
            code => code,
        }
    }
}

/// A consumer-protocol member: it reports what it owns after each change.
struct Modern {
    id: String,
    epoch: i32,
    owned: BTreeSet<i32>,
    report: bool,
}

impl Modern {
    fn request(&self, group: &str) -> ConsumerGroupHeartbeatRequest {
        ConsumerGroupHeartbeatRequest::default()
            .with_group_id(gid(group))
            .with_member_id(s(&self.id))
            .with_member_epoch(self.epoch)
    }

    fn join(broker: &Broker, group: &str) -> (Self, ConsumerGroupHeartbeatResponse) {
        let mut m = Self {
            id: Uuid::new_v4().to_string(),
            epoch: 0,
            owned: BTreeSet::new(),
            report: false,
        };
        let req = m
            .request(group)
            .with_rebalance_timeout_ms(5000)
            .with_subscribed_topic_names(Some(vec![TopicName(s(TOPIC))]))
            .with_topic_partitions(Some(Vec::new()));
        let r = m.send(broker, req);
        (m, r)
    }

    fn beat(&mut self, broker: &Broker, group: &str, topic: Uuid) -> i16 {
        let mut req = self.request(group);
        if self.report {
            req = req.with_topic_partitions(Some(vec![TopicPartitions::default()
                .with_topic_id(topic)
                .with_partitions(self.owned.iter().copied().collect())]));
        }
        self.send(broker, req).error_code
    }

    fn send(
        &mut self,
        broker: &Broker,
        req: ConsumerGroupHeartbeatRequest,
    ) -> ConsumerGroupHeartbeatResponse {
        let r = heartbeat(broker, 1, "client", localhost(), req);
        assert_encodes(&r, 1);
        self.report = false;
        if r.error_code == NONE {
            self.epoch = r.member_epoch;
            if let Some(a) = &r.assignment {
                let owned = a
                    .topic_partitions
                    .iter()
                    .flat_map(|tp| tp.partitions.iter().copied())
                    .collect();
                self.report = owned != self.owned;
                self.owned = owned;
            }
        }
        r
    }
}

fn consumer_view(broker: &Broker, group: &str) -> consumer_group_describe_response::DescribedGroup {
    let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![gid(group)]);
    let r = consumer_describe(broker, 1, req);
    assert_encodes(&r, 1);
    r.groups.into_iter().next().unwrap()
}

/// (member id, member type) of every member, sorted.
fn member_types(broker: &Broker, group: &str) -> Vec<(String, i8)> {
    let mut types: Vec<(String, i8)> = consumer_view(broker, group)
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.member_type))
        .collect();
    types.sort();
    types
}

async fn group_type(broker: &Broker, group: &str) -> String {
    let r = list_groups(broker, 5, ListGroupsRequest::default()).await;
    r.groups
        .iter()
        .find(|g| g.group_id.as_str() == group)
        .map(|g| g.group_type.to_string())
        .unwrap_or_default()
}

/// Checks that no partition has two owners and returns how many are owned.
fn owned_once(owners: &[&BTreeSet<i32>]) -> usize {
    let mut seen = BTreeSet::new();
    for owned in owners {
        for p in *owned {
            assert!(seen.insert(*p), "partition {p} has two owners: {owners:?}");
        }
    }
    seen.len()
}

/// Two classic members form a group with the range assignor: `a` leads.
async fn classic_group(broker: &std::sync::Arc<Broker>, group: &str) -> (Classic, Classic) {
    coordinator_ready(broker, group).await;
    let first = join_dynamic(broker, group, &[TOPIC]).await;
    let second = join_dynamic(broker, group, &[TOPIC]).await;
    let (a, b) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(
        (a.error_code, b.error_code, a.generation_id),
        (NONE, NONE, 1)
    );
    let (leader, follower) = if a.leader == a.member_id {
        (a, b)
    } else {
        (b, a)
    };
    let for_leader = encode_assignment(1, &vec![(TOPIC.to_string(), vec![0, 1])]);
    let for_follower = encode_assignment(1, &vec![(TOPIC.to_string(), vec![2, 3])]);
    let follower_sync = spawn_sync(broker, 5, sync_request(group, 1, &follower.member_id, &[]));
    let assignments: [(&str, &[u8]); 2] = [
        (&leader.member_id, &for_leader),
        (&follower.member_id, &for_follower),
    ];
    let leader_sync = spawn_sync(
        broker,
        5,
        sync_request(group, 1, &leader.member_id, &assignments),
    )
    .await
    .unwrap();
    let follower_sync = follower_sync.await.unwrap();
    assert_eq!(
        (leader_sync.error_code, follower_sync.error_code),
        (NONE, NONE)
    );
    let mut a = Classic {
        id: leader.member_id.to_string(),
        generation: 1,
        owned: BTreeSet::new(),
    };
    let mut b = Classic {
        id: follower.member_id.to_string(),
        generation: 1,
        owned: BTreeSet::new(),
    };
    a.take(&leader_sync.assignment);
    b.take(&follower_sync.assignment);
    assert_eq!(
        describe(broker, 5, group).await.group_state.as_str(),
        "Stable"
    );
    (a, b)
}

async fn commit(broker: &Broker, group: &str, member: &Classic, generation: i32) -> i16 {
    let req = super::tests::commit_request(group, &[(TOPIC, &[(0, 7)])])
        .with_member_id(s(&member.id))
        .with_generation_id_or_member_epoch(generation);
    let r = offset_commit(broker, 8, req).await;
    assert_encodes(&r, 8);
    r.topics[0].partitions[0].error_code
}

/// Classic members, a consumer-protocol member joining (upgrade), all
/// three sharing the topic, a restart, then the consumer-protocol member
/// leaving (downgrade) and the classic members carrying on.
#[tokio::test]
async fn a_group_upgrades_to_the_consumer_protocol_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let group = "g-migrating";
    let run = Running::start(dir.path(), &[(TOPIC, 4)]).await;
    let broker = run.broker.clone();
    let topic = broker.controller.image().topic_by_name(TOPIC).unwrap().id;
    let (mut a, mut b) = classic_group(&broker, group).await;
    assert_eq!(owned_once(&[&a.owned, &b.owned]), 4);

    // The consumer-protocol member upgrades the group; the classic members
    // keep their ids, their generation as epoch and their partitions.
    let (mut c, joined) = Modern::join(&broker, group);
    assert_eq!(joined.error_code, NONE, "{:?}", joined.error_message);
    assert_eq!(c.epoch, 2);
    assert!(c.owned.is_empty(), "its partitions are still owned");
    assert_eq!(group_type(&broker, group).await, "consumer");
    let mut expected = vec![(a.id.clone(), 0), (b.id.clone(), 0), (c.id.clone(), 1)];
    expected.sort();
    assert_eq!(member_types(&broker, group), expected);
    let view = consumer_view(&broker, group);
    assert_eq!(
        (view.group_epoch, view.group_state.as_str()),
        (2, "Reconciling")
    );
    assert!(view
        .members
        .iter()
        .filter(|m| m.member_type == 0)
        .all(|m| m.member_epoch == 1 && m.assignment.topic_partitions[0].partitions.len() == 2));
    assert_eq!(
        describe(&broker, 5, group).await.group_state.as_str(),
        "Dead"
    );
    // A classic member commits with its generation, its member epoch.
    assert_eq!(commit(&broker, group, &a, 1).await, NONE);
    assert_eq!(
        commit(&broker, group, &a, 7).await,
        ResponseError::IllegalGeneration.code()
    );

    // Heartbeats tell the classic members to rejoin; everyone settles.
    let mut rounds = 0;
    loop {
        for code in [a.beat(&broker, group).await, b.beat(&broker, group).await] {
            assert_eq!(code, NONE);
        }
        assert_eq!(c.beat(&broker, group, topic), NONE);
        owned_once(&[&a.owned, &b.owned, &c.owned]);
        let view = consumer_view(&broker, group);
        if view.group_state.as_str() == "Stable" && !c.report {
            break;
        }
        rounds += 1;
        assert!(rounds < 20, "the group did not stabilize: {view:?}");
    }
    assert_eq!(owned_once(&[&a.owned, &b.owned, &c.owned]), 4);
    assert!([&a.owned, &b.owned, &c.owned].iter().all(|o| !o.is_empty()));
    assert_eq!((a.generation, b.generation, c.epoch), (2, 2, 2));
    assert_eq!(commit(&broker, group, &a, 2).await, NONE);

    // The classic members' protocols and sessions are stored with them.
    run.shutdown().await;
    let run = Running::start(dir.path(), &[]).await;
    let broker = run.broker.clone();
    coordinator_ready(&broker, group).await;
    assert_eq!(member_types(&broker, group), expected);
    assert_eq!(consumer_view(&broker, group).group_state.as_str(), "Stable");
    assert_eq!(a.beat(&broker, group).await, NONE);
    assert_eq!(a.generation, 2, "no rebalance after a restart");

    // The consumer-protocol member leaves: the group is classic again at
    // its epoch as generation, and its members rebalance.
    let left = c.send(&broker, c.request(group).with_member_epoch(-1));
    assert_eq!(left.error_code, NONE);
    assert_eq!(group_type(&broker, group).await, "classic");
    let d = describe(&broker, 5, group).await;
    assert_eq!(
        (
            d.group_state.as_str(),
            d.protocol_type.as_str(),
            d.members.len()
        ),
        ("PreparingRebalance", "consumer", 2)
    );
    assert_eq!(
        beat(&broker, group, &a.id, 1).await,
        ResponseError::IllegalGeneration.code(),
        "the generation is the group's epoch, 2"
    );
    assert_eq!(
        beat(&broker, group, &a.id, 2).await,
        ResponseError::RebalanceInProgress.code()
    );
    let rejoin_a = spawn_join(&broker, 9, join_request(group, &a.id, None, &[TOPIC]));
    let rejoin_b = spawn_join(&broker, 9, join_request(group, &b.id, None, &[TOPIC]));
    let (ja, jb) = (rejoin_a.await.unwrap(), rejoin_b.await.unwrap());
    assert_eq!((ja.error_code, jb.error_code), (NONE, NONE));
    assert_eq!((ja.generation_id, jb.generation_id), (3, 3));
    assert_eq!(ja.leader, jb.leader, "one of them leads the classic group");
    let offsets = super::tests::fetch_v8(&broker, group, None).await;
    assert_eq!(offsets.len(), 1);
    assert_eq!((offsets[0].1, offsets[0].2), (0, 7));
    run.shutdown().await;
}

/// With `group.consumer.migration.policy=disabled` a consumer-protocol
/// member cannot take over a classic group, and a group whose last
/// consumer-protocol member leaves stays a consumer group.
#[tokio::test]
async fn the_migration_policy_can_forbid_it() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start_with(
        dir.path(),
        &[(TOPIC, 4)],
        &[("group.consumer.migration.policy", "disabled")],
    )
    .await;
    let broker = run.broker.clone();
    classic_group(&broker, "g-classic").await;
    let (_, refused) = Modern::join(&broker, "g-classic");
    assert_eq!(refused.error_code, ResponseError::GroupIdNotFound.code());
    let message = refused.error_message.unwrap().to_string();
    assert!(
        message.contains("group.consumer.migration.policy is disabled"),
        "{message}"
    );

    // A consumer group that classic members join stays one.
    let group = "g-mixed";
    coordinator_ready(&broker, group).await;
    let (c, joined) = Modern::join(&broker, group);
    assert_eq!(joined.error_code, NONE);
    let mut a = Classic {
        id: String::new(),
        generation: -1,
        owned: BTreeSet::new(),
    };
    let first = join_group(
        &broker,
        9,
        "client",
        localhost(),
        join_request(group, "", None, &[TOPIC]),
    )
    .await;
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    a.id = first.member_id.to_string();
    assert_eq!(a.rejoin(&broker, group).await, NONE);
    let mut c = c;
    assert_eq!(
        c.send(&broker, c.request(group).with_member_epoch(-1))
            .error_code,
        NONE
    );
    assert_eq!(group_type(&broker, group).await, "consumer");
    assert_eq!(member_types(&broker, group), vec![(a.id.clone(), 0)]);
    run.shutdown().await;
}

/// Classic members of a consumer group are fenced by their own session
/// timeout, and when told to rejoin, by their rebalance timeout.
#[tokio::test]
async fn classic_members_are_fenced_by_their_own_timeouts() {
    let dir = tempfile::tempdir().unwrap();
    let group = "g-timers";
    let run = Running::start(dir.path(), &[(TOPIC, 4)]).await;
    let broker = run.broker.clone();
    let (a, b) = classic_group(&broker, group).await;
    let (_c, joined) = Modern::join(&broker, group);
    assert_eq!(joined.error_code, NONE);
    // `a` is told to rejoin (rebalance timeout 5 s, session 10 s) and does
    // not; `b` does not even heartbeat.
    assert_eq!(
        beat(&broker, group, &a.id, a.generation).await,
        ResponseError::RebalanceInProgress.code()
    );
    let shard = broker.groups.shard(group).unwrap();
    let image = broker.controller.image();
    shard.tick(now_ms() + 5_500, &image);
    let members: BTreeMap<String, i8> = member_types(&broker, group).into_iter().collect();
    assert!(!members.contains_key(&a.id), "a missed its rejoin deadline");
    assert!(members.contains_key(&b.id), "b's session has 10 s");
    shard.tick(now_ms() + 10_500, &image);
    let members: BTreeMap<String, i8> = member_types(&broker, group).into_iter().collect();
    assert_eq!(members.len(), 1, "b's session expired");
    assert_eq!(group_type(&broker, group).await, "consumer");
    run.shutdown().await;
}

/// group.version 0 turns the consumer protocol off, as in Kafka.
#[tokio::test]
async fn group_version_zero_disables_the_consumer_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let run = Running::start(dir.path(), &[(TOPIC, 1)]).await;
    let broker = run.broker.clone();
    coordinator_ready(&broker, "g").await;
    broker
        .controller
        .set_feature_levels(vec![(GROUP_VERSION.to_string(), 0)])
        .await
        .unwrap();
    let (_, off) = Modern::join(&broker, "g");
    assert_eq!(off.error_code, ResponseError::UnsupportedVersion.code());
    assert!(off.error_message.unwrap().contains("group.version is 0"));
    broker
        .controller
        .set_feature_levels(vec![(GROUP_VERSION.to_string(), 1)])
        .await
        .unwrap();
    let (_, on) = Modern::join(&broker, "g");
    assert_eq!(on.error_code, NONE);
    run.shutdown().await;
}

/// Static members are migrated one instance at a time, as a rolling
/// restart does it: an instance restarting with the consumer protocol takes
/// over its classic predecessor's partitions, and the instance restarting
/// back with the classic protocol turns the group classic again, each time
/// without a rebalance.
#[tokio::test]
async fn static_members_migrate_one_instance_at_a_time_without_rebalancing() {
    let dir = tempfile::tempdir().unwrap();
    let group = "g-static-migration";
    let run = Running::start(dir.path(), &[(TOPIC, 4)]).await;
    let broker = run.broker.clone();
    coordinator_ready(&broker, group).await;
    let join_static = |instance: &str| {
        let mut req = join_request(group, "", Some(instance), &[TOPIC]);
        for p in &mut req.protocols {
            p.metadata = subscription_v1(&[]);
        }
        spawn_join(&broker, 9, req)
    };
    let (first, second) = (join_static("i1"), join_static("i2"));
    let (j1, j2) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(
        (j1.error_code, j2.error_code, j1.generation_id),
        (NONE, NONE, 1)
    );
    let leader = if j1.leader == j1.member_id { &j1 } else { &j2 };
    let i1_partitions = encode_assignment(1, &vec![(TOPIC.to_string(), vec![0, 1])]);
    let i2_partitions = encode_assignment(1, &vec![(TOPIC.to_string(), vec![2, 3])]);
    let assignments: [(&str, &[u8]); 2] = [
        (&j1.member_id, &i1_partitions),
        (&j2.member_id, &i2_partitions),
    ];
    let follower = if leader.member_id == j1.member_id {
        &j2
    } else {
        &j1
    };
    let follower_sync = spawn_sync(&broker, 5, sync_request(group, 1, &follower.member_id, &[]));
    let leader_sync = spawn_sync(
        &broker,
        5,
        sync_request(group, 1, &leader.member_id, &assignments),
    );
    assert_eq!(leader_sync.await.unwrap().error_code, NONE);
    assert_eq!(follower_sync.await.unwrap().error_code, NONE);

    // i1 restarts with the consumer protocol, under a new member id.
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_member_id(s("i1-modern"))
        .with_instance_id(Some(s("i1")))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(5000)
        .with_subscribed_topic_names(Some(vec![TopicName(s(TOPIC))]))
        .with_topic_partitions(Some(Vec::new()));
    let r = heartbeat(&broker, 1, "client", localhost(), req);
    assert_eq!(r.error_code, NONE, "{:?}", r.error_message);
    assert_eq!(r.member_epoch, 1, "no rebalance");
    let got: BTreeSet<i32> = r.assignment.unwrap().topic_partitions[0]
        .partitions
        .iter()
        .copied()
        .collect();
    assert_eq!(got, BTreeSet::from([0, 1]), "i1's partitions");
    let mut expected = vec![("i1-modern".to_string(), 1), (j2.member_id.to_string(), 0)];
    expected.sort();
    assert_eq!(member_types(&broker, group), expected);
    assert_eq!(beat(&broker, group, &j2.member_id, 1).await, NONE);
    // The old classic member id of i1 is gone.
    assert_eq!(
        beat(&broker, group, &j1.member_id, 1).await,
        ResponseError::UnknownMemberId.code()
    );

    // i1 leaves for a restart (epoch -2) and comes back classic: the group
    // is classic again, i1 holding its partitions, i2 undisturbed.
    let req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(gid(group))
        .with_member_id(s("i1-modern"))
        .with_instance_id(Some(s("i1")))
        .with_member_epoch(-2);
    assert_eq!(
        heartbeat(&broker, 1, "client", localhost(), req).error_code,
        NONE
    );
    let back = join_static("i1").await.unwrap();
    assert_eq!(back.error_code, NONE);
    assert_eq!(
        (back.generation_id, back.protocol_name.as_deref()),
        (1, Some("range"))
    );
    assert_eq!(group_type(&broker, group).await, "classic");
    let synced = sync_group(&broker, 5, sync_request(group, 1, &back.member_id, &[])).await;
    assert_eq!(synced.error_code, NONE);
    assert_eq!(
        parse_assignment(&synced.assignment).unwrap(),
        vec![(TOPIC.to_string(), vec![0, 1])]
    );
    assert_eq!(beat(&broker, group, &j2.member_id, 1).await, NONE);
    assert_eq!(
        describe(&broker, 5, group).await.group_state.as_str(),
        "Stable"
    );
    run.shutdown().await;
}

/// The classic requests' checks inside a consumer group: unknown members,
/// consumer-protocol members, stale generations, other protocols; and
/// LeaveGroup removing classic members only.
#[tokio::test]
async fn classic_requests_to_a_consumer_group_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let group = "g-checks";
    let run = Running::start(dir.path(), &[(TOPIC, 2)]).await;
    let broker = run.broker.clone();
    coordinator_ready(&broker, group).await;
    let (c, joined) = Modern::join(&broker, group);
    assert_eq!(joined.error_code, NONE);
    let mut a = Classic {
        id: "a".to_string(),
        generation: -1,
        owned: BTreeSet::new(),
    };
    assert_eq!(
        a.rejoin(&broker, group).await,
        NONE,
        "a known id is created"
    );
    let sync = |member: &str, generation: i32, protocol: &str| {
        let req =
            sync_request(group, generation, member, &[]).with_protocol_name(Some(s(protocol)));
        sync_group(&broker, 5, req)
    };
    assert_eq!(
        sync("a", a.generation + 1, "range").await.error_code,
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(
        sync("a", a.generation, "roundrobin").await.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    assert_eq!(
        sync(&c.id, c.epoch, "range").await.error_code,
        ResponseError::UnknownMemberId.code(),
        "a consumer-protocol member cannot use SyncGroup"
    );
    assert_eq!(
        beat(&broker, group, "stranger", 1).await,
        ResponseError::UnknownMemberId.code()
    );
    // A JoinGroup whose protocols a classic member does not share.
    let mut other = join_request(group, "b", None, &[TOPIC]);
    other.protocols.retain(|p| p.name.as_str() == "roundrobin");
    other.protocols[0].name = s("sticky");
    let refused = join_group(&broker, 9, "client", localhost(), other).await;
    assert_eq!(
        refused.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );

    let leave = LeaveGroupRequest::default()
        .with_group_id(gid(group))
        .with_members(vec![
            leave_group_request::MemberIdentity::default().with_member_id(s(&a.id)),
            leave_group_request::MemberIdentity::default().with_member_id(s(&c.id)),
        ]);
    let left = crate::apis::group::leave_group(&broker, 5, leave).await;
    let codes: Vec<i16> = left.members.iter().map(|m| m.error_code).collect();
    assert_eq!(codes, [NONE, ResponseError::UnknownMemberId.code()]);
    assert_eq!(member_types(&broker, group), vec![(c.id.clone(), 1)]);
    run.shutdown().await;
}
