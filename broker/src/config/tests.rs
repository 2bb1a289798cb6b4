use std::io::Write;

use super::*;

fn with(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
    let overrides: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    BrokerConfig::load(None, &overrides)
}

fn error(pairs: &[(&str, &str)]) -> String {
    with(pairs).unwrap_err().to_string()
}

#[test]
fn no_file_is_a_single_combined_node() {
    let c = with(&[]).unwrap();
    assert_eq!(c.node_id, 1);
    assert_eq!(
        c.roles,
        ProcessRoles {
            broker: true,
            controller: true
        }
    );
    let names: Vec<String> = c.listeners.iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        ["PLAINTEXT://localhost:9092", "CONTROLLER://localhost:9093"]
    );
    assert_eq!(c.advertised_listeners.len(), 1);
    assert_eq!(
        c.advertised_listeners[0].to_string(),
        "PLAINTEXT://localhost:9092"
    );
    assert_eq!(c.advertised_controller_listeners[0].endpoint.port, 9093);
    assert_eq!(c.inter_broker_listener_name.as_deref(), Some("PLAINTEXT"));
    assert_eq!(c.quorum_voters[0].id, 1);
    assert_eq!(c.log_dirs, vec![PathBuf::from("./ottla-data")]);
    assert_eq!(c.metadata_log_dir, PathBuf::from("./ottla-data"));
    assert_eq!(c.log_retention_ms, 168 * 3_600_000);
    assert_eq!(c.log_flush_interval_ms, i64::MAX);
    assert_eq!(c.get(keys::SOCKET_REQUEST_MAX_BYTES), 104_857_600);
    assert_eq!(c.get(keys::OFFSETS_TOPIC_REPLICATION_FACTOR), 1);
    assert_eq!(c.get(keys::CLUSTER_ID), None);
    assert!(c.ignored_keys().is_empty());
}

#[test]
fn every_typed_handle_matches_the_table() {
    let c = with(&[]).unwrap();
    assert_eq!(defs::read_every_key(&c), defs::DEFS.len());
}

#[test]
fn kafka_sample_server_properties_load() {
    // The shape of Kafka 4.x's config/server.properties (combined mode).
    let text = r#"
# Licensed to the Apache Software Foundation (ASF)...
############################# Server Basics #############################
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"#;
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    let c = BrokerConfig::load(Some(file.path()), &[]).unwrap();
    assert_eq!(c.log_dirs, vec![PathBuf::from("/tmp/kraft-combined-logs")]);
    assert!(
        c.quorum_voters.is_empty(),
        "dynamic quorum via bootstrap servers"
    );
    assert_eq!(c.quorum_bootstrap_servers[0].to_string(), "localhost:9093");
    // Its only bootstrap server is its own controller listener: it starts a
    // quorum alone (`kafka-storage.sh format --standalone`).
    assert!(c.dynamic_quorum() && c.is_lone_node());
    assert_eq!(c.initial_voters().len(), 1);
    assert_eq!(c.listeners[0].endpoint.host, "");
    assert_eq!(c.advertised_listeners[0].endpoint.host, "localhost");
    assert!(c.ignored_keys().is_empty(), "{:?}", c.ignored_keys());
    assert_eq!(
        c.static_values()
            .get("share.coordinator.state.topic.replication.factor")
            .map(String::as_str),
        Some("1")
    );
}

#[test]
fn unknown_keys_name_the_key_and_where() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(b"num.partitions=3\n\nnum.partition=4\n")
        .unwrap();
    let err = BrokerConfig::load(Some(file.path()), &[])
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "unknown config key 'num.partition' ({} line 3)",
            file.path().display()
        )
    );
    assert_eq!(
        error(&[("confluent.license", "x")]),
        "unknown config key 'confluent.license' (--override)"
    );
}

#[test]
fn invalid_values_name_key_and_expectation() {
    assert_eq!(
        error(&[("num.partitions", "many")]),
        "invalid value 'many' for num.partitions (--override): expected a 32-bit integer"
    );
    assert_eq!(
        error(&[("num.partitions", "0")]),
        "invalid value '0' for num.partitions (--override): must be at least 1"
    );
    assert_eq!(
        error(&[("log.cleanup.policy", "delete,forever")]),
        "invalid value 'delete,forever' for log.cleanup.policy (--override): 'forever' is not one of delete, compact"
    );
    assert_eq!(
        error(&[("auto.create.topics.enable", "yes")]),
        "invalid value 'yes' for auto.create.topics.enable (--override): expected true or false"
    );
    assert_eq!(
        error(&[("log.segment.bytes", "1000")]),
        "invalid value '1000' for log.segment.bytes (--override): must be at least 1048576"
    );
    assert!(error(&[(
        "authorizer.class.name",
        "kafka.security.authorizer.AclAuthorizer"
    )])
    .contains("must be one of"));
}

