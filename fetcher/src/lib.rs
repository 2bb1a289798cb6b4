//! The fetch-loop machinery replication and mirroring share: a loop per
//! leader broker (and fetcher id) sending multi-partition Fetch requests in
//! an incremental fetch session, with the leader side behind
//! [`fetch_loop::LeaderEndpoint`].

pub mod fetch_loop;
pub mod session;

pub use fetch_loop::{FetchedPartition, Followup, LeaderEndpoint};
pub use session::FetchPosition;

use ottla_protocol::java_hash::{java_string_hash, kafka_abs};
use ottla_storage::manager::TopicPartition;

/// Which of `count` fetch loops of a leader fetches `tp`. Kafka's
/// assignment: the topic's Java hash code and the partition, modulo the
/// fetcher count, so consecutive partitions of a topic go round the loops.
pub fn fetcher_of(tp: &TopicPartition, count: usize) -> usize {
    let hash = 31i32
        .wrapping_mul(java_string_hash(&tp.topic))
        .wrapping_add(tp.partition);
    kafka_abs(hash) as usize % count.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partition_has_one_loop_in_range() {
        for count in 1..=5 {
            for partition in 0..50 {
                let tp = TopicPartition::new(format!("t{}", partition % 7), partition);
                assert!(fetcher_of(&tp, count) < count, "{tp} with {count} fetchers");
            }
        }
    }

    #[test]
    fn partitions_spread_over_the_loops() {
        let mut per_loop = [0; 3];
        for partition in 0..30 {
            let tp = TopicPartition::new("events".to_string(), partition);
            per_loop[fetcher_of(&tp, 3)] += 1;
        }
        assert_eq!(per_loop, [10, 10, 10]);
    }
}
