//! The context budget end to end: a node with 300 tool calls stays under a 16k budget with a
//! valid tool protocol in every request; a failing summary model gives the deterministic
//! summary; an input that cannot fit ends with `CONTEXT_STILL_TOO_LARGE` before anything is
//! sent; big tool results leave the conversation; a resumed run keeps its compressed window;
//! a damaged compressed window falls back to the whole one; the reference run needs no
//! compression.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_engine::runner::{self, Continuation, Finished, Settings, StartRun};
use baton_engine::{Budget, Outcome};
use baton_llm::{ChatModel, ReplayModel, Trace};
use baton_store::Store;
use baton_testkit::{example, sample_project, seed_000};
use serde_json::Value;
use std::path::Path;
use support::long_node::{LongNode, prefix_shares, write_notes};

const BUDGET: usize = 16_384;

async fn start(
    model: &dyn ChatModel,
    store: &Store,
    project: &Path,
    budget: Option<Budget>,
    inputs: &[&str],
) -> Finished {
    let mut settings = Settings::new(model);
    settings.max_turns = 1_000;
    settings.budget = budget;
    settings.inputs = inputs.iter().map(|s| s.to_string()).collect();
    runner::start(
        store,
        StartRun {
            package: &example("create-story-micro"),
            project,
            workflow: None,
            agent: None,
        },
        settings,
    )
    .await
    .unwrap()
}

fn audit(store: &Store, project: &Path, run_id: &str) -> Vec<Value> {
    let paths = store.project(project).unwrap().run_paths(run_id);
    baton_store::jsonl::read(&paths.execution_log)
        .unwrap()
        .records
}

fn context_events(store: &Store, project: &Path, run_id: &str) -> Vec<Value> {
    audit(store, project, run_id)
        .into_iter()
        .filter(|l| l["kind"] == "engine.context")
        .collect()
}

#[tokio::test]
async fn a_300_call_node_stays_under_16k_with_a_valid_protocol_at_every_request() {
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    write_notes(&project);
    let store = Store::new(tmp.path().join("home"));
    let model = LongNode::new(300);
    let done = start(&model, &store, &project, Some(Budget::new(BUDGET)), &[]).await;
    assert!(
        matches!(done.report.outcome, Outcome::Waiting { .. }),
        "{:?}",
        done.report.outcome
    );
    assert_eq!(done.report.tool_calls, 300);
    let seen = model.seen();
    assert_eq!(seen.len(), 301);
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(s.valid, Ok(()), "request {i}");
        assert!(s.tokens <= BUDGET, "request {i}: {} tokens", s.tokens);
    }
    let events = context_events(&store, &project, &done.run.run_id);
    assert!(
        events.len() >= 3,
        "compression happened in steps: {events:?}"
    );
    assert!(
        events.len() < 60,
        "not on every turn: {} compressions",
        events.len()
    );
    assert!(model.summaries() >= 1);
    for e in &events {
        assert_eq!(e["event"], "compressed");
        assert!(e["report"]["tokensAfter"].as_u64().unwrap() <= BUDGET as u64);
    }
    // Between compressions the previous request is the prefix of the next, byte for byte.
    let (of_request, of_previous) = prefix_shares(&seen);
    eprintln!(
        "prefix shares: {of_request:.4} of each request, {of_previous:.4} of the previous; {} compressions",
        events.len()
    );
    assert!(of_request >= 0.9, "{of_request}");
    assert!(of_previous >= 0.9, "{of_previous}");
    // The first messages of every request (system layers, directive, brief) never change.
    let head = |s: &str| {
        s[..s
            .find("TOOL_CALL_HISTORY_SUMMARY")
            .unwrap_or(s.len())
            .min(4_000)]
            .to_string()
    };
    let first = head(seen[0].json.as_deref().unwrap());
    let brief_end = first.find("NODE_BRIEF").unwrap();
    for s in &seen {
        assert_eq!(s.json.as_deref().unwrap()[..brief_end], first[..brief_end]);
    }
    // The last request still has the latest tool results whole.
    let last = seen.last().unwrap().json.as_deref().unwrap();
    assert!(last.contains("read_299"));
}

#[tokio::test]
async fn a_failing_summary_model_gives_the_deterministic_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    write_notes(&project);
    let store = Store::new(tmp.path().join("home"));
    let mut model = LongNode::new(120);
    model.summary_fails = true;
    let done = start(&model, &store, &project, Some(Budget::new(BUDGET)), &[]).await;
    assert!(matches!(done.report.outcome, Outcome::Waiting { .. }));
    assert!(model.summaries() >= 1);
    let seen = model.seen();
    assert!(seen.iter().all(|s| s.valid.is_ok() && s.tokens <= BUDGET));
    assert!(seen.iter().any(|s| {
        s.json
            .as_deref()
            .unwrap()
            .contains("condensed by baton because the summary model failed: LLM_HTTP_ERROR")
    }));
    let events = context_events(&store, &project, &done.run.run_id);
    assert!(
        events
            .iter()
            .any(|e| e["report"]["summary"] == "fallback: LLM_HTTP_ERROR"),
        "{events:?}"
    );
}

