//! Share sessions (KIP-932): the partitions a share-group member fetches
//! from this broker, kept between its ShareFetch requests so each request
//! names only what changed. Epoch 0 opens a session (replacing any the
//! member had), each later request carries the session's epoch and moves it
//! on, and -1 closes it.

use std::collections::{HashMap, HashSet};

use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use uuid::Uuid;

/// A topic partition as share requests name it.
pub type TopicIdPartition = (Uuid, i32);

pub const INITIAL_EPOCH: i32 = 0;
/// Share sessions a broker holds at most (Kafka's default
/// `group.share.max.share.sessions`).
const MAX_SESSIONS: usize = 2000;
pub const FINAL_EPOCH: i32 = -1;

/// A request's view of its member's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionUse {
    /// An open session (new when `full`): the partitions to fetch.
    Open {
        partitions: Vec<TopicIdPartition>,
        full: bool,
    },
    /// The session closed by this request: the partitions it had, whose
    /// records the member holds are given back.
    Closed { partitions: Vec<TopicIdPartition> },
}

/// What a ShareFetch asks of its session.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionChanges<'a> {
    /// The partitions it names.
    pub added: &'a [TopicIdPartition],
    /// The partitions it drops.
    pub forgotten: &'a [TopicIdPartition],
    /// Whether it carries acknowledgements, which an opening request may
    /// not.
    pub acknowledges: bool,
}

struct Session {
    epoch: i32,
    partitions: Vec<TopicIdPartition>,
    last_used: i64,
}

#[derive(Default)]
pub struct ShareSessions {
    sessions: Mutex<HashMap<(String, String), Session>>,
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl ShareSessions {
    /// A ShareFetch's session: see [`SessionChanges`].
    pub fn fetch(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
        changes: SessionChanges<'_>,
        now: i64,
    ) -> Result<SessionUse, ResponseError> {
        let SessionChanges {
            added,
            forgotten,
            acknowledges,
        } = changes;
        let key = (group.to_string(), member.to_string());
        let mut sessions = self.sessions.lock();
        match epoch {
            FINAL_EPOCH => {
                if !added.is_empty() {
                    return Err(ResponseError::InvalidRequest);
                }
                let session = sessions
                    .remove(&key)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                Ok(SessionUse::Closed {
                    partitions: session.partitions,
                })
            }
            INITIAL_EPOCH => {
                if acknowledges {
                    return Err(ResponseError::InvalidRequest);
                }
                // Each member id opens its own session: a cap keeps made-up
                // member ids from filling the broker's memory.
                if sessions.len() >= MAX_SESSIONS && !sessions.contains_key(&key) {
                    return Err(ResponseError::ShareSessionLimitReached);
                }
                let mut partitions = Vec::with_capacity(added.len());
                add_new(&mut partitions, added);
                sessions.insert(
                    key,
                    Session {
                        epoch: next_epoch(INITIAL_EPOCH),
                        partitions: partitions.clone(),
                        last_used: now,
                    },
                );
                Ok(SessionUse::Open {
                    partitions,
                    full: true,
                })
            }
            _ => {
                let session = Self::current(&mut sessions, &key, epoch)?;
                let forgotten: HashSet<&TopicIdPartition> = forgotten.iter().collect();
                session.partitions.retain(|tp| !forgotten.contains(tp));
                add_new(&mut session.partitions, added);
                session.epoch = next_epoch(epoch);
                session.last_used = now;
                Ok(SessionUse::Open {
                    partitions: session.partitions.clone(),
                    full: false,
                })
            }
        }
    }

    /// A ShareAcknowledge's session: it must be open at `epoch` (which
    /// moves on), or be closed by it (-1).
    pub fn acknowledge(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
        now: i64,
    ) -> Result<SessionUse, ResponseError> {
        match epoch {
            INITIAL_EPOCH => Err(ResponseError::InvalidShareSessionEpoch),
            FINAL_EPOCH => {
                let changes = SessionChanges {
                    acknowledges: true,
                    ..SessionChanges::default()
                };
                self.fetch(group, member, epoch, changes, now)
            }
            _ => {
                let key = (group.to_string(), member.to_string());
                let mut sessions = self.sessions.lock();
                let session = Self::current(&mut sessions, &key, epoch)?;
                session.epoch = next_epoch(epoch);
                session.last_used = now;
                Ok(SessionUse::Open {
                    partitions: session.partitions.clone(),
                    full: false,
                })
            }
        }
    }

    fn current<'a>(
        sessions: &'a mut HashMap<(String, String), Session>,
        key: &(String, String),
        epoch: i32,
    ) -> Result<&'a mut Session, ResponseError> {
        let session = sessions
            .get_mut(key)
            .ok_or(ResponseError::ShareSessionNotFound)?;
        if session.epoch != epoch {
            return Err(ResponseError::InvalidShareSessionEpoch);
        }
        Ok(session)
    }

    /// Closes the sessions `idle(group, last used)` says were left (their
    /// members stopped fetching without closing them); each as (group,
    /// member, partitions), for their records to be given back.
    pub fn close_idle(
        &self,
        mut idle: impl FnMut(&str, i64) -> bool,
    ) -> Vec<(String, String, Vec<TopicIdPartition>)> {
        let mut sessions = self.sessions.lock();
        let idle: Vec<(String, String)> = sessions
            .iter()
            .filter(|(k, s)| idle(&k.0, s.last_used))
            .map(|(k, _)| k.clone())
            .collect();
        idle.into_iter()
            .filter_map(|key| {
                let session = sessions.remove(&key)?;
                Some((key.0, key.1, session.partitions))
            })
            .collect()
    }

    /// Whether any open session of `group` fetches `tp`.
    pub fn includes(&self, group: &str, tp: &TopicIdPartition) -> bool {
        self.sessions
            .lock()
            .iter()
            .any(|((g, _), s)| g == group && s.partitions.contains(tp))
    }

    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Appends the partitions of `added` not listed yet, in order. Hashed: a
