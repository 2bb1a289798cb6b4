//! One transactional id's state (Kafka's TransactionMetadata) and the
//! states a transaction moves through.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use ottla_storage::manager::TopicPartition;

use super::records::TxnLogValue;

pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// Kafka's TransactionState, with its stored ids and its names (as
/// ListTransactions and DescribeTransactions report them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnState {
    const ALL: [Self; 8] = [
        Self::Empty,
        Self::Ongoing,
        Self::PrepareCommit,
        Self::PrepareAbort,
        Self::CompleteCommit,
        Self::CompleteAbort,
        Self::Dead,
        Self::PrepareEpochFence,
    ];

    pub fn id(self) -> i8 {
        Self::ALL.iter().position(|&s| s == self).expect("listed") as i8
    }

    pub fn from_id(id: i8) -> Option<Self> {
        usize::try_from(id)
            .ok()
            .and_then(|i| Self::ALL.get(i))
            .copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::PrepareCommit => "PrepareCommit",
            Self::PrepareAbort => "PrepareAbort",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
            Self::Dead => "Dead",
            Self::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    pub fn is_prepared(self) -> bool {
        matches!(self, Self::PrepareCommit | Self::PrepareAbort)
    }

    /// No transaction is open or completing: a new one may start.
    pub fn is_idle(self) -> bool {
        matches!(
            self,
            Self::Empty | Self::CompleteCommit | Self::CompleteAbort
        )
    }
}

/// Epochs at or past this one cannot be bumped once more and still leave
/// room to fence the producer, so the producer id is rotated (Kafka's rule).
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The producer id before the last transition (differs after a rotation).
    pub previous_producer_id: i64,
    /// With transaction version 2: the id the producer moves to when the
    /// completing transaction exhausted its epochs.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump by InitProducerId (KIP-360 retries);
    /// not stored, as in Kafka.
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// Partitions of the open transaction; while it completes, those whose
    /// marker is still to be written.
    pub partitions: BTreeSet<TopicPartition>,
    /// -1 when no transaction was started.
    pub start_timestamp: i64,
    pub last_update_timestamp: i64,
    /// The client ends transactions with EndTxn v5+ (KIP-890 part 2).
    pub client_tv2: bool,
}

