//! One partition's change of leader, ISR and eligible leader replicas, as
//! Kafka's PartitionChangeBuilder makes it: every path that moves an ISR
//! (fencing, AlterPartition, elections, reassignments) goes through
//! [`PartitionChange`], so the ELR rules of KIP-966 hold everywhere.
//!
//! The ELR rules, with the feature on:
//! - While the ISR is at least min.insync.replicas, the ELR is empty: the
//!   high watermark may move, so a replica that leaves may miss records.
//! - Below it the high watermark stands still (the broker's rule), so the
//!   replicas that leave the ISR still hold every committed record: they
//!   join the ELR, unless they left by an unclean shutdown, which may have
//!   lost an unflushed tail.
//! - The ISR may become empty. A partition without an ISR elects an ELR
//!   member, which becomes the ISR, so it comes back without an unclean
//!   election.
//! - When the ISR and the ELR are both empty, the last leader is kept
//!   (`last_known_elr`) and leads again once usable: after a whole cluster
//!   lost power no replica is clean, and the last leader has the most data.

use uuid::Uuid;

use crate::features::elr_enabled;
use crate::image::{MetadataImage, PartitionImage, TopicImage};
use crate::records::{MetadataRecord, CONFIG_RESOURCE_BROKER, CONFIG_RESOURCE_TOPIC};

pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";

/// Whether an image tracks ELRs, and each topic's effective min ISR.
#[derive(Debug, Clone, Copy)]
pub struct MinIsr<'a> {
    image: &'a MetadataImage,
    /// The static `min.insync.replicas` of this node, used when neither the
    /// topic nor the cluster-level dynamic config sets it.
    fallback: i32,
}

impl<'a> MinIsr<'a> {
    pub fn new(image: &'a MetadataImage, fallback: i32) -> Self {
        Self { image, fallback }
    }

    /// The min ISR the ELR of `topic`'s partition `p` follows, or None when
    /// the ELR feature is off.
    pub fn of(&self, topic: &TopicImage, p: &PartitionImage) -> Option<usize> {
        self.of_topic(topic).of(p)
    }

    /// `topic`'s min ISR, to look up once for all its partitions. As
    /// Kafka: the topic's config, else the cluster's, else this node's.
    pub fn of_topic(&self, topic: &TopicImage) -> TopicMinIsr {
        if !elr_enabled(self.image) {
            return TopicMinIsr(None);
        }
        let configured = |kind, name: &str| {
            self.image
                .configs_of(kind, name)
                .and_then(|c| c.get(MIN_INSYNC_REPLICAS))
                .and_then(|v| v.parse::<i32>().ok())
        };
        let min = configured(CONFIG_RESOURCE_TOPIC, &topic.name)
            .or_else(|| configured(CONFIG_RESOURCE_BROKER, ""))
            .unwrap_or(self.fallback)
            .max(1) as usize;
        TopicMinIsr(Some(min))
    }
}

/// A topic's min ISR, None when the ELR feature is off.
#[derive(Debug, Clone, Copy)]
pub struct TopicMinIsr(Option<usize>);

impl TopicMinIsr {
    /// The min ISR of partition `p`, capped by its replication factor.
    pub fn of(self, p: &PartitionImage) -> Option<usize> {
        self.0.map(|min| min.min(p.replicas.len().max(1)))
    }
}

/// How a new leader may be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Election {
    /// From the ISR (or the ELR when the ISR is empty), keeping a leader
    /// that still qualifies.
    Online,
    /// As online, else any usable replica: data the ISR had may be lost.
    Unclean,
}

/// A change being planned for one partition.
pub struct PartitionChange<'a> {
    topic_id: Uuid,
    partition: i32,
    current: &'a PartitionImage,
    target_isr: Vec<i32>,
    target_replicas: Option<Vec<i32>>,
    election: Election,
    /// The partition's min ISR when the ELR feature is on.
    min_isr: Option<usize>,
    unclean_shutdown: Option<i32>,
}

