//! No silent discard at AddTopicsToMirror: before a destination topic that
//! already holds records is bound again, the broker handling the request
//! asks the source for the partitions' last mirrored epochs and counts, in
//! the logs it hosts, what PREPARING would discard because the source cannot
//! vouch for it. Partitions hosted elsewhere are checked by their leader in
//! PREPARING (the partition goes FAILED instead of discarding).

use ottla_storage::manager::TopicPartition;
use uuid::Uuid;

use super::source::SourceCluster;
use super::MirrorServices;
use crate::discard::{unconfirmed_discard, DiscardRefusal};
use crate::name::{MirrorBinding, RequestedMirroring};
use crate::truncation::{LocalLog, SourceLastMirroredEpoch};

/// The records of `topic` (`partitions` partitions, id `topic_id`) that
/// mirroring it again would discard unconfirmed, as a refusal; `None` when
/// nothing local would be lost.
pub async fn discard_refusal(
    services: &MirrorServices,
    source: &SourceCluster,
    topic: &str,
    topic_id: Uuid,
    partitions: i32,
) -> Result<Option<DiscardRefusal>, String> {
    // A topic still mirrored or paused is refused by the controller anyway.
    let image = services.controller.image();
    let bound = image.mirror_binding(topic).map(MirrorBinding::parse);
    if matches!(bound, Some(Ok(ref binding)) if binding.requested != RequestedMirroring::Remove) {
        return Ok(None);
    }
    let hosted: Vec<_> = (0..partitions)
        .filter_map(|partition| {
            let tp = TopicPartition {
                topic: topic.to_string(),
                partition,
            };
            let p = services.replicas.hosted_partition(&tp)?;
            let log = p.log().read();
            (log.log_end_offset() > log.log_start_offset()).then_some((partition, p.clone()))
        })
        .collect();
    if hosted.is_empty() {
        return Ok(None);
    }
    let asked: Vec<i32> = hosted.iter().map(|(partition, _)| *partition).collect();
    let answers = source.last_mirrored_epochs(topic_id, &asked).await?;
    let mut reason = SourceLastMirroredEpoch::ApiUnsupported;
    let counts: Vec<(i32, i64)> = hosted
        .iter()
        .zip(&answers)
        .map(|((partition, p), (_, answer))| {
            let log = p.log().read();
            let lost = unconfirmed_discard(
                *answer,
                LocalLog {
                    epochs: log.epoch_cache().entries(),
                    log_start_offset: log.log_start_offset(),
                    log_end_offset: log.log_end_offset(),
                },
            );
            if lost > 0 {
                reason = *answer;
            }
            (*partition, lost)
        })
        .collect();
    Ok(DiscardRefusal::of(topic, reason, counts))
}
