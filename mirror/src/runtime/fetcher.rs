//! The mirror fetchers: every mirror partition this broker leads is fetched
//! from its source leader by one of `mirror.num.fetchers` fetch loops per
//! source broker (the shared fetch-loop machinery, with a source broker as
//! the leader endpoint), in multi-partition consumer Fetch requests
//! (replica id -1, read_uncommitted, so open and aborted transactions are
//! copied too) within an incremental fetch session. Batches are appended
//! byte for byte to the destination leader's log. A partition whose source
//! leader moved goes back to the mirror's resolver, which looks up the
//! leaders of every such partition in one Metadata request and hands each
//! to the loop of its new leader.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{BrokerId, FetchRequest};
use ottla_client::list_offsets::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use ottla_client::KafkaClient;
use ottla_coordinator_common::partition_writer::{now_ms, HostedPartition};
use ottla_fetcher::{
    fetch_loop, fetcher_of, FetchPosition, FetchedPartition, Followup, LeaderEndpoint,
};
use ottla_protocol::batch::whole_batches_len;
use ottla_storage::manager::TopicPartition;
use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::source::{list_offsets, Brokers, SourceCluster, TopicsNamed};
use super::stats::MirrorStats;
use super::MirrorReplicas;

const MAX_WAIT: Duration = Duration::from_millis(500);
const PARTITION_MAX_BYTES: i32 = 8 << 20;
/// A fetch answer's bound (Kafka's consumer `fetch.max.bytes` is 50 MiB);
/// below the source client's largest accepted answer.
const FETCH_MAX_BYTES: i32 = 64 << 20;
const RETRY_BACKOFF: Duration = Duration::from_millis(500);
/// How long the resolver waits for more partitions before its Metadata
/// request, so partitions that arrive together are looked up together.
const RESOLVE_GATHER: Duration = Duration::from_millis(20);

/// A storage failure: the partition cannot go on mirroring (FAILED).
#[derive(Debug)]
pub struct FetcherFailed(pub String);

/// Every mirror fetcher of this broker, by mirror.
pub struct MirrorFetchers {
    replicas: Arc<dyn MirrorReplicas>,
    mirrors: Mutex<HashMap<String, Arc<SourceFetchers>>>,
}

impl MirrorFetchers {
    pub fn new(replicas: Arc<dyn MirrorReplicas>) -> Self {
        Self {
            replicas,
            mirrors: Mutex::default(),
        }
    }

    /// Mirrors `p` from the source of mirror `mirror` until `stop` is
    /// cancelled (Ok) or a local storage error fails it. Source errors are
    /// retried, counted in `stats`; `epoch_raised` is notified when a
    /// mirrored batch carries a leader epoch above the partition's. Once
    /// this returns, nothing more is appended to `p` for this mirror.
    pub async fn mirror(
        &self,
        from: FetchedFrom<'_>,
        p: &Arc<dyn HostedPartition>,
        stats: &Arc<MirrorStats>,
        epoch_raised: &Arc<Notify>,
        stop: &CancellationToken,
    ) -> Result<(), FetcherFailed> {
        let (failed, failure) = oneshot::channel();
        let registration = Arc::new(Registration {
            partition: p.clone(),
            stats: stats.clone(),
            epoch_raised: epoch_raised.clone(),
            source_epoch: AtomicI32::new(-1),
            active: Mutex::new(Some(failed)),
        });
        let mirror = from.mirror;
        let fetchers = self.register(from, &registration);
        let outcome = tokio::select! {
            _ = stop.cancelled() => Ok(()),
            reason = failure => Err(FetcherFailed(reason.unwrap_or_else(|_| "the mirror fetcher stopped".to_string()))),
        };
        // Waits out an append in progress on the blocking pool.
        let ended = registration.clone();
        let _ = tokio::task::spawn_blocking(move || ended.active.lock().take()).await;
        self.deregister(mirror, &fetchers, &registration);
        outcome
    }

