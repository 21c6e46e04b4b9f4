//! The runner's `on_durable` hook (what a queue worker checkpoints at): told after each model
//! turn's group flush, before the next model call, and at the end of the invocation; the
//! files it sees are the turn's, already durable. A hook that fails (a lost lease) stops the
//! run at once: no further model call, nothing more written to the run.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::runner::{self, RunnerError, Settings, StartRun};
use baton_engine::{
    ContextPolicy, DurableFuture, DurablePoint, DurableStop, EngineError, OnDurable, Outcome,
};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig, Trace};
use baton_store::{Phase, Store};
use baton_testkit::{copy_dir, demo_trace, repo};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Every file under `dir` but the driver's lock, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    baton_testkit::files_on_disk(dir)
        .into_iter()
        .filter(|rel| !rel.ends_with("run.lock"))
        .map(|rel| {
            let bytes = std::fs::read(dir.join(&rel)).unwrap();
            (rel, bytes)
        })
        .collect()
}

struct Seen {
    at: DurablePoint,
    requests: usize,
    conversation_lines: usize,
    run_files: BTreeMap<String, Vec<u8>>,
}

struct Hook<'a> {
    store: &'a Store,
    project: &'a Path,
    server: &'a ScriptedServer,
    /// Fail with LEASE_LOST at this Turn point (1-based).
    stop_at_turn: Option<usize>,
    seen: Mutex<Vec<Seen>>,
}

impl Hook<'_> {
    fn run_dir(&self, run_id: &str) -> PathBuf {
        self.store
            .project(self.project)
            .unwrap()
            .run_paths(run_id)
            .dir
    }
}

impl OnDurable for Hook<'_> {
    fn durable<'a>(&'a self, run_id: &'a str, at: DurablePoint) -> DurableFuture<'a> {
        Box::pin(async move {
            let dir = self.run_dir(run_id);
            let conversation = std::fs::read_to_string(dir.join("state/logs/conversation.jsonl"))
                .unwrap_or_default();
            let mut seen = self.seen.lock().unwrap();
            seen.push(Seen {
                at,
                requests: self.server.received().len(),
                conversation_lines: conversation.lines().count(),
                run_files: files(&dir),
            });
            let turns = seen.iter().filter(|s| s.at == DurablePoint::Turn).count();
            if at == DurablePoint::Turn && Some(turns) == self.stop_at_turn {
                return Err(DurableStop {
                    code: "LEASE_LOST",
                    message: "unit 7 was claimed again at epoch 3".into(),
                });
            }
            Ok(())
        })
    }
}

struct World {
    _tmp: tempfile::TempDir,
    store: Store,
    project: PathBuf,
    server: ScriptedServer,
    model: HttpChatModel,
}

async fn world() -> World {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let replies = Reply::from_trace(&Trace::load(&demo_trace()).unwrap());
    let server = ScriptedServer::start(replies).await.unwrap();
    let config = LlmConfig {
        base_url: server.base_url(),
        model: Some("scripted".into()),
        stream: false,
        retry_base_delay: Duration::from_millis(5),
        ..LlmConfig::default()
    };
    let model = HttpChatModel::new(config).unwrap();
    let store = Store::new(tmp.path().join("home"));
    World {
        _tmp: tmp,
        store,
        project,
        server,
        model,
    }
}

fn settings<'a>(w: &'a World, hook: &'a Hook<'a>) -> Settings<'a> {
    let mut settings = Settings::new(&w.model);
    settings.inputs.push_back("1-2-user-authentication".into());
    settings.context = Some(ContextPolicy::Node);
    settings.on_durable = Some(hook);
    settings
}

#[tokio::test]
async fn every_turn_and_the_end_are_told_after_their_flush_before_the_next_call() {
    let w = world().await;
    let hook = Hook {
        store: &w.store,
        project: &w.project,
        server: &w.server,
        stop_at_turn: None,
        seen: Mutex::new(Vec::new()),
    };
    let pkg = repo().join("examples/packages/create-story-micro");
    let finished = runner::start(
        &w.store,
        StartRun::new(&pkg, &w.project),
        settings(&w, &hook),
    )
    .await
    .unwrap();
    assert!(matches!(finished.report.outcome, Outcome::Completed { .. }));
    let calls = w.server.received().len();
    assert_eq!(calls, 10);
    let seen = hook.seen.lock().unwrap();
    let (last, turns) = seen.split_last().unwrap();
    assert_eq!(last.at, DurablePoint::Phase(Phase::Completed));
    assert_eq!(last.requests, calls);
    // One point between each pair of calls whose turn wrote something, each one call further.
    assert!(turns.iter().all(|s| s.at == DurablePoint::Turn));
    assert!(turns.len() >= 5, "{} turn points", turns.len());
    for pair in turns.windows(2) {
        assert!(pair[0].requests < pair[1].requests);
    }
    // What the hook saw was already on disk: the conversation grows with every point, and
    // the last point saw the files the run ended with.
    for pair in seen.windows(2) {
        assert!(pair[0].conversation_lines < pair[1].conversation_lines);
    }
    assert!(turns[0].conversation_lines > 0);
    let dir = w
        .store
        .project(&w.project)
        .unwrap()
        .run_paths(&finished.run.run_id)
        .dir;
    let end = files(&dir);
    assert_eq!(
        last.run_files.keys().collect::<Vec<_>>(),
        end.keys().collect::<Vec<_>>()
    );
    assert_eq!(
        last.run_files.get("state/workflow.md"),
        end.get("state/workflow.md")
    );
}

#[tokio::test]
async fn a_hook_that_fails_stops_the_run_at_once_writing_nothing_more() {
    let w = world().await;
    let hook = Hook {
        store: &w.store,
        project: &w.project,
        server: &w.server,
        stop_at_turn: Some(3),
        seen: Mutex::new(Vec::new()),
    };
    let pkg = repo().join("examples/packages/create-story-micro");
    let err = runner::start(
        &w.store,
        StartRun::new(&pkg, &w.project),
        settings(&w, &hook),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "LEASE_LOST");
    assert!(
        matches!(&err, RunnerError::Engine(EngineError::Stopped(s)) if s.message.contains("epoch 3")),
        "{err:?}"
    );
    let seen = hook.seen.lock().unwrap();
    let stop = seen.last().unwrap();
    assert_eq!(stop.at, DurablePoint::Turn);
    // No model call after the stop, and the run's files are exactly what the hook saw.
    assert_eq!(w.server.received().len(), stop.requests);
    let run_id = {
        let project = w.store.project(&w.project).unwrap();
        let runs = project.list_runs().unwrap();
        assert_eq!(runs.len(), 1);
        runs[0].run_id.clone()
    };
    let dir = w.store.project(&w.project).unwrap().run_paths(&run_id).dir;
    assert_eq!(files(&dir), stop.run_files);
}
