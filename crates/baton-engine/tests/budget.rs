//! Hard budgets: the demo run through the HTTP client against a scripted model whose calls
//! cost a fixed number of tokens. No request that could cross a budget reaches the server; the
//! run stops idle with `BUDGET_EXCEEDED`, keeps its spending across invocations, and a larger
//! budget finishes it with the same result as a run without one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::runner::{self, Continuation, Finished, Settings, StartRun};
use baton_engine::spend::{self, Cap};
use baton_engine::{ContextPolicy, Outcome};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig, Price, Trace};
use baton_store::{Phase, Store};
use baton_testkit::{copy_dir, demo_trace, repo};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const PRICE: Price = Price::new(2.0, 0.5, 8.0);

struct World {
    tmp: tempfile::TempDir,
    store: Store,
    project: PathBuf,
    server: ScriptedServer,
    model: HttpChatModel,
}

impl World {
    async fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        copy_dir(&repo().join("examples/projects/taskboard"), &project);
        let replies = Reply::from_trace(&Trace::load(&demo_trace()).unwrap());
        let server = ScriptedServer::start(replies).await.unwrap();
        let mut config = LlmConfig {
            base_url: server.base_url(),
            model: Some("scripted".into()),
            stream: false,
            retry_base_delay: Duration::from_millis(5),
            max_completion_tokens: 300,
            ..LlmConfig::default()
        };
        config.model_prices.insert("scripted".into(), PRICE);
        let model = HttpChatModel::new(config).unwrap();
        let store = Store::new(tmp.path().join("home"));
        World {
            tmp,
            store,
            project,
            server,
            model,
        }
    }

    fn settings(&self, caps: Vec<Cap>) -> Settings<'_> {
        let mut settings = Settings::new(&self.model);
        settings.inputs.push_back("1-2-user-authentication".into());
        settings.context = Some(ContextPolicy::Node);
        settings.caps = caps;
        settings
    }

    async fn start(&self, caps: Vec<Cap>) -> Finished {
        let pkg = repo().join("examples/packages/create-story-micro");
        runner::start(
            &self.store,
            StartRun::new(&pkg, &self.project),
            self.settings(caps),
        )
        .await
        .unwrap()
    }

    async fn resume(&self, run: &str, caps: Vec<Cap>) -> Finished {
        runner::continue_run(&self.store, run, Continuation::Resume, self.settings(caps))
            .await
            .unwrap()
    }

    fn log(&self, run: &str) -> PathBuf {
        let project = self.store.project(&self.project).unwrap();
        project.run_paths(run).execution_log
    }

    /// The `engine.turn` lines of a run.
    fn turns(&self, run: &str) -> Vec<Value> {
        std::fs::read_to_string(self.log(run))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|l| l["kind"] == "engine.turn")
            .collect()
    }
}

fn tokens_cap(n: u64) -> Vec<Cap> {
    vec![Cap::run(Some(n), None)]
}

