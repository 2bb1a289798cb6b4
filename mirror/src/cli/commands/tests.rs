//! Each action against a stand-in broker that answers ApiVersions and then
//! one mirror request with a canned response, recording what it was sent.

use std::io::Write;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use ottla_protocol::mirror::admin::{
    CreateMirrorResponse, DescribeMirrorsResponse, DescribedMirror, ListMirrorsResponse,
    MirrorConfigEntry,
};
use ottla_protocol::mirror::topics::{MirrorTopicResult, PauseMirrorTopicsResponse};
use ottla_protocol::mirror::{MirrorApiKey, MirrorMessage, REQUEST_HEADER_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::cli::args::ServerAddress;

/// Answers ApiVersions (advertising `served` at v0) and then one mirror
/// request with `reply`; returns that request's key and body.
async fn stand_in(
    listener: TcpListener,
    served: Vec<MirrorApiKey>,
    reply: Vec<u8>,
) -> Option<(i16, Bytes)> {
    let (mut socket, _) = listener.accept().await.unwrap();
    loop {
        let mut len = [0; 4];
        socket.read_exact(&mut len).await.ok()?;
        let mut frame = vec![0; i32::from_be_bytes(len) as usize];
        socket.read_exact(&mut frame).await.unwrap();
        let mut frame = Bytes::from(frame);
        let key = i16::from_be_bytes([frame[0], frame[1]]);
        // ApiVersions v3 and every mirror API use request header v2.
        let header = RequestHeader::decode(&mut frame, REQUEST_HEADER_VERSION).unwrap();
        let response_header = ResponseHeader::default().with_correlation_id(header.correlation_id);
        let mut out = BytesMut::new();
        out.put_i32(0);
        let received = if key == ApiKey::ApiVersions as i16 {
            response_header.encode(&mut out, 0).unwrap();
            let keys = served
                .iter()
                .map(|k| ApiVersion::default().with_api_key(k.as_i16()))
                .collect();
            ApiVersionsResponse::default()
                .with_api_keys(keys)
                .encode(&mut out, header.request_api_version)
                .unwrap();
            None
        } else {
            response_header.encode(&mut out, 1).unwrap();
            out.put_slice(&reply);
            Some((key, frame))
        };
        let len = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&len.to_be_bytes());
        socket.write_all(&out).await.unwrap();
        if received.is_some() {
            return received;
        }
    }
}

/// Runs `action` against a stand-in serving `served` that answers `reply`.
fn exchange(
    action: Action,
    served: &[MirrorApiKey],
    reply: &impl MirrorMessage,
) -> (Result<Answer, CommandError>, Option<(i16, Bytes)>) {
    let reply = reply.encode(0).unwrap().to_vec();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(stand_in(listener, served.to_vec(), reply));
        let invocation = Invocation {
            bootstrap_servers: vec![ServerAddress {
                host: "127.0.0.1".into(),
                port,
            }],
            command_config: None,
            json: false,
            action,
        };
        let answer = execute(&invocation, |w| panic!("unexpected warning {w}")).await;
        (answer, server.await.unwrap())
    })
}

fn request<R: MirrorMessage>(received: Option<(i16, Bytes)>) -> R {
    let (key, body) = received.expect("a mirror request");
    assert_eq!(key, R::API_KEY.as_i16());
    R::decode(&body, 0).unwrap()
}

#[test]
fn describe_every_mirror() {
    let reply = DescribeMirrorsResponse {
        mirrors: vec![DescribedMirror {
            mirror_name: "east".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let (answer, received) = exchange(
        Action::Describe { mirrors: vec![] },
        &[MirrorApiKey::DescribeMirrors],
        &reply,
    );
    assert_eq!(answer.unwrap(), Answer::Described(reply));
    let sent: DescribeMirrorsRequest = request(received);
    assert_eq!(sent.mirror_names, None);

    let (_, received) = exchange(
        Action::Describe {
            mirrors: vec!["a".into(), "b".into()],
        },
        &[MirrorApiKey::DescribeMirrors],
        &DescribeMirrorsResponse::default(),
    );
    let sent: DescribeMirrorsRequest = request(received);
    assert_eq!(sent.mirror_names, Some(vec!["a".into(), "b".into()]));
}

#[test]
fn create_sends_the_mirror_config() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(b"bootstrap.servers=src:9092\nmirror.topics.include=.*\n")
        .unwrap();
    let reply = CreateMirrorResponse {
        error_code: 136,
        ..Default::default()
    };
    let (answer, received) = exchange(
        Action::Create {
            mirror: "east".into(),
            config_file: file.path().to_owned(),
            validate_only: true,
        },
        &[MirrorApiKey::CreateMirror],
        &reply,
    );
    assert_eq!(
        answer.unwrap(),
        Answer::Created {
            mirror: "east".into(),
            validate_only: true,
            response: reply,
        }
    );
    let sent: CreateMirrorRequest = request(received);
    let entry = |name: &str, value: &str| MirrorConfigEntry {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    };
    assert_eq!(
        sent,
        CreateMirrorRequest {
            mirror_name: "east".into(),
            configs: vec![
                entry("bootstrap.servers", "src:9092"),
                entry("mirror.topics.include", ".*")
            ],
            validate_only: true,
            ..Default::default()
        }
    );
}

#[test]
fn topic_operations_send_the_topics() {
    let results = vec![MirrorTopicResult {
        name: "orders".into(),
        error_code: 140,
        ..Default::default()
    }];
    let reply = PauseMirrorTopicsResponse {
        topics: results.clone(),
        ..Default::default()
    };
    let (answer, received) = exchange(
        Action::Topics {
            op: TopicOp::Pause,
            mirror: "east".into(),
            topics: vec!["orders".into(), "audit".into()],
            discard_local_writes: false,
        },
        &[MirrorApiKey::PauseMirrorTopics],
        &reply,
    );
    assert_eq!(
        answer.unwrap(),
        Answer::Topics {
            op: TopicOp::Pause,
            mirror: "east".into(),
            requested: vec!["orders".into(), "audit".into()],
            result: TopicSetResult {
                topics: results,
                ..Default::default()
            },
        }
    );
    let sent: PauseMirrorTopicsRequest = request(received);
    assert_eq!(sent.mirror_name, "east");
    let names: Vec<&str> = sent.topics.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["orders", "audit"]);
}

#[test]
fn an_api_the_broker_does_not_serve_is_not_sent() {
    let (answer, received) = exchange(
        Action::List,
        &[MirrorApiKey::DescribeMirrors],
        &ListMirrorsResponse::default(),
    );
    let error = answer.unwrap_err().to_string();
    assert!(
        error.ends_with(
            "does not serve ListMirrors (API key 98 v0): is it an Ottla broker with cluster mirroring?"
        ),
        "{error}"
    );
    assert!(received.is_none());
}
