//! The reads of one Fetch: every partition of its session once, then, while
//! it waits for `min_bytes`, only the partitions that changed (the
//! purgatory wakes it from those and no others). A leader may send a
//! consumer to a replica in its rack instead of reading (KIP-392).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ottla_controller::MetadataImage;
use ottla_storage::log::FetchIsolation;
use ottla_storage::manager::TopicPartition;

use crate::broker::Broker;
use crate::fetch_session::{PartitionFetch, SessionFetch};
use crate::purgatory::Waiter;
use crate::replica::{FetchOutcome, Partition, ReadSpec};
use crate::replication::read_replica::preferred_read_replica;
use crate::replication::throttle::{is_throttled, Side};

/// Who reads, and how.
pub(super) struct Reader<'a> {
    pub isolation: FetchIsolation,
    /// The replica fetching, for a replica fetch.
    pub follower: Option<i32>,
    /// Whether only a leader may answer (see [`ReadSpec::leader_only`]).
    pub leader_only: bool,
    /// For a consumer a leader may send to a replica in its rack: that
    /// rack and the listener the consumer came in on.
    pub rack_aware: Option<(&'a str, &'a str)>,
}

/// A replica fetch under a leader replication throttle: the throttle's
/// rate, and which of the session's partitions it applies to.
struct LeaderThrottle {
    limit: f64,
    throttled: Vec<bool>,
}

pub(super) struct SessionReads<'a> {
    broker: &'a Broker,
    image: &'a MetadataImage,
    session: &'a SessionFetch,
    partitions: &'a [(TopicPartition, PartitionFetch)],
    /// Each partition as hosted here when last read (None: not hosted).
    hosted: Vec<Option<Arc<Partition>>>,
    /// Each partition's watch version, taken before its last read.
    versions: Vec<u64>,
    outcomes: Vec<FetchOutcome>,
    reader: Reader<'a>,
    throttle: Option<LeaderThrottle>,
    max_total: usize,
    /// Bytes over `outcomes`, and how many must be answered at once.
    total: usize,
    urgent: usize,
}

impl<'a> SessionReads<'a> {
    pub(super) fn new(
        broker: &'a Broker,
        image: &'a MetadataImage,
        session: &'a SessionFetch,
        reader: Reader<'a>,
        max_total: usize,
    ) -> Self {
        let replicas = &broker.replicas;
        let partitions = &session.partitions;
        // Replicas catching up under a leader throttle get no data while
        // the throttle is exceeded.
        let throttle = reader.follower.and_then(|replica| {
            let limit = broker.replication_throttle.limit(image, Side::Leader)?;
            let node_id = broker.node_id();
            let throttled = partitions
                .iter()
                .map(|(tp, _)| {
                    is_throttled(image, Side::Leader, &tp.topic, tp.partition, node_id)
                        && !replicas.in_isr(tp, replica)
                })
                .collect();
            Some(LeaderThrottle { limit, throttled })
        });
        Self {
            broker,
            image,
            session,
            partitions,
            hosted: partitions
                .iter()
                .map(|(tp, _)| replicas.partition(tp))
                .collect(),
            versions: vec![0; partitions.len()],
            outcomes: Vec::with_capacity(partitions.len()),
            reader,
            throttle,
            max_total,
            total: 0,
            urgent: 0,
        }
    }

    /// Reads every partition, then, until `min_bytes` are gathered or
    /// `deadline` passes, the ones that change; returns how long it waited.
    pub(super) async fn read_until(&mut self, min_bytes: usize, deadline: Instant) -> Duration {
        self.read_all();
        let mut waited = Duration::ZERO;
        if self.enough(min_bytes) || Instant::now() >= deadline {
            return waited;
        }
        let waiter = Waiter::new();
        self.watch_all(&waiter);
        loop {
            let started = Instant::now();
            let changed = waiter.changed(deadline.into()).await;
            waited += started.elapsed();
            if changed.is_empty() {
                return waited;
            }
            self.read_changed(&waiter, &changed);
            if self.enough(min_bytes) {
                return waited;
            }
        }
    }

    /// Reads every partition, in order.
    fn read_all(&mut self) {
        let exceeded = self.throttle_exceeded();
        for i in 0..self.partitions.len() {
            let outcome = self.read(i, exceeded);
            self.add(i, &outcome);
            self.outcomes.push(outcome);
        }
    }

    /// Whether the fetch can be answered: `min_bytes` gathered, something
    /// to say at once, or nothing to read.
    fn enough(&self, min_bytes: usize) -> bool {
        self.total >= min_bytes.max(1) || self.urgent > 0 || self.partitions.is_empty()
    }

