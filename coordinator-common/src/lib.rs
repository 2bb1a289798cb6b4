//! What the coordinators (groups, transactions, mirror states) and the
//! mirror runtime share, below the broker that wires them:
//!
//! - [`codec`]: the byte reader and writer of Kafka's coordinator record
//!   schemas;
//! - [`partition_writer`]: the narrow trait over the replica manager they
//!   write through;
//! - [`shards`]: the coordinator partitions this broker leads, loaded from
//!   their logs on first use;
//! - [`internal_topics`]: creating the compacted topics they keep state in;
//! - [`lookup`]: which broker coordinates a key;
//! - [`inter_broker`]: requests to other brokers;
//! - [`log_limit`]: rate-limited log lines for retry loops.

pub mod codec;
pub mod inter_broker;
pub mod internal_topics;
pub mod log_limit;
pub mod lookup;
pub mod partition_writer;
pub mod shards;
