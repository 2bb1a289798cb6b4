//! Share groups (KIP-932, queues) on a live `ottla`, driven by Apache Kafka
//! 4.4's kafka-console-share-consumer.sh and kafka-share-groups.sh, and at
//! the wire level:
//!
//! - share consumers split a topic and each record is delivered to one of
//!   them once; the tool lists, describes (members, state, start offsets),
//!   resets the offsets of and deletes the group; on three
//!   nodes each partition's leader delivers its records;
//! - released records come back, with a higher delivery count, until
//!   `share.delivery.count.limit` archives them;
//! - records a member acquired and never acknowledged go to another member
//!   once their acquisition lock expires;
//! - share sessions and acknowledgements are checked as Kafka checks them;
//! - `share.isolation.level=read_committed` never delivers an aborted
//!   transaction's records, read_uncommitted does;
//! - what was acknowledged stays so, and what was not is delivered again,
//!   across a kill -9 and restart, and across a partition leader's death
//!   (the share coordinator's `__share_group_state`);
//! - librdkafka's share consumer (confluent-kafka) acknowledges, releases
//!   and rejects, and two of them split a topic;
//! - the group itself outlives a restart (`__consumer_offsets`), and
//!   deleting it deletes its share state;
//! - share.version 2's dead-letter queues (KIP-1191): rejected records,
//!   and those released up to the delivery limit, land on the group's
//!   queue topic as Kafka 4.4 writes them (headers, copies on request), a
//!   queue topic Kafka would refuse gets nothing and the records are
//!   archived all the same, and a missing one is created when the broker
//!   allows it;
//! - Kafka 4.4's share consumer over ShareFetch and ShareAcknowledge v2
//!   (`tests/java/ShareRenew.java`): the record-limit acquire mode hands
//!   out max.poll.records exactly, the batch-optimized one whole batches,
//!   and renewed records stay with their member past their lock.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::share_fetch_response::ShareFetchResponse;
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, GroupId, OffsetCommitRequest, ShareAcknowledgeRequest,
    ShareAcknowledgeResponse, ShareFetchRequest, ShareGroupHeartbeatRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use ottla_tests::console_consumer::{ConsoleConsumer, ShareRecord};
use ottla_tests::groups::{coordinator_of, GROUP_KEY, SHARE_KEY};
use ottla_tests::metrics::{scrape, sum};
use ottla_tests::ottla::{free_port, Ottla};
use ottla_tests::tools::{kafka_bin, kafka_tool, ok, python_script, refused, repo_root};
use ottla_tests::topics::{
    consume_from_beginning, create_assigned_topic, create_topic, describe as describe_topic,
    produce_keyed, topic_uuid,
};
use ottla_tests::wire::WireClient;
use uuid::Uuid;

/// Locks may be as short as a second (Kafka's floor is 15 s), so that a
/// lost member's records come back quickly.
const SHARE_OVERRIDES: &[(&str, &str)] = &[
    ("group.share.min.record.lock.duration.ms", "1000"),
    ("offsets.topic.num.partitions", "5"),
];

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn produce(node: &Ottla, topic: &str, count: usize) {
    let input: String = (0..count).map(|i| format!("key-{i}:value-{i}\n")).collect();
    produce_keyed(node, topic, &input);
}

/// Sets share-group configs of `group` with kafka-configs.sh.
fn configure_group(node: &Ottla, group: &str, configs: &str) {
    ok(kafka_tool(
        "kafka-configs.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--alter",
            "--entity-type",
            "groups",
            "--entity-name",
            group,
            "--add-config",
            configs,
        ],
        None,
    ));
}

fn share_groups_tool(node: &Ottla, args: &[&str]) -> String {
    let bootstrap = node.bootstrap();
    let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
    all.extend_from_slice(args);
    ok(kafka_tool("kafka-share-groups.sh", &all, None))
}

/// Waits until `consumers` printed `count` lines in all, and a little
/// longer for any line too many.
fn lines_of(consumers: &[&ConsoleConsumer], count: usize) -> Vec<ShareRecord> {
    let start = Instant::now();
    let all = || -> Vec<ShareRecord> { consumers.iter().flat_map(|c| c.share_records()).collect() };
    while all().len() < count {
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "the share consumers printed {} of {count} records",
            all().len()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    std::thread::sleep(Duration::from_secs(2));
    all()
}

#[test]
fn share_consumers_split_a_topic_and_each_record_is_delivered_once() {
    let node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "jobs", 4, &[]);
    configure_group(&node, "workers", "share.auto.offset.reset=earliest");
    produce(&node, "jobs", 400);
    let a = ConsoleConsumer::start_share(&node, "a", "jobs", "workers", &[]);
    let b = ConsoleConsumer::start_share(&node, "b", "jobs", "workers", &[]);
    let lines = lines_of(&[&a, &b], 400);
    let mut seen: BTreeMap<(i32, i64), usize> = BTreeMap::new();
    for (p, o, delivery, _) in &lines {
        assert_eq!(*delivery, 1, "partition {p} offset {o} was delivered again");
        *seen.entry((*p, *o)).or_default() += 1;
    }
    assert_eq!(lines.len(), 400, "no record twice");
    assert_eq!(seen.len(), 400, "every record once");

    let listed = share_groups_tool(&node, &["--list"]);
    assert!(listed.lines().any(|l| l.trim() == "workers"), "{listed}");
    let members = share_groups_tool(&node, &["--describe", "--group", "workers", "--members"]);
    let member_lines = members.lines().filter(|l| l.starts_with("workers")).count();
    assert_eq!(member_lines, 2, "two members: {members}");
    let state = share_groups_tool(&node, &["--describe", "--group", "workers", "--state"]);
    assert!(state.contains("Stable"), "{state}");
    // Every record was accepted: each partition's start is at its end.
    let start = Instant::now();
    loop {
        let offsets = share_groups_tool(&node, &["--describe", "--group", "workers"]);
        let starts: Vec<i64> = offsets
            .lines()
            .filter(|l| l.starts_with("workers"))
            .filter_map(|l| l.split_whitespace().nth(3)?.parse().ok())
            .collect();
        if starts.len() == 4 && starts.iter().sum::<i64>() == 400 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "start offsets: {offsets}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    let (mut a, mut b) = (a, b);
    a.stop();
    b.stop();
    let state = share_groups_tool(&node, &["--describe", "--group", "workers", "--state"]);
    assert!(state.contains("Empty"), "the members left: {state}");
    let deleted = share_groups_tool(&node, &["--delete", "--group", "workers"]);
    assert!(deleted.contains("was successful"), "{deleted}");
    let listed = share_groups_tool(&node, &["--list"]);
    assert!(!listed.lines().any(|l| l.trim() == "workers"), "{listed}");
}

/// A record batch bigger than `share.partition.max.record.locks` is handed
/// out in parts, none skipped: a batch cut by the limit once made its rest
/// look like offsets the log had skipped, archived and never delivered.
#[test]
fn batches_larger_than_the_in_flight_limit_are_delivered_whole() {
    let node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "big-batches", 1, &[]);
    configure_group(
        &node,
        "limited",
        "share.auto.offset.reset=earliest,share.partition.max.record.locks=100",
    );
    let props = format!(
        "bootstrap.servers={} batch.size=65536 linger.ms=200",
        node.bootstrap()
    );
    let mut args = vec![
        "--topic",
        "big-batches",
        "--num-records",
        "3000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
    ];
    args.extend(props.split(' '));
    ok(kafka_tool("kafka-producer-perf-test.sh", &args, None));
    let c = ConsoleConsumer::start_share(&node, "only", "big-batches", "limited", &[]);
    let lines = lines_of(&[&c], 3000);
    let mut offsets: Vec<(i64, u32)> = lines.iter().map(|(_, o, d, _)| (*o, *d)).collect();
    offsets.sort_unstable();
    assert_eq!(offsets, (0..3000).map(|o| (o, 1)).collect::<Vec<_>>());
}

