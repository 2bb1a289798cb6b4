//! `num.io.threads`: how many requests are processed at once (Kafka's
//! request handler pool). Ottla's handlers are async tasks, so a handler
//! "thread" here is a turn on the runtime: a handler holds one of the pool's
//! slots while it is polled and gives it back whenever it waits (for
//! replication, a long poll, the blocking pool), as a Kafka handler thread
//! is free again while its request waits in purgatory. Requests beyond the
//! pool's size wait their turn in arrival order.
//!
//! The size changes at runtime (a dynamic `num.io.threads`); a smaller pool
//! takes effect as busy handlers finish their turn. The time handlers spend
//! in their turns is counted, so the operator can tell how busy the pool is
//! (Kafka's RequestHandlerAvgIdlePercent).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use parking_lot::Mutex;
use pin_project_lite::pin_project;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::PollSemaphore;

#[derive(Debug)]
pub struct RequestHandlerPool {
    slots: Arc<Semaphore>,
    size: AtomicUsize,
    /// Slots to retire as handlers give them back: what a shrink could not
    /// take from the free slots at once.
    owed: AtomicUsize,
    busy_nanos: AtomicU64,
    resizing: Mutex<()>,
}

impl RequestHandlerPool {
    pub fn new(size: usize) -> Arc<Self> {
        let size = size.clamp(1, Semaphore::MAX_PERMITS);
        Arc::new(Self {
            slots: Arc::new(Semaphore::new(size)),
            size: AtomicUsize::new(size),
            owed: AtomicUsize::new(0),
            busy_nanos: AtomicU64::new(0),
            resizing: Mutex::new(()),
        })
    }

    /// Runs `request` in the pool's turns.
    pub fn run<F: Future>(self: &Arc<Self>, request: F) -> InPool<F> {
        InPool {
            pool: Arc::clone(self),
            slot: PollSemaphore::new(Arc::clone(&self.slots)),
            request,
        }
    }

    /// The number of handlers the pool lets run at once.
    pub fn size(&self) -> usize {
        self.size.load(Ordering::Relaxed)
    }

    /// Seconds handlers have spent in their turns since start-up.
    pub fn busy_seconds(&self) -> f64 {
        self.busy_nanos.load(Ordering::Relaxed) as f64 / 1e9
    }

    pub fn resize(&self, size: usize) {
        let size = size.clamp(1, Semaphore::MAX_PERMITS);
        let _one_at_a_time = self.resizing.lock();
        let current = self.size.load(Ordering::Relaxed);
        if size > current {
            let grow = size - current;
            // Slots still owed from an earlier shrink are kept instead.
            let kept = take_up_to(&self.owed, grow);
            self.slots.add_permits(grow - kept);
        } else {
            let shrink = current - size;
            let retired = self.slots.forget_permits(shrink);
            self.owed.fetch_add(shrink - retired, Ordering::Relaxed);
        }
        self.size.store(size, Ordering::Relaxed);
    }

    fn give_back(&self, slot: OwnedSemaphorePermit) {
        if take_up_to(&self.owed, 1) == 1 {
            slot.forget();
        }
    }
}

/// Subtracts up to `n` from `counter`; what was subtracted.
fn take_up_to(counter: &AtomicUsize, n: usize) -> usize {
    let before = counter
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| Some(c - c.min(n)))
        .unwrap_or_else(|c| c);
    before.min(n)
}

pin_project! {
    /// A request handler that is polled only while it holds a pool slot.
    pub struct InPool<F> {
        pool: Arc<RequestHandlerPool>,
        slot: PollSemaphore,
        #[pin]
        request: F,
    }
}

impl<F: Future> Future for InPool<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        // The pool's semaphore is never closed.
        let slot = ready!(this.slot.poll_acquire(cx));
        let started = Instant::now();
        let polled = this.request.poll(cx);
        let busy = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        this.pool.busy_nanos.fetch_add(busy, Ordering::Relaxed);
        if let Some(slot) = slot {
            this.pool.give_back(slot);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    /// Spawns `n` handlers that each take several turns of busy work on
    /// the pool, and returns the most that were in a turn at once.
    async fn most_at_once(pool: &Arc<RequestHandlerPool>, n: usize) -> usize {
        let active = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let handlers: Vec<_> = (0..n)
            .map(|_| {
                let (active, most) = (Arc::clone(&active), Arc::clone(&most));
                tokio::spawn(pool.run(async move {
                    for _ in 0..5 {
                        let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(2));
                        active.fetch_sub(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                    }
                }))
            })
            .collect();
        for handler in handlers {
            handler.await.unwrap();
        }
        most.load(Ordering::SeqCst)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn no_more_handlers_run_at_once_than_the_pool_has_slots() {
        let pool = RequestHandlerPool::new(1);
        assert_eq!(most_at_once(&pool, 8).await, 1);
        pool.resize(3);
        let most = most_at_once(&pool, 8).await;
        assert!((2..=3).contains(&most), "{most} at once in a pool of 3");
        assert!(pool.busy_seconds() >= 0.16, "80 turns of 2 ms each");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_shrink_retires_busy_slots_as_they_are_given_back() {
        let pool = RequestHandlerPool::new(4);
        let (started_tx, mut started) = tokio::sync::mpsc::channel(4);
        let release = Arc::new(std::sync::Barrier::new(5));
        // Four handlers each hold a slot, blocked inside their turn.
        let busy: Vec<_> = (0..4)
            .map(|_| {
                let (started_tx, release) = (started_tx.clone(), Arc::clone(&release));
                tokio::spawn(pool.run(async move {
                    started_tx.send(()).await.unwrap();
                    tokio::task::block_in_place(|| release.wait());
                }))
            })
            .collect();
        for _ in 0..4 {
            started.recv().await.unwrap();
        }
        pool.resize(1);
        assert_eq!(pool.size(), 1);
        tokio::task::block_in_place(|| release.wait());
        for handler in busy {
            handler.await.unwrap();
        }
        assert_eq!(pool.slots.available_permits(), 1);
        assert_eq!(most_at_once(&pool, 4).await, 1);
        // Growing again while nothing is owed adds slots.
        pool.resize(2);
        assert_eq!(pool.slots.available_permits(), 2);
    }

    #[test]
    fn growing_first_cancels_what_a_shrink_still_owes() {
        let pool = RequestHandlerPool::new(4);
        let held: Vec<_> = (0..4)
            .map(|_| Arc::clone(&pool.slots).try_acquire_owned().unwrap())
            .collect();
        pool.resize(1);
        assert_eq!(pool.owed.load(Ordering::Relaxed), 3);
        pool.resize(3);
        assert_eq!(pool.owed.load(Ordering::Relaxed), 1);
        for slot in held {
            pool.give_back(slot);
        }
        assert_eq!(pool.slots.available_permits(), 3);
    }
}
