//! Describe, alter, describe again: topic and broker resources end to end
//! on a real broker.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsRequest, AlterConfigsResource as LegacyResource, AlterableConfig as LegacyConfig,
};
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::{alter, describe, incremental, RESOURCE_BROKER, RESOURCE_TOPIC};
use crate::apis::test_support::{assert_encodes, create_topic, test_broker};
use crate::broker::Broker;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn describe_one(
    broker: &Broker,
    version: i16,
    resource_type: i8,
    name: &str,
    keys: Option<&[&str]>,
) -> DescribeConfigsResult {
    let resource = DescribeConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_configuration_keys(keys.map(|k| k.iter().map(|k| s(k)).collect()));
    let mut req = DescribeConfigsRequest::default()
        .with_resources(vec![resource])
        .with_include_synonyms(true);
    if version >= 3 {
        req = req.with_include_documentation(true);
    }
    let r = describe::handle(broker, version, req);
    assert_encodes(&r, version);
    r.results.into_iter().next().unwrap()
}

fn entry<'a>(r: &'a DescribeConfigsResult, key: &str) -> &'a DescribeConfigsResourceResult {
    r.configs
        .iter()
        .find(|c| c.name.as_str() == key)
        .unwrap_or_else(|| panic!("{key} not described"))
}

fn value_and_source(r: &DescribeConfigsResult, key: &str) -> (Option<String>, i8) {
    let e = entry(r, key);
    (e.value.as_ref().map(|v| v.to_string()), e.config_source)
}

fn op(name: &str, operation: i8, value: Option<&str>) -> AlterableConfig {
    AlterableConfig::default()
        .with_name(s(name))
        .with_config_operation(operation)
        .with_value(value.map(s))
}

fn incremental(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    ops: Vec<AlterableConfig>,
    validate_only: bool,
) -> (i16, String) {
    let resource = AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_configs(ops);
    let req = IncrementalAlterConfigsRequest::default()
        .with_resources(vec![resource])
        .with_validate_only(validate_only);
    let r = incremental::handle(broker, 1, req);
    assert_encodes(&r, 0);
    assert_encodes(&r, 1);
    let answer = &r.responses[0];
    (
        answer.error_code,
        answer.error_message.as_deref().unwrap_or("").to_string(),
    )
}

fn legacy(broker: &Broker, resource_type: i8, name: &str, configs: &[(&str, Option<&str>)]) -> i16 {
    let resource = LegacyResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| LegacyConfig::default().with_name(s(k)).with_value(v.map(s)))
                .collect(),
        );
    let r = alter::handle(
        broker,
        2,
        AlterConfigsRequest::default().with_resources(vec![resource]),
    );
    assert_encodes(&r, 0);
    assert_encodes(&r, 2);
    r.responses[0].error_code
}

