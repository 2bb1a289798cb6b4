//! Incremental fetch sessions (KIP-227).
//!
//! A client's first fetch with epoch 0 creates a session; later fetches send
//! only the partitions that changed (and the ones to forget), and the broker
//! answers only the partitions whose state changed. Sessionless fetches
//! (epoch -1) bypass the cache.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use ottla_storage::manager::TopicPartition;
use parking_lot::Mutex;
use uuid::Uuid;

pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

/// What the client asked for one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionFetch {
    pub topic_id: Uuid,
    pub fetch_offset: i64,
    pub log_start_offset: i64,
    pub max_bytes: i32,
    pub current_leader_epoch: i32,
    /// Replica fetches (v12+): the epoch of the follower's last batch.
    pub last_fetched_epoch: i32,
    /// Replica fetches (v18+, KIP-1166): the high watermark the replica
    /// says it has, when it says.
    pub replica_high_watermark: Option<i64>,
}

/// What the broker last told the client about a partition; a partition is
/// answered again only when this changes or data is returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionSeen {
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
}

/// What a fetch answered for one partition.
#[derive(Debug, Clone, Copy)]
pub struct Answered {
    pub seen: PartitionSeen,
    /// Records, an error, a divergence or a replica to read from instead:
    /// an incremental answer includes the partition even if `seen` is as
    /// before.
    pub must_include: bool,
}

#[derive(Debug)]
struct Session {
    epoch: i32,
    partitions: BTreeMap<TopicPartition, (PartitionFetch, Option<PartitionSeen>)>,
    last_used: Instant,
}

/// The partitions a fetch works on, after the session was applied.
#[derive(Debug)]
pub struct SessionFetch {
    /// 0 when the fetch is sessionless.
    pub session_id: i32,
    /// Full fetches answer every partition; incremental ones only changes.
    pub incremental: bool,
    pub partitions: Vec<(TopicPartition, PartitionFetch)>,
    /// The high watermark the session last answered for each partition, in
    /// the order of `partitions` (empty: none answered yet).
    answered_high_watermarks: Vec<Option<i64>>,
}

impl SessionFetch {
    /// The high watermark the fetcher of partition `i` is known to have:
    /// the larger of what the session last answered and what the fetcher
    /// says it has (Fetch v18).
    pub fn told_high_watermark(&self, i: usize) -> Option<i64> {
        let answered = self.answered_high_watermarks.get(i).copied().flatten();
        let stated = self
            .partitions
            .get(i)
            .and_then(|(_, f)| f.replica_high_watermark);
        answered.max(stated)
    }
}

pub struct FetchSessionCache {
    sessions: Mutex<HashMap<i32, Session>>,
    max_sessions: usize,
    idle_timeout: Duration,
}