impl<'a> PartitionChange<'a> {
    pub fn new(
        topic_id: Uuid,
        partition: i32,
        current: &'a PartitionImage,
        min_isr: Option<usize>,
    ) -> Self {
        Self {
            topic_id,
            partition,
            current,
            target_isr: current.isr.clone(),
            target_replicas: None,
            election: Election::Online,
            min_isr,
            unclean_shutdown: None,
        }
    }

    pub fn isr(mut self, isr: Vec<i32>) -> Self {
        self.target_isr = isr;
        self
    }

    pub fn replicas(mut self, replicas: Vec<i32>) -> Self {
        self.target_replicas = Some(replicas);
        self
    }

    pub fn election(mut self, election: Election) -> Self {
        self.election = election;
        self
    }

    /// `broker` came back from an unclean shutdown: it leaves the ISR and
    /// the ELR, and may not lead.
    pub fn unclean_shutdown(mut self, broker: i32) -> Self {
        self.target_isr.retain(|r| *r != broker);
        self.unclean_shutdown = Some(broker);
        self
    }

    /// The record making the change, or None when nothing changes.
    /// `acceptable` says which brokers may lead (registered, unfenced).
    pub fn build(self, acceptable: impl Fn(i32) -> bool) -> Option<MetadataRecord> {
        let p = self.current;
        let acceptable = |r: i32| Some(r) != self.unclean_shutdown && acceptable(r);
        let replicas = self.target_replicas.as_deref().unwrap_or(&p.replicas);
        let mut isr = self.target_isr.clone();
        let (mut elr, lke_before) = (self.target_elr(&isr), &p.last_known_elr);
        // The election.
        let valid = |r: i32, isr: &[i32], elr: &[i32]| {
            (isr.contains(&r) || (isr.is_empty() && elr.contains(&r))) && acceptable(r)
        };
        let mut unclean = false;
        let leader = if p.leader >= 0 && replicas.contains(&p.leader) && valid(p.leader, &isr, &elr)
        {
            p.leader
        } else if let Some(r) = replicas.iter().copied().find(|r| valid(*r, &isr, &elr)) {
            r
        } else if let Some(r) = self.last_known_leader(&isr, &elr, &acceptable) {
            unclean = true;
            r
        } else if self.election == Election::Unclean {
            match replicas.iter().copied().find(|r| acceptable(*r)) {
                Some(r) => {
                    unclean = true;
                    r
                }
                None => -1,
            }
        } else {
            -1
        };
        let leader_changes = leader != p.leader;
        if leader_changes && elr.contains(&leader) {
            // Elected from the ELR: it alone is in sync now.
            isr = vec![leader];
            elr.retain(|r| *r != leader);
        }
        if unclean {
            isr = vec![leader];
        }
        if unclean || self.min_isr.is_none() {
            elr.clear();
        }
        // Without the ELR the last ISR member stays in the ISR when it goes,
        // so it can lead again without an unclean election.
        let isr_changes = isr != p.isr && (!isr.is_empty() || self.min_isr.is_some());
        let new_leader = if leader_changes { leader } else { p.leader };
        let last_known_elr = if self.min_isr.is_none() {
            // The feature is off: a leftover is dropped.
            (!lke_before.is_empty()).then(Vec::new)
        } else {
            if isr_changes && isr.is_empty() && p.leader >= 0 && lke_before != &[p.leader] {
                Some(vec![p.leader])
            } else if new_leader >= 0 && !lke_before.is_empty() {
                Some(Vec::new())
            } else {
                None
            }
        };
        let record = MetadataRecord::PartitionChange {
            topic_id: self.topic_id,
            partition: self.partition,
            leader: leader_changes.then_some(leader),
            isr: isr_changes.then_some(isr),
            replicas: self.target_replicas.filter(|r| *r != p.replicas),
            elr: (elr != p.elr).then_some(elr),
            last_known_elr,
        };
        match &record {
            MetadataRecord::PartitionChange {
                leader: None,
                isr: None,
                replicas: None,
                elr: None,
                last_known_elr: None,
                ..
            } => None,
            _ => Some(record),
        }
    }