#[tokio::test]
async fn an_input_that_cannot_fit_ends_with_context_still_too_large() {
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    write_notes(&project);
    let store = Store::new(tmp.path().join("home"));
    // One read, then a question; the answer is far larger than the whole budget.
    let model = LongNode::new(1);
    let huge = "the story is about boards ".repeat(4_000);
    let done = start(
        &model,
        &store,
        &project,
        Some(Budget::new(BUDGET)),
        &[&huge],
    )
    .await;
    match &done.report.outcome {
        Outcome::Failed { code, message } => {
            assert_eq!(code, "CONTEXT_STILL_TOO_LARGE");
            assert!(message.contains("context_tokens"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        model.seen().len(),
        2,
        "the oversized request was never sent"
    );
    assert_eq!(done.run.phase, baton_store::Phase::Failed);
}

#[tokio::test]
async fn tool_results_over_50kb_are_written_to_state_and_previewed() {
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    write_notes(&project);
    // f00.md made big: its read result is over 50 KB.
    let big: String = (0..2_000)
        .map(|i| format!("line {i}: a long line of the board's history, kept for the audit\n"))
        .collect();
    std::fs::write(project.join("notes/f00.md"), &big).unwrap();
    let store = Store::new(tmp.path().join("home"));
    let mut model = LongNode::new(1);
    model.read_whole = true;
    let done = start(&model, &store, &project, Some(Budget::new(BUDGET)), &[]).await;
    assert!(matches!(done.report.outcome, Outcome::Waiting { .. }));
    let seen = model.seen();
    let second: Value = serde_json::from_str(seen[1].json.as_deref().unwrap()).unwrap();
    let tool = second
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let content: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(content["offloaded"], true);
    assert_eq!(content["ok"], true);
    let path = content["fullOutputPath"].as_str().unwrap();
    assert!(path.starts_with("@state/logs/tool-results/"), "{path}");
    assert!(tool["content"].as_str().unwrap().len() < 2_000);
    // The file holds the whole result, and fs.read can reach it through the mount.
    let state_dir = store
        .project(&project)
        .unwrap()
        .run_paths(&done.run.run_id)
        .state_dir;
    let full = std::fs::read_to_string(state_dir.join(path.trim_start_matches("@state/"))).unwrap();
    let full: Value = serde_json::from_str(&full).unwrap();
    assert_eq!(full["content"].as_str().unwrap(), big);
    // The conversation log keeps the preview, not the 100 KB.
    let log = std::fs::read_to_string(state_dir.join("logs/conversation.jsonl")).unwrap();
    assert!(log.len() < 40_000, "{}", log.len());
}

#[tokio::test]
async fn a_resumed_run_keeps_its_compressed_window_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    write_notes(&project);
    let store = Store::new(tmp.path().join("home"));
    let model = LongNode::new(150);
    let first = start(&model, &store, &project, Some(Budget::new(BUDGET)), &[]).await;
    assert!(matches!(first.report.outcome, Outcome::Waiting { .. }));
    assert!(!context_events(&store, &project, &first.run.run_id).is_empty());
    let before = model.seen().last().unwrap().json.clone().unwrap();

    let mut settings = Settings::new(&model);
    settings.budget = Some(Budget::new(BUDGET));
    runner::continue_run(
        &store,
        &first.run.run_id,
        Continuation::Answer("f01 first".into()),
        settings,
    )
    .await
    .unwrap();
    let after = model.seen().last().unwrap().json.clone().unwrap();
    let prefix = before.strip_suffix(']').unwrap();
    assert!(
        after.starts_with(prefix),
        "the answer only appends to the compressed window"
    );
}

#[tokio::test]
async fn a_damaged_compressed_window_falls_back_to_the_whole_one_and_is_logged() {
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    write_notes(&project);
    let store = Store::new(tmp.path().join("home"));
    let model = LongNode::new(150);
    let first = start(&model, &store, &project, Some(Budget::new(BUDGET)), &[]).await;
    let paths = store
        .project(&project)
        .unwrap()
        .run_paths(&first.run.run_id);
    // Damage the last compaction: an orphan tool result inside the compressed window.
    let text = std::fs::read_to_string(&paths.conversation_log).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines
        .iter_mut()
        .rev()
        .find(|l| l.get("compaction").is_some())
        .unwrap();
    last["compaction"]["messages"]
        .as_array_mut()
        .unwrap()
        .insert(
            3,
            serde_json::json!({"role": "tool", "toolCallId": "ghost", "content": "{}"}),
        );
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&paths.conversation_log, text).unwrap();

    let mut settings = Settings::new(&model);
    // A budget the whole window fits in, so the fallback can be sent.
    settings.budget = Some(Budget::new(1_000_000));
    let done = runner::continue_run(
        &store,
        &first.run.run_id,
        Continuation::Answer("go on".into()),
        settings,
    )
    .await
    .unwrap();
    assert!(matches!(done.report.outcome, Outcome::Waiting { .. }));
    let last = model.seen().last().unwrap().clone();
    assert_eq!(last.valid, Ok(()));
    assert!(!last.json.unwrap().contains("ghost"));
    let events = context_events(&store, &project, &first.run.run_id);
    assert!(
        events.iter().any(|e| e["event"] == "protocol_fallback"
            && e["violation"].as_str().unwrap().contains("ghost")),
        "{events:?}"
    );
}

#[tokio::test]
async fn the_reference_run_needs_no_compression() {
    let Some(seed) = seed_000() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    let store = Store::new(tmp.path().join("home"));
    let replay = ReplayModel::new(Trace::load(&seed).unwrap());
    let mut settings = Settings::new(&replay);
    settings.replay = Some(&replay);
    let done = runner::start(
        &store,
        StartRun {
            package: &example("create-story-micro"),
            project: &project,
            workflow: None,
            agent: None,
        },
        settings,
    )
    .await
    .unwrap();
    assert!(matches!(done.report.outcome, Outcome::Completed { .. }));
    assert_eq!((done.report.model_calls, done.report.tool_calls), (10, 38));
    assert!(context_events(&store, &project, &done.run.run_id).is_empty());
    let paths = store.project(&project).unwrap().run_paths(&done.run.run_id);
    assert!(!paths.state_dir.join("logs/tool-results").exists());
    let log = std::fs::read_to_string(&paths.conversation_log).unwrap();
    assert!(!log.contains("\"compaction\""));
}
