//! Replication between brokers: followers fetch from leaders
//! ([`fetcher`]), leaders track what each follower has ([`progress`]) to
//! move the high watermark and the ISR.

pub mod fetcher;
pub mod progress;

#[cfg(test)]
mod tests;
