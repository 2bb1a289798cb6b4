//! `max.connections` and `max.connections.per.ip`, as Kafka applies them:
//! at the broker-wide limit the acceptors stop accepting until a connection
//! closes; a client IP over its limit has its new connection closed at once.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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

#[cfg(test)]
mod tests {
    use super::*;

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