#[test]
fn static_values_list_what_was_set() {
    let c = with(&[
        ("log.retention.ms", " 1000 "),
        ("log.cleanup.policy", "compact , delete"),
    ])
    .unwrap();
    // (a_lone_node_lists_its_single_node_settings_as_set covers the rest)
    let set: Vec<(String, String)> = c
        .static_values()
        .into_iter()
        .filter(|(k, _)| !SINGLE_NODE_KEYS.contains(&k.as_str()))
        .collect();
    assert_eq!(
        set,
        vec![
            ("log.cleanup.policy".to_owned(), "compact,delete".to_owned()),
            ("log.retention.ms".to_owned(), "1000".to_owned()),
        ]
    );
}

#[test]
fn a_lone_node_lists_its_single_node_settings_as_set() {
    let c = with(&[("log.retention.ms", "1000")]).unwrap();
    let set: Vec<String> = c.static_values().into_keys().collect();
    assert_eq!(
        set,
        [
            "log.retention.ms",
            "mirror.state.topic.min.isr",
            "mirror.state.topic.replication.factor",
            "offsets.topic.replication.factor",
            "share.coordinator.state.topic.min.isr",
            "share.coordinator.state.topic.replication.factor",
            "transaction.state.log.min.isr",
            "transaction.state.log.replication.factor",
        ]
    );
}

#[test]
fn later_settings_win() {
    let c = with(&[("num.partitions", "3"), ("num.partitions", "5")]).unwrap();
    assert_eq!(c.get(keys::NUM_PARTITIONS), 5);
}

#[test]
fn time_unit_precedence() {
    let c = with(&[("log.retention.hours", "1")]).unwrap();
    assert_eq!(c.log_retention_ms, 3_600_000);
    let c = with(&[("log.retention.hours", "1"), ("log.retention.minutes", "2")]).unwrap();
    assert_eq!(c.log_retention_ms, 120_000);
    let c = with(&[("log.retention.minutes", "2"), ("log.retention.ms", "5")]).unwrap();
    assert_eq!(c.log_retention_ms, 5);
    let c = with(&[("log.retention.ms", "-7")]).unwrap();
    assert_eq!(c.log_retention_ms, -1);
    let c = with(&[("log.roll.hours", "2"), ("log.roll.jitter.hours", "1")]).unwrap();
    assert_eq!(
        (c.log_roll_ms, c.log_roll_jitter_ms),
        (7_200_000, 3_600_000)
    );
    let c = with(&[
        ("log.roll.ms", "10"),
        ("log.flush.scheduler.interval.ms", "3"),
    ])
    .unwrap();
    assert_eq!((c.log_roll_ms, c.log_flush_interval_ms), (10, 3));
    assert_eq!(c.offsets_retention_ms, 10_080 * 60_000);
}

#[test]
fn cross_key_validation() {
    assert_eq!(
        error(&[("node.id", "2")]),
        "invalid controller.quorum.voters: this controller's node.id 2 is not a voter"
    );
    assert_eq!(
        error(&[("listeners", "PLAINTEXT://localhost:9092")]),
        "invalid controller.listener.names: CONTROLLER is not in listeners"
    );
    assert_eq!(
        error(&[("process.roles", "broker")]),
        "invalid controller.listener.names: CONTROLLER must not be in listeners when process.roles lacks controller"
    );
    assert!(with(&[
        ("process.roles", "broker"),
        ("node.id", "2"),
        ("listeners", "PLAINTEXT://localhost:9094")
    ])
    .is_ok());
    assert!(error(&[
        ("process.roles", "broker"),
        ("listeners", "PLAINTEXT://localhost:9094")
    ])
    .starts_with("invalid controller.quorum.voters: lists this broker-only node's node.id 1"));
    assert_eq!(
        error(&[("listeners", "PLAINTEXT://0.0.0.0:9092,CONTROLLER://localhost:9093")]),
        "invalid advertised.listeners: PLAINTEXT would advertise the non-routable address 0.0.0.0; set advertised.listeners"
    );
    assert_eq!(
        error(&[
            ("inter.broker.listener.name", "PLAINTEXT"),
            ("security.inter.broker.protocol", "PLAINTEXT")
        ]),
        "invalid inter.broker.listener.name: set either it or security.inter.broker.protocol, not both"
    );
    assert_eq!(
        error(&[("inter.broker.listener.name", "CONTROLLER")]),
        "invalid inter.broker.listener.name: CONTROLLER is not an advertised broker listener"
    );
    assert_eq!(
        error(&[("advertised.listeners", "OTHER://h:1")]),
        "invalid advertised.listeners: listener OTHER has no entry in listener.security.protocol.map"
    );
    assert_eq!(
        error(&[("broker.id", "3")]),
        "invalid broker.id: 3 differs from node.id 1"
    );
    assert_eq!(
        error(&[("process.roles", "broker,broker")]),
        "invalid process.roles: lists a role twice"
    );
    assert!(error(&[("process.roles", "")]).contains("must list"));
    assert!(error(&[("cluster.id", "not-a-uuid")]).contains("base64url"));
    assert!(with(&[("cluster.id", "MkU3OEVBNTcwNTJENDM2Qg")]).is_ok());
    assert_eq!(
        error(&[("metrics.listener", "nope")]),
        "invalid metrics.listener: 'nope' is not host:port"
    );
    let metrics = |v| {
        with(&[("metrics.listener", v)])
            .unwrap()
            .metrics_listener
            .unwrap()
    };
    assert_eq!(metrics("http://0.0.0.0:9308").to_string(), "0.0.0.0:9308");
    assert_eq!(metrics("127.0.0.1:0").port, 0);
}

