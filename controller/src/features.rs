//! Feature levels (KIP-584) as the metadata records them: the features this
//! build knows, the level each runs at until UpdateFeatures sets one, and
//! the level an image finalizes. The controller reads them to decide how it
//! changes partitions (eligible leader replicas); brokers report them in
//! ApiVersions and check them per request.

use crate::image::MetadataImage;

pub const METADATA_VERSION: &str = "metadata.version";
/// group.version 1 enables the consumer group protocol (KIP-848).
pub const GROUP_VERSION: &str = "group.version";
/// transaction.version 2 lets producers use KIP-890 part 2: partitions
/// join a transaction with their first produce, and every EndTxn bumps the
/// producer epoch (level 1 only changes Kafka's stored record format).
pub const TRANSACTION_VERSION: &str = "transaction.version";
/// eligible.leader.replicas.version 1 turns on KIP-966: replicas that left
/// the ISR while it was below min.insync.replicas stay eligible to lead.
pub const ELR_VERSION: &str = "eligible.leader.replicas.version";
/// share.version 1 serves share groups (KIP-932, Kafka 4.1's level); 2
/// adds their dead-letter queues (KIP-1191, Kafka 4.4's level).
pub const SHARE_VERSION: &str = "share.version";
/// streams.version 1 serves streams groups (KIP-1071, Kafka 4.2+'s level).
pub const STREAMS_VERSION: &str = "streams.version";

/// A feature this build knows: the levels it can run at, and the level a
/// cluster runs at until UpdateFeatures sets one (Kafka's bootstrap level).
pub struct Feature {
    pub name: &'static str,
    pub min: i16,
    pub max: i16,
    pub initial: i16,
}

pub const FEATURES: [Feature; 6] = [
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
    // And, as Kafka 4.1+, with eligible leader replicas.
    Feature {
        name: ELR_VERSION,
        min: 0,
        max: 1,
        initial: 1,
    },
    // And, as Kafka 4.4, with share groups and their dead-letter queues.
    Feature {
        name: SHARE_VERSION,
        min: 0,
        max: 2,
        initial: 2,
    },
    // And, as Kafka 4.2+, with streams groups.
    Feature {
        name: STREAMS_VERSION,
        min: 0,
        max: 1,
        initial: 1,
    },
];

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

/// Whether `image` runs with eligible leader replicas (KIP-966).
pub fn elr_enabled(image: &MetadataImage) -> bool {
    level(image, ELR_VERSION) >= 1
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
        assert!(elr_enabled(&image));
        let mut levels = finalized_levels(&image);
        levels.sort();
        assert_eq!(
            levels,
            [
                (ELR_VERSION.to_string(), 1),
                (GROUP_VERSION.to_string(), 1),
                (METADATA_VERSION.to_string(), 27),
                (SHARE_VERSION.to_string(), 2),
                (STREAMS_VERSION.to_string(), 1),
                (TRANSACTION_VERSION.to_string(), 2)
            ]
        );
        image.features.insert(GROUP_VERSION.to_string(), 0);
        image.features.insert(ELR_VERSION.to_string(), 0);
        assert_eq!(level(&image, GROUP_VERSION), 0);
        assert!(!elr_enabled(&image));
        let mut levels = finalized_levels(&image);
        levels.sort();
        assert_eq!(
            levels,
            [
                (METADATA_VERSION.to_string(), 27),
                (SHARE_VERSION.to_string(), 2),
                (STREAMS_VERSION.to_string(), 1),
                (TRANSACTION_VERSION.to_string(), 2)
            ]
        );
        assert_eq!(supported_range(GROUP_VERSION), Some((0, 1)));
        assert_eq!(supported_range("kraft.version"), None);
    }
}
