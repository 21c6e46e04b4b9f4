//! `baton epic` asks the model one short question before it writes anything: against an
//! endpoint that does not answer it stops with the LLM's code and leaves the project as it was
//! (no sprint status marked in-progress, no progress file, no run), on `run` and `resume` alike;
//! a dry run checks the model too, and with `--queue` what the queued run would refuse.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::player;

use common::{Baton, repo};
use player::{Player, Scenario};
use std::path::{Path, PathBuf};

fn sample(into: &Path) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    project
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn an_unreachable_model_stops_the_epic_before_anything_is_written() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let before = common::files(&project);

    for args in [
        vec!["epic", "run", "epic-2", "-p", p, "--json"],
        vec!["epic", "run", "epic-2", "-p", p, "--dry-run", "--json"],
    ] {
        let run = baton.played(&url, &args);
        assert_eq!(run.code, 1, "{args:?}: {}{}", run.stdout, run.stderr);
        let v = run.json();
        assert_eq!(v["error"]["code"], "LLM_CONNECT_ERROR", "{args:?}: {v:#}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("nothing was started or written"),
            "{v:#}"
        );
        assert!(v["error"]["hint"].as_str().is_some(), "{v:#}");
        assert_eq!(
            common::files(&project),
            before,
            "{args:?} changed the project"
        );
    }
    // The text form too, and no run was made.
    let text = baton.played(&url, &["epic", "run", "epic-2", "-p", p]);
    assert_eq!(text.code, 1);
    assert!(
        text.stderr.contains("error[LLM_CONNECT_ERROR]"),
        "{}",
        text.stderr
    );
    assert_eq!(common::files(&project), before);
    let runs = baton.run(&["runs", "list", "--all", "--json"]);
    assert_eq!(runs.code, 0, "{}", runs.stderr);
    assert_eq!(
        runs.stdout.matches("\"runId\"").count(),
        0,
        "{}",
        runs.stdout
    );
}

#[test]
fn a_resume_against_a_model_that_went_away_adds_no_run() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    // A first run pauses on a failed phase; then the model's server goes away.
    let player = Player::start(
        &project,
        Scenario {
            failures: vec![("2-1-create-board".into(), "create-story".into(), 2)],
            ..Default::default()
        },
    );
    let url = player.base_url();
    let paused = baton.played(&url, &["epic", "run", "epic-2", "-p", p, "--json"]);
    assert_eq!(paused.code, 1, "{}{}", paused.stdout, paused.stderr);
    assert_eq!(paused.json()["outcome"], "paused");
    drop(player);
    let runs_before = baton.run(&["runs", "list", "--all", "--json"]).stdout;
    let before = common::files(&project);

    for _ in 0..2 {
        let resumed = baton.played(&url, &["epic", "resume", "-p", p, "--json"]);
        assert_eq!(resumed.code, 1, "{}{}", resumed.stdout, resumed.stderr);
        assert_eq!(
            resumed.json()["error"]["code"],
            "LLM_CONNECT_ERROR",
            "{}",
            resumed.stdout
        );
        assert_eq!(
            common::files(&project),
            before,
            "the resume changed the project"
        );
        assert_eq!(
            baton.run(&["runs", "list", "--all", "--json"]).stdout,
            runs_before,
            "the resume made a run"
        );
    }
}

#[test]
fn a_dry_run_checks_the_model_with_one_short_request() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let player = Player::start(&project, Scenario::default());
    let before = common::files(&project);
    let dry = baton.played(
        &player.base_url(),
        &["epic", "run", "epic-2", "-p", p, "--dry-run", "--json"],
    );
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    assert_eq!(dry.json()["outcome"], "planned");
    assert_eq!(player.checks(), 1);
    assert!(player.served().is_empty(), "no phase ran");
    assert_eq!(common::files(&project), before);
}

#[test]
fn a_dry_run_with_queue_says_what_the_queued_run_would_refuse() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let dry = baton.played(
        &url,
        &[
            "epic",
            "run",
            "epic-2",
            "-p",
            p,
            "--dry-run",
            "--queue",
            "postgres://baton@127.0.0.1:9/baton",
            "--json",
        ],
    );
    assert_eq!(
        dry.json()["error"]["code"],
        "QUEUE_PROJECT_NOT_GIT",
        "{}",
        dry.stderr
    );
    assert_eq!(dry.code, 2);
}

#[test]
fn a_session_whose_chain_asks_no_model_checks_it_before_it_is_created() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("p");
    std::fs::create_dir(&project).unwrap();
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    // A brainstorm's chain is built without a decomposition call.
    let run = baton.played(
        &url,
        &[
            "session",
            "start",
            "brainstorm ideas for a task list app",
            "-y",
            "-p",
            project.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(v["error"]["code"], "LLM_CONNECT_ERROR", "{v:#}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no session was created"),
        "{v:#}"
    );
    assert!(
        !project.join(".workflow").exists(),
        "a session folder was written"
    );
}