    fn register(
        &self,
        from: FetchedFrom<'_>,
        registration: &Arc<Registration>,
    ) -> Arc<SourceFetchers> {
        let FetchedFrom {
            mirror,
            source,
            fetchers_per_source_broker,
        } = from;
        let mut mirrors = self.mirrors.lock();
        let fetchers = mirrors
            .entry(mirror.to_string())
            .or_insert_with(|| {
                let fetchers = Arc::new(SourceFetchers {
                    mirror: mirror.to_string(),
                    source: source.clone(),
                    fetchers_per_source_broker,
                    replicas: self.replicas.clone(),
                    assignment: Mutex::default(),
                    resolve: Notify::new(),
                    stop: CancellationToken::new(),
                });
                tokio::spawn(fetchers.clone().resolve_leaders());
                fetchers
            })
            .clone();
        fetchers
            .assignment
            .lock()
            .unresolved
            .insert(registration.tp().clone(), registration.clone());
        fetchers.resolve.notify_one();
        fetchers
    }

    fn deregister(
        &self,
        mirror: &str,
        fetchers: &Arc<SourceFetchers>,
        registration: &Arc<Registration>,
    ) {
        let mut mirrors = self.mirrors.lock();
        let mut assignment = fetchers.assignment.lock();
        assignment.remove(registration);
        if assignment.is_empty() {
            fetchers.stop.cancel();
            if mirrors
                .get(mirror)
                .is_some_and(|current| Arc::ptr_eq(current, fetchers))
            {
                mirrors.remove(mirror);
            }
        }
    }

    /// How many fetch loops run, by mirror and source broker id.
    pub fn running(&self) -> BTreeMap<(String, i32), usize> {
        let mut running = BTreeMap::new();
        for (mirror, fetchers) in self.mirrors.lock().iter() {
            for (leader, _) in fetchers.assignment.lock().loops.keys() {
                *running.entry((mirror.clone(), *leader)).or_default() += 1;
            }
        }
        running
    }
}

/// The mirror a partition is fetched for, and its source.
#[derive(Clone, Copy)]
pub struct FetchedFrom<'a> {
    pub mirror: &'a str,
    pub source: &'a SourceCluster,
    /// `mirror.num.fetchers`: taken from the mirror's first partition
    /// while any of its partitions is fetched here.
    pub fetchers_per_source_broker: usize,
}

/// A mirror partition while it is fetched.
struct Registration {
    partition: Arc<dyn HostedPartition>,
    stats: Arc<MirrorStats>,
    /// Tells the partition's driver to raise its leader epoch to the
    /// mirrored one.
    epoch_raised: Arc<Notify>,
    /// The source leader epoch of the last metadata answer (fencing).
    source_epoch: AtomicI32,
    /// Held while its fetched data is written; None once the partition
    /// is no longer mirrored here, so nothing more is written. The sender
    /// fails the partition.
    active: Mutex<Option<oneshot::Sender<String>>>,
}

impl Registration {
    fn tp(&self) -> &TopicPartition {
        self.partition.tp()
    }
}

impl FetchedPartition for Registration {
    /// The source topic has the destination topic's name.
    fn leader_tp(&self) -> &TopicPartition {
        self.tp()
    }
}

/// One loop: a source broker and this loop's share of its partitions.
type LoopKey = (i32, usize);

/// Which loop fetches which partition.
#[derive(Default)]
struct Assignment {
    /// Waiting for the resolver to find their source leader.
    unresolved: HashMap<TopicPartition, Arc<Registration>>,
    loops: BTreeMap<LoopKey, SourceLoop>,
    brokers: Brokers,
}

struct SourceLoop {
    partitions: HashMap<TopicPartition, Arc<Registration>>,
    stop: CancellationToken,
}

impl Assignment {
    fn is_empty(&self) -> bool {
        self.unresolved.is_empty() && self.loops.is_empty()
    }

    /// Takes `registration` out of whichever loop has it; a loop left
    /// without partitions stops.
    fn remove(&mut self, registration: &Registration) {
        let tp = registration.tp();
        self.unresolved.remove(tp);
        self.loops.retain(|_, l| {
            l.partitions.remove(tp);
            let keep = !l.partitions.is_empty();
            if !keep {
                l.stop.cancel();
            }
            keep
        });
    }

