//! One share partition's delivery state (KIP-932's SharePartition): which
//! records of a topic partition a share group has delivered, to whom, how
//! often, and which are done with.
//!
//! The window `[start, end)` holds every offset in flight: each is
//! available again, acquired by a member under a time lock, acknowledged, or
//! archived (rejected, delivered too often, or not a record at all). Offsets
//! from `end` on have never been handed out. The start moves past finished
//! offsets only, so an unacknowledged record is never skipped.
//!
//! State is kept per range of offsets with one state, split where an
//! acknowledgement or a partial acquisition cuts one, as Kafka keeps its
//! in-flight batches with per-offset state inside them.
//!
//! A group with a dead-letter queue (KIP-1191) archives rejected records,
//! and those delivered too often, in two steps: they are *archiving* until
//! the broker has written them to the queue (`take_dead_letters`,
//! `dead_lettered`); the start does not pass them before.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use crate::persisted::{StateBatch, ACKNOWLEDGED, ARCHIVED, ARCHIVING, AVAILABLE};

/// How a member settles a record (ShareFetch and ShareAcknowledge's
/// AcknowledgeTypes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckType {
    /// Not a record the member could see (a compacted offset, a marker).
    Gap,
    Accept,
    /// Give it back, to be delivered again.
    Release,
    /// Never deliver it again.
    Reject,
    /// Keep it, with its acquisition lock restarted (KIP-1222).
    Renew,
}

impl AckType {
    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            0 => Some(Self::Gap),
            1 => Some(Self::Accept),
            2 => Some(Self::Release),
            3 => Some(Self::Reject),
            4 => Some(Self::Renew),
            _ => None,
        }
    }
}

/// How a fetch counts the records it may acquire (ShareFetch v2's
/// ShareAcquireMode, KIP-1206).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcquireMode {
    /// Whole record batches: the last batch started is taken whole, even
    /// past the fetch's maximum (Kafka's default, and v1's only mode). A
    /// run of acquired records is cut at the first batch that starts
    /// `batch_size` or more offsets after it (ShareFetch's BatchSize), as
    /// Kafka hands them out.
    BatchOptimized { batch_size: i64 },
    /// The fetch's maximum exactly, a batch split if need be.
    RecordLimit,
}

/// The group's delivery limits (`group.share.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryLimits {
    /// How long a member holds acquired records before they are released.
    pub record_lock_duration_ms: i64,
    /// Deliveries after which a released record is archived.
    pub delivery_count_limit: i16,
    /// Offsets in flight at most (`group.share.partition.max.record.locks`).
    pub max_in_flight: i64,
    /// Whether records archived for a rejection or the delivery limit go
    /// to the group's dead-letter queue first (share.version 2 and
    /// `errors.deadletterqueue.topic.name` set).
    pub dead_letter_queue: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Available,
    Acquired {
        member: Arc<str>,
        expires_at: i64,
    },
    Acknowledged,
    /// Bound for the dead-letter queue; `sending` once handed to the
    /// broker to write.
    Archiving {
        sending: bool,
    },
    Archived,
}

#[derive(Debug, Clone)]
struct Span {
    /// Inclusive.
    last: i64,
    state: State,
    deliveries: i16,
}

/// A run of acquired offsets handed to a member (ShareFetch's
/// AcquiredRecords).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    pub first: i64,
    pub last: i64,
    pub delivery_count: i16,
}

/// A record batch as read from the log: its offsets, and whether it is
/// never delivered (a transaction marker, or under read_committed an
/// aborted transaction's batch): its offsets are archived at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchedBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub skip: bool,
}

/// Archiving offsets to write to the dead-letter queue, and how often
/// they were delivered (which says why: at the delivery limit, else
/// rejected).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetters {
    pub first: i64,
    pub last: i64,
    pub delivery_count: i16,
}

/// A share partition's offsets for describing it (DescribeShareGroupOffsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: i64,
    pub end: i64,
    pub acquired: i64,
}

#[derive(Debug)]
pub struct SharePartition {
    start: i64,
    end: i64,
    /// Covers `[start, end)` exactly, keyed by each span's first offset.
    spans: BTreeMap<i64, Span>,
    /// Offsets acquired now, and the earliest lock expiry among them (may
    /// be early, never late: a tick with nothing due rescans once).
    acquired: i64,
    next_expiry: i64,
    /// Set when offsets become archiving, cleared when they are taken to
    /// be written (may be stale, never wrongly clear).
    unsent_dead_letters: bool,
}

impl SharePartition {
    /// A share partition whose first record to deliver is at `start`.
    pub fn new(start: i64) -> Self {
        Self {
            start,
            end: start,
            spans: BTreeMap::new(),
            acquired: 0,
            next_expiry: i64::MAX,
            unsent_dead_letters: false,
        }
    }

