//! The replica manager on a real broker: who may append and why not, the
//! high watermark waiting for the ISR, followers rejoining the ISR, and a
//! follower whose log went past the leader's history told where to truncate.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use ottla_controller::records::{CONFIG_RESOURCE_TOPIC, MIRROR_NAME_CONFIG};
use ottla_controller::MetadataRecord;
use ottla_protocol::batch::{BatchBuilder, SimpleRecord};
use ottla_protocol::mirror::errors::READ_ONLY_TOPIC;
use ottla_storage::manager::TopicPartition;
use ottla_storage::producer_state::AppendOrigin;

use crate::apis::test_support::{append, change_leader, create_topic, test_broker, wait_for};
use crate::broker::Broker;
use crate::replica::ProduceOutcome;

fn one_record() -> Bytes {
    Bytes::from(BatchBuilder::default().build(&[SimpleRecord {
        timestamp: 1,
        value: Some(b"v".to_vec()),
        ..Default::default()
    }]))
}

fn client_append(broker: &Broker, tp: &TopicPartition, acks: i16) -> ProduceOutcome {
    broker
        .replicas
        .append(tp, &one_record(), acks, AppendOrigin::Client)
}

/// Sets (or, with `None`, deletes) the topic's `mirror.name`.
fn bind_to_mirror(broker: &Broker, topic: &str, binding: Option<&str>) {
    let record = MetadataRecord::Config {
        resource_type: CONFIG_RESOURCE_TOPIC,
        resource_name: topic.to_string(),
        name: MIRROR_NAME_CONFIG.to_string(),
        value: binding.map(str::to_string),
    };
    wait_for(
        &broker.controller,
        broker.controller.commit_records(vec![record]),
    )
    .unwrap();
    broker.replicas.apply_image(&broker.controller.image());
}

#[test]
fn appends_are_refused_where_this_broker_may_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    create_topic(&broker, "orders", 1);
    let tp = TopicPartition::new("orders", 0);

    let missing = client_append(&broker, &TopicPartition::new("orders", 7), 1);
    assert_eq!(missing.error, Some(ResponseError::UnknownTopicOrPartition));

    assert_eq!(client_append(&broker, &tp, -1).error, None, "the leader");
    change_leader(&broker, &tp, 2);
    let follower = client_append(&broker, &tp, 1);
    assert_eq!(follower.error, Some(ResponseError::NotLeaderOrFollower));
    change_leader(&broker, &tp, 1);

    // acks=all below min.insync.replicas: refused before anything is written.
    set_replicas(&broker, &tp, &[1, 2], &[1]);
    let isr_config = MetadataRecord::Config {
        resource_type: CONFIG_RESOURCE_TOPIC,
        resource_name: "orders".to_string(),
        name: "min.insync.replicas".to_string(),
        value: Some("2".to_string()),
    };
    wait_for(
        &broker.controller,
        broker.controller.commit_records(vec![isr_config]),
    )
    .unwrap();
    broker.replicas.apply_image(&broker.controller.image());
    let end = broker.replicas.offsets(&tp).unwrap().log_end;
    let short = client_append(&broker, &tp, -1);
    assert_eq!(short.error, Some(ResponseError::NotEnoughReplicas));
    assert!(
        short.message.unwrap().contains("min.isr requirement of 2"),
        "the operator is told why"
    );
    assert_eq!(broker.replicas.offsets(&tp).unwrap().log_end, end);
    assert_eq!(client_append(&broker, &tp, 1).error, None, "acks=1 still");
}

