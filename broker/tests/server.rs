//! The network server over real sockets: ApiVersions at every version, the
//! KIP-511 fallback, hostile frames, pipelining order, acks=0 silence and
//! graceful shutdown. After every hostile frame a fresh connection must
//! still be served.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, RequestHeader, RequestKind, ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use ottla_broker::handlers::{node_features, HandlerRegistry};
use ottla_broker::network::{
    HandlerFuture, Limits, ListenerSpec, RequestContext, RequestHandler, RequestMemory, Response,
    Server, ServerSettings,
};
use ottla_protocol::api_versions::VersionRange;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

#[global_allocator]
static ALLOC: ottla_allocator::NoReserveAllocator = ottla_allocator::NoReserveAllocator;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Client ids of the Metadata requests the handler has begun.
static STARTED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

async fn wait_started(client_id: &str) {
    let started = async {
        while !STARTED.lock().unwrap().contains(client_id) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(TIMEOUT, started)
        .await
        .expect("handler never started");
}

/// Answers Metadata with an empty response after `delay_ms` taken from the
/// client id, releasing the connection first when the client id says so;
/// answers Produce with nothing (acks=0) or by closing (acks=-2).
struct TestHandler;

impl RequestHandler for TestHandler {
    fn handle<'a>(
        &'a self,
        ctx: &'a RequestContext,
        header: RequestHeader,
        body: RequestKind,
    ) -> HandlerFuture<'a> {
        Box::pin(async move {
            let client = header.client_id.as_deref().unwrap_or("").to_owned();
            match body {
                RequestKind::Metadata(_) => {
                    STARTED.lock().unwrap().insert(client.clone());
                    if client.contains("release") {
                        ctx.release_next();
                    }
                    let delay = client
                        .rsplit('-')
                        .next()
                        .and_then(|d| d.parse().ok())
                        .unwrap_or(0);
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    if client.contains("encoded") {
                        let mut body = BytesMut::new();
                        MetadataResponse::default()
                            .with_cluster_id(Some(StrBytes::from_static_str("pre")))
                            .encode(&mut body, ctx.api_version)?;
                        return Ok(Response::Encoded(body.freeze()));
                    }
                    Ok(Response::Message(ResponseKind::Metadata(
                        MetadataResponse::default().with_throttle_time_ms(delay as i32),
                    )))
                }
                RequestKind::Produce(p) if p.acks == 0 => Ok(Response::NoResponse),
                RequestKind::Produce(p) if p.acks == -2 => Ok(Response::Close),
                RequestKind::Produce(_) => anyhow::bail!("unexpected produce"),
                _ => panic!("test handler got {:?}", ctx.api),
            }
        })
    }
}

struct Running {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

async fn start() -> Running {
    start_with(ServerSettings::default()).await
}

async fn start_with(settings: ServerSettings) -> Running {
    let mut registry =
        HandlerRegistry::new(node_features(ottla_broker::features::initial_finalized(0)));
    let handler: Arc<dyn RequestHandler> = Arc::new(TestHandler);
    registry
        .register(
            ApiKey::Produce,
            VersionRange { min: 3, max: 11 },
            handler.clone(),
        )
        .unwrap();
    registry
        .register(ApiKey::Metadata, VersionRange { min: 0, max: 12 }, handler)
        .unwrap();
    let spec = ListenerSpec {
        quorum: None,
        name: "PLAINTEXT".into(),
        addr: "127.0.0.1:0".parse().unwrap(),
        api_versions: Arc::new(registry.api_versions().clone()),
        handler: Arc::new(registry),
        security: ottla_broker::security::ListenerSecurity::plaintext(),
    };
    let server = Server::bind(settings, vec![spec]).await.unwrap();
    let addr = server.local_addrs()[0].1;
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(server.run(shutdown.clone()));
    Running {
        addr,
        shutdown,
        task,
    }
}

struct Client {
    stream: TcpStream,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Self {
        Self {
            stream: TcpStream::connect(addr).await.unwrap(),
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    async fn send_frame(&mut self, frame: &[u8]) {
        let mut out = (frame.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(frame);
        self.send_raw(&out).await;
    }

    async fn send(
        &mut self,
        key: ApiKey,
        version: i16,
        correlation_id: i32,
        client: &str,
        body: &impl Encodable,
    ) {
        let frame = request_frame(
            key as i16,
            version,
            key.request_header_version(version),
            correlation_id,
            client,
            body,
        );
        self.send_frame(&frame).await;
    }

    async fn recv(&mut self) -> Bytes {
        let read = async {
            let size = self.stream.read_i32().await.unwrap();
            let mut buf = vec![0; size as usize];
            self.stream.read_exact(&mut buf).await.unwrap();
            Bytes::from(buf)
        };
        tokio::time::timeout(TIMEOUT, read)
            .await
            .expect("no response")
    }

    /// True when the server closed the connection (EOF or reset).
    async fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match tokio::time::timeout(TIMEOUT, self.stream.read(&mut byte)).await {
            Ok(Ok(0)) | Ok(Err(_)) => true,
            Ok(Ok(_)) => false,
            Err(_) => panic!("connection neither answered nor closed"),
        }
    }
}

fn request_frame(
    key: i16,
    version: i16,
    header_version: i16,
    correlation_id: i32,
    client: &str,
    body: &impl Encodable,
) -> Vec<u8> {
    let mut encoded = BytesMut::new();
    body.encode(&mut encoded, version).unwrap();
    raw_request(
        key,
        version,
        header_version,
        correlation_id,
        client,
        &encoded,
    )
}

/// A header followed by arbitrary body bytes.
fn raw_request(
    key: i16,
    version: i16,
    header_version: i16,
    correlation_id: i32,
    client: &str,
    body: &[u8],
) -> Vec<u8> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client.to_owned())))
        .encode(&mut buf, header_version)
        .unwrap();
    buf.extend_from_slice(body);
    buf.to_vec()
}

