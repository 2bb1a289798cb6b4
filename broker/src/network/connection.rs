//! One client connection: read frames, decode, dispatch, and write responses
//! strictly in request order.
//!
//! Two halves run side by side. The reader decodes requests and hands each to
//! its handler on a task of its own, queueing a placeholder for the response;
//! it reads on only once the handler calls `release_next` or finishes, so
//! side effects stay in request order while waits (replication, long polls)
//! overlap. The writer awaits the queued responses in order. The queue is
//! bounded, so a client that does not read its responses stops being read.
//!
//! Any protocol violation closes this connection only.
//!
//! On SASL listeners the reader also drives the connection's SASL session:
//! SaslHandshake and SaslAuthenticate are answered here, in order, and no
//! other request is served until the client has authenticated.

use std::sync::Arc;
use std::time::Instant;

use crate::network::file_records::FileRecords;
use crate::network::response::{
    encode_response, encode_response_frame, encode_response_head, EncodeError,
};
use crate::network::response_frame::ResponseFrame;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use ottla_protocol::api_versions::ApiVersionsTable;
use ottla_protocol::frame::{FrameError, FrameReader};
use ottla_protocol::own_api::{decode_own_request, own_response_head, OwnApiKey};
use ottla_protocol::request::{decode_request, Request, RequestError, RequestPrefix};
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use super::handler::{Api, ConnectionInfo, RequestContext, RequestHandler, Response};
use super::quorum::{is_quorum_frame, QuorumEndpoint, QuorumSwitch};
use super::server::ServerSettings;
use super::transport::FrameSink;
use crate::metrics::{network, ConnectionCounters};
use crate::security::sasl::session::{Gate, SaslSession};
use crate::security::{KafkaPrincipal, ListenerSecurity};

/// What a listener serves: its name, its ApiVersions table, its handler
/// and how it authenticates.
pub(super) struct Service {
    pub name: Arc<str>,
    pub api_versions: Arc<ApiVersionsTable>,
    pub handler: Arc<dyn RequestHandler>,
    pub connections: Arc<ConnectionCounters>,
    pub quorum: Option<super::quorum::QuorumSlot>,
    pub security: ListenerSecurity,
}

/// Who a connection's requests run as.
pub(super) enum Auth {
    /// Decided by the transport: ANONYMOUS, or the TLS client certificate.
    Fixed(Arc<KafkaPrincipal>),
    /// Decided by SASL, possibly re-authenticated later.
    Sasl(Box<SaslSession>),
}

/// What became of one frame.
enum Dispatched {
    /// Queue this response; wait for `release` (if any) before reading on.
    Queued(Queued, Option<oneshot::Receiver<()>>),
    /// Authentication failed: answer (after the failed-login delay) and close.
    AuthFailed {
        response: Option<Queued>,
        reason: String,
    },
    /// Close without answering.
    Refused(String),
}

enum Outcome {
    Send(ResponseFrame),
    Silent,
    Close,
}

/// A response slot in the write queue.
enum Pending {
    Ready(ResponseFrame),
    Task(JoinHandle<Result<Outcome, String>>),
}

/// A queued response with what its request metrics need.
struct Queued {
    pending: Pending,
    api: Api,
    /// When the request's frame was about to be decoded.
    started: Instant,
}

pub(super) struct Connection {
    pub info: ConnectionInfo,
    pub service: Arc<Service>,
    pub settings: Arc<ServerSettings>,
}

impl Connection {
    /// Serves until the client leaves, a protocol error, idleness, or
    /// `shutdown` (after which queued responses are still written).
    pub(super) async fn serve<R, W>(
        self,
        read: R,
        write: W,
        auth: Auth,
        shutdown: CancellationToken,
    ) where
        R: AsyncRead + Unpin,
        W: FrameSink,
    {
        let closing = shutdown.child_token();
        let (tx, rx) = mpsc::channel(self.settings.max_in_flight_per_connection);
        let (switch, write) = tokio::join!(
            self.read_requests(read, auth, tx, &closing),
            write_responses(write, rx, &closing)
        );
        match (switch, write) {
            // Boxed: only a controller listener's quorum connections need
            // this state, so client connections do not reserve it.
            (Some(quorum), Some(write)) => Box::pin(quorum.serve(write, shutdown)).await,
            // Let the client see EOF.
            (_, Some(mut write)) => {
                let _ = write.shutdown().await;
            }
            (_, None) => {}
        }
    }

