//! The fetching side of an incremental fetch session (KIP-227): the first
//! request lists every partition and asks the leader for a session; later
//! ones carry only the partitions whose fetch position changed and the ones
//! to forget, so an idle fetcher of thousands of partitions sends and
//! receives almost nothing. Any session error falls back to a full fetch.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use ottla_storage::manager::TopicPartition;

/// The epoch of a request that creates a session.
const INITIAL_EPOCH: i32 = 0;

/// Where a partition is fetched from next, as the leader must be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPosition {
    pub fetch_offset: i64,
    /// The epoch of the last fetched batch (diverging-epoch detection).
    pub last_fetched_epoch: i32,
    /// -1 for consumers; a follower's log start.
    pub log_start_offset: i64,
    /// The leader epoch the fetcher believes current (fencing).
    pub current_leader_epoch: i32,
    pub max_bytes: i32,
}

/// What goes into the next Fetch request.
#[derive(Debug)]
pub struct SessionRequest {
    pub session_id: i32,
    pub session_epoch: i32,
    pub topics: Vec<FetchTopic>,
    pub forgotten: Vec<ForgottenTopic>,
}

/// One fetch session with one leader.
#[derive(Debug, Default)]
pub struct FetchSession {
    /// 0 until the leader grants a session.
    id: i32,
    /// The epoch the next request carries: INITIAL_EPOCH asks for a new
    /// session with a full request.
    epoch: i32,
    /// What the leader's session holds now.
    held: HashMap<TopicPartition, FetchPosition>,
    /// What the request in flight changes, applied once it is answered.
    pending: Option<Pending>,
}

#[derive(Debug)]
enum Pending {
    /// A full request: the session becomes exactly this.
    Replace(HashMap<TopicPartition, FetchPosition>),
    /// An incremental one: these positions change, these are forgotten.
    Change(Vec<(TopicPartition, FetchPosition)>, Vec<TopicPartition>),
}

impl FetchSession {
    pub fn new() -> Self {
        Self::default()
    }

    /// The request that brings the leader's session to `wanted`: every
    /// partition when a new session is due, else the changed ones and the
    /// ones to forget. An idle session copies nothing.
    pub fn request(&mut self, wanted: &HashMap<&TopicPartition, FetchPosition>) -> SessionRequest {
        let full = !self.is_incremental();
        let changed: Vec<(&TopicPartition, &FetchPosition)> = wanted
            .iter()
            .filter(|(tp, position)| full || self.held.get(**tp) != Some(*position))
            .map(|(tp, position)| (*tp, position))
            .collect();
        let forgotten: Vec<&TopicPartition> = if full {
            Vec::new()
        } else {
            self.held
                .keys()
                .filter(|tp| !wanted.contains_key(tp))
                .collect()
        };
        let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
        for (tp, position) in &changed {
            topics
                .entry(&tp.topic)
                .or_default()
                .push(fetch_partition(tp.partition, position));
        }
        let mut forgotten_topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in &forgotten {
            forgotten_topics
                .entry(&tp.topic)
                .or_default()
                .push(tp.partition);
        }
        let request = SessionRequest {
            session_id: if full { 0 } else { self.id },
            session_epoch: if full { INITIAL_EPOCH } else { self.epoch },
            topics: topics_of(topics),
            forgotten: forgotten_topics
                .into_iter()
                .map(|(topic, partitions)| {
                    ForgottenTopic::default()
                        .with_topic(topic_name(topic))
                        .with_partitions(partitions)
                })
                .collect(),
        };
        let changed = changed
            .into_iter()
            .map(|(tp, position)| (tp.clone(), *position));
        self.pending = Some(if full {
            Pending::Replace(changed.collect())
        } else {
            Pending::Change(changed.collect(), forgotten.into_iter().cloned().collect())
        });
        request
    }

