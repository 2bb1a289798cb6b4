//! Wire-level conformance: the same requests go to a real Apache Kafka 4.4
//! broker (scripts/apache-kafka.sh, started once) and to a live `ottla`, and
//! the decoded answers are compared field by field. What depends on timing,
//! ids or the broker itself (node ids, hosts, ports, cluster and topic ids,
//! session ids, throttle times, append timestamps) is normalised first;
//! free-text error messages are compared for presence only (both texts are
//! printed when they differ). Differences Ottla is allowed to have are listed
//! explicitly below, each with the reason.
//!
//! Everything runs in one test so that Kafka starts once. Each check runs on
//! its own and failures are collected, so one run reports every difference.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::api_versions_request::ApiVersionsRequest;
use kafka_protocol::messages::api_versions_response::ApiVersionsResponse;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_cluster_request::DescribeClusterRequest;
use kafka_protocol::messages::describe_configs_request::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResponse;
use kafka_protocol::messages::describe_topic_partitions_request::{
    DescribeTopicPartitionsRequest, TopicRequest,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchResponse;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kafka_protocol::messages::incremental_alter_configs_response;
use kafka_protocol::messages::list_config_resources_request::ListConfigResourcesRequest;
use kafka_protocol::messages::list_config_resources_response::ListConfigResourcesResponse;
use kafka_protocol::messages::list_groups_request::ListGroupsRequest;
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::metadata_request::{MetadataRequest, MetadataRequestTopic};
use kafka_protocol::messages::metadata_response::MetadataResponse;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderEpochRequest, OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kafka_protocol::messages::{ApiKey, BrokerId, TopicName};
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use ottla_protocol::batch::{BatchBuilder, BatchIter, SimpleRecord};
use ottla_protocol::mirror::MirrorApiKey;
use ottla_tests::apache_kafka::ApacheKafka;
use ottla_tests::ottla::Ottla;
use ottla_tests::wire::WireClient;
use uuid::Uuid;

// Error codes used by name below.
const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const UNSUPPORTED_VERSION: i16 = 35;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_REQUEST: i16 = 42;
const INVALID_CONFIG: i16 = 40;
const POLICY_VIOLATION: i16 = 44;

const TOPIC_RESOURCE: i8 = 2;
const BROKER_RESOURCE: i8 = 4;
const GROUP_RESOURCE: i8 = 32;

/// Broker settings both start with: static `log.*` values whose topic
/// configs then report them (or, for Kafka's synonym rules, do not).
const STATIC_CONFIGS: &[(&str, &str)] = &[
    ("log.retention.hours", "2"),
    ("log.roll.ms", "3600000"),
    ("log.cleaner.delete.retention.ms", "3600000"),
];

/// What broker-specific values are replaced with.
const NODE: i32 = 1000;
const HOST: &str = "<host>";
const PORT: i32 = 1;
const CLUSTER_ID: &str = "<cluster id>";
const TIMESTAMP: i64 = 4242;
const MESSAGE: &str = "<message>";

/// Topic config keys Apache Kafka 4.4 reports that Ottla does not have.
/// Each belongs to a feature Ottla does not implement, so it neither accepts
/// nor reports the key (a client setting one gets INVALID_CONFIG).
const KAFKA_ONLY_TOPIC_KEYS: &[(&str, &str)] = &[
    (
        "remote.log.copy.disable",
        "tiered storage (KIP-405/KIP-950) is not implemented",
    ),
    (
        "remote.log.delete.on.disable",
        "tiered storage (KIP-405/KIP-950) is not implemented",
    ),
    (
        "remote.copy.lag.ms",
        "tiered storage (new in 4.4) is not implemented",
    ),
    (
        "remote.copy.lag.bytes",
        "tiered storage (new in 4.4) is not implemented",
    ),
    (
        "max.decompressed.message.bytes",
        "Kafka 4.4's limit on a decompressed record is not enforced by Ottla",
    ),
];

/// Topic config keys Ottla reports that Apache Kafka 4.4 does not.
const OTTLA_ONLY_TOPIC_KEYS: &[(&str, &str)] = &[(
    "message.downconversion.enable",
    "removed by Kafka 4.0 with message down-conversion (KIP-724): Kafka 4.4 \
     refuses it as an unknown key; Ottla still accepts and reports it (it never \
     down-converts) so that configs mirrored from 3.x clusters round-trip",
)];

/// Answers where Ottla's error code differs from Kafka's on purpose, by
/// check and case: (Kafka's code, Ottla's code, why). Each is asserted
/// exactly, so a change on either side shows up.
const ALLOWED_CODE_DIFFERENCES: &[(&str, i16, i16, &str)] = &[
    (
        "IncrementalAlterConfigs: unknown operation",
        -1,
        INVALID_REQUEST,
        "Kafka forwards OpType.forId(9) = null to its controller, which fails \
         with a NullPointerException (UNKNOWN_SERVER_ERROR, no message); Ottla \
         refuses the request as malformed",
    ),
    (
        "CreateTopics: wire-downconversion",
        INVALID_CONFIG,
        NONE,
        "message.downconversion.enable: see OTTLA_ONLY_TOPIC_KEYS",
    ),
];

/// Whether `(kafka, ottla)` for `case` is an allowed difference; panics if
/// the case is listed with other codes.
fn allowed_difference(case: &str, kafka: i16, ottla: i16) -> bool {
    let Some(&(_, k, o, why)) = ALLOWED_CODE_DIFFERENCES.iter().find(|d| d.0 == case) else {
        return false;
    };
    assert_eq!(
        (kafka, ottla),
        (k, o),
        "{case}: the allowed difference changed (listed because: {why})"
    );
    eprintln!("  allowed difference, {case}: Kafka {kafka}, Ottla {ottla} ({why})");
    true
}

/// An API key by name, for the report. Ottla advertises only what it
/// answers, so the keys Kafka serves beyond those are listed, not failed.
fn report_missing_api(key: i16) -> String {
    match ApiKey::try_from(key) {
        Ok(k) => format!("{k:?}({key})"),
        Err(()) => format!("api key {key}"),
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn tn(v: &str) -> TopicName {
    TopicName(s(v))
}

/// Both connections and what the checks learn on the way (topic ids).
struct Ctx {
    kafka: WireClient,
    ottla: WireClient,
    kafka_ids: BTreeMap<String, Uuid>,
    ottla_ids: BTreeMap<String, Uuid>,
}

impl Ctx {
    fn both<R: Request>(&mut self, version: i16, req: &R) -> (R::Response, R::Response) {
        (self.kafka.send(version, req), self.ottla.send(version, req))
    }
}

/// Runs named checks, keeping going after a failure.
struct Checks {
    failures: Vec<String>,
}

impl Checks {
    fn run(&mut self, name: &str, ctx: &mut Ctx, f: impl FnOnce(&mut Ctx)) {
        eprintln!("--- {name}");
        let started = Instant::now();
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| f(ctx))) {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            self.failures.push(format!("{name}: {msg}"));
        }
        eprintln!("    ({:?})", started.elapsed());
    }
}

#[test]
fn ottla_answers_like_apache_kafka() {
    let started = Instant::now();
    let kafka = ApacheKafka::start_with(STATIC_CONFIGS);
    let ottla = Ottla::start(STATIC_CONFIGS);
    let mut ctx = Ctx {
        kafka: WireClient::connect(&kafka.bootstrap),
        ottla: WireClient::connect(&ottla.bootstrap()),
        kafka_ids: BTreeMap::new(),
        ottla_ids: BTreeMap::new(),
    };
    let mut checks = Checks {
        failures: Vec::new(),
    };
    checks.run("ApiVersions v3", &mut ctx, api_versions);
    checks.run(
        "ApiVersions v9 (unsupported)",
        &mut ctx,
        api_versions_too_new,
    );
    checks.run("Metadata v12, missing topic", &mut ctx, metadata_missing);
    checks.run(
        "Metadata v12, invalid names",
        &mut ctx,
        metadata_invalid_names,
    );
    checks.run(
        "CreateTopics v7, validate_only",
        &mut ctx,
        create_topics_validate_only,
    );
    checks.run("CreateTopics v7", &mut ctx, create_topics);
    checks.run(
        "Metadata v12, auto-creation",
        &mut ctx,
        metadata_auto_create,
    );
    checks.run("DescribeConfigs v4", &mut ctx, describe_configs);
    checks.run(
        "IncrementalAlterConfigs v1, refusals",
        &mut ctx,
        incremental_alter_configs,
    );
    checks.run(
        "IncrementalAlterConfigs v1 + DescribeConfigs v4, custom broker key",
        &mut ctx,
        custom_broker_key,
    );
    checks.run(
        "IncrementalAlterConfigs v1 + DescribeConfigs v4 + ListConfigResources v1, groups",
        &mut ctx,
        group_configs,
    );
    checks.run(
        "ListOffsets v8, empty partition",
        &mut ctx,
        list_offsets_empty,
    );
    checks.run("Produce v11 + Fetch v16", &mut ctx, produce_fetch);
    checks.run(
        "Produce v11 + Fetch v16, LogAppendTime",
        &mut ctx,
        produce_fetch_log_append_time,
    );
    checks.run(
        "Produce v11, a keyless record on a compacted topic",
        &mut ctx,
        produce_keyless_to_compacted,
    );
    checks.run("Fetch v16, errors", &mut ctx, fetch_errors);
    checks.run(
        "Fetch v16, an incremental session",
        &mut ctx,
        fetch_session_keeps_client_offsets,
    );
    checks.run("OffsetForLeaderEpoch v4", &mut ctx, offset_for_leader_epoch);
    checks.run("DeleteRecords v2", &mut ctx, delete_records);
    checks.run("DescribeCluster v1", &mut ctx, describe_cluster);
    checks.run("FindCoordinator v4", &mut ctx, find_coordinator);
    checks.run("ListGroups v5", &mut ctx, list_groups);
    checks.run(
        "StreamsGroupDescribe v1 + StreamsGroupTopologyDescriptionUpdate v0",
        &mut ctx,
        streams_v1,
    );
    checks.run(
        "DescribeTopicPartitions v0",
        &mut ctx,
        describe_topic_partitions,
    );
    drop(ctx);
    eprintln!("all checks done in {:?}", started.elapsed());
    assert!(
        checks.failures.is_empty(),
        "{} check(s) differ from Apache Kafka:\n\n{}",
        checks.failures.len(),
        checks.failures.join("\n\n")
    );
}

// ---------------------------------------------------------------- ApiVersions

fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(s("ottla-wire-test"))
        .with_client_software_version(s("1.0"))
}

