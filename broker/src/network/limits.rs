//! `max.connections` and `max.connections.per.ip`, as Kafka applies them:
//! at the broker-wide limit the acceptors stop accepting until a connection
//! closes; a client IP over its limit has its new connection closed at once.
//! Likewise for an IP creating connections faster than its
//! `connection_creation_rate` quota (KIP-612). Over
//! `max.connection.creation.rate`, broker-wide or a listener's own, the
//! listener's acceptor waits before it takes the connection on (KIP-612's
//! throttling of the acceptor), so a connection storm is slowed, not
//! refused.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::sampled_rate::SampledRate;

/// The connection limits in force: `max.connections`,
/// `max.connections.per.ip`, `max.connections.per.ip.overrides` and the
/// connection creation rates.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub max_connections: usize,
    pub max_per_ip: usize,
    pub per_ip_overrides: HashMap<IpAddr, usize>,
    /// `max.connection.creation.rate` per second (None: unlimited).
    pub max_creation_rate: Option<f64>,
    /// Each listener's own `listener.name.<l>.max.connection.creation.rate`.
    pub listener_creation_rates: HashMap<String, f64>,
    /// Each listener's own `listener.name.<l>.max.connections`.
    pub listener_max_connections: HashMap<String, usize>,
    /// Exempt from the broker-wide connection limit and rate (Kafka's
    /// protected listener): the inter-broker listener, when there are
    /// others, so client storms cannot cut replication off.
    pub exempt_listener: Option<String>,
}

impl Limits {
    fn max_for(&self, ip: IpAddr) -> usize {
        self.per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(self.max_per_ip)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: usize::MAX,
            max_per_ip: usize::MAX,
            per_ip_overrides: HashMap::new(),
            max_creation_rate: None,
            listener_creation_rates: HashMap::new(),
            listener_max_connections: HashMap::new(),
            exempt_listener: None,
        }
    }
}

/// Kafka caps one connection's throttle at its quota window.
const MAX_CREATION_THROTTLE: Duration = Duration::from_secs(1);

/// Where the limits come from, read as connections are accepted, so a
/// change (a dynamic broker config) applies to the next connection.
pub trait ConnectionLimitSource: Send + Sync {
    fn limits(&self) -> Arc<Limits>;
}

/// Limits fixed at start-up.
pub struct StaticLimits(pub Arc<Limits>);

impl ConnectionLimitSource for StaticLimits {
    fn limits(&self) -> Arc<Limits> {
        Arc::clone(&self.0)
    }
}

/// Counts open connections against the limits of a [`ConnectionLimitSource`].
/// Lowering a limit closes nothing: it holds back new connections until
/// enough have left, as in Kafka.
pub(super) struct ConnectionLimits {
    source: Arc<dyn ConnectionLimitSource>,
    open: Mutex<OpenConnections>,
    /// Signalled whenever a connection closes.
    closed: Notify,
    creation: Mutex<CreationRates>,
}

/// Connections accepted per second, broker-wide and by listener.
struct CreationRates {
    broker: SampledRate,
    listeners: HashMap<String, SampledRate>,
}

#[derive(Default)]
struct OpenConnections {
    total: usize,
    per_listener: HashMap<Arc<str>, usize>,
    per_ip: HashMap<IpAddr, usize>,
}

/// One connection's place under `max.connections` (broker-wide and its
/// listener's), reserved before it is accepted.
pub(super) struct Reserved {
    limits: Arc<ConnectionLimits>,
    listener: Arc<str>,
}

/// Held for the life of one connection; releases both counts on drop.
pub(super) struct ConnectionSlot {
    _total: Reserved,
    ip: IpAddr,
}

/// How often an acceptor held back by `max.connections` looks again at the
/// limit, so a raised limit is noticed without a connection closing.
const LIMIT_RECHECK: Duration = Duration::from_secs(1);

