//! Feature levels in ApiVersions (v3+, `kafka-features.sh describe`): what
//! this node supports and the cluster's finalized levels. The features and
//! their levels are the controller's (`ottla_controller::features`).

use std::sync::Arc;

use ottla_controller::features::{finalized_levels, FEATURES};
use ottla_controller::MetadataImage;
use ottla_protocol::api_versions::{Features, FinalizedFeatures};

/// What this node supports, answering with the shared finalized levels.
pub fn node_features(finalized: Arc<FinalizedFeatures>) -> Features {
    FEATURES
        .iter()
        .fold(Features::default(), |f, feature| {
            f.support(feature.name, feature.min, feature.max)
        })
        .finalized_by(finalized)
}

/// The finalized levels as a fresh node reports them before it has read
/// the metadata: the initial levels, epoch 0.
pub fn initial_finalized() -> Arc<FinalizedFeatures> {
    let finalized = Arc::new(FinalizedFeatures::default());
    finalized.set(
        FEATURES
            .iter()
            .map(|f| (f.name.to_string(), f.initial))
            .collect(),
        0,
    );
    finalized
}

/// Publishes `image`'s levels to ApiVersions, with its offset as the epoch.
pub fn publish(finalized: &FinalizedFeatures, image: &MetadataImage) {
    finalized.set(finalized_levels(image), image.offset.max(0));
}
