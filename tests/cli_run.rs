//! `baton demo`, `baton run` and `baton answer` end to end, offline.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_testkit::demo_trace;
use baton_testkit::{sample_project, seed_000};
use common::{Baton, example, trace_until_question, walk};
use serde_json::Value;
use std::fs;
use std::path::Path;

const SIX_ARTIFACTS: [&str; 6] = [
    "artifacts/create-story/target.md",
    "artifacts/create-story/inputs.md",
    "artifacts/create-story/context.md",
    "artifacts/stories/1-2-user-authentication.md",
    "artifacts/create-story/sprint-status-update.md",
    "artifacts/create-story/summary.md",
];

#[test]
fn demo_runs_offline_and_leaves_the_artifacts() {
    let baton = Baton::new();
    let cwd = tempfile::tempdir().unwrap();
    let run = baton.run_in(cwd.path(), &["demo", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let v = run.json();
    assert_eq!(v["phase"], "completed");
    assert_eq!(v["modelCalls"], 10);
    assert_eq!(v["toolCalls"], 38);
    assert_eq!(v["artifacts"], serde_json::json!(SIX_ARTIFACTS));
    for a in SIX_ARTIFACTS {
        assert!(cwd.path().join("baton-demo").join(a).is_file(), "{a}");
    }
    let story = fs::read_to_string(
        cwd.path()
            .join("baton-demo/artifacts/stories/1-2-user-authentication.md"),
    )
    .unwrap();
    assert!(story.starts_with("# Story 1.2: user-authentication\n"));
    // A second demo replaces what the first wrote, and only that: files a person added, even
    // beside the demo's own artifacts, survive.
    let demo = cwd.path().join("baton-demo");
    fs::write(demo.join("notes.md"), "mine").unwrap();
    // A marker that lies (paths out of the directory) deletes nothing outside it.
    let outside = cwd.path().join("outside.txt");
    fs::write(&outside, "keep").unwrap();
    let mut marker = fs::read_to_string(demo.join(".baton-demo")).unwrap();
    marker.push_str(&format!("../outside.txt\n{}\n", outside.display()));
    fs::write(demo.join(".baton-demo"), marker).unwrap();
    fs::write(demo.join("artifacts/stories/mine.md"), "mine").unwrap();
    assert_eq!(baton.run_in(cwd.path(), &["demo", "--json"]).code, 0);
    assert_eq!(fs::read_to_string(demo.join("notes.md")).unwrap(), "mine");
    assert_eq!(fs::read_to_string(&outside).unwrap(), "keep");
    assert!(demo.join("artifacts/stories/mine.md").is_file());
    assert!(demo.join(SIX_ARTIFACTS[3]).is_file());
    // A foreign directory is left alone, and a script asking for JSON gets a JSON error.
    fs::create_dir_all(cwd.path().join("mine")).unwrap();
    fs::write(cwd.path().join("mine/keep.txt"), "x").unwrap();
    let refused = baton.run_in(cwd.path(), &["demo", "--dir", "mine"]);
    assert_eq!(refused.code, 2);
    assert!(
        refused.stderr.contains("error[DEMO_DIR_IN_USE]"),
        "{}",
        refused.stderr
    );
    let refused = baton.run_in(cwd.path(), &["demo", "--dir", "mine", "--json"]);
    assert_eq!(refused.code, 2);
    assert_eq!(refused.json()["error"]["code"], "DEMO_DIR_IN_USE");
    assert!(cwd.path().join("mine/keep.txt").exists());
}

#[test]
fn the_reference_trace_replays_through_the_cli() {
    let Some(seed) = seed_000() else { return };
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    let pkg = example("create-story-micro");
    let run = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--replay",
        seed.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(v["modelCalls"], 10);
    assert_eq!(v["toolCalls"], 38);
    assert_eq!(v["stepsCompleted"].as_array().unwrap().len(), 6);
    assert_eq!(v["artifacts"], serde_json::json!(SIX_ARTIFACTS));
    for a in SIX_ARTIFACTS {
        assert!(project.join(a).is_file(), "{a}");
    }
    let id = v["runId"].as_str().unwrap();
    let log = baton.run(&["runs", "log", id, "--json"]);
    assert_eq!(
        log.stdout
            .lines()
            .filter(|l| l.contains("\"tool.exec\""))
            .count(),
        38
    );
    let kinds: Vec<String> = log
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds.iter().filter(|k| *k == "engine.turn").count(), 10);
    assert_eq!(kinds.first().map(String::as_str), Some("engine.start"));
    assert_eq!(kinds.last().map(String::as_str), Some("engine.completed"));
}

#[test]
fn a_run_waits_for_an_answer_and_continues_with_baton_answer() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    // Split the demo trace at the question: the first part without the recorded answer...
    let trace: Value = serde_json::from_str(&fs::read_to_string(demo_trace()).unwrap()).unwrap();
    let dialogues = trace["dialogues"].as_array().unwrap();
    let mut first = trace.clone();
    first["dialogues"] = Value::Array(dialogues[..2].to_vec());
    let mut rest = trace.clone();
    rest["dialogues"] = Value::Array(dialogues[3..].to_vec());
    let (first_path, rest_path) = (tmp.path().join("first.json"), tmp.path().join("rest.json"));
    fs::write(&first_path, first.to_string()).unwrap();
    fs::write(&rest_path, rest.to_string()).unwrap();

    let pkg = example("create-story-micro");
    let run = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--replay",
        first_path.to_str().unwrap(),
        "--non-interactive",
        "--json",
    ]);
    assert_eq!(run.code, 10, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(v["phase"], "waiting-user");
    assert!(
        v["waitingFor"]["question"]
            .as_str()
            .unwrap()
            .contains("Which story")
    );
    assert_eq!(v["waitingFor"]["nodeId"], "step-01-select-story");
    let id = v["runId"].as_str().unwrap().to_string();

    // ...then the answer, replayed from the rest of the trace.
    let answered = baton.run(&[
        "answer",
        &id[..13],
        "1-2-user-authentication",
        "--replay",
        rest_path.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(answered.code, 0, "{}{}", answered.stdout, answered.stderr);
    let v = answered.json();
    assert_eq!(v["phase"], "completed");
    assert_eq!(v["artifacts"], serde_json::json!(SIX_ARTIFACTS));
    let shown = baton.run(&["runs", "show", &id, "--json"]).json();
    assert_eq!(shown["complete"], true);
}

#[test]
fn run_without_a_model_explains_how_to_get_one() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    let pkg = example("create-story-micro");
    let run = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--non-interactive",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("LLM_CONFIG_INVALID"), "{}", run.stderr);
    assert!(run.stderr.contains("--replay"));
}

#[test]
fn a_recorded_run_replays_to_the_same_result() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let pkg = example("create-story-micro");
    let recorded = tmp.path().join("recorded.trace.json");
    let first_project = sample_project(&tmp.path().join("a"));
    let first = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        first_project.to_str().unwrap(),
        "--replay",
        demo_trace().to_str().unwrap(),
        "--record",
        recorded.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let text = fs::read_to_string(&recorded).unwrap();
    let trace: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(trace["traceVersion"], "crewagent.runtime.llm.trace.v1");
    let dialogues = trace["dialogues"].as_array().unwrap();
    assert_eq!(
        dialogues
            .iter()
            .filter(|d| d.get("request").is_some())
            .count(),
        10
    );
    assert_eq!(
        dialogues
            .iter()
            .filter(|d| d["type"] == "user_input")
            .count(),
        1
    );
    assert!(
        dialogues[0]["request"]["messages"]
            .as_array()
            .unwrap()
            .len()
            >= 5,
        "the composed request is recorded"
    );
    assert_eq!(
        dialogues[0]["runtime"]["toolRuns"]
            .as_array()
            .unwrap()
            .len(),
        5
    );

    let second_project = sample_project(&tmp.path().join("b"));
    let second = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        second_project.to_str().unwrap(),
        "--replay",
        recorded.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let (a, b) = (first.json(), second.json());
    for key in [
        "phase",
        "stepsCompleted",
        "artifacts",
        "modelCalls",
        "toolCalls",
    ] {
        assert_eq!(a[key], b[key], "{key}");
    }
    for artifact in SIX_ARTIFACTS {
        assert_eq!(
            fs::read(first_project.join(artifact)).unwrap(),
            fs::read(second_project.join(artifact)).unwrap(),
            "{artifact}"
        );
    }
}

