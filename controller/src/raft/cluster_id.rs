//! The cluster id every quorum RPC carries. Kafka answers a peer of another
//! cluster with INCONSISTENT_CLUSTER_ID; so does Ottla's quorum: nodes
//! formatted with different `cluster.id`s never vote for, replicate to or
//! serve metadata to each other.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// What an operator does about a mismatch.
pub(crate) const ADVICE: &str = "every node of one cluster must have the same cluster.id: \
    set it in each node's configuration and in the meta.properties of its log dirs \
    (or point controller.quorum.voters at this cluster's own controllers)";

/// The longest cluster id a frame may carry (Kafka's are 22 characters).
pub(crate) const MAX_LEN: usize = 255;

/// How often the same refusal is logged again.
const LOG_EVERY: Duration = Duration::from_secs(30);

/// Decides which repeated warnings are logged: peers retry several times
/// a second, and one line per peer and cause every [`LOG_EVERY`] says it all.
#[derive(Default)]
pub(crate) struct LogLimiter {
    last: Mutex<HashMap<String, Instant>>,
}

impl LogLimiter {
    /// Whether a warning about `key` should be logged now.
    pub fn allows(&self, key: &str) -> bool {
        let now = Instant::now();
        let mut last = self.last.lock();
        match last.get(key) {
            Some(at) if now.duration_since(*at) < LOG_EVERY => false,
            _ => {
                last.insert(key.to_string(), now);
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_logged_once_per_period_and_key() {
        let limiter = LogLimiter::default();
        assert!(limiter.allows("node 2"));
        assert!(!limiter.allows("node 2"));
        assert!(limiter.allows("node 3"));
    }
}
