//! `ottla-loadgen` (the light client of `scripts/bench.py --capacity`)
//! against a live `ottla`: the records it reports having produced are the
//! ones the broker holds, spread over the partitions as it says, and the
//! records it reports having consumed are all of them.

use std::process::Output;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreateTopicsRequest};
use kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kafka_protocol::messages::{BrokerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use ottla_tests::loadgen::field;
use ottla_tests::ottla::Ottla;
use ottla_tests::wire::WireClient;

const TOPIC: &str = "loadgen";
const PARTITIONS: i32 = 5;
/// Not a multiple of a batch, nor of a request: the last request is short.
const RECORDS: u64 = 4321;
const RECORDS_PER_BATCH: u64 = 50;

const LOADGEN: &str = env!("CARGO_BIN_EXE_ottla-loadgen");

fn loadgen(args: &[&str]) -> Output {
    ottla_tests::loadgen::run(LOADGEN, args)
}

fn report(args: &[&str]) -> String {
    ottla_tests::loadgen::report(LOADGEN, args)
}

fn create_topic(client: &mut WireClient) {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(topic_name())
            .with_num_partitions(PARTITIONS)
            .with_replication_factor(1)]);
    let answer = client.send(7, &request);
    assert_eq!(answer.topics[0].error_code, 0, "{:?}", answer.topics[0]);
}

fn topic_name() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

/// Each partition's log end offset, from ListOffsets, or the first error
/// code a partition answers.
fn log_end_offsets(client: &mut WireClient) -> Result<Vec<i64>, i16> {
    const LATEST: i64 = -1;
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(topic_name())
            .with_partitions(
                (0..PARTITIONS)
                    .map(|p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(p)
                            .with_timestamp(LATEST)
                    })
                    .collect(),
            )]);
    let answer = client.send(7, &request);
    let mut ends = vec![-1; PARTITIONS as usize];
    for p in &answer.topics[0].partitions {
        if p.error_code != 0 {
            return Err(p.error_code);
        }
        ends[p.partition_index as usize] = p.offset;
    }
    Ok(ends)
}

/// What the load generator promises: batch j (of RECORDS_PER_BATCH records,
/// the last one shorter) goes to partition j mod PARTITIONS.
fn expected_ends() -> Vec<i64> {
    let mut ends = vec![0; PARTITIONS as usize];
    let mut left = RECORDS;
    for batch in 0.. {
        if left == 0 {
            break;
        }
        let records = left.min(RECORDS_PER_BATCH);
        ends[batch % PARTITIONS as usize] += records as i64;
        left -= records;
    }
    ends
}

#[test]
fn loadgen_reports_what_the_broker_holds() {
    let node = Ottla::start(&[]);
    let bootstrap = node.bootstrap();
    let mut client = WireClient::connect(&bootstrap);
    // At once: the load generator waits for the partitions' leader itself.
    create_topic(&mut client);
    let records = RECORDS.to_string();
    let per_batch = RECORDS_PER_BATCH.to_string();
    let common = [
        "--bootstrap",
        &bootstrap,
        "--topic",
        TOPIC,
        "--records",
        &records,
    ];

    let produced = report(
        &[
            &["produce"][..],
            &common,
            &[
                "--record-size",
                "100",
                "--acks",
                "all",
                "--records-per-batch",
                &per_batch,
            ],
            &["--partitions-per-request", "3", "--inflight", "4"],
        ]
        .concat(),
    );
    assert_eq!(field(&produced, "records"), RECORDS, "{produced}");
    assert_eq!(log_end_offsets(&mut client), Ok(expected_ends()));

    let consumed = report(&[&["consume"][..], &common].concat());
    assert_eq!(field(&consumed, "records"), RECORDS, "{consumed}");
    // The broker hands back the batches as they were written.
    assert_eq!(
        field(&consumed, "bytes"),
        field(&produced, "bytes"),
        "produced {produced}, consumed {consumed}"
    );
}

#[test]
fn loadgen_fails_clearly() {
    let refused = loadgen(&[
        "produce",
        "--bootstrap",
        "127.0.0.1:1",
        "--topic",
        TOPIC,
        "--records",
        "1",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--record-size is required"));

    let node = Ottla::start(&[]);
    let missing = loadgen(&[
        "consume",
        "--bootstrap",
        &node.bootstrap(),
        "--topic",
        "no-such-topic",
        "--records",
        "1",
    ]);
    assert_eq!(missing.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(stderr.contains("UnknownTopicOrPartition"), "{stderr}");
}