#[test]
fn topic_configs_describe_alter_and_describe_again() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    create_topic(&broker, "t", 1);
    let before = describe_one(&broker, 4, RESOURCE_TOPIC, "t", None);
    assert_eq!(before.error_code, 0);
    assert_eq!(
        before.configs.len(),
        ottla_storage::config::TOPIC_CONFIG_KEYS.len()
    );
    let retention = entry(&before, "retention.ms");
    assert_eq!(
        (retention.value.as_deref(), retention.config_source),
        (Some("604800000"), 5)
    );
    assert_eq!(retention.config_type, 5, "LONG");
    assert!(retention
        .documentation
        .as_deref()
        .is_some_and(|d| !d.is_empty()));
    assert!(!retention.read_only && !retention.is_sensitive);
    // log.retention.ms has a null default and log.retention.hours is not
    // listed under another name's entry: Kafka shows no synonym at all.
    assert!(retention.synonyms.is_empty(), "{:?}", retention.synonyms);

    let (code, _) = incremental(
        &broker,
        RESOURCE_TOPIC,
        "t",
        vec![op("retention.ms", SET, Some("1000"))],
        false,
    );
    assert_eq!(code, 0);
    let after = describe_one(&broker, 4, RESOURCE_TOPIC, "t", None);
    let retention = entry(&after, "retention.ms");
    assert_eq!(
        (retention.value.as_deref(), retention.config_source),
        (Some("1000"), 1)
    );
    let names: Vec<&str> = retention.synonyms.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["retention.ms"]);

    // APPEND starts from the default when the topic has no override.
    incremental(
        &broker,
        RESOURCE_TOPIC,
        "t",
        vec![op("cleanup.policy", APPEND, Some("compact"))],
        false,
    );
    let policy = |b: &Broker| {
        value_and_source(
            &describe_one(b, 1, RESOURCE_TOPIC, "t", None),
            "cleanup.policy",
        )
    };
    assert_eq!(policy(&broker), (Some("delete,compact".into()), 1));
    incremental(
        &broker,
        RESOURCE_TOPIC,
        "t",
        vec![op("cleanup.policy", SUBTRACT, Some("delete"))],
        false,
    );
    assert_eq!(policy(&broker).0.as_deref(), Some("compact"));
    let ops = vec![
        op("retention.ms", DELETE, None),
        op("cleanup.policy", SET, Some("delete")),
    ];
    let (code, _) = incremental(&broker, RESOURCE_TOPIC, "t", ops, true);
    assert_eq!(code, 0);
    assert_eq!(
        policy(&broker).0.as_deref(),
        Some("compact"),
        "validate_only changes nothing"
    );
    incremental(
        &broker,
        RESOURCE_TOPIC,
        "t",
        vec![op("retention.ms", DELETE, None)],
        false,
    );
    let described = describe_one(
        &broker,
        2,
        RESOURCE_TOPIC,
        "t",
        Some(&["retention.ms", "no.such.key"]),
    );
    assert_eq!(described.configs.len(), 1, "only the requested keys");
    assert_eq!(
        value_and_source(&described, "retention.ms"),
        (Some("604800000".into()), 5)
    );
}

#[test]
fn topic_refusals_carry_kafka_error_codes() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    create_topic(&broker, "t", 1);
    let missing = describe_one(&broker, 1, RESOURCE_TOPIC, "missing", None);
    assert_eq!(
        missing.error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert!(missing.configs.is_empty());
    let bad = describe_one(&broker, 3, RESOURCE_TOPIC, "bad name", None);
    assert_eq!(bad.error_code, ResponseError::InvalidTopicException.code());
    // BROKER_LOGGER resources are not served.
    let loggers = describe_one(&broker, 4, 8, "1", None);
    assert_eq!(loggers.error_code, ResponseError::InvalidRequest.code());

    let code = |ops: Vec<AlterableConfig>| incremental(&broker, RESOURCE_TOPIC, "t", ops, false).0;
    assert_eq!(
        code(vec![op("retention.ms", SET, Some("soon"))]),
        ResponseError::InvalidConfig.code()
    );
    assert_eq!(
        code(vec![op("no.such.key", SET, Some("1"))]),
        ResponseError::InvalidConfig.code()
    );
    assert_eq!(
        code(vec![op("retention.ms", APPEND, Some("1"))]),
        ResponseError::InvalidConfig.code()
    );
    assert_eq!(
        code(vec![op("retention.ms", SET, None)]),
        ResponseError::InvalidRequest.code()
    );
    assert_eq!(
        code(vec![op("retention.ms", 9, Some("1"))]),
        ResponseError::InvalidRequest.code()
    );
    let twice = vec![
        op("retention.ms", SET, Some("1")),
        op("retention.ms", SET, Some("2")),
    ];
    assert_eq!(code(twice), ResponseError::InvalidRequest.code());
    let ok = vec![op("retention.ms", SET, Some("1"))];
    let (missing, message) = incremental(&broker, RESOURCE_TOPIC, "missing", ok.clone(), false);
    assert_eq!(
        missing,
        ResponseError::UnknownTopicOrPartition.code(),
        "{message}"
    );
    assert_eq!(
        incremental(&broker, RESOURCE_TOPIC, "", ok.clone(), false).0,
        ResponseError::InvalidRequest.code()
    );
    assert_eq!(
        incremental(&broker, 16, "m", ok.clone(), false).0,
        ResponseError::InvalidRequest.code()
    );

    // The same resource twice: both copies are refused.
    let resource = AlterConfigsResource::default()
        .with_resource_type(RESOURCE_TOPIC)
        .with_resource_name(s("t"))
        .with_configs(ok);
    let req =
        IncrementalAlterConfigsRequest::default().with_resources(vec![resource.clone(), resource]);
    let r = incremental::handle(&broker, 0, req);
    assert!(r
        .responses
        .iter()
        .all(|a| a.error_code == ResponseError::InvalidRequest.code()));
    let described = describe_one(&broker, 1, RESOURCE_TOPIC, "t", None);
    assert_eq!(
        value_and_source(&described, "retention.ms").1,
        5,
        "nothing was changed"
    );
}

