//! `--budget-tokens`, `--budget-usd` and `[budget]` through the real binary, against a played
//! model that caches prompts like a provider: exit code 12 before a call that could cross a
//! budget (the server never gets it), the run idle and resumable with a larger budget; a USD
//! budget needs a price; `runs show --json` reports usage, cache hits and prefix figures.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

mod common;

use baton_llm::Trace;
use baton_llm::testing::caching::{CachingProvider, trace_answers};
use baton_testkit::json_server::JsonServer;
use baton_testkit::{demo_trace, sample_project};
use common::{Baton, Run, example};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The demo's recorded answers, served in order with caching usage; counts the requests.
struct Played {
    server: JsonServer,
    requests: Arc<Mutex<usize>>,
}

fn played() -> Played {
    let trace = Trace::load(&demo_trace()).unwrap();
    let answers = Arc::new(Mutex::new(VecDeque::from(trace_answers(&trace))));
    let provider = Arc::new(CachingProvider::new());
    let requests = Arc::new(Mutex::new(0));
    let r = requests.clone();
    let server = JsonServer::start(Arc::new(move |body: &Value| {
        *r.lock().unwrap() += 1;
        match answers.lock().unwrap().pop_front() {
            Some(a) => provider.answer(body, a),
            None => json!({"error": {"message": "no answer left"}}),
        }
    }));
    Played { server, requests }
}

impl Played {
    fn requests(&self) -> usize {
        *self.requests.lock().unwrap()
    }
}

fn run(baton: &Baton, project: &Path, url: &str, extra: &[&str]) -> Run {
    let pkg = example("create-story-micro");
    let mut args = vec![
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--base-url",
        url,
        "--model",
        "played-model",
        "--input",
        "1-2-user-authentication",
        "--json",
    ];
    args.extend_from_slice(extra);
    baton.run(&args)
}

#[test]
fn a_token_budget_stops_with_exit_12_and_resume_with_more_finishes() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    let played = played();
    let url = played.server.base_url();

    let stopped = run(&baton, &project, &url, &["--budget-tokens", "0"]);
    assert_eq!(stopped.code, 12, "{}", stopped.stderr);
    let v = stopped.json();
    assert_eq!(v["phase"], "idle");
    assert_eq!(v["error"]["code"], "BUDGET_EXCEEDED");
    assert_eq!(played.requests(), 0, "a budget of 0 sends nothing");
    let id = v["runId"].as_str().unwrap().to_string();

    // The text form says what to do.
    let again = baton.run(&["resume", &id, "--budget-tokens", "10"]);
    assert_eq!(again.code, 12, "{}", again.stderr);
    assert!(again.stderr.contains("--budget-tokens"), "{}", again.stderr);
    assert_eq!(played.requests(), 0);

    // A larger budget goes on; the answer given to the first invocation was never used, so
    // the run asks for it.
    let asks = baton.run(&["resume", &id, "--budget-tokens", "10000000", "--json"]);
    assert_eq!(asks.code, 10, "{}\n{}", asks.stderr, asks.stdout);
    let done = baton.run(&[
        "answer",
        &id,
        "1-2-user-authentication",
        "--budget-tokens",
        "10000000",
        "--json",
    ]);
    assert_eq!(done.code, 0, "{}\n{}", done.stderr, done.stdout);
    assert_eq!(done.json()["phase"], "completed");
    assert_eq!(played.requests(), 10);

    let shown = baton.run(&["runs", "show", &id, "--json"]).json();
    let usage = &shown["usage"];
    assert_eq!(usage["modelCalls"], 10);
    assert!(usage["cachedPromptTokens"].as_u64().unwrap() > 0, "{usage}");
    assert_eq!(
        shown["run"]["usage"], *usage,
        "run.json keeps the same sums"
    );
    assert_eq!(shown["prefixExtensions"], 1.0);
    // Three invocations here (their first requests have no previous one to share with).
    let share = shown["cacheablePrefixShare"].as_f64().unwrap();
    assert!((0.5..=1.0).contains(&share), "{share}");
    let text = baton.run(&["runs", "show", &id]);
    assert!(text.stdout.contains("cached"), "{}", text.stdout);
}

#[test]
fn a_usd_budget_needs_a_price_and_a_price_table_gives_one() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    let played = played();
    let url = played.server.base_url();

    let refused = run(&baton, &project, &url, &["--budget-usd", "1"]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert_eq!(refused.json()["error"]["code"], "BUDGET_PRICE_UNKNOWN");
    assert_eq!(played.requests(), 0);

    std::fs::write(
        project.join("baton.toml"),
        "[llm]\nmax_completion_tokens = 500\n[models.\"played-model\"]\nprice = { input = 2.0, cached_input = 0.5, output = 8.0 }\n[budget]\nusd = 0.02\n",
    )
    .unwrap();
    // $0.02 pays for a few calls of ~2,000-4,000 tokens at $2 per million, not for the run.
    let stopped = run(&baton, &project, &url, &[]);
    assert_eq!(stopped.code, 12, "{}", stopped.stderr);
    let v = stopped.json();
    let served = played.requests();
    assert!((1..10).contains(&served), "{served}");
    assert_eq!(v["waitingFor"]["error"]["budget"]["kind"], "usd");
    let cost = v["runUsage"]["costUsd"].as_f64().unwrap();
    assert!(cost <= 0.02, "{cost}");
    let id = v["runId"].as_str().unwrap().to_string();
    let done = baton.run(&["resume", &id, "--budget-usd", "5", "--json"]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    assert_eq!(played.requests(), 10);

    std::fs::write(project.join("baton.toml"), "[budget]\nusd = -1\n").unwrap();
    let bad = run(&baton, &project, &url, &[]);
    assert_eq!(bad.code, 2);
    assert_eq!(bad.json()["error"]["code"], "BUDGET_CONFIG_INVALID");
}
