//! Leader-side view of the followers of one partition: how far each has
//! fetched and when it was last caught up, which is what the high watermark
//! and ISR membership are decided from (Kafka's `Replica` state).

use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
struct Follower {
    /// The follower's log end offset (its last fetch offset), -1 if unknown.
    log_end: i64,
    last_caught_up: Instant,
    last_fetch: Instant,
    /// The leader's log end when the follower last fetched.
    leader_end_at_last_fetch: i64,
}

#[derive(Debug, Default)]
pub struct Followers {
    by_id: HashMap<i32, Follower>,
}

impl Followers {
    /// On becoming leader: every other replica counts as just caught up,
    /// with an unknown log end (so the high watermark waits for its fetch).
    pub fn reset(&mut self, replicas: &[i32], me: i32, now: Instant) {
        self.by_id = replicas
            .iter()
            .filter(|r| **r != me)
            .map(|r| {
                (
                    *r,
                    Follower {
                        log_end: -1,
                        last_caught_up: now,
                        last_fetch: now,
                        leader_end_at_last_fetch: -1,
                    },
                )
            })
            .collect();
    }

    /// Records a fetch from `id` at `fetch_offset` while the leader's log
    /// ends at `leader_end`. As Kafka: a follower is caught up at this fetch
    /// if it asked for the leader's end, or at its previous fetch if it has
    /// now reached what the leader's end was then.
    pub fn fetched(&mut self, id: i32, fetch_offset: i64, leader_end: i64, now: Instant) {
        let f = self.by_id.entry(id).or_insert(Follower {
            log_end: -1,
            last_caught_up: now,
            last_fetch: now,
            leader_end_at_last_fetch: -1,
        });
        if fetch_offset >= leader_end {
            f.last_caught_up = now;
        } else if fetch_offset >= f.leader_end_at_last_fetch && f.leader_end_at_last_fetch >= 0 {
            f.last_caught_up = f.last_caught_up.max(f.last_fetch);
        }
        f.log_end = fetch_offset;
        f.last_fetch = now;
        f.leader_end_at_last_fetch = leader_end;
    }

    /// Whether follower `id` fetched after `since` from at most `end`: it
    /// has no records beyond `end` any more (it truncated, if it had to).
    pub fn within_since(&self, id: i32, end: i64, since: Instant) -> bool {
        self.by_id
            .get(&id)
            .is_some_and(|f| f.last_fetch > since && f.log_end >= 0 && f.log_end <= end)
    }

    /// Follower `id`'s log end and when it was last caught up, once it
    /// has fetched.
    pub fn caught_up(&self, id: i32) -> Option<(i64, Instant)> {
        self.by_id
            .get(&id)
            .filter(|f| f.log_end >= 0)
            .map(|f| (f.log_end, f.last_caught_up))
    }

    pub fn log_end(&self, id: i32) -> i64 {
        self.by_id.get(&id).map_or(-1, |f| f.log_end)
    }

    /// The smallest log end among the ISR (the leader's own included).
    pub fn isr_log_end(&self, isr: &[i32], me: i32, leader_end: i64) -> i64 {
        isr.iter()
            .map(|r| {
                if *r == me {
                    leader_end
                } else {
                    self.log_end(*r)
                }
            })
            .min()
            .unwrap_or(leader_end)
    }

    /// ISR members (other than the leader) not caught up within `max_lag`.
    pub fn lagging(&self, isr: &[i32], me: i32, max_lag: Duration, now: Instant) -> Vec<i32> {
        isr.iter()
            .copied()
            .filter(|r| *r != me)
            .filter(|r| {
                self.by_id
                    .get(r)
                    .is_none_or(|f| now.duration_since(f.last_caught_up) > max_lag)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn followers_are_within_a_cut_log_once_they_fetched_from_it() {
        let start = Instant::now();
        let mut f = Followers::default();
        f.reset(&[1, 2, 3], 1, start);
        let cut = start + Duration::from_millis(10);
        assert!(!f.within_since(2, 50, cut), "no fetch yet");
        f.fetched(2, 80, 50, cut - Duration::from_millis(5));
        assert!(!f.within_since(2, 50, cut), "fetched before the cut");
        f.fetched(2, 80, 50, cut + Duration::from_millis(1));
        assert!(!f.within_since(2, 50, cut), "still past the end");
        f.fetched(2, 50, 50, cut + Duration::from_millis(2));
        assert!(f.within_since(2, 50, cut));
        assert!(!f.within_since(3, 50, cut));
    }

    #[test]
    fn the_high_watermark_follows_the_slowest_isr_member() {
        let now = Instant::now();
        let mut f = Followers::default();
        f.reset(&[1, 2, 3], 1, now);
        assert_eq!(
            f.isr_log_end(&[1, 2, 3], 1, 10),
            -1,
            "unknown until fetched"
        );
        f.fetched(2, 10, 10, now);
        f.fetched(3, 7, 10, now);
        assert_eq!(f.isr_log_end(&[1, 2, 3], 1, 10), 7);
        assert_eq!(f.isr_log_end(&[1, 2], 1, 10), 10);
    }

    #[test]
    fn followers_that_stop_catching_up_lag() {
        let start = Instant::now();
        let mut f = Followers::default();
        f.reset(&[1, 2, 3], 1, start);
        let later = start + Duration::from_secs(31);
        f.fetched(2, 50, 50, later);
        f.fetched(3, 10, 50, later);
        let lagging = f.lagging(&[1, 2, 3], 1, Duration::from_secs(30), later);
        assert_eq!(lagging, vec![3]);
        // Reaching what the leader's end was at the last fetch counts as
        // caught up as of that fetch.
        f.fetched(3, 50, 60, later + Duration::from_secs(1));
        assert!(f
            .lagging(
                &[1, 2, 3],
                1,
                Duration::from_secs(30),
                later + Duration::from_secs(1)
            )
            .is_empty());
    }
}
