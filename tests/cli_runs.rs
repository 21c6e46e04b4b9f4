//! `baton runs list|show|log` over runs created through the store.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_package::Package;
use baton_store::jsonl::JsonlWriter;
use baton_store::{GuardOptions, NewRun, NewTaskRun, Phase, Store};
use common::{Baton, example};
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Setup {
    baton: Baton,
    project: tempfile::TempDir,
    runs: Vec<String>,
}

fn setup(count: usize) -> Setup {
    let baton = Baton::new();
    let project = tempfile::tempdir().unwrap();
    let store = Store::new(baton.home.path());
    let package = Package::load(&example("create-story-micro")).unwrap();
    let installed = store.packages().install(&package, "test").unwrap().package;
    let p = store.project(project.path()).unwrap();
    let runs = (0..count)
        .map(|_| {
            let run = p
                .create_run(NewRun {
                    package: &package,
                    installed: &installed,
                    workflow_ref: None,
                    agent_id: "sm",
                })
                .unwrap();
            // uuid v7 orders by millisecond; keep creation times distinct.
            std::thread::sleep(Duration::from_millis(2));
            run.run_id
        })
        .collect();
    Setup {
        baton,
        project,
        runs,
    }
}

#[test]
fn list_is_newest_first_in_text_and_json() {
    let s = setup(3);
    let all = s.baton.run(&["runs", "list", "--json"]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    let ids: Vec<String> = all
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runId"].as_str().unwrap().to_string())
        .collect();
    let mut newest_first = s.runs.clone();
    newest_first.reverse();
    assert_eq!(ids, newest_first);
    let first = &all.json()[0];
    for key in [
        "runId",
        "projectId",
        "packageId",
        "packageSha256",
        "workflowRef",
        "activeAgentId",
        "phase",
        "createdAt",
        "lastUpdatedAt",
    ] {
        assert!(first.get(key).is_some(), "{key} missing");
    }
    let one = s.baton.run(&[
        "runs",
        "list",
        "--project",
        s.project.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(one.json().as_array().unwrap().len(), 3);
    let text = s.baton.run(&["runs", "list"]);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert!(lines[0].starts_with("RUN") && lines[0].contains("PHASE") && lines[0].contains("AGE"));
    assert_eq!(lines.len(), 4);
    assert!(lines[1].starts_with(&newest_first[0][..13]));
    assert!(
        lines[1].contains("idle")
            && lines[1].contains("create-story-micro")
            && lines[1].contains("step-01-select-story")
    );
}

#[test]
fn show_reports_progress_per_node() {
    let s = setup(2);
    let store = Store::new(s.baton.home.path());
    let (project, run) = store.find_run(&s.runs[0]).unwrap();
    let package = project.pinned_package(&store, &run).unwrap().0;
    let graph = &package.workflows()[0].graph;
    project
        .state_file(&run.run_id)
        .patch(graph, &json!({"stepsCompleted": {"append": ["step-01-select-story"]}, "currentNodeId": {"set": "step-02-discover-inputs"}, "artifacts": {"append": ["artifacts/create-story/target.md"]}}), None, GuardOptions::default())
        .unwrap();
    project
        .set_phase(
            &run.run_id,
            Phase::WaitingUser,
            Some(json!({"question": "Which story?"})),
        )
        .unwrap();

    let shown = s.baton.run(&["runs", "show", &s.runs[0][..20], "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let v = shown.json();
    assert_eq!(v["run"]["phase"], "waiting-user");
    assert_eq!(v["state"]["currentNodeId"], "step-02-discover-inputs");
    let statuses: Vec<&str> = v["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "completed",
            "current",
            "pending",
            "pending",
            "pending",
            "pending"
        ]
    );
    assert_eq!(v["complete"], false);

    let text = s.baton.run(&["runs", "show", &s.runs[0]]);
    assert!(
        text.stdout.contains("[x] step-01-select-story"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("[>] step-02-discover-inputs"));
    assert!(text.stdout.contains("waiting   Which story?"));
    assert!(text.stdout.contains("artifacts/create-story/target.md"));
}

#[test]
fn unknown_and_ambiguous_ids_exit_two() {
    let s = setup(2);
    let missing = s.baton.run(&["runs", "show", "ffffffff"]);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("RUN_NOT_FOUND"));
    // Both ids start with the same time prefix.
    let ambiguous = s.baton.run(&["runs", "show", &s.runs[0][..4]]);
    assert_eq!(ambiguous.code, 2);
    assert!(
        ambiguous.stderr.contains("RUN_ID_AMBIGUOUS"),
        "{}",
        ambiguous.stderr
    );
}

#[test]
fn log_prints_pretty_or_raw_and_follows() {
    let s = setup(1);
    let store = Store::new(s.baton.home.path());
    let (project, run) = store.find_run(&s.runs[0]).unwrap();
    let log_path = project.run_paths(&run.run_id).execution_log;
    let mut log = JsonlWriter::open(&log_path).unwrap();
    log.append(&json!({"ts": "2026-11-22T10:00:01Z", "kind": "tool.exec", "toolName": "fs.read", "nodeId": "step-01-select-story",
                       "input": {"path": "@project/artifacts/sprint-status.yaml"},
                       "output": {"ok": false, "error": {"code": "ENOENT"}}, "durationMs": 1}), true).unwrap();
    let pretty = s.baton.run(&["runs", "log", &s.runs[0]]);
    assert_eq!(pretty.code, 0);
    assert_eq!(
        pretty.stdout.trim(),
        "10:00:01  tool.exec    fs.read         @project/artifacts/sprint-status.yaml  ENOENT  1ms  [step-01-select-story]"
    );
    let raw = s.baton.run(&["runs", "log", &s.runs[0], "--json"]);
    let line: serde_json::Value = serde_json::from_str(raw.stdout.trim()).unwrap();
    assert_eq!(line["toolName"], "fs.read");

    // --follow keeps going while a process drives the run.
    let driver =
        baton_store::driver_lock::acquire(&project.run_paths(&run.run_id).dir, &run.run_id, "test")
            .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["runs", "log", &s.runs[0], "--follow", "--json"])
        .env("BATON_HOME", s.baton.home.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The follower has printed the line already there: it is following now (no guessed
    // delay), and what is appended next reaches it through the follow.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
    assert!(first.contains("tool.exec"), "{first}");
    log.append(
        &json!({"ts": "2026-11-22T10:00:02Z", "kind": "engine.completed"}),
        true,
    )
    .unwrap();
    project
        .set_phase(&run.run_id, Phase::Completed, None)
        .unwrap();
    drop(driver);
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success());
            break;
        }
        // Generous for a loaded machine: it stops within its poll once the run completed.
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "--follow did not stop after completion"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let rest = std::io::read_to_string(stdout).unwrap();
    let out = format!("{first}{rest}");
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.lines().nth(1).unwrap().contains("engine.completed"));
}

/// `count` runs in another project of the same store.
fn another_project(baton: &Baton, count: usize) -> (tempfile::TempDir, Vec<String>) {
    let project = tempfile::tempdir().unwrap();
    let store = Store::new(baton.home.path());
    let installed = store.packages().list().unwrap().remove(0);
    let package = Package::load(&installed.path).unwrap();
    let p = store.project(project.path()).unwrap();
    let runs = (0..count)
        .map(|_| {
            p.create_run(NewRun {
                package: &package,
                installed: &installed,
                workflow_ref: None,
                agent_id: "sm",
            })
            .unwrap()
            .run_id
        })
        .collect();
    (project, runs)
}

fn project_dir(s: &Setup) -> std::path::PathBuf {
    Store::new(s.baton.home.path())
        .project(s.project.path())
        .unwrap()
        .dir
}

#[test]
fn a_damaged_index_is_rebuilt_with_a_warning() {
    let s = setup(3);
    std::fs::write(project_dir(&s).join("runsIndex.json"), "[{\"runId\": ").unwrap();
    let listed = s.baton.run(&["runs", "list"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_eq!(listed.stdout.lines().count(), 4, "{}", listed.stdout);
    for id in &s.runs {
        assert!(listed.stdout.contains(&id[..13]));
    }
    assert!(
        listed
            .stderr
            .contains("warning[RUNS_INDEX_REBUILT]: the runs index of")
            && listed.stderr.contains("damaged"),
        "{}",
        listed.stderr
    );
    let again = s.baton.run(&["runs", "list"]);
    assert!(again.stderr.is_empty(), "rebuilt once: {}", again.stderr);
}

#[test]
fn a_damaged_project_never_hides_the_others() {
    let s = setup(2);
    let (other, other_runs) = another_project(&s.baton, 2);
    std::fs::write(project_dir(&s).join("project.json"), "{").unwrap();

    let listed = s.baton.run(&["runs", "list", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let ids: Vec<String> = listed
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(other_runs.iter().all(|id| ids.contains(id)));
    assert!(
        listed
            .stderr
            .contains("warning[PROJECT_RECORD_INVALID]: project.json of "),
        "{}",
        listed.stderr
    );
    let shown = s.baton.run(&["runs", "show", &other_runs[0]]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);

    let mine = s.baton.run(&[
        "runs",
        "list",
        "--project",
        s.project.path().to_str().unwrap(),
    ]);
    assert_eq!(mine.code, 2);
    assert!(
        mine.stderr
            .contains("error[PROJECT_RECORD_INVALID]: project.json of ")
            && mine.stderr.contains("is damaged"),
        "{}",
        mine.stderr
    );
    drop(other);
}

#[test]
fn reindex_reports_per_project() {
    let s = setup(3);
    let text = s.baton.run(&["runs", "reindex"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains(": 3 runs (3 from run.json, 0 from the old index, 0 from state files)"),
        "{}",
        text.stdout
    );
    std::fs::remove_file(project_dir(&s).join("runsIndex.json")).unwrap();
    let json = s.baton.run(&[
        "runs",
        "reindex",
        "--project",
        s.project.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let report = &json.json()[0];
    assert_eq!(report["runs"], 3);
    assert_eq!(report["fromRunJson"], 3);
    assert!(
        json.stderr.contains("RUNS_INDEX_REBUILT"),
        "{}",
        json.stderr
    );
    let listed = s.baton.run(&["runs", "list", "--json"]);
    assert_eq!(listed.json().as_array().unwrap().len(), 3);
}

#[test]
fn the_table_shows_the_newest_fifty_unless_told() {
    let s = setup(53);
    let table = s.baton.run(&["runs", "list"]);
    assert_eq!(table.stdout.lines().count(), 51);
    assert!(
        table
            .stdout
            .lines()
            .nth(1)
            .unwrap()
            .starts_with(&s.runs[52][..13])
    );
    assert!(
        table.stderr.contains("--all lists every run"),
        "{}",
        table.stderr
    );
    let all = s.baton.run(&["runs", "list", "--all"]);
    assert_eq!(all.stdout.lines().count(), 54);
    assert!(all.stderr.is_empty());
    let three = s.baton.run(&["runs", "list", "--limit", "3"]);
    assert_eq!(three.stdout.lines().count(), 4);
    let json = s.baton.run(&["runs", "list", "--json"]);
    assert_eq!(
        json.json().as_array().unwrap().len(),
        53,
        "JSON lists every run"
    );
    let json = s.baton.run(&["runs", "list", "--json", "-n", "5"]);
    assert_eq!(json.json().as_array().unwrap().len(), 5);
}

#[test]
fn a_task_run_is_listed_and_shown_with_its_kind() {
    let s = setup(1);
    let store = Store::new(s.baton.home.path());
    let task = store
        .project(s.project.path())
        .unwrap()
        .create_task_run(NewTaskRun {
            task_ref: "session-1/step-3-execute",
            agent_id: "session",
        })
        .unwrap();

    let listed = s.baton.run(&["runs", "list", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let runs = listed.json();
    assert_eq!(runs[0]["runId"], task.run_id.as_str());
    assert_eq!(runs[0]["kind"], "task");
    assert!(
        runs[1].get("kind").is_none(),
        "a workflow run has no kind key"
    );

    let text = s.baton.run(&["runs", "list"]);
    let lines: Vec<&str> = text.stdout.lines().collect();
    assert!(lines[0].contains("KIND"), "{}", text.stdout);
    assert!(
        lines[1].contains(" task ") && lines[1].contains("session-1/step-3-execute"),
        "{}",
        text.stdout
    );
    assert!(lines[2].contains(" workflow "), "{}", text.stdout);

    // Nothing but its session drives a task run: the workflow commands say so.
    let resumed = s.baton.run(&["resume", &task.run_id, "--json"]);
    assert_eq!(resumed.code, 2, "{}", resumed.stdout);
    assert_eq!(resumed.json()["error"]["code"], "RUN_KIND_UNSUPPORTED");

    let shown = s.baton.run(&["runs", "show", &task.run_id]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(shown.stdout.contains("kind      task"), "{}", shown.stdout);
    assert!(
        shown
            .stdout
            .contains("task      session-1/step-3-execute   agent session"),
        "{}",
        shown.stdout
    );
    assert!(
        !shown.stdout.contains("package") && !shown.stdout.contains("note:"),
        "{}",
        shown.stdout
    );
    let json = s.baton.run(&["runs", "show", &task.run_id, "--json"]);
    let v = json.json();
    assert_eq!(v["run"]["kind"], "task");
    assert_eq!(v["note"], serde_json::Value::Null);
    let shown = s.baton.run(&["runs", "show", &s.runs[0]]);
    assert!(
        shown.stdout.contains("kind      workflow"),
        "{}",
        shown.stdout
    );
}
