//! Budgets against lying servers: a model server on 127.0.0.1 that keeps the run going (a
//! tool call on every answer) while its usage figures say it spent nothing, or nonsense. The
//! run must still stop with `BUDGET_EXCEEDED` once what was really sent and received reaches
//! the budget, the overshoot at most one request's cap; faulty figures are warned about
//! (`PROVIDER_USAGE_INVALID`, in the run's log and as an event), never credited.
//!
//! "Really sent and received" is counted here from the bodies the server got and the answers
//! it gave, with the counter baton uses for the model: the honest count a budget promises.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::runner::{self, Finished, Settings, StartRun};
use baton_engine::spend::{self, Cap};
use baton_engine::{ContextPolicy, EngineEvent, Outcome, TokenCounter};
use baton_llm::testing::{Reply, ScriptedServer, request_of};
use baton_llm::{HttpChatModel, LlmConfig, Message, Price, ToolCall};
use baton_store::{Phase, Store};
use baton_testkit::json_server::JsonServer;
use baton_testkit::{copy_dir, repo};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MODEL: &str = "liar";
const BUDGET: u64 = 20_000;
const CAP: u32 = 200;
/// USD per million tokens: input, cached input, output.
const PRICE: Price = Price::new(2.0, 0.5, 8.0);
/// What the liar asks for on every turn: a file of the package, so the prompt grows.
const ARGS: &str = r#"{"path":"@pkg/workflow.graph.json"}"#;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Lie {
    /// Every figure 0.
    Zeros,
    /// The real prompt and completion counts, `total_tokens: 0`.
    TotalZero,
    /// Negative figures.
    Negative,
    /// No `usage` at all.
    NoUsage,
    /// Figures no call can reach.
    Absurd,
}

impl Lie {
    fn usage(self, prompt: u64, completion: u64) -> Option<Value> {
        match self {
            Lie::Zeros => {
                Some(json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}))
            }
            Lie::TotalZero => Some(
                json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": 0}),
            ),
            Lie::Negative => Some(
                json!({"prompt_tokens": -(prompt as i64), "completion_tokens": -5, "total_tokens": -1_000_000}),
            ),
            Lie::NoUsage => None,
            Lie::Absurd => Some(
                json!({"prompt_tokens": u64::MAX, "completion_tokens": 1e300, "total_tokens": 9_000_000_000_000u64}),
            ),
        }
    }

    /// Whether baton must warn about these figures.
    fn is_fault(self) -> bool {
        matches!(self, Lie::TotalZero | Lie::Negative | Lie::Absurd)
    }
}

/// baton's count of a request body as the server received it.
fn prompt_tokens(body: &Value) -> u64 {
    let req = request_of(body);
    TokenCounter::for_model(MODEL).request(&req.messages, &req.tools) as u64
}

/// baton's count of the liar's answer.
fn completion_tokens() -> u64 {
    let m = Message::assistant_calls(vec![ToolCall::new("call_1", "fs_read", ARGS)]);
    TokenCounter::for_model(MODEL).message(&m) as u64
}

/// What the server got: each request's prompt tokens and completion cap.
type Seen = Arc<Mutex<Vec<(u64, u64)>>>;

