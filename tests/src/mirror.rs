//! Driving Ottla's mirror APIs from tests, and reading a partition's log
//! bytes through Fetch, so two clusters' logs can be compared byte for byte.

use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{BrokerId, ListOffsetsResponse, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_client::ClientSecurity;
use ottla_client::KafkaClient;
use ottla_protocol::batch::whole_batches_len;
use ottla_protocol::mirror::admin::{
    CreateMirrorRequest, CreateMirrorResponse, DescribeMirrorsRequest, DescribedMirrorPartition,
    MirrorConfigEntry,
};
use ottla_protocol::mirror::topics::{
    AddTopicsToMirrorRequest, MirrorTopic, MirrorTopicResult, PauseMirrorTopicsRequest,
    RemoveTopicsFromMirrorRequest, ResumeMirrorTopicsRequest,
};
use ottla_protocol::mirror::MirrorRequest;

const TIMEOUT: Duration = Duration::from_secs(60);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn split(bootstrap: &str) -> (String, u16) {
    let (host, port) = bootstrap.rsplit_once(':').unwrap();
    (host.to_string(), port.parse().unwrap())
}

/// Sends one mirror request to `bootstrap` and returns the answer.
pub fn send<R: MirrorRequest>(bootstrap: &str, request: &R) -> R::Response {
    send_as(bootstrap, &ClientSecurity::default(), request)
}

/// [`send`] over a connection secured (and logged in) with `security`.
pub fn send_as<R: MirrorRequest>(
    bootstrap: &str,
    security: &ClientSecurity,
    request: &R,
) -> R::Response {
    let (host, port) = split(bootstrap);
    runtime().block_on(async {
        let mut client =
            KafkaClient::connect_with(&host, port, "mirror-test", 64 << 20, TIMEOUT, security)
                .await
                .unwrap();
        client.send_mirror(0, request, TIMEOUT).await.unwrap()
    })
}

fn topics(names: &[&str]) -> Vec<MirrorTopic> {
    names
        .iter()
        .map(|n| MirrorTopic {
            name: n.to_string(),
            ..Default::default()
        })
        .collect()
}

/// CreateMirror `name` on `destination`, mirroring from `source`.
pub fn create_mirror(destination: &str, name: &str, source: &str) {
    create_mirror_with(destination, name, source, &[]);
}

/// CreateMirror with more config entries than `bootstrap.servers`.
pub fn create_mirror_with(destination: &str, name: &str, source: &str, configs: &[(&str, &str)]) {
    let response = try_create_mirror(destination, name, source, configs);
    assert_eq!(response.error_code, 0, "{response:?}");
}

/// CreateMirror, which may be refused: the response.
pub fn try_create_mirror(
    destination: &str,
    name: &str,
    source: &str,
    configs: &[(&str, &str)],
) -> CreateMirrorResponse {
    let entry = |name: &str, value: &str| MirrorConfigEntry {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    };
    let mut entries = vec![entry("bootstrap.servers", source)];
    entries.extend(configs.iter().map(|(k, v)| entry(k, v)));
    send(
        destination,
        &CreateMirrorRequest {
            mirror_name: name.into(),
            configs: entries,
            ..Default::default()
        },
    )
}

/// Which topic request to send.
#[derive(Debug, Clone, Copy)]
pub enum TopicOp {
    Add,
    Remove,
    Pause,
    Resume,
}

/// Sends a topic request; returns the per-topic results (the mirror-level
/// error must be none).
pub fn topics_op(
    destination: &str,
    op: TopicOp,
    mirror: &str,
    names: &[&str],
) -> Vec<MirrorTopicResult> {
    let (mirror_name, topics) = (mirror.to_string(), topics(names));
    let (code, results) = match op {
        TopicOp::Add => {
            let r = send(
                destination,
                &AddTopicsToMirrorRequest {
                    mirror_name,
                    topics,
                    ..Default::default()
                },
            );
            (r.error_code, r.topics)
        }
        TopicOp::Remove => {
            let r = send(
                destination,
                &RemoveTopicsFromMirrorRequest {
                    mirror_name,
                    topics,
                    ..Default::default()
                },
            );
            (r.error_code, r.topics)
        }
        TopicOp::Pause => {
            let r = send(
                destination,
                &PauseMirrorTopicsRequest {
                    mirror_name,
                    topics,
                    ..Default::default()
                },
            );
            (r.error_code, r.topics)
        }
        TopicOp::Resume => {
            let r = send(
                destination,
                &ResumeMirrorTopicsRequest {
                    mirror_name,
                    topics,
                    ..Default::default()
                },
            );
            (r.error_code, r.topics)
        }
    };
    assert_eq!(code, 0, "{op:?} {names:?}: {results:?}");
    results
}

/// The partitions of `topic` in `mirror` as DescribeMirrors reports them.
pub fn describe(destination: &str, mirror: &str, topic: &str) -> Vec<DescribedMirrorPartition> {
    let response = send(
        destination,
        &DescribeMirrorsRequest {
            mirror_names: Some(vec![mirror.into()]),
            ..Default::default()
        },
    );
    response
        .mirrors
        .into_iter()
        .flat_map(|m| m.topics)
        .filter(|t| t.name == topic)
        .flat_map(|t| t.partitions)
        .collect()
}

/// Waits until every partition of `topic` is in `state` (a wire value).
pub fn wait_for_state(
    destination: &str,
    mirror: &str,
    topic: &str,
    partitions: usize,
    state: i8,
) -> Vec<DescribedMirrorPartition> {
    let started = Instant::now();
    loop {
        let described = describe(destination, mirror, topic);
        if described.len() == partitions && described.iter().all(|p| p.state == state) {
            return described;
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "{topic} never reached state {state}: {described:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The `host:port` of the partition's leader, as the cluster at
/// `bootstrap` says.
async fn leader_of(bootstrap: &str, topic: &str, partition: i32) -> Result<(String, u16), String> {
    let (host, port) = split(bootstrap);
    let mut client = KafkaClient::connect(&host, port, "mirror-test", 64 << 20, TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let request = MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))]));
    let response = client
        .send(12, &request, TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let leader = response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == partition)
        .map(|p| p.leader_id.0)
        .ok_or_else(|| format!("{topic}-{partition} has no metadata at {bootstrap}"))?;
    let broker = response
        .brokers
        .iter()
        .find(|b| b.node_id.0 == leader)
        .ok_or_else(|| format!("{topic}-{partition} has no live leader at {bootstrap}"))?;
    Ok((broker.host.to_string(), broker.port as u16))
}

