//! Replays through the real binary: a replay stopped by its budget and resumed goes on from the
//! next unused recorded answer (same artifacts, same usage, same number of calls as without the
//! stop); a replay that leaves its recording stops with `REPLAY_MISMATCH` naming the node and
//! the recorded answer, and hints a real model; a USD budget prices a replay as the model the
//! trace recorded, or under the `[models."…"]` entry the hint names.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_llm::testing::caching::{CachingProvider, trace_answers};
use baton_llm::{Price, Trace, Usage};
use baton_testkit::json_server::JsonServer;
use baton_testkit::{demo_trace, sample_project};
use common::{Baton, Run, example, walk};
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const STORY: &str = "1-2-user-authentication";

fn replay(baton: &Baton, project: &Path, trace: &Path, extra: &[&str]) -> Run {
    let pkg = example("create-story-micro");
    let mut args = vec![
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--replay",
        trace.to_str().unwrap(),
        "--input",
        STORY,
        "--json",
    ];
    args.extend_from_slice(extra);
    baton.run(&args)
}

/// The files the run wrote, by path under `artifacts/`.
fn artifacts(project: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let root = project.join("artifacts");
    walk(&root)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p.strip_prefix(&root).unwrap().to_path_buf(), bytes)
        })
        .collect()
}

/// What the run used, as `runs show --json` sums it from the audit log.
fn shown_usage(baton: &Baton, id: &str) -> Value {
    let shown = baton.run(&["runs", "show", id, "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    shown.json()["usage"].clone()
}

/// The tool calls the run's audit log says failed.
fn failed_tools(baton: &Baton, id: &str) -> Vec<String> {
    let log = baton.run(&["runs", "log", id, "--json"]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    log.stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e.to_string().contains("E_INVALID_TRANSITION"))
        .map(|e| e.to_string())
        .collect()
}

#[test]
fn a_replay_stopped_by_its_budget_resumes_with_the_next_unused_answer() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let whole = sample_project(&tmp.path().join("whole"));
    let full = replay(&baton, &whole, &demo_trace(), &[]);
    assert_eq!(full.code, 0, "{}", full.stderr);
    let full_id = full.json()["runId"].as_str().unwrap().to_string();
    let expected = shown_usage(&baton, &full_id);
    assert_eq!(expected["modelCalls"], 10, "{expected}");
    assert_eq!(expected["totalTokens"], 29_235, "{expected}");

    // The figures: stopped at the end node by 30,000 tokens, then resumed.
    let stopped_project = sample_project(&tmp.path().join("stopped"));
    let stopped = replay(
        &baton,
        &stopped_project,
        &demo_trace(),
        &["--budget-tokens", "30000"],
    );
    assert_eq!(stopped.code, 12, "{}\n{}", stopped.stderr, stopped.stdout);
    let id = stopped.json()["runId"].as_str().unwrap().to_string();
    let resumed = baton.run(&["resume", &id, "--budget-tokens", "100000", "--json"]);
    assert_eq!(resumed.code, 0, "{}\n{}", resumed.stderr, resumed.stdout);
    let v = resumed.json();
    assert_eq!(v["phase"], "completed");
    assert_eq!(v["runUsage"]["modelCalls"], 10, "{}", v["runUsage"]);
    assert_eq!(v["runUsage"]["totalTokens"], 29_235, "{}", v["runUsage"]);
    assert_eq!(shown_usage(&baton, &id), expected);
    assert_eq!(artifacts(&stopped_project), artifacts(&whole));
    assert_eq!(failed_tools(&baton, &id), Vec::<String>::new());
}

#[test]
fn a_replay_stopped_at_every_step_ends_as_the_uninterrupted_one() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let whole = sample_project(&tmp.path().join("whole"));
    let full = replay(&baton, &whole, &demo_trace(), &[]);
    assert_eq!(full.code, 0, "{}", full.stderr);
    let expected = shown_usage(&baton, full.json()["runId"].as_str().unwrap());

    // Budgets that stop the run before most of its calls, inside nodes and between them.
    let project = sample_project(&tmp.path().join("stepwise"));
    let mut budget = 5_000u64;
    let first = replay(
        &baton,
        &project,
        &demo_trace(),
        &["--budget-tokens", &budget.to_string()],
    );
    assert_eq!(first.code, 12, "{}\n{}", first.stderr, first.stdout);
    let id = first.json()["runId"].as_str().unwrap().to_string();
    let mut stops = 1;
    loop {
        budget += 5_000;
        let next = baton.run(&[
            "resume",
            &id,
            "--budget-tokens",
            &budget.to_string(),
            "--json",
        ]);
        match next.code {
            12 => stops += 1,
            0 => break,
            other => panic!("resume exited {other}: {}\n{}", next.stderr, next.stdout),
        }
        assert!(budget < 100_000, "the replay never completed");
    }
    assert!(stops >= 4, "only {stops} stops");
    assert_eq!(shown_usage(&baton, &id), expected);
    assert_eq!(artifacts(&project), artifacts(&whole));
    assert_eq!(failed_tools(&baton, &id), Vec::<String>::new());
}