    /// A share partition as persisted: starting at `start`, with `batches`
    /// in flight (offsets between them never delivered; batches before
    /// the start dropped).
    pub fn restore(start: i64, batches: &[StateBatch]) -> Self {
        let mut sp = Self::new(start);
        let mut sorted: Vec<&StateBatch> = batches.iter().collect();
        sorted.sort_by_key(|b| b.first_offset);
        for b in sorted {
            let first = b.first_offset.max(sp.end);
            // A batch ending at the last offset there is could not be
            // followed; the coordinator refuses such writes.
            if b.last_offset < first || b.last_offset == i64::MAX {
                continue;
            }
            if first > sp.end {
                sp.push_span(first - 1, State::Available, 0);
            }
            let state = match b.delivery_state {
                ACKNOWLEDGED => State::Acknowledged,
                ARCHIVING => State::Archiving { sending: false },
                ARCHIVED => State::Archived,
                _ => State::Available,
            };
            sp.unsent_dead_letters |= b.delivery_state == ARCHIVING;
            sp.push_span(b.last_offset, state, b.delivery_count.max(0));
        }
        sp.advance_start();
        sp
    }

    /// The state to persist: the start, and the spans in flight, acquired
    /// ones as available (a new leader delivers them again); adjacent
    /// spans alike are merged.
    pub fn persisted(&self) -> (i64, Vec<StateBatch>) {
        let mut out: Vec<StateBatch> = Vec::new();
        for (&first, span) in &self.spans {
            let delivery_state = match span.state {
                State::Available | State::Acquired { .. } => AVAILABLE,
                State::Acknowledged => ACKNOWLEDGED,
                State::Archiving { .. } => ARCHIVING,
                State::Archived => ARCHIVED,
            };
            match out.last_mut() {
                Some(prev)
                    if prev.last_offset + 1 == first
                        && prev.delivery_state == delivery_state
                        && prev.delivery_count == span.deliveries =>
                {
                    prev.last_offset = span.last;
                }
                _ => out.push(StateBatch {
                    first_offset: first,
                    last_offset: span.last,
                    delivery_state,
                    delivery_count: span.deliveries,
                }),
            }
        }
        (self.start, out)
    }

    pub fn window(&self) -> Window {
        Window {
            start: self.start,
            end: self.end,
            acquired: self.acquired,
        }
    }

    /// Where the next read from the log begins: the first offset available
    /// again, else the first never delivered.
    pub fn next_fetch_offset(&self) -> i64 {
        self.spans
            .iter()
            .find(|(_, s)| s.state == State::Available)
            .map_or(self.end, |(&first, _)| first)
    }

    /// Whether a fetch could acquire anything with the log's high
    /// watermark at `high_watermark`.
    pub fn has_deliverable(&self, high_watermark: i64, limits: &DeliveryLimits) -> bool {
        let room = self.end - self.start < limits.max_in_flight;
        (room && self.end < high_watermark)
            || self.spans.values().any(|s| s.state == State::Available)
    }

    /// Acquires, for `member`, deliverable offsets of `batches` (read from
    /// the log from [`SharePartition::next_fetch_offset`]): `max_records`
    /// of them, or with [`AcquireMode::BatchOptimized`] to the end of the
    /// batch that reaches `max_records`.
    pub fn acquire(
        &mut self,
        member: &str,
        batches: &[FetchedBatch],
        max_records: i64,
        mode: AcquireMode,
        limits: &DeliveryLimits,
        now: i64,
    ) -> Vec<Acquired> {
        let member: Arc<str> = Arc::from(member);
        let expires_at = now.saturating_add(limits.record_lock_duration_ms);
        let mut budget = max_records.max(1);
        let mut out: Vec<Acquired> = Vec::new();
        // Runs before `sealed` are complete: nothing merges into them.
        let mut sealed = 0;
        for batch in batches {
            if budget <= 0 {
                break;
            }
            // What this batch may give: a batch once started is taken whole
            // unless the limit is exact.
            let batch_budget = match mode {
                AcquireMode::BatchOptimized { batch_size } => {
                    let run_first = out.get(sealed).map(|a| a.first);
                    if run_first
                        .is_some_and(|f| batch_size > 0 && batch.base_offset - f >= batch_size)
                    {
                        sealed = out.len();
                    }
                    i64::MAX
                }
                AcquireMode::RecordLimit => budget,
            };
            let first = batch.base_offset.max(self.start);
            if batch.last_offset < first {
                continue;
            }
            // Offsets already in flight: take back those available again.
            let mut taken = 0;
            if first < self.end {
                let last = batch.last_offset.min(self.end - 1);
                taken = self.reacquire(
                    (first, last),
                    &member,
                    expires_at,
                    batch_budget,
                    (&mut out, sealed),
                );
            }
            if batch.last_offset < self.end {
                budget -= taken;
                continue;
            }
            // Offsets the log skips (compacted away) are not records.
            if first > self.end {
                self.push_span(first - 1, State::Archived, 0);
            }
            if batch.skip {
                self.push_span(batch.last_offset, State::Archived, 0);
                continue;
            }
            let room = limits.max_in_flight - (self.end - self.start);
            let take = (batch.last_offset - self.end + 1)
                .min(batch_budget.saturating_sub(taken))
                .min(room);
            if take <= 0 {
                break;
            }
            let first_new = self.end;
            let state = State::Acquired {
                member: member.clone(),
                expires_at,
            };
            self.push_span(first_new + take - 1, state, 1);
            self.note_acquired(take, expires_at);
            push_merged((&mut out, sealed), first_new, first_new + take - 1, 1);
            budget -= taken + take;
            // Cut short (the in-flight limit, or an exact record limit):
            // the rest of this batch comes first next time, and a later
            // batch must not make it look like offsets the log skips.
            if first_new + take - 1 < batch.last_offset {
                break;
            }
        }
        self.advance_start();
        out
    }