/// request may name a great many.
fn add_new(partitions: &mut Vec<TopicIdPartition>, added: &[TopicIdPartition]) {
    let mut listed: HashSet<TopicIdPartition> = partitions.iter().copied().collect();
    for tp in added {
        if listed.insert(*tp) {
            partitions.push(*tp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicIdPartition {
        (Uuid::from_u128(7), p)
    }

    fn changes<'a>(
        added: &'a [TopicIdPartition],
        forgotten: &'a [TopicIdPartition],
        acknowledges: bool,
    ) -> SessionChanges<'a> {
        SessionChanges {
            added,
            forgotten,
            acknowledges,
        }
    }

    #[test]
    fn a_session_opens_moves_its_epoch_on_and_closes() {
        let s = ShareSessions::default();
        let opened = s
            .fetch("g", "m", 0, changes(&[tp(0), tp(1)], &[], false), 0)
            .unwrap();
        assert_eq!(
            opened,
            SessionUse::Open {
                partitions: vec![tp(0), tp(1)],
                full: true
            }
        );
        assert_eq!(
            s.fetch("g", "m", 2, changes(&[], &[], false), 0),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
        let next = s
            .fetch("g", "m", 1, changes(&[tp(2)], &[tp(0)], true), 0)
            .unwrap();
        assert_eq!(
            next,
            SessionUse::Open {
                partitions: vec![tp(1), tp(2)],
                full: false
            }
        );
        // ShareAcknowledge moves the same epoch on.
        s.acknowledge("g", "m", 2, 0).unwrap();
        assert_eq!(
            s.acknowledge("g", "m", 0, 0),
            Err(ResponseError::InvalidShareSessionEpoch)
        );
        assert_eq!(
            s.fetch("g", "m", -1, changes(&[], &[], true), 0).unwrap(),
            SessionUse::Closed {
                partitions: vec![tp(1), tp(2)]
            }
        );
        assert_eq!(
            s.fetch("g", "m", 4, changes(&[], &[], false), 0),
            Err(ResponseError::ShareSessionNotFound)
        );
    }

    #[test]
    fn opening_requests_carry_no_acknowledgements_and_closing_ones_no_partitions() {
        let s = ShareSessions::default();
        assert_eq!(
            s.fetch("g", "m", 0, changes(&[tp(0)], &[], true), 0),
            Err(ResponseError::InvalidRequest)
        );
        s.fetch("g", "m", 0, changes(&[tp(0)], &[], false), 0)
            .unwrap();
        assert_eq!(
            s.fetch("g", "m", -1, changes(&[tp(1)], &[], false), 0),
            Err(ResponseError::InvalidRequest)
        );
        // A second opening replaces the session.
        s.fetch("g", "m", 0, changes(&[tp(3)], &[], false), 0)
            .unwrap();
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn sessions_are_capped_and_long_lists_stay_deduplicated() {
        let s = ShareSessions::default();
        for m in 0..MAX_SESSIONS {
            s.fetch("g", &m.to_string(), 0, changes(&[tp(0)], &[], false), 0)
                .unwrap();
        }
        assert_eq!(
            s.fetch("g", "one-more", 0, changes(&[tp(0)], &[], false), 0),
            Err(ResponseError::ShareSessionLimitReached)
        );
        // An existing member may still open its session again.
        let many: Vec<TopicIdPartition> = (0..50_000).map(|p| tp(p % 25_000)).collect();
        let opened = s.fetch("g", "7", 0, changes(&many, &[], false), 0).unwrap();
        let SessionUse::Open { partitions, .. } = opened else {
            panic!("open")
        };
        assert_eq!(partitions.len(), 25_000);
    }

    #[test]
    fn idle_sessions_are_closed_with_their_partitions() {
        let s = ShareSessions::default();
        s.fetch("g", "old", 0, changes(&[tp(0)], &[], false), 10)
            .unwrap();
        s.fetch("g", "new", 0, changes(&[tp(1)], &[], false), 50)
            .unwrap();
        assert!(s.includes("g", &tp(0)) && s.includes("g", &tp(1)));
        let closed = s.close_idle(|group, last_used| group == "g" && last_used < 40);
        assert_eq!(closed, vec![("g".into(), "old".into(), vec![tp(0)])]);
        assert_eq!(s.len(), 1);
        assert!(!s.includes("g", &tp(0)) && !s.includes("h", &tp(1)));
    }
}
