//! `session_cache`: the session of `baton demo session` (the csvsum sample, quick quality, one
//! fix loop) against the played model behind a played provider cache (cached tokens = the
//! longest prefix seen before, from 1,024 tokens in blocks of 128, at 4 bytes a token), and
//! what it cost: requests, prompt, cached and completion tokens, and the session's own sums
//! (`baton session status --json`). Prints one JSON object.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a measurement: a failed step fails it

#[path = "../tests/support/session_player.rs"]
mod session_player;

use baton_lifecycle::ralph::Context;
use baton_lifecycle::ralph::discovery::{self, Pick};
use baton_lifecycle::session::run::{RunSettings, SessionEnd, run};
use baton_lifecycle::session::start::{self, StartOptions, StartOutcome};
use baton_lifecycle::session::step_run::ModelSource;
use baton_llm::testing::caching::CachingProvider;
use baton_store::Store;
use baton_testkit::json_server::JsonServer;
use serde_json::{Value, json};
use session_player::SessionPlayer;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the demo asks for (as `crates/baton/src/commands/session_demo.rs`).
const INTENT: &str = "phase 1: add a --header flag that skips the first line";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("csvsum");
    baton_testkit::copy_dir(
        &baton_testkit::repo().join("examples/projects/csvsum"),
        &project,
    );
    let store = Store::new(tmp.path().join("baton-home"));
    let ctx = Context {
        project: project.clone(),
        home: None,
        maestro_home: None,
        cli: "baton ralph".into(),
        owner: "baton-demo".into(),
        lock_timeout: Duration::from_secs(5),
        bundled_commands: None,
        warnings: Default::default(),
    }
    .with_bundled_skills(store.home())
    .unwrap();
    let player = SessionPlayer::start(&project);
    let provider = Arc::new(CachingProvider::new());
    let (p, upstream) = (provider.clone(), player.base_url());
    let proxy = JsonServer::start(Arc::new(move |body: &Value| p.proxy(&upstream, body)));
    let model = baton_llm::testing::played_model(proxy.base_url()).unwrap();
    let options = StartOptions {
        intent: INTENT.into(),
        quality: Some(baton_lifecycle::session::infer::QualityMode::Quick),
        auto: true,
        answers: BTreeMap::new(),
        platform: None,
    };
    let out = start::start(&ctx, &options, &model, &CancellationToken::new())
        .await
        .unwrap();
    assert!(matches!(out, StartOutcome::Created(_)), "{out:?}");
    let settings = RunSettings::new("baton-demo", &store, ModelSource::Live(&model));
    let report = run(&ctx, None, settings).await.unwrap();
    assert_eq!(report.end, SessionEnd::Completed);
    let s = discovery::find(&ctx, None, Pick::Any)
        .unwrap()
        .into_session()
        .unwrap();
    let sums = baton_lifecycle::session::budget::usage(&s, &store.project(&project).unwrap());
    let (prompt, cached) = provider.totals();
    let out = json!({
        "outcome": "completed",
        "requests": provider.served().len(),
        "promptTokens": prompt,
        "cachedPromptTokens": cached,
        "cachedShare": cached as f64 / prompt.max(1) as f64,
        "completionTokens": provider.served().iter().map(|s| s.completion_tokens).sum::<u64>(),
        "stepRunsUsage": sums.total,
        "steps": sums.steps.len(),
    });
    println!("{}", serde_json::to_string_pretty(&out).unwrap());
}