    /// Acquires the available offsets of `[first, last]` (all in flight),
    /// at most `budget`; how many it took.
    fn reacquire(
        &mut self,
        (first, last): (i64, i64),
        member: &Arc<str>,
        expires_at: i64,
        budget: i64,
        (out, sealed): (&mut Vec<Acquired>, usize),
    ) -> i64 {
        let available: Vec<(i64, i64)> = self
            .spans
            .range(..=last)
            .filter(|(&f, s)| s.last >= first && f <= last && s.state == State::Available)
            .map(|(&f, s)| (f.max(first), s.last.min(last)))
            .collect();
        let mut taken = 0;
        for (from, to) in available {
            let to = to.min(from.saturating_add(budget - taken - 1));
            if to < from {
                break;
            }
            self.split_at(from);
            self.split_at(to + 1);
            let span = self.spans.get_mut(&from).expect("split at from");
            span.deliveries = span.deliveries.saturating_add(1);
            span.state = State::Acquired {
                member: member.clone(),
                expires_at,
            };
            let deliveries = span.deliveries;
            self.note_acquired(to - from + 1, expires_at);
            push_merged((out, sealed), from, to, deliveries);
            taken += to - from + 1;
        }
        taken
    }

    fn push_span(&mut self, last: i64, state: State, deliveries: i16) {
        self.spans.insert(
            self.end,
            Span {
                last,
                state,
                deliveries,
            },
        );
        self.end = last + 1;
    }

    fn note_acquired(&mut self, count: i64, expires_at: i64) {
        self.acquired += count;
        self.next_expiry = self.next_expiry.min(expires_at);
    }

    /// Makes `offset` the first offset of a span, if it is inside one.
    fn split_at(&mut self, offset: i64) {
        let Some((&first, span)) = self.spans.range_mut(..offset).next_back() else {
            return;
        };
        if span.last < offset {
            return;
        }
        let tail = Span {
            last: span.last,
            state: span.state.clone(),
            deliveries: span.deliveries,
        };
        span.last = offset - 1;
        debug_assert!(first < offset);
        self.spans.insert(offset, tail);
    }

    /// Settles `[first, last]` for `member` at `now`: one type for the
    /// whole range, or one per offset. Every offset must be acquired by
    /// `member`, else nothing changes (INVALID_RECORD_STATE), as Kafka
    /// checks a batch.
    pub fn acknowledge(
        &mut self,
        member: &str,
        first: i64,
        last: i64,
        types: &[AckType],
        limits: &DeliveryLimits,
        now: i64,
    ) -> Result<(), ResponseError> {
        // Offsets are never negative; checked first so the count below
        // cannot overflow on a hostile range.
        if first < 0 || first > last || types.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        let count = last - first + 1;
        if types.len() != 1 && types.len() as i64 != count {
            return Err(ResponseError::InvalidRequest);
        }
        if first < self.start || last >= self.end || !self.all_acquired_by(member, first, last) {
            return Err(ResponseError::InvalidRecordState);
        }
        if types.len() == 1 {
            self.settle(first, last, types[0], limits, now);
        } else {
            // Runs of one type settle together.
            let mut from = first;
            for (i, t) in types.iter().enumerate() {
                let offset = first + i as i64;
                let ends_run = types.get(i + 1) != Some(t);
                if ends_run {
                    self.settle(from, offset, *t, limits, now);
                    from = offset + 1;
                }
            }
        }
        self.advance_start();
        Ok(())
    }

