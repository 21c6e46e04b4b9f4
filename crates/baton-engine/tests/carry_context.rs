//! The carrying context policy (`--context full`): the reference run through the real HTTP
//! client against a played provider that caches prompt prefixes as OpenAI does. Every request
//! begins with the whole previous one, across the node changes and the change of agent at the
//! summary node (whose persona arrives as a message, the system layers staying the run's
//! agent's); one `prompt_cache_key` for the run; and past the carry limit the history of the
//! earlier nodes is left out in one step, after which the requests extend each other again,
//! every request keeping its tool calls and results paired (a strict server refuses others).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::runner::{self, Finished, Settings, StartRun};
use baton_engine::{Budget, ContextPolicy, Outcome, spend};
use baton_llm::testing::caching::{CachingProvider, trace_answers};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::wire::prompt_bytes;
use baton_llm::{HttpChatModel, LlmConfig, Trace};
use baton_store::{Phase, Store};
use baton_testkit::json_server::JsonServer;
use baton_testkit::{copy_dir, demo_trace, repo, seed_000};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The reference conversation when it is beside the repository, else the demo trace (the same
/// run recorded again).
fn reference() -> PathBuf {
    seed_000().unwrap_or_else(demo_trace)
}

struct Served {
    bodies: Vec<Value>,
    provider: Arc<CachingProvider>,
    finished: Finished,
    store: Store,
    project: PathBuf,
    _tmp: tempfile::TempDir,
}

impl Served {
    fn recorded(&self) -> spend::Recorded {
        let paths = self
            .store
            .project(&self.project)
            .unwrap()
            .run_paths(&self.finished.run.run_id);
        spend::recorded(&paths.execution_log, None)
    }

    fn cached_share(&self) -> f64 {
        let (prompt, cached) = self.provider.totals();
        cached as f64 / prompt as f64
    }
}

/// The reference run under `policy`, its answers served by a caching provider that also
/// refuses a request whose tool calls and results do not pair up.
async fn cached_run(policy: ContextPolicy) -> Served {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let trace = Trace::load(&reference()).unwrap();
    let provider = Arc::new(CachingProvider::new());
    let answers = Arc::new(Mutex::new(VecDeque::from(trace_answers(&trace))));
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let (p, a, b) = (provider.clone(), answers.clone(), bodies.clone());
    let server = JsonServer::start(Arc::new(move |body: &Value| {
        b.lock().unwrap().push(body.clone());
        if let Some(v) = baton_llm::testing::violation(body) {
            return json!({"error": {"message": v}});
        }
        match a.lock().unwrap().pop_front() {
            Some(answer) => p.answer(body, answer),
            None => json!({"error": {"message": "no answer left"}}),
        }
    }));
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("played-cache".into()),
        stream: false,
        prompt_cache_key: Some(true),
        ..LlmConfig::default()
    })
    .unwrap();
    let store = Store::new(tmp.path().join("home"));
    let mut settings = Settings::new(&model);
    settings.inputs = trace.user_inputs().map(str::to_owned).collect();
    settings.context = Some(policy);
    let pkg = repo().join("examples/packages/create-story-micro");
    let finished = runner::start(&store, StartRun::new(&pkg, &project), settings)
        .await
        .unwrap();
    assert_eq!(
        finished.run.phase,
        Phase::Completed,
        "{:?}",
        finished.report
    );
    let bodies = bodies.lock().unwrap().clone();
    Served {
        bodies,
        provider,
        finished,
        store,
        project,
        _tmp: tmp,
    }
}

/// The user messages a request added to the previous one.
fn added(previous: &Value, next: &Value) -> Vec<String> {
    let n = previous["messages"].as_array().unwrap().len();
    next["messages"].as_array().unwrap()[n..]
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_reference_run_carried_extends_every_request_across_nodes_and_agents() {
    let full = cached_run(ContextPolicy::Full).await;
    let bodies = &full.bodies;
    assert_eq!(bodies.len(), 10);
    let mut node_changes = 0;
    let mut agent_changes = 0;
    for i in 1..bodies.len() {
        let (prev, next) = (prompt_bytes(&bodies[i - 1]), prompt_bytes(&bodies[i]));
        assert!(
            next.starts_with(&prev),
            "request {i} does not begin with the whole previous request"
        );
        let added = added(&bodies[i - 1], &bodies[i]);
        node_changes += added.iter().filter(|t| t.starts_with("NODE_BRIEF")).count();
        if let Some(p) = added.iter().find(|t| t.starts_with("AGENT_PERSONA")) {
            assert!(p.contains("- effectiveAgentId: summarizer"), "{p}");
            agent_changes += 1;
        }
    }
    assert_eq!(node_changes, 5, "the run crosses its five node changes");
    assert_eq!(
        agent_changes, 1,
        "and the change of agent at the summary node"
    );
    // The system layers are the run's agent's in every request: the persona is a message.
    let system = |b: &Value| -> Vec<Value> {
        b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "system")
            .cloned()
            .collect()
    };
    for b in bodies {
        assert_eq!(system(b), system(&bodies[0]));
    }
    // One cache key for the run.
    let key = bodies[0]["prompt_cache_key"].as_str().unwrap();
    assert!(bodies.iter().all(|b| b["prompt_cache_key"] == key));

    // The run's own figures say the same: nothing of a previous request is lost, so the share
    // is the most this run allows (the bytes each request appends are new to any cache).
    let r = full.recorded();
    assert_eq!(r.run_extensions(), Some(1.0));
    assert_eq!(r.prefix_extensions(), Some(1.0));
    let sizes: Vec<u64> = bodies
        .iter()
        .map(|b| prompt_bytes(b).len() as u64)
        .collect();
    assert_eq!(r.prefix_bytes, sizes[1..].iter().sum::<u64>());
    assert_eq!(
        r.prefix_shared,
        sizes[..sizes.len() - 1].iter().sum::<u64>()
    );
    let share = r.cacheable_prefix_share().unwrap();
    let cached = full.cached_share();
    // The provider's hits are the run's.
    let usage = full.finished.run.usage.unwrap();
    assert_eq!(
        (usage.prompt_tokens, usage.cached_prompt_tokens),
        full.provider.totals()
    );

    // Against the node policy, whose history restarts at each node.
    let node = cached_run(ContextPolicy::Node).await;
    let node_share = node.recorded().cacheable_prefix_share().unwrap();
    eprintln!(
        "carried: share {share:.3}, cached {cached:.3}; node: share {node_share:.3}, cached {:.3}",
        node.cached_share()
    );
    assert!(share > node_share, "{share} vs {node_share}");
    assert!(cached > node.cached_share());
    assert!(cached >= 0.75, "cached share {cached}");
}