/// The demo trace with `edit` applied to its dialogues, written under `dir`.
fn edited_trace(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<Value>)) -> PathBuf {
    let mut trace: Value = serde_json::from_slice(&std::fs::read(demo_trace()).unwrap()).unwrap();
    edit(trace["dialogues"].as_array_mut().unwrap());
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(&trace).unwrap()).unwrap();
    path
}

#[test]
fn a_replay_that_leaves_its_recording_says_replay_mismatch_and_hints_a_model() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    // The answer of step 2 is missing: step 3's would be served at step 2.
    let trace = edited_trace(tmp.path(), "gap.trace.json", |d| {
        d.retain(|e| e["id"] != "C04");
    });
    let project = sample_project(tmp.path());
    let run = replay(&baton, &project, &trace, &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stderr, run.stdout);
    let v = run.json();
    assert_eq!(v["error"]["code"], "REPLAY_MISMATCH", "{v}");
    let message = v["error"]["message"].as_str().unwrap();
    for part in [
        "C05",
        "node step-02-discover-inputs",
        "node step-03-extract-context",
    ] {
        assert!(message.contains(part), "{part} missing: {message}");
    }
    assert!(
        !project.join("artifacts/create-story/context.md").exists(),
        "step 3's answer was not acted on at step 2"
    );

    // In text, the hint goes on with a real model, not with the same trace.
    let id = v["runId"].as_str().unwrap();
    let again = baton.run(&["resume", id]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(
        again.stderr.contains("error[REPLAY_MISMATCH]"),
        "{}",
        again.stderr
    );
    assert!(
        again
            .stderr
            .contains(&format!("baton resume {}", &id[..13]))
            && again.stderr.contains("--model"),
        "{}",
        again.stderr
    );
    assert!(!again.stderr.contains("retry with"), "{}", again.stderr);
}

