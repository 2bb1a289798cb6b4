//! Feature levels in ApiVersions (v3+, `kafka-features.sh describe`): what
//! this node supports and the cluster's finalized levels. The features and
//! their levels are the controller's (`ottla_controller::features`), but
//! for `kraft.version`, which the metadata quorum's kind decides (1 for a
//! dynamic quorum, KIP-853), as Kafka reports it.

use std::sync::Arc;

use ottla_controller::features::{finalized_levels, FEATURES};
use ottla_controller::MetadataImage;
use ottla_protocol::api_versions::{Features, FinalizedFeatures};

pub const KRAFT_VERSION: &str = "kraft.version";

/// What this node supports, answering with the shared finalized levels.
pub fn node_features(finalized: Arc<FinalizedFeatures>) -> Features {
    FEATURES
        .iter()
        .fold(Features::default(), |f, feature| {
            f.support(feature.name, feature.min, feature.max)
        })
        .support(KRAFT_VERSION, 0, 1)
        .finalized_by(finalized)
}

/// The finalized levels as a fresh node reports them before it has read
/// the metadata: the initial levels, epoch 0.
pub fn initial_finalized(kraft_version: i16) -> Arc<FinalizedFeatures> {
    let finalized = Arc::new(FinalizedFeatures::default());
    let levels = FEATURES
        .iter()
        .map(|f| (f.name.to_string(), f.initial))
        .collect();
    finalized.set(with_kraft_version(levels, kraft_version), 0);
    finalized
}

/// Publishes `image`'s levels to ApiVersions, with its offset as the epoch.
pub fn publish(finalized: &FinalizedFeatures, image: &MetadataImage, kraft_version: i16) {
    finalized.set(
        with_kraft_version(finalized_levels(image), kraft_version),
        image.offset.max(0),
    );
}

/// Level 0 is off and not listed, as for the other features.
fn with_kraft_version(mut levels: Vec<(String, i16)>, kraft_version: i16) -> Vec<(String, i16)> {
    if kraft_version > 0 {
        levels.push((KRAFT_VERSION.to_string(), kraft_version));
    }
    levels
}