#[test]
fn legacy_alter_configs_replaces_every_topic_override() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    create_topic(&broker, "t", 1);
    let ops = vec![
        op("retention.ms", SET, Some("1000")),
        op("segment.ms", SET, Some("2000")),
    ];
    assert_eq!(incremental(&broker, RESOURCE_TOPIC, "t", ops, false).0, 0);
    assert_eq!(
        legacy(
            &broker,
            RESOURCE_TOPIC,
            "t",
            &[("cleanup.policy", Some("compact"))]
        ),
        0
    );
    let d = describe_one(&broker, 1, RESOURCE_TOPIC, "t", None);
    assert_eq!(
        value_and_source(&d, "cleanup.policy"),
        (Some("compact".into()), 1)
    );
    assert_eq!(value_and_source(&d, "retention.ms").1, 5);
    assert_eq!(value_and_source(&d, "segment.ms").1, 5);
    assert_eq!(
        legacy(&broker, RESOURCE_TOPIC, "t", &[("retention.ms", None)]),
        ResponseError::InvalidRequest.code()
    );
    assert_eq!(
        legacy(&broker, RESOURCE_TOPIC, "t", &[("retention.ms", Some("x"))]),
        ResponseError::InvalidConfig.code()
    );
    assert_eq!(
        legacy(&broker, RESOURCE_TOPIC, "gone", &[]),
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(
        legacy(&broker, 8, "1", &[]),
        ResponseError::InvalidRequest.code()
    );
}