    /// The incremental request that moves the given partitions of the
    /// leader's session to new positions and leaves the rest as they are:
    /// for a caller that knows the session holds the partitions it wants
    /// and which of them moved. With none moved, an empty request (an idle
    /// long poll).
    pub fn request_moved(&mut self, moved: &[(&TopicPartition, FetchPosition)]) -> SessionRequest {
        debug_assert!(
            self.is_incremental(),
            "only a session has partitions to leave as they are"
        );
        let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
        for (tp, position) in moved {
            topics
                .entry(&tp.topic)
                .or_default()
                .push(fetch_partition(tp.partition, position));
        }
        self.pending = Some(Pending::Change(
            moved.iter().map(|(tp, p)| ((*tp).clone(), *p)).collect(),
            Vec::new(),
        ));
        SessionRequest {
            session_id: self.id,
            session_epoch: self.epoch,
            topics: topics_of(topics),
            forgotten: Vec::new(),
        }
    }

    /// Takes the leader's answer to the last request: a granted session
    /// (`session_id` of a full fetch) goes incremental; a refused request
    /// (a session error or any other) starts over with a full fetch, since
    /// what the leader's session holds is then unknown.
    pub fn answered(&mut self, error_code: i16, session_id: i32) {
        let pending = self.pending.take();
        if error_code != 0 {
            self.reset();
            return;
        }
        if self.is_incremental() {
            self.epoch = next_epoch(self.epoch);
        } else {
            // A full fetch: the leader may have made a session of it.
            self.id = session_id;
            self.epoch = if session_id == 0 { INITIAL_EPOCH } else { 1 };
        }
        match pending {
            Some(Pending::Replace(held)) => self.held = held,
            Some(Pending::Change(changed, forgotten)) => {
                for tp in forgotten {
                    self.held.remove(&tp);
                }
                self.held.extend(changed);
            }
            None => {}
        }
    }

    /// The connection or the request failed: nothing is known about the
    /// leader's session, so the next fetch is a full one.
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// Whether the next request is incremental.
    pub fn is_incremental(&self) -> bool {
        self.id != 0 && self.epoch != INITIAL_EPOCH
    }
}

/// Session epochs count up from 1 and wrap to 1, never to 0 (INITIAL).
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

fn fetch_partition(partition: i32, p: &FetchPosition) -> FetchPartition {
    FetchPartition::default()
        .with_partition(partition)
        .with_current_leader_epoch(p.current_leader_epoch)
        .with_fetch_offset(p.fetch_offset)
        .with_last_fetched_epoch(p.last_fetched_epoch)
        .with_log_start_offset(p.log_start_offset)
        .with_partition_max_bytes(p.max_bytes)
}

