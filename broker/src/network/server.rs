//! Listeners: bind, accept within the connection limits, spawn connections,
//! and shut down gracefully.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ottla_protocol::api_versions::ApiVersionsTable;
use ottla_protocol::frame::DEFAULT_MAX_REQUEST_SIZE;
use parking_lot::Mutex;
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, info_span, warn, Instrument};

use super::connection::{Connection, Service};
use super::handler::{ConnectionInfo, RequestHandler};
use super::handler_pool::RequestHandlerPool;
use super::limits::{
    ConnectionLimitSource, ConnectionLimits, ConnectionRateQuotas, ConnectionRates, Limits,
    StaticLimits,
};
use super::memory::RequestMemory;
use super::quorum::QuorumSlot;
use crate::config::{keys, parse_per_ip_overrides, BrokerConfig};
use crate::metrics::network;
use crate::security::ListenerSecurity;

/// How long accepting pauses after an accept error (e.g. out of file
/// descriptors), so the loop does not spin.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Network settings shared by all listeners.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// socket.request.max.bytes.
    pub max_request_size: usize,
    /// Responses a connection may have queued (processing or unwritten)
    /// before it stops being read. Kafka allows one; pipelining needs a few.
    pub max_in_flight_per_connection: usize,
    /// connections.max.idle.ms.
    pub idle_timeout: Duration,
    /// How long shutdown waits for in-flight responses before dropping
    /// connections.
    pub shutdown_grace: Duration,
    /// max.connections and the per-IP limits, as configured at start-up.
    pub connection_limits: Arc<Limits>,
    /// SO_SNDBUF / SO_RCVBUF; `None` keeps the OS default.
    pub send_buffer_size: Option<u32>,
    pub recv_buffer_size: Option<u32>,
    pub listen_backlog: u32,
    /// queued.max.request.bytes, shared by every listener; `None`: unbounded.
    pub request_memory: Option<Arc<RequestMemory>>,
    /// num.io.threads, shared by every listener.
    pub handler_pool: Arc<RequestHandlerPool>,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            max_request_size: DEFAULT_MAX_REQUEST_SIZE,
            max_in_flight_per_connection: 16,
            idle_timeout: Duration::from_secs(600),
            shutdown_grace: Duration::from_secs(10),
            connection_limits: Arc::default(),
            send_buffer_size: None,
            recv_buffer_size: None,
            listen_backlog: 50,
            request_memory: None,
            handler_pool: RequestHandlerPool::new(8),
        }
    }
}

impl ServerSettings {
    pub fn from_config(config: &BrokerConfig) -> Self {
        let size = |v: i32| u32::try_from(v).ok();
        let count = |v: i32| usize::try_from(v).unwrap_or(0);
        Self {
            max_request_size: count(config.get(keys::SOCKET_REQUEST_MAX_BYTES)),
            idle_timeout: Duration::from_millis(
                config.get(keys::CONNECTIONS_MAX_IDLE_MS).unsigned_abs(),
            ),
            connection_limits: Arc::new(connection_limits(config)),
            send_buffer_size: size(config.get(keys::SOCKET_SEND_BUFFER_BYTES)),
            recv_buffer_size: size(config.get(keys::SOCKET_RECEIVE_BUFFER_BYTES)),
            listen_backlog: size(config.get(keys::SOCKET_LISTEN_BACKLOG_SIZE)).unwrap_or(50),
            request_memory: usize::try_from(config.get(keys::QUEUED_MAX_REQUEST_BYTES))
                .ok()
                .filter(|&bytes| bytes > 0)
                .map(RequestMemory::new),
            handler_pool: RequestHandlerPool::new(count(config.get(keys::NUM_IO_THREADS))),
            ..Self::default()
        }
    }
}

/// The connection limits `config` sets.
pub fn connection_limits(config: &BrokerConfig) -> Limits {
    let count = |v: i32| usize::try_from(v).unwrap_or(0);
    // Kafka's default, i32::MAX, means no limit.
    let rate = |v: i32| (v != i32::MAX).then(|| f64::from(v.max(0)));
    Limits {
        max_connections: count(config.get(keys::MAX_CONNECTIONS)),
        max_per_ip: count(config.get(keys::MAX_CONNECTIONS_PER_IP)),
        // Checked when the configuration was loaded.
        per_ip_overrides: parse_per_ip_overrides(
            &config.get(keys::MAX_CONNECTIONS_PER_IP_OVERRIDES),
        )
        .unwrap_or_default(),
        max_creation_rate: rate(config.get(keys::MAX_CONNECTION_CREATION_RATE)),
        listener_creation_rates: config
            .listeners
            .iter()
            .filter_map(|l| {
                let limit = config.scoped(&l.name, keys::MAX_CONNECTION_CREATION_RATE)?;
                Some((l.name.clone(), rate(limit)?))
            })
            .collect(),
        listener_max_connections: config
            .listeners
            .iter()
            .filter_map(|l| {
                let max = config.scoped(&l.name, keys::MAX_CONNECTIONS)?;
                Some((l.name.clone(), count(max)))
            })
            .collect(),
        exempt_listener: config
            .inter_broker_listener_name
            .clone()
            .filter(|_| config.broker_listeners().count() > 1),
    }
}