impl TxnMetadata {
    /// A transactional id seen for the first time.
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now: i64) -> Self {
        Self {
            transactional_id: transactional_id.to_string(),
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_timestamp: -1,
            last_update_timestamp: now,
            client_tv2: false,
        }
    }

    pub fn from_log(transactional_id: String, v: TxnLogValue) -> Self {
        Self {
            transactional_id,
            producer_id: v.producer_id,
            previous_producer_id: v.previous_producer_id,
            next_producer_id: v.next_producer_id,
            producer_epoch: v.producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms: v.timeout_ms,
            state: v.state,
            partitions: v.partitions,
            start_timestamp: v.start_timestamp,
            last_update_timestamp: v.last_update_timestamp,
            client_tv2: v.client_transaction_version >= 2,
        }
    }

    pub fn to_log(&self) -> TxnLogValue {
        TxnLogValue {
            producer_id: self.producer_id,
            previous_producer_id: self.previous_producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: self.partitions.clone(),
            last_update_timestamp: self.last_update_timestamp,
            start_timestamp: self.start_timestamp,
            client_transaction_version: if self.client_tv2 { 2 } else { 0 },
        }
    }

    /// The next state, before it is written. Like Kafka's transit metadata,
    /// it remembers the producer id it replaces.
    pub fn transition(&self, state: TxnState, now: i64) -> Self {
        Self {
            state,
            previous_producer_id: self.producer_id,
            last_update_timestamp: now,
            ..self.clone()
        }
    }

    /// InitProducerId from an idle state: bump the epoch (KIP-360 rules when
    /// the producer names its current epoch), or rotate the producer id when
    /// the epochs are exhausted.
    pub fn prepare_init(
        &self,
        timeout_ms: i32,
        expected_epoch: Option<i16>,
        new_producer_id: impl FnOnce() -> Result<i64, ResponseError>,
        now: i64,
    ) -> Result<Self, ResponseError> {
        let mut next = self.transition(TxnState::Empty, now);
        next.timeout_ms = timeout_ms;
        next.partitions.clear();
        next.start_timestamp = -1;
        if is_epoch_exhausted(self.producer_epoch)
            && expected_epoch.is_none_or(|e| e == self.producer_epoch)
        {
            next.producer_id = new_producer_id()?;
            next.producer_epoch = 0;
            next.last_producer_epoch = if expected_epoch.is_some() {
                self.producer_epoch
            } else {
                NO_PRODUCER_EPOCH
            };
            return Ok(next);
        }
        let bumped = self.producer_epoch + 1;
        match expected_epoch {
            None => {
                next.producer_epoch = bumped;
                next.last_producer_epoch = NO_PRODUCER_EPOCH;
            }
            Some(e) if self.producer_epoch == NO_PRODUCER_EPOCH || e == self.producer_epoch => {
                next.producer_epoch = bumped;
                next.last_producer_epoch = self.producer_epoch;
            }
            // A retry of a bump that succeeded: same answer again.
            Some(e) if e == self.last_producer_epoch => {}
            Some(_) => return Err(ResponseError::ProducerFenced),
        }
        Ok(next)
    }

    /// Fences the current producer: one epoch up (unless at the maximum).
    pub fn prepare_fence(&self, now: i64) -> Self {
        let mut next = self.transition(TxnState::PrepareAbort, now);
        if self.producer_epoch < i16::MAX {
            next.producer_epoch += 1;
        }
        next.last_producer_epoch = NO_PRODUCER_EPOCH;
        next
    }

    /// The transaction is over once every marker is written. With
    /// transaction version 2 the producer moves to its next id when one was
    /// allocated.
    pub fn prepare_complete(&self, now: i64) -> Self {
        let state = if self.state == TxnState::PrepareCommit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        let mut next = self.transition(state, now);
        if self.client_tv2 && self.next_producer_id != NO_PRODUCER_ID {
            next.producer_id = self.next_producer_id;
            next.producer_epoch = 0;
        }
        next.next_producer_id = NO_PRODUCER_ID;
        next.partitions.clear();
        next
    }

    /// The producer id and epoch the client continues with once the
    /// transaction is complete.
    pub fn producer_after_completion(&self) -> (i64, i16) {
        if self.state.is_prepared() && self.client_tv2 && self.next_producer_id != NO_PRODUCER_ID {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(epoch: i16, last: i16) -> TxnMetadata {
        TxnMetadata {
            producer_epoch: epoch,
            last_producer_epoch: last,
            ..TxnMetadata::new("t", 7, 1000, 0)
        }
    }

    #[test]
    fn state_ids_and_names_are_kafkas() {
        assert_eq!(TxnState::PrepareAbort.id(), 3);
        assert_eq!(TxnState::from_id(5), Some(TxnState::CompleteAbort));
        assert_eq!(TxnState::from_id(8), None);
        assert_eq!(
            TxnState::from_name("CompleteCommit"),
            Some(TxnState::CompleteCommit)
        );
        assert_eq!(TxnState::from_name("Nope"), None);
    }

    #[test]
    fn init_bumps_and_honours_kip_360_retries() {
        let none = || Err(ResponseError::UnknownServerError);
        let fresh = meta(NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH);
        let next = fresh.prepare_init(5, None, none, 1).unwrap();
        assert_eq!((next.producer_epoch, next.timeout_ms), (0, 5));
        // Naming the current epoch bumps and remembers it.
        let next = meta(3, -1).prepare_init(5, Some(3), none, 1).unwrap();
        assert_eq!((next.producer_epoch, next.last_producer_epoch), (4, 3));
        // A retry naming the previous epoch gets the same epoch again.
        let next = meta(4, 3).prepare_init(5, Some(3), none, 1).unwrap();
        assert_eq!(next.producer_epoch, 4);
        // Anything else is fenced.
        assert_eq!(
            meta(4, 3).prepare_init(5, Some(1), none, 1),
            Err(ResponseError::ProducerFenced)
        );
    }

    #[test]
    fn exhausted_epochs_rotate_the_producer_id() {
        let old = meta(i16::MAX - 1, -1);
        let next = old.prepare_init(5, None, || Ok(99), 1).unwrap();
        assert_eq!((next.producer_id, next.producer_epoch), (99, 0));
        assert_eq!(next.previous_producer_id, 7);
    }

    #[test]
    fn completion_moves_tv2_producers_to_their_next_id() {
        let mut m = meta(i16::MAX, -1);
        m.state = TxnState::PrepareCommit;
        m.client_tv2 = true;
        m.next_producer_id = 50;
        m.partitions.insert(TopicPartition::new("t", 0));
        assert_eq!(m.producer_after_completion(), (50, 0));
        let done = m.prepare_complete(9);
        assert_eq!(done.state, TxnState::CompleteCommit);
        assert_eq!((done.producer_id, done.producer_epoch), (50, 0));
        assert_eq!(done.previous_producer_id, 7);
        assert!(done.partitions.is_empty());
    }
}