    /// Kafka's maybePopulateTargetElr: below min ISR, the replicas that were
    /// in the ISR or the ELR and are not in the new ISR (nor back from an
    /// unclean shutdown); at or above it, none.
    fn target_elr(&self, isr: &[i32]) -> Vec<i32> {
        let p = self.current;
        let Some(min_isr) = self.min_isr else {
            return p.elr.clone();
        };
        if isr.len() >= min_isr {
            return Vec::new();
        }
        let mut elr: Vec<i32> = p.elr.iter().chain(&p.isr).copied().collect();
        elr.retain(|r| !isr.contains(r) && Some(*r) != self.unclean_shutdown);
        elr.sort_unstable();
        elr.dedup();
        elr
    }

    /// The last leader, when the ISR and the ELR are both empty and it may
    /// lead (Kafka elects it even while fenced; here it waits until it is
    /// usable, as it is when the broker's registration is unfenced).
    fn last_known_leader(
        &self,
        isr: &[i32],
        elr: &[i32],
        acceptable: &impl Fn(i32) -> bool,
    ) -> Option<i32> {
        match (
            self.min_isr,
            isr,
            elr,
            self.current.last_known_elr.as_slice(),
        ) {
            (Some(_), [], [], [last]) if acceptable(*last) => Some(*last),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(leader: i32, isr: &[i32], elr: &[i32], lke: &[i32]) -> PartitionImage {
        PartitionImage {
            elr: elr.to_vec(),
            last_known_elr: lke.to_vec(),
            ..PartitionImage::with(&[1, 2, 3], isr, leader)
        }
    }

    type Fields = (
        Option<i32>,
        Option<Vec<i32>>,
        Option<Vec<i32>>,
        Option<Vec<i32>>,
    );

    fn fields(record: Option<MetadataRecord>) -> Option<Fields> {
        record.map(|r| match r {
            MetadataRecord::PartitionChange {
                leader,
                isr,
                elr,
                last_known_elr,
                ..
            } => (leader, isr, elr, last_known_elr),
            other => panic!("unexpected {other:?}"),
        })
    }

    fn change(p: &PartitionImage, min_isr: Option<usize>) -> PartitionChange<'_> {
        PartitionChange::new(Uuid::from_u128(1), 0, p, min_isr)
    }

    fn up(down: &[i32]) -> impl Fn(i32) -> bool + '_ {
        move |b| !down.contains(&b)
    }

    #[test]
    fn replicas_that_leave_an_isr_below_min_isr_become_eligible() {
        // min ISR 2: losing 3 keeps the ISR at 2, no ELR.
        let p = part(1, &[1, 2, 3], &[], &[]);
        assert_eq!(
            fields(change(&p, Some(2)).isr(vec![1, 2]).build(up(&[3]))),
            Some((None, Some(vec![1, 2]), None, None))
        );
        // Then losing 2 takes the ISR below 2: 2 joins the ELR.
        let p = part(1, &[1, 2], &[], &[]);
        assert_eq!(
            fields(change(&p, Some(2)).isr(vec![1]).build(up(&[2, 3]))),
            Some((None, Some(vec![1]), Some(vec![2]), None))
        );
        // And the leader going empties the ISR: no leader, both eligible,
        // and the last leader remembered.
        let p = part(1, &[1], &[2], &[]);
        assert_eq!(
            fields(change(&p, Some(2)).isr(vec![]).build(up(&[1, 2, 3]))),
            Some((Some(-1), Some(vec![]), Some(vec![1, 2]), Some(vec![1])))
        );
    }

    #[test]
    fn an_empty_isr_elects_from_the_elr() {
        let p = part(-1, &[], &[1, 2], &[1]);
        // Only 2 is back: it leads and alone makes the ISR.
        assert_eq!(
            fields(change(&p, Some(2)).build(up(&[1, 3]))),
            Some((Some(2), Some(vec![2]), Some(vec![1]), Some(vec![])))
        );
        // 3 was never eligible: it may not lead, even when alone.
        assert_eq!(fields(change(&p, Some(2)).build(up(&[1, 2]))), None);
        // An unclean election still may.
        assert_eq!(
            fields(
                change(&p, Some(2))
                    .election(Election::Unclean)
                    .build(up(&[1, 2]))
            ),
            Some((Some(3), Some(vec![3]), Some(vec![]), Some(vec![])))
        );
    }