/// `baton new hello`, then a step added between the note and the end as docs/packages.md
/// says: a node, the edges, the previous step's transition and completion text.
fn hello_with_a_review_step(baton: &Baton, dir: &Path) -> PathBuf {
    let made = baton.run_in(dir, &["new", "hello"]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let pkg = dir.join("hello");
    let graph_path = pkg.join("workflow.graph.json");
    let mut graph: Value = serde_json::from_slice(&std::fs::read(&graph_path).unwrap()).unwrap();
    graph["nodes"].as_array_mut().unwrap().insert(
        2,
        json!({"id": "step-03-review", "type": "step", "file": "steps/step-03-review.md",
               "title": "Review the note", "agentId": "guide"}),
    );
    let edges = graph["edges"].as_array_mut().unwrap();
    edges.retain(|e| e["from"] != "step-02-write-note");
    edges.push(json!({"from": "step-02-write-note", "to": "step-03-review", "label": "next"}));
    edges.push(json!({"from": "step-03-review", "to": "end-99", "label": "next"}));
    std::fs::write(&graph_path, serde_json::to_vec_pretty(&graph).unwrap()).unwrap();
    let step_2 = pkg.join("steps/step-02-write-note.md");
    let text = std::fs::read_to_string(&step_2).unwrap();
    let edited = text
        .replace("to: \"end-99\"", "to: \"step-03-review\"")
        .replace(
            "`currentNodeId`\nto `end-99`",
            "`currentNodeId`\nto `step-03-review`",
        );
    assert_ne!(edited, text);
    std::fs::write(&step_2, edited).unwrap();
    std::fs::write(
        pkg.join("steps/step-03-review.md"),
        "---\nschemaVersion: \"1.1\"\nnodeId: \"step-03-review\"\ntype: \"step\"\n\
         title: \"Review the note\"\nagentId: \"guide\"\ntransitions:\n  - to: \"end-99\"\n    \
         label: \"next\"\n    isDefault: true\n---\n\n# Review the note\n\n## Goal\n\n\
         The note reads well.\n\n## Instructions\n\n1. Read `@project/artifacts/hello/note.md` \
         and fix what reads badly.\n\n## Completion\n\nAppend `step-03-review` to \
         `stepsCompleted`, set `currentNodeId` to `end-99`.\n",
    )
    .unwrap();
    let valid = baton.run_in(dir, &["validate", "hello"]);
    assert_eq!(valid.code, 0, "{}{}", valid.stdout, valid.stderr);
    assert!(valid.stdout.contains("(4 nodes)"), "{}", valid.stdout);
    pkg
}

#[test]
fn an_edited_workflow_replayed_with_its_first_trace_says_where_they_disagree() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let pkg = hello_with_a_review_step(&baton, tmp.path());
    std::fs::create_dir(tmp.path().join("hp")).unwrap();
    let args = [
        "run",
        "hello",
        "--project",
        "hp",
        "--replay",
        "hello/first-run.trace.json",
    ];
    let run = baton.run_in(tmp.path(), &args);
    assert_eq!(run.code, 1, "{}\n{}", run.stderr, run.stdout);
    assert!(
        !run.stdout.contains("waiting for you"),
        "the closing sentence is not a question: {}",
        run.stdout
    );
    let err = &run.stderr;
    assert!(err.contains("error[REPLAY_MISMATCH]"), "{err}");
    for part in [
        "C05",
        "node step-02-write-note",
        "node end-99",
        "the trace and the workflow disagree",
    ] {
        assert!(err.contains(part), "{part} missing: {err}");
    }
    assert!(err.contains("--model"), "{err}");
    assert!(!err.contains("REPLAY_EXHAUSTED"), "{err}");

    // The package as `baton new` wrote it still replays to the end.
    let fresh = tempfile::tempdir().unwrap();
    assert_eq!(baton.run_in(fresh.path(), &["new", "hello"]).code, 0);
    std::fs::create_dir(fresh.path().join("hp")).unwrap();
    let ok = baton.run_in(fresh.path(), &args);
    assert_eq!(ok.code, 0, "{}\n{}", ok.stderr, ok.stdout);
    assert!(pkg.exists());
}

/// The cost of the demo trace's recorded usage at `price`.
fn recorded_cost(price: Price) -> f64 {
    Trace::load(&demo_trace())
        .unwrap()
        .dialogues()
        .filter_map(|d| d.raw.pointer("/response/usage").cloned())
        .map(|u| price.cost(&serde_json::from_value::<Usage>(u).unwrap()))
        .sum()
}

fn cost_of(run: &Run) -> f64 {
    let v = run.json();
    v["runUsage"]["costUsd"]
        .as_f64()
        .unwrap_or_else(|| panic!("no costUsd: {}", v["runUsage"]))
}

#[test]
fn a_usd_budget_prices_a_replay_under_the_entry_the_hint_names() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    let refused = replay(&baton, &project, &demo_trace(), &["--budget-usd", "1"]);
    assert_eq!(refused.code, 2, "{}\n{}", refused.stderr, refused.stdout);
    let hint = refused.json()["error"]["hint"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(hint.contains("[models.\"replay\"] price"), "{hint}");

    // The price the hint asks for, in the project's baton.toml, is the one used.
    std::fs::write(
        project.join("baton.toml"),
        "[models.\"replay\"]\nprice = { input = 2.0, cached_input = 0.5, output = 8.0 }\n",
    )
    .unwrap();
    let priced = replay(&baton, &project, &demo_trace(), &["--budget-usd", "1"]);
    assert_eq!(priced.code, 0, "{}\n{}", priced.stderr, priced.stdout);
    let expected = recorded_cost(Price::new(2.0, 0.5, 8.0));
    assert!((cost_of(&priced) - expected).abs() < 1e-9, "{expected}");

    // A budget the recorded calls cannot fit in stops the replay as it would the model.
    let small = replay(&baton, &project, &demo_trace(), &["--budget-usd", "0.02"]);
    assert_eq!(small.code, 12, "{}\n{}", small.stderr, small.stdout);
}

