//! One fetch loop: a connection to one leader broker, one incremental fetch
//! session over it, and every partition this loop fetches from that leader
//! in each Fetch request. What is fetched, from where and what happens to
//! the answer is the endpoint's: a leader of this cluster for replication, a
//! source broker for mirroring (Kafka's AbstractFetcherThread with its two
//! leader endpoints).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::FetchRequest;
use ottla_client::KafkaClient;
use ottla_storage::manager::TopicPartition;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::session::{FetchPosition, FetchSession, SessionRequest};

/// Fetch v12: diverging-epoch answers, sessions, topics by name (leaders of
/// other clusters may not know this cluster's topic ids).
pub const FETCH_VERSION: i16 = 12;
/// How often a loop with nothing to fetch looks again.
const IDLE_POLL: Duration = Duration::from_millis(100);

/// A partition a loop fetches.
pub trait FetchedPartition: Send + Sync + 'static {
    /// Its name on the leader.
    fn leader_tp(&self) -> &TopicPartition;
}

/// What one partition's answer asks of the loop after it was applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Followup {
    /// Leave it out of the next fetches for the endpoint's backoff (an
    /// error the next metadata or a later try may clear).
    Retry,
    /// The leader has not yet taken up the epoch this fetcher's metadata
    /// gives (UNKNOWN_LEADER_EPOCH): it will within moments, so fetch
    /// again after [`LEADER_CATCH_UP`] rather than the backoff. Otherwise
    /// a follower that learned of a failover's epoch bump before its
    /// leader waited out `replica.fetch.backoff.ms`, with the failover
    /// waiting on it.
    RetrySoon,
    /// Its fetch offset is outside the leader's log.
    ResetOffset,
}

/// The pause before fetching a partition again whose leader was behind
/// this fetcher's metadata (at most the endpoint's backoff).
pub const LEADER_CATCH_UP: Duration = Duration::from_millis(50);

/// Where a loop fetches from, and what it does with the answers.
pub trait LeaderEndpoint: Send + Sync + 'static {
    type Partition: FetchedPartition;

    /// The partitions to fetch now, with their positions; one left out is
    /// dropped from the fetch session.
    fn wanted(&self) -> Vec<(Arc<Self::Partition>, FetchPosition)>;

    /// The request's fixed part: replica id, waits and size limits,
    /// isolation. The loop fills in the session and the partitions.
    fn request(&self) -> FetchRequest;

    /// How long a fetch may take beyond its max wait.
    fn timeout(&self) -> Duration;

    /// The pause after a failed fetch, and before a partition that failed
    /// is fetched again.
    fn backoff(&self) -> Duration;

    fn connect(&self) -> impl Future<Output = Result<KafkaClient, String>> + Send;

    /// Applies what the leader answered, all partitions at once; returns
    /// the partitions that need more than that.
    fn apply(
        &self,
        fetched: Vec<(Arc<Self::Partition>, PartitionData)>,
    ) -> impl Future<Output = Vec<(Arc<Self::Partition>, Followup)>> + Send;

    /// Brings `p`'s fetch offset back into the leader's log.
    fn reset_offset(
        &self,
        client: &mut KafkaClient,
        p: &Arc<Self::Partition>,
    ) -> impl Future<Output = ()> + Send;

    /// The connection failed or the leader refused the whole fetch.
    fn fetch_failed(&self, error: &str);

    /// The leader answered a fetch of `fetched` without error: in an
    /// incremental session, the ones its answer leaves out are unchanged.
    fn answered(&self, _fetched: &[(Arc<Self::Partition>, FetchPosition)]) {}

    /// Ticks when the partitions this loop fetches may have changed. A
    /// partition gained while a fetch waits at the leader (up to its max
    /// wait, for partitions with nothing new) would wait with it: the loop
    /// drops that fetch and its connection and fetches again at once, so
    /// a new leader's acks=all writes do not wait for an idle partition's
    /// long poll. None: the loop never looks.
    fn partitions_changed(&self) -> Option<watch::Receiver<()>> {
        None
    }
}

/// What became of a fetch sent to the leader.
enum Sent<T> {
    Answered(T),
    /// Partitions were gained while it waited: it was dropped.
    Superseded,
}

