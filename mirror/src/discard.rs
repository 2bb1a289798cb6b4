//! No silent discard: re-adding a stopped topic truncates its log before it
//! mirrors again (see [`crate::truncation`]). With a last mirrored epoch from
//! the source that cut is the KIP's failback rule; without one (the source
//! does not serve LastMirroredEpochs, or never mirrored from this cluster)
//! everything written here since failover would go, so it needs the
//! operator's explicit confirmation.

use std::fmt;

use crate::truncation::{lme_truncation, LocalLog, SourceLastMirroredEpoch, Truncation};

/// The CLI option and topic config that confirm a discard.
pub const DISCARD_LOCAL_WRITES_OPTION: &str = "--discard-local-writes";

/// The records PREPARING would remove from `log` because the source cannot
/// tell what it shares with this cluster: 0 when the source answered an
/// epoch (its cut is the failback rule, not a guess) or the log is empty.
pub fn unconfirmed_discard(source: SourceLastMirroredEpoch, log: LocalLog<'_>) -> i64 {
    match source {
        SourceLastMirroredEpoch::Epoch(_) => 0,
        SourceLastMirroredEpoch::ApiUnsupported | SourceLastMirroredEpoch::NeverMirrored => {
            match lme_truncation(source, log) {
                Truncation::Everything => (log.log_end_offset - log.log_start_offset).max(0),
                Truncation::From(offset) => (log.log_end_offset - offset).max(0),
                Truncation::Nothing => 0,
            }
        }
    }
}

/// Why a re-add was refused: per partition, the records it would discard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscardRefusal {
    pub topic: String,
    pub source: SourceLastMirroredEpoch,
    /// `(partition, records)`, only partitions that would lose records.
    pub partitions: Vec<(i32, i64)>,
}

impl DiscardRefusal {
    /// A refusal if any partition would lose records, else `None`.
    pub fn of(
        topic: &str,
        source: SourceLastMirroredEpoch,
        partitions: impl IntoIterator<Item = (i32, i64)>,
    ) -> Option<Self> {
        let mut partitions: Vec<(i32, i64)> =
            partitions.into_iter().filter(|(_, n)| *n > 0).collect();
        partitions.sort_unstable();
        (!partitions.is_empty()).then(|| Self {
            topic: topic.to_string(),
            source,
            partitions,
        })
    }

    pub fn records(&self) -> i64 {
        self.partitions.iter().map(|(_, n)| n).sum()
    }
}

impl fmt::Display for DiscardRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.source {
            SourceLastMirroredEpoch::ApiUnsupported => "does not serve LastMirroredEpochs",
            _ => "never mirrored this topic from this cluster",
        };
        let each: Vec<String> = self
            .partitions
            .iter()
            .map(|(p, n)| format!("{}-{p}: {n}", self.topic))
            .collect();
        write!(
            f,
            "Mirroring topic '{}' again would discard {} records of this cluster's log ({}): \
             the source {why}, so it cannot tell which of them it has; whatever was written \
             here since failover would be lost. Re-add with {DISCARD_LOCAL_WRITES_OPTION} to \
             discard them.",
            self.topic,
            self.records(),
            each.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use ottla_storage::epoch_cache::EpochEntry;

    use super::*;

    fn log(epochs: &[EpochEntry], start: i64, end: i64) -> LocalLog<'_> {
        LocalLog {
            epochs,
            log_start_offset: start,
            log_end_offset: end,
        }
    }

    #[test]
    fn without_an_lme_every_local_record_counts() {
        let epochs = [
            EpochEntry {
                epoch: 0,
                start_offset: 0,
            },
            EpochEntry {
                epoch: 3,
                start_offset: 70,
            },
        ];
        for source in [
            SourceLastMirroredEpoch::ApiUnsupported,
            SourceLastMirroredEpoch::NeverMirrored,
        ] {
            assert_eq!(unconfirmed_discard(source, log(&epochs, 10, 100)), 90);
            assert_eq!(unconfirmed_discard(source, log(&epochs, 100, 100)), 0);
            assert_eq!(unconfirmed_discard(source, log(&[], 0, 0)), 0);
        }
    }

    #[test]
    fn an_lme_cut_is_failback_not_a_guess() {
        let epochs = [EpochEntry {
            epoch: 5,
            start_offset: 0,
        }];
        assert_eq!(
            unconfirmed_discard(SourceLastMirroredEpoch::Epoch(2), log(&epochs, 0, 50)),
            0
        );
    }

    #[test]
    fn the_refusal_names_every_partition_and_the_total() {
        let refusal = DiscardRefusal::of(
            "orders",
            SourceLastMirroredEpoch::ApiUnsupported,
            [(1, 20), (0, 100), (2, 0)],
        )
        .unwrap();
        assert_eq!(refusal.partitions, vec![(0, 100), (1, 20)]);
        assert_eq!(refusal.records(), 120);
        let text = refusal.to_string();
        assert!(text.contains("discard 120 records"), "{text}");
        assert!(text.contains("orders-0: 100, orders-1: 20"), "{text}");
        assert!(text.contains("does not serve LastMirroredEpochs"), "{text}");
        assert!(text.contains(DISCARD_LOCAL_WRITES_OPTION), "{text}");
        assert!(!text.contains("orders-2"), "{text}");
    }

    #[test]
    fn nothing_to_lose_is_no_refusal() {
        assert_eq!(
            DiscardRefusal::of("t", SourceLastMirroredEpoch::NeverMirrored, [(0, 0)]),
            None
        );
    }
}
