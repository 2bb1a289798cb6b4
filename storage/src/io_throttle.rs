//! `log.cleaner.io.max.bytes.per.second`: holds the cleaner's reads and
//! writes to an average rate over one pass, as Kafka's Throttler does, by
//! sleeping whenever the pass is ahead of the rate. Compaction runs on
//! blocking threads, so the sleep is a thread sleep; the cleaner threads of
//! one pass share one throttle, so the rate is the broker's, not a thread's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub struct IoThrottle {
    max_bytes_per_second: f64,
    started: Instant,
    bytes: AtomicU64,
}

impl IoThrottle {
    /// A rate that is not a positive number means no limit.
    pub fn new(max_bytes_per_second: f64) -> Self {
        Self {
            max_bytes_per_second,
            started: Instant::now(),
            bytes: AtomicU64::new(0),
        }
    }

    pub fn unlimited() -> Self {
        Self::new(f64::INFINITY)
    }

    /// Counts `bytes` of cleaner I/O, then waits while the pass is ahead of
    /// the rate.
    pub fn account(&self, bytes: u64) {
        let total = self.bytes.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let wait = ahead_by(total, self.max_bytes_per_second, self.started.elapsed());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }
}

/// How long `bytes` moved in `elapsed` are ahead of `rate` bytes per second.
fn ahead_by(bytes: u64, rate: f64, elapsed: Duration) -> Duration {
    if !(rate.is_finite() && rate > 0.0) {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(bytes as f64 / rate)
        .unwrap_or(Duration::MAX)
        .saturating_sub(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_ahead_of_its_rate_waits_for_it() {
        let second = Duration::from_secs(1);
        assert_eq!(ahead_by(1000, 1000.0, Duration::ZERO), second);
        assert_eq!(ahead_by(1000, 1000.0, second), Duration::ZERO);
        assert_eq!(
            ahead_by(3000, 1000.0, second),
            Duration::from_secs(2),
            "3 s of I/O at 1000 B/s, 1 s gone"
        );
        assert_eq!(ahead_by(1 << 30, f64::MAX, Duration::ZERO), Duration::ZERO);
        assert_eq!(ahead_by(1 << 30, 0.0, Duration::ZERO), Duration::ZERO);
        assert_eq!(
            ahead_by(1 << 30, f64::INFINITY, Duration::ZERO),
            Duration::ZERO
        );
    }
}