/// Three nodes: the group's coordinator is one node, and each partition's
/// records are acquired on its own leader; deleting the group deletes the
/// partitions' state at their share coordinators; offsets are reset and
/// deleted there too.
#[test]
fn on_three_nodes_each_leader_delivers_its_partition() {
    let nodes = Ottla::cluster(3, SHARE_OVERRIDES);
    create_assigned_topic(&nodes[0], "spread", "1:2,2:3,3:1");
    configure_group(&nodes[0], "crew", "share.auto.offset.reset=earliest");
    produce(&nodes[1], "spread", 300);
    let mut a = ConsoleConsumer::start_share(&nodes[0], "a", "spread", "crew", &[]);
    let mut b = ConsoleConsumer::start_share(&nodes[2], "b", "spread", "crew", &[]);
    let lines = lines_of(&[&a, &b], 300);
    let mut seen: BTreeMap<(i32, i64), u32> = BTreeMap::new();
    for (p, o, delivery, _) in &lines {
        assert_eq!(*delivery, 1, "partition {p} offset {o} was delivered again");
        *seen.entry((*p, *o)).or_default() += 1;
    }
    assert_eq!((lines.len(), seen.len()), (300, 300), "each record once");
    let partitions: std::collections::BTreeSet<i32> = seen.keys().map(|(p, _)| *p).collect();
    assert_eq!(partitions.len(), 3, "records from every partition's leader");

    // Deleting the group deletes its state at each partition's share
    // coordinator (spread over the nodes): the same group id starts over.
    let start = Instant::now();
    while start_offsets(&nodes[0], "crew").values().sum::<i64>() != 300 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "never all acknowledged"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    a.stop();
    b.stop();
    // DescribeShareGroupOffsets v1 (KIP-1226): each partition's lag, its
    // end read from its leader and its state from its coordinator, which
    // are other nodes for two partitions of three.
    let ends = end_offsets(&nodes[0], "spread");
    assert_eq!(
        lags(&nodes[1], "crew"),
        ends.keys().map(|p| (*p, 0)).collect()
    );
    produce(&nodes[0], "spread", 30);
    let grown = end_offsets(&nodes[0], "spread");
    let behind: BTreeMap<i32, i64> = grown.iter().map(|(p, e)| (*p, e - ends[p])).collect();
    assert_eq!(behind.values().sum::<i64>(), 30);
    assert_eq!(lags(&nodes[2], "crew"), behind);
    // Offsets reset and deleted across the three coordinators at once
    // (one request per coordinator broker).
    share_groups_tool(
        &nodes[1],
        &[
            "--reset-offsets",
            "--group",
            "crew",
            "--topic",
            "spread",
            "--to-earliest",
            "--execute",
        ],
    );
    let reset = start_offsets(&nodes[2], "crew");
    assert_eq!(reset, (0..3).map(|p| (p, 0)).collect(), "{reset:?}");
    assert_eq!(lags(&nodes[0], "crew"), grown, "everything again");
    share_groups_tool(
        &nodes[0],
        &["--delete-offsets", "--group", "crew", "--topic", "spread"],
    );
    let left = start_offsets(&nodes[0], "crew");
    assert!(left.is_empty(), "the group forgot the topic: {left:?}");
    let deleted = share_groups_tool(&nodes[1], &["--delete", "--group", "crew"]);
    assert!(deleted.contains("was successful"), "{deleted}");
    let again = ConsoleConsumer::start_share(&nodes[1], "again", "spread", "crew", &[]);
    assert_eq!(lines_of(&[&again], 330).len(), 330, "all 330 again");
}

#[test]
fn released_records_come_back_until_the_delivery_limit_archives_them() {
    let node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "retries", 1, &[]);
    configure_group(
        &node,
        "retrying",
        "share.auto.offset.reset=earliest,share.delivery.count.limit=3",
    );
    produce(&node, "retries", 5);
    let c = ConsoleConsumer::start_share(&node, "releasing", "retries", "retrying", &["--release"]);
    let lines = lines_of(&[&c], 15);
    assert_eq!(lines.len(), 15, "three deliveries each, then archived");
    let mut counts: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    for (_, o, delivery, _) in lines {
        counts.entry(o).or_default().push(delivery);
    }
    for o in 0..5 {
        assert_eq!(counts[&o], vec![1, 2, 3], "offset {o}");
    }
}

/// A record whose consumers close without acknowledging it (each crashed
/// on it, say) is delivered until `share.delivery.count.limit`, then
/// archived: each closed session's release is persisted before the idle
/// share partition is forgotten, so the count survives.
#[test]
fn deliveries_to_consumers_that_close_without_acknowledging_count_to_the_limit() {
    let node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "poison", 1, &[]);
    configure_group(
        &node,
        "crashers",
        "share.auto.offset.reset=earliest,share.delivery.count.limit=2",
    );
    produce(&node, "poison", 1);
    let topic = topic_uuid(&node.bootstrap(), "poison");
    for delivery in 1..=2 {
        let mut m = Member::new(&node, "crashers", &format!("m{delivery}"));
        assert_eq!(
            acquired(&m.fetch(topic, Vec::new(), 5_000)),
            vec![(0, 0, delivery)]
        );
        m.close(topic);
    }
    let mut last = Member::new(&node, "crashers", "m3");
    assert_eq!(
        acquired(&last.fetch(topic, Vec::new(), 1_000)),
        Vec::new(),
        "archived at the limit"
    );
}

