//! Work shared by a fixed number of threads, each taking the next item
//! until none is left: log loading and closing (`num.recovery.threads.per.data.dir`)
//! and compaction (`log.cleaner.threads`).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `work` on every item with up to `threads` threads (the caller's
/// among them); 0 threads does nothing. Returns when every item is done.
pub fn on_threads<T: Sync>(items: &[T], threads: usize, work: impl Fn(&T) + Sync) {
    let next = AtomicUsize::new(0);
    let take_next = || {
        while let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
            work(item);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.min(items.len()) {
            scope.spawn(take_next);
        }
        if threads > 0 {
            take_next();
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    use super::*;

    #[test]
    fn every_item_is_done_once() {
        let items: Vec<usize> = (0..100).collect();
        let done = Mutex::new(Vec::new());
        on_threads(&items, 4, |&i| done.lock().unwrap().push(i));
        let mut done = done.into_inner().unwrap();
        done.sort_unstable();
        assert_eq!(done, items);
    }

    #[test]
    fn zero_threads_do_nothing() {
        let done = AtomicUsize::new(0);
        on_threads(&[1, 2, 3], 0, |_| {
            done.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(done.into_inner(), 0);
    }

    #[test]
    fn the_threads_work_at_the_same_time() {
        // Every item waits until 3 have been in progress at once; with
        // fewer threads than that, the wait would time out.
        let in_progress = Mutex::new(0);
        let changed = Condvar::new();
        let most = AtomicUsize::new(0);
        on_threads(&[0; 6], 3, |_| {
            let mut now = in_progress.lock().unwrap();
            *now += 1;
            most.fetch_max(*now, Ordering::Relaxed);
            changed.notify_all();
            let (mut now, _) = changed
                .wait_timeout_while(now, Duration::from_secs(5), |_| {
                    most.load(Ordering::Relaxed) < 3
                })
                .unwrap();
            *now -= 1;
        });
        assert_eq!(most.into_inner(), 3);
    }
}