#[test]
fn bound_ports_replace_port_zero() {
    let mut c = with(&[
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        ),
        ("controller.quorum.voters", "1@127.0.0.1:9093"),
    ])
    .unwrap();
    c.set_bound_port("PLAINTEXT", 4242);
    assert_eq!(c.listeners[0].endpoint.port, 4242);
    assert_eq!(c.advertised_listeners[0].endpoint.port, 4242);
    assert_eq!(c.listeners[1].endpoint.port, 0);
}

#[test]
fn describe_reports_sources_and_synonyms_like_kafka() {
    let c = with(&[("num.partitions", "3"), ("log.retention.ms", "1000")]).unwrap();
    let entries = c.describe();
    assert_eq!(entries.len(), defs::DEFS.len());
    let get = |name: &str| entries.iter().find(|e| e.name == name).unwrap().clone();

    let partitions = get("num.partitions");
    assert_eq!(partitions.value.as_deref(), Some("3"));
    assert_eq!(partitions.source, ConfigSource::Static);
    assert_eq!(
        partitions.synonyms,
        vec![
            ConfigSynonym {
                name: "num.partitions",
                value: Some("3".into()),
                source: ConfigSource::Static
            },
            ConfigSynonym {
                name: "num.partitions",
                value: Some("1".into()),
                source: ConfigSource::Default
            },
        ]
    );
    assert_eq!(partitions.config_type.kafka_code(), 3);
    assert!(!partitions.documentation.is_empty());

    let hours = get("log.retention.hours");
    assert_eq!(hours.value.as_deref(), Some("168"));
    assert_eq!(
        hours.source,
        ConfigSource::Static,
        "first synonym is log.retention.ms"
    );
    let names: Vec<&str> = hours.synonyms.iter().map(|s| s.name).collect();
    assert_eq!(names, ["log.retention.ms", "log.retention.hours"]);

    let cluster = get("cluster.id");
    assert_eq!(cluster.value, None);
    assert_eq!(cluster.source, ConfigSource::Default);
    assert!(cluster.synonyms.is_empty());

    let ratio = get("log.cleaner.io.max.bytes.per.second");
    assert_eq!(ratio.value.as_deref(), Some("1.7976931348623157E308"));
}

#[test]
fn listener_prefixed_security_keys() {
    let c = with(&[
        (
            "listeners",
            "PLAINTEXT://:9092,CONTROLLER://:9093,SASL_SSL://:9094",
        ),
        ("ssl.client.auth", "requested"),
        ("listener.name.sasl_ssl.ssl.client.auth", "required"),
        (
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "M required user_a=\"b\";",
        ),
        ("sasl.jaas.config", "Global required;"),
        ("listener.name.sasl_ssl.ssl.cipher.suites", "X"),
    ])
    .unwrap();
    let protocols: Vec<_> = c.listeners.iter().map(|l| l.protocol).collect();
    assert_eq!(protocols[2], SecurityProtocol::SaslSsl);
    assert_eq!(
        c.get_for_listener("SASL_SSL", keys::SSL_CLIENT_AUTH),
        "required"
    );
    assert_eq!(
        c.get_for_listener("PLAINTEXT", keys::SSL_CLIENT_AUTH),
        "requested"
    );
    assert_eq!(
        c.jaas_config_for("SASL_SSL", "PLAIN").unwrap(),
        "M required user_a=\"b\";"
    );
    assert_eq!(
        c.jaas_config_for("SASL_SSL", "SCRAM-SHA-256").unwrap(),
        "Global required;"
    );
    assert_eq!(
        c.ignored_keys(),
        ["listener.name.sasl_ssl.ssl.cipher.suites"]
    );
    assert!(c
        .static_values()
        .contains_key("listener.name.sasl_ssl.plain.sasl.jaas.config"));
    // Passwords never leave the broker through DescribeConfigs.
    let jaas = c
        .describe()
        .into_iter()
        .find(|e| e.name == "sasl.jaas.config")
        .unwrap();
    assert!(jaas.is_sensitive);
    assert_eq!(jaas.value, None);
    assert_eq!(
        error(&[("listener.name.sasl_ssl.ssl.client.auth", "maybe")]),
        "invalid value 'maybe' for listener.name.sasl_ssl.ssl.client.auth (--override): must be one of none, requested, required"
    );
    assert!(error(&[("listener.name.x.num.partitions", "3")]).contains("unknown config key"));
}