/// A raw share-group member: ShareFetch and ShareAcknowledge at v1.
struct Member {
    client: WireClient,
    group: String,
    id: String,
    epoch: i32,
}

impl Member {
    fn new(node: &Ottla, group: &str, id: &str) -> Self {
        Self {
            client: WireClient::connect(&node.bootstrap()),
            group: group.to_string(),
            id: id.to_string(),
            epoch: 0,
        }
    }

    fn fetch(&mut self, topic: Uuid, acks: Vec<AckBatch>, max_wait_ms: i32) -> ShareFetchResponse {
        let req = ShareFetchRequest::default()
            .with_group_id(Some(GroupId(s(&self.group))))
            .with_member_id(Some(s(&self.id)))
            .with_share_session_epoch(self.epoch)
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_max_records(500)
            .with_batch_size(500)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(topic)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(
                        acks.into_iter()
                            .map(|a| {
                                kafka_protocol::messages::share_fetch_request::AcknowledgementBatch::default()
                                    .with_first_offset(a.first_offset)
                                    .with_last_offset(a.last_offset)
                                    .with_acknowledge_types(a.acknowledge_types)
                            })
                            .collect(),
                    )])]);
        let r = self.client.send(1, &req);
        if r.error_code == 0 {
            self.epoch += 1;
        }
        r
    }

    fn acknowledge(&mut self, topic: Uuid, batches: Vec<AckBatch>) -> ShareAcknowledgeResponse {
        let req = ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(s(&self.group))))
            .with_member_id(Some(s(&self.id)))
            .with_share_session_epoch(self.epoch)
            .with_topics(vec![AcknowledgeTopic::default()
                .with_topic_id(topic)
                .with_partitions(vec![AcknowledgePartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(batches)])]);
        let r = self.client.send(1, &req);
        if r.error_code == 0 {
            self.epoch += 1;
        }
        r
    }
}

impl Member {
    /// Closes the share session (epoch -1) acknowledging nothing, as a
    /// consumer closing in the middle of a batch does.
    fn close(&mut self, topic: Uuid) {
        self.epoch = -1;
        let r = self.acknowledge(topic, Vec::new());
        assert_eq!(r.error_code, 0, "{r:?}");
    }
}

fn ack(first: i64, last: i64, kind: i8) -> AckBatch {
    AckBatch::default()
        .with_first_offset(first)
        .with_last_offset(last)
        .with_acknowledge_types(vec![kind])
}

const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const RENEW: i8 = 4;

/// (first, last, delivery count) of each acquired range of partition 0.
fn acquired(r: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    assert_eq!(r.error_code, 0, "{r:?}");
    r.responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter(|p| p.partition_index == 0)
        .flat_map(|p| {
            assert_eq!(p.error_code, 0, "{p:?}");
            p.acquired_records
                .iter()
                .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        })
        .collect()
}

#[test]
fn records_a_member_never_acknowledged_go_to_another_once_the_lock_expires() {
    let node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "tasks", 1, &[]);
    configure_group(
        &node,
        "pool",
        "share.auto.offset.reset=earliest,share.record.lock.duration.ms=2000",
    );
    produce(&node, "tasks", 10);
    let topic = topic_uuid(&node.bootstrap(), "tasks");
    let mut lost = Member::new(&node, "pool", "lost-member");
    let r = lost.fetch(topic, Vec::new(), 5_000);
    assert_eq!(acquired(&r), vec![(0, 9, 1)]);
    assert_eq!(r.acquisition_lock_timeout_ms, 2000);
    // The member goes silent, holding all ten.
    let c = ConsoleConsumer::start_share(&node, "survivor", "tasks", "pool", &[]);
    let lines = lines_of(&[&c], 10);
    let offsets: Vec<(i64, u32)> = lines.iter().map(|(_, o, d, _)| (*o, *d)).collect();
    assert_eq!(offsets, (0..10).map(|o| (o, 2)).collect::<Vec<_>>());
}

#[test]
fn share_sessions_and_acknowledgements_are_checked_as_kafka_checks_them() {
    let node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "checked", 1, &[]);
    configure_group(
        &node,
        "strict",
        "share.auto.offset.reset=earliest,share.record.lock.duration.ms=1000,share.delivery.count.limit=2",
    );
    produce(&node, "checked", 10);
    let topic = topic_uuid(&node.bootstrap(), "checked");
    let mut m = Member::new(&node, "strict", "m1");
    // An opening fetch may not acknowledge.
    let r = m.fetch(topic, vec![ack(0, 0, ACCEPT)], 0);
    assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
    assert_eq!(
        acquired(&m.fetch(topic, Vec::new(), 5_000)),
        vec![(0, 9, 1)]
    );
    // Another member finds nothing free and waits out its long poll.
    let mut other = Member::new(&node, "strict", "m2");
    let started = Instant::now();
    assert_eq!(acquired(&other.fetch(topic, Vec::new(), 300)), Vec::new());
    assert!(started.elapsed() >= Duration::from_millis(250));

    // v1 knows no renewals (type 4, KIP-1222), and a partition's batches
    // go in order: either refuses the partition's acknowledgements whole.
    for refused in [
        vec![ack(0, 0, RENEW)],
        vec![ack(5, 6, ACCEPT), ack(0, 1, ACCEPT)],
    ] {
        let r = m.acknowledge(topic, refused);
        assert_eq!(
            r.responses[0].partitions[0].error_code,
            ResponseError::InvalidRequest.code()
        );
    }
    let a = m.acknowledge(topic, vec![ack(0, 4, ACCEPT), ack(5, 9, RELEASE)]);
    assert_eq!(a.error_code, 0);
    assert_eq!(a.responses[0].partitions[0].error_code, 0);
    // Offsets no longer held, and a stale session epoch, are refused.
    let again = m.acknowledge(topic, vec![ack(0, 0, ACCEPT)]);
    assert_eq!(
        again.responses[0].partitions[0].error_code,
        ResponseError::InvalidRecordState.code()
    );
    m.epoch -= 1;
    let stale = m.acknowledge(topic, vec![ack(5, 5, ACCEPT)]);
    assert_eq!(
        stale.error_code,
        ResponseError::InvalidShareSessionEpoch.code()
    );
    m.epoch += 1;
    // The released five go to the next fetch, delivered a second time.
    assert_eq!(
        acquired(&other.fetch(topic, Vec::new(), 5_000)),
        vec![(5, 9, 2)]
    );
    // Their lock expires: delivered twice, the limit, they are archived.
    std::thread::sleep(Duration::from_millis(1_500));
    assert_eq!(acquired(&m.fetch(topic, Vec::new(), 300)), Vec::new());

    // A join must name its topics; a member with a stale epoch is fenced.
    coordinator_of(&node, GROUP_KEY, "strict");
    let mut client = WireClient::connect(&node.bootstrap());
    let join = |epoch: i32, topics: Option<Vec<TopicName>>| {
        ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s("strict")))
            .with_member_id(s("hb-member"))
            .with_member_epoch(epoch)
            .with_subscribed_topic_names(topics)
    };
    let r = client.send(1, &join(0, None));
    assert_eq!(r.error_code, ResponseError::InvalidRequest.code());
    let r = client.send(1, &join(0, Some(vec![TopicName(s("checked"))])));
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.member_epoch, 1);
    let assigned = r.assignment.expect("an assignment on joining");
    assert_eq!(assigned.topic_partitions[0].topic_id, topic);
    assert_eq!(assigned.topic_partitions[0].partitions, vec![0]);
    let r = client.send(1, &join(7, None));
    assert_eq!(r.error_code, ResponseError::FencedMemberEpoch.code());

    // The group id is a share group's: no offsets are committed under it
    // (the mirror's offset sync among others), and no consumer joins it.
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("strict")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s("checked")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(3)])]);
    let r = client.send(8, &commit);
    assert_eq!(
        r.topics[0].partitions[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    let consumer = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("strict")))
        .with_member_id(s("consumer-member"))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_topic_partitions(Some(Vec::new()))
        .with_subscribed_topic_names(Some(vec![TopicName(s("checked"))]));
    let r = client.send(1, &consumer);
    assert_eq!(r.error_code, ResponseError::GroupIdNotFound.code());
}

