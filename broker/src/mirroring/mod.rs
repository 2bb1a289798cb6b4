//! Cluster mirroring on the broker (KIP-1279): the mirror APIs, the
//! `__mirror_state` coordinator, the manager that drives each led mirror
//! partition through its states, and the fetcher that copies a source
//! partition byte for byte. The state machine, records, configs and
//! truncation rules they follow are the `ottla-mirror` crate's.

pub mod apis;
pub mod configs;
mod describe;
pub mod epoch_bumps;
pub mod failover;
pub mod fetcher;
pub mod manager;
mod readd;
pub mod source;
pub mod state_store;
pub mod state_writes;
pub mod stats;
pub mod sync;

pub use manager::{MirrorManager, MirrorServices};

use ottla_controller::MetadataImage;
use ottla_mirror::name::{MirrorBinding, RequestedMirroring};

/// The topics bound to `mirror` (in any state), with what was last asked
/// of each, in name order.
pub fn topics_of(image: &MetadataImage, mirror: &str) -> Vec<(String, RequestedMirroring)> {
    image
        .topic_ids
        .keys()
        .filter_map(|t| {
            let binding = MirrorBinding::parse(image.mirror_binding(t)?).ok()?;
            (binding.mirror.as_str() == mirror).then(|| (t.clone(), binding.requested))
        })
        .collect()
}
