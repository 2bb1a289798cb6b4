//! Requests waiting on partitions, as Kafka's purgatory keyed by partition:
//! a long-polling fetch or an acks=all produce watches only the partitions
//! it reads or wrote, and an append or a high-watermark or leadership move
//! wakes only the requests watching that partition, telling each which of
//! its partitions changed, so that it re-reads those and no others.
//!
//! A wakeup is one-shot: the partition forgets its watchers as it wakes
//! them, and a request that goes on waiting watches that partition again.
//! Watchers that finished are dropped lazily, when a partition's list grows.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use tokio::sync::Notify;

/// A partition's watchers.
#[derive(Default)]
pub struct Watchers {
    /// Bumped by every wake, under `watching`'s lock: a request compares
    /// it with what it saw before reading, so a change between its read
    /// and its watch is not missed.
    version: AtomicU64,
    watching: Mutex<Vec<(Arc<Wakeups>, u32)>>,
}

/// Finished entries are swept from a partition's list once it is this long.
const SWEEP_AT: usize = 8;

impl Watchers {
    /// The change count to take before reading the partition, for
    /// [`Waiter::watch`].
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The partition changed: wakes every request watching it.
    pub fn wake(&self) {
        let woken = {
            let mut watching = self.watching.lock();
            self.version.fetch_add(1, Ordering::AcqRel);
            std::mem::take(&mut *watching)
        };
        for (wakeups, index) in woken {
            wakeups.wake(index);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.watching.lock().len()
    }
}

/// What woke one waiting request: the indexes (in the request) of the
/// partitions that changed.
#[derive(Default)]
struct Wakeups {
    changed: Mutex<Vec<u32>>,
    /// For an async waiter.
    notify: Notify,
    /// For a waiter on the blocking pool.
    condvar: Condvar,
    finished: AtomicBool,
}

impl Wakeups {
    fn wake(&self, index: u32) {
        if self.finished.load(Ordering::Acquire) {
            return;
        }
        self.changed.lock().push(index);
        self.condvar.notify_one();
        self.notify.notify_one();
    }
}

/// One waiting request.
pub struct Waiter {
    wakeups: Arc<Wakeups>,
}

impl Default for Waiter {
    fn default() -> Self {
        Self::new()
    }
}

impl Waiter {
    pub fn new() -> Self {
        Self {
            wakeups: Arc::default(),
        }
    }

    /// Watches a partition as this request's partition `index`, which it
    /// read after taking `version` from it: a change since then counts at
    /// once.
    pub fn watch(&self, watchers: &Watchers, index: u32, version: u64) {
        let mut watching = watchers.watching.lock();
        if watchers.version.load(Ordering::Acquire) != version {
            drop(watching);
            self.wakeups.wake(index);
            return;
        }
        if watching.len() >= SWEEP_AT {
            watching.retain(|(w, _)| !w.finished.load(Ordering::Acquire));
        }
        watching.push((self.wakeups.clone(), index));
    }

    /// Waits until a watched partition changes or `deadline` passes, and
    /// returns the indexes of the partitions that changed (none: the
    /// deadline passed first).
    pub async fn changed(&self, deadline: tokio::time::Instant) -> Vec<u32> {
        loop {
            let changed = self.take_changed();
            if !changed.is_empty() {
                return changed;
            }
            let notified = self.wakeups.notify.notified();
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.take_changed();
            }
        }
    }

    /// [`Waiter::changed`] for synchronous code on the blocking pool.
    pub fn changed_blocking(&self, deadline: std::time::Instant) -> Vec<u32> {
        let mut changed = self.wakeups.changed.lock();
        while changed.is_empty() {
            if self
                .wakeups
                .condvar
                .wait_until(&mut changed, deadline)
                .timed_out()
            {
                break;
            }
        }
        std::mem::take(&mut *changed)
    }

    fn take_changed(&self) -> Vec<u32> {
        std::mem::take(&mut *self.wakeups.changed.lock())
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.wakeups.finished.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_millis(50)
    }

    #[tokio::test]
    async fn only_the_partitions_that_changed_wake_and_are_named() {
        let partitions: Vec<Watchers> = (0..4).map(|_| Watchers::default()).collect();
        let waiter = Waiter::new();
        for (i, w) in partitions.iter().enumerate() {
            waiter.watch(w, i as u32, w.version());
        }
        partitions[2].wake();
        let mut changed = waiter.changed(soon()).await;
        partitions[3].wake();
        changed.extend(waiter.changed(soon()).await);
        assert_eq!(changed, vec![2, 3]);
        // One-shot: a partition that woke the request forgot it.
        partitions[2].wake();
        assert!(waiter.changed(soon()).await.is_empty(), "deadline passed");
        assert_eq!(partitions[0].len(), 1, "untouched partitions still watched");
    }

    #[tokio::test]
    async fn a_change_between_reading_and_watching_is_not_missed() {
        let partition = Watchers::default();
        let seen = partition.version();
        partition.wake(); // an append after the read, before the watch
        let waiter = Waiter::new();
        waiter.watch(&partition, 7, seen);
        assert_eq!(waiter.changed(soon()).await, vec![7]);
    }

    #[test]
    fn a_blocking_waiter_is_woken_from_another_thread() {
        let partition = Arc::new(Watchers::default());
        let waiter = Waiter::new();
        waiter.watch(&partition, 0, partition.version());
        let waker = {
            let partition = partition.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                partition.wake();
            })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        assert_eq!(waiter.changed_blocking(deadline), vec![0]);
        waker.join().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_millis(20);
        assert!(waiter.changed_blocking(deadline).is_empty());
    }

    #[test]
    fn finished_waiters_do_not_pile_up_on_an_idle_partition() {
        let partition = Watchers::default();
        for _ in 0..1000 {
            let waiter = Waiter::new();
            waiter.watch(&partition, 0, partition.version());
        }
        assert!(partition.len() <= SWEEP_AT, "{} entries", partition.len());
    }
}
