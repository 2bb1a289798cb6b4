//! A real broker on a temporary directory, for handler tests.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::Encodable;
use ottla_controller::records::Endpoint;
use ottla_controller::{
    Controller, ControllerSettings, MetadataRecord, NewTopic, Node, QuorumConfig, QuorumVoters,
    TopicDefaults,
};
use ottla_protocol::batch::{BatchBuilder, SimpleRecord};
use ottla_storage::manager::{CleanerConfig, TopicPartition};
use ottla_storage::producer_state::AppendOrigin;

use crate::broker::{Broker, BrokerSettings, OpenLogFilesBudget};
use crate::replication::fetcher::FetchSettings;

/// Node 1, one log dir under `dir` (which also holds the metadata log),
/// one partition per topic, replication factor 1.
pub fn test_settings(dir: &Path) -> BrokerSettings {
    let logs = dir.join("logs");
    BrokerSettings {
        node_id: 1,
        log_dirs: vec![logs.clone()],
        metadata_dir: logs,
        cluster_id: None,
        advertised: vec![Endpoint {
            listener: "PLAINTEXT".to_string(),
            host: "localhost".to_string(),
            port: 9092,
            security_protocol: "PLAINTEXT".to_string(),
        }],
        controller_listener: "CONTROLLER".to_string(),
        finalized_features: crate::features::initial_finalized(0),
        rack: None,
        auto_create_topics: true,
        delete_topic_enable: true,
        num_partitions: 1,
        default_replication_factor: 1,
        fetch_session_slots: 1000,
        rack_aware_reads: false,
        retention_check_interval: Duration::from_secs(5),
        flush_check_interval: Duration::from_secs(5),
        max_open_log_files: OpenLogFilesBudget {
            configured: -1,
            automatic: usize::MAX,
        },
        checkpoint_interval: Duration::from_secs(5),
        cleaner_backoff: Duration::from_secs(5),
        cleaner: CleanerConfig {
            threads: 1,
            io_max_bytes_per_second: f64::MAX,
            dedupe_buffer_size: 128 << 20,
            io_buffer_load_factor: 0.9,
            io_buffer_size: 512 << 10,
        },
        recovery_threads_per_dir: 1,
        producer_expiration_check_interval: Duration::from_secs(600),
        producer_id_expiration: Duration::from_secs(86_400),
        // What the binary gives a lone node (config::SINGLE_NODE_KEYS).
        static_configs: crate::config::SINGLE_NODE_KEYS
            .iter()
            .map(|key| (key.to_string(), "1".to_string()))
            .collect(),
        heartbeat_interval: Duration::from_millis(500),
        replica_lag_max: Duration::from_secs(30),
        replica_fetch: FetchSettings {
            max_wait: Duration::from_millis(500),
            min_bytes: 1,
            max_bytes: 1 << 20,
            response_max_bytes: 10 << 20,
            backoff: Duration::from_secs(1),
            socket_timeout: Duration::from_secs(30),
            listener: "PLAINTEXT".to_string(),
            security: Default::default(),
            fetchers_per_leader: 1,
        },
        controlled_shutdown_timeout: Duration::from_secs(5),
        authorizer: None,
        dir_locks: None,
    }
}

/// Runs a synchronous handler (or anything that may wait on the
/// controller) as the dispatcher does, off the async workers: on a thread
/// of its own, in the caller's runtime context if it has one. An async
/// test's runtime thread may not wait.
pub fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let runtime = tokio::runtime::Handle::try_current().ok();
    std::thread::scope(|s| {
        s.spawn(|| {
            let _context = runtime.as_ref().map(tokio::runtime::Handle::enter);
            f()
        })
        .join()
        .expect("the synchronous call panicked")
    })
}

/// Opens a broker on `settings` with a single-voter controller of its own,
/// off the async workers as `main` does.
pub fn open_broker(settings: BrokerSettings) -> anyhow::Result<Arc<Broker>> {
    off_runtime(|| open_broker_here(settings))
}

