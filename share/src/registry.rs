//! The share partitions this broker leads: one [`SharePartition`] per
//! (share group, topic partition) that a member has fetched from here.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use uuid::Uuid;

use crate::partition::{DeliveryLimits, SharePartition, Window};
use crate::sessions::TopicIdPartition;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SharePartitionKey {
    pub group: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

impl SharePartitionKey {
    pub fn new(group: &str, (topic_id, partition): TopicIdPartition) -> Self {
        Self {
            group: group.to_string(),
            topic_id,
            partition,
        }
    }
}

/// One share partition, with the delivery limits of its group as last
/// seen (they follow the group's config).
pub struct Entry {
    pub key: SharePartitionKey,
    pub state: Mutex<SharePartition>,
    pub limits: Mutex<DeliveryLimits>,
    /// Held while the state is persisted: one write at a time, each taken
    /// after the last, so the share coordinator never gets an older state
    /// after a newer one.
    pub persisting: tokio::sync::Mutex<()>,
    /// The persisted state's epoch when it was read: a write from an older
    /// epoch is fenced (the state was initialized again since).
    pub state_epoch: i32,
}

#[derive(Default)]
pub struct SharePartitions {
    map: RwLock<HashMap<SharePartitionKey, Arc<Entry>>>,
    /// The share partitions that may hold acquired records: the only ones
    /// the lock-expiry tick visits. Added to under the entry's state lock
    /// when records are acquired, removed under it once none are.
    holding: Mutex<HashSet<SharePartitionKey>>,
    /// The share partitions that may hold records to write to their
    /// group's dead-letter queue (the broker takes them in rounds).
    dead_letters: Mutex<HashSet<SharePartitionKey>>,
    /// Dead letters written to their group's queue, and archived without
    /// being written (the queue refused, or the write failed).
    written_dead_letters: AtomicU64,
    unwritten_dead_letters: AtomicU64,
}

impl SharePartitions {
    pub fn get(&self, key: &SharePartitionKey) -> Option<Arc<Entry>> {
        self.map.read().get(key).cloned()
    }

    /// The share partition of `key`, `partition` (read at `state_epoch`)
    /// if it is new (a concurrent first use may have won); its limits set
    /// to `limits`.
    pub fn get_or_insert(
        &self,
        key: &SharePartitionKey,
        limits: DeliveryLimits,
        partition: SharePartition,
        state_epoch: i32,
    ) -> Arc<Entry> {
        let mut map = self.map.write();
        if partition.has_unsent_dead_letters() {
            self.note_dead_letters(key);
        }
        let entry = map.entry(key.clone()).or_insert_with(|| {
            Arc::new(Entry {
                key: key.clone(),
                state: Mutex::new(partition),
                limits: Mutex::new(limits),
                persisting: tokio::sync::Mutex::new(()),
                state_epoch,
            })
        });
        *entry.limits.lock() = limits;
        entry.clone()
    }

    /// Records were just acquired in `key`'s share partition: call with
    /// its state lock held, so the lock-expiry tick cannot miss them.
    pub fn note_acquired(&self, key: &SharePartitionKey) {
        self.holding.lock().insert(key.clone());
    }

    /// `key`'s share partition may hold records for its group's
    /// dead-letter queue.
    pub fn note_dead_letters(&self, key: &SharePartitionKey) {
        self.dead_letters.lock().insert(key.clone());
    }

    /// The share partitions that may hold records for their group's
    /// dead-letter queue, forgotten here: the caller takes them.
    pub fn take_dead_letters(&self) -> Vec<SharePartitionKey> {
        self.dead_letters.lock().drain().collect()
    }

    pub fn has_dead_letters(&self) -> bool {
        !self.dead_letters.lock().is_empty()
    }

    /// A dead-letter round wrote `written` records and archived
    /// `unwritten` without writing them.
    pub fn count_dead_letters(&self, written: u64, unwritten: u64) {
        self.written_dead_letters
            .fetch_add(written, Ordering::Relaxed);
        self.unwritten_dead_letters
            .fetch_add(unwritten, Ordering::Relaxed);
    }

    /// Dead letters written, and archived unwritten, since the start.
    pub fn dead_letter_counts(&self) -> (u64, u64) {
        (
            self.written_dead_letters.load(Ordering::Relaxed),
            self.unwritten_dead_letters.load(Ordering::Relaxed),
        )
    }

    /// Releases expired locks in the share partitions holding acquired
    /// records (not every share partition); the topic partitions where
    /// records became deliverable again (their waiting fetches wake).
    pub fn expire_locks(&self, now: i64) -> Vec<TopicIdPartition> {
        let keys: Vec<SharePartitionKey> = self.holding.lock().iter().cloned().collect();
        let mut released = Vec::new();
        for key in keys {
            let Some(e) = self.get(&key) else {
                self.holding.lock().remove(&key);
                continue;
            };
            let limits = *e.limits.lock();
            let mut state = e.state.lock();
            if state.expire_locks(now, &limits) {
                released.push((key.topic_id, key.partition));
            }
            if state.has_unsent_dead_letters() {
                self.note_dead_letters(&key);
            }
            if state.window().acquired == 0 {
                self.holding.lock().remove(&key);
            }
        }
        released
    }

    /// Gives back what `member` of `group` holds on `partitions`; those
    /// where it held anything.
    pub fn release_member(
        &self,
        group: &str,
        member: &str,
        partitions: &[TopicIdPartition],
    ) -> Vec<TopicIdPartition> {
        partitions
            .iter()
            .filter(|tp| {
                self.get(&SharePartitionKey::new(group, **tp))
                    .is_some_and(|e| {
                        let limits = *e.limits.lock();
                        let mut state = e.state.lock();
                        let released = state.release_member(member, &limits);
                        if state.has_unsent_dead_letters() {
                            self.note_dead_letters(&e.key);
                        }
                        released
                    })
            })
            .copied()
            .collect()
    }

    /// Forgets `key`'s share partition (its persisted state changed under
    /// it): the next fetch reads it again.
    pub fn remove(&self, key: &SharePartitionKey) {
        self.map.write().remove(key);
    }

    /// Forgets `key`'s share partition if no record of it is acquired (no
    /// member fetches it here any more): the next fetch reads the persisted
    /// state, which an offset reset may have changed.
    pub fn remove_if_idle(&self, key: &SharePartitionKey) {
        let mut map = self.map.write();
        if map
            .get(key)
            .is_some_and(|e| e.state.lock().window().acquired == 0)
        {
            map.remove(key);
        }
    }

    /// Forgets the share partitions of topic partitions `keep` refuses
    /// (no longer led here, or deleted).
    pub fn retain(&self, mut keep: impl FnMut(&TopicIdPartition) -> bool) {
        self.map
            .write()
            .retain(|k, _| keep(&(k.topic_id, k.partition)));
    }

    /// The share partitions of `group`, with their windows.
    pub fn windows_of(&self, group: &str) -> Vec<(TopicIdPartition, Window)> {
        let mut out: Vec<(TopicIdPartition, Window)> = self
            .map
            .read()
            .iter()
            .filter(|(k, _)| k.group == group)
            .map(|(k, e)| ((k.topic_id, k.partition), e.state.lock().window()))
            .collect();
        out.sort_by_key(|(tp, _)| *tp);
        out
    }

    pub fn len(&self) -> usize {
        self.map.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::FetchedBatch;

    const LIMITS: DeliveryLimits = DeliveryLimits {
        record_lock_duration_ms: 1000,
        delivery_count_limit: 5,
        max_in_flight: 100,
        dead_letter_queue: false,
    };

    #[test]
    fn the_lock_tick_visits_only_partitions_holding_records() {
        let registry = SharePartitions::default();
        let key = |p| SharePartitionKey::new("g", (Uuid::from_u128(1), p));
        let busy = registry.get_or_insert(&key(0), LIMITS, SharePartition::new(0), 0);
        registry.get_or_insert(&key(1), LIMITS, SharePartition::new(0), 0);
        {
            let mut state = busy.state.lock();
            let batch = FetchedBatch {
                base_offset: 0,
                last_offset: 4,
                skip: false,
            };
            assert!(!state
                .acquire(
                    "m",
                    &[batch],
                    10,
                    crate::AcquireMode::RecordLimit,
                    &LIMITS,
                    0
                )
                .is_empty());
            registry.note_acquired(&busy.key);
        }
        assert_eq!(
            registry.holding.lock().len(),
            1,
            "the idle partition is not visited"
        );
        assert!(registry.expire_locks(999).is_empty());
        assert_eq!(registry.holding.lock().len(), 1, "still held");
        assert_eq!(registry.expire_locks(1000), vec![(Uuid::from_u128(1), 0)]);
        assert!(
            registry.holding.lock().is_empty(),
            "nothing acquired any more"
        );
    }
}
