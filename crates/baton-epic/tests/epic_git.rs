//! `[autopilot.git] commit = true`: a baseline before dev, an empty diff refused, one commit
//! per approved story.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_epic::{Command, EpicOutcome};
use std::path::Path;
use std::process::Command as Process;
use support::player::Scenario;
use support::{Fixture, snapshot};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Process::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn repo(f: &Fixture) {
    git(&f.project, &["init", "-q"]);
    git(&f.project, &["add", "-A"]);
    git(
        &f.project,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "init",
        ],
    );
    f.config("[autopilot.git]\ncommit = true\n");
    git(&f.project, &["add", "-A"]);
    git(
        &f.project,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "config",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_approved_story_is_one_commit() {
    let f = Fixture::new(Scenario::default());
    repo(&f);
    let report = f.run_epic("epic-1").await;
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
    let log = git(&f.project, &["log", "--format=%s"]);
    let subjects: Vec<&str> = log.lines().collect();
    assert_eq!(
        subjects,
        [
            "story 1-3-password-reset: password reset",
            "story 1-2-user-authentication: user authentication",
            "story 1-1-project-scaffold: project scaffold",
            "config",
            "init"
        ]
    );
    let files = git(&f.project, &["show", "--name-only", "--format=", "HEAD~2"]);
    assert!(files.contains("src/1-1-project-scaffold.txt"), "{files}");
    // The epic's own status change after the last story is the only thing left uncommitted.
    let status = git(&f.project, &["status", "--porcelain"]);
    assert!(
        status
            .lines()
            .all(|l| l.contains("_bmad-output/implementation-artifacts/")),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dev_phase_that_changes_nothing_is_refused() {
    let f = Fixture::new(Scenario {
        lazy: vec![("1-1-project-scaffold".into(), "dev".into())],
        ..Default::default()
    });
    repo(&f);
    let report = f.run_epic("epic-1").await;
    let EpicOutcome::Paused { failure } = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(failure.code, "EPIC_EMPTY_DIFF");
    assert_eq!(failure.phase.as_str(), "dev");
    // create-story, validate, dev, dev again (the retry).
    assert_eq!(report.phases_run, 4);
    assert_eq!(git(&f.project, &["log", "--format=%s"]).lines().count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_commit_needs_a_repository() {
    let f = Fixture::new(Scenario::default());
    f.config("[autopilot.git]\ncommit = true\n");
    let before = snapshot(&f.project);
    let err = f
        .run(Command::Story {
            key: "1-1-project-scaffold".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code, "EPIC_GIT_FAILED");
    assert_eq!(snapshot(&f.project), before);
}

/// A hook in the repository (the model could have written one with `allow_git_writes`, or in
/// a nested repository) never runs when baton commits: baton's git runs no hook at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_hook_of_the_repository_runs_when_baton_commits() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new(Scenario::default());
    repo(&f);
    let outside = f.tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let hook = f.project.join(".git/hooks/pre-commit");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho ran > .hook-ran\necho pwned > {}/pwned.txt\nexit 0\n",
            outside.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    // With every sandbox layer or without some (git runs with those the machine has), the
    // commit is made and the hook never runs.
    let report = f
        .run(Command::Story {
            key: "1-1-project-scaffold".into(),
        })
        .await;
    let report = report.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    let log = git(&f.project, &["log", "-1", "--format=%s"]);
    assert!(log.starts_with("story 1-1-project-scaffold"), "{log}");
    assert!(!f.project.join(".hook-ran").exists(), "the hook ran");
    assert!(
        !outside.join("pwned.txt").exists(),
        "the hook wrote outside"
    );
}
