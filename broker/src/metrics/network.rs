//! Request and connection metrics, recorded by the network layer on every
//! request.
//!
//! Everything is a fixed array of atomics indexed by API key, version and
//! error code, allocated once per process: recording a request is a few
//! relaxed `fetch_add`s, with no lock, map lookup or allocation. Label
//! strings are only built at scrape time.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use kafka_protocol::messages::{ApiKey, ResponseKind};
use ottla_protocol::own_api::{Api, OwnApiKey};
use ottla_protocol::schema::wire::WireField;
use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use super::errors::{error_name, for_each_error};
use super::histogram::Histogram;
use super::{counter, gauge};

/// Slots for API keys (kafka-protocol 0.18 stops at 92; Ottla's own APIs,
/// the streams-group and mirror ones, go to 106), request versions and
/// error codes (-1 to 133 today, stored at code + 1). Anything outside is
/// not counted rather than mislabelled.
const API_SLOTS: usize = 107;
const VERSION_SLOTS: usize = 32;
const ERROR_SLOTS: usize = 160;

#[derive(Debug)]
struct ApiMetrics {
    versions: [AtomicU64; VERSION_SLOTS],
    errors: [AtomicU64; ERROR_SLOTS],
    duration: Histogram,
}

impl Default for ApiMetrics {
    fn default() -> Self {
        Self {
            versions: [const { AtomicU64::new(0) }; VERSION_SLOTS],
            errors: [const { AtomicU64::new(0) }; ERROR_SLOTS],
            duration: Histogram::default(),
        }
    }
}

/// Connections accepted and closed on one listener (the open-connection
/// gauge is their difference), and how long its acceptor was held back by
/// `max.connection.creation.rate`.
#[derive(Debug, Default)]
pub struct ConnectionCounters {
    created: AtomicU64,
    closed: AtomicU64,
    accept_throttle_ms: AtomicU64,
}

impl ConnectionCounters {
    pub fn opened(&self) {
        self.created.fetch_add(1, Ordering::Relaxed);
    }

    pub fn closed(&self) {
        self.closed.fetch_add(1, Ordering::Relaxed);
    }

    pub fn creation_throttled(&self, delay: std::time::Duration) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self.accept_throttle_ms.fetch_add(ms, Ordering::Relaxed);
    }
}

#[derive(Debug)]
pub struct NetworkMetrics {
    apis: Box<[ApiMetrics]>,
    listeners: Mutex<Vec<(Arc<str>, Arc<ConnectionCounters>)>>,
}

/// The process-wide instance the network layer records into.
pub fn network() -> &'static NetworkMetrics {
    static NETWORK: LazyLock<NetworkMetrics> = LazyLock::new(NetworkMetrics::default);
    &NETWORK
}

impl Default for NetworkMetrics {
    fn default() -> Self {
        Self {
            apis: (0..API_SLOTS).map(|_| ApiMetrics::default()).collect(),
            listeners: Mutex::default(),
        }
    }
}

impl NetworkMetrics {
    fn api(&self, api: impl Into<Api>) -> Option<&ApiMetrics> {
        self.apis.get(usize::try_from(api.into().as_i16()).ok()?)
    }

    /// The counters of listener `name`, created on first use; resolved once
    /// when the listener is bound, so accepting touches no lock.
    pub fn listener(&self, name: &str) -> Arc<ConnectionCounters> {
        let mut listeners = self.listeners.lock();
        if let Some((_, c)) = listeners.iter().find(|(n, _)| &**n == name) {
            return c.clone();
        }
        let counters = Arc::new(ConnectionCounters::default());
        listeners.push((name.into(), counters.clone()));
        counters
    }