    /// Hands the partitions of loop `key` back to the resolver.
    fn unassign_loop(&mut self, key: LoopKey) {
        if let Some(l) = self.loops.remove(&key) {
            l.stop.cancel();
            self.unresolved.extend(l.partitions);
        }
    }
}

/// The fetchers of one mirror: the resolver and the loops per source broker.
struct SourceFetchers {
    mirror: String,
    source: SourceCluster,
    fetchers_per_source_broker: usize,
    replicas: Arc<dyn MirrorReplicas>,
    assignment: Mutex<Assignment>,
    /// Wakes the resolver: partitions wait for a leader.
    resolve: Notify,
    /// Ends the resolver once the mirror has no partition here; each loop
    /// has a child token.
    stop: CancellationToken,
}

impl SourceFetchers {
    /// Finds the source leaders of unresolved partitions, one Metadata
    /// request for all of them, at most every RETRY_BACKOFF.
    async fn resolve_leaders(self: Arc<Self>) {
        let mut last = None::<Instant>;
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = self.resolve.notified() => {}
            }
            let gap = last.map_or(RESOLVE_GATHER, |at: Instant| {
                RETRY_BACKOFF
                    .saturating_sub(at.elapsed())
                    .max(RESOLVE_GATHER)
            });
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(gap) => {}
            }
            last = Some(Instant::now());
            let mut topics: Vec<String> = self
                .assignment
                .lock()
                .unresolved
                .keys()
                .map(|tp| tp.topic.clone())
                .collect();
            topics.sort();
            topics.dedup();
            if topics.is_empty() {
                continue;
            }
            let found = self.source.topics_named(&topics).await;
            if !self.assign(found) {
                // Some wait still: look again after the backoff.
                self.resolve.notify_one();
            }
        }
    }

    /// Hands every unresolved partition with a known leader to its loop;
    /// whether none is left waiting.
    fn assign(self: &Arc<Self>, found: Result<TopicsNamed, String>) -> bool {
        let mut assignment = self.assignment.lock();
        let (topics, brokers) = match found {
            Ok(found) => found,
            Err(e) => {
                ottla_coordinator_common::log_limited!(
                    tracing::Level::WARN,
                    key: &self.mirror,
                    mirror = %self.mirror,
                    error = %e,
                    "cannot look up the source leaders"
                );
                for r in assignment.unresolved.values() {
                    r.stats.failed(e.clone());
                }
                return false;
            }
        };
        assignment.brokers = brokers;
        let unresolved = std::mem::take(&mut assignment.unresolved);
        for (tp, r) in unresolved {
            let leader = match topics.get(&tp.topic) {
                None => Err(format!("topic {} does not exist on the source", tp.topic)),
                Some(Err(e)) => Err(e.clone()),
                Some(Ok(topic)) => match topic.partitions.get(&tp.partition) {
                    None => Err(format!("the source has no partition {tp}")),
                    Some(&(leader, _)) if assignment.brokers.address(leader).is_none() => {
                        Err(format!("the source partition {tp} has no leader"))
                    }
                    Some(&(leader, epoch)) => Ok((leader, epoch)),
                },
            };
            match leader {
                Ok((leader, epoch)) => {
                    r.source_epoch.store(epoch, Ordering::Relaxed);
                    let key = (leader, fetcher_of(&tp, self.fetchers_per_source_broker));
                    let source_loop = assignment.loops.entry(key).or_insert_with(|| {
                        let stop = self.stop.child_token();
                        let endpoint = Arc::new(SourceBroker {
                            fetchers: self.clone(),
                            key,
                        });
                        tokio::spawn(fetch_loop::run(endpoint, stop.clone()));
                        SourceLoop {
                            partitions: HashMap::new(),
                            stop,
                        }
                    });
                    source_loop.partitions.insert(tp, r);
                }
                Err(e) => {
                    r.stats.failed(e);
                    assignment.unresolved.insert(tp, r);
                }
            }
        }
        assignment.unresolved.is_empty()
    }

    /// Sends `r` back to the resolver: its source leader moved.
    fn resolve_again(&self, r: &Arc<Registration>) {
        let mut assignment = self.assignment.lock();
        if r.active.lock().is_none() {
            return;
        }
        let tp = r.tp().clone();
        let mut emptied = None;
        for (key, l) in assignment.loops.iter_mut() {
            if l.partitions.remove(&tp).is_some() && l.partitions.is_empty() {
                emptied = Some(*key);
            }
        }
        if let Some(key) = emptied {
            assignment.unassign_loop(key);
        }
        assignment.unresolved.insert(tp, r.clone());
        self.resolve.notify_one();
    }
}