/// One listener to serve.
pub struct ListenerSpec {
    pub name: String,
    pub addr: SocketAddr,
    pub api_versions: Arc<ApiVersionsTable>,
    pub handler: Arc<dyn RequestHandler>,
    /// On controller listeners: where quorum RPC connections go.
    pub quorum: Option<QuorumSlot>,
    pub security: ListenerSecurity,
}

/// Bound listeners, ready to [`run`](Server::run).
pub struct Server {
    listeners: Vec<(Arc<Service>, TcpListener)>,
    settings: Arc<ServerSettings>,
    connection_limits: Option<Arc<dyn ConnectionLimitSource>>,
    connection_rates: Option<Arc<dyn ConnectionRateQuotas>>,
}

impl Server {
    /// Binds every listener; fails if any address is unavailable.
    pub async fn bind(settings: ServerSettings, specs: Vec<ListenerSpec>) -> io::Result<Self> {
        let listeners = specs
            .into_iter()
            .map(|spec| bind_spec(spec, &settings))
            .collect::<io::Result<_>>()?;
        Ok(Self {
            listeners,
            settings: Arc::new(settings),
            connection_limits: None,
            connection_rates: None,
        })
    }

    /// Reads the connection limits from `source` (dynamic broker configs)
    /// instead of the static settings.
    pub fn with_connection_limits(mut self, source: Arc<dyn ConnectionLimitSource>) -> Self {
        self.connection_limits = Some(source);
        self
    }

    /// Enforces per-IP `connection_creation_rate` quotas from `quotas`.
    pub fn with_connection_rate_quotas(mut self, quotas: Arc<dyn ConnectionRateQuotas>) -> Self {
        self.connection_rates = Some(quotas);
        self
    }

    /// Each listener's name and bound address (with the real port when 0
    /// was asked for).
    pub fn local_addrs(&self) -> Vec<(String, SocketAddr)> {
        self.listeners
            .iter()
            .filter_map(|(service, l)| Some((service.name.to_string(), l.local_addr().ok()?)))
            .collect()
    }

    /// Serves until `shutdown` is cancelled, then stops accepting, stops
    /// reading requests, lets queued responses be written for up to
    /// `shutdown_grace`, and drops whatever connections remain.
    pub async fn run(self, shutdown: CancellationToken) {
        self.start(shutdown).1.await;
    }

    /// Starts serving as [`run`](Self::run) does; the control adds and
    /// removes listeners while the returned future runs.
    pub fn start(
        self,
        shutdown: CancellationToken,
    ) -> (ListenerControl, impl std::future::Future<Output = ()>) {
        let tracker = TaskTracker::new();
        let hard_stop = CancellationToken::new();
        let acceptor = Arc::new(Acceptor {
            settings: Arc::clone(&self.settings),
            limits: ConnectionLimits::new(self.connection_limits.unwrap_or_else(|| {
                Arc::new(StaticLimits(Arc::clone(&self.settings.connection_limits)))
            })),
            rates: self.connection_rates.map(ConnectionRates::new),
            next_id: AtomicU64::new(1),
            tracker: tracker.clone(),
            shutdown: shutdown.clone(),
            hard_stop: hard_stop.clone(),
        });
        let control = ListenerControl {
            acceptor,
            running: Arc::default(),
        };
        for (service, listener) in self.listeners {
            control.serve(service, listener);
        }
        let settings = self.settings;
        let serving = async move {
            shutdown.cancelled().await;
            tracker.close();
            info!("shutting down network server");
            if tokio::time::timeout(settings.shutdown_grace, tracker.wait())
                .await
                .is_err()
            {
                warn!(
                    "connections still busy after {:?}; dropping them",
                    settings.shutdown_grace
                );
                hard_stop.cancel();
                tracker.wait().await;
            }
        };
        (control, serving)
    }
}