fn open_broker_here(settings: BrokerSettings) -> anyhow::Result<Arc<Broker>> {
    let controller = Controller::start(ControllerSettings {
        node_id: settings.node_id,
        dir: settings.metadata_dir.join("__cluster_metadata-0"),
        voter: true,
        voters: QuorumVoters::Static(BTreeMap::from([(
            settings.node_id as u64,
            Node {
                host: "127.0.0.1".to_string(),
                port: 1,
            },
        )])),
        quorum: QuorumConfig::default(),
        defaults: TopicDefaults {
            num_partitions: settings.num_partitions,
            replication_factor: settings.default_replication_factor,
            min_insync_replicas: 1,
        },
        session_timeout: Duration::from_secs(9),
        leader_rebalance_interval: None,
    })?;
    Broker::open(settings, controller)
}

/// A broker opened with [`test_settings`].
pub fn test_broker(dir: &Path) -> Arc<Broker> {
    open_broker(test_settings(dir)).expect("opening the test broker")
}

/// Waits for a controller call from a test, sync or async.
pub fn wait_for<T: Send>(controller: &Controller, call: impl Future<Output = T> + Send) -> T {
    off_runtime(|| controller.block_on(call))
}

/// Creates a topic on this node and hosts its partitions.
pub fn create_topic(broker: &Broker, name: &str, partitions: i32) {
    let topic = NewTopic {
        name: name.to_string(),
        num_partitions: partitions,
        replication_factor: -1,
        ..Default::default()
    };
    for (_, r) in wait_for(
        &broker.controller,
        broker.controller.create_topics(vec![topic], false),
    ) {
        r.expect("creating the topic");
    }
    broker.replicas.apply_image(&broker.controller.image());
}

/// Appends one batch made by `builder`, one record per timestamp, as a
/// client produce with acks=all; returns the batch's base offset.
pub fn append(
    broker: &Broker,
    tp: &TopicPartition,
    builder: &BatchBuilder,
    timestamps: &[i64],
) -> i64 {
    let records: Vec<SimpleRecord> = timestamps
        .iter()
        .map(|&timestamp| SimpleRecord {
            timestamp,
            value: Some(b"v".to_vec()),
            ..Default::default()
        })
        .collect();
    let batch = Bytes::from(builder.build(&records));
    let o = broker.replicas.append(tp, &batch, -1, AppendOrigin::Client);
    assert_eq!(o.error, None, "append failed: {:?}", o.message);
    o.base_offset
}

/// Makes `leader` the partition's leader (-1: none), which bumps its
/// leader epoch, and applies the change to the replicas.
pub fn change_leader(broker: &Broker, tp: &TopicPartition, leader: i32) {
    change_partition(broker, tp, Some(leader), None, None);
}

/// Commits a leader/ISR/replica change of `tp` (None: unchanged) and
/// applies it to the replicas.
pub fn change_partition(
    broker: &Broker,
    tp: &TopicPartition,
    leader: Option<i32>,
    isr: Option<&[i32]>,
    replicas: Option<&[i32]>,
) {
    let topic_id = broker
        .controller
        .image()
        .topic_by_name(&tp.topic)
        .expect("topic exists")
        .id;
    let change = MetadataRecord::PartitionChange {
        topic_id,
        partition: tp.partition,
        leader,
        isr: isr.map(<[i32]>::to_vec),
        replicas: replicas.map(<[i32]>::to_vec),

        elr: None,
        last_known_elr: None,
    };
    wait_for(
        &broker.controller,
        broker.controller.commit_records(vec![change]),
    )
    .expect("committing the partition change");
    broker.replicas.apply_image(&broker.controller.image());
}

/// Encodes `message` at `version`; kafka-protocol refuses fields the
/// version does not have.
pub fn assert_encodes<M: Encodable>(message: &M, version: i16) {
    let mut buf = BytesMut::new();
    if let Err(e) = message.encode(&mut buf, version) {
        panic!("encoding at v{version}: {e}");
    }
}