/// The internal topics' replication settings: (offsets RF, txn RF, txn
/// min ISR, mirror RF, mirror min ISR).
fn internal_replication(c: &BrokerConfig) -> (i16, i16, i32, i16, i32) {
    (
        c.get(keys::OFFSETS_TOPIC_REPLICATION_FACTOR),
        c.get(keys::TRANSACTION_STATE_LOG_REPLICATION_FACTOR),
        c.get(keys::TRANSACTION_STATE_LOG_MIN_ISR),
        c.get(keys::MIRROR_STATE_TOPIC_REPLICATION_FACTOR),
        c.get(keys::MIRROR_STATE_TOPIC_MIN_ISR),
    )
}

#[test]
fn a_lone_node_replicates_its_internal_topics_once() {
    let c = with(&[]).unwrap();
    assert_eq!(internal_replication(&c), (1, 1, 1, 1, 1));
    // As if set in server.properties: the coordinators read static values.
    let statics = c.static_values();
    assert_eq!(statics["transaction.state.log.min.isr"], "1");
    assert_eq!(statics["offsets.topic.replication.factor"], "1");
    // What the operator sets wins.
    let c = with(&[("transaction.state.log.replication.factor", "2")]).unwrap();
    assert_eq!(internal_replication(&c), (1, 2, 1, 1, 1));
}

#[test]
fn a_node_of_a_larger_quorum_keeps_kafkas_internal_topic_defaults() {
    let voters = ("controller.quorum.voters", "1@h1:9093,2@h2:9093,3@h3:9093");
    let c = with(&[voters]).unwrap();
    assert_eq!(internal_replication(&c), (3, 3, 2, 3, 2));
    assert!(!c
        .static_values()
        .contains_key("transaction.state.log.replication.factor"));
    // A broker-only node following a single controller is not alone.
    let c = with(&[
        ("process.roles", "broker"),
        ("node.id", "4"),
        ("listeners", "PLAINTEXT://:9092"),
    ])
    .unwrap();
    assert_eq!(internal_replication(&c), (3, 3, 2, 3, 2));
    // Kafka's sample single-node file says 1 itself.
    let c = with(&[
        voters,
        ("offsets.topic.replication.factor", "1"),
        ("transaction.state.log.replication.factor", "1"),
        ("transaction.state.log.min.isr", "1"),
    ])
    .unwrap();
    assert_eq!(internal_replication(&c), (1, 1, 1, 3, 2));
}

#[test]
fn a_dynamic_quorums_controllers_start_it_alone_or_join_it() {
    let node = |bootstrap: &str, listeners: &str| {
        with(&[
            ("controller.quorum.bootstrap.servers", bootstrap),
            (
                "listeners",
                &format!("PLAINTEXT://127.0.0.1:9092,CONTROLLER://{listeners}"),
            ),
        ])
    };
    // Not named in advertised.listeners: published at its listener.
    let alone = node("127.0.0.1:9093", "127.0.0.1:9093").unwrap();
    assert_eq!(
        alone.own_controller_endpoint().map(ToString::to_string),
        Some("127.0.0.1:9093".into())
    );
    assert_eq!(alone.initial_voters().len(), 1);
    assert!(alone.is_lone_node());
    let joining = node("127.0.0.1:9193", "127.0.0.1:9093").unwrap();
    assert!(joining.initial_voters().is_empty() && !joining.is_lone_node());
    // With controller.quorum.voters too, those are the first voters (and
    // this one need not be among them).
    let initial = with(&[
        ("node.id", "3"),
        ("controller.quorum.bootstrap.servers", "127.0.0.1:9193"),
        (
            "controller.quorum.voters",
            "1@127.0.0.1:9193,2@127.0.0.1:9293",
        ),
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        ),
    ])
    .unwrap();
    assert!(initial.dynamic_quorum());
    assert_eq!(
        initial
            .initial_voters()
            .iter()
            .map(|(id, _)| *id)
            .collect::<Vec<_>>(),
        [1, 2]
    );
    let unroutable = node("127.0.0.1:9193", "0.0.0.0:9093")
        .unwrap_err()
        .to_string();
    assert!(
        unroutable.contains("advertised.listeners") && unroutable.contains("routable"),
        "{unroutable}"
    );
}