impl ConnectionLimits {
    pub(super) fn new(source: Arc<dyn ConnectionLimitSource>) -> Arc<Self> {
        Arc::new(Self {
            source,
            open: Mutex::default(),
            closed: Notify::new(),
            creation: Mutex::new(CreationRates {
                broker: SampledRate::new(Instant::now()),
                listeners: HashMap::new(),
            }),
        })
    }

    /// Counts a connection accepted on `listener` and returns how long its
    /// acceptor must wait to bring the creation rates back to their
    /// limits: the longer of the broker-wide and the listener's delay (as
    /// Kafka's ConnectionQuotas), at most one quota window.
    pub(super) fn creation_delay(&self, listener: &str) -> Duration {
        let limits = self.source.limits();
        let now = Instant::now();
        let mut rates = self.creation.lock().unwrap_or_else(|p| p.into_inner());
        // Every connection counts, limited or not, so a limit set at
        // runtime applies to the rate already going on (as Kafka's sensors).
        let delay = |rate: &mut SampledRate, limit: Option<f64>| {
            rate.record(1.0, now);
            let Some(limit) = limit else {
                return Duration::ZERO;
            };
            let (observed, span) = rate.rate(now);
            if limit <= 0.0 {
                return MAX_CREATION_THROTTLE;
            }
            if observed <= limit {
                return Duration::ZERO;
            }
            span.mul_f64((observed - limit) / limit)
                .min(MAX_CREATION_THROTTLE)
        };
        // Inter-broker traffic is not held back by client connection storms.
        let broker_wide = if limits.exempt_listener.as_deref() == Some(listener) {
            Duration::ZERO
        } else {
            delay(&mut rates.broker, limits.max_creation_rate)
        };
        let rate = rates
            .listeners
            .entry(listener.to_string())
            .or_insert_with(|| SampledRate::new(now));
        let own = delay(rate, limits.listener_creation_rates.get(listener).copied());
        broker_wide.max(own)
    }

    fn open(&self) -> std::sync::MutexGuard<'_, OpenConnections> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for room on `listener` and broker-wide (Kafka's
    /// connectionSlotAvailable); call before accepting.
    pub(super) async fn reserve(self: &Arc<Self>, listener: &Arc<str>) -> Reserved {
        loop {
            // Created before the check, so a close in between still wakes us.
            let closed = self.closed.notified();
            {
                let limits = self.source.limits();
                let mut open = self.open();
                let on_listener = open.per_listener.get(listener).copied().unwrap_or(0);
                let listener_room = limits
                    .listener_max_connections
                    .get(&**listener)
                    .is_none_or(|&max| on_listener < max);
                let exempt = limits.exempt_listener.as_deref() == Some(&**listener);
                if listener_room && (exempt || open.total < limits.max_connections) {
                    open.total += 1;
                    *open.per_listener.entry(Arc::clone(listener)).or_default() += 1;
                    return Reserved {
                        limits: Arc::clone(self),
                        listener: Arc::clone(listener),
                    };
                }
            }
            let _ = tokio::time::timeout(LIMIT_RECHECK, closed).await;
        }
    }

    /// Admits a connection from `ip`, or `None` if that IP is at its limit.
    pub(super) fn admit(&self, reserved: Reserved, ip: IpAddr) -> Option<ConnectionSlot> {
        let max = self.source.limits().max_for(ip);
        let mut open = self.open();
        let count = open.per_ip.entry(ip).or_default();
        if *count >= max {
            if *count == 0 {
                open.per_ip.remove(&ip);
            }
            return None;
        }
        *count += 1;
        Some(ConnectionSlot {
            _total: reserved,
            ip,
        })
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        {
            let mut open = self.limits.open();
            open.total -= 1;
            if let Some(count) = open.per_listener.get_mut(&self.listener) {
                *count -= 1;
                if *count == 0 {
                    open.per_listener.remove(&self.listener);
                }
            }
        }
        self.limits.closed.notify_waiters();
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        // Runs before `_total` is dropped, so the IP count goes first.
        let mut open = self._total.limits.open();
        if let Some(count) = open.per_ip.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.per_ip.remove(&self.ip);
            }
        }
    }
}

