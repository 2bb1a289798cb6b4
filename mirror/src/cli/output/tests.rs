use ottla_protocol::mirror::admin::{
    DescribedMirrorPartition, DescribedMirrorTopic, FailoverSummary, OpenTransactionSummary,
};
use serde_json::json;

use super::*;

/// The table's cells, split on runs of two or more spaces.
fn cells(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .map(|line| {
            line.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
        .collect()
}

fn parse_json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("one JSON document")
}

const TOPIC_ID: Uuid = Uuid::from_u128(0xf724_14c1_0f21_4f84_acdc_fb79_9269_2b13);
const TOPIC_ID_TEXT: &str = "9yQUwQ8hT4Ss3Pt5kmkrEw";

fn listing() -> ListMirrorsResponse {
    ListMirrorsResponse {
        mirrors: vec![
            ListedMirror {
                mirror_name: "east".into(),
                source_bootstrap_servers: "s1:9092,s2:9092".into(),
                source_cluster_id: Some("MkU3OEVBNTcwNTJENDM2Qk".into()),
                topic_names: vec!["orders".into(), "payments".into()],
                ..Default::default()
            },
            ListedMirror {
                mirror_name: "w".into(),
                source_bootstrap_servers: "west:9092".into(),
                source_cluster_id: None,
                topic_names: vec![],
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

#[test]
fn list_table() {
    let out = render(&Answer::Listed(listing()), false);
    assert_eq!(
        out.stdout,
        "\
MIRROR  SOURCE-BOOTSTRAP  SOURCE-CLUSTER-ID       TOPICS
east    s1:9092,s2:9092   MkU3OEVBNTcwNTJENDM2Qk  orders,payments
w       west:9092         -                       -
"
    );
    assert_eq!((out.stderr.as_str(), out.failed), ("", false));
}

#[test]
fn list_json() {
    let out = render(&Answer::Listed(listing()), true);
    assert_eq!(
        parse_json(&out.stdout),
        json!({
            "error": null,
            "mirrors": [
                {"mirror": "east", "source_bootstrap": "s1:9092,s2:9092",
                 "source_cluster_id": "MkU3OEVBNTcwNTJENDM2Qk", "topics": ["orders", "payments"]},
                {"mirror": "w", "source_bootstrap": "west:9092",
                 "source_cluster_id": null, "topics": []},
            ]
        })
    );
    assert!(!out.failed);
}

#[test]
fn empty_list_is_a_header() {
    let out = render(&Answer::Listed(ListMirrorsResponse::default()), false);
    assert_eq!(
        out.stdout,
        "MIRROR  SOURCE-BOOTSTRAP  SOURCE-CLUSTER-ID  TOPICS\n"
    );
}

#[test]
fn list_error() {
    let response = ListMirrorsResponse {
        error_code: 31,
        ..Default::default()
    };
    let out = render(&Answer::Listed(response.clone()), false);
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr, "Error: CLUSTER_AUTHORIZATION_FAILED\n");
    assert!(out.failed);
    let out = render(&Answer::Listed(response), true);
    assert_eq!(
        parse_json(&out.stdout)["error"],
        json!({"code": 31, "name": "CLUSTER_AUTHORIZATION_FAILED", "message": null})
    );
    assert!(out.failed);
}

fn description() -> DescribeMirrorsResponse {
    let partition = |index, state| DescribedMirrorPartition {
        partition_index: index,
        state,
        ..Default::default()
    };
    DescribeMirrorsResponse {
        mirrors: vec![
            DescribedMirror {
                mirror_name: "east".into(),
                topics: vec![DescribedMirrorTopic {
                    name: "orders".into(),
                    topic_id: TOPIC_ID,
                    partitions: vec![
                        DescribedMirrorPartition {
                            last_error: Some("source said\nNOT_LEADER_OR_FOLLOWER".into()),
                            fetch_errors: 3,
                            ..partition(1, 7)
                        },
                        DescribedMirrorPartition {
                            source_offset: 1500,
                            destination_offset: 1450,
                            lag_records: 50,
                            lag_ms: 120,
                            bytes_per_second: 20480,
                            fetch_errors: 0,
                            last_mirrored_epoch: 4,
                            ..partition(0, 2)
                        }
                        .with_source_offset_age_ms(35),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            },
            DescribedMirror {
                mirror_name: "gone".into(),
                error_code: 137,
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

#[test]
fn describe_table() {
    let out = render(&Answer::Described(description()), false);
    let table = cells(&out.stdout);
    assert_eq!(
        table,
        [
            vec![
                "MIRROR",
                "TOPIC",
                "PARTITION",
                "STATE",
                "SOURCE-OFFSET",
                "SOURCE-AGE-MS",
                "DEST-OFFSET",
                "LAG",
                "LAG-MS",
                "BYTES/S",
                "FETCH-ERRORS",
                "LME",
                "LAST-ERROR"
            ],
            vec![
                "east",
                "orders",
                "0",
                "MIRRORING",
                "1500",
                "35",
                "1450",
                "50",
                "120",
                "20480",
                "0",
                "4",
                "-"
            ],
            vec![
                "east",
                "orders",
                "1",
                "FAILED",
                "-",
                "-",
                "-",
                "-",
                "-",
                "0",
                "3",
                "-",
                "source said NOT_LEADER_OR_FOLLOWER"
            ],
        ]
    );
    // Aligned: every column starts at the same place on every line.
    let starts = |line: &str, cell: &str| line.find(cell).unwrap();
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(starts(lines[0], "STATE"), starts(lines[1], "MIRRORING"));
    assert_eq!(
        starts(lines[0], "LAST-ERROR"),
        starts(lines[2], "source said")
    );
    assert_eq!(
        out.stderr,
        "Mirror gone: UNKNOWN_MIRROR: No mirror with this name exists.\n"
    );
    assert!(out.failed);
}

fn failover(writable_at_ms: i64) -> FailoverSummary {
    FailoverSummary {
        open_transactions_policy: "abort".into(),
        open_transactions: vec![OpenTransactionSummary {
            producer_id: 4000,
            first_offset: 51,
            idle_ms: 9_000,
            ..Default::default()
        }],
        last_mirrored_epoch: 3,
        writable_at_ms,
        ..Default::default()
    }
}

#[test]
fn describe_adds_the_failover_of_stopped_partitions() {
    let mut response = description();
    let stopped = &mut response.mirrors[0].topics[0].partitions[0];
    *stopped = stopped
        .clone()
        .with_failover(Some(&failover(1_700_000_000_000)));
    let out = render(&Answer::Described(response), false);
    let (_, failovers) = out
        .stdout
        .split_once("Failover of the STOPPED partitions:\n")
        .expect("a failover table");
    assert_eq!(
        cells(failovers),
        [
            FAILOVER_HEADERS.map(String::from).to_vec(),
            [
                "east",
                "orders",
                "1",
                "FAILED",
                "1700000000000",
                "abort",
                "producer 4000 from offset 51 (idle 9000 ms)",
                "0",
                "3"
            ]
            .map(String::from)
            .to_vec(),
        ]
    );
}

#[test]
fn failover_plan_shows_the_topics_asked_and_names_unknown_ones() {
    let mut response = description();
    for p in &mut response.mirrors[0].topics[0].partitions {
        *p = p.clone().with_failover(Some(&failover(-1)));
    }
    response.mirrors.truncate(1);
    let answer = Answer::FailoverPlan {
        mirror: "east".into(),
        topics: vec!["orders".into(), "missing".into()],
        response,
    };
    let out = render(&answer, false);
    let rows = cells(&out.stdout);
    assert_eq!(
        rows.len(),
        4,
        "headers, two partitions, the dry-run line: {rows:?}"
    );
    assert_eq!(rows[1][4], "-", "not writable yet: {rows:?}");
    assert!(out.stdout.ends_with("Dry run: nothing was changed.\n"));
    assert_eq!(out.stderr, "Topic missing: not a topic of mirror east\n");
    assert!(out.failed);
}

#[test]
fn describe_json() {
    let out = render(&Answer::Described(description()), true);
    assert_eq!(
        parse_json(&out.stdout),
        json!({"mirrors": [
            {"mirror": "east", "error": null, "partitions": [
                {"topic": "orders", "topic_id": TOPIC_ID_TEXT, "partition": 0, "state": "MIRRORING",
                 "source_offset": 1500, "source_offset_age_ms": 35, "destination_offset": 1450, "lag": 50, "lag_ms": 120,
                 "bytes_per_second": 20480, "fetch_errors": 0, "last_mirrored_epoch": 4,
                 "last_error": null, "failover": null},
                {"topic": "orders", "topic_id": TOPIC_ID_TEXT, "partition": 1, "state": "FAILED",
                 "source_offset": null, "source_offset_age_ms": null, "destination_offset": null, "lag": null, "lag_ms": null,
                 "bytes_per_second": 0, "fetch_errors": 3, "last_mirrored_epoch": null,
                 "last_error": "source said\nNOT_LEADER_OR_FOLLOWER", "failover": null},
            ]},
            {"mirror": "gone", "partitions": [], "error": {
                "code": 137, "name": "UNKNOWN_MIRROR",
                "message": "No mirror with this name exists."}},
        ]})
    );
    assert_eq!(
        out.stderr,
        "Mirror gone: UNKNOWN_MIRROR: No mirror with this name exists.\n"
    );
    assert!(out.failed);
}

#[test]
fn empty_messages_are_no_messages() {
    let e = ErrorView::of(137, Some("")).unwrap();
    assert_eq!(
        e.to_string(),
        "UNKNOWN_MIRROR: No mirror with this name exists."
    );
    let e = ErrorView::of(7, Some("")).unwrap();
    assert_eq!(
        (e.to_string(), e.message),
        ("REQUEST_TIMED_OUT".into(), None)
    );
    assert_eq!(ErrorView::of(0, Some("ignored")), None);
}

#[test]
fn unknown_states_are_shown_raw() {
    assert_eq!(state_name(16), "UNKNOWN");
    assert_eq!(state_name(0), "PREPARING");
    assert_eq!(state_name(1), "UNRECOGNIZED(1)");
}

fn topics_answer(op: TopicOp, result: TopicSetResult) -> Answer {
    Answer::Topics {
        op,
        mirror: "east".into(),
        requested: vec!["orders".into(), "payments".into(), "audit".into()],
        result,
    }
}

fn mixed_result() -> TopicSetResult {
    TopicSetResult {
        topics: vec![
            MirrorTopicResult {
                name: "orders".into(),
                topic_id: TOPIC_ID,
                ..Default::default()
            },
            MirrorTopicResult {
                name: "payments".into(),
                error_code: 3,
                error_message: Some("The source cluster has no topic payments.".into()),
                ..Default::default()
            },
            MirrorTopicResult {
                name: "audit".into(),
                error_code: 138,
                ..Default::default()
            },
        ],
        ..Default::default()
    }
}

#[test]
fn topic_results_text() {
    let out = render(&topics_answer(TopicOp::Add, mixed_result()), false);
    assert_eq!(
        out.stdout,
        format!("Topic orders added to mirror east (topic id {TOPIC_ID_TEXT})\n")
    );
    assert_eq!(
        out.stderr,
        "Topic payments: UNKNOWN_TOPIC_OR_PARTITION: The source cluster has no topic payments.\n\
         Topic audit: TOPIC_ALREADY_IN_MIRROR: The topic already belongs to a mirror.\n"
    );
    assert!(out.failed);

    let ok = TopicSetResult {
        topics: vec![MirrorTopicResult {
            name: "orders".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    for (op, line) in [
        (TopicOp::Remove, "Topic orders removed from mirror east\n"),
        (TopicOp::Pause, "Topic orders paused in mirror east\n"),
        (TopicOp::Resume, "Topic orders resumed in mirror east\n"),
    ] {
        let answer = Answer::Topics {
            op,
            mirror: "east".into(),
            requested: vec!["orders".into()],
            result: ok.clone(),
        };
        let out = render(&answer, false);
        assert_eq!((out.stdout.as_str(), out.failed), (line, false));
    }
}

#[test]
fn topic_results_json() {
    let out = render(&topics_answer(TopicOp::Pause, mixed_result()), true);
    assert_eq!(
        parse_json(&out.stdout),
        json!({
            "mirror": "east", "action": "pause", "error": null,
            "topics": [
                {"topic": "orders", "topic_id": TOPIC_ID_TEXT, "error": null},
                {"topic": "payments", "topic_id": null, "error": {
                    "code": 3, "name": "UNKNOWN_TOPIC_OR_PARTITION",
                    "message": "The source cluster has no topic payments."}},
                {"topic": "audit", "topic_id": null, "error": {
                    "code": 138, "name": "TOPIC_ALREADY_IN_MIRROR",
                    "message": "The topic already belongs to a mirror."}},
            ]
        })
    );
    assert!(out.failed);
}

#[test]
fn topics_missing_from_the_answer_fail() {
    let result = TopicSetResult {
        topics: vec![MirrorTopicResult {
            name: "orders".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let out = render(&topics_answer(TopicOp::Remove, result), false);
    assert_eq!(out.stdout, "Topic orders removed from mirror east\n");
    assert_eq!(
        out.stderr,
        "Topic payments: UNKNOWN_SERVER_ERROR: the broker's answer has no result for this topic\n\
         Topic audit: UNKNOWN_SERVER_ERROR: the broker's answer has no result for this topic\n"
    );
    assert!(out.failed);
}

#[test]
fn mirror_level_topic_error() {
    let result = TopicSetResult {
        error_code: 137,
        error_message: Some("No mirror named east.".into()),
        topics: vec![],
    };
    let out = render(&topics_answer(TopicOp::Resume, result.clone()), false);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "Mirror east: UNKNOWN_MIRROR: No mirror named east.\n"
    );
    assert!(out.failed);
    let out = render(&topics_answer(TopicOp::Resume, result), true);
    assert_eq!(
        parse_json(&out.stdout),
        json!({"mirror": "east", "action": "resume", "topics": [],
               "error": {"code": 137, "name": "UNKNOWN_MIRROR", "message": "No mirror named east."}})
    );
}

#[test]
fn create_and_delete() {
    let created = |validate_only, error_code, error_message: Option<&str>| Answer::Created {
        mirror: "east".into(),
        validate_only,
        response: CreateMirrorResponse {
            error_code,
            error_message: error_message.map(Into::into),
            ..Default::default()
        },
    };
    let out = render(&created(false, 0, None), false);
    assert_eq!(
        (out.stdout.as_str(), out.failed),
        ("Created mirror east\n", false)
    );
    let out = render(&created(true, 0, None), false);
    assert_eq!(
        out.stdout,
        "Mirror east: configuration is valid; nothing created (--validate-only)\n"
    );
    let out = render(
        &created(false, 40, Some("bootstrap.servers is required")),
        false,
    );
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "Mirror east: INVALID_CONFIG: bootstrap.servers is required\n"
    );
    assert!(out.failed);
    let out = render(&created(true, 136, None), true);
    assert_eq!(
        parse_json(&out.stdout),
        json!({"mirror": "east", "validate_only": true, "error": {
            "code": 136, "name": "MIRROR_ALREADY_EXISTS",
            "message": "A mirror with this name already exists."}})
    );
    assert!(out.failed);

    let deleted = |error_code| Answer::Deleted {
        mirror: "east".into(),
        response: DeleteMirrorResponse {
            error_code,
            ..Default::default()
        },
    };
    let out = render(&deleted(0), false);
    assert_eq!(
        (out.stdout.as_str(), out.failed),
        ("Deleted mirror east\n", false)
    );
    let out = render(&deleted(0), true);
    assert_eq!(
        parse_json(&out.stdout),
        json!({"mirror": "east", "error": null})
    );
    let out = render(&deleted(143), false);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "Mirror east: MIRROR_NOT_EMPTY: The mirror still has topics that are not stopped.\n"
    );
    assert!(out.failed);
}

#[test]
fn table_layout() {
    let text = table(
        &["A", "LONG-HEADER", "C"],
        &[
            vec!["wide-cell".into(), "x".into(), "".into()],
            vec!["é".into(), "y".into(), "tab\there".into()],
        ],
    );
    assert_eq!(
        text,
        "\
A          LONG-HEADER  C
wide-cell  x
é          y            tab here
"
    );
}

#[test]
fn acl_lines_tables_and_json() {
    use crate::cli::acls::{AclOperation, AclRow, MirrorAcl};
    let acl = MirrorAcl {
        mirror: "east".into(),
        principal: "User:ops".into(),
        host: "*".into(),
        operations: vec![AclOperation(7), AclOperation(8)],
        deny: false,
    };
    let refused = ErrorView::of(31, Some("Cluster authorization failed."));
    let out = render(
        &Answer::AclAdded {
            acl: acl.clone(),
            errors: vec![None, refused],
        },
        false,
    );
    assert_eq!(
        out.stdout,
        "Added ACL ALLOW User:ops from * to ALTER mirror east\n"
    );
    assert!(out.failed);
    assert!(
        out.stderr
            .starts_with("Cannot add ACL ALLOW User:ops from * to DESCRIBE mirror east: "),
        "{}",
        out.stderr
    );
    let out = render(
        &Answer::AclRemoved {
            acl,
            removed: 2,
            errors: vec![],
        },
        true,
    );
    let json = parse_json(&out.stdout);
    assert_eq!(json["removed"], 2);
    assert_eq!(json["operations"][1]["operation"], "DESCRIBE");
    let row = AclRow {
        mirror: "east".into(),
        principal: "User:ops".into(),
        host: "*".into(),
        operation: "ALTER".into(),
        permission: "ALLOW".into(),
    };
    let out = render(
        &Answer::AclsListed {
            error: None,
            acls: vec![row],
        },
        false,
    );
    assert_eq!(
        cells(&out.stdout),
        [
            vec!["MIRROR", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"],
            vec!["east", "User:ops", "*", "ALTER", "ALLOW"],
        ]
    );
}