/// Size prefix + frame.
fn framed(frame: Vec<u8>) -> Vec<u8> {
    [&(frame.len() as i32).to_be_bytes()[..], &frame].concat()
}

fn api_versions_request(version: i16) -> ApiVersionsRequest {
    let req = ApiVersionsRequest::default();
    if version >= 3 {
        req.with_client_software_name(StrBytes::from_static_str("ottla-test"))
            .with_client_software_version(StrBytes::from_static_str("1.0"))
    } else {
        req
    }
}

/// Sends ApiVersions at `version` (versions we do not know carry a v4
/// body, as a newer client's would start) and decodes the answer at
/// `decode_version` with response header v0.
async fn api_versions(
    client: &mut Client,
    version: i16,
    decode_version: i16,
    correlation_id: i32,
) -> ApiVersionsResponse {
    let mut body = BytesMut::new();
    api_versions_request(version.min(4))
        .encode(&mut body, version.min(4))
        .unwrap();
    let header_version = ApiKey::ApiVersions.request_header_version(version);
    let frame = raw_request(18, version, header_version, correlation_id, "t", &body);
    client.send_frame(&frame).await;
    let mut frame = client.recv().await;
    assert_eq!(
        frame.get_i32(),
        correlation_id,
        "header v0 is just the correlation id"
    );
    let response = ApiVersionsResponse::decode(&mut frame, decode_version).unwrap();
    assert!(!frame.has_remaining(), "v{version}: trailing bytes");
    response
}

async fn assert_still_serving(addr: SocketAddr) {
    let mut fresh = Client::connect(addr).await;
    let response = api_versions(&mut fresh, 3, 3, 99).await;
    assert_eq!(response.error_code, 0);
}

#[tokio::test]
async fn api_versions_at_every_version() {
    let server = start().await;
    let mut client = Client::connect(server.addr).await;
    for version in 0..=4 {
        let response = api_versions(&mut client, version, version, 10 + i32::from(version)).await;
        assert_eq!(response.error_code, 0);
        let keys: Vec<(i16, i16, i16)> = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        assert_eq!(keys, vec![(0, 0, 11), (3, 0, 12), (18, 0, 4)], "v{version}");
        if version >= 3 {
            assert_eq!(
                response.finalized_features[0].name.as_str(),
                "metadata.version"
            );
            assert_eq!(response.finalized_features_epoch, 0);
        }
    }
}

#[tokio::test]
async fn api_versions_too_new_gets_the_kip_511_answer() {
    let server = start().await;
    let mut client = Client::connect(server.addr).await;
    let response = api_versions(&mut client, 9, 0, 5).await;
    assert_eq!(
        response.error_code,
        ResponseError::UnsupportedVersion.code()
    );
    assert_eq!(response.api_keys.len(), 1);
    assert_eq!(
        (
            response.api_keys[0].api_key,
            response.api_keys[0].max_version
        ),
        (18, 4)
    );
    // The connection stays usable: the client retries at v3.
    let response = api_versions(&mut client, 3, 3, 6).await;
    assert_eq!(response.error_code, 0);
}