    /// Reads and dispatches requests until the connection ends, or until a
    /// quorum RPC hands it over to the metadata quorum.
    async fn read_requests<R: AsyncRead + Unpin>(
        &self,
        read: R,
        mut auth: Auth,
        queue: mpsc::Sender<Queued>,
        closing: &CancellationToken,
    ) -> Option<QuorumSwitch<R>> {
        let mut frames = FrameReader::new(read, self.settings.max_request_size);
        loop {
            if let Auth::Sasl(session) = &auth {
                // Until a client authenticates it may only send small frames.
                let max = session
                    .max_frame_before_auth()
                    .map_or(self.settings.max_request_size, |m| {
                        m.min(self.settings.max_request_size)
                    });
                frames.set_max(max);
            }
            let next = tokio::select! {
                _ = closing.cancelled() => return None,
                next = tokio::time::timeout(self.settings.idle_timeout, self.next_frame(&mut frames)) => next,
            };
            // Held until the handler lets this connection go on (below).
            let (frame, _memory) = match next {
                Ok(Ok(Some(frame))) => {
                    if let Some(until) = self.info.throttle.muted_until() {
                        // Over its quota: this client waits out its throttle.
                        tokio::select! {
                            _ = closing.cancelled() => return None,
                            _ = tokio::time::sleep_until(until.into()) => {}
                        }
                    }
                    frame
                }
                Ok(Ok(None)) => {
                    debug!("client closed the connection");
                    return None;
                }
                Ok(Err(e)) => {
                    info!("closing connection: {e}");
                    return None;
                }
                Err(_) => {
                    debug!("closing idle connection");
                    return None;
                }
            };
            if let Some(endpoint) = self.quorum_endpoint(&frame) {
                let peer = self.info.peer.ip();
                return QuorumSwitch::admit(endpoint, &auth, peer, frame, frames)
                    .inspect_err(|reason| {
                        ottla_coordinator_common::log_limited!(
                            tracing::Level::WARN,
                            key: &peer,
                            "refusing a quorum RPC connection: {reason}"
                        )
                    })
                    .ok();
            }
            let (pending, release) = match self.dispatch(frame, &mut auth) {
                Ok(Dispatched::Queued(pending, release)) => (pending, release),
                Ok(Dispatched::AuthFailed { response, reason }) => {
                    // A client guessing passwords writes one line per
                    // interval, not one per attempt.
                    ottla_coordinator_common::log_limited!(
                        tracing::Level::WARN,
                        key: &self.info.peer.ip(),
                        "failed authentication: {reason}"
                    );
                    // Slows password guessing; only this connection waits.
                    tokio::select! {
                        _ = closing.cancelled() => return None,
                        _ = tokio::time::sleep(self.service.security.failed_auth_delay) => {}
                    }
                    if let Some(response) = response {
                        let _ = queue.send(response).await;
                    }
                    return None;
                }
                Ok(Dispatched::Refused(reason)) => {
                    info!("closing connection: {reason}");
                    return None;
                }
                Err(e) => {
                    info!("closing connection: {e}");
                    return None;
                }
            };
            if queue.send(pending).await.is_err() {
                return None;
            }
            if let Some(release) = release {
                tokio::select! {
                    _ = closing.cancelled() => return None,
                    _ = release => {}
                }
            }
        }
    }

    /// The quorum to hand this connection to, when `frame` is a quorum RPC
    /// on a controller listener.
    fn quorum_endpoint(&self, frame: &[u8]) -> Option<&QuorumEndpoint> {
        let endpoint = self.service.quorum.as_ref()?.get()?;
        is_quorum_frame(frame).then_some(endpoint)
    }