fn topics_of(topics: BTreeMap<&str, Vec<FetchPartition>>) -> Vec<FetchTopic> {
    topics
        .into_iter()
        .map(|(topic, partitions)| {
            FetchTopic::default()
                .with_topic(topic_name(topic))
                .with_partitions(partitions)
        })
        .collect()
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

#[cfg(test)]
pub(crate) mod tests {
    use kafka_protocol::error::ResponseError;

    use super::*;

    fn tp(partition: i32) -> TopicPartition {
        TopicPartition::new("t".to_string(), partition)
    }

    /// A position at `offset` (the fetch-loop tests use it too).
    pub(crate) fn at(offset: i64) -> FetchPosition {
        FetchPosition {
            fetch_offset: offset,
            last_fetched_epoch: 0,
            log_start_offset: -1,
            current_leader_epoch: 0,
            max_bytes: 1 << 20,
        }
    }

    /// Asks `session` for the request that fetches `positions`.
    fn request(session: &mut FetchSession, positions: &[(i32, i64)]) -> SessionRequest {
        let tps: Vec<TopicPartition> = positions.iter().map(|&(p, _)| tp(p)).collect();
        let wanted = tps
            .iter()
            .zip(positions)
            .map(|(tp, &(_, offset))| (tp, at(offset)))
            .collect();
        session.request(&wanted)
    }

    /// (partition, offset) of every position a request carries, sorted.
    pub(crate) fn sent(request: &SessionRequest) -> Vec<(i32, i64)> {
        let mut sent: Vec<_> = request
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .map(|p| (p.partition, p.fetch_offset))
            .collect();
        sent.sort();
        sent
    }

    /// The partitions a request forgets.
    pub(crate) fn forgotten(request: &SessionRequest) -> Vec<i32> {
        request
            .forgotten
            .iter()
            .flat_map(|t| t.partitions.iter().copied())
            .collect()
    }

    #[test]
    fn a_granted_session_sends_only_what_changed() {
        let mut session = FetchSession::new();
        let first = request(&mut session, &[(0, 10), (1, 20), (2, 30)]);
        assert_eq!((first.session_id, first.session_epoch), (0, 0));
        assert_eq!(sent(&first), vec![(0, 10), (1, 20), (2, 30)]);
        session.answered(0, 77);
        assert!(session.is_incremental());

        // Partition 1 moved on, partition 2 is no longer wanted.
        let next = request(&mut session, &[(0, 10), (1, 25)]);
        assert_eq!((next.session_id, next.session_epoch), (77, 1));
        assert_eq!(sent(&next), vec![(1, 25)]);
        assert_eq!(forgotten(&next), vec![2]);
        session.answered(0, 77);

        // Nothing changed: an empty incremental request, the next epoch.
        let idle = request(&mut session, &[(0, 10), (1, 25)]);
        assert_eq!((idle.session_id, idle.session_epoch), (77, 2));
        assert!(sent(&idle).is_empty() && forgotten(&idle).is_empty());
    }

    #[test]
    fn moved_positions_go_out_alone_and_update_the_session() {
        let mut session = FetchSession::new();
        request(&mut session, &[(0, 10), (1, 20), (2, 30)]);
        session.answered(0, 41);
        let (one, two) = (tp(1), tp(2));
        let moved = session.request_moved(&[(&one, at(25)), (&two, at(31))]);
        assert_eq!((moved.session_id, moved.session_epoch), (41, 1));
        assert_eq!(sent(&moved), vec![(1, 25), (2, 31)]);
        assert!(forgotten(&moved).is_empty());
        session.answered(0, 41);
        // The session now holds the moved positions: nothing to send.
        let idle = request(&mut session, &[(0, 10), (1, 25), (2, 31)]);
        assert!(sent(&idle).is_empty() && forgotten(&idle).is_empty());
        session.answered(0, 41);
        let empty = session.request_moved(&[]);
        assert_eq!((empty.session_id, empty.session_epoch), (41, 3));
        assert!(sent(&empty).is_empty());
    }

    #[test]
    fn session_errors_start_over_with_a_full_fetch() {
        for error in [
            ResponseError::FetchSessionIdNotFound,
            ResponseError::InvalidFetchSessionEpoch,
        ] {
            let mut session = FetchSession::new();
            request(&mut session, &[(0, 1), (1, 2)]);
            session.answered(0, 5);
            request(&mut session, &[(0, 3), (1, 2)]);
            session.answered(error.code(), 0);
            let full = request(&mut session, &[(0, 3), (1, 2)]);
            assert_eq!((full.session_id, full.session_epoch), (0, 0), "{error:?}");
            assert_eq!(sent(&full), vec![(0, 3), (1, 2)]);
        }
    }

    #[test]
    fn a_refused_request_starts_over_too() {
        let mut session = FetchSession::new();
        request(&mut session, &[(0, 1)]);
        session.answered(0, 9);
        request(&mut session, &[(0, 4)]);
        session.answered(ResponseError::UnknownServerError.code(), 0);
        let again = request(&mut session, &[(0, 4)]);
        assert_eq!((again.session_id, again.session_epoch), (0, 0));
        assert_eq!(sent(&again), vec![(0, 4)]);
    }

    #[test]
    fn a_leader_without_sessions_gets_full_fetches() {
        let mut session = FetchSession::new();
        request(&mut session, &[(0, 1)]);
        session.answered(0, 0);
        assert!(!session.is_incremental());
        let again = request(&mut session, &[(0, 1)]);
        assert_eq!((again.session_id, again.session_epoch), (0, 0));
        assert_eq!(sent(&again), vec![(0, 1)]);
    }

    #[test]
    fn epochs_wrap_to_one() {
        assert_eq!(next_epoch(1), 2);
        assert_eq!(next_epoch(i32::MAX), 1);
    }
}