/// Adds and removes the listeners of a running [`Server`] (dynamic
/// `listeners`).
#[derive(Clone)]
pub struct ListenerControl {
    acceptor: Arc<Acceptor>,
    /// What stops each listener and its connections, by listener name.
    running: Arc<Mutex<BTreeMap<String, CancellationToken>>>,
}

impl ListenerControl {
    /// Binds and serves a new listener; fails if its address is taken or
    /// the server is shutting down.
    pub fn add(&self, spec: ListenerSpec) -> io::Result<SocketAddr> {
        if self.acceptor.shutdown.is_cancelled() {
            return Err(io::Error::other("the server is shutting down"));
        }
        let (service, listener) = bind_spec(spec, &self.acceptor.settings)?;
        let addr = listener.local_addr()?;
        self.serve(service, listener);
        Ok(addr)
    }

    /// Stops listener `name`: it accepts no more connections, and its open
    /// connections close once their queued responses are written.
    pub fn remove(&self, name: &str) {
        if let Some(stop) = self.running.lock().remove(name) {
            info!(listener = name, "removing listener");
            stop.cancel();
        }
    }

    fn serve(&self, service: Arc<Service>, listener: TcpListener) {
        let stop = self.acceptor.shutdown.child_token();
        self.running
            .lock()
            .insert(service.name.to_string(), stop.clone());
        let span = info_span!("listener", listener = %service.name);
        self.acceptor.tracker.spawn(
            Arc::clone(&self.acceptor)
                .accept_loop(listener, service, stop)
                .instrument(span),
        );
    }
}

struct Acceptor {
    settings: Arc<ServerSettings>,
    limits: Arc<ConnectionLimits>,
    rates: Option<ConnectionRates>,
    next_id: AtomicU64,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    hard_stop: CancellationToken,
}

impl Acceptor {
    /// Accepts on `listener` until `stop` (the server's shutdown, or this
    /// listener's removal), which also closes its connections.
    async fn accept_loop(
        self: Arc<Self>,
        listener: TcpListener,
        service: Arc<Service>,
        stop: CancellationToken,
    ) {
        if let Ok(addr) = listener.local_addr() {
            info!("listening on {addr}");
        }
        loop {
            let reserved = tokio::select! {
                _ = stop.cancelled() => return,
                reserved = self.limits.reserve(&service.name) => reserved,
            };
            let accepted = tokio::select! {
                _ = stop.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    ottla_coordinator_common::log_limited!(tracing::Level::WARN, key: &service.name, "accept failed: {e}");
                    tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                    continue;
                }
            };
            let Some(slot) = self.limits.admit(reserved, peer.ip()) else {
                info!("refusing connection from {peer}: max.connections.per.ip reached");
                continue;
            };
            if self.rates.as_ref().is_some_and(|r| !r.admit(peer.ip())) {
                info!("refusing connection from {peer}: its connection_creation_rate quota is exceeded");
                continue;
            }
            let delay = self.limits.creation_delay(&service.name);
            if !delay.is_zero() {
                debug!(
                    ?delay,
                    "max.connection.creation.rate reached: holding the acceptor"
                );
                service.connections.creation_throttled(delay);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            // Kafka disables Nagle: requests and responses are whole frames.
            if let Err(e) = stream.set_nodelay(true) {
                debug!("cannot set TCP_NODELAY for {peer}: {e}");
            }
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let connections = Arc::clone(&service.connections);
            connections.opened();
            let connection = Connection {
                info: ConnectionInfo {
                    id,
                    listener: Arc::clone(&service.name),
                    peer,
                    throttle: Arc::default(),
                },
                service: Arc::clone(&service),
                settings: Arc::clone(&self.settings),
            };
            let shutdown = stop.clone();
            let hard_stop = self.hard_stop.clone();
            let span = info_span!("connection", id, %peer);
            self.tracker.spawn(
                async move {
                    debug!("accepted");
                    let serve = super::transport::serve(connection, stream, shutdown);
                    tokio::select! {
                        _ = serve => {}
                        _ = hard_stop.cancelled() => {}
                    }
                    connections.closed();
                    drop(slot);
                    debug!("closed");
                }
                .instrument(span),
            );
        }
    }
}

/// Binds `spec`'s address and makes its service.
fn bind_spec(
    spec: ListenerSpec,
    settings: &ServerSettings,
) -> io::Result<(Arc<Service>, TcpListener)> {
    let listener = bind_listener(spec.addr, settings).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot bind listener {} to {}: {e}", spec.name, spec.addr),
        )
    })?;
    let service = Service {
        connections: network().listener(&spec.name),
        name: spec.name.into(),
        api_versions: spec.api_versions,
        handler: spec.handler,
        quorum: spec.quorum,
        security: spec.security,
    };
    Ok((Arc::new(service), listener))
}