#[test]
fn broker_configs_describe_and_alter_dynamically() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    create_topic(&broker, "t", 1);
    for version in [1, 4] {
        let node = describe_one(&broker, version, RESOURCE_BROKER, "1", None);
        assert_eq!(node.error_code, 0);
        let partitions = entry(&node, "num.partitions");
        assert_eq!(
            (partitions.value.as_deref(), partitions.config_source),
            (Some("1"), 5)
        );
        assert!(
            partitions.read_only,
            "num.partitions cannot change at runtime"
        );
        assert!(!entry(&node, "log.retention.ms").read_only);
        assert!(describe_one(&broker, version, RESOURCE_BROKER, "", None)
            .configs
            .is_empty());
    }
    let node = describe_one(&broker, 3, RESOURCE_BROKER, "1", None);
    assert_eq!(entry(&node, "num.partitions").config_type, 3, "INT");
    assert_eq!(
        describe_one(&broker, 1, RESOURCE_BROKER, "2", None).error_code,
        ResponseError::InvalidRequest.code()
    );
    assert_eq!(
        describe_one(&broker, 1, RESOURCE_BROKER, "x", None).error_code,
        ResponseError::InvalidRequest.code()
    );

    // Runtime keys read their dynamic value: this node's over the cluster's.
    let verification = "transaction.partition.verification.enable";
    assert!(broker.dynamic_or(verification, true));
    let set_verification = |v: &str| vec![op(verification, SET, Some(v))];
    assert_eq!(
        incremental(
            &broker,
            RESOURCE_BROKER,
            "",
            set_verification("false"),
            false
        )
        .0,
        0
    );
    assert!(!broker.dynamic_or(verification, true));
    assert_eq!(
        incremental(
            &broker,
            RESOURCE_BROKER,
            "1",
            set_verification("true"),
            false
        )
        .0,
        0
    );
    assert!(broker.dynamic_or(verification, false));
    for level in ["", "1"] {
        let delete = vec![op(verification, DELETE, None)];
        assert_eq!(
            incremental(&broker, RESOURCE_BROKER, level, delete, false).0,
            0
        );
    }

    // A cluster-wide default reaches the node's listing and the topic's.
    let set = |v: &str| vec![op("log.retention.ms", SET, Some(v))];
    assert_eq!(
        incremental(&broker, RESOURCE_BROKER, "", set("5000"), false).0,
        0
    );
    let defaults = describe_one(&broker, 4, RESOURCE_BROKER, "", None);
    assert_eq!(defaults.configs.len(), 1);
    assert_eq!(
        value_and_source(&defaults, "log.retention.ms"),
        (Some("5000".into()), 3)
    );
    let node = describe_one(&broker, 4, RESOURCE_BROKER, "1", None);
    assert_eq!(
        value_and_source(&node, "log.retention.ms"),
        (Some("5000".into()), 3)
    );
    let topic = describe_one(&broker, 4, RESOURCE_TOPIC, "t", None);
    assert_eq!(
        value_and_source(&topic, "retention.ms"),
        (Some("5000".into()), 3)
    );
    // This node's own value wins over the default.
    assert_eq!(
        incremental(&broker, RESOURCE_BROKER, "1", set("7000"), false).0,
        0
    );
    let topic = describe_one(&broker, 4, RESOURCE_TOPIC, "t", None);
    assert_eq!(
        value_and_source(&topic, "retention.ms"),
        (Some("7000".into()), 2)
    );
    let node = describe_one(&broker, 4, RESOURCE_BROKER, "1", None);
    let sources: Vec<i8> = entry(&node, "log.retention.ms")
        .synonyms
        .iter()
        .map(|s| s.source)
        .collect();
    assert_eq!(sources, [2, 3, 5], "then log.retention.hours' default");
    assert_eq!(
        incremental(&broker, RESOURCE_BROKER, "1", set("8000"), true).0,
        0
    );
    assert_eq!(
        value_and_source(
            &describe_one(&broker, 1, RESOURCE_BROKER, "1", None),
            "log.retention.ms"
        )
        .0
        .as_deref(),
        Some("7000")
    );
    let delete = vec![op("log.retention.ms", DELETE, None)];
    assert_eq!(
        incremental(&broker, RESOURCE_BROKER, "1", delete, false).0,
        0
    );
    let topic = describe_one(&broker, 4, RESOURCE_TOPIC, "t", None);
    assert_eq!(
        value_and_source(&topic, "retention.ms"),
        (Some("5000".into()), 3)
    );

    // Legacy AlterConfigs replaces the defaults wholesale.
    assert_eq!(
        legacy(
            &broker,
            RESOURCE_BROKER,
            "",
            &[("log.segment.bytes", Some("2097152"))]
        ),
        0
    );
    let defaults = describe_one(&broker, 4, RESOURCE_BROKER, "", None);
    let names: Vec<&str> = defaults.configs.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["log.segment.bytes"]);
}

#[test]
fn thread_counts_change_by_at_most_a_factor_of_two() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    // Sets broker key `key` to `n` at `level` ("" or a node id).
    let set = |level: &str, key: &str, n: &str| {
        incremental(
            &broker,
            RESOURCE_BROKER,
            level,
            vec![op(key, SET, Some(n))],
            false,
        )
    };
    let fetchers = |n: &str| set("1", "num.replica.fetchers", n);
    let (code, message) = fetchers("3");
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert_eq!(
        message,
        "Dynamic thread count update validation failed for num.replica.fetchers=3, value \
         should not be greater than double the current value 1"
    );
    assert_eq!(fetchers("2").0, 0);
    assert_eq!(fetchers("4").0, 0, "double the value now in force");
    assert_eq!(
        fetchers("1").1,
        "Dynamic thread count update validation failed for num.replica.fetchers=1, value \
         should be at least half the current value 4"
    );
    assert_eq!(
        fetchers("0").1,
        "Dynamic thread count update validation failed for num.replica.fetchers=0, value \
         should be at least 1"
    );
    // The static default of num.recovery.threads.per.data.dir is 2.
    let recovery = |n: &str| set("", "num.recovery.threads.per.data.dir", n);
    assert_eq!(recovery("4").0, 0);
    assert_eq!(recovery("9").0, ResponseError::InvalidRequest.code());
    // num.io.threads (static default 8) resizes the request handler pool.
    let io_threads = |n: &str| set("1", "num.io.threads", n);
    assert_eq!(
        io_threads("3").1,
        "Dynamic thread count update validation failed for num.io.threads=3, value \
         should be at least half the current value 8"
    );
    assert_eq!(io_threads("4").0, 0);
}

