//! The mirror runtime's batching, tried against a real broker: epoch bumps
//! and state writes asked at once share controller commits and appends.

use std::sync::Arc;

use ottla_mirror::records::MirrorPartitionKey;
use ottla_mirror::runtime::epoch_bumps::{EpochBump, EpochBumps};
use ottla_mirror::runtime::state_store::MIRROR_STATE_TOPIC;
use ottla_mirror::runtime::state_writes::{StateWrite, StateWriteError};
use ottla_mirror::state::MirrorPartitionState as State;
use ottla_protocol::batch::BatchIter;
use ottla_storage::log::FetchIsolation;
use ottla_storage::manager::TopicPartition;
use uuid::Uuid;

use crate::apis::test_support::{create_topic, test_broker};

/// Bumps asked at once all land, each partition at its own epoch, in
/// far fewer controller calls than partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn concurrent_bumps_share_commits() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    create_topic(&broker, "t", 200);
    let image = broker.controller.image();
    let topic = image.topic_by_name("t").unwrap();
    let bumps = Arc::new(EpochBumps::start(broker.controller.clone(), 1));
    let asks: Vec<_> = topic
        .partitions
        .iter()
        .map(|(&partition, p)| {
            let bumps = bumps.clone();
            let bump = EpochBump {
                topic_id: topic.id,
                partition,
                seen_epoch: p.leader_epoch,
                at_least: 10 + partition,
            };
            (
                partition,
                tokio::spawn(async move { bumps.bump(bump).await }),
            )
        })
        .collect();
    for (partition, ask) in asks {
        assert_eq!(ask.await.unwrap(), Ok(10 + partition));
    }
    let after = broker.controller.image();
    for (&partition, p) in &after.topic_by_name("t").unwrap().partitions {
        assert_eq!(p.leader_epoch, 10 + partition);
    }
    assert!(
        bumps.commits() <= 5,
        "200 concurrent bumps took {} controller calls",
        bumps.commits()
    );
}

/// Batches in the `__mirror_state` logs.
fn state_batches(broker: &crate::broker::Broker) -> usize {
    (0..4)
        .map(|p| {
            let tp = TopicPartition::new(MIRROR_STATE_TOPIC.to_string(), p);
            let partition = broker.replicas.partition(&tp).unwrap();
            let log = partition.log.read();
            let read = log.read(0, 64 << 20, FetchIsolation::LogEnd, true);
            let bytes = read
                .unwrap()
                .slice
                .map(|s| s.read().unwrap())
                .unwrap_or_default();
            BatchIter::new(&bytes).count()
        })
        .sum()
}

/// Writes asked at once share appends, each partition is fenced on its
/// own, and every write that was not fenced reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn concurrent_writes_share_appends_and_are_fenced_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    create_topic(&broker, MIRROR_STATE_TOPIC, 4);
    let services = broker.mirrors.services().clone();
    let topic_id = Uuid::new_v4();
    let key = |partition| MirrorPartitionKey {
        mirror_name: "m".into(),
        topic_id,
        partition,
    };
    let write = |partition, leader_epoch, state, previous| StateWrite {
        key: key(partition),
        leader_epoch,
        state,
        previous,
        error: None,
        lme: Some(7),
        failover: None,
    };
    services
        .write_stored(write(0, 5, State::Mirroring, State::Preparing))
        .await
        .unwrap();
    let before = state_batches(&broker);

    let writes: Vec<_> = (0..500)
        .map(|partition| {
            let services = services.clone();
            // Partition 0 is written by a deposed leader (epoch 3 < 5).
            let epoch = if partition == 0 { 3 } else { 1 };
            let stopping = write(partition, epoch, State::Stopping, State::Mirroring);
            tokio::spawn(async move { services.write_stored(stopping).await })
        })
        .collect();
    for (partition, write) in writes.into_iter().enumerate() {
        let written = write.await.unwrap();
        if partition == 0 {
            assert!(
                matches!(written, Err(StateWriteError::Fenced)),
                "{written:?}"
            );
        } else {
            assert!(written.is_ok(), "partition {partition}: {written:?}");
        }
    }
    let appended = state_batches(&broker) - before;
    assert!(
        (1..=150).contains(&appended),
        "500 writes took {appended} appends"
    );

    let keys: Vec<(Uuid, i32)> = (0..500).map(|p| (topic_id, p)).collect();
    let stored = services.read_stored_many("m", &keys).await;
    for (topic_id, partition) in keys {
        let state = stored[&(topic_id, partition)].as_ref().unwrap();
        let value = state.state.as_ref().unwrap();
        let lme = state
            .last_mirrored_epoch
            .as_ref()
            .map(|l| l.last_mirrored_epoch);
        if partition == 0 {
            assert_eq!(
                (value.state, value.leader_epoch, lme),
                (State::Mirroring, 5, Some(7)),
                "the deposed leader's write left nothing"
            );
        } else {
            assert_eq!(
                (value.state, value.leader_epoch, lme),
                (State::Stopping, 1, Some(7))
            );
        }
    }
}
