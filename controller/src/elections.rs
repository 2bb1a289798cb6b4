//! Leader and ISR changes when brokers come and go: pure functions from an
//! image to the PartitionChange records the active controller commits.

use uuid::Uuid;

use crate::image::MetadataImage;
use crate::partition_change::{Election, MinIsr, PartitionChange};
use crate::records::MetadataRecord;

/// Brings every partition in line with which brokers are usable (registered,
/// unfenced, not shutting down): unusable brokers leave leadership and the
/// ISR, and partitions without a leader get the first usable ISR member in
/// replica order, or an ELR member when the ISR is empty (see
/// [`crate::partition_change`]). `unclean_shutdown` names a broker back from
/// an unclean shutdown, which also leaves every ELR. Without the ELR
/// feature the last ISR member stays in the ISR when it goes (the partition
/// is then offline, leader -1), so it can lead again when it returns.
pub fn align_partitions(
    image: &MetadataImage,
    min_isr: MinIsr,
    usable: impl Fn(i32) -> bool,
    unclean_shutdown: Option<i32>,
) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    let mut topics: Vec<_> = image.topics.values().collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    for topic in topics {
        let topic_min_isr = min_isr.of_topic(topic);
        for (&partition, p) in &topic.partitions {
            let isr: Vec<i32> = p.isr.iter().copied().filter(|b| usable(*b)).collect();
            let mut change =
                PartitionChange::new(topic.id, partition, p, topic_min_isr.of(p)).isr(isr);
            if let Some(broker) = unclean_shutdown {
                change = change.unclean_shutdown(broker);
            }
            records.extend(change.build(&usable));
        }
    }
    records
}

/// Which leader ElectLeaders asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionType {
    /// The first replica, when it is a live ISR member.
    Preferred,
    /// Any live replica of a partition without a leader, even outside the
    /// ISR (data the ISR had may be lost).
    Unclean,
}

/// Why a partition's election did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoElection {
    /// The partition already has the leader asked for.
    NotNeeded,
    /// The preferred replica is fenced or out of the ISR.
    PreferredUnavailable,
    /// No live replica could lead.
    NoEligibleLeader,
}

/// The change that elects a leader of `kind` for partition `p`.
pub fn elect(
    image: &MetadataImage,
    min_isr: MinIsr,
    topic_id: Uuid,
    partition: i32,
    kind: ElectionType,
) -> Result<MetadataRecord, NoElection> {
    let topic = image
        .topic_by_id(&topic_id)
        .ok_or(NoElection::NoEligibleLeader)?;
    let p = topic
        .partitions
        .get(&partition)
        .ok_or(NoElection::NoEligibleLeader)?;
    let usable = |b: i32| usable_in(image, b, &[]);
    match kind {
        ElectionType::Preferred => {
            let preferred = *p.replicas.first().ok_or(NoElection::NoEligibleLeader)?;
            if p.leader == preferred {
                Err(NoElection::NotNeeded)
            } else if usable(preferred) && p.isr.contains(&preferred) {
                Ok(MetadataRecord::PartitionChange {
                    topic_id,
                    partition,
                    leader: Some(preferred),
                    isr: None,
                    replicas: None,
                    elr: None,
                    last_known_elr: None,
                })
            } else {
                Err(NoElection::PreferredUnavailable)
            }
        }
        ElectionType::Unclean => {
            if p.leader >= 0 {
                return Err(NoElection::NotNeeded);
            }
            PartitionChange::new(topic_id, partition, p, min_isr.of(topic, p))
                .election(Election::Unclean)
                .build(usable)
                .filter(|r| matches!(r, MetadataRecord::PartitionChange { leader: Some(l), .. } if *l >= 0))
                .ok_or(NoElection::NoEligibleLeader)
        }
    }
}

/// Preferred-leader elections for every partition whose preferred replica
/// is a live ISR member but does not lead (auto.leader.rebalance.enable).
pub fn preferred_leader_moves(image: &MetadataImage) -> Vec<MetadataRecord> {
    // A preferred election changes no ISR, so no ELR either.
    let min_isr = MinIsr::new(image, 1);
    image
        .topics
        .values()
        .flat_map(|t| t.partitions.keys().map(move |p| (t.id, *p)))
        .filter_map(|(id, p)| elect(image, min_isr, id, p, ElectionType::Preferred).ok())
        .collect()
}

/// Whether broker `id` may lead or be in an ISR, with `overrides` (broker,
/// usable) taking precedence over the image's fencing state.
pub fn usable_in(image: &MetadataImage, id: i32, overrides: &[(i32, bool)]) -> bool {
    if let Some((_, u)) = overrides.iter().find(|(b, _)| *b == id) {
        return *u;
    }
    image.brokers.get(&id).is_some_and(|b| !b.fenced)
}

