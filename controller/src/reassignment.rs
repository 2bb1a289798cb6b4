//! Partition reassignment (AlterPartitionReassignments), as KRaft does it:
//! the target replicas are added to the replica set first, the new ones
//! catch up through replication and join the ISR, then the active
//! controller completes the move by dropping the replicas that are not in
//! the target (a leader among them hands over first). Cancelling reverts to
//! the replicas the partition had before.

use uuid::Uuid;

use crate::elections::usable_in;
use crate::image::{MetadataImage, PartitionImage};
use crate::records::MetadataRecord;

/// Why a reassignment request for one partition is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReassignmentError {
    InvalidTarget(String),
    NoneInProgress,
}

/// The replicas a partition had before its ongoing reassignment.
fn original(p: &PartitionImage) -> Vec<i32> {
    p.replicas
        .iter()
        .copied()
        .filter(|r| !p.adding_replicas.contains(r))
        .collect()
}

/// The replicas an ongoing reassignment moves to.
pub fn target(p: &PartitionImage) -> Vec<i32> {
    p.replicas
        .iter()
        .copied()
        .filter(|r| !p.removing_replicas.contains(r))
        .collect()
}

pub fn in_progress(p: &PartitionImage) -> bool {
    !p.adding_replicas.is_empty() || !p.removing_replicas.is_empty()
}

/// The records that start moving partition `partition` of `topic_id` to
/// `target` (or cancel its reassignment when `target` is None).
pub fn plan(
    image: &MetadataImage,
    topic_id: Uuid,
    partition: i32,
    p: &PartitionImage,
    target: Option<&[i32]>,
) -> Result<Vec<MetadataRecord>, ReassignmentError> {
    let original = original(p);
    let Some(target) = target else {
        if !in_progress(p) {
            return Err(ReassignmentError::NoneInProgress);
        }
        return Ok(finish(topic_id, partition, p, &original));
    };
    validate(image, target)?;
    if target == original.as_slice() && !in_progress(p) {
        return Ok(Vec::new());
    }
    let adding: Vec<i32> = target
        .iter()
        .copied()
        .filter(|r| !original.contains(r))
        .collect();
    let removing: Vec<i32> = original
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    if adding.is_empty() {
        // Nothing to copy: drop the removed replicas at once.
        return Ok(finish(topic_id, partition, p, target));
    }
    let mut replicas = target.to_vec();
    replicas.extend(removing.iter().copied());
    Ok(vec![
        MetadataRecord::PartitionChange {
            topic_id,
            partition,
            leader: None,
            isr: None,
            replicas: Some(replicas),
            elr: None,
            last_known_elr: None,
        },
        MetadataRecord::PartitionReassignment {
            topic_id,
            partition,
            adding,
            removing,
        },
    ])
}

fn validate(image: &MetadataImage, target: &[i32]) -> Result<(), ReassignmentError> {
    if target.is_empty() {
        return Err(ReassignmentError::InvalidTarget(
            "The replica list is empty.".into(),
        ));
    }
    let mut sorted = target.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != target.len() {
        return Err(ReassignmentError::InvalidTarget(
            "The replica list has duplicates.".into(),
        ));
    }
    if let Some(b) = target.iter().find(|b| !image.brokers.contains_key(b)) {
        return Err(ReassignmentError::InvalidTarget(format!(
            "Broker {b} is not registered."
        )));
    }
    Ok(())
}

/// The records that make `replicas` the partition's replica set and end
/// any reassignment: the ISR keeps only those replicas, and a leader that is
/// not among them hands over to the first live ISR member that is.
fn finish(
    topic_id: Uuid,
    partition: i32,
    p: &PartitionImage,
    replicas: &[i32],
) -> Vec<MetadataRecord> {
    let mut isr: Vec<i32> = p
        .isr
        .iter()
        .copied()
        .filter(|r| replicas.contains(r))
        .collect();
    if isr.is_empty() {
        isr = p.isr.clone();
    }
    // Replicas that are dropped are no longer eligible to lead either.
    let kept = |list: &[i32]| -> Option<Vec<i32>> {
        let kept: Vec<i32> = list
            .iter()
            .copied()
            .filter(|r| replicas.contains(r))
            .collect();
        (kept != list).then_some(kept)
    };
    let leader = if replicas.contains(&p.leader) {
        p.leader
    } else {
        replicas
            .iter()
            .copied()
            .find(|r| isr.contains(r))
            .unwrap_or(-1)
    };
    vec![
        MetadataRecord::PartitionChange {
            topic_id,
            partition,
            leader: (leader != p.leader).then_some(leader),
            isr: (isr != p.isr).then_some(isr),
            replicas: Some(replicas.to_vec()),
            elr: kept(&p.elr),
            last_known_elr: kept(&p.last_known_elr),
        },
        MetadataRecord::PartitionReassignment {
            topic_id,
            partition,
            adding: Vec::new(),
            removing: Vec::new(),
        },
    ]
}

