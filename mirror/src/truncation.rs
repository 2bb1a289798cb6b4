//! Last-Mirrored-Epoch (LME) truncation: where a PREPARING partition cuts its
//! log before it mirrors, so that what stays is a prefix of the source's log.
//!
//! The source's answer to LastMirroredEpochs is the greatest leader epoch it
//! mirrored *from this cluster* (failback: the old destination answers). The
//! rules, from the seeds:
//! - the source does not know the API, or answers -1 (it never mirrored this
//!   partition): truncate everything and copy from scratch;
//! - otherwise truncate at the start offset of the first local epoch beyond
//!   the LME; with no such epoch the whole log is shared and stays.
//!
//! Decisions the seeds leave open, taken the conservative way (truncating too
//! much costs a re-copy, too little a diverged log):
//! - a non-empty log with an empty epoch cache cannot show what it shares
//!   with the source: everything goes;
//! - a cut at or below the log start offset leaves nothing: everything goes
//!   (the log then restarts at the source's offsets);
//! - an answer below -1 is not an epoch: the lookup fails instead of guessing.
//!
//! The normal Fetch divergence check (LastFetchedEpoch) truncates further
//! afterwards if the source's epoch ends earlier than ours.

use ottla_protocol::mirror::states::NO_EPOCH;
use ottla_storage::epoch_cache::EpochEntry;
use thiserror::Error;

/// What the source said about a partition's last mirrored epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceLastMirroredEpoch {
    /// The source does not serve LastMirroredEpochs (Apache Kafka, an older
    /// Ottla): it cannot have mirrored from us.
    ApiUnsupported,
    /// -1: the source never mirrored this partition.
    NeverMirrored,
    /// The greatest epoch the source mirrored from us.
    Epoch(i32),
}

/// A partition-level answer that is no LME.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum LastMirroredEpochError {
    /// The source answered with an error (retriable or not: the caller's
    /// retry policy decides).
    #[error("the source answered LastMirroredEpochs with error code {0}")]
    Source(i16),
    #[error("the source answered LastMirroredEpochs with epoch {0}, which is not an epoch")]
    InvalidEpoch(i32),
}

impl SourceLastMirroredEpoch {
    /// Interprets one partition of a LastMirroredEpochs response.
    pub fn from_response(
        error_code: i16,
        last_mirrored_epoch: i32,
    ) -> Result<Self, LastMirroredEpochError> {
        if error_code != 0 {
            return Err(LastMirroredEpochError::Source(error_code));
        }
        match last_mirrored_epoch {
            NO_EPOCH => Ok(Self::NeverMirrored),
            epoch if epoch >= 0 => Ok(Self::Epoch(epoch)),
            invalid => Err(LastMirroredEpochError::InvalidEpoch(invalid)),
        }
    }
}

/// Where to cut the local log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truncation {
    /// Remove every record; mirror from the source's log start.
    Everything,
    /// Remove the records at and after this offset.
    From(i64),
    /// The log is already a prefix of the source's.
    Nothing,
}