fn api_versions(ctx: &mut Ctx) {
    let (k, o) = ctx.both(3, &api_versions_request());
    assert_eq!(k.error_code, NONE);
    assert_eq!(o.error_code, NONE);
    let ranges = |r: &ApiVersionsResponse| -> BTreeMap<i16, (i16, i16)> {
        r.api_keys
            .iter()
            .map(|a| (a.api_key, (a.min_version, a.max_version)))
            .collect()
    };
    let (kr, or) = (ranges(&k), ranges(&o));
    let missing: Vec<String> = kr
        .keys()
        .filter(|key| !or.contains_key(key))
        .map(|&key| report_missing_api(key))
        .collect();
    eprintln!(
        "API keys Kafka serves and Ottla does not ({}): {}",
        missing.len(),
        missing.join(", ")
    );
    let mut problems = Vec::new();
    for (&key, &(omin, omax)) in &or {
        let name = report_missing_api(key);
        let Some(&(kmin, kmax)) = kr.get(&key) else {
            // Ottla's own mirror APIs (KIP-1279) are the one expected extra.
            if MirrorApiKey::from_i16(key).is_none() {
                problems.push(format!("{name}: Ottla serves it, Kafka does not"));
            }
            continue;
        };
        if MirrorApiKey::from_i16(key).is_some() {
            problems.push(format!("{name}: Kafka now allocates mirror API key {key}"));
            continue;
        }
        if omax != kmax {
            eprintln!("{name}: max version Ottla v{omax}, Kafka v{kmax}");
        }
        if omin != kmin {
            problems.push(format!("{name}: min version Ottla v{omin}, Kafka v{kmin}"));
        }
        if omax > kmax {
            problems.push(format!(
                "{name}: Ottla serves up to v{omax}, beyond Kafka's v{kmax}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Features: report what differs (Ottla finalizes only what it implements).
    let features = |r: &ApiVersionsResponse| -> BTreeMap<String, (i16, i16)> {
        r.supported_features
            .iter()
            .map(|f| (f.name.to_string(), (f.min_version, f.max_version)))
            .collect()
    };
    eprintln!(
        "supported features: Kafka {:?}, Ottla {:?}",
        features(&k),
        features(&o)
    );
}

/// KIP-511: an ApiVersions request at a version the broker does not know is
/// answered in v0 with UNSUPPORTED_VERSION and the ApiVersions range.
fn api_versions_too_new(ctx: &mut Ctx) {
    let mut body = bytes::BytesMut::new();
    api_versions_request().encode(&mut body, 3).unwrap();
    let decode = |client: &mut WireClient| {
        let mut reply = client.send_raw(ApiKey::ApiVersions as i16, 9, 2, &body, 0);
        let r = <ApiVersionsResponse as kafka_protocol::protocol::Decodable>::decode(&mut reply, 0)
            .expect("a v0 ApiVersions answer");
        assert!(bytes::Buf::remaining(&reply) == 0, "trailing bytes");
        r
    };
    let mut k = decode(&mut ctx.kafka);
    let mut o = decode(&mut ctx.ottla);
    assert_eq!(k.error_code, UNSUPPORTED_VERSION);
    // The answer names the broker's own ApiVersions range, whose maximum may
    // differ (Kafka 4.4 serves v5, kafka-protocol 0.18 knows up to v4).
    for (r, client) in [(&mut k, &mut ctx.kafka), (&mut o, &mut ctx.ottla)] {
        let own = client.send(3, &api_versions_request());
        let own_max = own
            .api_keys
            .iter()
            .find(|a| a.api_key == ApiKey::ApiVersions as i16)
            .expect("ApiVersions is advertised")
            .max_version;
        assert_eq!(r.api_keys.len(), 1);
        assert_eq!(r.api_keys[0].max_version, own_max);
        r.api_keys[0].max_version = 0;
    }
    assert_eq!(o, k);
}

// ------------------------------------------------------------------- Metadata

fn metadata_request(names: &[&str], auto_create: bool) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(Some(
            names
                .iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(tn(n))))
                .collect(),
        ))
        .with_allow_auto_topic_creation(auto_create)
}

fn norm_metadata(mut r: MetadataResponse) -> MetadataResponse {
    r.throttle_time_ms = 0;
    for b in &mut r.brokers {
        b.node_id = BrokerId(NODE);
        b.host = s(HOST);
        b.port = PORT;
    }
    if r.cluster_id.is_some() {
        r.cluster_id = Some(s(CLUSTER_ID));
    }
    if r.controller_id.0 >= 0 {
        r.controller_id = BrokerId(NODE);
    }
    for t in &mut r.topics {
        norm_id(&mut t.topic_id);
        for p in &mut t.partitions {
            norm_node(&mut p.leader_id);
            p.replica_nodes.iter_mut().for_each(norm_node);
            p.isr_nodes.iter_mut().for_each(norm_node);
            p.offline_replicas.iter_mut().for_each(norm_node);
        }
    }
    r
}

fn norm_id(id: &mut Uuid) {
    if !id.is_nil() {
        *id = Uuid::from_u128(1);
    }
}

fn norm_node(id: &mut BrokerId) {
    if id.0 >= 0 {
        *id = BrokerId(NODE);
    }
}

fn norm_message(m: &mut Option<StrBytes>) {
    if m.is_some() {
        *m = Some(s(MESSAGE));
    }
}

/// Prints both error messages when they differ (they are free text).
fn show_messages(what: &str, k: &Option<StrBytes>, o: &Option<StrBytes>) {
    if k != o {
        eprintln!(
            "  {what}: Kafka says {:?}, Ottla says {:?}",
            k.as_deref(),
            o.as_deref()
        );
    }
}

fn metadata_missing(ctx: &mut Ctx) {
    for version in [12, 9, 4] {
        let req = metadata_request(&["wire-missing"], false);
        let (k, o) = ctx.both(version, &req);
        assert_eq!(k.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION);
        assert_eq!(
            norm_metadata(o),
            norm_metadata(k),
            "Metadata v{version}, wire-missing, allow_auto_topic_creation=false"
        );
    }
}

fn metadata_invalid_names(ctx: &mut Ctx) {
    let long = "x".repeat(250);
    for name in ["bad name!", "..", ".", long.as_str(), ""] {
        for auto in [true, false] {
            let (k, o) = ctx.both(12, &metadata_request(&[name], auto));
            assert_eq!(
                norm_metadata(o),
                norm_metadata(k),
                "Metadata v12 for {name:?}, allow_auto_topic_creation={auto}"
            );
        }
    }
}

/// Auto-creation: Kafka creates the topic asynchronously and answers the
/// creating request with LEADER_NOT_AVAILABLE; both must end up with the
/// same topic.
fn metadata_auto_create(ctx: &mut Ctx) {
    let req = metadata_request(&["wire-auto"], true);
    let (k, o) = ctx.both(12, &req);
    // Allowed difference: Kafka forwards the creation to its controller and
    // answers the creating request with UNKNOWN_TOPIC_OR_PARTITION (clients
    // retry); Ottla's controller creates the topic before answering, so the
    // first answer already holds what Kafka's retry would find.
    let first = |r: &MetadataResponse| (r.topics[0].error_code, r.topics[0].partitions.len());
    assert_eq!(
        first(&k),
        (UNKNOWN_TOPIC_OR_PARTITION, 0),
        "Kafka's first answer"
    );
    assert_eq!(first(&o), (NONE, 1), "Ottla's first answer");
    let settle = |client: &mut WireClient| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let r = client.send(12, &metadata_request(&["wire-auto"], false));
            let t = &r.topics[0];
            if (t.error_code == NONE && t.partitions.iter().all(|p| p.leader_id.0 >= 0))
                || Instant::now() > deadline
            {
                return r;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let k = settle(&mut ctx.kafka);
    let o = settle(&mut ctx.ottla);
    assert_eq!(k.topics[0].error_code, NONE);
    assert_eq!(norm_metadata(o), norm_metadata(k));
}

// --------------------------------------------------------------- CreateTopics

fn topic(
    name: &str,
    partitions: i32,
    replication: i16,
    configs: &[(&str, Option<&str>)],
) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(tn(name))
        .with_num_partitions(partitions)
        .with_replication_factor(replication)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(s(k))
                        .with_value(v.map(s))
                })
                .collect(),
        )
}