/// A partition whose last answer was an error, left out of the fetches
/// until `until` unless its leader epoch moves on: new metadata may have
/// cleared the error (a follower fenced because the leader took up a new
/// epoch a moment before it did), and Kafka's fetchers take a partition up
/// again at once on a new epoch.
struct Delayed {
    until: Instant,
    /// The current leader epoch it was fetched with.
    epoch: i32,
}

/// Whether a partition may be fetched: it is not waiting out a backoff, or
/// its leader epoch moved on since.
fn ready(
    delayed: &HashMap<TopicPartition, Delayed>,
    tp: &TopicPartition,
    position: &FetchPosition,
) -> bool {
    delayed
        .get(tp)
        .is_none_or(|d| d.epoch != position.current_leader_epoch)
}

/// Partitions with the positions they are fetched from.
type Positions<P> = Vec<(Arc<P>, FetchPosition)>;

/// Where each partition of a [`Positions`] list is, by name.
type Index = HashMap<TopicPartition, usize>;

/// What the leader's session holds after an answered request: its
/// partitions and positions, in the order they were asked, and where each
/// is in that order.
struct Held<P> {
    positions: Positions<P>,
    index: Index,
}

/// The next request of `session` for `wanted`, and where each wanted
/// partition is in `wanted`. When the leader's session holds exactly the
/// partitions of `held` in the same order, only the positions that moved
/// are looked at, and `held`'s index serves: a round over thousands of
/// partitions compares pointers and positions, and hashes nothing. Other
/// rounds (partitions gained or dropped, no session) build both anew.
fn next_request<P: FetchedPartition>(
    session: &mut FetchSession,
    held: Option<Held<P>>,
    wanted: &Positions<P>,
) -> (SessionRequest, Index) {
    let same_partitions = |held: &Positions<P>| {
        held.len() == wanted.len()
            && held
                .iter()
                .zip(wanted)
                .all(|((was, _), (now, _))| Arc::ptr_eq(was, now))
    };
    match held {
        Some(held) if session.is_incremental() && same_partitions(&held.positions) => {
            let moved: Vec<(&TopicPartition, FetchPosition)> = held
                .positions
                .iter()
                .zip(wanted)
                .filter(|((_, was), (_, now))| was != now)
                .map(|(_, (p, now))| (p.leader_tp(), *now))
                .collect();
            (session.request_moved(&moved), held.index)
        }
        _ => {
            let positions: HashMap<&TopicPartition, FetchPosition> = wanted
                .iter()
                .map(|(p, position)| (p.leader_tp(), *position))
                .collect();
            let index = wanted
                .iter()
                .enumerate()
                .map(|(i, (p, _))| (p.leader_tp().clone(), i))
                .collect();
            (session.request(&positions), index)
        }
    }
}