    fn all_acquired_by(&self, member: &str, first: i64, last: i64) -> bool {
        let mut next = first;
        for (&f, s) in self.spans.range(..=last) {
            if s.last < first {
                continue;
            }
            let held = matches!(&s.state, State::Acquired { member: m, .. } if &**m == member);
            if f > next || !held {
                return false;
            }
            next = s.last + 1;
        }
        next > last
    }

    /// Moves acquired `[first, last]` to the state `ack` leads to; a
    /// renewal keeps them acquired, locked for the group's whole lock
    /// duration from `now`, their delivery count unchanged.
    fn settle(&mut self, first: i64, last: i64, ack: AckType, limits: &DeliveryLimits, now: i64) {
        self.split_at(first);
        self.split_at(last + 1);
        let firsts: Vec<i64> = self.spans.range(first..=last).map(|(&f, _)| f).collect();
        let renewed_until = now.saturating_add(limits.record_lock_duration_ms);
        for f in firsts {
            let span = self.spans.get_mut(&f).expect("listed");
            span.state = match ack {
                AckType::Accept => State::Acknowledged,
                AckType::Gap => State::Archived,
                AckType::Reject => archived(limits),
                AckType::Release => released(span.deliveries, limits),
                AckType::Renew => {
                    if let State::Acquired { expires_at, .. } = &mut span.state {
                        *expires_at = renewed_until;
                    }
                    continue;
                }
            };
            self.acquired -= span.last - f + 1;
            self.unsent_dead_letters |= span.state == DEAD_LETTER;
        }
    }

    /// Releases the records whose lock expired by `now`; whether any did.
    pub fn expire_locks(&mut self, now: i64, limits: &DeliveryLimits) -> bool {
        if self.acquired == 0 || now < self.next_expiry {
            return false;
        }
        let mut released_any = false;
        let mut next_expiry = i64::MAX;
        for (&first, span) in self.spans.iter_mut() {
            if let State::Acquired { expires_at, .. } = span.state {
                if expires_at <= now {
                    span.state = released(span.deliveries, limits);
                    self.acquired -= span.last - first + 1;
                    self.unsent_dead_letters |= span.state == DEAD_LETTER;
                    released_any = true;
                } else {
                    next_expiry = next_expiry.min(expires_at);
                }
            }
        }
        self.next_expiry = next_expiry;
        self.advance_start();
        released_any
    }

    /// Releases everything `member` holds (its share session closed, or it
    /// left the group); whether it held anything.
    pub fn release_member(&mut self, member: &str, limits: &DeliveryLimits) -> bool {
        let mut released_any = false;
        for (&first, span) in self.spans.iter_mut() {
            if matches!(&span.state, State::Acquired { member: m, .. } if &**m == member) {
                span.state = released(span.deliveries, limits);
                self.acquired -= span.last - first + 1;
                self.unsent_dead_letters |= span.state == DEAD_LETTER;
                released_any = true;
            }
        }
        self.advance_start();
        released_any
    }

    /// The log's start moved to `log_start` (retention, DeleteRecords):
    /// offsets before it are gone, whatever their state.
    pub fn follow_log_start(&mut self, log_start: i64) {
        if log_start <= self.start {
            return;
        }
        self.split_at(log_start);
        let gone: Vec<i64> = self.spans.range(..log_start).map(|(&f, _)| f).collect();
        for f in gone {
            let span = self.spans.remove(&f).expect("listed");
            if matches!(span.state, State::Acquired { .. }) {
                self.acquired -= span.last - f + 1;
            }
        }
        self.start = log_start;
        self.end = self.end.max(log_start);
    }

    /// Whether offsets may be waiting to be written to the dead-letter
    /// queue ([`SharePartition::take_dead_letters`] says which).
    pub fn has_unsent_dead_letters(&self) -> bool {
        self.unsent_dead_letters
    }

    /// The archiving offsets not yet handed out to be written to the
    /// dead-letter queue; they count as being written from now on.
    pub fn take_dead_letters(&mut self) -> Vec<DeadLetters> {
        self.unsent_dead_letters = false;
        let mut out = Vec::new();
        for (&first, span) in self.spans.iter_mut() {
            if span.state == DEAD_LETTER {
                span.state = State::Archiving { sending: true };
                out.push(DeadLetters {
                    first,
                    last: span.last,
                    delivery_count: span.deliveries,
                });
            }
        }
        out
    }

    /// The write of archiving offsets `[first, last]` to the dead-letter
    /// queue is over (done or given up, as Kafka gives up): they are
    /// archived.
    pub fn dead_lettered(&mut self, first: i64, last: i64) {
        for (_, span) in self.spans.range_mut(..=last) {
            if span.last >= first && matches!(span.state, State::Archiving { .. }) {
                span.state = State::Archived;
            }
        }
        self.advance_start();
    }