/// The default start (`latest`) is taken once and persisted: a restart
/// does not move it to the new end, nor lose what was acknowledged.
#[test]
fn acknowledgements_and_the_start_survive_a_kill_9_and_restart() {
    let mut node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "durable", 1, &[]);
    let topic = topic_uuid(&node.bootstrap(), "durable");
    let mut m = Member::new(&node, "keepers", "m1");
    // The first fetch finds the topic empty: the group starts at 0.
    assert_eq!(acquired(&m.fetch(topic, Vec::new(), 500)), Vec::new());
    produce(&node, "durable", 10);
    assert_eq!(
        acquired(&m.fetch(topic, Vec::new(), 5_000)),
        vec![(0, 9, 1)]
    );
    let a = m.acknowledge(topic, vec![ack(0, 4, ACCEPT)]);
    assert_eq!(a.responses[0].partitions[0].error_code, 0);

    node.kill9();
    node.restart();
    let mut after = Member::new(&node, "keepers", "m2");
    assert_eq!(
        acquired(&after.fetch(topic, Vec::new(), 10_000)),
        vec![(5, 9, 2)],
        "the acknowledged five are done; the others come again"
    );
}

/// Three replicas: the leader that delivered and took acknowledgements dies;
/// the new leader reads the state from the share coordinator.
#[test]
fn a_new_partition_leader_delivers_from_where_the_group_was() {
    let mut nodes = Ottla::cluster(3, SHARE_OVERRIDES);
    create_assigned_topic(&nodes[0], "moving", "1:2:3");
    configure_group(&nodes[0], "movers", "share.auto.offset.reset=earliest");
    produce(&nodes[0], "moving", 20);
    let topic = topic_uuid(&nodes[0].bootstrap(), "moving");
    let mut m = Member::new(&nodes[0], "movers", "m1");
    assert_eq!(
        acquired(&m.fetch(topic, Vec::new(), 5_000)),
        vec![(0, 19, 1)]
    );
    let a = m.acknowledge(topic, vec![ack(0, 9, ACCEPT)]);
    assert_eq!(a.responses[0].partitions[0].error_code, 0);

    nodes[0].kill9();
    let start = Instant::now();
    let leader = loop {
        let leader = describe_topic(&nodes[1], "moving")[&0].leader;
        if leader == 2 || leader == 3 {
            break leader;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no new leader");
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut after = Member::new(&nodes[leader as usize - 1], "movers", "m2");
    assert_eq!(
        acquired(&after.fetch(topic, Vec::new(), 10_000)),
        vec![(10, 19, 2)],
        "the acknowledged ten are done; the others come again"
    );
}

/// The start offsets kafka-share-groups.sh describes, by partition.
fn start_offsets(node: &Ottla, group: &str) -> BTreeMap<i32, i64> {
    share_groups_tool(node, &["--describe", "--group", group])
        .lines()
        .filter(|l| l.starts_with(group))
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?))
        })
        .collect()
}

/// Each partition's LAG as kafka-share-groups.sh --describe prints it.
fn lags(node: &Ottla, group: &str) -> BTreeMap<i32, i64> {
    share_groups_tool(node, &["--describe", "--group", group])
        .lines()
        .filter(|l| l.starts_with(group))
        .filter_map(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            Some((fields.get(2)?.parse().ok()?, fields.get(4)?.parse().ok()?))
        })
        .collect()
}