#[test]
fn a_mirrored_topic_is_read_only_until_its_failover_completes() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    create_topic(&broker, "mirrored", 1);
    let tp = TopicPartition::new("mirrored", 0);
    let partition = broker.replicas.partition(&tp).unwrap();

    bind_to_mirror(&broker, "mirrored", Some("east"));
    assert!(partition.is_mirror_log());
    let refused = client_append(&broker, &tp, 1);
    assert_eq!(
        refused.error,
        Some(ResponseError::Unknown(READ_ONLY_TOPIC.code))
    );
    let message = refused.message.unwrap();
    assert!(
        message.contains("mirror 'east'") && message.contains("ottla mirrors --remove"),
        "{message}"
    );
    // The mirror itself and the coordinators still write.
    let mirrored = broker
        .replicas
        .append(&tp, &one_record(), 1, AppendOrigin::Coordinator);
    assert_eq!(mirrored.error, None);

    // Paused: still read-only, naming the mirror without its suffix.
    bind_to_mirror(&broker, "mirrored", Some("east.paused"));
    let paused = client_append(&broker, &tp, 1);
    assert!(paused.message.unwrap().contains("mirror 'east'"));

    // Failover under way: retriable, so producers wait it out.
    bind_to_mirror(&broker, "mirrored", Some("east.removed"));
    let stopping = client_append(&broker, &tp, 1);
    assert_eq!(stopping.error, Some(ResponseError::NotEnoughReplicas));
    assert!(stopping.message.unwrap().contains("failover in progress"));

    // The mirror runtime says the failover is done: writable.
    partition.set_mirror_stopped(true);
    assert!(!partition.is_mirror_log());
    assert_eq!(client_append(&broker, &tp, 1).error, None);
}

fn set_replicas(broker: &Broker, tp: &TopicPartition, replicas: &[i32], isr: &[i32]) {
    let topic_id = broker
        .controller
        .image()
        .topic_by_name(&tp.topic)
        .unwrap()
        .id;
    let change = MetadataRecord::PartitionChange {
        topic_id,
        partition: tp.partition,
        leader: None,
        isr: Some(isr.to_vec()),
        replicas: Some(replicas.to_vec()),

        elr: None,
        last_known_elr: None,
    };
    crate::apis::test_support::wait_for(
        &broker.controller,
        broker.controller.commit_records(vec![change]),
    )
    .unwrap();
    broker.replicas.apply_image(&broker.controller.image());
}

/// Registers broker `id` with the controller, fenced or not.
fn register(broker: &Broker, id: i32, fenced: bool) {
    crate::apis::test_support::wait_for(
        &broker.controller,
        broker.controller.commit_records(vec![
            MetadataRecord::RegisterBroker {
                broker_id: id,
                incarnation_id: uuid::Uuid::new_v4(),
                endpoints: Vec::new(),
                rack: None,
            },
            MetadataRecord::BrokerFence {
                broker_id: id,
                fenced,
            },
        ]),
    )
    .unwrap();
    broker.replicas.apply_image(&broker.controller.image());
}

fn high_watermark(broker: &Broker, tp: &TopicPartition) -> i64 {
    broker.replicas.offsets(tp).unwrap().high_watermark
}

#[test]
fn the_high_watermark_waits_for_every_isr_member() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    let tp = TopicPartition::new("replicated", 0);
    create_topic(&broker, "replicated", 1);
    append(&broker, &tp, &BatchBuilder::default(), &[1, 2, 3]);
    assert_eq!(high_watermark(&broker, &tp), 3, "alone in the ISR");

    set_replicas(&broker, &tp, &[1, 2], &[1, 2]);
    append(&broker, &tp, &BatchBuilder::default(), &[4, 5]);
    assert_eq!(
        high_watermark(&broker, &tp),
        3,
        "follower 2 has not fetched"
    );
    assert_eq!(broker.replicas.follower_fetched(&tp, 2, 4, 0), None);
    assert_eq!(high_watermark(&broker, &tp), 4);
    broker.replicas.follower_fetched(&tp, 2, 5, 0);
    assert_eq!(high_watermark(&broker, &tp), 5);
}

#[test]
fn a_caught_up_follower_asks_to_rejoin_the_isr() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    let tp = TopicPartition::new("rejoin", 0);
    create_topic(&broker, "rejoin", 1);
    register(&broker, 3, false);
    set_replicas(&broker, &tp, &[1, 3], &[1]);
    append(&broker, &tp, &BatchBuilder::default(), &[1, 2]);
    let mut changes = broker.take_isr_changes().expect("not taken yet");
    broker.replicas.follower_fetched(&tp, 3, 1, 0);
    assert!(changes.try_recv().is_err(), "behind the high watermark");
    broker.replicas.follower_fetched(&tp, 3, 2, 0);
    let change = changes.try_recv().expect("an ISR expansion");
    assert_eq!(change.isr, vec![1, 3]);
    broker.replicas.follower_fetched(&tp, 3, 2, 0);
    assert!(
        changes.try_recv().is_err(),
        "one request until the metadata answers"
    );
}

