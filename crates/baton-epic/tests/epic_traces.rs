//! The recorded epic of `baton demo epic` (`examples/traces/epic-demo/`, one trace per phase
//! run): it replays offline to the same files, and it can be recorded again against the played
//! model with `BATON_RECORD_EPIC_DEMO=1 cargo test -p baton-epic --test epic epic_traces::`. The
//! played model is recorded behind a played provider cache, so each call's usage is what a
//! caching provider reports for its request (prompt tokens at 4 bytes a token, the cached
//! prefix in blocks of 128 from 1,024) and a replay shows those tokens.

use crate::support;

use baton_epic::{Command, EpicOutcome, EpicSettings, ModelSource, Question, execute};
use baton_llm::testing::caching::CachingProvider;
use baton_testkit::json_server::JsonServer;
use baton_testkit::trim_trace::trim_trace;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use support::player::Scenario;
use support::{Fixture, IMPL};
use tokio_util::sync::CancellationToken;

const QUESTION: &str = "Should a task moved into Done be closed for edits?";
const ANSWER: &str = "Yes: a task in Done is read-only until someone moves it back.";

fn demo_dir() -> PathBuf {
    baton_testkit::repo().join("examples/traces/epic-demo")
}

fn scenario() -> Scenario {
    Scenario {
        questions: vec![("2-2-move-task".into(), "dev".into(), 1, QUESTION.into())],
        changes: vec![("2-2-move-task".into(), 1)],
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_the_demo_epic_again() {
    if std::env::var("BATON_RECORD_EPIC_DEMO").as_deref() != Ok("1") {
        eprintln!(
            "skipped: set BATON_RECORD_EPIC_DEMO=1 to record examples/traces/epic-demo again"
        );
        return;
    }
    let f = Fixture::new(scenario());
    let provider = Arc::new(CachingProvider::new());
    let upstream = f.player.base_url();
    let proxy = JsonServer::start(Arc::new(move |body: &Value| {
        provider.proxy(&upstream, body)
    }));
    let model = baton_llm::testing::played_model(proxy.base_url()).unwrap();
    let out = f.tmp.path().join("traces");
    std::fs::create_dir_all(&out).unwrap();
    let mut ask = |_story: &str, q: &Question| {
        assert_eq!(q.question, QUESTION);
        Some(ANSWER.to_string())
    };
    let report = execute(
        &f.store,
        &f.project,
        Command::Run {
            epic: "epic-2".into(),
            max_stories: None,
        },
        EpicSettings {
            source: ModelSource::Live(&model),
            record: Some(out.clone()),
            ask: Some(&mut ask),
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: false,
            budget: Default::default(),
        },
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
    let dir = demo_dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(&out).unwrap().flatten() {
        let target = dir.join(e.file_name());
        std::fs::copy(e.path(), &target).unwrap();
        trim_trace(
            &target,
            "Recorded by baton's epic autopilot against a played model (crates/baton-epic/tests/support/player.rs) behind a played provider cache (usage: prompt tokens at 4 bytes a token, cached tokens the longest prefix seen before, from 1,024 in blocks of 128); requests trimmed.",
            Some(120),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_epic_replays_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let project = support::sample_project(tmp.path());
    let store = baton_store::Store::new(tmp.path().join("home"));
    let report = execute(
        &store,
        &project,
        Command::Run {
            epic: "epic-2".into(),
            max_stories: None,
        },
        EpicSettings {
            source: ModelSource::Replay(demo_dir()),
            record: None,
            ask: None,
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: false,
            budget: Default::default(),
        },
    )
    .await
    .unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
    assert_eq!(
        report.stories_completed,
        ["2-1-create-board", "2-2-move-task"]
    );
    // 13 phase runs; the dev run that asked is driven twice (the question, then the answer)
    // but is one run.
    assert_eq!(report.phases_run, 13);
    let read = |rel: &str| std::fs::read_to_string(project.join(rel)).unwrap();
    let code = read("src/2-2-move-task.txt");
    assert!(code.contains(&format!("answer: {ANSWER}")), "{code}");
    assert!(code.contains("fixed: cycle 1:"), "{code}");
    let sprint = read(&format!("{IMPL}/sprint-status.yaml"));
    assert!(sprint.contains("  epic-2: done\n"));
    assert!(sprint.contains("  epic-1: backlog\n"));
    let agent: Value =
        serde_json::from_str(&read(&format!("{IMPL}/2-2-move-task.agent-state.json"))).unwrap();
    assert_eq!(agent["questions"], json!([]));
    let traces = std::fs::read_dir(demo_dir()).unwrap().count();
    assert_eq!(traces, 13);
    let _ = Fixture::new; // the fixture is only needed to record
}
