//! `epic_cache`: the scenario of `baton demo epic` (epic 2 of the Taskboard sample: two stories,
//! one question, one review asking for changes) against the played model behind a played
//! provider cache (cached tokens = the longest prefix seen before, from 1,024 tokens in blocks
//! of 128, at 4 bytes a token), and what it cost: requests, prompt, cached and completion
//! tokens, as the epic's runs recorded them (`baton epic status --json` sums the same).
//! Prints one JSON object.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a measurement: a failed step fails it

#[path = "../tests/support/mod.rs"]
mod support;

use baton_epic::{Command, EpicSettings, ModelSource, Question, execute};
use baton_llm::testing::caching::CachingProvider;
use baton_testkit::json_server::JsonServer;
use serde_json::{Value, json};
use std::sync::Arc;
use support::player::{Player, Scenario};
use tokio_util::sync::CancellationToken;

/// The demo's question and answer (as `tests/epic_traces.rs` records them).
const ANSWER: &str = "Yes: a task in Done is read-only until someone moves it back.";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let project = support::sample_project(tmp.path());
    let store = baton_store::Store::new(tmp.path().join("home"));
    let player = Player::start(
        &project,
        Scenario {
            questions: vec![(
                "2-2-move-task".into(),
                "dev".into(),
                1,
                "Should a task moved into Done be closed for edits?".into(),
            )],
            changes: vec![("2-2-move-task".into(), 1)],
            ..Default::default()
        },
    );
    let provider = Arc::new(CachingProvider::new());
    let (p, upstream) = (provider.clone(), player.base_url());
    let proxy = JsonServer::start(Arc::new(move |body: &Value| p.proxy(&upstream, body)));
    let model = baton_llm::testing::played_model(proxy.base_url()).unwrap();
    let mut ask = |_story: &str, _q: &Question| Some(ANSWER.to_string());
    let report = execute(
        &store,
        &project,
        Command::Run {
            epic: "epic-2".into(),
            max_stories: None,
        },
        EpicSettings {
            source: ModelSource::Live(&model),
            record: None,
            ask: Some(&mut ask),
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: false,
            budget: Default::default(),
        },
    )
    .await
    .unwrap();
    let mut board = baton_epic::status(&project, Some("epic-2")).unwrap();
    baton_epic::budget::fill_usage(&mut board, &store, &project);
    let usage = board.epics[0].usage.unwrap_or_default();
    let (prompt, cached) = provider.totals();
    let out = json!({
        "outcome": baton_epic::report::outcome_name(&report.outcome),
        "phaseRuns": report.phases_run,
        "requests": provider.served().len(),
        "promptTokens": prompt,
        "cachedPromptTokens": cached,
        "cachedShare": cached as f64 / prompt.max(1) as f64,
        "completionTokens": provider.served().iter().map(|s| s.completion_tokens).sum::<u64>(),
        "boardUsage": usage,
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