fn bind_listener(addr: SocketAddr, settings: &ServerSettings) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    // Accepted sockets inherit these; SO_RCVBUF must precede listen() for
    // TCP window scaling to take it into account.
    if let Some(size) = settings.send_buffer_size {
        socket.set_send_buffer_size(size)?;
    }
    if let Some(size) = settings.recv_buffer_size {
        socket.set_recv_buffer_size(size)?;
    }
    socket.bind(addr)?;
    socket.listen(settings.listen_backlog)
}

/// The address to bind for a listener's host: all IPv4 interfaces for an
/// empty host, else the host's first IPv4 address (IPv6 if it has none),
/// as Java resolves host names.
pub async fn bind_address(host: &str, port: u16) -> io::Result<SocketAddr> {
    if host.is_empty() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port));
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_limits_come_from_the_configuration() {
        let overrides: Vec<(String, String)> = [
            (
                "listeners",
                "PLAINTEXT://:9092,REPLICATION://:9094,CONTROLLER://:9093",
            ),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT",
            ),
            ("inter.broker.listener.name", "REPLICATION"),
            ("max.connection.creation.rate", "100"),
            ("listener.name.plaintext.max.connection.creation.rate", "5"),
            ("listener.name.plaintext.max.connections", "40"),
            ("max.connections.per.ip", "7"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let config = BrokerConfig::load(None, &overrides).unwrap();
        let limits = connection_limits(&config);
        assert_eq!(limits.max_per_ip, 7);
        assert_eq!(limits.max_creation_rate, Some(100.0));
        assert_eq!(
            limits.listener_creation_rates,
            std::collections::HashMap::from([("PLAINTEXT".to_string(), 5.0)])
        );
        assert_eq!(
            limits.listener_max_connections,
            std::collections::HashMap::from([("PLAINTEXT".to_string(), 40)])
        );
        assert_eq!(limits.exempt_listener.as_deref(), Some("REPLICATION"));
        // Kafka's defaults: no rate at all, nobody to exempt on one listener.
        let defaults = connection_limits(&BrokerConfig::load(None, &[]).unwrap());
        assert_eq!(defaults.max_creation_rate, None);
        assert!(defaults.listener_creation_rates.is_empty());
        assert_eq!(defaults.exempt_listener, None);
    }

    /// The SO_SNDBUF and SO_RCVBUF an accepted socket gets from a listener
    /// bound with `settings`.
    async fn accepted_buffer_sizes(settings: &ServerSettings) -> (u32, u32) {
        let listener = bind_listener("127.0.0.1:0".parse().unwrap(), settings).unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let socket = TcpSocket::from_std_stream(accepted.into_std().unwrap());
        (
            socket.send_buffer_size().unwrap(),
            socket.recv_buffer_size().unwrap(),
        )
    }

    #[tokio::test]
    async fn accepted_sockets_keep_the_kernels_autotuned_buffers_unless_configured() {
        // A socket nobody sized.
        let fresh = TcpSocket::new_v4().unwrap();
        let kernel = (
            fresh.send_buffer_size().unwrap(),
            fresh.recv_buffer_size().unwrap(),
        );
        let defaults = ServerSettings::from_config(&BrokerConfig::load(None, &[]).unwrap());
        assert_eq!(
            (defaults.send_buffer_size, defaults.recv_buffer_size),
            (None, None)
        );
        // Autotuning starts from the fresh socket's sizes and only grows them
        // (on loopback the send buffer is grown as the connection opens).
        let (send, recv) = accepted_buffer_sizes(&defaults).await;
        assert!(
            send >= kernel.0 && recv >= kernel.1,
            "{send}, {recv} < {kernel:?}"
        );
        assert_ne!((send, recv), (2 * 102_400, 2 * 102_400));

        // Kafka's sample server.properties sizes both at 100 KiB (Linux
        // reports twice what was asked, its bookkeeping included).
        let overrides: Vec<(String, String)> = [
            ("socket.send.buffer.bytes", "102400"),
            ("socket.receive.buffer.bytes", "102400"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let sized = ServerSettings::from_config(&BrokerConfig::load(None, &overrides).unwrap());
        assert_eq!(
            accepted_buffer_sizes(&sized).await,
            (2 * 102_400, 2 * 102_400)
        );
    }
}
