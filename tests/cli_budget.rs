//! `--budget-tokens`, `--budget-usd` and `[budget]` through the real binary, against a played
//! model that caches prompts like a provider: exit code 12 before a call that could cross a
//! budget (the server never gets it), the run idle and resumable with a larger budget; a USD
//! budget needs a price; `runs show --json` reports usage, cache hits and prefix figures.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

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

/// How a lying server reports usage (see `crates/baton-engine/tests/lying_usage.rs`).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Lie {
    Zeros,
    TotalZero,
    Negative,
    NoUsage,
    Absurd,
}

/// The model `run` names (counted as chars/4, as any model without a known tokenizer).
const LIAR_MODEL: &str = "played-model";
const LIAR_ARGS: &str = r#"{"path":"@pkg/workflow.graph.json"}"#;

/// baton's count of a request body as the server received it.
fn liar_prompt(body: &Value) -> u64 {
    let req = baton_llm::testing::request_of(body);
    baton_engine::TokenCounter::for_model(LIAR_MODEL).request(&req.messages, &req.tools) as u64
}

/// baton's count of the liar's answer.
fn liar_completion() -> u64 {
    let m = baton_llm::Message::assistant_calls(vec![baton_llm::ToolCall::new(
        "call_1", "fs_read", LIAR_ARGS,
    )]);
    baton_engine::TokenCounter::for_model(LIAR_MODEL).message(&m) as u64
}

/// Each request's prompt tokens and completion cap, as the server received them.
type Seen = Arc<Mutex<Vec<(u64, u64)>>>;

/// A server that never lets the run end (a file read on every answer) and lies about usage;
/// each request's prompt tokens and completion cap, as received.
fn liar(lie: Lie) -> (JsonServer, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let server = JsonServer::start(Arc::new(move |body: &Value| {
        let prompt = liar_prompt(body);
        let completion = liar_completion();
        s.lock()
            .unwrap()
            .push((prompt, body["max_tokens"].as_u64().unwrap()));
        let mut answer = json!({"id": "chatcmpl-liar", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
                "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "fs_read", "arguments": LIAR_ARGS}}]}}]});
        let usage = match lie {
            Lie::Zeros => json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}),
            Lie::TotalZero => {
                json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": 0})
            }
            Lie::Negative => {
                json!({"prompt_tokens": -1, "completion_tokens": -1, "total_tokens": -1_000_000})
            }
            Lie::NoUsage => Value::Null,
            Lie::Absurd => json!({"prompt_tokens": u64::MAX, "completion_tokens": 1e300,
                "total_tokens": 9_000_000_000_000u64}),
        };
        if !usage.is_null() {
            answer["usage"] = usage;
        }
        answer
    }));
    (server, seen)
}

/// The `engine.warning` lines of every run under `home`.
fn usage_warnings(home: &Path) -> Vec<Value> {
    common::walk(home)
        .into_iter()
        .filter(|p| p.ends_with("execution.jsonl"))
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
                .filter(|l| l["kind"] == "engine.warning")
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn whatever_a_server_reports_the_token_budget_holds_within_one_requests_cap() {
    const BUDGET: u64 = 40_000;
    for lie in [
        Lie::Zeros,
        Lie::TotalZero,
        Lie::Negative,
        Lie::NoUsage,
        Lie::Absurd,
    ] {
        let baton = Baton::new();
        let tmp = tempfile::tempdir().unwrap();
        let project = sample_project(tmp.path());
        std::fs::write(
            project.join("baton.toml"),
            "[llm]\nmax_completion_tokens = 500\n",
        )
        .unwrap();
        let (server, seen) = liar(lie);
        let budget = BUDGET.to_string();
        let args = ["--budget-tokens", budget.as_str()];
        let stopped = run(&baton, &project, &server.base_url(), &args);
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            stopped.code,
            12,
            "{lie:?}: {} requests\n{}",
            seen.len(),
            stopped.stderr
        );
        let v = stopped.json();
        assert_eq!(v["error"]["code"], "BUDGET_EXCEEDED", "{lie:?}");
        assert_eq!(v["phase"], "idle", "{lie:?}");
        // What was really sent and received: within the budget and one request's cap.
        let honest: u64 = seen.iter().map(|(p, _)| p + liar_completion()).sum();
        let (last_prompt, last_cap) = *seen.last().unwrap();
        assert!(
            honest <= BUDGET + last_prompt + last_cap,
            "{lie:?}: {} requests, {honest} tokens for a budget of {BUDGET}",
            seen.len()
        );
        assert!(
            seen.len() >= 2,
            "{lie:?}: the budget, not the first answer, stopped it"
        );
        let warnings = usage_warnings(baton.home.path());
        if matches!(lie, Lie::TotalZero | Lie::Negative | Lie::Absurd) {
            assert_eq!(warnings.len(), seen.len(), "{lie:?}");
            assert_eq!(warnings[0]["code"], "PROVIDER_USAGE_INVALID");
            assert!(warnings[0]["hint"].as_str().unwrap().contains("own count"));
        } else {
            assert!(warnings.is_empty(), "{lie:?}: {warnings:?}");
        }
    }

    // Without --json the warning is on stderr, with its code and hint.
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    let (server, _seen) = liar(Lie::Negative);
    let pkg = example("create-story-micro");
    let text = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--base-url",
        &server.base_url(),
        "--model",
        LIAR_MODEL,
        "--input",
        "1-2-user-authentication",
        "--budget-tokens",
        "40000",
    ]);
    assert_eq!(text.code, 12, "{}", text.stderr);
    assert!(
        text.stderr.contains("warning[PROVIDER_USAGE_INVALID]")
            && text.stderr.contains("prompt_tokens is negative")
            && text.stderr.contains("own count"),
        "{}",
        text.stderr
    );
}
