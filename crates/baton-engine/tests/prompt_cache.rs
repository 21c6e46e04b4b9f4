//! The demo run against a played provider that caches prompt prefixes as OpenAI does: every
//! request within a node begins with the whole previous one, the tool definitions are sorted
//! and the same in every request, node changes keep the fixed layers in front, and the cache
//! hits the provider reports reach the run's usage.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::runner::{self, Settings, StartRun};
use baton_engine::spend;
use baton_llm::testing::caching::{CachingProvider, trace_answers};
use baton_llm::{HttpChatModel, LlmConfig, Trace};
use baton_store::{Phase, Store};
use baton_testkit::json_server::JsonServer;
use baton_testkit::{copy_dir, demo_trace, repo};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

#[tokio::test]
async fn the_demo_run_is_served_from_the_providers_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let trace = Trace::load(&demo_trace()).unwrap();
    let provider = Arc::new(CachingProvider::new());
    let answers = Arc::new(Mutex::new(VecDeque::from(trace_answers(&trace))));
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let (p, a, b) = (provider.clone(), answers.clone(), bodies.clone());
    let server = JsonServer::start(Arc::new(move |body: &Value| {
        b.lock().unwrap().push(body.clone());
        match a.lock().unwrap().pop_front() {
            Some(answer) => p.answer(body, answer),
            None => json!({"error": {"message": "no answer left"}}),
        }
    }));
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("played-cache".into()),
        stream: false,
        ..LlmConfig::default()
    })
    .unwrap();
    let store = Store::new(tmp.path().join("home"));
    let mut settings = Settings::new(&model);
    settings.inputs = trace.user_inputs().map(str::to_owned).collect();
    let pkg = repo().join("examples/packages/create-story-micro");
    let finished = runner::start(&store, StartRun::new(&pkg, &project), settings)
        .await
        .unwrap();
    assert_eq!(finished.run.phase, Phase::Completed);

    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 10);
    let tools = |b: &Value| -> Vec<String> {
        b["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    let first = tools(&bodies[0]);
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(first, sorted, "tool definitions go sorted by name");
    for b in &bodies {
        assert_eq!(tools(b), first, "the same tools in every request");
        assert!(
            b["max_tokens"].as_u64().unwrap() > 0,
            "every request is capped"
        );
    }

    // The run's own figures, from its audit log.
    let paths = store
        .project(&project)
        .unwrap()
        .run_paths(&finished.run.run_id);
    let r = spend::recorded(&paths.execution_log, None);
    assert_eq!(r.prefix_extensions(), Some(1.0));
    let share = r.cacheable_prefix_share().unwrap();
    // 0.787 before the fixed layers went first and the protocol became a system layer; the
    // rest is what each request adds (file contents read, answers), which no cache holds.
    assert!(share >= 0.80, "cacheablePrefixShare {share}");
    // The provider's cache hits are the run's.
    let (prompt, cached) = provider.totals();
    let usage = finished.run.usage.unwrap();
    assert_eq!(
        (usage.prompt_tokens, usage.cached_prompt_tokens),
        (prompt, cached)
    );
    let cached_share = cached as f64 / prompt as f64;
    assert!(cached_share >= 0.72, "cached share {cached_share}");
    assert_eq!(r.usage.cached_prompt_tokens, cached);
}

/// Writes into the demo trace the usage a caching provider reports for each of its calls when
/// the demo is served over HTTP (as above), so `baton demo` shows the tokens of its recording:
/// `BATON_RECORD_DEMO_USAGE=1 cargo test -p baton-engine --test engine prompt_cache::`. The answers
/// stay as authored; only each call's `usage` and the note change.
#[tokio::test]
async fn record_the_demo_usage_again() {
    if std::env::var("BATON_RECORD_DEMO_USAGE").as_deref() != Ok("1") {
        eprintln!("skipped: set BATON_RECORD_DEMO_USAGE=1 to record the demo trace's usage again");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let trace = Trace::load(&demo_trace()).unwrap();
    let provider = Arc::new(CachingProvider::new());
    let answers = Arc::new(Mutex::new(VecDeque::from(trace_answers(&trace))));
    let (p, a) = (provider.clone(), answers.clone());
    let server = JsonServer::start(Arc::new(move |body: &Value| {
        match a.lock().unwrap().pop_front() {
            Some(answer) => p.answer(body, answer),
            None => json!({"error": {"message": "no answer left"}}),
        }
    }));
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("played-cache".into()),
        stream: false,
        ..LlmConfig::default()
    })
    .unwrap();
    let store = Store::new(tmp.path().join("home"));
    let mut settings = Settings::new(&model);
    settings.inputs = trace.user_inputs().map(str::to_owned).collect();
    let pkg = repo().join("examples/packages/create-story-micro");
    let finished = runner::start(&store, StartRun::new(&pkg, &project), settings)
        .await
        .unwrap();
    assert_eq!(finished.run.phase, Phase::Completed);
    let mut served = provider.served().into_iter();
    let path = demo_trace();
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for d in doc["dialogues"].as_array_mut().unwrap() {
        if d.get("response").is_none() {
            continue;
        }
        let s = served.next().expect("a request for every recorded call");
        d["response"]["usage"] = json!({
            "promptTokens": s.prompt_tokens,
            "cachedPromptTokens": s.cached_tokens,
            "completionTokens": s.completion_tokens,
            "reasoningTokens": 0,
            "totalTokens": s.prompt_tokens + s.completion_tokens,
        });
    }
    assert!(
        served.next().is_none(),
        "as many requests as recorded calls"
    );
    doc["note"] = json!(
        "Authored for baton's demo: the answers a model gives for create-story-micro on the Taskboard sample. Requests are composed by baton when replaying. Each call's usage is what a played provider cache reported when the demo was served over HTTP (prompt tokens at 4 bytes a token, cached tokens the longest prefix seen before, from 1,024 in blocks of 128)."
    );
    let mut text = serde_json::to_string_pretty(&doc).unwrap();
    text.push('\n');
    std::fs::write(&path, text).unwrap();
}
