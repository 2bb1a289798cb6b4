//! `num.io.threads`: the threads that answer requests. A connection's task
//! reads and decodes its requests and writes the responses on the main
//! runtime (Kafka's network threads); each request is answered on this pool
//! (Kafka's request handler pool).
//!
//! The pool is a tokio runtime of its own, so its size can change while the
//! broker runs, as Kafka's can: a resize starts a runtime of the new size
//! for the requests that come next, and the old one stops once the requests
//! it was answering are done, as Kafka's removed handler threads finish
//! their current request.
//!
//! A handler is polled inside the main runtime's context: the tasks it
//! spawns, the timers it sets and the sockets it opens belong to the main
//! runtime, so they outlive a resize.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::RwLock;
use tokio::runtime::{Handle, Runtime};
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;
use tracing::info;

/// The pool's OS thread name (`/proc/<pid>/task/*/comm`, `top -H`).
pub const THREAD_NAME: &str = "ottla-request";

pub struct RequestThreads {
    /// Where handlers spawn, sleep and connect.
    main: Handle,
    current: RwLock<Pool>,
}

impl RequestThreads {
    /// Starts `threads` request threads (at least one); `main` is the
    /// runtime the handlers' own work belongs to.
    pub fn start(threads: usize, main: Handle) -> io::Result<Arc<Self>> {
        Ok(Arc::new(Self {
            main,
            current: RwLock::new(Pool::start(threads)?),
        }))
    }

    pub fn threads(&self) -> usize {
        self.current.read().threads
    }

    /// Answers a request on the pool.
    pub fn spawn<F>(&self, handler: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let in_main_context = InContext {
            runtime: self.main.clone(),
            future: Box::pin(handler),
        };
        let pool = self.current.read();
        pool.tracker.spawn_on(in_main_context, pool.runtime())
    }

    /// Moves to `threads` request threads; nothing happens at the current
    /// size. Requests already running finish on the old threads.
    pub fn resize(&self, threads: usize) -> io::Result<()> {
        let threads = threads.max(1);
        let mut current = self.current.write();
        if current.threads == threads {
            return Ok(());
        }
        let old = std::mem::replace(&mut *current, Pool::start(threads)?);
        drop(current);
        info!(
            from = old.threads,
            to = threads,
            "request threads resized (num.io.threads)"
        );
        self.main.spawn(old.retire());
        Ok(())
    }
}

impl std::fmt::Debug for RequestThreads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RequestThreads({})", self.threads())
    }
}

/// One runtime of request threads and the requests it is answering.
struct Pool {
    /// `None` once stopped.
    runtime: Option<Runtime>,
    tracker: TaskTracker,
    threads: usize,
}

impl Pool {
    fn start(threads: usize) -> io::Result<Self> {
        // No I/O or time driver: handlers use the main runtime's.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name(THREAD_NAME)
            .build()?;
        Ok(Self {
            runtime: Some(runtime),
            tracker: TaskTracker::new(),
            threads: threads.max(1),
        })
    }

    fn runtime(&self) -> &Handle {
        self.runtime.as_ref().expect("a pool in use runs").handle()
    }

    /// Stops the threads once the requests they are answering are done.
    async fn retire(mut self) {
        self.tracker.close();
        self.tracker.wait().await;
        self.stop();
    }

    /// Tells the threads to stop without waiting for them: dropping a
    /// runtime inside another one would block, which tokio refuses.
    fn stop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Polls `future` with `runtime` as the current runtime.
struct InContext<F> {
    runtime: Handle,
    future: Pin<Box<F>>,
}

impl<F: Future> Future for InContext<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        let _entered = this.runtime.enter();
        this.future.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    fn thread_name() -> String {
        std::thread::current()
            .name()
            .unwrap_or_default()
            .to_string()
    }

    /// The OS threads of this process named [`THREAD_NAME`].
    fn request_threads_alive() -> usize {
        std::fs::read_dir("/proc/self/task")
            .expect("/proc/self/task")
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|comm| comm.trim_end() == THREAD_NAME)
            .count()
    }

    async fn wait_for_threads(n: usize) {
        for _ in 0..500 {
            if request_threads_alive() == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "{n} request threads expected, {} alive",
            request_threads_alive()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn handlers_run_on_the_pool_and_their_own_work_on_the_main_runtime() {
        let pool = RequestThreads::start(2, Handle::current()).unwrap();
        let (handler, spawned) = pool
            .spawn(async {
                let spawned = tokio::spawn(async { thread_name() });
                // A timer needs a time driver: the main runtime's.
                tokio::time::sleep(Duration::from_millis(1)).await;
                (thread_name(), spawned.await.unwrap())
            })
            .await
            .unwrap();
        assert_eq!(handler, THREAD_NAME);
        assert_ne!(spawned, THREAD_NAME);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_resize_lets_running_requests_finish_then_stops_the_old_threads() {
        let pool = RequestThreads::start(4, Handle::current()).unwrap();
        wait_for_threads(4).await;
        let (finish, finished) = oneshot::channel::<()>();
        let running = pool.spawn(async move {
            finished.await.unwrap();
            thread_name()
        });

        pool.resize(2).unwrap();
        assert_eq!(pool.threads(), 2);
        assert_eq!(
            pool.spawn(async { thread_name() }).await.unwrap(),
            THREAD_NAME
        );
        // The old four wait for the request still running on them.
        wait_for_threads(6).await;
        finish.send(()).unwrap();
        assert_eq!(running.await.unwrap(), THREAD_NAME);
        wait_for_threads(2).await;

        pool.resize(2).unwrap();
        pool.resize(0).unwrap();
        assert_eq!(pool.threads(), 1, "at least one thread");
        wait_for_threads(1).await;
    }
}
