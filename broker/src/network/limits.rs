//! `max.connections` and `max.connections.per.ip`, as Kafka applies them:
//! at the broker-wide limit the acceptors stop accepting until a connection
//! closes; a client IP over its limit has its new connection closed at once.
//! Likewise for an IP creating connections faster than its
//! `connection_creation_rate` quota (KIP-612).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::quotas::SampledRate;

#[derive(Debug)]
pub(super) struct ConnectionLimits {
    total: Arc<Semaphore>,
    per_ip_max: usize,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

/// Held for the life of one connection; releases both counts on drop.
#[derive(Debug)]
pub(super) struct ConnectionSlot {
    _total: OwnedSemaphorePermit,
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl ConnectionLimits {
    pub(super) fn new(max_connections: usize, max_per_ip: usize) -> Arc<Self> {
        Arc::new(Self {
            total: Arc::new(Semaphore::new(max_connections.min(Semaphore::MAX_PERMITS))),
            per_ip_max: max_per_ip,
            per_ip: Mutex::new(HashMap::new()),
        })
    }

    /// Waits for broker-wide room; call before accepting.
    pub(super) async fn reserve(&self) -> OwnedSemaphorePermit {
        Arc::clone(&self.total)
            .acquire_owned()
            .await
            .expect("the connection semaphore is never closed")
    }

    /// Admits a connection from `ip`, or `None` if that IP is at its limit.
    pub(super) fn admit(
        self: &Arc<Self>,
        permit: OwnedSemaphorePermit,
        ip: IpAddr,
    ) -> Option<ConnectionSlot> {
        let mut counts = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        let count = counts.entry(ip).or_default();
        if *count >= self.per_ip_max {
            return None;
        }
        *count += 1;
        Some(ConnectionSlot {
            _total: permit,
            limits: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut counts = self.limits.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = counts.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.ip);
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

    #[tokio::test]
    async fn per_ip_and_total_limits() {
        let limits = ConnectionLimits::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let s1 = limits.admit(limits.reserve().await, a).unwrap();
        let _s2 = limits.admit(limits.reserve().await, a).unwrap();
        assert!(limits.admit(limits.reserve().await, a).is_none());
        let _s3 = limits.admit(limits.reserve().await, b).unwrap();
        // Three slots are taken: reserving waits until one is released.
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(20), limits.reserve());
        assert!(waiting.await.is_err());
        drop(s1);
        let permit = limits.reserve().await;
        assert!(limits.admit(permit, a).is_some());
    }
}