/// Partitions broker `id` leads.
pub fn leaderships(image: &MetadataImage, id: i32) -> u32 {
    image
        .topics
        .values()
        .flat_map(|t| t.partitions.values())
        .filter(|p| p.leader == id)
        .count() as u32
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::image::{BrokerImage, PartitionImage, TopicImage};

    fn image(partitions: Vec<PartitionImage>, fenced: &[i32]) -> MetadataImage {
        let mut image = MetadataImage::empty();
        let id = Uuid::new_v4();
        image.topics.insert(
            id,
            TopicImage {
                name: "t".into(),
                id,
                partitions: partitions
                    .into_iter()
                    .enumerate()
                    .map(|(i, p)| (i as i32, p))
                    .collect(),
            },
        );
        for b in 1..=3 {
            image.brokers.insert(
                b,
                BrokerImage {
                    id: b,
                    incarnation_id: Uuid::new_v4(),
                    endpoints: vec![],
                    rack: None,
                    fenced: fenced.contains(&b),
                },
            );
        }
        image
    }

    fn part(leader: i32, isr: &[i32]) -> PartitionImage {
        PartitionImage::with(&[1, 2, 3], isr, leader)
    }

    /// Kafka's default min ISR of 1: these tests keep their pre-ELR
    /// outcomes, since an ISR of one is never below it.
    fn min_isr(image: &MetadataImage) -> MinIsr<'_> {
        MinIsr::new(image, 1)
    }

    fn changes(records: &[MetadataRecord]) -> BTreeMap<i32, (Option<i32>, Option<Vec<i32>>)> {
        records
            .iter()
            .map(|r| match r {
                MetadataRecord::PartitionChange {
                    partition,
                    leader,
                    isr,
                    ..
                } => (*partition, (*leader, isr.clone())),
                other => panic!("unexpected {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_fenced_leader_hands_over_to_the_next_isr_member() {
        let img = image(
            vec![part(1, &[1, 2, 3]), part(2, &[2, 1]), part(3, &[3])],
            &[],
        );
        let c = changes(&align_partitions(
            &img,
            min_isr(&img),
            |b| usable_in(&img, b, &[(1, false)]),
            None,
        ));
        assert_eq!(c[&0], (Some(2), Some(vec![2, 3])));
        assert_eq!(c[&1], (None, Some(vec![2])));
        assert!(!c.contains_key(&2), "partition 2 never had broker 1");
    }

    #[test]
    fn preferred_and_unclean_elections() {
        let img = image(
            vec![part(2, &[1, 2, 3]), part(1, &[1]), part(2, &[2, 3])],
            &[],
        );
        let id = *img.topics.keys().next().unwrap();
        assert!(matches!(
            elect(&img, min_isr(&img), id, 0, ElectionType::Preferred),
            Ok(MetadataRecord::PartitionChange {
                leader: Some(1),
                ..
            })
        ));
        assert_eq!(
            elect(&img, min_isr(&img), id, 1, ElectionType::Preferred).unwrap_err(),
            NoElection::NotNeeded
        );
        assert_eq!(
            elect(&img, min_isr(&img), id, 2, ElectionType::Preferred).unwrap_err(),
            NoElection::PreferredUnavailable,
            "broker 1 is out of the ISR"
        );
        assert_eq!(preferred_leader_moves(&img).len(), 1);
        let offline = image(vec![part(-1, &[1])], &[1]);
        let oid = *offline.topics.keys().next().unwrap();
        assert!(matches!(
            elect(&offline, min_isr(&offline), oid, 0, ElectionType::Unclean),
            Ok(MetadataRecord::PartitionChange { leader: Some(2), isr: Some(ref isr), .. }) if isr == &vec![2]
        ));
        assert_eq!(
            elect(&img, min_isr(&img), id, 0, ElectionType::Unclean).unwrap_err(),
            NoElection::NotNeeded
        );
    }

    fn without_elr(mut image: MetadataImage) -> MetadataImage {
        image
            .features
            .insert(crate::features::ELR_VERSION.to_string(), 0);
        image
    }

    #[test]
    fn without_the_elr_the_last_isr_member_stays_and_leads_again_when_back() {
        let img = without_elr(image(vec![part(1, &[1])], &[]));
        let align = |img: &MetadataImage, overrides: &[(i32, bool)]| {
            changes(&align_partitions(
                img,
                min_isr(img),
                |b| usable_in(img, b, overrides),
                None,
            ))
        };
        assert_eq!(
            align(&img, &[(1, false)])[&0],
            (Some(-1), None),
            "offline, ISR kept"
        );
        let offline = without_elr(image(vec![part(-1, &[1])], &[1]));
        assert_eq!(align(&offline, &[(1, true)])[&0], (Some(1), None));
        assert!(
            align(&offline, &[]).is_empty(),
            "no unclean election of 2 or 3"
        );
    }

    #[test]
    fn with_the_elr_a_cleanly_stopped_replica_leads_again_and_an_unclean_one_does_not() {
        // min.insync.replicas=2: 3 stopped, then 2, then 1, all cleanly.
        let mut img = image(vec![part(1, &[1, 2, 3])], &[]);
        for (offset, gone) in [(1, 3), (2, 2), (3, 1)] {
            let records = align_partitions(&img, MinIsr::new(&img, 2), |b| b < gone, None);
            for r in &records {
                img.apply(offset, r);
            }
        }
        let p = &img.topics.values().next().unwrap().partitions[&0];
        assert_eq!((p.leader, p.isr.as_slice()), (-1, &[][..]));
        assert_eq!(
            (p.elr.as_slice(), p.last_known_elr.as_slice()),
            (&[1, 2][..], &[1][..])
        );
        // 2 comes back cleanly: it leads, from the ELR.
        let back = changes(&align_partitions(
            &img,
            MinIsr::new(&img, 2),
            |b| b == 2,
            None,
        ));
        assert_eq!(back[&0], (Some(2), Some(vec![2])));
        // 2 comes back from an unclean shutdown: it leaves the ELR, and the
        // partition waits for 1.
        let records = align_partitions(&img, MinIsr::new(&img, 2), |b| b == 2, Some(2));
        assert!(matches!(
            records.as_slice(),
            [MetadataRecord::PartitionChange { leader: None, elr: Some(elr), .. }] if elr == &[1]
        ));
    }
}