    /// The next frame and, under `queued.max.request.bytes`, the memory
    /// reserved for it before its body was read.
    async fn next_frame<R: AsyncRead + Unpin>(
        &self,
        frames: &mut FrameReader<R>,
    ) -> Result<Option<(Bytes, Option<OwnedSemaphorePermit>)>, FrameError> {
        let reserved = match &self.settings.request_memory {
            None => None,
            Some(memory) => match frames.next_frame_len().await? {
                None => return Ok(None),
                Some(len) => Some(memory.reserve(len).await),
            },
        };
        Ok(frames.next_frame().await?.map(|frame| (frame, reserved)))
    }

    /// Decodes a frame and starts answering it. ApiVersions and SASL
    /// requests are answered here; everything else goes to the handler.
    fn dispatch(&self, frame: Bytes, auth: &mut Auth) -> Result<Dispatched, DispatchError> {
        let started = Instant::now();
        if let Auth::Sasl(session) = auth {
            if session.expects_raw_token() {
                return Ok(raw_token(session, &frame, started));
            }
        }
        let metrics = network();
        let queued = |pending, api| Queued {
            pending,
            api: Api::Kafka(api),
            started,
        };
        let table = &self.service.api_versions;
        if let Some(key) = RequestPrefix::peek(&frame)
            .ok()
            .and_then(|p| OwnApiKey::from_i16(p.api_key))
        {
            return self.dispatch_own(frame, key, auth, started);
        }
        let decoded = decode_request(frame, |key, version| table.accepts(key, version));
        let api = decoded.as_ref().ok().map(|r| r.api_key);
        let principal = match (auth, api) {
            (Auth::Fixed(principal), _) => principal.clone(),
            (Auth::Sasl(session), Some(api)) => match session.gate(Api::Kafka(api), started) {
                Gate::Serve(principal) => principal,
                Gate::Authenticate => return sasl_step(session, decoded?, started),
                Gate::Refuse(reason) => return Ok(Dispatched::Refused(reason)),
            },
            // Undecodable: answered as ApiVersions v0 or closed below.
            (Auth::Sasl(_), None) => Arc::new(KafkaPrincipal::anonymous()),
        };
        match decoded {
            Ok(Request {
                api_key: ApiKey::ApiVersions,
                header,
                body: RequestKind::ApiVersions(body),
                ..
            }) => {
                let version = header.request_api_version;
                metrics.received(ApiKey::ApiVersions, version);
                let response = ResponseKind::ApiVersions(table.response(&body, version));
                metrics.response_errors(ApiKey::ApiVersions, &response);
                let head = encode_response(
                    ApiKey::ApiVersions,
                    version,
                    header.correlation_id,
                    &response,
                )?;
                let frame = Pending::Ready(ResponseFrame::from(head));
                Ok(Dispatched::Queued(queued(frame, ApiKey::ApiVersions), None))
            }
            Ok(request) => {
                let api = request.api_key;
                metrics.received(api, request.header.request_api_version);
                let (task, release) = self.spawn_handler(request, principal);
                Ok(Dispatched::Queued(
                    queued(Pending::Task(task), api),
                    Some(release),
                ))
            }
            // KIP-511: answer in v0 so the client can retry with our version.
            Err(e) if e.is_unsupported_api_versions() => {
                let prefix = e.prefix().expect("a version error has a prefix");
                debug!("{e}: answering with ApiVersions v0");
                metrics.received(ApiKey::ApiVersions, prefix.api_version);
                let response = ResponseKind::ApiVersions(table.unsupported_version_response());
                metrics.response_errors(ApiKey::ApiVersions, &response);
                let head =
                    encode_response(ApiKey::ApiVersions, 0, prefix.correlation_id, &response)?;
                let frame = Pending::Ready(ResponseFrame::from(head));
                Ok(Dispatched::Queued(queued(frame, ApiKey::ApiVersions), None))
            }
            Err(e) => Err(e.into()),
        }
    }