/// A partition's leader epoch in the metadata of the cluster at `bootstrap`.
pub fn leader_epoch(bootstrap: &str, topic: &str, partition: i32) -> i32 {
    let (host, port) = split(bootstrap);
    runtime().block_on(async {
        let mut client = KafkaClient::connect(&host, port, "mirror-test", 64 << 20, TIMEOUT)
            .await
            .unwrap();
        let request = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))]));
        let response = client.send(12, &request, TIMEOUT).await.unwrap();
        response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .map(|p| p.leader_epoch)
            .unwrap()
    })
}

/// Every byte of a partition's log from its log start up to its high
/// watermark, read with consumer fetches from its leader in the cluster at
/// `bootstrap`, and that high watermark.
pub fn log_bytes(bootstrap: &str, topic: &str, partition: i32) -> (Vec<u8>, i64) {
    try_log_bytes(bootstrap, topic, partition).unwrap()
}

/// [`log_bytes`], or why the log could not be read now (no leader, a
/// leader that just died, ...).
pub fn try_log_bytes(
    bootstrap: &str,
    topic: &str,
    partition: i32,
) -> Result<(Vec<u8>, i64), String> {
    runtime().block_on(async {
        let (host, port) = leader_of(bootstrap, topic, partition).await?;
        let mut client = KafkaClient::connect(&host, port, "mirror-test", 64 << 20, TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        let mut bytes = Vec::new();
        let mut offset = earliest_offset(&mut client, topic, partition).await?;
        loop {
            let request = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(0)
                .with_max_bytes(8 << 20)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(topic.into())))
                    .with_partitions(vec![FetchPartition::default()
                        .with_partition(partition)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(8 << 20)])]);
            let response = client
                .send(12, &request, TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
            let data = &response.responses[0].partitions[0];
            if data.error_code != 0 {
                return Err(format!(
                    "fetch of {topic}-{partition} at {offset}: error {}",
                    data.error_code
                ));
            }
            let records = data.records.clone().unwrap_or_default();
            let whole = whole_batches_len(&records).map_err(|e| e.to_string())?;
            if whole == 0 {
                return Ok((bytes, data.high_watermark));
            }
            let mut batches = ottla_protocol::batch::BatchIter::new(&records[..whole]);
            while let Some(Ok(batch)) = batches.next() {
                offset = batch.next_offset();
            }
            bytes.extend_from_slice(&records[..whole]);
        }
    })
}

/// The partition's log start offset, asked of its leader.
async fn earliest_offset(
    client: &mut KafkaClient,
    topic: &str,
    partition: i32,
) -> Result<i64, String> {
    const EARLIEST: i64 = -2;
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(partition)
                .with_timestamp(EARLIEST)])]);
    let response: ListOffsetsResponse = client
        .send(7, &request, TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let answer = &response.topics[0].partitions[0];
    match answer.error_code {
        0 => Ok(answer.offset),
        code => Err(format!(
            "earliest offset of {topic}-{partition}: error {code}"
        )),
    }
}
