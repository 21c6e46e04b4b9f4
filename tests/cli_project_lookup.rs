//! Without `--project`, a command run in a subfolder works on the project above it (the
//! nearest folder holding `_bmad/`, `baton.toml` or `.git`), as git finds its repository, and
//! says which folder it used.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use common::{Baton, repo};

#[test]
fn epic_status_in_a_subfolder_reads_the_project_above() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    let sub = project.join("src");
    assert!(sub.is_dir());

    let board = baton.run_in(&sub, &["epic", "status", "--json"]);
    assert_eq!(board.code, 0, "{}{}", board.stdout, board.stderr);
    let v = board.json();
    assert_eq!(v["projectRoot"], project.display().to_string(), "{v:#}");
    assert!(
        board
            .stderr
            .contains(&format!("using the project at {}", project.display())),
        "{}",
        board.stderr
    );
    assert!(board.stderr.contains("_bmad/"), "{}", board.stderr);

    let text = baton.run_in(&sub, &["epic", "status"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("epic-2"), "{}", text.stdout);

    // At the root itself, no note; the JSON still says which folder.
    let at_root = baton.run_in(&project, &["epic", "status", "--json"]);
    assert_eq!(at_root.code, 0, "{}", at_root.stderr);
    assert!(
        !at_root.stderr.contains("using the project"),
        "{}",
        at_root.stderr
    );
    assert_eq!(at_root.json()["projectRoot"], project.display().to_string());

    // A folder named with --project is used as it is.
    let named = baton.run_in(&sub, &["epic", "status", "-p", sub.to_str().unwrap()]);
    assert_eq!(named.code, 2, "{}{}", named.stdout, named.stderr);
    assert!(
        named.stderr.contains("SPRINT_STATUS_MISSING"),
        "{}",
        named.stderr
    );
}

#[test]
fn a_session_and_a_dry_epic_run_in_a_subfolder_use_the_project_above() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    let sub = project.join("src");

    let dry = baton.run_in(
        &sub,
        &[
            "epic",
            "run",
            "epic-2",
            "--dry-run",
            "--replay",
            project.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    assert_eq!(dry.json()["outcome"], "planned");
    assert_eq!(dry.json()["projectRoot"], project.display().to_string());

    let session = baton.run_in(&sub, &["session", "status"]);
    assert!(
        session
            .stderr
            .contains(&format!("using the project at {}", project.display())),
        "{}{}",
        session.stdout,
        session.stderr
    );
}
