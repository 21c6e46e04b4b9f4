//! `baton epic run --context full` drives every phase run of a workflow package with the
//! history carried across nodes, and each run remembers it (`runs show --json` says
//! `"context": "full"`), as a `baton run --context full` run does; without the flag the runs
//! restart their history at every node (`node`), as before. `--context` with `--queue` is
//! refused: the story units would not carry it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::player;

use common::{Baton, repo};
use player::{Player, Scenario};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn sample(into: &Path) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    project
}

/// The context policy `runs show --json` gives for every run of the store.
fn policies(baton: &Baton) -> Vec<(String, Value)> {
    let list = baton.run(&["runs", "list", "--all", "--json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let v = list.json();
    let runs = v["runs"].as_array().or_else(|| v.as_array()).unwrap();
    runs.iter()
        .map(|r| {
            let id = r["runId"].as_str().unwrap().to_string();
            let shown = baton.run(&["runs", "show", &id, "--json"]);
            assert_eq!(shown.code, 0, "{}", shown.stderr);
            (id, shown.json()["context"].clone())
        })
        .collect()
}

/// One story of the sample epic, run to done with `extra` flags; the policies of its runs.
fn story_runs(extra: &[&str]) -> Vec<(String, Value)> {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let player = Player::start(&project, Scenario::default());
    let mut args = vec!["epic", "story", "2-1-create-board", "-p", p, "--json"];
    args.extend_from_slice(extra);
    let run = baton.played(&player.base_url(), &args);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json()["outcome"], "done", "{}", run.stdout);
    let runs = policies(&baton);
    assert!(runs.len() >= 4, "one run per phase: {runs:?}");
    runs
}

#[test]
fn every_phase_run_of_an_epic_with_context_full_remembers_it() {
    let runs = story_runs(&["--context", "full"]);
    for (id, context) in &runs {
        assert_eq!(context, "full", "run {id}: {runs:?}");
    }
}

#[test]
fn without_context_the_phase_runs_restart_at_every_node() {
    let runs = story_runs(&[]);
    for (id, context) in &runs {
        assert_eq!(context, "node", "run {id}: {runs:?}");
    }
}

/// The epic remembers `--context`: after a question, `epic answer` without the flag drives
/// the phases still to start with it too.
#[test]
fn an_epic_answered_without_context_goes_on_with_the_one_it_was_run_with() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let story = "2-1-create-board";
    let player = Player::start(
        &project,
        Scenario {
            questions: vec![(story.into(), "validate".into(), 1, "Kanban or list?".into())],
            ..Default::default()
        },
    );
    let url = player.base_url();
    let asked = baton.played(
        &url,
        &[
            "epic",
            "story",
            story,
            "-p",
            p,
            "--context",
            "full",
            "--json",
        ],
    );
    assert_eq!(asked.code, 10, "{}{}", asked.stdout, asked.stderr);
    let before = policies(&baton).len();
    let answered = baton.played(
        &url,
        &["epic", "answer", story, "Kanban", "-p", p, "--json"],
    );
    assert_eq!(answered.code, 0, "{}{}", answered.stdout, answered.stderr);
    let runs = policies(&baton);
    assert!(
        runs.len() > before,
        "phases started after the answer: {runs:?}"
    );
    for (id, context) in &runs {
        assert_eq!(context, "full", "run {id}: {runs:?}");
    }
}

#[test]
fn context_with_queue_is_refused_before_anything_runs() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let run = baton.played(
        "http://127.0.0.1:9/v1",
        &[
            "epic",
            "run",
            "epic-2",
            "-p",
            p,
            "--queue",
            "postgres://baton@127.0.0.1:9/baton",
            "--context",
            "full",
            "--json",
        ],
    );
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(v["error"]["code"], "EPIC_QUEUE_UNSUPPORTED", "{v:#}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--context"),
        "{v:#}"
    );
    assert!(v["error"]["hint"].as_str().is_some(), "{v:#}");
}
