//! `baton new`: the starter package validates, runs to completion offline with its scripted
//! model, and never lands on something that is already there.

use crate::common;

use common::Baton;
use std::fs;

#[test]
fn a_new_package_validates_and_runs_offline_to_completion() {
    let baton = Baton::new();
    let work = tempfile::tempdir().unwrap();
    let created = baton.run_in(work.path(), &["new", "hello"]);
    assert_eq!(created.code, 0, "{}{}", created.stdout, created.stderr);
    // The printed next steps are the commands this test runs.
    assert!(
        created.stdout.contains("baton validate hello"),
        "{}",
        created.stdout
    );
    assert!(
        created.stdout.contains(
            "baton run hello --project hello-project --replay hello/first-run.trace.json"
        ),
        "{}",
        created.stdout
    );

    let valid = baton.run_in(work.path(), &["validate", "hello", "--json"]);
    assert_eq!(valid.code, 0, "{}{}", valid.stdout, valid.stderr);
    let report = valid.json();
    assert_eq!(report["ok"], true);
    assert_eq!(
        report["warnings"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
    assert_eq!(report["package"]["name"], "hello");

    fs::create_dir(work.path().join("hello-project")).unwrap();
    let run = baton.run_in(
        work.path(),
        &[
            "run",
            "hello",
            "--project",
            "hello-project",
            "--replay",
            "hello/first-run.trace.json",
            "--non-interactive",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let outcome = run.json();
    assert_eq!(outcome["phase"], "completed", "{outcome}");
    assert_eq!(
        outcome["stepsCompleted"],
        serde_json::json!(["step-01-ask-topic", "step-02-write-note", "end-99"])
    );
    let note =
        fs::read_to_string(work.path().join("hello-project/artifacts/hello/note.md")).unwrap();
    assert!(note.starts_with("# why a test should wait"), "{note}");
}

#[test]
fn name_comes_from_the_option_and_json_lists_the_files() {
    let baton = Baton::new();
    let work = tempfile::tempdir().unwrap();
    let out = baton.run_in(
        work.path(),
        &["new", "pkg", "--name", "triage-notes", "--json"],
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let v = out.json();
    assert_eq!(v["name"], "triage-notes");
    let files: Vec<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for f in &files {
        assert!(work.path().join("pkg").join(f).is_file(), "{f}");
    }
    assert!(
        files.contains(&"bmad.json") && files.contains(&"agents.json"),
        "{files:?}"
    );
    assert_eq!(files.iter().filter(|f| f.starts_with("steps/")).count(), 3);
    let manifest = fs::read_to_string(work.path().join("pkg/bmad.json")).unwrap();
    assert!(
        manifest.contains("\"name\": \"triage-notes\""),
        "{manifest}"
    );
}

#[test]
fn a_non_empty_directory_is_refused_and_left_alone() {
    let baton = Baton::new();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("mine");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("notes.txt"), "keep me").unwrap();
    let out = baton.run_in(work.path(), &["new", "mine"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("error[NEW_DIR_NOT_EMPTY]: mine is not empty"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("help: name a new or empty directory"),
        "{}",
        out.stderr
    );
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);

    let json = baton.run_in(work.path(), &["new", "mine", "--json"]);
    assert_eq!(json.code, 2);
    assert_eq!(json.json()["error"]["code"], "NEW_DIR_NOT_EMPTY");

    // An empty directory is fine.
    fs::create_dir(work.path().join("empty")).unwrap();
    assert_eq!(baton.run_in(work.path(), &["new", "empty"]).code, 0);
}

#[test]
fn a_name_that_cannot_be_a_workflow_id_is_refused_with_a_hint() {
    let baton = Baton::new();
    let work = tempfile::tempdir().unwrap();
    let out = baton.run_in(work.path(), &["new", "x", "--name", "my flow"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("error[NEW_NAME_INVALID]"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("help: pass --name"), "{}", out.stderr);
    assert!(!work.path().join("x").exists());
}
