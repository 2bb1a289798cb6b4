//! Feature levels (KIP-584): what this node supports, the cluster's
//! finalized levels as the metadata records them (ApiVersions v3+ reports
//! them, `kafka-features.sh describe`), and UpdateFeatures' rules.

use std::sync::Arc;

use ottla_controller::MetadataImage;
use ottla_protocol::api_versions::{Features, FinalizedFeatures};

pub const METADATA_VERSION: &str = "metadata.version";
/// metadata.version levels: 3.3-IV3 (7) is Kafka 4.x's KRaft floor, 4.1-IV1
/// (27) matches the Kafka 4.1 schemas kafka-protocol 0.18 is built from.
pub const METADATA_VERSION_MIN: i16 = 7;
pub const METADATA_VERSION_MAX: i16 = 27;

/// What this node supports, answering with the shared finalized levels.
pub fn node_features(finalized: Arc<FinalizedFeatures>) -> Features {
    Features::default()
        .support(METADATA_VERSION, METADATA_VERSION_MIN, METADATA_VERSION_MAX)
        .finalized_by(finalized)
}

/// The finalized levels as a fresh node reports them before it has read
/// the metadata: metadata.version at the highest level, epoch 0.
pub fn initial_finalized() -> Arc<FinalizedFeatures> {
    let finalized = Arc::new(FinalizedFeatures::default());
    finalized.set(
        vec![(METADATA_VERSION.to_string(), METADATA_VERSION_MAX)],
        0,
    );
    finalized
}

/// The levels `image` finalizes. A cluster starts at the highest
/// metadata.version this build supports until UpdateFeatures sets one.
pub fn finalized_levels(image: &MetadataImage) -> Vec<(String, i16)> {
    let mut levels: Vec<(String, i16)> = image
        .features
        .iter()
        .filter(|(_, level)| **level > 0)
        .map(|(name, level)| (name.clone(), *level))
        .collect();
    if !image.features.contains_key(METADATA_VERSION) {
        levels.push((METADATA_VERSION.to_string(), METADATA_VERSION_MAX));
    }
    levels
}

/// Publishes `image`'s levels to ApiVersions, with its offset as the epoch.
pub fn publish(finalized: &FinalizedFeatures, image: &MetadataImage) {
    finalized.set(finalized_levels(image), image.offset.max(0));
}

/// The levels this node can run at for `feature`.
pub fn supported_range(feature: &str) -> Option<(i16, i16)> {
    (feature == METADATA_VERSION).then_some((METADATA_VERSION_MIN, METADATA_VERSION_MAX))
}
