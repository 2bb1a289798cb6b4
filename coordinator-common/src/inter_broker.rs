//! Requests this broker sends to other brokers (transaction markers to
//! partition leaders, transaction verification, mirror states): lazily
//! opened connections on the inter-broker listener with its security,
//! reopened after any failure. One request is in flight per connection, so
//! transaction markers, which a leader answers only once its ISR has them,
//! have a connection of their own per broker (Kafka's marker channel is
//! separate too): they never hold up the other requests to that broker.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::protocol::Request;
use ottla_client::ClientSecurity;
use ottla_client::{ClientError, KafkaClient};
use ottla_controller::{Controller, MetadataImage};
use ottla_protocol::mirror::MirrorRequest;
use parking_lot::Mutex;

/// Largest answer accepted from another broker.
const MAX_RESPONSE: usize = 100 << 20;

pub struct BrokerClients {
    node_id: i32,
    listener: String,
    security: ClientSecurity,
    controller: Arc<Controller>,
    timeout: Duration,
    connections: Mutex<HashMap<(i32, Lane), Connection>>,
}

/// One connection slot, opened on first use and held for one exchange.
type Connection = Arc<tokio::sync::Mutex<Option<KafkaClient>>>;

/// Which of a broker's connections a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    General,
    /// WriteTxnMarkers, which may wait for the leader's ISR.
    Markers,
}

impl BrokerClients {
    pub fn new(
        node_id: i32,
        listener: String,
        security: ClientSecurity,
        controller: Arc<Controller>,
        timeout: Duration,
    ) -> Self {
        Self {
            node_id,
            listener,
            security,
            controller,
            timeout,
            connections: Mutex::default(),
        }
    }

    /// Sends `req` to broker `broker` and waits for its answer.
    pub async fn send<R: Request>(
        &self,
        broker: i32,
        version: i16,
        req: &R,
    ) -> Result<R::Response, String> {
        self.send_on(Lane::General, broker, version, req).await
    }

    /// [`BrokerClients::send`] on the connection of `lane`.
    pub async fn send_on<R: Request>(
        &self,
        lane: Lane,
        broker: i32,
        version: i16,
        req: &R,
    ) -> Result<R::Response, String> {
        let mut conn = self.connection(lane, broker).await?;
        let client = conn.as_mut().expect("connected");
        let result = client.send(version, req, self.timeout).await;
        Self::settle(&mut conn, result)
    }

    /// Sends one of Ottla's mirror requests to broker `broker`.
    pub async fn send_mirror<R: MirrorRequest>(
        &self,
        broker: i32,
        req: &R,
    ) -> Result<R::Response, String> {
        let mut conn = self.connection(Lane::General, broker).await?;
        let client = conn.as_mut().expect("connected");
        let result = client.send_mirror(0, req, self.timeout).await;
        Self::settle(&mut conn, result)
    }

    /// The open connection to `broker`, opened if need be; held exclusively
    /// until dropped (one request in flight per connection).
    async fn connection(
        &self,
        lane: Lane,
        broker: i32,
    ) -> Result<tokio::sync::OwnedMutexGuard<Option<KafkaClient>>, String> {
        let slot = self
            .connections
            .lock()
            .entry((broker, lane))
            .or_default()
            .clone();
        let mut conn = slot.lock_owned().await;
        if conn.is_none() {
            let image = self.controller.image();
            let (host, port) = endpoint_of(&image, broker, &self.listener)
                .ok_or_else(|| format!("broker {broker} has no {} endpoint", self.listener))?;
            let client_id = format!("broker-{}", self.node_id);
            let client = KafkaClient::connect_with(
                &host,
                port,
                &client_id,
                MAX_RESPONSE,
                self.timeout,
                &self.security,
            )
            .await
            .map_err(|e| e.to_string())?;
            *conn = Some(client);
        }
        Ok(conn)
    }

    /// Drops the connection after a failed exchange: a late answer may
    /// still arrive on it.
    fn settle<T>(
        conn: &mut Option<KafkaClient>,
        result: Result<T, ClientError>,
    ) -> Result<T, String> {
        result.map_err(|e| {
            *conn = None;
            e.to_string()
        })
    }

    /// [`BrokerClients::send`] for code on the blocking pool.
    pub fn send_blocking<R: Request>(
        &self,
        broker: i32,
        version: i16,
        req: &R,
    ) -> Result<R::Response, String> {
        self.send_blocking_on(Lane::General, broker, version, req)
    }

    /// [`BrokerClients::send_on`] for code on the blocking pool.
    pub fn send_blocking_on<R: Request>(
        &self,
        lane: Lane,
        broker: i32,
        version: i16,
        req: &R,
    ) -> Result<R::Response, String> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| "no async runtime to reach other brokers from".to_string())?;
        runtime.block_on(self.send_on(lane, broker, version, req))
    }
}

/// Where broker `id` listens on `listener` (else its first endpoint).
pub fn endpoint_of(image: &MetadataImage, id: i32, listener: &str) -> Option<(String, u16)> {
    let broker = image.brokers.get(&id)?;
    broker
        .endpoints
        .iter()
        .find(|e| e.listener == listener)
        .or_else(|| broker.endpoints.first())
        .map(|e| (e.host.clone(), e.port))
}
