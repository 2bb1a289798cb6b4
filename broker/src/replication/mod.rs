//! Replication between brokers: followers fetch from leaders
//! ([`fetcher`]), leaders track what each follower has
//! ([`crate::replica::progress`]) to move the high watermark and the ISR,
//! and both sides bound the traffic of replicas catching up ([`throttle`]).
//! Leaders may send consumers to read from a follower in their rack
//! ([`read_replica`]). The replica manager's tests cover the leader's side.

pub mod fetcher;
pub mod read_replica;
pub mod throttle;