fn create_request(topics: Vec<CreatableTopic>, validate_only: bool) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only)
}

/// One config entry from either API, for comparison.
#[derive(Debug, Clone, PartialEq)]
struct ConfigRow {
    value: Option<String>,
    read_only: bool,
    source: i8,
    sensitive: bool,
    synonyms: Vec<(String, Option<String>, i8)>,
    config_type: i8,
    documentation: Option<String>,
}

/// Compares two config listings key by key; keys only one side has must be
/// on the allow-lists. Returns the problems found.
fn compare_configs(
    what: &str,
    k: &BTreeMap<String, ConfigRow>,
    o: &BTreeMap<String, ConfigRow>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let kafka_only: Vec<&String> = k.keys().filter(|n| !o.contains_key(*n)).collect();
    let ottla_only: Vec<&String> = o.keys().filter(|n| !k.contains_key(*n)).collect();
    if !kafka_only.is_empty() || !ottla_only.is_empty() {
        eprintln!("  {what}: keys only Kafka reports: {kafka_only:?}; only Ottla: {ottla_only:?}");
    }
    for name in kafka_only {
        if !KAFKA_ONLY_TOPIC_KEYS.iter().any(|(n, _)| n == name) {
            problems.push(format!(
                "{what}: Kafka reports {name} = {:?}, Ottla does not",
                k[name].value
            ));
        }
    }
    for name in ottla_only {
        if !OTTLA_ONLY_TOPIC_KEYS.iter().any(|(n, _)| n == name) {
            problems.push(format!(
                "{what}: Ottla reports {name} = {:?}, Kafka does not",
                o[name].value
            ));
        }
    }
    for (name, kr) in k {
        let Some(or) = o.get(name) else { continue };
        if kr != or {
            problems.push(format!(
                "{what}: {name}\n    Kafka: {kr:?}\n    Ottla: {or:?}"
            ));
        }
    }
    problems
}

const SOURCE_DYNAMIC_DEFAULT: i8 = 3;
const SOURCE_DEFAULT: i8 = 5;

/// Allowed difference: Kafka 4.1+ enables eligible leader replicas (KIP-966)
/// on a new cluster, and its controller then stores its static
/// min.insync.replicas as a cluster-level dynamic default. Ottla writes
/// that record only when UpdateFeatures turns the ELR on; a new cluster
/// runs with the feature at its initial level and the controller falls
/// back on the static value. So Kafka reports min.insync.replicas from
/// source 3 (DYNAMIC_DEFAULT_BROKER_CONFIG), with a synonym at that level,
/// where Ottla reports its default. The value is the same (checked). This
/// takes that level out of Kafka's row.
fn undo_cluster_min_isr(rows: &mut BTreeMap<String, ConfigRow>) {
    let Some(row) = rows.get_mut("min.insync.replicas") else {
        return;
    };
    if row.source == SOURCE_DYNAMIC_DEFAULT {
        assert_eq!(
            row.value.as_deref(),
            Some("1"),
            "Kafka's cluster-level min.insync.replicas"
        );
    }
    row.synonyms
        .retain(|(n, _, src)| !(n == "min.insync.replicas" && *src == SOURCE_DYNAMIC_DEFAULT));
    if row.source == SOURCE_DYNAMIC_DEFAULT {
        row.source = row.synonyms.first().map_or(SOURCE_DEFAULT, |s| s.2);
    }
}

fn created_configs(r: &CreateTopicsResponse, name: &str) -> Option<BTreeMap<String, ConfigRow>> {
    let t = r.topics.iter().find(|t| t.name.as_str() == name)?;
    Some(
        t.configs
            .as_ref()?
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    ConfigRow {
                        value: c.value.as_ref().map(|v| v.to_string()),
                        read_only: c.read_only,
                        source: c.config_source,
                        sensitive: c.is_sensitive,
                        synonyms: Vec::new(),
                        config_type: 0,
                        documentation: None,
                    },
                )
            })
            .collect(),
    )
}

/// Compares per-topic results: everything but configs (compared key by key),
/// topic ids and message texts.
fn compare_created(k: &CreateTopicsResponse, o: &CreateTopicsResponse) -> Vec<String> {
    let mut problems = Vec::new();
    let names = |r: &CreateTopicsResponse| -> Vec<String> {
        r.topics.iter().map(|t| t.name.to_string()).collect()
    };
    if names(k) != names(o) {
        problems.push(format!(
            "topics answered: Kafka {:?}, Ottla {:?}",
            names(k),
            names(o)
        ));
        return problems;
    }
    for (kt, ot) in k.topics.iter().zip(&o.topics) {
        let name = kt.name.as_str();
        show_messages(name, &kt.error_message, &ot.error_message);
        let strip = |t: &kafka_protocol::messages::create_topics_response::CreatableTopicResult| {
            let mut t = t.clone();
            norm_id(&mut t.topic_id);
            norm_message(&mut t.error_message);
            t.configs = t.configs.map(|_| Vec::new());
            t
        };
        let allowed = kt.error_code != ot.error_code
            && allowed_difference(
                &format!("CreateTopics: {name}"),
                kt.error_code,
                ot.error_code,
            );
        if allowed {
            continue;
        }
        if strip(kt) != strip(ot) {
            problems.push(format!(
                "{name}:\n    Kafka: {:?}\n    Ottla: {:?}",
                strip(kt),
                strip(ot)
            ));
        }
        if let (Some(mut kc), Some(oc)) = (created_configs(k, name), created_configs(o, name)) {
            undo_cluster_min_isr(&mut kc);
            problems.extend(compare_configs(name, &kc, &oc));
        }
    }
    problems
}