/// What a finished run left: its state's progress and its artifacts' bytes.
fn result(project: &Path, finished: &Finished) -> (Value, Vec<(String, Vec<u8>)>) {
    let root = project.join("artifacts");
    let files = baton_testkit::files_on_disk(&root)
        .into_iter()
        .map(|rel| {
            let bytes = std::fs::read(root.join(&rel)).unwrap();
            (rel, bytes)
        })
        .collect();
    (finished.state["stepsCompleted"].clone(), files)
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

/// What budgets charge for a recorded call: the larger of the provider's figures and baton's
/// own count.
fn charged(turn: &Value) -> baton_llm::Usage {
    let usage: baton_llm::Usage = serde_json::from_value(turn["usage"].clone()).unwrap();
    let counted: spend::Counted = serde_json::from_value(turn["counted"].clone()).unwrap();
    spend::charge(Some(&usage), counted, Some(PRICE))
}

/// The reference run, without a budget: what each call was estimated at and charged.
async fn reference() -> (Vec<(u64, u64, f64, f64)>, (Value, Vec<(String, Vec<u8>)>)) {
    let w = World::new().await;
    let finished = w.start(Vec::new()).await;
    assert!(matches!(finished.report.outcome, Outcome::Completed { .. }));
    let turns = w.turns(&finished.run.run_id);
    let calls = turns
        .iter()
        .map(|t| {
            let e = &t["estimate"];
            let c = charged(t);
            (
                n(&e["promptTokens"]) + n(&e["maxTokens"]),
                c.total_tokens,
                e["usd"].as_f64().unwrap(),
                c.cost_usd.unwrap(),
            )
        })
        .collect::<Vec<_>>();
    assert_eq!(calls.len(), 10);
    // Every request carried the cap it was estimated with.
    for (body, turn) in w
        .server
        .received()
        .iter()
        .zip(w.turns(&finished.run.run_id))
    {
        assert_eq!(body.body["max_tokens"], turn["estimate"]["maxTokens"]);
        assert!(n(&body.body["max_tokens"]) <= 300);
    }
    // run.json sums the calls as the provider reported them.
    let usage = finished.run.usage.unwrap();
    assert_eq!(usage.model_calls, 10);
    let reported: u64 = turns.iter().map(|t| n(&t["usage"]["totalTokens"])).sum();
    assert_eq!(usage.total_tokens, reported);
    assert!(usage.cost_usd.unwrap() > 0.0);
    let result = result(&w.project, &finished);
    (calls, result)
}

/// How many calls a budget lets through: call k goes only if what was spent before it plus
/// its estimate stays within the budget.
fn allowed(calls: &[(u64, u64)], budget: u64) -> usize {
    let mut spent = 0;
    for (k, (estimate, cost)) in calls.iter().enumerate() {
        if spent + estimate > budget {
            return k;
        }
        spent += cost;
    }
    calls.len()
}

#[tokio::test]
async fn a_token_budget_stops_before_the_crossing_call_and_a_larger_one_finishes_the_run() {
    let (calls, expected) = reference().await;
    let tokens: Vec<(u64, u64)> = calls.iter().map(|c| (c.0, c.1)).collect();
    // Room for three calls and one token short of the fourth.
    let budget = tokens[..3].iter().map(|c| c.1).sum::<u64>() + tokens[3].0 - 1;
    let served = allowed(&tokens, budget);
    assert!((1..10).contains(&served), "{served}");
    let w = World::new().await;
    let stopped = w.start(tokens_cap(budget)).await;
    let run = stopped.run.run_id.clone();
    match &stopped.report.outcome {
        Outcome::Failed { code, message } => {
            assert_eq!(code, spend::BUDGET_EXCEEDED);
            assert!(message.contains("run budget"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(stopped.run.phase, Phase::Idle);
    assert_eq!(stopped.run.stop_reason.as_deref(), Some("budget-exceeded"));
    // The server got exactly the calls that fit, none that could cross.
    assert_eq!(w.server.received().len(), served);
    let spent: u64 = tokens[..served].iter().map(|c| c.1).sum();
    assert!(spent <= budget);
    let budget_json = &stopped.run.waiting_for.as_ref().unwrap()["error"]["budget"];
    assert_eq!(budget_json["kind"], "tokens");
    assert_eq!(budget_json["scope"], "run");
    assert_eq!(n(&budget_json["spent"]), spent);
    assert!(n(&budget_json["spent"]) + n(&budget_json["estimate"]) > budget);

    // The same budget again: the spending survived the invocation, nothing more is sent.
    let again = w.resume(&run, tokens_cap(budget)).await;
    assert_eq!(again.run.phase, Phase::Idle);
    assert_eq!(w.server.received().len(), served);

    // A larger budget goes on from where it stopped and ends as the unbudgeted run did.
    let total: u64 = tokens.iter().map(|c| c.0).sum();
    let done = w.resume(&run, tokens_cap(total * 2)).await;
    assert!(
        matches!(done.report.outcome, Outcome::Completed { .. }),
        "{:?}",
        done.report
    );
    assert_eq!(done.run.phase, Phase::Completed);
    assert_eq!(w.server.received().len(), 10);
    assert_eq!(result(&w.project, &done), expected);
    assert_eq!(done.run.usage.unwrap().model_calls, 10);
    drop(w.tmp);
}

#[tokio::test]
async fn a_budget_of_zero_sends_nothing() {
    let w = World::new().await;
    let stopped = w.start(tokens_cap(0)).await;
    assert_eq!(w.server.received().len(), 0);
    assert_eq!(stopped.run.phase, Phase::Idle);
    assert!(matches!(
        &stopped.report.outcome,
        Outcome::Failed { code, .. } if code == spend::BUDGET_EXCEEDED
    ));
    let usd = w
        .resume(&stopped.run.run_id, vec![Cap::run(None, Some(0.0))])
        .await;
    assert_eq!(w.server.received().len(), 0);
    assert_eq!(usd.run.phase, Phase::Idle);
    let done = w.resume(&stopped.run.run_id, Vec::new()).await;
    assert_eq!(done.run.phase, Phase::Completed);
    assert_eq!(w.server.received().len(), 10);
}

#[tokio::test]
async fn a_usd_budget_with_a_price_table_stops_the_same_way() {
    let (calls, expected) = reference().await;
    let usd: Vec<(f64, f64)> = calls.iter().map(|c| (c.2, c.3)).collect();
    let budget = usd[..4].iter().map(|c| c.1).sum::<f64>() + usd[4].0 * 0.999;
    let mut spent = 0.0;
    let mut served = usd.len();
    for (k, (estimate, cost)) in usd.iter().enumerate() {
        if spent + estimate > budget {
            served = k;
            break;
        }
        spent += cost;
    }
    assert!((1..10).contains(&served), "{served}");
    let w = World::new().await;
    let stopped = w.start(vec![Cap::run(None, Some(budget))]).await;
    assert_eq!(stopped.run.phase, Phase::Idle);
    assert_eq!(w.server.received().len(), served);
    let b = &stopped.run.waiting_for.as_ref().unwrap()["error"]["budget"];
    assert_eq!(b["kind"], "usd");
    let usage = stopped.run.usage.unwrap();
    assert!(usage.cost_usd.unwrap() <= budget);
    let done = w
        .resume(
            &stopped.run.run_id,
            vec![Cap::run(None, Some(budget * 10.0))],
        )
        .await;
    assert_eq!(done.run.phase, Phase::Completed);
    assert_eq!(result(&w.project, &done), expected);
}

#[tokio::test]
async fn a_usd_budget_without_a_price_is_refused_before_any_call() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let server = ScriptedServer::start(Vec::new()).await.unwrap();
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("unpriced-model".into()),
        ..LlmConfig::default()
    })
    .unwrap();
    let store = Store::new(tmp.path().join("home"));
    let mut settings = Settings::new(&model);
    settings.caps = vec![Cap::run(None, Some(1.0))];
    let pkg = repo().join("examples/packages/create-story-micro");
    let err = runner::start(&store, StartRun::new(&pkg, &project), settings)
        .await
        .unwrap_err();
    assert_eq!(err.code(), spend::BUDGET_PRICE_UNKNOWN);
    assert!(err.is_usage());
    assert_eq!(server.received().len(), 0);
}