    fn spawn_handler(
        &self,
        request: Request,
        principal: Arc<KafkaPrincipal>,
    ) -> (JoinHandle<Result<Outcome, String>>, oneshot::Receiver<()>) {
        let Request {
            api_key,
            header,
            body,
            share_v2,
        } = request;
        let (version, correlation_id) = (header.request_api_version, header.correlation_id);
        let client_id = client_id_of(&header);
        let (mut ctx, release) = RequestContext::new(
            &self.info,
            principal,
            client_id,
            Api::Kafka(api_key),
            version,
        );
        ctx.share_v2 = share_v2;
        let handler = Arc::clone(&self.service.handler);
        let task = tokio::spawn(self.settings.handler_pool.run(async move {
            let response = handler
                .handle(&ctx, header, body)
                .await
                .map_err(|e| format!("{api_key:?} handler failed: {e:#}"))?;
            drop(ctx); // releases the connection before encoding
            if let Response::Message(body) | Response::FromFiles(body, _) = &response {
                network().response_errors(api_key, body);
            }
            outcome(response, api_key, version, correlation_id).map_err(|e| e.to_string())
        }));
        (task, release)
    }
}

/// The header's client id, "" when null.
fn client_id_of(header: &kafka_protocol::messages::RequestHeader) -> Arc<str> {
    Arc::from(header.client_id.as_deref().unwrap_or(""))
}

impl Connection {
    /// Starts answering one of Ottla's mirror APIs: the header is decoded
    /// here, the body by the handler, which returns the encoded response
    /// body.
    fn dispatch_own(
        &self,
        frame: Bytes,
        key: OwnApiKey,
        auth: &mut Auth,
        started: Instant,
    ) -> Result<Dispatched, DispatchError> {
        let principal = match auth {
            Auth::Fixed(principal) => principal.clone(),
            Auth::Sasl(session) => match session.gate(Api::Own(key), started) {
                Gate::Serve(principal) => principal,
                Gate::Authenticate | Gate::Refuse(_) => {
                    return Ok(Dispatched::Refused(format!(
                        "{key:?} request before SASL authentication completed"
                    )))
                }
            },
        };
        let table = &self.service.api_versions;
        let request = decode_own_request(frame, key, |k, v| table.accepts_own(k, v))?;
        let (version, correlation_id) = (
            request.header.request_api_version,
            request.header.correlation_id,
        );
        network().received(key, version);
        let client_id = client_id_of(&request.header);
        let (ctx, release) =
            RequestContext::new(&self.info, principal, client_id, Api::Own(key), version);
        let handler = Arc::clone(&self.service.handler);
        let task = tokio::spawn(self.settings.handler_pool.run(async move {
            let body = handler
                .handle_own(&ctx, key, request.body)
                .await
                .map_err(|e| format!("{key:?} handler failed: {e:#}"))?;
            drop(ctx);
            let head = own_response_head(correlation_id, body.len())
                .ok_or_else(|| format!("{key:?} response of {} bytes is too large", body.len()))?;
            Ok(Outcome::Send(ResponseFrame::new([head, body])))
        }));
        let queued = Queued {
            pending: Pending::Task(task),
            api: Api::Own(key),
            started,
        };
        Ok(Dispatched::Queued(queued, Some(release)))
    }
}

/// Why a frame could not be dispatched; the connection closes.
#[derive(Debug, thiserror::Error)]
enum DispatchError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    Encode(#[from] EncodeError),
}

/// Answers a SaslHandshake or SaslAuthenticate from the session.
fn sasl_step(
    session: &mut SaslSession,
    request: Request,
    started: Instant,
) -> Result<Dispatched, DispatchError> {
    let Request {
        api_key,
        header,
        body,
        ..
    } = request;
    let version = header.request_api_version;
    let (response, failure) = match body {
        RequestKind::SaslHandshake(r) => {
            let step = session.handshake(version, &r);
            (ResponseKind::SaslHandshake(step.response), step.failure)
        }
        RequestKind::SaslAuthenticate(r) => {
            let step = session.authenticate(version, &r, started);
            (ResponseKind::SaslAuthenticate(step.response), step.failure)
        }
        _ => {
            return Ok(Dispatched::Refused(format!(
                "{api_key:?} is not a SASL request"
            )))
        }
    };
    let metrics = network();
    metrics.received(api_key, version);
    metrics.response_errors(api_key, &response);
    let head = encode_response(api_key, version, header.correlation_id, &response)?;
    let queued = Queued {
        pending: Pending::Ready(ResponseFrame::from(head)),
        api: Api::Kafka(api_key),
        started,
    };
    Ok(match failure {
        None => {
            if let Some(principal) = session.authenticated_as() {
                debug!(%principal, "SASL authentication complete");
            }
            Dispatched::Queued(queued, None)
        }
        Some(reason) => Dispatched::AuthFailed {
            response: Some(queued),
            reason,
        },
    })
}

