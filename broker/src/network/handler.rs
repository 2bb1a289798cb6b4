//! The contract between the network layer and request handlers.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::network::file_records::FileRecords;
use bytes::Bytes;
use kafka_protocol::messages::{RequestHeader, RequestKind, ResponseKind};
pub use ottla_protocol::own_api::Api;
use ottla_protocol::own_api::OwnApiKey;
use ottla_protocol::share_v2::ShareRequestV2;
use tokio::sync::oneshot;

use crate::security::KafkaPrincipal;

/// What a handler answers.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "moved once per request; boxing would only add an allocation"
)]
pub enum Response {
    /// Encoded by the network layer at the request's version.
    Message(ResponseKind),
    /// A Fetch whose record sets stay in their files until they are
    /// written: the body carries stand-ins for them (`file_records`).
    FromFiles(ResponseKind, FileRecords),
    /// A body the handler encoded itself at the request's version; it is
    /// written after the response header without being copied again.
    Encoded(Bytes),
    /// Send nothing: the client expects no answer (acks=0 Produce).
    NoResponse,
    /// Close the connection without answering, which is how Kafka reports a
    /// failed acks=0 Produce.
    Close,
}

/// An error a handler could not turn into a Kafka error code. The network
/// layer logs it and closes the connection.
pub type HandlerError = anyhow::Error;

pub type HandlerFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Response, HandlerError>> + Send + 'a>>;

/// Serves requests. Implementations answer whatever API keys they were
/// registered for; the network layer has already checked key and version.
pub trait RequestHandler: Send + Sync + 'static {
    /// Serves one of Kafka's APIs (kafka-protocol's codec). Handlers of
    /// own-codec APIs only keep the default, which refuses.
    fn handle<'a>(
        &'a self,
        ctx: &'a RequestContext,
        header: RequestHeader,
        body: RequestKind,
    ) -> HandlerFuture<'a> {
        let _ = (header, body);
        Box::pin(async move { anyhow::bail!("{:?} is not served by this handler", ctx.api) })
    }

    /// Serves one of the APIs of Ottla's own codec (mirror and streams-group
    /// APIs, which kafka-protocol does not know): `body` is the request body after the header, and the answer is
    /// the encoded response body. Only called for keys and versions the
    /// listener's ApiVersions table accepts.
    fn handle_own<'a>(
        &'a self,
        ctx: &'a RequestContext,
        key: OwnApiKey,
        body: Bytes,
    ) -> OwnHandlerFuture<'a> {
        let _ = body;
        Box::pin(async move { anyhow::bail!("{key} is not served on listener {}", ctx.listener) })
    }
}

pub type OwnHandlerFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Bytes, HandlerError>> + Send + 'a>>;

/// When a connection may be read from again: a client over its quota is
/// not read from until its throttle time has passed (KIP-219).
#[derive(Debug, Default)]
pub struct ConnectionThrottle(Mutex<Option<Instant>>);

impl ConnectionThrottle {
    /// Mutes the connection for `how_long` from now (a longer mute already
    /// in place stays).
    pub fn mute_for(&self, how_long: Duration) {
        let until = Instant::now() + how_long;
        let mut muted = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if muted.is_none_or(|m| m < until) {
            *muted = Some(until);
        }
    }

    /// Until when the connection is muted, if it is.
    pub fn muted_until(&self) -> Option<Instant> {
        let muted = *self.0.lock().unwrap_or_else(|p| p.into_inner());
        muted.filter(|m| *m > Instant::now())
    }
}

/// What every request on one connection shares.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    pub id: u64,
    pub listener: Arc<str>,
    pub peer: SocketAddr,
    pub throttle: Arc<ConnectionThrottle>,
}

/// Per-request information from the connection.
#[derive(Debug)]
pub struct RequestContext {
    pub connection_id: u64,
    pub listener: Arc<str>,
    pub peer: SocketAddr,
    /// Who the connection authenticated as (User:ANONYMOUS on PLAINTEXT).
    pub principal: Arc<KafkaPrincipal>,
    /// The request header's client id ("" when null), which quotas key on.
    pub client_id: Arc<str>,
    pub api: Api,
    pub api_version: i16,
    /// ShareFetch and ShareAcknowledge v2's fields, which kafka-protocol's
    /// bodies have no place for (default for every other request).
    pub share_v2: ShareRequestV2,
    pub throttle: Arc<ConnectionThrottle>,
    release: Mutex<Option<oneshot::Sender<()>>>,
}

impl RequestContext {
    /// The context and the receiver the connection waits on before starting
    /// its next request. Dropping the context (the handler finished) also
    /// releases it.
    pub(super) fn new(
        connection: &ConnectionInfo,
        principal: Arc<KafkaPrincipal>,
        client_id: Arc<str>,
        api: Api,
        api_version: i16,
    ) -> (Self, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let ctx = Self {
            connection_id: connection.id,
            listener: Arc::clone(&connection.listener),
            peer: connection.peer,
            principal,
            client_id,
            api,
            api_version,
            share_v2: ShareRequestV2::default(),
            throttle: Arc::clone(&connection.throttle),
            release: Mutex::new(Some(tx)),
        };
        (ctx, rx)
    }

    /// Lets the connection start its next request before this one finishes.
    ///
    /// Like Kafka, a connection processes its requests one at a time by
    /// default, so their side effects happen in order (an idempotent
    /// producer's batches, a consumer's commits). A handler calls this once
    /// its order-sensitive part is done (a Produce after appending to the
    /// leader's log, before waiting for acks=all; a Fetch before its
    /// long-poll wait), so later requests overlap with the wait. Responses
    /// are still written in request order.
    pub fn release_next(&self) {
        let sender = self
            .release
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(sender) = sender {
            // The connection may be gone; nothing to release then.
            let _ = sender.send(());
        }
    }
}
