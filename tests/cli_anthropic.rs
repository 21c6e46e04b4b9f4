//! An Anthropic run through the real binary: `--api anthropic` against the played Messages API
//! (strict as the API: alternation, tool results, thinking blocks sent back with their
//! signatures, at most four breakpoints), serving the reference conversation's recorded
//! answers in Anthropic's format, streamed. The run completes; every request carries cache
//! breakpoints; from the second request on, the played cache reports reads; `runs show --json`
//! holds exactly the cache figures the server reported.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_llm::Trace;
use baton_llm::anthropic::{MAX_BREAKPOINTS, request::breakpoints};
use baton_llm::testing::anthropic::{AnthropicServer, trace_answers};
use baton_testkit::{demo_trace, sample_project};
use common::{Baton, example};

#[test]
fn an_anthropic_run_of_the_reference_conversation_reads_its_prompts_from_the_cache() {
    let path = baton_testkit::seed_000().unwrap_or_else(demo_trace);
    let trace = Trace::load(&path).unwrap();
    let server = AnthropicServer::start(trace_answers(&trace, true)).unwrap();
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    let pkg = example("create-story-micro");
    let url = server.base_url();
    let recorded = tmp.path().join("anthropic.trace.json");
    let mut args = vec![
        "run",
        pkg.to_str().unwrap(),
        "--record",
        recorded.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--api",
        "anthropic",
        "--base-url",
        &url,
        "--model",
        "claude-sonnet-4-5",
        "--json",
    ];
    let inputs: Vec<String> = trace.user_inputs().map(str::to_owned).collect();
    for input in &inputs {
        args.extend(["--input", input.as_str()]);
    }
    let run = baton.run(&args);
    let exchanges = server.exchanges();
    let refused: Vec<String> = exchanges
        .iter()
        .filter(|e| e.status != 200)
        .map(|e| format!("{}", e.status))
        .collect();
    assert_eq!(
        run.code, 0,
        "{}\n{}\nrefused: {refused:?}",
        run.stdout, run.stderr
    );
    let v = run.json();
    assert_eq!(v["phase"], "completed");
    assert!(refused.is_empty(), "{refused:?}");
    assert_eq!(server.remaining(), 0, "every recorded answer was asked for");
    assert_eq!(exchanges.len(), trace.dialogues().count());

    let mut read = 0;
    let mut written = 0;
    for (i, e) in exchanges.iter().enumerate() {
        assert_eq!(e.path, "/v1/messages");
        assert_eq!(e.body["stream"], true, "baton streams by default");
        let n = breakpoints(&e.body);
        assert!(
            (2..=MAX_BREAKPOINTS).contains(&n),
            "request {i}: {n} breakpoints"
        );
        let u = e.usage.unwrap();
        if i > 0 {
            assert!(
                u.cache_read_input_tokens > 0,
                "request {i} read nothing: {u:?}"
            );
        }
        read += u.cache_read_input_tokens;
        written += u.cache_creation_input_tokens;
    }
    // Most of the prompts came from the cache.
    let prompt: u64 = exchanges
        .iter()
        .map(|e| e.usage.unwrap().prompt_tokens())
        .sum();
    assert!(read * 2 > prompt, "{read} of {prompt} read from the cache");

    let id = v["runId"].as_str().unwrap();
    let shown = baton.run(&["runs", "show", id, "--json"]).json();
    let usage = &shown["usage"];
    assert_eq!(usage["modelCalls"], exchanges.len());
    assert_eq!(usage["cachedPromptTokens"], read, "{usage}");
    assert_eq!(usage["cacheWriteTokens"], written, "{usage}");
    assert!(usage["promptTokens"].as_u64().unwrap() >= prompt, "{usage}");
    // Claude has a price: cache writes and reads priced as such.
    assert!(usage["costUsd"].as_f64().unwrap() > 0.0, "{usage}");
    assert_eq!(
        shown["run"]["model"]["api"], "anthropic",
        "{}",
        shown["run"]["model"]
    );
    let text = baton.run(&["runs", "show", id]);
    assert!(text.stdout.contains("cached"), "{}", text.stdout);

    // The recorded trace replays offline, thinking blocks and all, to the same end.
    let again = tempfile::tempdir().unwrap();
    let project2 = sample_project(again.path());
    let replayed = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project2.to_str().unwrap(),
        "--replay",
        recorded.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(replayed.code, 0, "{}\n{}", replayed.stdout, replayed.stderr);
    let r = replayed.json();
    assert_eq!(r["phase"], "completed");
    assert_eq!(r["artifacts"], v["artifacts"]);
    let trace_text = std::fs::read_to_string(&recorded).unwrap();
    assert!(
        trace_text.contains("thinking_blocks"),
        "the trace keeps the thinking"
    );
}
