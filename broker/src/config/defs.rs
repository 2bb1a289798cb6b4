//! Every broker config key Ottla knows: Kafka's name, type, default,
//! constraint and documentation. One `Key` constant per entry gives typed
//! access (`config.get(keys::NUM_PARTITIONS)`).
//!
//! Defaults are Kafka 4.1's, except where Ottla starts a single node out of
//! the box (as Kafka's sample `config/server.properties` does): node.id,
//! process.roles, controller.quorum.voters, controller.listener.names,
//! listeners and log.dir. The internal topics' replication settings keep
//! Kafka's defaults here; a lone node lowers them to 1
//! (`BrokerConfig::resolve_single_node`).

use super::value::{ConfigType, Key, Valid};

/// One row of the key table.
#[derive(Debug)]
pub struct ConfigDef {
    pub name: &'static str,
    pub ty: ConfigType,
    /// `None` is Kafka's `null` default.
    pub default: Option<&'static str>,
    pub valid: Valid,
    pub doc: &'static str,
}

macro_rules! configs {
    ($(
        $(#[doc = $doc:literal])+
        $konst:ident: $rust:ty = $name:literal, $ty:ident, $default:expr, $valid:expr;
    )*) => {
        pub mod keys {
            //! Typed handles on every known key.
            use super::*;
            $(
                $(#[doc = $doc])+
                pub const $konst: Key<$rust> = Key::new($name);
            )*
        }

        /// The key table, in documentation order.
        pub static DEFS: &[ConfigDef] = &[$(
            ConfigDef {
                name: $name,
                ty: ConfigType::$ty,
                default: $default,
                valid: $valid,
                doc: concat!($($doc),+),
            },
        )*];

        /// Reads every key through its typed handle: proves the table's types
        /// and the handles' Rust types agree.
        #[cfg(test)]
        pub fn read_every_key(config: &super::BrokerConfig) -> usize {
            let mut n = 0;
            $( let _: $rust = config.get(keys::$konst); n += 1; )*
            n
        }
    };
}

const PROTOCOLS: &[&str] = &["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

configs! {
    // ---- node identity and KRaft ----
    /// The roles this process plays: broker, controller, or both.
    PROCESS_ROLES: Vec<String> = "process.roles", List, Some("broker,controller"),
        Valid::ListOf(&["broker", "controller"]);
    /// The node ID of this process, unique in the cluster.
    NODE_ID: i32 = "node.id", Int, Some("1"), Valid::AtLeast(0);
    /// Legacy alias of node.id; when set it must equal node.id.
    BROKER_ID: i32 = "broker.id", Int, Some("-1"), Valid::AtLeast(-1);
    /// The cluster ID (22-character base64url UUID). When unset, Ottla uses the ID stored in log.dirs, creating one on first start.
    CLUSTER_ID: Option<String> = "cluster.id", String, None, Valid::Any;
    /// Rack of this broker, used for rack-aware replica placement.
    BROKER_RACK: Option<String> = "broker.rack", String, None, Valid::Any;
    /// How leaders pick a replica for consumers to read from (KIP-392). Unset: the leader; Kafka's RackAwareReplicaSelector: a replica in the consumer's rack.
    REPLICA_SELECTOR_CLASS: Option<String> = "replica.selector.class", String, None,
        Valid::OneOf(&["org.apache.kafka.common.replica.RackAwareReplicaSelector"]);
    /// The static voter set: comma-separated id@host:port entries.
    CONTROLLER_QUORUM_VOTERS: Vec<String> = "controller.quorum.voters", List, Some("1@localhost:9093"), Valid::Any;
    /// host:port endpoints used to discover the quorum when the voter set is dynamic (KIP-853).
    CONTROLLER_QUORUM_BOOTSTRAP_SERVERS: Vec<String> = "controller.quorum.bootstrap.servers", List, Some(""), Valid::Any;
    /// A controller of a dynamic quorum adds itself as a voter once it has caught up with the log (KIP-853).
    CONTROLLER_QUORUM_AUTO_JOIN_ENABLE: bool = "controller.quorum.auto.join.enable", Boolean, Some("false"), Valid::Any;
    /// Names of the listeners used by the controller.
    CONTROLLER_LISTENER_NAMES: Vec<String> = "controller.listener.names", List, Some("CONTROLLER"), Valid::Any;
    /// Maximum time in milliseconds without a leader fetch before starting an election.
    CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS: i32 = "controller.quorum.election.timeout.ms", Int, Some("1000"), Valid::AtLeast(0);
    /// Maximum time without a successful fetch from the leader before a voter becomes a candidate.
    CONTROLLER_QUORUM_FETCH_TIMEOUT_MS: i32 = "controller.quorum.fetch.timeout.ms", Int, Some("2000"), Valid::AtLeast(0);
    /// Maximum backoff in milliseconds before starting a new election.
    CONTROLLER_QUORUM_ELECTION_BACKOFF_MAX_MS: i32 = "controller.quorum.election.backoff.max.ms", Int, Some("1000"), Valid::AtLeast(0);
    /// How long the leader lingers to batch metadata writes before flushing.
    CONTROLLER_QUORUM_APPEND_LINGER_MS: i32 = "controller.quorum.append.linger.ms", Int, Some("25"), Valid::AtLeast(0);
    /// Timeout of quorum requests between controllers.
    CONTROLLER_QUORUM_REQUEST_TIMEOUT_MS: i32 = "controller.quorum.request.timeout.ms", Int, Some("2000"), Valid::AtLeast(0);
    /// Backoff before retrying a failed quorum request.
    CONTROLLER_QUORUM_RETRY_BACKOFF_MS: i32 = "controller.quorum.retry.backoff.ms", Int, Some("20"), Valid::AtLeast(0);
    /// Interval between broker heartbeats to the controller.
    BROKER_HEARTBEAT_INTERVAL_MS: i32 = "broker.heartbeat.interval.ms", Int, Some("2000"), Valid::AtLeast(1);
    /// Time after the last heartbeat before the controller fences a broker.
    BROKER_SESSION_TIMEOUT_MS: i32 = "broker.session.timeout.ms", Int, Some("9000"), Valid::AtLeast(1);
    /// How long a broker waits for its initial registration before failing startup.
    INITIAL_BROKER_REGISTRATION_TIMEOUT_MS: i32 = "initial.broker.registration.timeout.ms", Int, Some("60000"), Valid::AtLeast(1);
    /// Directory of the cluster metadata log; defaults to the first log directory.
    METADATA_LOG_DIR: Option<String> = "metadata.log.dir", String, None, Valid::Any;
    /// Segment size of the metadata log.
    METADATA_LOG_SEGMENT_BYTES: i32 = "metadata.log.segment.bytes", Int, Some("1073741824"), Valid::AtLeast(12);
    /// Time after which a metadata log segment is rolled.
    METADATA_LOG_SEGMENT_MS: i64 = "metadata.log.segment.ms", Long, Some("604800000"), Valid::AtLeast(1);
    /// Maximum bytes of metadata log and snapshots kept before old snapshots are deleted.
    METADATA_MAX_RETENTION_BYTES: i64 = "metadata.max.retention.bytes", Long, Some("104857600"), Valid::Any;
    /// How long metadata log segments and snapshots are kept.
    METADATA_MAX_RETENTION_MS: i64 = "metadata.max.retention.ms", Long, Some("604800000"), Valid::Any;
    /// Metadata log bytes written since the last snapshot that trigger a new snapshot.
    METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS: i64 = "metadata.log.max.record.bytes.between.snapshots", Long, Some("20971520"), Valid::AtLeast(1);
    /// Maximum time between metadata snapshots; 0 disables time-based snapshots.
    METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS: i64 = "metadata.log.max.snapshot.interval.ms", Long, Some("3600000"), Valid::AtLeast(0);
    /// How often the active controller writes a no-op record so brokers see progress.
    METADATA_MAX_IDLE_INTERVAL_MS: i32 = "metadata.max.idle.interval.ms", Int, Some("500"), Valid::AtLeast(0);

    // ---- listeners and network ----
    /// Comma-separated NAME://host:port URIs to listen on. An empty host binds all interfaces.
    LISTENERS: Vec<String> = "listeners", List, Some("PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093"), Valid::NonEmptyList;
    /// Listeners published to clients and other brokers, if different from listeners (controller listeners excluded).
    ADVERTISED_LISTENERS: Option<Vec<String>> = "advertised.listeners", List, None, Valid::Any;
    /// Map of listener name to security protocol, as NAME:PROTOCOL pairs.
    LISTENER_SECURITY_PROTOCOL_MAP: Vec<String> = "listener.security.protocol.map", List,
        Some("CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"), Valid::Any;
    /// Listener used between brokers. Exclusive with security.inter.broker.protocol.
    INTER_BROKER_LISTENER_NAME: Option<String> = "inter.broker.listener.name", String, None, Valid::Any;
    /// Security protocol between brokers; selects the listener of that name.
    SECURITY_INTER_BROKER_PROTOCOL: String = "security.inter.broker.protocol", String, Some("PLAINTEXT"), Valid::OneOf(PROTOCOLS);
    /// Largest request, in bytes, a connection may send (its size prefix); larger ones close the connection.
    SOCKET_REQUEST_MAX_BYTES: i32 = "socket.request.max.bytes", Int, Some("104857600"), Valid::AtLeast(1);
    /// SO_SNDBUF of accepted sockets; -1 keeps the OS default. Unlike Kafka
    /// (102400), -1 by default: the kernel's autotuning grows a busy
    /// connection's buffer, where a fixed 100 KiB cost a Java consumer of
    /// 2,000 partitions a quarter of its rate and caps a long link's rate.
    SOCKET_SEND_BUFFER_BYTES: i32 = "socket.send.buffer.bytes", Int, Some("-1"), Valid::AtLeast(-1);
    /// SO_RCVBUF of accepted sockets; -1 keeps the OS default. Unlike Kafka
    /// (102400), -1 by default: with autotuning a produce request arrives in
    /// a few reads instead of a dozen, a third less broker CPU per record.
    SOCKET_RECEIVE_BUFFER_BYTES: i32 = "socket.receive.buffer.bytes", Int, Some("-1"), Valid::AtLeast(-1);
    /// Backlog of pending connections per listener.
    SOCKET_LISTEN_BACKLOG_SIZE: i32 = "socket.listen.backlog.size", Int, Some("50"), Valid::AtLeast(1);
    /// Accepted for compatibility: Ottla does network I/O on the async runtime's worker threads.
    NUM_NETWORK_THREADS: i32 = "num.network.threads", Int, Some("3"), Valid::AtLeast(1);
    /// Requests processed at once: the request handler pool, whose waiting handlers hold no slot.
    NUM_IO_THREADS: i32 = "num.io.threads", Int, Some("8"), Valid::AtLeast(1);
    /// Idle connections are closed after this many milliseconds.
    CONNECTIONS_MAX_IDLE_MS: i64 = "connections.max.idle.ms", Long, Some("600000"), Valid::AtLeast(1);
    /// Maximum connections per broker.
    MAX_CONNECTIONS: i32 = "max.connections", Int, Some("2147483647"), Valid::AtLeast(0);
    /// Maximum connections from one IP address.
    MAX_CONNECTIONS_PER_IP: i32 = "max.connections.per.ip", Int, Some("2147483647"), Valid::AtLeast(0);
    /// Per-IP exceptions to max.connections.per.ip: comma-separated ip:count pairs (IP addresses only).
    MAX_CONNECTIONS_PER_IP_OVERRIDES: String = "max.connections.per.ip.overrides", String, Some(""), Valid::Parses(|v| super::parse_per_ip_overrides(v).map(|_| ()));
    /// Connections per second the broker accepts, across its listeners but the inter-broker one.
    MAX_CONNECTION_CREATION_RATE: i32 = "max.connection.creation.rate", Int, Some("2147483647"), Valid::AtLeast(0);
    /// Bytes of requests read but not yet handled, over all connections;
    /// connections wait for memory beyond it. -1: unbounded (Kafka's
    /// default); Ottla bounds it by default.
    QUEUED_MAX_REQUEST_BYTES: i64 = "queued.max.request.bytes", Long, Some("1073741824"), Valid::AtLeast(-1);
    /// Bytes/s this broker serves to throttled replicas out of the ISR
    /// (`leader.replication.throttled.replicas`); dynamic.
    LEADER_REPLICATION_THROTTLED_RATE: i64 = "leader.replication.throttled.rate", Long, Some("9223372036854775807"), Valid::AtLeast(1);
    /// Bytes/s this broker fetches for throttled replicas out of the ISR
    /// (`follower.replication.throttled.replicas`); dynamic.
    FOLLOWER_REPLICATION_THROTTLED_RATE: i64 = "follower.replication.throttled.rate", Long, Some("9223372036854775807"), Valid::AtLeast(1);
    /// How long a request the broker completes on its own waits for other
    /// brokers: the ISR of transaction markers and coordinator records
    /// (acks=all), as Kafka's WriteTxnMarkers and coordinator appends.
    REQUEST_TIMEOUT_MS: i32 = "request.timeout.ms", Int, Some("30000"), Valid::AtLeast(0);
    /// Ottla's Prometheus endpoint, `[http://]host:port` (serving /metrics); unset disables it.
    METRICS_LISTENER: Option<String> = "metrics.listener", String, None, Valid::Any;

    // ---- logs ----
    /// Comma-separated data directories. Overrides log.dir.
    LOG_DIRS: Option<Vec<String>> = "log.dirs", List, None, Valid::Any;
    /// The data directory when log.dirs is not set.
    LOG_DIR: String = "log.dir", String, Some("./ottla-data"), Valid::Any;
    /// Maximum size of a log segment file.
    LOG_SEGMENT_BYTES: i32 = "log.segment.bytes", Int, Some("1073741824"), Valid::AtLeast(1048576);
    /// Time after which a segment is rolled even if not full. Overrides log.roll.hours.
    LOG_ROLL_MS: Option<i64> = "log.roll.ms", Long, None, Valid::AtLeast(1);
    /// Time in hours after which a segment is rolled.
    LOG_ROLL_HOURS: i32 = "log.roll.hours", Int, Some("168"), Valid::AtLeast(1);
    /// Maximum random jitter subtracted from the roll time. Overrides log.roll.jitter.hours.
    LOG_ROLL_JITTER_MS: Option<i64> = "log.roll.jitter.ms", Long, None, Valid::AtLeast(0);
    /// Maximum random jitter in hours subtracted from the roll time.
    LOG_ROLL_JITTER_HOURS: i32 = "log.roll.jitter.hours", Int, Some("0"), Valid::AtLeast(0);
    /// How long segments are kept; -1 keeps them forever. Overrides log.retention.minutes and hours.
    LOG_RETENTION_MS: Option<i64> = "log.retention.ms", Long, None, Valid::Any;
    /// Retention in minutes. Overrides log.retention.hours.
    LOG_RETENTION_MINUTES: Option<i32> = "log.retention.minutes", Int, None, Valid::Any;
    /// Retention in hours.
    LOG_RETENTION_HOURS: i32 = "log.retention.hours", Int, Some("168"), Valid::Any;
    /// Maximum partition size before old segments are deleted; -1 means unlimited.
    LOG_RETENTION_BYTES: i64 = "log.retention.bytes", Long, Some("-1"), Valid::Any;
    /// How often segments are checked for deletion.
    LOG_RETENTION_CHECK_INTERVAL_MS: i64 = "log.retention.check.interval.ms", Long, Some("300000"), Valid::AtLeast(1);
    /// Messages appended to a partition before it is fsynced.
    LOG_FLUSH_INTERVAL_MESSAGES: i64 = "log.flush.interval.messages", Long, Some("9223372036854775807"), Valid::AtLeast(1);
    /// Maximum time a message stays unflushed. Defaults to log.flush.scheduler.interval.ms.
    LOG_FLUSH_INTERVAL_MS: Option<i64> = "log.flush.interval.ms", Long, None, Valid::Any;
    /// How often the flusher checks whether a log needs flushing.
    LOG_FLUSH_SCHEDULER_INTERVAL_MS: i64 = "log.flush.scheduler.interval.ms", Long, Some("9223372036854775807"), Valid::Any;
    /// How often recovery points are checkpointed.
    LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS: i32 = "log.flush.offset.checkpoint.interval.ms", Int, Some("60000"), Valid::AtLeast(0);
    /// How often log start offsets are checkpointed.
    LOG_FLUSH_START_OFFSET_CHECKPOINT_INTERVAL_MS: i32 = "log.flush.start.offset.checkpoint.interval.ms", Int, Some("60000"), Valid::AtLeast(0);
    /// Default cleanup policy of topics: delete, compact, or both.
    LOG_CLEANUP_POLICY: Vec<String> = "log.cleanup.policy", List, Some("delete"), Valid::ListOf(&["delete", "compact"]);
    /// Whether the log cleaner (compaction) runs.
    LOG_CLEANER_ENABLE: bool = "log.cleaner.enable", Boolean, Some("true"), Valid::Any;
    /// Threads compacting logs.
    LOG_CLEANER_THREADS: i32 = "log.cleaner.threads", Int, Some("1"), Valid::AtLeast(0);
    /// Memory for deduplication across all cleaner threads.
    LOG_CLEANER_DEDUPE_BUFFER_SIZE: i64 = "log.cleaner.dedupe.buffer.size", Long, Some("134217728"), Valid::Any;
    /// I/O buffer memory across all cleaner threads.
    LOG_CLEANER_IO_BUFFER_SIZE: i32 = "log.cleaner.io.buffer.size", Int, Some("524288"), Valid::AtLeast(0);
    /// Dedupe buffer load factor.
    LOG_CLEANER_IO_BUFFER_LOAD_FACTOR: f64 = "log.cleaner.io.buffer.load.factor", Double, Some("0.9"), Valid::Any;
    /// Cleaner I/O throttle in bytes per second.
    LOG_CLEANER_IO_MAX_BYTES_PER_SECOND: f64 = "log.cleaner.io.max.bytes.per.second", Double, Some("1.7976931348623157E308"), Valid::Any;
    /// Sleep when there is nothing to clean.
    LOG_CLEANER_BACKOFF_MS: i64 = "log.cleaner.backoff.ms", Long, Some("15000"), Valid::AtLeast(0);
    /// Minimum dirty ratio for a log to be compacted.
    LOG_CLEANER_MIN_CLEANABLE_RATIO: f64 = "log.cleaner.min.cleanable.ratio", Double, Some("0.5"), Valid::DoubleBetween(0.0, 1.0);
    /// How long delete tombstones are retained in compacted topics.
    LOG_CLEANER_DELETE_RETENTION_MS: i64 = "log.cleaner.delete.retention.ms", Long, Some("86400000"), Valid::AtLeast(0);
    /// Minimum time a message stays uncompacted.
    LOG_CLEANER_MIN_COMPACTION_LAG_MS: i64 = "log.cleaner.min.compaction.lag.ms", Long, Some("0"), Valid::AtLeast(0);
    /// Maximum time a message stays ineligible for compaction.
    LOG_CLEANER_MAX_COMPACTION_LAG_MS: i64 = "log.cleaner.max.compaction.lag.ms", Long, Some("9223372036854775807"), Valid::AtLeast(1);
    /// Bytes between offset index entries.
    LOG_INDEX_INTERVAL_BYTES: i32 = "log.index.interval.bytes", Int, Some("4096"), Valid::AtLeast(0);
    /// Maximum size of an offset or time index file.
    LOG_INDEX_SIZE_MAX_BYTES: i32 = "log.index.size.max.bytes", Int, Some("10485760"), Valid::AtLeast(4);
    /// Preallocate segment files.
    LOG_PREALLOCATE: bool = "log.preallocate", Boolean, Some("false"), Valid::Any;
    /// Delay before a deleted segment's files are removed.
    LOG_SEGMENT_DELETE_DELAY_MS: i64 = "log.segment.delete.delay.ms", Long, Some("60000"), Valid::AtLeast(0);
    /// Ottla's own: the most segment `.log` files kept open. Beyond it, files nobody read or wrote for a few seconds are closed (fsynced first if written) and reopened when next used, so that many partitions leave descriptors for connections. -1 (the default): a quarter of the process's open-file limit.
    LOG_SEGMENT_MAX_OPEN_FILES: i64 = "log.segment.max.open.files", Long, Some("-1"), Valid::AtLeast(-1);
    /// Whether record timestamps are the producer's (CreateTime) or the broker's (LogAppendTime).
    LOG_MESSAGE_TIMESTAMP_TYPE: String = "log.message.timestamp.type", String, Some("CreateTime"), Valid::OneOf(&["CreateTime", "LogAppendTime"]);
    /// How far in the past a CreateTime timestamp may be.
    LOG_MESSAGE_TIMESTAMP_BEFORE_MAX_MS: i64 = "log.message.timestamp.before.max.ms", Long, Some("9223372036854775807"), Valid::AtLeast(0);
    /// How far in the future a CreateTime timestamp may be.
    LOG_MESSAGE_TIMESTAMP_AFTER_MAX_MS: i64 = "log.message.timestamp.after.max.ms", Long, Some("3600000"), Valid::AtLeast(0);
    /// Largest record batch the broker accepts (after compression).
    MESSAGE_MAX_BYTES: i32 = "message.max.bytes", Int, Some("1048588"), Valid::AtLeast(0);
    /// Final compression of topics: a codec, uncompressed, or producer (keep what the producer sent).
    COMPRESSION_TYPE: String = "compression.type", String, Some("producer"),
        Valid::OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]);
    /// gzip level when the broker compresses.
    COMPRESSION_GZIP_LEVEL: i32 = "compression.gzip.level", Int, Some("-1"), Valid::Between(-1, 9);
    /// lz4 level when the broker compresses.
    COMPRESSION_LZ4_LEVEL: i32 = "compression.lz4.level", Int, Some("9"), Valid::Between(1, 17);
    /// zstd level when the broker compresses.
    COMPRESSION_ZSTD_LEVEL: i32 = "compression.zstd.level", Int, Some("3"), Valid::Between(-131072, 22);
    /// Threads per data directory loading (and recovering) the logs at start-up and closing them at shutdown.
    NUM_RECOVERY_THREADS_PER_DATA_DIR: i32 = "num.recovery.threads.per.data.dir", Int, Some("2"), Valid::AtLeast(1);

    // ---- topics and replication ----
    /// Default partition count of new topics.
    NUM_PARTITIONS: i32 = "num.partitions", Int, Some("1"), Valid::AtLeast(1);
    /// Default replication factor of new topics.
    DEFAULT_REPLICATION_FACTOR: i32 = "default.replication.factor", Int, Some("1"), Valid::AtLeast(1);
    /// Create topics on first metadata request or produce.
    AUTO_CREATE_TOPICS_ENABLE: bool = "auto.create.topics.enable", Boolean, Some("true"), Valid::Any;
    /// Allow deleting topics.
    DELETE_TOPIC_ENABLE: bool = "delete.topic.enable", Boolean, Some("true"), Valid::Any;
    /// Minimum in-sync replicas for acks=all writes.
    MIN_INSYNC_REPLICAS: i32 = "min.insync.replicas", Int, Some("1"), Valid::AtLeast(1);
    /// Allow out-of-sync replicas to become leader, at the risk of data loss.
    UNCLEAN_LEADER_ELECTION_ENABLE: bool = "unclean.leader.election.enable", Boolean, Some("false"), Valid::Any;
    /// Move leadership back to preferred replicas periodically.
    AUTO_LEADER_REBALANCE_ENABLE: bool = "auto.leader.rebalance.enable", Boolean, Some("true"), Valid::Any;
    /// How often leader balance is checked.
    LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS: i64 = "leader.imbalance.check.interval.seconds", Long, Some("300"), Valid::AtLeast(1);
    /// A follower that has not caught up for this long leaves the ISR.
    REPLICA_LAG_TIME_MAX_MS: i64 = "replica.lag.time.max.ms", Long, Some("30000"), Valid::Any;
    /// Bytes a follower fetches per partition.
    REPLICA_FETCH_MAX_BYTES: i32 = "replica.fetch.max.bytes", Int, Some("1048576"), Valid::AtLeast(0);
    /// Minimum bytes per follower fetch response.
    REPLICA_FETCH_MIN_BYTES: i32 = "replica.fetch.min.bytes", Int, Some("1"), Valid::Any;
    /// Maximum wait of a follower fetch.
    REPLICA_FETCH_WAIT_MAX_MS: i32 = "replica.fetch.wait.max.ms", Int, Some("500"), Valid::Any;
    /// Bytes per follower fetch response.
    REPLICA_FETCH_RESPONSE_MAX_BYTES: i32 = "replica.fetch.response.max.bytes", Int, Some("10485760"), Valid::AtLeast(0);
    /// Backoff after a follower fetch error.
    REPLICA_FETCH_BACKOFF_MS: i32 = "replica.fetch.backoff.ms", Int, Some("1000"), Valid::AtLeast(0);
    /// Fetch loops per leader broker, each replicating its share of the partitions followed from that leader.
    NUM_REPLICA_FETCHERS: i32 = "num.replica.fetchers", Int, Some("1"), Valid::Any;
    /// Socket timeout of follower fetches.
    REPLICA_SOCKET_TIMEOUT_MS: i32 = "replica.socket.timeout.ms", Int, Some("30000"), Valid::Any;
    /// How often high watermarks are checkpointed.
    REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS: i64 = "replica.high.watermark.checkpoint.interval.ms", Long, Some("5000"), Valid::Any;
    /// Bytes a fetch response may carry in total.
    FETCH_MAX_BYTES: i32 = "fetch.max.bytes", Int, Some("57671680"), Valid::AtLeast(1024);
    /// Incremental fetch sessions cached (KIP-227).
    MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS: i32 = "max.incremental.fetch.session.cache.slots", Int, Some("1000"), Valid::AtLeast(0);

    // ---- group coordinator ----
    /// Replication factor of __consumer_offsets; it is not created while
    /// fewer brokers are live.
    OFFSETS_TOPIC_REPLICATION_FACTOR: i16 = "offsets.topic.replication.factor", Short, Some("3"), Valid::AtLeast(1);
    /// Partitions of __consumer_offsets.
    OFFSETS_TOPIC_NUM_PARTITIONS: i32 = "offsets.topic.num.partitions", Int, Some("50"), Valid::AtLeast(1);
    /// Segment size of __consumer_offsets.
    OFFSETS_TOPIC_SEGMENT_BYTES: i32 = "offsets.topic.segment.bytes", Int, Some("104857600"), Valid::AtLeast(1);
    /// How long committed offsets of an empty group are kept.
    OFFSETS_RETENTION_MINUTES: i32 = "offsets.retention.minutes", Int, Some("10080"), Valid::AtLeast(1);
    /// How often stale offsets are expired.
    OFFSETS_RETENTION_CHECK_INTERVAL_MS: i64 = "offsets.retention.check.interval.ms", Long, Some("600000"), Valid::AtLeast(1);
    /// Timeout of an offset commit waiting for replication.
    OFFSETS_COMMIT_TIMEOUT_MS: i32 = "offsets.commit.timeout.ms", Int, Some("5000"), Valid::AtLeast(1);
    /// Maximum size of the metadata string of an offset commit.
    OFFSET_METADATA_MAX_BYTES: i32 = "offset.metadata.max.bytes", Int, Some("4096"), Valid::Any;
    /// Delay of the first rebalance of a new classic group.
    GROUP_INITIAL_REBALANCE_DELAY_MS: i32 = "group.initial.rebalance.delay.ms", Int, Some("3000"), Valid::Any;
    /// Minimum session timeout of classic group members.
    GROUP_MIN_SESSION_TIMEOUT_MS: i32 = "group.min.session.timeout.ms", Int, Some("6000"), Valid::Any;
    /// Maximum session timeout of classic group members.
    GROUP_MAX_SESSION_TIMEOUT_MS: i32 = "group.max.session.timeout.ms", Int, Some("1800000"), Valid::Any;
    /// Maximum members of a classic group.
    GROUP_MAX_SIZE: i32 = "group.max.size", Int, Some("2147483647"), Valid::AtLeast(1);
    /// Rebalance protocols the group coordinator enables.
    GROUP_COORDINATOR_REBALANCE_PROTOCOLS: Vec<String> = "group.coordinator.rebalance.protocols", List, Some("classic,consumer"),
        Valid::ListOf(&["classic", "consumer", "share", "streams"]);
    /// Session timeout of consumer-protocol (KIP-848) members.
    GROUP_CONSUMER_SESSION_TIMEOUT_MS: i32 = "group.consumer.session.timeout.ms", Int, Some("45000"), Valid::AtLeast(1);
    /// Minimum session timeout a consumer group may configure.
    GROUP_CONSUMER_MIN_SESSION_TIMEOUT_MS: i32 = "group.consumer.min.session.timeout.ms", Int, Some("45000"), Valid::AtLeast(1);
    /// Maximum session timeout a consumer group may configure.
    GROUP_CONSUMER_MAX_SESSION_TIMEOUT_MS: i32 = "group.consumer.max.session.timeout.ms", Int, Some("60000"), Valid::AtLeast(1);
    /// Heartbeat interval of consumer-protocol members.
    GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS: i32 = "group.consumer.heartbeat.interval.ms", Int, Some("5000"), Valid::AtLeast(1);
    /// Minimum heartbeat interval a consumer group may configure.
    GROUP_CONSUMER_MIN_HEARTBEAT_INTERVAL_MS: i32 = "group.consumer.min.heartbeat.interval.ms", Int, Some("5000"), Valid::AtLeast(1);
    /// Maximum heartbeat interval a consumer group may configure.
    GROUP_CONSUMER_MAX_HEARTBEAT_INTERVAL_MS: i32 = "group.consumer.max.heartbeat.interval.ms", Int, Some("15000"), Valid::AtLeast(1);
    /// Maximum members of a consumer group.
    GROUP_CONSUMER_MAX_SIZE: i32 = "group.consumer.max.size", Int, Some("2147483647"), Valid::AtLeast(1);
    /// Server-side assignors of consumer groups, the first being the default.
    GROUP_CONSUMER_ASSIGNORS: Vec<String> = "group.consumer.assignors", List, Some("uniform,range"), Valid::NonEmptyList;
    /// Whether non-empty groups move between the classic and consumer protocols.
    GROUP_CONSUMER_MIGRATION_POLICY: String = "group.consumer.migration.policy", String, Some("bidirectional"),
        Valid::Parses(|v| ottla_group_coordinator::MigrationPolicy::parse(v).map(|_| ()));

    // ---- streams groups (KIP-1071); a group's own configs stay within the min/max ----
    /// Session timeout of streams-group members.
    GROUP_STREAMS_SESSION_TIMEOUT_MS: i32 = "group.streams.session.timeout.ms", Int, Some("45000"), Valid::AtLeast(1);
    /// Minimum session timeout a streams group may configure.
    GROUP_STREAMS_MIN_SESSION_TIMEOUT_MS: i32 = "group.streams.min.session.timeout.ms", Int, Some("45000"), Valid::AtLeast(1);
    /// Maximum session timeout a streams group may configure.
    GROUP_STREAMS_MAX_SESSION_TIMEOUT_MS: i32 = "group.streams.max.session.timeout.ms", Int, Some("60000"), Valid::AtLeast(1);
    /// Heartbeat interval of streams-group members.
    GROUP_STREAMS_HEARTBEAT_INTERVAL_MS: i32 = "group.streams.heartbeat.interval.ms", Int, Some("5000"), Valid::AtLeast(1);
    /// Minimum heartbeat interval a streams group may configure.
    GROUP_STREAMS_MIN_HEARTBEAT_INTERVAL_MS: i32 = "group.streams.min.heartbeat.interval.ms", Int, Some("5000"), Valid::AtLeast(1);
    /// Maximum heartbeat interval a streams group may configure.
    GROUP_STREAMS_MAX_HEARTBEAT_INTERVAL_MS: i32 = "group.streams.max.heartbeat.interval.ms", Int, Some("15000"), Valid::AtLeast(1);
    /// Standby replicas of each stateful task of a streams group.
    GROUP_STREAMS_NUM_STANDBY_REPLICAS: i32 = "group.streams.num.standby.replicas", Int, Some("0"), Valid::AtLeast(0);
    /// Most standby replicas a streams group may configure.
    GROUP_STREAMS_MAX_STANDBY_REPLICAS: i32 = "group.streams.max.standby.replicas", Int, Some("2"), Valid::AtLeast(0);
    /// Offsets a member may lag behind a task's changelog and still be given it as active.
    GROUP_STREAMS_ACCEPTABLE_RECOVERY_LAG: i64 = "group.streams.acceptable.recovery.lag", Long, Some("10000"), Valid::AtLeast(0);
    /// Most members a streams group may have; joins beyond are refused.
    GROUP_STREAMS_MAX_SIZE: i32 = "group.streams.max.size", Int, Some("2147483647"), Valid::AtLeast(1);

    // ---- share groups (KIP-932); a group's own configs stay within the min/max ----
    /// Most members a share group may have; joins beyond are refused.
    GROUP_SHARE_MAX_SIZE: i32 = "group.share.max.size", Int, Some("200"), Valid::AtLeast(1);
    /// Session timeout of share-group members.
    GROUP_SHARE_SESSION_TIMEOUT_MS: i32 = "group.share.session.timeout.ms", Int, Some("45000"), Valid::AtLeast(1);
    /// Minimum session timeout a share group may configure.
    GROUP_SHARE_MIN_SESSION_TIMEOUT_MS: i32 = "group.share.min.session.timeout.ms", Int, Some("45000"), Valid::AtLeast(1);
    /// Maximum session timeout a share group may configure.
    GROUP_SHARE_MAX_SESSION_TIMEOUT_MS: i32 = "group.share.max.session.timeout.ms", Int, Some("60000"), Valid::AtLeast(1);
    /// Heartbeat interval of share-group members.
    GROUP_SHARE_HEARTBEAT_INTERVAL_MS: i32 = "group.share.heartbeat.interval.ms", Int, Some("5000"), Valid::AtLeast(1);
    /// Minimum heartbeat interval a share group may configure.
    GROUP_SHARE_MIN_HEARTBEAT_INTERVAL_MS: i32 = "group.share.min.heartbeat.interval.ms", Int, Some("5000"), Valid::AtLeast(1);
    /// Maximum heartbeat interval a share group may configure.
    GROUP_SHARE_MAX_HEARTBEAT_INTERVAL_MS: i32 = "group.share.max.heartbeat.interval.ms", Int, Some("15000"), Valid::AtLeast(1);
    /// How long a member holds the records it acquired.
    GROUP_SHARE_RECORD_LOCK_DURATION_MS: i32 = "group.share.record.lock.duration.ms", Int, Some("30000"), Valid::AtLeast(1000);
    /// Minimum record lock duration a share group may configure.
    GROUP_SHARE_MIN_RECORD_LOCK_DURATION_MS: i32 = "group.share.min.record.lock.duration.ms", Int, Some("15000"), Valid::AtLeast(1000);
    /// Maximum record lock duration a share group may configure.
    GROUP_SHARE_MAX_RECORD_LOCK_DURATION_MS: i32 = "group.share.max.record.lock.duration.ms", Int, Some("60000"), Valid::AtLeast(1000);
    /// Deliveries after which a record is archived.
    GROUP_SHARE_DELIVERY_COUNT_LIMIT: i32 = "group.share.delivery.count.limit", Int, Some("5"), Valid::AtLeast(2);
    /// Minimum delivery count limit a share group may configure.
    GROUP_SHARE_MIN_DELIVERY_COUNT_LIMIT: i32 = "group.share.min.delivery.count.limit", Int, Some("2"), Valid::AtLeast(2);
    /// Maximum delivery count limit a share group may configure.
    GROUP_SHARE_MAX_DELIVERY_COUNT_LIMIT: i32 = "group.share.max.delivery.count.limit", Int, Some("10"), Valid::AtLeast(2);
    /// Records in flight at most per share partition.
    GROUP_SHARE_PARTITION_MAX_RECORD_LOCKS: i32 = "group.share.partition.max.record.locks", Int, Some("2000"), Valid::AtLeast(100);
    /// Minimum per-partition record lock limit a share group may configure.
    GROUP_SHARE_MIN_PARTITION_MAX_RECORD_LOCKS: i32 = "group.share.min.partition.max.record.locks", Int, Some("100"), Valid::AtLeast(100);
    /// Maximum per-partition record lock limit a share group may configure.
    GROUP_SHARE_MAX_PARTITION_MAX_RECORD_LOCKS: i32 = "group.share.max.partition.max.record.locks", Int, Some("4000"), Valid::AtLeast(100);
    /// The prefix a share group's dead-letter queue topic must have (KIP-1191); "" allows any name.
    ERRORS_DEADLETTERQUEUE_TOPIC_NAME_PREFIX: String = "errors.deadletterqueue.topic.name.prefix", String, Some("dlq."), Valid::Any;
    /// Whether a share group's missing dead-letter queue topic is created when first written.
    ERRORS_DEADLETTERQUEUE_AUTO_CREATE_TOPICS_ENABLE: bool = "errors.deadletterqueue.auto.create.topics.enable", Boolean, Some("false"), Valid::Any;
    /// Partitions of __share_group_state, the share partitions' delivery state.
    SHARE_COORDINATOR_STATE_TOPIC_NUM_PARTITIONS: i32 = "share.coordinator.state.topic.num.partitions", Int, Some("50"), Valid::AtLeast(1);
    /// Replication factor of __share_group_state; it is not created while
    /// fewer brokers are live.
    SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR: i16 = "share.coordinator.state.topic.replication.factor", Short, Some("3"), Valid::AtLeast(1);
    /// min.insync.replicas of __share_group_state (capped at its replication factor).
    SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR: i16 = "share.coordinator.state.topic.min.isr", Short, Some("2"), Valid::AtLeast(1);
    /// Segment size of __share_group_state.
    SHARE_COORDINATOR_STATE_TOPIC_SEGMENT_BYTES: i32 = "share.coordinator.state.topic.segment.bytes", Int, Some("104857600"), Valid::AtLeast(1);

    // ---- cluster mirroring ----
    /// Partitions of __mirror_state, the mirror partition states.
    MIRROR_STATE_TOPIC_NUM_PARTITIONS: i32 = "mirror.state.topic.num.partitions", Int, Some("16"), Valid::AtLeast(1);
    /// Replication factor of __mirror_state; it is not created while fewer
    /// brokers are live.
    MIRROR_STATE_TOPIC_REPLICATION_FACTOR: i16 = "mirror.state.topic.replication.factor", Short, Some("3"), Valid::AtLeast(1);
    /// min.insync.replicas of __mirror_state (capped at its replication factor).
    MIRROR_STATE_TOPIC_MIN_ISR: i32 = "mirror.state.topic.min.isr", Int, Some("2"), Valid::AtLeast(1);
    /// Segment size of __mirror_state.
    MIRROR_STATE_TOPIC_SEGMENT_BYTES: i32 = "mirror.state.topic.segment.bytes", Int, Some("104857600"), Valid::AtLeast(1);
    /// A mirror partition starts fetching only once every replica (not
    /// only the ISR) has truncated, so an unclean election stays safe.
    MIRROR_SUPPORT_UNCLEAN_LEADER_ELECTION: bool = "mirror.support.unclean.leader.election", Boolean, Some("false"), Valid::Any;

    // ---- transactions and idempotence ----
    /// Replication factor of __transaction_state; it is not created while
    /// fewer brokers are live.
    TRANSACTION_STATE_LOG_REPLICATION_FACTOR: i16 = "transaction.state.log.replication.factor", Short, Some("3"), Valid::AtLeast(1);
    /// Partitions of __transaction_state.
    TRANSACTION_STATE_LOG_NUM_PARTITIONS: i32 = "transaction.state.log.num.partitions", Int, Some("50"), Valid::AtLeast(1);
    /// min.insync.replicas of __transaction_state (capped at its replication factor).
    TRANSACTION_STATE_LOG_MIN_ISR: i32 = "transaction.state.log.min.isr", Int, Some("2"), Valid::AtLeast(1);
    /// Segment size of __transaction_state.
    TRANSACTION_STATE_LOG_SEGMENT_BYTES: i32 = "transaction.state.log.segment.bytes", Int, Some("104857600"), Valid::AtLeast(1);
    /// Largest transaction timeout a producer may ask for.
    TRANSACTION_MAX_TIMEOUT_MS: i32 = "transaction.max.timeout.ms", Int, Some("900000"), Valid::AtLeast(1);
    /// How long an idle transactional id is remembered.
    TRANSACTIONAL_ID_EXPIRATION_MS: i32 = "transactional.id.expiration.ms", Int, Some("604800000"), Valid::AtLeast(1);
    /// How often timed-out transactions are aborted.
    TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS: i32 = "transaction.abort.timed.out.transaction.cleanup.interval.ms", Int, Some("10000"), Valid::AtLeast(1);
    /// How often expired transactional ids are removed.
    TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS: i32 = "transaction.remove.expired.transaction.cleanup.interval.ms", Int, Some("3600000"), Valid::AtLeast(1);
    /// Verify that a transactional produce targets a partition of an ongoing transaction (KIP-890).
    TRANSACTION_PARTITION_VERIFICATION_ENABLE: bool = "transaction.partition.verification.enable", Boolean, Some("true"), Valid::Any;
    /// How long producer state of an idle producer id is kept.
    PRODUCER_ID_EXPIRATION_MS: i32 = "producer.id.expiration.ms", Int, Some("86400000"), Valid::AtLeast(1);
    /// How often expired producer ids are removed.
    PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS: i32 = "producer.id.expiration.check.interval.ms", Int, Some("600000"), Valid::AtLeast(1);

    // ---- security ----
    /// Authorizer class: empty (no authorization) or org.apache.kafka.metadata.authorizer.StandardAuthorizer (ACLs in the metadata log).
    AUTHORIZER_CLASS_NAME: String = "authorizer.class.name", String, Some(""), Valid::OneOf(&["", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"]);
    /// Principals allowed everything, separated by semicolons (User:admin;User:ANONYMOUS). Brokers reach each other as their inter-broker listener's principal, which must be listed here when the authorizer is on.
    SUPER_USERS: String = "super.users", String, Some(""), Valid::Any;
    /// Whether a resource with no ACL at all is open to everyone (otherwise only super users may use it).
    ALLOW_EVERYONE_IF_NO_ACL_FOUND: bool = "allow.everyone.if.no.acl.found", Boolean, Some("false"), Valid::Any;
    /// Format of the key store: PKCS12, JKS (read as PKCS12: keytool writes PKCS12 since Java 9) or PEM.
    SSL_KEYSTORE_TYPE: String = "ssl.keystore.type", String, Some("JKS"), Valid::Parses(|v| ottla_client::stores::StoreType::parse("ssl.keystore.type", v).map(|_| ()));
    /// The key store: a PKCS12 file, or with ssl.keystore.type=PEM a PEM file with the listener's private key (unencrypted PKCS#8, PKCS#1 or SEC1) and certificate chain.
    SSL_KEYSTORE_LOCATION: Option<String> = "ssl.keystore.location", String, None, Valid::Any;
    /// The certificate chain itself, in PEM, instead of ssl.keystore.location.
    SSL_KEYSTORE_CERTIFICATE_CHAIN: Option<String> = "ssl.keystore.certificate.chain", Password, None, Valid::Any;
    /// The private key itself, in PEM, instead of ssl.keystore.location.
    SSL_KEYSTORE_KEY: Option<String> = "ssl.keystore.key", Password, None, Valid::Any;
    /// Password of a PKCS12 key store (which protects its key too).
    SSL_KEYSTORE_PASSWORD: Option<String> = "ssl.keystore.password", Password, None, Valid::Any;
    /// Format of the trust store: PKCS12, JKS (read as PKCS12) or PEM.
    SSL_TRUSTSTORE_TYPE: String = "ssl.truststore.type", String, Some("JKS"), Valid::Parses(|v| ottla_client::stores::StoreType::parse("ssl.truststore.type", v).map(|_| ()));
    /// The CA certificates that sign client certificates: a PKCS12 file, or with ssl.truststore.type=PEM a PEM file.
    SSL_TRUSTSTORE_LOCATION: Option<String> = "ssl.truststore.location", String, None, Valid::Any;
    /// The trusted CA certificates themselves, in PEM, instead of ssl.truststore.location.
    SSL_TRUSTSTORE_CERTIFICATES: Option<String> = "ssl.truststore.certificates", Password, None, Valid::Any;
    /// Password of a PKCS12 trust store.
    SSL_TRUSTSTORE_PASSWORD: Option<String> = "ssl.truststore.password", Password, None, Valid::Any;
    /// Whether TLS clients must (required), may (requested) or do not (none) present a certificate.
    SSL_CLIENT_AUTH: String = "ssl.client.auth", String, Some("none"), Valid::OneOf(&["none", "requested", "required"]);
    /// TLS versions accepted.
    SSL_ENABLED_PROTOCOLS: Vec<String> = "ssl.enabled.protocols", List, Some("TLSv1.2,TLSv1.3"), Valid::ListOf(&["TLSv1.2", "TLSv1.3"]);
    /// How client certificate names become principals. Ottla applies Kafka's DEFAULT rule only (User:<subject DN>).
    SSL_PRINCIPAL_MAPPING_RULES: String = "ssl.principal.mapping.rules", String, Some("DEFAULT"), Valid::OneOf(&["DEFAULT"]);
    /// SASL mechanisms SASL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.
    SASL_ENABLED_MECHANISMS: Vec<String> = "sasl.enabled.mechanisms", List, Some("GSSAPI"), Valid::Any;
    /// The mechanism this broker logs in with on a SASL inter-broker listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    SASL_MECHANISM_INTER_BROKER_PROTOCOL: String = "sasl.mechanism.inter.broker.protocol", String, Some("GSSAPI"), Valid::Any;
    /// The mechanism controllers (and brokers, to reach them) log in with on a SASL controller listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    SASL_MECHANISM_CONTROLLER_PROTOCOL: String = "sasl.mechanism.controller.protocol", String, Some("GSSAPI"), Valid::Any;
    /// JAAS login module for SASL listeners without a listener.name.<listener>.<mechanism>.sasl.jaas.config; PLAIN users are user_<name>="<password>" options, and username/password are this broker's own login to other brokers.
    SASL_JAAS_CONFIG: Option<String> = "sasl.jaas.config", Password, None, Valid::Any;
    /// Largest frame a client may send before it has authenticated.
    SASL_SERVER_MAX_RECEIVE_SIZE: i32 = "sasl.server.max.receive.size", Int, Some("524288"), Valid::AtLeast(1);
    /// SASL session lifetime: clients must re-authenticate (KIP-368) within it or be disconnected; 0 disables.
    CONNECTIONS_MAX_REAUTH_MS: i64 = "connections.max.reauth.ms", Long, Some("0"), Valid::AtLeast(0);
    /// Delay before a failed authentication is answered and the connection closed, which slows password guessing.
    CONNECTION_FAILED_AUTHENTICATION_DELAY_MS: i32 = "connection.failed.authentication.delay.ms", Int, Some("100"), Valid::AtLeast(0);
}

/// Kafka's synonym groups (DynamicBrokerConfig.brokerConfigSynonyms): keys
/// that set the same thing, in precedence order. DescribeConfigs lists the
/// whole group as synonyms of each member.
pub const SYNONYMS: &[&[&str]] = &[
    &["log.roll.ms", "log.roll.hours"],
    &["log.roll.jitter.ms", "log.roll.jitter.hours"],
    &[
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    ],
    &["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
];

/// The definition of `name`, if Ottla knows it.
pub fn def(name: &str) -> Option<&'static ConfigDef> {
    DEFS.iter().find(|d| d.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::value::Value;

    #[test]
    fn names_are_unique_and_defaults_valid() {
        let mut names = std::collections::HashSet::new();
        for d in DEFS {
            assert!(names.insert(d.name), "{} defined twice", d.name);
            if let Some(default) = d.default {
                let v = Value::parse(d.ty, default)
                    .unwrap_or_else(|e| panic!("{} default: {e}", d.name));
                d.valid
                    .check(&v)
                    .unwrap_or_else(|e| panic!("{} default: {e}", d.name));
            }
            assert!(!d.doc.trim().is_empty());
        }
        for group in SYNONYMS {
            for name in *group {
                assert!(def(name).is_some(), "synonym {name} is not defined");
            }
        }
    }
}