#[tokio::test]
async fn invalid_client_software_name_gets_invalid_request() {
    let server = start().await;
    let mut client = Client::connect(server.addr).await;
    let bad = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("-bad"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    client.send(ApiKey::ApiVersions, 3, 1, "t", &bad).await;
    let mut frame = client.recv().await;
    assert_eq!(frame.get_i32(), 1);
    let response = ApiVersionsResponse::decode(&mut frame, 3).unwrap();
    assert_eq!(response.error_code, ResponseError::InvalidRequest.code());
}

#[tokio::test]
async fn hostile_frames_close_only_their_connection() {
    let server = start().await;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "metadata v1 claiming 2^31-1 topics",
            framed(raw_request(3, 1, 1, 1, "x", &[0x7f, 0xff, 0xff, 0xff])),
        ),
        (
            "metadata v12 claiming 2^32-2 topics",
            framed(raw_request(
                3,
                12,
                2,
                1,
                "x",
                &[0xff, 0xff, 0xff, 0xff, 0x0f],
            )),
        ),
        (
            "size prefix over socket.request.max.bytes",
            i32::MAX.to_be_bytes().to_vec(),
        ),
        ("negative size prefix", (-5i32).to_be_bytes().to_vec()),
        ("frame shorter than a header", framed(vec![0, 3, 0])),
        ("empty frame", framed(vec![])),
        ("garbage", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
        ("unknown api key", framed(raw_request(4, 0, 1, 1, "x", &[]))),
        (
            "produce v2 (advertised from v0, rejected)",
            framed(raw_request(0, 2, 1, 1, "x", &[])),
        ),
        (
            "metadata v13 (not registered)",
            framed(raw_request(3, 13, 2, 1, "x", &[0])),
        ),
    ];
    for (name, bytes) in cases {
        let mut client = Client::connect(server.addr).await;
        client.send_raw(&bytes).await;
        assert!(client.is_closed().await, "{name}: connection stayed open");
        assert_still_serving(server.addr).await;
    }
}

#[tokio::test]
async fn small_max_request_size_is_enforced() {
    let settings = ServerSettings {
        max_request_size: 64,
        ..ServerSettings::default()
    };
    let server = start_with(settings).await;
    let mut client = Client::connect(server.addr).await;
    client.send_frame(&[0; 65]).await;
    assert!(client.is_closed().await);
    assert_still_serving(server.addr).await;
}