/// `resume`, `answer` and `chat` check the run before any model is configured (these runs have
/// none): an unknown run, a finished one, one that waits for no answer, one whose state names a
/// node outside the graph. Each refusal has its code, in text and in JSON.
#[test]
fn continuations_are_checked_before_any_model_is_configured() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let pkg = example("create-story-micro");
    let refused = |args: &[&str], code: &str, exit: i32| {
        let text = baton.run(args);
        assert_eq!(text.code, exit, "{args:?}: {}", text.stderr);
        assert!(
            text.stderr.contains(&format!("error[{code}]")),
            "{args:?}: {}",
            text.stderr
        );
        assert!(
            !text.stderr.contains("LLM_CONFIG_INVALID"),
            "{}",
            text.stderr
        );
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let json = baton.run(&with_json);
        assert_eq!(json.code, exit, "{with_json:?}");
        assert_eq!(json.json()["error"]["code"], code, "{}", json.stdout);
    };
    refused(&["resume", "no-such-run"], "RUN_NOT_FOUND", 2);

    // --record into a missing directory is refused before the run is created.
    let project = sample_project(&tmp.path().join("a"));
    let record = tmp.path().join("missing/dir/trace.json");
    refused(
        &[
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--replay",
            demo_trace().to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
        ],
        "RECORD_PATH_INVALID",
        2,
    );
    assert_eq!(
        baton.run(&["runs", "list", "--json"]).json(),
        serde_json::json!([])
    );

    let done = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--replay",
        demo_trace().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(done.code, 0, "{}", done.stderr);
    let done = done.json()["runId"].as_str().unwrap().to_string();
    refused(&["answer", &done, "yes"], "RUN_NOT_WAITING", 2);
    refused(&["resume", &done], "RUN_COMPLETE", 2);

    let project = sample_project(&tmp.path().join("b"));
    let waiting = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--replay",
        trace_until_question(tmp.path()).to_str().unwrap(),
        "--non-interactive",
        "--json",
    ]);
    assert_eq!(waiting.code, 10, "{}", waiting.stderr);
    let waiting = waiting.json()["runId"].as_str().unwrap().to_string();
    refused(&["chat", &waiting, "hello"], "RUN_NOT_COMPLETE", 2);

    // A state changed behind baton's back to a node the graph does not have.
    let state_path = walk(baton.home.path())
        .into_iter()
        .find(|p| p.ends_with(format!("{waiting}/state/workflow.md")))
        .unwrap();
    let state = fs::read_to_string(&state_path).unwrap();
    let forged = state.replacen(
        "currentNodeId: step-01-select-story",
        "currentNodeId: ghost",
        1,
    );
    let forged = if forged == state {
        state.replacen("currentNodeId: \"\"", "currentNodeId: ghost", 1)
    } else {
        forged
    };
    assert_ne!(forged, state, "{state}");
    fs::write(&state_path, forged).unwrap();
    refused(&["answer", &waiting, "1-2"], "STATE_INVALID", 1);
    let text = baton.run(&["answer", &waiting, "1-2"]);
    assert!(text.stderr.contains("ghost"), "{}", text.stderr);
}