/// Fetches for `endpoint` until `stop` is cancelled.
pub async fn run<E: LeaderEndpoint>(endpoint: Arc<E>, stop: CancellationToken) {
    let mut client: Option<KafkaClient> = None;
    let mut session = FetchSession::new();
    // What the leader's session holds, once a request has been answered
    // (None: unknown, or no session).
    let mut in_session: Option<Held<E::Partition>> = None;
    let mut delayed: HashMap<TopicPartition, Delayed> = HashMap::new();
    let mut changes = endpoint.partitions_changed();
    while !stop.is_cancelled() {
        let now = Instant::now();
        delayed.retain(|_, d| d.until > now);
        // What `wanted` returns from here on includes every change so far.
        if let Some(changes) = changes.as_mut() {
            changes.borrow_and_update();
        }
        let mut wanted = endpoint.wanted();
        if !delayed.is_empty() {
            wanted.retain(|(p, position)| ready(&delayed, p.leader_tp(), position));
            for (p, _) in &wanted {
                delayed.remove(p.leader_tp());
            }
        }
        if wanted.is_empty() {
            pause(&stop, IDLE_POLL).await;
            continue;
        }
        let c = match client.as_mut() {
            Some(c) => c,
            None => match endpoint.connect().await {
                Ok(c) => {
                    session.reset();
                    in_session = None;
                    client.insert(c)
                }
                Err(e) => {
                    endpoint.fetch_failed(&e);
                    pause(&stop, endpoint.backoff()).await;
                    continue;
                }
            },
        };
        let (next, index) = next_request(&mut session, in_session.take(), &wanted);
        let mut request = endpoint
            .request()
            .with_session_id(next.session_id)
            .with_session_epoch(next.session_epoch)
            .with_topics(next.topics)
            .with_forgotten_topics_data(next.forgotten);
        // A partition waiting out its backoff (one that just moved here
        // may be refused by a leader a moment behind in taking it up) is
        // back in the next fetch by its retry time, not after a long poll.
        if let Some(retry) = delayed.values().map(|d| d.until).min() {
            let until_retry = retry.saturating_duration_since(now).as_millis();
            let capped = i32::try_from(until_retry).unwrap_or(i32::MAX).max(1);
            request.max_wait_ms = request.max_wait_ms.min(capped);
        }
        let sent = {
            let send = c.send(FETCH_VERSION, &request, endpoint.timeout());
            tokio::pin!(send);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    answer = &mut send => break Sent::Answered(answer),
                    () = next_change(&mut changes) => {
                        let asked: HashSet<&TopicPartition> =
                            wanted.iter().map(|(p, _)| p.leader_tp()).collect();
                        let gained = endpoint.wanted().iter().any(|(p, position)| {
                            let tp = p.leader_tp();
                            !asked.contains(tp) && ready(&delayed, tp, position)
                        });
                        if gained {
                            break Sent::Superseded;
                        }
                    }
                }
            }
        };
        let answer = match sent {
            Sent::Answered(answer) => answer,
            Sent::Superseded => {
                // The answer to the dropped fetch would come first on this
                // connection: a new one, in a new session.
                session.reset();
                client = None;
                continue;
            }
        };
        let response = match answer {
            Ok(response) => response,
            Err(e) => {
                session.reset();
                client = None;
                endpoint.fetch_failed(&e.to_string());
                pause(&stop, endpoint.backoff()).await;
                continue;
            }
        };
        session.answered(response.error_code, response.session_id);
        if response.error_code != 0 {
            let error = ResponseError::try_from_code(response.error_code);
            if !matches!(
                error,
                Some(
                    ResponseError::FetchSessionIdNotFound | ResponseError::InvalidFetchSessionEpoch
                )
            ) {
                // A session error only costs the next fetch being full.
                endpoint.fetch_failed(&format!("the leader refused the fetch: {error:?}"));
                pause(&stop, endpoint.backoff()).await;
            }
            continue;
        }
        endpoint.answered(&wanted);
        let fetched: Vec<_> = response
            .responses
            .into_iter()
            .flat_map(|topic| {
                let name = topic.topic.0.to_string();
                topic.partitions.into_iter().map(move |data| {
                    (
                        TopicPartition::new(name.clone(), data.partition_index),
                        data,
                    )
                })
            })
            .filter_map(|(tp, data)| Some((Arc::clone(&wanted[*index.get(&tp)?].0), data)))
            .collect();
        // An idle answer has no partitions: nothing to apply.
        let followups = if fetched.is_empty() {
            Vec::new()
        } else {
            endpoint.apply(fetched).await
        };
        for (p, followup) in followups {
            match followup {
                Followup::Retry | Followup::RetrySoon => {
                    let epoch = index
                        .get(p.leader_tp())
                        .map_or(-1, |&i| wanted[i].1.current_leader_epoch);
                    let pause = match followup {
                        Followup::RetrySoon => LEADER_CATCH_UP.min(endpoint.backoff()),
                        _ => endpoint.backoff(),
                    };
                    let until = Instant::now() + pause;
                    delayed.insert(p.leader_tp().clone(), Delayed { until, epoch });
                }
                Followup::ResetOffset => {
                    let c = client.as_mut().expect("connected");
                    endpoint.reset_offset(c, &p).await;
                }
            }
        }
        in_session = session.is_incremental().then_some(Held {
            positions: wanted,
            index,
        });
    }
}

/// Fetched partitions with their answers.
type Answers<P> = Vec<(Arc<P>, PartitionData)>;