impl FetchSessionCache {
    pub fn new(max_sessions: usize, idle_timeout: Duration) -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            max_sessions,
            idle_timeout,
        }
    }

    /// Applies a fetch request to the session cache. `requested` holds the
    /// partitions listed in the request, `forgotten` those to drop.
    pub fn begin(
        &self,
        session_id: i32,
        epoch: i32,
        requested: Vec<(TopicPartition, PartitionFetch)>,
        forgotten: Vec<TopicPartition>,
    ) -> Result<SessionFetch, ResponseError> {
        let mut sessions = self.sessions.lock();
        let now = Instant::now();
        sessions.retain(|_, s| now.duration_since(s.last_used) < self.idle_timeout);
        if epoch == FINAL_EPOCH {
            if session_id != 0 {
                sessions.remove(&session_id);
            }
            return Ok(SessionFetch {
                session_id: 0,
                incremental: false,
                partitions: requested,
                answered_high_watermarks: Vec::new(),
            });
        }
        if epoch == INITIAL_EPOCH {
            if session_id != 0 {
                sessions.remove(&session_id);
            }
            if sessions.len() >= self.max_sessions {
                // Kafka evicts by privilege and age; the oldest goes here.
                if let Some(oldest) = sessions
                    .iter()
                    .min_by_key(|(_, s)| s.last_used)
                    .map(|(id, _)| *id)
                {
                    sessions.remove(&oldest);
                }
            }
            let id = self.allocate_id(&sessions);
            sessions.insert(
                id,
                Session {
                    epoch: 1,
                    partitions: requested
                        .iter()
                        .map(|(tp, f)| (tp.clone(), (f.clone(), None)))
                        .collect(),
                    last_used: now,
                },
            );
            return Ok(SessionFetch {
                session_id: id,
                incremental: false,
                partitions: requested,
                answered_high_watermarks: Vec::new(),
            });
        }
        let session = sessions
            .get_mut(&session_id)
            .ok_or(ResponseError::FetchSessionIdNotFound)?;
        if session.epoch != epoch {
            return Err(ResponseError::InvalidFetchSessionEpoch);
        }
        session.epoch = next_epoch(epoch);
        session.last_used = now;
        for tp in forgotten {
            session.partitions.remove(&tp);
        }
        for (tp, fetch) in requested {
            let seen = session.partitions.get(&tp).and_then(|(_, s)| *s);
            session.partitions.insert(tp, (fetch, seen));
        }
        Ok(SessionFetch {
            session_id,
            incremental: true,
            partitions: session
                .partitions
                .iter()
                .map(|(tp, (f, _))| (tp.clone(), f.clone()))
                .collect(),
            answered_high_watermarks: session
                .partitions
                .values()
                .map(|(_, seen)| seen.map(|s| s.high_watermark))
                .collect(),
        })
    }

    /// Records what was answered for each partition of a fetch (in the
    /// order of `partitions`); returns, for each, whether an incremental
    /// response must include it. The cache is locked once per fetch, not
    /// once per partition.
    ///
    /// The cached fetch offsets stay what the client last sent, as Kafka's
    /// do: a client that throws a response away (its partitions were
    /// revoked, or it seeked) does not list the partition again while its
    /// position is unchanged, so moving the offset here would skip the
    /// records it never took, or park it at the log end.
    pub fn record_all(
        &self,
        session_id: i32,
        partitions: &[(TopicPartition, PartitionFetch)],
        answers: &[Answered],
    ) -> Vec<bool> {
        if session_id == 0 {
            return vec![true; answers.len()];
        }
        let mut sessions = self.sessions.lock();
        let Some(session) = sessions.get_mut(&session_id) else {
            return vec![true; answers.len()];
        };
        partitions
            .iter()
            .zip(answers)
            .map(|((tp, _), answer)| {
                let Some((_, last)) = session.partitions.get_mut(tp) else {
                    return true;
                };
                let changed = *last != Some(answer.seen);
                *last = Some(answer.seen);
                answer.must_include || changed
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A random unused positive id, as Kafka draws them: sequential ids
    /// would be handed out again after a restart, and a client still holding
    /// an old session with a matching epoch would then fetch through another
    /// client's session and move its offsets.
    fn allocate_id(&self, sessions: &HashMap<i32, Session>) -> i32 {
        loop {
            let id = (uuid::Uuid::new_v4().as_u128() as i32) & i32::MAX;
            if id != 0 && !sessions.contains_key(&id) {
                return id;
            }
        }
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn fetch(offset: i64) -> PartitionFetch {
        PartitionFetch {
            last_fetched_epoch: -1,
            topic_id: Uuid::nil(),
            fetch_offset: offset,
            log_start_offset: -1,
            max_bytes: 1024,
            current_leader_epoch: -1,
            replica_high_watermark: None,
        }
    }

    #[test]
    fn sessions_carry_partitions_between_fetches() {
        let cache = FetchSessionCache::new(10, Duration::from_secs(60));
        let full = cache
            .begin(0, 0, vec![(tp(0), fetch(0)), (tp(1), fetch(0))], vec![])
            .unwrap();
        assert!(!full.incremental);
        let id = full.session_id;
        assert_ne!(id, 0);
        let seen = PartitionSeen {
            high_watermark: 5,
            last_stable_offset: 5,
            log_start_offset: 0,
        };
        let answered = |must_include| Answered { seen, must_include };
        assert_eq!(
            cache.record_all(id, &full.partitions, &[answered(true), answered(false)]),
            vec![true, true],
            "first answers are new"
        );
        // Incremental: no partitions listed, both still fetched, from where
        // the client said: records answered but not taken are read again.
        let inc = cache.begin(id, 1, vec![], vec![]).unwrap();
        assert!(inc.incremental);
        assert_eq!(inc.partitions.len(), 2);
        assert_eq!(
            inc.partitions[0].1.fetch_offset, 0,
            "only the client moves its offsets"
        );
        // Unchanged partition with no data is left out of the response.
        assert_eq!(
            cache.record_all(id, &inc.partitions, &[answered(true), answered(false)]),
            vec![true, false]
        );
        // A listed partition takes the client's new offset.
        let inc = cache
            .begin(id, 2, vec![(tp(0), fetch(5))], vec![tp(1)])
            .unwrap();
        assert_eq!(inc.partitions.len(), 1);
        assert_eq!(inc.partitions[0].1.fetch_offset, 5);
        assert_eq!(
            cache.begin(id, 9, vec![], vec![]).unwrap_err(),
            ResponseError::InvalidFetchSessionEpoch
        );
        assert_eq!(
            cache.begin(777, 1, vec![], vec![]).unwrap_err(),
            ResponseError::FetchSessionIdNotFound
        );
        let closed = cache
            .begin(id, FINAL_EPOCH, vec![(tp(0), fetch(0))], vec![])
            .unwrap();
        assert_eq!(closed.session_id, 0);
        assert!(cache.is_empty());
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = FetchSessionCache::new(2, Duration::from_secs(60));
        for _ in 0..5 {
            cache.begin(0, 0, vec![(tp(0), fetch(0))], vec![]).unwrap();
        }
        assert_eq!(cache.len(), 2);
    }
}
