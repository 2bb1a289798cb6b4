//! A windowed rate, as Kafka's `Rate` over `SampledStat` measures it:
//! what client quotas, connection-rate limits and replication throttles
//! measure usage with.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Kafka's defaults: 11 one-second windows (`quota.window.num`,
/// `quota.window.size.seconds`).
pub(crate) const WINDOWS: u32 = 11;
pub(crate) const WINDOW: Duration = Duration::from_secs(1);

/// A windowed rate, as Kafka's `Rate` over `SampledStat` computes it.
#[derive(Debug)]
pub(crate) struct SampledRate {
    /// (window start, total recorded in it), oldest first.
    windows: VecDeque<(Instant, f64)>,
    last_used: Instant,
}

impl SampledRate {
    pub(crate) fn new(now: Instant) -> Self {
        Self {
            windows: VecDeque::new(),
            last_used: now,
        }
    }

    pub(crate) fn idle_since(&self, now: Instant, how_long: Duration) -> bool {
        now.duration_since(self.last_used) >= how_long
    }

    pub(crate) fn record(&mut self, value: f64, now: Instant) {
        self.last_used = now;
        while self
            .windows
            .front()
            .is_some_and(|(start, _)| now.duration_since(*start) >= WINDOW * WINDOWS)
        {
            self.windows.pop_front();
        }
        match self.windows.back_mut() {
            Some((start, total)) if now.duration_since(*start) < WINDOW => *total += value,
            _ => self.windows.push_back((now, value)),
        }
    }

    /// The rate per second and the span it was measured over, which is
    /// never less than all but one window (so a new client's first burst is
    /// not measured over a few milliseconds).
    pub(crate) fn rate(&self, now: Instant) -> (f64, Duration) {
        let total: f64 = self.windows.iter().map(|(_, v)| v).sum();
        let elapsed = self
            .windows
            .front()
            .map_or(Duration::ZERO, |(start, _)| now.duration_since(*start));
        let span = elapsed.max(WINDOW * (WINDOWS - 1));
        (total / span.as_secs_f64(), span)
    }
}
