//! Work the server drives in the background (a started or answered run, an epic answer): the
//! request returns at once, the work goes on, and a stopping server waits for it. Also what
//! the server remembers of the runs it drove: the replayed model (so an answer continues the
//! same recording) and the outcome of the last invocation.

use baton_llm::ReplayModel;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio_util::task::TaskTracker;

/// Runs remembered at most (the oldest is forgotten first): memory stays bounded however long
/// the server runs.
const REMEMBERED: usize = 1_000;

#[derive(Clone, Default)]
pub struct Jobs {
    tracker: TaskTracker,
    memory: Arc<Mutex<Memory>>,
}

#[derive(Default)]
struct Memory {
    order: VecDeque<String>,
    runs: HashMap<String, Remembered>,
}

#[derive(Default, Clone)]
struct Remembered {
    replay: Option<Arc<ReplayModel>>,
    outcome: Option<Value>,
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

    fn memory(&self) -> MutexGuard<'_, Memory> {
        // A panic elsewhere leaves a consistent map: every change is a single insert.
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, run_id: &str, change: impl FnOnce(&mut Remembered)) {
        let mut m = self.memory();
        if !m.runs.contains_key(run_id) {
            m.order.push_back(run_id.to_string());
            while m.order.len() > REMEMBERED {
                if let Some(old) = m.order.pop_front() {
                    m.runs.remove(&old);
                }
            }
        }
        change(m.runs.entry(run_id.to_string()).or_default());
    }

    /// The recording a replayed run was started with.
    pub fn remember_replay(&self, run_id: &str, model: Arc<ReplayModel>) {
        self.update(run_id, |r| r.replay = Some(model));
    }

    pub fn replay_of(&self, run_id: &str) -> Option<Arc<ReplayModel>> {
        self.memory()
            .runs
            .get(run_id)
            .and_then(|r| r.replay.clone())
    }

    /// What the last invocation the server drove ended with (`Finished::to_json`, or
    /// `{error}`).
    pub fn remember_outcome(&self, run_id: &str, outcome: Value) {
        self.update(run_id, |r| r.outcome = Some(outcome));
    }

    pub fn outcome_of(&self, run_id: &str) -> Option<Value> {
        self.memory()
            .runs
            .get(run_id)
            .and_then(|r| r.outcome.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn memory_is_bounded_and_forgets_the_oldest() {
        let jobs = Jobs::default();
        for i in 0..REMEMBERED + 5 {
            jobs.remember_outcome(&format!("r{i}"), json!(i));
        }
        assert_eq!(jobs.outcome_of("r0"), None);
        assert_eq!(jobs.outcome_of("r4"), None);
        assert_eq!(jobs.outcome_of("r5"), Some(json!(5)));
        assert_eq!(jobs.memory().runs.len(), REMEMBERED);
    }
}