/// The first share operation of a fresh node may be an offset reset: it
/// creates the group, waiting out the share state topic's creation (it
/// answered COORDINATOR_NOT_AVAILABLE before). Deleting the offsets of a
/// group nobody uses is refused, as Kafka refuses it; deleting the topic
/// clears its share state.
#[test]
fn a_fresh_node_resets_an_unknown_group_and_refuses_deleting_one() {
    let node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "fresh", 2, &[]);
    let reset = share_groups_tool(
        &node,
        &[
            "--reset-offsets",
            "--group",
            "newcomers",
            "--topic",
            "fresh",
            "--to-earliest",
            "--execute",
        ],
    );
    assert!(!reset.contains("Error"), "{reset}");
    assert!(
        share_groups_tool(&node, &["--list"])
            .lines()
            .any(|l| l.trim() == "newcomers"),
        "the reset created the group"
    );
    assert_eq!(
        start_offsets(&node, "newcomers"),
        BTreeMap::from([(0, 0), (1, 0)]),
        "both partitions start at the earliest offset"
    );
    let refused = share_groups_tool(
        &node,
        &["--delete-offsets", "--group", "nobody", "--topic", "fresh"],
    );
    assert!(
        refused.contains("Error: Group nobody not found."),
        "{refused}"
    );

    // Deleting the topic takes its share partitions from the group and
    // their states from the share coordinator, as in Kafka.
    let bootstrap = node.bootstrap();
    ok(kafka_tool(
        "kafka-topics.sh",
        &[
            "--bootstrap-server",
            &bootstrap,
            "--delete",
            "--topic",
            "fresh",
        ],
        None,
    ));
    let start = Instant::now();
    while !start_offsets(&node, "newcomers").is_empty()
        || !node
            .log()
            .contains("removed the share states of deleted topics")
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the deleted topic's share partitions stayed: {:?}",
            start_offsets(&node, "newcomers")
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `kafka-share-groups.sh --reset-offsets` and `--delete-offsets`: refused
/// while the group has members; on the empty group, delivery starts over
/// where the reset says, or where `share.auto.offset.reset` says once the
/// offsets are deleted.
#[test]
fn an_offset_reset_starts_an_empty_group_over() {
    let node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "again", 1, &[]);
    configure_group(&node, "rereaders", "share.auto.offset.reset=earliest");
    produce(&node, "again", 10);
    let mut first = ConsoleConsumer::start_share(&node, "first", "again", "rereaders", &[]);
    assert_eq!(lines_of(&[&first], 10).len(), 10);
    let start = Instant::now();
    while start_offsets(&node, "rereaders").get(&0) != Some(&10) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the ten were never all acknowledged"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let bootstrap = node.bootstrap();
    let reset = [
        "--bootstrap-server",
        bootstrap.as_str(),
        "--reset-offsets",
        "--group",
        "rereaders",
        "--topic",
        "again",
        "--to-earliest",
        "--execute",
    ];
    refused(kafka_tool("kafka-share-groups.sh", &reset, None));
    first.stop();
    ok(kafka_tool("kafka-share-groups.sh", &reset, None));
    assert_eq!(
        start_offsets(&node, "rereaders").get(&0),
        Some(&0),
        "the empty group lists the partition it has state in, reset"
    );
    let mut second = ConsoleConsumer::start_share(&node, "second", "again", "rereaders", &[]);
    let lines = lines_of(&[&second], 10);
    let offsets: Vec<(i64, u32)> = lines.iter().map(|(_, o, d, _)| (*o, *d)).collect();
    assert_eq!(
        offsets,
        (0..10).map(|o| (o, 1)).collect::<Vec<_>>(),
        "all ten again, as new"
    );

    // `--delete-offsets`: refused while the group has members; on the
    // empty group, the partition forgets where the group was and starts
    // again by share.auto.offset.reset (earliest here).
    while start_offsets(&node, "rereaders").get(&0) != Some(&10) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the ten were never all acknowledged again"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let delete = [
        "--bootstrap-server",
        bootstrap.as_str(),
        "--delete-offsets",
        "--group",
        "rereaders",
        "--topic",
        "again",
    ];
    // The tool reports a refusal per topic and exits 0.
    let refusal = ok(kafka_tool("kafka-share-groups.sh", &delete, None));
    assert!(refusal.contains("has members"), "{refusal}");
    second.stop();
    let deleted = ok(kafka_tool("kafka-share-groups.sh", &delete, None));
    assert!(!deleted.contains("Error"), "{deleted}");
    let third = ConsoleConsumer::start_share(&node, "third", "again", "rereaders", &[]);
    assert_eq!(lines_of(&[&third], 10).len(), 10, "all ten once more");
}

