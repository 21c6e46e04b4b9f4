//! One device flush per model turn: the reference conversation (seed 000, else the demo
//! trace) replayed on a warm store waits for at most 15 flushes in all (the run's creation,
//! one group flush before each model call that follows a turn, the end), and before every
//! model call what the turn wrote is already made durable.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::Outcome;
use baton_engine::runner::{self, Settings, StartRun};
use baton_llm::{ReplayModel, Trace};
use baton_store::Store;
use baton_store::durable::flushes_on_this_thread;
use baton_testkit::{copy_dir, demo_trace, example, repo, seed_000};
use std::path::Path;
use std::sync::Mutex;

/// The replayed model, noting the flush count at each call (the run and this model share the
/// test's one thread).
struct Counting<'a> {
    inner: &'a ReplayModel,
    at_calls: Mutex<Vec<u64>>,
}

impl baton_llm::ChatModel for Counting<'_> {
    fn chat<'a>(
        &'a self,
        request: &'a baton_llm::ChatRequest,
        options: baton_llm::CallOptions<'a>,
    ) -> baton_llm::BoxFuture<'a, Result<baton_llm::ChatResponse, baton_llm::LlmError>> {
        self.at_calls.lock().unwrap().push(flushes_on_this_thread());
        self.inner.chat(request, options)
    }

    fn model_name(&self) -> &str {
        self.inner.model_name()
    }
}

async fn replay(store: &Store, project: &Path, trace: &Path) -> (u64, Vec<u64>) {
    let replay = ReplayModel::new(Trace::load(trace).unwrap());
    let model = Counting {
        inner: &replay,
        at_calls: Mutex::new(Vec::new()),
    };
    let mut settings = Settings::new(&model);
    settings.replay = Some(&replay);
    let before = flushes_on_this_thread();
    let done = runner::start(
        store,
        StartRun::new(&example("create-story-micro"), project),
        settings,
    )
    .await
    .unwrap();
    let total = flushes_on_this_thread() - before;
    assert!(
        matches!(done.report.outcome, Outcome::Completed { .. }),
        "{:?}",
        done.report.outcome
    );
    let calls = model
        .at_calls
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|n| n - before)
        .collect();
    (total, calls)
}

#[tokio::test]
async fn the_seed_replay_waits_for_one_flush_per_model_turn() {
    let trace = seed_000().unwrap_or_else(demo_trace);
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::new(tmp.path().join("home"));
    let project = tmp.path().join("project");
    // A first run installs the package and registers the project (a warm store, as in
    // bench/replay.sh), then the measured one on a fresh copy of the same project.
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    replay(&store, &project, &trace).await;
    std::fs::remove_dir_all(&project).unwrap();
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let (total, calls) = replay(&store, &project, &trace).await;
    eprintln!(
        "{} model calls, flushes before each: {calls:?}, {total} in all",
        calls.len()
    );
    assert_eq!(calls.len(), 10);
    // Creation: the staged directory (its fsyncs in parallel), its rename, the index record;
    // nothing of the run is worth a flush before its first call.
    assert!(calls[0] <= 3, "{calls:?}");
    // Each later call waits for exactly one group flush: the turn before it.
    for pair in calls.windows(2) {
        assert_eq!(pair[1] - pair[0], 1, "one flush per turn: {calls:?}");
    }
    // The end: run.json's temp file with the last turn and both logs, its rename, the index.
    assert!(total - calls[9] <= 3, "{total} in all, {calls:?}");
    assert!(total <= 15, "{total} flushes for the replay (it was 114)");
}
