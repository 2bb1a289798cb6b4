//! Rate limits for log lines that can repeat without end: a warning inside
//! a retry loop or on a per-request path writes one line per key per
//! interval, and the next line it writes says how many it held back
//! (`suppressed=N`). One refused ISR change retried on every follower fetch
//! once wrote the same line 3.2 million times.
//!
//! ```ignore
//! log_limited!(Level::WARN, key: &partition, partition = %partition, "fetch failed: {e}");
//! log_limited!(Level::INFO, every: Duration::from_secs(60), key: &peer, "...");
//! ```
//!
//! Each call site has a limiter of its own (a static in the macro), keyed
//! by whatever the site names: the partition, the peer, the error code.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How often a call site writes a line for one key, unless it says.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// Keys remembered per call site. Past this, keys whose last line is a
/// whole interval old are forgotten (losing only their suppressed count);
/// a site with more live keys than this is throttled by key hash
/// collisions no further than that.
const MAX_KEYS: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Seen {
    last_line: Instant,
    suppressed: u64,
}

/// One call site's memory of the lines it wrote.
#[derive(Debug)]
pub struct LogLimiter {
    interval: Duration,
    hasher: std::hash::RandomState,
    seen: Mutex<HashMap<u64, Seen>>,
}

impl LogLimiter {
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            hasher: std::hash::RandomState::new(),
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a line for `key` may be written now: `Some(n)` with the
    /// number of lines held back since the last one, or `None` (counted).
    pub fn admit<K: Hash + ?Sized>(&self, key: &K) -> Option<u64> {
        self.admit_at(key, Instant::now())
    }

    fn admit_at<K: Hash + ?Sized>(&self, key: &K, now: Instant) -> Option<u64> {
        let hash = self.hasher.hash_one(key);
        let mut seen = self.seen.lock();
        if let Some(entry) = seen.get_mut(&hash) {
            if now.saturating_duration_since(entry.last_line) < self.interval {
                entry.suppressed += 1;
                return None;
            }
            let suppressed = entry.suppressed;
            *entry = Seen {
                last_line: now,
                suppressed: 0,
            };
            return Some(suppressed);
        }
        if seen.len() >= MAX_KEYS {
            let interval = self.interval;
            seen.retain(|_, e| now.saturating_duration_since(e.last_line) < interval);
        }
        if seen.len() < MAX_KEYS {
            seen.insert(
                hash,
                Seen {
                    last_line: now,
                    suppressed: 0,
                },
            );
        }
        Some(0)
    }
}

/// A `tracing` event at `$level`, written at most once per interval
/// ([`DEFAULT_INTERVAL`] unless `every:` says) for each `key:` at this call
/// site; a line written after some were held back carries
/// `suppressed = <how many>`.
#[macro_export]
macro_rules! log_limited {
    ($level:expr, every: $interval:expr, key: $key:expr, $($arg:tt)+) => {{
        static LIMITER: std::sync::LazyLock<$crate::log_limit::LogLimiter> =
            std::sync::LazyLock::new(|| $crate::log_limit::LogLimiter::new($interval));
        match LIMITER.admit($key) {
            Some(0) => tracing::event!($level, $($arg)+),
            Some(suppressed) => tracing::event!($level, suppressed, $($arg)+),
            None => {}
        }
    }};
    ($level:expr, key: $key:expr, $($arg:tt)+) => {
        $crate::log_limited!(
            $level,
            every: $crate::log_limit::DEFAULT_INTERVAL,
            key: $key,
            $($arg)+
        )
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_key_per_interval_then_the_count_of_held_back_ones() {
        let limiter = LogLimiter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(limiter.admit_at("a", at(0)), Some(0));
        for s in 1..10 {
            assert_eq!(limiter.admit_at("a", at(s)), None, "second {s}");
        }
        // Another key has its own allowance.
        assert_eq!(limiter.admit_at("b", at(5)), Some(0));
        assert_eq!(limiter.admit_at("a", at(10)), Some(9));
        assert_eq!(limiter.admit_at("a", at(11)), None);
        assert_eq!(limiter.admit_at("a", at(25)), Some(1));
        // Nothing held back since: the next line says 0.
        assert_eq!(limiter.admit_at("a", at(40)), Some(0));
    }

    #[test]
    fn a_flood_of_keys_stays_bounded_and_forgets_only_quiet_ones() {
        let limiter = LogLimiter::new(Duration::from_secs(10));
        let t0 = Instant::now();
        for k in 0..MAX_KEYS {
            assert_eq!(limiter.admit_at(&k, t0), Some(0));
        }
        assert_eq!(limiter.admit_at(&0usize, t0), None, "still limited");
        // Full: a new key within the interval is written but not kept.
        assert_eq!(limiter.admit_at(&MAX_KEYS, t0), Some(0));
        assert_eq!(limiter.seen.lock().len(), MAX_KEYS);
        // A whole interval later the quiet keys make room.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(limiter.admit_at(&(MAX_KEYS + 1), later), Some(0));
        assert_eq!(limiter.admit_at(&(MAX_KEYS + 1), later), None);
        assert_eq!(limiter.seen.lock().len(), 1);
    }

    /// The lines a subscriber receives, as text.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_macro_writes_the_first_line_and_then_counts_the_repeats() {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .finish();
        let refuse = |attempt: u32| {
            crate::log_limited!(
                tracing::Level::WARN,
                every: Duration::from_millis(200),
                key: "replica 1",
                attempt,
                "ISR change refused"
            );
        };
        tracing::subscriber::with_default(subscriber, || {
            for attempt in 0..1000 {
                refuse(attempt);
            }
            std::thread::sleep(Duration::from_millis(250));
            refuse(1000);
        });
        let text = String::from_utf8(captured.0.lock().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].contains("attempt=0") && !lines[0].contains("suppressed"));
        assert!(
            lines[1].contains("suppressed=999") && lines[1].contains("attempt=1000"),
            "{text}"
        );
    }
}