    /// Watches every hosted partition, as read.
    fn watch_all(&self, waiter: &Waiter) {
        for (i, p) in self.hosted.iter().enumerate() {
            if let Some(p) = p {
                waiter.watch(&p.watchers, i as u32, self.versions[i]);
            }
        }
    }

    /// Reads the partitions that woke `waiter` again (looking each up
    /// anew: it may have moved or gone), and watches them again.
    fn read_changed(&mut self, waiter: &Waiter, changed: &[u32]) {
        let exceeded = self.throttle_exceeded();
        for &index in changed {
            let i = index as usize;
            let (bytes, urgent) = self.tally(i, &self.outcomes[i]);
            self.total -= bytes;
            self.urgent -= urgent;
            self.hosted[i] = self.broker.replicas.partition(&self.partitions[i].0);
            let outcome = self.read(i, exceeded);
            self.add(i, &outcome);
            self.outcomes[i] = outcome;
            if let Some(p) = &self.hosted[i] {
                waiter.watch(&p.watchers, index, self.versions[i]);
            }
        }
    }

    /// The outcomes, in session order, with the partitions they were read
    /// from; throttled replica traffic is counted now, once.
    pub(super) fn finish(self) -> (Vec<FetchOutcome>, Vec<Option<Arc<Partition>>>) {
        if let Some(throttle) = &self.throttle {
            let bytes: usize = self
                .outcomes
                .iter()
                .zip(&throttle.throttled)
                .filter(|(_, throttled)| **throttled)
                .map(|(o, _)| record_bytes(o))
                .sum();
            self.broker.replication_throttle.record(Side::Leader, bytes);
        }
        (self.outcomes, self.hosted)
    }

    fn throttle_exceeded(&self) -> bool {
        self.throttle.as_ref().is_some_and(|t| {
            self.broker
                .replication_throttle
                .exceeded(Side::Leader, t.limit)
        })
    }

    /// Reads partition `i` with what is left of the response's budget.
    fn read(&mut self, i: usize, throttle_exceeded: bool) -> FetchOutcome {
        let (tp, f) = &self.partitions[i];
        let throttled = self.throttle.as_ref().is_some_and(|t| t.throttled[i]);
        let limit = if throttled && throttle_exceeded {
            0
        } else {
            (f.max_bytes.max(0) as usize).min(self.max_total.saturating_sub(self.total))
        };
        let spec = ReadSpec {
            offset: f.fetch_offset,
            max_bytes: limit,
            isolation: self.reader.isolation,
            current_leader_epoch: f.current_leader_epoch,
            leader_only: self.reader.leader_only,
            // As Kafka: only the first partition with data may exceed the
            // limits by one batch, so that a fetch always makes progress.
            min_one_batch: self.total == 0 && limit > 0,
        };
        let hosted = self.hosted[i].as_deref();
        if let Some(p) = hosted {
            self.versions[i] = p.watchers.version();
            if let Some(outcome) = self.send_elsewhere(p, &spec) {
                return outcome;
            }
        }
        let follower = self.reader.follower;
        self.broker
            .replicas
            .fetch(tp, hosted, follower, f.last_fetched_epoch, &spec)
    }

    /// For a consumer this leader sends to a replica in its rack: the
    /// answer naming that replica, with this leader's offsets and no
    /// records (as Kafka, which skips the read then).
    fn send_elsewhere(&self, p: &Partition, spec: &ReadSpec) -> Option<FetchOutcome> {
        let (rack, listener) = self.reader.rack_aware?;
        let node_id = self.broker.node_id();
        let replica = preferred_read_replica(p, node_id, self.image, listener, rack, spec.offset)?;
        Some(FetchOutcome {
            preferred_read_replica: Some(replica),
            ..FetchOutcome::offsets_only(&p.log.read())
        })
    }

    fn add(&mut self, i: usize, o: &FetchOutcome) {
        let (bytes, urgent) = self.tally(i, o);
        self.total += bytes;
        self.urgent += urgent;
    }

    /// An outcome's record bytes, and whether it must go out at once (0 or
    /// 1): it must answer ([`FetchOutcome::must_answer`]), or it tells a
    /// follower a high watermark its session has not been told, which the
    /// follower needs to serve its own readers (Kafka's delayed fetch,
    /// "case H").
    fn tally(&self, i: usize, o: &FetchOutcome) -> (usize, usize) {
        let news = self.reader.follower.is_some()
            && self
                .session
                .told_high_watermark(i)
                .is_some_and(|told| o.high_watermark > told);
        (record_bytes(o), usize::from(o.must_answer() || news))
    }
}

pub(super) fn record_bytes(o: &FetchOutcome) -> usize {
    o.records.as_ref().map_or(0, |r| r.range.len)
}