/// The local log as truncation sees it.
#[derive(Debug, Clone, Copy)]
pub struct LocalLog<'a> {
    /// The leader-epoch cache: epochs and start offsets, both increasing.
    pub epochs: &'a [EpochEntry],
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// Where PREPARING truncates, given the source's answer and the local log.
pub fn lme_truncation(source: SourceLastMirroredEpoch, log: LocalLog<'_>) -> Truncation {
    let lme = match source {
        SourceLastMirroredEpoch::ApiUnsupported | SourceLastMirroredEpoch::NeverMirrored => {
            return Truncation::Everything
        }
        SourceLastMirroredEpoch::Epoch(lme) => lme,
    };
    if log.log_end_offset <= log.log_start_offset {
        return Truncation::Nothing;
    }
    if log.epochs.is_empty() {
        return Truncation::Everything;
    }
    let first_beyond = log.epochs.partition_point(|entry| entry.epoch <= lme);
    match log.epochs.get(first_beyond) {
        None => Truncation::Nothing,
        Some(entry) if entry.start_offset <= log.log_start_offset => Truncation::Everything,
        Some(entry) if entry.start_offset >= log.log_end_offset => Truncation::Nothing,
        Some(entry) => Truncation::From(entry.start_offset),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn entries(pairs: &[(i32, i64)]) -> Vec<EpochEntry> {
        pairs
            .iter()
            .map(|&(epoch, start_offset)| EpochEntry {
                epoch,
                start_offset,
            })
            .collect()
    }

    fn log(epochs: &[EpochEntry], start: i64, end: i64) -> LocalLog<'_> {
        LocalLog {
            epochs,
            log_start_offset: start,
            log_end_offset: end,
        }
    }

    #[test]
    fn unsupported_api_or_no_lme_truncates_everything() {
        let epochs = entries(&[(0, 0), (3, 50)]);
        for source in [
            SourceLastMirroredEpoch::ApiUnsupported,
            SourceLastMirroredEpoch::NeverMirrored,
        ] {
            assert_eq!(
                lme_truncation(source, log(&epochs, 0, 100)),
                Truncation::Everything
            );
        }
    }

    #[test]
    fn cuts_at_the_first_epoch_beyond_the_lme() {
        // Epochs 0..=3 mirrored from the source, 5 and 6 written here after
        // failover; the source says it mirrored up to 3.
        let epochs = entries(&[(0, 0), (2, 40), (3, 70), (5, 90), (6, 120)]);
        let at = |lme| lme_truncation(SourceLastMirroredEpoch::Epoch(lme), log(&epochs, 0, 150));
        assert_eq!(at(3), Truncation::From(90));
        // An LME between cached epochs: the first epoch beyond it.
        assert_eq!(at(4), Truncation::From(90));
        assert_eq!(at(1), Truncation::From(40));
        assert_eq!(at(6), Truncation::Nothing);
        assert_eq!(at(9), Truncation::Nothing);
    }

    #[test]
    fn a_cut_at_or_below_the_log_start_removes_everything() {
        let epochs = entries(&[(4, 30), (5, 60)]);
        let source = SourceLastMirroredEpoch::Epoch(2);
        assert_eq!(
            lme_truncation(source, log(&epochs, 30, 80)),
            Truncation::Everything
        );
    }

    #[test]
    fn a_log_without_epochs_cannot_show_what_it_shares() {
        let source = SourceLastMirroredEpoch::Epoch(2);
        assert_eq!(
            lme_truncation(source, log(&[], 0, 10)),
            Truncation::Everything
        );
        assert_eq!(lme_truncation(source, log(&[], 5, 5)), Truncation::Nothing);
    }

    #[test]
    fn responses_are_interpreted() {
        use SourceLastMirroredEpoch::*;
        assert_eq!(
            SourceLastMirroredEpoch::from_response(0, -1),
            Ok(NeverMirrored)
        );
        assert_eq!(SourceLastMirroredEpoch::from_response(0, 7), Ok(Epoch(7)));
        assert_eq!(
            SourceLastMirroredEpoch::from_response(0, -2),
            Err(LastMirroredEpochError::InvalidEpoch(-2))
        );
        // COORDINATOR_LOAD_IN_PROGRESS is not an answer.
        assert_eq!(
            SourceLastMirroredEpoch::from_response(14, -1),
            Err(LastMirroredEpochError::Source(14))
        );
    }

    proptest! {
        /// Whatever the answer, what stays holds only epochs <= LME and the
        /// cut is inside the log.
        #[test]
        fn kept_records_never_carry_an_epoch_beyond_the_lme(
            steps in proptest::collection::vec((1i32..4, 1i64..50), 1..8),
            start in 0i64..20,
            lme in -1i32..30,
        ) {
            let mut epochs = Vec::new();
            let (mut epoch, mut offset) = (0, start);
            for (epoch_step, offset_step) in steps {
                epochs.push(EpochEntry { epoch, start_offset: offset });
                epoch += epoch_step;
                offset += offset_step;
            }
            let end = offset;
            let source = if lme < 0 { SourceLastMirroredEpoch::NeverMirrored } else { SourceLastMirroredEpoch::Epoch(lme) };
            let kept_end = match lme_truncation(source, log(&epochs, start, end)) {
                Truncation::Everything => start,
                Truncation::Nothing => end,
                Truncation::From(offset) => {
                    prop_assert!(offset > start && offset < end);
                    offset
                }
            };
            for entry in epochs.iter().filter(|e| e.start_offset < kept_end) {
                prop_assert!(entry.epoch <= lme, "kept epoch {} beyond lme {}", entry.epoch, lme);
            }
        }
    }
}