#[tokio::test]
async fn request_memory_bounds_what_is_read_before_handling() {
    let settings = ServerSettings {
        request_memory: Some(RequestMemory::new(1000)),
        ..ServerSettings::default()
    };
    let server = start_with(settings).await;
    // A client announces a 995-byte request and sends 10 bytes of it: the
    // 995 bytes are reserved, so another client's request must wait.
    let mut hog = Client::connect(server.addr).await;
    let mut partial = 995i32.to_be_bytes().to_vec();
    partial.extend_from_slice(&[0; 10]);
    hog.send_raw(&partial).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let waiting = tokio::spawn(async move {
        let mut client = Client::connect(server.addr).await;
        let response = api_versions(&mut client, 3, 3, 7).await;
        (response.error_code, server)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "a request was read while the memory pool was exhausted"
    );
    // The hog leaves; its reservation returns and the other request runs.
    drop(hog);
    let (code, server) = waiting.await.unwrap();
    assert_eq!(code, 0);
    assert_still_serving(server.addr).await;
}

#[tokio::test]
async fn pipelined_responses_come_back_in_request_order() {
    let server = start().await;
    let mut client = Client::connect(server.addr).await;
    // The first request is slowest; all release the connection at once, so
    // they run concurrently, yet answers must keep request order.
    for (i, delay) in [800, 400, 0].iter().enumerate() {
        let client_id = format!("release-{delay}");
        client
            .send(
                ApiKey::Metadata,
                12,
                i as i32,
                &client_id,
                &MetadataRequest::default(),
            )
            .await;
    }
    let started = std::time::Instant::now();
    for i in 0..3 {
        let mut frame = client.recv().await;
        let header = ResponseHeader::decode(&mut frame, 1).unwrap();
        assert_eq!(header.correlation_id, i);
        MetadataResponse::decode(&mut frame, 12).unwrap();
    }
    assert!(
        started.elapsed() < Duration::from_millis(1150),
        "requests did not overlap"
    );
}

#[tokio::test]
async fn without_release_requests_run_one_at_a_time() {
    let server = start().await;
    let mut client = Client::connect(server.addr).await;
    for i in 0..3 {
        client
            .send(
                ApiKey::Metadata,
                12,
                i,
                "slow-100",
                &MetadataRequest::default(),
            )
            .await;
    }
    let started = std::time::Instant::now();
    for i in 0..3 {
        let mut frame = client.recv().await;
        assert_eq!(
            ResponseHeader::decode(&mut frame, 1)
                .unwrap()
                .correlation_id,
            i
        );
    }
    assert!(started.elapsed() >= Duration::from_millis(290));
}

#[tokio::test]
async fn pre_encoded_bodies_are_framed() {
    let server = start().await;
    let mut client = Client::connect(server.addr).await;
    client
        .send(
            ApiKey::Metadata,
            9,
            4,
            "encoded",
            &MetadataRequest::default(),
        )
        .await;
    let mut frame = client.recv().await;
    assert_eq!(
        ResponseHeader::decode(&mut frame, 1)
            .unwrap()
            .correlation_id,
        4
    );
    let response = MetadataResponse::decode(&mut frame, 9).unwrap();
    assert_eq!(response.cluster_id.as_deref(), Some("pre"));
}

#[tokio::test]
async fn acks_zero_produce_gets_no_response() {
    let server = start().await;
    let mut client = Client::connect(server.addr).await;
    client
        .send(
            ApiKey::Produce,
            9,
            1,
            "p",
            &ProduceRequest::default().with_acks(0),
        )
        .await;
    let response = api_versions(&mut client, 3, 3, 2).await;
    assert_eq!(
        response.error_code, 0,
        "the next frame answers correlation id 2"
    );
}

#[tokio::test]
async fn handler_close_and_handler_error_close_the_connection() {
    let server = start().await;
    for acks in [-2, 1] {
        let mut client = Client::connect(server.addr).await;
        client
            .send(
                ApiKey::Produce,
                9,
                1,
                "p",
                &ProduceRequest::default().with_acks(acks),
            )
            .await;
        assert!(client.is_closed().await, "acks={acks}");
        assert_still_serving(server.addr).await;
    }
}

#[tokio::test]
async fn shutdown_delivers_in_flight_responses_then_stops() {
    let server = start().await;
    let mut client = Client::connect(server.addr).await;
    client
        .send(
            ApiKey::Metadata,
            12,
            8,
            "shutdown-200",
            &MetadataRequest::default(),
        )
        .await;
    wait_started("shutdown-200").await;
    server.shutdown.cancel();
    let mut frame = client.recv().await;
    assert_eq!(
        ResponseHeader::decode(&mut frame, 1)
            .unwrap()
            .correlation_id,
        8
    );
    assert!(client.is_closed().await);
    tokio::time::timeout(TIMEOUT, server.task)
        .await
        .expect("server did not stop")
        .unwrap();
    assert!(
        TcpStream::connect(server.addr).await.is_err(),
        "still accepting"
    );
}

#[tokio::test]
async fn shutdown_grace_bounds_slow_handlers() {
    let settings = ServerSettings {
        shutdown_grace: Duration::from_millis(100),
        ..ServerSettings::default()
    };
    let server = start_with(settings).await;
    let mut client = Client::connect(server.addr).await;
    client
        .send(
            ApiKey::Metadata,
            12,
            1,
            "grace-60000",
            &MetadataRequest::default(),
        )
        .await;
    wait_started("grace-60000").await;
    server.shutdown.cancel();
    tokio::time::timeout(TIMEOUT, server.task)
        .await
        .expect("server did not stop")
        .unwrap();
    assert!(client.is_closed().await);
}

#[tokio::test]
async fn idle_connections_are_closed() {
    let settings = ServerSettings {
        idle_timeout: Duration::from_millis(100),
        ..ServerSettings::default()
    };
    let server = start_with(settings).await;
    let mut client = Client::connect(server.addr).await;
    assert!(client.is_closed().await);
}

#[tokio::test]
async fn per_ip_connection_limit() {
    let settings = ServerSettings {
        connection_limits: Arc::new(Limits {
            max_per_ip: 1,
            ..Limits::default()
        }),
        ..ServerSettings::default()
    };
    let server = start_with(settings).await;
    let mut first = Client::connect(server.addr).await;
    let mut second = Client::connect(server.addr).await;
    assert!(second.is_closed().await);
    let response = api_versions(&mut first, 0, 0, 1).await;
    assert_eq!(response.error_code, 0);
}