fn create_topics_validate_only(ctx: &mut Ctx) {
    let long = "x".repeat(250);
    let mut both_ways = topic("wire-assigned", 2, -1, &[]);
    both_ways.assignments = vec![CreatableReplicaAssignment::default()
        .with_partition_index(0)
        .with_broker_ids(vec![BrokerId(1)])];
    let topics = vec![
        topic("wire-valid", 3, 1, &[]),
        topic("wire-defaults", -1, -1, &[]),
        topic(
            "wire-configured",
            2,
            1,
            &[
                ("cleanup.policy", Some("compact,delete")),
                ("retention.ms", Some("1000")),
                ("min.insync.replicas", Some("1")),
                ("message.timestamp.type", Some("LogAppendTime")),
                ("compression.type", Some("zstd")),
            ],
        ),
        topic("bad name!", 1, 1, &[]),
        topic("..", 1, 1, &[]),
        topic(&long, 1, 1, &[]),
        topic("wire-zero-partitions", 0, 1, &[]),
        topic("wire-negative-partitions", -2, 1, &[]),
        topic("wire-rf-zero", 1, 0, &[]),
        topic("wire-rf-two", 1, 2, &[]),
        topic("wire-rf-negative", 1, -2, &[]),
        both_ways,
        topic(
            "wire-unknown-config",
            1,
            1,
            &[("no.such.config", Some("1"))],
        ),
        topic("wire-bad-long", 1, 1, &[("retention.ms", Some("soon"))]),
        topic("wire-below-min", 1, 1, &[("segment.bytes", Some("10"))]),
        topic("wire-bad-enum", 1, 1, &[("cleanup.policy", Some("shred"))]),
        topic("wire-bad-bool", 1, 1, &[("preallocate", Some("yes"))]),
        topic("wire-null-config", 1, 1, &[("retention.ms", None)]),
        topic(
            "wire-bad-ratio",
            1,
            1,
            &[("min.cleanable.dirty.ratio", Some("1.5"))],
        ),
        topic(
            "wire-small-segment",
            1,
            1,
            &[("segment.bytes", Some("1000"))],
        ),
        topic(
            "wire-downconversion",
            1,
            1,
            &[("message.downconversion.enable", Some("true"))],
        ),
        topic(
            "wire-format-version",
            1,
            1,
            &[("message.format.version", Some("3.0"))],
        ),
        topic(
            "wire-remote-storage",
            1,
            1,
            &[("remote.storage.enable", Some("true"))],
        ),
        topic("__wire_internal_like", 1, 1, &[]),
        topic(
            "wire-min-isr-above-rf",
            1,
            1,
            &[("min.insync.replicas", Some("2"))],
        ),
    ];
    let (k, o) = ctx.both(7, &create_request(topics, true));
    let code = |r: &CreateTopicsResponse, n: &str| {
        r.topics
            .iter()
            .find(|t| t.name.as_str() == n)
            .map(|t| t.error_code)
    };
    // Sanity: the reference says what we expect it to.
    assert_eq!(code(&k, "wire-valid"), Some(NONE));
    assert_eq!(code(&k, "bad name!"), Some(INVALID_TOPIC_EXCEPTION));
    assert_eq!(code(&k, "wire-zero-partitions"), Some(INVALID_PARTITIONS));
    assert_eq!(code(&k, "wire-rf-two"), Some(INVALID_REPLICATION_FACTOR));
    assert_eq!(code(&k, "wire-unknown-config"), Some(INVALID_CONFIG));
    let problems = compare_created(&k, &o);
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // A name given twice in one request.
    let twice = vec![
        topic("wire-twice", 1, 1, &[]),
        topic("wire-twice", 2, 1, &[]),
    ];
    let (k, o) = ctx.both(7, &create_request(twice, true));
    assert_eq!(code(&k, "wire-twice"), Some(INVALID_REQUEST));
    let problems = compare_created(&k, &o);
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Over 10,000 metadata records in one request (two topic records and
    // 9,999 partitions): every topic of it is refused.
    let huge = vec![
        topic("wire-huge", 9_999, 1, &[]),
        topic("wire-beside-huge", 1, 1, &[]),
    ];
    let (k, o) = ctx.both(7, &create_request(huge, true));
    assert_eq!(code(&k, "wire-huge"), Some(POLICY_VIOLATION));
    assert_eq!(code(&k, "wire-beside-huge"), Some(POLICY_VIOLATION));
    let problems = compare_created(&k, &o);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The topics the later checks use, created for real.
fn create_topics(ctx: &mut Ctx) {
    let topics = vec![
        topic(
            "wire-data",
            1,
            1,
            &[
                ("retention.ms", Some("86400000")),
                ("max.message.bytes", Some("2000000")),
            ],
        ),
        topic("wire-empty", 1, 1, &[]),
        topic(
            "wire-lat",
            1,
            1,
            &[("message.timestamp.type", Some("LogAppendTime"))],
        ),
        topic("wire.collide", 2, -1, &[]),
        topic("wire-compact", 1, 1, &[("cleanup.policy", Some("compact"))]),
    ];
    let (k, o) = ctx.both(7, &create_request(topics, false));
    for t in &k.topics {
        assert_eq!(t.error_code, NONE, "Kafka refused {}", t.name.as_str());
        ctx.kafka_ids.insert(t.name.to_string(), t.topic_id);
    }
    for t in &o.topics {
        ctx.ottla_ids.insert(t.name.to_string(), t.topic_id);
    }
    let mut problems = compare_created(&k, &o);
    // Names that collide with an existing one once '.' and '_' are equated,
    // and names that exist already.
    let clashes = vec![
        topic("wire_collide", 1, 1, &[]),
        topic("wire-empty", 1, 1, &[]),
    ];
    for validate_only in [true, false] {
        let (k, o) = ctx.both(7, &create_request(clashes.clone(), validate_only));
        problems.extend(compare_created(&k, &o));
    }
    // Kafka answers the creating request before every partition has a
    // leader on the broker; wait until both serve the new topics.
    for client in [&mut ctx.kafka, &mut ctx.ottla] {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let r = client.send(
                12,
                &metadata_request(
                    &["wire-data", "wire-empty", "wire-lat", "wire.collide"],
                    false,
                ),
            );
            let ready = r
                .topics
                .iter()
                .all(|t| t.error_code == NONE && t.partitions.iter().all(|p| p.leader_id.0 >= 0));
            if ready || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ------------------------------------------------------------ DescribeConfigs

fn described(r: &DescribeConfigsResponse, i: usize) -> BTreeMap<String, ConfigRow> {
    r.results[i]
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                ConfigRow {
                    value: c.value.as_ref().map(|v| v.to_string()),
                    read_only: c.read_only,
                    source: c.config_source,
                    sensitive: c.is_sensitive,
                    synonyms: c
                        .synonyms
                        .iter()
                        .map(|s| {
                            (
                                s.name.to_string(),
                                s.value.as_ref().map(|v| v.to_string()),
                                s.source,
                            )
                        })
                        .collect(),
                    config_type: c.config_type,
                    documentation: c.documentation.as_ref().map(|v| v.to_string()),
                },
            )
        })
        .collect()
}

fn describe_configs(ctx: &mut Ctx) {
    let resource = |kind: i8, name: &str, keys: Option<&[&str]>| {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(name))
            .with_configuration_keys(keys.map(|ks| ks.iter().map(|k| s(k)).collect()))
    };
    let req = DescribeConfigsRequest::default()
        .with_resources(vec![
            resource(TOPIC_RESOURCE, "wire-data", None),
            resource(TOPIC_RESOURCE, "wire-empty", None),
            resource(
                TOPIC_RESOURCE,
                "wire-data",
                Some(&["retention.ms", "no.such.config"]),
            ),
            resource(TOPIC_RESOURCE, "wire-missing", None),
            resource(TOPIC_RESOURCE, "bad name!", None),
            resource(BROKER_RESOURCE, "", None),
        ])
        .with_include_synonyms(true)
        .with_include_documentation(false);
    let (k, o) = ctx.both(4, &req);
    assert_eq!(k.results.len(), o.results.len());
    let mut problems = Vec::new();
    for (i, (kr, or)) in k.results.iter().zip(&o.results).enumerate() {
        let what = format!(
            "resource {i} (type {} {:?})",
            kr.resource_type,
            kr.resource_name.as_str()
        );
        show_messages(&what, &kr.error_message, &or.error_message);
        let head =
            |r: &kafka_protocol::messages::describe_configs_response::DescribeConfigsResult| {
                (
                    r.error_code,
                    r.error_message.is_some(),
                    r.resource_type,
                    r.resource_name.to_string(),
                )
            };
        if head(kr) != head(or) {
            problems.push(format!(
                "{what}: (error, has message, type, name) Kafka {:?}, Ottla {:?}",
                head(kr),
                head(or)
            ));
        }
        let mut krows = described(&k, i);
        if kr.resource_type == BROKER_RESOURCE && kr.resource_name.is_empty() {
            // The cluster-level record itself (see undo_cluster_min_isr).
            let elr = krows
                .remove("min.insync.replicas")
                .expect("Kafka's ELR min.insync.replicas");
            assert_eq!(
                (elr.value.as_deref(), elr.source),
                (Some("1"), SOURCE_DYNAMIC_DEFAULT)
            );
        }
        undo_cluster_min_isr(&mut krows);
        problems.extend(compare_configs(&what, &krows, &described(&o, i)));
    }
    assert_eq!(k.results[0].error_code, NONE);
    assert!(described(&k, 0).contains_key("retention.ms"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------- IncrementalAlterConfigs

/// One config change: name, operation, value.
type AlterOp<'a> = (&'a str, i8, Option<&'a str>);

fn incremental_alter_configs(ctx: &mut Ctx) {
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    const APPEND: i8 = 2;
    const SUBTRACT: i8 = 3;
    let cases: Vec<(&str, i8, &str, Vec<AlterOp>)> = vec![
        (
            "bad long",
            TOPIC_RESOURCE,
            "wire-data",
            vec![("retention.ms", SET, Some("soon"))],
        ),
        (
            "unknown key",
            TOPIC_RESOURCE,
            "wire-data",
            vec![("no.such.config", SET, Some("1"))],
        ),
        (
            "below minimum",
            TOPIC_RESOURCE,
            "wire-data",
            vec![("segment.bytes", SET, Some("1"))],
        ),
        (
            "bad enum",
            TOPIC_RESOURCE,
            "wire-data",
            vec![("cleanup.policy", SET, Some("shred"))],
        ),
        (
            "bad list item",
            TOPIC_RESOURCE,
            "wire-data",
            vec![("cleanup.policy", APPEND, Some("shred"))],
        ),
        (
            "bad bool",
            TOPIC_RESOURCE,
            "wire-data",
            vec![("preallocate", SET, Some("maybe"))],
        ),
        (
            "append to a long",
            TOPIC_RESOURCE,
            "wire-data",
            vec![("retention.ms", APPEND, Some("1"))],
        ),
        (
            "subtract from a long",
            TOPIC_RESOURCE,
            "wire-data",
            vec![("retention.ms", SUBTRACT, Some("1"))],
        ),
        (
            "null value",
            TOPIC_RESOURCE,
            "wire-data",
            vec![("retention.ms", SET, None)],
        ),
        (
            "unknown operation",
            TOPIC_RESOURCE,
            "wire-data",
            vec![("retention.ms", 9, Some("1"))],
        ),
        (
            "key twice",
            TOPIC_RESOURCE,
            "wire-data",
            vec![
                ("retention.ms", SET, Some("1")),
                ("retention.ms", DELETE, None),
            ],
        ),
        (
            "unknown topic",
            TOPIC_RESOURCE,
            "wire-missing",
            vec![("retention.ms", SET, Some("1000"))],
        ),
        (
            "invalid topic name",
            TOPIC_RESOURCE,
            "bad name!",
            vec![("retention.ms", SET, Some("1000"))],
        ),
        (
            "default topic",
            TOPIC_RESOURCE,
            "",
            vec![("retention.ms", SET, Some("1000"))],
        ),
        (
            "static broker key",
            BROKER_RESOURCE,
            "1",
            vec![("log.dirs", SET, Some("/tmp/x"))],
        ),
        (
            "unknown broker key",
            BROKER_RESOURCE,
            "",
            vec![("no.such.config", SET, Some("1"))],
        ),
        (
            "bad broker value",
            BROKER_RESOURCE,
            "",
            vec![("log.retention.ms", SET, Some("soon"))],
        ),
        (
            "other broker",
            BROKER_RESOURCE,
            "7",
            vec![("log.retention.ms", SET, Some("1000"))],
        ),
        (
            "broker id not a number",
            BROKER_RESOURCE,
            "one",
            vec![("log.retention.ms", SET, Some("1000"))],
        ),
        (
            "unknown resource type",
            99,
            "x",
            vec![("retention.ms", SET, Some("1000"))],
        ),
        (
            "valid (validate only)",
            TOPIC_RESOURCE,
            "wire-data",
            vec![("retention.ms", SET, Some("3600000"))],
        ),
    ];
    let mut problems = Vec::new();
    for (label, kind, name, configs) in cases {
        let req = IncrementalAlterConfigsRequest::default()
            .with_validate_only(true)
            .with_resources(vec![AlterConfigsResource::default()
                .with_resource_type(kind)
                .with_resource_name(s(name))
                .with_configs(
                    configs
                        .iter()
                        .map(|(n, op, v)| {
                            AlterableConfig::default()
                                .with_name(s(n))
                                .with_config_operation(*op)
                                .with_value(v.map(s))
                        })
                        .collect(),
                )]);
        let (k, o) = ctx.both(1, &req);
        let (kr, or) = (&k.responses[0], &o.responses[0]);
        show_messages(label, &kr.error_message, &or.error_message);
        let mut kn = kr.clone();
        let mut on = or.clone();
        norm_message(&mut kn.error_message);
        norm_message(&mut on.error_message);
        if kn != on
            && !allowed_difference(
                &format!("IncrementalAlterConfigs: {label}"),
                kn.error_code,
                on.error_code,
            )
        {
            problems.push(format!("{label}:\n    Kafka: {kn:?}\n    Ottla: {on:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// GROUP config resources (`kafka-configs.sh --entity-type groups`): the
/// checks and their messages, a stored override and how it is described
/// (synonyms: the override, then the broker key's default), and the
/// listing of groups with configs. Messages are compared exactly.
fn group_configs(ctx: &mut Ctx) {
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    const APPEND: i8 = 2;
    let resource = |group: &str, configs: &[AlterOp]| {
        AlterConfigsResource::default()
            .with_resource_type(GROUP_RESOURCE)
            .with_resource_name(s(group))
            .with_configs(
                configs
                    .iter()
                    .map(|(n, op, v)| {
                        AlterableConfig::default()
                            .with_name(s(n))
                            .with_config_operation(*op)
                            .with_value(v.map(s))
                    })
                    .collect(),
            )
    };
    let cases: Vec<(&str, Vec<AlterOp>)> = vec![
        (
            "",
            vec![("consumer.session.timeout.ms", SET, Some("50000"))],
        ),
        (
            "g-range",
            vec![("consumer.session.timeout.ms", SET, Some("1000"))],
        ),
        (
            "g-int",
            vec![("consumer.session.timeout.ms", SET, Some("abc"))],
        ),
        (
            "g-least",
            vec![("consumer.heartbeat.interval.ms", SET, Some("0"))],
        ),
        (
            "g-lock",
            vec![("share.record.lock.duration.ms", SET, Some("100"))],
        ),
        ("g-unknown", vec![("no.such", SET, Some("1"))]),
        (
            "g-enum",
            vec![("share.isolation.level", SET, Some("bogus"))],
        ),
        (
            "g-reset",
            vec![("share.auto.offset.reset", SET, Some("by_duration:xx"))],
        ),
        (
            "g-bool",
            vec![("share.renew.acknowledge.enable", SET, Some("maybe"))],
        ),
        (
            "g-assignor",
            vec![("streams.assignor.name", SET, Some("nope"))],
        ),
        (
            "g-standby",
            vec![("streams.num.standby.replicas", SET, Some("5"))],
        ),
        (
            "g-append",
            vec![("consumer.session.timeout.ms", APPEND, Some("1"))],
        ),
        (
            "g-list",
            vec![("streams.rack.aware.assignment.tags", APPEND, Some("zone"))],
        ),
        ("g-delete", vec![("no.such", DELETE, None)]),
        (
            "g-duration",
            vec![("share.auto.offset.reset", SET, Some("by_duration:PT1H"))],
        ),
    ];
    let mut problems = Vec::new();
    let req = IncrementalAlterConfigsRequest::default()
        .with_validate_only(true)
        .with_resources(cases.iter().map(|(g, c)| resource(g, c)).collect());
    let (k, o) = ctx.both(1, &req);
    for ((group, _), (kr, or)) in cases.iter().zip(k.responses.iter().zip(&o.responses)) {
        let answer = |r: &incremental_alter_configs_response::AlterConfigsResourceResponse| {
            (r.error_code, r.error_message.as_deref().map(str::to_string))
        };
        if answer(kr) != answer(or) {
            problems.push(format!(
                "alter {group:?}: Kafka {:?}, Ottla {:?}",
                answer(kr),
                answer(or)
            ));
        }
    }

    // A stored override, as described and listed.
    let stored = IncrementalAlterConfigsRequest::default().with_resources(vec![resource(
        "wire-configured",
        &[
            ("consumer.session.timeout.ms", SET, Some("50000")),
            ("share.auto.offset.reset", SET, Some("earliest")),
        ],
    )]);
    let (k, o) = ctx.both(1, &stored);
    assert_eq!(k.responses[0].error_code, NONE, "{:?}", k.responses[0]);
    assert_eq!(o.responses[0].error_code, NONE, "{:?}", o.responses[0]);
    let describe = DescribeConfigsRequest::default()
        .with_resources(
            ["wire-configured", "wire-unconfigured", ""]
                .iter()
                .map(|g| {
                    DescribeConfigsResource::default()
                        .with_resource_type(GROUP_RESOURCE)
                        .with_resource_name(s(g))
                })
                .collect(),
        )
        .with_include_synonyms(true);
    // Kafka's broker applies the override once it has replayed the
    // controller's record, which can be after the alter was answered.
    let deadline = Instant::now() + Duration::from_secs(15);
    let (k, o) = loop {
        let (k, o) = ctx.both(4, &describe);
        let applied = described(&k, 0)["consumer.session.timeout.ms"]
            .value
            .as_deref()
            == Some("50000");
        if applied || Instant::now() > deadline {
            break (k, o);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for (i, (kr, or)) in k.results.iter().zip(&o.results).enumerate() {
        let what = format!("describe group {:?}", kr.resource_name.as_str());
        let head =
            |r: &kafka_protocol::messages::describe_configs_response::DescribeConfigsResult| {
                (r.error_code, r.error_message.as_deref().map(str::to_string))
            };
        if head(kr) != head(or) {
            problems.push(format!(
                "{what}: Kafka {:?}, Ottla {:?}",
                head(kr),
                head(or)
            ));
        }
        problems.extend(compare_configs(&what, &described(&k, i), &described(&o, i)));
    }
    assert_eq!(
        described(&k, 0)["consumer.session.timeout.ms"]
            .value
            .as_deref(),
        Some("50000")
    );

    let listed = |r: ListConfigResourcesResponse| {
        let mut names: Vec<(String, i8)> = r
            .config_resources
            .iter()
            .map(|c| (c.resource_name.to_string(), c.resource_type))
            .collect();
        names.sort();
        (r.error_code, names)
    };
    for types in [vec![GROUP_RESOURCE], vec![99]] {
        let req = ListConfigResourcesRequest::default().with_resource_types(types.clone());
        let (k, o) = ctx.both(1, &req);
        let (k, o) = (listed(k), listed(o));
        if k != o {
            problems.push(format!(
                "ListConfigResources {types:?}: Kafka {k:?}, Ottla {o:?}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Kafka stores broker keys it does not know (a plugin's) at the cluster
/// level and lists them as sensitive values of unknown type.
fn custom_broker_key(ctx: &mut Ctx) {
    let alter = |op: i8, value: Option<&str>| {
        IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(BROKER_RESOURCE)
                .with_resource_name(s(""))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(s("wire.custom.key"))
                    .with_config_operation(op)
                    .with_value(value.map(s))]),
        ])
    };
    let (mut k, mut o) = ctx.both(1, &alter(0, Some("42")));
    norm_message(&mut k.responses[0].error_message);
    norm_message(&mut o.responses[0].error_message);
    assert_eq!(k.responses[0].error_code, NONE);
    assert_eq!(o, k, "setting wire.custom.key on broker \"\"");
    let describe = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(BROKER_RESOURCE)
            .with_resource_name(s(""))
            .with_configuration_keys(None)])
        .with_include_synonyms(true)
        .with_include_documentation(true);
    // Kafka's broker learns the change from the metadata log, a moment later.
    let deadline = Instant::now() + Duration::from_secs(20);
    let k = loop {
        let k = ctx.kafka.send(4, &describe);
        if described(&k, 0).contains_key("wire.custom.key") || Instant::now() > deadline {
            break k;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let o = ctx.ottla.send(4, &describe);
    let mut krows = described(&k, 0);
    krows.remove("min.insync.replicas"); // see undo_cluster_min_isr
    let orows = described(&o, 0);
    assert!(krows.contains_key("wire.custom.key"), "{krows:?}");
    assert_eq!(orows, krows);
    // The node's own resource lists it too (both brokers are node 1).
    let node = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(BROKER_RESOURCE)
            .with_resource_name(s("1"))
            .with_configuration_keys(Some(vec![s("wire.custom.key")]))])
        .with_include_synonyms(true)
        .with_include_documentation(true);
    let (k, o) = ctx.both(4, &node);
    assert_eq!(k.results[0].configs.len(), 1, "{k:?}");
    assert_eq!(described(&o, 0), described(&k, 0));
    let (mut k, mut o) = ctx.both(1, &alter(1, None));
    norm_message(&mut k.responses[0].error_message);
    norm_message(&mut o.responses[0].error_message);
    assert_eq!(o, k, "deleting wire.custom.key");
}

// ---------------------------------------------------------------- ListOffsets

fn list_offsets_request(topic: &str, timestamp: i64) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(0)
        .with_timeout_ms(30_000)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(tn(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])])
}

fn compare_list_offsets(ctx: &mut Ctx, topic: &str, timestamps: &[i64]) -> Vec<String> {
    let mut problems = Vec::new();
    for &ts in timestamps {
        let (mut k, mut o) = ctx.both(8, &list_offsets_request(topic, ts));
        k.throttle_time_ms = 0;
        o.throttle_time_ms = 0;
        if k != o {
            problems.push(format!(
                "{topic} timestamp {ts}:\n    Kafka: {k:?}\n    Ottla: {o:?}"
            ));
        }
    }
    problems
}

fn list_offsets_empty(ctx: &mut Ctx) {
    // latest, earliest, max timestamp, earliest local, a timestamp.
    let problems = compare_list_offsets(ctx, "wire-empty", &[-1, -2, -3, -4, 1_000]);
    let mut more = Vec::new();
    for (label, req) in [
        ("unknown partition", {
            let mut r = list_offsets_request("wire-empty", -1);
            r.topics[0].partitions[0].partition_index = 5;
            r
        }),
        ("unknown topic", list_offsets_request("wire-missing", -1)),
        ("future leader epoch", {
            let mut r = list_offsets_request("wire-empty", -1);
            r.topics[0].partitions[0].current_leader_epoch = 5;
            r
        }),
    ] {
        let (mut k, mut o) = ctx.both(8, &req);
        k.throttle_time_ms = 0;
        o.throttle_time_ms = 0;
        if k != o {
            more.push(format!("{label}:\n    Kafka: {k:?}\n    Ottla: {o:?}"));
        }
    }
    let all: Vec<String> = problems.into_iter().chain(more).collect();
    assert!(all.is_empty(), "{}", all.join("\n"));
}

// ------------------------------------------------------------ Produce / Fetch

const T0: i64 = 1_700_000_000_000;

fn sample_batch() -> Vec<u8> {
    let rec = |i: i64, key: Option<&str>, value: Option<&str>| SimpleRecord {
        timestamp: T0 + i * 10,
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
        headers: vec![
            ("h".into(), Some(format!("v{i}").into_bytes())),
            ("h".into(), None),
        ],
    };
    BatchBuilder::default().build(&[
        rec(0, Some("k0"), Some("value zero")),
        rec(1, None, Some("value one")),
        rec(2, Some("k2"), None),
    ])
}

fn produce_request(topic: &str, batch: Vec<u8>) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(tn(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(Bytes::from(batch)))])])
}

fn fetch_request(topic_id: Uuid, offset: i64) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(200)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_current_leader_epoch(-1)
                .with_fetch_offset(offset)
                .with_last_fetched_epoch(-1)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(1 << 20)])])
}