/// A fetch loop's leader: a broker of the source cluster.
struct SourceBroker {
    fetchers: Arc<SourceFetchers>,
    key: LoopKey,
}

impl LeaderEndpoint for SourceBroker {
    type Partition = Registration;

    fn wanted(&self) -> Vec<(Arc<Registration>, FetchPosition)> {
        let partitions: Vec<Arc<Registration>> = {
            let assignment = self.fetchers.assignment.lock();
            let Some(l) = assignment.loops.get(&self.key) else {
                return Vec::new();
            };
            l.partitions.values().cloned().collect()
        };
        partitions
            .into_iter()
            .map(|r| {
                let position = {
                    let log = r.partition.log().read();
                    FetchPosition {
                        fetch_offset: log.log_end_offset(),
                        last_fetched_epoch: log.latest_epoch().unwrap_or(-1),
                        log_start_offset: -1,
                        current_leader_epoch: r.source_epoch.load(Ordering::Relaxed),
                        max_bytes: PARTITION_MAX_BYTES,
                    }
                };
                (r, position)
            })
            .collect()
    }

    fn request(&self) -> FetchRequest {
        FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(MAX_WAIT.as_millis() as i32)
            .with_min_bytes(1)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_isolation_level(0)
    }

    fn timeout(&self) -> Duration {
        self.fetchers.source.timeout + MAX_WAIT
    }

    fn backoff(&self) -> Duration {
        RETRY_BACKOFF
    }

    async fn connect(&self) -> Result<KafkaClient, String> {
        let leader = self.key.0;
        let address = self
            .fetchers
            .assignment
            .lock()
            .brokers
            .address(leader)
            .cloned();
        let (host, port) =
            address.ok_or_else(|| format!("the source has no address for broker {leader}"))?;
        self.fetchers.source.connect(&host, port).await
    }

    async fn apply(
        &self,
        fetched: Vec<(Arc<Registration>, PartitionData)>,
    ) -> Vec<(Arc<Registration>, Followup)> {
        let replicas = self.fetchers.replicas.clone();
        let applied = fetch_loop::apply_on_blocking_pool(fetched, move |r, data| {
            apply_mirrored(&*replicas, r, data)
        })
        .await;
        let mut followups = Vec::new();
        for (r, next) in applied {
            match next {
                Next::Loop(followup) => followups.push((r, followup)),
                Next::Resolve => self.fetchers.resolve_again(&r),
            }
        }
        followups
    }

    /// The source's answer vouches for the high watermark of every
    /// partition it fetched, the unchanged ones it left out included.
    fn answered(&self, fetched: &[(Arc<Registration>, FetchPosition)]) {
        let now = now_ms();
        for (r, _) in fetched {
            r.stats.source_unchanged(now);
        }
    }

    async fn reset_offset(&self, client: &mut KafkaClient, r: &Arc<Registration>) {
        let timeout = self.fetchers.source.timeout;
        let (Some(start), Some(end)) = (
            list_offset(client, r.tp(), EARLIEST_TIMESTAMP, timeout).await,
            list_offset(client, r.tp(), LATEST_TIMESTAMP, timeout).await,
        ) else {
            return;
        };
        let r = r.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let mut active = r.active.lock();
            if active.is_none() {
                return;
            }
            let p = &r.partition;
            let mut log = p.log().write();
            let ours = log.log_end_offset();
            let result = if ours < start {
                warn!(partition = %p.tp(), start, "restarting the mirror at the source's log start");
                log.truncate_fully_and_start_at(start)
            } else if ours > end {
                warn!(partition = %p.tp(), end, "cutting the mirror back to the source's log end");
                log.truncate_to(end)
            } else {
                Ok(())
            };
            if let Err(e) = result {
                fail(&mut active, format!("local log error: {e}"));
            }
        })
        .await;
    }

    fn fetch_failed(&self, error: &str) {
        let leader = self.key.0;
        ottla_coordinator_common::log_limited!(
            tracing::Level::WARN,
            key: &(self.fetchers.mirror.clone(), leader),
            mirror = %self.fetchers.mirror,
            source_broker = leader,
            error,
            "mirror fetch from the source broker failed"
        );
        // The broker may be gone: every partition asks for its leader again.
        let mut assignment = self.fetchers.assignment.lock();
        if let Some(l) = assignment.loops.get(&self.key) {
            for r in l.partitions.values() {
                r.stats.failed(error.to_string());
            }
        }
        assignment.unassign_loop(self.key);
        self.fetchers.resolve.notify_one();
    }
}