/// Per-IP `connection_creation_rate` quotas, looked up as connections
/// are accepted.
pub trait ConnectionRateQuotas: Send + Sync {
    /// Connections per second `ip` may open, if a quota applies to it.
    fn for_ip(&self, ip: IpAddr) -> Option<f64>;
}

/// Measures each IP's connection creation rate against its quota.
pub(super) struct ConnectionRates {
    quotas: Arc<dyn ConnectionRateQuotas>,
    rates: Mutex<HashMap<IpAddr, SampledRate>>,
}

impl ConnectionRates {
    pub(super) fn new(quotas: Arc<dyn ConnectionRateQuotas>) -> Self {
        Self {
            quotas,
            rates: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a new connection from `ip`; false (and not counted) when it
    /// would take the IP over its quota.
    pub(super) fn admit(&self, ip: IpAddr) -> bool {
        let Some(quota) = self.quotas.for_ip(ip) else {
            return true;
        };
        let now = Instant::now();
        let mut rates = self.rates.lock().unwrap_or_else(|p| p.into_inner());
        if !rates.contains_key(&ip) {
            rates.retain(|_, r| !r.idle_since(now, RATE_EXPIRY));
        }
        let rate = rates.entry(ip).or_insert_with(|| SampledRate::new(now));
        rate.record(1.0, now);
        if rate.rate(now).0 > quota {
            rate.record(-1.0, now);
            return false;
        }
        true
    }
}

/// An IP's rate is forgotten after this long without connections.
const RATE_EXPIRY: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests {
    use super::*;

    fn with_limits(limits: Limits) -> Arc<ConnectionLimits> {
        ConnectionLimits::new(Arc::new(StaticLimits(Arc::new(limits))))
    }

    #[test]
    fn creation_rates_hold_the_acceptor_back_broker_wide_and_per_listener() {
        // 5 a second over a ten-second span: 50 pass, then each waits, at
        // most one quota window.
        let broker_wide = with_limits(Limits {
            max_creation_rate: Some(5.0),
            exempt_listener: Some("REPLICATION".to_string()),
            ..Limits::default()
        });
        let delays: Vec<Duration> = (0..60)
            .map(|_| broker_wide.creation_delay("CLIENTS"))
            .collect();
        assert!(delays[..50].iter().all(Duration::is_zero), "{delays:?}");
        assert!(delays[50..]
            .iter()
            .all(|d| !d.is_zero() && *d <= MAX_CREATION_THROTTLE));
        // The inter-broker listener is not held back by client storms.
        assert!(broker_wide.creation_delay("REPLICATION").is_zero());

        let per_listener = with_limits(Limits {
            listener_creation_rates: HashMap::from([("CLIENTS".to_string(), 1.0)]),
            ..Limits::default()
        });
        let waited = (0..15)
            .filter(|_| !per_listener.creation_delay("CLIENTS").is_zero())
            .count();
        assert_eq!(waited, 5);
        assert!((0..100).all(|_| per_listener.creation_delay("OTHER").is_zero()));
        // A rate of 0 admits nothing without the longest wait.
        let closed = with_limits(Limits {
            max_creation_rate: Some(0.0),
            ..Limits::default()
        });
        assert_eq!(closed.creation_delay("CLIENTS"), MAX_CREATION_THROTTLE);
    }

    struct Fixed(f64);

    impl ConnectionRateQuotas for Fixed {
        fn for_ip(&self, ip: IpAddr) -> Option<f64> {
            (ip == IpAddr::from([10, 0, 0, 1])).then_some(self.0)
        }
    }

    #[test]
    fn an_ip_over_its_connection_rate_is_refused() {
        // 2 per second over the 10 s the rate is measured on: 20 at once.
        let rates = ConnectionRates::new(Arc::new(Fixed(2.0)));
        let limited: IpAddr = "10.0.0.1".parse().unwrap();
        let admitted = (0..30).filter(|_| rates.admit(limited)).count();
        assert_eq!(admitted, 20);
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        assert!((0..30).all(|_| rates.admit(other)));
    }

    fn fixed(max_connections: usize, max_per_ip: usize) -> Arc<ConnectionLimits> {
        with_limits(Limits {
            max_connections,
            max_per_ip,
            ..Limits::default()
        })
    }

    #[tokio::test]
    async fn per_ip_and_total_limits() {
        let limits = fixed(3, 2);
        let l: Arc<str> = "CLIENTS".into();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let s1 = limits.admit(limits.reserve(&l).await, a).unwrap();
        let _s2 = limits.admit(limits.reserve(&l).await, a).unwrap();
        assert!(limits.admit(limits.reserve(&l).await, a).is_none());
        let _s3 = limits.admit(limits.reserve(&l).await, b).unwrap();
        // Three slots are taken: reserving waits until one is released.
        let waiting = tokio::time::timeout(Duration::from_millis(20), limits.reserve(&l));
        assert!(waiting.await.is_err());
        drop(s1);
        let reserved = limits.reserve(&l).await;
        assert!(limits.admit(reserved, a).is_some());
    }

    /// Limits that a test changes while connections are open.
    struct Changing(Mutex<Arc<Limits>>);

    impl ConnectionLimitSource for Changing {
        fn limits(&self) -> Arc<Limits> {
            Arc::clone(&self.0.lock().unwrap())
        }
    }

    #[tokio::test]
    async fn a_listener_has_its_own_limit_and_replication_is_exempt_from_the_total() {
        let limits = with_limits(Limits {
            max_connections: 2,
            listener_max_connections: HashMap::from([("CLIENTS".to_string(), 1)]),
            exempt_listener: Some("REPLICATION".to_string()),
            ..Limits::default()
        });
        let (clients, other, replication): (Arc<str>, Arc<str>, Arc<str>) =
            ("CLIENTS".into(), "OTHER".into(), "REPLICATION".into());
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let first = limits.admit(limits.reserve(&clients).await, ip).unwrap();
        let full = tokio::time::timeout(Duration::from_millis(20), limits.reserve(&clients));
        assert!(full.await.is_err(), "CLIENTS holds one connection at most");
        let second = limits.admit(limits.reserve(&other).await, ip).unwrap();
        // The broker-wide two are taken; replication still gets in, and
        // counts towards the total, as in Kafka.
        let full = tokio::time::timeout(Duration::from_millis(20), limits.reserve(&other));
        assert!(full.await.is_err());
        let _replica = limits
            .admit(limits.reserve(&replication).await, ip)
            .unwrap();
        drop((first, second));
        let _again = limits.admit(limits.reserve(&clients).await, ip).unwrap();
    }

    #[tokio::test]
    async fn changed_limits_apply_to_the_next_connections() {
        let source = Arc::new(Changing(Mutex::new(Arc::new(Limits {
            max_connections: 1,
            ..Limits::default()
        }))));
        let limits = ConnectionLimits::new(source.clone());
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let l: Arc<str> = "CLIENTS".into();
        let first = limits.admit(limits.reserve(&l).await, ip).unwrap();
        let held_back = tokio::spawn({
            let (limits, l) = (Arc::clone(&limits), Arc::clone(&l));
            async move { limits.reserve(&l).await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!held_back.is_finished());
        // A raised max.connections lets the waiting acceptor on, with no
        // connection closing.
        *source.0.lock().unwrap() = Arc::new(Limits {
            max_connections: 3,
            max_per_ip: 1,
            ..Limits::default()
        });
        let reserved = held_back.await.unwrap();
        // The new per-IP limit holds back a second connection from `ip`,
        // and an override lets it in.
        assert!(limits.admit(reserved, ip).is_none());
        *source.0.lock().unwrap() = Arc::new(Limits {
            max_connections: 3,
            max_per_ip: 1,
            per_ip_overrides: HashMap::from([(ip, 2)]),
            ..Limits::default()
        });
        let second = limits.admit(limits.reserve(&l).await, ip);
        assert!(second.is_some());
        drop((first, second));
        assert_eq!(limits.open().total, 0);
        assert!(limits.open().per_ip.is_empty());
    }
}
