//! Counters the broker's metrics read.

use std::sync::atomic::{AtomicU64, Ordering};

static REBALANCES: AtomicU64 = AtomicU64::new(0);

/// A classic group entered PreparingRebalance.
pub fn rebalance_started() {
    REBALANCES.fetch_add(1, Ordering::Relaxed);
}

/// Rebalances started by classic groups since the process started (Kafka's
/// group-coordinator-metrics classic-group-rebalance-count).
pub fn rebalances() -> u64 {
    REBALANCES.load(Ordering::Relaxed)
}