/// Completes every reassignment whose target replicas are all in the ISR
/// and live (the active controller runs this after ISR changes).
pub fn completions(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for t in image.topics.values() {
        for (&partition, p) in &t.partitions {
            if !in_progress(p) {
                continue;
            }
            let target = target(p);
            let caught_up = target
                .iter()
                .all(|r| p.isr.contains(r) && usable_in(image, *r, &[]));
            if caught_up {
                records.extend(finish(t.id, partition, p, &target));
            }
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::image::{BrokerImage, TopicImage};

    fn image_with(p: PartitionImage) -> (MetadataImage, Uuid) {
        let mut image = MetadataImage::empty();
        let id = Uuid::from_u128(1);
        image.topics.insert(
            id,
            TopicImage {
                name: "t".into(),
                id,
                partitions: BTreeMap::from([(0, p)]),
            },
        );
        for b in 1..=4 {
            image.brokers.insert(
                b,
                BrokerImage {
                    id: b,
                    incarnation_id: Uuid::from_u128(b as u128),
                    endpoints: vec![],
                    rack: None,
                    fenced: false,
                },
            );
        }
        (image, id)
    }

    fn partition(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionImage {
        PartitionImage::with(replicas, isr, leader)
    }

    fn apply(image: &mut MetadataImage, records: &[MetadataRecord]) {
        for r in records {
            let next = image.offset + 1;
            image.apply(next, r);
        }
    }

    fn part(image: &MetadataImage, id: Uuid) -> PartitionImage {
        image.topics[&id].partitions[&0].clone()
    }

    #[test]
    fn growing_the_replication_factor_completes_once_the_isr_has_everyone() {
        let (mut image, id) = image_with(partition(&[1], &[1], 1));
        let records = plan(&image, id, 0, &part(&image, id), Some(&[1, 2, 3])).unwrap();
        apply(&mut image, &records);
        let p = part(&image, id);
        assert_eq!(
            (p.replicas.clone(), p.adding_replicas.clone()),
            (vec![1, 2, 3], vec![2, 3])
        );
        assert!(
            completions(&image).is_empty(),
            "2 and 3 are not in the ISR yet"
        );
        apply(
            &mut image,
            &[MetadataRecord::PartitionChange {
                topic_id: id,
                partition: 0,
                leader: None,
                isr: Some(vec![1, 2, 3]),
                replicas: None,
                elr: None,
                last_known_elr: None,
            }],
        );
        let done = completions(&image);
        apply(&mut image, &done);
        let p = part(&image, id);
        assert_eq!(p.replicas, vec![1, 2, 3]);
        assert!(!in_progress(&p));
        assert!(completions(&image).is_empty());
    }

    #[test]
    fn moving_off_the_leader_hands_leadership_over_and_cancel_reverts() {
        let (mut image, id) = image_with(partition(&[1, 2], &[1, 2], 1));
        // Dropping 1 needs no copy: done at once, 2 leads.
        let records = plan(&image, id, 0, &part(&image, id), Some(&[2])).unwrap();
        let mut moved = image.clone();
        apply(&mut moved, &records);
        let p = part(&moved, id);
        assert_eq!(
            (p.replicas.clone(), p.isr.clone(), p.leader),
            (vec![2], vec![2], 2)
        );
        // Moving to 3 and 4 starts a copy, which a cancel undoes.
        let records = plan(&image, id, 0, &part(&image, id), Some(&[3, 4])).unwrap();
        apply(&mut image, &records);
        let p = part(&image, id);
        assert_eq!(
            (p.replicas.clone(), p.removing_replicas.clone()),
            (vec![3, 4, 1, 2], vec![1, 2])
        );
        let cancel = plan(&image, id, 0, &p, None).unwrap();
        apply(&mut image, &cancel);
        let p = part(&image, id);
        assert_eq!((p.replicas.clone(), p.leader), (vec![1, 2], 1));
        assert!(!in_progress(&p));
        assert_eq!(
            plan(&image, id, 0, &p, None),
            Err(ReassignmentError::NoneInProgress)
        );
        assert!(matches!(
            plan(&image, id, 0, &p, Some(&[1, 1])),
            Err(ReassignmentError::InvalidTarget(_))
        ));
        assert!(matches!(
            plan(&image, id, 0, &p, Some(&[9])),
            Err(ReassignmentError::InvalidTarget(_))
        ));
    }
}
