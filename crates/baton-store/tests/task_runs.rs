//! Task runs in the store: created like workflow runs but without a state file, listed,
//! updated and rebuilt from their run.json as task runs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_store::{NewTaskRun, Phase, RunKind, Store};
use serde_json::json;
use std::fs;

fn project() -> (tempfile::TempDir, baton_store::Project) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    fs::create_dir_all(&root).unwrap();
    let store = Store::new(tmp.path().join("home"));
    let project = store.project(&root).unwrap();
    (tmp, project)
}

const NEW: NewTaskRun<'static> = NewTaskRun {
    task_ref: "session-1/step-3-execute",
    agent_id: "session",
};

#[test]
fn a_task_run_has_its_directory_without_a_state_file() {
    let (_tmp, p) = project();
    let run = p.create_task_run(NEW).unwrap();
    assert_eq!(run.kind, RunKind::Task);
    assert_eq!(run.phase, Phase::Idle);
    assert_eq!(run.workflow_ref, "session-1/step-3-execute");
    assert_eq!(run.current_node_id, None);
    let paths = p.run_paths(&run.run_id);
    assert!(paths.state_dir.is_dir());
    assert!(!paths.state_file.exists());
    assert_eq!(fs::read(&paths.execution_log).unwrap(), b"");
    let on_disk: serde_json::Value =
        serde_json::from_slice(&fs::read(paths.metadata_file()).unwrap()).unwrap();
    assert_eq!(on_disk["kind"], "task");
    assert!(
        !p.root().join("artifacts").exists(),
        "no artifacts dir is made"
    );
}

#[test]
fn task_runs_are_listed_updated_and_rebuilt_as_task_runs() {
    let (_tmp, p) = project();
    let run = p.create_task_run(NEW).unwrap();
    let listed = p.runs(None).unwrap().runs;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0], run);
    p.set_phase(
        &run.run_id,
        Phase::WaitingUser,
        Some(json!({"question": "which file?"})),
    )
    .unwrap();
    let (report, _) = p.reindex().unwrap();
    assert_eq!(report.from_run_json, 1);
    let again = p.get_run(&run.run_id).unwrap();
    assert_eq!(again.kind, RunKind::Task);
    assert_eq!(again.phase, Phase::WaitingUser);
}

#[test]
fn bad_names_are_refused_and_nothing_is_created() {
    let (_tmp, p) = project();
    let long = "x".repeat(201);
    for (task_ref, agent_id) in [
        ("", "session"),
        ("  ", "session"),
        ("step\n2", "session"),
        (long.as_str(), "session"),
        ("step-1", ""),
    ] {
        let err = p
            .create_task_run(NewTaskRun { task_ref, agent_id })
            .unwrap_err();
        assert_eq!(err.code(), "TASK_RUN_INVALID", "{err}");
    }
    assert!(p.runs(None).unwrap().runs.is_empty());
}

#[test]
fn a_task_run_can_start_with_its_conversation_log() {
    let (_tmp, p) = project();
    let first = b"{\"kind\":\"messages\",\"reset\":false,\"messages\":[]}\n";
    let run = p.create_task_run_with_log(NEW, first).unwrap();
    let paths = p.run_paths(&run.run_id);
    assert_eq!(fs::read(&paths.conversation_log).unwrap(), first);
    assert_eq!(p.get_run(&run.run_id).unwrap().kind, RunKind::Task);
    // Without one, there is no log until the engine writes it.
    let bare = p.create_task_run(NEW).unwrap();
    assert!(!p.run_paths(&bare.run_id).conversation_log.exists());
}

#[test]
fn a_change_written_for_a_kill_is_seen_at_once_and_waits_for_no_flush() {
    use baton_store::Durability;
    use baton_store::durable::flushes_on_this_thread;
    let (_tmp, p) = project();
    let run = p.create_task_run(NEW).unwrap();
    let log = p.run_paths(&run.run_id).conversation_log;
    fs::write(&log, b"{}\n").unwrap();
    let before = flushes_on_this_thread();
    p.update_run_with(&run.run_id, Durability::Kill, |r| r.phase = Phase::Running)
        .unwrap();
    assert_eq!(
        flushes_on_this_thread(),
        before,
        "no fsync for a kill-safe change"
    );
    // What a process started after a kill reads: run.json and the index agree.
    assert_eq!(p.get_run(&run.run_id).unwrap().phase, Phase::Running);
    assert_eq!(p.runs(None).unwrap().runs[0].phase, Phase::Running);
    // A durable change with a log to keep: the temp file and the log in one flush, the
    // rename, the index record.
    let before = flushes_on_this_thread();
    p.update_run_with(&run.run_id, Durability::PowerCut(&[&log]), |r| {
        r.phase = Phase::Completed
    })
    .unwrap();
    assert_eq!(flushes_on_this_thread() - before, 3);
    assert_eq!(p.runs(None).unwrap().runs[0].phase, Phase::Completed);
    // A change of nothing still makes the caller's log durable.
    let before = flushes_on_this_thread();
    p.update_run_with(&run.run_id, Durability::PowerCut(&[&log]), |r| {
        r.phase = Phase::Completed
    })
    .unwrap();
    assert_eq!(flushes_on_this_thread() - before, 1);
    // No temp file is left in the run directory.
    let leftovers: Vec<_> = fs::read_dir(p.run_paths(&run.run_id).dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
