//! Cluster mirroring on the broker (KIP-1279): the mirror APIs, the
//! `__mirror_state` coordinator, the manager that drives each led mirror
//! partition through its states, and the fetcher that copies a source
//! partition byte for byte. The state machine, records, configs and
//! truncation rules they follow are the `ottla-mirror` crate's.

pub mod apis;
pub mod fetcher;
pub mod manager;
pub mod source;
pub mod state_store;
pub mod sync;

pub use manager::{MirrorManager, MirrorServices};
