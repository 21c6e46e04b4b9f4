//! Work the server drives in the background (a started or answered run, an epic answer): the
//! request returns at once, the work goes on, and a stopping server waits for it.

use std::time::Duration;
use tokio_util::task::TaskTracker;

#[derive(Clone, Default)]
pub struct Jobs {
    tracker: TaskTracker,
}

impl Jobs {
    /// Runs `work` on a blocking thread (runs do file I/O and may block) with the server's
    /// runtime at hand for the async parts.
    pub fn spawn<F>(&self, work: F)
    where
        F: FnOnce(&tokio::runtime::Handle) + Send + 'static,
    {
        let handle = tokio::runtime::Handle::current();
        self.tracker.spawn_blocking(move || work(&handle));
    }

    /// Jobs still going.
    pub fn len(&self) -> usize {
        self.tracker.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tracker.is_empty()
    }

    /// Takes no new job and waits up to `grace` for the running ones (they were cancelled
    /// before and stop at their next step boundary).
    pub async fn wait(&self, grace: Duration) {
        self.tracker.close();
        let _ = tokio::time::timeout(grace, self.tracker.wait()).await;
    }
}