/// What a partition's answer needs after it was applied.
enum Next {
    Loop(Followup),
    /// Its source leader moved: look it up again.
    Resolve,
}

/// Applies one partition's answer on the blocking pool.
fn apply_mirrored(
    replicas: &dyn MirrorReplicas,
    r: &Registration,
    data: PartitionData,
) -> Option<Next> {
    let mut active = r.active.lock();
    active.as_ref()?;
    let p = &r.partition;
    let error = ResponseError::try_from_code(data.error_code);
    let result = match error {
        None if data.diverging_epoch.epoch >= 0 => {
            let end = data.diverging_epoch.end_offset;
            info!(partition = %p.tp(), epoch = data.diverging_epoch.epoch, end, "the source diverged: truncating");
            let offset = end.min(p.log().read().log_end_offset());
            p.log()
                .write()
                .truncate_to(offset)
                .map_err(|e| e.to_string())
        }
        None => {
            let records = data.records.unwrap_or_default();
            let whole = match whole_batches_len(&records) {
                Ok(whole) => whole,
                Err(e) => {
                    fail(&mut active, format!("the source sent a corrupt batch: {e}"));
                    return None;
                }
            };
            let records = records.slice(..whole);
            let appended = if whole == 0 {
                Ok(())
            } else {
                replicas.append_mirrored(p.tp(), &records).map(|_| ())
            };
            if appended.is_ok() && whole > 0 {
                r.stats.appended(whole);
                if p.log().read().latest_epoch().unwrap_or(-1) > p.state().leader_epoch {
                    r.epoch_raised.notify_one();
                }
            }
            appended
        }
        Some(ResponseError::OffsetOutOfRange) => return Some(Next::Loop(Followup::ResetOffset)),
        Some(
            e @ (ResponseError::NotLeaderOrFollower
            | ResponseError::FencedLeaderEpoch
            | ResponseError::UnknownLeaderEpoch
            | ResponseError::UnknownTopicOrPartition
            | ResponseError::LeaderNotAvailable
            | ResponseError::KafkaStorageError),
        ) => {
            r.stats.failed(format!(
                "the source answered the fetch of {} with {e:?}",
                p.tp()
            ));
            return Some(Next::Resolve);
        }
        Some(e) => {
            r.stats.failed(format!(
                "the source answered the fetch of {} with {e:?}",
                p.tp()
            ));
            return Some(Next::Loop(Followup::Retry));
        }
    };
    match result {
        Ok(()) => {
            r.stats
                .source_answered(data.high_watermark, p.log().read().log_end_offset());
            None
        }
        Err(e) => {
            fail(&mut active, format!("local log error: {e}"));
            None
        }
    }
}

/// Fails a partition: no more writes, and its driver learns why.
fn fail(active: &mut Option<oneshot::Sender<String>>, reason: String) {
    if let Some(failed) = active.take() {
        let _ = failed.send(reason);
    }
}

/// One partition's offset at `timestamp` on the source broker `client`
/// talks to.
async fn list_offset(
    client: &mut KafkaClient,
    tp: &TopicPartition,
    timestamp: i64,
    timeout: Duration,
) -> Option<i64> {
    let partitions = [(tp.topic.clone(), tp.partition)];
    let answer = list_offsets(client, &partitions, timestamp, timeout).await;
    answer.ok()?.first().map(|&(_, offset)| offset)
}