/// Offsets inside a v2 batch header.
const EPOCH_AT: usize = 12;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const LOG_APPEND_TIME_BIT: i16 = 0x08;

/// Replaces each batch's partition leader epoch and, for LogAppendTime
/// batches, its timestamps (and so its CRC, after checking it) with fixed
/// values. Everything else must be byte-identical.
fn norm_records(records: &mut Option<Bytes>) {
    let Some(bytes) = records.as_ref() else {
        return;
    };
    let mut buf = bytes.to_vec();
    let mut at = 0;
    let spans: Vec<(usize, usize)> = BatchIter::new(bytes)
        .map(|b| {
            let b = b.expect("a well-formed batch");
            b.validate().expect("a valid CRC");
            let span = (at, b.size());
            at += b.size();
            span
        })
        .collect();
    assert_eq!(at, bytes.len(), "partial batch at the end");
    for (start, _) in spans {
        let batch = &mut buf[start..];
        batch[EPOCH_AT..EPOCH_AT + 4].copy_from_slice(&0i32.to_be_bytes());
        let attrs = i16::from_be_bytes([batch[ATTRIBUTES_AT], batch[ATTRIBUTES_AT + 1]]);
        if attrs & LOG_APPEND_TIME_BIT != 0 {
            batch[BASE_TIMESTAMP_AT..BASE_TIMESTAMP_AT + 8]
                .copy_from_slice(&TIMESTAMP.to_be_bytes());
            batch[MAX_TIMESTAMP_AT..MAX_TIMESTAMP_AT + 8].copy_from_slice(&TIMESTAMP.to_be_bytes());
            batch[CRC_AT..CRC_AT + 4].copy_from_slice(&0u32.to_be_bytes());
        }
    }
    *records = Some(Bytes::from(buf));
}

