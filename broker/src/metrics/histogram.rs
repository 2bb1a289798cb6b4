//! A fixed-bucket latency histogram of atomics: observing is one bucket
//! search over integers and two relaxed `fetch_add`s, with no lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bucket upper bounds in nanoseconds, 0.5 ms to 30 s: Produce with
/// acks=all and long-polling Fetch (500 ms by default) both fit.
const BOUNDS_NANOS: [u64; 15] = [
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
    30_000_000_000,
];

#[derive(Debug)]
pub struct Histogram {
    /// Per-bucket (not cumulative) counts; the last slot is past every bound.
    buckets: [AtomicU64; BOUNDS_NANOS.len() + 1],
    sum_nanos: AtomicU64,
}

/// A consistent-enough copy for encoding.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    /// `(upper bound in seconds, count in that bucket)`, finite bounds only.
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
    pub sum_seconds: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: [const { AtomicU64::new(0) }; BOUNDS_NANOS.len() + 1],
            sum_nanos: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    pub fn observe(&self, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let slot = BOUNDS_NANOS.partition_point(|&bound| bound < nanos);
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Snapshot {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        Snapshot {
            buckets: BOUNDS_NANOS
                .iter()
                .zip(&counts)
                .map(|(&bound, &n)| (bound as f64 / 1e9, n))
                .collect(),
            // The count is the buckets' sum, so `+Inf` always equals `_count`.
            count: counts.iter().sum(),
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(500)); // on the bound: le="0.0005"
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(60)); // past every bound: +Inf only
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.buckets[0], (0.0005, 1));
        assert_eq!(s.buckets[3], (0.005, 1));
        assert_eq!(s.buckets.iter().map(|b| b.1).sum::<u64>(), 2);
        assert!((s.sum_seconds - 60.0035).abs() < 1e-9);
    }
}