    /// A request was decoded.
    pub fn received(&self, api: impl Into<Api>, version: i16) {
        let slot = usize::try_from(version).ok();
        if let Some(v) = self.api(api).zip(slot).and_then(|(a, v)| a.versions.get(v)) {
            v.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One error code (not NONE) was returned, or stands for a failure
    /// that had no response (UNKNOWN_SERVER_ERROR when a handler failed).
    pub fn error(&self, api: impl Into<Api>, code: i16) {
        let slot = usize::try_from(i32::from(code) + 1).ok();
        if let Some(e) = self.api(api).zip(slot).and_then(|(a, c)| a.errors.get(c)) {
            e.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts every error code in a response about to be encoded.
    pub fn response_errors(&self, api: ApiKey, response: &ResponseKind) {
        for_each_error(response, |code| self.error(api, code));
    }

    /// Counts every error code (not NONE) in a response of Ottla's own
    /// codec about to be encoded.
    pub fn own_response_errors(&self, api: OwnApiKey, response: &impl WireField) {
        response.error_codes(false, &mut |code| {
            if code != 0 {
                self.error(api, code);
            }
        });
    }

    /// The response to a request decoded at `started` was written (or, for
    /// one that gets no response, its handler finished).
    pub fn completed(&self, api: impl Into<Api>, started: Instant) {
        if let Some(a) = self.api(api) {
            a.duration.observe(started.elapsed());
        }
    }
}

fn api_name(index: usize) -> Option<String> {
    let key = i16::try_from(index).ok()?;
    match ApiKey::try_from(key) {
        Ok(kafka) => Some(format!("{kafka:?}")),
        Err(_) => Some(OwnApiKey::from_i16(key)?.to_string()),
    }
}

/// Scrape-time encoder over a [`NetworkMetrics`].
#[derive(Debug)]
pub struct NetworkCollector(pub &'static NetworkMetrics);

impl Collector for NetworkCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let m = self.0;
        let used: Vec<(String, &ApiMetrics)> = m
            .apis
            .iter()
            .enumerate()
            .filter_map(|(i, a)| Some((api_name(i)?, a)))
            .collect();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);

        let mut requests = Vec::new();
        let mut errors = Vec::new();
        for (name, a) in &used {
            for (version, n) in a.versions.iter().map(load).enumerate() {
                if n > 0 {
                    requests.push((
                        [("request", name.clone()), ("version", version.to_string())],
                        n,
                    ));
                }
            }
            for (slot, n) in a.errors.iter().map(load).enumerate() {
                if n > 0 {
                    let error = error_name(slot as i16 - 1);
                    errors.push(([("request", name.clone()), ("error", error)], n));
                }
            }
        }
        counter(
            &mut encoder,
            "kafka_network_requests",
            "Requests decoded, by API and version (Kafka RequestMetrics RequestsPerSec).",
            requests,
        )?;
        counter(
            &mut encoder,
            "kafka_network_request_errors",
            "Error codes other than NONE in responses, by API (Kafka RequestMetrics ErrorsPerSec).",
            errors,
        )?;

        let mut histogram = encoder.encode_descriptor(
            "kafka_network_request_duration_seconds",
            "Time from decoding a request to writing its response (Kafka RequestMetrics TotalTimeMs).",
            None,
            MetricType::Histogram,
        )?;
        for (name, a) in &used {
            let s = a.duration.snapshot();
            if s.count > 0 {
                histogram
                    .encode_family(&[("request", name.as_str())])?
                    .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    s.sum_seconds,
                    s.count,
                    &s.buckets,
                    None,
                )?;
            }
        }

        // (closed, created, accept throttle ms); closed is read before
        // created, so the gauge never dips below zero.
        let listeners: Vec<(Arc<str>, [u64; 3])> = m
            .listeners
            .lock()
            .iter()
            .map(|(n, c)| {
                let counts = [&c.closed, &c.created, &c.accept_throttle_ms].map(load);
                (n.clone(), counts)
            })
            .collect();
        let by_listener = |f: fn([u64; 3]) -> u64| {
            listeners
                .iter()
                .map(move |(n, counts)| ([("listener", n.to_string())], f(*counts)))
        };
        gauge(
            &mut encoder,
            "kafka_network_connections",
            "Open client connections (Kafka socket-server-metrics connection-count).",
            by_listener(|[closed, created, _]| created.saturating_sub(closed)),
        )?;
        counter(
            &mut encoder,
            "kafka_network_connection_creation",
            "Connections accepted (Kafka socket-server-metrics connection-creation-total).",
            by_listener(|[_, created, _]| created),
        )?;
        counter(
            &mut encoder,
            "kafka_network_connection_close",
            "Connections closed (Kafka socket-server-metrics connection-close-total).",
            by_listener(|[closed, _, _]| closed),
        )?;
        counter(
            &mut encoder,
            "kafka_network_connection_accept_throttle_ms",
            "Time the listener's acceptor waited for max.connection.creation.rate (Kafka socket-server-metrics connection-accept-throttle-time).",
            by_listener(|[_, _, throttled]| throttled),
        )
    }
}