/// The demo trace as scripted HTTP replies on a strict server, under the carrying policy with
/// a window small enough for the carry limit to be passed.
async fn strict_carried_run(budget: Budget) -> (Vec<Value>, Vec<Value>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let replies = Reply::from_trace(&Trace::load(&demo_trace()).unwrap());
    let server = ScriptedServer::start(replies).await.unwrap();
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("scripted".into()),
        stream: false,
        retry_base_delay: Duration::from_millis(5),
        ..LlmConfig::default()
    })
    .unwrap();
    let store = Store::new(tmp.path().join("home"));
    let mut settings = Settings::new(&model);
    settings.inputs.push_back("1-2-user-authentication".into());
    settings.context = Some(ContextPolicy::Full);
    settings.budget = Some(budget);
    let pkg = repo().join("examples/packages/create-story-micro");
    let finished = runner::start(&store, StartRun::new(&pkg, &project), settings)
        .await
        .unwrap();
    assert!(
        matches!(finished.report.outcome, Outcome::Completed { .. }),
        "{:?}",
        finished.report
    );
    assert_eq!(finished.report.model_calls, 10);
    let paths = store
        .project(&project)
        .unwrap()
        .run_paths(&finished.run.run_id);
    let audit = baton_store::jsonl::read(&paths.execution_log)
        .unwrap()
        .records;
    let log = std::fs::read_to_string(&paths.conversation_log).unwrap();
    let bodies = server.received().into_iter().map(|r| r.body).collect();
    (bodies, audit, log)
}

#[tokio::test]
async fn past_the_carry_limit_the_earlier_nodes_are_left_out_once() {
    let budget = Budget::new(16_384);
    let (bodies, audit, log) = strict_carried_run(budget).await;
    // The audit in order: each turn, and the compactions made before it.
    let mut restarts_before: Vec<usize> = Vec::new();
    let mut pending = 0;
    for line in &audit {
        match line["kind"].as_str() {
            Some("engine.context") => {
                assert_eq!(line["event"], "compressed", "{line}");
                assert_eq!(line["report"]["window"], "restart", "{line}");
                let report = &line["report"];
                assert!(report["tokensBefore"].as_u64().unwrap() > budget.carry_limit() as u64);
                assert!(
                    report["tokensAfter"].as_u64().unwrap()
                        < report["tokensBefore"].as_u64().unwrap()
                );
                pending += 1;
            }
            Some("engine.turn") => restarts_before.push(std::mem::take(&mut pending)),
            _ => {}
        }
    }
    assert_eq!(restarts_before.len(), bodies.len());
    let restarts: usize = restarts_before.iter().sum();
    // At this window the run passes the carry limit once: at its fourth node, whose requests
    // then stay under it.
    assert_eq!(restarts, 1, "{restarts_before:?}");
    assert!(
        restarts_before.iter().all(|n| *n <= 1),
        "one step at a time"
    );
    for i in 1..bodies.len() {
        let (prev, next) = (prompt_bytes(&bodies[i - 1]), prompt_bytes(&bodies[i]));
        if restarts_before[i] == 0 {
            assert!(
                next.starts_with(&prev),
                "request {i} extends the previous one"
            );
            continue;
        }
        // The request after a restart: the tools and system layers as before, then the note,
        // then the current node's directive and brief; the earlier nodes' messages are gone.
        assert!(!next.starts_with(&prev), "request {i}");
        let messages = bodies[i]["messages"].as_array().unwrap();
        let first_user = messages.iter().position(|m| m["role"] == "user").unwrap();
        assert_eq!(
            messages[..first_user],
            bodies[i - 1]["messages"].as_array().unwrap()[..first_user]
        );
        let text = |k: usize| messages[k]["content"].as_str().unwrap_or("");
        assert!(text(first_user).starts_with("CONTEXT_RESTART"));
        assert!(text(first_user + 1).starts_with("RUN_DIRECTIVE"));
        assert!(text(first_user + 2).starts_with("NODE_BRIEF"));
        let briefs = messages
            .iter()
            .filter(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("NODE_BRIEF"))
            })
            .count();
        assert_eq!(briefs, 1, "only the current node's brief is left");
        assert!(prev.len() > next.len());
    }
    // The requests after the last restart extend each other again, and there are some.
    let last = restarts_before.iter().rposition(|n| *n > 0).unwrap();
    assert!(last + 1 < bodies.len(), "requests followed the restart");
    // The conversation log keeps everything: all 38 results of the run.
    let results = log.matches("\"role\":\"tool\"").count();
    assert!(results >= 38, "{results}");
}