/// `baton` in `cwd` with exactly these store variables (the others removed).
fn baton_with_store(project: &Path, store_env: &[(&str, &Path)], args: &[&str]) -> (i32, Value) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(args)
        .arg("--project")
        .arg(project)
        .arg("--json")
        .current_dir(project)
        .env_remove("BATON_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("OPENAI_API_KEY")
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL");
    for (k, v) in store_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: stdout is not JSON ({e}): {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), json)
}

/// The store and the project never overlap (the model would reach its own run's state through
/// `@project`, or the store): every command that pairs them refuses before any work, both ways.
#[test]
fn the_store_and_the_project_never_overlap() {
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    let pkg = example("create-story-micro");
    let pkg = pkg.to_str().unwrap();
    let commands: [&[&str]; 5] = [
        &["run", pkg],
        &["epic", "run", "epic-1", "--dry-run"],
        &["session", "continue"],
        &["ralph", "check"],
        &["agent", pkg, "--input", "hello"],
    ];
    let inside = project.join(".baton-store");
    // `--project ~` with the default store under ~/.local/share.
    let home = tmp.path().join("home");
    fs::create_dir_all(&home).unwrap();
    let store = tmp.path().join("store");
    let in_store = store.join("projects/p");
    fs::create_dir_all(&in_store).unwrap();
    type Case<'a> = (&'a str, Vec<(&'a str, &'a Path)>, &'a Path);
    let cases: [Case; 3] = [
        (
            "store inside the project",
            vec![("BATON_HOME", &inside)],
            &project,
        ),
        (
            "project holding the default store",
            vec![("HOME", &home)],
            &home,
        ),
        (
            "project inside the store",
            vec![("BATON_HOME", &store)],
            &in_store,
        ),
    ];
    for (what, env, project) in &cases {
        for args in commands {
            let (code, v) = baton_with_store(project, env, args);
            let error = &v["error"];
            assert_eq!(
                error["code"], "STORE_PROJECT_OVERLAP",
                "{what}: {args:?}: {v}"
            );
            assert_ne!(code, 0, "{what}: {args:?}");
            // The way out is named (ralph keeps maestro's error shape: it is in the message).
            assert!(
                format!("{}{}", error["message"], error["hint"]).contains("BATON_HOME"),
                "{what}: {args:?}: {v}"
            );
        }
    }
    assert!(
        !inside.exists(),
        "nothing of the store was made in the project"
    );
    assert!(
        !home.join(".local").exists(),
        "nothing of the store was made in the project"
    );
}