fn norm_fetch(mut r: FetchResponse) -> FetchResponse {
    r.throttle_time_ms = 0;
    if r.session_id != 0 {
        r.session_id = 1;
    }
    for e in &mut r.node_endpoints {
        e.node_id = BrokerId(NODE);
        e.host = s(HOST);
        e.port = PORT;
    }
    for t in &mut r.responses {
        norm_id(&mut t.topic_id);
        for p in &mut t.partitions {
            norm_node(&mut p.current_leader.leader_id);
            norm_records(&mut p.records);
        }
    }
    r
}

fn produce_and_fetch(ctx: &mut Ctx, topic: &str) {
    let (mut k, mut o) = ctx.both(11, &produce_request(topic, sample_batch()));
    for r in [&mut k, &mut o] {
        r.throttle_time_ms = 0;
        for t in &mut r.responses {
            for p in &mut t.partition_responses {
                if p.log_append_time_ms != -1 {
                    p.log_append_time_ms = TIMESTAMP;
                }
            }
        }
    }
    assert_eq!(k.responses[0].partition_responses[0].error_code, NONE);
    assert_eq!(o, k, "Produce v11 to {topic}");
    let kid = ctx.kafka_ids[topic];
    let oid = ctx.ottla_ids[topic];
    let k = ctx.kafka.send(16, &fetch_request(kid, 0));
    let o = ctx.ottla.send(16, &fetch_request(oid, 0));
    let kp = &k.responses[0].partitions[0];
    assert_eq!((kp.error_code, kp.high_watermark), (NONE, 3));
    assert_eq!(norm_fetch(o), norm_fetch(k), "Fetch v16 of {topic} from 0");
}

