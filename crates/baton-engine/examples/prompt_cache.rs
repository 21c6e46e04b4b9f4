//! `prompt_cache [TRACE PACKAGE PROJECT]`: a recorded run replayed through the real HTTP client
//! against a played provider that caches prompt prefixes as OpenAI does (cached tokens = the
//! longest prefix seen before, from 1,024 tokens in blocks of 128, at 4 bytes a token), and
//! what it cost: requests, prompt and cached tokens, and the run's own prefix figures
//! (`cacheablePrefixShare`, `prefixExtensions`) as `baton runs show --json` reports them.
//!
//! Defaults: the reference conversation (`shared/seeds/000_*` beside the repository) when it
//! is there, else the demo trace; the create-story-micro package; the Taskboard sample.
//! Prints one JSON object. `PROMPT_CACHE_CONTEXT=full` replays under the `full` context
//! policy; `PROMPT_CACHE_DUMP=DIR` writes every request body there (`000.json`, …).

use baton_engine::runner::{self, Settings, StartRun};
use baton_engine::spend;
use baton_llm::testing::caching::{CachingProvider, trace_answers};
use baton_llm::{HttpChatModel, LlmConfig, Trace};
use baton_store::Store;
use baton_testkit::json_server::JsonServer;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repo = baton_testkit::repo();
    let trace_path = match args.first() {
        Some(t) => PathBuf::from(t),
        None => baton_testkit::seed_000().unwrap_or_else(baton_testkit::demo_trace),
    };
    let package = args
        .get(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("examples/packages/create-story-micro"));
    let sample = args
        .get(2)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("examples/projects/taskboard"));
    let trace = Trace::load(&trace_path)?;
    let work = tempfile::tempdir()?;
    let project = work.path().join("project");
    baton_testkit::copy_dir(&sample, &project);

    let provider = Arc::new(CachingProvider::new());
    let answers = Arc::new(Mutex::new(VecDeque::from(trace_answers(&trace))));
    let (p, a) = (provider.clone(), answers.clone());
    let server = JsonServer::start(Arc::new(move |body: &Value| {
        let next = a.lock().ok().and_then(|mut q| q.pop_front());
        if let Ok(dir) = std::env::var("PROMPT_CACHE_DUMP") {
            let n = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
            let _ = std::fs::write(format!("{dir}/{n:03}.json"), body.to_string());
        }
        match next {
            Some(answer) => p.answer(body, answer),
            None => json!({"error": {"message": "the recording has no answer left"}}),
        }
    }));
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("played-cache".into()),
        stream: false,
        ..LlmConfig::default()
    })?;
    let store = Store::new(work.path().join("home"));
    let mut settings = Settings::new(&model);
    settings.inputs = trace.user_inputs().map(str::to_owned).collect();
    if std::env::var("PROMPT_CACHE_CONTEXT").as_deref() == Ok("full") {
        settings.context = Some(baton_engine::ContextPolicy::Full);
    }
    let finished = runner::start(&store, StartRun::new(&package, &project), settings).await?;
    let paths = store.project(&project)?.run_paths(&finished.run.run_id);
    let r = spend::recorded(&paths.execution_log, None);
    let (prompt, cached) = provider.totals();
    let out = json!({
        "trace": trace_path.file_name().map(|n| n.to_string_lossy().into_owned()),
        "phase": finished.run.phase.as_str(),
        "requests": provider.served().len(),
        "promptTokens": prompt,
        "cachedPromptTokens": cached,
        "cachedShare": if prompt > 0 { cached as f64 / prompt as f64 } else { 0.0 },
        "completionTokens": provider.served().iter().map(|s| s.completion_tokens).sum::<u64>(),
        "usage": r.usage,
        "cacheablePrefixShare": r.cacheable_prefix_share(),
        "prefixExtensions": r.prefix_extensions(),
        "runPrefixExtensions": r.run_extensions(),
        "promptBytes": r.prefix_bytes,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