fn liar(lie: Lie) -> (JsonServer, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let server = JsonServer::start(Arc::new(move |body: &Value| {
        let prompt = prompt_tokens(body);
        s.lock()
            .unwrap()
            .push((prompt, body["max_tokens"].as_u64().unwrap()));
        let mut answer = json!({"id": "chatcmpl-liar", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
                "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "fs_read", "arguments": ARGS}}]}}]});
        if let Some(u) = lie.usage(prompt, completion_tokens()) {
            answer["usage"] = u;
        }
        answer
    }));
    (server, seen)
}

struct World {
    _tmp: tempfile::TempDir,
    store: Store,
    project: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        copy_dir(&repo().join("examples/projects/taskboard"), &project);
        let store = Store::new(tmp.path().join("home"));
        World {
            _tmp: tmp,
            store,
            project,
        }
    }

    fn model(base_url: String, stream: bool) -> HttpChatModel {
        let mut config = LlmConfig {
            base_url,
            model: Some(MODEL.into()),
            stream,
            max_retries: 0,
            retry_base_delay: Duration::from_millis(1),
            max_completion_tokens: CAP,
            ..LlmConfig::default()
        };
        config.model_prices.insert(MODEL.into(), PRICE);
        HttpChatModel::new(config).unwrap()
    }

    /// A run of the demo workflow under a token budget; the events it emitted.
    async fn run(&self, model: &HttpChatModel) -> (Finished, Vec<EngineEvent>) {
        self.run_capped(model, Cap::run(Some(BUDGET), None)).await
    }

    async fn run_capped(&self, model: &HttpChatModel, cap: Cap) -> (Finished, Vec<EngineEvent>) {
        let events = Mutex::new(Vec::new());
        let on_event = |e: EngineEvent| events.lock().unwrap().push(e);
        let mut settings = Settings::new(model);
        settings.inputs.push_back("1-2-user-authentication".into());
        settings.context = Some(ContextPolicy::Node);
        settings.caps = vec![cap];
        settings.on_event = Some(&on_event);
        let pkg = repo().join("examples/packages/create-story-micro");
        let finished = runner::start(&self.store, StartRun::new(&pkg, &self.project), settings)
            .await
            .unwrap();
        (finished, events.into_inner().unwrap())
    }

    /// The run's audit lines of `kind`.
    fn lines(&self, run: &str, kind: &str) -> Vec<Value> {
        let log = self
            .store
            .project(&self.project)
            .unwrap()
            .run_paths(run)
            .execution_log;
        std::fs::read_to_string(log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|l| l["kind"] == kind)
            .collect()
    }
}

/// The run stopped on its budget, and what was really sent and received stayed within the
/// budget plus one request's cap; faulty figures were warned about.
fn assert_held(
    w: &World,
    finished: &Finished,
    events: &[EngineEvent],
    seen: &[(u64, u64)],
    lie: Lie,
) {
    let what = format!("{lie:?}");
    match &finished.report.outcome {
        Outcome::Failed { code, .. } => assert_eq!(code, spend::BUDGET_EXCEEDED, "{what}"),
        other => panic!("{what}: the run did not stop on its budget: {other:?}"),
    }
    assert_eq!(finished.run.phase, Phase::Idle, "{what}");
    let completion = completion_tokens();
    let honest: u64 = seen.iter().map(|(p, _)| p + completion).sum();
    let (last_prompt, last_cap) = *seen.last().unwrap();
    assert!(
        honest <= BUDGET + last_prompt + last_cap,
        "{what}: {} requests, {honest} tokens sent and received for a budget of {BUDGET}",
        seen.len()
    );
    // The run did work before it stopped: the budget, not a failure, ended it.
    assert!(seen.len() >= 2, "{what}: {seen:?}");
    // baton counted each prompt as what the server received.
    let turns = w.lines(&finished.run.run_id, "engine.turn");
    assert_eq!(turns.len(), seen.len(), "{what}");
    for (turn, (prompt, _)) in turns.iter().zip(seen) {
        assert_eq!(turn["counted"]["promptTokens"], *prompt, "{what}");
        assert_eq!(turn["counted"]["completionTokens"], completion, "{what}");
    }
    // The stop says what was spent: at least the honest count, never a credit.
    let b = &finished.run.waiting_for.as_ref().unwrap()["error"]["budget"];
    assert!(
        b["spent"].as_u64().unwrap() >= honest,
        "{what}: {b} < {honest}"
    );
    let warnings = w.lines(&finished.run.run_id, "engine.warning");
    let warned = events
        .iter()
        .filter(|e| matches!(e, EngineEvent::Warning { code, .. } if code == spend::PROVIDER_USAGE_INVALID))
        .count();
    if lie.is_fault() {
        assert_eq!(warnings.len(), seen.len(), "{what}: one warning per call");
        assert_eq!(warned, seen.len(), "{what}");
        assert_eq!(warnings[0]["code"], spend::PROVIDER_USAGE_INVALID);
        assert!(
            warnings[0]["hint"].as_str().unwrap().contains("own count"),
            "{}",
            warnings[0]
        );
    } else {
        assert_eq!((warnings.len(), warned), (0, 0), "{what}: {warnings:?}");
    }
}

async fn check(lie: Lie) {
    let w = World::new();
    let (server, seen) = liar(lie);
    let model = World::model(server.base_url(), false);
    let (finished, events) = w.run(&model).await;
    let seen = seen.lock().unwrap().clone();
    assert_held(&w, &finished, &events, &seen, lie);
}

#[tokio::test]
async fn usage_all_zero_still_stops_on_the_budget() {
    check(Lie::Zeros).await;
}

#[tokio::test]
async fn a_total_of_zero_with_real_counts_still_stops_on_the_budget() {
    check(Lie::TotalZero).await;
}

#[tokio::test]
async fn negative_usage_is_warned_and_never_a_credit() {
    check(Lie::Negative).await;
}

#[tokio::test]
async fn no_usage_at_all_is_charged_what_baton_counted() {
    check(Lie::NoUsage).await;
}

#[tokio::test]
async fn absurd_usage_is_warned_and_charged_what_baton_counted() {
    check(Lie::Absurd).await;
}

/// Streamed answers: the completion is counted from the streamed tool arguments, and the
/// usage chunk's zeros change nothing.
#[tokio::test]
async fn a_streamed_answer_with_zero_usage_still_stops_on_the_budget() {
    let replies = (0..60)
        .map(|_| {
            let Reply::Stream {
                mut payloads,
                pause,
                break_after,
            } = Reply::stream_tool_call("call_1", "fs_read", ARGS, 7)
            else {
                unreachable!("stream_tool_call makes a stream")
            };
            let done = payloads.pop().unwrap();
            payloads.push(
                json!({"choices": [], "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}})
                    .to_string(),
            );
            payloads.push(done);
            Reply::Stream {
                payloads,
                pause,
                break_after,
            }
        })
        .collect();
    let server = ScriptedServer::start(replies).await.unwrap();
    let w = World::new();
    let model = World::model(server.base_url(), true);
    let (finished, events) = w.run(&model).await;
    let seen: Vec<(u64, u64)> = server
        .received()
        .iter()
        .map(|r| {
            (
                prompt_tokens(&r.body),
                r.body["max_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_held(&w, &finished, &events, &seen, Lie::Zeros);
}

/// A USD budget prices baton's count the same way: zeros from the server cost what was sent
/// and received at the model's price.
#[tokio::test]
async fn a_usd_budget_prices_what_was_sent_and_received() {
    const USD: f64 = 0.05;
    let w = World::new();
    let (server, seen) = liar(Lie::Zeros);
    let model = World::model(server.base_url(), false);
    let (finished, _) = w.run_capped(&model, Cap::run(None, Some(USD))).await;
    let seen = seen.lock().unwrap().clone();
    match &finished.report.outcome {
        Outcome::Failed { code, .. } => assert_eq!(code, spend::BUDGET_EXCEEDED),
        other => panic!("the run did not stop on its budget: {other:?}"),
    }
    let b = &finished.run.waiting_for.as_ref().unwrap()["error"]["budget"];
    assert_eq!(b["kind"], "usd");
    let completion = completion_tokens();
    let cost = |prompt: u64, completion: u64| {
        (prompt as f64 * PRICE.input + completion as f64 * PRICE.output) / 1_000_000.0
    };
    let honest: f64 = seen.iter().map(|(p, _)| cost(*p, completion)).sum();
    let (last_prompt, last_cap) = *seen.last().unwrap();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(
        honest <= USD + cost(last_prompt, last_cap),
        "{} requests, ${honest} for a budget of ${USD}",
        seen.len()
    );
    assert!(
        b["spent"].as_f64().unwrap() >= honest * 0.999_999,
        "{b} < {honest}"
    );
}