/// A bare SASL token after a v0 SaslHandshake, answered with a bare,
/// size-prefixed token; a failure closes without an answer, as in Kafka.
fn raw_token(session: &mut SaslSession, frame: &[u8], started: Instant) -> Dispatched {
    match session.raw_token(frame, started) {
        Ok(token) => {
            network().received(ApiKey::SaslAuthenticate, 0);
            let mut out = BytesMut::with_capacity(4 + token.len());
            out.put_u32(token.len() as u32);
            out.put_slice(&token);
            let queued = Queued {
                pending: Pending::Ready(ResponseFrame::from(out.freeze())),
                api: Api::Kafka(ApiKey::SaslAuthenticate),
                started,
            };
            Dispatched::Queued(queued, None)
        }
        Err(reason) => Dispatched::AuthFailed {
            response: None,
            reason,
        },
    }
}

fn outcome(
    response: Response,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Result<Outcome, EncodeError> {
    let encode = |body: &ResponseKind, files: &FileRecords| {
        encode_response_frame(api_key, version, correlation_id, body, files)
    };
    Ok(match response {
        Response::Message(body) => Outcome::Send(encode(&body, &FileRecords::default())?),
        Response::FromFiles(body, files) => Outcome::Send(encode(&body, &files)?),
        Response::Encoded(body) => Outcome::Send(ResponseFrame::new([
            encode_response_head(api_key, version, correlation_id, body.len())?,
            body,
        ])),
        Response::NoResponse => Outcome::Silent,
        Response::Close => Outcome::Close,
    })
}

/// The request log (Kafka's `kafka.request.logger`): one line per answered
/// request at debug level, under the connection's span (id, peer). Enable
/// it with `RUST_LOG=info,ottla::request=debug`.
fn log_request(api: Api, started: Instant, response_bytes: usize) {
    debug!(
        target: "ottla::request",
        api = ?api,
        micros = started.elapsed().as_micros() as u64,
        response_bytes,
        "request completed"
    );
}

/// Writes responses in request order until the reader stops queueing them
/// (then returns the writer, still open) or writing fails.
async fn write_responses<W: FrameSink>(
    mut write: W,
    mut queue: mpsc::Receiver<Queued>,
    closing: &CancellationToken,
) -> Option<W> {
    let metrics = network();
    let mut failed = false;
    while let Some(Queued {
        pending,
        api,
        started,
    }) = queue.recv().await
    {
        let outcome = match pending {
            Pending::Ready(frame) => Ok(Outcome::Send(frame)),
            Pending::Task(task) => task
                .await
                .unwrap_or_else(|e| Err(format!("handler panicked: {e}"))),
        };
        match outcome {
            Ok(Outcome::Send(frame)) => {
                let bytes = frame.remaining();
                if let Err(e) = write.send(frame).await {
                    debug!("write failed: {e}");
                    failed = true;
                    break;
                }
                metrics.completed(api, started);
                log_request(api, started, bytes);
            }
            Ok(Outcome::Silent) => {
                metrics.completed(api, started);
                log_request(api, started, 0);
            }
            Ok(Outcome::Close) => {
                debug!("handler closed the connection");
                failed = true;
                break;
            }
            Err(reason) => {
                // Kafka would have answered UNKNOWN_SERVER_ERROR.
                metrics.error(api, ResponseError::UnknownServerError.code());
                ottla_coordinator_common::log_limited!(tracing::Level::WARN, key: &(), "closing connection: {reason}");
                failed = true;
                break;
            }
        }
    }
    if !failed {
        return Some(write);
    }
    // Stop the reader too, then let the client see EOF.
    closing.cancel();
    let _ = write.shutdown().await;
    None
}