#[test]
fn listeners_change_per_broker_and_keep_the_registration() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    let alter = |level: &str, ops: Vec<AlterableConfig>| {
        incremental(&broker, RESOURCE_BROKER, level, ops, true)
    };
    let add_extra = || {
        vec![
            op(
                "listeners",
                SET,
                Some(
                    "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093,EXTRA://127.0.0.1:9094",
                ),
            ),
            op(
                "advertised.listeners",
                SET,
                Some("PLAINTEXT://localhost:9092"),
            ),
            op(
                "listener.security.protocol.map",
                SET,
                Some("PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,EXTRA:PLAINTEXT"),
            ),
        ]
    };
    assert_eq!(alter("1", add_extra()), (0, String::new()));
    // A new listener comes with its own TLS and SASL settings; an existing
    // one keeps those it was bound with (Kafka's rule).
    let mut with_settings = add_extra();
    with_settings.push(op(
        "listener.name.extra.sasl.enabled.mechanisms",
        SET,
        Some("PLAIN"),
    ));
    assert_eq!(alter("1", with_settings), (0, String::new()));
    let (_, message) = alter(
        "1",
        vec![op(
            "listener.name.plaintext.ssl.client.auth",
            SET,
            Some("required"),
        )],
    );
    assert_eq!(
        message,
        "Configs cannot be updated dynamically for existing listener PLAINTEXT, restart broker \
         or create a new listener for update"
    );
    let mut bad_value = add_extra();
    bad_value.push(op(
        "listener.name.extra.ssl.client.auth",
        SET,
        Some("often"),
    ));
    let (_, message) = alter("1", bad_value);
    assert!(
        message.starts_with(
            "Invalid value often for configuration listener.name.extra.ssl.client.auth"
        ),
        "{message}"
    );
    let (code, message) = alter("", add_extra());
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert_eq!(
        message,
        "Cannot update these configs at default cluster level, broker id must be specified: \
         [advertised.listeners, listener.security.protocol.map, listeners]"
    );
    let (_, message) = alter("1", add_extra()[..2].to_vec());
    assert_eq!(
        message,
        "invalid listeners: listener EXTRA has no entry in listener.security.protocol.map"
    );
    // Without advertised.listeners, a new listener would be advertised.
    let mut ops = add_extra();
    ops.remove(1);
    let (_, message) = alter("1", ops);
    assert!(
        message.starts_with(
            "Advertised listeners cannot be altered when using a Raft-based metadata quorum"
        ),
        "{message}"
    );
    let (_, message) = alter(
        "1",
        vec![op(
            "listener.security.protocol.map",
            SET,
            Some("PLAINTEXT:SSL,CONTROLLER:PLAINTEXT"),
        )],
    );
    assert_eq!(
        message,
        "Security protocol cannot be updated for existing listener PLAINTEXT"
    );
    let (_, message) = alter(
        "1",
        vec![op(
            "listeners",
            SET,
            Some("PLAINTEXT://localhost:9092,CONTROLLER://localhost:9095"),
        )],
    );
    assert!(
        message.starts_with("Controller listeners cannot change at runtime"),
        "{message}"
    );
}

#[test]
fn a_bad_cluster_wide_value_is_refused_where_a_broker_has_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    let alter = |name: &str, value| {
        let ops = vec![op("log.segment.max.open.files", SET, Some(value))];
        incremental(&broker, RESOURCE_BROKER, name, ops, false)
    };
    assert_eq!(alter("1", "50").0, 0);
    // Broker 1's own value would hide it in broker 1's configuration.
    let (code, message) = alter("", "-2");
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert!(
        message.starts_with("Invalid value -2 for configuration log.segment.max.open.files"),
        "{message}"
    );
    assert_eq!(alter("", "20").0, 0);
}

