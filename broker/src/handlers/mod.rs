//! Request handlers, one module per API (`handlers/<api>.rs`), collected in
//! a [`HandlerRegistry`] per listener.
//!
//! To add a Kafka API: write its handler in `crate::apis` and its gate in
//! `crate::authorize`, and add one entry (versions, gate, handler) to the
//! listener's `served_apis!` table (`broker_apis.rs`, `controller_apis.rs`).
//! Registration is what makes the API appear in ApiVersions, so nothing is
//! advertised that is not authorized and answered.

pub mod broker_apis;
pub mod controller_apis;
pub mod credentials;
mod past_versions;
mod served;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use ottla_group_coordinator::GroupCoordinator;
use ottla_protocol::api_versions::{
    ApiTableError, ApiVersionsTable, Features, FinalizedFeatures, VersionRange,
};
use ottla_protocol::mirror::MirrorApiKey;
use ottla_protocol::own_api::OwnApiKey;
use ottla_protocol::streams::StreamsApiKey;

use crate::apis::sasl;
use crate::broker::BackgroundJob;
pub use crate::features::node_features;
use crate::network::{
    Api, HandlerFuture, OwnHandlerFuture, RequestContext, RequestHandler, Response,
};
use crate::replica::now_ms;

/// API key → handler, plus the ApiVersions table built from the registrations.
pub struct HandlerRegistry {
    handlers: HashMap<ApiKey, Arc<dyn RequestHandler>>,
    /// The APIs of Ottla's own codec this listener offers (mirror and
    /// streams-group APIs).
    own: HashMap<OwnApiKey, Arc<dyn RequestHandler>>,
    api_versions: ApiVersionsTable,
}

impl HandlerRegistry {
    pub fn new(features: Features) -> Self {
        Self {
            handlers: HashMap::new(),
            own: HashMap::new(),
            api_versions: ApiVersionsTable::new(features),
        }
    }

    /// Serves `key` at `versions` with `handler`.
    pub fn register(
        &mut self,
        key: ApiKey,
        versions: VersionRange,
        handler: Arc<dyn RequestHandler>,
    ) -> Result<(), ApiTableError> {
        self.api_versions.add(key, versions)?;
        self.handlers.insert(key, handler);
        Ok(())
    }

    /// Serves each API of `served` (key, min and max version) with `handler`.
    pub fn register_all(
        &mut self,
        served: &[(ApiKey, i16, i16)],
        handler: Arc<dyn RequestHandler>,
    ) -> Result<(), ApiTableError> {
        for &(key, min, max) in served {
            self.register(key, VersionRange { min, max }, handler.clone())?;
        }
        Ok(())
    }

    /// Serves each of `keys` (all versions) with `handler`'s
    /// [`RequestHandler::handle_own`].
    pub fn register_own(
        &mut self,
        keys: impl IntoIterator<Item = OwnApiKey>,
        handler: Arc<dyn RequestHandler>,
    ) {
        for key in keys {
            self.api_versions.add_own(key);
            self.own.insert(key, handler.clone());
        }
    }

    /// What this registry's listener advertises and accepts.
    pub fn api_versions(&self) -> &ApiVersionsTable {
        &self.api_versions
    }
}

impl RequestHandler for HandlerRegistry {
    fn handle<'a>(
        &'a self,
        ctx: &'a RequestContext,
        header: RequestHeader,
        body: RequestKind,
    ) -> HandlerFuture<'a> {
        let handler = match ctx.api {
            Api::Kafka(key) => self.handlers.get(&key),
            Api::Own(_) => None,
        };
        match handler {
            Some(handler) => handler.handle(ctx, header, body),
            // The network layer only dispatches keys in the table.
            None => Box::pin(async move { anyhow::bail!("no handler for {:?}", ctx.api) }),
        }
    }

    fn handle_own<'a>(
        &'a self,
        ctx: &'a RequestContext,
        key: OwnApiKey,
        body: Bytes,
    ) -> OwnHandlerFuture<'a> {
        match self.own.get(&key) {
            Some(handler) => handler.handle_own(ctx, key, body),
            None => Box::pin(async move { anyhow::bail!("no handler for {key}") }),
        }
    }
}

/// The background work of the APIs served here, for
/// [`Broker::run_background`](crate::broker::Broker::run_background): the
/// share partitions' lock expiry and idle share sessions.
pub fn background_jobs() -> Vec<BackgroundJob> {
    vec![BackgroundJob {
        period: GroupCoordinator::TICK_INTERVAL,
        job: Box::new(|b| crate::apis::share_fetch::tick(b, now_ms())),
    }]
}

/// The handlers of the client-facing (broker) listeners. ApiVersions is
/// answered by the network layer from this registry's table.
pub fn broker_registry(
    slot: broker_apis::BrokerSlot,
    finalized: Arc<FinalizedFeatures>,
) -> Result<HandlerRegistry, ApiTableError> {
    let mut registry = HandlerRegistry::new(node_features(finalized));
    register_sasl(&mut registry)?;
    registry.register_own(
        MirrorApiKey::ALL.map(OwnApiKey::Mirror),
        Arc::new(crate::apis::mirror::MirrorApis {
            broker: slot.clone(),
        }),
    );
    registry.register_own(
        StreamsApiKey::ALL.map(OwnApiKey::Streams),
        Arc::new(crate::apis::streams_group::StreamsApis::new(slot.clone())),
    );
    broker_apis::register(&mut registry, slot)?;
    Ok(registry)
}

/// The handlers of the controller listeners: SASL and the admin APIs of
/// `--bootstrap-controller` clients, served by the controller `slot` will
/// hold (the quorum's own RPCs are handed over before these).
pub fn controller_registry(
    slot: controller_apis::ControllerSlot,
    finalized: Arc<FinalizedFeatures>,
) -> Result<HandlerRegistry, ApiTableError> {
    let mut registry = HandlerRegistry::new(node_features(finalized));
    register_sasl(&mut registry)?;
    controller_apis::register(&mut registry, slot)?;
    Ok(registry)
}

/// SaslHandshake (v0-1) and SaslAuthenticate (v0-2), served on every
/// listener as Kafka does. SASL listeners answer them in the network layer
/// while authenticating; one that reaches a handler is out of place
/// (PLAINTEXT or SSL listener, or already authenticated) and is answered
/// ILLEGAL_SASL_STATE.
pub fn register_sasl(registry: &mut HandlerRegistry) -> Result<(), ApiTableError> {
    let handler: Arc<dyn RequestHandler> = Arc::new(OutOfPlaceSasl);
    registry.register(
        ApiKey::SaslHandshake,
        VersionRange { min: 0, max: 1 },
        handler.clone(),
    )?;
    registry.register(
        ApiKey::SaslAuthenticate,
        VersionRange { min: 0, max: 2 },
        handler,
    )
}

struct OutOfPlaceSasl;

impl RequestHandler for OutOfPlaceSasl {
    fn handle<'a>(
        &'a self,
        _ctx: &'a RequestContext,
        _header: RequestHeader,
        body: RequestKind,
    ) -> HandlerFuture<'a> {
        Box::pin(async move {
            let response = match body {
                RequestKind::SaslHandshake(_) => ResponseKind::SaslHandshake(sasl::handshake()),
                RequestKind::SaslAuthenticate(_) => {
                    ResponseKind::SaslAuthenticate(sasl::authenticate())
                }
                _ => anyhow::bail!("the SASL handler only answers SASL requests"),
            };
            Ok(Response::Message(response))
        })
    }
}
