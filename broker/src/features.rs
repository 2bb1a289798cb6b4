//! Feature levels (KIP-584): what this node supports, the cluster's
//! finalized levels as the metadata records them (ApiVersions v3+ reports
//! them, `kafka-features.sh describe`), and UpdateFeatures' rules.

use std::sync::Arc;

use ottla_controller::MetadataImage;
use ottla_protocol::api_versions::{Features, FinalizedFeatures};

pub const METADATA_VERSION: &str = "metadata.version";
/// group.version 1 enables the consumer group protocol (KIP-848).
pub const GROUP_VERSION: &str = "group.version";
/// transaction.version 2 lets producers use KIP-890 part 2: partitions
/// join a transaction with their first produce, and every EndTxn bumps the
/// producer epoch (level 1 only changes Kafka's stored record format).
pub const TRANSACTION_VERSION: &str = "transaction.version";

/// A feature this build knows: the levels it can run at, and the level a
/// cluster runs at until UpdateFeatures sets one (Kafka's bootstrap level).
struct Feature {
    name: &'static str,
    min: i16,
    max: i16,
    initial: i16,
}

const FEATURES: [Feature; 3] = [
    // 3.3-IV3 (7) is Kafka 4.x's KRaft floor, 4.1-IV1 (27) matches the
    // Kafka 4.1 schemas kafka-protocol 0.18 is built from.
    Feature {
        name: METADATA_VERSION,
        min: 7,
        max: 27,
        initial: 27,
    },
    // As in Kafka 4.x, new clusters start with the consumer protocol on.
    Feature {
        name: GROUP_VERSION,
        min: 0,
        max: 1,
        initial: 1,
    },
    // And with transactions of version 2, which the coordinator serves
    // beside the older ones (a client chooses by the EndTxn version).
    Feature {
        name: TRANSACTION_VERSION,
        min: 0,
        max: 2,
        initial: 2,
    },
];

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

/// The level `image` finalizes for `feature`: the one UpdateFeatures set,
/// else the initial one; 0 for a feature this build does not know.
pub fn level(image: &MetadataImage, feature: &str) -> i16 {
    image.features.get(feature).copied().unwrap_or_else(|| {
        FEATURES
            .iter()
            .find(|f| f.name == feature)
            .map_or(0, |f| f.initial)
    })
}

/// The levels `image` finalizes; a feature at level 0 is not listed (it is
/// off, as Kafka reports it).
pub fn finalized_levels(image: &MetadataImage) -> Vec<(String, i16)> {
    let mut levels: Vec<(String, i16)> = image
        .features
        .iter()
        .map(|(name, level)| (name.clone(), *level))
        .collect();
    for f in &FEATURES {
        if !image.features.contains_key(f.name) {
            levels.push((f.name.to_string(), f.initial));
        }
    }
    levels.retain(|(_, level)| *level > 0);
    levels
}

/// Publishes `image`'s levels to ApiVersions, with its offset as the epoch.
pub fn publish(finalized: &FinalizedFeatures, image: &MetadataImage) {
    finalized.set(finalized_levels(image), image.offset.max(0));
}

/// The levels this node can run at for `feature`.
pub fn supported_range(feature: &str) -> Option<(i16, i16)> {
    FEATURES
        .iter()
        .find(|f| f.name == feature)
        .map(|f| (f.min, f.max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_start_at_their_initial_levels_and_level_0_is_off() {
        let mut image = MetadataImage::default();
        assert_eq!(level(&image, GROUP_VERSION), 1);
        assert_eq!(level(&image, "kraft.version"), 0);
        let mut levels = finalized_levels(&image);
        levels.sort();
        assert_eq!(
            levels,
            [
                (GROUP_VERSION.to_string(), 1),
                (METADATA_VERSION.to_string(), 27),
                (TRANSACTION_VERSION.to_string(), 2)
            ]
        );
        image.features.insert(GROUP_VERSION.to_string(), 0);
        assert_eq!(level(&image, GROUP_VERSION), 0);
        let mut levels = finalized_levels(&image);
        levels.sort();
        assert_eq!(
            levels,
            [
                (METADATA_VERSION.to_string(), 27),
                (TRANSACTION_VERSION.to_string(), 2)
            ]
        );
        assert_eq!(supported_range(GROUP_VERSION), Some((0, 1)));
        assert_eq!(supported_range("kraft.version"), None);
    }
}