fn produce_fetch(ctx: &mut Ctx) {
    produce_and_fetch(ctx, "wire-data");
    // Fetch from the middle of the batch: the whole batch comes back.
    let k = ctx
        .kafka
        .send(16, &fetch_request(ctx.kafka_ids["wire-data"], 1));
    let o = ctx
        .ottla
        .send(16, &fetch_request(ctx.ottla_ids["wire-data"], 1));
    assert_eq!(norm_fetch(o), norm_fetch(k), "Fetch v16 from offset 1");
    // At the log end: nothing (after max_wait).
    let k = ctx
        .kafka
        .send(16, &fetch_request(ctx.kafka_ids["wire-data"], 3));
    let o = ctx
        .ottla
        .send(16, &fetch_request(ctx.ottla_ids["wire-data"], 3));
    assert_eq!(norm_fetch(o), norm_fetch(k), "Fetch v16 at the log end");
    let problems = compare_list_offsets(ctx, "wire-data", &[-1, -2, -3, T0 + 5, T0 + 100]);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// An incremental fetch that lists no partition reads from the offsets the
/// client last sent: records answered before but not taken come back (a
/// consumer whose partitions were revoked and assigned again relies on it).
fn fetch_session_keeps_client_offsets(ctx: &mut Ctx) {
    let full = |id| {
        fetch_request(id, 0)
            .with_session_epoch(0)
            .with_max_wait_ms(0)
    };
    let k = ctx.kafka.send(16, &full(ctx.kafka_ids["wire-data"]));
    let o = ctx.ottla.send(16, &full(ctx.ottla_ids["wire-data"]));
    assert_ne!(k.session_id, 0, "Kafka grants a session");
    let incremental = |first: &FetchResponse| {
        FetchRequest::default()
            .with_max_wait_ms(0)
            .with_max_bytes(1 << 20)
            .with_session_id(first.session_id)
            .with_session_epoch(1)
    };
    let (k_first, o_first) = (norm_fetch(k.clone()), norm_fetch(o.clone()));
    assert_eq!(o_first, k_first, "the full fetch");
    let k = ctx.kafka.send(16, &incremental(&k));
    let o = ctx.ottla.send(16, &incremental(&o));
    let (k, o) = (norm_fetch(k), norm_fetch(o));
    assert_eq!(
        k.responses[0].partitions[0].records, k_first.responses[0].partitions[0].records,
        "Kafka answers the same records again"
    );
    assert_eq!(o, k, "the incremental fetch");
}

/// The whole batch is refused with INVALID_RECORD, the keyless record
/// (the second of three) named in record_errors and the message.
fn produce_keyless_to_compacted(ctx: &mut Ctx) {
    let (mut k, mut o) = ctx.both(11, &produce_request("wire-compact", sample_batch()));
    k.throttle_time_ms = 0;
    o.throttle_time_ms = 0;
    let refused = &k.responses[0].partition_responses[0];
    assert_eq!(refused.error_code, 87, "Kafka: INVALID_RECORD");
    assert_eq!(refused.record_errors.len(), 1, "{refused:?}");
    assert_eq!(o, k);
}

fn produce_fetch_log_append_time(ctx: &mut Ctx) {
    produce_and_fetch(ctx, "wire-lat");
}

fn fetch_errors(ctx: &mut Ctx) {
    let mut problems = Vec::new();
    let cases: Vec<(&str, FetchRequest, FetchRequest)> = vec![
        (
            "offset beyond the log end",
            fetch_request(ctx.kafka_ids["wire-data"], 100),
            fetch_request(ctx.ottla_ids["wire-data"], 100),
        ),
        (
            "negative offset",
            fetch_request(ctx.kafka_ids["wire-data"], -5),
            fetch_request(ctx.ottla_ids["wire-data"], -5),
        ),
        (
            "unknown topic id",
            fetch_request(Uuid::from_u128(0xdead_beef), 0),
            fetch_request(Uuid::from_u128(0xdead_beef), 0),
        ),
        (
            "unknown partition",
            {
                let mut r = fetch_request(ctx.kafka_ids["wire-data"], 0);
                r.topics[0].partitions[0].partition = 7;
                r
            },
            {
                let mut r = fetch_request(ctx.ottla_ids["wire-data"], 0);
                r.topics[0].partitions[0].partition = 7;
                r
            },
        ),
        (
            "future leader epoch",
            {
                let mut r = fetch_request(ctx.kafka_ids["wire-data"], 0);
                r.topics[0].partitions[0].current_leader_epoch = 9;
                r
            },
            {
                let mut r = fetch_request(ctx.ottla_ids["wire-data"], 0);
                r.topics[0].partitions[0].current_leader_epoch = 9;
                r
            },
        ),
    ];
    for (label, kreq, oreq) in cases {
        let k = norm_fetch(ctx.kafka.send(16, &kreq));
        let o = norm_fetch(ctx.ottla.send(16, &oreq));
        if label == "offset beyond the log end" {
            assert_eq!(k.responses[0].partitions[0].error_code, OFFSET_OUT_OF_RANGE);
        }
        if k != o {
            problems.push(format!("{label}:\n    Kafka: {k:?}\n    Ottla: {o:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ------------------------------------------------------- OffsetForLeaderEpoch

fn offset_for_leader_epoch(ctx: &mut Ctx) {
    let req = |topic: &str, partition: i32, current: i32, epoch: i32| {
        OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(tn(topic))
                .with_partitions(vec![OffsetForLeaderPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(current)
                    .with_leader_epoch(epoch)])])
    };
    let cases = [
        ("epoch 0", req("wire-data", 0, -1, 0)),
        ("epoch 0, current epoch 0", req("wire-data", 0, 0, 0)),
        ("future epoch", req("wire-data", 0, -1, 7)),
        ("empty partition, epoch 0", req("wire-empty", 0, -1, 0)),
        ("future current epoch", req("wire-data", 0, 3, 0)),
        ("unknown partition", req("wire-data", 4, -1, 0)),
        ("unknown topic", req("wire-missing", 0, -1, 0)),
    ];
    let mut problems = Vec::new();
    for (label, r) in cases {
        let (mut k, mut o) = ctx.both(4, &r);
        k.throttle_time_ms = 0;
        o.throttle_time_ms = 0;
        if k != o {
            problems.push(format!("{label}:\n    Kafka: {k:?}\n    Ottla: {o:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// -------------------------------------------------------------- DeleteRecords

fn delete_records(ctx: &mut Ctx) {
    let req = |topic: &str, partition: i32, offset: i64| {
        DeleteRecordsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(tn(topic))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(partition)
                    .with_offset(offset)])])
    };
    let cases = [
        ("beyond the high watermark", req("wire-data", 0, 10)),
        ("negative offset", req("wire-data", 0, -7)),
        ("unknown partition", req("wire-data", 3, 1)),
        ("unknown topic", req("wire-missing", 0, 1)),
        ("up to offset 1", req("wire-data", 0, 1)),
        ("below the log start", req("wire-data", 0, 0)),
        ("to the high watermark (-1)", req("wire-lat", 0, -1)),
    ];
    let mut problems = Vec::new();
    for (label, r) in cases {
        let (mut k, mut o) = ctx.both(2, &r);
        k.throttle_time_ms = 0;
        o.throttle_time_ms = 0;
        if k != o {
            problems.push(format!("{label}:\n    Kafka: {k:?}\n    Ottla: {o:?}"));
        }
    }
    problems.extend(compare_list_offsets(ctx, "wire-data", &[-2, -4, -1]));
    problems.extend(compare_list_offsets(ctx, "wire-lat", &[-2, -1]));
    let k = ctx
        .kafka
        .send(16, &fetch_request(ctx.kafka_ids["wire-data"], 0));
    let o = ctx
        .ottla
        .send(16, &fetch_request(ctx.ottla_ids["wire-data"], 0));
    let (k, o) = (norm_fetch(k), norm_fetch(o));
    if k != o {
        problems.push(format!(
            "Fetch below the new log start:\n    Kafka: {k:?}\n    Ottla: {o:?}"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ------------------------------------------------------------ DescribeCluster

fn describe_cluster(ctx: &mut Ctx) {
    let mut problems = Vec::new();
    for (include_ops, endpoint_type) in [(false, 1), (true, 1), (false, 2), (false, 5)] {
        let req = DescribeClusterRequest::default()
            .with_include_cluster_authorized_operations(include_ops)
            .with_endpoint_type(endpoint_type);
        let (k, o) = ctx.both(1, &req);
        let norm = |mut r: kafka_protocol::messages::DescribeClusterResponse| {
            r.throttle_time_ms = 0;
            if !r.cluster_id.is_empty() {
                r.cluster_id = s(CLUSTER_ID);
            }
            norm_node(&mut r.controller_id);
            for b in &mut r.brokers {
                b.broker_id = BrokerId(NODE);
                b.host = s(HOST);
                b.port = PORT;
            }
            norm_message(&mut r.error_message);
            r
        };
        show_messages(
            &format!("endpoint type {endpoint_type}"),
            &k.error_message,
            &o.error_message,
        );
        let (k, o) = (norm(k), norm(o));
        if k != o {
            problems.push(format!(
                "include_cluster_authorized_operations={include_ops}, endpoint type {endpoint_type}:\n    Kafka: {k:?}\n    Ottla: {o:?}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ------------------------------------------------------------ FindCoordinator

fn find_coordinator(ctx: &mut Ctx) {
    let req = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s("wire-group")]);
    // Kafka creates __consumer_offsets on the first lookup and answers
    // COORDINATOR_NOT_AVAILABLE until it is loaded: wait for a settled answer.
    let settle = |client: &mut WireClient| {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut first = None;
        loop {
            let r = client.send(4, &req);
            let code = r.coordinators[0].error_code;
            first.get_or_insert(code);
            let retriable =
                code == COORDINATOR_NOT_AVAILABLE || code == COORDINATOR_LOAD_IN_PROGRESS;
            if !retriable || Instant::now() > deadline {
                return (first.unwrap(), r);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let (kfirst, mut k) = settle(&mut ctx.kafka);
    let (ofirst, mut o) = settle(&mut ctx.ottla);
    eprintln!("  first answers: Kafka error {kfirst}, Ottla error {ofirst}");
    for r in [&mut k, &mut o] {
        r.throttle_time_ms = 0;
        for c in &mut r.coordinators {
            norm_node(&mut c.node_id);
            if !c.host.is_empty() {
                c.host = s(HOST);
            }
            if c.port >= 0 {
                c.port = PORT;
            }
            norm_message(&mut c.error_message);
        }
    }
    assert_eq!(k.coordinators[0].error_code, NONE);
    assert_eq!(o, k);
}

// ----------------------------------------------------------------- ListGroups

/// KIP-1331's streams-group APIs, answered alike: describing an unknown
/// group at v1 with its topology description asked for, and a description
/// pushed (which Kafka, without a description plugin, refuses).
fn streams_v1(ctx: &mut Ctx) {
    use ottla_protocol::streams::describe::{
        StreamsGroupDescribeRequest, StreamsGroupDescribeResponse,
    };
    use ottla_protocol::streams::topology_description::{
        StreamsGroupTopologyDescriptionUpdateRequest, StreamsGroupTopologyDescriptionUpdateResponse,
    };
    use ottla_protocol::streams::{StreamsApiKey, StreamsMessage};
    fn ask<R: StreamsMessage, A: StreamsMessage>(
        client: &mut WireClient,
        version: i16,
        req: &R,
    ) -> A {
        let body = req.encode(version).expect("encodable");
        let reply = client.send_raw(R::API_KEY.as_i16(), version, 2, &body, 1);
        A::decode(&reply, version).expect("decodable")
    }
    // The group's coordinator may still be loading its partition.
    let loading = |r: &StreamsGroupDescribeResponse| {
        let settling = [
            COORDINATOR_LOAD_IN_PROGRESS,
            COORDINATOR_NOT_AVAILABLE,
            NOT_COORDINATOR,
        ];
        r.groups.iter().any(|g| settling.contains(&g.error_code))
    };
    let describe = StreamsGroupDescribeRequest {
        group_ids: vec!["wire-no-streams-group".into()],
        include_topology_description: true,
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    let (k, o) = loop {
        let k: StreamsGroupDescribeResponse = ask(&mut ctx.kafka, 1, &describe);
        let o: StreamsGroupDescribeResponse = ask(&mut ctx.ottla, 1, &describe);
        if !(loading(&k) || loading(&o)) || Instant::now() > deadline {
            break (k, o);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(o, k);
    let update = StreamsGroupTopologyDescriptionUpdateRequest {
        group_id: "wire-no-streams-group".into(),
        member_id: "m".into(),
        ..Default::default()
    };
    let k: StreamsGroupTopologyDescriptionUpdateResponse = ask(&mut ctx.kafka, 0, &update);
    let o: StreamsGroupTopologyDescriptionUpdateResponse = ask(&mut ctx.ottla, 0, &update);
    assert_eq!(o, k);
    assert_eq!(
        StreamsApiKey::StreamsGroupTopologyDescriptionUpdate.as_i16(),
        93
    );
}

fn list_groups(ctx: &mut Ctx) {
    let mut problems = Vec::new();
    for (states, types) in [
        (vec![], vec![]),
        (vec!["Stable", "Empty"], vec![]),
        (vec![], vec!["classic"]),
        (vec![], vec!["consumer"]),
    ] {
        let req = ListGroupsRequest::default()
            .with_states_filter(states.iter().map(|v| s(v)).collect())
            .with_types_filter(types.iter().map(|v| s(v)).collect());
        let (mut k, mut o) = ctx.both(5, &req);
        k.throttle_time_ms = 0;
        o.throttle_time_ms = 0;
        if k != o {
            problems.push(format!(
                "states {states:?}, types {types:?}:\n    Kafka: {k:?}\n    Ottla: {o:?}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

// ---------------------------------------------------- DescribeTopicPartitions

fn describe_topic_partitions(ctx: &mut Ctx) {
    let req = |names: &[&str], limit: i32| {
        DescribeTopicPartitionsRequest::default()
            .with_topics(
                names
                    .iter()
                    .map(|n| TopicRequest::default().with_name(tn(n)))
                    .collect(),
            )
            .with_response_partition_limit(limit)
    };
    let norm = |mut r: kafka_protocol::messages::DescribeTopicPartitionsResponse| {
        r.throttle_time_ms = 0;
        for t in &mut r.topics {
            norm_id(&mut t.topic_id);
            for p in &mut t.partitions {
                norm_node(&mut p.leader_id);
                p.replica_nodes.iter_mut().for_each(norm_node);
                p.isr_nodes.iter_mut().for_each(norm_node);
                p.offline_replicas.iter_mut().for_each(norm_node);
            }
        }
        r
    };
    let mut problems = Vec::new();
    for (label, r) in [
        (
            "named topics",
            req(
                &["wire-data", "wire-missing", "bad name!", "wire.collide"],
                2000,
            ),
        ),
        (
            "paged",
            req(&["wire.collide", "wire-data", "wire-empty"], 2),
        ),
    ] {
        let (k, o) = ctx.both(0, &r);
        let (k, o) = (norm(k), norm(o));
        if k != o {
            problems.push(format!("{label}:\n    Kafka: {k:?}\n    Ottla: {o:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