#[test]
fn a_replay_is_priced_as_the_model_its_trace_recorded() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let name_model = |model: &'static str| {
        move |d: &mut Vec<Value>| {
            for e in d.iter_mut().filter(|e| e.get("type").is_none()) {
                e["model"] = json!(model);
            }
        }
    };
    // A model of the built-in table needs no configuration.
    let known = edited_trace(tmp.path(), "gpt.trace.json", name_model("gpt-4.1"));
    let project = sample_project(&tmp.path().join("a"));
    let run = replay(&baton, &project, &known, &["--budget-usd", "1"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stderr, run.stdout);
    let expected = recorded_cost(baton_llm::price::built_in_price("gpt-4.1").unwrap());
    assert!((cost_of(&run) - expected).abs() < 1e-9, "{expected}");

    // Another model is priced under its own name, which the hint gives.
    let local = edited_trace(tmp.path(), "local.trace.json", name_model("my-local"));
    let project = sample_project(&tmp.path().join("b"));
    let refused = replay(&baton, &project, &local, &["--budget-usd", "1"]);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    let v = refused.json();
    assert_eq!(v["error"]["code"], "BUDGET_PRICE_UNKNOWN");
    let hint = v["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("[models.\"my-local\"] price"), "{hint}");
    std::fs::write(
        project.join("baton.toml"),
        "[models.\"my-local\"]\nprice = { input = 1.0, output = 2.0 }\n",
    )
    .unwrap();
    let run = replay(&baton, &project, &local, &["--budget-usd", "1"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stderr, run.stdout);
    let expected = recorded_cost(Price {
        input: 1.0,
        cached_input: None,
        output: 2.0,
        cache_write: None,
    });
    assert!((cost_of(&run) - expected).abs() < 1e-9, "{expected}");
}

/// The demo's answers served over HTTP by a played caching provider.
fn played() -> JsonServer {
    let trace = Trace::load(&demo_trace()).unwrap();
    let answers = Arc::new(Mutex::new(VecDeque::from(trace_answers(&trace))));
    let provider = Arc::new(CachingProvider::new());
    JsonServer::start(Arc::new(move |body: &Value| {
        match answers.lock().unwrap().pop_front() {
            Some(a) => provider.answer(body, a),
            None => json!({"error": {"message": "no answer left"}}),
        }
    }))
}

#[test]
fn a_recorded_run_names_its_model_and_nodes_and_replays_at_that_price() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let server = played();
    let recorded = tmp.path().join("recorded.trace.json");
    let project = sample_project(&tmp.path().join("live"));
    let pkg = example("create-story-micro");
    let live = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--base-url",
        &server.base_url(),
        "--model",
        "played-model",
        "--input",
        STORY,
        "--record",
        recorded.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(live.code, 0, "{}\n{}", live.stderr, live.stdout);
    let trace: Value = serde_json::from_slice(&std::fs::read(&recorded).unwrap()).unwrap();
    let calls: Vec<&Value> = trace["dialogues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d.get("type").is_none())
        .collect();
    assert_eq!(calls.len(), 10);
    assert!(
        calls.iter().all(|d| d["model"] == "played-model"),
        "{trace}"
    );
    assert_eq!(calls[0]["nodeId"], "step-01-select-story");
    assert_eq!(calls[9]["nodeId"], "end-99");

    let replayed_project = sample_project(&tmp.path().join("replayed"));
    std::fs::write(
        replayed_project.join("baton.toml"),
        "[models.\"played-model\"]\nprice = { input = 2.0, cached_input = 0.5, output = 8.0 }\n",
    )
    .unwrap();
    let run = replay(&baton, &replayed_project, &recorded, &["--budget-usd", "1"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stderr, run.stdout);
    let live_usage = &live.json()["runUsage"];
    let replayed_usage = &run.json()["runUsage"];
    for field in [
        "promptTokens",
        "cachedPromptTokens",
        "completionTokens",
        "modelCalls",
    ] {
        assert_eq!(live_usage[field], replayed_usage[field], "{field}");
    }
    assert!(replayed_usage["costUsd"].as_f64().unwrap() > 0.0);
    assert_eq!(artifacts(&replayed_project), artifacts(&project));
}