/// Waits until kafka-share-groups.sh describes `group`'s partition 0 at
/// `start`.
fn await_start(node: &Ottla, group: &str, start: i64) {
    let begun = Instant::now();
    while start_offsets(node, group).get(&0) != Some(&start) {
        assert!(
            begun.elapsed() < Duration::from_secs(30),
            "{group} never reached start offset {start}: {:?}",
            start_offsets(node, group)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A share group is stored in `__consumer_offsets` (Kafka's records 10-15):
/// after a kill -9 and restart, the empty group is still listed and
/// described with the partitions it has state in. Deleting it deletes that
/// state too: a new group of the same id starts over.
#[test]
fn a_share_group_outlives_a_restart_and_its_deletion_takes_its_state() {
    let mut node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "kept", 1, &[]);
    configure_group(&node, "keepers", "share.auto.offset.reset=earliest");
    produce(&node, "kept", 10);
    let mut first = ConsoleConsumer::start_share(&node, "first", "kept", "keepers", &[]);
    assert_eq!(lines_of(&[&first], 10).len(), 10);
    await_start(&node, "keepers", 10);
    first.stop();

    node.kill9();
    node.restart();
    let listed = share_groups_tool(&node, &["--list"]);
    assert!(
        listed.lines().any(|l| l.trim() == "keepers"),
        "the group survives the restart: {listed}"
    );
    let state = share_groups_tool(&node, &["--describe", "--group", "keepers", "--state"]);
    assert!(state.contains("Empty"), "{state}");
    await_start(&node, "keepers", 10);

    let deleted = share_groups_tool(&node, &["--delete", "--group", "keepers"]);
    assert!(deleted.contains("was successful"), "{deleted}");
    let listed = share_groups_tool(&node, &["--list"]);
    assert!(!listed.lines().any(|l| l.trim() == "keepers"), "{listed}");
    let again = ConsoleConsumer::start_share(&node, "again", "kept", "keepers", &[]);
    let offsets: Vec<i64> = lines_of(&[&again], 10)
        .iter()
        .map(|(_, o, _, _)| *o)
        .collect();
    assert_eq!(
        offsets,
        (0..10).collect::<Vec<_>>(),
        "the deleted group's state went with it"
    );
}

/// librdkafka's share consumer (confluent-kafka's `ShareConsumer`, KIP-932
/// "preview" in librdkafka 2.16): explicit acknowledgement with one
/// RELEASE and one REJECT; then two implicit-mode consumers on one group.
/// Prints each value's delivery counts, then the second phase's values.
/// (A record polled but never acknowledged when its consumer closes goes
/// back to the group, with its delivery count as it was, as in Kafka.)
const LIBRDKAFKA_SHARE: &str = r#"
import json, sys, threading, time
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

bootstrap, topic, group = sys.argv[1:4]
p = Producer({"bootstrap.servers": bootstrap})
def produce(prefix):
    for i in range(20):
        p.produce(topic, value=f"{prefix}{i}".encode(), partition=i % 2)
    p.flush(30)

produce("a")
c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([topic])
counts, released = {}, False
deadline = time.time() + 60
while time.time() < deadline and not (len(counts) == 20 and len(counts["a3"]) == 2):
    msgs = c.poll(1.0)
    for m in msgs:
        if m.error():
            raise SystemExit(f"poll error: {m.error()}")
        v = m.value().decode()
        counts.setdefault(v, []).append(m.delivery_count())
        if v == "a3" and not released:
            released = True
            c.acknowledge(m, AcknowledgeType.RELEASE)
        elif v == "a5":
            c.acknowledge(m, AcknowledgeType.REJECT)
        else:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
    if len(msgs):
        c.commit_sync(30)
# Nothing more comes: the rejected record stays archived.
for _ in range(3):
    for m in c.poll(1.0):
        counts.setdefault(m.value().decode(), []).append(m.delivery_count())
c.close()
print(json.dumps(counts, sort_keys=True))

produce("b")
got, lock = [], threading.Lock()
def consume(name):
    sc = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    sc.subscribe([topic])
    end = time.time() + 60
    while time.time() < end:
        with lock:
            if len(got) >= 20:
                break
        msgs = sc.poll(0.5)
        for m in msgs:
            if not m.error():
                with lock:
                    got.append(m.value().decode())
        # Implicit mode accepts a poll's records on the next poll or
        # commit; librdkafka's close does not, so commit before leaving.
        if len(msgs):
            sc.commit_sync(30)
    sc.close()
threads = [threading.Thread(target=consume, args=(n,)) for n in ("x", "y")]
for t in threads: t.start()
for t in threads: t.join()
time.sleep(1)
print(json.dumps(sorted(got)))
"#;

#[test]
fn librdkafka_share_consumers_acknowledge_release_and_reject() {
    let node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "rk", 2, &[]);
    configure_group(&node, "rk-group", "share.auto.offset.reset=earliest");
    let out = ok(python_script(
        LIBRDKAFKA_SHARE,
        &[&node.bootstrap(), "rk", "rk-group"],
    ));
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with(['{', '['])).collect();
    assert_eq!(lines.len(), 2, "{out}");
    let counts: BTreeMap<String, Vec<u32>> = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(counts.len(), 20, "{counts:?}");
    for (value, deliveries) in &counts {
        let want: &[u32] = if value == "a3" { &[1, 2] } else { &[1] };
        assert_eq!(deliveries, want, "{value}: released once, else once");
    }
    let mut second: Vec<String> = serde_json::from_str(lines[1]).unwrap();
    second.sort();
    let mut want: Vec<String> = (0..20).map(|i| format!("b{i}")).collect();
    want.sort();
    assert_eq!(
        second, want,
        "each record to one of the two consumers, once"
    );
    // Everything was acknowledged or archived: both partitions start at 20.
    let start = Instant::now();
    loop {
        let starts = start_offsets(&node, "rk-group");
        if starts.values().all(|&s| s == 20) && starts.len() == 2 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{starts:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Transactions from confluent-kafka (librdkafka): ten committed, six
/// aborted, one more committed, on one partition.
const TRANSACTIONS: &str = r#"
import sys
from confluent_kafka import Producer

bootstrap, topic = sys.argv[1:3]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "share-txn", "linger.ms": 5})
p.init_transactions(30)
for values in ([f"committed-{i}" for i in range(10)], [f"aborted-{i}" for i in range(6)], ["committed-10"]):
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=v, partition=0)
    if values[0].startswith("aborted"):
        p.flush(30)
        p.abort_transaction(30)
    else:
        p.commit_transaction(30)
"#;

#[test]
fn read_committed_share_groups_skip_aborted_transactions() {
    let node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "txns", 1, &[]);
    ok(python_script(TRANSACTIONS, &[&node.bootstrap(), "txns"]));
    configure_group(
        &node,
        "committed-only",
        "share.auto.offset.reset=earliest,share.isolation.level=read_committed",
    );
    configure_group(&node, "everything", "share.auto.offset.reset=earliest");
    let committed = ConsoleConsumer::start_share(&node, "committed", "txns", "committed-only", &[]);
    let everything = ConsoleConsumer::start_share(&node, "everything", "txns", "everything", &[]);
    let values = |lines: Vec<ShareRecord>| -> Vec<String> {
        let mut v: Vec<String> = lines.into_iter().map(|(_, _, _, v)| v).collect();
        v.sort();
        v
    };
    let mut expected: Vec<String> = (0..=10).map(|i| format!("committed-{i}")).collect();
    expected.sort();
    assert_eq!(values(lines_of(&[&committed], 11)), expected);
    let all = values(lines_of(&[&everything], 17));
    assert_eq!(all.len(), 17);
    assert_eq!(all.iter().filter(|v| v.starts_with("aborted")).count(), 6);
}

/// Runs `tests/java/ShareRenew.java` on `topic` as `group` with 2 s
/// locks; its output, then stdout and stderr for a failure's report.
fn share_renew(node: &Ottla, topic: &str, group: &str) -> (std::process::Output, String) {
    let libs = kafka_bin().parent().unwrap().join("libs");
    let run = std::process::Command::new("timeout")
        .arg("180")
        .arg("java")
        .arg("-cp")
        .arg(format!("{}/*", libs.display()))
        .arg(repo_root().join("tests/java/ShareRenew.java"))
        .args([&node.bootstrap(), topic, group, "2000"])
        .output()
        .expect("running java");
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    (run, report)
}

/// (offset, delivery count) pairs of a ShareRenew.java line's records.
fn share_renew_records(line: &str) -> Vec<(i64, i16)> {
    line.split_whitespace()
        .skip(1)
        .map(|r| {
            let (offset, count) = r.split_once(':').expect("offset:count");
            (offset.parse().unwrap(), count.parse().unwrap())
        })
        .collect()
}

