//! Blocking work under a bound: every handler's store or orchestrator call (and every call to
//! the queue's database, [`Bounded::run_async`]) takes a permit and gets a deadline, so a read
//! that never returns (a FIFO a model left where a handler reads) cannot pin the runtime's
//! blocking pool and take every other request down with it.
//!
//! The permit stays with the blocking thread until its work really ends, even after the
//! request has given up: at most [`MAX_BLOCKING`] handler threads exist at once, whatever
//! hangs. A request that finds no permit before its deadline is answered `SERVE_BUSY`.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Handler calls on blocking threads at once, at most.
pub const MAX_BLOCKING: usize = 32;

/// How long a handler waits for its blocking call (permit included).
pub const BLOCKING_TIMEOUT: Duration = Duration::from_secs(10);

/// The bound every handler's blocking call goes through. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Bounded {
    permits: Arc<Semaphore>,
    total: usize,
    timeout: Duration,
}

impl Default for Bounded {
    fn default() -> Bounded {
        Bounded::new(MAX_BLOCKING, BLOCKING_TIMEOUT)
    }
}

/// Why a bounded call gave no answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BlockingError {
    /// Every permit was held until the deadline.
    #[error("the server is busy: {permits} requests are waiting on files already")]
    Busy { permits: usize },
    /// The work started but did not end before the deadline (it goes on, holding its permit).
    #[error("the request took longer than {}s", .0.as_secs())]
    TimedOut(Duration),
    /// The work panicked.
    #[error("the request failed: {0}")]
    Failed(String),
}

impl BlockingError {
    pub fn code(&self) -> &'static str {
        match self {
            BlockingError::Busy { .. } => "SERVE_BUSY",
            BlockingError::TimedOut(_) => "SERVE_TIMEOUT",
            BlockingError::Failed(_) => "SERVE_TASK_FAILED",
        }
    }

    pub fn hint(&self) -> Option<&'static str> {
        match self {
            BlockingError::Busy { .. } | BlockingError::TimedOut(_) => Some(
                "a file the server reads may not be a regular file (a FIFO?); check the project's files, then retry",
            ),
            BlockingError::Failed(_) => None,
        }
    }

    /// 503 when the work never started, 504 when it did not end in time, 500 on a panic.
    pub fn status(&self) -> axum::http::StatusCode {
        use axum::http::StatusCode;
        match self {
            BlockingError::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            BlockingError::TimedOut(_) => StatusCode::GATEWAY_TIMEOUT,
            BlockingError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl Bounded {
    pub fn new(permits: usize, timeout: Duration) -> Bounded {
        Bounded {
            permits: Arc::new(Semaphore::new(permits)),
            total: permits,
            timeout,
        }
    }

    /// Permits free now (tests and diagnostics).
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// Runs `work` on a blocking thread once a permit is free, giving up at the deadline.
    pub async fn run<T, F>(&self, work: F) -> Result<T, BlockingError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let deadline = Instant::now() + self.timeout;
        let permit = self.permit(deadline).await?;
        let task = tokio::task::spawn_blocking(move || {
            let out = work();
            drop(permit);
            out
        });
        self.join(deadline, task).await
    }

    /// [`Bounded::run`] for async work that may wait on the network (the queue's database):
    /// the same permits and deadline; the work runs as a task of its own that keeps its permit
    /// until it really ends, even after the request has given up.
    pub async fn run_async<T, F>(&self, work: F) -> Result<T, BlockingError>
    where
        F: std::future::Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let deadline = Instant::now() + self.timeout;
        let permit = self.permit(deadline).await?;
        let task = tokio::spawn(async move {
            let out = work.await;
            drop(permit);
            out
        });
        self.join(deadline, task).await
    }

    /// A permit, waited for until `deadline`; busy when none came.
    async fn permit(&self, deadline: Instant) -> Result<OwnedSemaphorePermit, BlockingError> {
        match tokio::time::timeout_at(deadline, self.permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            // Closed never happens (the semaphore is never closed); treated as busy.
            Ok(Err(_)) | Err(_) => Err(BlockingError::Busy {
                permits: self.total,
            }),
        }
    }

    /// The task's result, waited for until `deadline` (the task goes on after it).
    async fn join<T>(&self, deadline: Instant, task: JoinHandle<T>) -> Result<T, BlockingError> {
        match tokio::time::timeout_at(deadline, task).await {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(e)) => Err(BlockingError::Failed(e.to_string())),
            Err(_) => Err(BlockingError::TimedOut(self.timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn stuck_work_times_out_and_keeps_its_permit_until_it_really_ends() {
        let rt = runtime();
        let bounded = Bounded::new(2, Duration::from_millis(200));
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (ended_tx, ended_rx) = mpsc::channel::<()>();
        let stuck = rt.block_on(bounded.run(move || {
            let _ = release_rx.recv();
            let _ = ended_tx.send(());
        }));
        assert_eq!(stuck.unwrap_err().code(), "SERVE_TIMEOUT");
        // The stuck thread still holds its permit: the bound counts it.
        assert_eq!(bounded.available(), 1);
        // Other work still gets through.
        assert_eq!(rt.block_on(bounded.run(|| 7)).unwrap(), 7);
        release_tx.send(()).unwrap();
        ended_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        // The permit returns when the thread ends, not before.
        let start = std::time::Instant::now();
        while bounded.available() != 2 {
            assert!(start.elapsed() < Duration::from_secs(10));
            std::thread::yield_now();
        }
    }

    #[test]
    fn when_every_permit_is_stuck_a_request_is_busy_not_queued_forever() {
        let rt = runtime();
        let bounded = Bounded::new(2, Duration::from_millis(200));
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(std::sync::Mutex::new(release_rx));
        for _ in 0..2 {
            let rx = release_rx.clone();
            let out = rt.block_on(bounded.run(move || {
                let _ = rx.lock().map(|r| r.recv());
            }));
            assert_eq!(out.unwrap_err().code(), "SERVE_TIMEOUT");
        }
        let err = rt.block_on(bounded.run(|| ())).unwrap_err();
        assert_eq!(err.code(), "SERVE_BUSY");
        assert_eq!(err.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        drop(release_tx);
    }

    #[test]
    fn async_work_that_never_ends_times_out_and_keeps_its_permit() {
        let rt = runtime();
        let bounded = Bounded::new(1, Duration::from_millis(200));
        let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
        let stuck = rt.block_on(bounded.run_async(async move {
            let _ = release_rx.await;
        }));
        assert_eq!(stuck.unwrap_err().code(), "SERVE_TIMEOUT");
        assert_eq!(bounded.available(), 0);
        let busy = rt.block_on(bounded.run_async(async { 7 })).unwrap_err();
        assert_eq!(busy.code(), "SERVE_BUSY");
        release_tx.send(()).unwrap();
        let start = std::time::Instant::now();
        while bounded.available() != 1 {
            assert!(start.elapsed() < Duration::from_secs(10));
            std::thread::yield_now();
        }
        assert_eq!(rt.block_on(bounded.run_async(async { 7 })).unwrap(), 7);
    }

    #[test]
    fn a_panic_is_an_error_not_a_dead_server() {
        let rt = runtime();
        let bounded = Bounded::default();
        let err = rt
            .block_on(bounded.run(|| -> u8 { panic!("boom") }))
            .unwrap_err();
        assert_eq!(err.code(), "SERVE_TASK_FAILED");
        assert_eq!(bounded.available(), MAX_BLOCKING);
    }
}
