//! Metadata images for unit tests: topics of given partition counts, every
//! partition led by broker 1.

use ottla_controller::image::{PartitionImage, TopicImage};
use ottla_controller::MetadataImage;
use uuid::Uuid;

/// Topics as (name, id, partitions).
pub fn image_with(topics: &[(&str, u128, i32)]) -> MetadataImage {
    let mut image = MetadataImage::default();
    for &(name, id, partitions) in topics {
        let id = Uuid::from_u128(id);
        let partition = PartitionImage {
            replicas: vec![1],
            isr: vec![1],
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            adding_replicas: Vec::new(),
            removing_replicas: Vec::new(),
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        };
        let topic = TopicImage {
            name: name.to_string(),
            id,
            partitions: (0..partitions).map(|p| (p, partition.clone())).collect(),
        };
        image.topic_ids.insert(name.to_string(), id);
        image.topics.insert(id, topic);
    }
    image
}