/// A fenced follower that still fetches is not asked back into the ISR
/// (the controller would refuse it at every fetch), until it is unfenced.
#[test]
fn a_fenced_follower_is_not_asked_back_into_the_isr() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    let tp = TopicPartition::new("fenced", 0);
    create_topic(&broker, "fenced", 1);
    register(&broker, 3, true);
    set_replicas(&broker, &tp, &[1, 3], &[1]);
    append(&broker, &tp, &BatchBuilder::default(), &[1, 2]);
    let mut changes = broker.take_isr_changes().expect("not taken yet");
    for _ in 0..3 {
        broker.replicas.follower_fetched(&tp, 3, 2, 0);
    }
    assert!(changes.try_recv().is_err(), "fenced: nothing to ask");
    register(&broker, 3, false);
    broker.replicas.follower_fetched(&tp, 3, 2, 0);
    assert_eq!(changes.try_recv().expect("unfenced").isr, vec![1, 3]);
}

#[test]
fn a_diverging_follower_is_told_where_its_epoch_ends() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    let tp = TopicPartition::new("diverge", 0);
    create_topic(&broker, "diverge", 1);
    append(&broker, &tp, &BatchBuilder::default(), &[1, 2, 3]);
    // Leadership went away and came back: epoch 0 ends at 3, epoch 2 starts.
    change_leader(&broker, &tp, -1);
    change_leader(&broker, &tp, 1);
    append(&broker, &tp, &BatchBuilder::default(), &[4, 5]);
    set_replicas(&broker, &tp, &[1, 2], &[1, 2]);
    // The follower wrote epoch 1 data the leader never had, up to 5.
    assert_eq!(broker.replicas.follower_fetched(&tp, 2, 5, 1), Some((0, 3)));
    // One that stopped inside epoch 0 just goes on fetching.
    assert_eq!(broker.replicas.follower_fetched(&tp, 2, 2, 0), None);
}

/// Kafka 4's rule (KIP-966): an acks=1 write below min.insync.replicas is
/// stored, but not committed until the ISR is back at min ISR.
#[test]
fn the_high_watermark_stands_still_while_the_isr_is_below_min_isr() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    let tp = TopicPartition::new("strict", 0);
    let topic = ottla_controller::NewTopic {
        name: "strict".into(),
        num_partitions: 1,
        replication_factor: -1,
        configs: [("min.insync.replicas".to_string(), Some("2".to_string()))].into(),
        ..Default::default()
    };
    for (_, r) in crate::apis::test_support::wait_for(
        &broker.controller,
        broker.controller.create_topics(vec![topic], false),
    ) {
        r.unwrap();
    }
    broker.replicas.apply_image(&broker.controller.image());
    register(&broker, 2, false);
    set_replicas(&broker, &tp, &[1, 2], &[1]);
    let records = [ottla_protocol::batch::SimpleRecord {
        value: Some(b"v".to_vec()),
        ..Default::default()
    }];
    let batch = bytes::Bytes::from(BatchBuilder::default().build(&records));
    let appended = broker.replicas.append(
        &tp,
        &batch,
        1,
        ottla_storage::producer_state::AppendOrigin::Client,
    );
    assert_eq!(appended.error, None, "{:?}", appended.message);
    assert_eq!(broker.replicas.offsets(&tp).unwrap().log_end, 1);
    assert_eq!(high_watermark(&broker, &tp), 0, "ISR [1] is below 2");
    broker.replicas.follower_fetched(&tp, 2, 1, 0);
    assert_eq!(high_watermark(&broker, &tp), 0, "2 is still out of the ISR");
    set_replicas(&broker, &tp, &[1, 2], &[1, 2]);
    broker.replicas.follower_fetched(&tp, 2, 1, 0);
    assert_eq!(high_watermark(&broker, &tp), 1, "back at min ISR");
}
