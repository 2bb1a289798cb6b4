//! Cluster mirroring (KIP-1279). The rules first, which need no network
//! and no broker, so they can be tested alone:
//!
//! - [`state`]: the mirror partition state machine and its valid transitions.
//! - [`name`]: mirror names and the `mirror.name` topic binding.
//! - [`partitioning`]: which `__mirror_state` partition holds a mirror
//!   partition's records.
//! - [`records`]: the `__mirror_state` record formats.
//! - [`config`]: a mirror's configuration (source connection, filters, sync
//!   intervals), validated.
//! - [`truncation`]: where PREPARING truncates, from the source's last
//!   mirrored epoch and the local leader-epoch cache.
//! - [`discard`]: when re-adding a stopped topic would discard local
//!   writes the source cannot vouch for, and the refusal that says how many.
//! - [`cli`]: `ottla mirrors`, the admin command line for mirrors.
//!
//! Then [`runtime`], which runs them on a destination broker behind narrow
//! traits for the broker's replica manager and group coordinators.

pub mod cli;
pub mod config;
pub mod discard;
pub mod name;
pub mod partitioning;
pub mod records;
pub mod runtime;
pub mod state;
pub mod truncation;