#[test]
fn broker_refusals_follow_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    let refusal = |name: &str, ops: Vec<AlterableConfig>| {
        incremental(&broker, RESOURCE_BROKER, name, ops, false)
    };
    let (code, message) = refusal("", vec![op("num.partitions", SET, Some("3"))]);
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert_eq!(
        message,
        "Cannot update these configs dynamically: [num.partitions]"
    );
    // The replication throttles apply at runtime.
    assert_eq!(
        refusal(
            "1",
            vec![op("leader.replication.throttled.rate", SET, Some("1000"))]
        )
        .0,
        0
    );
    // Listener settings are per broker, as in Kafka.
    let (code, message) = refusal(
        "",
        vec![op(
            "listener.name.ssl.ssl.client.auth",
            SET,
            Some("required"),
        )],
    );
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert_eq!(
        message,
        "Cannot update these configs at default cluster level, broker id must be specified: \
         [listener.name.ssl.ssl.client.auth]"
    );
    let (code, message) = refusal("1", vec![op("log.retention.ms", SET, Some("soon"))]);
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert!(
        message.starts_with("Invalid value soon for configuration log.retention.ms"),
        "{message}"
    );
    // Kafka stores broker keys it does not know (a plugin's) unchecked.
    assert_eq!(
        incremental(
            &broker,
            RESOURCE_BROKER,
            "",
            vec![op("no.such.key", SET, Some("1"))],
            true
        )
        .0,
        0
    );
    let (code, message) = refusal("2", vec![op("log.retention.ms", SET, Some("1"))]);
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert_eq!(message, "Unexpected broker id, expected 1, but received 2");
    assert_eq!(refusal("x", vec![]).0, ResponseError::InvalidRequest.code());
    assert_eq!(
        refusal("", vec![op("message.max.bytes", APPEND, Some("1"))]).0,
        ResponseError::InvalidConfig.code()
    );
    assert_eq!(
        legacy(&broker, RESOURCE_BROKER, "", &[("log.dirs", Some("/x"))]),
        ResponseError::InvalidRequest.code()
    );
    assert!(broker
        .controller
        .image()
        .configs_of(RESOURCE_BROKER, "")
        .is_none());
    // A list key appends to its default.
    assert_eq!(
        refusal("", vec![op("log.cleanup.policy", APPEND, Some("compact"))]).0,
        0
    );
    let defaults = describe_one(&broker, 4, RESOURCE_BROKER, "", None);
    assert_eq!(
        value_and_source(&defaults, "log.cleanup.policy")
            .0
            .as_deref(),
        Some("delete,compact")
    );
}

#[test]
fn unknown_broker_keys_are_stored_and_described_as_kafka_does() {
    let dir = tempfile::tempdir().unwrap();
    let broker = test_broker(dir.path());
    let set = |name: &str| {
        incremental(
            &broker,
            RESOURCE_BROKER,
            name,
            vec![op("plugin.custom.key", SET, Some("42"))],
            false,
        )
    };
    assert_eq!(set("").0, 0);
    assert_eq!(set("1").0, 0);
    // A known key is still type-checked next to the stored unknown one.
    let (code, _) = incremental(
        &broker,
        RESOURCE_BROKER,
        "",
        vec![op("log.retention.ms", SET, Some("soon"))],
        true,
    );
    assert_eq!(code, ResponseError::InvalidRequest.code());
    for (name, sources) in [("", vec![3]), ("1", vec![2, 3])] {
        let described = describe_one(&broker, 4, RESOURCE_BROKER, name, None);
        assert_eq!(described.error_code, 0);
        assert_eq!(described.error_message.as_deref(), Some(""));
        let e = entry(&described, "plugin.custom.key");
        // No type: sensitive, so no value; not a dynamic key Kafka knows.
        assert_eq!(e.value, None);
        assert!(e.is_sensitive && e.read_only);
        assert_eq!((e.config_source, e.config_type), (sources[0], 0));
        assert_eq!(e.documentation, None);
        let synonyms: Vec<(Option<&str>, i8)> = e
            .synonyms
            .iter()
            .map(|s| (s.value.as_deref(), s.source))
            .collect();
        let expected: Vec<(Option<&str>, i8)> = sources.iter().map(|&s| (None, s)).collect();
        assert_eq!(synonyms, expected);
    }
}