#[test]
fn kafka_44_share_consumers_limit_records_and_renew_their_locks() {
    let metrics_port = free_port();
    let metrics = format!("http://127.0.0.1:{metrics_port}");
    let mut overrides = SHARE_OVERRIDES.to_vec();
    overrides.push(("metrics.listener", &metrics));
    let node = Ottla::start(&overrides);
    create_topic(&node, "renewed", 1, &[]);
    configure_group(
        &node,
        "renewers",
        "share.auto.offset.reset=earliest,share.record.lock.duration.ms=2000",
    );
    let (run, report) = share_renew(&node, "renewed", "renewers");
    assert!(run.status.success() && report.contains("DONE"), "{report}");
    let out = String::from_utf8_lossy(&run.stdout);
    let lines = |tag: &str| -> Vec<Vec<(i64, i16)>> {
        out.lines()
            .filter(|l| l.split_whitespace().next() == Some(tag))
            .map(share_renew_records)
            .collect()
    };
    // Record limit: three of the ten-record batch, not the whole batch.
    let held = vec![(0, 1), (1, 1), (2, 1)];
    assert_eq!(lines("LIMITED"), vec![held.clone()], "{report}");
    // Renewed for three lock durations: still the member's, first delivery.
    let renewed = lines("RENEWED");
    assert!(renewed.len() >= 3, "{report}");
    assert!(renewed.iter().all(|r| *r == held), "{report}");
    assert_eq!(lines("ACCEPTED"), vec![held], "{report}");
    // The other member never saw them, and accepted the rest once each;
    // batch-optimized, it got more than its max.poll.records at once.
    let batched = lines("BATCHED");
    let mut offsets: Vec<i64> = batched.iter().flatten().map(|(o, _)| *o).collect();
    offsets.sort_unstable();
    assert_eq!(offsets, (3..10).collect::<Vec<_>>(), "{report}");
    assert!(batched.iter().any(|b| b.len() > 3), "{report}");

    // A group that disabled renewals refuses them, as Kafka does.
    configure_group(
        &node,
        "no-renewals",
        "share.auto.offset.reset=earliest,share.renew.acknowledge.enable=false",
    );
    let (run, out) = share_renew(&node, "renewed", "no-renewals");
    assert!(!run.status.success(), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("ACK-ERROR") && l.contains("InvalidRecordStateException")),
        "{out}"
    );
    // ShareAcknowledge v2's answers are Ottla's own encoding; their errors
    // are counted all the same.
    let refused = sum(
        &scrape(metrics_port),
        "kafka_network_request_errors_total",
        &[
            "request=\"ShareAcknowledge\"",
            "error=\"INVALID_RECORD_STATE\"",
        ],
    );
    assert!(refused.is_some_and(|n| n >= 1.0), "{refused:?}");
}

/// The queue topic's records as kafka-console-consumer.sh prints them with
/// headers and keys: (headers, key, value) each.
fn dead_letters(node: &Ottla, topic: &str, count: usize) -> Vec<(String, String, String)> {
    let printing = [
        "--formatter-property",
        "print.headers=true",
        "--formatter-property",
        "print.key=true",
    ];
    let out = consume_from_beginning(node, topic, count, &printing);
    let mut letters: Vec<(String, String, String)> = out
        .lines()
        .filter(|l| l.starts_with("__dlq."))
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some((f.next()?.into(), f.next()?.into(), f.next()?.into()))
        })
        .collect();
    letters.sort();
    letters
}

/// Each partition's end offset, by kafka-get-offsets.sh.
fn end_offsets(node: &Ottla, topic: &str) -> BTreeMap<i32, i64> {
    ok(kafka_tool(
        "kafka-get-offsets.sh",
        &["--bootstrap-server", &node.bootstrap(), "--topic", topic],
        None,
    ))
    .lines()
    .filter_map(|l| {
        let mut f = l.strip_prefix(topic)?.strip_prefix(':')?.split(':');
        Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
    })
    .collect()
}