/// Runs `apply` on every partition's answer on the blocking pool, in up to
/// as many tasks as there are cores, split by bytes: a response of a few
/// large partitions (a backlog) is written in parallel, one of many small
/// ones costs a few tasks, not one per partition. Returns what `apply`
/// gave back, partitions that needed nothing left out.
pub async fn apply_on_blocking_pool<P, T>(
    fetched: Answers<P>,
    apply: impl Fn(&Arc<P>, PartitionData) -> Option<T> + Clone + Send + 'static,
) -> Vec<(Arc<P>, T)>
where
    P: Send + Sync + 'static,
    T: Send + 'static,
{
    let tasks = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Each group: its bytes, and its partitions' answers.
    let mut groups: Vec<(usize, Answers<P>)> = (0..tasks).map(|_| (0, Vec::new())).collect();
    for (p, data) in fetched {
        let bytes = data.records.as_ref().map_or(0, |r| r.len());
        let lightest = groups
            .iter_mut()
            .min_by_key(|(load, _)| *load)
            .expect("at least one group");
        lightest.0 += bytes;
        lightest.1.push((p, data));
    }
    let running: Vec<_> = groups
        .into_iter()
        .filter(|(_, group)| !group.is_empty())
        .map(|(_, group)| {
            let apply = apply.clone();
            tokio::task::spawn_blocking(move || {
                group
                    .into_iter()
                    .filter_map(|(p, data)| Some((p.clone(), apply(&p, data)?)))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut applied = Vec::new();
    for task in running {
        match task.await {
            Ok(done) => applied.extend(done),
            Err(e) => tracing::error!(error = %e, "writing fetched data panicked"),
        }
    }
    applied
}

/// The next tick of `changes`; never, when there is none or its sender
/// is gone.
async fn next_change(changes: &mut Option<watch::Receiver<()>>) {
    if let Some(receiver) = changes.as_mut() {
        if receiver.changed().await.is_ok() {
            return;
        }
        *changes = None;
    }
    std::future::pending().await
}

async fn pause(stop: &CancellationToken, how_long: Duration) {
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = tokio::time::sleep(how_long) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::tests::{at, forgotten, sent};

    struct Part(TopicPartition);

    impl FetchedPartition for Part {
        fn leader_tp(&self) -> &TopicPartition {
            &self.0
        }
    }

    #[test]
    fn a_round_over_the_partitions_the_session_holds_sends_what_moved() {
        let parts: Vec<Arc<Part>> = (0..3)
            .map(|i| Arc::new(Part(TopicPartition::new("t", i))))
            .collect();
        let positions = |offsets: &[i64]| -> Positions<Part> {
            parts
                .iter()
                .cloned()
                .zip(offsets.iter().map(|&o| at(o)))
                .collect()
        };
        let mut session = FetchSession::new();
        let (first, index) = next_request(&mut session, None, &positions(&[1, 2, 3]));
        assert_eq!((first.session_id, sent(&first).len()), (0, 3));
        assert_eq!(index[&TopicPartition::new("t", 2)], 2);
        session.answered(0, 8);
        let held = |offsets: &[i64], index| Held {
            positions: positions(offsets),
            index,
        };

        let (idle, index) = next_request(
            &mut session,
            Some(held(&[1, 2, 3], index)),
            &positions(&[1, 2, 3]),
        );
        assert!(sent(&idle).is_empty() && idle.forgotten.is_empty());
        session.answered(0, 8);

        let (moved, index) = next_request(
            &mut session,
            Some(held(&[1, 2, 3], index)),
            &positions(&[1, 5, 3]),
        );
        assert_eq!(sent(&moved), vec![(1, 5)]);
        session.answered(0, 8);

        // One partition fewer: the session forgets it, the index is anew.
        let fewer: Positions<Part> = positions(&[1, 5, 3]).into_iter().take(2).collect();
        let (forgot, index) = next_request(&mut session, Some(held(&[1, 5, 3], index)), &fewer);
        assert!(sent(&forgot).is_empty());
        assert_eq!(index.len(), 2);
        assert_eq!(forgotten(&forgot), vec![2]);
    }
}