    /// Drops finished spans at the front: the start moves past them.
    fn advance_start(&mut self) {
        while let Some(entry) = self.spans.first_entry() {
            let span = entry.get();
            if !matches!(span.state, State::Acknowledged | State::Archived) {
                break;
            }
            self.start = span.last + 1;
            entry.remove();
        }
        if self.spans.is_empty() {
            self.start = self.end;
        }
    }
}

/// Archiving offsets waiting to be handed out for writing.
const DEAD_LETTER: State = State::Archiving { sending: false };

/// A released record is delivered again, unless it has been delivered as
/// often as the group allows.
fn released(deliveries: i16, limits: &DeliveryLimits) -> State {
    if deliveries >= limits.delivery_count_limit {
        archived(limits)
    } else {
        State::Available
    }
}

/// Where a record that is never delivered again goes: through the group's
/// dead-letter queue if it has one.
fn archived(limits: &DeliveryLimits) -> State {
    if limits.dead_letter_queue {
        DEAD_LETTER
    } else {
        State::Archived
    }
}

/// Adds `[first, last]` to `out`, extending its last run unless that run is
/// one of the first `sealed`.
fn push_merged(
    (out, sealed): (&mut Vec<Acquired>, usize),
    first: i64,
    last: i64,
    delivery_count: i16,
) {
    if out.len() <= sealed {
        out.push(Acquired {
            first,
            last,
            delivery_count,
        });
        return;
    }
    if let Some(prev) = out.last_mut() {
        if prev.last + 1 == first && prev.delivery_count == delivery_count {
            prev.last = last;
            return;
        }
    }
    out.push(Acquired {
        first,
        last,
        delivery_count,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: DeliveryLimits = DeliveryLimits {
        record_lock_duration_ms: 1000,
        delivery_count_limit: 3,
        max_in_flight: 100,
        dead_letter_queue: false,
    };

    fn batch(base: i64, last: i64) -> FetchedBatch {
        FetchedBatch {
            base_offset: base,
            last_offset: last,
            skip: false,
        }
    }

    /// Acquires with the default limits, `max_records` exactly.
    fn take(
        sp: &mut SharePartition,
        member: &str,
        batches: &[FetchedBatch],
        max_records: i64,
        now: i64,
    ) -> Vec<Acquired> {
        sp.acquire(
            member,
            batches,
            max_records,
            AcquireMode::RecordLimit,
            &LIMITS,
            now,
        )
    }

    fn acq(first: i64, last: i64, delivery_count: i16) -> Acquired {
        Acquired {
            first,
            last,
            delivery_count,
        }
    }

    #[test]
    fn records_go_to_one_member_at_a_time_and_accepted_ones_move_the_start() {
        let mut sp = SharePartition::new(0);
        let got = take(&mut sp, "a", &[batch(0, 9)], 500, 0);
        assert_eq!(got, vec![acq(0, 9, 1)]);
        // Nothing left for another member.
        assert_eq!(sp.next_fetch_offset(), 10);
        assert!(take(&mut sp, "b", &[batch(0, 9)], 500, 0).is_empty());
        assert_eq!(
            sp.acknowledge("b", 0, 4, &[AckType::Accept], &LIMITS, 0),
            Err(ResponseError::InvalidRecordState),
            "b holds none of them"
        );
        sp.acknowledge("a", 0, 4, &[AckType::Accept], &LIMITS, 0)
            .unwrap();
        assert_eq!(
            sp.window(),
            Window {
                start: 5,
                end: 10,
                acquired: 5
            }
        );
        sp.acknowledge("a", 5, 9, &[AckType::Accept], &LIMITS, 0)
            .unwrap();
        assert_eq!(
            sp.window(),
            Window {
                start: 10,
                end: 10,
                acquired: 0
            }
        );
    }

    #[test]
    fn released_records_are_delivered_again_with_a_higher_count() {
        let mut sp = SharePartition::new(0);
        take(&mut sp, "a", &[batch(0, 9)], 500, 0);
        let types: Vec<AckType> = (0..10)
            .map(|i| {
                if i % 2 == 0 {
                    AckType::Accept
                } else {
                    AckType::Release
                }
            })
            .collect();
        sp.acknowledge("a", 0, 9, &types, &LIMITS, 0).unwrap();
        assert_eq!(sp.window().start, 1);
        assert_eq!(sp.next_fetch_offset(), 1);
        let again = take(&mut sp, "b", &[batch(0, 9)], 500, 0);
        assert_eq!(
            again,
            vec![
                acq(1, 1, 2),
                acq(3, 3, 2),
                acq(5, 5, 2),
                acq(7, 7, 2),
                acq(9, 9, 2)
            ]
        );
    }

    #[test]
    fn an_expired_lock_releases_and_the_delivery_limit_archives() {
        let mut sp = SharePartition::new(0);
        for round in 1..=3 {
            let now = round * 10_000;
            let got = take(&mut sp, "a", &[batch(0, 4)], 500, now);
            assert_eq!(got, vec![acq(0, 4, round as i16)], "round {round}");
            assert!(!sp.expire_locks(now + 999, &LIMITS), "lock still held");
            assert!(sp.expire_locks(now + 1000, &LIMITS));
        }
        // Delivered three times: archived, and the start moved past them.
        assert_eq!(
            sp.window(),
            Window {
                start: 5,
                end: 5,
                acquired: 0
            }
        );
        assert!(take(&mut sp, "a", &[batch(0, 4)], 500, 50_000).is_empty());
    }

    #[test]
    fn rejected_and_gap_records_are_never_delivered_again() {
        let mut sp = SharePartition::new(0);
        take(&mut sp, "a", &[batch(0, 5)], 500, 0);
        let types = [
            AckType::Reject,
            AckType::Gap,
            AckType::Release,
            AckType::Release,
            AckType::Accept,
            AckType::Reject,
        ];
        sp.acknowledge("a", 0, 5, &types, &LIMITS, 0).unwrap();
        assert_eq!(sp.window().start, 2);
        let again = take(&mut sp, "a", &[batch(0, 5)], 500, 0);
        assert_eq!(again, vec![acq(2, 3, 2)]);
    }

    #[test]
    fn max_records_and_the_in_flight_limit_cap_an_acquisition() {
        let limits = DeliveryLimits {
            max_in_flight: 8,
            ..LIMITS
        };
        let mut sp = SharePartition::new(0);
        assert_eq!(
            sp.acquire("a", &[batch(0, 9)], 3, AcquireMode::RecordLimit, &limits, 0),
            vec![acq(0, 2, 1)]
        );
        // The rest of the batch comes next, up to the in-flight limit.
        assert_eq!(sp.next_fetch_offset(), 3);
        assert_eq!(
            sp.acquire(
                "b",
                &[batch(0, 9)],
                100,
                AcquireMode::RecordLimit,
                &limits,
                0
            ),
            vec![acq(3, 7, 1)]
        );
        assert!(!sp.has_deliverable(10, &limits));
        sp.acknowledge("a", 0, 2, &[AckType::Accept], &limits, 0)
            .unwrap();
        assert!(sp.has_deliverable(10, &limits));
        assert_eq!(
            sp.acquire(
                "a",
                &[batch(0, 9)],
                100,
                AcquireMode::RecordLimit,
                &limits,
                0
            ),
            vec![acq(8, 9, 1)]
        );
    }

    #[test]
    fn batch_optimized_acquisition_takes_the_last_batch_it_starts_whole() {
        let mut sp = SharePartition::new(0);
        let batches = [batch(0, 3), batch(4, 9), batch(10, 14)];
        // Five wanted: the first batch (4), then the second whole (6).
        assert_eq!(
            sp.acquire(
                "a",
                &batches,
                5,
                AcquireMode::BatchOptimized { batch_size: 0 },
                &LIMITS,
                0
            ),
            vec![acq(0, 9, 1)]
        );
        // Given back, the second batch is taken whole again.
        sp.acknowledge("a", 4, 9, &[AckType::Release], &LIMITS, 0)
            .unwrap();
        assert_eq!(
            sp.acquire(
                "b",
                &batches,
                1,
                AcquireMode::BatchOptimized { batch_size: 0 },
                &LIMITS,
                0
            ),
            vec![acq(4, 9, 2)]
        );
        // The in-flight limit still caps a batch.
        let limits = DeliveryLimits {
            max_in_flight: 12,
            ..LIMITS
        };
        assert_eq!(
            sp.acquire(
                "c",
                &batches,
                1,
                AcquireMode::BatchOptimized { batch_size: 0 },
                &limits,
                0
            ),
            vec![acq(10, 11, 1)]
        );
    }

    #[test]
    fn a_batch_cut_by_the_in_flight_limit_is_finished_later_not_skipped() {
        let limits = DeliveryLimits {
            max_in_flight: 12,
            ..LIMITS
        };
        let mut sp = SharePartition::new(0);
        let batches = [batch(0, 9), batch(10, 19), batch(20, 29)];
        let mode = AcquireMode::BatchOptimized { batch_size: 0 };
        assert_eq!(
            sp.acquire("a", &batches, 100, mode, &limits, 0),
            vec![acq(0, 11, 1)]
        );
        sp.acknowledge("a", 0, 11, &[AckType::Accept], &limits, 0)
            .unwrap();
        // Read again from 12: the rest of the cut batch, then the next.
        assert_eq!(
            sp.acquire("a", &batches[1..], 100, mode, &limits, 0),
            vec![acq(12, 23, 1)]
        );
    }

    #[test]
    fn batch_optimized_runs_are_cut_at_the_batch_size() {
        let mut sp = SharePartition::new(0);
        let batches = [batch(0, 3), batch(4, 7), batch(8, 11), batch(12, 15)];
        // Batch size 8: the batch at 8 starts a new run, the one at 12 not.
        let mode = AcquireMode::BatchOptimized { batch_size: 8 };
        assert_eq!(
            sp.acquire("a", &batches, 100, mode, &LIMITS, 0),
            vec![acq(0, 7, 1), acq(8, 15, 1)]
        );
    }

    #[test]
    fn a_renewal_restarts_the_lock_and_keeps_the_count() {
        let mut sp = SharePartition::new(0);
        take(&mut sp, "a", &[batch(0, 4)], 500, 0);
        assert_eq!(
            sp.acknowledge("b", 0, 4, &[AckType::Renew], &LIMITS, 900),
            Err(ResponseError::InvalidRecordState),
            "only the holder renews"
        );
        // Offsets 0-2 renewed at 900: locked until 1900; 3-4 expire at 1000.
        sp.acknowledge("a", 0, 2, &[AckType::Renew], &LIMITS, 900)
            .unwrap();
        assert!(sp.expire_locks(1000, &LIMITS));
        assert_eq!(sp.window().acquired, 3);
        assert_eq!(
            take(&mut sp, "b", &[batch(0, 4)], 500, 1000),
            vec![acq(3, 4, 2)]
        );
        assert!(!sp.expire_locks(1899, &LIMITS));
        // Still a's, on its first delivery, to settle as usual.
        sp.acknowledge("a", 0, 2, &[AckType::Accept], &LIMITS, 1899)
            .unwrap();
        assert_eq!(sp.window().start, 3);
    }

    #[test]
    fn control_batches_and_compacted_offsets_are_archived_not_delivered() {
        let mut sp = SharePartition::new(0);
        let marker = FetchedBatch {
            base_offset: 5,
            last_offset: 5,
            skip: true,
        };
        let got = take(&mut sp, "a", &[batch(0, 2), marker, batch(8, 9)], 500, 0);
        assert_eq!(got, vec![acq(0, 2, 1), acq(8, 9, 1)]);
        sp.acknowledge("a", 0, 2, &[AckType::Accept], &LIMITS, 0)
            .unwrap();
        // 3-7 (gone from the log, and the marker) are done already.
        assert_eq!(sp.window().start, 8);
    }

    #[test]
    fn a_leaving_member_gives_back_what_it_holds() {
        let mut sp = SharePartition::new(10);
        take(&mut sp, "a", &[batch(10, 14)], 500, 0);
        take(&mut sp, "b", &[batch(15, 19)], 500, 0);
        assert!(sp.release_member("a", &LIMITS));
        assert!(!sp.release_member("a", &LIMITS));
        assert_eq!(sp.window().acquired, 5);
        assert_eq!(
            take(&mut sp, "c", &[batch(10, 19)], 500, 0),
            vec![acq(10, 14, 2)]
        );
    }

    #[test]
    fn acknowledgements_are_checked_whole() {
        let mut sp = SharePartition::new(0);
        take(&mut sp, "a", &[batch(0, 4)], 500, 0);
        assert_eq!(
            sp.acknowledge("a", 3, 7, &[AckType::Accept], &LIMITS, 0),
            Err(ResponseError::InvalidRecordState),
            "past the records in flight"
        );
        assert_eq!(
            sp.acknowledge("a", 0, 4, &[AckType::Accept, AckType::Accept], &LIMITS, 0),
            Err(ResponseError::InvalidRequest),
            "one type, or one per offset"
        );
        assert_eq!(
            sp.acknowledge("a", i64::MIN, i64::MAX, &[AckType::Accept], &LIMITS, 0),
            Err(ResponseError::InvalidRequest),
            "no offset is negative"
        );
        assert_eq!(sp.window().acquired, 5, "nothing changed");
        sp.acknowledge("a", 0, 4, &[AckType::Accept], &LIMITS, 0)
            .unwrap();
        assert_eq!(
            sp.acknowledge("a", 0, 0, &[AckType::Accept], &LIMITS, 0),
            Err(ResponseError::InvalidRecordState),
            "already settled"
        );
    }

    #[test]
    fn persisted_state_restores_what_was_settled_and_redelivers_the_rest() {
        let mut sp = SharePartition::new(0);
        take(&mut sp, "a", &[batch(0, 9)], 500, 0);
        let types: Vec<AckType> = (0..10)
            .map(|i| match i {
                2 | 3 => AckType::Accept,
                4 => AckType::Reject,
                5 => AckType::Release,
                _ => AckType::Accept,
            })
            .collect();
        sp.acknowledge("a", 0, 1, &types[..2], &LIMITS, 0).unwrap();
        sp.acknowledge("a", 3, 5, &types[3..6], &LIMITS, 0).unwrap();
        // 2 and 6-9 still acquired by a.
        let (start, batches) = sp.persisted();
        assert_eq!(start, 2);
        let mut restored = SharePartition::restore(start, &batches);
        assert_eq!(
            restored.window(),
            Window {
                start: 2,
                end: 10,
                acquired: 0
            }
        );
        // A new member gets what was not settled, as a second delivery.
        let got = take(&mut restored, "b", &[batch(0, 9)], 500, 0);
        assert_eq!(got, vec![acq(2, 2, 2), acq(5, 9, 2)]);
        assert_eq!(
            restored.persisted().1.len(),
            4,
            "2, 3 acked, 4 archived, 5-9"
        );
        // Gaps between persisted batches were never delivered.
        let gap = SharePartition::restore(
            0,
            &[StateBatch {
                first_offset: 4,
                last_offset: 4,
                delivery_state: ARCHIVED,
                delivery_count: 1,
            }],
        );
        let mut gap = gap;
        assert_eq!(
            take(&mut gap, "c", &[batch(0, 6)], 500, 0),
            vec![acq(0, 3, 1), acq(5, 6, 1)]
        );
    }

    #[test]
    fn retention_past_the_start_drops_what_it_removed() {
        let mut sp = SharePartition::new(0);
        take(&mut sp, "a", &[batch(0, 9)], 500, 0);
        sp.follow_log_start(4);
        assert_eq!(
            sp.window(),
            Window {
                start: 4,
                end: 10,
                acquired: 6
            }
        );
        sp.follow_log_start(20);
        assert_eq!(
            sp.window(),
            Window {
                start: 20,
                end: 20,
                acquired: 0
            }
        );
        assert_eq!(
            take(&mut sp, "a", &[batch(20, 21)], 500, 0),
            vec![acq(20, 21, 1)]
        );
    }

    #[test]
    fn with_a_dead_letter_queue_rejected_and_exhausted_records_are_archiving_until_written() {
        let limits = DeliveryLimits {
            delivery_count_limit: 2,
            dead_letter_queue: true,
            ..LIMITS
        };
        let mut sp = SharePartition::new(0);
        sp.acquire(
            "a",
            &[batch(0, 9)],
            10,
            AcquireMode::RecordLimit,
            &limits,
            0,
        );
        // 0-1 rejected, 2-4 accepted, 5-9 released (delivered once).
        let mut types = vec![AckType::Reject; 2];
        types.extend([AckType::Accept; 3]);
        types.extend([AckType::Release; 5]);
        sp.acknowledge("a", 0, 9, &types, &limits, 0).unwrap();
        assert!(sp.has_unsent_dead_letters());
        assert_eq!(sp.window().start, 0, "the start waits for the queue");
        let (_, persisted) = sp.persisted();
        assert_eq!(persisted[0].delivery_state, ARCHIVING);
        // 5-9 delivered again, and their lock expires: the limit is reached.
        sp.acquire(
            "b",
            &[batch(0, 9)],
            10,
            AcquireMode::RecordLimit,
            &limits,
            0,
        );
        assert!(sp.expire_locks(1000, &limits));
        assert_eq!(
            sp.take_dead_letters(),
            vec![
                DeadLetters {
                    first: 0,
                    last: 1,
                    delivery_count: 1
                },
                DeadLetters {
                    first: 5,
                    last: 9,
                    delivery_count: 2
                }
            ]
        );
        assert!(!sp.has_unsent_dead_letters());
        assert!(sp.take_dead_letters().is_empty(), "handed out once");
        assert!(!sp.has_deliverable(10, &limits));
        sp.dead_lettered(0, 1);
        assert_eq!(sp.window().start, 5);
        sp.dead_lettered(5, 9);
        assert_eq!(sp.window().start, 10);
        // Persisted archiving offsets are written again by a new leader.
        let mut restored = SharePartition::restore(
            0,
            &[StateBatch {
                first_offset: 3,
                last_offset: 4,
                delivery_state: ARCHIVING,
                delivery_count: 1,
            }],
        );
        assert!(restored.has_unsent_dead_letters());
        assert_eq!(
            restored.take_dead_letters(),
            vec![DeadLetters {
                first: 3,
                last: 4,
                delivery_count: 1
            }]
        );
        // Without a queue, they are archived at once.
        let mut plain = SharePartition::new(0);
        plain.acquire("a", &[batch(0, 1)], 2, AcquireMode::RecordLimit, &LIMITS, 0);
        plain
            .acknowledge("a", 0, 1, &[AckType::Reject], &LIMITS, 0)
            .unwrap();
        assert!(!plain.has_unsent_dead_letters());
        assert_eq!(plain.window().start, 2);
    }
}