fn await_starts(node: &Ottla, group: &str, want: &BTreeMap<i32, i64>) {
    let start = Instant::now();
    loop {
        let starts = start_offsets(node, group);
        if &starts == want {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{group}: {starts:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// share.version 2 (Kafka 4.4's level): a share group's dead-letter queue.
/// What lands there was compared with Kafka 4.4.0 running the same steps:
/// the same records, headers and copies.
#[test]
fn rejected_and_exhausted_records_go_to_the_groups_dead_letter_queue() {
    let metrics_port = free_port();
    let metrics = format!("http://127.0.0.1:{metrics_port}");
    let mut overrides = SHARE_OVERRIDES.to_vec();
    overrides.push(("errors.deadletterqueue.auto.create.topics.enable", "true"));
    overrides.push(("metrics.listener", &metrics));
    let node = Ottla::start(&overrides);
    create_topic(&node, "orders", 2, &[]);
    create_topic(
        &node,
        "dlq.orders",
        1,
        &["--config", "errors.deadletterqueue.group.enable=true"],
    );
    create_topic(&node, "dlq.closed", 1, &[]);
    let features = ok(kafka_tool(
        "kafka-features.sh",
        &["--bootstrap-server", &node.bootstrap(), "describe"],
        None,
    ));
    assert!(
        features
            .lines()
            .any(|l| l.contains("share.version") && l.contains("FinalizedVersionLevel: 2")),
        "{features}"
    );
    let reset = "share.auto.offset.reset=earliest";
    configure_group(
        &node,
        "rejecting",
        &format!("{reset},errors.deadletterqueue.topic.name=dlq.orders,errors.deadletterqueue.copy.record.enable=true"),
    );
    configure_group(
        &node,
        "releasing",
        &format!(
            "{reset},errors.deadletterqueue.topic.name=dlq.orders,share.delivery.count.limit=2"
        ),
    );
    configure_group(
        &node,
        "closed",
        &format!("{reset},errors.deadletterqueue.topic.name=dlq.closed"),
    );
    configure_group(
        &node,
        "creating",
        &format!("{reset},errors.deadletterqueue.topic.name=dlq.created"),
    );
    produce(&node, "orders", 6);
    let runs: [(&str, &str, usize); 4] = [
        ("rejecting", "--reject", 6),
        ("releasing", "--release", 12),
        ("closed", "--reject", 6),
        ("creating", "--reject", 6),
    ];
    for (group, how, deliveries) in runs {
        let mut c = ConsoleConsumer::start_share(&node, group, "orders", group, &[how]);
        assert_eq!(lines_of(&[&c], deliveries).len(), deliveries, "{group}");
        c.stop();
    }
    let letters = dead_letters(&node, "dlq.orders", 12);
    assert_eq!(letters.len(), 12, "{letters:?}");
    for (group, copied, count, message) in [
        ("rejecting", true, 1, "Offset rejected by client."),
        (
            "releasing",
            false,
            2,
            "Offset delivery count exceeded the threshold.",
        ),
    ] {
        let of_group: Vec<&(String, String, String)> = letters
            .iter()
            .filter(|(h, _, _)| h.contains(&format!("__dlq.errors.group:{group},")))
            .collect();
        assert_eq!(of_group.len(), 6, "{group}: {letters:?}");
        let mut values: Vec<&str> = Vec::new();
        for (headers, key, value) in of_group {
            assert!(headers.starts_with("__dlq.errors.topic:orders,__dlq.errors.partition:"));
            assert!(
                headers.ends_with(&format!(
                    "__dlq.errors.delivery.count:{count},__dlq.errors.message:{message}"
                )),
                "{headers}"
            );
            if copied {
                assert_eq!(&key.replace("key", "value"), value);
                values.push(value);
            } else {
                assert_eq!((key.as_str(), value.as_str()), ("null", "null"));
            }
        }
        if copied {
            values.sort();
            let want: Vec<String> = (0..6).map(|i| format!("value-{i}")).collect();
            assert_eq!(values, want);
        }
    }
    // Each source offset once per group: partitions hold 0..n each.
    let offsets: Vec<&str> = letters
        .iter()
        .filter_map(|(h, _, _)| h.split("__dlq.errors.offset:").nth(1)?.split(',').next())
        .collect();
    assert_eq!(offsets.len(), 12);
    // A queue topic not opened to share groups gets nothing, and the
    // records are archived all the same: every group moved past them.
    assert_eq!(end_offsets(&node, "dlq.closed"), BTreeMap::from([(0, 0)]));
    let ends = end_offsets(&node, "orders");
    assert_eq!(ends.values().sum::<i64>(), 6, "{ends:?}");
    for group in ["rejecting", "releasing", "closed", "creating"] {
        await_starts(&node, group, &ends);
    }
    // A missing queue topic is created, open to share groups.
    let created = dead_letters(&node, "dlq.created", 6);
    assert_eq!(created.len(), 6, "{created:?}");
    let configs = ok(kafka_tool(
        "kafka-configs.sh",
        &[
            "--bootstrap-server",
            &node.bootstrap(),
            "--describe",
            "--entity-type",
            "topics",
            "--entity-name",
            "dlq.created",
        ],
        None,
    ));
    assert!(
        configs.contains("errors.deadletterqueue.group.enable=true"),
        "{configs}"
    );
    // 12 + 6 written; the 6 the closed queue refused archived unwritten.
    let scraped = scrape(metrics_port);
    let dead_letters = |outcome: &str| {
        let label = format!("outcome=\"{outcome}\"");
        sum(
            &scraped,
            "kafka_server_share_group_dead_letters_total",
            &[&label],
        )
    };
    assert_eq!(dead_letters("written"), Some(18.0));
    assert_eq!(dead_letters("unwritten"), Some(6.0));
}

/// The share coordinator's APIs at Kafka 4.4's versions (KIP-1226), found
/// with FindCoordinator's share key type (malformed keys refused): a
/// WriteShareGroupState v1 carries the leader's delivery complete count,
/// which the coordinator counts itself from the batches, and
/// ReadShareGroupStateSummary v1 answers it.
#[test]
fn state_writes_and_summaries_carry_the_delivery_complete_count_at_v1() {
    use kafka_protocol::messages::initialize_share_group_state_request::{
        InitializeStateData, PartitionData as InitPartition,
    };
    use kafka_protocol::messages::read_share_group_state_summary_request::{
        PartitionData as SummaryPartition, ReadStateSummaryData,
    };
    use kafka_protocol::messages::{
        FindCoordinatorRequest, InitializeShareGroupStateRequest,
        ReadShareGroupStateSummaryRequest, WriteShareGroupStateResponse,
    };
    use kafka_protocol::protocol::{Decodable, Encodable};
    use ottla_protocol::schema::{decode_body, encode_body};
    use ottla_protocol::share_lag::{
        StateSummaryResponseBody, WriteShareGroupStateBody, WriteStateBatch, WriteStatePartition,
        WriteStateTopic,
    };

    let node = Ottla::start(SHARE_OVERRIDES);
    create_topic(&node, "counted", 1, &[]);
    let topic = topic_uuid(&node.bootstrap(), "counted");
    // The state topic is created on the first lookup of a share key.
    let key = format!("counting:{}:0", ottla_protocol::names::uuid_text(&topic));
    coordinator_of(&node, SHARE_KEY, &key);
    let mut client = WireClient::connect(&node.bootstrap());
    for malformed in ["counting", "counting:not-an-id:0", &format!("{key}x")] {
        let r = client.send(
            6,
            &FindCoordinatorRequest::default()
                .with_key_type(SHARE_KEY)
                .with_coordinator_keys(vec![s(malformed)]),
        );
        assert_eq!(
            r.coordinators[0].error_code,
            ResponseError::InvalidRequest.code(),
            "{malformed}"
        );
    }
    let init = InitializeShareGroupStateRequest::default()
        .with_group_id(s("counting"))
        .with_topics(vec![InitializeStateData::default()
            .with_topic_id(topic)
            .with_partitions(vec![InitPartition::default()
                .with_partition(0)
                .with_state_epoch(1)
                .with_start_offset(0)])]);
    let start = Instant::now();
    loop {
        let r = client.send(0, &init);
        let code = r.results[0].partitions[0].error_code;
        if code == 0 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "error {code}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let batch = |first, last, delivery_state| WriteStateBatch {
        first_offset: first,
        last_offset: last,
        delivery_state,
        delivery_count: 1,
        ..Default::default()
    };
    let write = WriteShareGroupStateBody {
        group_id: "counting".into(),
        topics: vec![WriteStateTopic {
            topic_id: topic,
            partitions: vec![WriteStatePartition {
                partition: 0,
                state_epoch: 1,
                leader_epoch: 0,
                start_offset: 2,
                // What a leader says; the coordinator counts 3 + 2 itself.
                delivery_complete_count: 99,
                state_batches: vec![batch(2, 4, 2), batch(5, 5, 0), batch(6, 7, 4)],
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let body = encode_body(&write, "WriteShareGroupStateRequest", 1..=1, 1).unwrap();
    let mut reply = client.send_raw(85, 1, 2, &body, 1);
    // v1's response is v0's layout (kafka-protocol 0.18 stops at v0).
    let written = WriteShareGroupStateResponse::decode(&mut reply, 0).unwrap();
    assert_eq!(
        written.results[0].partitions[0].error_code, 0,
        "{written:?}"
    );

    let summary = ReadShareGroupStateSummaryRequest::default()
        .with_group_id(s("counting"))
        .with_topics(vec![ReadStateSummaryData::default()
            .with_topic_id(topic)
            .with_partitions(
                vec![SummaryPartition::default().with_partition(0)],
            )]);
    // v1's request is v0's layout.
    let mut v1 = bytes::BytesMut::new();
    summary.encode(&mut v1, 0).unwrap();
    let reply = client.send_raw(87, 1, 2, &v1, 1);
    let answer: StateSummaryResponseBody =
        decode_body(&reply, "ReadShareGroupStateSummaryResponse", 1..=1, 1).unwrap();
    let p = &answer.results[0].partitions[0];
    assert_eq!((p.error_code, p.start_offset), (0, 2), "{p:?}");
    assert_eq!(p.delivery_complete_count, 5);
    // v0 has no count.
    let v0 = client.send(0, &summary);
    assert_eq!(v0.results[0].partitions[0].start_offset, 2);
}