    #[test]
    fn an_unclean_shutdown_leaves_the_elr() {
        let p = part(-1, &[], &[1, 2], &[1]);
        assert_eq!(
            fields(
                change(&p, Some(2))
                    .unclean_shutdown(2)
                    .build(up(&[1, 2, 3]))
            ),
            Some((None, None, Some(vec![1]), None))
        );
        // A replica in the ISR loses its place too, and does not join the ELR.
        let p = part(1, &[1, 2], &[], &[]);
        assert_eq!(
            fields(change(&p, Some(2)).unclean_shutdown(2).build(up(&[2, 3]))),
            Some((None, Some(vec![1]), None, None))
        );
    }

    #[test]
    fn the_last_known_leader_leads_once_nothing_else_can() {
        // Every replica lost power: no ELR, the last leader is remembered.
        let p = part(-1, &[], &[], &[1]);
        assert_eq!(fields(change(&p, Some(2)).build(up(&[1, 2, 3]))), None);
        assert_eq!(fields(change(&p, Some(2)).build(up(&[1]))), None);
        assert_eq!(
            fields(change(&p, Some(2)).build(up(&[2, 3]))),
            Some((Some(1), Some(vec![1]), None, Some(vec![])))
        );
    }

    #[test]
    fn at_min_isr_the_elr_empties() {
        let p = part(2, &[2], &[1], &[]);
        assert_eq!(
            fields(change(&p, Some(2)).isr(vec![2, 3]).build(up(&[]))),
            Some((None, Some(vec![2, 3]), Some(vec![]), None))
        );
        // A lower min ISR alone clears it too (min.insync.replicas changed).
        assert_eq!(
            fields(change(&p, Some(1)).build(up(&[]))),
            Some((None, None, Some(vec![]), None))
        );
    }

    #[test]
    fn without_the_feature_the_last_isr_member_stays() {
        let p = part(1, &[1], &[], &[]);
        assert_eq!(
            fields(change(&p, None).isr(vec![]).build(up(&[1]))),
            Some((Some(-1), None, None, None))
        );
        let p = part(-1, &[1], &[], &[]);
        assert_eq!(
            fields(change(&p, None).build(up(&[]))),
            Some((Some(1), None, None, None))
        );
        // And a leftover ELR is dropped.
        let p = part(1, &[1], &[2], &[3]);
        assert_eq!(
            fields(change(&p, None).build(up(&[]))),
            Some((None, None, Some(vec![]), Some(vec![])))
        );
    }

    #[test]
    fn min_isr_comes_from_the_topic_then_the_cluster_then_the_node_capped_by_replicas() {
        let mut image = MetadataImage::empty();
        let topic = TopicImage {
            name: "t".into(),
            id: Uuid::from_u128(1),
            partitions: Default::default(),
        };
        let p = part(1, &[1], &[], &[]);
        let set = |image: &mut MetadataImage, kind, name: &str, v: &str| {
            image.apply(
                0,
                &MetadataRecord::Config {
                    resource_type: kind,
                    resource_name: name.into(),
                    name: MIN_INSYNC_REPLICAS.into(),
                    value: Some(v.into()),
                },
            )
        };
        assert_eq!(MinIsr::new(&image, 2).of(&topic, &p), Some(2));
        set(&mut image, CONFIG_RESOURCE_BROKER, "", "1");
        assert_eq!(MinIsr::new(&image, 2).of(&topic, &p), Some(1));
        set(&mut image, CONFIG_RESOURCE_TOPIC, "t", "5");
        assert_eq!(MinIsr::new(&image, 2).of(&topic, &p), Some(3));
        image.apply(
            0,
            &MetadataRecord::FeatureLevel {
                name: crate::features::ELR_VERSION.into(),
                level: 0,
            },
        );
        assert_eq!(MinIsr::new(&image, 2).of(&topic, &p), None);
    }
}
